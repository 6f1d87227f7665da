"""The stream router (hw/pl/stream_router.py) on Verilator through cocotb (sim/tb_stream_router.py): random packets
under backpressure reach exactly their outputs, bad ones are dropped and flagged, a beat a cycle; and the descriptor
stream's order and FIFO depths (hw/spec/descriptors.py)."""

from __future__ import annotations

import numpy as np
import pytest

from vckattn.hw.pl.stream_router import StreamRouter
from vckattn.hw.spec import streams
from vckattn.hw.spec.descriptors import descriptor_depths, routed_descriptors
from vckattn.hw.spec.qkv_buffer import Run
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_stream_router"


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_stream_router() -> None:
    top = "stream_router_5"
    src = [generate_verilog(StreamRouter([4, 5, 8, 4, 16]), top)]
    cases = {"test_packets_to_their_outputs", "test_bad_packets_dropped_and_flagged", "test_a_beat_a_cycle"}
    res = run_cocotb(top, src, TB, testcase=",".join(sorted(cases)), extra_env={"VCKATTN_TB_ROUTER_OUTPUTS": "5"})
    assert {t.name for t in res.passed} == cases, res.tests


def test_refuses_a_fifo_below_four_entries() -> None:
    with pytest.raises(ValueError, match="each >= 4"):
        StreamRouter([4, 3])


def _run(b: int, first: int, quiet: bool = False) -> Run:
    return Run("x", b, 0, 0, first, 0 if quiet else 4, b % 2, b // 2 % 2, True, quiet)


def test_descriptors_go_sequence_by_sequence() -> None:
    """Every reader's packet of a sequence before any packet of the next; each packet a ROUTE beat to its reader
    and that reader's descriptors of the sequence, header beat then RDESC."""
    hdr = [bytes([r]) * 16 for r in range(2)]
    readers = [[(_run(0, 10), hdr[0]), (_run(0, 20), hdr[0]), (_run(1, 30), hdr[0])],
               [(_run(0, 0, quiet=True), hdr[1]), (_run(1, 40), hdr[1]), (_run(2, 50), hdr[1])]]
    packets = routed_descriptors(readers)
    routes = [streams.decode("route", np.frombuffer(p[:16], np.uint8)) for p in packets]
    assert [(r["dest"], r["op"]) for r in routes] == [(0, 6), (1, 6), (0, 6), (1, 6), (1, 6)]
    assert [len(p) // 16 for p in packets] == [5, 3, 3, 3, 3]
    firsts = [streams.decode("rdesc", np.frombuffer(p[32:48], np.uint8))["first"] for p in packets]
    assert firsts == [10, 0, 30, 40, 50] and packets[0][16:32] == hdr[0]
    with pytest.raises(ValueError, match="sequence order"):
        routed_descriptors([[(_run(1, 0), hdr[0]), (_run(0, 0), hdr[0])]])


def test_depths_hold_a_readers_largest_sequence() -> None:
    readers = [[_run(0, 0), _run(0, 4), _run(0, 8), _run(1, 0)], [_run(0, 0, quiet=True), _run(1, 0)]]
    assert descriptor_depths(readers, ahead=1) == [6, 4]
    assert descriptor_depths(readers) == [12, 4]

"""The PL buffer reader (hw/pl/buffer_reader.py) on Verilator through cocotb (sim/tb_buffer_reader.py): random
descriptors under backpressure and random grants of the shared read port send the header beat and exactly the
buffer's run, never read a slot before it fills, release each slot once; a beat a cycle when nothing stalls."""

from __future__ import annotations

import pytest

from vckattn.hw.pl.buffer_reader import BufferReader
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_buffer_reader"


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_buffer_reader() -> None:
    top = "buffer_reader_a10_s3"
    src = [generate_verilog(BufferReader(10, 3), top)]
    cases = {"test_runs_of_the_buffer_after_their_slot_fills", "test_a_beat_a_cycle", "test_waits_for_its_turn"}
    res = run_cocotb(top, src, TB, testcase=",".join(sorted(cases)))
    assert {t.name for t in res.passed} == cases, res.tests


def test_refuses_a_fifo_too_shallow_for_a_beat_a_cycle() -> None:
    with pytest.raises(ValueError, match="depth"):
        BufferReader(10, 3, depth=2)

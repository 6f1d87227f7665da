"""What the testbenches of the sublayer PL top's data paths (``hw/pl/buffer_path.py``) share: the path's streams
with random pauses, each reader's descriptors sent from its runs, and every reader's packets checked.

Used by ``sim/tb_qkv_path.py`` and ``sim/tb_slice_path.py``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from vckattn.hw.spec import streams
from vckattn.hw.spec.descriptors import descriptor, routed_descriptors
from vckattn.hw.spec.qkv_buffer import Run
from vckattn.sim.kernel_tb import pause_pattern

BEAT = streams.BEAT_BYTES


def frame(raw: bytes) -> AxiStreamFrame:
    """A record's bytes as one frame of 128-bit beats."""
    return AxiStreamFrame([int.from_bytes(raw[i:i + BEAT], "little") for i in range(0, len(raw), BEAT)])


def _quietly(x: object, rnd: random.Random) -> object:
    x.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))  # type: ignore[attr-defined]
    x.log.setLevel(logging.WARNING)  # type: ignore[attr-defined]
    return x


def paused_source(dut: SimHandleBase, prefix: str, rnd: random.Random) -> AxiStreamSource:
    """A source on ``dut``'s stream ``prefix`` (a beat a byte lane), pausing at random, its log quiet."""
    return _quietly(AxiStreamSource(AxiStreamBus.from_prefix(dut, prefix), dut.clk, dut.rst, byte_lanes=1), rnd)


def paused_sink(dut: SimHandleBase, prefix: str, rnd: random.Random) -> AxiStreamSink:
    """A sink on ``dut``'s stream ``prefix``, holding TREADY low at random, its log quiet."""
    return _quietly(AxiStreamSink(AxiStreamBus.from_prefix(dut, prefix), dut.clk, dut.rst, byte_lanes=1), rnd)


def path_streams(dut: SimHandleBase, writers: int, readers: int, rnd: random.Random, routed: bool = False
                 ) -> tuple[list[AxiStreamSource], list[AxiStreamSource], list[AxiStreamSink]]:
    """The path's write units' inputs, readers' descriptor inputs (``routed``: the one input of its descriptor
    router) and readers' outputs, each with random pauses."""
    ins = [paused_source(dut, f"s_axis_in{i}", rnd) for i in range(writers)]
    descs = [paused_source(dut, "s_axis_desc", rnd)] if routed else [
        paused_source(dut, f"s_axis_desc{r}", rnd) for r in range(readers)]
    sinks = [paused_sink(dut, f"m_axis_rd{r}", rnd) for r in range(readers)]
    return ins, descs, sinks


def interleave(cascades: list[list[list[int]]], slots: int, rnd: random.Random) -> list[list[int]]:
    """One output PLIO's records (``[sequence, ...]`` each), its cascades' interleaved at random, each cascade's in
    its own order, and no record of sequence ``b + slots`` while one of sequence ``b`` is still to come: a buffer of
    ``slots`` sequence slots cannot take the first before the second's slot is free. The PL top keeps a PLIO's
    cascades that close: the descriptor router's FIFOs hold a reader's descriptors two sequences ahead, so no x
    reader, and no cascade behind it, runs more than three sequences ahead of another (``hw/ENGINE.md``, "The
    descriptor router"; ``hw/design/pl_top.py: top_plan`` refuses FIFOs as deep as the slots)."""
    queues = [list(c) for c in cascades]
    out = []
    while any(queues):
        low = min(q[0][0] for q in queues if q)
        out.append(rnd.choice([q for q in queues if q and q[0][0] < low + slots]).pop(0))
    return out


async def send_runs(descs: list[AxiStreamSource], runs: list[list[Run]], rnd: random.Random,
                    beats: Callable[[Run], list[int]], routed: bool = False) -> list[list[list[int]]]:
    """Every reader's descriptors (a random header beat, then the RDESC of each run), on its own input, or, with one
    input (``routed``: the descriptor router's), as the descriptor mover sends them (:func:`routed_descriptors`:
    sequence by sequence, a packet a reader); returns per reader the packets it must send: the header beat
    and ``beats(run)`` of every run but the quiet ones."""
    headers = [[rnd.getrandbits(128) for _ in rr] for rr in runs]
    if routed:
        packets = routed_descriptors([[(run, h.to_bytes(BEAT, "little")) for run, h in zip(rr, hh, strict=True)]
                                      for rr, hh in zip(runs, headers, strict=True)])
        for p in packets:
            await descs[0].send(frame(p))
    else:
        for r, rr in enumerate(runs):
            for run, h in zip(rr, headers[r], strict=True):
                await descs[r].send(frame(descriptor(run, h.to_bytes(BEAT, "little"))))
    return [[[h, *beats(run)] for run, h in zip(rr, hh, strict=True) if not run.quiet]
            for rr, hh in zip(runs, headers, strict=True)]


async def check_readers(dut: SimHandleBase, sinks: list[AxiStreamSink], expected: list[list[list[int]]],
                        what: str) -> None:
    """Every reader's packets are its expected ones (``what``: what a packet must be), nothing more, and every
    slot ends empty."""
    for r, want in enumerate(expected):
        for k, beats in enumerate(want):
            got = await sinks[r].recv(compact=False)
            assert [int(x) for x in got.tdata] == beats, f"reader {r}, run {k}: not {what}"
    await ClockCycles(dut.clk, 20)
    assert all(s.empty() for s in sinks), "a reader sent more than its runs"
    assert int(dut.slot_full.value) == 0, "a slot still full after every reader released it"

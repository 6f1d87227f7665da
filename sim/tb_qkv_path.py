"""cocotb 2.x testbench for :func:`vckattn.hw.pl.buffer_path.qkv_path` (run by ``tests/hw/pl/test_qkv_path.py``).

The plan comes from ``VCKATTN_TB_QKV_PATH`` (JSON, made by the test from the performance model's split): the
:class:`~vckattn.hw.spec.qkv_buffer.QkvLayout` fields, ``rows``, ``cols``, ``batch``; ``writers``: per re-tiler the
records of each of its cascades in the order the cascade makes them (``[sequence, row tile, col_block]``);
``runs``: per reader its descriptors' runs (:func:`~vckattn.hw.spec.qkv_buffer.reader_runs`). Random int8 Q/K/V of
``batch`` sequences (more than the buffer's slots) are cut into the records; each re-tiler's cascades interleave at
random (each cascade's own order kept); every reader gets its descriptors with random header beats; random
backpressure on every stream. Every reader must send, for each of its runs but the quiet ones, the header beat and
the beats golden's pack functions (``pack_q``, ``pack_k``, ``pack_v``) give that run's Q tile or key slice of its
sequence, and every slot must end empty.
"""

from __future__ import annotations

import json
import logging
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from vckattn.hw.spec import streams
from vckattn.hw.spec.qkv_buffer import QkvLayout, Run
from vckattn.sim.kernel_tb import pause_pattern, start
from vckattn.sim.tb_retiler import expected_image

BEAT = streams.BEAT_BYTES


def _frame(raw: bytes) -> AxiStreamFrame:
    return AxiStreamFrame([int.from_bytes(raw[i:i + BEAT], "little") for i in range(0, len(raw), BEAT)])


@cocotb.test(timeout_time=500, timeout_unit="ms")
async def test_records_to_the_pipelines_streams(dut: SimHandleBase) -> None:
    plan = json.loads(os.environ["VCKATTN_TB_QKV_PATH"])
    rows, cols, batch = plan.pop("rows"), plan.pop("cols"), plan.pop("batch")
    writers, runs = plan.pop("writers"), [[Run(**r) for r in rr] for rr in plan.pop("runs")]
    lo = QkvLayout(**plan)
    await start(dut)
    rnd = random.Random(cocotb.RANDOM_SEED)

    def quietly(x: object) -> object:
        x.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))  # type: ignore[attr-defined]
        x.log.setLevel(logging.WARNING)  # type: ignore[attr-defined]
        return x

    rec_src = [quietly(AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s_axis_in{i}"), dut.clk, dut.rst,
                                       byte_lanes=1)) for i in range(len(writers))]
    desc_src = [quietly(AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s_axis_desc{r}"), dut.clk, dut.rst,
                                        byte_lanes=1)) for r in range(len(runs))]
    sinks = [quietly(AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m_axis_rd{r}"), dut.clk, dut.rst, byte_lanes=1))
             for r in range(len(runs))]

    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    qkv = rng.integers(-128, 128, size=(batch, lo.max_seq, lo.qkv_cols)).astype(np.int8)
    tiles = lo.max_seq // rows
    for i, cascades in enumerate(writers):  # each cascade in its own order, the cascades of a PLIO interleaved
        queues = [list(c) for c in cascades]
        while any(queues):
            b, r, cb = rnd.choice([q for q in queues if q]).pop(0)
            head = streams.encode("gresult", tile_id=b * tiles + r, rows=rows, col_block=cb, elem_bits=8,
                                  cols=cols).tobytes()
            body = qkv[b, r * rows:(r + 1) * rows, cb * cols:(cb + 1) * cols].tobytes()
            await rec_src[i].send(_frame(head + body))

    images = [expected_image(lo, qkv, b) for b in range(batch)]
    expected: list[list[list[int]]] = []
    for r, rr in enumerate(runs):
        want = []
        for run in rr:
            hdr = rnd.getrandbits(128)
            desc = streams.encode("rdesc", first=run.first, beats=run.beats, slot=run.slot, release=int(run.release),
                                  turn=run.turn, quiet=int(run.quiet)).tobytes()
            await desc_src[r].send(AxiStreamFrame([hdr, int.from_bytes(desc, "little")]))
            if not run.quiet:
                img = images[run.b]
                want.append([hdr, *(int.from_bytes(img[(run.turn, a)], "little")
                                    for a in range(run.first, run.first + run.beats))])
        expected.append(want)
    for r, want in enumerate(expected):
        for k, beats in enumerate(want):
            got = await sinks[r].recv(compact=False)
            assert [int(x) for x in got.tdata] == beats, \
                f"reader {r}, run {k}: not golden's beats of its tile or slice"
    await ClockCycles(dut.clk, 20)
    assert all(s.empty() for s in sinks), "a reader sent more than its runs"
    assert int(dut.slot_full.value) == 0, "a slot still full after every reader released it"
    dut._log.info("%d sequences: %d records through %d re-tilers, %d runs through %d readers", batch,
                  sum(len(c) for w in writers for c in w), len(writers), sum(len(e) for e in expected), len(runs))

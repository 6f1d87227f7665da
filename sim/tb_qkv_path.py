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
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase

from vckattn.hw.spec import streams
from vckattn.hw.spec.qkv_buffer import QkvLayout, Run
from vckattn.sim.kernel_tb import start
from vckattn.sim.path_tb import check_readers, frame, interleave, path_streams, send_runs
from vckattn.sim.tb_retiler import expected_image


@cocotb.test(timeout_time=500, timeout_unit="ms")
async def test_records_to_the_pipelines_streams(dut: SimHandleBase) -> None:
    plan = json.loads(os.environ["VCKATTN_TB_QKV_PATH"])
    rows, cols, batch = plan.pop("rows"), plan.pop("cols"), plan.pop("batch")
    writers, runs = plan.pop("writers"), [[Run(**r) for r in rr] for rr in plan.pop("runs")]
    routed = plan.pop("routed", False)
    lo = QkvLayout(**plan)
    await start(dut)
    rnd = random.Random(cocotb.RANDOM_SEED)

    rec_src, desc_src, sinks = path_streams(dut, len(writers), len(runs), rnd, routed)

    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    qkv = rng.integers(-128, 128, size=(batch, lo.max_seq, lo.qkv_cols)).astype(np.int8)
    tiles = lo.max_seq // rows
    for i, cascades in enumerate(writers):  # each cascade in its own order, the cascades of a PLIO interleaved
        for b, r, cb in interleave(cascades, lo.slots, rnd):
            head = streams.encode("gresult", tile_id=b * tiles + r, rows=rows, col_block=cb, elem_bits=8,
                                  cols=cols).tobytes()
            body = qkv[b, r * rows:(r + 1) * rows, cb * cols:(cb + 1) * cols].tobytes()
            await rec_src[i].send(frame(head + body))

    images = [expected_image(lo, qkv, b) for b in range(batch)]
    expected = await send_runs(desc_src, runs, rnd, lambda run: [
        int.from_bytes(images[run.b][(run.turn, a)], "little") for a in range(run.first, run.first + run.beats)],
        routed)
    await check_readers(dut, sinks, expected, "golden's beats of its tile or slice")
    dut._log.info("%d sequences: %d records through %d re-tilers, %d runs through %d readers", batch,
                  sum(len(c) for w in writers for c in w), len(writers), sum(len(e) for e in expected), len(runs))

"""cocotb 2.x testbench for :func:`vckattn.hw.pl.buffer_path.a_path` and :func:`~vckattn.hw.pl.buffer_path.x_path`,
the buffers held per K-slice (run by ``tests/hw/pl/test_slice_path.py``).

The plan comes from ``VCKATTN_TB_SLICE_PATH`` (JSON, made by the test from the performance model's split): ``kind``
(``"a"`` or ``"x"``), the :class:`~vckattn.hw.spec.slice_buffer.SliceLayout` fields, ``heads``, ``d``, ``q_rows``,
``batch``; ``writers``: per A writer the groups ``b · heads + h`` dealt to its pipeline, in order (``"a"``), or per
X writer the sequences it writes (``"x"``); ``runs``: per x reader its descriptors' runs
(:func:`~vckattn.hw.spec.slice_buffer.x_reader_runs`), then per residual reader its runs
(:func:`~vckattn.hw.spec.slice_buffer.residual_runs`), with ``residual``: per W_O cascade its (block, sequence)
units, the records' ``cols`` and the rows' ``lanes``. Random int8 activations of ``batch`` sequences (more than the
buffer's slots, where it has fewer); every pipeline sends its groups' A records (RESULT header, ``q_rows × d``
row-major, tile by tile), or the X writer each sequence's record (RESULT header with the sequence, then its
``pack_x`` blocks K-slice by K-slice, as the host lays X out); every reader gets its descriptors with random header
beats; random backpressure on every stream. Every x reader must send, for each of its runs but the quiet ones, the
header beat and golden's ``pack_x`` of the run's row tile and K-slice of its sequence; every residual path, for each
of its cascade's records, each row of X over the record's channels, ``lanes`` int8 a beat, a packet a row; and every
slot must end empty.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase

from vckattn.golden.gemm_proj import pack_x
from vckattn.hw.spec import streams
from vckattn.hw.spec.qkv_buffer import Run
from vckattn.hw.spec.slice_buffer import SliceLayout
from vckattn.sim.kernel_tb import start
from vckattn.sim.path_tb import BEAT, check_readers, frame, path_streams, send_runs


@cocotb.test(timeout_time=500, timeout_unit="ms")
async def test_records_to_the_readers_streams(dut: SimHandleBase) -> None:
    plan = json.loads(os.environ["VCKATTN_TB_SLICE_PATH"])
    kind = plan.pop("kind")
    heads, d, q_rows, batch = plan.pop("heads"), plan.pop("d"), plan.pop("q_rows"), plan.pop("batch")
    writers, runs = plan.pop("writers"), [[Run(**r) for r in rr] for rr in plan.pop("runs")]
    routed = plan.pop("routed", False)
    residual = plan.pop("residual", None)
    lo = SliceLayout(**{**plan, "slices": tuple(plan["slices"])})
    await start(dut)
    rnd = random.Random(cocotb.RANDOM_SEED)

    a_src, desc_src, sinks = path_streams(dut, len(writers), len(runs), rnd, routed)

    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    a = rng.integers(-128, 128, size=(batch, lo.max_seq, heads * d)).astype(np.int8)
    tiles = lo.max_seq // q_rows
    for p, items in enumerate(writers):
        for g in items:
            if kind == "x":  # g: a sequence, laid out as the X buffer holds it
                blocks = [pack_x(a[g, t * lo.rows:(t + 1) * lo.rows, sum(lo.slices[:j]):sum(lo.slices[:j + 1])])
                          for j in range(len(lo.slices)) for t in range(lo.max_seq // lo.rows)]
                head = streams.encode("result", tile_id=g, rows=lo.max_seq, d=lo.features).tobytes()
                await a_src[p].send(frame(head + b"".join(x.tobytes() for x in blocks)))
                continue
            b, h = divmod(g, heads)
            for r in range(tiles):
                head = streams.encode("result", tile_id=g * tiles + r, rows=q_rows, d=d).tobytes()
                body = a[b, r * q_rows:(r + 1) * q_rows, h * d:(h + 1) * d].tobytes()
                await a_src[p].send(frame(head + body))

    def beats(run: Run) -> list[int]:  # pack_x of the run's row tile and K-slice of its sequence
        j, t, f0 = run.head, run.index, sum(lo.slices[:run.head])
        packed = pack_x(a[run.b, t * lo.rows:(t + 1) * lo.rows, f0:f0 + lo.slices[j]]).tobytes()
        return [int.from_bytes(packed[i:i + BEAT], "little") for i in range(0, len(packed), BEAT)]

    n_x = len(runs) - (len(residual["units"]) if residual else 0)
    expected = await send_runs(desc_src, runs, rnd, lambda run: beats(run) if run.kind == "x" else [],
                               routed)
    if residual:  # each W_O record's rows of X over its channels, lanes int8 a beat, a packet a row
        cols, lanes = residual["cols"], residual["lanes"]
        expected[n_x:] = [[[int.from_bytes(a[b, tok, blk * cols + i:blk * cols + i + lanes].tobytes(), "little")
                            for i in range(0, cols, lanes)]
                           for blk, b in units for tok in range(lo.max_seq)] for units in residual["units"]]
    await check_readers(dut, sinks, expected, "golden's pack_x of its block, or X's rows of its records")
    dut._log.info("%d sequences (%s): %d records' worth through %d writers, %d runs through %d readers", batch, kind,
                  sum(len(g) for g in writers), len(writers), sum(len(e) for e in expected), len(runs))

"""cocotb 2.x testbench for :class:`vckattn.hw.pl.residual_path.ResidualPath` (run by
``tests/hw/pl/test_residual_path.py``; the path's ``tile_rows``, ``cols`` and ``max_d`` from ``VCKATTN_TB_RP``, JSON).

The residual unit's tables are programmed over AXI4-Lite with random per-channel ``rq_y`` and a random ``rq_x``.
Random W_O records (a GRESULT header: random tile id, valid rows and column block; ``tile_rows × cols`` random int32)
go in on ``s_axis_y`` and X's rows for each (``cols`` random int8 a row, 4 a beat) on ``s_axis_x``, with random pauses
on every stream. Every R record out must be the header with ``elem_bits`` 8, then golden's ``residual_add_int`` of
the record's Y and X with the ``rq_y`` of its channels, row-major, 16 int8 a beat, TLAST on its last beat. In the
second test some records are bad (``cols`` not the build's, or ``elem_bits`` not 32): each must come out as its
header alone, its Y and X dropped, the records after it unharmed, and ``bad_record`` set.
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
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from vckattn.golden.requant import RequantRegisters
from vckattn.golden.sublayer import ResidualRegisters, residual_add_int, residual_regmap
from vckattn.hw.spec import streams
from vckattn.sim.kernel_tb import pause_pattern, start
from vckattn.sim.tb_residual import random_x, random_y


def _beats(raw: bytes, width: int = 16) -> list[int]:
    return [int.from_bytes(raw[i:i + width], "little") for i in range(0, len(raw), width)]


async def _bench(dut: SimHandleBase, seed: int) -> tuple[dict, AxiStreamSource, AxiStreamSource, AxiStreamSink,
                                                          ResidualRegisters, np.random.Generator]:
    cfg = json.loads(os.environ["VCKATTN_TB_RP"])
    await start(dut)
    rnd = random.Random(seed)
    ysrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_y"), dut.clk, dut.rst, byte_lanes=1)
    xsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_x"), dut.clk, dut.rst, byte_lanes=1)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_r"), dut.clk, dut.rst, byte_lanes=1)
    for x in (ysrc, xsrc, sink):
        x.log.setLevel(logging.WARNING)
        x.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    for ch in (axil.write_if, axil.read_if):
        ch.log.setLevel(logging.WARNING)
    rng = np.random.default_rng(seed)
    d = cfg["max_d"]
    y_mult = rng.integers(1 << 14, 1 << 17, size=d)
    y_shift = rng.integers(20, 28, size=d)
    x_mult, x_shift = int(rng.integers(1 << 16, 1 << 17)), int(rng.integers(10, 20))
    rm = residual_regmap(4, d)
    for name, v in (("x_mult", x_mult), ("x_shift", x_shift)):
        await axil.write_dword(rm.offset(name), rm.word(name, v))
    for name, table in (("y_mult", y_mult), ("y_shift", y_shift)):
        for k, v in enumerate(table):
            await axil.write_dword(rm.offset(name) + 4 * k, rm.word(name, int(v)))
    regs = ResidualRegisters(RequantRegisters(y_mult.astype(np.int64), y_shift.astype(np.int64)),
                             RequantRegisters(np.int64(x_mult), np.int64(x_shift)), 1.0)
    return cfg, ysrc, xsrc, sink, regs, rng


async def _run(dut: SimHandleBase, bad_every: int) -> None:
    cfg, ysrc, xsrc, sink, regs, rng = await _bench(dut, cocotb.RANDOM_SEED + bad_every)
    rows, cols, d = cfg["tile_rows"], cfg["cols"], cfg["max_d"]
    want = []
    for n in range(12):
        cb = int(rng.integers(0, d // cols))
        valid = int(rng.integers(1, rows + 1))
        bad = bad_every and n % bad_every == 1
        bits, ncols = (32, cols) if not bad else ((8, cols) if n % 2 else (32, cols + 16))
        head = streams.encode("gresult", tile_id=int(rng.integers(0, 1 << 20)), rows=valid, col_block=cb,
                              elem_bits=bits, cols=ncols).tobytes()
        y = random_y(rng, rows * cols).reshape(rows, cols)
        x = random_x(rng, rows * cols).reshape(rows, cols)
        await ysrc.send(AxiStreamFrame([*_beats(head), *_beats(y.astype("<i4").tobytes())]))
        for row in x:
            await xsrc.send(AxiStreamFrame(_beats(row.astype(np.int8).tobytes(), 4)))
        if bad:
            want.append(_beats(head))
            continue
        rq = ResidualRegisters(RequantRegisters(np.asarray(regs.rq_y.mult)[cb * cols:(cb + 1) * cols],
                                                np.asarray(regs.rq_y.shift)[cb * cols:(cb + 1) * cols]),
                               regs.rq_x, 1.0)
        r = residual_add_int(y, x, rq)
        out_head = streams.encode("gresult", **{**streams.decode("gresult", np.frombuffer(head, np.uint8)),
                                                "elem_bits": 8}).tobytes()
        want.append([*_beats(out_head), *_beats(r.astype(np.int8).tobytes())])
    for k, beats in enumerate(want):
        got = await sink.recv(compact=False)
        assert [int(v) for v in got.tdata] == beats, f"record {k}: not its header and golden's R"
    await ClockCycles(dut.clk, 30)
    assert sink.empty(), "more out than the records"
    assert int(dut.bad_record.value) == int(bool(bad_every)), "bad_record not set exactly when a record was bad"


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_records_to_r_records(dut: SimHandleBase) -> None:
    await _run(dut, 0)


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_bad_records_dropped_with_their_x(dut: SimHandleBase) -> None:
    await _run(dut, 4)

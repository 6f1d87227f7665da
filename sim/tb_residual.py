"""cocotb 2.x testbench for :class:`vckattn.hw.pl.residual.ResidualKernel` (run by ``tests/hw/pl/test_residual.py``).

The full description: ``docs/internals/sim.md``, section ``sim/tb_residual.py``.
"""

from __future__ import annotations

import logging
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotbext.axi import AxiStreamBus, AxiStreamSource

from vckattn.golden.requant import RequantRegisters
from vckattn.golden.sublayer import RESIDUAL_ID, ResidualRegisters, residual_add_int, residual_regmap
from vckattn.hw.pl.requant import ACC_WIDTH
from vckattn.hw.pl.residual import ResidualKernel
from vckattn.sim.kernel_tb import KernelHarness, pause_pattern, rows_to_frames, start
from vckattn.sim.sublayer_tb import check_register_readback, edge_requant, load_vectors, write_metrics


class Bench:
    """The harness (``Y`` in, ``R`` out, registers) and the ``X`` source."""

    def __init__(self, dut: SimHandleBase) -> None:
        self.lanes = len(dut.s_axis_tdata) // ACC_WIDTH
        self.max_d = int(os.environ.get("VCKATTN_TB_MAX_D", "1024"))
        self.rm = residual_regmap(self.lanes, self.max_d)
        self.h = KernelHarness(dut, lanes=self.lanes, in_width=ACC_WIDTH, out_width=8, in_signed=True,
                               out_signed=True, user=False)
        self.xsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_res"), dut.clk, dut.rst, byte_lanes=1)
        self.xsrc.log.setLevel(logging.WARNING)

    def pauses(self, seed: int, prob: float) -> None:
        rng = random.Random(seed)
        self.h.set_random_pauses(rng, in_prob=prob, out_prob=prob)
        self.xsrc.set_pause_generator(pause_pattern(random.Random(rng.getrandbits(64)), prob, 8))

    async def program(self, y_mult: np.ndarray, y_shift: np.ndarray, x_mult: int, x_shift: int) -> None:
        await self.h.write_regs(self.rm, {"x_mult": int(x_mult), "x_shift": int(x_shift), "y_mult": list(y_mult),
                                          "y_shift": list(y_shift)})

    async def run(self, ys: list[np.ndarray], xs: list[np.ndarray], regs: ResidualRegisters,
                  bases: list[int] | None = None) -> None:
        """Send the tokens (X first, into its source's queue; Y by the harness, each starting at channel
        ``bases[i]·lanes``: TUSER) and check every output."""
        bases = bases or [0] * len(ys)
        exp = [golden(y, x, regs, b * self.lanes) for y, x, b in zip(ys, xs, bases, strict=True)]
        for f in rows_to_frames(xs, None, self.lanes, 8, signed=True, user=False):
            self.xsrc.send_nowait(f)
        await self.h.run_rows(ys, None, exp, row_user=bases)


def golden(y: np.ndarray, x: np.ndarray, regs: ResidualRegisters, first: int = 0) -> np.ndarray:
    """One token through :func:`residual_add_int` with the ``rq_y`` of channels ``first .. first + len(y) - 1``."""
    d = slice(first, first + len(y))
    r = ResidualRegisters(RequantRegisters(np.asarray(regs.rq_y.mult)[d], np.asarray(regs.rq_y.shift)[d]),
                          regs.rq_x, 1.0)
    return residual_add_int(y, x, r).astype(np.int64)


def _regs(y_mult: np.ndarray, y_shift: np.ndarray, x_mult: int, x_shift: int) -> ResidualRegisters:
    return ResidualRegisters(RequantRegisters(np.asarray(y_mult, np.int64), np.asarray(y_shift, np.int64)),
                             RequantRegisters(np.int64(x_mult), np.int64(x_shift)), 1.0)


def random_y(rng: np.random.Generator, n: int) -> np.ndarray:
    kind = rng.integers(0, 3, size=n)
    full = rng.integers(-(1 << 31), 1 << 31, size=n)
    mid = rng.integers(-(1 << 20), 1 << 20, size=n)
    ext = rng.choice([-(1 << 31), (1 << 31) - 1, -1, 0, 1], size=n)
    return np.choose(kind, [full, mid, ext]).astype(np.int64)


def random_x(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.integers(-128, 128, size=n)
    x[rng.random(n) < 0.1] = -128
    x[rng.random(n) < 0.1] = 127
    return x.astype(np.int64)


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    await start(dut)
    b = Bench(dut)
    await check_register_readback(b.h, b.rm, RESIDUAL_ID, random.Random(cocotb.RANDOM_SEED))


@cocotb.test(timeout_time=60, timeout_unit="ms")
async def test_random_traffic(dut: SimHandleBase) -> None:
    await start(dut)
    b = Bench(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    b.pauses(cocotb.RANDOM_SEED, 0.3)
    d = min(b.max_d, 96)
    lengths = [d, 1, b.lanes, d - 1, *rng.integers(1, d + 1, size=8)]
    # 1. edge tables for rq_y, a normalized random rq_x
    y_mult, y_shift = edge_requant(rng, d)
    x_mult, x_shift = int(rng.integers(1 << 16, 1 << 17)), int(rng.integers(10, 20))
    await b.program(y_mult, y_shift, x_mult, x_shift)
    regs = _regs(y_mult, y_shift, x_mult, x_shift)
    ys, xs = [random_y(rng, int(n)) for n in lengths], [random_x(rng, int(n)) for n in lengths]
    await b.run(ys, xs, regs)
    # 2. exact addends: y' = 128·Y, x' = 256·X, so R = round_half_up(X + Y/2): ties at every odd Y; saturation
    regs = _regs(np.full(d, 1 << 16), np.full(d, 9), 1 << 16, 8)
    await b.program(regs.rq_y.mult, regs.rq_y.shift, 1 << 16, 8)
    ys = [rng.integers(-300, 300, size=int(n)).astype(np.int64) for n in lengths]
    xs = [random_x(rng, int(n)) for n in lengths]
    exp = [golden(y, x, regs) for y, x in zip(ys, xs, strict=True)]
    assert any(np.any((y % 2 == 1) & (np.abs(e) < 127)) for y, e in zip(ys, exp, strict=True)), "no tie"
    assert any(np.any(e == 127) for e in exp) and any(np.any(e == -128) for e in exp), "no saturation"
    await b.run(ys, xs, regs)
    # 3. addends saturated at res_bits (24): a large rq_y gain with no shift, and the opposite signs
    regs = _regs(np.full(d, (1 << 17) - 1), np.zeros(d, np.int64), -(1 << 17), 0)
    await b.program(regs.rq_y.mult, regs.rq_y.shift, -(1 << 17), 0)
    ys, xs = [random_y(rng, int(n)) for n in lengths], [random_x(rng, int(n)) for n in lengths]
    await b.run(ys, xs, regs)
    assert await b.h.read_reg(b.rm, "tokens") == 3 * len(lengths)
    assert await b.h.read_reg(b.rm, "overlong") == 0


@cocotb.test(timeout_time=60, timeout_unit="ms")
async def test_record_rows_from_their_first_channel(dut: SimHandleBase) -> None:
    """Rows of a W_O output record: ``cols`` channels from channel ``base·lanes`` (TUSER, in beats), each with
    its own channels' rq_y, interleaved with whole rows (base 0), under backpressure; a row that starts beyond
    max_d is counted overlong."""
    await start(dut)
    b = Bench(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    b.pauses(cocotb.RANDOM_SEED, 0.3)
    d = b.max_d
    y_mult, y_shift = edge_requant(rng, d)
    x_mult, x_shift = int(rng.integers(1 << 16, 1 << 17)), int(rng.integers(10, 20))
    await b.program(y_mult, y_shift, x_mult, x_shift)
    regs = _regs(y_mult, y_shift, x_mult, x_shift)
    cols = 12 * b.lanes
    last = (d - cols) // b.lanes  # the last record that ends at max_d
    bases = [0, 1, last, *rng.integers(0, last + 1, size=12), 0]
    lengths = [cols if i else d for i in bases]
    ys, xs = [random_y(rng, n) for n in lengths], [random_x(rng, n) for n in lengths]
    assert len({tuple(golden(ys[1], xs[1], regs, b.lanes * k)) for k in (0, 1, last)}) == 3, "tables too alike"
    await b.run(ys, xs, regs, bases)
    assert await b.h.read_reg(b.rm, "overlong") == 0
    # a row that starts beyond the tables: counted, its channels reuse the last entry (no silent wrap)
    past = d // b.lanes
    if past < 1 << len(dut.s_axis_tuser):
        y, x = random_y(rng, b.lanes), random_x(rng, b.lanes)
        for f in rows_to_frames([x], None, b.lanes, 8, signed=True, user=False):
            b.xsrc.send_nowait(f)
        await b.h.run_rows([y], None, [golden(y, x, regs, d - b.lanes)], row_user=[past])
        assert await b.h.read_reg(b.rm, "overlong") == 1


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    await start(dut)
    b = Bench(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    d = 16 * b.lanes
    y_mult, y_shift = edge_requant(rng, d)
    await b.program(y_mult, y_shift, 70000, 15)
    regs = _regs(y_mult, y_shift, 70000, 15)
    ys = [random_y(rng, d) for _ in range(max(16, 1024 // d))]
    xs = [random_x(rng, d) for _ in ys]
    for f in rows_to_frames(xs, None, b.lanes, 8, signed=True, user=False):
        b.xsrc.send_nowait(f)
    t = await b.h.measure_throughput(ys, [golden(y, x, regs) for y, x in zip(ys, xs, strict=True)])
    dut._log.info("throughput %.4f elements/cycle, latency %d cycles", t.elements_per_cycle, t.latency)
    write_metrics(elements_per_cycle=t.elements_per_cycle, latency_cycles=t.latency, d=d)
    assert t.beats_per_cycle == 1.0 and t.elements_per_cycle == b.lanes, t
    assert t.latency == ResidualKernel.LATENCY + 1, t.latency


@cocotb.test(timeout_time=60, timeout_unit="ms")
async def test_real_vectors(dut: SimHandleBase) -> None:
    v = load_vectors()
    await start(dut)
    b = Bench(dut)
    b.pauses(cocotb.RANDOM_SEED, 0.2)
    regs = _regs(v["y_mult"], v["y_shift"], int(v["x_mult"]), int(v["x_shift"]))
    await b.program(v["y_mult"], v["y_shift"], int(v["x_mult"]), int(v["x_shift"]))
    d = v["y"].shape[-1]
    ys, xs = list(v["y"].reshape(-1, d)), list(v["x"].reshape(-1, d))
    exp = [golden(y, x, regs) for y, x in zip(ys, xs, strict=True)]
    assert np.array_equal(np.stack(exp), v["expected"].reshape(-1, d)), "the vectors' expected R is not golden's"
    await b.run(ys, xs, regs)
    dut._log.info("real vectors: %d tokens of %d channels bit-exact", len(ys), d)

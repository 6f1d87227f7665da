"""cocotb testbench: a whole layer of score rows (or tokens) through a PL kernel, source at a modeled rate.

The full description: ``docs/internals/sim.md``, section ``sim/tb_perf_stream.py``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from vckattn.golden.online_softmax_int import (
    OnlineSoftmaxFormat,
    online_softmax_int,
    online_softmax_registers,
    online_softmax_regmap,
)
from vckattn.golden.swiftmax_int import (
    SwiftMaxFormat,
    SwiftMaxHeads,
    swiftmax_int,
    swiftmax_registers,
    swiftmax_regmap,
)
from vckattn.hw.pl.timing import stream_cycles
from vckattn.sim.kernel_tb import start
from vckattn.sim.norm_tb import NormSpec, random_token

OUT_BITS = 8


#: Typical score spread (accumulator units) at 32 bits; narrower inputs use a quarter of their range.
SPREAD_32 = 3000.0


def spread(width: int) -> float:
    """Typical ``|score|`` of a ``width``-bit score stream (accumulator units)."""
    return SPREAD_32 if width >= 32 else float(1 << (width - 1)) / 4


def layer_scores(rng: np.random.Generator, rows: int, row_len: int, width: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Signed ``width``-bit scores ``(rows, row_len)`` like a BERT head's QKᵀ accumulators, and keep masks.

    Per row a spread of 1/6, 1 or 7 times :func:`spread` and an offset; 0.2% of the scores at 32 bits
    lie beyond the 24-bit saturation up to the int32 extremes (narrower scores are clipped to their range).
    """
    s = spread(width)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    k = rng.choice([1 / 6, 1.0, 7.0], size=(rows, 1))
    x = rng.normal(0.0, 1.0, (rows, row_len)) * k * s + rng.normal(0.0, 0.7 * s, (rows, 1))
    big = rng.random((rows, row_len)) < 0.002
    x[big] = rng.choice([-1, 1], int(big.sum())) * rng.integers(1 << 23, 1 << 31, int(big.sum()))
    keep = rng.random((rows, row_len)) >= 0.03
    return np.clip(np.rint(x), lo, hi).astype(np.int64), keep


def score_scale(width: int) -> float:
    """``s_q = s_k`` for the registers: a typical score (:func:`spread`) is ~1 after ``s_q s_k / sqrt(64)``."""
    return 0.05 * float(np.sqrt(SPREAD_32 / spread(width)))


def pack_beats(x: np.ndarray, keep: np.ndarray, lanes: int, width: int) -> tuple[list[int], list[int], list[int]]:
    """TDATA words, TUSER keep words and TLAST flags of every beat (rows padded with masked zeros)."""
    rows, row_len = x.shape
    n = -(-row_len // lanes)
    xp = np.zeros((rows, n * lanes), dtype=np.int64)
    kp = np.zeros((rows, n * lanes), dtype=bool)
    xp[:, :row_len], kp[:, :row_len] = x, keep
    fields = (xp & ((1 << width) - 1)).reshape(-1, lanes)
    kbits = kp.reshape(-1, lanes)
    words, users = [], []
    for f, k in zip(fields.tolist(), kbits.tolist(), strict=True):
        words.append(sum(int(v) << (i * width) for i, v in enumerate(f)))
        users.append(sum(1 << i for i, b in enumerate(k) if b))
    lasts = [int(b % n == n - 1) for b in range(rows * n)]
    return words, users, lasts


async def write_regs(axil: AxiLiteMaster, regmap: object, values: dict[str, int]) -> None:
    for name, v in values.items():
        resp = await axil.write(regmap.offset(name), regmap.word(name, int(v)).to_bytes(4, "little"))  # type: ignore[attr-defined]
        assert AxiResp(resp.resp) == AxiResp.OKAY, name


async def write_mem(axil: AxiLiteMaster, regmap: object, name: str, values: object) -> None:
    base = regmap.offset(name)  # type: ignore[attr-defined]
    for k, v in enumerate(values):  # type: ignore[attr-defined]
        resp = await axil.write(base + 4 * k, regmap.word(name, int(v)).to_bytes(4, "little"))  # type: ignore[attr-defined]
        assert AxiResp(resp.resp) == AxiResp.OKAY, f"{name}[{k}]"


@dataclass
class Case:
    """How to feed and check one kernel: input data, golden model, stream fields."""

    data: Callable[[np.random.Generator, int, int], tuple[np.ndarray, np.ndarray]]  # (rows, row_len) -> x, keep
    golden: Callable[[np.ndarray, np.ndarray], np.ndarray]
    width: int  # input element width
    keep_user: bool  # TUSER = keep mask on input and output
    out_signed: bool


async def setup_case(dut: SimHandleBase, axil: AxiLiteMaster, kernel: str, lanes: int, width: int) -> Case:
    """Program the kernel's registers (a typical configuration) and return its :class:`Case`."""
    if kernel in ("swiftmax", "online_softmax"):
        sc = score_scale(width)
        if kernel == "swiftmax":
            fmt = SwiftMaxFormat()
            regs = swiftmax_registers(sc, sc, 64, 2.5, 2.0, 8, fmt)
            values = SwiftMaxHeads.broadcast(regs, 1).register_values(fmt)  # one head: TUSER head bits stay 0
            srm = swiftmax_regmap(fmt)
            await write_regs(axil, srm, {k: v for k, v in values.items() if isinstance(v, int)})
            for k, v in values.items():
                if not isinstance(v, int):
                    await write_mem(axil, srm, k, v)

            def golden(x: np.ndarray, k: np.ndarray) -> np.ndarray:
                return swiftmax_int(x, regs, k, fmt)
        else:
            oregs = online_softmax_registers(sc, sc, 64)
            await write_regs(axil, online_softmax_regmap(1), oregs.as_dict())
            ofmt = OnlineSoftmaxFormat(block=lanes)

            def golden(x: np.ndarray, k: np.ndarray) -> np.ndarray:
                return online_softmax_int(x, oregs, k, ofmt)

        return Case(lambda rng, r, n: layer_scores(rng, r, n, width), golden, width, True, False)
    if kernel in ("rmsnorm", "bhyt_exact"):
        import importlib

        spec: NormSpec = importlib.import_module(f"vckattn.sim.tb_{kernel}").SPEC
        max_d = int(os.environ.get("TB_MAX_D", "1024"))
        rm = spec.regmap(lanes, max_d)
        nregs = spec.typical(np.random.default_rng(cocotb.RANDOM_SEED ^ 0x5EED), max_d)
        await write_regs(axil, rm, spec.register_values(nregs))
        await write_mem(axil, rm, "gamma", spec.gamma_values(nregs))

        def tokens(rng: np.random.Generator, r: int, n: int) -> tuple[np.ndarray, np.ndarray]:
            return np.stack([random_token(rng, n) for _ in range(r)]), np.ones((r, n), dtype=bool)

        def golden_tokens(x: np.ndarray, k: np.ndarray) -> np.ndarray:
            q = np.zeros((x.shape[0], max_d), dtype=np.int64)
            q[:, : x.shape[1]] = x
            return spec.golden(q, nregs)[:, : x.shape[1]]

        return Case(tokens, golden_tokens, 8, False, True)
    raise ValueError(f"TB_PERF_KERNEL {kernel!r}: swiftmax, online_softmax, rmsnorm or bhyt_exact")


async def stream(dut: SimHandleBase, words: list[int], users: list[int] | None, lasts: list[int], rate: Fraction,
                 max_cycles: int) -> tuple[list[int], list[int], list[int], list[int], list[int], int]:
    """Drive the beats at ``rate`` (beat b produced at cycle ceil(b/rate)); sample both ports every cycle.

    Returns (output words, output TUSER (0 without TUSER), output TLAST, input handshake cycles, output
    handshake cycles, cycles the input waited with TVALID high and TREADY low); cycle 0 is the first beat's.
    """
    total = len(words)
    clk = dut.clk
    has_out_user = hasattr(dut, "m_axis_tuser")
    in_cyc, out_cyc, o_words, o_users, o_lasts = [], [], [], [], []
    b, cycle, waited = 0, 0, 0
    offered = -1
    dut.m_axis_tready.value = 1
    while len(out_cyc) < total:
        await RisingEdge(clk)
        valid = b < total and cycle * rate >= b  # cycle >= ceil(b / rate)
        if valid and offered != b:
            dut.s_axis_tdata.value = words[b]
            if users is not None:
                dut.s_axis_tuser.value = users[b]
            dut.s_axis_tlast.value = lasts[b]
            offered = b
        dut.s_axis_tvalid.value = int(valid)
        await ReadOnly()
        if valid:
            if int(dut.s_axis_tready.value):
                in_cyc.append(cycle)
                b += 1
            else:
                waited += 1
        if int(dut.m_axis_tvalid.value):
            out_cyc.append(cycle)
            o_words.append(int(dut.m_axis_tdata.value))
            o_users.append(int(dut.m_axis_tuser.value) if has_out_user else 0)
            o_lasts.append(int(dut.m_axis_tlast.value))
        cycle += 1
        assert cycle < max_cycles, f"stream did not finish in {max_cycles} cycles ({b} in, {len(out_cyc)} out)"
    await RisingEdge(clk)
    dut.s_axis_tvalid.value = 0
    return o_words, o_users, o_lasts, in_cyc, out_cyc, waited


@cocotb.test(timeout_time=400, timeout_unit="ms")
async def test_layer_stream(dut: SimHandleBase) -> None:
    kernel = os.environ["TB_PERF_KERNEL"]
    rows, row_len = int(os.environ["TB_PERF_ROWS"]), int(os.environ["TB_PERF_ROW_LEN"])
    rates = [Fraction(s) for s in os.environ.get("TB_PERF_RATES", "1").split(",")]
    tol = float(os.environ.get("TB_PERF_TOLERANCE", "0.05"))
    normalizer = kernel in ("swiftmax", "online_softmax")
    # SwiftMax's TUSER also carries the head index above the keep bits
    head_bits = SwiftMaxFormat().head_bits if kernel == "swiftmax" else 0
    lanes = len(dut.s_axis_tuser) - head_bits if normalizer else len(dut.s_axis_tdata) // 8
    width = len(dut.s_axis_tdata) // lanes
    dut.s_axis_tvalid.value = 0
    dut.m_axis_tready.value = 1
    await start(dut)
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    case = await setup_case(dut, axil, kernel, lanes, width)
    await ClockCycles(dut.clk, 4)

    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    n = -(-row_len // lanes)
    results = []
    for rate in rates:
        x, keep = case.data(rng, rows, row_len)
        expected = case.golden(x, keep)
        words, users, lasts = pack_beats(x, keep, lanes, width)
        modeled = stream_cycles(kernel, rows, row_len, lanes, float(rate))
        t0 = time.perf_counter()
        o_words, o_users, o_lasts, in_cyc, out_cyc, waited = await stream(
            dut, words, users if case.keep_user else None, lasts, rate, max_cycles=2 * modeled + 1000)
        wall = time.perf_counter() - t0
        # outputs: one 8-bit element per lane, TUSER keep bits, TLAST
        got = np.array([[(w >> (OUT_BITS * i)) & 0xFF for i in range(lanes)] for w in o_words], dtype=np.int64)
        if case.out_signed:
            got = np.where(got >= 128, got - 256, got)
        got = got.reshape(rows, n * lanes)[:, :row_len]
        bad = np.argwhere(got != expected)
        assert len(bad) == 0, (f"rate {rate}: {len(bad)} mismatches, first (row, element) {bad[:5].tolist()}: "
                               f"expected {[int(expected[tuple(i)]) for i in bad[:5]]}, "
                               f"got {[int(got[tuple(i)]) for i in bad[:5]]}")
        if case.keep_user:
            assert o_users == users, f"rate {rate}: output TUSER differs from the input keep bits"
        assert o_lasts == lasts, f"rate {rate}: output TLAST differs from the row framing"
        assert len(in_cyc) == len(words)
        measured = out_cyc[-1] - in_cyc[0] + 1
        err = (measured - modeled) / modeled
        lo, hi = (0, 255) if not case.out_signed else (-128, 127)
        res = {"kernel": kernel, "rate": str(rate), "rows": rows, "row_len": row_len, "lanes": lanes,
               "in_width": width, "beats": len(words), "measured_cycles": measured, "modeled_cycles": modeled,
               "rel_error": err, "input_wait_cycles": waited, "first_latency_cycles": out_cyc[0] - in_cyc[0],
               "elements": rows * row_len, "wall_seconds": round(wall, 1),
               "out_at_limits": int(np.sum((expected == lo) | (expected == hi))),
               "out_zero": int(np.sum(expected == 0)),
               "out_inside": int(np.sum((expected > lo) & (expected < hi) & (expected != 0)))}
        dut._log.info("%s", res)
        results.append(res)
        await ClockCycles(dut.clk, 40)
    out = os.environ.get("TB_PERF_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
    for res in results:
        assert abs(res["rel_error"]) <= tol, res
        assert res["out_inside"] >= res["elements"] // 10, res  # the data exercise the datapath, not only 0/limits

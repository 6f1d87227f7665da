"""cocotb 2.x testbench for :class:`vckattn.hw.pl.bhyt_approx.BHyTApproxKernel` (BHyT site M).

The full description: ``docs/internals/sim.md``, section ``sim/tb_bhyt_approx.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
from collections.abc import Sequence

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotbext.axi import AxiResp, AxiStreamFrame

from vckattn.golden.bhyt_int import (
    BHYT_APPROX_ID,
    BHyTSiteRegisters,
    NormFormat,
    bhyt_approx_regmap,
    bhyt_register_values,
    bhyt_site_int,
    bhyt_site_registers,
    sum_of_squares,
)
from vckattn.golden.error_budget import norm_cases
from vckattn.hw.pl.bhyt_approx import BHyTApproxKernel, buffer_bits
from vckattn.sim.kernel_tb import KernelHarness, RunStats, ThroughputStats, pack, start

FMT = NormFormat()
MAX_SHIFT = 62  # golden shift_round's range


def dut_shape(dut: SimHandleBase) -> tuple[int, int, int]:
    """(lanes, stat_bits, max_d) from the DUT's ports and ``TB_MAX_D``."""
    lanes = len(dut.s_axis_tdata) // 8
    return lanes, len(dut.s_axis_tuser), int(os.environ.get("TB_MAX_D", "1024"))


class StatHarness(KernelHarness):
    """A :class:`KernelHarness` whose input TUSER is the token statistic ``S`` on every beat
    (instead of keep bits); the output has no TUSER. Use :meth:`run_tokens`."""

    def __init__(self, dut: SimHandleBase, lanes: int) -> None:
        super().__init__(dut, lanes=lanes, in_width=8, out_width=8, in_signed=True, out_signed=True, user=True)
        self._stats: list[int] | None = None
        self.gamma_loaded: list[int] | None = None  # what load() wrote last

    def rows_to_frames(self, rows: object, masks: object | None = None,
                       user_hi: object | None = None) -> list[AxiStreamFrame]:
        assert self._stats is not None, "use run_tokens / throughput_tokens"
        assert user_hi is None, "TUSER carries the statistic here"
        frames = []
        for row, s in zip(rows, self._stats, strict=True):  # type: ignore[call-overload]
            tdata = [pack([int(v) for v in row[b : b + self.lanes]], 8, self.lanes, True)
                     for b in range(0, len(row), self.lanes)]
            frames.append(AxiStreamFrame(tdata, tuser=[int(s)] * len(tdata)))
        return frames

    async def run_tokens(self, tokens: Sequence[np.ndarray], stats: Sequence[int],
                         expected: Sequence[np.ndarray]) -> RunStats:
        self._stats = [int(s) for s in stats]
        try:
            return await self.run_rows(list(tokens), None, list(expected), check_out_mask=False)
        finally:
            self._stats = None

    async def throughput_tokens(self, tokens: Sequence[np.ndarray], stats: Sequence[int],
                                expected: Sequence[np.ndarray]) -> ThroughputStats:
        self._stats = [int(s) for s in stats]
        try:
            return await self.measure_throughput(list(tokens), list(expected))
        finally:
            self._stats = None


def expected_tokens(tokens: Sequence[np.ndarray], stats: Sequence[int], regs: BHyTSiteRegisters,
                    d: int) -> list[np.ndarray]:
    """Golden output of each token (length <= d): element j uses γ[j], so zero-pad to d, run
    :func:`bhyt_site_int` on the whole batch and cut each row back."""
    q = np.zeros((len(tokens), d), dtype=np.int64)
    for r, t in enumerate(tokens):
        q[r, : len(t)] = t
    out = bhyt_site_int(q, np.asarray(stats, dtype=np.int64).reshape(-1, 1), regs, FMT)
    return [out[r, : len(t)] for r, t in enumerate(tokens)]


async def load(h: StatHarness, regs: BHyTSiteRegisters, lanes: int, max_d: int) -> None:
    """Write the registers, and ``γ`` unless it is what was written last (AXI writes are slow)."""
    rm = bhyt_approx_regmap(lanes, max_d, FMT)
    await h.write_regs(rm, bhyt_register_values(regs, FMT))
    gamma = [int(g) for g in regs.gamma]
    if gamma != h.gamma_loaded:
        await h.write_mem(rm, "gamma", gamma)
        h.gamma_loaded = gamma


def site_m_case(rng: np.random.Generator, d: int, n_tokens: int,
                gamma: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, BHyTSiteRegisters]:
    """A realistic site M (as ``error_budget.measure_bhyt(site="M")``): block input ``h`` (int8,
    scale 0.05) with heavy-tailed tokens and edge rows, ``h' = h + N(0, 0.3)`` requantized with its
    own scale, ``S = Σ q_h²``, λ = 1, κ = 10, c_attn = 0.4, λ_A = 2. Returns (q_mid, S, regs)."""
    q = norm_cases(d=d, tokens=n_tokens, seed=int(rng.integers(1 << 31)))
    s_x = 0.05
    x = q * s_x
    xm = x + rng.normal(0, 0.3, x.shape)
    s_in = float(np.abs(xm).max() / 127)
    q_mid = np.clip(np.rint(xm / s_in), -128, 127).astype(np.int64)
    if gamma is None:
        gamma = rng.uniform(0.25, 1.75, d) * rng.choice([-1.0, 1.0], d)
    regs = bhyt_site_registers(1.0, 10.0, gamma, d, s_in, s_x, c_attn=0.4, lam_attn=2.0, fmt=FMT)
    perm = rng.permutation(len(q))
    return q_mid[perm], sum_of_squares(q)[perm, 0], regs


def edge_tokens(rng: np.random.Generator, d: int, lanes: int) -> list[np.ndarray]:
    """All-zero, ±127/−128, one-hot spikes, constants, alternating, every int8 value: every pattern
    at short lengths (1, lanes, lanes + 1, 3·lanes − 1), the main ones at full length ``d``."""
    def patterns(n: int) -> list[np.ndarray]:
        out = [np.zeros(n, dtype=np.int64)] + [np.full(n, v, dtype=np.int64) for v in (127, -128, -127, 1, -1, 64)]
        for v in (127, -128):
            spike = np.zeros(n, dtype=np.int64)
            spike[int(rng.integers(n))] = v
            out.append(spike)
        alt = np.full(n, 127, dtype=np.int64)
        alt[1::2] = -128
        return out + [alt, np.arange(n, dtype=np.int64) % 256 - 128]

    out: list[np.ndarray] = []
    for n in sorted({1, lanes, lanes + 1, 3 * lanes - 1}):
        if n <= d:
            out += patterns(n)
    full = patterns(d)
    return out + [full[k] for k in (0, 1, 2, 7, 8, 9, 10)]


def edge_stats(rng: np.random.Generator, tokens: Sequence[np.ndarray], stat_bits: int) -> list[int]:
    """S for edge tokens: 0, 1, the token's own Σq², powers of two, the largest values."""
    top = (1 << stat_bits) - 1
    choices = [0, 1, 2, 3, top, top - 1, 1 << (stat_bits - 1), (1 << 24) - 1, 1 << 24, 4, 255]
    out = []
    for t in tokens:
        k = rng.random()
        if not t.any() and k < 0.7:
            out.append(0)  # all-zero token with S = 0: v = max(c_int + eps_int, 1)
        elif k < 0.3:
            out.append(int(sum_of_squares(t)[0]))
        elif k < 0.8:
            out.append(int(rng.choice(choices)))
        else:
            out.append(int(rng.integers(0, 1 << int(rng.integers(1, stat_bits + 1)))))
    out[-1] = top  # the largest S, always once
    return out


def random_lengths(rng: np.random.Generator, n: int, max_d: int, lanes: int) -> list[int]:
    pool = [1, 2, 3, lanes, lanes + 1, 2 * lanes - 1, max_d, max_d - 1]
    return [int(rng.choice(pool)) if rng.random() < 0.3 else int(rng.integers(1, max_d + 1)) for _ in range(n)]


def k_exponents(stats: Sequence[int], regs: BHyTSiteRegisters) -> np.ndarray:
    """rsqrt exponents k = floor(log2 v) // 2 of the tokens' v = max(S + c_int + eps_int, 1)."""
    return np.asarray([(max(int(s) + regs.c_int + regs.eps_int, 1).bit_length() - 1) >> 1 for s in stats])


def pick_k_shift(how: str | int, stats: Sequence[int], regs: BHyTSiteRegisters) -> int:
    """``"max"``: the largest k_shift the golden model's 62-bit shifts allow for these statistics
    (sh = k_shift + 7 + k <= 62); ``"useful"``: the one that maps ``|q| = 64`` of a median token to a
    tanh argument near 1 (``a ≈ q·k_mult·2^-(k_shift + k)`` in Q.12), within [0, max]."""
    k = k_exponents(stats, regs)
    top = min((1 << 6) - 1, MAX_SHIFT - (FMT.rsqrt.out_frac - 8) - int(k.max()))
    if how == "max":
        return top
    if how == "useful":
        want = round(math.log2(64 * max(regs.k_mult, 1) / (1 << FMT.arg_frac))) - int(np.median(k))
        return int(np.clip(want, 0, top))
    return int(how)


# --------------------------------------------------------------------------------------------
# Registers
# --------------------------------------------------------------------------------------------


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    lanes, stat_bits, max_d = dut_shape(dut)
    rm = bhyt_approx_regmap(lanes, max_d, FMT)
    await start(dut)
    h = StatHarness(dut, lanes)
    assert await h.read_reg(rm, "ID") == BHYT_APPROX_ID
    assert await h.read_reg(rm, "VERSION") == 1
    scalars = [r.name for r in rm.regs if r.access == "rw"]
    for name in scalars + ["tokens"]:
        assert await h.read_reg(rm, name) == 0, f"reset value of {name}"

    rng = random.Random(cocotb.RANDOM_SEED)
    for pattern in ("max", "min", "random"):
        vals = {}
        for name in scalars:
            w = rm.width(name)
            vals[name] = {"max": (1 << w) - 1, "min": 0, "random": rng.getrandbits(w)}[pattern]
        await h.write_regs(rm, vals)
        for name, v in vals.items():
            assert await h.read_reg(rm, name) == v, (pattern, name)
    # bits above the width are dropped
    assert await h.write_word(rm.offset("k_shift"), 0xFFFFFFC5) == AxiResp.OKAY
    assert await h.read_reg(rm, "k_shift") == 5
    assert await h.write_word(rm.offset("eps_int_hi"), 0x12345678) == AxiResp.OKAY
    assert await h.read_reg(rm, "eps_int_hi") == 0x78
    # read-only and unmapped words: SLVERR, no effect
    for name in ("ID", "VERSION", "tokens"):
        assert await h.write_word(rm.offset(name), 0xDEADBEEF) == AxiResp.SLVERR, name
    assert await h.read_reg(rm, "tokens") == 0
    g0 = rm.offset("gamma")
    unmapped = [rm.offset("tokens") + 4, g0 - 4]
    if max_d < rm.mem("gamma").window_bytes // 4:  # the gamma window beyond max_d, end of the aperture
        unmapped += [g0 + 4 * max_d, (1 << rm.addr_width) - 4]
    for off in unmapped:
        assert await h.write_word(off, 0xFFFFFFFF) == AxiResp.SLVERR, hex(off)
        assert await h.read_word(off) == (0, AxiResp.SLVERR), hex(off)

    # gamma: every entry, extremes first, sign-extended readback
    gam = [-32768, 32767, -1, 0, 1] + [rng.randint(-32768, 32767) for _ in range(max_d)]
    gam = gam[:max_d]
    await h.write_mem(rm, "gamma", gam)
    assert await h.read_mem(rm, "gamma", max_d) == gam
    raw, resp = await h.read_word(g0)
    assert resp == AxiResp.OKAY and raw == 0xFFFF8000, hex(raw)
    part = [rng.randint(-32768, 32767) for _ in range(min(7, max_d))]
    start_k = max_d - len(part)
    await h.write_mem(rm, "gamma", part, start=start_k)
    assert await h.read_mem(rm, "gamma", len(part) + 1, start=start_k - 1) == [gam[start_k - 1]] + part

    # a real site-M configuration round-trips through register_values
    _, _, regs = site_m_case(np.random.default_rng(cocotb.RANDOM_SEED), max_d, 4)
    await load(h, regs, lanes, max_d)
    for name, v in bhyt_register_values(regs, FMT).items():
        assert await h.read_reg(rm, name) == v, name
    for k in sorted({0, 1, max_d // 2, max_d - 1}):
        assert (await h.read_mem(rm, "gamma", 1, start=k))[0] == int(regs.gamma[k]), k


# --------------------------------------------------------------------------------------------
# Streams
# --------------------------------------------------------------------------------------------


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_random_traffic(dut: SimHandleBase) -> None:
    lanes, stat_bits, max_d = dut_shape(dut)
    rm = bhyt_approx_regmap(lanes, max_d, FMT)
    await start(dut)
    h = StatHarness(dut, lanes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.3, out_prob=0.4)
    total = int(os.environ.get("TB_ELEMENTS", "100000"))
    top = (1 << stat_bits) - 1
    n_elems = n_tokens = 0

    async def run(label: str, tokens: list[np.ndarray], stats: list[int], regs: BHyTSiteRegisters) -> None:
        nonlocal n_elems, n_tokens
        await load(h, regs, lanes, max_d)
        exp = expected_tokens(tokens, stats, regs, max_d)
        n_sat = sum(int(np.sum(np.abs(e) >= 127)) for e in exp)  # ±127 and -128
        n_zero = sum(int(np.sum(e == 0)) for e in exp)
        st = await h.run_tokens(tokens, stats, exp)
        n_elems += st.elements
        n_tokens += st.rows
        dut._log.info("%s: %d elements in %d tokens, %d cycles (%.3f elem/cycle), input stalled %d cycles, "
                      "%d saturated / %d zero outputs", label, st.elements, st.rows, st.cycles,
                      st.elements_per_cycle, st.in_ready_low, n_sat, n_zero)
        assert st.in_ready_low > 0, "backpressure never reached s_axis_tready"

    # 1. realistic site M, full-length tokens (d = max_d)
    q_mid, stats, regs = site_m_case(rng, max_d, max(2, total // (8 * max_d)))
    await run("site M, d = max_d", list(q_mid), [int(s) for s in stats], regs)

    # 2. edge tokens and edge statistics under the realistic registers, then registers at their limits
    base = regs
    edges = edge_tokens(rng, max_d, lanes)
    await run("edge tokens", edges, edge_stats(rng, edges, stat_bits), base)
    gam_ext = np.asarray([[-32768, 32767, -1, 0, 1, 32767][j % 6] if j < 6 else int(rng.integers(-32768, 32768))
                          for j in range(max_d)], dtype=np.int64)
    k_max = (1 << FMT.k_bits) - 1
    configs = [  # (label, register changes, k_shift: "useful" | "max" | a value, big run)
        ("c_int = eps_int = 2^40-1, k_mult max", dict(k_mult=k_max, c_int=top, eps_int=top), "useful", True),
        ("c_int = eps_int = 0, k_mult max, g_frac 0", dict(k_mult=k_max, c_int=0, eps_int=0, g_frac=0), "useful", True),
        ("gamma extremes, g_frac 0", dict(g_frac=0, gamma=gam_ext), "useful", True),
        ("large c_int", dict(c_int=top >> 1, eps_int=int(rng.integers(0, 1 << 20))), "useful", True),
        ("k_mult max, k_shift 0", dict(k_mult=k_max), 0, False),
        ("k_shift max", {}, "max", False),
        ("g_frac 31, gamma extremes", dict(g_frac=31, gamma=gam_ext), "useful", False),
    ]
    for label, changes, shift, big in configs:
        regs = dataclasses.replace(base, **changes)
        edges = edge_tokens(rng, max_d, lanes)
        q_mid, stats, _ = site_m_case(rng, max_d, 8 if big else 2)
        if not big:
            edges = [t for t in edges if len(t) < max_d]
            q_mid, stats = q_mid[:2], stats[:2]
        toks = edges + [q_mid[r, : int(rng.integers(1, max_d + 1))] for r in range(len(q_mid))]
        st = edge_stats(rng, edges, stat_bits) + [int(s) for s in stats]
        regs = dataclasses.replace(regs, k_shift=pick_k_shift(shift, st, regs))
        await run(f"{label} (k_shift {regs.k_shift})", toks, st, regs)

    # 3. realistic site M with random token lengths 1..max_d (gamma[:n], counter reset) up to the budget
    gamma = rng.uniform(0.25, 1.75, max_d) * rng.choice([-1.0, 1.0], max_d)
    goal = max(total, n_elems + total // 5)
    while n_elems < goal:
        lens = random_lengths(rng, 64, max_d, lanes)
        lens = lens[: int(np.searchsorted(np.cumsum(lens), goal - n_elems)) + 1]
        q_mid, stats, regs = site_m_case(rng, max_d, len(lens), gamma)
        await run("site M, random lengths", [q_mid[r, :n] for r, n in enumerate(lens)],
                  [int(s) for s in stats[: len(lens)]], regs)

    assert n_elems >= total, n_elems
    assert await h.read_reg(rm, "tokens") == n_tokens
    dut._log.info("total: %d elements, %d tokens", n_elems, n_tokens)


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_huge_shift(dut: SimHandleBase) -> None:
    """k_shift = 63: sh >= 70 and |q·c| < 2^36, so every tanh argument is 0 and every output 0."""
    lanes, stat_bits, max_d = dut_shape(dut)
    await start(dut)
    h = StatHarness(dut, lanes)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.2, out_prob=0.3)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    _, _, regs = site_m_case(rng, max_d, 4)
    regs = dataclasses.replace(regs, k_shift=63, k_mult=(1 << FMT.k_bits) - 1, g_frac=0,
                               gamma=np.full(max_d, -32768, dtype=np.int64))
    await load(h, regs, lanes, max_d)
    toks = edge_tokens(rng, max_d, lanes)
    stats = edge_stats(rng, toks, stat_bits)
    await h.run_tokens(toks, stats, [np.zeros(len(t), dtype=np.int64) for t in toks])


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    lanes, _, max_d = dut_shape(dut)
    await start(dut)
    h = StatHarness(dut, lanes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    d = min(max_d, 64 * lanes) // lanes * lanes or lanes
    q_mid, stats, regs = site_m_case(rng, d, max(64, 4096 // d))
    await load(h, regs, lanes, max_d)
    toks, st = list(q_mid), [int(s) for s in stats]
    t = await h.throughput_tokens(toks, st, expected_tokens(toks, st, regs, d))
    dut._log.info("throughput: %d elements, %.4f elements/cycle (%.4f beats/cycle), latency %d cycles",
                  t.elements, t.elements_per_cycle, t.beats_per_cycle, t.latency)
    out = os.environ.get("VCKATTN_METRICS_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"elements_per_cycle": t.elements_per_cycle, "latency_cycles": t.latency,
                       "buffer_bits": buffer_bits(lanes, max_d), "lanes": lanes, "max_d": max_d,
                       "elements": t.elements}, f, indent=2)
    assert t.beats_per_cycle == 1.0 and t.elements_per_cycle == lanes, t
    assert t.latency == BHyTApproxKernel.LATENCY + 1, t.latency

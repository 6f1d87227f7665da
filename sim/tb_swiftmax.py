"""cocotb 2.x testbench for :class:`vckattn.hw.pl.swiftmax.SwiftMaxKernel`.

The full description: ``docs/internals/sim.md``, section ``sim/tb_swiftmax.py``.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles

from vckattn.golden.swiftmax_int import (
    SWIFTMAX_ID,
    SwiftMaxFormat,
    SwiftMaxHeads,
    SwiftMaxRegisters,
    swiftmax_head_registers,
    swiftmax_int,
    swiftmax_registers,
    swiftmax_regmap,
)
from vckattn.hw.pl.swiftmax import buffer_bits
from vckattn.sim.kernel_tb import KernelHarness, ThroughputStats, start

FMT = SwiftMaxFormat()
RM = swiftmax_regmap(FMT)


def make_harness(dut: SimHandleBase) -> KernelHarness:
    """Lanes from TUSER (keep bits + head index), the score width from TDATA."""
    lanes = len(dut.s_axis_tuser) - FMT.head_bits
    in_width = len(dut.s_axis_tdata) // lanes
    assert lanes >= 1 and len(dut.s_axis_tdata) == lanes * in_width, "TDATA = lanes scores, TUSER = keep + head"
    return KernelHarness(dut, lanes=lanes, in_width=in_width, out_width=FMT.out_bits, in_signed=True,
                         out_signed=False)


def register_sets(rng: np.random.Generator, in_width: int = 32) -> list[SwiftMaxHeads]:
    """Layers' per-head sets: realistic ones from the constant function (random β/γ per head, 12 heads and
    ``max_heads`` heads; per-layer sets as one head), then raw values at the registers' limits, different
    per head. Scores narrower than 24 bits get first a set scaled to their range (the largest score is
    z = 12, P spread over 0..255)."""
    narrow = []
    if in_width < FMT.acc_bits:
        s = float(np.sqrt(12 * 8 / (1 << (in_width - 1))))
        narrow = [swiftmax_head_registers(s, s, 64, rng.uniform(4, 8, 6), rng.uniform(0.5, 2, 6), 8, fmt=FMT)]
    sets = [*narrow,
        swiftmax_head_registers(0.05, 0.05, 64, rng.uniform(-2, 12, 12), rng.uniform(0.05, 400, 12), 8, fmt=FMT),
        swiftmax_head_registers(0.02, 0.03, 32, rng.uniform(0, 9, FMT.max_heads), rng.uniform(0.5, 20, FMT.max_heads),
                                8, fmt=FMT),
        SwiftMaxHeads.broadcast(swiftmax_registers(0.05, 0.05, 64, 2.5, 100.0, 8, FMT), 1),  # ConSmax init
        SwiftMaxHeads.broadcast(swiftmax_registers(0.02, 0.03, 32, 4.4, 2.9, 8, FMT), 3),  # MiniLM-like statistics
        SwiftMaxHeads.broadcast(swiftmax_registers(0.1, 0.1, 64, -1.0, 0.5, 4, FMT), 2),
        swiftmax_head_registers(float(rng.uniform(0.001, 0.2)), float(rng.uniform(0.001, 0.2)),
                                int(rng.choice([16, 64, 128])), rng.uniform(-5, 30, 9), rng.uniform(0.01, 500, 9),
                                int(rng.integers(-20, 12)), fmt=FMT),
    ]
    lo, hi = -(1 << (FMT.reg_bits - 1)), (1 << (FMT.reg_bits - 1)) - 1
    amax = (1 << (FMT.a_bits - 1)) - 1

    def edge(a_mult: int, a_shift: int, u_lo: int, u_hi: int, bc: list[tuple[int, int]]) -> SwiftMaxHeads:
        return SwiftMaxHeads([SwiftMaxRegisters(a_mult=a_mult, a_shift=a_shift, b_beta=b, u_lo=u_lo, u_hi=u_hi,
                                                c_out=c, out_frac=0) for b, c in bc])

    rand = [(int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))) for _ in range(3)]
    sets.append(edge(amax, FMT.max_a_shift, lo, hi, [(hi, lo), (lo, hi), (0, 0), (hi, hi), (lo, lo), *rand,
                                                     (-40000, 30000)]))
    sets.append(edge(-amax - 1, 0, lo, hi, [(lo, hi), (hi, lo), (lo, lo), (hi, hi), (0, 30000), *rand]))
    sets.append(edge(amax, 30, -40000, 40000, [(0, 30000), (0, -30000), (20000, 0), (-20000, 60000), (hi, lo),
                                               (lo, hi), (5000, 45000), (-5000, 20000)]))
    return sets


def random_rows(rng: np.random.Generator, n_elements: int, max_len: int,
                in_width: int = 32) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Rows of random length and keep masks. 32-bit scores: realistic, around and beyond the 24-bit saturation,
    int32 extremes; narrower scores: normal at three spreads of their range, and its extremes."""
    rows, masks, total = [], [], 0
    lo, hi = -(1 << (in_width - 1)), (1 << (in_width - 1)) - 1
    while total < n_elements:
        n = int(rng.choice([1, 2, 3, 7, int(rng.integers(1, 64)), int(rng.integers(1, max_len + 1))]))
        kind = rng.random()
        if in_width < 32:
            if kind < 0.9:
                row = rng.normal(0, float(rng.choice([hi / 64, hi / 8, hi / 2])), n)
            else:
                row = rng.choice([lo, hi, lo + 1, hi - 1, 0, 1, -1], n)
            rows.append(np.clip(np.rint(row), lo, hi).astype(np.int64))
        elif kind < 0.7:  # realistic scores: |acc| up to ~2^18
            row = rng.normal(0, float(rng.choice([500, 5000, 50000])), n)
        elif kind < 0.9:  # around and beyond the 24-bit saturation
            row = rng.choice([-1, 1], n) * rng.integers((1 << 22), (1 << 25), n)
        else:  # int32 extremes and zeros
            row = rng.choice([-(1 << 31), (1 << 31) - 1, 0, 1, -1, (1 << 23) - 1, -(1 << 23)], n)
        if in_width == 32:
            rows.append(np.clip(np.rint(row), -(1 << 31), (1 << 31) - 1).astype(np.int64))
        masks.append(np.zeros(n, bool) if rng.random() < 0.05 else rng.random(n) > 0.2)
        total += n
    return rows, masks


def random_heads(rng: np.random.Generator, rows: list[np.ndarray], lanes: int,
                 n_heads: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per row, the head of each beat (one head for most rows; a head switch on random beats for some, on
    every beat for others) and the per-element head array the golden model takes."""
    beat_heads, elem_heads = [], []
    for row in rows:
        nb = -(-len(row) // lanes)
        kind = rng.random()
        if kind < 0.6 or n_heads == 1:
            bh = np.full(nb, int(rng.integers(0, n_heads)), np.int64)
        elif kind < 0.85:  # a few switches inside the row
            bh = np.full(nb, int(rng.integers(0, n_heads)), np.int64)
            for at in rng.integers(0, nb, int(rng.integers(1, 4))):
                bh[at:] = int(rng.integers(0, n_heads))
        else:  # a new head on every beat
            bh = rng.integers(0, n_heads, nb)
        beat_heads.append(bh)
        elem_heads.append(np.repeat(bh, lanes)[:len(row)])
    return beat_heads, elem_heads


async def program(h: KernelHarness, regs: SwiftMaxHeads) -> None:
    await h.write_regs(RM, regs.register_values(FMT))


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    await start(dut)
    h = make_harness(dut)
    assert await h.read_reg(RM, "ID") == SWIFTMAX_ID
    assert await h.read_reg(RM, "VERSION") == 2
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    for regs in register_sets(rng, h.in_width):
        await program(h, regs)
        values = regs.register_values(FMT)
        for name, v in values.items():
            if isinstance(v, list):
                assert await h.read_mem(RM, name, FMT.max_heads) == v, name
            else:
                assert await h.read_reg(RM, name) == v, name
    # scattered single-entry writes, then every entry read back (other entries unchanged)
    lo, hi = -(1 << (FMT.reg_bits - 1)), (1 << (FMT.reg_bits - 1)) - 1
    shadow = {name: await h.read_mem(RM, name, FMT.max_heads) for name in ("b_beta", "c_out")}
    for _ in range(24):
        name = str(rng.choice(["b_beta", "c_out"]))
        i = int(rng.integers(0, FMT.max_heads))
        v = int(rng.choice([lo, hi, 0, -1, int(rng.integers(lo, hi + 1))]))
        await h.write_mem(RM, name, [v], start=i)
        shadow[name][i] = v
        assert await h.read_mem(RM, name, 1, start=i) == [v], (name, i)
    for name, vals in shadow.items():
        assert await h.read_mem(RM, name, FMT.max_heads) == vals, name
    assert await h.read_reg(RM, "rows") == 0


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_random_traffic(dut: SimHandleBase) -> None:
    await start(dut)
    h = make_harness(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.3, out_prob=0.4)
    total = int(os.environ.get("TB_SWIFTMAX_ELEMENTS", "100000"))
    sets = register_sets(rng, h.in_width)
    n_elems = n_rows = n_kept = n_sat = n_mid = n_switch = 0
    for i, regs in enumerate(sets):
        await program(h, regs)
        share = total // 2 if i == 0 else total // (2 * (len(sets) - 1)) + 1
        rows, masks = random_rows(rng, share, max_len=1024, in_width=h.in_width)
        beat_heads, elem_heads = random_heads(rng, rows, h.lanes, regs.n_heads)
        expected = [swiftmax_int(r, regs, k, FMT, head=hd) for r, k, hd in zip(rows, masks, elem_heads, strict=True)]
        n_sat += sum(int(np.sum(e == FMT.out_max)) for e in expected)
        n_mid += sum(int(np.sum((e > 0) & (e < FMT.out_max))) for e in expected)
        stats = await h.run_rows(rows, masks, expected, user_hi=beat_heads)
        n_switch += sum(int(np.any(bh != bh[0])) for bh in beat_heads)
        n_elems += stats.elements
        n_rows += stats.rows
        n_kept += int(sum(k.sum() for k in masks))
        dut._log.info("register set %d: %d elements in %d rows, %d cycles, input stalled %d cycles",
                      i, stats.elements, stats.rows, stats.cycles, stats.in_ready_low)
    assert n_elems >= total, n_elems
    assert n_sat > 0 and n_mid > 0, (n_sat, n_mid)  # saturated and in-range outputs both exercised
    assert n_switch > 0, "no row switched head inside it"
    assert await h.read_reg(RM, "rows") == n_rows
    assert await h.read_reg(RM, "elements") == n_kept


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    await start(dut)
    h = make_harness(dut)
    lanes = h.lanes
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    regs = swiftmax_head_registers(0.05, 0.05, 64, rng.uniform(0, 6, 8), rng.uniform(0.5, 8, 8), 8, fmt=FMT)
    await program(h, regs)
    row_len = 32 * lanes
    lim = min(20000, (1 << (h.in_width - 1)) - 1)
    rows = [rng.integers(-lim, lim, row_len) for _ in range(64)]
    masks = [rng.random(row_len) > 0.1 for _ in rows]
    beat_heads, elem_heads = random_heads(rng, rows, lanes, regs.n_heads)  # head switches cost no cycle
    expected = [swiftmax_int(r, regs, k, FMT, head=hd) for r, k, hd in zip(rows, masks, elem_heads, strict=True)]
    h.clear_pauses()
    await ClockCycles(h.clk, 2)
    run = await h.run_rows(rows, masks, expected, user_hi=beat_heads)
    span = run.out_cycles[-1] - run.out_cycles[0] + 1
    t = ThroughputStats(elements_per_cycle=run.elements / span, beats_per_cycle=run.out_beats / span,
                        latency=run.latency, elements=run.elements, span_cycles=span, run=run)
    dut._log.info("throughput %.3f elements/cycle (%.3f beats/cycle), latency %d cycles",
                  t.elements_per_cycle, t.beats_per_cycle, t.latency)
    assert t.beats_per_cycle == 1.0 and t.elements_per_cycle == lanes, t
    out = os.environ.get("VCKATTN_METRICS_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"elements_per_cycle": t.elements_per_cycle, "latency_cycles": t.latency,
                       "buffer_bits": buffer_bits(lanes)}, f)

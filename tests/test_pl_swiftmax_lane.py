"""SwiftMax lane datapath (hw/pl/swiftmax_lane.py) against the golden kernel, in Amaranth's simulator,
including stalls (``en`` low) in the middle of the stream, with one register set or per-element heads
(``b_beta``/``c_out`` presented aligned with stages 2 / 3, as the kernels' memory read ports give them).
The full kernel with AXI4-Stream and
backpressure is checked on Verilator in the simulation tests."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from vckattn.golden.swiftmax_int import (
    SwiftMaxFormat,
    SwiftMaxHeads,
    swiftmax_head_registers,
    swiftmax_int,
    swiftmax_registers,
)
from vckattn.hw.pl.swiftmax_lane import SwiftMaxLane


def _run(regs, acc, keep, fmt, rng, head=None):
    """The lane on ``acc``/``keep`` with random stalls; ``head`` (per element) selects ``regs[head]``'s
    b_beta/c_out, presented aligned with stages 2 / 3 (garbage in every other cycle)."""
    stall = rng.random(4 * acc.size) < 0.3
    dut = SwiftMaxLane(fmt)
    got: list[int] = []
    per_head = isinstance(regs, SwiftMaxHeads)
    shared = regs[0] if per_head else regs
    b_tab = regs.head_values("b_beta") if per_head else None
    c_tab = regs.head_values("c_out") if per_head else None

    async def bench(ctx):
        for k, v in shared.as_dict().items():
            if hasattr(dut, k):
                ctx.set(getattr(dut, k), v)
        fed = 0
        in_flight: list[int] = []  # enabled cycles seen by each element still in the pipeline
        st1 = st2 = None  # element in stage 1 / stage 2 (its S2 / S3 computes in the next enabled cycle)
        for cyc in range(len(stall)):
            en = 0 if stall[cyc] else 1
            ctx.set(dut.en, en)
            if per_head:
                junk = int(rng.integers(-(1 << 20), 1 << 20))
                ctx.set(dut.b_beta, int(b_tab[head[st1]]) if st1 is not None else junk)
                ctx.set(dut.c_out, int(c_tab[head[st2]]) if st2 is not None else junk)
            if en and fed < acc.size:
                ctx.set(dut.acc, int(acc[fed]))
                ctx.set(dut.keep, int(keep[fed]))
            else:
                ctx.set(dut.acc, int(rng.integers(-1000, 1000)))  # garbage while stalled must not matter
            await ctx.tick()
            if en:
                st2 = st1
                st1 = fed if fed < acc.size else None
                in_flight = [c + 1 for c in in_flight]
                if fed < acc.size:
                    in_flight.append(1)
                    fed += 1
                if in_flight and in_flight[0] == dut.LATENCY:
                    got.append(ctx.get(dut.p))
                    in_flight.pop(0)
            if len(got) == acc.size:
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got)


def _scores(rng):
    return np.concatenate([rng.integers(-(1 << 20), 1 << 20, 3000), rng.integers(-(1 << 31), (1 << 31) - 1, 300),
                           [0, 1, -1, (1 << 23) - 1, -(1 << 23), (1 << 31) - 1, -(1 << 31)]])


@pytest.mark.parametrize("case", [(0.05, 0.05, 64, 2.5, 100.0, 8), (0.02, 0.03, 32, 4.4, 2.9, 8),
                                  (0.1, 0.1, 64, -1.0, 0.5, 4)])
def test_swiftmax_lane_matches_golden_with_stalls(case):
    fmt = SwiftMaxFormat()
    regs = swiftmax_registers(*case, fmt=fmt)
    rng = np.random.default_rng(0)
    acc = _scores(rng)
    keep = rng.random(acc.size) > 0.1
    got = _run(regs, acc, keep, fmt, rng)
    assert np.array_equal(got, swiftmax_int(acc, regs, keep, fmt))


def test_swiftmax_lane_per_element_heads_with_stalls():
    """b_beta/c_out change on every element (random heads), under stalls: bit-exact with golden head=."""
    fmt = SwiftMaxFormat()
    rng = np.random.default_rng(3)
    n = 12
    regs = swiftmax_head_registers(0.05, 0.04, 64, rng.uniform(-3, 12, n), rng.uniform(0.05, 300, n), 8, fmt=fmt)
    acc = _scores(rng)
    keep = rng.random(acc.size) > 0.1
    head = rng.integers(0, n, acc.size)
    got = _run(regs, acc, keep, fmt, rng, head)
    exp = swiftmax_int(acc, regs, keep, fmt, head=head)
    assert np.array_equal(got, exp)
    assert len({tuple(swiftmax_int(acc[:200], regs[h], None, fmt)) for h in range(n)}) > 1  # heads do differ

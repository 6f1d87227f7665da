"""SwiftMax lane datapath (hw/pl/swiftmax_lane.py) against the golden kernel, in Amaranth's simulator,
including stalls (``en`` low) in the middle of the stream. The full kernel with AXI4-Stream and
backpressure is checked on Verilator in the simulation tests."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from vckattn.golden.swiftmax_int import SwiftMaxFormat, swiftmax_int, swiftmax_registers
from vckattn.hw.pl.swiftmax_lane import SwiftMaxLane


@pytest.mark.parametrize("case", [(0.05, 0.05, 64, 2.5, 100.0, 8), (0.02, 0.03, 32, 4.4, 2.9, 8),
                                  (0.1, 0.1, 64, -1.0, 0.5, 4)])
def test_swiftmax_lane_matches_golden_with_stalls(case):
    fmt = SwiftMaxFormat()
    regs = swiftmax_registers(*case, fmt=fmt)
    rng = np.random.default_rng(0)
    acc = np.concatenate([rng.integers(-(1 << 20), 1 << 20, 3000), rng.integers(-(1 << 31), (1 << 31) - 1, 300),
                          [0, 1, -1, (1 << 23) - 1, -(1 << 23), (1 << 31) - 1, -(1 << 31)]])
    keep = rng.random(acc.size) > 0.1
    stall = rng.random(4 * acc.size) < 0.3
    dut = SwiftMaxLane(fmt)
    got: list[int] = []

    async def bench(ctx):
        for k, v in regs.as_dict().items():
            if hasattr(dut, k):
                ctx.set(getattr(dut, k), v)
        fed = 0
        in_flight: list[int] = []  # enabled cycles seen by each element still in the pipeline
        for cyc in range(len(stall)):
            en = 0 if stall[cyc] else 1
            ctx.set(dut.en, en)
            if en and fed < acc.size:
                ctx.set(dut.acc, int(acc[fed]))
                ctx.set(dut.keep, int(keep[fed]))
            else:
                ctx.set(dut.acc, int(rng.integers(-1000, 1000)))  # garbage while stalled must not matter
            await ctx.tick()
            if en:
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
    assert np.array_equal(np.array(got), swiftmax_int(acc, regs, keep, fmt))

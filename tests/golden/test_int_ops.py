"""Integer operators: error budgets against float64 (exhaustive where ≤ 2^20 inputs) and behaviour."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from vckattn.golden import error_budget as eb
from vckattn.golden.aie_matmul import INT8, TileShape, exact_int_matmul, tile_matmul
from vckattn.golden.bhyt_int import bhyt_block_int, bhyt_site_int, bhyt_site_registers, sum_of_squares
from vckattn.golden.funcunits import leading_one
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat, online_softmax_int, online_softmax_registers
from vckattn.golden.requant import requant_registers
from vckattn.golden.swiftmax_int import (
    SwiftMaxFormat,
    choose_out_frac,
    swiftmax_error_budget,
    swiftmax_int,
    swiftmax_reference,
    swiftmax_registers,
)


@pytest.mark.parametrize("measure,min_inputs,exhaustive", [
    (eb.measure_pow2, 1 << 12, True),
    (eb.measure_recip, (1 << 20) - 1, True),
    (eb.measure_rsqrt, (1 << 20) - 1, True),
    (eb.measure_tanh, 1 << 17, True),
    (eb.measure_swiftmax, 3 << 20, True),
    (eb.measure_requant, 1 << 22, True),
    (eb.measure_online_softmax, 10**6, False),
    (lambda: eb.measure_bhyt(site="A"), 10**6, False),
    (lambda: eb.measure_bhyt(site="M"), 10**6, False),
    (eb.measure_rmsnorm, 10**6, False),
    (eb.measure_tile_matmul, 30000, False),
])
def test_error_within_budget(measure, min_inputs, exhaustive):
    r = measure()
    assert r.inputs >= min_inputs and r.exhaustive == exhaustive
    assert r.violations == 0, f"{r.operator}: {r.violations} of {r.inputs} elements exceed the budget"
    assert r.max_error <= r.budget_max


def test_budget_catches_a_wrong_register():
    # The budget is tight enough to notice a multiplier off by 0.1%.
    fmt = SwiftMaxFormat()
    acc = np.arange(-(1 << 19), 1 << 19)
    regs = swiftmax_registers(0.05, 0.05, 64, 2.5, 100.0, 8, fmt)
    bad = regs.replace(a_mult=int(regs.a_mult * 1.001))
    got = swiftmax_int(acc, bad, fmt=fmt)
    ref = np.minimum(swiftmax_reference(acc, 0.05, 0.05, 64, 2.5, 100.0, 8), fmt.out_max)
    assert np.any(np.abs(got - ref) > swiftmax_error_budget(acc, regs, 0.05, 0.05, 64, 2.5, 100.0, fmt))


def test_swiftmax_mask_saturation_and_registers():
    fmt = SwiftMaxFormat()
    regs = swiftmax_registers(0.05, 0.05, 64, 2.5, 1.0, 8, fmt)
    acc = np.array([[-(1 << 30), 0, 3000, 1 << 30]])  # beyond the 24-bit input: saturated first
    keep = np.array([[True, False, True, True]])
    p = swiftmax_int(acc, regs, keep, fmt)
    assert p[0, 1] == 0 and p[0, 0] == 0 and p[0, 3] == fmt.out_max
    assert 0 < p[0, 2] < fmt.out_max
    assert choose_out_frac(1.0) == 7 and choose_out_frac(0.01) == 14
    with pytest.raises(ValueError, match="gamma"):
        swiftmax_registers(0.05, 0.05, 64, 2.5, 0.0)
    with pytest.raises(ValueError, match="not finite"):
        swiftmax_registers(0.05, 0.05, 64, float("nan"), 1.0)
    with pytest.raises(ValueError, match="does not fit"):
        swiftmax_registers(0.05, 0.05, 64, 1e6, 1.0)


def test_online_softmax_edges():
    fmt = OnlineSoftmaxFormat()
    regs = online_softmax_registers(0.05, 0.05, 64, fmt)
    acc = np.array([[100, 200, 300, 400, 500], [7, 7, 7, 7, 7]])
    keep = np.array([[False] * 5, [True] * 5])
    p = online_softmax_int(acc, regs, keep, fmt)
    assert np.all(p[0] == 0)  # fully masked row
    assert fmt.p_rounding == "cumulative"
    assert p[1].tolist() == [51, 51, 52, 51, 51]  # round(k·51.2) differenced: the row sums to 256
    p_near = online_softmax_int(acc, regs, keep, replace(fmt, p_rounding="nearest"))
    assert np.all(p_near[1] == 51)  # each 51.2 rounded on its own: the row sums to 255
    with pytest.raises(ValueError, match="p_rounding"):
        OnlineSoftmaxFormat(p_rounding="stochastic")
    with pytest.raises(ValueError, match="exceeds the kernel's maximum"):
        online_softmax_int(np.zeros((1, fmt.max_keys() + 1), np.int64), regs, None, fmt)


def test_online_softmax_cumulative_rounding_keeps_the_row_sum():
    """Long rows of small weights (S = 512: most P a fraction of an LSB): rounding each P on its own loses or doubles
    the row's mass; the cumulative rounding keeps every row's sum within one LSB of the exact one, and moves each
    element by less than one LSB more than the exact value's own error allows (the budget)."""
    from vckattn.golden.error_budget import online_softmax_budget
    from vckattn.golden.online_softmax_int import softmax_reference

    rng = np.random.default_rng(11)
    acc = np.rint(rng.normal(0, 1500, (300, 512))).astype(np.int64)
    keep = rng.random(acc.shape) > 0.1
    regs = online_softmax_registers(0.05, 0.05, 64)
    ref = softmax_reference(acc, 0.05, 0.05, 64, keep, 8)
    err = {}
    for rounding in ("nearest", "cumulative"):
        fmt = OnlineSoftmaxFormat(p_rounding=rounding)
        p = online_softmax_int(acc, regs, keep, fmt)
        assert np.all(np.abs(p - ref) <= online_softmax_budget(acc, keep, 0.05, 0.05, 64, fmt))
        assert np.all(p[~keep] == 0)
        err[rounding] = np.abs(p.sum(-1) - ref.sum(-1))
    assert err["cumulative"].max() <= 1.5, err["cumulative"].max()
    assert err["nearest"].mean() > 10 * err["cumulative"].mean(), (err["nearest"].mean(), err["cumulative"].mean())


def test_online_softmax_block_size_changes_only_rounding():
    rng = np.random.default_rng(3)
    acc = np.rint(rng.normal(0, 4000, (500, 96))).astype(np.int64)
    regs = online_softmax_registers(0.05, 0.05, 64)
    p1 = online_softmax_int(acc, regs, None, OnlineSoftmaxFormat(block=1))
    p16 = online_softmax_int(acc, regs, None, OnlineSoftmaxFormat(block=16))
    assert np.abs(p1 - p16).max() <= 1  # the schedule of rescales moves at most one LSB


def test_tile_matmul_exact_and_guards():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (2, 3, 33, 70))
    b = rng.integers(-128, 128, (2, 3, 70, 17))
    ref = np.einsum("...ik,...kj->...ij", a.astype(object), b.astype(object)).astype(np.int64)
    for tile in (TileShape(32, 32, 32), TileShape(4, 8, 8), TileShape(64, 64, 64)):
        assert np.array_equal(tile_matmul(a, b, tile), ref)
    with pytest.raises(ValueError, match="outside"):
        tile_matmul(np.array([[200]]), np.array([[1]]))
    with pytest.raises(ValueError, match="overflow"):
        tile_matmul(np.zeros((1, 1 << 20), np.int64), np.zeros((1 << 20, 1), np.int64), acc_bits=32)
    big = rng.integers(-(1 << 20), 1 << 20, (20, 300))  # float64 path
    assert np.array_equal(exact_int_matmul(big, big.T), big.astype(object).dot(big.T.astype(object)).astype(np.int64))


def test_requant_registers_validate():
    with pytest.raises(ValueError):
        requant_registers(0.0)
    with pytest.raises(ValueError):
        requant_registers(np.array([1.0, np.inf]))
    r = requant_registers(np.array([0.5, 0.001]))
    assert r.mult.shape == (2,) and np.all(np.abs(r.mult) < (1 << 17))


def test_bhyt_zero_token_and_constant_only_second_site():
    d = 32
    gamma = np.linspace(0.5, 1.5, d)
    a = bhyt_site_registers(2.0, 10.0, gamma, d, 0.05, 0.05)
    m = bhyt_site_registers(1.0, 10.0, gamma, d, 0.05, 0.05, c_attn=0.5, lam_attn=2.0)
    assert a.c_int == 0 and m.c_int == round(0.5 * 4 / 100 * d / 0.05**2)
    z = np.zeros((1, d), np.int64)
    assert np.all(bhyt_site_int(z, sum_of_squares(z), a) == 0)
    rng = np.random.default_rng(0)
    q = rng.integers(-128, 128, (5, d))
    qm = rng.integers(-128, 128, (5, d))
    u, v = bhyt_block_int(q, qm, a, m)
    assert np.array_equal(u, bhyt_site_int(q, sum_of_squares(q), a))
    assert np.array_equal(v, bhyt_site_int(qm, sum_of_squares(q), m))  # site M never looks at Σ qm²
    with pytest.raises(ValueError, match="int8"):
        bhyt_site_int(q * 4, sum_of_squares(q), a)
    with pytest.raises(ValueError, match="shape"):
        bhyt_site_registers(2.0, 10.0, gamma[:-1], d, 0.05, 0.05)


def test_leading_one_matches_bit_length():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.integers(1, 1 << 52, 10000), 2 ** np.arange(53) - 1 + (np.arange(53) == 0),
                        2 ** np.arange(52)])
    assert np.array_equal(leading_one(x), np.array([int(v).bit_length() - 1 for v in x]))
    assert math.isclose(INT8.max_value, 127.0)


def test_swiftmax_saturation_is_the_top_of_the_p_format():
    from vckattn.golden.swiftmax_int import out_frac_of_saturation, saturation

    fmt = SwiftMaxFormat()
    regs = swiftmax_registers(0.05, 0.05, 64, 0.0, 1.0, 8, fmt)
    assert int(swiftmax_int(np.array([1 << 22]), regs, None, fmt)[0]) == fmt.out_max  # the kernel saturates there
    for f in range(0, 17):
        assert saturation(f) == fmt.out_max * 2.0**-f and out_frac_of_saturation(saturation(f)) == f
        assert np.float32(saturation(f)) == saturation(f)  # exact in a float32 checkpoint
    assert saturation(8) == 0.99609375
    for bad in (1.0, 0.5, 0.9961):
        with pytest.raises(ValueError, match="not the top of a P format"):
            out_frac_of_saturation(bad)

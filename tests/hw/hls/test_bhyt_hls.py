"""HLS BHyT (``hw/hls/bhyt_hls.cpp``) is bit-exact with golden ``bhyt_site_int`` / ``bhyt_block_int``.

C-simulated with g++ and the ap_types headers (:mod:`vckattn.sim.hls_norm_csim`). Per register set
(from ``bhyt_site_registers``): site A's streaming top on int8 tokens (random, all-zero, ±127/−128
extremes, one-hot, tiny), site M's streaming top chained to site A's TUSER statistic
(= ``bhyt_block_int``) and with an external statistic over the whole 40-bit range, the memory-based
``bhyt_site``, and the stream framing (TUSER = S on every beat, TLAST on a token's last beat,
padding lanes ignored on input and 0 on output). The rsqrt and tanh units are checked alone too.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from vckattn.golden.bhyt_int import (
    BHyTSiteRegisters,
    NormFormat,
    bhyt_block_int,
    bhyt_site_int,
    bhyt_site_registers,
    sum_of_squares,
)
from vckattn.golden.funcunits import rsqrt, tanh_unit
from vckattn.sim.hls_norm_csim import (
    BHYT_ARG_BITS,
    BHYT_LANES,
    BHYT_MAX_D,
    HLS_DIR,
    RSQRT_IN_BITS,
    bhyt_block,
    bhyt_tb,
    norm_units,
)

pytestmark = pytest.mark.tool("g++", "hls4ml")

FMT = NormFormat()
SEED = 20260524


@pytest.fixture(scope="module", autouse=True)
def _build() -> None:
    bhyt_tb()  # compile once (cached under build/hls/)


def _tokens(rng: np.random.Generator, n_random: int, d: int) -> np.ndarray:
    """Random int8 tokens plus the special ones: zeros, ±127 / −128 extremes, one-hot, tiny values."""
    special = [
        np.zeros(d),
        np.full(d, 127),
        np.full(d, -128),
        np.where(np.arange(d) % 2 == 0, 127, -128),
        np.where(rng.random(d) < 0.5, 127, -128),
        np.eye(1, d, rng.integers(d))[0] * 127,
        np.eye(1, d, rng.integers(d))[0] * -128,
        np.eye(1, d, 0)[0],
        rng.integers(-1, 2, d),
        np.where(rng.random(d) < 0.05, rng.integers(-128, 128, d), 0),
    ]
    rand = rng.integers(-128, 128, (n_random, d))
    scaled = np.round(rng.standard_normal((n_random, d)) * rng.uniform(1, 60, (n_random, 1)))
    tokens = np.concatenate([np.array(special), rand, np.clip(scaled, -128, 127)])
    return rng.permutation(tokens.astype(np.int64))


def _gamma(rng: np.random.Generator, kind: str, d: int) -> np.ndarray:
    if kind == "pos":
        return 1.0 + 0.1 * rng.standard_normal(d)
    return rng.uniform(-2.0, 2.0, d)


# d, n random tokens, site A (lam, kappa, gamma kind, s_in), site M (lam, kappa, gamma kind, s_mid), c_attn,
# eps, s_out factor (None: the default max|γ|/127; f: max|γ|/f, so that outputs saturate), input pad value
CASES = [
    (64, 30, (1.0, 1.0, "pos", 0.05), (0.9, 1.1, "pos", 0.07), 0.5, 1e-6, None, 0),
    (256, 24, (0.5, 2.0, "signed", 0.02), (0.6, 0.8, "signed", 0.03), 2.0, 1e-2, None, 0),
    (576, 20, (0.3, 0.5, "signed", 0.1), (0.25, 0.6, "pos", 0.12), 0.0, 1e-6, 200.0, 0),
    (100, 20, (1.0, 1.0, "signed", 0.05), (0.8, 0.9, "signed", 0.06), 1.0, 1e-6, 180.0, -77),
    (3, 20, (0.7, 1.0, "pos", 0.5), (0.7, 1.0, "signed", 0.4), 0.3, 1e-6, None, 99),
    (BHYT_MAX_D, 4, (0.5, 1.0, "signed", 0.01), (0.4, 1.0, "signed", 0.011), 1.0, 1e-6, None, 0),
]


def _registers(case: tuple, rng: np.random.Generator) -> tuple[BHyTSiteRegisters, BHyTSiteRegisters]:
    d, _, (la, ka, ga, s_in), (lm, km, gm, s_mid), c_attn, eps, s_out_f, _ = case
    gamma_a, gamma_m = _gamma(rng, ga, d), _gamma(rng, gm, d)
    out_a = None if s_out_f is None else float(np.max(np.abs(gamma_a))) / s_out_f
    out_m = None if s_out_f is None else float(np.max(np.abs(gamma_m))) / s_out_f
    site_a = bhyt_site_registers(la, ka, gamma_a, d, s_in, s_in, out_a, eps=eps, fmt=FMT)
    site_m = bhyt_site_registers(lm, km, gamma_m, d, s_mid, s_in, out_m, c_attn=c_attn, lam_attn=la, eps=eps, fmt=FMT)
    return site_a, site_m


@pytest.mark.parametrize("case", CASES, ids=[f"d{c[0]}" for c in CASES])
def test_block_bit_exact(case: tuple) -> None:
    d, n_random, pad = case[0], case[1], case[-1]
    rng = np.random.default_rng(SEED + d)
    site_a, site_m = _registers(case, rng)
    q = _tokens(rng, n_random, d)
    q_mid = _tokens(rng, n_random, d)
    n = q.shape[0]
    stat_max = (1 << FMT.stat_bits) - 1
    s_ext = np.concatenate([[0, 1, 2, stat_max, stat_max - 1, 1 << 39, sum_of_squares(q)[0, 0]],
                            np.exp2(rng.uniform(0, FMT.stat_bits, n)).astype(np.int64)])[:n]
    s_ext = np.minimum(s_ext, stat_max)

    out = bhyt_block(q, q_mid, site_a, site_m, s_ext=s_ext, pad=pad)

    nb = -(-d // BHYT_LANES)
    S = sum_of_squares(q)
    u_want, v_want = bhyt_block_int(q, q_mid, site_a, site_m, FMT)
    np.testing.assert_array_equal(u_want, bhyt_site_int(q, S, site_a, FMT))
    # site A stream: u, TUSER = S on every beat, TLAST on the last beat, padding lanes 0
    np.testing.assert_array_equal(out.u[:, :d], u_want)
    np.testing.assert_array_equal(out.u[:, d:], 0)
    np.testing.assert_array_equal(out.a_user, np.broadcast_to(S, (n, nb)))
    last = np.zeros((n, nb), dtype=np.int64)
    last[:, -1] = 1
    np.testing.assert_array_equal(out.a_last, last)
    # site M chained to site A's TUSER = bhyt_block_int
    np.testing.assert_array_equal(out.v_chain[:, :d], v_want)
    np.testing.assert_array_equal(out.v_chain[:, d:], 0)
    np.testing.assert_array_equal(out.m_last, last)
    # site M with an external statistic over the whole 40-bit range
    v_ext_want = bhyt_site_int(q_mid, s_ext[:, None], site_m, FMT)
    np.testing.assert_array_equal(out.v_ext[:, :d], v_ext_want)
    np.testing.assert_array_equal(out.v_ext[:, d:], 0)
    # memory-based bhyt_site and bhyt_sum_of_squares
    np.testing.assert_array_equal(out.v_site, v_ext_want)
    np.testing.assert_array_equal(out.u_site, u_want)
    np.testing.assert_array_equal(out.s_sum, S)
    # the outputs cover a wide range (including int8 saturation where s_out is below max|γ|/127)
    for got in (u_want, v_want, v_ext_want):
        assert np.unique(got).size > (20 if d > 8 else 5)
    if case[-2] is not None:
        assert np.isin(np.concatenate([u_want.ravel(), v_want.ravel()]), (-128, 127)).any()


def test_units_bit_exact() -> None:
    """rsqrt_unit<42> and tanh_unit<37> alone: exhaustive on the dense ranges, random beyond."""
    rng = np.random.default_rng(SEED)
    pow2s = np.left_shift(1, np.arange(RSQRT_IN_BITS, dtype=np.int64))
    x = np.concatenate([np.arange(1, 1 << 17, dtype=np.int64), pow2s, pow2s - 1, pow2s + 1,
                        np.exp2(rng.uniform(0, RSQRT_IN_BITS, 60000)).astype(np.int64)])
    x = np.clip(x, 1, (1 << RSQRT_IN_BITS) - 1)
    lim = 1 << (BHYT_ARG_BITS - 1)
    a = np.concatenate([np.arange(-(1 << 16), (1 << 16) + 1, dtype=np.int64), [-lim, lim - 1, -lim + 1],
                        rng.integers(-lim, lim, 20000)])
    mant, k, y = norm_units(x, a)
    m_want, k_want = rsqrt(x, FMT.rsqrt)
    np.testing.assert_array_equal(mant, m_want)
    np.testing.assert_array_equal(k, k_want)
    np.testing.assert_array_equal(y, tanh_unit(a, FMT.tanh))


def test_driver_constants_match_header() -> None:
    """The driver's copies of the C++ constants equal bhyt_hls.h's."""
    text = (HLS_DIR / "bhyt_hls.h").read_text()
    assert re.search(rf"constexpr int BHYT_LANES = {BHYT_LANES};", text)
    assert re.search(rf"constexpr int BHYT_MAX_D = {BHYT_MAX_D};", text)
    c_bits = 16 + FMT.k_bits - 8 + 1  # rsqrt entry bits + k_bits - C_SHIFT + 1
    assert BHYT_ARG_BITS == 8 + c_bits + 1 + 1


def _extreme(k_mult: int, k_shift: int, eps_int: int, c_int: int, g_frac: int, gamma: np.ndarray) -> BHyTSiteRegisters:
    return BHyTSiteRegisters(k_mult, k_shift, eps_int, c_int, gamma.astype(np.int64), g_frac, 1.0)


def test_extreme_registers() -> None:
    """Hand-made register sets at the ends of the kernel's register ranges (the golden model accepts
    them as long as k_shift + 7 + k <= 62): k_mult = 2^18 - 1 and 3, v = 0 (eps_int = c_int = 0 and a zero
    token), eps_int = c_int = 2^40 - 1, k_shift up to 35, g_frac 0 and 31, γ = ±32767 / −32768."""
    d = 40
    rng = np.random.default_rng(SEED + 7)
    stat_max = (1 << FMT.stat_bits) - 1
    g_ext = rng.choice(np.array([-32768, -32767, 32767, 1, -1, 0]), d)
    g_rand = rng.integers(-32768, 32768, d)
    sets = [
        (_extreme((1 << 18) - 1, 0, 0, 0, 0, g_ext), _extreme((1 << 18) - 1, 3, 0, 0, 0, g_rand)),
        (_extreme(1, 0, 1, 0, 15, g_rand), _extreme(70000, 35, stat_max, stat_max, 31, g_ext)),
        (_extreme(131071, 12, 5, 0, 7, g_rand), _extreme(65536, 20, 0, 1 << 39, 3, g_rand)),
        # small v and k_mult: one LSB of the per-token scale c moves a by ~1 and the output visibly
        (_extreme(3, 0, 1, 0, 5, g_rand), _extreme(3, 0, 1, 0, 5, g_ext)),
    ]
    q = _tokens(rng, 20, d)
    q_mid = _tokens(rng, 20, d)
    n = q.shape[0]
    s_ext = np.concatenate([[0, 1, stat_max, 2, 3, 1, 0, 5, 1, 2],
                            np.exp2(rng.uniform(0, FMT.stat_bits, n - 10)).astype(np.int64)])
    for site_a, site_m in sets:
        out = bhyt_block(q, q_mid, site_a, site_m, s_ext=s_ext, pad=5)
        u_want, v_want = bhyt_block_int(q, q_mid, site_a, site_m, FMT)
        np.testing.assert_array_equal(out.u[:, :d], u_want)
        np.testing.assert_array_equal(out.v_chain[:, :d], v_want)
        np.testing.assert_array_equal(out.v_ext[:, :d], bhyt_site_int(q_mid, s_ext[:, None], site_m, FMT))
        np.testing.assert_array_equal(out.u_site, u_want)
        if site_a.g_frac == 0:  # γ up to 2^15 with no fraction bits: the int8 output saturates
            assert np.isin(u_want, (-128, 127)).any()

"""HLS SwiftMax (``hw/hls/swiftmax_hls.cpp``) is bit-exact with golden ``swiftmax_int``.

C-simulated with g++ and the ap_types headers (:mod:`vckattn.sim.hls_norm_csim`). Scores per
register set: every integer in a window around each score where the datapath changes regime
(the clamps u_lo / u_hi, P saturating at 255, P rounding to 0), random scores over the full
24-bit accumulator range, and int32 scores beyond it (input saturation), with a random keep mask
and random TUSER/TLAST through the streaming top. Hand-made register sets (A = 1 and 3/8 score
units per Q.12 LSB, c_out placed on a step of P) make a one-LSB error at the input saturation and at
the clamps visible in P; the 2^f and 2^t units are also checked alone (exhaustively). Per-head constants
(register map v2): the head index on TUSER bits [4, 9) selects b_beta[h] / c_out[h], with different sets per
head, heads switching between and inside rows, every one of the 32 entries, and the output TUSER = keep only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from vckattn.golden.fixedpoint import QFormat, saturate, shift_round
from vckattn.golden.funcunits import pow2, pow2_frac
from vckattn.golden.swiftmax_int import (
    SwiftMaxFormat,
    SwiftMaxHeads,
    SwiftMaxRegisters,
    swiftmax_head_registers,
    swiftmax_int,
    swiftmax_registers,
)
from vckattn.sim.hls_norm_csim import POW2_T_BITS, pow2_frac_unit, score_beats, swiftmax_stream, swiftmax_tb
from vckattn.sim.hls_norm_csim import pow2_unit as hls_pow2_unit

pytestmark = pytest.mark.tool("g++", "hls4ml")

FMT = SwiftMaxFormat()
SEED = 20260523
WINDOW = 2048  # integers on each side of an edge
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1

# (s_q, s_k, d, beta, gamma, out_frac), regimes the scores must reach: "lo"/"hi" = u below u_lo / above
# u_hi (the clamps), "0"/"255" = P of 0 / saturated at 255 (with a tiny A the 24-bit scores cannot reach
# the clamps; with c_out = +20 P never rounds to 0)
CASES = [
    ((0.05, 0.05, 64, 0.0, 1.0, 8), "lo hi 0 255"),  # typical layer
    ((0.02, 0.03, 32, 2.5, 4.0, 6), "lo hi 0 255"),
    ((0.1, 0.1, 128, -3.0, 0.5, 4), "lo hi 0 255"),  # negative beta
    ((1.0, 1.0, 1, 10.0, 1000.0, 0), "lo hi 0 255"),  # large A: small a_shift, few distinct P
    ((1e-3, 2e-3, 64, 0.5, 4.0, 8), "255"),  # tiny A: a_shift = 32
    ((0.05, 0.05, 64, 0.0, 2.0**-20, 0), "lo hi 255"),  # c_out = +20: P >= 48
    ((0.04, 0.06, 64, 1.0, 2.0**30, 8), "lo hi 0 255"),  # c_out = -22
    ((0.011, 0.37, 48, -7.25, 3.3, 7), "lo hi 0 255"),
]


@pytest.fixture(scope="module", autouse=True)
def _build() -> None:
    swiftmax_tb()  # compile once (cached under build/hls/)


def _u_raw(acc: np.ndarray, r: SwiftMaxRegisters) -> np.ndarray:
    """Golden u before the clamp (to check that a test hits both clamps)."""
    sat = saturate(acc, QFormat(FMT.acc_bits, 0))
    return shift_round(sat * r.a_mult, r.a_shift, "half_up") + r.b_beta


def _scores(r: SwiftMaxRegisters, rng: np.random.Generator) -> np.ndarray:
    """Edge windows + random 24-bit + beyond-24-bit scores, padded to a multiple of 4 lanes."""
    one = 1 << FMT.t_frac
    # u values (Q.12, before c_out) where the datapath changes regime
    u_edges = [r.u_lo, r.u_hi, round(math.log2(FMT.out_max + 0.5) * one) - r.c_out, -one - r.c_out,
               -r.c_out, round(math.log2(1.5) * one) - r.c_out]
    parts = []
    for u in u_edges:
        center = int(round((u - r.b_beta) * 2.0**r.a_shift / r.a_mult))
        center = min(max(center, I32_MIN + WINDOW), I32_MAX - WINDOW)
        parts.append(np.arange(center - WINDOW, center + WINDOW + 1, dtype=np.int64))
    lim = 1 << (FMT.acc_bits - 1)
    parts.append(rng.integers(-lim, lim, 40000))
    parts.append(rng.integers(I32_MIN, I32_MAX, 4000, endpoint=True))
    parts.append(np.array([I32_MIN, I32_MAX, -lim - 1, -lim, -lim + 1, lim - 1, lim, lim + 1, 0, 1, -1]))
    acc = np.concatenate(parts)
    acc = np.concatenate([acc, np.zeros(-acc.size % 4, dtype=np.int64)])
    return rng.permutation(acc)


@pytest.mark.parametrize(("case", "regimes"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_stream_bit_exact(case: tuple, regimes: str) -> None:
    s_q, s_k, d, beta, gamma, out_frac = case
    r = swiftmax_registers(s_q, s_k, d, beta, gamma, out_frac, FMT)
    rng = np.random.default_rng(SEED + d)
    acc = _scores(r, rng)
    keep = rng.random(acc.size) < 0.85
    n = acc.size // 4
    user = (keep.reshape(n, 4) * (1 << np.arange(4))).sum(axis=1)
    last = (rng.random(n) < 0.05).astype(np.int64)

    out = swiftmax_stream(acc.reshape(n, 4), user, last, r)

    want = swiftmax_int(acc, r, keep, FMT).reshape(n, 4)
    np.testing.assert_array_equal(out.p, want)
    np.testing.assert_array_equal(out.user, user)
    np.testing.assert_array_equal(out.last, last)
    assert (out.p[~keep.reshape(n, 4)] == 0).all()
    # the scores reached the regimes this case is meant to exercise
    u = _u_raw(acc, r)
    p = swiftmax_int(acc, r, None, FMT)
    reached = {"lo": (u < r.u_lo).any(), "hi": (u > r.u_hi).any(), "0": (p == 0).any(), "255": (p == FMT.out_max).any()}
    assert {k for k, hit in reached.items() if hit} >= set(regimes.split())
    assert np.unique(p).size >= (8 if case[0] >= 1.0 else 100)


def test_score_rows_with_mask() -> None:
    """Rows of a tile (Q_ROWS x KP, causal mask) through score_beats: TLAST on each row's last beat."""
    rng = np.random.default_rng(SEED)
    rows, kp = 32, 96
    r = swiftmax_registers(0.03, 0.04, 64, 1.5, 2.0, 8, FMT)
    acc = rng.integers(-(1 << 20), 1 << 20, (rows, kp))
    keep = np.tril(np.ones((rows, kp), dtype=bool), k=kp - rows)
    data, user, last = score_beats(acc, keep)
    out = swiftmax_stream(data, user, last, r)
    np.testing.assert_array_equal(out.p.reshape(rows, kp), swiftmax_int(acc, r, keep, FMT))
    np.testing.assert_array_equal(out.last.reshape(rows, kp // 4)[:, -1], 1)
    assert out.last.sum() == rows
    np.testing.assert_array_equal(out.user, user)
    assert (out.p.reshape(rows, kp)[~keep] == 0).all()


def test_pow2_unit_bit_exact() -> None:
    """The 2^t unit alone: every t in [-2^17, 2^17) plus random t over its full 25-bit range."""
    rng = np.random.default_rng(SEED + 1)
    lim = 1 << (POW2_T_BITS - 1)
    t = np.concatenate([np.arange(-(1 << 17), 1 << 17, dtype=np.int64), rng.integers(-lim, lim, 50000),
                        np.array([-lim, lim - 1])])
    got = hls_pow2_unit(t)
    want = pow2(t, FMT.t_frac, 0, FMT.out_max, FMT.pow2, "half_up")
    np.testing.assert_array_equal(got, want)


def test_pow2_frac_exhaustive() -> None:
    f = np.arange(1 << FMT.t_frac, dtype=np.int64)
    np.testing.assert_array_equal(pow2_frac_unit(f), pow2_frac(f, FMT.pow2))


def _p_step() -> int:
    """A Q.12 exponent T with P(T) != P(T + 1) (P around 100: steps every few LSBs)."""
    t = np.arange(27000, 28000, dtype=np.int64)
    p = pow2(t, FMT.t_frac, 0, FMT.out_max, FMT.pow2, "half_up")
    return int(t[np.nonzero(np.diff(p))[0][0]])


def _probe_sets() -> list[tuple[str, SwiftMaxRegisters, np.ndarray, int, int]]:
    """(name, registers, scores, edge score, inside direction): c_out puts a step of P right above or
    right below the edge's exponent, so that a one-LSB error there changes P."""
    lim = 1 << (FMT.acc_bits - 1)
    step = _p_step()
    one = dict(a_mult=1 << 22, a_shift=22, u_lo=-59093, u_hi=236371, out_frac=8)  # u = acc + b_beta
    sets = []
    for above in (0, 1):  # step between E and E + 1 (above = 0) or between E - 1 and E (above = 1)
        # input saturation: u(2^23 - 1) = 0 and u(-2^23) = -1
        for name, b_beta, edge_u, edge_acc, inside in (("sat_hi", -(lim - 1), 0, lim - 1, -1),
                                                       ("sat_lo", lim - 1, -1, -lim, 1)):
            r = SwiftMaxRegisters(b_beta=b_beta, c_out=step + above - edge_u, **one)
            acc = np.concatenate([np.arange(edge_acc - 300, edge_acc + 301), [I32_MIN, I32_MAX]])
            sets.append((f"{name}{above}", r, acc, edge_acc, inside))
        # clamps: u_hi = 5000 and u_lo = -3000 with b_beta = 0
        for name, edge_u, inside in (("clamp_hi", 5000, -1), ("clamp_lo", -3000, 1)):
            r = SwiftMaxRegisters(a_mult=1 << 22, a_shift=22, b_beta=0, u_lo=-3000, u_hi=5000,
                                  c_out=step + above - edge_u, out_frac=8)
            sets.append((f"{name}{above}", r, np.arange(edge_u - 300, edge_u + 301), edge_u, inside))
    # A = 3/8 (rounding of the product), edges of both clamps in one window each
    r = SwiftMaxRegisters(a_mult=3 << 20, a_shift=23, b_beta=-7, u_lo=-3000, u_hi=5000, c_out=step - 5000,
                          out_frac=8)
    acc = np.concatenate([np.arange(-8100, -7900), np.arange(13250, 13450), np.arange(-50, 50)])
    sets.append(("three_eighths", r, acc, 13352, -1))
    return sets


@pytest.mark.parametrize("probe", _probe_sets(), ids=lambda p: p[0])
def test_edges_one_lsb(probe: tuple) -> None:
    name, r, acc, edge_acc, inside = probe
    acc = np.concatenate([acc, np.zeros(-acc.size % 4, dtype=np.int64)])
    n = acc.size // 4
    out = swiftmax_stream(acc.reshape(n, 4), np.full(n, 15), np.zeros(n), r)
    want = swiftmax_int(acc, r, None, FMT)
    np.testing.assert_array_equal(out.p.reshape(-1), want)
    if name[-1] in "01" and (inside == -1) == (name[-1] == "1"):
        # the step is just inside the edge: P at the edge differs from its inner neighbour
        p_edge, p_in = swiftmax_int(np.array([edge_acc, edge_acc + inside]), r, None, FMT)
        assert p_edge != p_in


# ------------------------------------------------------------------------------------------- per head


def _layer(n_heads: int, seed: int) -> SwiftMaxHeads:
    """Per-head constants: one score scale, a different beta / gamma per head (some equal, some far apart)."""
    rng = np.random.default_rng(seed)
    betas = rng.uniform(-2.0, 3.0, n_heads)
    gammas = np.exp2(rng.uniform(-1.0, 4.0, n_heads))
    betas[:2], gammas[:2] = 0.0, 1.0  # two equal heads
    heads = swiftmax_head_registers(0.04, 0.05, 64, betas, gammas, 7, n_heads, FMT)
    assert len({(r.b_beta, r.c_out) for r in heads}) >= n_heads - 1
    return heads


@pytest.mark.parametrize("n_heads", [3, 12, 32])
def test_stream_per_head_bit_exact(n_heads: int) -> None:
    """Random scores, keep and a random head per beat (switches inside rows and between them)."""
    heads = _layer(n_heads, SEED + n_heads)
    rng = np.random.default_rng(SEED + 100 + n_heads)
    n = 6000
    acc = np.concatenate([rng.normal(0.0, 6000.0, 4 * n - 800).astype(np.int64),  # P spread over 0..255
                          rng.integers(-(1 << 23), 1 << 23, 400), rng.integers(I32_MIN, I32_MAX, 400, endpoint=True)])
    rng.shuffle(acc)
    keep = rng.random(acc.size) < 0.9
    head = rng.integers(0, n_heads, n)
    keep_bits = (keep.reshape(n, 4) * (1 << np.arange(4))).sum(axis=1)
    last = (rng.random(n) < 0.1).astype(np.int64)

    out = swiftmax_stream(acc.reshape(n, 4), keep_bits + (head << 4), last, heads)

    want = swiftmax_int(acc, heads, keep, FMT, head=np.repeat(head, 4)).reshape(n, 4)
    np.testing.assert_array_equal(out.p, want)
    np.testing.assert_array_equal(out.user, keep_bits)  # the head bits do not pass through
    np.testing.assert_array_equal(out.last, last)
    # the heads really differ: with head 0's constants everywhere most beats of the other heads would change
    other = head != 0
    assert (swiftmax_int(acc, heads[0], keep, FMT).reshape(n, 4)[other] != want[other]).mean() > 0.3
    # same via head= (TUSER head field added by the driver)
    np.testing.assert_array_equal(swiftmax_stream(acc.reshape(n, 4), keep_bits, last, heads, head=head).p, want)


def test_rows_of_several_heads() -> None:
    """Tiles of rows, each row of its own head (a tile of one query head after another), heads switching row to row; the
    same scores under every one of the 32 entries (the whole memory is addressed)."""
    heads = _layer(FMT.max_heads, SEED + 7)
    rng = np.random.default_rng(SEED + 8)
    rows, kp = 64, 48
    acc = rng.normal(0.0, 6000.0, (rows, kp)).astype(np.int64)
    keep = np.tril(np.ones((rows, kp), dtype=bool), k=kp - rows // 2)
    row_head = np.arange(rows) % FMT.max_heads
    data, user, last = score_beats(acc, keep, head=row_head)
    out = swiftmax_stream(data, user, last, heads)
    want = swiftmax_int(acc, heads, keep, FMT, head=row_head[:, None])
    np.testing.assert_array_equal(out.p.reshape(rows, kp), want)
    assert out.last.sum() == rows
    np.testing.assert_array_equal(out.user, user & 0xF)
    for h in (0, 5, 31):  # rows of head h equal the per-layer kernel with head h's registers
        sel = row_head == h
        np.testing.assert_array_equal(out.p.reshape(rows, kp)[sel], swiftmax_int(acc[sel], heads[h], keep[sel], FMT))


def test_unused_entries_and_one_set() -> None:
    """A single SwiftMaxRegisters is head 0 of a one-head layer (entries 1.. written 0); a layer of one head
    with head 0 on TUSER equals the per-layer kernel."""
    r = swiftmax_registers(0.03, 0.04, 64, 1.5, 2.0, 8, FMT)
    rng = np.random.default_rng(SEED + 9)
    acc = rng.integers(-(1 << 20), 1 << 20, (8, 32))
    data, user, last = score_beats(acc)
    a = swiftmax_stream(data, user, last, r)
    b = swiftmax_stream(data, user, last, SwiftMaxHeads.broadcast(r, 1))
    np.testing.assert_array_equal(a.p, b.p)
    np.testing.assert_array_equal(a.p.reshape(8, 32), swiftmax_int(acc, r, None, FMT))
    with pytest.raises(ValueError, match="head index"):
        score_beats(acc, head=FMT.max_heads)

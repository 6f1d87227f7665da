"""Error budgets of the integer operators against float64 references.

Each ``measure_*`` function runs one operator over its input space —
exhaustively when it has at most 2^20 values, otherwise over at least 10^6 seeded
random values plus edge cases — and returns an :class:`ErrorReport` with the
measured max/mean error, the per-element budget (documented next to each
function) and how many elements exceeded it. Tests assert ``violations == 0``;
``vckattn report errors`` prints the table that goes in the README.

Errors are in the operator's output LSBs unless ``unit`` says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from .aie_matmul import INT8, UINT8, srs, tile_matmul
from .bhyt_int import NormFormat, bhyt_reference, bhyt_site_int, bhyt_site_registers, sum_of_squares
from .funcunits import Pow2Config, RecipConfig, TanhConfig, pow2_frac, recip, rsqrt, tanh_unit
from .online_softmax_int import (
    OnlineSoftmaxFormat,
    online_softmax_int,
    online_softmax_registers,
    softmax_reference,
)
from .requant import requant_registers, requantize
from .rmsnorm_int import rmsnorm_int, rmsnorm_reference, rmsnorm_registers
from .swiftmax_int import (
    SwiftMaxFormat,
    pow2_table_rel_error,
    swiftmax_error_budget,
    swiftmax_int,
    swiftmax_reference,
    swiftmax_registers,
)

LN2 = math.log(2.0)


@dataclass
class ErrorReport:
    """Measured error of one operator against its float64 reference."""

    operator: str
    inputs: int
    exhaustive: bool
    unit: str
    max_error: float
    mean_error: float
    budget_max: float
    violations: int
    budget: str

    def as_dict(self) -> dict:
        return asdict(self)


def _report(name: str, err: np.ndarray, bound: np.ndarray | float, exhaustive: bool, unit: str,
            budget: str) -> ErrorReport:
    err = np.asarray(err, dtype=np.float64)
    bound_arr = np.broadcast_to(np.asarray(bound, dtype=np.float64), err.shape)
    return ErrorReport(name, int(err.size), exhaustive, unit, float(err.max()), float(err.mean()),
                       float(bound_arr.max()), int(np.count_nonzero(err > bound_arr)), budget)


def pwl_bound(f2max: float, step: float) -> float:
    """Linear interpolation between exact samples is off by at most ``step²/8 · max|f''|``."""
    return step * step / 8.0 * f2max


# ----------------------------------------------------------------------------- function units


def measure_pow2(cfg: Pow2Config = Pow2Config()) -> ErrorReport:
    """2^f unit, all ``2^in_frac`` inputs. Budget (UQ1.out_frac LSBs): PWL error with
    ``max (2^x)'' = 2 ln²2`` + 0.5 (table rounding) + 1 (floor of the interpolation)."""
    f = np.arange(1 << cfg.in_frac, dtype=np.int64)
    got = pow2_frac(f, cfg).astype(np.float64)
    ref = np.exp2(f / float(1 << cfg.in_frac)) * 2.0**cfg.out_frac
    bound = pwl_bound(2 * LN2**2, 2.0**-cfg.lut_bits) * 2.0**cfg.out_frac + 1.5
    return _report("pow2_frac (2^f, f in [0,1))", np.abs(got - ref), bound, True, "LSB of UQ1.15",
                   "PWL h²/8·2ln²2 + 1.5 LSB")


def _mantissa_budget(f2max_rel: float, step: float, cfg: RecipConfig) -> float:
    # relative: mantissa truncation 2^-mant_bits (f' <= f on these ranges) + PWL + 1.5 LSB over min value 0.5
    return 2.0**-cfg.mant_bits + pwl_bound(f2max_rel, step) / 0.5 + 1.5 * 2.0**-cfg.out_frac / 0.5


def measure_recip(cfg: RecipConfig = RecipConfig()) -> ErrorReport:
    """1/x unit over every x in [1, 2^20). Relative error; budget: mantissa truncation
    2^-mant_bits + PWL (f'' = 2/m³ <= 2 on [1,2]) + 1.5 LSB of the (>= 0.5) output."""
    x = np.arange(1, 1 << 20, dtype=np.int64)
    mant, e = recip(x, cfg)
    got = mant * np.exp2(-(cfg.out_frac + e).astype(np.float64))
    err = np.abs(got * x - 1.0)
    return _report("recip (1/x)", err, _mantissa_budget(2.0, 2.0**-cfg.lut_bits, cfg), True, "relative",
                   "2^-14 + PWL + 1.5 LSB/0.5")


def measure_rsqrt(cfg: RecipConfig = NormFormat().rsqrt) -> ErrorReport:
    """1/sqrt(x) unit over every x in [1, 2^20). Relative; budget as recip with
    f'' = 0.75 m^-2.5 <= 0.75 on [1, 2] (the [2, 4] octave has the same step relative to m)."""
    x = np.arange(1, 1 << 20, dtype=np.int64)
    mant, k = rsqrt(x, cfg)
    got = mant * np.exp2(-(cfg.out_frac + k).astype(np.float64))
    err = np.abs(got * np.sqrt(x) - 1.0)
    return _report("rsqrt (1/sqrt x)", err, _mantissa_budget(0.75, 2.0**-cfg.lut_bits, cfg), True,
                   "relative", "2^-14 + PWL + 1.5 LSB/0.5")


def tanh_budget(cfg: TanhConfig) -> float:
    """Absolute budget of :func:`funcunits.tanh_unit`: PWL (max|tanh''| = 0.7698) + 1.5 LSB
    + saturation ``1 - tanh(2^range_log2)``."""
    step = float(1 << cfg.range_log2) / (1 << cfg.lut_bits)
    return pwl_bound(0.7698, step) + 1.5 * 2.0**-cfg.out_frac + (1.0 - math.tanh(1 << cfg.range_log2))


def measure_tanh(cfg: TanhConfig = NormFormat().tanh) -> ErrorReport:
    """tanh unit over every Q.in_frac input in [-16, 16) (2^17 values, saturation included)."""
    a = np.arange(-(1 << (cfg.in_frac + 4)), 1 << (cfg.in_frac + 4), dtype=np.int64)
    got = tanh_unit(a, cfg) * 2.0**-cfg.out_frac
    err = np.abs(got - np.tanh(a / float(1 << cfg.in_frac)))
    return _report("tanh (Q.12 -> Q1.15)", err, tanh_budget(cfg), True, "absolute",
                   "PWL h²/8·0.77 + 1.5 LSB + 1 - tanh(8)")


# ----------------------------------------------------------------------------- normalizers

SWIFTMAX_CASES = (  # (s_q, s_k, d, beta, gamma, out_frac)
    (0.05, 0.05, 64, 2.5, 100.0, 8),
    (0.02, 0.03, 32, 4.4, 2.9, 8),
    (0.1, 0.1, 64, -1.0, 0.5, 4),
)


def measure_swiftmax(fmt: SwiftMaxFormat = SwiftMaxFormat()) -> ErrorReport:
    """SwiftMax kernel over every score in [-2^19, 2^19) (2^20 values) for each register set of
    :data:`SWIFTMAX_CASES`; budget per element from :func:`swiftmax_int.swiftmax_error_budget`."""
    acc = np.arange(-(1 << 19), 1 << 19, dtype=np.int64)
    errs, bounds = [], []
    for s_q, s_k, d, beta, gamma, of in SWIFTMAX_CASES:
        regs = swiftmax_registers(s_q, s_k, d, beta, gamma, of, fmt)
        got = swiftmax_int(acc, regs, fmt=fmt)
        ref = np.minimum(swiftmax_reference(acc, s_q, s_k, d, beta, gamma, of), fmt.out_max)
        errs.append(np.abs(got - ref))
        bounds.append(swiftmax_error_budget(acc, regs, s_q, s_k, d, beta, gamma, fmt))
    return _report("swiftmax (score -> P uint8)", np.concatenate(errs), np.concatenate(bounds), True,
                   "LSB of P", "0.5 + p·(2^|Δt| − 1 + e_tab·2^|Δt|)")


def online_softmax_budget(acc: np.ndarray, keep: np.ndarray, s_q: float, s_k: float, d: int,
                          fmt: OnlineSoftmaxFormat) -> np.ndarray:
    """Per-element budget (LSB of P) of the online-softmax kernel vs float softmax::

        Δu   = max_row|acc|·δA + 0.5·2^-F        (log2 units; numerator and sum both move)
        e_l  = e_tab + (0.5·Sk + blocks)·2^-sum_frac / 0.5       (l >= 0.5: ceil max)
        rel  = (1 + e_tab)(1 + e_l)(1 + e_recip)·2^(2Δu) − 1
        bound = r + p_ref·rel + 2^-out_frac_e2·2^out_frac        (e2 rounding, absolute)

    ``r`` is the output rounding: 0.5 for ``p_rounding="nearest"``; 1 for ``"cumulative"`` (each ``p_j`` is the
    difference of two rounded running sums, ``(C_j + ε_j) − (C_{j−1} + ε_{j−1})`` with ``|ε| ≤ 0.5``; in exchange the
    row's sum is rounded once).
    """
    one = 1 << fmt.t_frac
    regs = online_softmax_registers(s_q, s_k, d, fmt)
    a = s_q * s_k / math.sqrt(d) / LN2 * one
    da = abs(regs.a_mult * 2.0**-regs.a_shift - a) / one
    amax = np.max(np.where(keep, np.abs(acc), 0), axis=-1, keepdims=True)
    du = amax * da + 0.5 / one
    sk = acc.shape[-1]
    e_tab = pow2_table_rel_error(fmt.pow2)
    e_l = e_tab + (0.5 * sk + -(-sk // fmt.block)) * 2.0**-fmt.sum_frac / 0.5
    e_recip = _mantissa_budget(2.0, 2.0**-fmt.recip.lut_bits, fmt.recip)
    rel = (1 + e_tab) * (1 + e_l) * (1 + e_recip) * np.exp2(2 * du) - 1
    p_ref = softmax_reference(acc, s_q, s_k, d, keep, fmt.out_frac)
    r = 0.5 if fmt.p_rounding == "nearest" else 1.0
    return r + p_ref * rel + 2.0 ** (-fmt.pow2.out_frac + 1) * 2.0**fmt.out_frac


def online_softmax_cases(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random rows (≥ 10^6 scores in all) plus edge cases: fully masked rows, one key,
    a 4096-key row, saturating scores, equal scores."""
    rng = np.random.default_rng(seed)
    cases = []
    for rows, sk, spread in ((4000, 64, 3000.0), (1500, 512, 1500.0), (300, 128, 60000.0)):
        acc = np.rint(rng.normal(0, spread, (rows, sk))).astype(np.int64)
        keep = rng.random((rows, sk)) > 0.25
        keep[: rows // 50] = False  # fully masked rows
        keep[rows // 50: rows // 25] = False
        keep[rows // 50: rows // 25, 0] = True  # rows with a single key
        cases.append((acc, keep))
    big = np.rint(rng.normal(0, 2000, (4, 4096))).astype(np.int64)
    cases.append((big, np.ones_like(big, dtype=bool)))
    edge = np.array([[1 << 23] * 8, [-(1 << 23)] * 8, [0] * 8, [(1 << 23) - 1, -(1 << 23)] * 4], dtype=np.int64)
    cases.append((edge, np.ones_like(edge, dtype=bool)))
    return cases


def measure_online_softmax(fmt: OnlineSoftmaxFormat = OnlineSoftmaxFormat(), s_q: float = 0.05, s_k: float = 0.05,
                           d: int = 64) -> ErrorReport:
    """Online-softmax kernel vs float softmax over :func:`online_softmax_cases`."""
    regs = online_softmax_registers(s_q, s_k, d, fmt)
    errs, bounds = [], []
    for acc, keep in online_softmax_cases():
        got = online_softmax_int(acc, regs, keep, fmt)
        ref = np.minimum(softmax_reference(acc, s_q, s_k, d, keep, fmt.out_frac), fmt.out_max)
        errs.append(np.abs(got - ref).ravel())
        bounds.append(online_softmax_budget(acc, keep, s_q, s_k, d, fmt).ravel())
    r = "0.5" if fmt.p_rounding == "nearest" else "1"
    return _report("online softmax (scores -> P uint8)", np.concatenate(errs), np.concatenate(bounds), False,
                   "LSB of P", f"{r} + p·rel(u, table, sum, recip) + e2 rounding")


# ----------------------------------------------------------------------------- norms


def norm_cases(d: int = 256, tokens: int = 4096, seed: int = 0) -> np.ndarray:
    """int8 tokens: heavy-tailed random (≥ 10^6 values) plus all-zero, extreme, one-hot, constant."""
    rng = np.random.default_rng(seed)
    x = rng.standard_t(4, size=(tokens, d))
    q = np.clip(np.rint(x / np.abs(x).max() * 127), -128, 127).astype(np.int64)
    edge = np.zeros((6, d), dtype=np.int64)
    edge[1] = 127
    edge[2] = -128
    edge[3, 5] = 127
    edge[4] = 1
    edge[5, ::2], edge[5, 1::2] = 127, -128
    return np.concatenate([q, edge])


def bhyt_budget(q: np.ndarray, v: np.ndarray, arg_ref: np.ndarray, g_real: np.ndarray, g_frac: int,
                fmt: NormFormat) -> np.ndarray:
    """Per-element budget (output LSBs) of a BHyT site::

        rel_arg = e_rsqrt + 0.5/v (eps_int, c_int rounding) + 2^-(k_bits-2) (k_mult) + 2^-20 (c)
        |Δarg|  = |arg|·rel_arg + 0.5·2^-arg_frac
        bound   = 0.5 + |γ/s_out|·(e_tanh + |Δarg|) + 0.5·2^-g_frac
    """
    e_rsqrt = _mantissa_budget(0.75, 2.0**-fmt.rsqrt.lut_bits, fmt.rsqrt)
    rel_arg = e_rsqrt + 0.5 / v + 2.0 ** -(fmt.k_bits - 2) + 2.0**-20
    d_arg = np.abs(arg_ref) * rel_arg + 0.5 * 2.0**-fmt.arg_frac
    return 0.5 + np.abs(g_real) * (tanh_budget(fmt.tanh) + d_arg) + 0.5 * 2.0**-g_frac


def measure_bhyt(fmt: NormFormat = NormFormat(), site: str = "A") -> ErrorReport:
    """BHyT site A (exact statistic) or M (ŝ² = s² + c_attn λ_A²/κ², no reduction) vs float64."""
    q = norm_cases()
    d = q.shape[-1]
    rng = np.random.default_rng(1)
    gamma = rng.uniform(0.25, 1.75, d)
    s_x, lam, kappa = 0.05, (2.0 if site == "A" else 1.0), 10.0
    x = q * s_x
    if site == "A":
        q_in, s_in, c_attn, lam_a = q, s_x, 0.0, 0.0
    else:  # the MLP-site input h' = h + Attn(u), requantized with its own scale
        xm = x + rng.normal(0, 0.3, x.shape)
        s_in = float(np.abs(xm).max() / 127)
        q_in, c_attn, lam_a = np.clip(np.rint(xm / s_in), -128, 127).astype(np.int64), 0.4, 2.0
    regs = bhyt_site_registers(lam, kappa, gamma, d, s_in, s_x, c_attn=c_attn, lam_attn=lam_a, fmt=fmt)
    stat = sum_of_squares(q)
    got = bhyt_site_int(q_in, stat, regs, fmt)
    s2 = (x * x).mean(axis=-1, keepdims=True) + c_attn * lam_a**2 / kappa**2
    x_in = q_in * s_in
    ref = np.clip(bhyt_reference(x_in, lam, kappa, gamma, s2) / regs.s_out, -128, 127)
    arg_ref = lam * x_in / (kappa * np.sqrt(s2 + 1e-6))
    v = np.maximum(stat + regs.c_int + regs.eps_int, 1).astype(np.float64)
    bound = bhyt_budget(q_in, v, arg_ref, gamma / regs.s_out, regs.g_frac, fmt)
    name = "BHyT site A (exact s²)" if site == "A" else "BHyT site M (ŝ² = s² + C)"
    return _report(name, np.abs(got - ref), bound, False, "LSB of int8 out",
                   "0.5 + |γ/s|·(e_tanh + |Δarg|) + 0.5·2^-g_frac")


def measure_rmsnorm(fmt: NormFormat = NormFormat()) -> ErrorReport:
    """Integer RMSNorm vs float64. Budget: 0.5 + |out|·(e_rsqrt + 0.5/v) + |q·r|·0.5·2^-g_frac·..."""
    q = norm_cases()
    d = q.shape[-1]
    gamma = np.random.default_rng(2).uniform(0.25, 1.75, d)
    s_x = 0.05
    x = q * s_x
    ref_f = rmsnorm_reference(x, gamma)
    s_out = float(np.abs(ref_f).max() / 127)
    regs = rmsnorm_registers(gamma, d, s_x, s_out, fmt=fmt)
    got = rmsnorm_int(q, regs, fmt)
    ref = np.clip(ref_f / s_out, -128, 127)
    v = np.maximum(sum_of_squares(q) + regs.eps_int, 1).astype(np.float64)
    e_rsqrt = _mantissa_budget(0.75, 2.0**-fmt.rsqrt.lut_bits, fmt.rsqrt)
    unit = np.abs(q) * math.sqrt(d) / np.sqrt(v)  # |x|/rms without γ, in units of 1/s_out·s_out
    bound = 0.5 + np.abs(ref) * (e_rsqrt + 0.5 / v) + unit / s_out * 0.5 * 2.0**-regs.g_frac
    return _report("RMSNorm (baseline)", np.abs(got - ref), bound, False, "LSB of int8 out",
                   "0.5 + |y|·(e_rsqrt + 0.5/v) + |x̂|·Δγ")


# ----------------------------------------------------------------------------- matmul and requant


def measure_requant() -> ErrorReport:
    """Requantization over every accumulator in [-2^19, 2^19) for several ratios.
    Budget: 0.5 + |acc|·|mult·2^-shift − ratio| (before saturation)."""
    acc = np.arange(-(1 << 19), 1 << 19, dtype=np.int64)
    errs, bounds = [], []
    for ratio in (1.0 / 3000.0, 0.0123, 2.0**-12, 7.77e-6):
        regs = requant_registers(ratio)
        got = requantize(acc, regs)
        ref = np.clip(acc * ratio, -128, 127)
        errs.append(np.abs(got - ref))
        bounds.append(0.5 + np.abs(acc) * abs(float(regs.mult) * 2.0 ** -float(regs.shift) - ratio))
    return _report("requantize (int32 -> int8)", np.concatenate(errs), np.concatenate(bounds), True,
                   "LSB of int8", "0.5 + |acc|·|Δratio|")


def measure_tile_matmul(seed: int = 0) -> ErrorReport:
    """AIE tile matmul (int8 × int8 and uint8 × int8) vs Python integers; must be exact, and
    ``srs`` vs exact rational rounding (≤ 0.5 LSB)."""
    rng = np.random.default_rng(seed)
    errs = []
    for (m, k, n), a_fmt in (((64, 64, 96), INT8), ((37, 200, 45), INT8), ((128, 512, 64), UINT8)):
        a = rng.integers(a_fmt.min_int, a_fmt.max_int + 1, (m, k))
        b = rng.integers(-128, 128, (k, n))
        got = tile_matmul(a, b, a_fmt=a_fmt)
        ref = np.array(a.astype(object).dot(b.astype(object)), dtype=np.int64)
        errs.append(np.abs(got - ref).ravel().astype(np.float64))
        out = srs(got, 9)
        errs.append(np.maximum(np.abs(out - np.clip(ref / 512.0, -128, 127)) - 0.5, 0).ravel())
    return _report("AIE tile matmul + srs", np.concatenate(errs), 0.0, False, "LSB", "exact")


def all_reports() -> list[ErrorReport]:
    """Every operator's report, in README order."""
    return [measure_tile_matmul(), measure_requant(), measure_pow2(), measure_recip(), measure_rsqrt(),
            measure_tanh(), measure_swiftmax(), measure_online_softmax(), measure_bhyt(site="A"),
            measure_bhyt(site="M"), measure_rmsnorm()]


__all__ = ["ErrorReport", "all_reports"]

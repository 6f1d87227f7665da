"""Online-softmax normalizer, bit-exact integer model — the baseline SwiftMax replaces.

The full description: ``docs/internals/golden.md``, section ``golden/online_softmax_int.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .fixedpoint import QFormat, saturate, shift_round
from .funcunits import LOG2E, Pow2Config, RecipConfig, pow2, recip, recip_table
from .regmap import Reg, RegisterMap, RegisterValues
from .swiftmax_int import fold_multiplier

NEG_SENTINEL = -(1 << 47)  # "minus infinity" for the integer running max: below every u (|u| < 2^46)
#: the roundings of P (:attr:`OnlineSoftmaxFormat.p_rounding`)
P_ROUNDINGS = ("cumulative", "nearest")


@dataclass(frozen=True)
class OnlineSoftmaxFormat:
    """Build-time parameters of the online-softmax kernel."""

    acc_bits: int = 24
    a_bits: int = 24
    t_frac: int = 12
    sum_frac: int = 20  # fractional bits of the running sum l
    sum_bits: int = 34  # width of l (holds up to 2^(sum_bits - sum_frac) keys)
    out_bits: int = 8
    out_frac: int = 8  # P in UQ0.8: 1.0 saturates to 255/256
    block: int = 4  # scores per beat (lanes)
    pow2: Pow2Config = field(default_factory=lambda: Pow2Config(in_frac=12, lut_bits=6, out_frac=15))
    recip: RecipConfig = field(default_factory=lambda: RecipConfig(mant_bits=14, lut_bits=7, out_frac=15))
    #: how P is rounded to ``out_bits``: ``cumulative`` (the row's running sum, error feedback) or ``nearest``
    #: (each element on its own); see the module docstring
    p_rounding: str = "cumulative"

    def __post_init__(self) -> None:
        if self.p_rounding not in P_ROUNDINGS:
            raise ValueError(f"p_rounding must be one of {P_ROUNDINGS}, got {self.p_rounding!r}")

    @property
    def out_max(self) -> int:
        return (1 << self.out_bits) - 1

    def max_keys(self) -> int:
        """Longest row whose sum cannot overflow ``l``."""
        return 1 << (self.sum_bits - self.sum_frac)


#: Value of the kernel's read-only ID register.
ONLINE_SOFTMAX_ID = 0x05F70001
#: Value of its VERSION register: 2 = P rounded cumulatively along the row (1: each P on its own); the registers
#: are the same
ONLINE_SOFTMAX_VERSION = 2


def online_softmax_regmap(max_keys: int = 1024) -> RegisterMap:
    """The online-softmax kernel's AXI4-Lite register map: the one declaration of its registers
    (``max_keys``, the longest row the build handles, is the reset value of a read-only register)."""
    return RegisterMap(
        [
            Reg("a_mult", 24, signed=True, doc="A·2^t_frac ≈ a_mult·2^-a_shift (s24)"),
            Reg("a_shift", 6, doc="right shift of acc·a_mult, round half up (0..62)"),
            Reg("rows", 32, access="ro", doc="rows output (m_axis TLAST handshakes) since reset"),
            Reg("overflow_rows", 32, access="ro", doc="rows longer than max_keys since reset (their P are 0)"),
            Reg("max_keys", 32, access="ro", reset=max_keys, doc="longest row handled (build constant)"),
        ],
        ident=ONLINE_SOFTMAX_ID,
        version=ONLINE_SOFTMAX_VERSION,
    )


class OnlineSoftmaxRegisters(RegisterValues):
    """Runtime constants: the writable registers of :func:`online_softmax_regmap`
    (``A·2^t_frac ≈ a_mult·2^-a_shift`` with ``A = s_q s_k log2e / sqrt(d)``)."""

    regmap = online_softmax_regmap()


def online_softmax_registers(s_q: float, s_k: float, d: int,
                             fmt: OnlineSoftmaxFormat = OnlineSoftmaxFormat()) -> OnlineSoftmaxRegisters:
    """Float parameters -> register values (the only place they are computed)."""
    if not (s_q > 0 and s_k > 0 and d >= 1 and math.isfinite(s_q * s_k)):
        raise ValueError(f"need finite s_q, s_k > 0 and d >= 1 (got {s_q}, {s_k}, {d})")
    a_mult, a_shift = fold_multiplier(s_q * s_k * LOG2E / math.sqrt(d) * (1 << fmt.t_frac), fmt.a_bits)
    return OnlineSoftmaxRegisters(a_mult, a_shift)


def online_softmax_int(acc: np.ndarray, regs: OnlineSoftmaxRegisters, keep: np.ndarray | None = None,
                       fmt: OnlineSoftmaxFormat = OnlineSoftmaxFormat()) -> np.ndarray:
    """The online-softmax kernel on integer scores ``acc`` ``(..., Sk)``; returns P ``(..., Sk)``."""
    acc = saturate(np.asarray(acc, dtype=np.int64), QFormat(fmt.acc_bits, 0))
    sk = acc.shape[-1]
    if sk > fmt.max_keys():
        raise ValueError(f"row of {sk} keys exceeds the kernel's maximum {fmt.max_keys()}")
    keep_b = np.ones(acc.shape, dtype=bool) if keep is None else np.broadcast_to(keep, acc.shape)
    one = 1 << fmt.t_frac
    u = shift_round(acc * regs.a_mult, regs.a_shift, "half_up")
    u_masked = np.where(keep_b, u, NEG_SENTINEL)
    sum_max = (1 << fmt.sum_frac)
    m = np.full(acc.shape[:-1] + (1,), NEG_SENTINEL, dtype=np.int64)
    l = np.zeros_like(m)
    p2 = fmt.pow2.table()
    for start in range(0, sk, fmt.block):
        ub = u_masked[..., start:start + fmt.block]
        kb = keep_b[..., start:start + fmt.block]
        mb = (ub.max(axis=-1, keepdims=True) + one - 1) >> fmt.t_frac  # ceil; sentinel stays very negative
        m_new = np.maximum(m, mb)
        l = shift_round(l, np.minimum(m_new - m, 62), "floor")
        e = pow2(ub - (m_new << fmt.t_frac), fmt.t_frac, fmt.sum_frac, sum_max, fmt.pow2, "half_up", p2)
        l = l + np.where(kb, e, 0).sum(axis=-1, keepdims=True)
        m = m_new
    any_key = l > 0
    r_mant, r_exp = recip(np.where(any_key, l, 1), fmt.recip, recip_table(fmt.recip))
    e2 = pow2(u - (m << fmt.t_frac), fmt.t_frac, fmt.pow2.out_frac, 1 << fmt.pow2.out_frac, fmt.pow2, "half_up", p2)
    shift = fmt.pow2.out_frac + fmt.recip.out_frac - fmt.sum_frac - fmt.out_frac + r_exp
    x = np.where(keep_b, e2 * r_mant, 0)
    if fmt.p_rounding == "nearest":
        p = shift_round(x, shift, "half_up")
    else:  # the rounded running sum, differenced (x >= 0, so p >= 0)
        q = shift_round(np.cumsum(x, axis=-1), shift, "half_up")
        p = np.diff(q, axis=-1, prepend=0)
    p = np.minimum(p, fmt.out_max)
    return np.where(keep_b & any_key, p, 0)


def softmax_reference(acc: np.ndarray, s_q: float, s_k: float, d: int, keep: np.ndarray | None,
                      out_frac: int) -> np.ndarray:
    """Float64 softmax of ``z = s_q s_k acc / sqrt(d)`` times ``2^out_frac`` (masked → 0)."""
    z = np.asarray(acc, dtype=np.float64) * (s_q * s_k / math.sqrt(d))
    keep_b = np.ones(z.shape, dtype=bool) if keep is None else np.broadcast_to(keep, z.shape)
    z = np.where(keep_b, z, -np.inf)
    mx = z.max(axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.exp(z - mx)
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s > 0, s, 1.0) * 2.0**out_frac

"""Integer RMSNorm, the baseline the BHyT approximate-variance unit is compared with.

``y = γ ⊙ x / sqrt(mean(x²) + ε)`` on an int8 token ``q`` (``x = q · s_x``)::

    S    = Σ q²                                      reduction over the token (needs a token buffer)
    r, k = rsqrt(max(S + eps_int, 1))                UQ1.15 mantissa and exponent
    out  = saturate8(round_half_up(q · r · g[i] >> (15 + k + g_frac)))
           g[i] = γ_i √d / s_out · 2^g_frac          (s_x cancels except in eps_int)

The second RMSNorm of a block needs its own reduction over ``h' = h + Attn(u)``;
BHyT's second site replaces it by a constant (:mod:`.bhyt_int`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .bhyt_int import INT8, NormFormat, _gamma_register, check_g_frac, sum_of_squares, token_engine_regmap
from .fixedpoint import QFormat, quantize, saturate, shift_round
from .funcunits import rsqrt, rsqrt_octave_table
from .regmap import Reg, RegisterMap, wide_regs, wide_values


@dataclass(frozen=True)
class RMSNormRegisters:
    """eps_int: ``ε d / s_x²``; gamma: ``γ_i √d / s_out · 2^g_frac`` (int16); s_out: output scale."""

    eps_int: int
    gamma: np.ndarray
    g_frac: int
    s_out: float


def rmsnorm_registers(gamma: np.ndarray, d: int, s_x: float, s_out: float, eps: float = 1e-6,
                      fmt: NormFormat = NormFormat()) -> RMSNormRegisters:
    """Float parameters -> register values of the integer RMSNorm."""
    gamma = np.asarray(gamma, dtype=np.float64)
    if gamma.shape != (d,):
        raise ValueError(f"gamma must have shape ({d},), got {gamma.shape}")
    if not (s_x > 0 and s_out > 0 and math.isfinite(s_x) and math.isfinite(s_out)):
        raise ValueError(f"scales must be finite and > 0 (got s_x={s_x}, s_out={s_out})")
    eps_int = int(saturate(quantize(eps * d / s_x**2, QFormat(62, 0), "half_even"),
                           QFormat(fmt.stat_bits, 0, signed=False))[()])
    g, g_frac = _gamma_register(gamma * math.sqrt(d) / s_out, fmt.g_bits)
    return RMSNormRegisters(eps_int, g, g_frac, float(s_out))


def rmsnorm_int(q: np.ndarray, regs: RMSNormRegisters, fmt: NormFormat = NormFormat()) -> np.ndarray:
    """Integer RMSNorm of int8 tokens ``q`` ``(..., d)`` -> int8 with scale ``regs.s_out``."""
    q = np.asarray(q, dtype=np.int64)
    if not np.all(INT8.fits(q)):
        raise ValueError("RMSNorm input must be int8 raw values")
    v = np.maximum(sum_of_squares(q) + regs.eps_int, 1)
    r, k = rsqrt(v, fmt.rsqrt, rsqrt_octave_table(fmt.rsqrt))
    out = shift_round(q * r * regs.gamma, fmt.rsqrt.out_frac + k + regs.g_frac, "half_up")
    return saturate(out, fmt.out_fmt)


def rmsnorm_reference(x: np.ndarray, gamma: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Float64 RMSNorm."""
    return np.asarray(gamma) * x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


#: ID register value of the RMSNorm kernel.
RMSNORM_ID = 0x2A5E0001


def rmsnorm_regmap(lanes: int = 4, max_d: int = 1024, fmt: NormFormat = NormFormat()) -> RegisterMap:
    """The RMSNorm kernel's AXI4-Lite register map (the one declaration; ``gamma`` has one read port per lane)."""
    return token_engine_regmap(
        [*wide_regs("eps_int", fmt.stat_bits, "eps*d/s_x^2 (saturated)"),
         Reg("g_frac", 5, doc="fraction bits of the gamma entries")],
        lanes, max_d, fmt, RMSNORM_ID)


def rmsnorm_register_values(regs: RMSNormRegisters, fmt: NormFormat = NormFormat()) -> dict[str, int]:
    """Golden registers -> ``{register name: value}`` (``eps_int`` split into words).

    Raises ``ValueError`` if ``g_frac`` is outside [0, 31] or ``eps_int`` exceeds ``stat_bits``."""
    return {**wide_values("eps_int", regs.eps_int, fmt.stat_bits), "g_frac": check_g_frac(regs.g_frac)}

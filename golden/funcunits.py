"""Bit-exact table-based function units shared by the hardware operators.

The full description: ``docs/internals/golden.md``, section ``golden/funcunits.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .fixedpoint import shift_round


def make_table(fn: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, lut_bits: int,
               out_frac: int) -> np.ndarray:
    """``round_half_even(fn(x) * 2**out_frac)`` at ``2**lut_bits + 1`` points spanning [lo, hi]."""
    x = lo + (hi - lo) * np.arange((1 << lut_bits) + 1, dtype=np.float64) / (1 << lut_bits)
    return np.rint(np.ldexp(fn(x), out_frac)).astype(np.int64)


def _lookup(table: np.ndarray, idx: np.ndarray, r: np.ndarray, rbits: int, interp: bool) -> np.ndarray:
    base = table[idx]
    if not interp or rbits == 0:
        return base
    return base + (((table[idx + 1] - base) * r) >> rbits)


def leading_one(x: np.ndarray) -> np.ndarray:
    """Position of the most significant set bit (``floor(log2 x)``) of positive integers < 2**53
    (a priority encoder in hardware)."""
    x = np.asarray(x, dtype=np.int64)
    if np.any(x <= 0) or np.any(x >= (1 << 53)):
        raise ValueError("leading_one needs integers in [1, 2**53)")
    return np.frexp(x.astype(np.float64))[1].astype(np.int64) - 1


# ----------------------------------------------------------------------------- 2**x


@dataclass(frozen=True)
class Pow2Config:
    """``2**f`` unit: ``f`` has ``in_frac`` bits; table of ``2**lut_bits + 1`` entries in UQ1.``out_frac``."""

    in_frac: int = 12
    lut_bits: int = 6
    out_frac: int = 15
    interp: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.lut_bits <= self.in_frac:
            raise ValueError(f"need 0 < lut_bits <= in_frac, got {self.lut_bits}, {self.in_frac}")

    def table(self) -> np.ndarray:
        """The ROM contents: ``2**(i / 2**lut_bits)`` in UQ1.out_frac, i = 0 .. 2**lut_bits."""
        return make_table(np.exp2, 0.0, 1.0, self.lut_bits, self.out_frac)


def pow2_frac(f: np.ndarray, cfg: Pow2Config, table: np.ndarray | None = None) -> np.ndarray:
    """``2**(f / 2**in_frac)`` for ``0 <= f < 2**in_frac``, as UQ1.out_frac (value in [1, 2])."""
    f = np.asarray(f, dtype=np.int64)
    t = cfg.table() if table is None else table
    rbits = cfg.in_frac - cfg.lut_bits
    return _lookup(t, f >> rbits, f & ((1 << rbits) - 1), rbits, cfg.interp)


def pow2(t: np.ndarray, t_frac: int, out_frac: int, out_max: int, cfg: Pow2Config,
         rounding: str = "half_up", table: np.ndarray | None = None) -> np.ndarray:
    """``round(2**(t / 2**t_frac) * 2**out_frac)`` clamped to ``[0, out_max]``.

    ``t`` is a signed fixed-point exponent with ``t_frac == cfg.in_frac`` fractional
    bits: integer part ``n = t >> t_frac`` (floor) is a shift, the fraction goes
    through :func:`pow2_frac`.
    """
    if t_frac != cfg.in_frac:
        raise ValueError(f"exponent fraction bits {t_frac} must equal the unit's in_frac {cfg.in_frac}")
    t = np.asarray(t, dtype=np.int64)
    n = t >> t_frac
    m = pow2_frac(t & ((1 << t_frac) - 1), cfg, table)  # UQ1.cfg.out_frac
    # result = m * 2**(n + out_frac - cfg.out_frac); beyond out_max's width it saturates anyway.
    cap = int(out_max).bit_length() + 1
    shift = cfg.out_frac - np.minimum(n + out_frac, cap)
    shift = np.minimum(shift, 62)
    q = shift_round(m, shift, rounding)  # type: ignore[arg-type]
    return np.clip(q, 0, out_max)


# ----------------------------------------------------------------------------- 1/x and 1/sqrt(x)


@dataclass(frozen=True)
class RecipConfig:
    """Normalized-mantissa unit (``1/x`` or ``1/sqrt(x)``).

    The input is normalized to a mantissa with ``mant_bits`` fractional bits; the
    table (``2**lut_bits + 1`` entries) is indexed by its top fraction bits.
    """

    mant_bits: int = 14
    lut_bits: int = 7
    out_frac: int = 15
    interp: bool = True


def recip(x: np.ndarray, cfg: RecipConfig, table: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``1/x`` for positive integers ``x``: returns ``(mant, shift)`` with
    ``1/x ≈ mant * 2**-(cfg.out_frac + shift)``, ``mant`` in UQ1.out_frac ∈ (0.5, 1].

    ``x = m * 2**e`` with ``m`` in [1, 2); ``shift = e``.
    """
    x = np.asarray(x, dtype=np.int64)
    e = leading_one(x)
    mb = cfg.mant_bits
    # mantissa fraction bits: x * 2**(mb - e) - 2**mb, truncated
    frac = shift_round(x, e - mb, "floor") - (np.int64(1) << mb)
    t = recip_table(cfg) if table is None else table
    rbits = mb - cfg.lut_bits
    mant = _lookup(t, frac >> rbits, frac & ((1 << rbits) - 1), rbits, cfg.interp)
    return mant, e


def recip_table(cfg: RecipConfig) -> np.ndarray:
    """ROM of :func:`recip`: ``1/m`` for m in [1, 2]."""
    return make_table(lambda m: 1.0 / m, 1.0, 2.0, cfg.lut_bits, cfg.out_frac)


def rsqrt(x: np.ndarray, cfg: RecipConfig, table: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``1/sqrt(x)`` for positive integers: returns ``(mant, k)`` with
    ``1/sqrt(x) ≈ mant * 2**-(cfg.out_frac + k)``, ``mant`` in UQ1.out_frac ∈ (0.5, 1].

    ``x = m * 4**k`` with ``m`` in [1, 4) and ``k = floor(log2(x) / 2)``. To keep the
    table index a bit slice, [1, 4) is split into the octaves [1, 2) and [2, 4): the ROM
    (:func:`rsqrt_octave_table`) holds ``2**lut_bits + 1`` entries for each, one after
    the other, and the parity of ``floor(log2 x)`` selects the half.
    """
    x = np.asarray(x, dtype=np.int64)
    e = leading_one(x)
    k = e >> 1
    odd = e & 1  # m in [2, 4) when e is odd
    mb = cfg.mant_bits
    frac = shift_round(x, e - mb, "floor") - (np.int64(1) << mb)  # fraction of x / 2**e in [1, 2)
    t = rsqrt_octave_table(cfg) if table is None else table
    n = (1 << cfg.lut_bits) + 1
    rbits = mb - cfg.lut_bits
    idx = (frac >> rbits) + odd * n
    mant = _lookup(t, idx, frac & ((1 << rbits) - 1), rbits, cfg.interp)
    return mant, k


def rsqrt_octave_table(cfg: RecipConfig) -> np.ndarray:
    """ROM of :func:`rsqrt`: ``1/sqrt(m)`` on [1, 2] then ``1/sqrt(m)`` on [2, 4]."""
    lo = make_table(lambda m: 1.0 / np.sqrt(m), 1.0, 2.0, cfg.lut_bits, cfg.out_frac)
    hi = make_table(lambda m: 1.0 / np.sqrt(m), 2.0, 4.0, cfg.lut_bits, cfg.out_frac)
    return np.concatenate([lo, hi])


# ----------------------------------------------------------------------------- tanh


@dataclass(frozen=True)
class TanhConfig:
    """``tanh`` over [0, 2**range_log2) with ``2**lut_bits + 1`` entries; input Q.in_frac."""

    in_frac: int = 12
    range_log2: int = 3
    lut_bits: int = 8
    out_frac: int = 15
    interp: bool = True

    def table(self) -> np.ndarray:
        return make_table(np.tanh, 0.0, float(1 << self.range_log2), self.lut_bits, self.out_frac)


def tanh_unit(a: np.ndarray, cfg: TanhConfig, table: np.ndarray | None = None) -> np.ndarray:
    """``tanh(a / 2**in_frac)`` as signed Q1.out_frac; odd symmetry; saturates for
    ``|a| >= 2**range_log2`` to the table's last entry (``tanh(2**range_log2)``)."""
    a = np.asarray(a, dtype=np.int64)
    t = cfg.table() if table is None else table
    mag = np.abs(a)
    top = (1 << (cfg.in_frac + cfg.range_log2)) - 1
    sat = mag > top
    mag = np.minimum(mag, top)
    rbits = cfg.in_frac + cfg.range_log2 - cfg.lut_bits
    if rbits < 0:
        raise ValueError("tanh table finer than the input resolution")
    y = _lookup(t, mag >> rbits, mag & ((1 << rbits) - 1), rbits, cfg.interp)
    y = np.where(sat, t[-1], y)
    return np.where(a < 0, -y, y)


def pwl_error_bound(second_derivative_max: float, step: float) -> float:
    """Max error of linear interpolation between exact samples: ``h**2 / 8 * max|f''|``."""
    return step * step / 8.0 * second_derivative_max


LOG2E = 1.0 / math.log(2.0)

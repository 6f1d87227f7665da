"""Fixed-point semantics shared by every hardware operator (bit-exact reference).

The full description: ``docs/internals/golden.md``, section ``golden/fixedpoint.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Rounding = Literal["floor", "half_up", "half_even"]
Overflow = Literal["saturate", "wrap"]

ROUNDINGS: tuple[str, ...] = ("floor", "half_up", "half_even")
OVERFLOWS: tuple[str, ...] = ("saturate", "wrap")
AP_QUANT = {"floor": "AP_TRN", "half_up": "AP_RND", "half_even": "AP_RND_CONV"}
AP_OVF = {"saturate": "AP_SAT", "wrap": "AP_WRAP"}
MAX_BITS = 62


@dataclass(frozen=True)
class QFormat:
    """A fixed-point format: ``bits`` wide, ``frac`` fractional bits, signed or not.

    ``frac`` may exceed ``bits`` or be negative (as ap_fixed allows). Examples:
    ``QFormat(8, 0)`` is int8; ``QFormat(8, 8, signed=False)`` is UQ0.8 (0 .. 255/256).
    """

    bits: int
    frac: int
    signed: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.bits <= MAX_BITS:
            raise ValueError(f"QFormat bits must be in 1..{MAX_BITS}, got {self.bits}")
        if self.signed and self.bits < 2:
            raise ValueError("a signed QFormat needs at least 2 bits")

    @property
    def int_bits(self) -> int:
        """Integer bits ``I = bits - frac`` (ap_fixed's second template argument, sign included)."""
        return self.bits - self.frac

    @property
    def min_int(self) -> int:
        """Smallest raw integer."""
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max_int(self) -> int:
        """Largest raw integer."""
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def lsb(self) -> float:
        """Value of one LSB, ``2**-frac``."""
        return 2.0**-self.frac

    @property
    def min_value(self) -> float:
        return self.min_int * self.lsb

    @property
    def max_value(self) -> float:
        return self.max_int * self.lsb

    @property
    def name(self) -> str:
        """``Q<I>.<F>`` (signed, I includes the sign bit) or ``UQ<I>.<F>``."""
        return f"{'Q' if self.signed else 'UQ'}{self.int_bits}.{self.frac}"

    def ap_type(self, rounding: Rounding = "floor", overflow: Overflow = "wrap") -> str:
        """The equivalent HLS type, e.g. ``ap_fixed<16,4,AP_RND_CONV,AP_SAT>``."""
        base = "ap_fixed" if self.signed else "ap_ufixed"
        return f"{base}<{self.bits},{self.int_bits},{AP_QUANT[rounding]},{AP_OVF[overflow]}>"

    def fits(self, q: np.ndarray | int) -> np.ndarray | bool:
        """True where raw integers ``q`` are representable."""
        return (np.asarray(q) >= self.min_int) & (np.asarray(q) <= self.max_int)

    def to_float(self, q: np.ndarray | int) -> np.ndarray:
        """Real values of raw integers (float64; exact for bits <= 53)."""
        return np.asarray(q, dtype=np.float64) * self.lsb

    def from_float(self, x: np.ndarray | float, rounding: Rounding = "half_even",
                   overflow: Overflow = "saturate") -> np.ndarray:
        """Quantize real values: see :func:`quantize`."""
        return quantize(x, self, rounding, overflow)


def _as_int64(x: np.ndarray | int) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iub":
        raise TypeError(f"raw fixed-point values must be integers, got dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


def shift_round(x: np.ndarray | int, shift: int | np.ndarray, rounding: Rounding = "floor") -> np.ndarray:
    """``x * 2**-shift`` rounded to an integer; ``shift <= 0`` is an exact left shift
    (ValueError if the result would leave the 62-bit range).

    ``shift`` may be an array (broadcast with ``x``) for per-element shifts.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    x = _as_int64(x)
    if np.ndim(shift) == 0:
        return _shift_round_scalar(x, int(shift), rounding)
    s = np.asarray(shift, dtype=np.int64)
    if np.any(s > MAX_BITS) or np.any(s < -MAX_BITS):
        raise ValueError(f"shift out of range ±{MAX_BITS}")
    right = np.maximum(s, 0)
    left = np.maximum(-s, 0)
    if rounding == "half_up":  # floor(x / 2^right + 1/2); (1 << right) >> 1 is 0 when right == 0
        return _exact_left_shift((x + ((np.int64(1) << right) >> 1)) >> right, left)
    q = x >> right  # arithmetic shift: floor
    if rounding != "floor":
        rem = x - (q << right)  # 0 <= rem < 2**right
        half = np.where(right > 0, np.left_shift(np.int64(1), np.maximum(right - 1, 0)), 0)
        up = rem > half
        tie = (rem == half) & (right > 0)
        if rounding == "half_up":
            up = up | tie
        else:
            up = up | (tie & ((q & 1) == 1))
        q = q + up.astype(np.int64)
    return _exact_left_shift(q, left)


def _exact_left_shift(x: np.ndarray, left: np.ndarray | int) -> np.ndarray:
    """``x << left``, raising instead of silently overflowing int64 (|result| must stay < 2**62)."""
    if np.ndim(left) == 0:
        if left == 0:
            return x
        if x.size and (int(x.max()) >= (1 << (62 - left)) or int(x.min()) < -(1 << (62 - left))):
            raise ValueError(f"left shift by {left} overflows the {MAX_BITS}-bit range")
        return x << left
    left = np.asarray(left, dtype=np.int64)
    if not np.any(left):
        return x
    top = x >> np.minimum(62 - left, 62)
    if np.any((left > 0) & (top != 0) & (top != -1)):
        raise ValueError(f"left shift overflows the {MAX_BITS}-bit range")
    return x << left


def _shift_round_scalar(x: np.ndarray, s: int, rounding: Rounding) -> np.ndarray:
    """:func:`shift_round` with one shift for all elements (the common, fast case)."""
    if not -MAX_BITS <= s <= MAX_BITS:
        raise ValueError(f"shift out of range ±{MAX_BITS}")
    if s <= 0:
        return _exact_left_shift(x, -s)
    if rounding == "floor":
        return x >> s
    if rounding == "half_up":
        return (x + (1 << (s - 1))) >> s  # floor(x / 2^s + 1/2)
    q = x >> s
    rem = x & ((1 << s) - 1)
    half = 1 << (s - 1)
    return q + ((rem > half) | ((rem == half) & ((q & 1) == 1)))


def saturate(q: np.ndarray | int, fmt: QFormat) -> np.ndarray:
    """Clamp raw integers to ``fmt``'s range (AP_SAT)."""
    return np.clip(_as_int64(q), fmt.min_int, fmt.max_int)


def wrap(q: np.ndarray | int, fmt: QFormat) -> np.ndarray:
    """Keep the low ``fmt.bits`` bits, reinterpreted in ``fmt`` (AP_WRAP)."""
    q = _as_int64(q)
    mask = np.int64((1 << fmt.bits) - 1)
    low = q & mask
    if fmt.signed:
        low = np.where(low > fmt.max_int, low - (np.int64(1) << fmt.bits), low)
    return low


def overflow(q: np.ndarray | int, fmt: QFormat, mode: Overflow) -> np.ndarray:
    """Apply the overflow mode ``saturate`` or ``wrap``."""
    if mode == "saturate":
        return saturate(q, fmt)
    if mode == "wrap":
        return wrap(q, fmt)
    raise ValueError(f"overflow must be one of {OVERFLOWS}, got {mode!r}")


def convert(q: np.ndarray | int, src_frac: int, dst: QFormat, rounding: Rounding = "floor",
            overflow_mode: Overflow = "wrap") -> np.ndarray:
    """Re-express raw integers with ``src_frac`` fractional bits in format ``dst``
    (what assigning one ap_fixed to another does: round first, then overflow)."""
    shift = src_frac - dst.frac
    if shift < 0:
        # A left shift can overflow the int64 intermediate (e.g. 48-bit source, shift 20).
        # Reduce q first, exactly: saturate only needs out-of-range values to stay out of
        # range; wrap only needs the low ``dst.bits + shift`` bits of q.
        q, left = _as_int64(q), -shift
        if overflow_mode == "saturate":
            q = np.clip(q, (dst.min_int >> left) - 1, (dst.max_int >> left) + 1)
        elif overflow_mode == "wrap":
            q = q & np.int64((1 << max(dst.bits - left, 0)) - 1)
    return overflow(shift_round(q, shift, rounding), dst, overflow_mode)


def quantize(x: np.ndarray | float, fmt: QFormat, rounding: Rounding = "half_even",
             overflow_mode: Overflow = "saturate") -> np.ndarray:
    """Real values -> raw integers of ``fmt`` (as assigning a double to an ap_fixed).

    The scaling by ``2**frac`` is exact in float64 (except underflow of tiny values
    when ``frac < 0``, handled below), so the rounding acts on the exact binary value
    of each input. NaN is rejected; ±inf saturate (with ``saturate``) and are
    rejected with ``wrap``.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    x = np.asarray(x, dtype=np.float64)
    y = np.ldexp(x, fmt.frac)
    if np.isnan(y).any():
        raise ValueError("cannot quantize NaN")
    if overflow_mode == "saturate":
        y = np.clip(y, float(fmt.min_int) - 1.0, float(fmt.max_int) + 1.0)
    elif np.isinf(y).any() or (np.abs(y) >= 2.0**MAX_BITS).any():
        raise ValueError(f"values too large to wrap into {fmt.name}")
    if rounding == "floor":
        r = np.floor(y)
        if fmt.frac < 0:  # ldexp can underflow a tiny negative x to -0.0; its floor is still -1
            r = np.where((y == 0) & (x < 0), -1.0, r)
    elif rounding == "half_up":
        # Not floor(y + 0.5): that sum rounds up for y = 0.5 - 2**-54 (the double below 0.5).
        # y - floor(y) is exact wherever the comparison with 0.5 could be affected.
        r = np.floor(y)
        r = r + (y - r >= 0.5)
    else:
        r = np.rint(y)
    return overflow(r.astype(np.int64), fmt, overflow_mode)


def clog2(n: int) -> int:
    """Bits needed to index ``n`` values (ceil(log2(n)), 0 for n <= 1)."""
    return max(0, int(n - 1).bit_length())


def signed_bits_for(lo: int, hi: int) -> int:
    """Smallest signed width that holds every integer in ``[lo, hi]``."""
    w = 1
    while not (-(1 << (w - 1)) <= lo and hi <= (1 << (w - 1)) - 1):
        w += 1
    return max(w, 2)

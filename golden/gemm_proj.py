"""The projection GEMM's registers and layouts (the AIE kernel ``hw/aie/engine/gemm_kernels.h``): one declaration.

The full description: ``docs/internals/golden.md``, section ``golden/gemm_proj.py``.
"""

from __future__ import annotations

import numpy as np

from .engine import pack_k, pack_q
from .requant import RequantRegisters

#: output channels sharing one shift: the 8 columns of a 4×8 output block of mmul<4,16,8>
GROUP = 8
#: the AIE1 shift-round-saturate's shift range (UG1078), as golden's requantization shifts
MAX_SHIFT = 62
#: bits of the folded multiplier (the AIE1 32×32-bit vector multiply's operand)
MULT32_BITS = 32
#: the accumulator (partial sums + bias) must stay a signed 32-bit integer (it is converted to int32 lanes)
ACC_BITS = 32


def fold_requant(rq: RequantRegisters, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel registers ``rq`` (scalar or ``(n,)``) -> ``(mult32 (n,), shift (n // GROUP,))`` int64 (module doc).

    ValueError if ``n`` is not a multiple of :data:`GROUP`, a shift is outside ``0..MAX_SHIFT``, or a folded
    multiplier does not fit :data:`MULT32_BITS` signed bits (a group whose channels' shifts differ too much)."""
    if n <= 0 or n % GROUP:
        raise ValueError(f"output channels n={n} must be a positive multiple of {GROUP}")
    mult = np.broadcast_to(np.asarray(rq.mult, np.int64), (n,))
    shift = np.broadcast_to(np.asarray(rq.shift, np.int64), (n,))
    if np.any(shift < 0) or np.any(shift > MAX_SHIFT):
        raise ValueError(f"requantization shifts must be in 0..{MAX_SHIFT}")
    s_g = shift.reshape(-1, GROUP).max(axis=1)
    diff = np.repeat(s_g, GROUP) - shift
    lim = 1 << (MULT32_BITS - 1)
    mag = np.minimum(np.abs(mult), lim)  # < 2^32 shifted by <= 32: no int64 overflow
    too_big = (mag << np.minimum(diff, MULT32_BITS)) >= lim
    if np.any(too_big):
        bad = int(np.argmax(too_big))
        raise ValueError(f"channel {bad}: multiplier {int(mult[bad])} shifted left by {int(diff[bad])} (to its "
                         f"group's shift {int(s_g[bad // GROUP])}) does not fit {MULT32_BITS} signed bits: the "
                         f"shifts of the {GROUP} channels of a group differ too much for the AIE requantization")
    return mult << diff, s_g.astype(np.int64)


def check_accumulator_range(bias: np.ndarray | None, k: int, n: int | None = None) -> None:
    """ValueError unless every accumulator ``X·Wᵀ + b`` over ``k`` input features (int8 × int8) fits
    :data:`ACC_BITS` signed bits whatever X and W: ``128·128·k + max|b| < 2^31`` (``n``: the channels, to check
    the bias's length)."""
    b = np.zeros(1, np.int64) if bias is None or np.size(bias) == 0 else np.asarray(bias, np.int64).reshape(-1)
    if n is not None and bias is not None and np.size(bias) and b.size != n:
        raise ValueError(f"bias has {b.size} channels, expected {n}")
    bound = 128 * 128 * int(k) + int(np.max(np.abs(b)))
    if bound >= 1 << (ACC_BITS - 1):
        raise ValueError(f"X·Wᵀ + b over {k} features may not fit {ACC_BITS} bits (bound {bound})")


def pack_x(x: np.ndarray) -> np.ndarray:
    """X tile slices ``(..., ROWS, KSLICE)`` int8 -> the A layout of ``mmul<4,16,8>`` (:func:`.engine.pack_q`)."""
    return pack_q(x)


def pack_w(w: np.ndarray) -> np.ndarray:
    """Weight slices ``(..., COLS, KSLICE)`` int8 (output channel major) -> Wᵀ in the B layout of
    ``mmul<4,16,8>`` (:func:`.engine.pack_k`: 16×8 blocks of 16 features × 8 channels)."""
    return pack_k(w)


def pack_lanes(v: np.ndarray) -> np.ndarray:
    """Per-channel int32 constants ``(..., COLS)`` -> ``(..., COLS // GROUP, 32)`` int32: per 8-channel group one
    32-lane vector, lane ``r·8 + c`` = channel ``8g + c`` (the lanes of a 4×8 output block). ValueError outside
    int32."""
    a = np.asarray(v, np.int64)
    if a.shape[-1] % GROUP:
        raise ValueError(f"channels must be a multiple of {GROUP}, got {a.shape[-1]}")
    if a.size and (int(a.min()) < -(1 << 31) or int(a.max()) >= 1 << 31):
        raise ValueError("per-channel constants must fit int32")
    g = a.reshape(*a.shape[:-1], -1, 1, GROUP)
    return np.broadcast_to(g, (*g.shape[:-2], 4, GROUP)).reshape(*a.shape[:-1], -1, 4 * GROUP).astype(np.int32)


__all__ = ["ACC_BITS", "GROUP", "MAX_SHIFT", "MULT32_BITS", "check_accumulator_range", "fold_requant", "pack_lanes",
           "pack_w", "pack_x"]

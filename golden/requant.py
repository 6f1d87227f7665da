"""Requantization between stages: int32 accumulators -> int8 with a fixed-point multiplier.

``out = saturate(round_half_up(acc · mult >> shift))`` where ``mult · 2^-shift``
approximates the real ratio of scales ``s_acc / s_out`` (per tensor or per
output channel). ``mult`` is a signed ``bits``-bit integer (18 by default: one
DSP58 port) normalized to use its full precision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .fixedpoint import QFormat, Rounding, saturate, shift_round
from .swiftmax_int import fold_multiplier

INT8 = QFormat(8, 0)


@dataclass(frozen=True)
class RequantRegisters:
    """``mult``/``shift``: scalars or per-channel arrays (last axis of the accumulator)."""

    mult: np.ndarray
    shift: np.ndarray


def requant_registers(ratio: float | np.ndarray, bits: int = 18) -> RequantRegisters:
    """Real multipliers ``s_acc / s_out`` (> 0, scalar or per channel) -> registers."""
    r = np.atleast_1d(np.asarray(ratio, dtype=np.float64))
    if not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError("requantization ratios must be finite and > 0")
    pairs = [fold_multiplier(float(v), bits) for v in r]
    mult = np.array([p[0] for p in pairs], dtype=np.int64)
    shift = np.array([p[1] for p in pairs], dtype=np.int64)
    if np.ndim(ratio) == 0:
        return RequantRegisters(mult[0], shift[0])
    return RequantRegisters(mult, shift)


def requantize(acc: np.ndarray, regs: RequantRegisters, out: QFormat = INT8,
               rounding: Rounding = "half_up") -> np.ndarray:
    """Apply the registers to integer accumulators (channels on the last axis)."""
    acc = np.asarray(acc)
    if acc.size and max(abs(int(acc.min())), abs(int(acc.max()))) >= (1 << 40):
        raise ValueError("accumulator exceeds 40 bits; the product with the multiplier would overflow")
    if rounding == "half_up" and acc.size >= (1 << 16) and int(np.min(regs.shift)) >= 1:
        return _requantize_torch(acc, regs, out)
    return saturate(shift_round(acc.astype(np.int64) * regs.mult, regs.shift, rounding), out)


def _requantize_torch(acc: np.ndarray, regs: RequantRegisters, out: QFormat) -> np.ndarray:
    """Identical integer arithmetic in torch int64 (multi-threaded) for large tensors:
    ``(acc·mult + 2^(shift-1)) >> shift`` (arithmetic shift = floor), then saturate."""
    a = torch.from_numpy(np.ascontiguousarray(acc)).to(torch.int64)
    mult = torch.as_tensor(np.asarray(regs.mult, dtype=np.int64))
    shift = torch.as_tensor(np.asarray(regs.shift, dtype=np.int64))
    y = torch.bitwise_right_shift(a * mult + torch.bitwise_left_shift(torch.ones_like(shift), shift - 1), shift)
    return y.clamp_(out.min_int, out.max_int).numpy()


def quantize_symmetric(x: np.ndarray, scale: float | np.ndarray, bits: int = 8) -> np.ndarray:
    """``saturate(round_half_even(x / scale))`` into a signed ``bits``-bit integer (real -> raw)."""
    fmt = QFormat(bits, 0)
    y = np.rint(np.asarray(x, dtype=np.float64) / scale)
    return np.clip(y, fmt.min_int, fmt.max_int).astype(np.int64)


def symmetric_scale(x: np.ndarray, axis: int | None = None, bits: int = 8) -> np.ndarray | float:
    """Max-abs symmetric scale ``max|x| / (2^(bits-1) - 1)`` (per tensor, or per slice along ``axis``
    kept); zero ranges get scale 1."""
    qmax = (1 << (bits - 1)) - 1
    if axis is None:
        m = float(np.max(np.abs(x))) if np.size(x) else 0.0
        return m / qmax if m > 0 else 1.0
    m = np.max(np.abs(x), axis=axis)
    return np.where(m > 0, m / qmax, 1.0)

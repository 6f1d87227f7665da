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
from .regmap import Mem, Reg, RegisterMap
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


#: ``ID`` of the PL requantizer's register block
REQUANT_ID = 0x2E910001
#: bits of a requantization shift register: shifts 0..62 (:func:`.fixedpoint.shift_round`'s range)
SHIFT_BITS = 6


def requant_regmap(lanes: int = 4, max_d: int = 1024, mult_bits: int = 18) -> RegisterMap:
    """The PL requantizer's register map (:class:`vckattn.hw.pl.requant.RequantKernel`): per output channel
    ``mult`` (signed ``mult_bits``) and ``shift`` (0..62) tables of ``max_d`` entries, one kernel read port per
    lane; ``per_channel`` selects them per channel (1) or entry 0 for every channel (0: per-tensor registers,
    such as ``rq_a``); status counters."""
    return RegisterMap(
        [Reg("per_channel", 1, reset=1, doc="1: channel j uses mult[j], shift[j]; 0: every channel uses entry 0"),
         Reg("tokens", 32, access="ro", doc="tokens (input TLAST handshakes) since reset"),
         Reg("overlong", 32, access="ro", doc="tokens longer than max_d (their extra channels reuse entry max_d-1)")],
        [Mem("mult", mult_bits, max_d, signed=True, read_ports=lanes, doc=f"multiplier of channel j (signed "
             f"{mult_bits}-bit)"),
         Mem("shift", SHIFT_BITS, max_d, read_ports=lanes, doc="right shift of channel j (0..62, round half up)")],
        ident=REQUANT_ID,
        version=1,
    )


def requant_register_values(regs: RequantRegisters, d: int, max_d: int = 1024) -> dict[str, int | list[int]]:
    """Golden registers (scalar or ``(d,)`` per channel) -> the requantizer's register and table writes for
    ``d`` channels: a scalar pair is written once (``per_channel = 0``), an array per channel. ValueError if
    ``d > max_d`` or a shift is outside 0..62 (a multiplier that does not fit is refused by the map's
    :meth:`~.regmap.RegisterMap.writes`)."""
    mult, shift = np.asarray(regs.mult, np.int64), np.asarray(regs.shift, np.int64)
    if not 1 <= d <= max_d:
        raise ValueError(f"{d} channels outside 1..{max_d} (the requantizer's table depth)")
    if np.any(shift < 0) or np.any(shift > 62):
        raise ValueError("requantization shifts must be in 0..62")
    if mult.ndim == 0 and shift.ndim == 0:
        return {"per_channel": 0, "mult": [int(mult)], "shift": [int(shift)]}
    mult, shift = np.broadcast_to(mult, (d,)), np.broadcast_to(shift, (d,))
    return {"per_channel": 1, "mult": [int(v) for v in mult], "shift": [int(v) for v in shift]}


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

"""Numerics of the scalable engine (stream contract v2, ``hw/ENGINE.md``): narrow scores with the mask
in-band, key slices, SwiftMax on narrow scores. Bit-exact reference for the AIE kernels ``qk_slice`` /
``pv_slice``, the engine's PL top and the host.

Formats: Q, K, V int8; ``acc`` the int32 ``Q·Kᵀ`` accumulator; scores ``s`` signed ``score_bits``
(8 or 16) at scale ``s_q·s_k·2^score_shift``, valid scores in ``[−(2^(b−1)−1), 2^(b−1)−1]``, masked
elements the sentinel ``−2^(b−1)``; P uint8 at ``2^-out_frac``; O int32.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TypeVar

import numpy as np

from .fixedpoint import shift_round
from .funcunits import LOG2E
from .online_softmax_int import OnlineSoftmaxFormat, OnlineSoftmaxRegisters, online_softmax_registers
from .swiftmax_int import SwiftMaxFormat, SwiftMaxHeads, SwiftMaxRegisters, fold_multiplier, swiftmax_int

RegsT = TypeVar("RegsT", SwiftMaxRegisters, SwiftMaxHeads)

SCORE_BITS: tuple[int, ...] = (8, 16, 32)


def _check_bits(bits: int) -> None:
    if bits not in SCORE_BITS:
        raise ValueError(f"score_bits must be one of {SCORE_BITS}, got {bits}")


def sentinel(bits: int) -> int:
    """The mask sentinel of ``bits``-bit scores: ``−2^(bits−1)`` (never a valid score)."""
    _check_bits(bits)
    return -(1 << (bits - 1))


def score_max(bits: int) -> int:
    """Largest valid ``bits``-bit score magnitude: ``2^(bits−1) − 1`` (saturation is symmetric)."""
    _check_bits(bits)
    return (1 << (bits - 1)) - 1


def score_shift_for(absmax: int, bits: int) -> int:
    """Smallest right shift that brings accumulators up to ``absmax`` into ``bits``-bit scores without
    saturating: ``round_half_up(absmax · 2^-shift) <= 2^(bits−1) − 1``. 0 for 32-bit scores."""
    _check_bits(bits)
    if bits == 32:
        return 0
    absmax = int(absmax)
    if absmax < 0:
        raise ValueError("absmax must be >= 0")
    top = score_max(bits)
    shift = 0
    while int(shift_round(np.int64(absmax), shift, "half_up")) > top:
        shift += 1
    return shift


def narrow_scores(acc: np.ndarray, shift: int, bits: int) -> np.ndarray:
    """``clamp(round_half_up(acc · 2^-shift), −(2^(b−1)−1), 2^(b−1)−1)`` (the AIE's shift-round-saturate
    with symmetric saturation), int64. 32-bit scores pass unchanged (``shift`` must be 0)."""
    _check_bits(bits)
    acc = np.asarray(acc, dtype=np.int64)
    if bits == 32:
        if shift:
            raise ValueError("32-bit scores take no shift")
        return acc
    if not 0 <= shift <= 40:
        raise ValueError(f"score_shift {shift} outside 0..40")
    top = score_max(bits)
    return np.clip(shift_round(acc, shift, "half_up"), -top, top)


def tile_keep(q_rows: int, keys_pad: int, rows: int, q0: int, valid_keys: int, causal: bool) -> np.ndarray:
    """The keep mask ``(q_rows, keys_pad)`` a ``TILE`` command describes: row ``i < rows``, key
    ``j < valid_keys`` and, when causal, ``j <= q0 + i``."""
    i = np.arange(q_rows)[:, None]
    j = np.arange(keys_pad)[None, :]
    keep = (i < rows) & (j < valid_keys)
    if causal:
        keep &= j <= q0 + i
    return keep


def engine_scores(acc: np.ndarray, keep: np.ndarray, shift: int, bits: int) -> np.ndarray:
    """The scores on the engine's score stream: :func:`narrow_scores` where ``keep``, the sentinel elsewhere."""
    s = narrow_scores(acc, shift, bits)
    return np.where(np.broadcast_to(keep, s.shape), s, sentinel(bits) if bits < 32 else 0)


def slice_blocks(n_kb: int, kernels: int) -> list[tuple[int, int]]:
    """Key blocks ``[b0, b1)`` of each of ``kernels`` slices for a group of ``n_kb`` blocks:
    ``SB = ceil(n_kb / kernels)``, slice ``j`` = ``[j·SB, min((j+1)·SB, n_kb))`` (empty: ``b0 == b1``)."""
    if n_kb < 1 or kernels < 1:
        raise ValueError("n_kb and kernels must be >= 1")
    sb = -(-n_kb // kernels)
    return [(min(j * sb, n_kb), min((j + 1) * sb, n_kb)) for j in range(kernels)]


def engine_format(bits: int, fmt: SwiftMaxFormat | None = None) -> SwiftMaxFormat:
    """The SwiftMax build format on ``bits``-bit scores (``acc_bits = bits``; 32: ``fmt`` unchanged)."""
    _check_bits(bits)
    base = fmt or SwiftMaxFormat()
    return base if bits == 32 else replace(base, acc_bits=bits)


def engine_registers(regs: RegsT, s_q: float, s_k: float, d: int, shift: int, fmt: SwiftMaxFormat) -> RegsT:
    """``regs`` (a head's or a layer's SwiftMax registers for int32 scores at ``s_q·s_k``) for scores shifted
    right by ``shift``: only ``a_mult``/``a_shift`` change (``A·2^shift·2^t_frac``, folded as
    :func:`~vckattn.golden.swiftmax_int.swiftmax_registers` does); β, the clamps and γ are unchanged."""
    a = s_q * s_k * LOG2E / math.sqrt(d) * 2.0**shift
    a_mult, a_shift = fold_multiplier(a * (1 << fmt.t_frac), fmt.a_bits, fmt.max_a_shift)
    if isinstance(regs, SwiftMaxHeads):
        return regs.map(lambda r: r.replace(a_mult=a_mult, a_shift=a_shift))  # type: ignore[return-value]
    return regs.replace(a_mult=a_mult, a_shift=a_shift)  # type: ignore[return-value]


def engine_online_registers(s_q: float, s_k: float, d: int, shift: int,
                            fmt: OnlineSoftmaxFormat) -> OnlineSoftmaxRegisters:
    """The online-softmax registers for scores shifted right by ``shift`` (scale ``s_q·s_k·2^shift``)."""
    return online_softmax_registers(s_q * 2.0**shift, s_k, d, fmt)


def engine_p(s: np.ndarray, regs: SwiftMaxRegisters | SwiftMaxHeads, bits: int, fmt: SwiftMaxFormat | None = None,
             head: np.ndarray | int | None = None) -> np.ndarray:
    """The engine's PL SwiftMax on stream scores ``s``: P uint8-valued int64, 0 where ``s`` is the sentinel.
    Per-head constants (:class:`SwiftMaxHeads`) need ``head``, the packet header's head index of the scores."""
    f = fmt or engine_format(bits)
    s = np.asarray(s, dtype=np.int64)
    return swiftmax_int(s, regs, s != sentinel(bits), f, head=head)


__all__ = ["SCORE_BITS", "engine_format", "engine_online_registers", "engine_p", "engine_registers", "engine_scores",
           "narrow_scores", "score_max", "score_shift_for", "sentinel", "slice_blocks", "tile_keep"]

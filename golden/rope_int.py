"""Rotary position embedding (RoPE) on int8 Q/K, bit-exact integer model.

Llama's rotate-half convention (as :func:`.attention.apply_rope`): the head dimension
``D`` is split into halves ``[x1, x2]`` and ``rotate_half(x) = [-x2, x1]``; the tables
``cos``, ``sin`` ``(S, D)`` repeat each frequency in both halves, so element ``i < D/2``
and element ``i + D/2`` are rotated as a pair::

    y = x · cos + rotate_half(x) · sin

Integer form (``F = frac`` fractional bits of the tables, 14 by default)::

    c, s = saturate16(round_half_even(cos · 2^F)), saturate16(round_half_even(sin · 2^F))
                                                     int16 tables, Q1.14 (sign, 1 integer bit, 14 fractional
                                                     bits; ``QFormat(16, 14)``, named "Q2.14" by
                                                     :attr:`QFormat.name`, which counts the sign bit)
    acc = x · c + rotate_half(x) · s                 int8 × int16, two products: |acc| <= 2^24 (fits int32)
    y   = saturate8(round_half_up(acc · 2^-F))       AIE srs: int8 at the input's scale

The rotation is orthogonal, so ``y`` keeps the scale of ``x`` (Q at ``s_q``, K at ``s_k``); the
exporter calibrates ``s_q``/``s_k`` to cover both the projection outputs and the rotated values.
``rotate_half`` of ``-128`` is ``+128``: the negation is done in the wide accumulator, not in int8.

Error against the float rotation (in int8 LSBs of ``x``, no saturation): each table entry is off by
at most half its LSB, ``2^-(F+1)``, so the products are off by at most ``(|x| + |rotate_half(x)|)·2^-(F+1)``;
the final rounding adds ``0.5``::

    |y - (x·cos + rotate_half(x)·sin)| <= 0.5 + (|x| + |rotate_half(x)|) · 2^-(F+1)      (<= 0.5 + 2^-7 for F=14)

With saturation the same bound holds against the float result clipped to ``[-128, 127]``.
"""

from __future__ import annotations

import numpy as np

from .aie_matmul import srs
from .fixedpoint import QFormat, quantize

INT8 = QFormat(8, 0)
ROPE_FRAC = 14  # fractional bits of the cos/sin tables (Q1.14 in int16)
TABLE_BITS = 16


def table_format(frac: int = ROPE_FRAC) -> QFormat:
    """The int16 format of the cos/sin tables with ``frac`` fractional bits."""
    return QFormat(TABLE_BITS, frac)


def rope_tables_int(cos: np.ndarray, sin: np.ndarray, frac: int = ROPE_FRAC) -> tuple[np.ndarray, np.ndarray]:
    """Quantize float RoPE tables (``(S, D)``, or any shape) to int16 with ``frac`` fractional bits.

    ``c = saturate16(round_half_even(cos · 2^frac))`` (numpy ``rint``), the same for ``sin``. With the
    default ``frac = 14`` (Q1.14) every value in ``[-1, 1]`` is exact up to half an LSB (``2^-15``) and
    none saturates. Accepts numpy arrays or torch tensors. Returns ``(c, s)`` as int16.
    """
    fmt = table_format(frac)
    out = []
    for t in (cos, sin):
        if hasattr(t, "detach"):  # torch tensor
            t = t.detach().to("cpu").double().numpy()
        out.append(quantize(np.asarray(t, dtype=np.float64), fmt, "half_even", "saturate").astype(np.int16))
    return out[0], out[1]


def rotate_half_int(x: np.ndarray) -> np.ndarray:
    """``[x1, x2] -> [-x2, x1]`` over the last axis, in int64 (``-(-128)`` stays ``128``)."""
    x = np.asarray(x).astype(np.int64)
    if x.shape[-1] % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {x.shape[-1]}")
    h = x.shape[-1] // 2
    return np.concatenate((-x[..., h:], x[..., :h]), axis=-1)


def rope_int(x: np.ndarray, c: np.ndarray, s: np.ndarray, frac: int = ROPE_FRAC) -> np.ndarray:
    """Rotate int8 ``x`` ``(..., S, D)`` by int16 tables ``c``, ``s`` (broadcastable to ``x``; typically
    ``(S, D)``; from :func:`rope_tables_int` with the same ``frac``).

    ``y = saturate8(round_half_up((x·c + rotate_half(x)·s) · 2^-frac))`` — the AIE's shift-round-saturate
    (:func:`.aie_matmul.srs`). Returns int8 at the scale of ``x``.
    """
    x = np.asarray(x)
    c, s = np.asarray(c), np.asarray(s)
    if x.dtype.kind not in "iu" or (x.size and (int(x.min()) < INT8.min_int or int(x.max()) > INT8.max_int)):
        raise ValueError("rope_int: x must hold raw int8 values")
    tab = table_format(frac)
    for name, t in (("c", c), ("s", s)):
        if t.dtype.kind not in "iu" or (t.size and (int(t.min()) < tab.min_int or int(t.max()) > tab.max_int)):
            raise ValueError(f"rope_int: table {name} must hold raw int16 values")
    acc = x.astype(np.int64) * c.astype(np.int64) + rotate_half_int(x) * s.astype(np.int64)
    return srs(acc, frac, INT8, "half_up").astype(np.int8)


def rope_error_bound(x: np.ndarray, frac: int = ROPE_FRAC) -> np.ndarray:
    """Per-element bound (int8 LSBs) on ``|rope_int(x, …) - clip(x·cos + rotate_half(x)·sin, -128, 127)|``:
    ``0.5 + (|x| + |rotate_half(x)|) · 2^-(frac+1)`` (table rounding + output rounding; see the module doc)."""
    x = np.asarray(x).astype(np.int64)
    return 0.5 + (np.abs(x) + np.abs(rotate_half_int(x))) * 2.0 ** -(frac + 1)


__all__ = ["ROPE_FRAC", "table_format", "rope_tables_int", "rotate_half_int", "rope_int", "rope_error_bound"]

"""Rotary position embedding (RoPE) on int8 Q/K, bit-exact integer model.

The full description: ``docs/internals/golden.md``, section ``golden/rope_int.py``.
"""

from __future__ import annotations

import numpy as np

from .aie_matmul import srs
from .fixedpoint import QFormat, quantize
from .regmap import Mem, Reg, RegisterMap

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


# ------------------------------------------------------------------------------------------------ the PL unit

#: ``ID`` of the PL RoPE unit's register block
ROPE_ID = 0x20BE0001


def check_rope_geometry(lanes: int, head_dim: int, max_pos: int) -> None:
    """ValueError unless ``lanes >= 1``, ``head_dim`` a positive multiple of ``2·lanes`` (each half of a row is
    whole beats) and ``max_pos`` a power of two (positions are ``log2(max_pos)``-bit indices)."""
    if lanes < 1 or head_dim < 2 * lanes or head_dim % (2 * lanes):
        raise ValueError(f"head_dim {head_dim} must be a positive multiple of 2·lanes = {2 * lanes}")
    if max_pos < 1 or max_pos & (max_pos - 1):
        raise ValueError(f"max_pos {max_pos} must be a power of two")


def rope_pos_bits(max_pos: int) -> int:
    """Bits of a position index below ``max_pos`` (a power of two; at least 1)."""
    return max(1, (max_pos - 1).bit_length())


def rope_regmap(lanes: int = 4, head_dim: int = 64, max_pos: int = 256) -> RegisterMap:
    """The PL RoPE unit's register map (:class:`vckattn.hw.pl.rope.RopeKernel`): ``pos_base`` (added to the
    position each row carries on TUSER), status counters, and the cos/sin table in ``lanes`` banks: bank ``k``
    holds the frequencies ``i ≡ k (mod lanes)`` of every position, entry ``p·head_dim/(2·lanes) + i // lanes``
    = ``sin << 16 | cos`` (two int16 Q1.14 halves of one word; :func:`rope_table_banks`). One kernel read port a
    bank."""
    check_rope_geometry(lanes, head_dim, max_pos)
    hpl = head_dim // (2 * lanes)  # frequencies of a position in one bank
    depth = max_pos * hpl
    pb = rope_pos_bits(max_pos)
    return RegisterMap(
        [Reg("pos_base", pb, doc=f"added to each row's TUSER position (mod {max_pos})"),
         Reg("rows", 32, access="ro", doc="rows (head_dim elements) since reset"),
         Reg("pos_overflow", 32, access="ro", doc=f"rows whose position TUSER + pos_base reached max_pos = "
             f"{max_pos} (their table index wrapped: their output is not RoPE at that position)")],
        [Mem(f"table{k}", 32, depth, read_ports=1, doc=f"bank {k}: entry e = sin << 16 | cos (int16 Q1.14 each) "
             f"of frequency {lanes}·(e mod {hpl}) + {k} at position e // {hpl}")
         for k in range(lanes)],
        ident=ROPE_ID,
        version=1,
    )


def rope_table_banks(c: np.ndarray, s: np.ndarray, lanes: int = 4, head_dim: int = 64,
                     max_pos: int = 256) -> dict[str, list[int]]:
    """int16 tables ``c``, ``s`` ``(P, head_dim)`` (:func:`rope_tables_int`, ``P <= max_pos`` positions) -> the
    writes of the unit's banks (:func:`rope_regmap`): ``{"table<k>": [sin << 16 | cos, ...]}`` for positions
    ``0..P-1``. The unit stores each frequency once (Llama's rotate-half tables repeat it in both halves of a
    row): ValueError unless ``c[:, i] == c[:, i + head_dim/2]`` and the same for ``s``, or if the shapes or
    geometry do not fit."""
    check_rope_geometry(lanes, head_dim, max_pos)
    c, s = np.asarray(c), np.asarray(s)
    tab = table_format()
    if c.shape != s.shape or c.ndim != 2 or c.shape[1] != head_dim or not 1 <= c.shape[0] <= max_pos:
        raise ValueError(f"tables must be (P <= {max_pos}, {head_dim}), got {c.shape} and {s.shape}")
    for name, t in (("c", c), ("s", s)):
        if t.dtype.kind not in "iu" or (t.size and (int(t.min()) < tab.min_int or int(t.max()) > tab.max_int)):
            raise ValueError(f"table {name} must hold raw int16 values")
    h = head_dim // 2
    if not (np.array_equal(c[:, :h], c[:, h:]) and np.array_equal(s[:, :h], s[:, h:])):
        raise ValueError("the RoPE unit stores each frequency once: the tables' two halves must be equal "
                         "(rotate-half tables)")
    words = ((s[:, :h].astype(np.int64) & 0xFFFF) << 16) | (c[:, :h].astype(np.int64) & 0xFFFF)  # (P, h)
    return {f"table{k}": [int(w) for w in words[:, k::lanes].reshape(-1)] for k in range(lanes)}


__all__ = ["ROPE_FRAC", "ROPE_ID", "check_rope_geometry", "table_format", "rope_pos_bits", "rope_regmap",
           "rope_table_banks", "rope_tables_int", "rotate_half_int", "rope_int", "rope_error_bound"]

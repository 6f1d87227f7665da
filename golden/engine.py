"""Numerics and data layouts of the scalable engine (stream contract v3, ``hw/ENGINE.md``): narrow scores
with the mask in-band, key slices of ``SK = MAX_KEYS / k`` keys, SwiftMax on narrow scores, and the
``aie::mmul`` block layouts the host re-tiles Q, K, V into (pack/unpack functions). Bit-exact reference for
the AIE kernels ``qk_slice`` / ``pv_slice``, the engine's PL top and the host.

The full description: ``docs/internals/golden.md``, section ``golden/engine.py``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TypeVar

import numpy as np

from .fixedpoint import shift_round
from .funcunits import LOG2E
from .online_softmax_int import (
    OnlineSoftmaxFormat,
    OnlineSoftmaxRegisters,
    online_softmax_int,
    online_softmax_registers,
)
from .regmap import Reg, RegisterMap
from .requant import RequantRegisters, requant_registers
from .swiftmax_int import (
    SwiftMaxFormat,
    SwiftMaxHeads,
    SwiftMaxRegisters,
    fold_multiplier,
    swiftmax_int,
    swiftmax_regmap,
)

RegsT = TypeVar("RegsT", SwiftMaxRegisters, SwiftMaxHeads)

SCORE_BITS: tuple[int, ...] = (8, 16, 32)
#: bits of the engine's output requantization multiplier ``rq_mult`` (signed): the int16 operand of the AIE1
#: 32x16-bit vector multiply the requantizer kernel requantizes O with
RQ_MULT_BITS = 16
#: largest ``rq_shift`` (AIE1 SRS shift range 0..62, a 6-bit field;
#: :func:`~vckattn.golden.swiftmax_int.fold_multiplier`'s default ``max_shift``)
MAX_RQ_SHIFT = 62


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


def row_limits(q_rows: int, rows: int, q0: int, valid_keys: int, causal: bool) -> np.ndarray:
    """``lim_i`` of a tile (int64 ``(q_rows,)``): key ``key`` (global) of query row ``i`` is kept iff
    ``key < lim_i``; ``lim_i = 0`` for ``i >= rows``, else ``valid_keys``, and ``min(valid_keys, q0 + i + 1)``
    when causal."""
    i = np.arange(q_rows, dtype=np.int64)
    lim = np.full(q_rows, int(valid_keys), np.int64)
    if causal:
        lim = np.minimum(lim, int(q0) + i + 1)
    return np.where(i < int(rows), lim, 0)


def tile_keep(q_rows: int, keys: int, rows: int, q0: int, valid_keys: int, causal: bool, key0: int = 0) -> np.ndarray:
    """The keep mask ``(q_rows, keys)`` of a tile on keys ``key0 .. key0 + keys − 1``: ``key < lim_i``
    (:func:`row_limits`)."""
    key = key0 + np.arange(keys, dtype=np.int64)
    return key[None, :] < row_limits(q_rows, rows, q0, valid_keys, causal)[:, None]


def engine_scores(acc: np.ndarray, keep: np.ndarray, shift: int, bits: int) -> np.ndarray:
    """The scores on the engine's score stream: :func:`narrow_scores` where ``keep``, the sentinel elsewhere."""
    s = narrow_scores(acc, shift, bits)
    return np.where(np.broadcast_to(keep, s.shape), s, sentinel(bits) if bits < 32 else 0)


def slice_keys(max_keys: int, kernels: int) -> int:
    """``SK = MAX_KEYS / k``: the keys of each of the ``kernels`` slices of a group (ValueError unless ``MAX_KEYS``
    is a positive multiple of ``16·k``, which makes ``SK`` a multiple of 16)."""
    if kernels < 1 or max_keys < 16 * kernels or max_keys % (16 * kernels):
        raise ValueError(f"max_keys {max_keys} must be a positive multiple of 16 x kernels ({16 * kernels})")
    return max_keys // kernels


def slice_needs_mask(q_rows: int, sk: int, j: int, rows: int, q0: int, valid_keys: int, causal: bool) -> bool:
    """Whether slice ``j`` (keys ``[j·SK, (j+1)·SK)``) of a tile holds a masked element: false exactly when
    ``rows = Q_ROWS`` and ``lim_i >= (j+1)·SK`` for every row (the kernels skip the mask then)."""
    return bool(rows < q_rows or row_limits(q_rows, rows, q0, valid_keys, causal).min() < (j + 1) * sk)


# ---------------------------------------------------------------------------------------------- layouts


def _check_2d(x: np.ndarray, rb: int, cb: int, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim < 2 or x.shape[-2] % rb or x.shape[-1] % cb:
        raise ValueError(f"{what}: shape {x.shape} is not (..., rows, cols) with rows a multiple of {rb} and cols "
                         f"of {cb}")
    return x


def _blocks(x: np.ndarray, rb: int, cb: int, col_major_blocks: bool, transpose_inside: bool,
            out: np.ndarray | None = None) -> np.ndarray:
    """``x`` ``(..., R, C)`` cut into ``rb × cb`` blocks, blocks ordered row of blocks first (or column of blocks
    first), each block row-major (or, with ``transpose_inside``, column-major), flattened to ``(..., R·C)``; written
    into ``out`` (contiguous, that shape and dtype) when given."""
    *lead, r, c = x.shape
    y = x.reshape(*lead, r // rb, rb, c // cb, cb)
    n = len(lead)
    blocks = (n + 2, n) if col_major_blocks else (n, n + 2)
    inside = (n + 3, n + 1) if transpose_inside else (n + 1, n + 3)
    t = y.transpose(*range(n), *blocks, *inside)
    if out is None:
        return np.ascontiguousarray(t).reshape(*lead, r * c)
    if out.shape != (*lead, r * c) or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a contiguous {x.dtype} array of shape {(*lead, r * c)}")
    np.copyto(out.reshape(t.shape), t)
    return out


def _unblocks(buf: np.ndarray, r: int, c: int, rb: int, cb: int, col_major_blocks: bool,
              transpose_inside: bool) -> np.ndarray:
    """Inverse of :func:`_blocks`: ``buf`` ``(..., R·C)`` -> ``(..., R, C)``."""
    buf = np.asarray(buf)
    *lead, n_el = buf.shape
    if n_el != r * c:
        raise ValueError(f"buffer of {n_el} elements is not {r} x {c}")
    nb_r, nb_c = r // rb, c // cb
    outer = (nb_c, nb_r) if col_major_blocks else (nb_r, nb_c)
    inner = (cb, rb) if transpose_inside else (rb, cb)
    y = buf.reshape(*lead, *outer, *inner)
    n = len(lead)
    # axes now: outer0, outer1, inner0, inner1 -> want (block row, row in block, block col, col in block)
    br = n + (1 if col_major_blocks else 0)
    bc = n + (0 if col_major_blocks else 1)
    ir = n + (3 if transpose_inside else 2)
    ic = n + (2 if transpose_inside else 3)
    return np.ascontiguousarray(y.transpose(*range(n), br, ir, bc, ic)).reshape(*lead, r, c)


def pack_q(q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Q tiles ``(..., Q_ROWS, D)`` -> the A layout of ``mmul<4,16,8>`` ``(..., Q_ROWS·D)`` (4×16 blocks, row of
    blocks first, row-major inside); into ``out`` when given (every pack function)."""
    return _blocks(_check_2d(q, 4, 16, "Q tile"), 4, 16, False, False, out)


def unpack_q(buf: np.ndarray, q_rows: int, d: int) -> np.ndarray:
    """Inverse of :func:`pack_q`."""
    return _unblocks(buf, q_rows, d, 4, 16, False, False)


def pack_k(k: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """K slices ``(..., SK, D)`` (key-major) -> Kᵀ in the B layout of ``mmul<4,16,8>`` ``(..., SK·D)``: 16×8
    blocks of Kᵀ (16 features × 8 keys), block ``(key/8, f/16)`` at ``((key/8)·(D/16) + f/16)·128``."""
    return _blocks(_check_2d(k, 8, 16, "K slice"), 8, 16, False, True, out)


def unpack_k(buf: np.ndarray, sk: int, d: int) -> np.ndarray:
    """Inverse of :func:`pack_k`: K ``(..., SK, D)``."""
    return _unblocks(buf, sk, d, 8, 16, False, True)


def pack_v(v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """V slices ``(..., SK, D)`` -> the B layout of ``mmul<4,8,8>`` ``(..., SK·D)``: 8×8 blocks, block
    ``(f/8, key/8)`` at ``((f/8)·(SK/8) + key/8)·64`` (feature blocks outer), key-major inside."""
    return _blocks(_check_2d(v, 8, 8, "V slice"), 8, 8, True, False, out)


def unpack_v(buf: np.ndarray, sk: int, d: int) -> np.ndarray:
    """Inverse of :func:`pack_v`."""
    return _unblocks(buf, sk, d, 8, 8, True, False)


def pack_scores(s: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Scores or P ``(..., Q_ROWS, SK)`` (any dtype: int8/int16 scores, uint8 P) -> the C layout of QKᵀ = the A
    layout of ``mmul<4,8,8>`` ``(..., Q_ROWS·SK)``: 4×8 blocks, row of blocks first, row-major inside."""
    return _blocks(_check_2d(s, 4, 8, "score tile"), 4, 8, False, False, out)


def unpack_scores(buf: np.ndarray, q_rows: int, sk: int) -> np.ndarray:
    """Inverse of :func:`pack_scores`."""
    return _unblocks(buf, q_rows, sk, 4, 8, False, False)


def engine_requant(s_v: float, p_frac: int, s_a: float) -> RequantRegisters:
    """The engine's output requantization of O (``s_v·2^-p_frac``) to A (``s_a``): the ratio
    ``s_v·2^-p_frac / s_a`` folded into a signed :data:`RQ_MULT_BITS`-bit ``mult`` and a ``shift`` in
    0..:data:`MAX_RQ_SHIFT` (:func:`vckattn.golden.requant.requant_registers`; the reference layer's ``rq_a`` is the
    same ratio in 18 bits)."""
    return requant_registers(s_v * 2.0**-p_frac / s_a, bits=RQ_MULT_BITS)


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


#: the normalizers an engine build can carry, in the order of the ``normalizer`` register's codes (0: SwiftMax,
#: 1: online softmax)
ENGINE_NORMALIZERS: tuple[str, ...] = ("swiftmax", "online_softmax")
#: the online-softmax registers of the engine's register map, prefixed (the SwiftMax ones keep their names)
ONLINE_PREFIX = "os_"


def engine_regmap(fmt: SwiftMaxFormat, normalizers: tuple[str, ...] = ("swiftmax",),
                  read_ports: int = 1) -> RegisterMap:
    """The register map of the engine's PL top: the one declaration of its registers.

    A SwiftMax-only build (``normalizers = ("swiftmax",)``) has exactly :func:`swiftmax_regmap`. A build that also
    carries online softmax adds, after SwiftMax's registers: ``normalizer`` (1 bit, the layer's normalizer, the index
    into :data:`ENGINE_NORMALIZERS`: 0 SwiftMax, 1 online softmax) and the online-softmax unit's ``os_a_mult`` (s24) /
    ``os_a_shift`` (u6) (:func:`engine_online_registers`). ID and VERSION are SwiftMax's."""
    norms = tuple(normalizers)
    if not norms or len(set(norms)) != len(norms) or any(n not in ENGINE_NORMALIZERS for n in norms) \
            or "swiftmax" not in norms:
        raise ValueError(f"normalizers must be swiftmax, optionally with online_softmax; got {norms}")
    base = swiftmax_regmap(fmt, read_ports=read_ports)
    if norms == ("swiftmax",):
        return base
    osf = OnlineSoftmaxFormat()
    extra = [
        Reg("normalizer", 1, doc="the layer's normalizer: 0 SwiftMax, 1 online softmax (write while idle)"),
        Reg(f"{ONLINE_PREFIX}a_mult", osf.a_bits, signed=True, doc="online softmax: A·2^t_frac ≈ a_mult·2^-a_shift"),
        Reg(f"{ONLINE_PREFIX}a_shift", 6, doc="online softmax: right shift of s·a_mult (round half up)"),
    ]
    return RegisterMap([*base.regs, *extra], base.mems, ident=base.ident, version=base.version)


def engine_mode_values(normalizer: str, online: OnlineSoftmaxRegisters | None = None) -> dict[str, int]:
    """The values of a dual build's mode and online-softmax registers (:func:`engine_regmap`) for a layer of
    ``normalizer`` (``"swiftmax"``, or ``"online_softmax"`` / ``"softmax"`` with its ``online`` registers for the
    engine's scores, :func:`engine_online_registers`); a SwiftMax layer leaves the online registers 0."""
    name = "online_softmax" if normalizer in ("softmax", "online_softmax") else normalizer
    if name not in ENGINE_NORMALIZERS:
        raise ValueError(f"unknown normalizer {normalizer!r}")
    if name == "online_softmax" and online is None:
        raise ValueError("an online-softmax layer needs its online-softmax registers")
    regs = online if name == "online_softmax" else None
    return {"normalizer": ENGINE_NORMALIZERS.index(name), f"{ONLINE_PREFIX}a_mult": regs.a_mult if regs else 0,
            f"{ONLINE_PREFIX}a_shift": regs.a_shift if regs else 0}


def engine_online_format(lanes: int, fmt: OnlineSoftmaxFormat | None = None) -> OnlineSoftmaxFormat:
    """The online-softmax format of an engine build of ``lanes`` online-softmax lanes: ``fmt`` (default
    :class:`OnlineSoftmaxFormat`) with ``block = lanes`` (the unit takes ``lanes`` scores a beat)."""
    return replace(fmt or OnlineSoftmaxFormat(), block=int(lanes))


def engine_online_p(slices: np.ndarray, regs: OnlineSoftmaxRegisters, bits: int,
                    fmt: OnlineSoftmaxFormat) -> np.ndarray:
    """The engine's PL online softmax on one tile's score slices ``(k, Q_ROWS, SK)`` (stream scores, slice ``j``
    = keys ``[j·SK, (j+1)·SK)``, the sentinel where masked): the slices gathered into rows of ``MAX_KEYS = k·SK``
    keys, :func:`~vckattn.golden.online_softmax_int.online_softmax_int` on each row with ``keep = (s != sentinel)``
    (blocks of ``fmt.block`` keys from key 0), and the P rows cut back into slices: uint8-valued int64
    ``(k, Q_ROWS, SK)``, 0 where masked (a fully masked row is all 0)."""
    s = np.asarray(slices, dtype=np.int64)
    if s.ndim != 3:
        raise ValueError(f"slices must be (k, Q_ROWS, SK), got shape {s.shape}")
    k, q_rows, sk = s.shape
    rows = s.transpose(1, 0, 2).reshape(q_rows, k * sk)
    p = online_softmax_int(rows, regs, rows != sentinel(bits), fmt)
    return np.ascontiguousarray(p.reshape(q_rows, k, sk).transpose(1, 0, 2))


def engine_p(s: np.ndarray, regs: SwiftMaxRegisters | SwiftMaxHeads, bits: int, fmt: SwiftMaxFormat | None = None,
             head: np.ndarray | int | None = None) -> np.ndarray:
    """The engine's PL SwiftMax on stream scores ``s``: P uint8-valued int64, 0 where ``s`` is the sentinel.
    Per-head constants (:class:`SwiftMaxHeads`) need ``head``, the packet header's head index of the scores."""
    f = fmt or engine_format(bits)
    s = np.asarray(s, dtype=np.int64)
    return swiftmax_int(s, regs, s != sentinel(bits), f, head=head)


__all__ = ["ENGINE_NORMALIZERS", "MAX_RQ_SHIFT", "ONLINE_PREFIX", "RQ_MULT_BITS", "SCORE_BITS", "engine_format",
           "engine_mode_values", "engine_online_format", "engine_online_p", "engine_online_registers", "engine_p",
           "engine_regmap",
           "engine_registers", "engine_requant", "engine_scores",
           "narrow_scores", "pack_k", "pack_q", "pack_scores", "pack_v", "row_limits", "score_max", "score_shift_for",
           "sentinel", "slice_keys", "slice_needs_mask", "tile_keep", "unpack_k", "unpack_q", "unpack_scores",
           "unpack_v"]

"""The DDR buffers between the host and the attention build: one layout for the ``xrt`` and
``pynq`` backends, the HLS data movers and the test fakes.

Everything is little endian and C-contiguous. ``n`` is the number of tiles in one *launch* (a
group of up to ``tiles_per_launch`` tiles, default :data:`TILES_PER_LAUNCH`, that the movers
process in one run), ``R`` the tile's query rows (``manifest.tile.q_rows``), ``D`` the head size,
``KP`` the padded key count (``LayerJob.keys_pad``, a multiple of 32 so that every mask row is a
whole number of 32-bit words), ``B`` sequences and ``KV`` key/value heads.

======== ============================ =============================================================
buffer   dtype, shape                 contents
======== ============================ =============================================================
``desc`` uint32 ``(n, 8)``            per tile ``[tile_id, batch, head, kv_head, q0, rows,
                                      seq_len, keys_pad]`` (:data:`DESC_FIELDS`), 32 bytes a tile;
                                      ``head`` (``Tile.head``, the query head) selects the SwiftMax
                                      register set: ``mm2s_tiles`` sends it as the first word of the
                                      tile's ``mask`` stream and ``score_switch`` puts it on the score
                                      TUSER (hw/STREAMS.md); it must be below ``max_heads`` (32)
``q``    int8 ``(n, R, D)``           the tile's queries, rows ``>= rows`` zero
``mask`` uint8 ``(n, R, KP / 8)``     key ``j`` of row ``i`` kept: bit ``j % 8`` of byte ``j // 8``
                                      (``np.packbits(keep, axis=-1, bitorder="little")``)
``kv``   int8 ``(B*KV, 2, KP, D)``    per (sequence ``b``, kv head ``g``) at index ``b*KV + g``: K
                                      then V, keys ``>= seq_len`` zero; uploaded once per layer
``out``  bytes, ``n`` records of      per tile a 16-byte header ``uint32 tile_id, uint32 rows,
         ``16 + R*D``                 uint32 status (0 = ok), uint32 reserved`` and then ``A`` int8
                                      ``(R, D)`` row-major; records back to back in issue order
======== ============================ =============================================================

Before a launch the host fills every ``out`` header with :data:`UNWRITTEN` (tile id and status
``0xFFFFFFFF``); a record still holding it afterwards was not written by the device and is left
out by :func:`unpack_out` (so a dropped tile is reported by
:func:`vckattn.host.tiler.collect_results` as missing, not as a stale tile from an earlier launch).
A written record with a nonzero status raises :class:`~vckattn.host.backends.base.DeviceError`
naming the tile.

Double buffering: the backends keep two sets of ``desc``/``q``/``mask``/``out`` (ping and pong,
``launch % 2``) and pack launch ``c + 1`` into one while launch ``c`` runs from the other.

:func:`pack_tiles`, :func:`pack_kv` and :func:`unpack_out` are the host side; the inverses
:func:`unpack_tiles`, :func:`unpack_kv` and :func:`pack_out` are what the data movers do (and
the fake card in the tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vckattn.host.tiler import LayerJob, Tile, TileResult

DESC_FIELDS = ("tile_id", "batch", "head", "kv_head", "q0", "rows", "seq_len", "keys_pad")
DESC_WORDS = len(DESC_FIELDS)
DESC_BYTES = 4 * DESC_WORDS
OUT_HEADER_BYTES = 16
STATUS_OK = 0
#: tile id and status of an ``out`` header the device has not written
UNWRITTEN = 0xFFFFFFFF
#: tiles per launch unless a backend is told otherwise
TILES_PER_LAUNCH = 16
KEY_ALIGN = 32


def _u8(buf: Any) -> np.ndarray:
    """A flat uint8 view of a bytes-like object or array (no copy when possible)."""
    if isinstance(buf, np.ndarray):
        return np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    return np.frombuffer(memoryview(buf).cast("B"), np.uint8)


def _check_keys(keys_pad: int) -> None:
    if keys_pad <= 0 or keys_pad % KEY_ALIGN:
        raise ValueError(f"keys_pad {keys_pad} must be a positive multiple of {KEY_ALIGN}")


def desc_nbytes(n_tiles: int) -> int:
    return n_tiles * DESC_BYTES


def q_nbytes(n_tiles: int, q_rows: int, head_dim: int) -> int:
    return n_tiles * q_rows * head_dim


def mask_nbytes(n_tiles: int, q_rows: int, keys_pad: int) -> int:
    return n_tiles * q_rows * (keys_pad // 8)


def kv_nbytes(n_slabs: int, keys_pad: int, head_dim: int) -> int:
    return n_slabs * 2 * keys_pad * head_dim


def out_record_nbytes(q_rows: int, head_dim: int) -> int:
    """Bytes of one tile's ``out`` record (header and ``A``)."""
    return OUT_HEADER_BYTES + q_rows * head_dim


def out_nbytes(n_tiles: int, q_rows: int, head_dim: int) -> int:
    """Bytes of the ``out`` buffer of ``n_tiles`` tiles."""
    return n_tiles * out_record_nbytes(q_rows, head_dim)


# ------------------------------------------------------------------------------------ host side


def pack_tiles(job: LayerJob, tiles: Sequence[Tile]) -> dict[str, np.ndarray]:
    """``desc``, ``q`` and ``mask`` of one launch (arrays in the layout of the module docstring)."""
    _check_keys(job.keys_pad)
    q_rows = job.tile.q_rows
    hd = int(job.k.shape[-1])
    n = len(tiles)
    desc = np.empty((n, DESC_WORDS), "<u4")
    q = np.empty((n, q_rows, hd), np.int8)
    mask = np.empty((n, q_rows, job.keys_pad // 8), np.uint8)
    for i, t in enumerate(tiles):
        desc[i] = (t.tile_id, t.batch, t.head, t.kv_head, t.q0, t.rows, job.seq_len, job.keys_pad)
        if t.q.shape != (q_rows, hd) or t.keep.shape != (q_rows, job.keys_pad):
            raise ValueError(f"{t.describe()}: q {t.q.shape} / keep {t.keep.shape} do not match the job's tile "
                             f"({q_rows}, {hd}) / ({q_rows}, {job.keys_pad})")
        q[i] = t.q
        mask[i] = np.packbits(np.asarray(t.keep, bool), axis=-1, bitorder="little")
    return {"desc": desc, "q": q, "mask": mask}


def pack_kv(job: LayerJob) -> np.ndarray:
    """The ``kv`` buffer of a layer: int8 ``(B*KV, 2, keys_pad, head_dim)``."""
    _check_keys(job.keys_pad)
    b, kv, kp, hd = job.k.shape
    if job.v.shape != job.k.shape:
        raise ValueError(f"k {job.k.shape} and v {job.v.shape} differ in shape")
    return np.ascontiguousarray(np.stack([job.k, job.v], axis=2).astype(np.int8, copy=False).reshape(b * kv, 2, kp, hd))


def blank_out(n_tiles: int, q_rows: int, head_dim: int) -> np.ndarray:
    """An ``out`` buffer whose every header says :data:`UNWRITTEN` (what the host writes before a launch)."""
    return pack_out([], q_rows, head_dim, n_slots=n_tiles)


def unpack_out(buf: Any, n_tiles: int, q_rows: int, head_dim: int) -> list[TileResult]:
    """The tile results in the first ``n_tiles`` records of ``buf``, in buffer order.

    Records still :data:`UNWRITTEN` are left out; a nonzero status or a malformed header raises
    :class:`~vckattn.host.backends.base.DeviceError` naming the tile. Ids and order are not checked
    here (that is :func:`vckattn.host.tiler.collect_results`' job).
    """
    from vckattn.host.backends.base import DeviceError

    raw = _u8(buf)
    rec = out_record_nbytes(q_rows, head_dim)
    if raw.size < n_tiles * rec:
        raise ValueError(f"out buffer of {raw.size} bytes is shorter than {n_tiles} records of {rec} bytes")
    recs = raw[: n_tiles * rec].reshape(n_tiles, rec)
    heads = np.ascontiguousarray(recs[:, :OUT_HEADER_BYTES]).view("<u4")
    out: list[TileResult] = []
    for slot in range(n_tiles):
        tile_id, rows, status, _ = (int(v) for v in heads[slot])
        if tile_id == UNWRITTEN and status == UNWRITTEN:
            continue
        if status != STATUS_OK:
            raise DeviceError(f"the device reported status {status:#x} for tile {tile_id} (out record {slot})")
        if not 0 < rows <= q_rows:
            raise DeviceError(f"the device returned a malformed record for tile {tile_id} (out record {slot}): "
                              f"rows {rows} outside 1..{q_rows}")
        a = recs[slot, OUT_HEADER_BYTES:].view(np.int8).reshape(q_rows, head_dim).copy()
        out.append(TileResult(tile_id, a))
    return out


# ---------------------------------------------------------------------------------- device side


def unpack_tiles(desc: Any, q: Any, mask: Any, n_tiles: int, q_rows: int, head_dim: int) -> list[Tile]:
    """The first ``n_tiles`` tiles of a launch's raw ``desc``/``q``/``mask`` buffers (as a mover reads them)."""
    d = _u8(desc)[: n_tiles * DESC_BYTES]
    if d.size < n_tiles * DESC_BYTES:
        raise ValueError(f"desc buffer holds fewer than {n_tiles} descriptors")
    rows_desc = d.view("<u4").reshape(n_tiles, DESC_WORDS)
    if n_tiles == 0:
        return []
    keys = {int(k) for k in rows_desc[:, 7]}
    if len(keys) != 1:
        raise ValueError(f"one launch must have one keys_pad, got {sorted(keys)}")
    kp = keys.pop()
    _check_keys(kp)
    qa = _u8(q)[: q_nbytes(n_tiles, q_rows, head_dim)].view(np.int8).reshape(n_tiles, q_rows, head_dim)
    ma = _u8(mask)[: mask_nbytes(n_tiles, q_rows, kp)].reshape(n_tiles, q_rows, kp // 8)
    keep = np.unpackbits(ma, axis=-1, count=kp, bitorder="little").astype(bool)
    tiles = []
    for i in range(n_tiles):
        tid, b, h, g, q0, rows, _s, _kp = (int(v) for v in rows_desc[i])
        tiles.append(Tile(tid, b, h, g, q0, rows, qa[i].copy(), keep[i].copy()))
    return tiles


def desc_fields(desc: Any, n_tiles: int) -> list[dict[str, int]]:
    """The first ``n_tiles`` descriptors as dicts keyed by :data:`DESC_FIELDS`."""
    rows = _u8(desc)[: n_tiles * DESC_BYTES].view("<u4").reshape(n_tiles, DESC_WORDS)
    return [dict(zip(DESC_FIELDS, (int(v) for v in r), strict=True)) for r in rows]


def unpack_kv(buf: Any, keys_pad: int, head_dim: int, n_kv_heads: int) -> tuple[np.ndarray, np.ndarray]:
    """``(k, v)`` int8 ``(B, KV, keys_pad, head_dim)`` from a ``kv`` buffer of ``B * n_kv_heads`` slabs."""
    _check_keys(keys_pad)
    raw = _u8(buf)
    slab = 2 * keys_pad * head_dim
    n = raw.size // slab
    if n == 0 or n % n_kv_heads:
        raise ValueError(f"kv buffer of {raw.size} bytes is not a whole number of sequences of {n_kv_heads} "
                         f"kv heads of {slab} bytes")
    a = raw[: n * slab].view(np.int8).reshape(n // n_kv_heads, n_kv_heads, 2, keys_pad, head_dim)
    return a[:, :, 0].copy(), a[:, :, 1].copy()


def pack_out(records: Sequence[tuple[int, int, int, np.ndarray]], q_rows: int, head_dim: int,
             n_slots: int | None = None) -> np.ndarray:
    """An ``out`` buffer (uint8) from ``(tile_id, rows, status, a)`` records; slots past the records
    (up to ``n_slots``) stay :data:`UNWRITTEN`."""
    n_slots = len(records) if n_slots is None else n_slots
    if len(records) > n_slots:
        raise ValueError(f"{len(records)} records do not fit {n_slots} slots")
    rec = out_record_nbytes(q_rows, head_dim)
    buf = np.zeros((n_slots, rec), np.uint8)
    heads = buf[:, :OUT_HEADER_BYTES].view("<u4")
    heads[:] = (UNWRITTEN, 0, UNWRITTEN, 0)
    for i, (tile_id, rows, status, a) in enumerate(records):
        heads[i] = (tile_id, rows, status, 0)
        a = np.asarray(a)
        if a.shape != (q_rows, head_dim):
            raise ValueError(f"tile {tile_id}: A has shape {a.shape}, expected {(q_rows, head_dim)}")
        buf[i, OUT_HEADER_BYTES:] = a.astype(np.int8, copy=False).reshape(-1).view(np.uint8)
    return buf.reshape(-1)


__all__ = ["DESC_BYTES", "DESC_FIELDS", "DESC_WORDS", "OUT_HEADER_BYTES", "STATUS_OK", "TILES_PER_LAUNCH",
           "UNWRITTEN", "blank_out", "desc_fields", "desc_nbytes", "kv_nbytes", "mask_nbytes", "out_nbytes",
           "out_record_nbytes", "pack_kv", "pack_out", "pack_tiles", "q_nbytes", "unpack_kv", "unpack_out",
           "unpack_tiles"]

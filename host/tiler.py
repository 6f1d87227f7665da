"""Tiling: split one attention layer's per-head operands into the hardware's tiles, and check
the tiles that come back.

A *tile* is ``q_rows`` query rows of one head of one sequence (int8 Q, zero-padded to
``q_rows``) with its key mask over all keys (padding and causal, ``keys_pad`` = the sequence
rounded up to whole ``key_block`` s; padded keys and padded rows are masked). The device computes,
per tile: ``S = Q·Kᵀ`` (AIE), ``P = normalizer(S)`` (PL, row by row), ``O = P·V`` (AIE), ``A =
requant(O)`` int8 ``(q_rows, head_dim)``, and returns ``A`` with the tile's id.

Tile ids are issued in order (0, 1, 2, ...) per layer run; :func:`collect_results` requires
every id back exactly once, in order, and raises :class:`TileError` naming the tile (its id,
sequence, head and rows) otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from vckattn.hw.manifest import TileShape, padded_keys


class TileError(RuntimeError):
    """A tile missing, duplicated, out of order or malformed in what a device returned."""


@dataclass(frozen=True)
class Tile:
    """One unit of device work (see the module docstring). Arrays are int8 / bool."""

    tile_id: int
    batch: int
    head: int
    kv_head: int
    q0: int  # first query row (token index)
    rows: int  # valid query rows (<= q_rows)
    q: np.ndarray = field(repr=False)  # (q_rows, head_dim) int8
    keep: np.ndarray = field(repr=False)  # (q_rows, keys_pad) bool

    def describe(self) -> str:
        return (f"tile {self.tile_id} (sequence {self.batch}, head {self.head}, "
                f"query rows {self.q0}..{self.q0 + self.rows - 1})")


@dataclass
class TileResult:
    """What the device returns for one tile: its id and ``a`` int8 ``(q_rows, head_dim)``."""

    tile_id: int
    a: np.ndarray
    cycles: int | None = None  # RTL simulation only: cycles this tile spent in the PL kernel


@dataclass
class LayerJob:
    """One layer's device work: shared K/V per (sequence, kv head) and the tiles, in issue order."""

    layer: int
    k: np.ndarray  # (B, KV, keys_pad, head_dim) int8
    v: np.ndarray  # (B, KV, keys_pad, head_dim) int8
    tiles: list[Tile]
    seq_len: int
    keys_pad: int
    tile: TileShape


def plan_tiles(q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray, tile: TileShape,
               layer: int = 0) -> LayerJob:
    """Split per-head int8 operands into tiles.

    Args:
        q: ``(B, H, S, hd)`` int8 queries (after RoPE where the model has it).
        k, v: ``(B, KV, S, hd)`` int8; query head ``h`` uses kv head ``h // (H // KV)``.
        keep: ``(B, 1 or S, S)`` bool: key ``j`` visible to query row ``i`` (padding & causal).
        tile: the hardware tile shape (from the bitstream manifest).
    """
    b, h, s, hd = q.shape
    kv = k.shape[1]
    if h % kv:
        raise ValueError(f"{h} query heads cannot share {kv} kv heads")
    if hd not in tile.head_dims:
        raise ValueError(f"head_dim {hd} is not a hardware tile size {tile.head_dims}")
    kp = padded_keys(s, tile)
    kpad = np.zeros((b, kv, kp, hd), np.int8)
    vpad = np.zeros((b, kv, kp, hd), np.int8)
    kpad[:, :, :s] = k
    vpad[:, :, :s] = v
    keep_full = np.broadcast_to(np.asarray(keep, bool), (b, s, s))
    tiles: list[Tile] = []
    tid = 0
    for bi in range(b):
        for hi in range(h):
            for q0 in range(0, s, tile.q_rows):
                rows = min(tile.q_rows, s - q0)
                qt = np.zeros((tile.q_rows, hd), np.int8)
                qt[:rows] = q[bi, hi, q0:q0 + rows]
                kt = np.zeros((tile.q_rows, kp), bool)
                kt[:rows, :s] = keep_full[bi, q0:q0 + rows]
                tiles.append(Tile(tid, bi, hi, hi // (h // kv), q0, rows, qt, kt))
                tid += 1
    return LayerJob(layer, kpad, vpad, tiles, s, kp, tile)


def collect_results(job: LayerJob, results: Iterable[TileResult], progress: object | None = None) -> np.ndarray:
    """Check the returned tiles and assemble the head outputs ``(B, H, S, hd)`` int8.

    Every tile must come back exactly once, in issue order, with an ``a`` of shape ``(q_rows, hd)``.
    On the first deviation the rest of the stream is drained (so that a tile arriving late is told
    apart from a missing one) and :class:`TileError` names the tile. ``progress``: an object with
    ``update(n)`` (a tqdm bar), called per tile.
    """
    tiles = job.tiles
    b = int(job.k.shape[0])
    h = 1 + max((t.head for t in tiles), default=-1)
    hd = int(job.k.shape[-1])
    out = np.zeros((b, h, job.seq_len, hd), np.int8)
    it: Iterator[TileResult] = iter(results)
    expected = 0
    by_id = {t.tile_id: t for t in tiles}
    for r in it:
        if r.tile_id != expected:
            _raise_order_error(job, by_id, expected, r, it)
        t = tiles[expected]
        a = np.asarray(r.a)
        if a.shape != (job.tile.q_rows, hd):
            raise TileError(f"{t.describe()}: result has shape {a.shape}, expected {(job.tile.q_rows, hd)}")
        if a.dtype != np.int8:
            raise TileError(f"{t.describe()}: result has dtype {a.dtype}, expected int8")
        out[t.batch, t.head, t.q0:t.q0 + t.rows] = a[:t.rows]
        expected += 1
        if progress is not None:
            progress.update(1)  # type: ignore[attr-defined]
    if expected < len(tiles):
        missing = tiles[expected]
        raise TileError(f"layer {job.layer}: {missing.describe()} missing: the device returned "
                        f"{expected} of {len(tiles)} tiles")
    return out


def _raise_order_error(job: LayerJob, by_id: dict[int, Tile], expected: int, got: TileResult,
                       rest: Iterator[TileResult]) -> None:
    seen_later = [got.tile_id] + [r.tile_id for r in rest]
    want = by_id.get(expected)
    where = f"layer {job.layer}: "
    if got.tile_id not in by_id:
        raise TileError(f"{where}the device returned an unknown tile id {got.tile_id} "
                        f"(issued ids 0..{len(job.tiles) - 1}) while waiting for tile {expected}")
    if got.tile_id < expected:
        raise TileError(f"{where}{by_id[got.tile_id].describe()} returned twice (duplicate), "
                        f"while waiting for tile {expected}")
    if want is not None and expected in seen_later:
        raise TileError(f"{where}{want.describe()} out of order: tile {got.tile_id} arrived before it")
    raise TileError(f"{where}{want.describe() if want else f'tile {expected}'} missing: "
                    f"tile {got.tile_id} arrived in its place")


__all__ = ["LayerJob", "Tile", "TileError", "TileResult", "collect_results", "plan_tiles"]

"""The host side of the scalable engine (stream contract v2, ``hw/ENGINE.md``): one launch per layer.

A launch has, in card memory: the operand buffers Q ``(B, H, Sp, d)``, K and V ``(B, KV, Kp, d)`` int8
(``Sp``/``Kp``: the sequence rounded up to whole tiles / key blocks); per pipeline two **command lists**
(``qk`` and ``v``) of 32-byte descriptors — the header beat the mover sends, then the byte offset of the
payload it gathers from Q (TILE) or K/V (LOAD_K/LOAD_V); the A buffer ``(tiles, Q_ROWS, d)`` int8
(tile ``t`` in slot ``t``) and the ``done`` buffer of RESULT headers (pipeline ``p`` writes its ``i``-th
record at ``done_start[p] + i``).

Whole (batch, head) groups go to one pipeline, round-robin. Tile ``t = (b·H + h)·T + r`` (sequence ``b``,
query head ``h``, query block ``r`` of ``T = ceil(S / Q_ROWS)``), so the A buffer *is* the head outputs
``(B, H, T·Q_ROWS, d)``: nothing to gather. A pipeline finishes its tiles in issue order (its kernels are
FIFO-connected), so the ``done`` buffer a correct launch leaves is known in advance: :func:`check_done`
compares it in one operation and only on a difference names the misrouted, dropped or duplicated tile.

The command lists depend on the geometry, the valid keys per sequence, the causal flag and the layer's
score shift only: :func:`commands` caches them, so a model's layers after the first launch cost the host
a dictionary lookup, the launch and one comparison (``vckattn bench host --engine``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from vckattn.golden.errors import EXIT_INPUT, UserError
from vckattn.host.tiler import TileError
from vckattn.hw.engine import streams
from vckattn.hw.engine.model import EngineParams

#: bytes of one command descriptor: the header beat, the uint64 payload byte offset, 8 reserved bytes
CMD_BYTES = 32


class EngineMaskError(UserError):
    exit_code = EXIT_INPUT

    """A key mask the engine's in-band mask cannot express (only right padding and causal masks can)."""


def params_from_manifest(manifest: object) -> EngineParams:
    """The engine parameters of a bitstream manifest with an ``engine`` section (ValueError otherwise)."""
    data = manifest.data  # type: ignore[attr-defined]
    eng = data.get("engine")
    if not eng:
        raise ValueError(f"{manifest.name}: not an engine build (no 'engine' section)")  # type: ignore[attr-defined]
    tile = data["tile"]
    return EngineParams(pipelines=int(eng["pipelines"]), kernels=int(eng["kernels_per_pipeline"]),
                        q_rows=int(tile["q_rows"]), key_block=int(tile["key_block"]),
                        max_d=max(int(d) for d in tile["head_dims"]), max_keys=int(data["max_seq_len"]),
                        score_bits=int(eng["score_bits"]), lanes=int(tile["lanes"]))


@dataclass(frozen=True)
class Geometry:
    """What the command lists depend on: sizes, valid keys per sequence, the causal flag, the score shift."""

    batch: int
    heads: int
    kv_heads: int
    seq: int
    d: int
    valid_keys: tuple[int, ...]
    causal: bool
    score_shift: int


@dataclass
class Commands:
    """The command lists of one geometry (module docstring); read-only once built."""

    params: EngineParams
    geometry: Geometry
    qk: list[np.ndarray]  # (n, CMD_BYTES) uint8 per pipeline
    v: list[np.ndarray]
    tiles: list[np.ndarray]  # tile ids per pipeline, issue order
    done_expected: np.ndarray  # (n_tiles, 16) uint8
    done_start: np.ndarray  # (pipelines,) first done slot of each pipeline
    n_tiles: int
    t_per: int  # tiles per (batch, head) group
    seq_pad: int  # Sp
    keys_pad: int  # Kp

    @functools.cached_property
    def done_bytes(self) -> bytes:
        """``done_expected`` as bytes (one memcmp per launch)."""
        return self.done_expected.tobytes()


_VALID_KEYS: dict[tuple, tuple[int, ...]] = {}


def valid_keys(keep: np.ndarray, causal: bool) -> tuple[int, ...]:
    """Per sequence, the count of valid keys such that ``keep`` ``(B, 1 or S, S)`` is exactly the engine's
    rule (keys below it, and ``j <= i`` when causal); EngineMaskError naming the sequence otherwise.
    Remembered per mask (a model's layers share one)."""
    keep = np.asarray(keep, bool)
    key = (keep.shape, bool(causal), keep.tobytes())
    hit = _VALID_KEYS.get(key)
    if hit is None:
        hit = _valid_keys(keep, causal)
        if len(_VALID_KEYS) >= 64:
            _VALID_KEYS.clear()
        _VALID_KEYS[key] = hit
    return hit


def _valid_keys(keep: np.ndarray, causal: bool) -> tuple[int, ...]:
    b, rows, s = keep.shape
    vk = keep.any(axis=1).sum(axis=1)
    j = np.arange(s)
    want = j[None, None, :] < vk[:, None, None]
    if causal:
        want = want & (j[None, None, :] <= np.arange(rows)[None, :, None])
    bad = np.flatnonzero((np.broadcast_to(want, keep.shape) != keep).reshape(b, -1).any(axis=1))
    if bad.size:
        raise EngineMaskError(f"sequence {int(bad[0])}: its key mask is not right padding"
                              f"{' with the causal mask' if causal else ''}; the engine's in-band mask expresses "
                              "only those (pad on the right)")
    return tuple(int(x) for x in vk)


def _descriptors(n: int, header: np.ndarray, offset: np.ndarray) -> np.ndarray:
    out = np.zeros((n, CMD_BYTES), np.uint8)
    out[:, :16] = header
    out[:, 16:24] = np.asarray(offset, dtype="<u8").reshape(n, 1).view(np.uint8)
    return out


@functools.lru_cache(maxsize=64)
def commands(params: EngineParams, g: Geometry) -> Commands:
    """The command lists and the expected ``done`` buffer of geometry ``g`` (cached). Built from the cached
    template of its shape (every key valid, shift 0) by patching the ``valid_keys`` and ``score_shift`` fields
    in one vectorized pass, so a new batch (new padding) or a new layer (new shift) costs tens of µs."""
    base = replace(g, valid_keys=(g.seq,) * g.batch, score_shift=0)
    t = _template(params, base)
    if g == base:
        return t.commands
    vk = np.asarray(g.valid_keys, np.int64)
    qk, vv = t.qk.copy(), t.v.copy()
    streams.patch_many("command", qk[:, :16], "valid_keys", vk[t.qk_seq])
    streams.patch_many("command", vv[:, :16], "valid_keys", vk[t.v_seq])
    if g.score_shift:
        streams.patch_many("command", qk[:, :16], "score_shift", g.score_shift, where=t.qk_tile)
    qk.flags.writeable = False
    vv.flags.writeable = False
    return replace(t.commands, geometry=g, qk=[qk[a:b] for a, b in t.qk_bounds],
                   v=[vv[a:b] for a, b in t.v_bounds])


@dataclass(frozen=True)
class _Template:
    """The commands of a shape (every key valid, shift 0), all pipelines' rows in one array each, with each
    row's sequence and which qk rows are TILEs (what :func:`commands` patches)."""

    commands: Commands
    qk: np.ndarray
    v: np.ndarray
    qk_bounds: list[tuple[int, int]]
    v_bounds: list[tuple[int, int]]
    qk_seq: np.ndarray
    v_seq: np.ndarray
    qk_tile: np.ndarray


@functools.lru_cache(maxsize=16)
def _template(params: EngineParams, g: Geometry) -> _Template:
    c = _build(params, g)
    qk, vv = np.concatenate(c.qk), np.concatenate(c.v)
    f = streams.decode_many("command", qk[:, :16])
    # a LOAD's tag is its (batch, head) group, a TILE's its tile id = group * t_per + r
    qk_group = np.where(f["op"] == streams.OP_TILE, f["tag"] // c.t_per, f["tag"])
    vf = streams.decode_many("command", vv[:, :16])

    def bounds(parts: list[np.ndarray]) -> list[tuple[int, int]]:
        ends = np.cumsum([len(a) for a in parts]).tolist()
        return list(zip([0, *ends[:-1]], ends, strict=True))

    return _Template(c, qk, vv, bounds(c.qk), bounds(c.v), qk_group // g.heads, vf["tag"] // g.heads,
                     f["op"] == streams.OP_TILE)


def _build(params: EngineParams, g: Geometry) -> Commands:
    """The command lists of geometry ``g``, from scratch."""
    p = params
    if g.d % 16 or not 16 <= g.d <= p.max_d:
        raise UserError(f"head size {g.d} is not one this engine takes (multiples of 16 up to {p.max_d})")
    n_kb = -(-g.seq // p.key_block)
    kp = n_kb * p.key_block
    if kp > p.max_keys:
        raise UserError(f"a sequence of {g.seq} tokens needs {kp} keys; this engine takes at most {p.max_keys}")
    if g.heads % g.kv_heads:
        raise UserError(f"{g.heads} query heads cannot share {g.kv_heads} kv heads")
    t_per = -(-g.seq // p.q_rows)
    rep = g.heads // g.kv_heads
    vk = np.asarray(g.valid_keys, np.int64)
    r = np.arange(t_per)
    qk, vv, tiles, done, starts = [], [], [], [], []
    start = 0
    for pipe in range(p.pipelines):
        grp = np.arange(pipe, g.batch * g.heads, p.pipelines)
        ng = len(grp)
        gb, gh = grp // g.heads, grp % g.heads
        kv_off = (gb * g.kv_heads + gh // rep) * kp * g.d
        load = dict(n_kb=n_kb, d=g.d, valid_keys=vk[gb], tiles=t_per, tag=grp)
        tid = (grp[:, None] * t_per + r[None, :]).reshape(-1)
        tile_hdr = streams.encode_many(
            "command", ng * t_per, op=streams.OP_TILE, causal=int(g.causal), score_shift=g.score_shift, n_kb=n_kb,
            d=g.d, valid_keys=np.repeat(vk[gb], t_per), rows=np.tile(np.minimum(p.q_rows, g.seq - r * p.q_rows), ng),
            q0=np.tile(r * p.q_rows, ng), head=np.repeat(gh, t_per), tag=tid)
        cmd = np.empty((ng, 1 + t_per, CMD_BYTES), np.uint8)
        cmd[:, 0] = _descriptors(ng, streams.encode_many("command", ng, op=streams.OP_LOAD_K, **load), kv_off)
        cmd[:, 1:] = _descriptors(ng * t_per, tile_hdr, tid * p.q_rows * g.d).reshape(ng, t_per, CMD_BYTES)
        qk.append(cmd.reshape(-1, CMD_BYTES))
        vv.append(_descriptors(ng, streams.encode_many("command", ng, op=streams.OP_LOAD_V, **load), kv_off))
        tiles.append(tid)
        done.append(streams.encode_many("result", len(tid), tile_id=tid, rows=np.tile(
            np.minimum(p.q_rows, g.seq - r * p.q_rows), ng), pipeline=pipe, d=g.d))
        starts.append(start)
        start += len(tid)
    n_tiles = g.batch * g.heads * t_per
    for a in (*qk, *vv):
        a.flags.writeable = False
    return Commands(p, g, qk, vv, tiles, np.concatenate(done), np.asarray(starts), n_tiles, t_per, t_per * p.q_rows,
                    kp)


@dataclass
class Launch:
    """One launch: the command lists and the operand buffers (the host's side of them)."""

    cmds: Commands
    q: np.ndarray  # (B, H, Sp, d) int8
    k: np.ndarray  # (B, KV, Kp, d) int8
    v: np.ndarray

    @property
    def params(self) -> EngineParams:
        return self.cmds.params


def plan_launch(params: EngineParams, q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray,
                causal: bool, score_shift: int) -> Launch:
    """A layer's launch: the (cached) command lists and the operands placed in their padded buffers.

    Args:
        q: ``(B, H, S, d)`` int8; k, v: ``(B, KV, S, d)`` int8 (query head ``h`` uses KV head ``h // (H/KV)``).
        keep: ``(B, 1 or S, S)`` bool, right padding (and causal when ``causal``).
        score_shift: the layer's narrow-score shift (``QuantAttentionLayer.score_shift``).
    """
    b, h, s, d = q.shape
    g = Geometry(b, h, int(k.shape[1]), s, d, valid_keys(keep, causal), bool(causal), int(score_shift))
    c = commands(params, g)
    return Launch(c, place(q, c.seq_pad), place(k, c.keys_pad), place(v, c.keys_pad))


def place(x: np.ndarray, rows: int) -> np.ndarray:
    """``x`` ``(B, H, S, d)`` int8 in a contiguous buffer of ``rows >= S`` rows per head (zero padded):
    the copy into card memory (a no-op view when ``x`` is already contiguous and unpadded)."""
    b, h, s, d = x.shape
    if s == rows and x.flags.c_contiguous and x.dtype == np.int8:
        return x
    out = np.zeros((b, h, rows, d), np.int8)
    out[:, :, :s] = x
    return out


def stream_bytes(cmds: np.ndarray, buffer: np.ndarray, payload: np.ndarray) -> np.ndarray:
    """What the mm2s mover sends for a command list: each header beat followed by its payload gathered from
    ``buffer`` (flat int8/uint8 bytes) at the descriptor's offset; ``payload[i]`` the bytes of command ``i``."""
    flat = np.ascontiguousarray(buffer).reshape(-1).view(np.uint8)
    offs = cmds[:, 16:24].copy().view("<u8").reshape(-1)
    parts = []
    for i in range(len(cmds)):
        parts.append(cmds[i, :16])
        parts.append(flat[int(offs[i]):int(offs[i]) + int(payload[i])])
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def streams_of(launch: Launch) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The qk_in and v_in streams of every pipeline (the movers' output; for simulation)."""
    c, p = launch.cmds, launch.params
    d = c.geometry.d
    load = c.keys_pad * d
    qk, vv = [], []
    for pipe in range(p.pipelines):
        cm = c.qk[pipe]
        ops = cm[:, 0] & 0xF
        sizes = np.where(ops == streams.OP_TILE, p.q_rows * d, load)
        # LOAD_K payloads come from K, TILE payloads from Q: expand each with its own buffer
        parts = []
        for i in range(len(cm)):
            src = launch.q if ops[i] == streams.OP_TILE else launch.k
            parts.append(stream_bytes(cm[i:i + 1], src, sizes[i:i + 1]))
        qk.append(np.concatenate(parts) if parts else np.zeros(0, np.uint8))
        vv.append(stream_bytes(c.v[pipe], launch.v, np.full(len(c.v[pipe]), load)))
    return qk, vv


def check_done(cmds: Commands, done: np.ndarray) -> None:
    """TileError unless the ``done`` buffer is exactly what a correct launch leaves (module docstring); on a
    difference, names the first misrouted, dropped, duplicated or malformed tile."""
    done = np.asarray(done, np.uint8).reshape(-1, streams.BEAT_BYTES)
    if done.shape == cmds.done_expected.shape and done.tobytes() == cmds.done_bytes:
        return
    g = cmds.geometry

    def name(t: int) -> str:
        grp, r = divmod(int(t), cmds.t_per)
        return (f"tile {int(t)} (sequence {grp // g.heads}, head {grp % g.heads}, "
                f"query rows {r * cmds.params.q_rows}..)")

    if done.shape != cmds.done_expected.shape:
        raise TileError(f"the done buffer has {len(done)} records; the launch has {cmds.n_tiles} tiles")
    f = streams.decode_many("result", done)
    for pipe, want in enumerate(cmds.tiles):
        lo = int(cmds.done_start[pipe])
        ids, who = f["tile_id"][lo:lo + len(want)], f["pipeline"][lo:lo + len(want)]
        wrong = np.flatnonzero(who != pipe)
        if wrong.size:
            raise TileError(f"pipeline {pipe}: {name(ids[wrong[0]])} written by pipeline {int(who[wrong[0]])} "
                            "into this pipeline's records (misrouted)")
        uniq, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            raise TileError(f"pipeline {pipe}: {name(uniq[counts > 1][0])} returned twice (duplicate)")
        extra = np.setdiff1d(ids, want)
        if extra.size:
            raise TileError(f"pipeline {pipe}: {name(extra[0])} was not sent to this pipeline (misrouted)")
        missing = np.setdiff1d(want, ids)
        if missing.size:
            raise TileError(f"pipeline {pipe}: {name(missing[0])} missing: {len(missing)} of {len(want)} tiles "
                            "did not come back (dropped)")
        order = np.flatnonzero(ids != want)
        if order.size:
            raise TileError(f"pipeline {pipe}: {name(ids[order[0]])} came back out of order")
    bad = np.flatnonzero((done != cmds.done_expected).any(axis=1))
    raise TileError(f"{name(f['tile_id'][bad[0]])}: its record's rows/head size fields are wrong "
                    f"({streams.decode('result', done[bad[0]])})")


def heads_from_a(cmds: Commands, a: np.ndarray) -> np.ndarray:
    """The A buffer ``(n_tiles, Q_ROWS, d)`` as head outputs ``(B, H, S, d)`` (a view)."""
    g = cmds.geometry
    return np.asarray(a).reshape(g.batch, g.heads, cmds.seq_pad, g.d)[:, :, :g.seq]


__all__ = ["CMD_BYTES", "Commands", "EngineMaskError", "Geometry", "Launch", "check_done", "commands",
           "heads_from_a", "params_from_manifest", "place", "plan_launch", "stream_bytes", "streams_of",
           "valid_keys"]

"""The host side of the scalable engine (stream contract v3, ``hw/ENGINE.md``): one launch per layer.

The full description: ``docs/internals/host.md``, section ``host/engine.py``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from vckattn.golden.engine import MAX_RQ_SHIFT, RQ_MULT_BITS, pack_k, pack_q, pack_v
from vckattn.golden.errors import EXIT_INPUT, UserError
from vckattn.golden.requant import RequantRegisters
from vckattn.hw.spec import streams
from vckattn.hw.spec.functional import EngineParams
from vckattn.hw.spec.schedule import deal_groups

#: bytes of one command descriptor: the header beat, the uint64 payload byte offset, 8 reserved bytes
CMD_BYTES = 32


class TileError(RuntimeError):
    """A tile missing, duplicated, out of order or malformed in what a device returned (its done record)."""



class EngineMaskError(UserError):
    """A key mask the engine's in-band mask cannot express (only right padding and causal masks can)."""

    exit_code = EXIT_INPUT


class EngineShapeError(UserError):
    """A layer shape the engine build cannot run (sequence longer than MAX_KEYS, head size above D or not a multiple
    of 16, query heads that cannot share the kv heads)."""

    exit_code = EXIT_INPUT


class EngineRequantError(UserError):
    """An output requantization the engine's requantizer kernel cannot apply (not one signed 16-bit multiplier with a
    shift of 0..62)."""

    exit_code = EXIT_INPUT


def requant_fields(rq: RequantRegisters) -> tuple[int, int]:
    """``(rq_mult, rq_shift)`` of the LOAD_V SLICE headers from a layer's ``rq_a`` (:class:`EngineRequantError`
    unless one signed :data:`~vckattn.golden.engine.RQ_MULT_BITS`-bit multiplier and a shift of
    0..:data:`~vckattn.golden.engine.MAX_RQ_SHIFT`)."""
    mult, shift = np.asarray(rq.mult), np.asarray(rq.shift)
    if mult.size != 1 or shift.size != 1:
        raise EngineRequantError(f"the engine takes one output requantization (rq_mult, rq_shift); the layer has "
                                 f"{mult.size} per-channel values")
    m, s = int(mult.reshape(-1)[0]), int(shift.reshape(-1)[0])
    top = 1 << (RQ_MULT_BITS - 1)
    if not (-top <= m < top and 0 <= s <= MAX_RQ_SHIFT):
        raise EngineRequantError(f"output requantization mult {m} / shift {s}: the engine's is a signed "
                                 f"{RQ_MULT_BITS}-bit multiplier and a shift of 0..{MAX_RQ_SHIFT} (narrow_layer makes "
                                 "the engine's layer)")
    return m, s


def params_from_manifest(manifest: object) -> EngineParams:
    """The engine parameters of a bitstream manifest with an ``engine`` section (ValueError otherwise)."""
    data = manifest.data  # type: ignore[attr-defined]
    eng = data.get("engine")
    if not eng:
        raise ValueError(f"{manifest.name}: not an engine build (no 'engine' section)")  # type: ignore[attr-defined]
    tile = data["tile"]
    return EngineParams(pipelines=int(eng["pipelines"]), kernels=int(eng["kernels_per_pipeline"]),
                        score_plios=int(eng["score_plios"]), q_rows=int(tile["q_rows"]), d=int(eng["d"]),
                        max_keys=int(eng["max_keys"]), score_bits=int(eng["score_bits"]), lanes=int(tile["lanes"]),
                        online_lanes=int(eng.get("lanes_online_softmax", 0)))


@dataclass(frozen=True)
class Geometry:
    """What the command lists depend on: sizes, valid keys per sequence, the causal flag, the score shift, the output
    requantization (``rq_mult`` a signed 16-bit value, ``rq_shift``: :func:`requant_fields`)."""

    batch: int
    heads: int
    kv_heads: int
    seq: int
    d: int
    valid_keys: tuple[int, ...]
    causal: bool
    score_shift: int
    rq_mult: int
    rq_shift: int


@dataclass
class Commands:
    """The command lists of one geometry (module docstring); read-only once built."""

    params: EngineParams
    geometry: Geometry
    q: list[np.ndarray]  # (n, CMD_BYTES) uint8 per pipeline: one TILE per tile
    kv: list[np.ndarray]  # (n, CMD_BYTES) uint8 per pipeline: per group k LOAD_K then k LOAD_V (rq_mult, rq_shift)
    tiles: list[np.ndarray]  # tile ids per pipeline, issue order
    done_expected: np.ndarray  # (n_tiles, 16) uint8
    done_start: np.ndarray  # (pipelines,) first done slot of each pipeline
    n_tiles: int
    t_per: int  # tiles per (batch, head) group

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


def check_shape(params: EngineParams, seq: int, d: int, heads: int, kv_heads: int) -> None:
    """EngineShapeError (one line) unless the build runs a layer of this shape."""
    p = params
    if d % 16 or not 16 <= d <= p.d:
        raise EngineShapeError(f"head size {d} is not one this engine takes (multiples of 16 up to {p.d})")
    if not 1 <= seq <= p.max_keys:
        raise EngineShapeError(f"a sequence of {seq} tokens is longer than this engine's {p.max_keys} keys "
                               "(MAX_KEYS); use a build with a longer max_seq")
    if heads % kv_heads:
        raise EngineShapeError(f"{heads} query heads cannot share {kv_heads} kv heads")


def _descriptors(n: int, header: np.ndarray, offset: np.ndarray) -> np.ndarray:
    out = np.zeros((n, CMD_BYTES), np.uint8)
    out[:, :16] = header
    out[:, 16:24] = np.asarray(offset, dtype="<u8").reshape(n, 1).view(np.uint8)
    return out


@functools.lru_cache(maxsize=64)
def commands(params: EngineParams, g: Geometry) -> Commands:
    """The command lists and the expected ``done`` buffer of geometry ``g`` (cached). Built from the cached
    template of its shape (every key valid, shift 0, no requantization) by patching the TILE headers' ``valid_keys``
    and ``score_shift`` and the LOAD_V headers' ``rq_mult`` and ``rq_shift`` in vectorized passes, so a new batch
    (new padding) or a new layer (new shift and requantization) costs tens of µs."""
    base = replace(g, valid_keys=(g.seq,) * g.batch, score_shift=0, rq_mult=0, rq_shift=0)
    t = _template(params, base)
    if g == base:
        return t.commands
    c = replace(t.commands, geometry=g)
    if (g.valid_keys, g.score_shift) != (base.valid_keys, 0):
        vk = np.asarray(g.valid_keys, np.int64)
        qq = t.q.copy()
        streams.patch_many("tile", qq[:, :16], "valid_keys", vk[t.q_seq])
        if g.score_shift:
            streams.patch_many("tile", qq[:, :16], "score_shift", g.score_shift)
        qq.flags.writeable = False
        c.q = [qq[a:b] for a, b in t.q_bounds]
    if (g.rq_mult, g.rq_shift) != (0, 0):
        kv = []
        for rows, is_v in zip(t.commands.kv, t.kv_is_v, strict=True):
            rows = rows.copy()
            streams.patch_many("slice", rows[:, :16], "rq_mult", streams.int16_bits(g.rq_mult), where=is_v)
            streams.patch_many("slice", rows[:, :16], "rq_shift", g.rq_shift, where=is_v)
            rows.flags.writeable = False
            kv.append(rows)
        c.kv = kv
    return c


@dataclass(frozen=True)
class _Template:
    """The commands of a shape (every key valid, shift 0, no requantization), all pipelines' q rows in one array, with
    each row's sequence, and each pipeline's LOAD_V rows of its kv list (what :func:`commands` patches)."""

    commands: Commands
    q: np.ndarray
    q_bounds: list[tuple[int, int]]
    q_seq: np.ndarray
    kv_is_v: list[np.ndarray]


@functools.lru_cache(maxsize=16)
def _template(params: EngineParams, g: Geometry) -> _Template:
    c = _build(params, g)
    qq = np.concatenate(c.q)
    tags = streams.decode_many("tile", qq[:, :16])["tag"]
    ends = np.cumsum([len(a) for a in c.q]).tolist()
    bounds = list(zip([0, *ends[:-1]], ends, strict=True))
    is_v = [streams.decode_many("slice", kv[:, :16])["op"] == streams.OP_LOAD_V for kv in c.kv]
    return _Template(c, qq, bounds, tags // c.t_per // g.heads, is_v)


def _build(params: EngineParams, g: Geometry) -> Commands:
    """The command lists of geometry ``g``, from scratch."""
    p = params
    check_shape(p, g.seq, g.d, g.heads, g.kv_heads)
    k, sk = p.kernels, p.slice_keys
    t_per = -(-g.seq // p.q_rows)
    rep = g.heads // g.kv_heads
    vk = np.asarray(g.valid_keys, np.int64)
    r = np.arange(t_per)
    jj = np.arange(k)
    q_lists, kv_lists, tiles, done, starts = [], [], [], [], []
    start = 0
    for pipe, groups in enumerate(deal_groups(g.batch * g.heads, p.pipelines)):
        grp = np.asarray(groups, np.int64)
        ng = len(grp)
        gb, gh = grp // g.heads, grp % g.heads
        tid = (grp[:, None] * t_per + r[None, :]).reshape(-1)
        rows = np.tile(np.minimum(p.q_rows, g.seq - r * p.q_rows), ng)
        tile_hdr = streams.encode_many(
            "tile", ng * t_per, op=streams.OP_TILE, causal=int(g.causal), score_shift=g.score_shift,
            valid_keys=np.repeat(vk[gb], t_per), rows=rows, q0=np.tile(r * p.q_rows, ng), head=np.repeat(gh, t_per),
            tag=tid)
        q_lists.append(_descriptors(ng * t_per, tile_hdr, tid * p.q_rows * p.d))
        # per group: k LOAD_K (packet ids 0..k-1) then k LOAD_V (k..2k-1); payload row (b, kv head, j) of K / V
        row = ((gb * g.kv_heads + gh // rep)[:, None] * k + jj[None, :])  # (ng, k)
        pid = np.concatenate([np.broadcast_to(jj, (ng, k)), np.broadcast_to(jj + k, (ng, k))], axis=1).reshape(-1)
        op = np.where(pid < k, streams.OP_LOAD_K, streams.OP_LOAD_V)
        slice_hdr = streams.encode_many("slice", 2 * k * ng, packet_id=pid, op=op, slice=pid % k, tiles=t_per,
                                        first_tile=np.repeat(grp * t_per, 2 * k),
                                        rq_mult=np.where(pid < k, 0, streams.int16_bits(g.rq_mult)),
                                        rq_shift=np.where(pid < k, 0, g.rq_shift))
        kv_lists.append(_descriptors(2 * k * ng, slice_hdr, np.concatenate([row, row], axis=1).reshape(-1) * sk * p.d))
        tiles.append(tid)
        done.append(streams.encode_many("result", len(tid), tile_id=tid, rows=rows, pipeline=pipe, d=p.d))
        starts.append(start)
        start += len(tid)
    for a in (*q_lists, *kv_lists):
        a.flags.writeable = False
    return Commands(p, g, q_lists, kv_lists, tiles, np.concatenate(done), np.asarray(starts),
                    g.batch * g.heads * t_per, t_per)


@dataclass
class Launch:
    """One launch: the command lists and the re-tiled operand buffers (the host's side of them)."""

    cmds: Commands
    q: np.ndarray  # (B, H, T, Q_ROWS·D) int8, pack_q layout
    k: np.ndarray  # (B, KV, k, SK·D) int8, pack_k layout
    v: np.ndarray  # (B, KV, k, SK·D) int8, pack_v layout

    @property
    def params(self) -> EngineParams:
        return self.cmds.params


def _padded(x: np.ndarray, rows: int, d: int) -> np.ndarray:
    """``x`` ``(B, H, S, d0)`` int8 as ``(B, H, rows, d)``, zero padded: ``x`` itself (any strides: the pack functions
    make the one copy) when no padding is needed, else a copy into a zeroed buffer."""
    b, h, s, d0 = x.shape
    if s == rows and d0 == d:
        return np.asarray(x, dtype=np.int8)
    out = np.zeros((b, h, rows, d), np.int8)
    out[:, :, :s, :d0] = x
    return out


def retile(params: EngineParams, q: np.ndarray, k: np.ndarray, v: np.ndarray,
           out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q ``(B, H, S, d)``, K and V ``(B, KV, S, d)`` int8 (any strides) -> the card's operand buffers (module
    docstring): zero padded to ``T·Q_ROWS`` rows / ``MAX_KEYS`` keys and ``D`` features, cut into tiles / slices and
    packed (:func:`vckattn.golden.engine.pack_q`, ``pack_k``, ``pack_v``: one strided copy each when nothing is
    padded); into ``out`` (the three buffers, e.g. a launch's mapped buffer objects) when given."""
    p = params
    b, h, s, _ = q.shape
    t = -(-s // p.q_rows)
    kvh = k.shape[1]
    qp = _padded(q, t * p.q_rows, p.d).reshape(b, h, t, p.q_rows, p.d)
    kp = _padded(k, p.max_keys, p.d).reshape(b, kvh, p.kernels, p.slice_keys, p.d)
    vp = _padded(v, p.max_keys, p.d).reshape(b, kvh, p.kernels, p.slice_keys, p.d)
    oq, ok, ov = out if out is not None else (None, None, None)
    return pack_q(qp, oq), pack_k(kp, ok), pack_v(vp, ov)


def launch_commands(params: EngineParams, shape: tuple[int, int, int, int], kv_heads: int, keep: np.ndarray,
                    causal: bool, score_shift: int, rq: RequantRegisters) -> Commands:
    """The (cached) command lists of a layer whose Q is ``shape`` ``(B, H, S, d)`` with ``kv_heads`` KV heads and
    output requantization ``rq`` (the layer's ``rq_a``): the host's work of a launch besides re-tiling the operands
    (:func:`retile`).

    Raises:
        EngineShapeError: a sequence, head size or head grouping the build cannot run (:func:`check_shape`).
        EngineMaskError: a key mask that is not right padding (and causal).
        EngineRequantError: ``rq`` is not the engine's (:func:`requant_fields`).
    """
    b, h, s, d = (int(x) for x in shape)
    check_shape(params, s, d, h, int(kv_heads))
    rq_mult, rq_shift = requant_fields(rq)
    return commands(params, Geometry(b, h, int(kv_heads), s, d, valid_keys(keep, causal), bool(causal),
                                     int(score_shift), rq_mult, rq_shift))


def plan_launch(params: EngineParams, q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray,
                causal: bool, score_shift: int, rq: RequantRegisters) -> Launch:
    """A layer's launch: the (cached) command lists (:func:`launch_commands`) and the operands re-tiled into their card
    buffers (:func:`retile`).

    Args:
        q: ``(B, H, S, d)`` int8; k, v: ``(B, KV, S, d)`` int8 (query head ``h`` uses KV head ``h // (H/KV)``); any
            strides (e.g. head views of the projections' ``(B, S, H·d)`` outputs).
        keep: ``(B, 1 or S, S)`` bool, right padding (and causal when ``causal``).
        score_shift: the layer's narrow-score shift (``QuantAttentionLayer.score_shift``).
        rq: the layer's output requantization (``QuantAttentionLayer.rq_a`` of the engine's layer: a signed 16-bit
            multiplier), which the last P·V kernel applies.

    Raises:
        EngineShapeError: a sequence, head size or head grouping the build cannot run (:func:`check_shape`).
        EngineMaskError: a key mask that is not right padding (and causal).
        EngineRequantError: ``rq`` is not the engine's (:func:`requant_fields`).
    """
    c = launch_commands(params, q.shape, int(k.shape[1]), keep, causal, score_shift, rq)
    return Launch(c, *retile(params, q, k, v))


def _payloads(cmds: np.ndarray, flat_rows: np.ndarray, size: int) -> np.ndarray:
    """The payload row of each descriptor: ``flat_rows`` ``(n, size)`` indexed by offset / size."""
    offs = cmds[:, 16:24].copy().view("<u8").reshape(-1)
    if (offs % size).any():
        raise ValueError("a descriptor's payload offset is not a whole buffer row")
    return flat_rows[(offs // size).astype(np.int64)]


def streams_of(launch: Launch) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The q_in and kv_in streams of every pipeline (what its movers send; for simulation): each descriptor's
    header beat followed by its payload, back to back (uint8)."""
    c, p = launch.cmds, launch.params
    qsize, ksize = p.q_rows * p.d, p.slice_keys * p.d
    q_rows = launch.q.reshape(-1, qsize).view(np.uint8)
    k_rows = launch.k.reshape(-1, ksize).view(np.uint8)
    v_rows = launch.v.reshape(-1, ksize).view(np.uint8)
    q_in, kv_in = [], []
    for pipe in range(p.pipelines):
        cq = c.q[pipe]
        q_in.append(np.concatenate([cq[:, :16], _payloads(cq, q_rows, qsize)], axis=1).reshape(-1))
        ckv = c.kv[pipe]
        is_k = streams.decode_many("slice", ckv[:, :16])["op"] == streams.OP_LOAD_K
        pay = np.where(is_k[:, None], _payloads(ckv, k_rows, ksize), _payloads(ckv, v_rows, ksize))
        kv_in.append(np.concatenate([ckv[:, :16], pay], axis=1).reshape(-1))
    return q_in, kv_in


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
    """The A buffer ``(n_tiles, Q_ROWS, D)`` as head outputs ``(B, H, S, d)`` (a view)."""
    g = cmds.geometry
    p = cmds.params
    return np.asarray(a).reshape(g.batch, g.heads, cmds.t_per * p.q_rows, p.d)[:, :, :g.seq, :g.d]


__all__ = ["CMD_BYTES", "Commands", "EngineMaskError", "EngineRequantError", "EngineShapeError", "Geometry", "Launch",
           "TileError", "check_done", "check_shape", "commands", "heads_from_a", "launch_commands",
           "params_from_manifest", "plan_launch", "requant_fields", "retile", "streams_of", "valid_keys"]

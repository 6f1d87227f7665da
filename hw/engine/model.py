"""Functional model of one engine launch on its streams (stream contract v2, ``hw/ENGINE.md``).

It reads the per-pipeline command streams exactly as the kernels do (headers through
:mod:`vckattn.hw.engine.streams`, payloads in the contract's layouts) and computes with the golden numerics
(:mod:`vckattn.golden.engine`), in the engine's three stages, so a backend can put a real implementation
in place of one of them (the ``rtl`` backend runs :func:`pl_stage` in Verilator):

* :func:`qk_stage` — the ``qk_slice`` kernels: one score packet per non-empty slice per tile;
* :func:`pl_stage` — the PL SwiftMax: each score packet becomes a P packet (header kept, ``elem_bits`` 8);
* :func:`pv_stage` — the ``pv_slice`` kernels, the cascade and the output mover: A of tile ``t`` into slot
  ``t`` of the A buffer ``(n_tiles, Q_ROWS, d)``, its RESULT header appended to the pipeline's ``done`` log.

:func:`run_launch_model` chains them (the ``emu`` backend of an engine build, and the reference of the
C-simulation and RTL runs of whole launches).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vckattn.golden.aie_matmul import exact_int_matmul
from vckattn.golden.engine import engine_format, engine_p, engine_scores, slice_blocks, tile_keep
from vckattn.golden.requant import RequantRegisters, requantize
from vckattn.golden.swiftmax_int import SwiftMaxFormat, SwiftMaxRegisters

from . import streams


@dataclass(frozen=True)
class EngineParams:
    """Build parameters of an engine (``hw/ENGINE.md``): ``pipelines`` identical pipelines of ``kernels``
    QKᵀ and ``kernels`` P·V AIE kernels; tiles of ``q_rows`` query rows; keys in blocks of ``key_block``;
    head size up to ``max_d``; up to ``max_keys`` keys; ``score_bits``-bit scores; ``lanes`` SwiftMax lanes
    per pipeline."""

    pipelines: int
    kernels: int
    q_rows: int
    key_block: int
    max_d: int = 64
    max_keys: int = 512
    score_bits: int = 8
    lanes: int = 16

    def __post_init__(self) -> None:
        for f in ("pipelines", "kernels", "q_rows", "key_block", "max_d", "max_keys", "lanes"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"engine parameter {f} must be >= 1")
        if self.score_bits not in (8, 16):
            raise ValueError("engine scores are 8 or 16 bits")
        if self.max_keys % self.key_block:
            raise ValueError("max_keys must be a multiple of key_block")


class EngineStreamError(RuntimeError):
    """A stream the kernels would reject (bad header, payload cut short, misrouted packet)."""


@dataclass
class Packet:
    """One score or P packet: its header fields and its payload ``(Q_ROWS, slice keys)`` (int64 values)."""

    header: dict[str, int]
    values: np.ndarray

    def beats(self, signed: bool) -> np.ndarray:
        """The packet on a 128-bit stream: header beat then the payload, ``elem_bits`` each (``signed``: scores,
        int8/int16; else P, uint8), ``(n, 16)`` uint8."""
        bits = self.header["elem_bits"]
        dt = ("<i1" if bits == 8 else "<i2") if signed else ("<u1" if bits == 8 else "<u2")
        payload = self.values.reshape(-1).astype(dt).view(np.uint8)
        return np.concatenate([streams.encode("packet", **self.header), payload]).reshape(-1, streams.BEAT_BYTES)


def parse_packets(beats: np.ndarray, q_rows: int, signed: bool, where: str) -> list[Packet]:
    """Packets from a stream of 128-bit beats ``(n, 16)`` uint8 (``signed``: int8/int16 elements; else uint8)."""
    flat = np.asarray(beats, np.uint8).reshape(-1)
    out, pos = [], 0
    while pos < len(flat):
        if pos + 16 > len(flat):
            raise EngineStreamError(f"{where}: packet header cut short at byte {pos}")
        h = streams.decode("packet", flat[pos:pos + 16])
        pos += 16
        bits = h["elem_bits"]
        if bits not in (8, 16):
            raise EngineStreamError(f"{where}: packet of tile {h['tile_id']}: {bits}-bit elements")
        size = h["count"] * bits // 8
        if pos + size > len(flat) or h["count"] % q_rows:
            raise EngineStreamError(f"{where}: packet of tile {h['tile_id']}: payload cut short or not whole rows")
        dt = ("<i1" if bits == 8 else "<i2") if signed else ("<u1" if bits == 8 else "<u2")
        vals = flat[pos:pos + size].view(dt).astype(np.int64).reshape(q_rows, -1)
        out.append(Packet(h, vals))
        pos += size
    return out


def _walk(buf: np.ndarray, p: EngineParams, where: str) -> list[tuple[dict[str, int], np.ndarray]]:
    """The commands of one stream: ``(header fields, payload)`` in order."""
    cmds, pos, n = [], 0, len(buf)
    while pos < n:
        if pos + streams.BEAT_BYTES > n:
            raise EngineStreamError(f"{where}: header beat cut short at byte {pos}")
        h = streams.decode("command", buf[pos:pos + streams.BEAT_BYTES])
        at = pos
        pos += streams.BEAT_BYTES
        if h["d"] < 16 or h["d"] > p.max_d or h["d"] % 16:
            raise EngineStreamError(f"{where}: command at byte {at}: head size {h['d']} not a multiple of 16 "
                                    f"in 16..{p.max_d}")
        if not 1 <= h["n_kb"] * p.key_block <= p.max_keys:
            raise EngineStreamError(f"{where}: command at byte {at}: {h['n_kb']} key blocks outside "
                                    f"1..{p.max_keys // p.key_block}")
        if h["op"] in (streams.OP_LOAD_K, streams.OP_LOAD_V):
            size = h["n_kb"] * p.key_block * h["d"]
        elif h["op"] == streams.OP_TILE:
            size = p.q_rows * h["d"]
        else:
            raise EngineStreamError(f"{where}: command at byte {at}: unknown op {h['op']}")
        if pos + size > n:
            raise EngineStreamError(f"{where}: command at byte {at}: payload cut short")
        cmds.append((h, buf[pos:pos + size]))
        pos += size
    return cmds


def qk_stage(p: EngineParams, qk_in: np.ndarray, where: str = "qk_in") -> list[list[Packet]]:
    """The ``qk_slice`` kernels of one pipeline on its qk_in stream: per kernel ``j`` its score packets in order."""
    out: list[list[Packet]] = [[] for _ in range(p.kernels)]
    k_cur = None
    for h, payload in _walk(np.asarray(qk_in, np.uint8), p, where):
        d = h["d"]
        if h["op"] == streams.OP_LOAD_K:
            k_cur = (h, payload.view(np.int8).reshape(h["n_kb"] * p.key_block, d))
            continue
        if h["op"] != streams.OP_TILE:
            raise EngineStreamError(f"{where}: LOAD_V belongs on v_in")
        if k_cur is None or k_cur[0]["n_kb"] != h["n_kb"] or k_cur[0]["d"] != d:
            raise EngineStreamError(f"{where}: tile {h['tag']}: n_kb/d differ from the last LOAD_K")
        kp = h["n_kb"] * p.key_block
        acc = exact_int_matmul(payload.view(np.int8).reshape(p.q_rows, d), np.ascontiguousarray(k_cur[1].T))
        keep = tile_keep(p.q_rows, kp, h["rows"], h["q0"], h["valid_keys"], bool(h["causal"]))
        s = engine_scores(acc, keep, h["score_shift"], p.score_bits)
        for j, (b0, b1) in enumerate(slice_blocks(h["n_kb"], p.kernels)):
            if b1 > b0:
                vals = s[:, b0 * p.key_block:b1 * p.key_block]
                out[j].append(Packet({"packet_id": j, "tile_id": h["tag"], "slice": j, "elem_bits": p.score_bits,
                                      "rows": h["rows"], "count": vals.size}, vals))
    return out


def merge(per_kernel: list[list[Packet]], rng: np.random.Generator | None = None) -> list[Packet]:
    """``pktmerge``: whole packets of the kernels interleaved (each kernel's order kept); ``rng`` None =
    round-robin, else a random interleaving."""
    queues = [list(q) for q in per_kernel]
    pos = [0] * len(queues)
    out: list[Packet] = []
    while True:
        live = [j for j, q in enumerate(queues) if pos[j] < len(q)]
        if not live:
            return out
        for j in (live if rng is None else [int(rng.choice(live))]):
            out.append(queues[j][pos[j]])
            pos[j] += 1


def pl_stage(packets: list[Packet], regs: SwiftMaxRegisters, bits: int, fmt: SwiftMaxFormat | None = None
             ) -> list[Packet]:
    """The PL SwiftMax on a pipeline's merged score packets: P packets, headers kept (``elem_bits`` = 8)."""
    f = fmt or engine_format(bits)
    return [Packet(pk.header | {"elem_bits": 8}, engine_p(pk.values, regs, bits, f)) for pk in packets]


def pv_stage(p: EngineParams, pipeline: int, v_in: np.ndarray, p_packets: list[Packet], tiles: list[dict[str, int]],
             a: np.ndarray, rq: RequantRegisters, where: str = "v_in") -> np.ndarray:
    """The ``pv_slice`` kernels, the cascade and the output mover of one pipeline: for each tile of ``tiles``
    (the TILE headers in issue order, with the LOAD_V each follows), P packets split by packet id, partial O per
    slice summed along the cascade, A requantized into ``a[tile_id]``; returns the ``done`` log ``(n, 16)``."""
    loads = _walk(np.asarray(v_in, np.uint8), p, where)
    if any(h["op"] != streams.OP_LOAD_V for h, _ in loads):
        raise EngineStreamError(f"{where}: only LOAD_V commands belong on v_in")
    by_kernel: list[list[Packet]] = [[] for _ in range(p.kernels)]
    for pk in p_packets:
        j = pk.header["packet_id"]
        if j >= p.kernels:
            raise EngineStreamError(f"pipeline {pipeline}: P packet for kernel {j} (the pipeline has {p.kernels})")
        by_kernel[j].append(pk)
    nxt = [0] * p.kernels
    done = []
    li = -1
    v_cur = None
    for t in tiles:
        if t["load"] != li:
            li = t["load"]
            if li >= len(loads):
                raise EngineStreamError(f"pipeline {pipeline}: tile {t['tag']} needs LOAD_V {li}; "
                                        f"v_in has {len(loads)}")
            hv, pv = loads[li]
            v_cur = (hv, pv.view(np.int8).reshape(hv["n_kb"] * p.key_block, hv["d"]))
        hv, v = v_cur
        if hv["n_kb"] != t["n_kb"] or hv["d"] != t["d"]:
            raise EngineStreamError(f"pipeline {pipeline}: tile {t['tag']}: n_kb/d differ from the last LOAD_V")
        o = np.zeros((p.q_rows, t["d"]), np.int64)
        for j, (b0, b1) in enumerate(slice_blocks(t["n_kb"], p.kernels)):
            if b1 == b0:
                continue  # an empty slice forwards the cascade
            if nxt[j] >= len(by_kernel[j]):
                raise EngineStreamError(f"pipeline {pipeline}: kernel {j} waits for the P packet of tile {t['tag']}")
            pk = by_kernel[j][nxt[j]]
            nxt[j] += 1
            if pk.header["tile_id"] != t["tag"]:
                raise EngineStreamError(f"pipeline {pipeline}: kernel {j} got the P packet of tile "
                                        f"{pk.header['tile_id']} while the cascade carries tile {t['tag']} (misrouted)")
            o += exact_int_matmul(pk.values, v[b0 * p.key_block:b1 * p.key_block].astype(np.int64))
        if t["tag"] >= len(a):
            raise EngineStreamError(f"pipeline {pipeline}: tile id {t['tag']} outside the A buffer ({len(a)} slots)")
        a[t["tag"], :, :t["d"]] = requantize(o, rq).astype(np.int8)
        done.append(streams.encode("result", tile_id=t["tag"], rows=t["rows"], pipeline=pipeline, d=t["d"]))
    left = [len(q) - n for q, n in zip(by_kernel, nxt, strict=True)]
    if any(left):
        raise EngineStreamError(f"pipeline {pipeline}: P packets left over per kernel: {left}")
    return np.array(done, np.uint8).reshape(-1, streams.BEAT_BYTES)


def tile_list(p: EngineParams, qk_in: np.ndarray, where: str = "qk_in") -> list[dict[str, int]]:
    """The TILE headers of a qk_in stream in order, each with ``load`` = the index of the LOAD it follows."""
    out, li = [], -1
    for h, _ in _walk(np.asarray(qk_in, np.uint8), p, where):
        if h["op"] == streams.OP_LOAD_K:
            li += 1
        elif h["op"] == streams.OP_TILE:
            out.append(h | {"load": li})
    return out


def run_launch_model(p: EngineParams, qk_in: list[np.ndarray], v_in: list[np.ndarray], n_tiles: int,
                     regs: SwiftMaxRegisters, rq: RequantRegisters, fmt: SwiftMaxFormat | None = None,
                     seed: int | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """One launch: ``(a, done)`` (module docstring). ``n_tiles``: slots of the A buffer; ``seed``: merge the
    score packets in a random order (None: round-robin) — the result must not depend on it."""
    rng = None if seed is None else np.random.default_rng(seed)
    d = p.max_d
    a = np.zeros((n_tiles, p.q_rows, d), np.int8)
    done: list[np.ndarray] = []
    d_used = 0
    for pipe in range(p.pipelines):
        tiles = tile_list(p, qk_in[pipe], f"pipeline {pipe} qk_in")
        scores = merge(qk_stage(p, qk_in[pipe], f"pipeline {pipe} qk_in"), rng)
        pp = pl_stage(scores, regs, p.score_bits, fmt)
        done.append(pv_stage(p, pipe, v_in[pipe], pp, tiles, a, rq, f"pipeline {pipe} v_in"))
        d_used = max([d_used] + [t["d"] for t in tiles])
    return a[:, :, :d_used or d], done


__all__ = ["EngineParams", "EngineStreamError", "Packet", "merge", "parse_packets", "pl_stage", "pv_stage",
           "qk_stage", "run_launch_model", "tile_list"]

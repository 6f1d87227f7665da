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
from vckattn.golden.swiftmax_int import SwiftMaxFormat, SwiftMaxHeads, SwiftMaxRegisters

from . import streams

#: the most QKᵀ (and P·V) kernels a pipeline can have: a kernel's packet id is 5 bits (hw/ENGINE.md)
MAX_KERNELS = 32


@dataclass(frozen=True)
class EngineParams:
    """Build parameters of an engine (``hw/ENGINE.md``): ``pipelines`` identical pipelines of ``kernels``
    QKᵀ and ``kernels`` P·V AIE kernels; tiles of ``q_rows`` query rows; ``key_block`` keys a block; head
    size at most ``max_d``; at most ``max_keys`` padded keys a group; ``score_bits``-bit scores on the score
    stream; ``lanes`` SwiftMax lanes per pipeline (PL only)."""

    pipelines: int
    kernels: int
    q_rows: int = 32
    key_block: int = 32
    max_d: int = 64
    max_keys: int = 1024
    score_bits: int = 8
    lanes: int = 16

    def __post_init__(self) -> None:
        if self.pipelines < 1:
            raise ValueError(f"pipelines must be >= 1, got {self.pipelines}")
        if not 1 <= self.kernels <= MAX_KERNELS:
            raise ValueError(f"kernels must be 1..{MAX_KERNELS} (5-bit packet ids), got {self.kernels}")
        if self.q_rows < 8 or self.q_rows % 8:
            raise ValueError(f"q_rows must be a positive multiple of 8, got {self.q_rows}")
        if self.key_block < 16 or self.key_block % 16:
            raise ValueError(f"key_block must be a positive multiple of 16, got {self.key_block}")
        if self.max_d < 16 or self.max_d % 16:
            raise ValueError(f"max_d must be a positive multiple of 16, got {self.max_d}")
        if self.max_keys < self.key_block or self.max_keys % self.key_block:
            raise ValueError(f"max_keys must be a positive multiple of key_block, got {self.max_keys}")
        if self.score_bits not in (8, 16):
            raise ValueError(f"score_bits must be 8 or 16, got {self.score_bits}")
        if self.lanes not in (1, 2, 4, 8, 16):
            raise ValueError(f"lanes must be 1, 2, 4, 8 or 16, got {self.lanes}")

    def defines(self) -> tuple[str, ...]:
        """The kernels' build parameters as ``-D`` flags (what a design's ``engine_config.h`` defines)."""
        return tuple(f"-D{k}={v}" for k, v in self.macros().items())

    def macros(self) -> dict[str, int]:
        """``VCKATTN_ENGINE_*`` macro -> value: the AIE kernels' build parameters."""
        return {"VCKATTN_ENGINE_KERNELS": self.kernels, "VCKATTN_ENGINE_Q_ROWS": self.q_rows,
                "VCKATTN_ENGINE_KEY_BLOCK": self.key_block, "VCKATTN_ENGINE_MAX_D": self.max_d,
                "VCKATTN_ENGINE_MAX_KEYS": self.max_keys, "VCKATTN_ENGINE_SCORE_BITS": self.score_bits}


def _fields_size(fields: list[tuple[int, int]]) -> int:
    """sizeof of a C struct of ``(alignment, bytes)`` members in order (struct alignment = the largest)."""
    off = 0
    for align, size in fields:
        off = -(-off // align) * align + size
    top = max(a for a, _ in fields)
    return -(-off // top) * top


def workspace_bytes(p: EngineParams) -> dict[str, int]:
    """Data memory of each kernel's workspace (bytes): ``sizeof(QkWorkspace)`` / ``sizeof(PvWorkspace)`` of
    ``hw/aie/engine/engine_kernels.h`` for these parameters (the graph's heap sizes; a test compiles the
    structs and compares)."""
    slice_keys = -(-(p.max_keys // p.key_block) // p.kernels) * p.key_block
    sb = p.score_bits // 8
    qk = _fields_size([(32, slice_keys * p.max_d), (32, p.q_rows * p.max_d), (32, p.q_rows * p.max_d),
                       (32, p.q_rows * p.key_block * 4), (32, p.q_rows * slice_keys * sb), (16, 16), (4, 4), (4, 4)])
    pv = _fields_size([(32, slice_keys * p.max_d), (32, p.key_block * p.max_d), (32, p.q_rows * slice_keys),
                       (32, p.q_rows * p.max_d * 4), (32, 32), (16, 16), (4, 4), (4, 4), (4, 4)])
    return {"qk_slice": qk, "pv_slice": pv}


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
                                      "rows": h["rows"], "count": vals.size, "head": h["head"]}, vals))
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


def pl_stage(packets: list[Packet], regs: SwiftMaxRegisters | SwiftMaxHeads, bits: int,
             fmt: SwiftMaxFormat | None = None) -> list[Packet]:
    """The PL SwiftMax on a pipeline's merged score packets: P packets, headers kept (``elem_bits`` = 8); each
    packet's scores use the register set of its header's ``head``."""
    f = fmt or engine_format(bits)
    if isinstance(regs, SwiftMaxHeads):
        bad = [pk.header["tile_id"] for pk in packets if pk.header.get("head", 0) >= regs.n_heads]
        if bad:
            raise EngineStreamError(f"packet of tile {bad[0]}: head beyond the layer's {regs.n_heads} register sets")
    return [Packet(pk.header | {"elem_bits": 8}, engine_p(pk.values, regs, bits, f, head=pk.header.get("head", 0)))
            for pk in packets]


def pv_stage(p: EngineParams, pipeline: int, v_in: np.ndarray, p_packets: list[Packet], a: np.ndarray,
             rq: RequantRegisters, where: str = "v_in") -> np.ndarray:
    """The ``pv_slice`` kernels, the cascade and the output mover of one pipeline: each LOAD_V on ``v_in``
    announces its group's ``tiles``; per tile, kernel ``j`` of a non-empty slice takes its next P packet
    (``pktsplit`` by packet id), partial O per slice summed along the cascade, A requantized into
    ``a[tile_id]``. Returns the ``done`` log ``(tiles, 16)``."""
    loads = _walk(np.asarray(v_in, np.uint8), p, where)
    by_kernel: list[list[Packet]] = [[] for _ in range(p.kernels)]
    for pk in p_packets:
        j = pk.header["packet_id"]
        if j >= p.kernels:
            raise EngineStreamError(f"pipeline {pipeline}: P packet for kernel {j} (the pipeline has {p.kernels})")
        by_kernel[j].append(pk)
    nxt = [0] * p.kernels
    done = []
    for hv, pv in loads:
        if hv["op"] != streams.OP_LOAD_V:
            raise EngineStreamError(f"{where}: only LOAD_V commands belong on v_in")
        if hv["tiles"] == 0:
            raise EngineStreamError(f"{where}: LOAD_V of group {hv['tag']} announces no tiles")
        v = pv.view(np.int8).reshape(hv["n_kb"] * p.key_block, hv["d"])
        for _ in range(hv["tiles"]):
            o = np.zeros((p.q_rows, hv["d"]), np.int64)
            tile = rows = None
            for j, (b0, b1) in enumerate(slice_blocks(hv["n_kb"], p.kernels)):
                if b1 == b0:
                    continue  # an empty slice forwards the cascade
                if nxt[j] >= len(by_kernel[j]):
                    raise EngineStreamError(f"pipeline {pipeline}: kernel {j} waits for a P packet that never comes "
                                            f"(group {hv['tag']})")
                pk = by_kernel[j][nxt[j]]
                nxt[j] += 1
                if tile is not None and (pk.header["tile_id"], pk.header["rows"]) != (tile, rows):
                    raise EngineStreamError(f"pipeline {pipeline}: kernel {j} got the P packet of tile "
                                            f"{pk.header['tile_id']} while the cascade carries tile {tile} (misrouted)")
                tile, rows = pk.header["tile_id"], pk.header["rows"]
                if pk.values.shape != (p.q_rows, (b1 - b0) * p.key_block):
                    raise EngineStreamError(f"pipeline {pipeline}: P packet of tile {tile} for kernel {j} has "
                                            f"{pk.values.size} elements, not {p.q_rows * (b1 - b0) * p.key_block}")
                o += exact_int_matmul(pk.values, v[b0 * p.key_block:b1 * p.key_block].astype(np.int64))
            if tile >= len(a):
                raise EngineStreamError(f"pipeline {pipeline}: tile id {tile} outside the A buffer ({len(a)} slots)")
            a[tile, :, :hv["d"]] = requantize(o, rq).astype(np.int8)
            done.append(streams.encode("result", tile_id=tile, rows=rows, pipeline=pipeline, d=hv["d"]))
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
                     regs: SwiftMaxRegisters | SwiftMaxHeads, rq: RequantRegisters, fmt: SwiftMaxFormat | None = None,
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
        done.append(pv_stage(p, pipe, v_in[pipe], pp, a, rq, f"pipeline {pipe} v_in"))
        d_used = max([d_used] + [t["d"] for t in tiles])
    return a[:, :, :d_used or d], done


__all__ = ["MAX_KERNELS", "EngineParams", "EngineStreamError", "Packet", "merge", "parse_packets", "pl_stage",
           "pv_stage", "qk_stage", "run_launch_model", "tile_list", "workspace_bytes"]

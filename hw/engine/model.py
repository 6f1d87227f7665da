"""Functional model of one engine launch on its DDR buffers (stream contract v2, ``hw/ENGINE.md``).

It reads the per-pipeline command streams exactly as the kernels do (headers through
:mod:`vckattn.hw.engine.streams`, payloads by the contract's layouts) and computes every tile with the
golden numerics (:mod:`vckattn.golden.engine`): the ``emu`` backend of an engine build, and the reference
the C-simulation and RTL runs of whole launches are compared with.

Outputs, as the engine's output movers write them: ``a`` — A ``(n_tiles, Q_ROWS, d)`` int8, tile ``t`` in
slot ``t``; ``done[p]`` — pipeline ``p``'s RESULT headers ``(tiles of p, 16)`` uint8 in completion order.
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
    """A command stream the kernels would reject (bad header, payload cut short)."""


def _walk(buf: np.ndarray, p: EngineParams, where: str) -> list[tuple[dict[str, int], np.ndarray]]:
    """The commands of one stream: ``(header fields, payload)`` in order."""
    cmds, pos, n = [], 0, len(buf)
    while pos < n:
        if pos + streams.BEAT_BYTES > n:
            raise EngineStreamError(f"{where}: header beat cut short at byte {pos}")
        h = streams.decode("command", buf[pos:pos + streams.BEAT_BYTES])
        pos += streams.BEAT_BYTES
        if h["d"] < 16 or h["d"] > p.max_d or h["d"] % 16:
            raise EngineStreamError(f"{where}: command at byte {pos - 16}: head size {h['d']} not a multiple of 16 "
                                    f"in 16..{p.max_d}")
        if not 1 <= h["n_kb"] * p.key_block <= p.max_keys:
            raise EngineStreamError(f"{where}: command at byte {pos - 16}: {h['n_kb']} key blocks outside "
                                    f"1..{p.max_keys // p.key_block}")
        if h["op"] in (streams.OP_LOAD_K, streams.OP_LOAD_V):
            size = h["n_kb"] * p.key_block * h["d"]
        elif h["op"] == streams.OP_TILE:
            size = p.q_rows * h["d"]
        else:
            raise EngineStreamError(f"{where}: command at byte {pos - 16}: unknown op {h['op']}")
        if pos + size > n:
            raise EngineStreamError(f"{where}: command at byte {pos - 16}: payload cut short")
        cmds.append((h, buf[pos:pos + size]))
        pos += size
    return cmds


def run_launch_model(p: EngineParams, qk_in: list[np.ndarray], v_in: list[np.ndarray], n_tiles: int,
                     regs: SwiftMaxRegisters, rq: RequantRegisters, fmt: SwiftMaxFormat | None = None
                     ) -> tuple[np.ndarray, list[np.ndarray]]:
    """One launch of the engine, functionally: returns ``(a, done)`` (module docstring). ``n_tiles``: the
    size of the A buffer (tile ids must be below it). The score packets of a tile are independent per
    slice, so their merge order cannot change the result (the C-simulation checks that with random
    interleavings)."""
    fmt = fmt or engine_format(p.score_bits)
    a = np.zeros((n_tiles, p.q_rows, p.max_d), np.int8)
    done: list[np.ndarray] = []
    d_seen = 0
    for pipe in range(p.pipelines):
        qk = _walk(np.asarray(qk_in[pipe], np.uint8), p, f"pipeline {pipe} qk_in")
        vv = _walk(np.asarray(v_in[pipe], np.uint8), p, f"pipeline {pipe} v_in")
        if any(h["op"] != streams.OP_LOAD_V for h, _ in vv):
            raise EngineStreamError(f"pipeline {pipe} v_in: only LOAD_V commands belong on v_in")
        v_iter = iter(vv)
        k_cur = v_cur = None
        heads = []
        for h, payload in qk:
            d = h["d"]
            if h["op"] == streams.OP_LOAD_K:
                k_cur = (h, payload.reshape(h["n_kb"] * p.key_block, d).astype(np.int8, copy=False).view(np.int8))
                try:
                    hv, pv = next(v_iter)
                except StopIteration:
                    raise EngineStreamError(f"pipeline {pipe}: a LOAD_K without its LOAD_V on v_in") from None
                v_cur = (hv, pv.reshape(hv["n_kb"] * p.key_block, hv["d"]).view(np.int8))
                continue
            if h["op"] != streams.OP_TILE:
                raise EngineStreamError(f"pipeline {pipe} qk_in: LOAD_V belongs on v_in")
            if k_cur is None or k_cur[0]["n_kb"] != h["n_kb"] or k_cur[0]["d"] != d:
                raise EngineStreamError(f"pipeline {pipe}: tile {h['tag']}: n_kb/d differ from the last LOAD_K")
            if v_cur[0]["n_kb"] != h["n_kb"] or v_cur[0]["d"] != d:
                raise EngineStreamError(f"pipeline {pipe}: tile {h['tag']}: n_kb/d differ from the last LOAD_V")
            kp = h["n_kb"] * p.key_block
            q = payload.reshape(p.q_rows, d).view(np.int8)
            acc = exact_int_matmul(q, np.ascontiguousarray(k_cur[1].T))
            keep = tile_keep(p.q_rows, kp, h["rows"], h["q0"], h["valid_keys"], bool(h["causal"]))
            s = engine_scores(acc, keep, h["score_shift"], p.score_bits)
            pm = np.zeros_like(s)
            for b0, b1 in slice_blocks(h["n_kb"], p.kernels):  # one packet per non-empty slice
                if b1 > b0:
                    sl = slice(b0 * p.key_block, b1 * p.key_block)
                    pm[:, sl] = engine_p(s[:, sl], regs, p.score_bits, fmt)
            o = exact_int_matmul(pm, v_cur[1].astype(np.int64))
            tid = h["tag"]
            if tid >= n_tiles:
                raise EngineStreamError(f"pipeline {pipe}: tile id {tid} outside the A buffer ({n_tiles} slots)")
            a[tid, :, :d] = requantize(o, rq).astype(np.int8)
            d_seen = max(d_seen, d)
            heads.append(streams.encode("result", tile_id=tid, rows=h["rows"], pipeline=pipe, d=d))
        done.append(np.array(heads, np.uint8).reshape(-1, streams.BEAT_BYTES))
    return a[:, :, :d_seen] if d_seen else a, done


__all__ = ["EngineParams", "EngineStreamError", "run_launch_model"]

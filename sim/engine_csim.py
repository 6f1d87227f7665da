"""C-simulation of one launch of the scalable engine (stream contract v3, ``hw/ENGINE.md``):
``sim/cpp/engine_csim_tb.cpp`` chains, per pipeline, the HLS movers ``mm2s_engine`` (the q mover on the q list;
the k and v movers on the one kv list, each sending its op's slices; payloads gathered from the re-tiled operand
buffers), the tile DMAs (the q stream cut into q buffers, the k and v streams split into K / V slices by packet
id), the ``k`` QKᵀ AIE kernels, per score channel a ``pktmerge`` emulated as a seeded random interleaving of whole
packets, the HLS normalizer ``swiftmax_engine_hls`` and ``pktsplit`` by packet id, the ``k`` P·V AIE kernels
(cascade FIFOs between them) and the requantizer at the cascade's end (O into the A record), and the HLS output
mover ``s2mm_engine``.

Inputs are the buffers the host puts in card memory (:class:`vckattn.host.engine.Launch`: the command lists
and the re-tiled Q, K, V; the output requantization travels in the LOAD_V SLICE headers of the kv list); the
result is the A buffer and the done logs, every kernel's status and the stream
accounting. With ``op_counts`` (vector path only) every AIE kernel invocation's instrumented AIE API counts come
back too (the input of :mod:`vckattn.hw.perf.engine_aie`'s closed-form check). Builds are cached per build
parameter set by :func:`vckattn.sim.hls_csim.compile_cpp` (``build/hls/engine_csim_<params>/``); a missing g++
or ap_types raises :class:`~vckattn.sim.hls_csim.HlsToolsMissing`.

What this verifies: the movers, buffer formats, routing and numerics against golden (bit for bit); the AIE
vector path's tiling over ``hw/aie/aie_api_emu.h`` (``vector=True``). What it cannot: the concurrency and
buffer depths of the real dataflow (the kernels run one after the other with unbounded queues), the ADF graph
and the real AIE API (need aiecompiler), HLS timing (needs Vitis HLS).
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from vckattn.golden.swiftmax_int import SwiftMaxHeads, SwiftMaxRegisters
from vckattn.hw.engine.model import EngineParams
from vckattn.sim.hls_csim import REPO_ROOT, compile_cpp, run_binary
from vckattn.sim.hls_norm_csim import swiftmax_register_words

AIE_DIR = REPO_ROOT / "hw" / "aie"
ENGINE_DIR = AIE_DIR / "engine"
HLS_DIR = REPO_ROOT / "hw" / "hls"
TB_CPP = REPO_ROOT / "sim" / "cpp" / "engine_csim_tb.cpp"
SOURCES = (TB_CPP, HLS_DIR / "swiftmax_engine_hls.cpp", HLS_DIR / "s2mm_engine.cpp", HLS_DIR / "mm2s_engine.cpp")

#: the test bench's CORRUPT hooks (a broken pktsplit of pipeline 0, channel 0): swap the packet ids of the first
#: P packets of kernels 0 and 1, or swap the first two P packets delivered to the channel's last kernel
CORRUPTIONS = {None: 0, "swap_ids": 1, "swap_order": 2}


def build_name(params: EngineParams, vector: bool = False) -> str:
    """The cache folder name under ``build/hls/`` (pipelines are a run-time argument)."""
    return (f"engine_csim_k{params.kernels}_m{params.score_plios}_q{params.q_rows}_d{params.d}"
            f"_keys{params.max_keys}_s{params.score_bits}{'_vec' if vector else ''}")


class KernelStatus(NamedTuple):
    """A kernel's status: ``code`` 0 = ok, with the kernel's text for it."""

    code: int
    text: str


@dataclass
class EngineLaunch:
    """The result of one launch.

    ``a``: the launch's shared A buffer ``(n_slots, q_rows, D)`` int8 (tile ``t`` in slot ``t``; zero where no tile
    was written); ``done[p]``: pipeline ``p``'s ``streams.RESULT`` headers ``(records, 16)`` uint8 in arrival order;
    ``status``: every kernel's status by name (``p<p>.mm2s_q``, ``p<p>.mm2s_k``, ``p<p>.mm2s_v``, ``p<p>.qk<j>``,
    ``p<p>.norm<c>``, ``p<p>.pv<j>``, ``p<p>.rq``, ``p<p>.s2mm``); ``leftover`` / ``missing``: unconsumed buffers, bytes
    or cascade words of a stream / cascade words read past its end, only non-zero ones; ``packets[p][c]``: score packets
    through channel ``c`` of pipeline ``p``; ``records[p]``: A records written; ``op_counts``: with ``op_counts=True``,
    one dict per AIE kernel invocation (``pipeline``, ``kernel``, ``j``, ``tile``, ``masked``, ``counts``)."""

    a: np.ndarray
    done: list[np.ndarray]
    status: dict[str, KernelStatus]
    leftover: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    packets: list[list[int]] = field(default_factory=list)
    records: list[int] = field(default_factory=list)
    op_counts: list[dict] = field(default_factory=list)

    @property
    def failed(self) -> dict[str, KernelStatus]:
        """The kernels whose status is not ok."""
        return {k: s for k, s in self.status.items() if s.code != 0}

    @property
    def ok(self) -> bool:
        """Every kernel ok and every stream consumed exactly."""
        return not self.failed and not self.leftover and not self.missing


def _headers() -> list[Path]:
    return sorted([*ENGINE_DIR.glob("*.h"), *AIE_DIR.glob("*.h"), *(AIE_DIR / "generated").glob("*.h"),
                   *HLS_DIR.glob("*.h"), *(HLS_DIR / "generated").glob("*.h")])


def build(params: EngineParams, vector: bool = False) -> Path:
    """Build (or reuse) the test bench for ``params``; ``vector`` selects the AIE kernels' vector path
    (over ``hw/aie/aie_api_emu.h``). Returns the executable."""
    flags = ["-O1", f"-I{ENGINE_DIR}", *params.defines()]
    if vector:
        flags.append("-DVCKATTN_AIE_VECTOR_EMU")
    return compile_cpp(list(SOURCES), build_name(params, vector), extra_flags=tuple(flags), depends=_headers())


def _raw(name: str, buf: np.ndarray) -> bytes:
    a = np.ascontiguousarray(buf)
    if a.dtype not in (np.int8, np.uint8):
        raise ValueError(f"{name} must be int8 or uint8 bytes, got {a.dtype}")
    return a.reshape(-1).view(np.uint8).tobytes()


def run_engine_launch(params: EngineParams, q_cmds: list[np.ndarray], kv_cmds: list[np.ndarray], q_src: np.ndarray,
                      k_src: np.ndarray, v_src: np.ndarray, n_tiles: list[int], regs: SwiftMaxHeads | SwiftMaxRegisters,
                      seed: int = 0, vector: bool = False, *, n_slots: int | None = None,
                      corrupt: str | None = None, op_counts: bool = False, timeout: float = 300.0) -> EngineLaunch:
    """Run one launch of a ``params.pipelines``-pipeline engine.

    ``q_cmds[p]`` / ``kv_cmds[p]``: pipeline ``p``'s command lists (``(n, 32)`` uint8 descriptors,
    :mod:`vckattn.host.engine`); ``q_src``, ``k_src``, ``v_src``: the re-tiled operand buffers the descriptors'
    offsets point into; ``n_tiles[p]``: its TILE commands (the A records its output mover writes); ``regs``: the
    layer's SwiftMax constants for the scores (:func:`vckattn.golden.engine.engine_registers`): a
    :class:`SwiftMaxHeads` (register set ``h`` for the score packets whose header says ``head = h``), or one
    :class:`SwiftMaxRegisters` (``SwiftMaxHeads.broadcast(regs, 1)``: every TILE must be of head 0); ``seed``: the
    packet merges' interleaving; ``n_slots``: slots of the A buffer (default: the launch's tiles); ``corrupt``: a
    test hook breaking pktsplit (:data:`CORRUPTIONS`); ``op_counts``: collect every AIE kernel invocation's
    instrumented counts (needs ``vector``).
    """
    n = params.pipelines
    if not len(q_cmds) == len(kv_cmds) == len(n_tiles) == n:
        raise ValueError(f"need {n} q and kv command lists and n_tiles entries (one per pipeline), got "
                         f"{len(q_cmds)}, {len(kv_cmds)}, {len(n_tiles)}")
    if corrupt not in CORRUPTIONS:
        raise ValueError(f"corrupt must be one of {list(CORRUPTIONS)}, got {corrupt!r}")
    if seed < 0 or any(t < 0 for t in n_tiles):
        raise ValueError("seed and n_tiles must be >= 0")
    if op_counts and not vector:
        raise ValueError("op_counts needs the vector path (vector=True)")
    n_slots = sum(n_tiles) if n_slots is None else int(n_slots)
    exe = build(params, vector)
    with tempfile.TemporaryDirectory(prefix="engine_csim_") as tmp:
        d = Path(tmp)
        for p in range(n):
            (d / f"q_{p}.bin").write_bytes(_raw(f"q_cmds[{p}]", q_cmds[p]))
            (d / f"kv_{p}.bin").write_bytes(_raw(f"kv_cmds[{p}]", kv_cmds[p]))
        for name, buf in (("q_src", q_src), ("k_src", k_src), ("v_src", v_src)):
            raw = _raw(name, buf)
            (d / f"{name}.bin").write_bytes(raw + bytes(-len(raw) % 16))
        counts = d / "counts.jsonl"
        args = [str(d), n, seed, CORRUPTIONS[corrupt], n_slots,
                str(counts) if op_counts else "-", *(int(t) for t in n_tiles),
                *swiftmax_register_words(regs if isinstance(regs, SwiftMaxHeads) else SwiftMaxHeads.broadcast(regs, 1))]
        text = run_binary(exe, args=[str(a) for a in args], timeout=timeout).decode()
        a = np.frombuffer((d / "a.bin").read_bytes(), np.int8).reshape(n_slots, params.q_rows, params.d).copy()
        done = [np.frombuffer((d / f"done_{p}.bin").read_bytes(), np.uint8).reshape(-1, 16).copy() for p in range(n)]
        inv = [json.loads(line) for line in counts.read_text().splitlines()] if op_counts else []
    status = {m[1]: KernelStatus(int(m[2]), m[3].strip()) for m in re.finditer(r"^status (\S+) (-?\d+) (.*)$", text,
                                                                                  re.M)}
    left = {m[1]: int(m[2]) for m in re.finditer(r"^leftover (\S+) (\d+)$", text, re.M)}
    missing = {m[1]: int(m[2]) for m in re.finditer(r"^missing (\S+) (\d+)$", text, re.M)}
    empty_reads = len(re.findall(r"is read while empty", text))
    if empty_reads:
        missing["hls_streams"] = empty_reads
    packets = [[0] * params.score_plios for _ in range(n)]
    for m in re.finditer(r"^packets p(\d+)\.c(\d+) (\d+)$", text, re.M):
        packets[int(m[1])][int(m[2])] = int(m[3])
    records = [int(m[1]) for m in re.finditer(r"^records p\d+ (\d+)$", text, re.M)]
    return EngineLaunch(a, done, status, left, missing, packets, records, inv)


def run_launch(launch: object, regs: SwiftMaxHeads | SwiftMaxRegisters, seed: int = 0, vector: bool = False,
               **kw: object) -> EngineLaunch:
    """:func:`run_engine_launch` on a host launch (:class:`vckattn.host.engine.Launch`: its command lists and
    re-tiled operands)."""
    c = launch.cmds  # type: ignore[attr-defined]
    return run_engine_launch(c.params, c.q, c.kv, launch.q, launch.k, launch.v,  # type: ignore[attr-defined]
                             [len(t) for t in c.tiles], regs, seed, vector,
                             n_slots=c.n_tiles, **kw)  # type: ignore[arg-type]


__all__ = ["CORRUPTIONS", "EngineLaunch", "EngineParams", "KernelStatus", "build", "build_name", "run_engine_launch",
           "run_launch"]

"""C-simulation of one launch of the scalable engine (stream contract v3, ``hw/ENGINE.md``):
``sim/cpp/engine_csim_tb.cpp`` chains, per pipeline, the HLS movers ``mm2s_engine`` (the q mover on the q list;
the k and v movers on the one kv list, each sending its op's slices; payloads gathered from the re-tiled operand
buffers), the tile DMAs (the q stream cut into q buffers, the k and v streams split into K / V slices by packet
id), the ``k`` QKᵀ AIE kernels, per score channel a ``pktmerge`` emulated as a seeded random interleaving of whole
packets, the layer's HLS normalizer and ``pktsplit`` by packet id, the ``k`` P·V AIE kernels (cascade FIFOs between
them) and the requantizer at the cascade's end (O into the A record), and the HLS output mover ``s2mm_engine``.

The full description: ``docs/internals/sim.md``, section ``sim/engine_csim.py``.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from vckattn.golden.engine import ENGINE_NORMALIZERS, engine_mode_values, engine_regmap
from vckattn.golden.online_softmax_int import OnlineSoftmaxRegisters
from vckattn.golden.swiftmax_int import SwiftMaxFormat, SwiftMaxHeads, SwiftMaxRegisters, swiftmax_regmap
from vckattn.hw.spec.functional import EngineParams
from vckattn.sim.hls_csim import REPO_ROOT, compile_cpp, run_binary
from vckattn.sim.hls_norm_csim import swiftmax_register_words

AIE_DIR = REPO_ROOT / "hw" / "aie"
ENGINE_DIR = AIE_DIR / "engine"
HLS_DIR = REPO_ROOT / "hw" / "hls"
TB_CPP = REPO_ROOT / "sim" / "cpp" / "engine_csim_tb.cpp"
SOURCES = (TB_CPP, HLS_DIR / "swiftmax_engine_hls.cpp", HLS_DIR / "s2mm_engine.cpp", HLS_DIR / "mm2s_engine.cpp")
#: the online-softmax channel, compiled in a build with both normalizers, and its own test bench
ONLINE_SOURCE = HLS_DIR / "online_softmax_engine_hls.cpp"
ONLINE_TB_CPP = REPO_ROOT / "sim" / "cpp" / "online_softmax_engine_tb.cpp"

#: the test bench's CORRUPT hooks (a broken pktsplit of pipeline 0, channel 0): swap the packet ids of the first
#: P packets of kernels 0 and 1, or swap the first two P packets delivered to the channel's last kernel
CORRUPTIONS = {None: 0, "swap_ids": 1, "swap_order": 2}


def build_name(params: EngineParams, vector: bool = False) -> str:
    """The cache folder name under ``build/hls/`` (pipelines are a run-time argument)."""
    online = f"_os{params.online_lanes}" if params.online_lanes else ""
    return (f"engine_csim_k{params.kernels}_m{params.score_plios}_q{params.q_rows}_d{params.d}"
            f"_keys{params.max_keys}_s{params.score_bits}{online}{'_vec' if vector else ''}")


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
    one dict per AIE kernel invocation (``pipeline``, ``kernel``, ``j``, ``tile``, ``masked``, ``counts``);
    ``normalizer``: the normalizer the score channels ran (``swiftmax`` or ``online_softmax``)."""

    a: np.ndarray
    done: list[np.ndarray]
    status: dict[str, KernelStatus]
    leftover: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    packets: list[list[int]] = field(default_factory=list)
    records: list[int] = field(default_factory=list)
    op_counts: list[dict] = field(default_factory=list)
    normalizer: str = ""

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
    sources = [*SOURCES, *([ONLINE_SOURCE] if params.online_lanes else [])]
    return compile_cpp(sources, build_name(params, vector), extra_flags=tuple(flags), depends=_headers())


def register_words(params: EngineParams, regs: SwiftMaxHeads | SwiftMaxRegisters | None,
                   online: OnlineSoftmaxRegisters | None = None) -> list[int]:
    """The register values the test bench takes, in the order it reads them: SwiftMax's (writable registers, then
    every memory entry: :func:`~vckattn.sim.hls_norm_csim.swiftmax_register_words`; all 0 for an online-softmax
    launch, as the host writes them), then, on a build with both normalizers, the registers the engine's map adds
    after SwiftMax's (``normalizer`` and the online-softmax unit's: :func:`vckattn.golden.engine.engine_mode_values`,
    in the map's order, ``VCKATTN_ENGINE_ONLINE_REGS``). ``online``: the layer normalizes with online softmax, with
    these registers (ValueError on a build without it; a SwiftMax launch needs ``regs``)."""
    if online is not None and not params.online_lanes:
        raise ValueError("this build normalizes with SwiftMax only; an online-softmax launch needs a build with both "
                         "normalizers (online_lanes > 0)")
    sm = swiftmax_regmap()
    if online is None:
        if regs is None:
            raise ValueError("a SwiftMax launch needs the SwiftMax registers")
        words = swiftmax_register_words(regs if isinstance(regs, SwiftMaxHeads) else SwiftMaxHeads.broadcast(regs, 1))
    else:
        words = [0] * (len(sm.writable) + sum(m.depth for m in sm.mems))
    if not params.online_lanes:
        return words
    mode = engine_mode_values("online_softmax" if online is not None else "swiftmax", online)
    full = engine_regmap(SwiftMaxFormat(), ENGINE_NORMALIZERS)
    base = {r.name for r in sm.regs}
    for r in full.writable:
        if r.name not in base:
            full.word(r.name, mode[r.name])  # ValueError unless the value fits its register
            words.append(int(mode[r.name]))
    return words


def _raw(name: str, buf: np.ndarray) -> bytes:
    a = np.ascontiguousarray(buf)
    if a.dtype not in (np.int8, np.uint8):
        raise ValueError(f"{name} must be int8 or uint8 bytes, got {a.dtype}")
    return a.reshape(-1).view(np.uint8).tobytes()


def run_engine_launch(params: EngineParams, q_cmds: list[np.ndarray], kv_cmds: list[np.ndarray], q_src: np.ndarray,
                      k_src: np.ndarray, v_src: np.ndarray, n_tiles: list[int],
                      regs: SwiftMaxHeads | SwiftMaxRegisters | None, seed: int = 0, vector: bool = False, *,
                      n_slots: int | None = None, corrupt: str | None = None, op_counts: bool = False,
                      timeout: float = 300.0,
                      online: OnlineSoftmaxRegisters | None = None) -> EngineLaunch:
    """Run one launch of a ``params.pipelines``-pipeline engine.

    ``q_cmds[p]`` / ``kv_cmds[p]``: pipeline ``p``'s command lists (``(n, 32)`` uint8 descriptors,
    :mod:`vckattn.host.engine`); ``q_src``, ``k_src``, ``v_src``: the re-tiled operand buffers the descriptors'
    offsets point into; ``n_tiles[p]``: its TILE commands (the A records its output mover writes); ``regs``: the
    layer's SwiftMax constants for the scores (:func:`vckattn.golden.engine.engine_registers`): a
    :class:`SwiftMaxHeads` (register set ``h`` for the score packets whose header says ``head = h``), or one
    :class:`SwiftMaxRegisters` (``SwiftMaxHeads.broadcast(regs, 1)``: every TILE must be of head 0); ``seed``: the
    packet merges' interleaving; ``n_slots``: slots of the A buffer (default: the launch's tiles); ``corrupt``: a
    test hook breaking pktsplit (:data:`CORRUPTIONS`); ``op_counts``: collect every AIE kernel invocation's
    instrumented counts (needs ``vector``); ``online``: the launch normalizes with online softmax, with these
    registers (:func:`vckattn.golden.engine.engine_online_registers`; a build with both normalizers only; ``regs`` is
    then not used and may be None).
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
    words = register_words(params, regs, online)
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
                str(counts) if op_counts else "-", *(int(t) for t in n_tiles), *words]
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
    norm = re.search(r"^normalizer (\S+)$", text, re.M)
    return EngineLaunch(a, done, status, left, missing, packets, records, inv, norm[1] if norm else "")


def run_launch(launch: object, regs: SwiftMaxHeads | SwiftMaxRegisters | None, seed: int = 0, vector: bool = False,
               **kw: object) -> EngineLaunch:
    """:func:`run_engine_launch` on a host launch (:class:`vckattn.host.engine.Launch`: its command lists and
    re-tiled operands)."""
    c = launch.cmds  # type: ignore[attr-defined]
    return run_engine_launch(c.params, c.q, c.kv, launch.q, launch.k, launch.v,  # type: ignore[attr-defined]
                             [len(t) for t in c.tiles], regs, seed, vector,
                             n_slots=c.n_tiles, **kw)  # type: ignore[arg-type]


@dataclass
class OnlineChannelRun:
    """The online-softmax channel's output: ``beats`` ``(n, 16)`` uint8 and ``last`` ``(n,)`` bool (TLAST) of the P
    stream, its ``status`` (0 ok), the packets it ``dropped`` and the input beats it left unread (``leftover``)."""

    beats: np.ndarray
    last: np.ndarray
    status: KernelStatus
    dropped: int
    leftover: int


def build_online_channel(params: EngineParams) -> Path:
    """Build (or reuse) the online-softmax channel's own test bench for ``params`` (``online_lanes > 0``)."""
    if not params.online_lanes:
        raise ValueError("the online-softmax channel needs a build with both normalizers (online_lanes > 0)")
    name = "engine_online_" + build_name(params).removeprefix("engine_csim_")
    return compile_cpp([ONLINE_TB_CPP, ONLINE_SOURCE], name, extra_flags=("-O1", f"-I{ENGINE_DIR}", *params.defines()),
                       depends=_headers())


def run_online_channel(params: EngineParams, beats: np.ndarray, n_packets: int, online: OnlineSoftmaxRegisters,
                       timeout: float = 120.0) -> OnlineChannelRun:
    """``online_softmax_engine_hls`` on its own, on a score stream: ``beats`` ``(n, 16)`` uint8 (packets back to
    back, each a header beat then its payload beats), ``n_packets`` of them, the online-softmax registers
    ``online`` (:func:`vckattn.golden.engine.engine_online_registers`)."""
    raw = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1)
    if raw.size % 16:
        raise ValueError("beats must be whole 16-byte beats")
    mode = engine_mode_values("online_softmax", online)
    full = engine_regmap(SwiftMaxFormat(), ENGINE_NORMALIZERS)
    a_mult, a_shift = int(mode["os_a_mult"]), int(mode["os_a_shift"])
    full.word("os_a_mult", a_mult), full.word("os_a_shift", a_shift)  # ValueError unless they fit their registers
    exe = build_online_channel(params)
    with tempfile.TemporaryDirectory(prefix="engine_online_") as tmp:
        d = Path(tmp)
        (d / "in.bin").write_bytes(raw.tobytes())
        text = run_binary(exe, args=[str(d / "in.bin"), str(d / "out.bin"), str(int(n_packets)), str(a_mult),
                                     str(a_shift)], timeout=timeout).decode()
        out = np.frombuffer((d / "out.bin").read_bytes(), np.uint8).reshape(-1, 17)
    st = re.search(r"^status (-?\d+) (.*)$", text, re.M)
    dropped = re.search(r"^dropped (\d+)$", text, re.M)
    left = re.search(r"^leftover (\d+)$", text, re.M)
    if st is None or dropped is None or left is None:
        raise RuntimeError(f"online_softmax_engine_tb: unexpected output {text!r}")
    return OnlineChannelRun(out[:, :16].copy(), out[:, 16] != 0, KernelStatus(int(st[1]), st[2].strip()),
                            int(dropped[1]), int(left[1]))


__all__ = ["CORRUPTIONS", "EngineLaunch", "EngineParams", "KernelStatus", "OnlineChannelRun", "build", "build_name",
           "build_online_channel", "register_words", "run_engine_launch", "run_launch", "run_online_channel"]

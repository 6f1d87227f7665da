"""C-simulation of one launch of the scalable engine (stream contract v3, ``hw/ENGINE.md``):
``sim/cpp/engine_csim_tb.cpp`` chains, per pipeline, the HLS movers ``mm2s_engine`` (the q mover on the q list;
the k and v movers on the one kv list, each sending its op's slices; payloads gathered from the re-tiled operand
buffers), the tile DMAs (the q stream cut into q buffers, the k and v streams split into K / V slices by packet
id), the ``k`` QKᵀ AIE kernels, per score channel a ``pktmerge`` emulated as a seeded random interleaving of whole
packets, the PL top's score channel (the Amaranth ``EnginePL`` the xclbin takes, Verilated into the test bench,
its registers written over AXI4-Lite) and ``pktsplit`` by packet id, the ``k`` P·V AIE kernels (cascade FIFOs
between them) and the requantizer at the cascade's end (O into the A record), and the HLS output mover
``s2mm_engine``.

The full description: ``docs/internals/sim.md``, section ``sim/engine_csim.py``.
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from vckattn.golden.engine import ENGINE_NORMALIZERS, engine_format, engine_mode_values, engine_regmap
from vckattn.golden.online_softmax_int import OnlineSoftmaxRegisters
from vckattn.golden.swiftmax_int import SwiftMaxHeads, SwiftMaxRegisters
from vckattn.hw.spec.functional import EngineParams
from vckattn.sim.hls_csim import REPO_ROOT, compile_cpp, compile_object, csim_cache_root, run_binary

AIE_DIR = REPO_ROOT / "hw" / "aie"
ENGINE_DIR = AIE_DIR / "engine"
HLS_DIR = REPO_ROOT / "hw" / "hls"
CPP_DIR = REPO_ROOT / "sim" / "cpp"
TB_CPP = CPP_DIR / "engine_csim_tb.cpp"
SOURCES = (TB_CPP, HLS_DIR / "s2mm_engine.cpp", HLS_DIR / "mm2s_engine.cpp")
#: the Verilated PL top's module (one score channel of hw/pl/engine.py EnginePL) and its C++ class prefix
PL_TOP, PL_PREFIX = "engine_pl_c1", "Vpl"
#: Verilator's runtime the Verilated model links with
VERILATOR_RUNTIME = ("verilated.cpp", "verilated_threads.cpp")
#: the flags of the C-simulation's C++ (the engine's own sources add their -D parameters)
_MODEL_FLAGS = ("-O1", "-std=c++17")

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
                   *HLS_DIR.glob("*.h"), *CPP_DIR.glob("*.h")])


def verilate_pl(params: EngineParams) -> tuple[Path, Path]:
    """The PL top of ``params`` with one score channel (:class:`vckattn.hw.pl.engine.EnginePL`: ``params.lanes``
    SwiftMax lanes, and on a build with both normalizers its online-softmax unit), Verilated to C++ (class
    ``Vpl``) in a folder of the C-simulation's shared cache (:func:`vckattn.sim.hls_csim.csim_cache_root`, under a
    lock): ``(that folder, Verilator's include folder)``. Redone only when the Verilog changes; the Verilog is
    generated once per build and cache in a process."""
    name = f"pl_l{params.lanes}_" + build_name(params).removeprefix("engine_csim_")
    return _verilate_pl(params, csim_cache_root() / name)


@functools.cache
def _verilate_pl(params: EngineParams, out: Path) -> tuple[Path, Path]:
    import os
    import shutil
    import subprocess

    from vckattn.golden.paths import build_lock
    from vckattn.hw.pl.engine import generate_engine_verilog
    from vckattn.hw.pl.engine_online import OnlineBuild
    from vckattn.sim.hls_csim import HlsToolsMissing
    from vckattn.sim.runner import VERILATOR_LINT_WAIVERS, verilator_env

    try:
        verilator_env()
    except FileNotFoundError as exc:
        raise HlsToolsMissing(f"the PL top's channel is Verilated: {exc}") from None
    online = OnlineBuild(params.q_rows, params.kernels, params.slice_keys, params.online_lanes) \
        if params.online_lanes else None
    with build_lock(out):  # the cache is shared by every process (the parallel test workers)
        src = generate_engine_verilog(out, 1, params.lanes, params.score_bits, name=PL_TOP, online=online)
        obj = out / "obj"
        stamp = obj / "verilog.txt"
        text = src.read_text()
        if not (stamp.is_file() and stamp.read_text() == text):
            shutil.rmtree(obj, ignore_errors=True)
            waivers = [a for a in VERILATOR_LINT_WAIVERS if a not in ("-CFLAGS", "-O0")]
            r = subprocess.run(["verilator", "--cc", str(src), "--top-module", PL_TOP, "--prefix", PL_PREFIX, "-Mdir",
                                str(obj), *waivers], capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise RuntimeError(f"verilator failed on {src}:\n{r.stderr[-3000:]}")
            stamp.write_text(text)
    return obj, Path(os.environ["VERILATOR_ROOT"]) / "include"


def build(params: EngineParams, vector: bool = False) -> Path:
    """Build (or reuse) the test bench for ``params``; ``vector`` selects the AIE kernels' vector path
    (over ``hw/aie/aie_api_emu.h``). The PL top's channel is the Verilated Amaranth (:func:`verilate_pl`).
    Returns the executable."""
    obj, inc = verilate_pl(params)
    flags = [*_model_flags(obj, inc), f"-I{ENGINE_DIR}", f"-I{HLS_DIR}", *params.defines()]
    if vector:
        flags.append("-DVCKATTN_AIE_VECTOR_EMU")
    return compile_cpp(SOURCES, build_name(params, vector), extra_flags=flags,
                       depends=[*_headers(), *sorted(obj.glob("*.h"))], objects=pl_objects(obj, inc))



def _model_flags(obj: Path, inc: Path) -> tuple[str, ...]:
    """The flags of every translation unit over the Verilated PL top in ``obj`` (``inc``: Verilator's includes)."""
    return (*_MODEL_FLAGS, f"-I{obj}", f"-I{inc}", f"-I{inc / 'vltstd'}", "-pthread")


def pl_objects(obj: Path, inc: Path) -> list[Path]:
    """The objects every build over the Verilated PL top in ``obj`` links: the model's, the channel's
    (``sim/cpp/pl_channel.cpp``) and Verilator's runtime (:data:`VERILATOR_RUNTIME`, shared by every model). None of
    them reads the engine's -D parameters, so they are compiled once (:func:`vckattn.sim.hls_csim.compile_object`)
    and shared by the scalar and vector builds and the channel's own bench."""
    flags = _model_flags(obj, inc)
    headers = sorted(obj.glob("*.h"))
    model = [compile_object(src, obj, flags, headers) for src in sorted(obj.glob(f"{PL_PREFIX}*.cpp"))]
    channel = compile_object(CPP_DIR / "pl_channel.cpp", obj, (f"-I{CPP_DIR}", *flags),
                             [CPP_DIR / "pl_channel.h", *headers])
    runtime = [compile_object(inc / name, csim_cache_root() / "verilator_runtime", flags) for name in VERILATOR_RUNTIME]
    return [*model, channel, *runtime]


def pl_register_writes(params: EngineParams, regs: SwiftMaxHeads | SwiftMaxRegisters | None,
                       online: OnlineSoftmaxRegisters | None = None) -> list[tuple[int, int]]:
    """The AXI4-Lite writes ``(byte offset, 32-bit word)`` that program the PL top for a launch, from the golden
    register values and the build's map (:func:`vckattn.golden.engine.engine_regmap`): SwiftMax's registers and every
    entry of its per-head memories, all 0 for an online-softmax launch (as the host writes them); on a build with
    both normalizers also ``normalizer`` and the online-softmax unit's
    (:func:`vckattn.golden.engine.engine_mode_values`). ``online``: the layer normalizes with online softmax, with
    these registers (ValueError on a build without it; a SwiftMax launch needs ``regs``; ValueError when a value
    does not fit its register)."""
    if online is not None and not params.online_lanes:
        raise ValueError("this build normalizes with SwiftMax only; an online-softmax launch needs a build with both "
                         "normalizers (online_lanes > 0)")
    fmt = engine_format(params.score_bits)
    regmap = engine_regmap(fmt, ENGINE_NORMALIZERS if params.online_lanes else ("swiftmax",), read_ports=1)
    mode = engine_mode_values("online_softmax" if online is not None else "swiftmax", online) \
        if params.online_lanes else {}
    if online is None:
        if regs is None:
            raise ValueError("a SwiftMax launch needs the SwiftMax registers")
        heads = regs if isinstance(regs, SwiftMaxHeads) else SwiftMaxHeads.broadcast(regs, 1)
        values = {**heads.register_values(replace(fmt, max_heads=regmap.mem("b_beta").depth)), **mode}
    else:
        values = {**{r.name: 0 for r in regmap.writable if r.name not in mode}, **mode}
    return [(w.offset, w.word) for w in regmap.writes(values)]


def _write_register_file(path: Path, writes: list[tuple[int, int]]) -> None:
    """The AXI4-Lite writes as the test benches read them (``vckattn_pl::init_from_file``): little-endian uint32
    (byte offset, word) pairs."""
    path.write_bytes(np.array(writes, np.uint32).reshape(-1).astype("<u4").tobytes())


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
    writes = pl_register_writes(params, regs, online)
    exe = build(params, vector)
    with tempfile.TemporaryDirectory(prefix="engine_csim_") as tmp:
        d = Path(tmp)
        for p in range(n):
            (d / f"q_{p}.bin").write_bytes(_raw(f"q_cmds[{p}]", q_cmds[p]))
            (d / f"kv_{p}.bin").write_bytes(_raw(f"kv_cmds[{p}]", kv_cmds[p]))
        for name, buf in (("q_src", q_src), ("k_src", k_src), ("v_src", v_src)):
            raw = _raw(name, buf)
            (d / f"{name}.bin").write_bytes(raw + bytes(-len(raw) % 16))
        _write_register_file(d / "pl_regs.bin", writes)
        counts = d / "counts.jsonl"
        args = [str(d), n, seed, CORRUPTIONS[corrupt], n_slots, str(counts) if op_counts else "-",
                int(online is not None), *(int(t) for t in n_tiles)]
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
class ChannelRun:
    """The PL top's P stream from one score channel: ``beats`` ``(n, 16)`` uint8, ``last`` ``(n,)`` bool (TLAST), and
    the input beats it did not take (``leftover``)."""

    beats: np.ndarray
    last: np.ndarray
    leftover: int


def build_channel(params: EngineParams) -> Path:
    """Build (or reuse) the PL top's channel on its own (``sim/cpp/pl_channel_tb.cpp`` over :func:`verilate_pl`)."""
    obj, inc = verilate_pl(params)
    return compile_cpp([CPP_DIR / "pl_channel_tb.cpp"], "pl_channel_" + build_name(params).removeprefix("engine_csim_"),
                       extra_flags=_model_flags(obj, inc), depends=[CPP_DIR / "pl_channel.h", *sorted(obj.glob("*.h"))],
                       objects=pl_objects(obj, inc))


def packet_last(beats: np.ndarray) -> np.ndarray:
    """TLAST of a score stream framed as the AIE's buffer DMA frames it: each packet's header beat (its ``count``
    scores of ``elem_bits``) and ``ceil(count / (128 / elem_bits))`` payload beats, TLAST on the last."""
    from vckattn.hw.spec import streams

    last = np.zeros(len(beats), bool)
    i = 0
    while i < len(beats):
        h = streams.decode("packet", beats[i])
        per = 128 // max(int(h["elem_bits"]), 1)
        i += -(-int(h["count"]) // per)
        last[min(i, len(beats) - 1)] = True
        i += 1
    return last


def run_channel(params: EngineParams, beats: np.ndarray, writes: list[tuple[int, int]], expect: int,
                last: np.ndarray | None = None, timeout: float = 120.0) -> ChannelRun:
    """The PL top's channel (Verilated) programmed with ``writes`` on the score stream ``beats`` ``(n, 16)`` uint8
    (``last``: TLAST, default :func:`packet_last`), until ``expect`` P beats came out or the channel idles."""
    raw = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1, 16)
    flags = packet_last(raw) if last is None else np.asarray(last, bool)
    exe = build_channel(params)
    with tempfile.TemporaryDirectory(prefix="pl_channel_") as tmp:
        d = Path(tmp)
        _write_register_file(d / "regs.bin", writes)
        (d / "in.bin").write_bytes(np.concatenate([raw, flags.astype(np.uint8)[:, None]], axis=1).tobytes())
        text = run_binary(exe, args=[str(d / "regs.bin"), str(d / "in.bin"), str(d / "out.bin"), str(int(expect))],
                          timeout=timeout).decode()
        out = np.frombuffer((d / "out.bin").read_bytes(), np.uint8).reshape(-1, 17)
    left = re.search(r"^leftover (\d+)$", text, re.M)
    if left is None:
        raise RuntimeError(f"pl_channel_tb: unexpected output {text!r}")
    return ChannelRun(out[:, :16].copy(), out[:, 16] != 0, int(left[1]))


def run_online_channel(params: EngineParams, beats: np.ndarray, online: OnlineSoftmaxRegisters,
                       expect: int) -> ChannelRun:
    """The PL top's channel in online-softmax mode (``params.online_lanes > 0``; registers ``online``,
    :func:`vckattn.golden.engine.engine_online_registers`) on the score stream ``beats``."""
    return run_channel(params, beats, pl_register_writes(params, None, online), expect)


__all__ = ["CORRUPTIONS", "ChannelRun", "EngineLaunch", "EngineParams", "KernelStatus", "build", "build_channel",
           "build_name", "packet_last", "pl_register_writes", "run_channel", "run_engine_launch", "run_launch",
           "run_online_channel", "verilate_pl"]

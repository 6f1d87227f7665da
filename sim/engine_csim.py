"""C-simulation of one launch of the scalable engine (stream contract v2, ``hw/ENGINE.md``):
``sim/cpp/engine_csim_tb.cpp`` chains, per pipeline, the ``k`` ``qk_slice`` AIE kernels (broadcast
``qk_in``), a ``pktmerge`` emulated as a seeded random interleaving of whole packets, the HLS normalizer
``swiftmax_engine_hls``, ``pktsplit`` by packet id, the ``k`` ``pv_slice`` AIE kernels (broadcast ``v_in``,
cascade FIFOs) and the HLS output mover ``s2mm_engine``.

Inputs are the bytes the host would put in DDR (``qk_in``, ``v_in`` per pipeline: commands back to back,
headers by :mod:`vckattn.hw.engine.streams`); the result is the ``out`` bytes (A records in arrival order),
every kernel's status and the stream accounting. Builds are cached per build parameter set by
:func:`vckattn.sim.hls_csim.compile_cpp` (``build/hls/engine_csim_<params>/``); a missing g++ or ap_types
raises :class:`~vckattn.sim.hls_csim.HlsToolsMissing`.

What this verifies: the kernels' stream formats, routing and numerics against golden (bit for bit); the
AIE vector path's tiling over ``hw/aie/aie_api_emu.h`` (``vector=True``). What it cannot: the
concurrency and FIFO depths of the real dataflow (the kernels run one after the other with unbounded
FIFOs), the ADF graph and the real AIE API (need aiecompiler), HLS timing (needs Vitis HLS).
"""

from __future__ import annotations

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
SOURCES = (TB_CPP, HLS_DIR / "swiftmax_engine_hls.cpp", HLS_DIR / "s2mm_engine.cpp")

#: the test bench's CORRUPT hooks (a broken pktsplit of pipeline 0): swap the packet ids of the first P packets of
#: slices 0 and 1, or swap the first two P packets delivered to the last slice
CORRUPTIONS = {None: 0, "swap_ids": 1, "swap_order": 2}


def build_name(params: EngineParams, vector: bool = False) -> str:
    """The cache folder name under ``build/hls/`` (pipelines are a run-time argument)."""
    return (f"engine_csim_k{params.kernels}_q{params.q_rows}_kb{params.key_block}_d{params.max_d}"
            f"_keys{params.max_keys}_s{params.score_bits}{'_vec' if vector else ''}")


class KernelStatus(NamedTuple):
    """A kernel's status: ``code`` 0 = ok, with the kernel's text for it."""

    code: int
    text: str


@dataclass
class EngineLaunch:
    """The result of one launch.

    ``a``: the launch's shared A buffer ``(n_slots, q_rows, d)`` int8 (tile ``t`` in slot ``t``; zero where no
    tile was written); ``done[p]``: pipeline ``p``'s ``streams.RESULT`` headers ``(records, 16)`` uint8 in
    arrival order; ``status``: every kernel's
    status by name (``p<p>.qk<j>``, ``p<p>.norm``, ``p<p>.pv<j>``, ``p<p>.s2mm``); ``leftover`` / ``missing``:
    unconsumed beats of a stream / beats read past its end (cascades: 8-int32 words), only non-zero ones;
    ``packets[p]``: score packets through pipeline ``p``'s merge; ``records[p]``: A records written."""

    a: np.ndarray
    done: list[np.ndarray]
    status: dict[str, KernelStatus]
    leftover: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    packets: list[int] = field(default_factory=list)
    records: list[int] = field(default_factory=list)

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


def _check_buffer(name: str, p: int, buf: np.ndarray) -> np.ndarray:
    a = np.asarray(buf)
    if a.dtype != np.uint8 or a.ndim != 1:
        raise ValueError(f"{name}[{p}] must be a 1-D uint8 array, got {a.dtype} with shape {a.shape}")
    if a.size % 16:
        raise ValueError(f"{name}[{p}] is {a.size} bytes, not a whole number of 16-byte beats")
    return np.ascontiguousarray(a)


def run_engine_launch(params: EngineParams, qk_in: list[np.ndarray], v_in: list[np.ndarray], n_tiles: list[int],
                      regs: SwiftMaxHeads | SwiftMaxRegisters, rq_mult: int, rq_shift: int, seed: int = 0,
                      vector: bool = False,
                      *, n_slots: int | None = None, d: int | None = None, corrupt: str | None = None,
                      timeout: float = 120.0) -> EngineLaunch:
    """Run one launch of a ``params.pipelines``-pipeline engine.

    ``qk_in[p]`` / ``v_in[p]``: pipeline ``p``'s command streams (uint8 bytes); ``n_tiles[p]``: its TILE
    commands (the A records its output mover writes); ``regs``: the layer's SwiftMax constants for the scores
    (:func:`vckattn.golden.engine.engine_registers`): a :class:`SwiftMaxHeads` (register set ``h`` for the
    score packets whose header says ``head = h``, copied from the TILE command), or one
    :class:`SwiftMaxRegisters` (``SwiftMaxHeads.broadcast(regs, 1)``: every TILE must be of head 0); every
    register set goes to the C++ (the shared registers, then the ``b_beta``/``c_out`` memories' ``max_heads``
    entries); ``rq_mult`` / ``rq_shift``: the output
    requantization (:func:`vckattn.golden.requant.requantize`, scalar); ``seed``: the packet merge's
    interleaving; ``n_slots``: slots of the A buffer (default: the launch's tiles); ``d``: the head size of
    the launch (default ``params.max_d``); ``corrupt``: a test hook breaking pktsplit (:data:`CORRUPTIONS`).
    """
    n = params.pipelines
    if not len(qk_in) == len(v_in) == len(n_tiles) == n:
        raise ValueError(f"need {n} qk_in, v_in and n_tiles entries (one per pipeline), got "
                         f"{len(qk_in)}, {len(v_in)}, {len(n_tiles)}")
    if corrupt not in CORRUPTIONS:
        raise ValueError(f"corrupt must be one of {list(CORRUPTIONS)}, got {corrupt!r}")
    if seed < 0 or any(t < 0 for t in n_tiles):
        raise ValueError("seed and n_tiles must be >= 0")
    n_slots = sum(n_tiles) if n_slots is None else int(n_slots)
    d_head = params.max_d if d is None else int(d)
    exe = build(params, vector)
    with tempfile.TemporaryDirectory(prefix="engine_csim_") as tmp:
        d = Path(tmp)
        for p in range(n):
            (d / f"qk_in_{p}.bin").write_bytes(_check_buffer("qk_in", p, qk_in[p]).tobytes())
            (d / f"v_in_{p}.bin").write_bytes(_check_buffer("v_in", p, v_in[p]).tobytes())
        args = [str(d), n, seed, CORRUPTIONS[corrupt], int(rq_mult), int(rq_shift), n_slots, d_head,
                *(int(t) for t in n_tiles),
                *swiftmax_register_words(regs if isinstance(regs, SwiftMaxHeads) else SwiftMaxHeads.broadcast(regs, 1))]
        text = run_binary(exe, args=[str(a) for a in args], timeout=timeout).decode()
        a = np.frombuffer((d / "a.bin").read_bytes(), np.int8).reshape(n_slots, params.q_rows, d_head).copy()
        done = [np.frombuffer((d / f"done_{p}.bin").read_bytes(), np.uint8).reshape(-1, 16).copy() for p in range(n)]
    status = {m[1]: KernelStatus(int(m[2]), m[3].strip()) for m in re.finditer(r"^status (\S+) (-?\d+) (.*)$", text,
                                                                                  re.M)}
    left = {m[1]: int(m[2]) for m in re.finditer(r"^leftover (\S+) (\d+)$", text, re.M)}
    missing = {m[1]: int(m[2]) for m in re.finditer(r"^missing (\S+) (\d+)$", text, re.M)}
    empty_reads = len(re.findall(r"is read while empty", text))
    if empty_reads:
        missing["hls_streams"] = empty_reads
    packets = [int(m[1]) for m in re.finditer(r"^packets p\d+ (\d+)$", text, re.M)]
    records = [int(m[1]) for m in re.finditer(r"^records p\d+ (\d+)$", text, re.M)]
    return EngineLaunch(a, done, status, left, missing, packets, records)


__all__ = ["CORRUPTIONS", "EngineLaunch", "EngineParams", "KernelStatus", "build", "build_name", "run_engine_launch"]

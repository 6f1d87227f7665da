"""System C-simulation of the Versal build: every kernel's C++ chained through the streams of
``hw/STREAMS.md`` for one launch (``sim/cpp/system_csim_tb.cpp``).

``mm2s_tiles`` / ``mm2s_kv`` (HLS) → ``qk_matmul`` (AIE kernel, scalar reference path of
``hw/aie/attention_kernels.h``) → ``score_switch`` route (HLS) → ``swiftmax_hls`` (HLS) →
``score_switch`` return (HLS) → ``pv_matmul`` (AIE, scalar path) → ``s2mm_out`` (HLS), reading and
writing the DDR buffers of :mod:`vckattn.host.tile_buffers`. Compiled with g++ against the
ap_types headers (:mod:`vckattn.sim.hls_csim`; cached in ``build/hls/system_csim_tb/``).

What this verifies: that the kernels agree with each other on every stream format and with the
host on every DDR layout, and that the C++ computes the golden integer model's tiles bit for bit.
What it cannot: HLS pragmas / timing (needs Vitis HLS), the AIE vector path and the graph (needs
aiecompiler), the concurrency of the real dataflow (the kernels run one after the other here).
The online-softmax normalizer exists only as RTL (cocotb-tested), so only SwiftMax layers run.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vckattn.golden.swiftmax_int import SwiftMaxHeads, SwiftMaxRegisters
from vckattn.sim.hls_csim import REPO_ROOT, compile_cpp, run_binary
from vckattn.sim.hls_norm_csim import swiftmax_register_words

HLS_DIR = REPO_ROOT / "hw" / "hls"
AIE_DIR = REPO_ROOT / "hw" / "aie"
TB_CPP = REPO_ROOT / "sim" / "cpp" / "system_csim_tb.cpp"
SOURCES = (TB_CPP, *(HLS_DIR / f for f in ("mm2s_tiles.cpp", "mm2s_kv.cpp", "score_switch.cpp", "s2mm_out.cpp",
                                            "swiftmax_hls.cpp")))


def _headers() -> list[Path]:
    return sorted([*HLS_DIR.glob("*.h"), *(HLS_DIR / "generated").glob("*.h"), *AIE_DIR.glob("*.h")])


def build() -> Path:
    """Build (or reuse) the system test bench; returns the executable."""
    return compile_cpp(list(SOURCES), "system_csim_tb", extra_flags=("-O1", f"-I{AIE_DIR}"), depends=_headers())


@dataclass
class LaunchResult:
    """The ``out`` buffer after the launch and the test bench's stream accounting."""

    out: np.ndarray  # uint8, the whole out buffer (host/tile_buffers layout)
    beats: dict[str, int]  # beats that crossed each stream
    leftover: dict[str, int]  # beats left in a stream at the end (empty for a correct run)
    framing_errors: int


def run_launch(buffers: dict[str, np.ndarray], kv: np.ndarray, out: np.ndarray, n_tiles: int, head_dim: int,
               keys_pad: int, n_kv_heads: int, rq: tuple[int, int], regs: SwiftMaxRegisters | SwiftMaxHeads,
               timeout: float = 300.0) -> LaunchResult:
    """Run one launch: ``buffers`` = ``desc``, ``q``, ``mask`` (:func:`~vckattn.host.tile_buffers.pack_tiles`),
    ``kv`` (:func:`~vckattn.host.tile_buffers.pack_kv`), ``out`` the blank out buffer; ``rq`` = (rq_mult,
    rq_shift) of ``s2mm_out``; ``regs`` the layer's SwiftMax constants (:class:`SwiftMaxHeads`: register set
    ``h`` for the tiles of query head ``h``, the descriptor's ``head``; one :class:`SwiftMaxRegisters` is a
    one-head layer, so every tile must then be of head 0)."""
    exe = build()
    with tempfile.TemporaryDirectory(prefix="system_csim_") as tmp:
        d = Path(tmp)
        for name, arr in (("desc", buffers["desc"]), ("q", buffers["q"]), ("mask", buffers["mask"]), ("kv", kv),
                          ("out", out)):
            (d / f"{name}.bin").write_bytes(np.ascontiguousarray(arr).tobytes())
        args = [str(d), n_tiles, head_dim, keys_pad, n_kv_heads, rq[0], rq[1],
                *swiftmax_register_words(regs)]  # the registers in declaration order, then the memories' entries
        text = run_binary(exe, args=[str(a) for a in args], timeout=timeout).decode()
        result = np.frombuffer((d / "out_result.bin").read_bytes(), np.uint8).copy()
    beats = {m[1]: int(m[2]) for m in re.finditer(r"^beats (\S+) (\d+)$", text, re.M)}
    left = {m[1]: int(m[2]) for m in re.finditer(r"^(?:leftover|missing) (\S+) (\d+)$", text, re.M) if int(m[2])}
    fe = re.search(r"^framing_errors (\d+)$", text, re.M)
    return LaunchResult(result, beats, left, int(fe[1]) if fe else -1)


__all__ = ["LaunchResult", "build", "run_launch"]

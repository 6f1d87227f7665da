"""C-simulation of the HLS data movers and ``score_switch`` (``hw/hls/``) from Python.

One g++ binary (``sim/cpp/movers_tb.cpp`` with the four kernel sources, built by
:func:`vckattn.sim.hls_csim.compile_cpp` into ``build/hls/movers_tb/``) runs one kernel per call:
the inputs are written to a temporary folder as raw little-endian bytes, the binary runs the kernel
and writes its output streams and DDR buffers back. The binary is built with AddressSanitizer when
the compiler supports it, so a kernel reading or writing outside a DDR buffer fails the run.

Formats (little endian everywhere):

* DDR buffers (``desc``, ``q``, ``mask``, ``kv``, ``out``): as in :mod:`vckattn.host.tile_buffers`;
  any array (its bytes are used) or bytes-like object.
* 128-bit streams (``q_out``, ``k_out``, ``v_out``, ``s_in``, ``o_in``, ``p_out``): returned as
  uint8 ``(beats, 16)``; given as any array whose bytes are the beats back to back (e.g. int32 S
  or O in stream order).
* 32-bit streams (``mask_out``, ``mask_in``): uint32 ``(words,)``; per tile the query head word, then
  the tile's ``keys_pad`` mask words (hw/STREAMS.md ``mask``).
* score streams (``to_swiftmax``, ``to_online_softmax``): structured :data:`SCORE_BEAT` records
  ``data`` int32 ``(4,)`` (lane ``l``), ``keep`` uint16 (TKEEP), ``user`` uint16 (TUSER: bit ``l`` =
  keep of lane ``l``, bits ``[4, 4 + HEAD_BITS)`` = the tile's query head), ``last`` uint8 (TLAST).
* P streams (``from_swiftmax``, ``from_online_softmax``): structured :data:`P_BEAT` records ``data``
  uint8 ``(4,)``, ``user`` uint8, ``last`` uint8 (build them with :func:`p_beats`).

Every run fails (:class:`StreamUnderflow`) when a kernel read an input stream that was empty;
:attr:`CsimResult.leftover` says how many beats it left unread in each input stream.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.swiftmax_int import SwiftMaxFormat
from vckattn.sim.hls_csim import REPO_ROOT, CompileError, compile_cpp, run_binary

HLS_DIR = REPO_ROOT / "hw" / "hls"
TB_CPP = REPO_ROOT / "sim" / "cpp" / "movers_tb.cpp"
KERNEL_SOURCES = tuple(HLS_DIR / f for f in ("mm2s_tiles.cpp", "mm2s_kv.cpp", "s2mm_out.cpp", "score_switch.cpp"))
HEADERS = (HLS_DIR / "movers.h", HLS_DIR / "axis_types.h", HLS_DIR / "requant.h",
           HLS_DIR / "generated" / "swiftmax_regs.h")
#: -O1 builds faster than the default -O2 and is plenty for these streams
FLAGS = ("-O1",)
ASAN_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer")

#: one score beat to a normalizer (TDATA 4 x int32, TKEEP, TUSER 4 keep bits + HEAD_BITS head bits, TLAST)
SCORE_BEAT = np.dtype([("data", "<i4", (4,)), ("keep", "<u2"), ("user", "<u2"), ("last", "u1")])
#: bits of the query head on the score TUSER, above the 4 keep bits (SwiftMaxFormat.head_bits)
HEAD_BITS = SwiftMaxFormat().head_bits
#: one P beat from a normalizer (TDATA 4 x uint8, TUSER 4 bits, TLAST)
P_BEAT = np.dtype([("data", "u1", (4,)), ("user", "u1"), ("last", "u1")])

_BEAT128 = ("q_out", "k_out", "v_out", "p_out")
_WORD32 = ("mask_out",)
_SCORE = ("to_swiftmax", "to_online_softmax")


class StreamUnderflow(RuntimeError):
    """The kernel read an input stream that was empty (in hardware: it would wait forever)."""


@dataclass
class CsimResult:
    """Output streams / DDR buffers of one kernel run (formats in the module docstring)."""

    outputs: dict[str, np.ndarray]
    leftover: dict[str, int] = field(default_factory=dict)  # input stream -> beats left unread
    framing_errors: int | None = None  # score_switch_return only: rows with a misplaced TLAST

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]


@lru_cache(maxsize=1)
def asan_available() -> bool:
    """True when g++ builds with AddressSanitizer (then :func:`build` uses it)."""
    try:
        compile_cpp("int main() { return 0; }\n", "asan_probe", extra_flags=ASAN_FLAGS)
    except CompileError:
        return False
    return True


def build() -> Path:
    """Build (or reuse) the test bench binary; returns its path."""
    flags = FLAGS + (ASAN_FLAGS if asan_available() else ())
    return compile_cpp([TB_CPP, *KERNEL_SOURCES], "movers_tb", extra_flags=flags, depends=HEADERS)


def _raw(x: Any) -> bytes:
    if isinstance(x, np.ndarray):
        if x.dtype.byteorder == ">":
            raise ValueError("big-endian arrays are not supported")
        return np.ascontiguousarray(x).tobytes()
    return bytes(memoryview(x).cast("B"))


def _run(mode: str, inputs: dict[str, Any], scalars: tuple[int, ...], timeout: float = 60.0) -> CsimResult:
    exe = build()
    with tempfile.TemporaryDirectory(prefix="movers_tb_") as tmp:
        d = Path(tmp)
        for name, value in inputs.items():
            if value is not None:
                (d / f"in_{name}.bin").write_bytes(_raw(value))
        out = run_binary(exe, args=[mode, str(d), *(str(int(s)) for s in scalars)], timeout=timeout)
        text = out.decode(errors="replace")
        if "read while empty" in text:
            lines = [ln for ln in text.splitlines() if "read while empty" in ln]
            raise StreamUnderflow(f"{mode}: a kernel read an empty stream ({len(lines)} times): {lines[0]}")
        leftover = {m[1]: int(m[2]) for m in re.finditer(r"^leftover (\S+) (\d+)$", text, re.M)}
        fe = re.search(r"^framing_errors (\d+)$", text, re.M)
        outputs: dict[str, np.ndarray] = {}
        for f in d.glob("out_*.bin"):
            name = f.name[4:-4]
            raw = np.frombuffer(f.read_bytes(), np.uint8)
            if name in _BEAT128:
                outputs[name] = raw.reshape(-1, 16).copy()
            elif name in _WORD32:
                outputs[name] = raw.view("<u4").copy()
            elif name in _SCORE:
                outputs[name] = raw.view(SCORE_BEAT).copy()
            else:  # DDR buffer
                outputs[name] = raw.copy()
    return CsimResult(outputs, leftover, int(fe[1]) if fe else None)


def p_beats(data: np.ndarray, last: np.ndarray, user: np.ndarray | None = None) -> np.ndarray:
    """:data:`P_BEAT` records from ``data`` uint8 ``(n, 4)``, ``last`` ``(n,)`` and ``user`` ``(n,)``
    (default 0xF)."""
    data = np.asarray(data, np.uint8).reshape(-1, 4)
    rec = np.zeros(len(data), P_BEAT)
    rec["data"] = data
    rec["last"] = np.asarray(last, np.uint8).reshape(-1)
    rec["user"] = 0xF if user is None else np.asarray(user, np.uint8).reshape(-1)
    return rec


def mm2s_tiles(desc: Any, q: Any, mask: Any, n_tiles: int, head_dim: int, keys_pad: int) -> CsimResult:
    """``q_out`` uint8 ``(beats, 16)`` and ``mask_out`` uint32 ``(words,)`` of one launch."""
    return _run("mm2s_tiles", {"desc": desc, "q": q, "mask": mask}, (n_tiles, head_dim, keys_pad))


def mm2s_kv(desc: Any, kv: Any, n_tiles: int, n_kv_heads: int, head_dim: int, keys_pad: int) -> CsimResult:
    """``k_out`` and ``v_out``, uint8 ``(beats, 16)`` each, of one launch."""
    return _run("mm2s_kv", {"desc": desc, "kv": kv}, (n_tiles, n_kv_heads, head_dim, keys_pad))


def s2mm_out(o_in: Any, desc: Any, out: Any, n_tiles: int, head_dim: int, rq_mult: int, rq_shift: int) -> CsimResult:
    """``out``: the ``out`` buffer (uint8, same size as the one given) after the kernel wrote its
    records; ``o_in`` holds the O beats (e.g. int32 ``(n_tiles, 32, head_dim)``)."""
    return _run("s2mm_out", {"o_in": o_in, "desc": desc, "out": out}, (n_tiles, head_dim, rq_mult, rq_shift))


def score_switch_route(s_in: Any, mask_in: Any, n_tiles: int, keys_pad: int, select: int) -> CsimResult:
    """``to_swiftmax`` and ``to_online_softmax`` (:data:`SCORE_BEAT` records) from the S blocks
    ``s_in`` (int32 in stream order) and the mask words ``mask_in``."""
    return _run("route", {"s_in": s_in, "mask_in": mask_in}, (n_tiles, keys_pad, select))


def score_switch_return(from_swiftmax: np.ndarray | None, from_online_softmax: np.ndarray | None, n_tiles: int,
                        keys_pad: int, select: int) -> CsimResult:
    """``p_out`` uint8 ``(beats, 16)`` from :data:`P_BEAT` records; ``framing_errors`` set."""
    return _run("return", {"from_swiftmax": from_swiftmax, "from_online_softmax": from_online_softmax},
                (n_tiles, keys_pad, select))


def score_switch(s_in: Any, mask_in: Any, from_swiftmax: np.ndarray | None, from_online_softmax: np.ndarray | None,
                 n_tiles: int, keys_pad: int, select: int) -> CsimResult:
    """The whole kernel (route, then return, in C-simulation order): ``to_*`` and ``p_out``; the
    ``from_*`` streams must already hold the normalizer's P."""
    return _run("switch", {"s_in": s_in, "mask_in": mask_in, "from_swiftmax": from_swiftmax,
                           "from_online_softmax": from_online_softmax}, (n_tiles, keys_pad, select))


__all__ = ["HEAD_BITS", "P_BEAT", "SCORE_BEAT", "CsimResult", "StreamUnderflow", "asan_available", "build", "mm2s_kv",
           "mm2s_tiles", "p_beats", "s2mm_out", "score_switch", "score_switch_return", "score_switch_route"]

"""C-simulation of the projection GEMM (``hw/ENGINE.md`` "The projection GEMM"): one cascade of ``k`` AIE kernels
(``hw/aie/engine/gemm_kernels.h``) computing ``X·Wᵀ + b`` requantized per output channel to int8 (Q/K/V) or as
int32 (Y of W_O), over every tile of X rows and every output-channel block, on the scalar path or the vector path
(over the counting ``hw/aie/aie_api_emu.h``), through ``sim/cpp/gemm_proj_tb.cpp``.

:func:`gemm_buffers` builds the buffers the kernels receive (the host's re-tiling: golden's pack functions and the
stream headers of :mod:`vckattn.hw.spec.streams`): per column block ``cb`` and tile ``r`` of ``ROWS`` rows one x
buffer per kernel (tile id ``cb·T + r``: X is sent once per column block), per column block one w buffer per kernel
held for its ``T`` tiles. :func:`run_gemm` runs them and returns the output matrix. What this verifies: formats,
routing and numerics (bit for bit against golden in the tests), and the vector path's tiling. What it cannot: the
concurrency of the real dataflow, the ADF graph and the real AIE API (need aiecompiler).
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vckattn.golden.gemm_proj import GROUP, check_accumulator_range, fold_requant, pack_x
from vckattn.golden.requant import RequantRegisters
from vckattn.hw.spec import streams
from vckattn.hw.spec.gemm import GemmParams
from vckattn.sim.hls_csim import REPO_ROOT, compile_cpp, run_binary

AIE_DIR = REPO_ROOT / "hw" / "aie"
ENGINE_DIR = AIE_DIR / "engine"
TB_CPP = REPO_ROOT / "sim" / "cpp" / "gemm_proj_tb.cpp"
BEAT = streams.BEAT_BYTES




@dataclass
class GemmRun:
    """The result of one run: ``out`` ``(n_rows, n_out)`` (int8 or int32; None when a kernel failed), ``headers``
    the GRESULT header fields of every out buffer in order, ``status`` per kernel ``k<j>`` (code, text),
    ``leftover`` / ``missing``, ``op_counts`` one dict per kernel invocation (``kernel``, ``j``, ``tile``,
    ``counts``), ``data_bytes`` each kernel's data memory as the kernel code declares it (``gemm_data_bytes``)."""

    out: np.ndarray | None
    headers: list[dict[str, int]]
    status: dict[str, tuple[int, str]]
    leftover: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    op_counts: list[dict] = field(default_factory=list)
    data_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c == 0 for c, _ in self.status.values()) and not self.leftover and not self.missing


def build_name(p: GemmParams, vector: bool) -> str:
    return (f"gemm_proj_k{p.kernels}_r{p.rows}_c{p.cols}_s{p.kslice}_l{p.slices[-1]}_o{p.out_bits}"
            f"{'_vec' if vector else ''}")


def build(p: GemmParams, vector: bool = False) -> Path:
    """Build (or reuse) the test bench for ``p``; ``vector``: the kernels' vector path over the API emulation."""
    flags = ["-O1", f"-I{ENGINE_DIR}", *p.defines()] + (["-DVCKATTN_AIE_VECTOR_EMU"] if vector else [])
    deps = sorted([*ENGINE_DIR.glob("*.h"), *AIE_DIR.glob("*.h"), *(AIE_DIR / "generated").glob("*.h")])
    return compile_cpp([TB_CPP], build_name(p, vector), extra_flags=tuple(flags), depends=deps)


def _header(kind: str, **values: int) -> bytes:
    return streams.encode(kind, **values).tobytes()


def gemm_buffers(p: GemmParams, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
                 rq: RequantRegisters | None) -> tuple[list[bytes], list[bytes], int]:
    """The kernels' buffers for ``X·Wᵀ + b`` (module doc): ``x`` ``(n_rows, K)`` int8, ``w`` ``(n_out, K)`` int8
    (``K = p.k``; ``n_out`` a multiple of ``p.cols``), ``bias`` ``(n_out,)`` int32 or None, ``rq`` the per-channel
    requantization (``out_bits`` 8) or None (32). Returns per kernel its x bytes and its w bytes, and the tiles per
    column block. ValueError for shapes or constants the kernels cannot run (``fold_requant``,
    ``check_accumulator_range``)."""
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != p.k or w.shape[1] != p.k:
        raise ValueError(f"x (n_rows, {p.k}) and w (n_out, {p.k}) expected, got {x.shape} and {w.shape}")
    n_rows, n_out = x.shape[0], w.shape[0]
    if n_rows < 1 or n_out < p.cols or n_out % p.cols:
        raise ValueError(f"need n_rows >= 1 and n_out a positive multiple of cols={p.cols}, got {n_rows}, {n_out}")
    if (p.out_bits == 8) != (rq is not None):
        raise ValueError("rq is required for out_bits 8 and not allowed for out_bits 32")
    b = np.zeros(n_out, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    check_accumulator_range(b, p.k, n_out)
    mult, shift = fold_requant(rq, n_out) if rq is not None else (None, None)
    t = -(-n_rows // p.rows)
    xp = np.zeros((t * p.rows, p.k), np.int8)
    xp[:n_rows] = x
    xs: list[list[bytes]] = [[] for _ in range(p.kernels)]
    ws: list[list[bytes]] = [[] for _ in range(p.kernels)]
    for cb in range(n_out // p.cols):
        ch = slice(cb * p.cols, (cb + 1) * p.cols)
        for j in range(p.kernels):
            ks = slice(j * p.kslice, j * p.kslice + p.kslice_of(j))
            g = slice(cb * p.cols // GROUP, (cb + 1) * p.cols // GROUP)
            ws[j].append(_header("wslice", packet_id=j, op=streams.OP_LOAD_W, slice=j, tiles=t, first_tile=cb * t,
                                 col_block=cb)
                         + p.w_payload(j, w[ch, ks], b[ch], None if mult is None else mult[ch],
                                       None if shift is None else shift[g]))
            for r in range(t):
                rows = min(p.rows, n_rows - r * p.rows)
                xs[j].append(_header("xtile", packet_id=j, op=streams.OP_X_TILE, slice=j, rows=rows, tag=cb * t + r)
                             + pack_x(xp[r * p.rows:(r + 1) * p.rows, ks]).astype(np.int8).tobytes())
    return [b"".join(v) for v in xs], [b"".join(v) for v in ws], t


def run_gemm(p: GemmParams, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, rq: RequantRegisters | None,
             vector: bool = False, op_counts: bool = False, *,
             buffers: tuple[list[bytes], list[bytes], int] | None = None, timeout: float = 300.0) -> GemmRun:
    """Run the cascade on ``X·Wᵀ + b`` (arguments as :func:`gemm_buffers`; ``buffers``: its result, possibly
    altered, instead). ``op_counts`` (vector path only): every invocation's instrumented counts."""
    if op_counts and not vector:
        raise ValueError("op_counts needs the vector path (vector=True)")
    n_rows, n_out = np.shape(x)[0], np.shape(w)[0]
    xs, ws, t = buffers if buffers is not None else gemm_buffers(p, x, w, bias, rq)
    exe = build(p, vector)
    n_tiles = t * (n_out // p.cols)
    with tempfile.TemporaryDirectory(prefix="gemm_csim_") as tmp:
        d = Path(tmp)
        for j in range(p.kernels):
            (d / f"x_{j}.bin").write_bytes(xs[j])
            (d / f"w_{j}.bin").write_bytes(ws[j])
        counts = d / "counts.jsonl"
        text = run_binary(exe, args=[str(d), str(n_tiles), str(counts) if op_counts else "-"],
                          timeout=timeout).decode()
        raw = (d / "out.bin").read_bytes()
        inv = [json.loads(line) for line in counts.read_text().splitlines()] if op_counts else []
    status = {m[1]: (int(m[2]), m[3].strip()) for m in re.finditer(r"^status (\S+) (-?\d+) (.*)$", text, re.M)}
    left = {m[1]: int(m[2]) for m in re.finditer(r"^leftover (\S+) (\d+)$", text, re.M)}
    missing = {m[1]: int(m[2]) for m in re.finditer(r"^missing (\S+) (\d+)$", text, re.M)}
    mem = {m[1]: int(m[2]) for m in re.finditer(r"^data_bytes (\S+) (\d+)$", text, re.M)}
    ob = p.out_buffer_bytes()
    bufs = [raw[i:i + ob] for i in range(0, len(raw), ob)]
    headers = [streams.decode("gresult", np.frombuffer(b[:BEAT], np.uint8)) for b in bufs]
    out = None
    if len(bufs) == n_tiles:
        dt = np.int8 if p.out_bits == 8 else np.dtype("<i4")
        out = np.zeros((t * p.rows, n_out), dt)
        for b, h in zip(bufs, headers, strict=True):
            cb, r = divmod(h["tile_id"], t)
            if cb * p.cols >= n_out:
                raise ValueError(f"out record of tile {h['tile_id']} names no column block")
            out[r * p.rows:(r + 1) * p.rows, cb * p.cols:(cb + 1) * p.cols] = \
                np.frombuffer(b[BEAT:], dt).reshape(p.rows, p.cols)
        out = out[:n_rows]
    return GemmRun(out, headers, status, left, missing, inv, mem)


__all__ = ["GemmParams", "GemmRun", "build", "build_name", "gemm_buffers", "run_gemm"]

"""g++ simulation of the AIE matmul kernels (``hw/aie``) on the streams of ``hw/STREAMS.md``.

The kernels' per-tile logic lives in ``hw/aie/attention_kernels.h`` as templates over the stream
types; ``sim/cpp/aie_kernels_tb.cpp`` instantiates them with in-memory streams. This module packs
numpy tiles into the byte streams the kernels see, runs the test bench and unpacks its output::

    from vckattn.sim.aie_csim import pv_streams, qk_streams

    s = qk_streams(q, k)   # q (32, D) int8, k (KP, D) int8        -> S (32, KP) int32 = q @ k.T
    o = pv_streams(p, v)   # p (32, KP) uint8, v (KP, D) int8      -> O (32, D) int32  = p @ v

(leading tile axes are allowed: ``q (T, 32, D)``, ``k (T, KP, D)`` give ``S (T, 32, KP)``).

Stream formats (little endian, 128-bit beats = 16 bytes), per tile:

=========  ==================================================================================
``q``      header uint32 ``[N_KB, D, rows, tile_id]``, then Q ``Q_ROWS x D`` int8 row-major
``k``      ``N_KB`` blocks of K ``KEY_BLOCK x D`` int8 row-major (= K ``KP x D`` row-major)
``s``      per block ``kb``: S ``Q_ROWS x KEY_BLOCK`` int32 row-major (keys ``kb*KEY_BLOCK + j``)
``v``      header uint32 ``[N_KB, D, 0, 0]``, then ``N_KB`` blocks of V ``KEY_BLOCK x D`` int8
``p``      per block ``kb``: P ``Q_ROWS x KEY_BLOCK`` uint8 row-major
``o``      O ``Q_ROWS x D`` int32 row-major
=========  ==================================================================================

Test bench protocol (stdin): 4 bytes mode (``b"qk\\0\\0"`` or ``b"pv\\0\\0"``), uint64 byte count of
stream a (q or v), uint64 byte count of stream b (k or p), then both streams' bytes; stdout: the
output stream's bytes (only when every tile succeeded). Exit status 2 = malformed input, 3 = bad
tile header, 4 = a stream ran short or has bytes left; the message is on stderr.

Builds (cached under ``build/hls/<name>/`` by :func:`vckattn.sim.hls_csim.compile_cpp`):
:func:`build` gives the scalar reference path (what g++ compiles by default) or, with
``vector_emu=True``, the AIE vector path over ``hw/aie/aie_api_emu.h`` (a host model of the AIE
API subset it uses: checks its tiling arithmetic, not the real AIE API).

Simulator data: :func:`write_aiesim_data` writes ``hw/aie/data/*.txt`` (PLIO text files for
aiesimulator/x86simulator, 16 int8/uint8 or 4 int32 values a line) and the expected outputs;
``python -m vckattn.sim.aie_csim --write-aiesim-data hw/aie/data`` regenerates them and
``--check-sim-output DIR`` compares a simulator's ``s_out.txt`` / ``o_out.txt`` with them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vckattn.golden.aie_matmul import UINT8, tile_matmul
from vckattn.sim.hls_csim import REPO_ROOT, RunError, compile_cpp, run_binary

__all__ = [
    "AIE_DIR",
    "AIESIM_TILES",
    "BEAT_BYTES",
    "DEFAULT_SHAPE",
    "KernelShape",
    "RunError",
    "aiesim_data",
    "build",
    "check_sim_output",
    "format_plio",
    "header_beat",
    "pack_k_stream",
    "pack_p_stream",
    "pack_q_stream",
    "pack_v_stream",
    "parse_plio",
    "pv_streams",
    "pv_tiles",
    "qk_streams",
    "qk_tiles",
    "run_tb",
    "run_tb_raw",
    "tb_input",
    "unpack_o_stream",
    "unpack_s_stream",
    "write_aiesim_data",
]

AIE_DIR: Path = REPO_ROOT / "hw" / "aie"
TB_CPP: Path = REPO_ROOT / "sim" / "cpp" / "aie_kernels_tb.cpp"
#: headers the test bench includes (edits rebuild it)
HEADERS: tuple[Path, ...] = (AIE_DIR / "tile_config.h", AIE_DIR / "attention_kernels.h", AIE_DIR / "aie_api_emu.h")
BEAT_BYTES = 16
MODES = ("qk", "pv")
#: tiles in hw/aie/data (graph.cpp's VCKATTN_AIESIM_TILES) and their (D, N_KB)
AIESIM_TILES = 2
AIESIM_GEOMETRY: tuple[tuple[int, int], ...] = ((32, 2), (64, 1))
AIESIM_SEED = 20260601
#: PLIO data files: name -> numpy dtype of the kernel port (values per 128-bit line = 16 / itemsize)
PLIO_FILES: dict[str, str] = {
    "q_in": "int8", "k_in": "int8", "v_in": "int8", "p_in": "uint8", "s_out": "int32", "o_out": "int32",
}


@dataclass(frozen=True)
class KernelShape:
    """Compile-time tile shape of the kernels (``vckattn_aie::TileShape``): element counts."""

    q_rows: int = 32
    key_block: int = 32
    max_d: int = 64
    max_kb: int = 32


DEFAULT_SHAPE = KernelShape()


def build(vector_emu: bool = False, shape: KernelShape = DEFAULT_SHAPE) -> Path:
    """Compile the test bench (cached) and return the executable.

    ``vector_emu`` selects the AIE vector path over ``aie_api_emu.h`` instead of the scalar
    reference; ``shape`` other than :data:`DEFAULT_SHAPE` builds the same templates for another
    tile shape (``-DVCKATTN_TB_*``).
    """
    name = "aie_kernels_tb" + ("_vemu" if vector_emu else "")
    flags = ["-std=c++17", "-Wall", "-Wextra", f"-I{AIE_DIR}"]
    if vector_emu:
        flags.append("-DVCKATTN_AIE_VECTOR_EMU")
    if shape != DEFAULT_SHAPE:
        name += f"_{shape.q_rows}x{shape.key_block}x{shape.max_d}x{shape.max_kb}"
        flags += [f"-DVCKATTN_TB_Q_ROWS={shape.q_rows}", f"-DVCKATTN_TB_KEY_BLOCK={shape.key_block}",
                  f"-DVCKATTN_TB_MAX_D={shape.max_d}", f"-DVCKATTN_TB_MAX_KB={shape.max_kb}"]
    return compile_cpp([TB_CPP], name, extra_flags=flags, depends=HEADERS)


# ------------------------------------------------------------------------------------------------
# Packing (host order -> stream bytes) and unpacking
# ------------------------------------------------------------------------------------------------


def header_beat(w0: int, w1: int, w2: int = 0, w3: int = 0) -> bytes:
    """One header beat: four little-endian uint32 (q: ``[N_KB, D, rows, tile_id]``, v: ``[N_KB, D, 0, 0]``)."""
    return np.array([w0, w1, w2, w3], dtype="<u4").tobytes()


def _tiles(x: np.ndarray | Sequence[np.ndarray], name: str) -> list[np.ndarray]:
    """A 2-D array (one tile), a 3-D array (tiles on axis 0) or a list of 2-D arrays -> list of 2-D arrays."""
    if isinstance(x, np.ndarray):
        if x.ndim == 2:
            return [x]
        if x.ndim == 3:
            return list(x)
        raise ValueError(f"{name}: expected a 2-D tile or a 3-D stack of tiles, got shape {x.shape}")
    tiles = [np.asarray(t) for t in x]
    for t in tiles:
        if t.ndim != 2:
            raise ValueError(f"{name}: every tile must be 2-D, got shape {t.shape}")
    return tiles


def _as_int(t: np.ndarray, lo: int, hi: int, dtype: str, name: str) -> np.ndarray:
    if t.dtype.kind not in "iu":
        raise TypeError(f"{name}: integer values expected, got {t.dtype}")
    if t.size and (int(t.min()) < lo or int(t.max()) > hi):
        raise ValueError(f"{name}: values outside [{lo}, {hi}]")
    return np.ascontiguousarray(t, dtype=dtype)


def _check_d(d: int, name: str) -> None:
    if d < 16 or d % 16:
        raise ValueError(f"{name}: head size D={d} must be a positive multiple of 16 (whole 16-byte beats)")


def pack_q_stream(q_tiles: np.ndarray | Sequence[np.ndarray], n_kb: int | Sequence[int],
                  rows: Sequence[int] | None = None, tile_ids: Sequence[int] | None = None) -> bytes:
    """The ``q`` stream: per tile the header beat ``[N_KB, D, rows, tile_id]`` and Q row-major.

    ``q_tiles``: int8 tiles ``(Q_ROWS, D)`` (a list, or a 3-D array); ``n_kb``: key blocks per
    tile (one int for all, or one per tile); ``rows`` default ``Q_ROWS``; ``tile_ids`` default
    ``0, 1, ...``.
    """
    tiles = _tiles(q_tiles, "q")
    n = len(tiles)
    n_kbs = [n_kb] * n if isinstance(n_kb, (int, np.integer)) else list(n_kb)
    rows = [t.shape[0] for t in tiles] if rows is None else list(rows)
    tile_ids = list(range(n)) if tile_ids is None else list(tile_ids)
    if not len(n_kbs) == len(rows) == len(tile_ids) == n:
        raise ValueError("n_kb, rows and tile_ids need one entry per tile")
    out = bytearray()
    for t, nk, r, tid in zip(tiles, n_kbs, rows, tile_ids, strict=True):
        _check_d(t.shape[1], "q")
        out += header_beat(nk, t.shape[1], r, tid)
        out += _as_int(t, -128, 127, "i1", "q").tobytes()
    return bytes(out)


def pack_k_stream(k_tiles: np.ndarray | Sequence[np.ndarray], key_block: int = DEFAULT_SHAPE.key_block) -> bytes:
    """The ``k`` stream: per tile K ``(KP, D)`` int8 row-major, i.e. ``KP / key_block`` blocks of
    ``key_block`` keys (no header)."""
    out = bytearray()
    for t in _tiles(k_tiles, "k"):
        _check_d(t.shape[1], "k")
        if t.shape[0] == 0 or t.shape[0] % key_block:
            raise ValueError(f"k: key count {t.shape[0]} is not a positive multiple of {key_block}")
        out += _as_int(t, -128, 127, "i1", "k").tobytes()
    return bytes(out)


def pack_v_stream(v_tiles: np.ndarray | Sequence[np.ndarray], key_block: int = DEFAULT_SHAPE.key_block) -> bytes:
    """The ``v`` stream: per tile the header beat ``[N_KB, D, 0, 0]`` and V ``(KP, D)`` int8 row-major."""
    out = bytearray()
    for t in _tiles(v_tiles, "v"):
        _check_d(t.shape[1], "v")
        if t.shape[0] == 0 or t.shape[0] % key_block:
            raise ValueError(f"v: key count {t.shape[0]} is not a positive multiple of {key_block}")
        out += header_beat(t.shape[0] // key_block, t.shape[1], 0, 0)
        out += _as_int(t, -128, 127, "i1", "v").tobytes()
    return bytes(out)


def pack_p_stream(p_tiles: np.ndarray | Sequence[np.ndarray], key_block: int = DEFAULT_SHAPE.key_block) -> bytes:
    """The ``p`` stream: per tile and key block ``kb``, ``P[:, kb*key_block:(kb+1)*key_block]``
    uint8 row-major (no header). ``p_tiles``: uint8 tiles ``(Q_ROWS, KP)``."""
    out = bytearray()
    for t in _tiles(p_tiles, "p"):
        q_rows, kp = t.shape
        if kp == 0 or kp % key_block or (q_rows * key_block) % BEAT_BYTES:
            raise ValueError(f"p: tile shape {t.shape} does not split into {key_block}-key blocks of whole beats")
        blocks = _as_int(t, 0, 255, "u1", "p").reshape(q_rows, kp // key_block, key_block).transpose(1, 0, 2)
        out += np.ascontiguousarray(blocks).tobytes()
    return bytes(out)


def unpack_s_stream(data: bytes, n_kbs: Sequence[int], q_rows: int = DEFAULT_SHAPE.q_rows,
                    key_block: int = DEFAULT_SHAPE.key_block) -> list[np.ndarray]:
    """Split the ``s`` stream into per-tile S ``(q_rows, N_KB * key_block)`` int32 (block-major -> row-major)."""
    s = np.frombuffer(data, dtype="<i4")
    expected = sum(n_kbs) * q_rows * key_block
    if s.size != expected:
        raise ValueError(f"s stream has {s.size} int32, expected {expected}")
    out, pos = [], 0
    for nk in n_kbs:
        n = nk * q_rows * key_block
        blocks = s[pos:pos + n].reshape(nk, q_rows, key_block)
        out.append(np.ascontiguousarray(blocks.transpose(1, 0, 2).reshape(q_rows, nk * key_block), dtype=np.int32))
        pos += n
    return out


def unpack_o_stream(data: bytes, ds: Sequence[int], q_rows: int = DEFAULT_SHAPE.q_rows) -> list[np.ndarray]:
    """Split the ``o`` stream into per-tile O ``(q_rows, D)`` int32."""
    o = np.frombuffer(data, dtype="<i4")
    expected = sum(ds) * q_rows
    if o.size != expected:
        raise ValueError(f"o stream has {o.size} int32, expected {expected}")
    out, pos = [], 0
    for d in ds:
        out.append(o[pos:pos + q_rows * d].reshape(q_rows, d).astype(np.int32))
        pos += q_rows * d
    return out


# ------------------------------------------------------------------------------------------------
# Running the test bench
# ------------------------------------------------------------------------------------------------


def tb_input(mode: str, a: bytes, b: bytes) -> bytes:
    """The test bench's stdin: mode, the two byte counts, stream a (q / v), stream b (k / p)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode.encode().ljust(4, b"\0") + np.array([len(a), len(b)], dtype="<u8").tobytes() + a + b


def run_tb(mode: str, a: bytes, b: bytes, exe: Path | None = None, timeout: float = 60.0) -> bytes:
    """Run the test bench on streams a, b; return the output stream's bytes (:class:`RunError` on failure)."""
    return run_binary(exe or build(), tb_input(mode, a, b), timeout=timeout)


def run_tb_raw(mode: str, a: bytes, b: bytes, exe: Path | None = None,
               timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
    """Like :func:`run_tb` but returns the completed process (exit status, stdout, stderr) as is."""
    return subprocess.run([str(exe or build())], input=tb_input(mode, a, b), capture_output=True,
                          timeout=timeout, check=False)


def qk_tiles(q_tiles: Sequence[np.ndarray], k_tiles: Sequence[np.ndarray], rows: Sequence[int] | None = None,
             tile_ids: Sequence[int] | None = None, exe: Path | None = None,
             key_block: int = DEFAULT_SHAPE.key_block) -> list[np.ndarray]:
    """S = Q Kᵀ for tiles of any (D, KP) mix in one test-bench run: ``q_tiles[t]`` ``(Q_ROWS, D_t)``
    int8, ``k_tiles[t]`` ``(KP_t, D_t)`` int8 -> ``S[t]`` ``(Q_ROWS, KP_t)`` int32."""
    qs, ks = _tiles(q_tiles, "q"), _tiles(k_tiles, "k")
    if len(qs) != len(ks):
        raise ValueError(f"{len(qs)} q tiles but {len(ks)} k tiles")
    n_kbs = [k.shape[0] // key_block for k in ks]
    out = run_tb("qk", pack_q_stream(qs, n_kbs, rows, tile_ids), pack_k_stream(ks, key_block), exe)
    return unpack_s_stream(out, n_kbs, qs[0].shape[0] if qs else 0, key_block)


def pv_tiles(p_tiles: Sequence[np.ndarray], v_tiles: Sequence[np.ndarray], exe: Path | None = None,
             key_block: int = DEFAULT_SHAPE.key_block) -> list[np.ndarray]:
    """O = P V for tiles of any (D, KP) mix in one run: ``p_tiles[t]`` ``(Q_ROWS, KP_t)`` uint8,
    ``v_tiles[t]`` ``(KP_t, D_t)`` int8 -> ``O[t]`` ``(Q_ROWS, D_t)`` int32."""
    ps, vs = _tiles(p_tiles, "p"), _tiles(v_tiles, "v")
    if len(ps) != len(vs):
        raise ValueError(f"{len(ps)} p tiles but {len(vs)} v tiles")
    out = run_tb("pv", pack_v_stream(vs, key_block), pack_p_stream(ps, key_block), exe)
    return unpack_o_stream(out, [v.shape[1] for v in vs], ps[0].shape[0] if ps else 0)


def qk_streams(q: np.ndarray, k: np.ndarray, exe: Path | None = None) -> np.ndarray:
    """S = Q Kᵀ through the kernel: ``q (Q_ROWS, D)``, ``k (KP, D)`` int8 -> ``(Q_ROWS, KP)`` int32;
    with a leading tile axis ``(T, ...)`` on both -> ``(T, Q_ROWS, KP)``."""
    q, k = np.asarray(q), np.asarray(k)
    if q.ndim != k.ndim or q.ndim not in (2, 3):
        raise ValueError(f"q and k must both be 2-D or both 3-D, got {q.shape} and {k.shape}")
    s = qk_tiles(_tiles(q, "q"), _tiles(k, "k"), exe=exe)
    return s[0] if q.ndim == 2 else np.stack(s)


def pv_streams(p: np.ndarray, v: np.ndarray, exe: Path | None = None) -> np.ndarray:
    """O = P V through the kernel: ``p (Q_ROWS, KP)`` uint8, ``v (KP, D)`` int8 -> ``(Q_ROWS, D)``
    int32; with a leading tile axis ``(T, ...)`` on both -> ``(T, Q_ROWS, D)``."""
    p, v = np.asarray(p), np.asarray(v)
    if p.ndim != v.ndim or p.ndim not in (2, 3):
        raise ValueError(f"p and v must both be 2-D or both 3-D, got {p.shape} and {v.shape}")
    o = pv_tiles(_tiles(p, "p"), _tiles(v, "v"), exe=exe)
    return o[0] if p.ndim == 2 else np.stack(o)


# ------------------------------------------------------------------------------------------------
# aiesimulator / x86simulator data files
# ------------------------------------------------------------------------------------------------


def format_plio(data: bytes, dtype: str) -> str:
    """PLIO text for a 128-bit port of element type ``dtype``: one beat a line, 16 int8/uint8 or
    4 int32 values, decimal, separated by spaces (UG1076 "TXT File Format")."""
    values = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<"))
    per_line = BEAT_BYTES // values.itemsize
    if values.size % per_line:
        raise ValueError(f"{len(data)} bytes is not a whole number of 16-byte beats")
    return "".join(" ".join(str(int(x)) for x in line) + "\n" for line in values.reshape(-1, per_line))


def parse_plio(text: str, dtype: str) -> np.ndarray:
    """Values of a PLIO text file (input, reference or simulator output); skips the simulators'
    timestamp lines (``T 123 ns``), ``TLAST`` markers and blank lines."""
    values: list[int] = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("T ") or s == "TLAST":
            continue
        values.extend(int(x) for x in s.split())
    return np.array(values, dtype=dtype)


def aiesim_data(seed: int = AIESIM_SEED) -> dict[str, bytes]:
    """Stream bytes of the simulator data set: :data:`AIESIM_TILES` tiles with (D, N_KB) from
    :data:`AIESIM_GEOMETRY`, random int8 Q, K, V and uint8 P (fixed seed); expected ``s_out`` and
    ``o_out`` from the golden ``tile_matmul`` (not from the C++ code)."""
    rng = np.random.default_rng(seed)
    shape = DEFAULT_SHAPE
    qs, ks, vs, ps, ss, os_ = [], [], [], [], [], []
    for d, n_kb in AIESIM_GEOMETRY:
        kp = n_kb * shape.key_block
        qs.append(rng.integers(-128, 128, (shape.q_rows, d), dtype=np.int8))
        ks.append(rng.integers(-128, 128, (kp, d), dtype=np.int8))
        vs.append(rng.integers(-128, 128, (kp, d), dtype=np.int8))
        ps.append(rng.integers(0, 256, (shape.q_rows, kp), dtype=np.uint8))
        ss.append(tile_matmul(qs[-1], ks[-1].T))
        os_.append(tile_matmul(ps[-1], vs[-1], a_fmt=UINT8))
    s_bytes = b"".join(np.ascontiguousarray(
        s.reshape(shape.q_rows, -1, shape.key_block).transpose(1, 0, 2), dtype="<i4").tobytes() for s in ss)
    return {
        "q_in": pack_q_stream(qs, [n for _, n in AIESIM_GEOMETRY], tile_ids=list(range(100, 100 + len(qs)))),
        "k_in": pack_k_stream(ks),
        "v_in": pack_v_stream(vs),
        "p_in": pack_p_stream(ps),
        "s_out": s_bytes,
        "o_out": b"".join(np.ascontiguousarray(o, dtype="<i4").tobytes() for o in os_),
    }


def write_aiesim_data(out_dir: Path | str, seed: int = AIESIM_SEED) -> list[Path]:
    """Write ``q_in.txt``, ``k_in.txt``, ``v_in.txt``, ``p_in.txt`` (simulator inputs) and
    ``s_out_ref.txt``, ``o_out_ref.txt`` (expected outputs) into ``out_dir``; return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in aiesim_data(seed).items():
        path = out_dir / (f"{name}_ref.txt" if name.endswith("_out") else f"{name}.txt")
        path.write_text(format_plio(data, PLIO_FILES[name]))
        paths.append(path)
    return paths


def check_sim_output(sim_data_dir: Path | str, ref_dir: Path | str = AIE_DIR / "data") -> list[str]:
    """Compare a simulator's ``s_out.txt`` / ``o_out.txt`` with the references; return the
    problems found (empty when both match exactly)."""
    problems = []
    for name in ("s_out", "o_out"):
        got_path, ref_path = Path(sim_data_dir) / f"{name}.txt", Path(ref_dir) / f"{name}_ref.txt"
        if not got_path.is_file():
            problems.append(f"{got_path}: missing")
            continue
        got = parse_plio(got_path.read_text(), "int64")
        ref = parse_plio(ref_path.read_text(), "int64")
        if got.shape != ref.shape:
            problems.append(f"{got_path}: {got.size} values, expected {ref.size}")
        elif not np.array_equal(got, ref):
            bad = np.flatnonzero(got != ref)
            problems.append(f"{got_path}: {bad.size} values differ, first at index {bad[0]} "
                            f"(got {got[bad[0]]}, expected {ref[bad[0]]})")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vckattn.sim.aie_csim", description=__doc__.splitlines()[0])
    parser.add_argument("--write-aiesim-data", metavar="DIR", help="write the PLIO data files and references")
    parser.add_argument("--check-sim-output", metavar="DIR", help="compare a simulator's s_out/o_out with the refs")
    args = parser.parse_args(argv)
    if not (args.write_aiesim_data or args.check_sim_output):
        parser.error("nothing to do")
    if args.write_aiesim_data:
        for p in write_aiesim_data(args.write_aiesim_data):
            print(p)
    if args.check_sim_output:
        problems = check_sim_output(args.check_sim_output)
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            return 1
        print("s_out and o_out match the references")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""C-simulation of the engine's movers (stream contract v3): the command-list mover ``mm2s_engine``
(``hw/hls/mm2s_engine.cpp``: the q mover, TILE descriptors with payloads from the re-tiled Q, and the k and v movers,
the LOAD_K / LOAD_V descriptors of the kv list with payloads from the re-tiled K / V) and the output mover
``s2mm_engine`` (``hw/hls/s2mm_engine.cpp``: A records into their slots and the done log).

g++ binaries (``sim/cpp/engine_movers_tb.cpp`` or ``sim/cpp/engine_s2mm_tb.cpp`` + the kernel, AddressSanitizer when
available, so an access outside a DDR buffer fails the run) built into ``build/hls/engine_movers_tb/`` and
``build/hls/engine_s2mm_tb_q<Q_ROWS>_d<D>/``.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from vckattn.sim.hls_csim import ASAN_FLAGS, FLAGS, REPO_ROOT, asan_available, compile_cpp, run_binary

KERNEL = REPO_ROOT / "hw" / "hls" / "mm2s_engine.cpp"
TB = REPO_ROOT / "sim" / "cpp" / "engine_movers_tb.cpp"
HEADER = REPO_ROOT / "hw" / "aie" / "generated" / "engine_streams.h"
S2MM_KERNEL = REPO_ROOT / "hw" / "hls" / "s2mm_engine.cpp"
S2MM_TB = REPO_ROOT / "sim" / "cpp" / "engine_s2mm_tb.cpp"
BEAT_FILES = REPO_ROOT / "sim" / "cpp" / "beat_files.h"


def build() -> Path:
    """Build (or reuse) the test bench binary."""
    flags = FLAGS + (ASAN_FLAGS if asan_available() else ())
    return compile_cpp([TB, KERNEL], "engine_movers_tb", extra_flags=flags, depends=(HEADER, BEAT_FILES))


#: the mover's ``kv`` argument (hw/hls/mm2s_engine.cpp) for each instance of a pipeline
MOVER_MODES = {"q": 0, "k": 1, "v": 2}


def mm2s_engine(cmds: np.ndarray, src: np.ndarray, src_v: np.ndarray | None, mode: str,
                payload_bytes: int) -> tuple[np.ndarray, int]:
    """The stream ``(beats, 16)`` uint8 the mover sends for command list ``cmds`` ``(n, 32)`` uint8, and the
    number of commands it consumed. ``mode`` ``"q"``: the q mover (TILE descriptors, payloads from ``src``); ``"k"``:
    the k mover (the LOAD_K entries of a kv list, payloads from ``src``); ``"v"``: the v mover (its LOAD_V entries,
    payloads from ``src_v``); ``payload_bytes``: Q_ROWS·D or SK·D."""
    if mode not in MOVER_MODES:
        raise ValueError(f"mode must be one of {sorted(MOVER_MODES)}, got {mode!r}")
    exe = build()
    cmds = np.ascontiguousarray(cmds, np.uint8).reshape(-1, 32)
    with tempfile.TemporaryDirectory(prefix="engine_movers_") as tmp:
        d = Path(tmp)
        (d / "in_cmds.bin").write_bytes(cmds.tobytes())
        for name, buf in (("src", src), ("src_v", src_v)):
            if buf is not None:
                raw = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
                (d / f"in_{name}.bin").write_bytes(raw.tobytes() + bytes(-len(raw) % 16))
        text = run_binary(exe, args=[str(d), str(len(cmds)), str(MOVER_MODES[mode]), str(int(payload_bytes))]).decode()
        sent = int(re.search(r"^sent (\d+)$", text, re.M)[1])
        out = np.frombuffer((d / "out_stream.bin").read_bytes(), np.uint8).reshape(-1, 16).copy()
    return out, sent


def s2mm_engine(records: np.ndarray, n_records: int, n_slots: int, pipeline: int, q_rows: int,
                d: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Run the output mover of a build with ``Q_ROWS = q_rows``, ``D = d`` on the ``a_in`` stream ``records`` (uint8
    bytes, whole 16-byte beats): returns the A buffer ``(n_slots, q_rows, d)`` int8 (bytes never written hold 0xA5),
    the done log ``(n_records, 16)`` uint8 (0xA5 where nothing was written), the kernel's status and the beats left
    unread."""
    flags = FLAGS + (ASAN_FLAGS if asan_available() else ()) + (
        "-DVCKATTN_ENGINE_SCORE_BITS=8", f"-DVCKATTN_ENGINE_Q_ROWS={q_rows}", f"-DVCKATTN_ENGINE_D={d}")
    hls = REPO_ROOT / "hw" / "hls"
    exe = compile_cpp([S2MM_TB, S2MM_KERNEL], f"engine_s2mm_tb_q{q_rows}_d{d}", extra_flags=flags,
                      depends=(HEADER, BEAT_FILES, *sorted(hls.glob("*.h")), *sorted((hls / "generated").glob("*.h"))))
    raw = np.ascontiguousarray(records, np.uint8).reshape(-1)
    if raw.size % 16:
        raise ValueError("records must be whole 16-byte beats")
    with tempfile.TemporaryDirectory(prefix="engine_s2mm_") as tmp:
        dd = Path(tmp)
        (dd / "in_records.bin").write_bytes(raw.tobytes())
        text = run_binary(exe, args=[str(dd), str(n_records), str(n_slots), str(pipeline)]).decode()
        a = np.frombuffer((dd / "out_a.bin").read_bytes(), np.int8).reshape(n_slots, q_rows, d).copy()
        done = np.frombuffer((dd / "out_done.bin").read_bytes(), np.uint8).reshape(n_records, 16).copy()
    return a, done, int(re.search(r"^status (-?\d+)$", text, re.M)[1]), int(re.search(r"^left (\d+)$", text, re.M)[1])


__all__ = ["MOVER_MODES", "build", "mm2s_engine", "s2mm_engine"]

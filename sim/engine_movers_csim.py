"""C-simulation of the engine's command-list mover ``mm2s_engine`` (``hw/hls/mm2s_engine.cpp``, stream contract
v3): the q mover (TILE descriptors, payloads from the re-tiled Q) and the kv mover (SLICE descriptors, payloads
from the re-tiled K or V).

One g++ binary (``sim/cpp/engine_movers_tb.cpp`` + the kernel, AddressSanitizer when available, so a read
outside a DDR buffer fails the run) built into ``build/hls/engine_movers_tb/``.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from vckattn.sim.hls_csim import REPO_ROOT, compile_cpp, run_binary
from vckattn.sim.hls_movers_csim import ASAN_FLAGS, FLAGS, asan_available

KERNEL = REPO_ROOT / "hw" / "hls" / "mm2s_engine.cpp"
TB = REPO_ROOT / "sim" / "cpp" / "engine_movers_tb.cpp"
HEADER = REPO_ROOT / "hw" / "aie" / "generated" / "engine_streams.h"


def build() -> Path:
    """Build (or reuse) the test bench binary."""
    flags = FLAGS + (ASAN_FLAGS if asan_available() else ())
    return compile_cpp([TB, KERNEL], "engine_movers_tb", extra_flags=flags, depends=(HEADER,))


def mm2s_engine(cmds: np.ndarray, src: np.ndarray, src_v: np.ndarray | None, kv: bool,
                payload_bytes: int) -> tuple[np.ndarray, int]:
    """The stream ``(beats, 16)`` uint8 the mover sends for command list ``cmds`` ``(n, 32)`` uint8, and the
    number of commands it accepted. ``kv`` False: the q mover (payloads from ``src``); True: the kv mover (LOAD_K
    payloads from ``src``, LOAD_V from ``src_v``); ``payload_bytes``: Q_ROWS·D or SK·D."""
    exe = build()
    cmds = np.ascontiguousarray(cmds, np.uint8).reshape(-1, 32)
    with tempfile.TemporaryDirectory(prefix="engine_movers_") as tmp:
        d = Path(tmp)
        (d / "in_cmds.bin").write_bytes(cmds.tobytes())
        for name, buf in (("src", src), ("src_v", src_v)):
            if buf is not None:
                raw = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
                (d / f"in_{name}.bin").write_bytes(raw.tobytes() + bytes(-len(raw) % 16))
        text = run_binary(exe, args=[str(d), str(len(cmds)), str(int(kv)), str(int(payload_bytes))]).decode()
        sent = int(re.search(r"^sent (\d+)$", text, re.M)[1])
        out = np.frombuffer((d / "out_stream.bin").read_bytes(), np.uint8).reshape(-1, 16).copy()
    return out, sent


__all__ = ["build", "mm2s_engine"]

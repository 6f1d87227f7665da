"""C-simulation of the sublayer's HLS movers (``hw/ENGINE.md``, "The sublayer's PL side"): the list mover
``mm2s_list`` (``hw/hls/mm2s_list.cpp``: a command list in DDR -> one AXI4-Stream with TLAST; the X, weight and
descriptor movers) and the R writer ``s2mm_records`` (``hw/hls/s2mm_records.cpp``: residual records -> R in DDR).

g++ binaries (``sim/cpp/mm2s_list_tb.cpp`` or ``sim/cpp/s2mm_records_tb.cpp`` + the kernel, AddressSanitizer when
available, so an access outside a DDR buffer fails the run) built into ``build/hls/mm2s_list_tb_mm2s_list/`` and
``build/hls/s2mm_records_tb_s2mm_records/``. The open-source ap_types headers have no ``ap_axi_sdata.h``: the list
mover's ``ap_axiu<128, 0, 0, 0>`` stream beat comes from the C-simulation stand-in ``sim/cpp/axis/ap_axi_sdata.h``
(Vitis HLS's members and widths; Vitis uses its own header).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from vckattn.sim.hls_csim import ASAN_FLAGS, FLAGS, REPO_ROOT, asan_available, compile_cpp, run_binary

HLS = REPO_ROOT / "hw" / "hls"
CPP = REPO_ROOT / "sim" / "cpp"
HEADER = REPO_ROOT / "hw" / "aie" / "generated" / "engine_streams.h"
BEAT_FILES = CPP / "beat_files.h"
#: the folder of the C-simulation's ``ap_axi_sdata.h`` stand-in
AXIS_INCLUDE = CPP / "axis"

#: the R writer's statuses (``hw/hls/s2mm_records.h: RecordStatus``)
RECORD_STATUS: dict[str, int] = {"ok": 0, "bad_args": 1, "bad_elem_bits": 2, "bad_cols": 3, "bad_col_block": 4,
                                 "bad_row_tile": 5, "bad_rows": 6, "bad_token": 7}


def _flags() -> tuple[str, ...]:
    return FLAGS + (ASAN_FLAGS if asan_available() else ())


def mm2s_list(cmds: np.ndarray, src: np.ndarray, src_beats: int | None = None,
              kernel: Path = HLS / "mm2s_list.cpp") -> tuple[np.ndarray, np.ndarray, int]:
    """Run the list mover on command list ``cmds`` ``(n, 32)`` uint8 and source ``src`` (any array; its bytes, padded
    to whole 16-byte beats, are the source buffer). ``src_beats``: the mover's argument (default: the buffer's beats).
    Returns the stream's TDATA ``(beats, 16)`` uint8, its TLAST ``(beats,)`` bool and the mover's return (the
    commands sent before a refused one). Raises RunError when a beat's TKEEP or TSTRB is not all ones. ``kernel``: the
    kernel's source (the tests pass altered copies to show that they catch a mover that breaks the contract)."""
    from vckattn.sim.hls_csim import RunError

    exe = compile_cpp([CPP / "mm2s_list_tb.cpp", Path(kernel)], f"mm2s_list_tb_{Path(kernel).stem}",
                      extra_flags=(*_flags(), f"-I{HLS}", f"-I{AXIS_INCLUDE}"),
                      depends=(HEADER, BEAT_FILES, HLS / "mm2s_list.h", AXIS_INCLUDE / "ap_axi_sdata.h"))
    cmds = np.ascontiguousarray(cmds, np.uint8).reshape(-1, 32)
    raw = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
    raw = np.concatenate([raw, np.zeros(-raw.size % 16, np.uint8)])
    with tempfile.TemporaryDirectory(prefix="mm2s_list_") as tmp:
        d = Path(tmp)
        (d / "in_cmds.bin").write_bytes(cmds.tobytes())
        (d / "in_src.bin").write_bytes(raw.tobytes())
        n_src = raw.size // 16 if src_beats is None else int(src_beats)
        text = run_binary(exe, args=[str(d), str(len(cmds)), str(n_src)]).decode()
        data = np.frombuffer((d / "out_stream.bin").read_bytes(), np.uint8).reshape(-1, 16).copy()
        last = np.frombuffer((d / "out_last.bin").read_bytes(), np.uint8).astype(bool)
    if not re.search(r"^keep_strb_ok 1$", text, re.M):
        raise RunError(f"{exe}: a beat's TKEEP or TSTRB is not all ones")
    return data, last, int(re.search(r"^sent (\d+)$", text, re.M)[1])


def s2mm_records(records: np.ndarray, n_records: int, tile_rows: int, cols: int, row_tiles: int, d_model: int,
                 n_tokens: int, kernel: Path = HLS / "s2mm_records.cpp") -> tuple[np.ndarray, int, int]:
    """Run the R writer on the ``r_in`` stream ``records`` (uint8 bytes, whole 16-byte beats) with its arguments:
    ``tile_rows`` rows a record, ``cols`` int8 channels a record, ``row_tiles`` row tiles (a record's tile id), R of
    ``n_tokens`` tokens x ``d_model`` channels. Returns R ``(n_tokens, d_model)`` int8 (bytes never written hold
    0xA5), the writer's status (:data:`RECORD_STATUS`) and the ``r_in`` beats left unread. ``kernel``: as for
    :func:`mm2s_list`."""
    exe = compile_cpp([CPP / "s2mm_records_tb.cpp", Path(kernel)], f"s2mm_records_tb_{Path(kernel).stem}",
                      extra_flags=(*_flags(), f"-I{HLS}"), depends=(HEADER, BEAT_FILES, HLS / "s2mm_records.h"))
    raw = np.ascontiguousarray(records, np.uint8).reshape(-1)
    if raw.size % 16:
        raise ValueError("records must be whole 16-byte beats")
    if d_model % 16:
        raise ValueError(f"d_model must be a multiple of 16, got {d_model}")
    with tempfile.TemporaryDirectory(prefix="s2mm_records_") as tmp:
        d = Path(tmp)
        (d / "in_records.bin").write_bytes(raw.tobytes())
        args = [n_records, tile_rows, cols, row_tiles, d_model, n_tokens]
        text = run_binary(exe, args=[str(d), *(str(int(a)) for a in args)]).decode()
        r = np.frombuffer((d / "out_r.bin").read_bytes(), np.int8).reshape(n_tokens, d_model).copy()
    return r, int(re.search(r"^status (-?\d+)$", text, re.M)[1]), int(re.search(r"^left (\d+)$", text, re.M)[1])


__all__ = ["AXIS_INCLUDE", "RECORD_STATUS", "mm2s_list", "s2mm_records"]

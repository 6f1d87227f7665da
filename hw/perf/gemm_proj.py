"""AIE side of the projection GEMM's performance: AIE1 core cycles of ONE invocation (one output tile over one
K-slice) of each projection GEMM kernel (``hw/aie/engine/gemm_kernels.h``). MODELED figures (no board, no
aiecompiler, no aiesimulator here), from the kernel's own vector code, exactly as :mod:`.engine_aie` costs the
attention kernels:

The full description: ``docs/internals/hw.md``, section ``hw/perf/gemm_proj.py``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from vckattn.hw.spec.gemm import (  # the one memory formula
    BEAT_BYTES,
    KERNELS,
    STATE_BYTES,
    GemmParams,
    kernel_memory,
    variant,
)

from . import aie, calibration
from .engine_aie import _add, _scaled  # operation-count arithmetic, shared with the attention kernels

__all__ = ["BEAT_BYTES", "DATA_PATH", "KERNELS", "STATE_BYTES", "balanced", "bank_conflicts", "cascade_cycles",
           "efficiency", "invocation_cycles",
           "invocation_macs", "invocation_report", "kernel_memory", "load_data", "loop_invocations", "op_counts",
           "phase_counts", "sync_ports", "variant"]

DATA_PATH: Path = Path(__file__).resolve().parent / "data" / "gemm_proj.json"
_MM = "mmul<4,16,8,int8,int8>"
#: bytes of a buffer's header beat


def _check(kernel: str, rows: int, cols: int, kslice: int, out_bits: int) -> int:
    """Validate one invocation's shape; return RB (row blocks per register block)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if rows < 4 or rows % 4:
        raise ValueError(f"rows={rows}: must be a positive multiple of 4")
    if cols < 16 or cols % 16:
        raise ValueError(f"cols={cols}: must be a positive multiple of 16")
    if kslice < 16 or kslice % 16:
        raise ValueError(f"kslice={kslice}: must be a positive multiple of 16")
    if out_bits not in (8, 32):
        raise ValueError(f"out_bits must be 8 or 32, got {out_bits}")
    return 2 if rows % 8 == 0 else 1


def _header(has_cin: bool, has_cout: bool, out_bits: int) -> dict[str, int]:
    """The scalar work of one invocation outside the loops, as ``gemm_tile`` annotates it (``VCK_SCALAR``,
    ``VCK_SCALAR_LOAD``, ``VCK_SCALAR_STORE``): reading the XTILE header (16 byte loads, 12 shifts, 12 ors), its
    fields and checks, the held weights' tile range, the cascade word's check (cascade in) or fill (cascade out),
    the pointers, the GRESULT header (last kernel: field puts, 12 shifts, 16 byte stores), the held weights' tile
    count. The acquire and release of the async weights (once per group of tiles) are not counted."""
    alu = (24 + 1 + (2 * 5 + 2 * 4) + 2 + 3 + (6 if has_cin else 0)
           + 2 + (0 if has_cin else 1) + (2 if not has_cout and out_bits == 8 else 0) + (0 if has_cout else 1)
           + (0 if has_cout else 4 + 3 * 5 + 12) + 3)
    loads = 16 + 1 + 2 + (4 if has_cin else 0) + (1 if has_cout else 0) + 1 + (0 if has_cout else 1) + 1
    stores = 4 + (11 if has_cout else 16) + 1
    return {"scalar": alu, "scalar_load": loads, "scalar_store": stores}


def phase_counts(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, dict[str, int]]:
    """Operation counts of one invocation by phase, in closed form (the loop trip counts of the vector path and the
    scalar work its code annotates).

    ``rows``: the build's ROWS (every row computed); ``cols``: output channels per kernel; ``kslice``: input features
    per kernel; ``out_bits``: 8 or 32 (``last`` / ``only``). Phases, as the code is written: ``header`` (straight-line
    scalar header work, :func:`_header`), ``cascade_header`` (the [tile_id, rows, col_block] word in / out; not in
    ``only``), ``setup`` (``last`` / ``only``: rounding and saturation modes), ``mmul`` (the pipelined loop over the
    feature blocks, summed over its entries: one per register block of RB row blocks x 1 column block), ``drain``
    (per register block, around the loop: the accumulators from the bias or the cascade, the blocks to the cascade
    or requantized / stored; per column-block pair the int8 rows stored; the outer loops' control). Keys are
    ``aie_api_emu.h`` counter names."""
    rb = _check(kernel, rows, cols, kslice, out_bits)
    ni, ne, nd = rows // 4, cols // 8, kslice // 16
    outer = ni // rb
    blocks = outer * ne  # register blocks (entries of the pipelined loop)
    it, entry = aie.LOOP_ITER_SCALAR_OPS, aie.LOOP_ENTRY_SCALAR_OPS
    has_cin, has_cout = kernel in ("mid", "last"), kernel in ("first", "mid")
    lanes = {"load_v<4,int32>": 8, "concat<4,int32>x8": 1}  # one 32-lane int32 group vector (128-bit loads)
    mmul = _scaled({"load_v<16,int8>": 4 * rb + 8,  # rb X blocks (4 x 128 bits), one W^T block (8 x 128 bits)
                    "concat<16,int8>x4": rb, "concat<16,int8>x8": 1, f"{_MM}.mac": rb}, nd)
    drain: dict[str, int] = {"scalar": 2 + entry}  # per register block: the x and w bases, the loop's count
    if has_cin:  # each block from four cascade words
        drain = _add(drain, _scaled({"readincr_v<8>(input_cascade<acc48>)": 4, "concat<acc48,8>x4": 1,
                                     f"{_MM}.from_accum": 1}, rb))
    else:  # the column block's bias vector into an accumulator, shared by the rb row blocks
        drain = _add(drain, _add(lanes, {"accum<acc48,32>.from_vector<int32>": 1, f"{_MM}.from_accum": rb}))
    pair: dict[str, int] = {"scalar": it}  # per column-block pair: the eb0 loop
    if has_cout:
        drain = _add(drain, _scaled({f"{_MM}.to_accum": 1, "extract<8>(accum<acc48,32>)": 4,
                                     "writeincr(output_cascade<acc48>)": 4}, rb))
    elif out_bits == 8:  # the group's shift and multipliers; per block int32, x mult32 (acc80), srs to int8
        drain = _add(drain, _add(lanes, {"scalar_load": 1}))
        drain = _add(drain, _scaled({f"{_MM}.to_vector<int32>": 1, "mul<acc80,32,int32,int32>": 1,
                                     "accum<acc80,32>.to_vector<int8>": 1}, rb))
        pair = _add(pair, _add({"scalar": 1}, _scaled({"extract<8>(vector<int8,32>)": 8, "concat<8,int8>x2": 4,
                                                       "store_v<16,int8>": 4}, rb)))
    else:  # int32 rows: two 128-bit stores a row of a block
        drain = _add(drain, _add({"scalar": 1}, _scaled({f"{_MM}.to_vector<int32>": 1,
                                                          "extract<4>(vector<int32,32>)": 8,
                                                          "store_v<4,int32>": 8}, rb)))
    phases: dict[str, dict[str, int]] = {"header": _header(has_cin, has_cout, out_bits)}
    header: dict[str, int] = {}
    if has_cin:
        header |= {"readincr_v<8>(input_cascade<acc48>)": 1, "accum<acc48,8>.to_vector<int32>": 1,
                   "store_v<8,int32>": 1}
    if has_cout:
        header = _add(header, {"load_v<8,int32>": 1, "accum<acc48,8>.from_vector<int32>": 1,
                               "writeincr(output_cascade<acc48>)": 1})
    if header:
        phases["cascade_header"] = header
    if not has_cout:
        phases["setup"] = {"set_rounding": 1, "set_saturation": 1}
    phases["mmul"] = _scaled(mmul, blocks)
    phases["drain"] = _add(_add(_scaled(drain, blocks), _scaled(pair, outer * (ne // 2))), {"scalar": it * outer})
    return phases


def op_counts(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, int]:
    """Closed-form operation counts of one invocation (summed over phases): comparable with the C-simulation's
    instrumented counts (``sim/gemm_csim.py`` ``op_counts``)."""
    total: dict[str, int] = {}
    for counts in phase_counts(kernel, rows, cols, kslice, out_bits).values():
        total = _add(total, counts)
    return dict(sorted(total.items()))


def loop_invocations(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, int]:
    """Entries of software-pipelined loops per invocation, by phase (each pays
    :func:`vckattn.hw.perf.aie.loop_fill_cycles`): ``mmul`` one per register block (the feature-block loop is
    entered once per iteration of the loops around it; no ``chess_flatten_loop``); the other phases none."""
    rb = _check(kernel, rows, cols, kslice, out_bits)
    blocks = rows // 4 // rb * (cols // 8)
    return {ph: (blocks if ph == "mmul" else 0) for ph in phase_counts(kernel, rows, cols, kslice, out_bits)}


def bank_conflicts(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> int:
    """Extra cycles of one invocation's pipelined ``mmul`` loop from memory-bank conflicts of its 128-bit loads
    (:func:`vckattn.hw.perf.aie.bank_conflict_cycles` per iteration), from the byte offsets the code loads: RB X
    blocks (64 bytes, 4 loads) and one W^T block (128 bytes, 8 loads) an iteration, the payloads :data:`BEAT_BYTES`
    after a 32-byte aligned base (0 for every shape: even and odd words balance). Units: AIE cycles. MODELED."""
    rb = _check(kernel, rows, cols, kslice, out_bits)
    nd = kslice // 16
    total = 0
    for ib0 in range(0, rows // 4, rb):
        for eb in range(cols // 8):
            for db in range(nd):
                offs = [BEAT_BYTES + ((ib0 + r) * nd + db) * 64 + 16 * i for r in range(rb) for i in range(4)]
                offs += [BEAT_BYTES + (eb * nd + db) * 128 + 16 * i for i in range(8)]
                total += aie.bank_conflict_cycles(offs)
    return total


def sync_ports(kernel: str) -> int:
    """Sync buffer ports one invocation acquires and releases: the x buffer, and the out buffer of ``last`` /
    ``only`` (the async w buffer once per group of tiles: not counted; cascades are streams)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    return 2 if kernel in ("last", "only") else 1


def invocation_cycles(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, float]:
    """Modeled AIE core cycles of one invocation: per phase (bottleneck slot + the loop fills of its entries; phases
    serialized: a register block uses all four accumulator registers), ``"overhead"`` (``sync_cycles_per_port`` of
    :mod:`vckattn.hw.perf.calibration` x :func:`sync_ports`, the call's initialization included) and ``"total"``.
    Units: AIE clock cycles."""
    return dict(_cycles(kernel, rows, cols, kslice, out_bits, aie.loop_fill_cycles(),
                        calibration.param("sync_cycles_per_port") * sync_ports(kernel)))


@functools.lru_cache(maxsize=4096)
def _cycles(kernel: str, rows: int, cols: int, kslice: int, out_bits: int, fill: float,
            overhead: float) -> tuple[tuple[str, float], ...]:
    fills = loop_invocations(kernel, rows, cols, kslice, out_bits)
    out: dict[str, float] = {}
    for ph, counts in phase_counts(kernel, rows, cols, kslice, out_bits).items():
        out[ph] = max(aie.phase_cycles(counts).values()) + fill * fills[ph]
    out["mmul"] += bank_conflicts(kernel, rows, cols, kslice, out_bits)
    out["overhead"] = float(overhead)
    out["total"] = sum(out.values())
    return tuple(out.items())


def invocation_macs(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> int:
    """MACs one invocation executes: ``rows · cols · kslice`` (every row computed). Units: multiply-accumulates."""
    _check(kernel, rows, cols, kslice, out_bits)
    return rows * cols * kslice


def efficiency(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> float:
    """Fraction of the core's int8 peak one invocation reaches: ``MACs / (cycles · 128)`` (modeled, 0..1)."""
    return invocation_macs(kernel, rows, cols, kslice, out_bits) / (
        invocation_cycles(kernel, rows, cols, kslice, out_bits)["total"] * aie.PEAK_MACS_PER_CYCLE)


def invocation_report(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, Any]:
    """Everything the model says about one invocation (JSON-ready): shape, MACs, cycles by phase, each phase's
    bottleneck slot and its slot cycles, efficiency. Modeled."""
    slots = {}
    for ph, counts in phase_counts(kernel, rows, cols, kslice, out_bits).items():
        per = aie.phase_cycles(counts)
        slots[ph] = {"bottleneck": max(per, key=lambda s: per[s]), "slot_cycles": {s: v for s, v in per.items() if v}}
    cycles = invocation_cycles(kernel, rows, cols, kslice, out_bits)
    macs = invocation_macs(kernel, rows, cols, kslice, out_bits)
    return {"kernel": kernel, "rows": rows, "cols": cols, "kslice": kslice, "out_bits": out_bits, "macs": macs,
            "cycles": cycles, "phases": slots, "efficiency": macs / (cycles["total"] * aie.PEAK_MACS_PER_CYCLE)}


def cascade_cycles(p: GemmParams) -> float:
    """Modeled AIE cycles of one tile through cascade ``p``: its slowest kernel, each on its own K-slice (the
    kernels run a tile each in lock-step on the cascade)."""
    return max(invocation_cycles(variant(j, p.kernels), p.rows, p.cols, p.kslice_of(j), p.out_bits)["total"]
               for j in range(p.kernels))


@functools.lru_cache(maxsize=1024)
def balanced(kernels: int, rows: int, cols: int, k_features: int, out_bits: int,
             memory_bytes: int | None = None) -> GemmParams:
    """The cascade of ``kernels`` kernels over ``k_features`` input features whose slowest kernel is the fastest
    (:func:`cascade_cycles`), among those whose kernels fit ``memory_bytes`` of data memory each (None: any): the
    last kernel, which also drains the tile (requantization or int32 stores), takes a shorter K-slice and the others
    a longer one, all multiples of 16. Among equally fast splits the most even. ValueError when none fits."""
    if k_features < 16 * kernels or k_features % 16:
        raise ValueError(f"{k_features} features: not {kernels} K-slices of multiples of 16")
    even = k_features / kernels
    best: tuple[float, float, GemmParams] | None = None
    for ks in [k_features] if kernels == 1 else range(16, k_features, 16):
        last = k_features - (kernels - 1) * ks
        if last < 16:
            break
        p = GemmParams(kernels, rows, cols, ks, out_bits, kslice_last=last)
        if memory_bytes is not None and p.data_bytes() > memory_bytes:
            continue
        key = (cascade_cycles(p), abs(ks - even), p)
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        raise ValueError(f"no split of {k_features} features over {kernels} kernels of {rows} x {cols} fits "
                         f"{memory_bytes} bytes of data memory")
    return best[2]


def load_data(path: Path | str = DATA_PATH) -> dict[str, Any]:
    """The committed instrumented data (``hw/perf/data/gemm_proj.json``)."""
    return json.loads(Path(path).read_text())

"""AIE side of the projection GEMM's performance: AIE1 core cycles of ONE invocation (one output tile over one
K-slice) of each projection GEMM kernel (``hw/aie/engine/gemm_kernels.h``). MODELED figures (no board, no
aiecompiler, no aiesimulator here), from the kernel's own vector code, exactly as :mod:`.engine_aie` costs the
attention kernels:

1. **Operation counts.** The kernel's vector path runs on g++ over the counting ``hw/aie/aie_api_emu.h``
   (``sim/gemm_csim.py`` ``op_counts``); :func:`phase_counts` is the same count in closed form, from the loop trip
   counts of the kernel code; ``tests/test_gemm_proj.py`` checks that it EQUALS the instrumented counts of every
   invocation over many shapes (``python -m vckattn.sim.gemm_proj_perf`` regenerates
   ``hw/perf/data/gemm_proj.json`` with both).
2. **Cost table.** :data:`vckattn.hw.perf.aie.COST_TABLE` (every entry with its source, or labeled ASSUMPTION).
3. **Cycles.** Per phase the bottleneck slot (:func:`vckattn.hw.perf.aie.phase_cycles`), plus
   :data:`vckattn.hw.perf.aie.LOOP_FILL_CYCLES` for the one software-pipelined loop nest (compile-time trip
   counts: assumed flattened), plus :data:`vckattn.hw.perf.engine_aie.OVERHEAD_CYCLES` per invocation (kernel call,
   buffer locks, header work). No stream-port cycles: the tile DMA fills and drains the ping-pong buffers while the
   core computes.

Kernels (:data:`KERNELS`): ``first`` (J = 0 of k > 1: the accumulators start from the bias, partial sums to the
cascade), ``mid`` (cascade in and out), ``last`` (cascade in; int8 out: ``aie::mul`` of the int32 sums by the
group's folded 32-bit multipliers into 80-bit lanes, shift-round-saturate to int8; or int32 out), ``only`` (k = 1:
bias in, output out). ``out_bits`` (8 or 32) matters for ``last`` and ``only``.

Assumptions (each can make the real kernel slower, none faster): as :mod:`.engine_aie` (perfect slot packing inside
a phase, 128-bit accesses never conflicting on banks, a cascade that never stalls, the AIE API unverified by
aiecompiler); the AIE1 32×32-bit multiply of the requantization at 8 lanes a vector issue (its cost entry).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import aie, engine_aie
from .engine_aie import _add, _scaled  # operation-count arithmetic, shared with the attention kernels

__all__ = ["BEAT_BYTES", "DATA_PATH", "KERNELS", "STATE_BYTES", "efficiency", "invocation_cycles", "invocation_macs",
           "invocation_report", "kernel_memory", "load_data", "op_counts", "phase_counts", "variant"]

KERNELS: tuple[str, ...] = ("first", "mid", "last", "only")
DATA_PATH: Path = Path(__file__).resolve().parent / "data" / "gemm_proj.json"
_MM = "mmul<4,16,8,int8,int8>"
#: bytes of a buffer's header beat
BEAT_BYTES = 16
#: bytes of a kernel's state between invocations (gemm_kernels.h GemmState: 8 int32 cascade words and 4 uint32,
#: 32-byte aligned)
STATE_BYTES = 64


def variant(j: int, kernels: int) -> str:
    """The kernel variant of kernel ``j`` of a ``kernels``-long cascade."""
    if not 0 <= j < kernels:
        raise ValueError(f"j={j} outside 0..{kernels - 1}")
    return "only" if kernels == 1 else "first" if j == 0 else "last" if j == kernels - 1 else "mid"


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


def phase_counts(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, dict[str, int]]:
    """Operation counts of one invocation by phase, in closed form (the loop trip counts of the vector path).

    ``rows``: the build's ROWS (every row computed); ``cols``: output channels per kernel; ``kslice``: input features
    per kernel; ``out_bits``: 8 or 32 (``last`` / ``only``). Phases in program order: ``cascade_header`` (the
    [tile_id, rows, col_block] word in / out; not in ``only``), ``setup`` (``last`` / ``only``: rounding and
    saturation modes), ``mmul`` (the register-blocked loop: the accumulators from the bias or the cascade, the
    macs, the blocks to the cascade or requantized / stored). Keys are ``aie_api_emu.h`` counter names."""
    rb = _check(kernel, rows, cols, kslice, out_bits)
    ni, ne, nd = rows // 4, cols // 8, kslice // 16
    groups = (ni // rb) * (ne // 2)
    blocks = 2 * rb  # per group
    has_cin, has_cout = kernel in ("mid", "last"), kernel in ("first", "mid")
    lanes = {"load_v<4,int32>": 8, "concat<4,int32>x8": 1}  # one 32-lane int32 group vector (128-bit loads)
    per_group = _scaled({"load_v<16,int8>": 4 * rb + 16,  # rb X blocks (4 x 128 bits), 2 W^T blocks (8 x 128 bits)
                         "concat<16,int8>x4": rb, "concat<16,int8>x8": 2, f"{_MM}.mac": 2 * rb}, nd)
    if has_cin:  # each block from four cascade words
        per_group = _add(per_group, _scaled({"readincr_v<8>(input_cascade<acc48>)": 4, "concat<acc48,8>x4": 1,
                                             f"{_MM}.from_accum": 1}, blocks))
    else:  # per column block the bias vector into an accumulator, shared by the rb row blocks
        per_group = _add(per_group, _scaled(_add(lanes, {"accum<acc48,32>.from_vector<int32>": 1}), 2))
        per_group = _add(per_group, {f"{_MM}.from_accum": blocks})
    if has_cout:
        per_group = _add(per_group, _scaled({f"{_MM}.to_accum": 1, "extract<8>(accum<acc48,32>)": 4,
                                             "writeincr(output_cascade<acc48>)": 4}, blocks))
    elif out_bits == 8:  # the two groups' multipliers; per block int32, x mult32 (acc80), srs to int8; rows stored
        per_group = _add(per_group, _scaled(lanes, 2))
        per_group = _add(per_group, _scaled({f"{_MM}.to_vector<int32>": 1, "mul<acc80,32,int32,int32>": 1,
                                             "accum<acc80,32>.to_vector<int8>": 1, "extract<8>(vector<int8,32>)": 4},
                                            blocks))
        per_group = _add(per_group, _scaled({"concat<8,int8>x2": 4, "store_v<16,int8>": 4}, rb))
    else:  # int32 rows: two 128-bit stores a row of a block
        per_group = _add(per_group, _scaled({f"{_MM}.to_vector<int32>": 1, "extract<4>(vector<int32,32>)": 8,
                                             "store_v<4,int32>": 8}, blocks))
    phases: dict[str, dict[str, int]] = {}
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
    phases["mmul"] = _scaled(per_group, groups)
    return phases


def op_counts(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, int]:
    """Closed-form operation counts of one invocation (summed over phases): comparable with the C-simulation's
    instrumented counts (``sim/gemm_csim.py`` ``op_counts``)."""
    total: dict[str, int] = {}
    for counts in phase_counts(kernel, rows, cols, kslice, out_bits).values():
        total = _add(total, counts)
    return dict(sorted(total.items()))


def invocation_cycles(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, float]:
    """Modeled AIE core cycles of one invocation: per phase (bottleneck slot; ``mmul`` plus one loop fill),
    ``"overhead"`` (:data:`.engine_aie.OVERHEAD_CYCLES`) and ``"total"``. Units: AIE clock cycles."""
    out: dict[str, float] = {}
    for ph, counts in phase_counts(kernel, rows, cols, kslice, out_bits).items():
        out[ph] = max(aie.phase_cycles(counts).values()) + (aie.LOOP_FILL_CYCLES if ph == "mmul" else 0)
    out["overhead"] = float(engine_aie.OVERHEAD_CYCLES)
    out["total"] = sum(out.values())
    return out


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


def kernel_memory(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> int:
    """Bytes of one kernel's data memory (gemm_kernels.h ``gemm_data_bytes``; a test compares): the ping-pong x
    buffer (header + ``rows·kslice``), the ping-pong w buffer (header + ``kslice·cols`` weights + the bias vectors
    for ``first`` / ``only`` + the multipliers and shifts for an int8 ``last`` / ``only``), the last kernel's
    ping-pong out buffer (header + ``rows·cols`` elements of ``out_bits``) and the state. Stack and heap are not
    included (the device's ``tile_memory_reserve_bytes``)."""
    _check(kernel, rows, cols, kslice, out_bits)
    lanes, shifts = cols // 8 * 32 * 4, -(-cols // 8 * 4 // 16) * 16
    has_bias, has_out = kernel in ("first", "only"), kernel in ("last", "only")
    w = BEAT_BYTES + kslice * cols + (lanes if has_bias else 0) + (lanes + shifts if has_out and out_bits == 8 else 0)
    out = BEAT_BYTES + rows * cols * out_bits // 8 if has_out else 0
    return 2 * (BEAT_BYTES + rows * kslice + w + out) + STATE_BYTES


def load_data(path: Path | str = DATA_PATH) -> dict[str, Any]:
    """The committed instrumented data (``hw/perf/data/gemm_proj.json``)."""
    return json.loads(Path(path).read_text())

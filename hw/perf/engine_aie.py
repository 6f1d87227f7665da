"""AIE side of the engine's performance: AIE1 core cycles of ONE invocation (one tile) of each engine kernel
(stream contract v3, ``hw/aie/engine/engine_kernels.h``). MODELED figures (no board, no aiecompiler, no
aiesimulator here), from the kernels' own vector code.

The full description: ``docs/internals/hw.md``, section ``hw/perf/engine_aie.py``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from . import aie, calibration

__all__ = [
    "BEAT_BYTES",
    "DATA_PATH",
    "KERNELS",
    "SCORE_BITS",
    "bank_conflicts",
    "efficiency",
    "invocation_cycles",
    "invocation_macs",
    "invocation_report",
    "load_data",
    "loop_invocations",
    "op_counts",
    "overhead_cycles",
    "phase_counts",
    "sync_ports",
]

KERNELS: tuple[str, ...] = ("qk", "pv_first", "pv_mid", "rq")
SCORE_BITS: tuple[int, ...] = (8, 16)
DATA_PATH: Path = Path(__file__).resolve().parent / "data" / "engine_kernels.json"
#: bytes of a buffer's header beat (the payload starts this far after the buffer's 32-byte aligned base)
BEAT_BYTES = 16


def _check(kernel: str, q_rows: int, sk: int, d: int, score_bits: int, masked: bool) -> int:
    """Validate one invocation's shape; return RB (row blocks per register block)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if q_rows < 4 or q_rows % 4:
        raise ValueError(f"q_rows={q_rows}: must be a positive multiple of 4")
    if sk < 16 or sk % 16:
        raise ValueError(f"sk={sk}: slice keys must be a positive multiple of 16")
    if d < 16 or d % 16:
        raise ValueError(f"d={d}: must be a positive multiple of 16")
    if score_bits not in SCORE_BITS:
        raise ValueError(f"score_bits must be one of {SCORE_BITS}, got {score_bits}")
    if masked and kernel != "qk":
        raise ValueError("only the qk kernel has a masked variant")
    return 2 if q_rows % 8 == 0 else 1


def _scaled(counts: dict[str, int], n: int) -> dict[str, int]:
    return {k: v * n for k, v in counts.items() if v * n}


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return {k: v for k, v in out.items() if v}


def _header(kernel: str, masked: bool) -> dict[str, int]:
    """The scalar work of one invocation outside the loops, as the kernel code annotates it (``VCK_SCALAR``,
    ``VCK_SCALAR_LOAD``, ``VCK_SCALAR_STORE`` in ``engine_kernels.h`` qk_tile / pv_tile / rq_tile): reading the
    header (16 byte loads, 12 shifts, 12 ors), its fields and checks, the held slice's tile range, the pointers,
    writing the output header (field puts, 12 shifts, 16 byte stores), the held slice's tile count. The acquire and
    release of the async slice happen once per group of tiles and are not counted."""
    if kernel == "qk":
        alu = 24 + 1 + (2 * 7 + 1 + 2 * 4) + 2 + 3 + (3 + 8 + 1) + (4 + 3 * 7 + 2) + 12 + 3 + (4 if masked else 0)
        return {"scalar": alu, "scalar_load": 16 + 1 + 2 + 1 + 1, "scalar_store": 4 + 16 + 1}
    if kernel in ("pv_first", "pv_mid"):
        mid = kernel == "pv_mid"
        alu = 24 + 1 + (2 * 5 + 2 * 3) + 2 + 3 + (4 if mid else 0) + 2 + 3
        return {"scalar": alu, "scalar_load": 16 + 1 + 2 + 2 + 1 + 1, "scalar_store": 4 + (0 if mid else 12) + 1}
    return {"scalar": 4 + 1 + 4 + 3 * 3 + 12 + 1, "scalar_load": 4, "scalar_store": 16 + 4}  # rq


def phase_counts(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8,
                 masked: bool = False) -> dict[str, dict[str, int]]:
    """Operation counts of one invocation by phase, in closed form (the loop trip counts of the vector path and the
    scalar work its code annotates).

    ``q_rows``: the build's Q_ROWS (every row is computed); ``sk``: keys of the slice (SK = MAX_KEYS / k); ``d``: the
    build's D; ``score_bits``: 8 or 16 (qk only); ``masked``: the qk tile needs the mask. Phases, as the code is
    written: ``header`` (straight-line scalar header work, :func:`_header`); qk ``setup`` (rounding / saturation
    modes), ``mask_limits`` (masked only: the per-row key limits and the key pattern; one pipelined loop), ``mmul``
    (the pipelined inner loop over the feature blocks, summed over its entries: one per register block of RB row
    blocks x 1 key block), ``drain`` (per register block, after the loop: narrowing, the mask, stores, the outer
    loops' control); pv ``cascade_header`` (the [tile_id, rows, rq_mult, rq_shift] word out, and in for
    ``pv_mid``), ``mmul`` (the pipelined loop over the key blocks, one entry per register block of RB row blocks x 1
    feature block), ``drain`` (per register block: the accumulators from the cascade before the loop (``pv_mid``)
    and to it after, the outer loops' control); rq ``cascade_header`` (the word in), ``setup`` (the modes,
    ``rq_mult`` broadcast to 32 int16 lanes), ``requant`` (the pipelined loop over the feature-block pairs, one entry
    per row-block group: the O blocks from the cascade, requantized into the A record; with the outer loop's
    control). Keys are ``aie_api_emu.h`` counter names."""
    rb = _check(kernel, q_rows, sk, d, score_bits, masked)
    ni, nj = q_rows // 4, sk // 8
    st = f"int{score_bits}"
    outer = ni // rb  # iterations of the row-block-group loop
    it, entry = aie.LOOP_ITER_SCALAR_OPS, aie.LOOP_ENTRY_SCALAR_OPS
    phases: dict[str, dict[str, int]] = {"header": _header(kernel, masked)}
    if kernel == "qk":
        nd = d // 16
        groups = outer * nj
        per_iter = {"load_v<16,int8>": 4 * rb + 8,  # rb Q blocks (4 x 128 bits), one K^T block (8 x 128 bits)
                    "concat<16,int8>x4": rb, "concat<16,int8>x8": 1}
        mmul = _scaled(per_iter, nd)
        mmul |= {"mmul<4,16,8,int8,int8>.mul": rb, "mmul<4,16,8,int8,int8>.mac": rb * (nd - 1)}
        drain = {f"mmul<4,16,8,int8,int8>.to_vector<{st}>": rb, "scalar": it + 2 + entry + 1}
        if score_bits == 8:  # a 4x8 block of int8 scores: two 128-bit stores
            drain |= {"extract<16>(vector<int8,32>)": 2 * rb, "store_v<16,int8>": 2 * rb}
        else:  # of int16 scores: four
            drain |= {"extract<8>(vector<int16,32>)": 4 * rb, "store_v<8,int16>": 4 * rb}
        phases["setup"] = {"set_rounding": 1, "set_saturation": 1}
        if masked:
            phases["mask_limits"] = _add({"load_v<32,int16>": 2, "scalar": entry},  # the row and key lane patterns
                                         _scaled({"add<32,int16>(scalar)": 2, "min<32,int16>(scalar)": 1,
                                                  "lt<32,int16>(scalar)": 1, "select<32,int16>(scalar)": 1,
                                                  "store_v<32,int16>": 1, "scalar": 2}, ni))
            drain = _add(drain, {"scalar": 1, "add<32,int16>(scalar)": 1, "load_v<32,int16>": rb,
                                 "lt<32,int16>": rb, f"select<32,{st}>(scalar)": rb})
        phases["mmul"] = _scaled(mmul, groups)
        phases["drain"] = _add(_scaled(drain, groups), {"scalar": it * outer})
        return phases
    ne = d // 8
    mm = "mmul<4,8,8,uint8,int8>"
    cin_header = {"readincr_v<8>(input_cascade<acc48>)": 1, "accum<acc48,8>.to_vector<int32>": 1,
                  "store_v<8,int32>": 1}
    if kernel == "rq":  # each O block from four cascade words, requantized: int32 lanes x int16 rq_mult into
        # acc80, srs to int8; per row block the rows of the feature-block pair, 8 + 8 int8, one 128-bit store each
        per_block = {"readincr_v<8>(input_cascade<acc48>)": 4, "concat<acc48,8>x4": 1, f"{mm}.from_accum": 1,
                     f"{mm}.to_vector<int32>": 1, "mul<acc80,32,int32,int16>": 1,
                     "accum<acc80,32>.to_vector<int8>": 1, "extract<8>(vector<int8,32>)": 4}
        per_iter = _add(_scaled(per_block, 2 * rb), _scaled({"concat<8,int8>x2": 4, "store_v<16,int8>": 4}, rb))
        requant = _add(_scaled(per_iter, ne // 2), {"scalar": it + 1 + entry})
        phases |= {"cascade_header": cin_header,
                   "setup": {"set_rounding": 1, "set_saturation": 1, "broadcast<32,int16>": 1},
                   "requant": _scaled(requant, outer)}
        return phases
    has_cin = kernel == "pv_mid"
    groups = outer * ne
    mmul = _scaled({"load_v<16,uint8>": 2 * rb,  # rb P blocks of 32 bytes a key block
                    "concat<16,uint8>x2": rb,
                    "load_v<16,int8>": 4,        # one V block of 64 bytes a key block
                    "concat<16,int8>x4": 1}, nj)
    mmul |= {f"{mm}.mac": rb * nj - (0 if has_cin else rb), f"{mm}.mul": 0 if has_cin else rb}
    mmul = {k: v for k, v in mmul.items() if v}
    # every P.V kernel passes the blocks on: to four cascade words each
    drain = _scaled({f"{mm}.to_accum": 1, "extract<8>(accum<acc48,32>)": 4, "writeincr(output_cascade<acc48>)": 4},
                    rb)
    drain["scalar"] = it + 2 + entry
    if has_cin:  # each O block from four cascade words
        drain = _add(drain, _scaled({"readincr_v<8>(input_cascade<acc48>)": 4, "concat<acc48,8>x4": 1,
                                     f"{mm}.from_accum": 1}, rb))
    header = dict(cin_header) if has_cin else {}
    header = _add(header, {"load_v<8,int32>": 1, "accum<acc48,8>.from_vector<int32>": 1,
                           "writeincr(output_cascade<acc48>)": 1})
    phases |= {"cascade_header": header, "mmul": _scaled(mmul, groups),
               "drain": _add(_scaled(drain, groups), {"scalar": it * outer})}
    return phases


def op_counts(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8, masked: bool = False) -> dict[str, int]:
    """Closed-form operation counts of one invocation (summed over phases): comparable with the C-simulation's
    instrumented counts (``sim/engine_csim.py`` ``op_counts``)."""
    total: dict[str, int] = {}
    for counts in phase_counts(kernel, q_rows, sk, d, score_bits, masked).values():
        total = _add(total, counts)
    return dict(sorted(total.items()))


def loop_invocations(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8,
                     masked: bool = False) -> dict[str, int]:
    """Entries of software-pipelined loops per invocation, by phase, as the code writes the loop nests (each entry
    pays :func:`vckattn.hw.perf.aie.loop_fill_cycles`; no kernel asks for ``chess_flatten_loop``): qk / pv ``mmul``
    one entry per register block (the inner loop is entered once per iteration of the loops around it), qk
    ``mask_limits`` one, rq ``requant`` one per row-block group; straight-line phases none."""
    rb = _check(kernel, q_rows, sk, d, score_bits, masked)
    outer = q_rows // 4 // rb
    entries = {"mmul": outer * (sk // 8 if kernel == "qk" else d // 8), "mask_limits": 1, "requant": outer}
    return {ph: entries.get(ph, 0) for ph in phase_counts(kernel, q_rows, sk, d, score_bits, masked)}


def bank_conflicts(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8, masked: bool = False) -> int:
    """Extra cycles of one invocation's pipelined ``mmul`` loop from memory-bank conflicts of its 128-bit loads
    (:func:`vckattn.hw.perf.aie.bank_conflict_cycles` per iteration), from the byte offsets the code loads: the
    payloads start :data:`BEAT_BYTES` after a 32-byte aligned buffer base; qk loads RB Q blocks (64 bytes, 4 loads)
    and one K^T block (128 bytes, 8 loads) an iteration, pv RB P blocks (32 bytes, 2 loads) and one V block (64 bytes,
    4 loads). Every block spans whole 32-byte pairs of words, so even and odd words balance and the count is 0 for
    every shape the kernels take; it is computed, not assumed. Units: AIE clock cycles. MODELED."""
    rb = _check(kernel, q_rows, sk, d, score_bits, masked)
    if kernel == "rq":
        return 0
    ni, nj = q_rows // 4, sk // 8
    total = 0
    if kernel == "qk":
        nd = d // 16
        for ib0 in range(0, ni, rb):
            for jb in range(nj):
                for db in range(nd):
                    offs = [BEAT_BYTES + ((ib0 + r) * nd + db) * 64 + 16 * i for r in range(rb) for i in range(4)]
                    offs += [BEAT_BYTES + (jb * nd + db) * 128 + 16 * i for i in range(8)]
                    total += aie.bank_conflict_cycles(offs)
        return total
    for ib0 in range(0, ni, rb):
        for eb in range(d // 8):
            for jb in range(nj):
                offs = [BEAT_BYTES + ((ib0 + r) * nj + jb) * 32 + 16 * i for r in range(rb) for i in range(2)]
                offs += [BEAT_BYTES + (eb * nj + jb) * 64 + 16 * i for i in range(4)]
                total += aie.bank_conflict_cycles(offs)
    return total


def sync_ports(kernel: str) -> int:
    """Sync (ping-pong) buffer ports one invocation acquires and releases: qk 2 (q in, s out), pv 1 (p in), rq 1 (o
    out). The async K / V slice is acquired once per group of tiles (not counted); cascades are streams."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    return 2 if kernel == "qk" else 1


def overhead_cycles(kernel: str) -> float:
    """Per-invocation cycles no code shows: the lock hand-off of each sync buffer port with the call's
    initialization, ``sync_cycles_per_port`` (:mod:`vckattn.hw.perf.calibration`) x :func:`sync_ports`. The
    calibration's per-port figure includes the call's initialization (its definition), so no separate call cost is
    added. Units: AIE clock cycles. MODELED."""
    return calibration.param("sync_cycles_per_port") * sync_ports(kernel)


def invocation_cycles(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8,
                      masked: bool = False) -> dict[str, float]:
    """Modeled AIE core cycles of one invocation: per phase (bottleneck slot + the loop fills of its entries; the
    phases are serialized: the register blocks use all four accumulator registers, so a block's drain cannot overlap
    the next block's loop), ``"overhead"`` (:func:`overhead_cycles`) and ``"total"``. Units: AIE clock cycles. No
    stream-port cycles (module docstring)."""
    return dict(_cycles(kernel, q_rows, sk, d, score_bits, masked, aie.loop_fill_cycles(), overhead_cycles(kernel)))


@functools.lru_cache(maxsize=4096)
def _cycles(kernel: str, q_rows: int, sk: int, d: int, score_bits: int, masked: bool, fill: float,
            overhead: float) -> tuple[tuple[str, float], ...]:
    phases = phase_counts(kernel, q_rows, sk, d, score_bits, masked)
    fills = loop_invocations(kernel, q_rows, sk, d, score_bits, masked)
    out: dict[str, float] = {}
    for ph, counts in phases.items():
        out[ph] = max(aie.phase_cycles(counts).values()) + fill * fills[ph]
    if "mmul" in out:
        out["mmul"] += bank_conflicts(kernel, q_rows, sk, d, score_bits, masked)
    out["overhead"] = float(overhead)
    out["total"] = sum(out.values())
    return tuple(out.items())


def invocation_macs(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8, masked: bool = False) -> int:
    """MACs one invocation executes: ``q_rows · sk · d`` (every row and key of the slice computed; for P·V the
    ``q_rows × sk`` by ``sk × d`` product; none for the requantizer). Units: multiply-accumulates."""
    _check(kernel, q_rows, sk, d, score_bits, masked)
    return 0 if kernel == "rq" else q_rows * sk * d


def efficiency(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8, masked: bool = False) -> float:
    """Fraction of the core's int8 peak one invocation reaches: ``MACs / (cycles · 128)`` (modeled, 0..1)."""
    return invocation_macs(kernel, q_rows, sk, d, score_bits, masked) / (
        invocation_cycles(kernel, q_rows, sk, d, score_bits, masked)["total"] * aie.PEAK_MACS_PER_CYCLE)


def invocation_report(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8,
                      masked: bool = False) -> dict[str, Any]:
    """Everything the model says about one invocation (JSON-ready): shape, MACs, cycles by phase, each phase's
    bottleneck slot and its slot cycles, efficiency. Modeled."""
    phases = phase_counts(kernel, q_rows, sk, d, score_bits, masked)
    cycles = invocation_cycles(kernel, q_rows, sk, d, score_bits, masked)
    slots = {}
    for ph, counts in phases.items():
        per = aie.phase_cycles(counts)
        top = max(per, key=lambda s: per[s])
        slots[ph] = {"bottleneck": top, "slot_cycles": {s: v for s, v in per.items() if v}}
    macs = invocation_macs(kernel, q_rows, sk, d, score_bits, masked)
    return {"kernel": kernel, "q_rows": q_rows, "sk": sk, "d": d, "score_bits": score_bits, "masked": masked,
            "macs": macs, "cycles": cycles, "phases": slots,
            "efficiency": macs / (cycles["total"] * aie.PEAK_MACS_PER_CYCLE)}


def load_data(path: Path | str = DATA_PATH) -> dict[str, Any]:
    """The committed instrumented data (``hw/perf/data/engine_kernels.json``)."""
    return json.loads(Path(path).read_text())

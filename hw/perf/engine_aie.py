"""AIE side of the engine's performance: AIE1 core cycles of ONE invocation (one tile) of each engine kernel
(stream contract v3, ``hw/aie/engine/engine_kernels.h``). MODELED figures (no board, no aiecompiler, no
aiesimulator here), from the kernels' own vector code.

Where the numbers come from
---------------------------
1. **Operation counts.** The kernels' vector path runs on g++ over ``hw/aie/aie_api_emu.h``, which counts every
   AIE API call (``mmul<4,16,8,int8,int8>.mac``, ``load_v<16,int8>``, ``readincr_v<8>(input_cascade<acc48>)``, ...);
   the launch C-simulation (``sim/cpp/engine_csim_tb.cpp``, OPCOUNTS) dumps the counts of every kernel invocation.
   :func:`phase_counts` is the same count in closed form, from the loop trip counts of the kernel code, split by
   phase; ``tests/test_engine_aie_perf.py`` checks that it EQUALS the instrumented counts of every invocation of
   whole launches over many shapes (``python -m vckattn.sim.engine_aie_perf`` regenerates
   ``hw/perf/data/engine_kernels.json`` with both).
2. **Cost table.** :data:`vckattn.hw.perf.aie.COST_TABLE` turns each operation into issues on the VLIW slots it
   occupies (every entry with its source, or labeled ASSUMPTION); :data:`vckattn.hw.perf.aie.SLOTS` gives each
   slot's throughput (the engine adds the cascade in / out and scalar slots).
3. **Cycles.** Per phase (a loop nest or a straight run of the kernel code), the bottleneck slot
   (:func:`vckattn.hw.perf.aie.phase_cycles`), plus :data:`vckattn.hw.perf.aie.LOOP_FILL_CYCLES` for each
   software-pipelined loop nest the invocation enters (all trip counts are compile-time constants, so each nest is
   assumed flattened into one pipelined loop); plus :data:`OVERHEAD_CYCLES` per invocation (kernel call and buffer
   synchronization, header parsing and writing). No stream-port cycles: the tile DMA moves every byte into and out
   of the ping-pong buffers while the core computes (the graph simulation accounts for the DMA and PLIO rates).

Kernels (``KERNELS``): ``qk`` (QKᵀ of one tile against one ``SK``-key slice, narrowed to ``score_bits``; ``masked``:
the tile needs the mask, the second loop body), ``pv_first`` / ``pv_mid`` (P·V of one slice; the first starts the
O blocks from zero and passes them on the cascade, the others take and pass them), ``rq`` (the requantizer at the
cascade's end: O into the int8 A record, ``aie::mul`` of int32 O by the int16 ``rq_mult`` into an 80-bit
accumulator, shift-round-saturate to int8).

Assumptions (each can make the real kernel slower, none faster)
---------------------------------------------------------------
* Perfect slot packing inside a phase; data dependences and register pressure (the 2x2 register blocks hold four
  32-lane accumulators: all of AIE1's accumulator registers) are ignored apart from the loop fill.
* 128-bit loads and stores everywhere (the buffers' payloads start 16 bytes after their base), never conflicting on
  memory banks (UG1079: parallel accesses need different banks; the generator does not pin banks).
* The cascade never stalls (the neighbour produces and consumes at the same rate: a chain runs in lock-step).
* The AIE API of the vector path is unverified (never compiled by aiecompiler): if the real API compiles a call
  differently, its cost entry is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import aie

__all__ = [
    "DATA_PATH",
    "HEADER_CYCLES",
    "KERNELS",
    "KERNEL_CALL_CYCLES",
    "OVERHEAD_CYCLES",
    "SCORE_BITS",
    "efficiency",
    "invocation_cycles",
    "invocation_macs",
    "invocation_report",
    "load_data",
    "loop_invocations",
    "op_counts",
    "phase_counts",
]

KERNELS: tuple[str, ...] = ("qk", "pv_first", "pv_mid", "rq")
SCORE_BITS: tuple[int, ...] = (8, 16)
#: kernel call and synchronization of the sync buffers (lock acquire / release of q and s, or p and o), cycles per
#: invocation. ASSUMPTION within UG1079 "Run-Time Ratio" (2023.1): "synchronization of synchronous buffers +
#: function initialization takes tens of cycles, depending on the interface numbers".
KERNEL_CALL_CYCLES = 40
#: header work per invocation: read and check the TILE / PACKET header (4 words, 4-6 field checks), the held slice's
#: tile range (and, at a group's first tile, acquire the async K / V buffer and check its SLICE header), the mask
#: decision, write the PACKET / RESULT header (4 words). ASSUMPTION: 24 scalar operations at one a cycle (WP552: one
#: scalar slot); the async acquire at a group's first tile is amortized over the group's tiles inside this figure.
HEADER_CYCLES = 24
#: per-invocation overhead (cycles): :data:`KERNEL_CALL_CYCLES` + :data:`HEADER_CYCLES`
OVERHEAD_CYCLES = KERNEL_CALL_CYCLES + HEADER_CYCLES
DATA_PATH: Path = Path(__file__).resolve().parent / "data" / "engine_kernels.json"


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


def phase_counts(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8,
                 masked: bool = False) -> dict[str, dict[str, int]]:
    """Operation counts of one invocation by phase, in closed form (the loop trip counts of the vector path).

    ``q_rows``: the build's Q_ROWS (every row is computed); ``sk``: keys of the slice (SK = MAX_KEYS / k); ``d``: the
    build's D; ``score_bits``: 8 or 16 (qk only); ``masked``: the qk tile needs the mask. Phases in program order:
    qk ``setup`` (rounding / saturation modes), ``mask_limits`` (masked only: the per-row key limits and the key
    pattern), ``mmul`` (the register-blocked loop: loads, mmuls, narrowing, the mask, stores); pv
    ``cascade_header`` (the [tile_id, rows, rq_mult, rq_shift] word out, and in for ``pv_mid``), ``mmul`` (the
    register-blocked loop: the O blocks from / to the cascade); rq ``cascade_header`` (the word in), ``setup`` (the
    rounding and saturation modes of the requantization, ``rq_mult`` broadcast to 32 int16 lanes), ``requant`` (the
    loop over the O blocks: from the cascade, requantized into the A record). Keys are ``aie_api_emu.h`` counter
    names.
    """
    rb = _check(kernel, q_rows, sk, d, score_bits, masked)
    ni, nj = q_rows // 4, sk // 8
    st = f"int{score_bits}"
    if kernel == "qk":
        nd = d // 16
        groups = (ni // rb) * (nj // 2)
        per_group = {
            "load_v<16,int8>": (4 * rb + 16) * nd,           # rb Q blocks (4 x 128 bits), 2 K^T blocks (8 x 128 bits)
            "concat<16,int8>x4": rb * nd,
            "concat<16,int8>x8": 2 * nd,
            "mmul<4,16,8,int8,int8>.mul": 2 * rb,
            "mmul<4,16,8,int8,int8>.mac": 2 * rb * (nd - 1),
            f"mmul<4,16,8,int8,int8>.to_vector<{st}>": 2 * rb,
        }
        if score_bits == 8:  # a 4x8 block of int8 scores: two 128-bit stores
            per_group |= {"extract<16>(vector<int8,32>)": 4 * rb, "store_v<16,int8>": 4 * rb}
        else:  # of int16 scores: four
            per_group |= {"extract<8>(vector<int16,32>)": 8 * rb, "store_v<8,int16>": 8 * rb}
        phases = {"setup": {"set_rounding": 1, "set_saturation": 1}}
        if masked:
            phases["mask_limits"] = _add({"load_v<32,int16>": 2},  # the row and the key lane patterns
                                         _scaled({"add<32,int16>(scalar)": 2, "min<32,int16>(scalar)": 1,
                                                  "lt<32,int16>(scalar)": 1, "select<32,int16>(scalar)": 1,
                                                  "store_v<32,int16>": 1}, ni))
            per_group = _add(per_group, {"add<32,int16>(scalar)": 2, "load_v<32,int16>": rb, "lt<32,int16>": 2 * rb,
                                         f"select<32,{st}>(scalar)": 2 * rb})
        phases["mmul"] = _scaled(per_group, groups)
        return phases
    ne = d // 8
    groups = (ni // rb) * (ne // 2)
    blocks = 2 * rb  # per group
    mm = "mmul<4,8,8,uint8,int8>"
    cin_header = {"readincr_v<8>(input_cascade<acc48>)": 1, "accum<acc48,8>.to_vector<int32>": 1,
                  "store_v<8,int32>": 1}
    if kernel == "rq":  # each O block from four cascade words, requantized: int32 lanes x int16 rq_mult into
        # acc80, srs to int8; per row block the rows of the feature-block pair, 8 + 8 int8, one 128-bit store each
        per_block = {"readincr_v<8>(input_cascade<acc48>)": 4, "concat<acc48,8>x4": 1, f"{mm}.from_accum": 1,
                     f"{mm}.to_vector<int32>": 1, "mul<acc80,32,int32,int16>": 1,
                     "accum<acc80,32>.to_vector<int8>": 1, "extract<8>(vector<int8,32>)": 4}
        per_group = _add(_scaled(per_block, blocks), _scaled({"concat<8,int8>x2": 4, "store_v<16,int8>": 4}, rb))
        return {"cascade_header": cin_header,
                "setup": {"set_rounding": 1, "set_saturation": 1, "broadcast<32,int16>": 1},
                "requant": _scaled(per_group, groups)}
    has_cin = kernel == "pv_mid"
    per_group = {
        "load_v<16,uint8>": 2 * rb * nj,          # rb P blocks of 32 bytes a key block
        "concat<16,uint8>x2": rb * nj,
        "load_v<16,int8>": 8 * nj,                # 2 V blocks of 64 bytes a key block
        "concat<16,int8>x4": 2 * nj,
        f"{mm}.mac": blocks * nj - (0 if has_cin else blocks),
        f"{mm}.mul": 0 if has_cin else blocks,
    }
    if has_cin:  # each O block from four cascade words
        per_group = _add(per_group, _scaled({"readincr_v<8>(input_cascade<acc48>)": 4, "concat<acc48,8>x4": 1,
                                             f"{mm}.from_accum": 1}, blocks))
    # every P.V kernel passes the blocks on: to four cascade words each
    per_group = _add(per_group, _scaled({f"{mm}.to_accum": 1, "extract<8>(accum<acc48,32>)": 4,
                                         "writeincr(output_cascade<acc48>)": 4}, blocks))
    header = dict(cin_header) if has_cin else {}
    header = _add(header, {"load_v<8,int32>": 1, "accum<acc48,8>.from_vector<int32>": 1,
                           "writeincr(output_cascade<acc48>)": 1})
    return {"cascade_header": header, "mmul": _scaled(per_group, groups)}


def op_counts(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8, masked: bool = False) -> dict[str, int]:
    """Closed-form operation counts of one invocation (summed over phases): comparable with the C-simulation's
    instrumented counts (``sim/engine_csim.py`` ``op_counts``)."""
    total: dict[str, int] = {}
    for counts in phase_counts(kernel, q_rows, sk, d, score_bits, masked).values():
        total = _add(total, counts)
    return dict(sorted(total.items()))


def loop_invocations(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8,
                     masked: bool = False) -> dict[str, int]:
    """Software-pipelined loop nests entered per invocation, by phase (each pays
    :data:`vckattn.hw.perf.aie.LOOP_FILL_CYCLES`): ``mmul`` 1, ``mask_limits`` 1, ``requant`` 1; ``setup`` and
    ``cascade_header`` are straight-line code."""
    phases = phase_counts(kernel, q_rows, sk, d, score_bits, masked)
    return {ph: (1 if ph in ("mmul", "mask_limits", "requant") else 0) for ph in phases}


def invocation_cycles(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8,
                      masked: bool = False) -> dict[str, float]:
    """Modeled AIE core cycles of one invocation: per phase (bottleneck slot + loop fill), ``"overhead"``
    (:data:`OVERHEAD_CYCLES`) and ``"total"``. Units: AIE clock cycles. No stream-port cycles (module docstring)."""
    phases = phase_counts(kernel, q_rows, sk, d, score_bits, masked)
    fills = loop_invocations(kernel, q_rows, sk, d, score_bits, masked)
    out: dict[str, float] = {}
    for ph, counts in phases.items():
        out[ph] = max(aie.phase_cycles(counts).values()) + aie.LOOP_FILL_CYCLES * fills[ph]
    out["overhead"] = float(OVERHEAD_CYCLES)
    out["total"] = sum(out.values())
    return out


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

"""AIE side of the performance model: AI Engine (AIE1) core cycles of one ``qk_matmul`` or ``pv_matmul``
tile. MODELED figures (no board, no aiecompiler, no aiesimulator here), from the kernels' own vector code.

Where the numbers come from
---------------------------
1. **Operation counts.** The vector path of ``hw/aie/attention_kernels.h`` runs on g++ over
   ``hw/aie/aie_api_emu.h``, which counts every AIE API call by kind (``load_v<16,int8>``,
   ``mmul<4,16,8,uint8,int8>.mac``, ``interleave_zip<8,int32>(step=1)``, ...); the test bench
   (``sim/cpp/aie_kernels_tb.cpp --op-counts``) adds the 128-bit stream beats and dumps the counts of
   each tile. :func:`phase_counts` is the same count in closed form, from the loop trip counts of
   the kernel code, split by phase; ``tests/test_aie_perf.py`` checks that its totals EQUAL the
   instrumented counts for many shapes (``python -m vckattn.sim.aie_perf`` regenerates
   ``hw/perf/data/aie_tiles.json`` with both).
2. **Cost table.** :data:`COST_TABLE` turns each API operation into issues on the VLIW slots it
   occupies, read from the AIE API's own AIE1 implementation (``aie_api/detail/aie1/*.hpp``: how many
   intrinsics each call becomes) and the AIE1 architecture; :data:`SLOTS` gives each slot's
   throughput. Every entry carries its source. The table and the slots also hold the operations of the
   engine's kernels (cascade words, mask compares, rounding modes; :mod:`vckattn.hw.perf.engine_aie`).
3. **Cycles.** Per phase (a loop nest of the kernel code), the cycles are the bottleneck slot:
   ``max over slots of (issues on the slot / slot throughput)`` -- the "kernel coding bounds" method of
   UG1079 (compute bound vs. memory bound), extended to every slot -- plus a pipeline fill of
   :data:`LOOP_FILL_CYCLES` for every invocation of a loop whose trip count is only known at run time
   (the compiler can software-pipeline but not unroll it).

Combination (:func:`tile_cycles`): ``stream_in + compute + stream_out``. The kernel code runs its
phases one after the other on one core -- read a K (V, P) block from the stream into local memory,
compute on it, write the S block -- and the stream accesses are instructions of that same core, so
nothing overlaps inside this code. :func:`tile_breakdown` returns the three terms separately so that a
block-level model can evaluate designs that overlap them (double buffering through the tile DMA).

Assumptions (each can make the real kernel slower, none faster, except where said)
-------------------------------------------------------------------------------------
* Perfect slot packing inside a phase (the compiler fills every VLIW slot every cycle up to the
  bottleneck); data dependences and register pressure are ignored apart from :data:`LOOP_FILL_CYCLES`.
* Loads and stores never conflict on memory banks (UG1079: parallel accesses need different banks).
* ``concat``/``extract``/``zeros`` cost one move each on the two move slots (they never bind here;
  when the loads write the register parts directly they cost nothing).
* ``qk_prepare`` (re-tiling Q^T) is scalar C++ outside the AIE API: not counted by the emulation;
  modeled as one scalar byte load and one scalar byte store per element (:data:`NOT_INSTRUMENTED`).
* The stream source keeps up: a 128-bit beat costs the core 4 cycles on a 32-bit stream port; a PL
  side slower than 32 bits per AIE cycle is for the block model to add.
* Kernel call, lock and header parsing overheads (tens of cycles per tile) are left out.
* The AIE API of the vector path is unverified (never compiled by aiecompiler; see
  ``attention_kernels.h``): if the real API compiles a call differently, the cost table is wrong for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = [
    "BEAT_BYTES",
    "COST_TABLE",
    "DATA_PATH",
    "KERNELS",
    "KEY_BLOCK",
    "LOOP_FILL_CYCLES",
    "MMUL_MACS",
    "NOT_INSTRUMENTED",
    "PEAK_MACS_PER_CYCLE",
    "SLOTS",
    "cost_of",
    "load_data",
    "loop_invocations",
    "op_counts",
    "phase_counts",
    "phase_cycles",
    "tile_breakdown",
    "tile_cycles",
    "tile_efficiency",
    "tile_macs",
    "tile_report",
]

KERNELS: tuple[str, ...] = ("qk_matmul", "pv_matmul")
#: int8 x int8 MACs per cycle of one AIE1 core (UG1079 "Vector Processing Unit": 8b x 8b -> 128 MACs/clock)
PEAK_MACS_PER_CYCLE = 128
#: MACs of one aie::mmul<4,16,8> call (A 4x16, B 16x8)
MMUL_MACS = 4 * 16 * 8
#: keys per block of the committed build (hw/aie/tile_config.h KEY_BLOCK)
KEY_BLOCK = 32
#: bytes of one PLIO / stream beat (128 bits)
BEAT_BYTES = 16
#: pipeline fill + drain (cycles) per invocation of a loop with a run-time trip count. ASSUMPTION, not
#: measured: UG1079 "Software Pipelining of Loops" illustrates a 9-cycle iteration whose fully pipelined
#: loop runs n iterations in n + 8 cycles (latency - II); the real value depends on the schedule.
LOOP_FILL_CYCLES = 8
DATA_PATH: Path = Path(__file__).resolve().parent / "data" / "aie_tiles.json"

# ------------------------------------------------------------------------------------------------
# Sources
# ------------------------------------------------------------------------------------------------
_WP552 = ("AMD WP552 'AI Engine architecture': a 7-way VLIW per cycle: one scalar op, up to two moves, "
          "two vector loads, one vector store, one vector instruction")
_UG1079_VPU = ("UG1079 'Vector Processing Unit' (AIE1): 8b x 8b -> 128 MACs per vector instruction "
               "(X 1024-bit, Z 256-bit)")
_UG1079_TILE = ("UG1079 'AI Engine Tile Interface': two 256-bit load units and one 256-bit store unit, each "
                "access 128 or 256 bits; two 32-bit input and two 32-bit output streams, a 128-bit stream "
                "access every four cycles")
_UG1076_STREAM = "UG1076 'Reading and Advancing an Input Stream': 4-cycle 128-bit stream operation"
_UG1079_PATHS = ("UG1079 'Vector Register Lane Permutations': MAC, shift-round-saturate (SRS) and upshift "
                 "paths are separate, largely independently usable")
_API_AIE1 = "AIE API (UG1529) AIE1 implementation, aie_api/detail/aie1/"

#: VLIW slots of the AIE1 core and their throughput (issues per cycle; streams: 128-bit beats per cycle).
SLOTS: dict[str, dict[str, Any]] = {
    "vector": {"per_cycle": 1.0, "source": _WP552 + "; " + _UG1079_VPU},
    "load": {"per_cycle": 2.0, "source": _UG1079_TILE + "; " + _WP552},
    "store": {"per_cycle": 1.0, "source": _UG1079_TILE + "; " + _WP552},
    "move": {"per_cycle": 2.0, "source": _WP552},
    "srs": {"per_cycle": 1.0, "source": _UG1079_PATHS + "; ASSUMPTION: one SRS instruction per cycle, "
            "issued beside the vector instruction"},
    "stream_in": {"per_cycle": 0.25, "source": _UG1079_TILE + "; " + _UG1076_STREAM + "; the kernel code reads "
                  "its two input ports one after the other, so their beats add up on one resource"},
    "stream_out": {"per_cycle": 0.25, "source": _UG1079_TILE},
    # the engine kernels (hw/perf/engine_aie.py) also count these:
    "cascade_in": {"per_cycle": 1.0, "source": "UG1079 'AI Engine Tile Interface' (2021.1): 'In each cycle, 384-bits "
                   "can be received and sent by the chained AI Engines' (one 8-lane acc48 cascade word in per cycle); "
                   "AM009 'Cascade Stream Interface'"},
    "cascade_out": {"per_cycle": 1.0, "source": "UG1079 'AI Engine Tile Interface' (2021.1): one 384-bit cascade word "
                    "sent per cycle; AM009 'Cascade Stream Interface'"},
    "scalar": {"per_cycle": 1.0, "source": _WP552 + " (one scalar op per cycle)"},
}


def _entry(issues: dict[str, int], source: str) -> dict[str, Any]:
    return {"issues": issues, "source": source}


_MMUL_SRC = (_API_AIE1 + "mmul_8_8.hpp: mmul_8_8<4,16,8,TypeA,TypeB,48> (also used for uint8 x int8) is four "
             "8-bit mac16/mul16 intrinsics (mul = 2 mul16 + 2 mac16), 128 MACs each; " + _UG1079_VPU)
_SRS_SRC = (_API_AIE1 + "accum.hpp: to_vector of a 32-lane acc48 (two v16acc48) is two srs calls; "
            + _UG1079_PATHS)
_LD_SRC = _UG1079_TILE + ": one access of up to 256 bits"
_MOVE_SRC = "ASSUMPTION: one register move per part (upd/ext); " + _WP552

#: API operation -> slot issues, with the source. Keys are the aie_api_emu.h counter names; a key
#: ``name:*`` matches ``name:<anything>`` (stream ports).
COST_TABLE: dict[str, dict[str, Any]] = {
    "mmul<4,16,8,int8,int8>.mul": _entry({"vector": 4}, _MMUL_SRC),
    "mmul<4,16,8,int8,int8>.mac": _entry({"vector": 4}, _MMUL_SRC),
    "mmul<4,16,8,int8,int8>.to_vector<int32>": _entry({"srs": 2}, _SRS_SRC),
    "mmul<4,16,8,uint8,int8>.mul": _entry({"vector": 4}, _MMUL_SRC),
    "mmul<4,16,8,uint8,int8>.mac": _entry({"vector": 4}, _MMUL_SRC),
    "mmul<4,16,8,uint8,int8>.to_vector<int32>": _entry({"srs": 2}, _SRS_SRC),
    "load_v<16,int8>": _entry({"load": 1}, _LD_SRC + " (128 bits)"),
    "load_v<16,uint8>": _entry({"load": 1}, _LD_SRC + " (128 bits)"),
    "load_v<4,int32>": _entry({"load": 1}, _LD_SRC + " (128 bits)"),
    "load_v<8,int32>": _entry({"load": 1}, _LD_SRC + " (256 bits)"),
    "load_v<128,int8>": _entry({"load": 4}, _UG1079_TILE + ": 1024 bits = four 256-bit loads"),
    "store_v<16,int8>": _entry({"store": 1}, _LD_SRC + " (128 bits)"),
    "store_v<16,uint8>": _entry({"store": 1}, _LD_SRC + " (128 bits)"),
    "store_v<4,int32>": _entry({"store": 1}, _LD_SRC + " (128 bits)"),
    "store_v<8,int32>": _entry({"store": 1}, _LD_SRC + " (256 bits)"),
    "store_v<64,int8>": _entry({"store": 2}, _UG1079_TILE + ": 512 bits = two 256-bit stores"),
    "interleave_zip<8,int32>(step=1)": _entry(
        {"vector": 1}, _API_AIE1 + "interleave.hpp: 32-bit, 8 elements: one shuffle16 on the concatenation"),
    "interleave_zip<16,int32>(step=1)": _entry(
        {"vector": 2}, _API_AIE1 + "interleave.hpp: 32-bit, 16 elements, step 1: two select16"),
    "filter_even<128,int8>(step=8)": _entry(
        {"vector": 2}, _API_AIE1 + "filter.hpp: 8-bit step 8 -> 16-bit step 4 -> 32-bit 32 elements step 2: "
        "two shuffle16"),
    "filter_odd<128,int8>(step=8)": _entry(
        {"vector": 2}, _API_AIE1 + "filter.hpp: as filter_even, two shuffle16"),
    "add<8,int32>": _entry({"vector": 1}, _API_AIE1 + "add.hpp: 32-bit, <= 16 elements: one add16"),
    "zeros<8,int32>": _entry({"move": 1}, "ASSUMPTION: one register clear on a move slot; " + _WP552),
    "concat<16,int8>x4": _entry({"move": 4}, _MOVE_SRC),
    "concat<16,int8>x8": _entry({"move": 8}, _MOVE_SRC),
    "concat<16,uint8>x4": _entry({"move": 4}, _MOVE_SRC),
    "concat<8,int32>x2": _entry({"move": 2}, _MOVE_SRC),
    "extract<8>(vector<int32,32>)": _entry({"move": 1}, _MOVE_SRC),
    "extract<4>(vector<int32,16>)": _entry({"move": 1}, _MOVE_SRC),
    "stream.read128:*": _entry({"stream_in": 1}, _UG1079_TILE + "; " + _UG1076_STREAM),
    "stream.write128:*": _entry({"stream_out": 1}, _UG1079_TILE),
    "scalar_copy<int8>": _entry(
        {"load": 1, "store": 1},
        "ASSUMPTION: qk_prepare's element copy is one scalar byte load and one scalar byte store on the load/store "
        "units (not vectorized by the compiler); " + _UG1079_TILE),
}

_API1 = "AIE API AIE1 implementation (github.com/Xilinx/aie_api, include/aie_api/detail/aie1/"
_MMUL448_SRC = (_API1 + "mmul_8_8.hpp): mmul_8_8<4,8,8,TypeA,TypeB,48> (also uint8 x int8) is two 8-bit mac16 "
                "(mul: two mul16) intrinsics, 128 MACs each; " + _UG1079_VPU)
_ACC_INPLACE = ("ASSUMPTION: no instruction; an aie::mmul built from (or read out as) an accumulator uses the "
                "accumulator registers in place (UG1079 'Matrix Multiplication - mmul': mmul objects can be "
                "initialized from accumulators for chained computations over the cascade)")
_SEL8_SRC = (_API1 + "blend.hpp): an 8-bit select of 32 lanes unpacks both operands to 16 bits, does one select32 and "
             "packs back: ASSUMPTION one vector issue each (3)")

# Engine kernel operations (hw/aie/engine/engine_kernels.h, stream contract v3), appended:
COST_TABLE.update({
    "mmul<4,16,8,int8,int8>.to_vector<int8>": _entry(
        {"srs": 2}, _SRS_SRC.replace("to_vector of", "to_vector<int8> (shift-round-saturate) of") +
        "; the rounding / saturation modes are control-register settings, not extra instructions"),
    "mmul<4,16,8,int8,int8>.to_vector<int16>": _entry(
        {"srs": 2}, _SRS_SRC.replace("to_vector of", "to_vector<int16> (shift-round-saturate) of")),
    "mmul<4,8,8,uint8,int8>.mul": _entry({"vector": 2}, _MMUL448_SRC),
    "mmul<4,8,8,uint8,int8>.mac": _entry({"vector": 2}, _MMUL448_SRC),
    "mmul<4,8,8,uint8,int8>.to_vector<int32>": _entry({"srs": 2}, _SRS_SRC),
    "mmul<4,8,8,uint8,int8>.from_accum": _entry({}, _ACC_INPLACE),
    "mmul<4,8,8,uint8,int8>.to_accum": _entry({}, _ACC_INPLACE),
    "accum<acc48,8>.to_vector<int32>": _entry({"srs": 1}, _UG1079_PATHS + ": one SRS of an 8-lane acc48"),
    "accum<acc48,8>.from_vector<int32>": _entry(
        {"srs": 1}, "AM009 'Register Move Functionality': vector to accumulator through the upshift path; ASSUMPTION: "
        "one issue on the shift-round-saturate/upshift unit"),
    "readincr_v<8>(input_cascade<acc48>)": _entry({"cascade_in": 1}, "AM009 'Cascade Stream Interface': one 384-bit "
                                                  "accumulator word (8 lanes of acc48) per read"),
    "writeincr(output_cascade<acc48>)": _entry({"cascade_out": 1}, "AM009 'Cascade Stream Interface': one 384-bit "
                                               "accumulator word per write"),
    "concat<acc48,8>x4": _entry({"move": 4}, "ASSUMPTION: one accumulator move per 384-bit part (AM009 'Register Move "
                                "Functionality': one AM-register move per cycle); " + _WP552),
    "extract<8>(accum<acc48,32>)": _entry({"move": 1}, "ASSUMPTION: one accumulator move per 384-bit part (AM009 "
                                          "'Register Move Functionality')"),
    "concat<16,uint8>x2": _entry({"move": 2}, _MOVE_SRC),
    "extract<16>(vector<int8,32>)": _entry({"move": 1}, _MOVE_SRC),
    "extract<8>(vector<int16,32>)": _entry({"move": 1}, _MOVE_SRC),
    "extract<4>(vector<int32,32>)": _entry({"move": 1}, _MOVE_SRC),
    "store_v<8,int16>": _entry({"store": 1}, _LD_SRC + " (128 bits)"),
    "load_v<32,int16>": _entry({"load": 2}, _UG1079_TILE + ": 512 bits = two 256-bit loads"),
    "store_v<32,int16>": _entry({"store": 2}, _UG1079_TILE + ": 512 bits = two 256-bit stores"),
    "add<32,int16>(scalar)": _entry({"vector": 1}, _API1 + "add.hpp): one 32-lane 16-bit add (the scalar broadcast "
                                    "as its operand); ASSUMPTION: one vector issue"),
    "min<32,int16>(scalar)": _entry({"vector": 1}, _API1 + "max_min.hpp): one 32-lane 16-bit min; ASSUMPTION: one "
                                    "vector issue"),
    "lt<32,int16>": _entry({"vector": 1}, _API1 + "compare.hpp): one 32-lane 16-bit compare into a mask; ASSUMPTION: "
                           "one vector issue"),
    "lt<32,int16>(scalar)": _entry({"vector": 1}, _API1 + "compare.hpp): one 32-lane 16-bit compare against a "
                                   "broadcast scalar; ASSUMPTION: one vector issue"),
    "select<32,int16>(scalar)": _entry({"vector": 1}, _API1 + "blend.hpp): one select32 on 16-bit lanes"),
    "select<32,int8>(scalar)": _entry({"vector": 3}, _SEL8_SRC),
    # the requantizer's requantization of O (int32 x int16 -> acc80 -> int8)
    "mul<acc80,32,int32,int16>": _entry(
        {"vector": 4, "move": 4}, _API1 + "mul_acc80.hpp): mul_bits_impl<MulOp, 80, 32, int32, 16, int16> has "
        "lanes_per_mul = 8: one lmul8 intrinsic (8 lanes of 32 x 16 bits into v8acc80) per 8 lanes, four for 32; "
        "ASSUMPTION: one register move per lmul8 to place its 8 int32 lanes in the X operand (concat with zeros)"),
    "accum<acc80,32>.to_vector<int8>": _entry(
        {"srs": 10, "move": 2}, _API1 + "accum.hpp): to_vector<int8> of an acc80 accumulator goes through 32 bits "
        "(AIE1 has no SRS from 80-bit lanes to 8 bits; UG1078 'Shift-Round-Saturate': bsrs from 48-bit "
        "accumulators, srs from 80-bit ones to 32-bit vectors): per pair of v8acc80, two srs to v8int32 with the "
        "shift, two ups to one v16acc48, one bsrs (shift 0) to v16int8 -- for 32 lanes 4 srs + 4 ups + 2 bsrs, "
        "charged to the SRS/upshift unit as accum<acc48,8>.from_vector is; two inserts as moves"),
    "extract<8>(vector<int8,32>)": _entry({"move": 1}, _MOVE_SRC),
    "concat<8,int8>x2": _entry({"move": 2}, _MOVE_SRC),
    "broadcast<32,int16>": _entry(
        {"move": 1, "vector": 1}, _API1 + "broadcast.hpp): a 16-bit scalar into 32 lanes is the scalar placed in a "
        "vector register and one shuffle32; ASSUMPTION: one move and one vector issue"),
    "set_rounding": _entry({"scalar": 1}, "ASSUMPTION: one control-register write (AIE1 MD0 rounding field; UG1079 "
                           "'Rounding and Saturation Modes') on the scalar slot"),
    "set_saturation": _entry({"scalar": 1}, "ASSUMPTION: one control-register write (AIE1 MD0 SQ/saturation bits; "
                             "UG1079 'Rounding and Saturation Modes') on the scalar slot"),
})

# Projection GEMM kernel operations (hw/aie/engine/gemm_kernels.h; hw/perf/gemm_proj.py), appended:
COST_TABLE.update({
    "mmul<4,16,8,int8,int8>.from_accum": _entry({}, _ACC_INPLACE),
    "mmul<4,16,8,int8,int8>.to_accum": _entry({}, _ACC_INPLACE),
    "accum<acc48,32>.from_vector<int32>": _entry(
        {"srs": 4}, "AM009 'Register Move Functionality': vector to accumulator through the upshift path; ASSUMPTION: "
        "one issue on the shift-round-saturate/upshift unit per 8 lanes (as accum<acc48,8>.from_vector)"),
    "concat<4,int32>x8": _entry({"move": 8}, _MOVE_SRC),
    "mul<acc80,32,int32,int32>": _entry(
        {"vector": 4, "move": 4}, _API1 + "mul_acc80.hpp): the AIE1 32 x 32-bit multiply into v8acc80 is one lmul8 "
        "intrinsic per 8 lanes, four for 32 (UG1079 'Vector Processing Unit' (AIE1): 32b x 32b real, 8 MACs per "
        "cycle); ASSUMPTION: one register move per lmul8 to place its 8 int32 lanes in the X operand"),
})

#: Operations of the closed form that the emulation cannot count (plain C++, not AIE API calls).
NOT_INSTRUMENTED: frozenset[str] = frozenset({"scalar_copy<int8>"})

# Operations of the published GEMM kernels (MaxEVA, CHARM) rendered in hw/aie/published/gemm_kernels.h and
# counted by aie_api_emu.h / aie1_intrinsics_emu.h; the validation against published designs costs them
# (hw/perf/gemm_kernels.py). Entries with no issues are operations that take no slot of their own.
_AM009_FP = ("AM009 'Floating-Point Vector Unit': eight lanes of fp32 multiply-accumulate, FPMPY one-cycle "
             "throughput; only one vector instruction per cycle, fixed- or floating-point")
_AM009_REGS = ("AM009 'Register Files': pointer (p0..p7), modifier (m0..m7) and circular-buffer (cb/cs) registers "
               "of the load/store address generation")
COST_TABLE.update({
    "mmul<4,8,4,int8,int8>.mul": _entry(
        {"vector": 1}, _API_AIE1 + "mmul_8_8.hpp: mmul_8_8<4,8,4,TypeA,TypeB,48> is one mul16/mac16 intrinsic "
        "of 128 MACs (B grown to a 512-bit X operand, A the 256-bit Z operand); " + _UG1079_VPU),
    "mmul<4,8,4,int8,int8>.mac": _entry(
        {"vector": 1}, _API_AIE1 + "mmul_8_8.hpp: mmul_8_8<4,8,4,TypeA,TypeB,48> is one mac16 intrinsic of 128 "
        "MACs; " + _UG1079_VPU),
    "mmul<4,8,4,int8,int8>.to_vector<int32>": _entry(
        {"srs": 1}, _API_AIE1 + "accum.hpp: to_vector of a 16-lane acc48 (one v16acc48) is one srs call; "
        + _UG1079_PATHS),
    "load_v<32,int8>": _entry({"load": 1}, _LD_SRC + " (256 bits)"),
    "store_v<16,int32>": _entry({"store": 2}, _UG1079_TILE + ": 512 bits = two 256-bit stores"),
    "window_readincr_v<8,int32>": _entry(
        {"load": 1}, _LD_SRC + " (256 bits); the increment is the access's address post-modify (" + _AM009_REGS + ")"),
    "window_readincr_v<8,float>": _entry(
        {"load": 1}, _LD_SRC + " (256 bits); the increment is the access's address post-modify (" + _AM009_REGS + ")"),
    "window_writeincr<8,int32>": _entry(
        {"store": 1}, _LD_SRC + " (256 bits); the increment is the access's address post-modify (" + _AM009_REGS + ")"),
    "window_writeincr<8,float>": _entry(
        {"store": 1}, _LD_SRC + " (256 bits); the increment is the access's address post-modify (" + _AM009_REGS + ")"),
    "add<8,float>": _entry({"vector": 1}, _API_AIE1 + "add.hpp: fp32, <= 8 elements: one fpadd; " + _AM009_FP),
    "fpmac(v8float,v16float,v8float)": _entry(
        {"vector": 1}, "UG1078 fpmac (AIE1 intrinsic): 8 fp32 MACs; " + _AM009_FP),
    "window_read_v8(float)": _entry({"load": 1}, _LD_SRC + " (256 bits)"),
    "window_read_v4(float)": _entry({"load": 1}, _LD_SRC + " (128 bits)"),
    "window_write(v8float)": _entry({"store": 1}, _LD_SRC + " (256 bits)"),
    "upd_w(v16float,v8float)": _entry({"move": 1}, _MOVE_SRC),
    "upd_v(v16float,v4float)": _entry({"move": 1}, _MOVE_SRC),
    "ext_w(v16float)": _entry({"move": 1}, _MOVE_SRC),
    "null_v8float": _entry({"move": 1}, "ASSUMPTION: one register clear on a move slot (as zeros<8,int32>); " + _WP552),
    "undef_v16float": _entry({}, "UG1078 undef_v16float: an undefined register value, no instruction"),
    "window_incr(float)": _entry(
        {}, "ASSUMPTION: no slot of its own, the window pointer's move is folded into the next access's address "
        "post-modify with circular addressing (" + _AM009_REGS + "); charged as one scalar op each it would still "
        "not bind the published kernels (fewer than one per cycle)"),
    "window_decr(float)": _entry(
        {}, "ASSUMPTION: no slot of its own, the window pointer's move is folded into the next access's address "
        "post-modify with circular addressing (" + _AM009_REGS + "); charged as one scalar op each it would still "
        "not bind the published kernels (fewer than one per cycle)"),
})


def cost_of(op: str) -> dict[str, int]:
    """Slot issues of one API operation ``op`` (a counter name of ``aie_api_emu.h``).

    Raises ``KeyError`` for an operation the cost table does not know (a kernel change that adds
    an operation must add its cost, with a source).
    """
    if op in COST_TABLE:
        return dict(COST_TABLE[op]["issues"])
    if ":" in op:
        wild = op.split(":", 1)[0] + ":*"
        if wild in COST_TABLE:
            return dict(COST_TABLE[wild]["issues"])
    raise KeyError(f"no cost for AIE operation {op!r}: add it to COST_TABLE with its source")


# ------------------------------------------------------------------------------------------------
# Closed-form operation counts (loop trip counts of hw/aie/attention_kernels.h)
# ------------------------------------------------------------------------------------------------


def _check(kernel: str, q_rows: int, keys: int, d: int, key_block: int) -> int:
    """Validate a tile geometry; return the key block count N_KB."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if q_rows <= 0 or q_rows % 8:
        raise ValueError(f"q_rows={q_rows}: the vector path needs a positive multiple of 8")
    if key_block <= 0 or key_block % 16:
        raise ValueError(f"key_block={key_block}: the vector path needs a positive multiple of 16")
    if keys <= 0 or keys % key_block:
        raise ValueError(f"keys={keys} is not a positive multiple of key_block={key_block} (pad the keys)")
    if d < 16 or d % 16:
        raise ValueError(f"d={d} must be a positive multiple of 16")
    return keys // key_block


def _scaled(counts: dict[str, int], n: int) -> dict[str, int]:
    return {k: v * n for k, v in counts.items() if v * n}


def phase_counts(kernel: str, q_rows: int, keys: int, d: int, *,
                 key_block: int = KEY_BLOCK) -> dict[str, dict[str, int]]:
    """Operation counts of one tile by phase, in closed form.

    ``kernel`` ``"qk_matmul"`` (S = Q K^T, ``q_rows x keys`` scores from ``q_rows x d`` and
    ``keys x d``) or ``"pv_matmul"`` (O = P V, ``q_rows x d`` from ``q_rows x keys`` and ``keys x d``);
    ``q_rows`` is the build's Q_ROWS (the kernels always compute all of them), ``keys`` a multiple
    of ``key_block`` (the build's KEY_BLOCK), ``d`` the head size. Phases in program order:
    qk ``stream_in`` (header, Q, K blocks), ``qk_prepare``, ``qk_block``, ``stream_out`` (S);
    pv ``stream_in`` (header, V and P blocks), ``zero_o``, ``pv_prepare``, ``pv_block``, ``stream_out`` (O).
    Keys are ``aie_api_emu.h`` counter names (plus :data:`NOT_INSTRUMENTED` scalar work).
    """
    n_kb = _check(kernel, q_rows, keys, d, key_block)
    r, kb = q_rows, key_block
    if kernel == "qk_matmul":
        nd = d // 16
        q_beats = 1 + r * d // BEAT_BYTES           # header + Q
        k_beats = n_kb * kb * d // BEAT_BYTES
        s_beats = n_kb * r * kb // 4                 # 4 int32 a beat
        c_blocks = n_kb * (kb // 4) * (r // 8)       # jb x ib per key block
        per_c_block = {                              # vec::qk_block body (db = 0 .. nd-1)
            "mmul<4,16,8,int8,int8>.mul": 1,
            "mmul<4,16,8,int8,int8>.mac": nd - 1,
            "mmul<4,16,8,int8,int8>.to_vector<int32>": 1,
            "load_v<16,int8>": 4 * nd,               # qk_a: 4 rows of K
            "concat<16,int8>x4": nd,
            "load_v<128,int8>": nd,                  # a 16x8 Q^T tile
            "extract<8>(vector<int32,32>)": 4,
            "interleave_zip<8,int32>(step=1)": 2,
            "concat<8,int32>x2": 2,
            "interleave_zip<16,int32>(step=1)": 1,
            "extract<4>(vector<int32,16>)": 8,
            "store_v<4,int32>": 8,
        }
        return {
            "stream_in": {"stream.read128:q": q_beats, "stream.read128:k": k_beats,
                          "store_v<16,int8>": q_beats + k_beats},     # AdfIn: read, then store 16 bytes
            "qk_prepare": {"scalar_copy<int8>": r * d},
            "qk_block": _scaled(per_c_block, c_blocks),
            "stream_out": {"load_v<4,int32>": s_beats, "stream.write128:s": s_beats},  # AdfOut
        }
    n8, nj = d // 8, kb // 16
    v_beats = 1 + n_kb * kb * d // BEAT_BYTES        # header + V blocks
    p_beats = n_kb * r * kb // BEAT_BYTES
    o_beats = r * d // 4
    prep_iters = n_kb * nj * (d // 16) * 2           # jb x c x h per key block
    c_blocks = n_kb * (r // 4) * n8                  # ib x eb per key block
    per_c_block = {                                  # vec::pv_block body (jb = 0 .. nj-1, then 4 rows of O)
        "mmul<4,16,8,uint8,int8>.mul": 1,
        "mmul<4,16,8,uint8,int8>.mac": nj - 1,
        "mmul<4,16,8,uint8,int8>.to_vector<int32>": 1,
        "load_v<16,uint8>": 4 * nj,                  # pv_a: 4 rows of P
        "concat<16,uint8>x4": nj,
        "load_v<128,int8>": nj,                      # a 16x8 V tile
        "extract<8>(vector<int32,32>)": 4,
        "load_v<8,int32>": 4,
        "add<8,int32>": 4,
        "store_v<8,int32>": 4,
    }
    per_prep = {                                     # vec::pv_prepare body: 8 rows x 16 features
        "load_v<16,int8>": 8,
        "concat<16,int8>x8": 1,
        "filter_even<128,int8>(step=8)": 1,
        "filter_odd<128,int8>(step=8)": 1,
        "store_v<64,int8>": 2,
    }
    return {
        "stream_in": {"stream.read128:v": v_beats, "stream.read128:p": p_beats,
                      "store_v<16,int8>": v_beats, "store_v<16,uint8>": p_beats},
        "zero_o": {"zeros<8,int32>": r * d // 8, "store_v<8,int32>": r * d // 8},
        "pv_prepare": _scaled(per_prep, prep_iters),
        "pv_block": _scaled(per_c_block, c_blocks),
        "stream_out": {"load_v<4,int32>": o_beats, "stream.write128:o": o_beats},
    }


def op_counts(kernel: str, q_rows: int, keys: int, d: int, *, key_block: int = KEY_BLOCK,
              instrumented_only: bool = True) -> dict[str, int]:
    """Closed-form operation counts of one tile (summed over phases). With ``instrumented_only``
    (default) only what the emulation counts, i.e. comparable with the test bench's ``--op-counts``."""
    total: dict[str, int] = {}
    for counts in phase_counts(kernel, q_rows, keys, d, key_block=key_block).values():
        for op, n in counts.items():
            if instrumented_only and op in NOT_INSTRUMENTED:
                continue
            total[op] = total.get(op, 0) + n
    return {op: n for op, n in sorted(total.items()) if n}


def loop_invocations(kernel: str, q_rows: int, keys: int, d: int, *,
                     key_block: int = KEY_BLOCK) -> dict[str, int]:
    """Invocations of loops with a run-time trip count (each pays :data:`LOOP_FILL_CYCLES`), by phase.

    qk: ``read_beats`` of Q (1) and of each K block; ``qk_prepare``'s ``db`` loop (once per 8 rows);
    ``qk_block``'s ``db`` mac loop (once per C block, when D > 16); ``write_beats`` of each S block.
    pv: ``read_beats`` of each V and P block; ``zero_o`` (1); ``pv_prepare``'s ``c`` loop (once per
    16 keys); ``pv_block``'s ``eb`` loop (once per 4 rows); ``write_beats`` of O (1). Loops with
    compile-time trip counts (``jb``, ``ib``, ``h``, ``dd``, ``ii``, pv's ``jb``) are assumed unrolled
    or flattened into their parent.
    """
    n_kb = _check(kernel, q_rows, keys, d, key_block)
    if kernel == "qk_matmul":
        mac_loops = (key_block // 4) * (q_rows // 8) if d > 16 else 0
        return {"stream_in": 1 + n_kb, "qk_prepare": q_rows // 8, "qk_block": n_kb * mac_loops,
                "stream_out": n_kb}
    return {"stream_in": 2 * n_kb, "zero_o": 1, "pv_prepare": n_kb * (key_block // 16),
            "pv_block": n_kb * (q_rows // 4), "stream_out": 1}


# ------------------------------------------------------------------------------------------------
# Cycles
# ------------------------------------------------------------------------------------------------


def phase_cycles(counts: dict[str, int]) -> dict[str, float]:
    """Cycles each slot needs for the operations ``counts`` (issues / slot throughput); the phase's
    modeled cycles (without loop fills) are the largest value."""
    issues = dict.fromkeys(SLOTS, 0)
    for op, n in counts.items():
        for slot, k in cost_of(op).items():
            issues[slot] += k * n
    return {slot: issues[slot] / SLOTS[slot]["per_cycle"] for slot in SLOTS}


_STREAM_PHASES = ("stream_in", "stream_out")


def tile_breakdown(kernel: str, q_rows: int, keys: int, d: int, *,
                   key_block: int = KEY_BLOCK) -> dict[str, float]:
    """Modeled AIE core cycles of one tile, by term.

    Keys: ``stream_in`` (reading the input streams into local memory), ``compute`` (the vector and
    scalar loops), ``stream_out`` (writing S / O), ``total`` (their sum, :func:`tile_cycles`); and the
    parts: ``compute.<phase>`` (bottleneck slot cycles of each compute phase),
    ``<term>.loop_fill`` (pipeline fills of that term's run-time loops). Each term already includes
    its fills. Units: AIE clock cycles.
    """
    phases = phase_counts(kernel, q_rows, keys, d, key_block=key_block)
    fills = loop_invocations(kernel, q_rows, keys, d, key_block=key_block)
    out: dict[str, float] = {"stream_in": 0.0, "compute": 0.0, "stream_out": 0.0}
    fill_of = {"stream_in": 0.0, "compute": 0.0, "stream_out": 0.0}
    for phase, counts in phases.items():
        term = phase if phase in _STREAM_PHASES else "compute"
        cycles = max(phase_cycles(counts).values())
        fill = float(LOOP_FILL_CYCLES * fills[phase])
        if term == "compute":
            out[f"compute.{phase}"] = cycles
        out[term] += cycles + fill
        fill_of[term] += fill
    for term, fill in fill_of.items():
        out[f"{term}.loop_fill"] = fill
    out["total"] = out["stream_in"] + out["compute"] + out["stream_out"]
    return out


def tile_cycles(kernel: str, q_rows: int, keys: int, d: int, *, key_block: int = KEY_BLOCK) -> float:
    """Modeled AIE core cycles of one tile: ``stream_in + compute + stream_out`` of
    :func:`tile_breakdown` (the kernel code does them one after the other). Units: AIE clock cycles."""
    return tile_breakdown(kernel, q_rows, keys, d, key_block=key_block)["total"]


def tile_macs(kernel: str, q_rows: int, keys: int, d: int, *, key_block: int = KEY_BLOCK) -> int:
    """MACs one tile executes: ``q_rows * keys * d`` for both kernels (all Q_ROWS rows and all padded
    keys are computed). Units: multiply-accumulates."""
    _check(kernel, q_rows, keys, d, key_block)
    return q_rows * keys * d


def tile_efficiency(kernel: str, q_rows: int, keys: int, d: int, *, key_block: int = KEY_BLOCK) -> float:
    """Fraction of the core's int8 peak a tile reaches: ``MACs / (cycles * 128)`` (modeled, 0..1)."""
    return tile_macs(kernel, q_rows, keys, d, key_block=key_block) / (
        tile_cycles(kernel, q_rows, keys, d, key_block=key_block) * PEAK_MACS_PER_CYCLE)


def tile_report(kernel: str, q_rows: int, keys: int, d: int, *, key_block: int = KEY_BLOCK) -> dict[str, Any]:
    """Everything the model says about one tile (JSON-ready): geometry, MACs, the breakdown, the
    bottleneck slot of each phase, efficiency (whole tile and compute only). Modeled."""
    phases = phase_counts(kernel, q_rows, keys, d, key_block=key_block)
    breakdown = tile_breakdown(kernel, q_rows, keys, d, key_block=key_block)
    macs = tile_macs(kernel, q_rows, keys, d, key_block=key_block)
    bottlenecks = {}
    for phase, counts in phases.items():
        slots = phase_cycles(counts)
        slot = max(slots, key=lambda s: slots[s])
        bottlenecks[phase] = {"slot": slot, "cycles": slots[slot]}
    return {
        "kernel": kernel, "q_rows": q_rows, "keys": keys, "d": d, "key_block": key_block,
        "macs": macs,
        "cycles": breakdown["total"],
        "breakdown": breakdown,
        "bottleneck": bottlenecks,
        "efficiency": macs / (breakdown["total"] * PEAK_MACS_PER_CYCLE),
        "compute_efficiency": macs / (breakdown["compute"] * PEAK_MACS_PER_CYCLE),
    }


def load_data(path: Path | str = DATA_PATH) -> dict[str, Any]:
    """The committed instrumented data (``hw/perf/data/aie_tiles.json``)."""
    return json.loads(Path(path).read_text())

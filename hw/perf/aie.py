"""The AIE1 core's cost table: the VLIW slots and what each AIE API operation costs on them. MODELED figures
(no board, no aiecompiler, no aiesimulator here); the kernels' cycles come from their own instrumented operation
counts times this table:

The full description: ``docs/internals/hw.md``, section ``hw/perf/aie.py``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "COST_TABLE",
    "LOOP_FILL_CYCLES",
    "PEAK_MACS_PER_CYCLE",
    "BANK_WORD_BYTES",
    "DATA_MEMORY_BANKS",
    "LOOP_ENTRY_SCALAR_OPS",
    "LOOP_ITER_SCALAR_OPS",
    "SLOTS",
    "bank_conflict_cycles",
    "cost_of",
    "loop_fill_cycles",
    "phase_cycles",
]

#: int8 x int8 MACs per cycle of one AIE1 core (UG1079 "Vector Processing Unit": 8b x 8b -> 128 MACs/clock)
PEAK_MACS_PER_CYCLE = 128
#: pipeline fill + drain (cycles) per invocation of a loop with a run-time trip count. ASSUMPTION, not
#: measured: UG1079 "Software Pipelining of Loops" illustrates a 9-cycle iteration whose fully pipelined
#: loop runs n iterations in n + 8 cycles (latency - II); the real value depends on the schedule.
LOOP_FILL_CYCLES = 8
#: scalar operations per iteration of a loop that is not the innermost of its nest: the counter's increment and the
#: conditional branch (``VCK_LOOP_ITER`` in ``hw/aie/aie_api_emu.h``; a test reads it there). ASSUMPTION: one scalar
#: ALU issue each (WP552: one scalar slot).
LOOP_ITER_SCALAR_OPS = 2
#: scalar operations per entry of an innermost, software-pipelined loop: its count into the zero-overhead loop's
#: count register (``VCK_LOOP_ENTRY``); its iterations cost no scalar issue (AM009 'Register Files': loop start /
#: end / count registers ls, le, lc). ASSUMPTION: one scalar issue.
LOOP_ENTRY_SCALAR_OPS = 1

#: AIE1 data memory of a tile: eight single-port banks of 256 x 128-bit words (4 KB each, 32 KB); an even and an odd
#: bank are interleaved into a double bank and a 256-bit access is an even and odd pair, i.e. consecutive 128-bit
#: words alternate between the two; the three ports (two loads, one store) run concurrently when each accesses a
#: different bank (UG1079 'AI Engine Memory'; AM009 'Load and Store Unit': 'divided and interleaved as odd and even
#: banks').
DATA_MEMORY_BANKS = 8
BANK_WORD_BYTES = 16


def bank_conflict_cycles(load_offsets: list[int]) -> int:
    """Extra cycles of one loop iteration's 128-bit loads from bank conflicts, under the buffer placement the
    generator makes (each buffer pinned to its kernel's tile, its address and bank left to aiecompiler). Two loads
    issue a cycle (two load units); in one double bank, consecutive 128-bit words alternate between the even and
    the odd bank, so a load of an even word paired with a load of an odd word never conflicts, whatever the
    buffers' addresses. ``load_offsets``: byte offsets of the iteration's 128-bit loads from a 32-byte aligned
    base (the kernels' buffers are). The loads pair even with odd as far as they go; each leftover pair of one
    parity MAY share a bank (the placement does not say) and is counted as one extra cycle. MODELED."""
    words = [o // BANK_WORD_BYTES for o in load_offsets]
    even = sum(1 for w in words if w % 2 == 0)
    odd = len(words) - even
    return abs(even - odd) // 2


def loop_fill_cycles() -> float:
    """Pipeline fill + drain (cycles) per entry of a software-pipelined loop: ``loop_fill_cycles`` of
    :mod:`vckattn.hw.perf.calibration` (:data:`LOOP_FILL_CYCLES` is its assumed value)."""
    from . import calibration

    return float(calibration.param("loop_fill_cycles"))


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
_UG1079_PATHS = ("UG1079 'Vector Register Lane Permutations': MAC, shift-round-saturate (SRS) and upshift "
                 "paths are separate, largely independently usable")
_API_AIE1 = "AIE API (UG1529) AIE1 implementation, aie_api/detail/aie1/"

#: VLIW slots of the AIE1 core and their throughput (issues per cycle).
SLOTS: dict[str, dict[str, Any]] = {
    "vector": {"per_cycle": 1.0, "source": _WP552 + "; " + _UG1079_VPU},
    "load": {"per_cycle": 2.0, "source": _UG1079_TILE + "; " + _WP552},
    "store": {"per_cycle": 1.0, "source": _UG1079_TILE + "; " + _WP552},
    "move": {"per_cycle": 2.0, "source": _WP552},
    "srs": {"per_cycle": 1.0, "source": _UG1079_PATHS + "; ASSUMPTION: one SRS instruction per cycle, "
            "issued beside the vector instruction"},
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

#: API operation -> slot issues, with the source. Keys are the aie_api_emu.h counter names.
COST_TABLE: dict[str, dict[str, Any]] = {
    "mmul<4,16,8,int8,int8>.mul": _entry({"vector": 4}, _MMUL_SRC),
    "mmul<4,16,8,int8,int8>.mac": _entry({"vector": 4}, _MMUL_SRC),
    "mmul<4,16,8,int8,int8>.to_vector<int32>": _entry({"srs": 2}, _SRS_SRC),
    "load_v<16,int8>": _entry({"load": 1}, _LD_SRC + " (128 bits)"),
    "load_v<16,uint8>": _entry({"load": 1}, _LD_SRC + " (128 bits)"),
    "load_v<4,int32>": _entry({"load": 1}, _LD_SRC + " (128 bits)"),
    "load_v<8,int32>": _entry({"load": 1}, _LD_SRC + " (256 bits)"),
    "store_v<16,int8>": _entry({"store": 1}, _LD_SRC + " (128 bits)"),
    "store_v<4,int32>": _entry({"store": 1}, _LD_SRC + " (128 bits)"),
    "store_v<8,int32>": _entry({"store": 1}, _LD_SRC + " (256 bits)"),
    "add<8,int32>": _entry({"vector": 1}, _API_AIE1 + "add.hpp: 32-bit, <= 16 elements: one add16"),
    "concat<16,int8>x4": _entry({"move": 4}, _MOVE_SRC),
    "concat<16,int8>x8": _entry({"move": 8}, _MOVE_SRC),
}

_API1 = "AIE API AIE1 implementation (github.com/Xilinx/aie_api, include/aie_api/detail/aie1/"
_MMUL448_SRC = (_API1 + "mmul_8_8.hpp): mmul_8_8<4,8,8,TypeA,TypeB,48> (also uint8 x int8) is two 8-bit mac16 "
                "(mul: two mul16) intrinsics, 128 MACs each; " + _UG1079_VPU)
_ACC_INPLACE = ("ASSUMPTION: no instruction; an aie::mmul built from (or read out as) an accumulator uses the "
                "accumulator registers in place (UG1079 'Matrix Multiplication - mmul': mmul objects can be "
                "initialized from accumulators for chained computations over the cascade)")
_SEL8_SRC = (_API1 + "blend.hpp): an 8-bit select of 32 lanes unpacks both operands to 16 bits, does one select32 and "
             "packs back: ASSUMPTION one vector issue each (3)")

# Engine kernel operations (hw/aie/engine/engine_kernels.h, stream contract v3):
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

# Scalar work the kernels annotate where they write it (VCK_SCALAR / VCK_SCALAR_LOAD / VCK_SCALAR_STORE in
# hw/aie/engine/*.h, counted by aie_api_emu.h):
COST_TABLE.update({
    "scalar": _entry({"scalar": 1}, _WP552 + ": one scalar ALU operation (arithmetic, compare, branch, shift, mask) "
                     "a cycle on the scalar slot"),
    "scalar_load": _entry({"load": 1}, "AM009 'Load and Store Unit' / " + _UG1079_TILE + ": a scalar load uses one of "
                          "the two load units"),
    "scalar_store": _entry({"store": 1}, "AM009 'Load and Store Unit' / " + _UG1079_TILE + ": a scalar store uses the "
                           "store unit"),
})

# Projection GEMM kernel operations (hw/aie/engine/gemm_kernels.h; hw/perf/gemm_proj.py):
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
    "null_v8float": _entry({"move": 1}, "ASSUMPTION: one register clear on a move slot; " + _WP552),
    "undef_v16float": _entry({}, "UG1078 undef_v16float: an undefined register value, no instruction"),
    # ARIES's fp32 GEMM kernel (hw/aie/published/gemm_kernels.h): the same AIE1 operations through the AIE API
    "load_v<4,float>": _entry({"load": 1}, _LD_SRC + " (128 bits)"),
    "load_v<8,float>": _entry({"load": 1}, _LD_SRC + " (256 bits)"),
    "store_v<8,float>": _entry({"store": 1}, _LD_SRC + " (256 bits)"),
    "insert<4>(vector<float,16>)": _entry({"move": 1}, _MOVE_SRC + " (as upd_v)"),
    "insert<8>(vector<float,16>)": _entry({"move": 1}, _MOVE_SRC + " (as upd_w)"),
    "extract<8>(vector<float,16>)": _entry({"move": 1}, _MOVE_SRC + " (as ext_w)"),
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
    raise KeyError(f"no cost for AIE operation {op!r}: add it to COST_TABLE with its source")


def phase_cycles(counts: dict[str, int]) -> dict[str, float]:
    """Cycles each slot needs for the operations ``counts`` (issues / slot throughput); the phase's
    modeled cycles (without loop fills) are the largest value."""
    issues = dict.fromkeys(SLOTS, 0)
    for op, n in counts.items():
        for slot, k in cost_of(op).items():
            issues[slot] += k * n
    return {slot: issues[slot] / SLOTS[slot]["per_cycle"] for slot in SLOTS}

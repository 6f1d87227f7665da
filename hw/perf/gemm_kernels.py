"""Published AIE1 GEMM kernels costed from their own code: the kernel level of the validation against
published designs (:mod:`.published`). MODELED figures, from the kernels' operation counts and the
attention model's own cost table (:data:`vckattn.hw.perf.aie.COST_TABLE`) and slot model.

The full description: ``docs/internals/hw.md``, section ``hw/perf/gemm_kernels.py``.
"""

from __future__ import annotations

from typing import Any

from . import aie, calibration

__all__ = [
    "FP32_ACC_CYCLES",
    "KERNELS",
    "PEAK_MACS",
    "PUBLISHED_EFFICIENCY",
    "PROGRAM_MEMORY_BYTES",
    "BUNDLE_BYTES",
    "accumulator_drain_cycles",
    "buffer_ports",
    "flattened_levels",
    "check_dims",
    "kernel_breakdown",
    "kernel_cycles",
    "kernel_efficiency",
    "kernel_macs",
    "loop_fills",
    "op_counts",
]

#: kernel -> (dimension names, data type of its MACs or adds)
KERNELS: dict[str, tuple[tuple[str, ...], str]] = {
    "maxeva_int8": (("m", "k", "n"), "int8"),
    "maxeva_add_int32": (("elements",), "int32"),
    "maxeva_add_float": (("elements",), "fp32"),
    "charm_fp32": (("h1", "w1", "w2"), "fp32"),
    "charm_fp32_acc": (("h1", "w1", "w2"), "fp32"),
    "aries_fp32": (("ti", "tk", "tj"), "fp32"),
    "aries_fp32_acc": (("ti", "tk", "tj"), "fp32"),
}

#: MACs per cycle of one AIE1 core (UG1079 'Vector Processing Unit': 8b x 8b -> 128; AM009
#: 'Floating-Point Vector Unit': eight fp32 lanes)
PEAK_MACS: dict[str, int] = {"int8": aie.PEAK_MACS_PER_CYCLE, "fp32": 8}

#: cycles between two fpmac on the same accumulator: AM009 'Floating-Point Vector Unit' (FPACC, a
#: two-stage accumulator); Vitis Tutorials (XD100) IIR part 2b: "a floating-point accumulation requires
#: two cycles" (a NOP between dependent VFPMACs)
FP32_ACC_CYCLES = 2

#: program memory of one AIE1 tile, bytes: AM009 'AI Engine Tile Architecture' / 'Program Memory' (16 KB)
PROGRAM_MEMORY_BYTES = 16 * 1024
#: bytes of one full VLIW bundle: AM009 'Instruction Fetch and Decode Unit' (instructions up to 128 bits).
#: ASSUMPTION for the program-memory check: one full bundle per cycle of a flattened schedule
BUNDLE_BYTES = 16
#: accumulator registers of AIE1, as 768-bit registers: AM009 'Register Files' (bm0..bm3, each two 384-bit
#: aml/amh halves); one aie::mmul<4,8,4,int8,int8> result (16 lanes acc48) fills one
ACC_REGISTERS_768 = 4

#: single-kernel efficiencies published for these kernels (MACs / (cycles x peak)), for comparison only:
#: kernel -> (dims, efficiency, source)
PUBLISHED_EFFICIENCY: dict[str, tuple[tuple[int, ...], float, str]] = {
    "charm_fp32": ((32, 32, 32), 0.95, "CHARM README (github.com/arc-research-lab/CHARM): mm_kernel0 'achieves 95% "
                                       "efficiency when calculating 32*32*32 MM' (AMD's cycle-accurate simulator)"),
    "aries_fp32": ((32, 32, 32), 4096 / 4448,
                   "ARIES (github.com/arc-research-lab/Aries), example_new/example_Versal/FCCM25_Tutorial/"
                   "2_example_gemm_opt/gemm.ipynb: kernel_gemm0 (aie_fp32_v0, 32x32x32) 4448 cycles in the vendor "
                   "tools' AIE profile, 'Measured Efficiency: 4096 / 4448'"),
}


def check_dims(kernel: str, dims: tuple[int, ...]) -> tuple[int, ...]:
    """Validate ``dims`` for ``kernel`` (ValueError with the rule otherwise); returns them as ints."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {tuple(KERNELS)}, got {kernel!r}")
    names = KERNELS[kernel][0]
    if len(dims) != len(names) or any(int(x) != x or x <= 0 for x in dims):
        raise ValueError(f"{kernel} needs positive integer dimensions {names}, got {dims}")
    d = tuple(int(x) for x in dims)
    if kernel == "maxeva_int8" and (d[0] % 8 or d[1] % 8 or d[2] % 8):
        raise ValueError(f"maxeva_int8 {d}: M and N must be multiples of 8 (2 x 2 blocks of 4), K of 8")
    if kernel.startswith("maxeva_add") and d[0] % 8:
        raise ValueError(f"{kernel} {d}: the element count must be a multiple of 8")
    if kernel.startswith("charm_fp32") and (d[0] % 8 or d[1] % 8 or d[2] % 2):
        raise ValueError(f"{kernel} {d}: H1 and W1 must be multiples of 8, W2 of 2")
    if kernel.startswith("aries_fp32") and (d[0] % 2 or d[1] % 8 or d[2] % 8):
        raise ValueError(f"{kernel} {d}: TI must be a multiple of 2, TK and TJ of 8")
    return d


def op_counts(kernel: str, dims: tuple[int, ...]) -> dict[str, int]:
    """Closed-form operation counts of one call (keys: the emulations' counter names, as
    :data:`vckattn.hw.perf.aie.COST_TABLE`); only non-zero counts."""
    d = check_dims(kernel, dims)
    if kernel == "maxeva_int8":
        m, k, n = d
        groups = (m // 8) * (n // 8)  # 2 x 2 register blocks of 4 x 4
        steps = k // 8
        c = {"mmul<4,8,4,int8,int8>.mul": 4 * groups,
             "mmul<4,8,4,int8,int8>.mac": 4 * groups * (steps - 1),
             "mmul<4,8,4,int8,int8>.to_vector<int32>": 4 * groups,
             "load_v<32,int8>": 4 * groups * steps,
             "store_v<16,int32>": 4 * groups}
    elif kernel.startswith("maxeva_add"):
        t = "int32" if kernel.endswith("int32") else "float"
        s = d[0] // 8
        c = {f"window_readincr_v<8,{t}>": 2 * s, f"add<8,{t}>": s, f"window_writeincr<8,{t}>": s}
    elif kernel.startswith("aries_fp32"):
        ti, tk, tj = d
        acc_in = kernel == "aries_fp32_acc"
        blocks = (ti // 2) * (tj // 8)
        groups = tk // 8  # reduction groups of 8 per block: tk/8 - 1 in the loop, the last after it
        c = {"fpmac(v8float,v16float,v8float)": 16 * groups * blocks,
             "extract<8>(vector<float,16>)": 16 * groups * blocks,  # one lhs_v16.extract<8> per fpmac
             "load_v<4,float>": 4 * groups * blocks,  # A: 4 elements of each of the two rows, twice a group
             "insert<4>(vector<float,16>)": 4 * groups * blocks,
             "load_v<8,float>": 8 * groups * blocks + (2 * blocks if acc_in else 0),  # B: one row a step
             "insert<8>(vector<float,16>)": 8 * groups * blocks,
             "null_v8float": 0 if acc_in else 2 * blocks,
             "undef_v16float": 2,
             "store_v<8,float>": 2 * blocks}
    else:
        h1, w1, w2 = d
        acc_in = kernel == "charm_fp32_acc"
        blocks = (h1 // 8) * (w2 // 2)
        groups = w1 // 8  # reduction groups of 8 per block: w1/8 - 1 in the loop, the last after it
        c = {"fpmac(v8float,v16float,v8float)": 16 * groups * blocks,
             "ext_w(v16float)": 16 * groups * blocks,
             "window_read_v8(float)": 1 + 8 * groups * blocks + (2 * blocks if acc_in else 0),
             "upd_w(v16float,v8float)": 1 + 8 * groups * blocks,
             "window_read_v4(float)": 2 + 4 * groups * blocks,
             "upd_v(v16float,v4float)": 2 + 4 * groups * blocks,
             "null_v8float": 0 if acc_in else 2 * blocks,
             "undef_v16float": 2,
             "window_write(v8float)": 2 * blocks,
             # set-up: B and A; per block: A every column, B 2 per looped group and 3 in the last,
             # C 2, acc_in 2
             "window_incr(float)": 2 + blocks * (8 * groups + 2 * (groups - 1) + 3 + 2 + (2 if acc_in else 0)),
             "window_decr(float)": 1 + blocks * (2 * (groups - 1) + 1)}
    return {op: v for op, v in sorted(c.items()) if v}


def kernel_macs(kernel: str, dims: tuple[int, ...]) -> int:
    """Multiply-accumulates of one call (adds for the adder kernels)."""
    d = check_dims(kernel, dims)
    if kernel.startswith("maxeva_add"):
        return d[0]
    return d[0] * d[1] * d[2]


def buffer_ports(kernel: str) -> int:
    """Buffer (window) ports of the kernel: A, B, C (+ acc_in); in_1, in_2, out."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {tuple(KERNELS)}, got {kernel!r}")
    return 4 if kernel in ("charm_fp32_acc", "aries_fp32_acc") else 3


def _bundles(kernel: str, dims: tuple[int, ...]) -> float:
    """VLIW bundles of the straight-line code of one call: the issue-bound cycles of its counts plus the
    accumulator drains (one bundle a cycle)."""
    return max(aie.phase_cycles(op_counts(kernel, dims)).values()) + accumulator_drain_cycles(kernel, dims)


def flattened_levels(kernel: str, dims: tuple[int, ...]) -> tuple[str, ...]:
    """The loops of MaxEVA's kernels that are flattened as the code asks (``chess_flatten_loop``) AND whose
    straight-line code fits :data:`PROGRAM_MEMORY_BYTES` at :data:`BUNDLE_BYTES` a bundle, outermost first:
    ``("i", "j", "k")`` is the whole int8 kernel, ``("j", "k")`` one iteration of its ``i`` loop (one pair
    of block rows), ``("k",)`` one 2 x 2 block; the adder's one loop is ``("i",)``. CHARM's and ARIES's kernels ask
    for no flattening: ``()``."""
    d = check_dims(kernel, dims)
    if kernel.startswith(("charm_fp32", "aries_fp32")):
        return ()
    if kernel.startswith("maxeva_add"):
        return ("i",) if _bundles(kernel, d) * BUNDLE_BYTES <= PROGRAM_MEMORY_BYTES else ()
    m, k, n = d
    for levels, region in ((("i", "j", "k"), (m, k, n)), (("j", "k"), (8, k, n)), (("k",), (8, k, 8))):
        if _bundles(kernel, region) * BUNDLE_BYTES <= PROGRAM_MEMORY_BYTES:
            return levels
    return ()


def loop_fills(kernel: str, dims: tuple[int, ...]) -> int:
    """Pipeline fills of one call. MaxEVA's kernels: one for the flattened straight-line schedule, times the
    iterations of every loop left as a loop because the flattened code would not fit program memory
    (:func:`flattened_levels`): 1 when the whole kernel fits, M/8 when only an ``i`` iteration does,
    (M/8)(N/8) when only a block does. CHARM's reduction loop (``chess_prepare_for_pipelining``) is entered
    once per 8 x 2 block when it iterates at all (W1 >= 16); its i and j loops hold a loop, so they are not
    software-pipelined and add no fill of their own."""
    d = check_dims(kernel, dims)
    if kernel.startswith("charm_fp32"):
        h1, w1, w2 = d
        return (h1 // 8) * (w2 // 2) if w1 // 8 - 1 >= 1 else 0
    if kernel.startswith("aries_fp32"):  # the same loop structure on 2 x 8 blocks
        ti, tk, tj = d
        return (ti // 2) * (tj // 8) if tk // 8 - 1 >= 1 else 0
    levels = flattened_levels(kernel, d)
    if kernel.startswith("maxeva_add"):
        return 1 if levels else d[0] // 8
    m, _k, n = d
    return {("i", "j", "k"): 1, ("j", "k"): m // 8}.get(levels, (m // 8) * (n // 8))


def accumulator_drain_cycles(kernel: str, dims: tuple[int, ...]) -> float:
    """Cycles of one call in which the MACs wait for the accumulator registers (AM009 'Register Files': four
    768-bit registers on AIE1). MaxEVA's int8 kernel holds four 16-lane acc48 results per 2 x 2 block, all
    :data:`ACC_REGISTERS_768`: each block's drain -- four ``to_vector`` (SRS) and four 512-bit stores, the
    busier slot under :func:`vckattn.hw.perf.aie.phase_cycles` -- cannot overlap the next block's MACs.
    0 for the other kernels (CHARM's fp32 sums live in vector registers; the adders hold no accumulator)."""
    d = check_dims(kernel, dims)
    if kernel != "maxeva_int8":
        return 0.0
    accumulators = 4  # c00 c01 c10 c11 of the 2 x 2 blocking
    if accumulators < ACC_REGISTERS_768:
        return 0.0
    m, _k, n = d
    blocks = (m // 8) * (n // 8)
    tail = aie.phase_cycles({"mmul<4,8,4,int8,int8>.to_vector<int32>": 4, "store_v<16,int32>": 4})
    return blocks * max(tail.values())


def kernel_breakdown(kernel: str, dims: tuple[int, ...],
                     params: dict[str, float] | None = None) -> dict[str, Any]:
    """Modeled cycles of one call, by term (AIE clock cycles): ``slots`` (cycles each VLIW slot needs),
    ``issue`` (the busiest slot), ``bottleneck_slot``, ``fp32_accumulation`` (dependence bound, 0 for
    integer kernels), ``compute`` (the larger of the two), ``accumulator_drain``, ``loop_fill``,
    ``buffer_sync``, ``total``. ``params`` overrides calibration parameters by name (the fit uses it)."""
    def p(name: str) -> float:
        return float(params[name]) if params and name in params else float(calibration.param(name))

    counts = op_counts(kernel, dims)
    slots = aie.phase_cycles(counts)
    slot = max(slots, key=lambda s: slots[s])
    chain = 0.0
    if kernel.startswith(("charm_fp32", "aries_fp32")):
        accumulators = 2  # acc0, acc1: one fpmac each in turn
        chain = FP32_ACC_CYCLES * counts["fpmac(v8float,v16float,v8float)"] / accumulators
    compute = max(slots[slot], chain)
    drain = accumulator_drain_cycles(kernel, dims)
    fill = p("loop_fill_cycles") * loop_fills(kernel, dims)
    sync = p("sync_cycles_per_port") * buffer_ports(kernel)
    return {"kernel": kernel, "dims": list(check_dims(kernel, dims)), "slots": slots, "issue": slots[slot],
            "bottleneck_slot": slot, "fp32_accumulation": chain, "compute": compute, "accumulator_drain": drain,
            "flattened": list(flattened_levels(kernel, dims)), "loop_fill": fill, "buffer_sync": sync,
            "total": compute + drain + fill + sync}


def kernel_cycles(kernel: str, dims: tuple[int, ...], params: dict[str, float] | None = None) -> float:
    """Modeled AIE cycles of one call of ``kernel`` on ``dims`` (:func:`kernel_breakdown` ``total``)."""
    return float(kernel_breakdown(kernel, dims, params)["total"])


def kernel_efficiency(kernel: str, dims: tuple[int, ...]) -> float:
    """MACs / (cycles x the core's peak MACs per cycle for the kernel's type), 0..1. Modeled."""
    dtype = KERNELS[kernel][1]
    if dtype not in PEAK_MACS:
        raise ValueError(f"{kernel}: no MAC peak for {dtype} (an adder kernel)")
    return kernel_macs(kernel, dims) / (kernel_cycles(kernel, dims) * PEAK_MACS[dtype])

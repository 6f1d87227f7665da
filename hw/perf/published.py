"""Validation (c): published AIE GEMM designs predicted with the attention model's own cost path.

The full description: ``docs/internals/hw.md``, section ``hw/perf/published.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import calibration, gemm_kernels
from .model import OPS_PER_MAC, Device, load_device


@dataclass(frozen=True)
class CharmSchedule:
    """CHARM's schedule of on-chip tiles over DDR, as its own design-space model has it (github.com/
    arc-research-lab/CHARM, ``CDSE/cdse.py``, the timing of one design point): the problem ``size``³ is cut
    into on-chip tiles ``tile`` (M x K x N); each tile's LHS and RHS are loaded from DDR through the data
    mover's AXI ports (``src_gen/PL_Gen/gen_top.sh``: ``m_axi`` bundles gmem0 / gmem1 / gmem2 for LHS, RHS,
    OUT) while the AIE array computes the previous tile (double buffers, ``DBUFF_* = 2``), each output tile is
    stored after its last K tile, overlapped with one tile of the next; every transfer at the per-port DDR
    bandwidth CHARM profiled for its access pattern (``cdse.py`` 'One-Time Profling of DDR Bandwidth', GB/s
    at a 250 MHz PL clock, scaled by ``freq_rate = 230/250`` there, by PL clock / 250 MHz here): a load alone
    14, a load beside the other load 11, a transfer beside both others 8, the output alone 11 (``DDR_BANK = 1``).
    One tile of the array is ``iterations_per_tile`` iterations plus the array's fill and drain (``cdse.py``
    ``AIE_CYCLE``: ``PACK_IN`` input and ``PACK_OUT`` output buffers of one stream)."""

    size: int
    tile: tuple[int, int, int]
    iterations_per_tile: int
    pack_in: int
    pack_out: int
    buffer_bytes: int  # bytes of one kernel's input (and output) buffer on a stream


#: CHARM's profiled per-port DDR bandwidths, GB/s at a 250 MHz PL clock (CDSE/cdse.py, DDR_BANK = 1):
#: (alone, beside one other transfer, beside two others, output alone)
CHARM_DDR_GBPS: dict[str, float] = {"load_alone": 14.0, "load_beside_load": 11.0, "beside_both": 8.0,
                                    "store_alone": 11.0}


def charm_schedule_seconds(s: CharmSchedule, iteration_s: float, plio_rate: float,
                           pl_clock_mhz: float) -> dict[str, float]:
    """Seconds of the whole problem under CHARM's tile schedule (``CDSE/cdse.py``, its three cases by the
    number of tiles), with one tile of the array taking ``iterations_per_tile`` x ``iteration_s`` plus its
    fill and drain at ``plio_rate`` (bytes/s). Returns ``total`` and its parts (``ddr_exposed``: the time the
    array waits for DDR, ``array``: the array's own time). MODELED."""
    scale = pl_clock_mhz / 250.0 * 1e9  # GB/s at 250 MHz -> bytes/s at the PL clock
    bw = {k: v * scale for k, v in CHARM_DDR_GBPS.items()}
    tm, tk, tn = s.tile
    xt, yt, zt = (-(-s.size // tm), -(-s.size // tk), -(-s.size // tn))
    n = xt * yt * zt
    lhs, rhs, out = tm * tk * 4, tk * tn * 4, tm * tn * 4
    l_d, r_d = lhs / bw["load_beside_load"], rhs / bw["load_beside_load"]
    l_t, r_t, o_t = lhs / bw["beside_both"], rhs / bw["beside_both"], out / bw["beside_both"]
    o_s = out / bw["store_alone"]
    array = s.iterations_per_tile * iteration_s + (s.pack_in + s.pack_out) * s.buffer_bytes / plio_rate
    if n == 1:
        total = max(l_d, r_d) + array + o_s
    elif yt == 1:
        total = max(l_d, r_d) + max(l_d, r_d, array) + max(array, o_s) + max(l_t, r_t, array, o_t) * (n - 2) + o_s
    else:
        total = (max(l_d, r_d) + max(l_d, r_d, array) * ((n - 1) - (xt * zt - 1))
                 + max(l_t, r_t, array, o_t) * (xt * zt - 1) + array + o_s)
    return {"total": total, "array": n * array, "ddr_exposed": total - n * array, "tiles": float(n)}


@dataclass(frozen=True)
class GemmDesign:
    """A published AIE GEMM design's parameters (see :data:`DESIGNS` for the sources)."""

    name: str
    citation: str
    board: str
    dtype: str
    kernel: str  # a kernel of gemm_kernels.KERNELS, called on (m, k, n)
    m: int
    k: int
    n: int
    matmul_kernels: int
    adder_cores: int
    adder_kernel: str  # "" without an adder tree; else a gemm_kernels add kernel on m * n elements
    adds_per_adder_core: int
    plio_groups: tuple[tuple[str, int, int, int], ...]  # (name, PLIOs, streams per PLIO, bytes per stream)
    pl_clock_mhz: float
    aie_clock_mhz: float
    ddr_bytes: float = 0.0  # DDR traffic of the whole problem (0: AIE simulator, no DDR; unused with schedule)
    problem_ops: float = 0.0  # useful ops of the whole problem (with ddr_bytes)
    iterations: float = 0.0  # iterations of the whole (padded) problem; 0: problem_ops / ops per iteration
    published: float = 0.0  # published throughput, ops/s
    published_what: str = ""
    parameters_from: str = ""
    schedule: CharmSchedule | None = None  # CHARM's tile schedule over DDR (replaces ddr_bytes when set)


#: the model's agreement the tests hold every validated design to (``|modeled / published - 1|``)
TOLERANCE = 0.20
#: the agreement aimed at (reported against, not enforced)
GOAL = 0.15


def predict(g: GemmDesign, dev: Device | None = None, params: dict[str, float] | None = None) -> dict:
    """The modeled throughput of ``g`` (ops/s) with the time of every term per iteration (seconds) and
    the matmul kernel's modeled cycles and efficiency. MODELED. ``params`` overrides calibration
    parameters by name (:func:`vckattn.hw.perf.calibration_fit.fit` uses it); otherwise the stored ones.

    Buffer hand-offs: every buffer a stream carries per iteration pays ``sync_cycles_per_port`` AIE
    cycles on that stream (the DMA's lock and buffer-descriptor hand-off, the other side of the lock the
    kernel acquires); the kernel pays it per window port and call (:func:`gemm_kernels.kernel_breakdown`).
    Stream terms are scaled by ``stream_backpressure_factor``."""
    def p(name: str) -> float:
        return float(params[name]) if params and name in params else float(calibration.param(name))

    dev = dev or load_device(g.board)
    f_aie = g.aie_clock_mhz * 1e6
    elem = 1 if g.dtype == "int8" else 4
    out_elem = 4
    port = dev.stream_bytes_per_cycle * f_aie
    handoff = p("sync_cycles_per_port") / f_aie
    bp = p("stream_backpressure_factor")
    kernel = gemm_kernels.kernel_breakdown(g.kernel, (g.m, g.k, g.n), params)
    terms = {"AIE core (kernel's own code)": kernel["total"] / f_aie,
             "AIE DMA in (A, B on two channels)": bp * max(g.m * g.k, g.k * g.n) * elem / port + handoff,
             "AIE DMA out (C)": bp * g.m * g.n * out_elem / port + handoff}
    if g.adder_cores:
        add = gemm_kernels.kernel_cycles(g.adder_kernel, (g.m * g.n,), params)
        terms[f"adder core ({g.adds_per_adder_core} add kernels)"] = g.adds_per_adder_core * add / f_aie
    plio_rate = min(16 * g.pl_clock_mhz * 1e6, dev.stream_bytes_per_cycle * f_aie)
    for name, _count, streams, nbytes in g.plio_groups:
        terms[f"PLIO {name}"] = streams * (bp * nbytes / plio_rate + handoff)
    ops_per_iter = OPS_PER_MAC * g.m * g.k * g.n * g.matmul_kernels
    useful = 1.0  # useful ops / computed ops (padding of the whole problem to the on-chip tile)
    if g.schedule is not None:
        iteration = max(terms.values())
        sched = charm_schedule_seconds(g.schedule, iteration, plio_rate, g.pl_clock_mhz)
        iterations = g.iterations or g.problem_ops / ops_per_iter
        # the schedule's time per iteration beyond the array's own: DDR transfers the array waits for, and
        # the array's fill and drain per tile
        terms["DDR + array fill (CHARM tile schedule)"] = sched["total"] / iterations
        bound = max(terms, key=lambda t: terms[t])
        modeled = g.problem_ops / sched["total"]
        return _row(g, terms, bound, modeled, kernel, {"schedule_seconds": sched})
    if g.ddr_bytes:
        iterations = g.iterations or g.problem_ops / ops_per_iter
        useful = g.problem_ops / (iterations * ops_per_iter)
        terms["DDR"] = g.ddr_bytes / iterations / dev.ddr_bytes_per_s
    bound = max(terms, key=lambda t: terms[t])
    modeled = useful * ops_per_iter / terms[bound]
    return _row(g, terms, bound, modeled, kernel, {})


def _row(g: GemmDesign, terms: dict, bound: str, modeled: float, kernel: dict, extra: dict) -> dict:
    return {**extra, "name": g.name, "citation": g.citation, "board": g.board, "dtype": g.dtype,
            "published": g.published, "published_what": g.published_what, "modeled": modeled,
            "error": modeled / g.published - 1.0 if g.published else None, "bound_by": bound, "terms_seconds": terms,
            "kernel": g.kernel, "kernel_dims": [g.m, g.k, g.n], "kernel_cycles": kernel["total"],
            "kernel_breakdown": kernel,
            "kernel_efficiency": gemm_kernels.kernel_macs(g.kernel, (g.m, g.k, g.n))
            / (kernel["total"] * gemm_kernels.PEAK_MACS[g.dtype]),
            "aie_cores": g.matmul_kernels + g.adder_cores, "parameters_from": g.parameters_from}


def _charm_problem(size: int) -> tuple[float, float]:
    """CHARM's ``size``³ fp32 GEMM on its A6 B4 C16 array with on-chip tiling X=8, Y=1, Z=2 (on-chip tile
    M x K x N = 1536 x 128 x 1024): (DDR bytes, iterations). Each dimension is padded to a whole number of
    on-chip tiles; every on-chip LHS/RHS tile is read once per use, C written once per output tile
    (accumulated on chip across K); one iteration is the array computing one 32³ tile on each of its 384
    kernels."""
    tm, tk, tn = 8 * 6 * 32, 1 * 4 * 32, 2 * 16 * 32
    bm, bk, bn = -(-size // tm), -(-size // tk), -(-size // tn)
    reads = bm * bk * bn * (tm * tk + tk * tn) * 4
    writes = bm * bn * tm * tn * 4
    iterations = bm * bk * bn * (tm * tk * tn) / (32 ** 3 * 6 * 4 * 16)
    return float(reads + writes), float(iterations)


_CHARM_PARAMS = ("README configuration (fp32, I=K=J=32, A=6, B=4, C=16, A_BRO=4, C_BRO=3, NUM_PACK=4, X=8, Y=1, Z=2; "
                 "KRL_TYPE 0: mm_kernel0); CDSE/cdse.py stream counts (LHS a*b*c/A_BRO, RHS a*b*c/C_BRO, OUT 96 "
                 "cascade chains) shared 4 per PLIO by packet switching; each dimension padded to the on-chip "
                 "tile; DDR: CHARM's tile schedule and profiled per-port bandwidths (CDSE/cdse.py, CharmSchedule)")
_CHARM_PLIO = (("LHS (in, 96 streams / 4 per PLIO)", 24, 4, 32 * 32 * 4),
               ("RHS (in, 128 streams / 4 per PLIO)", 32, 4, 32 * 32 * 4),
               ("OUT (out, 96 streams / 4 per PLIO)", 24, 4, 32 * 32 * 4))


def _charm(size: int, board: str, published: float, what: str, aie_mhz: float, pl_mhz: float, citation: str,
           clocks: str) -> GemmDesign:
    ddr, iterations = _charm_problem(size)
    return GemmDesign(
        name=f"CHARM fp32 {size}^3 (A6 B4 C16, {board.upper()})", board=board, dtype="fp32", citation=citation,
        kernel="charm_fp32", m=32, k=32, n=32, matmul_kernels=6 * 4 * 16, adder_cores=0, adder_kernel="",
        adds_per_adder_core=0, plio_groups=_CHARM_PLIO, pl_clock_mhz=pl_mhz, aie_clock_mhz=aie_mhz, ddr_bytes=ddr,
        problem_ops=2.0 * size ** 3, iterations=iterations, published=published, published_what=what,
        parameters_from=f"{_CHARM_PARAMS}; {clocks}",
        schedule=CharmSchedule(size=size, tile=(8 * 6 * 32, 1 * 4 * 32, 2 * 16 * 32), iterations_per_tile=8 * 1 * 2,
                               pack_in=4, pack_out=4, buffer_bytes=32 * 32 * 4))


_CHARM_README = ("Zhuang et al., CHARM, FPGA 2023; github.com/arc-research-lab/CHARM README, 'Targeting VCK5000' "
                 "table (square MM, 'Observed (GFlop/s)' on a VCK5000)")


_CHARM_PAPER = ("Zhuang et al., CHARM, FPGA 2023; github.com/arc-research-lab/CHARM README, 'Targeting VCK5000' table, "
                "'Paper (GFlop/s)' column (the paper's VCK190 results; the README's configuration file is the "
                "VCK190 one)")
_VCK5000_CLOCKS = ("PL at 230 MHz (templates/Makefile_vck5000: Frequency = 230, --kernel_frequency, aiecompiler "
                   "--pl-freq=230); AIE at 1.25 GHz (device.json)")
_VCK190_CLOCKS = ("PL at 220 MHz (templates/Makefile_vck190: --clock.defaultFreqHz 220000000; aiecompiler "
                  "--pl-freq=230); AIE at 1 GHz: ASSUMPTION -- the README says the VCK5000 has the higher AIE clock, "
                  "and CDSE/cdse.py counts its profiled GB/s as bytes per AIE cycle (1 GHz)")

_ARIES_ITERATIONS = (6144 // 32) ** 3  # one 32 x 32 x 32 kernel call per tile of the 6144^3 problem


#: ARIES's fp32 GEMM on ONE AIE (6144^3, VCK190): independent of the fitting design (another group, repository,
#: kernel and data type than MaxEVA int8); from the CHARM group, its kernel a row-major rewrite of CHARM's scheme
ARIES_1AIE = GemmDesign(
    name="ARIES fp32 6144^3 (1 AIE, VCK190)", board="vck190", dtype="fp32",
    citation="Zhuang et al., ARIES, FPGA 2025; github.com/arc-research-lab/Aries, commit 30013db, "
             "example_new/example_Versal/FCCM25_Tutorial/3_example_gemm_primitives/gemm.ipynb 'Tiled GEMM "
             "Performance on Versal VCK190' (images/throughput_gemm.png, 1 AIE: 18.2 GOPS)",
    kernel="aries_fp32", m=32, k=32, n=32, matmul_kernels=1, adder_cores=0, adder_kernel="", adds_per_adder_core=0,
    plio_groups=(("A (in)", 1, 1, 32 * 32 * 4), ("B (in)", 1, 1, 32 * 32 * 4), ("C (out)", 1, 1, 32 * 32 * 4)),
    pl_clock_mhz=220, aie_clock_mhz=1250,
    ddr_bytes=float(_ARIES_ITERATIONS * 2 * 32 * 32 * 4 + 6144 * 6144 * 4), problem_ops=2.0 * 6144 ** 3,
    iterations=float(_ARIES_ITERATIONS), published=18.2e9,
    published_what="fp32 GFLOPS, 6144^3 on one AIE of a VCK190 (ARIES tutorial chart)",
    parameters_from="3_example_gemm_primitives/gemm.ipynb (I = J = K = 6144, TI = TJ = TK = 32; the kernel "
                    "external_path='aie1/adf/kernel_mm/aie_fp32_v0'; 'Each AIE core operates at 1.25 GHz'); "
                    "templates/aie1/adf/kernel_mm/aie_fp32_v0/kernel_gemm0.cc (no reduction across AIEs with one "
                    "AIE: ASSUMPTION, the K tiles accumulate in the PL, aries.accstore); one 128-bit PLIO each for "
                    "A, B, C (example_gemm/example_project_small/project/aie/adf_graph.h: plio_128_bits) at a "
                    "220 MHz PL clock (its project/Makefile: --clock.defaultFreqHz 220000000); DDR: A and B "
                    "tiles read once per call (ASSUMPTION: no L2 reuse, the most traffic), C written once")

DESIGNS: tuple[GemmDesign, ...] = (
    GemmDesign(
        name="MaxEVA int8 (P1, 13x4x6)", board="vck190", dtype="int8",
        citation="Taka et al., MaxEVA, FPT 2023; github.com/enyac-group/MaxEVA (Pattern1_int8)",
        kernel="maxeva_int8", m=32, k=128, n=32, matmul_kernels=13 * 4 * 6, adder_cores=13 * 6,
        adder_kernel="maxeva_add_int32", adds_per_adder_core=3,
        plio_groups=(("A (in, 13x4)", 52, 1, 32 * 128), ("B (in, 4x6)", 24, 1, 128 * 32), ("C (out, 13x6)", 78, 1,
                                                                                          32 * 32 * 4)),
        pl_clock_mhz=312.5, aie_clock_mhz=1250, published=77.01e12, published_what="int8 TOPS (AIE simulator)",
        parameters_from="Pattern1_int8/src/kernels/include.h (X=13, Y=4, Z=6; M x K x N = 32x128x32) and "
                        "kernels.cc (opt_blocked_matrix_mult: mmul<4,8,4>, 2x2 register blocking, flattened "
                        "loops; vectorized_add) and project.h (128-bit PLIOs: X*Y A, Y*Z B, X*Z C; 3 adder "
                        "kernels on one core per group); PLIO at aiecompiler's default PL clock, a quarter of "
                        "1.25 GHz (UG1079); throughput from the AIE simulator (performance_calc.py)"),
    GemmDesign(
        name="MaxEVA fp32 (P1, 13x4x6)", board="vck190", dtype="fp32",
        citation="Taka et al., MaxEVA, FPT 2023; github.com/enyac-group/MaxEVA (Pattern1_fp32)",
        kernel="charm_fp32", m=32, k=32, n=32, matmul_kernels=13 * 4 * 6, adder_cores=13 * 6,
        adder_kernel="maxeva_add_float", adds_per_adder_core=3,
        plio_groups=(("A (in, 13x4)", 52, 1, 32 * 32 * 4), ("B (in, 4x6)", 24, 1, 32 * 32 * 4),
                     ("C (out, 13x6)", 78, 1, 32 * 32 * 4)),
        pl_clock_mhz=312.5, aie_clock_mhz=1250, published=5.44e12, published_what="fp32 TFLOPS (AIE simulator)",
        parameters_from="Pattern1_fp32/src/kernels/include.h (X=13, Y=4, Z=6; 32x32x32; 'From CHARM': "
                        "CHARM's mm_kernel0, as in Pattern2_fp32/src/kernels/kernels.cc) and project.h; PLIO at "
                        "aiecompiler's default PL clock (UG1079)"),
    *(_charm(size, "vck5000", pub, "fp32 GFLOPS on a VCK5000 (observed, CHARM README)", 1250, 230, _CHARM_README,
             _VCK5000_CLOCKS) for size, pub in ((6144, 4518.02e9), (4096, 4081.14e9))),
    *(_charm(size, "vck190", pub, "fp32 GFLOPS on a VCK190 (CHARM paper, FPGA 2023, as the CHARM README quotes it)",
             1000, 220, _CHARM_PAPER, _VCK190_CLOCKS) for size, pub in ((6144, 3277.99e9), (4096, 2718.42e9))),
    ARIES_1AIE,
)


def _maxeva_p2(dtype: str) -> GemmDesign:
    """MaxEVA's placement pattern P2 (10 x 3 x 10): the P1 design of the same data type with P2's array."""
    p1 = next(g for g in DESIGNS if g.name == f"MaxEVA {dtype} (P1, 13x4x6)")
    elem = 1 if dtype == "int8" else 4
    return replace(
        p1, name=f"MaxEVA {dtype} (P2, 10x3x10)", citation=p1.citation.replace("Pattern1", "Pattern2"),
        matmul_kernels=10 * 3 * 10, adder_cores=10 * 10, adds_per_adder_core=3 - 1,
        plio_groups=(("A (in, 10x3)", 30, 1, 32 * p1.k * elem), ("B (in, 3x10)", 30, 1, p1.k * 32 * elem),
                     ("C (out, 10x10)", 100, 1, 32 * 32 * 4)),
        published=0.0, published_what="no published figure in the sources read (the MaxEVA paper's results table)",
        parameters_from=f"Pattern2_{dtype}/src/kernels/include.h (X=10, Y=3, Z=10; M x K x N as P1), kernels.cc "
                        f"(the same file as Pattern1_{dtype}'s) and project.h (X*Y A, Y*Z B, X*Z C PLIOs of 128 bits; "
                        "Y - 1 = 2 add kernels on one core per group)")


#: published designs modeled WITHOUT a published figure to compare with (predictions, not validation): MaxEVA's
#: pattern P2, whose throughput is in the MaxEVA paper's results table, not in any source read here
PREDICTIONS: tuple[GemmDesign, ...] = (_maxeva_p2("int8"), _maxeva_p2("fp32"))


def validate(designs: tuple[GemmDesign, ...] = DESIGNS) -> list[dict]:
    """Published vs modeled for every design of :data:`DESIGNS` with the stored calibration; ``role`` is
    ``"fit"`` for the one design the calibration is fitted on, ``"validation"`` for the others. MODELED."""
    return [{**predict(g), "role": "fit" if g.name == calibration.FIT_DESIGN else "validation"} for g in designs]


__all__ = ["ARIES_1AIE", "CHARM_DDR_GBPS", "DESIGNS", "GOAL", "PREDICTIONS", "TOLERANCE", "CharmSchedule", "GemmDesign",
           "charm_schedule_seconds", "predict", "validate"]

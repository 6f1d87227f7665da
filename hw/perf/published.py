"""Validation (c): published AIE GEMM designs predicted with the attention model's own cost path.

A published design is fed in as its own parameters (kernels, tile sizes, PLIO counts and sharing,
clocks, DDR traffic) and modeled like every attention stage: one **iteration** is every matmul
kernel computing one ``M x K x N`` tile; the iteration takes the longest of

* the matmul kernel's core cycles -- the published kernel's own code (MaxEVA's int8 kernel,
  CHARM's fp32 kernel, which MaxEVA's fp32 designs also use) rendered call for call for g++,
  its operations counted and costed with the attention kernels' cost table and slot model, plus
  its loop fills and buffer synchronization (:mod:`.gemm_kernels`);
* the kernel's input and output DMA streams (32 bits per AIE cycle per channel, AM009);
* the adder-tree core where the design has one: its add kernels, costed from their own code the
  same way, one after the other on one core;
* each PLIO's bytes per iteration (streams sharing it by packet switching) at the PLIO rate
  (``min(width x PL clock, 32 bits x AIE clock)``);
* the DDR traffic of the whole problem per iteration, where the design reads DDR.

Every parameter is listed with its source in :data:`DESIGNS`; none is fitted to the published
throughput. What the validation covers and what it does not: ``docs/validation.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import gemm_kernels
from .model import OPS_PER_MAC, Device, load_device


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
    ddr_bytes: float = 0.0  # DDR traffic of the whole problem (0: AIE simulator, no DDR)
    problem_ops: float = 0.0  # ops of the whole problem (with ddr_bytes)
    published: float = 0.0  # published throughput, ops/s
    published_what: str = ""
    parameters_from: str = ""


#: the model's agreement the tests hold every design to (|modeled / published - 1|); the goal is 10%
TOLERANCE = 0.20


def predict(g: GemmDesign, dev: Device | None = None) -> dict:
    """The modeled throughput of ``g`` (ops/s) with the time of every term per iteration (seconds) and
    the matmul kernel's modeled cycles and efficiency."""
    dev = dev or load_device(g.board)
    f_aie = g.aie_clock_mhz * 1e6
    elem = 1 if g.dtype == "int8" else 4
    out_elem = 4
    port = dev.stream_bytes_per_cycle * f_aie
    kernel = gemm_kernels.kernel_breakdown(g.kernel, (g.m, g.k, g.n))
    terms = {"AIE core (kernel's own code)": kernel["total"] / f_aie,
             "AIE DMA in (A, B on two channels)": max(g.m * g.k, g.k * g.n) * elem / port,
             "AIE DMA out (C)": g.m * g.n * out_elem / port}
    if g.adder_cores:
        add = gemm_kernels.kernel_cycles(g.adder_kernel, (g.m * g.n,))
        terms[f"adder core ({g.adds_per_adder_core} add kernels)"] = g.adds_per_adder_core * add / f_aie
    plio_rate = min(16 * g.pl_clock_mhz * 1e6, dev.stream_bytes_per_cycle * f_aie)
    for name, _count, streams, nbytes in g.plio_groups:
        terms[f"PLIO {name}"] = streams * nbytes / plio_rate
    ops_per_iter = OPS_PER_MAC * g.m * g.k * g.n * g.matmul_kernels
    if g.ddr_bytes:
        iterations = g.problem_ops / ops_per_iter
        terms["DDR"] = g.ddr_bytes / iterations / dev.ddr_bytes_per_s
    bound = max(terms, key=lambda t: terms[t])
    modeled = ops_per_iter / terms[bound]
    return {"name": g.name, "citation": g.citation, "board": g.board, "dtype": g.dtype,
            "published": g.published, "published_what": g.published_what, "modeled": modeled,
            "error": modeled / g.published - 1.0, "bound_by": bound, "terms_seconds": terms,
            "kernel": g.kernel, "kernel_dims": [g.m, g.k, g.n], "kernel_cycles": kernel["total"],
            "kernel_breakdown": kernel,
            "kernel_efficiency": gemm_kernels.kernel_efficiency(g.kernel, (g.m, g.k, g.n)),
            "aie_cores": g.matmul_kernels + g.adder_cores, "parameters_from": g.parameters_from}


def _charm_ddr_bytes() -> float:
    """CHARM's 6144³ fp32 GEMM DDR traffic with its on-chip tiling (X=8, Y=1, Z=2 over the
    A=6 x B=4 x C=16 array of 32³ tiles): every on-chip LHS/RHS tile read once per use, C written once
    per output tile (accumulated on chip across K)."""
    size = 6144
    tm, tk, tn = 8 * 6 * 32, 1 * 4 * 32, 2 * 16 * 32  # on-chip tile M x K x N
    n_tiles = (size // tm) * (size // tk) * (size // tn)
    reads = n_tiles * (tm * tk + tk * tn) * 4
    writes = (size // tm) * (size // tn) * tm * tn * 4
    return float(reads + writes)


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
    GemmDesign(
        name="CHARM fp32 6144^3 (A6 B4 C16)", board="vck5000", dtype="fp32",
        citation="Zhuang et al., CHARM, FPGA 2023; github.com/arc-research-lab/CHARM (README: VCK5000 observed)",
        kernel="charm_fp32", m=32, k=32, n=32, matmul_kernels=6 * 4 * 16, adder_cores=0, adder_kernel="",
        adds_per_adder_core=0,
        plio_groups=(("LHS (in, 96 streams / 4 per PLIO)", 24, 4, 32 * 32 * 4),
                     ("RHS (in, 128 streams / 4 per PLIO)", 32, 4, 32 * 32 * 4),
                     ("OUT (out, 96 streams / 4 per PLIO)", 24, 4, 32 * 32 * 4)),
        pl_clock_mhz=230, aie_clock_mhz=1250, ddr_bytes=_charm_ddr_bytes(), problem_ops=2.0 * 6144 ** 3,
        published=4518.02e9, published_what="fp32 GFLOPS on a VCK5000 (observed, CHARM README)",
        parameters_from="README configuration (fp32, I=K=J=32, A=6, B=4, C=16, A_BRO=4, C_BRO=3, NUM_PACK=4, "
                        "X=8, Y=1, Z=2; KRL_TYPE 0: mm_kernel0); CDSE/cdse.py stream counts (LHS a*b*c/A_BRO, "
                        "RHS a*b*c/C_BRO, OUT 96 cascade chains) shared 4 per PLIO by packet switching; PL at 230 MHz "
                        "(example Makefiles: --clock.defaultFreqHz 230000000); DDR 57 GB/s (device.json)"),
)


def validate(designs: tuple[GemmDesign, ...] = DESIGNS) -> list[dict]:
    """Published vs modeled for every design of :data:`DESIGNS`."""
    return [predict(g) for g in designs]


__all__ = ["DESIGNS", "TOLERANCE", "GemmDesign", "predict", "validate"]

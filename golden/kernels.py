"""The kernel registry: every hardware kernel of the attention block, one contract each.

The full description: ``docs/internals/golden.md``, section ``golden/kernels.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .bhyt_int import bhyt_approx_regmap, bhyt_exact_regmap, bhyt_site_int
from .online_softmax_int import online_softmax_int, online_softmax_regmap
from .regmap import RegisterMap
from .requant import requant_regmap, requantize
from .rmsnorm_int import rmsnorm_int, rmsnorm_regmap
from .rope_int import rope_int, rope_regmap
from .scale_int import scale_int, scale_regmap
from .sublayer import residual_add_int, residual_regmap
from .swiftmax_int import swiftmax_int, swiftmax_regmap

__all__ = ["COMPONENT_PROOFS", "KERNELS", "FormalProof", "KernelContract"]


#: The AXI4-Stream properties (a)-(d) of a stream pair, and the AXI4-Lite properties of a register file.
AXIS = ("axis.hold", "axis.count", "axis.framing", "axis.reset_idle", "axis.liveness")
AXIL = ("axil.one_response", "axil.no_spurious", "axil.readback", "axil.ro_ignores_writes", "axil.reset_idle")


@dataclass(frozen=True)
class FormalProof:
    """One formal proof of a PL component (run by ``vckattn.sim.formal_proofs``).

    Attributes:
        name: The proof's name (unique).
        harness: Its harness (``vckattn.sim.formal_proofs.HARNESSES``): the component and its build
            parameters, the assumptions, properties, covers and invariants.
        properties: The property ids it proves (``vckattn.hw.pl.formal.PROPERTIES``).
        method: ``"induction"`` (unbounded: k-induction, closing within ``depth`` steps) or ``"bmc"`` (every
            trace of ``depth`` cycles from reset).
        depth: Induction bound or BMC depth (cycles).
        mutant: The deliberately broken version that must fail (``vckattn.sim.formal_proofs.MUTANTS``).
        fast: Part of ``make test`` (else only ``make formal``).
        engine: ``"sat"`` (Yosys ``sat``) or ``"sby"`` (SymbiYosys, smtbmc + Yices).
        cuts: Instances replaced by free outputs (an over-approximation), e.g. ``dut.lane*``.
        trace_depth: BMC depth of the covers, and of an induction's mutant check (default ``depth``): traces
            from reset long enough to carry a packet of several beats through the component (an induction
            may close at a depth far shorter than that; a BMC proof's mutant is checked at ``depth``).
    """

    name: str
    harness: str
    properties: tuple[str, ...]
    method: str
    depth: int
    mutant: str
    fast: bool = True
    engine: str = "sat"
    cuts: tuple[str, ...] = ()
    trace_depth: int | None = None


def _proofs(name: str, *, depth: int, method: str = "induction", mutant: str = "lose_beat",
            cuts: tuple[str, ...] = (), full_depth: int | None = None,
            trace_depth: int | None = None) -> tuple[FormalProof, ...]:
    """A kernel's proofs: its register file (induction, fast); its stream pair with the arithmetic ``cuts`` --
    by induction (fast), or by BMC on SymbiYosys (Yices: several times faster than Yosys ``sat`` at these
    depths; ``make formal`` only) -- and, with ``full_depth``, by BMC with nothing cut (``make formal``)."""
    out = [FormalProof(f"{name}_regs", f"{name}_regs", AXIL, "induction", 8, "rdata_flip"),
           FormalProof(f"{name}_stream", name, AXIS, method, depth, mutant, cuts=cuts, fast=method == "induction",
                       engine="sat" if method == "induction" else "sby", trace_depth=trace_depth)]
    if full_depth:
        out.append(FormalProof(f"{name}_full", name, AXIS, "bmc", full_depth, mutant, fast=False, engine="sby"))
    return tuple(out)


@dataclass(frozen=True)
class KernelContract:
    """One hardware kernel, by name, in every layer.

    Attributes:
        name: The kernel's name (the manifest's kernel name for the PL kernels).
        summary: One line: what it computes.
        golden: The bit-exact golden model.
        regmap: The function declaring its register map (``None``: no AXI4-Lite registers); the host
            programs every register map with one driver, ``vckattn.hw.spec.driver.program``.
        testbench: The cocotb testbench module (a module name: cocotb imports it in the simulator).
        report: Whether ``vckattn hw report`` synthesizes and measures it (the normalizer/norm kernels).
        proofs: Its formal proofs (module docstring); every PL kernel has them.
    """

    name: str
    summary: str
    golden: Callable[..., Any]
    regmap: Callable[[], RegisterMap] | None
    testbench: str
    report: bool = False
    proofs: tuple[FormalProof, ...] = ()


KERNELS: dict[str, KernelContract] = {k.name: k for k in (
    KernelContract(
        "swiftmax", "SwiftMax normalizer exp(z - beta)/gamma, element-wise (AXI4-Stream scores -> P)",
        golden=swiftmax_int, regmap=swiftmax_regmap,
        testbench="vckattn.sim.tb_swiftmax", report=True,
        proofs=_proofs("swiftmax", depth=12, cuts=("dut.lane*", "dut.regs"), full_depth=12)),
    KernelContract(
        "online_softmax", "online softmax (running max and sum, one row buffer): the baseline normalizer",
        golden=online_softmax_int, regmap=online_softmax_regmap,
        testbench="vckattn.sim.tb_online_softmax", report=True,
        proofs=_proofs("online_softmax", method="bmc", depth=32,
                       cuts=("dut.p1_pow2_*", "dut.p2_pow2_*", "dut.recip", "dut.regs", "dut.p1_prod*",
                             "dut.p2_prod7_*"))),
    KernelContract(
        "bhyt_exact", "BHyT site with its own statistic (token buffer): gamma * tanh(k * q / rms(q))",
        golden=bhyt_site_int, regmap=bhyt_exact_regmap,
        testbench="vckattn.sim.tb_bhyt_exact",
        report=True,
        proofs=_proofs("bhyt_exact", method="bmc", depth=20, cuts=("dut.scale", "dut.lane*", "dut.regs"))),
    KernelContract(
        "bhyt_approx", "BHyT site M from the forwarded statistic plus the variance constant (no token buffer)",
        golden=bhyt_site_int, regmap=bhyt_approx_regmap,
        testbench="vckattn.sim.tb_bhyt_approx",
        report=True, proofs=_proofs("bhyt_approx", depth=16, cuts=("dut.scale", "dut.lane*", "dut.regs"),
                                    full_depth=16)),
    KernelContract(
        "rmsnorm", "RMSNorm (token buffer, one reduction per token): the baseline norm",
        golden=rmsnorm_int, regmap=rmsnorm_regmap,
        testbench="vckattn.sim.tb_rmsnorm", report=True,
        proofs=_proofs("rmsnorm", method="bmc", depth=16, cuts=("dut.scale", "dut.lane*", "dut.regs"))),
    KernelContract(
        "scale", "requantizing scale y = sat(((x * a) >> s) + bias[j]): the PL infrastructure's demo kernel",
        golden=scale_int, regmap=scale_regmap, testbench="vckattn.sim.tb_scale",
        proofs=_proofs("scale", depth=10, cuts=("dut.regs",), full_depth=10)),
    KernelContract(
        "residual", "residual add R = X + Y: both aligned to the output scale, one rounding to int8",
        golden=residual_add_int, regmap=residual_regmap, testbench="vckattn.sim.tb_residual",
        proofs=_proofs("residual", depth=12, cuts=("dut.regs",), full_depth=12)),
    KernelContract(
        "requant", "per-channel requantizer: int32 accumulators to int8 (18-bit multiplier, shift, round half up)",
        golden=requantize, regmap=requant_regmap, testbench="vckattn.sim.tb_requant",
        proofs=_proofs("requant", depth=12, cuts=("dut.regs",), full_depth=12)),
    KernelContract(
        "rope", "rotate-half RoPE on int8 Q/K rows, int16 Q1.14 cos/sin tables at each row's position",
        golden=rope_int, regmap=rope_regmap,
        testbench="vckattn.sim.tb_rope",
        proofs=_proofs("rope", method="bmc", depth=16, cuts=("dut.regs",))),
)}


#: Proofs of the shared components and of the scalable engine's PL top (``engine_small``'s parameters).
COMPONENT_PROOFS: tuple[FormalProof, ...] = (
    FormalProof("skid_buffer", "skid_buffer", AXIS, "induction", 8, "lose_beat"),
    FormalProof("stall_pipeline", "stall_pipeline", AXIS, "induction", 8, "lose_beat"),
    *(FormalProof(n, n, ("lane.hold",), "induction", depth, "en_ignored")
      for n, depth in (("swiftmax_lane", 9), ("bhyt_scale_unit", 8), ("bhyt_lane", 8), ("rmsnorm_scale_unit", 7),
                       ("rmsnorm_lane", 5))),
    FormalProof("engine_small_stream", "engine_small", AXIS, "induction", 3, "lose_beat",
                cuts=("dut.pipe*.lane*", "dut.regs"), trace_depth=20),
    FormalProof("engine_small_regs", "engine_small_regs", AXIL, "induction", 8, "rdata_flip"),
    FormalProof("engine_small_full", "engine_small", AXIS, "bmc", 12, "lose_beat", fast=False, engine="sby",
                trace_depth=20),
    # the largest engine top whose (monolithic) proof closes in about 5 minutes: 4 score channels of 16 lanes, int8
    FormalProof("engine_c4_l16_stream", "engine_c4_l16_int8", AXIS, "induction", 10, "lose_beat", fast=False,
                cuts=("dut.pipe*.lane*", "dut.regs"), trace_depth=16),
    FormalProof("engine_c1_l8_int16_stream", "engine_c1_l8_int16", AXIS, "induction", 10, "lose_beat", fast=False,
                cuts=("dut.pipe*.lane*", "dut.regs"), trace_depth=16),
)

"""The kernel registry: every hardware kernel of the attention block, one contract each.

A kernel is found by **one name** in every layer. Its contract lists, as import paths and source
locations (golden imports nothing from the other layers, so they are strings here; a test resolves
every one of them):

=============  =========================================================================================
part           where
=============  =========================================================================================
golden         the bit-exact integer model (``golden/<module>.py``): the source of truth for numerics
registers      its register map, declared once beside the golden model (``<name>_regmap``); the
               Amaranth register file, the generated HLS header, the manifest, the bundle schema, the
               testbenches and the host driver all derive from it
pl             the Amaranth component (``hw/pl/<name>.py``)
hls            the HLS C++ top, if any (``hw/hls/<name>_hls.cpp``, C-simulated bit-exact)
aie            the AIE kernel, if any (``hw/aie/<name>.cc``)
testbench      the cocotb testbench (``sim/tb_<name>.py``) or the C-simulation driver
host           how the host drives it: :func:`vckattn.hw.driver.program` for register kernels
=============  =========================================================================================

``vckattn hw report``, the testbench tests and the backends iterate :data:`KERNELS`; adding a kernel
is one entry here plus its files under the same name (ARCHITECTURE.md, "Adding a kernel").
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["KERNELS", "KernelContract"]

#: the generic host driver of every kernel with AXI4-Lite registers
REGISTER_DRIVER = "vckattn.hw.driver:program"


@dataclass(frozen=True)
class KernelContract:
    """One hardware kernel, by name, in every layer.

    Attributes:
        name: The kernel's name (the manifest's kernel name for the PL kernels).
        summary: One line: what it computes.
        golden: ``module:function`` of the bit-exact golden model.
        regmap: ``module:function`` declaring its register map (``None``: no AXI4-Lite registers).
        pl: ``module:Class`` of the Amaranth component (``None``: not a PL RTL kernel).
        pl_kwargs: Build parameters of the component besides ``lanes`` (e.g. ``max_d``), as the hw
            report builds it.
        hls: ``file:function`` of the HLS C++ top, relative to the repository (``None``: none).
        aie: ``file:function`` of the AIE kernel (``None``: none).
        testbench: The cocotb testbench module, or the C-simulation driver module.
        host: How the host drives it (``module:function``).
        report: Whether ``vckattn hw report`` synthesizes and measures it (the normalizer/norm kernels).
    """

    name: str
    summary: str
    golden: str
    regmap: str | None
    pl: str | None
    testbench: str
    host: str
    pl_kwargs: dict[str, int] = field(default_factory=dict)
    hls: str | None = None
    aie: str | None = None
    report: bool = False


KERNELS: dict[str, KernelContract] = {k.name: k for k in (
    KernelContract(
        "swiftmax", "SwiftMax normalizer exp(z - beta)/gamma, element-wise (AXI4-Stream scores -> P)",
        golden="vckattn.golden.swiftmax_int:swiftmax_int", regmap="vckattn.golden.swiftmax_int:swiftmax_regmap",
        pl="vckattn.hw.pl.swiftmax:SwiftMaxKernel", hls="hw/hls/swiftmax_hls.cpp:swiftmax_hls",
        testbench="vckattn.sim.tb_swiftmax", host=REGISTER_DRIVER, report=True),
    KernelContract(
        "online_softmax", "online softmax (running max and sum, one row buffer): the baseline normalizer",
        golden="vckattn.golden.online_softmax_int:online_softmax_int",
        regmap="vckattn.golden.online_softmax_int:online_softmax_regmap",
        pl="vckattn.hw.pl.online_softmax:OnlineSoftmaxKernel", pl_kwargs={"max_keys": 1024},
        testbench="vckattn.sim.tb_online_softmax", host=REGISTER_DRIVER, report=True),
    KernelContract(
        "bhyt_exact", "BHyT site with its own statistic (token buffer): gamma * tanh(k * q / rms(q))",
        golden="vckattn.golden.bhyt_int:bhyt_site_int", regmap="vckattn.golden.bhyt_int:bhyt_exact_regmap",
        pl="vckattn.hw.pl.bhyt_exact:BHyTExactKernel", pl_kwargs={"max_d": 1024},
        hls="hw/hls/bhyt_hls.cpp:bhyt_site_a", testbench="vckattn.sim.tb_bhyt_exact", host=REGISTER_DRIVER,
        report=True),
    KernelContract(
        "bhyt_approx", "BHyT site M from the forwarded statistic plus the variance constant (no token buffer)",
        golden="vckattn.golden.bhyt_int:bhyt_site_int", regmap="vckattn.golden.bhyt_int:bhyt_approx_regmap",
        pl="vckattn.hw.pl.bhyt_approx:BHyTApproxKernel", pl_kwargs={"max_d": 1024},
        hls="hw/hls/bhyt_hls.cpp:bhyt_site_m", testbench="vckattn.sim.tb_bhyt_approx", host=REGISTER_DRIVER,
        report=True),
    KernelContract(
        "rmsnorm", "RMSNorm (token buffer, one reduction per token): the baseline norm",
        golden="vckattn.golden.rmsnorm_int:rmsnorm_int", regmap="vckattn.golden.rmsnorm_int:rmsnorm_regmap",
        pl="vckattn.hw.pl.rmsnorm:RMSNormKernel", pl_kwargs={"max_d": 1024},
        testbench="vckattn.sim.tb_rmsnorm", host=REGISTER_DRIVER, report=True),
    KernelContract(
        "scale", "requantizing scale y = sat(((x * a) >> s) + bias[j]): the PL infrastructure's demo kernel",
        golden="vckattn.golden.scale_int:scale_int", regmap="vckattn.golden.scale_int:scale_regmap",
        pl="vckattn.hw.pl.scale:ScaleKernel", testbench="vckattn.sim.tb_scale", host=REGISTER_DRIVER),
    KernelContract(
        "qk_matmul", "AIE int8 Q·K^T tile matmul (int32 scores)",
        golden="vckattn.golden.aie_matmul:tile_matmul", regmap=None, pl=None,
        aie="hw/aie/qk_matmul.cc:qk_matmul", testbench="vckattn.sim.aie_csim",
        host="vckattn.host.tile_buffers:pack_tiles"),
    KernelContract(
        "pv_matmul", "AIE uint8 x int8 P·V tile matmul",
        golden="vckattn.golden.aie_matmul:tile_matmul", regmap=None, pl=None,
        aie="hw/aie/pv_matmul.cc:pv_matmul", testbench="vckattn.sim.aie_csim",
        host="vckattn.host.tile_buffers:pack_kv"),
)}

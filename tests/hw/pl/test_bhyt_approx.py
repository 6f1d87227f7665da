"""BHyT approximate-variance unit (site M, hw/pl/bhyt_approx.py): cocotb on Verilator against
the golden integer model (sim/tb_bhyt_approx.py), plus register-map and value-split checks."""

from __future__ import annotations

import numpy as np
import pytest

from vckattn.golden.bhyt_int import (
    BHYT_APPROX_ID,
    NormFormat,
    bhyt_approx_regmap,
    bhyt_register_values,
    bhyt_site_registers,
)
from vckattn.hw.pl.bhyt_approx import BHyTApproxKernel, buffer_bits
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_bhyt_approx"
TESTS = {"test_registers", "test_random_traffic", "test_huge_shift", "test_throughput"}


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize(("lanes", "max_d", "elements"), [(4, 1024, 20_000), (1, 64, 5_000),
                                                       pytest.param(4, 1024, 100_000, marks=pytest.mark.full),
                                                       pytest.param(1, 64, 20_000, marks=pytest.mark.full)])
def test_bhyt_approx_kernel(lanes: int, max_d: int, elements: int) -> None:
    name = f"bhyt_approx_l{lanes}_d{max_d}"
    src = generate_verilog(BHyTApproxKernel(lanes, max_d), name)
    env = {"TB_MAX_D": str(max_d), "TB_ELEMENTS": str(elements)}
    if lanes != 4:
        env["VCKATTN_METRICS_OUT"] = ""  # the reported metrics are those of the lanes=4 build
    res = run_cocotb(name, [src], TB, extra_env=env)
    assert TESTS <= {t.name for t in res.passed}, res.tests


def test_regmap_and_register_values() -> None:
    rm = bhyt_approx_regmap(4, 1024)
    offs = {d["name"]: d["offset"] for d in rm.describe()}
    assert offs == {"ID": 0, "VERSION": 4, "k_mult": 0x08, "k_shift": 0x0C, "eps_int_lo": 0x10, "eps_int_hi": 0x14,
                    "c_int_lo": 0x18, "c_int_hi": 0x1C, "g_frac": 0x20, "tokens": 0x24, "gamma": 0x1000}
    assert rm.ident == BHYT_APPROX_ID and rm.mem("gamma").read_ports == 4 and rm.mem("gamma").depth == 1024
    assert rm.width("eps_int_hi") == NormFormat().stat_bits - 32
    d = 16
    regs = bhyt_site_registers(1.0, 10.0, np.linspace(-1, 1, d), d, 5e-6, 5e-6, c_attn=0.4, lam_attn=2.0)
    vals = bhyt_register_values(regs)
    assert regs.c_int >= 1 << 32, "pick scales so that c_int needs the high word"
    assert vals["c_int_lo"] | vals["c_int_hi"] << 32 == regs.c_int
    assert vals["eps_int_lo"] | vals["eps_int_hi"] << 32 == regs.eps_int
    assert buffer_bits(4, 1024) == 0
    assert BHyTApproxKernel.LATENCY == 10

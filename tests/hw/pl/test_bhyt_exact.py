"""BHyT exact-statistics unit (site A, hw/pl/bhyt_exact.py): cocotb on Verilator against the golden
integer model (sim/tb_bhyt_exact.py), plus register-map and register-value checks.

Simulated builds: lanes = 4 with max_d = 256 (100,000+ random-traffic elements; the default
max_d = 1024 only changes memory depths and counter widths) and lanes = 1 with max_d = 32 (20,000+ elements).
"""

from __future__ import annotations

import numpy as np
import pytest

from vckattn.golden.bhyt_int import (
    BHYT_EXACT_ID,
    BHyTSiteRegisters,
    NormFormat,
    bhyt_exact_regmap,
    bhyt_register_values,
    bhyt_site_registers,
    gamma_values,
)
from vckattn.hw.pl.bhyt_exact import BHyTExactKernel, buffer_bits
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_bhyt_exact"
TESTS = {"test_registers", "test_random_traffic", "test_overlong", "test_throughput"}


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize(("lanes", "max_d", "elements"), [(4, 256, 20_000), (1, 32, 5_000),
                                                       pytest.param(4, 256, 100_000, marks=pytest.mark.full),
                                                       pytest.param(1, 32, 20_000, marks=pytest.mark.full)])
def test_bhyt_exact_kernel(lanes: int, max_d: int, elements: int) -> None:
    name = f"bhyt_exact_l{lanes}_d{max_d}"
    src = generate_verilog(BHyTExactKernel(lanes, max_d), name)
    env = {"TB_MAX_D": str(max_d), "TB_ELEMENTS": str(elements)}
    if lanes != 4:
        env["VCKATTN_METRICS_OUT"] = ""  # the report's figures are those of lanes = 4
    res = run_cocotb(name, [src], TB, extra_env=env)
    assert TESTS <= {t.name for t in res.passed}, res.tests


def test_regmap_and_register_values() -> None:
    rm = bhyt_exact_regmap(4, 1024)
    offs = {d["name"]: d["offset"] for d in rm.describe()}
    assert offs == {"ID": 0, "VERSION": 4, "k_mult": 0x08, "k_shift": 0x0C, "eps_int_lo": 0x10, "eps_int_hi": 0x14,
                    "c_int_lo": 0x18, "c_int_hi": 0x1C, "g_frac": 0x20, "tokens": 0x24, "overlong": 0x28,
                    "gamma": 0x1000}
    assert rm.ident == BHYT_EXACT_ID and rm.mem("gamma").read_ports == 4 and rm.mem("gamma").depth == 1024
    assert bhyt_exact_regmap(4, 256).offset("gamma") == 0x400
    d = 16
    regs = bhyt_site_registers(1.0, 10.0, np.linspace(-1, 1, d), d, 2e-4, 5e-6, c_attn=0.4, lam_attn=2.0)
    vals = bhyt_register_values(regs)
    assert regs.c_int >= 1 << 32
    assert vals["c_int_lo"] | vals["c_int_hi"] << 32 == regs.c_int
    assert vals["eps_int_lo"] | vals["eps_int_hi"] << 32 == regs.eps_int
    assert gamma_values(regs) == [int(g) for g in regs.gamma]
    bad = BHyTSiteRegisters(1, 0, 0, 0, np.zeros(d, dtype=np.int64), -1, 1.0)
    with pytest.raises(ValueError):
        bhyt_register_values(bad)
    assert buffer_bits(4, 1024) == 16384 and buffer_bits(1, 64) == 1024
    assert BHyTExactKernel.LATENCY == 10
    k = BHyTExactKernel(4, 1024)
    assert k.token_latency(1024) == 256 + 11 and k.token_latency(5) == 2 + 11
    assert len(k.m_axis_tuser) == NormFormat().stat_bits
    with pytest.raises(ValueError):
        BHyTExactKernel(4, 1022)

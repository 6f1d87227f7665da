"""RMSNorm baseline kernel (hw/pl/rmsnorm.py): cocotb on Verilator against the golden integer model
(sim/tb_rmsnorm.py), plus register-map and register-value checks.

Simulated builds: lanes = 4 with max_d = 256 (100,000+ random-traffic elements; the default
max_d = 1024 only changes memory depths and counter widths) and lanes = 1 with max_d = 32 (20,000+ elements).
"""

from __future__ import annotations

import numpy as np
import pytest

from vckattn.golden.bhyt_int import gamma_values
from vckattn.golden.rmsnorm_int import (
    RMSNORM_ID,
    RMSNormRegisters,
    rmsnorm_register_values,
    rmsnorm_registers,
    rmsnorm_regmap,
)
from vckattn.hw.pl.rmsnorm import RMSNormKernel, buffer_bits
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_rmsnorm"
TESTS = {"test_registers", "test_random_traffic", "test_overlong", "test_throughput"}


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize(("lanes", "max_d", "elements"), [(4, 256, 20_000), (1, 32, 5_000),
                                                       pytest.param(4, 256, 100_000, marks=pytest.mark.full),
                                                       pytest.param(1, 32, 20_000, marks=pytest.mark.full)])
def test_rmsnorm_kernel(lanes: int, max_d: int, elements: int) -> None:
    name = f"rmsnorm_l{lanes}_d{max_d}"
    src = generate_verilog(RMSNormKernel(lanes, max_d), name)
    env = {"TB_MAX_D": str(max_d), "TB_ELEMENTS": str(elements)}
    if lanes != 4:
        env["VCKATTN_METRICS_OUT"] = ""  # the report's figures are those of lanes = 4
    res = run_cocotb(name, [src], TB, extra_env=env)
    assert TESTS <= {t.name for t in res.passed}, res.tests


def test_regmap_and_register_values() -> None:
    rm = rmsnorm_regmap(4, 1024)
    offs = {d["name"]: d["offset"] for d in rm.describe()}
    assert offs == {"ID": 0, "VERSION": 4, "eps_int_lo": 0x08, "eps_int_hi": 0x0C, "g_frac": 0x10, "tokens": 0x14,
                    "overlong": 0x18, "gamma": 0x1000}
    assert rm.ident == RMSNORM_ID and rm.mem("gamma").read_ports == 4 and rm.mem("gamma").depth == 1024
    d = 16
    regs = rmsnorm_registers(np.linspace(0.2, 1.8, d), d, 1e-9, 0.05)
    vals = rmsnorm_register_values(regs)
    assert regs.eps_int == (1 << 40) - 1 and vals == {"eps_int_lo": 0xFFFFFFFF, "eps_int_hi": 0xFF,
                                                      "g_frac": regs.g_frac}
    assert gamma_values(regs) == [int(g) for g in regs.gamma]
    with pytest.raises(ValueError):
        rmsnorm_register_values(RMSNormRegisters(0, np.zeros(d, dtype=np.int64), 32, 1.0))
    assert buffer_bits(4, 1024) == 16384
    assert RMSNormKernel.LATENCY == 6 and RMSNormKernel(4, 1024).token_latency(1024) == 256 + 7

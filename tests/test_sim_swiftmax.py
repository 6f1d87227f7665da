"""SwiftMax normalizer kernel: cocotb on Verilator, every element compared with the golden model."""

from __future__ import annotations

import pytest

from vckattn.hw.pl.swiftmax import SwiftMaxKernel
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_swiftmax"


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("lanes,elements", [(4, 100_000), (1, 20_000)])
def test_swiftmax_kernel(lanes: int, elements: int) -> None:
    name = f"swiftmax_l{lanes}"
    src = generate_verilog(SwiftMaxKernel(lanes), name)
    res = run_cocotb(name, [src], TB, extra_env={"TB_SWIFTMAX_ELEMENTS": str(elements)})
    assert {"test_registers", "test_random_traffic", "test_throughput"} <= {t.name for t in res.passed}, res.tests

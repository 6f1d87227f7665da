"""SwiftMax normalizer kernel: cocotb on Verilator, every element compared with the golden model (int32
scores, and an int8-score build whose lanes build the score product from LUTs)."""

from __future__ import annotations

import pytest

from vckattn.hw.pl.swiftmax import SwiftMaxKernel
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_swiftmax"


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("lanes,elements,in_width", [(4, 20_000, 32), (1, 5_000, 32), (4, 30_000, 8),
                                                  pytest.param(4, 100_000, 32, marks=pytest.mark.full),
                                                  pytest.param(1, 20_000, 32, marks=pytest.mark.full)])
def test_swiftmax_kernel(lanes: int, elements: int, in_width: int) -> None:
    name = f"swiftmax_l{lanes}" + ("" if in_width == 32 else f"_w{in_width}")
    src = generate_verilog(SwiftMaxKernel(lanes, in_width=in_width), name)
    res = run_cocotb(name, [src], TB, extra_env={"TB_SWIFTMAX_ELEMENTS": str(elements)})
    assert {"test_registers", "test_random_traffic", "test_throughput"} <= {t.name for t in res.passed}, res.tests

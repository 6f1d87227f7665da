"""A residual path of the sublayer's PL top (hw/pl/residual_path.py) on Verilator through cocotb
(sim/tb_residual_path.py): W_O records and X's rows in under backpressure, the R writer's records out, each golden's
residual add of its rows with its channels' tables; records it cannot read dropped with their X and flagged."""

from __future__ import annotations

import json

import pytest

from vckattn.hw.pl.residual_path import ResidualPath
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_residual_path"


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_residual_path() -> None:
    """Records of 8 rows x 32 channels over tables of 96 channels (3 column blocks)."""
    top, cfg = "residual_path_r8_c32", {"tile_rows": 8, "cols": 32, "max_d": 96}
    src = [generate_verilog(ResidualPath(cfg["tile_rows"], cfg["cols"], cfg["max_d"]), top)]
    cases = {"test_records_to_r_records", "test_bad_records_dropped_with_their_x"}
    res = run_cocotb(top, src, TB, testcase=",".join(sorted(cases)), extra_env={"VCKATTN_TB_RP": json.dumps(cfg)})
    assert {t.name for t in res.passed} == cases, res.tests


def test_refuses_records_it_cannot_pack() -> None:
    with pytest.raises(ValueError, match="multiple of 16"):
        ResidualPath(8, 24)

"""RoPE on the Q/K/V GEMM records (hw/pl/rope_records.py) on Verilator through cocotb (sim/tb_rope_records.py):
registers read back exactly; shuffled Q, K and V records of several sequences and row tiles under backpressure,
every beat bit-exact with golden.rope_int at the rows' positions (Q/K) or as sent (V, headers); one kernel beat a
cycle for rotated records, one beat a cycle for the others."""

from __future__ import annotations

import gc
import json
import warnings

import pytest

from vckattn.hw.pl.rope_records import RopeRecords
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_rope_records"

#: SmolLM2-135M's decoder at full size (9 query heads, 3 KV heads of 64: 768 rotated channels, records of 16 × 64,
#: S 512, 8 lanes) with a few records; a small one whose record rows hold two head rows each (head_dim 32, 4 lanes)
GEOMETRIES = {
    "smollm2": dict(rows=16, cols=64, head_dim=64, heads=9, kv_heads=3, max_seq=512, lanes=8, batch=2, records=12),
    "d32_c64": dict(rows=8, cols=64, head_dim=32, heads=4, kv_heads=2, max_seq=64, lanes=4, batch=3, records=24),
}


def _unit(g: dict) -> RopeRecords:
    return RopeRecords(g["rows"], g["cols"], g["head_dim"], (g["heads"] + g["kv_heads"]) * g["head_dim"],
                       g["max_seq"], g["lanes"])


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_rope_records(name: str) -> None:
    g = GEOMETRIES[name]
    top = f"rope_records_{name}"
    src = [generate_verilog(_unit(g), top)]
    res = run_cocotb(top, src, TB, testcase="test_registers,test_records,test_throughput",
                     extra_env={"VCKATTN_TB_ROPE_RECORDS": json.dumps(g)})
    assert {t.name for t in res.passed} == {"test_registers", "test_records", "test_throughput"}, res.tests


def test_refuses_bad_geometries() -> None:
    """The constructor names the rule a geometry breaks (and builds the regmap of a good one)."""
    with warnings.catch_warnings():  # the components are discarded unelaborated: no UnusedElaboratable
        warnings.simplefilter("ignore")
        _refuses_bad_geometries()
        gc.collect()


def _refuses_bad_geometries() -> None:
    unit = RopeRecords(16, 64, 64, 768, 512, 8)
    assert unit.regmap.mems[0].depth == 512 * 64 // 16 and unit.record_beats == 65
    with pytest.raises(ValueError, match="multiple of head_dim"):
        RopeRecords(16, 48, 32, 96, 64, 4)
    with pytest.raises(ValueError, match="rotated 96 must be a multiple of cols 64"):
        RopeRecords(16, 64, 32, 96, 64, 4)
    with pytest.raises(ValueError, match="rows 12 must be a power of two"):
        RopeRecords(12, 64, 64, 128, 64, 8)
    with pytest.raises(ValueError, match="at most max_seq"):
        RopeRecords(128, 64, 64, 128, 64, 8)
    with pytest.raises(ValueError, match="max_seq 96 must be a power of two"):
        RopeRecords(16, 64, 64, 128, 96, 8)
    with pytest.raises(ValueError, match="lanes 3 must be a power of two dividing 16"):
        RopeRecords(16, 64, 48, 128, 64, 3)
    with pytest.raises(ValueError, match="head_dim 8 must be a positive multiple of 2·lanes"):
        RopeRecords(16, 64, 8, 128, 64, 8)
    with pytest.raises(ValueError, match="cols 8 must be a positive multiple of 16"):
        RopeRecords(16, 8, 8, 8, 64, 4)

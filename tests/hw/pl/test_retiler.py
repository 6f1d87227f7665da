"""The Q/K/V re-tiler (hw/pl/retiler.py) on Verilator through cocotb (sim/tb_retiler.py): a Q/K/V GEMM cascade's
records of random Q, K and V, in a shuffled order under backpressure, land in the Q/K/V buffer exactly where
hw/spec/qkv_buffer.py says, in golden's packed layouts (pack_q, pack_k, pack_v), every beat once."""

from __future__ import annotations

import json

import pytest

from vckattn.hw.pl.retiler import QkvRetiler
from vckattn.hw.spec.qkv_buffer import QkvLayout
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_retiler"

#: (layout, rows, cols, batch): grouped-query heads with records of one head's width; BERT's 48-channel records,
#: which straddle heads, over two K/V heads; rows of 8 and two sequences through one slot (told apart by their turn);
#: four slots dealt to two banks a head block, six sequences
GEOMETRIES = {
    "d64_c48_i2": (QkvLayout(64, 2, 2, 32, 16, 16, 4, interleave=2), 16, 48, 6),
    "gqa_d32_c32": (QkvLayout(32, 2, 1, 64, 16, 32, 2), 16, 32, 2),
    "d64_c48": (QkvLayout(64, 2, 2, 32, 16, 16, 2), 16, 48, 2),
    "d64_c64_r8": (QkvLayout(64, 3, 1, 32, 8, 8, 1), 8, 64, 2),
}


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_records_land_in_golden_layouts(name: str) -> None:
    lo, rows, cols, batch = GEOMETRIES[name]
    top = f"retiler_{name}"
    src = [generate_verilog(QkvRetiler(lo, rows, cols), top)]
    env = {"VCKATTN_TB_RETILER": json.dumps({**lo.__dict__, "rows": rows, "cols": cols, "batch": batch})}
    res = run_cocotb(top, src, TB, testcase="test_records_land_in_golden_layouts", extra_env=env)
    assert [t.name for t in res.passed] == ["test_records_land_in_golden_layouts"], res.tests


def test_refuses_what_it_cannot_address() -> None:
    lo = QkvLayout(64, 2, 2, 32, 16, 16, 2)
    with pytest.raises(ValueError, match="rows a multiple of 8"):
        QkvRetiler(lo, 12, 48)
    with pytest.raises(ValueError, match="powers of two"):
        QkvRetiler(QkvLayout(64, 2, 2, 48, 16, 16, 2), 16, 48)
    with pytest.raises(ValueError, match="multiples of 8"):
        QkvRetiler(QkvLayout(64, 2, 2, 32, 4, 16, 2), 16, 48)

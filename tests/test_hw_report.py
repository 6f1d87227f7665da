"""Resource parsing and the synthesis flow (real Yosys on a small component)."""

from __future__ import annotations

import json
import re

import pytest

from vckattn.hw.pl.stream import SkidBuffer
from vckattn.hw.pl.synth import SYNTH_ROOT, parse_stat, synthesize
from vckattn.sim.hw_report import KERNELS

# `stat -json` after synth_xilinx -flatten (trimmed): the design's totals by cell type
STAT = json.dumps({
    "creator": "Yosys 0.70",
    "invocation": "stat -json ",
    "modules": {"\\top": {"num_cells": 1149}},
    "design": {"num_cells": 1149, "num_cells_by_type": {
        "BUFG": 1, "CARRY4": 77, "DSP48E2": 3, "FDRE": 219, "FDSE": 4, "LUT2": 127, "LUT3": 98, "LUT6": 183,
        "RAMB18E2": 2, "RAMB36E2": 1, "RAM64M": 8, "$scopeinfo": 5}},
})


def test_parse_stat_counts_cells():
    r = parse_stat(STAT)
    assert (r.lut, r.ff, r.dsp, r.bram, r.lutram, r.carry) == (408, 223, 3, 2.0, 8, 77)
    assert "$scopeinfo" not in r.cells and r.cells["BUFG"] == 1
    assert parse_stat(json.loads(STAT)) == r
    only_top = {"modules": {"\\top": json.loads(STAT)["design"]}}  # no design totals: the one module
    assert parse_stat(only_top) == r
    with pytest.raises(ValueError, match="2 modules"):
        parse_stat({"modules": {"a": {}, "b": {}}})


@pytest.mark.sim
def test_synthesize_skid_buffer():
    r = synthesize(SkidBuffer(16), "skid16")
    # 2 x 17 data/last flops + valid/ready state; no arithmetic
    assert 34 <= r.ff <= 40 and r.dsp == 0 and r.bram == 0 and r.lut > 0
    # the JSON counts are the text table's (stat.txt, written next to it for people)
    text = (SYNTH_ROOT / "skid16" / "stat.txt").read_text()
    table = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+([A-Z][A-Z0-9_]+)\s*$", text, re.M)}
    assert table == r.cells


def test_kernel_registry_names():
    assert list(KERNELS) == ["swiftmax", "online_softmax", "bhyt_exact", "bhyt_approx", "rmsnorm"]

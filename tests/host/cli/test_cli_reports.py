"""`vckattn report` and `vckattn bench` through the CLI entry point."""

from __future__ import annotations

import json

from vckattn.host import cli


def test_report_errors_json(tmp_path, capsys):
    out = tmp_path / "errors.json"
    assert cli.main(["report", "errors", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    ops = {r["operator"]: r for r in rep["operators"]}
    assert len(ops) == 11 and all(r["violations"] == 0 for r in ops.values())
    assert ops["swiftmax (score -> P uint8)"]["exhaustive"] is True
    assert "within" in capsys.readouterr().out


def test_bench_emulator_small(tmp_path):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "emulator", "--seq", "32", "--heads", "2", "--d-head", "16", "--repeats", "2",
                     "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["shape"] == {"seq": 32, "heads": 2, "d_head": 16, "d_model": 32, "batch": 1}
    assert set(rep["median_seconds"]) == {"torch_fp32", "emulator_swiftmax", "emulator_softmax"}
    assert all(len(v) == 2 for v in rep["all_seconds"].values())
    for k, r in rep["speed_ratio_vs_torch_fp32"].items():
        assert abs(r - rep["median_seconds"]["torch_fp32"] / rep["median_seconds"][k]) < 1e-12


def test_bench_host_small(tmp_path, capsys):
    """The host's time per launch of a small engine against the model's device time of that launch: every case
    timed, the ratios the report's own medians, and the launch's tiles and commands those of the workload."""
    out = tmp_path / "host.json"
    assert cli.main(["bench", "host", "--manifest", "engine_small", "--seq", "64", "--heads", "2", "--d-head", "32",
                     "--batch", "2", "--repeats", "21", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["manifest"] == "engine_small" and rep["repeats"] == 21
    assert rep["shape"]["tiles"] == 2 * 2 * (64 // 16)  # batch x heads x query tiles of 16 rows
    assert len(rep["all_seconds"]["host_launch"]) == 21 and rep["modeled_device_seconds"] > 0
    assert rep["host_over_device"] == rep["median_seconds"]["host_launch"] / rep["modeled_device_seconds"]
    assert "MODELED" in rep["modeled_device_note"] and "host / device" in capsys.readouterr().out


def test_report_errors_clear_messages(tmp_path, capsys):
    assert cli.main(["report"]) == 2
    assert "choose one of: errors, quant" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert cli.main(["report", "quant", "--data", str(empty)]) == 4  # bad input files: status 4
    assert "no sentences" in capsys.readouterr().err
    assert cli.main(["report", "quant", str(tmp_path)]) == 4
    assert "no config.json" in capsys.readouterr().err

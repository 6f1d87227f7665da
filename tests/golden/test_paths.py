"""Build outputs under golden.paths.build_root() (VCKATTN_BUILD_DIR, --build-dir, checkout, per-user cache),
builds in paths with spaces, and one-line ToolMissing errors naming the extra of a missing optional dependency."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import vckattn.golden.paths as paths
from vckattn.golden.errors import ToolMissing
from vckattn.golden.extras import extra_imports, require

ROOT = Path(__file__).resolve().parents[2]
TB = "vckattn.sim.tb_skid_buffer"
WIDTH = 16


def test_build_root_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(paths.ENV, str(tmp_path / "b d"))
    assert paths.build_root() == (tmp_path / "b d").resolve()
    assert paths.cache_dir("x", "y").is_dir()


def test_build_root_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.ENV, raising=False)
    assert paths.is_checkout()
    assert paths.build_root() == ROOT / "build"


def test_build_root_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import platformdirs

    monkeypatch.delenv(paths.ENV, raising=False)
    installed = tmp_path / "lib" / "python3.11" / "site-packages" / "vckattn"
    installed.mkdir(parents=True)
    (installed / "pyproject.toml").write_text("")  # even a stray pyproject does not make site-packages a checkout
    monkeypatch.setattr(paths, "PACKAGE_ROOT", installed)
    assert not paths.is_checkout()
    assert paths.build_root() == Path(platformdirs.user_cache_dir("vckattn")) / "build"


def test_module_roots_follow_env_at_call_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from vckattn.hw.pl import synth, verilog
    from vckattn.sim import hls_csim, runner

    monkeypatch.setenv(paths.ENV, str(tmp_path))
    assert runner.SIM_BUILD_ROOT == verilog.HW_BUILD_ROOT == tmp_path / "sim"
    assert hls_csim.HLS_BUILD_ROOT == tmp_path / "hls"
    assert synth.SYNTH_ROOT == tmp_path / "synth"


def test_cli_build_dir_sets_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    from vckattn.host.cli import main

    monkeypatch.delenv(paths.ENV, raising=False)
    monkeypatch.setattr(os, "environ", os.environ.copy())  # main sets it for the process: keep it to this test
    main(["--build-dir", str(tmp_path / "b d"), "hw"])  # no action given: a usage error after the option is read
    capsys.readouterr()
    assert os.environ.get(paths.ENV) == str(tmp_path / "b d")


@pytest.mark.tool("g++", "hls4ml")
def test_gpp_build_in_path_with_space(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from vckattn.sim.hls_csim import compile_cpp, run_binary

    monkeypatch.setenv(paths.ENV, str(tmp_path / "b d"))
    src = '#include <iostream>\n#include "ap_fixed.h"\nint main(){ ap_fixed<8,4> x = 1.5; std::cout << x * 2; }\n'
    exe = compile_cpp(src, "space_probe")
    assert exe.is_relative_to(tmp_path / "b d")
    assert run_binary(exe, timeout=30).strip() == b"3"


@pytest.mark.sim
@pytest.mark.tool("verilator", "cocotb")
def test_verilator_build_in_path_with_space(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from vckattn.hw.pl.stream import SkidBuffer
    from vckattn.sim.runner import generate_verilog, run_cocotb

    monkeypatch.setenv(paths.ENV, str(tmp_path / "b d"))
    src = generate_verilog(SkidBuffer(WIDTH), "skid_space")
    assert src.is_relative_to(tmp_path / "b d")
    res = run_cocotb("skid_space", [src], TB, seed=1, testcase="test_throughput", rerun_with_waves=False)
    assert {t.name for t in res.passed} == {"test_throughput"}


def test_require_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cocotb", None)
    with pytest.raises(ToolMissing, match=r"needs the `sim` extra \(cocotb is not installed\): "
                                          r"pip install 'vckattn\[sim\]'"):
        require("the rtl backend", "cocotb")
    with pytest.raises(ToolMissing, match=r"vckattn\[hf\]"), extra_imports("calibration"):
        raise ModuleNotFoundError("No module named 'transformers'", name="transformers")
    with pytest.raises(ModuleNotFoundError), extra_imports("x"):
        raise ModuleNotFoundError("No module named 'numpyy'", name="numpyy")


def test_rtl_backend_without_cocotb_exits_6(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from vckattn.host.backends.engine import EngineRtlDevice

    monkeypatch.setitem(sys.modules, "cocotb", None)
    device = EngineRtlDevice.__new__(EngineRtlDevice)  # open() checks the tools before it uses any state
    with pytest.raises(ToolMissing, match=r"the rtl backend needs the `sim` extra.*pip install 'vckattn\[sim\]'"):
        device.open()


def test_hw_report_without_amaranth_exits_6(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from vckattn.host.cli import main

    monkeypatch.setitem(sys.modules, "amaranth", None)
    monkeypatch.delitem(sys.modules, "vckattn.sim.hw_report", raising=False)
    monkeypatch.delitem(sys.modules, "vckattn.hw.pl.synth", raising=False)
    code = main(["hw", "report", "--kernels", "swiftmax", "--lanes", "1"])
    err = capsys.readouterr().err
    assert code == 6, err
    assert len(err.strip().splitlines()) == 1
    assert "needs the `sim` extra" in err and "pip install 'vckattn[sim]'" in err

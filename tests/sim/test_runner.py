"""The simulator build caches of sim/runner.py: a Verilator model is built once per source and reused; the
Verilator runtime (sim/verilator_runtime.py) is compiled once per configuration and reused by other models."""

from __future__ import annotations

from pathlib import Path

import pytest

from vckattn.hw.pl.stream import SkidBuffer
from vckattn.sim import verilator_runtime
from vckattn.sim.runner import RUNTIME_CACHE, generate_verilog, run_cocotb

TB = "vckattn.sim.tb_skid_buffer"


def _model_dirs(cache: Path, top: str) -> list[Path]:
    return sorted(p / "verilator" for p in cache.glob(f"{top}-*"))


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_models_and_the_runtime_are_built_once(tmp_path, monkeypatch):
    cache = tmp_path / "simcache"
    monkeypatch.setenv("VCKATTN_SIM_CACHE", str(cache))
    monkeypatch.setenv("VCKATTN_BUILD_DIR", str(tmp_path / "build"))

    # the first model: built whole, its runtime kept for the configuration
    a = generate_verilog(SkidBuffer(12), "runner_skid_a")
    assert run_cocotb("runner_skid_a", [a], TB, testcase="test_throughput").passed
    (model_a,) = _model_dirs(cache, "runner_skid_a")
    (kept,) = list((cache / RUNTIME_CACHE).iterdir())
    names = {p.name for p in kept.glob("*.o")}
    assert {"verilated.o", "verilated_vpi.o"} <= names and all(n.startswith("verilated") for n in names)
    built_a = (model_a / "runner_skid_a").stat().st_mtime_ns

    # the same model again: not rebuilt
    assert run_cocotb("runner_skid_a", [a], TB, testcase="test_throughput").passed
    assert (model_a / "runner_skid_a").stat().st_mtime_ns == built_a

    # another model: its own build, with the kept runtime objects (copied in, not compiled: make compiles the
    # model only)
    b = generate_verilog(SkidBuffer(20), "runner_skid_b")
    assert run_cocotb("runner_skid_b", [b], TB).passed
    (model_b,) = _model_dirs(cache, "runner_skid_b")
    log_a, log_b = ((m / "build.log").read_text() for m in (model_a, model_b))
    assert "verilated.cpp" in log_a and "verilated_vpi.cpp" in log_a
    assert "verilated.cpp" not in log_b and "verilated_vpi.cpp" not in log_b and "Vtop__ALL.cpp" in log_b
    for name in names:
        assert (model_b / name).read_bytes() == (kept / name).read_bytes(), name
    assert len(list((cache / RUNTIME_CACHE).iterdir())) == 1


def test_runtime_key_follows_what_the_runtime_is_compiled_from(tmp_path, monkeypatch):
    """Tracing, the switches, the user C flags and the compiler variables change the key; the model does not."""
    root = tmp_path / "verilator"
    (root / "include").mkdir(parents=True)
    (root / "include" / "verilated_config.h").write_text("#define VERILATOR_VERSION 5048\n")

    def build(switch: str, cflags: str = "-O0", model: str = "x") -> Path:
        d = tmp_path / f"b{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        (d / "Vtop.mk").write_text(f"VERILATOR_ROOT = {root}\n### Switches...\nVM_COVERAGE = {switch}\n### Vars...\n"
                                   f"VM_USER_CFLAGS = \\\n  {cflags} \\\n\nVM_USER_CLASSES = \\\n  {model} \\\n"
                                   "### Default rules...\n")
        return d

    monkeypatch.delenv("CXXFLAGS", raising=False)
    key = verilator_runtime.runtime_key
    base = key(build("0"), 0)
    assert key(build("0", model="y"), 0) == base
    assert key(build("1"), 0) != base
    assert key(build("0", "-O2"), 0) != base
    assert key(build("0"), 1) != base
    monkeypatch.setenv("CXXFLAGS", "-march=native")
    assert key(build("0"), 0) != base

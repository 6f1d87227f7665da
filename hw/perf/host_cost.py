"""The host's side of one attention layer on the card: what the host code does per layer, counted from its own
calls, and priced (MODELED).

The full description: ``docs/internals/hw.md``, section ``hw/perf/host_cost.py``.
"""

from __future__ import annotations

import functools
import json
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).with_name("data") / "host_ops.json"


@dataclass(frozen=True)
class Price:
    """One priced host operation: ``seconds`` each, where the figure comes from."""

    seconds: float
    source: str
    short: str = ""


#: the price of each host call (seconds each), with its source
PRICES: dict[str, Price] = {
    "cu_start": Price(
        17e-6, "public measurement: github.com/Xilinx/XRT/issues/6601 'xrt::run:wait long latency' (Alveo U25, XRT "
        "2.12): xrt::run::run + run::start 16-56 us, 17 us in steady state",
        "17 µs each (Alveo U25, github.com/Xilinx/XRT/issues/6601)"),
    "cu_wait": Price(
        0.4e-6, "public measurement: github.com/Xilinx/XRT/issues/6601: xrt::run::wait on a finished run 0.4 us (the "
        "device time itself is the layer's device time)",
        "0.4 µs each (github.com/Xilinx/XRT/issues/6601)"),
    "graph_run": Price(
        17e-6, "assumption: priced as one compute-unit start (xrt::graph::run is one command to the card, as "
        "xrt::run::start; github.com/Xilinx/XRT/issues/6601)",
        "assumed: as a start + a wait"),
    "graph_wait": Price(0.4e-6, "assumption: priced as a wait on a finished run (github.com/Xilinx/XRT/issues/6601)"),
    "sync_fixed": Price(
        19e-6, "public measurement: github.com/Xilinx/XRT/issues/6590 'DMA transfer latency' (Alveo U25, XRT "
        "2021.2): xrt::bo::sync to the device 19 us on average (the bytes are priced apart at the PCIe rate)",
        "19 µs each (Alveo U25, github.com/Xilinx/XRT/issues/6590)"),
}


@dataclass
class Counts:
    """The host's calls in one layer's launch, as the host code issued them."""

    cu_starts: int = 0
    cu_waits: int = 0
    graph_runs: int = 0
    graph_waits: int = 0
    syncs_to_device: int = 0
    syncs_from_device: int = 0
    bytes_to_device: int = 0
    bytes_from_device: int = 0

    @property
    def syncs(self) -> int:
        return self.syncs_to_device + self.syncs_from_device

    def to_json(self) -> dict[str, int]:
        return {**asdict(self), "syncs": self.syncs}


# ------------------------------------------------------------------------------------------ host operations


def measure(seqs: tuple[int, ...] = (128, 512), batch: int = 8, hidden: int = 768, repeat: int = 15) -> dict:
    """Time the host's own per-layer operations on this CPU with torch (fp32, best of ``repeat``): the encoder's
    LayerNorm over ``(batch, S, hidden)`` and the Q/K/V projections (three ``hidden x hidden`` linear layers)."""
    import torch

    rows = []
    for seq in seqs:
        x = torch.randn(batch, seq, hidden)
        ln = torch.nn.LayerNorm(hidden)
        lins = [torch.nn.Linear(hidden, hidden) for _ in range(3)]
        for what, fn in (("layernorm", lambda x=x, ln=ln: ln(x)),
                         ("qkv_projections", lambda x=x, lins=lins: [lin(x) for lin in lins])):
            with torch.no_grad():
                fn()
                best = min(_timed(fn) for _ in range(repeat))
            rows.append({"op": what, "batch": batch, "seq": seq, "hidden": hidden, "seconds": best})
    return {"measured": True, "what": "host-side operations of one layer measured with torch fp32 on the CPU, best of "
            f"{repeat}", "command": "python -m vckattn.hw.perf.host_cost --measure",
            "machine": f"{platform.processor() or platform.machine()}, {_cpu_name()}, torch "
            f"{torch.__version__}, {torch.get_num_threads()} threads",
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "rows": rows}


def _timed(fn: Any) -> float:
    import torch

    with torch.no_grad():
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.platform()


@functools.cache
def host_ops() -> dict:
    """The stored measurements (``hw/perf/data/host_ops.json``)."""
    return json.loads(DATA_FILE.read_text(encoding="utf-8"))


def host_op_seconds(op: str, batch: int, seq: int, hidden: int) -> tuple[float, str]:
    """Seconds of host operation ``op`` for one layer, scaled linearly in tokens from the nearest stored
    measurement of the same ``hidden`` (and as hidden² for the projections, hidden for the LayerNorm, from another
    width); with how it was obtained."""
    data = host_ops()
    rows = [r for r in data["rows"] if r["op"] == op]
    if not rows:
        raise ValueError(f"no stored measurement of {op}")
    tokens = batch * seq
    r = min(rows, key=lambda r: (r["hidden"] != hidden, abs(r["batch"] * r["seq"] - tokens)))
    scale = tokens / (r["batch"] * r["seq"])
    power = 2 if op == "qkv_projections" else 1
    scale *= (hidden / r["hidden"]) ** power
    exact = scale == 1
    how = (f"{data['machine']}, {data['date']}; {data['command']}" if exact else
           f"scaled x{scale:.3g} from the measurement of batch {r['batch']}, S = {r['seq']}, hidden {r['hidden']} "
           f"({data['machine']}, {data['date']})")
    return r["seconds"] * scale, how


# ------------------------------------------------------------------------------------------ one layer


@dataclass
class HostCost:
    """One layer's host-side time (MODELED from counted calls; host operations measured): each part in seconds."""

    counts: Counts
    parts: dict[str, float]
    sources: dict[str, str]

    @property
    def seconds(self) -> float:
        return sum(self.parts.values())

    def to_json(self) -> dict:
        return {"modeled": True, "counts": self.counts.to_json(), "parts_seconds": self.parts,
                "seconds": self.seconds, "sources": self.sources}


def layer_host_cost(w: Any, d: Any, dev: Any, c: Counts) -> HostCost:
    """The host's time for one layer of workload ``w`` on design ``d`` (device ``dev``): its calls ``c`` (counted by
    :func:`vckattn.host.launch_counts.count_launch`, the host's own launch on a recording runtime) priced, the PCIe
    bytes of its syncs, and its own operations (LayerNorm for an encoder; the Q/K/V projections when
    ``w.operands == "host"``)."""
    pcie = dev.pcie_bytes_per_s
    if pcie is None:
        raise ValueError(f"{dev.board}: no PCIe rate in device.json; the end-to-end time needs one")
    parts = {
        "cu_starts": c.cu_starts * PRICES["cu_start"].seconds,
        "cu_waits": c.cu_waits * PRICES["cu_wait"].seconds,
        "graph": c.graph_runs * PRICES["graph_run"].seconds + c.graph_waits * PRICES["graph_wait"].seconds,
        "syncs_fixed": c.syncs * PRICES["sync_fixed"].seconds,
        "pcie_bytes": (c.bytes_to_device + c.bytes_from_device) / pcie,
    }
    sources = {k: p.source for k, p in PRICES.items()}
    sources.update({f"{k}_short": p.short for k, p in PRICES.items()})
    sources["pcie_bytes"] = f"device.json pcie_gbps ({pcie / 1e9:g} GB/s per direction)"
    sources["counts"] = ("counted: the host's launch (host/backends/engine_hw.py) run on a recording runtime, "
                         "host/launch_counts.py count_launch")
    hidden = w.hidden_size
    if not w.causal:  # an encoder layer (BERT/ViT): the post-LN LayerNorm runs on the host
        parts["host_layernorm"], sources["host_layernorm"] = host_op_seconds("layernorm", w.batch, w.seq, hidden)
    if w.operands == "host":
        parts["host_qkv_projections"], sources["host_qkv_projections"] = host_op_seconds(
            "qkv_projections", w.batch, w.seq, hidden)
    return HostCost(c, parts, sources)


def main(argv: list[str] | None = None) -> int:
    """``python -m vckattn.hw.perf.host_cost --measure``: measure the host operations here and store them."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["--measure"]:
        print("usage: python -m vckattn.hw.perf.host_cost --measure", file=sys.stderr)
        return 2
    data = measure()
    DATA_FILE.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["PRICES", "Counts", "HostCost", "host_op_seconds", "layer_host_cost", "measure"]

"""Figures of the performance model (PNG, matplotlib): a roofline with the design points, stage times,
and the SwiftMax paper's Fig. 5 from the model with a CPU time measured in the same run, for the attention block
and for the whole encoder sublayer.

Modeled board times are labeled *modeled*; the CPU times are *measured* on this machine with torch
(fp32 QKᵀ, normalizer, P·V of the same shape), one layer timed and multiplied by the layer count.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from vckattn.hw.perf.model import Design, Device, Perf, Workload, evaluate, load_device

BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
#: SwiftMax constants for the CPU timing (any finite values: the timing does not depend on them)
CPU_BETA, CPU_GAMMA = 8.0, 64.0


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ------------------------------------------------------------------------------------------ CPU timing


def _time_once(batch: int, heads: int, seq: int, d_head: int, normalizer: str, repeats: int, seed: int) -> float:
    import torch

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, seq, d_head, generator=g) for _ in range(3))
    scale = d_head ** -0.5

    def run() -> None:
        s = torch.matmul(q, k.transpose(-1, -2)) * scale
        p = torch.softmax(s, dim=-1) if normalizer == "online_softmax" else torch.exp(s - CPU_BETA) / CPU_GAMMA
        torch.matmul(p, v)

    with torch.no_grad():
        run()  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cpu_layer_seconds(batch: int, heads: int, seq: int, d_head: int, normalizer: str, repeats: int = 3,
                      chunk: int = 8, seed: int = 0) -> float:
    """Measured seconds of one attention layer's QKᵀ -> normalizer -> P·V in torch fp32 on this CPU
    (median of ``repeats``). A batch above ``chunk`` runs as whole chunks of ``chunk`` (timed once,
    counted as many times as there are chunks: the same work at the same shape) plus the remainder,
    to bound memory. ``normalizer``: "online_softmax" (torch.softmax) or "swiftmax" (exp(z - β)/γ)."""
    full, rest = divmod(batch, chunk)
    total = full * _time_once(chunk, heads, seq, d_head, normalizer, repeats, seed) if full else 0.0
    if rest:
        total += _time_once(rest, heads, seq, d_head, normalizer, repeats, seed)
    return total


# ------------------------------------------------------------------------------------------- roofline


def workload_text(w: Workload) -> str:
    """The workload a plot shows, for its title: model, heads x d_head, S, batch, layers, where the operands are."""
    name = f"{w.name} attention" if w.name else "attention"
    return (f"{name}: {w.heads} heads x {w.d_head}, S = {w.seq}, batch {w.batch}, {len(w.layers)} layers, "
            f"operands {w.operands}")


def _workloads_text(points: Sequence[tuple[str, Perf]]) -> str:
    texts = list(dict.fromkeys(workload_text(p.workload) for _, p in points))
    return texts[0] if len(texts) == 1 else "several workloads"


def roofline(points: Sequence[tuple[str, Perf]], path: Path, dev: Device | None = None) -> Path:
    """Roofline of the int8 array with the DDR, AIE<->PL (all usable PLIOs) and PCIe roofs; each design
    at its intensity against DDR bytes (filled, modeled layer TOPS) and against PLIO bytes (hollow,
    modeled on-chip TOPS)."""
    plt = _plt()
    dev = dev or load_device()
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 5))
    x = np.logspace(0, 5, 200)
    peak = dev.peak_int8_ops / 1e12
    clock = points[0][1].design.pl_clock_mhz if points else 250.0
    plio_rate = min(16 * clock * 1e6, dev.stream_bytes_per_cycle * dev.aie_clock_hz)
    plio_all = (dev.plio_usable_128["in"] + dev.plio_usable_128["out"]) * plio_rate
    ax.plot(x, np.minimum(peak, x * dev.ddr_bytes_per_s / 1e12), "k-", lw=1.5,
            label=f"DDR {dev.ddr_bytes_per_s / 1e9:.0f} GB/s")
    ax.plot(x, np.minimum(peak, x * plio_all / 1e12), "k--", lw=1,
            label=f"AIE<->PL, all usable 128-bit PLIOs at {clock:g} MHz ({plio_all / 1e12:.2f} TB/s)")
    if dev.pcie_bytes_per_s:
        ax.plot(x, np.minimum(peak, x * dev.pcie_bytes_per_s / 1e12), "k:", lw=1,
                label=f"PCIe {dev.pcie_bytes_per_s / 1e9:.0f} GB/s")
    ax.axhline(peak, color="grey", lw=0.8)
    ax.text(1.2, peak * 1.08, f"int8 peak {peak:.0f} TOPS", fontsize=8)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, p) in enumerate(points):
        c = colors[i % len(colors)]
        ops = p.workload.ops_per_layer
        if p.traffic.get("ddr_bytes"):
            ax.plot(ops / p.traffic["ddr_bytes"], p.tops, "o", color=c, ms=8, label=f"{label}: {p.tops:.2f} TOPS")
        ax.plot(ops / p.traffic["plio_bytes"], p.tops_on_chip, "o", mfc="none", color=c, ms=8,
                label=f"{label}, on chip: {p.tops_on_chip:.2f} TOPS")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (int8 ops / byte)")
    ax.set_ylabel("TOPS (modeled)")
    ax.set_title(f"Roofline, XCVC1902 (modeled, not measured)\n{_workloads_text(points)}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def stage_bars(points: Sequence[tuple[str, Perf]], path: Path) -> Path:
    """Stage seconds per layer of each design (log scale), its bottleneck marked."""
    plt = _plt()
    import numpy as np

    names = []
    for _, p in points:
        for s in p.stages:
            if s.name not in names:
                names.append(s.name)
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(names) * max(1, len(points)) / 1.6))
    h = 0.8 / max(1, len(points))
    y = np.arange(len(names))
    for i, (label, p) in enumerate(points):
        secs = {s.name: s.seconds for s in p.stages}
        vals = [secs.get(n, np.nan) for n in names]
        bars = ax.barh(y + i * h, vals, height=h, label=f"{label} ({p.seconds_per_layer * 1e6:,.0f} µs/layer)")
        for j, n in enumerate(names):
            if n == p.bottleneck:
                bars[j].set_hatch("//")
                bars[j].set_edgecolor("black")
    ax.set_yticks(y + h * (len(points) - 1) / 2)
    from vckattn.hw.perf.model import STAGES

    ax.set_yticklabels([STAGES[n] for n in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("seconds per layer a stage is busy (modeled); hatched: the bottleneck")
    ax.set_title(f"Stage times (modeled, not measured)\n{_workloads_text(points)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------- Fig. 5


@dataclass
class Fig5Case:
    """One sequence length of Fig. 5: the two designs it compares and the workload shape."""

    seq: int
    swiftmax_design: Design
    online_design: Design


def fig5_data(cases: Sequence[Fig5Case], heads: int = 12, d_head: int = 64, layers: int = 12,
              batches: Sequence[int] = BATCHES, layer_batch: int = 8, cpu: bool = True, cpu_repeats: int = 5,
              dev: Device | None = None, progress: Callable[[str], None] | None = None) -> dict:
    """The numbers of Fig. 5: per sequence length, modeled board seconds of ``layers`` layers for every
    batch (all SwiftMax vs all online softmax, each on its design) and for 0..``layers`` layers
    replaced by SwiftMax at ``layer_batch`` (each layer on its normalizer's design), with the CPU's
    measured seconds of the same workloads (torch fp32, one layer timed x ``layers``)."""
    dev = dev or load_device()
    out: dict = {"modeled": "board seconds are modeled; cpu seconds are measured on this machine",
                 "heads": heads, "d_head": d_head, "layers": layers, "cases": []}
    for case in cases:
        w = Workload(heads=heads, d_head=d_head, seq=case.seq, batch=1, layers=("swiftmax",) * layers)
        rows = []
        for b in batches:
            ws = replace(w, batch=b)
            wo = replace(ws, layers=("online_softmax",) * layers)
            t_s = evaluate(ws, case.swiftmax_design, dev).seconds_total
            t_o = evaluate(wo, case.online_design, dev).seconds_total
            row = {"batch": b, "board_swiftmax_s": t_s, "board_online_softmax_s": t_o, "board_speedup": t_o / t_s}
            if cpu:
                if progress:
                    progress(f"CPU timing S={case.seq} batch={b}")
                c_s = layers * cpu_layer_seconds(b, heads, case.seq, d_head, "swiftmax", cpu_repeats)
                c_o = layers * cpu_layer_seconds(b, heads, case.seq, d_head, "online_softmax", cpu_repeats)
                row.update({"cpu_swiftmax_s": c_s, "cpu_softmax_s": c_o, "cpu_speedup": c_o / c_s})
            rows.append(row)
        wl = replace(w, batch=layer_batch)
        per_s = evaluate(wl, case.swiftmax_design, dev).seconds_per_layer
        per_o = evaluate(replace(wl, layers=("online_softmax",) * layers), case.online_design, dev).seconds_per_layer
        cpu_s = cpu_o = None
        if cpu:
            cpu_s = cpu_layer_seconds(layer_batch, heads, case.seq, d_head, "swiftmax", cpu_repeats)
            cpu_o = cpu_layer_seconds(layer_batch, heads, case.seq, d_head, "online_softmax", cpu_repeats)
        replaced = []
        for k in range(layers + 1):
            t = k * per_s + (layers - k) * per_o
            r = {"replaced": k, "board_s": t, "board_speedup": layers * per_o / t}
            if cpu:
                c = k * cpu_s + (layers - k) * cpu_o
                r.update({"cpu_s": c, "cpu_speedup": layers * cpu_o / c})
            replaced.append(r)
        out["cases"].append({"seq": case.seq, "swiftmax_design": case.swiftmax_design.to_json(),
                             "online_softmax_design": case.online_design.to_json(), "by_batch": rows,
                             "layer_batch": layer_batch, "by_layers_replaced": replaced})
    return out


def fig5_plots(data: dict, folder: Path) -> list[Path]:
    """``fig5_batch.png`` (speedup and absolute times vs batch) and ``fig5_layers.png`` (speedup vs
    layers replaced) from :func:`fig5_data`."""
    plt = _plt()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for case in data["cases"]:
        rows = case["by_batch"]
        b = [r["batch"] for r in rows]
        a1.plot(b, [r["board_speedup"] for r in rows], "o-", label=f"S={case['seq']} board (modeled)")
        if "cpu_speedup" in rows[0]:
            a1.plot(b, [r["cpu_speedup"] for r in rows], "s--", label=f"S={case['seq']} CPU torch (measured)")
        a2.plot(b, [r["board_swiftmax_s"] for r in rows], "o-", label=f"S={case['seq']} board SwiftMax (modeled)")
        a2.plot(b, [r["board_online_softmax_s"] for r in rows], "^-",
                label=f"S={case['seq']} board online softmax (modeled)")
        if "cpu_softmax_s" in rows[0]:
            a2.plot(b, [r["cpu_softmax_s"] for r in rows], "s--", label=f"S={case['seq']} CPU softmax (measured)")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("batch size")
    a1.set_ylabel("speedup: SwiftMax over online softmax")
    a1.set_title(f"BERT-base attention ({data['layers']} layers), equal PL resources", fontsize=9)
    a1.legend(fontsize=7)
    a1.grid(True, alpha=0.3)
    a2.set_xscale("log", base=2)
    a2.set_yscale("log")
    a2.set_xlabel("batch size")
    a2.set_ylabel(f"seconds for {data['layers']} attention layers")
    a2.set_title("modeled board time vs measured CPU time", fontsize=9)
    a2.legend(fontsize=6)
    a2.grid(True, which="both", alpha=0.3)
    fig.suptitle("Fig. 5 (a) from the model: board figures modeled, CPU figures measured", fontsize=10)
    fig.tight_layout()
    p = folder / "fig5_batch.png"
    fig.savefig(p, dpi=130)
    plt.close(fig)
    paths.append(p)

    fig, ax = plt.subplots(figsize=(6, 4.2))
    for case in data["cases"]:
        rows = case["by_layers_replaced"]
        k = [r["replaced"] for r in rows]
        ax.plot(k, [r["board_speedup"] for r in rows], "o-", label=f"S={case['seq']} board (modeled)")
        if "cpu_speedup" in rows[0]:
            ax.plot(k, [r["cpu_speedup"] for r in rows], "s--", label=f"S={case['seq']} CPU torch (measured)")
    ax.set_xlabel(f"layers replaced by SwiftMax (of {data['layers']})")
    ax.set_ylabel("speedup over all-softmax")
    ax.set_title(f"Fig. 5 (b) from the model, batch {data['cases'][0]['layer_batch']}: board modeled, CPU measured",
                 fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    p = folder / "fig5_layers.png"
    fig.savefig(p, dpi=130)
    plt.close(fig)
    paths.append(p)
    return paths


# ------------------------------------------------------------------------------------- Fig. 5, sublayer

#: the sublayer's Fig. 5: BERT-base encoder sublayers (12 x 64, d_model 768), 12 layers, these sequence lengths
SUBLAYER_SEQS: tuple[int, ...] = (128, 512)
SUBLAYER_TITLE = ("BERT-base encoder sublayer (12 x 64, d_model 768: X·W_qkv → attention → ·W_O), 12 layers, "
                  "int8 on the VCK5000")


def cpu_sublayer_seconds(batch: int, heads: int, seq: int, d_head: int, normalizer: str, repeats: int = 3,
                         chunk: int = 8, seed: int = 0) -> float:
    """Measured seconds of one encoder sublayer (X·W_qkvᵀ, QKᵀ -> normalizer -> P·V, A·W_Oᵀ) in torch fp32 on this
    CPU (median of ``repeats``); a batch above ``chunk`` runs as whole chunks of ``chunk`` (timed once, scaled)."""
    import torch

    def once(b: int) -> float:
        g = torch.Generator().manual_seed(seed)
        d = heads * d_head
        x = torch.randn(b, seq, d, generator=g)
        w_qkv, w_o = torch.randn(3 * d, d, generator=g), torch.randn(d, d, generator=g)
        scale = d_head ** -0.5

        def run() -> None:
            q, k, v = (t.view(b, seq, heads, d_head).transpose(1, 2) for t in (x @ w_qkv.T).split(d, dim=-1))
            s = torch.matmul(q, k.transpose(-1, -2)) * scale
            p = torch.softmax(s, dim=-1) if normalizer == "online_softmax" else torch.exp(s - CPU_BETA) / CPU_GAMMA
            (torch.matmul(p, v).transpose(1, 2).reshape(b, seq, d)) @ w_o.T

        with torch.no_grad():
            run()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    if batch <= chunk:
        return once(batch)
    return once(chunk) * batch / chunk


def fig5_sublayer_data(cpu: bool = True, tile_cap: float = 0.8, headroom: float = 0.2, layers: int = 12,
                       batches: Sequence[int] = BATCHES, layer_batch: int = 8, cpu_repeats: int = 3,
                       explorations: dict | None = None) -> dict:
    """The numbers of Fig. 5 for the whole sublayer: per sequence length of :data:`SUBLAYER_SEQS`, the SwiftMax
    split and online softmax's split at its resources (:func:`.explore_sublayer.explore_sublayer` at batch
    ``layer_batch``; the best online-softmax split where none fits them), each costed in closed form for every batch
    (``layers`` sublayers; at another batch the split's w PLIO sharing and X on chip or in slots chosen again so
    that every resource stays within 80%: ``fits`` False where that cannot be) and for 0..``layers`` sublayers
    replaced by SwiftMax at ``layer_batch``; with the CPU's measured seconds of the same sublayers (torch fp32).
    ``explorations``: already explored sequence lengths."""
    from vckattn.hw.design import explore_sublayer
    from vckattn.hw.perf import sublayer

    out: dict = {"modeled": "board seconds are modeled (closed form); cpu seconds are measured on this machine",
                 "workload": SUBLAYER_TITLE, "layers": layers, "tile_cap": tile_cap, "headroom": headroom,
                 "cases": []}
    for seq in SUBLAYER_SEQS:
        ex = (explorations or {}).get(seq) or explore_sublayer.explore_sublayer(
            sublayer.SublayerShape(layer_batch, seq), tile_cap, headroom)
        other = ex.online_equal_resources or ex.online_softmax
        splits = {}
        for name, c in (("swiftmax", ex.swiftmax), ("online_softmax", other)):
            splits[name] = sublayer.SublayerSplit.from_json(c["split"])

        def fitted(b: int, name: str, seq: int = seq, splits: dict = splits) -> tuple:
            """The split at batch ``b``: its w PLIO sharing and X on chip or in slots chosen again to fit
            (:func:`.sublayer.refit`); as found at ``layer_batch`` (and marked) where nothing fits."""
            shape = sublayer.SublayerShape(b, seq)
            sp = sublayer.refit(shape, splits[name], tile_cap)
            return shape, sp or splits[name], sp is not None

        def board(b: int, name: str) -> float:
            shape, sp, _ = fitted(b, name)
            return sublayer.split_cost(shape, sp)["seconds"]

        rows = []
        for b in batches:
            t_s, t_o = layers * board(b, "swiftmax"), layers * board(b, "online_softmax")
            row = {"batch": b, "board_swiftmax_s": t_s, "board_online_softmax_s": t_o, "board_speedup": t_o / t_s,
                   "fits": fitted(b, "swiftmax")[2] and fitted(b, "online_softmax")[2],
                   "x_on_chip": {n: fitted(b, n)[1].x_on_chip for n in splits}}
            if cpu:
                c_s = layers * cpu_sublayer_seconds(b, 12, seq, 64, "swiftmax", cpu_repeats)
                c_o = layers * cpu_sublayer_seconds(b, 12, seq, 64, "online_softmax", cpu_repeats)
                row.update({"cpu_swiftmax_s": c_s, "cpu_softmax_s": c_o, "cpu_speedup": c_o / c_s})
            rows.append(row)
        per_s, per_o = board(layer_batch, "swiftmax"), board(layer_batch, "online_softmax")
        replaced = [{"replaced": k, "board_s": k * per_s + (layers - k) * per_o,
                     "board_speedup": layers * per_o / (k * per_s + (layers - k) * per_o)} for k in range(layers + 1)]
        out["cases"].append({"seq": seq, "swiftmax_split": ex.swiftmax["split"],
                             "online_softmax_split": other["split"],
                             "online_softmax_at_equal_resources": ex.online_equal_resources is not None,
                             "by_batch": rows, "layer_batch": layer_batch, "by_layers_replaced": replaced})
    return out


def fig5_sublayer_plot(data: dict, path: Path) -> Path:
    """``fig5_sublayer.png`` from :func:`fig5_sublayer_data`: speedup of SwiftMax over online softmax vs batch
    (board modeled, CPU measured), the absolute times, and the speedup vs the sublayers replaced."""
    plt = _plt()
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.4))
    for case in data["cases"]:
        rows = case["by_batch"]
        b = [r["batch"] for r in rows]
        eq = "equal resources" if case["online_softmax_at_equal_resources"] else "best online softmax"
        a1.plot(b, [r["board_speedup"] for r in rows], "o-", label=f"S={case['seq']} board (modeled, {eq})")
        over = [r for r in rows if not r.get("fits", True)]
        if over:
            a1.plot([r["batch"] for r in over], [r["board_speedup"] for r in over], "kx", ms=9,
                    label=f"S={case['seq']} split does not fit the device at this batch")
        if "cpu_speedup" in rows[0]:
            a1.plot(b, [r["cpu_speedup"] for r in rows], "s--", label=f"S={case['seq']} CPU torch (measured)")
        a2.plot(b, [r["board_swiftmax_s"] for r in rows], "o-", label=f"S={case['seq']} board SwiftMax (modeled)")
        a2.plot(b, [r["board_online_softmax_s"] for r in rows], "^-",
                label=f"S={case['seq']} board online softmax (modeled)")
        if "cpu_softmax_s" in rows[0]:
            a2.plot(b, [r["cpu_softmax_s"] for r in rows], "s--", label=f"S={case['seq']} CPU softmax (measured)")
        k = [r["replaced"] for r in case["by_layers_replaced"]]
        a3.plot(k, [r["board_speedup"] for r in case["by_layers_replaced"]], "o-",
                label=f"S={case['seq']} board (modeled)")
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
    a1.set_ylabel("speedup: SwiftMax over online softmax")
    a1.set_title("(a) each normalizer on its split of the AIE array", fontsize=9)
    a2.set_yscale("log")
    a2.set_ylabel(f"seconds for {data['layers']} sublayers")
    a2.set_title("(a) modeled board time vs measured CPU time", fontsize=9)
    a3.set_xlabel(f"sublayers with SwiftMax (of {data['layers']})")
    a3.set_ylabel("speedup over all online softmax")
    a3.set_title(f"(b) batch {data['cases'][0]['layer_batch']}", fontsize=9)
    for ax in (a1, a2, a3):
        ax.legend(fontsize=6)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"Fig. 5 for the whole sublayer: {data['workload']}; board figures modeled, CPU figures measured",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


__all__ = ["BATCHES", "SUBLAYER_SEQS", "SUBLAYER_TITLE", "Fig5Case", "cpu_layer_seconds", "cpu_sublayer_seconds",
           "fig5_data", "fig5_plots", "fig5_sublayer_data", "fig5_sublayer_plot", "roofline", "stage_bars"]

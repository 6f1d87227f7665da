"""``vckattn perf`` and ``vckattn perf explore``: the modeled performance of the attention block."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from vckattn.golden.errors import InputError, UserError
from vckattn.host.output import write_json

from .common import Subparsers, output_dir, output_file, positive_float, positive_int

DESCRIPTION = """\
The modeled performance of the attention block on the XCVC1902 of a VCK5000 (or VCK190): the
engine's QKᵀ and P·V kernels on the AI Engines, SwiftMax (or online softmax) in the PL, fed from
the card's DDR. Every figure is MODELED, not measured on a board: device limits come
from hw/perf/device.json (each with its source); the AIE kernels' cycles from their own
instrumented vector path and a documented cost table; PL resources and cycles from Yosys and
Verilator; the movers' costs from documented assumptions. For a workload (flags, --bundle or
--config) on a design point (the committed best design by default, --design-from-manifest NAME,
--design FILE, the design flags) it prints each kernel's efficiency (MACs / (cycles x 128)), the
time each stage is busy per layer (DDR, Q and K/V into the AIE, QKᵀ, the score channels, P·V, O
out, the output mover), the bottleneck, the layer time on the card, TOPS and % of the 128 int8
TOPS peak, the DDR roof, and resources used vs available (movers and AXI masters counted). Beside
the device time it prints the END-TO-END time of a layer as the host code runs it: the host's
compute-unit starts, buffer syncs and graph runs, counted by running the host's launch code
(host/launch_counts.py), each priced from a public XRT measurement, the syncs' bytes at the PCIe
rate, and the host's own LayerNorm (encoders) and Q/K/V projections (--operands host) measured on
this machine (hw/perf/data/host_ops.json). --simulate also runs the graph as a discrete-event simulation (buffers and
their depths, the cascade, packet merge and split, one DDR bank) and prints it beside the closed
form. Only designs the generator builds are reported: --operands on_chip (no on-chip operand
feeder is generated) is refused, and --scope sublayer reports the fastest encoder split whose PL top
the generator builds (an encoder's shape: --seq, --batch, --heads, --d-head; the full-size decoder,
vck5000_sublayer_decoder, is generated and checked by `vckattn hw generate` and `vckattn hw check`).
`perf explore` searches the design space for the fastest design per normalizer."""

EPILOG = """\
example:
  vckattn perf --seq 512 --batch 8 --simulate
  vckattn perf --seq 512 --batch 8 --operands host --json perf.json
  vckattn perf --design-from-manifest engine_small --seq 128 --batch 1
  vckattn perf explore --seq 512 --batch 8 --json explore.json --plots results/perf"""

EXPLORE_DESCRIPTION = """\
Search the space of engine designs (pipelines of QKᵀ/P·V AIE kernels owning key slices, int8/int16
scores through the AIE's shift-round-saturate, score channels of 128-bit PLIOs with a normalizer
instance each) under the device's limits, keeping --headroom of every resource free, for the
fastest design with SwiftMax and with online softmax (all MODELED). Reports SwiftMax against
online softmax at equal resources (speedup: online softmax restricted to the SwiftMax design's AIE
tiles, PLIOs, LUTs, FFs and DSPs) and at equal throughput (LUT ratio of the normalizers). --plots
also writes the roofline, the stage times and the SwiftMax paper's Fig. 5 from the model (speedup
vs batch 1..64 and vs layers replaced, BERT-base, S = 128 and 512) with a CPU time measured in the
same run (torch fp32, labeled measured). The search takes seconds; --plots adds the CPU timing.
--scope sublayer compares the two normalizers for the whole encoder sublayer instead: the fastest
split of the AIE array between the Q/K/V and W_O projection cascades and the attention pipelines
for each, online softmax at the SwiftMax split's AIE kernels and normalizer LUTs and FFs (speedup),
and each normalizer's split with the fewest normalizer LUTs at the slower one's throughput (LUT
ratio); --plots writes Fig. 5 for the sublayer (fig5_sublayer.png, fig5_sublayer.json)."""

EXPLORE_EPILOG = """\
example:
  vckattn perf explore --seq 512 --batch 8 --layers 12 --json explore.json --plots results/perf
  vckattn perf explore --scope sublayer --seq 512 --batch 8 --json explore_sublayer.json"""


def _workload_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload (default: BERT-base attention, 12 heads x 64, S = 512, batch 8, 12 layers)")
    g.add_argument("--heads", type=positive_int, default=None, help="query heads (default 12)")
    g.add_argument("--d-head", type=positive_int, default=None, help="head size (default 64)")
    g.add_argument("--seq", type=positive_int, default=None, help="sequence length (default 512)")
    g.add_argument("--batch", type=positive_int, default=8, help="batch size (default 8)")
    g.add_argument("--layers", type=positive_int, default=None, help="attention layers (default 12)")
    g.add_argument("--kv-heads", type=positive_int, default=None, help="K/V heads (grouped-query attention)")
    g.add_argument("--normalizer", default=None, metavar="N[,N...]",
                   help="swiftmax or softmax (online softmax), one for all layers or one per layer "
                   "(default swiftmax; a bundle's own per layer)")
    g.add_argument("--norm-site", choices=("none", "bhyt_approx", "rmsnorm", "layernorm"), default=None,
                   help="pre-norm site before attention (LayerNorm is modeled as an RMSNorm-like unit); default: "
                   "none, or from the bundle/config")
    g.add_argument("--operands", choices=("ddr", "host", "on_chip"), default="ddr",
                   help="where Q, K, V come from: card DDR (default), the host over PCIe (this toolkit's flow "
                   "as built: the host's projections are added to the end-to-end time); on_chip is refused (the "
                   "generator emits no on-chip operand feeder)")
    g.add_argument("--bundle", type=Path, metavar="B", help="take the model's shape and per-layer normalizers "
                   "from a bundle (vckattn export)")
    g.add_argument("--config", type=Path, metavar="config.json", help="take the model's shape from a Hugging "
                   "Face config.json")
    g.add_argument("--board", choices=("vck5000", "vck190"), default="vck5000", help="device limits (default "
                   "vck5000)")


def _design_args(p: argparse.ArgumentParser) -> None:
    from vckattn.hw.design.manifest import default_manifest

    g = p.add_argument_group(f"design point (default: the committed best design, bitstreams/{default_manifest()}.json; "
                             "each flag overrides one field)")
    g.add_argument("--design-from-manifest", metavar="NAME", default=None,
                   help=f"an engine build's manifest (name in bitstreams/ or .json file) as the design (default "
                   f"{default_manifest()})")
    g.add_argument("--design", type=Path, metavar="FILE", help="a design point as JSON (the `design` object of "
                   "`perf --json` or of `perf explore --json`'s best designs)")
    for flag, typ, what in (
        ("--pipelines", positive_int, "identical pipelines"),
        ("--qk-kernels", positive_int, "QKᵀ AIE kernels per pipeline (each owns a key slice)"),
        ("--pv-kernels", positive_int, "P·V AIE kernels per pipeline"),
        ("--q-rows", positive_int, "query rows per tile"),
        ("--score-plios", positive_int, "score channels per pipeline: AIE->PL score PLIOs (as many P PLIOs back)"),
        ("--max-seq", positive_int, "keys the engine's kernels are built for (MAX_KEYS)"),
        ("--head-dim", positive_int, "head size the engine's kernels compute (D)"),
        ("--lanes", positive_int, "lanes per normalizer instance (both normalizers)"),
        ("--norm-lanes", positive_int, "lanes of the pre-norm site unit"),
        ("--pl-clock", positive_float, "PL clock in MHz"),
    ):
        g.add_argument(flag, type=typ, default=None, help=what)
    g.add_argument("--score-bits", type=int, choices=(8, 16), default=None, help="score width leaving the AIE")


def _scope_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scope", choices=("attention", "sublayer"), default="attention",
                   help="attention (default): the attention block; sublayer: the whole encoder sublayer (Q/K/V and "
                   "W_O projections on AIE GEMM cascades beside the attention pipelines, X in and the output once "
                   "through DDR), the best split of the AIE array for --seq, --batch, --heads and --d-head (MODELED)")
    p.add_argument("--tile-cap", type=float, default=0.8, metavar="F",
                   help="with --scope sublayer: the fraction of the AIE tiles the split may use (default 0.8; "
                   "every other resource, PLIOs, LUT, FF, DSP, BRAM and URAM, within 80%%)")


def add_perf(sub: Subparsers) -> None:
    p = sub.add_parser("perf", help="modeled performance of the attention block on a VCK5000 (stages, bottleneck, "
                       "TOPS, resources); `perf explore` finds the fastest design",
                       description=DESCRIPTION, epilog=EPILOG)
    _workload_args(p)
    _design_args(p)
    p.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="write the result as JSON ('-': stdout)")
    p.add_argument("--plots", type=Path, metavar="DIR", help="write roofline.png and stages.png")
    p.add_argument("--simulate", action="store_true", help="also run the discrete-event simulation of the engine's "
                   "graph (buffers, cascade, packet merge/split, one DDR bank; SimPy) and print it beside the closed "
                   "form (--scope sublayer: of the sublayer's graph on the best split)")
    _scope_args(p)
    p.set_defaults(func=run_perf)
    psub = p.add_subparsers(title="actions", dest="perf_action", metavar="ACTION", parser_class=type(p))
    e = psub.add_parser("explore", help="search the design space for the fastest design per normalizer",
                        description=EXPLORE_DESCRIPTION, epilog=EXPLORE_EPILOG)
    _workload_args(e)
    e.add_argument("--pl-clock", type=positive_float, default=None, help="PL clock of the designs in MHz (default: "
                   "the device file's model default, 250)")
    e.add_argument("--headroom", type=float, default=0.20, help="fraction of every resource kept free: AIE tiles, "
                   "PLIOs, LUTs, FFs, DSPs, BRAM, URAM (default 0.20)")
    e.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="write the report as JSON ('-': stdout)")
    e.add_argument("--plots", type=Path, metavar="DIR", help="write roofline.png, stages.png, fig5_batch.png, "
                   "fig5_layers.png (+ fig5.json)")
    e.add_argument("--no-cpu", action="store_true", help="with --plots: no CPU timing in Fig. 5")
    _scope_args(e)
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=run_explore)
    v = psub.add_parser("validate", help="the model calibrated on one published AIE design (MaxEVA int8) and "
                        "validated without refitting on the others (MaxEVA fp32, CHARM, ARIES)",
                        description="Calibration "
                        "and validation of the performance model against published AIE GEMM designs, all figures "
                        "MODELED. The costs no kernel code shows (buffer hand-offs, loop and call overheads, stream "
                        "back-pressure) are named parameters (hw/perf/calibration.py); the hand-off is fitted on ONE "
                        "design and the others are predicted with it, each design's own parameters and kernel code "
                        "(hw/perf/published.py, hw/perf/gemm_kernels.py). Prints the fit, the validation table "
                        "(published figure and source, modeled, error, what bounds it) and a leave-one-out table. "
                        "What this covers and what not: docs/validation.md.",
                        epilog="example:\n  vckattn perf validate --json validate.json")
    v.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="write the rows as JSON ('-': stdout)")
    v.set_defaults(func=run_validate)


# -------------------------------------------------------------------------------------------- helpers


def _normalizers(text: str | None, layers: int) -> list[str] | None:
    if text is None:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    if len(names) == 1:
        names = names * layers
    if len(names) != layers:
        raise UserError(f"--normalizer: {len(names)} normalizers for {layers} layers")
    return names


def build_workload(args: argparse.Namespace) -> Any:
    """The :class:`Workload` of the command's flags, bundle or config (flags override them)."""
    from dataclasses import replace

    from vckattn.hw.perf import model

    norm_site = None if args.norm_site in (None, "none") else args.norm_site
    _refuse_unbuilt_operands(args)
    try:
        if args.bundle is not None and args.config is not None:
            raise UserError("give --bundle or --config, not both")
        if args.bundle is not None:
            from vckattn.host.bundle import load_bundle

            b = load_bundle(args.bundle)
            m = b.manifest
            norms = ["swiftmax" if layer["swiftmax"] is not None else "softmax" for layer in m["layers"]]
            check_bundle_runs(args, b, norms)
            w = model.workload_from_bundle_info(m["model"], norms, m["norm"], seq=args.seq, batch=args.batch,
                                                operands=args.operands)
        elif args.config is not None:
            try:
                cfg = json.loads(args.config.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(f"{args.config}: cannot read a config.json ({exc})") from None
            try:
                w = model.workload_from_hf_config(cfg, seq=args.seq, batch=args.batch, layers=args.layers,
                                                  operands=args.operands)
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{args.config}: {exc}") from None
        else:
            layers = args.layers or 12
            w = model.Workload(heads=args.heads or 12, d_head=args.d_head or 64, seq=args.seq or 512,
                               batch=args.batch, layers=("swiftmax",) * layers, kv_heads=args.kv_heads,
                               operands=args.operands)
        changes: dict[str, Any] = {}
        for flag, fieldname in (("heads", "heads"), ("d_head", "d_head"), ("kv_heads", "kv_heads")):
            if getattr(args, flag) is not None and (args.bundle or args.config):
                changes[fieldname] = getattr(args, flag)
        if args.layers is not None and args.bundle is not None:
            changes["layers"] = (w.layers * args.layers)[: args.layers]
        norms = _normalizers(args.normalizer, len(changes.get("layers", w.layers)))
        if norms is not None:
            changes["layers"] = tuple(norms)
        if args.norm_site is not None:
            changes["norm_site"] = norm_site
        return replace(w, **changes) if changes else w
    except (ValueError, KeyError) as exc:
        raise UserError(f"workload: {exc}") from None


def check_bundle_runs(args: argparse.Namespace, bundle: Any, norms: list[str]) -> None:
    """A bundle is modeled only if a committed build runs it (head size, heads, normalizers, the sequence), and the
    build the design comes from (--design-from-manifest, default the committed best design) when it is one: else the
    same refusal as `run` and `export` give (status 5), not a model of a design that cannot run it."""
    from vckattn.hw.design.manifest import (
        ManifestError,
        check_bundle,
        default_manifest,
        load_manifest,
        runnable_problem,
    )

    model = bundle.manifest["model"]
    seq = args.seq or int(model["max_seq_len"])
    problem = runnable_problem(int(model["head_dim"]), int(model["num_heads"]), set(norms), seq)
    if problem is not None:
        raise ManifestError(args.bundle, "model", problem)
    if getattr(args, "design", None) is None and not getattr(args, "generated", False):
        manifest = load_manifest(getattr(args, "design_from_manifest", None) or default_manifest())
        check_bundle(manifest, bundle, seq_len=seq)


def refuse_unbuildable(d: Any, board: str) -> None:
    """Refuse (one line) a design the generator does not build (status 2) or the design-rule check fails (status 4):
    only designs that can exist are modeled."""
    from vckattn.hw.design import layout
    from vckattn.hw.design.check import refuse_violations
    from vckattn.hw.design.render import HEAD_DIMS, check_design
    try:
        check_design(d, d.max_seq or 512, (d.head_dim,) if d.head_dim else HEAD_DIMS)
        layout.layout(d.pipelines, d.qk_kernels, d.score_plios)
    except layout.LayoutError as exc:
        raise UserError(f"the generator does not build this design: {exc}") from None
    refuse_violations(d, board, d.max_seq)


def build_design(args: argparse.Namespace) -> Any:
    """The :class:`Design` of --design-from-manifest / --design / the defaults, with the flags applied."""
    from dataclasses import replace

    from vckattn.hw.design.manifest import default_manifest, load_manifest
    from vckattn.hw.perf import model

    if args.design is not None and args.design_from_manifest is not None:
        raise UserError("give one of --design, --design-from-manifest")
    try:
        if args.design is not None:
            try:
                data = json.loads(args.design.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(f"{args.design}: cannot read a design ({exc})") from None
            try:
                d = model.design_from_json(data.get("design", data) if isinstance(data, dict) else data)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise InputError(f"{args.design}: not a usable design ({exc})") from None
        else:
            d = model.design_from_manifest(load_manifest(args.design_from_manifest or default_manifest()).data)
        changes: dict[str, Any] = {}
        for flag, name in (("pipelines", "pipelines"), ("qk_kernels", "qk_kernels"), ("pv_kernels", "pv_kernels"),
                           ("q_rows", "q_rows"), ("score_plios", "score_plios"), ("norm_lanes", "norm_lanes"),
                           ("pl_clock", "pl_clock_mhz"), ("score_bits", "score_bits"), ("max_seq", "max_seq"),
                           ("head_dim", "head_dim")):
            if getattr(args, flag) is not None:
                changes[name] = getattr(args, flag)
        if args.lanes is not None:  # the online-softmax unit's lanes too where the design has one
            changes["lanes_swiftmax"] = args.lanes
            if d.lanes_online_softmax or "softmax" in (args.normalizer or ""):
                changes["lanes_online_softmax"] = args.lanes
        if changes:
            d = replace(d, **changes, name=d.name + " (modified)" if d.name else "")
        return d
    except (ValueError, TypeError) as exc:
        raise UserError(f"design: {exc}") from None


def _fmt_s(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def print_perf(perf: Any, title: str, console: Any) -> None:
    """Rich tables of one :class:`Perf`: stages, summary, resources."""
    from rich.table import Table

    from vckattn.hw.perf.model import STAGES

    w, d = perf.workload, perf.design
    t = Table(title=f"{title}, {workload_title(w)} — MODELED (not measured on a board)")
    for col in ("stage", "busy per layer", "share of layer", "bound by"):
        t.add_column(col, justify="left" if col in ("stage", "bound by") else "right")
    for s in perf.stages:
        mark = " ◀ bottleneck" if s.name == perf.bottleneck else ""
        t.add_row(STAGES[s.name] + mark, _fmt_s(s.seconds), f"{s.seconds / perf.seconds_per_layer:.0%}", s.bound_by)
    console.print(t)
    console.print(f"workload: {w.batch} x {w.heads} heads x {w.d_head}, S = {w.seq}, {len(w.layers)} layers "
                  f"({', '.join(w.normalizers)}), operands in {w.operands}"
                  + (f", norm site {w.norm_site}" if w.norm_site else ""))
    console.print(f"design: {d.pipelines} pipeline(s) x ({d.qk_kernels} QKᵀ + {d.pv_kernels} P·V kernels + a "
                  "requantizer, "
                  f"{d.score_plios} score channel(s) of {d.lanes_swiftmax or d.lanes_online_softmax} lanes"
                  f"{', products in DSPs' if d.swiftmax_products == 'dsp' else ''}), "
                  f"tile {d.q_rows} rows, int{d.score_bits} scores, O int{d.o_bits}, PL {d.pl_clock_mhz:g} MHz")
    k = Table(title=f"AIE kernels, one tile, {workload_title(w)} (MODELED from their instrumented operations)")
    for col in ("kernel", "tile (rows x keys x D)", "MACs", "cycles", "efficiency"):
        k.add_column(col, justify="left" if col == "kernel" else "right")
    for row in perf.kernels:
        k.add_row(row["kernel"], f"{row['q_rows']} x {row['slice_keys']} x {row['d']}", f"{row['macs']:,}",
                  f"{row['cycles']:,.0f}",
                  "—" if row["efficiency"] is None else f"{row['efficiency']:.1%}")
    console.print(k)
    console.print(f"[bold]{_fmt_s(perf.seconds_per_layer)} per layer[/bold] ({_fmt_s(perf.seconds_total)} for "
                  f"{len(w.layers)}), [bold]{perf.tops:.3g} TOPS = {perf.fraction_of_peak:.2%} of "
                  f"{perf.device.peak_int8_ops / 1e12:.0f} int8 TOPS[/bold]; bottleneck: {STAGES[perf.bottleneck]}")
    if perf.host_serial_seconds:
        dev_s = perf.device_seconds_per_layer
        console.print(f"on the card: {_fmt_s(dev_s)} per layer = "
                      f"{w.ops_per_layer / dev_s / perf.device.peak_int8_ops:.2%} of peak "
                      f"(+ {_fmt_s(perf.host_serial_seconds)} host launch, assumed)")
    print_end_to_end(perf, console)
    if w.operands != "on_chip":
        console.print(f"DDR roof (Q, K, V, A once at {perf.device.ddr_bytes_per_s / 1e9:g} GB/s): "
                      f"{_fmt_s(perf.ddr_roof_seconds)} = {perf.ddr_roof_seconds / perf.seconds_per_layer:.1%} of this "
                      f"layer time ({perf.ddr_roof_seconds / perf.device_seconds_per_layer:.1%} on the card)")
    console.print(f"on-chip ceiling {perf.tops_on_chip:.3g} TOPS "
                  f"({perf.tops_on_chip * 1e12 / perf.device.peak_int8_ops:.1%}; a bound, not a buildable design: "
                  "the generator emits no on-chip operand feeder)")
    r = Table(title=f"resources, {workload_title(w)} (MODELED)")
    for col in ("resource", "used", "available", "use"):
        r.add_column(col, justify="left" if col == "resource" else "right")
    for k, v in perf.used.items():
        avail = perf.available.get(k)
        if avail is None:
            continue
        style = "red" if v > avail else ""
        r.add_row(k, f"{v:,.1f}" if v % 1 else f"{v:,.0f}", f"{avail:,.0f}", f"[{style}]{v / avail:.1%}[/{style}]"
                  if style else f"{v / avail:.1%}")
    console.print(r)
    console.print("fits the device" if perf.fits else f"[red]does NOT fit: {', '.join(perf.over)}[/red]")


#: how each part of the host's time per layer is named in the end-to-end table
_HOST_PARTS = {"cu_starts": "compute-unit starts", "cu_waits": "compute-unit waits", "graph": "AIE graph run + wait",
               "syncs_fixed": "buffer syncs (fixed cost)", "pcie_bytes": "buffer syncs (bytes over PCIe)",
               "host_layernorm": "host LayerNorm (encoder)", "host_qkv_projections": "host Q/K/V projections"}
_HOST_SOURCE = {"cu_starts": "cu_start", "cu_waits": "cu_wait", "graph": "graph_run", "syncs_fixed": "sync_fixed"}


def print_end_to_end(perf: Any, console: Any) -> None:
    """Device time and end-to-end time per layer side by side: the host's calls as its code makes them (counted),
    each priced (MODELED), and the host's own operations (measured here)."""
    from rich.table import Table

    e = perf.end_to_end
    if e is None:
        console.print(f"end to end: not modeled ({perf.end_to_end_refused})")
        return
    c = e.counts
    t = Table(title=f"one layer, device vs end to end ({workload_title(perf.workload)}) — MODELED")
    for col in ("part", "count", "time per layer", "how"):
        t.add_column(col, justify="right" if col in ("count", "time per layer") else "left")
    t.add_row("[bold]device[/bold] (card, operands in its DDR)", "", _fmt_s(perf.end_to_end_device_seconds),
              "MODELED: the stages above")
    counts = {"cu_starts": c.cu_starts, "cu_waits": c.cu_waits, "graph": c.graph_runs, "syncs_fixed": c.syncs,
              "pcie_bytes": f"{(c.bytes_to_device + c.bytes_from_device) / 1e6:.2f} MB"}
    for k, secs in e.parts.items():
        short = e.sources.get(f"{_HOST_SOURCE[k]}_short") if k in _HOST_SOURCE else None
        src = short or e.sources[k]
        how = ("MEASURED here (torch): " + src) if k.startswith("host_") else ("counted; " + src)
        t.add_row(_HOST_PARTS[k], str(counts.get(k, "")), _fmt_s(secs), how)
    total = perf.end_to_end_seconds_per_layer
    t.add_row("[bold]end to end[/bold]", "", f"[bold]{_fmt_s(total)}[/bold]",
              f"{perf.workload.ops_per_layer / total / perf.device.peak_int8_ops:.2%} of peak; serial sum")
    console.print(t)
    console.print("full sources: --json (end_to_end.sources); the host's prices are public measurements on an Alveo "
                  "card, not on a VCK5000")
    console.print(f"device {_fmt_s(perf.end_to_end_device_seconds)} | end to end {_fmt_s(total)} per layer "
                  f"({_fmt_s(total * len(perf.workload.layers))} for {len(perf.workload.layers)} layers); calls "
                  f"counted from the host's launch code: {c.cu_starts} compute-unit starts, {c.syncs} buffer syncs "
                  f"({c.syncs_to_device} to, {c.syncs_from_device} from the card), {c.graph_runs} graph run")


def workload_title(w: Any) -> str:
    """The workload a table models, in words: its model name (where it has one) and its shape."""
    name = f"{w.name}: " if w.name else ""
    kv = f" ({w.n_kv_heads} K/V heads)" if w.n_kv_heads != w.heads else ""
    return (f"{name}{w.heads} heads x {w.d_head}{kv}, S = {w.seq}, batch {w.batch}, {len(w.layers)} layer"
            f"{'s' if len(w.layers) != 1 else ''}, operands in {w.operands}")


# ----------------------------------------------------------------------------------------------- perf


#: attention-only flags --scope sublayer refuses (flag, attribute, its default)
_ATTENTION_ONLY = (("--bundle", "bundle", None), ("--config", "config", None), ("--kv-heads", "kv_heads", None),
                   ("--layers", "layers", None), ("--norm-site", "norm_site", None), ("--operands", "operands", "ddr"),
                   ("--design", "design", None), ("--design-from-manifest", "design_from_manifest", None),
                   ("--plots", "plots", None), ("--pl-clock", "pl_clock", None))
_SUBLAYER_FLAGS = "--seq, --batch, --heads, --d-head and --tile-cap"


def sublayer_shape(args: argparse.Namespace, command: str) -> Any:
    """The :class:`SublayerShape` of ``perf [explore] --scope sublayer``'s flags; the attention-only flags refused
    (status 2), as are a board other than the VCK5000 and a tile cap outside (0, 1]."""
    from vckattn.hw.perf import sublayer

    allowed = {"--plots"} if command == "explore" else set()
    for flag, attr, default in _ATTENTION_ONLY:
        if flag not in allowed and getattr(args, attr, default) != default:
            raise UserError(f"{flag} applies to --scope attention only; {command} --scope sublayer takes "
                            f"{_SUBLAYER_FLAGS}")
    design_flags = ("pipelines", "qk_kernels", "pv_kernels", "q_rows", "score_plios", "max_seq", "head_dim", "lanes",
                    "norm_lanes", "score_bits")
    given = [f"--{f.replace('_', '-')}" for f in design_flags if getattr(args, f, None) is not None]
    if given:
        raise UserError(f"{given[0]} sets an attention design point; --scope sublayer searches the split of the array "
                        "itself")
    if args.board != "vck5000":
        raise UserError("--scope sublayer models the VCK5000 only")
    if not 0 < args.tile_cap <= 1:
        raise UserError(f"--tile-cap must be in (0, 1], got {args.tile_cap}")
    return sublayer.SublayerShape(batch=args.batch, seq=args.seq or 512, heads=args.heads or 12,
                                  head_dim=args.d_head or 64)


#: why a sublayer with online softmax is not built: the generator writes the score channels of a sublayer with SwiftMax
ONLINE_NOT_BUILT = ("the generator writes a sublayer's score channels with SwiftMax lanes only, so no online-softmax "
                    "sublayer (and no SwiftMax against online softmax comparison of built sublayers) exists")


def _refuse_unbuilt_sublayer(shape: Any, normalizer: str = "swiftmax") -> None:
    """No figure for a sublayer the generator cannot build: one line, status 2."""
    if normalizer != "swiftmax":
        raise UserError(f"--scope sublayer: not modeled, {ONLINE_NOT_BUILT}")


def _refuse_unbuilt_operands(args: argparse.Namespace) -> None:
    """No figure for operands the generator builds no feeder for (on chip): one line, status 2."""
    if args.operands == "on_chip":
        raise UserError("--operands on_chip: not modeled, the generator emits no on-chip operand feeder (a fused "
                        "projection engine); the built engine reads Q, K, V from card DDR (--operands ddr) after the "
                        "host sends them (--operands host)")


def _sublayer_normalizer(args: argparse.Namespace) -> str:
    names = _normalizers(args.normalizer, 1) if args.normalizer is not None else ["swiftmax"]
    name = {"swiftmax": "swiftmax", "softmax": "online_softmax", "online_softmax": "online_softmax"}.get(names[0])
    if name is None:
        raise UserError(f"--normalizer: {names[0]!r} is not swiftmax or softmax")
    return name


def _split_units(sp: dict[str, Any]) -> dict[str, str]:
    norm = "SwiftMax" if sp["normalizer"] == "swiftmax" else "online softmax"
    return {"qkv": f"{sp['n_qkv']} Q/K/V GEMM cascades ({sp['qkv_tile'][0]} x {sp['qkv_tile'][1]} x "
                   f"{sp['qkv_tile'][2]} tiles, int8 out)",
            "attention": f"{sp['n_att']} attention pipelines ({sp['kq']} QKᵀ + {sp['kq']} P·V kernels and a "
                         f"requantizer, {sp['q_rows']}-row tiles, {sp['score_channels']} {norm} channel(s))",
            "o": f"{sp['n_o']} W_O GEMM cascades ({sp['o_tile'][0]} x {sp['o_tile'][1]} x {sp['o_tile'][2]} "
                 "tiles, int32 out)"}


def _print_split(r: dict[str, Any], title: str, console: Any) -> None:
    from rich.table import Table

    t = Table(title=f"{title} — MODELED (not measured on a board)")
    for col in ("stage", "units", "kernels", "busy (µs)", "efficiency a tile"):
        t.add_column(col, justify="left" if col in ("stage", "units") else "right")
    units = _split_units(r["split"])
    for name, st in r["stages"].items():
        t.add_row(name + (" ◀ bound" if r["bound"] == name else ""), units[name], str(st["kernels"]),
                  f"{st['seconds'] * 1e6:,.1f}", f"{st['efficiency']:.1%}")
    console.print(t)
    console.print(f"{r['seconds'] * 1e6:,.1f} µs per sublayer, {r['tops']:.1f} TOPS = {r['fraction_of_peak']:.1%} "
                  f"of 128 int8 TOPS ({r['kernels']} AIE kernels)")
    _print_resources(r["resources"], console)


#: how the sublayer's resources are named in its table
_RESOURCE_LABELS = {"aie_tiles": "AIE tiles", "plio_in": "PLIOs in (128-bit)", "plio_out": "PLIOs out (128-bit)",
                    "lut": "LUT", "ff": "FF", "dsp": "DSP", "bram": "BRAM36", "uram": "URAM"}


def _print_resources(res: dict[str, Any], console: Any) -> None:
    """Every resource of a sublayer split: used, of the device's, the fraction; its fullest marked."""
    from rich.table import Table

    t = Table(title="resources of the split (MODELED; each must stay within 80%)")
    for col in ("resource", "used", "available", "fraction"):
        t.add_column(col, justify="left" if col == "resource" else "right")
    for k, label in _RESOURCE_LABELS.items():
        t.add_row(label + (" ◀ fullest" if res["fullest"] == k else ""), f"{res['used'][k]:,.0f}",
                  f"{res['available'][k]:,.0f}", f"{res['fraction'][k]:.1%}")
    console.print(t)
    io, bufs = res["plios"], res["buffers"]
    console.print(f"PLIOs: Q/K/V {io['qkv']['x']} x (broadcast to {io['qkv']['groups']} lock-step group(s)) + "
                  f"{io['qkv']['w']} w in, {io['qkv']['out']} out; W_O {io['o']['x']} x + {io['o']['w']} w in, "
                  f"{io['o']['out']} out; attention {io['attention']['in']} in, {io['attention']['out']} out. "
                  "PL buffers: " + ", ".join(f"{k} {b['bytes'] / 2**20:.2f} MiB in {b[b['memory']]} "
                                             f"{b['memory'].upper()}" for k, b in bufs.items()))


def run_sublayer(args: argparse.Namespace) -> int:
    """``vckattn perf --scope sublayer``: the best split of the array for the whole encoder sublayer (closed form;
    with --simulate, its graph simulated beside it)."""
    from vckattn.host.cli.common import make_console
    from vckattn.hw.design.explore_sublayer import best_placeable

    shape = sublayer_shape(args, "perf")
    normalizer = _sublayer_normalizer(args)
    _refuse_unbuilt_sublayer(shape, normalizer)
    output_file(args.json_out, what="--json")
    try:
        r = best_placeable(shape, tile_cap=args.tile_cap, built=True, normalizer=normalizer)
    except ValueError as exc:
        raise InputError(f"--scope sublayer: {exc}") from None
    console = make_console(stderr=args.json_out is not None and str(args.json_out) == "-")
    _print_split(r, "the whole encoder sublayer", console)
    console.print(f"workload: encoder sublayer, {shape.heads} heads x {shape.head_dim} (d_model {shape.d_model}), "
                  f"S = {shape.seq}, batch {shape.batch}, {normalizer.replace('_', ' ')}; the AIE array split within "
                  f"{args.tile_cap:.0%} of its tiles, every other resource within 80%")
    console.print(f"DDR: {r['ddr_bytes'] / 1e6:.2f} MB (the weights, X in, the output out) = "
                  f"{r['ddr_seconds'] * 1e6:,.1f} µs at the card's one bank" + (" ◀ bound" if r["bound"] == "ddr"
                                                                               else ""))
    console.print("MODELED: the stages hand over whole sequences (hw/perf/sublayer.py states every assumption); "
                  "every resource costed (AIE tiles, PLIOs, the PL's normalizers, residual adds, movers and buffers) "
                  "and each within its cap")
    result = {"modeled": True, "scope": "sublayer", **r}
    if args.simulate:
        result["simulation"] = _simulate_sublayer(shape, r, console)
    if args.json_out is not None:
        write_json(args.json_out, result)
    return 0


def _simulate_sublayer(shape: Any, closed: dict[str, Any], console: Any) -> dict[str, Any]:
    """The sublayer's graph simulated on the closed form's best split, printed beside it."""
    from rich.table import Table

    from vckattn.hw.design import simulate
    from vckattn.hw.design.simulate_sublayer import simulate_sublayer
    from vckattn.hw.perf import sublayer

    split = sublayer.SublayerSplit.from_json(closed["split"])
    try:
        sim = simulate_sublayer(shape, split)
    except simulate.Deadlock as exc:
        raise UserError(f"--simulate: {exc}") from None
    diff = sim.seconds / closed["seconds"] - 1
    t = Table(title="simulated sublayer graph vs closed form, one launch (both MODELED)")
    for col in ("", "closed form", "simulated", "difference"):
        t.add_column(col, justify="left" if not col else "right")
    t.add_row("sublayer", _fmt_s(closed["seconds"]), _fmt_s(sim.seconds), f"{diff:+.1%}")
    for stage, ready in closed["sequence_ready"].items():
        got = sim.sequence_ready[stage]
        t.add_row(f"{stage}: last sequence handed over", _fmt_s(ready[-1]), _fmt_s(got[-1]),
                  f"{got[-1] / ready[-1] - 1:+.1%}")
    console.print(t)
    console.print(f"simulated: {sim.events:,} events; {closed['ops'] / sim.seconds / 1e12:.1f} TOPS = "
                  f"{closed['fraction_of_peak'] * closed['seconds'] / sim.seconds:.1%} of 128 int8 TOPS")
    return {**sim.to_json(), "closed_form_seconds": closed["seconds"], "difference": diff}


def run_perf(args: argparse.Namespace) -> int:
    from vckattn.host import perf_plots as figures
    from vckattn.host.cli.common import make_console
    from vckattn.host.launch_counts import with_end_to_end
    from vckattn.hw.perf import model

    if args.scope == "sublayer":
        return run_sublayer(args)
    if args.tile_cap != 0.8:
        raise UserError("--tile-cap applies to --scope sublayer only")
    output_file(args.json_out, what="--json")
    output_dir(args.plots, what="--plots")
    w = build_workload(args)
    d = build_design(args)
    refuse_unbuildable(d, args.board)
    try:
        dev = model.load_device(args.board)
        perf = with_end_to_end(model.evaluate(w, d, dev))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    console = make_console(stderr=args.json_out is not None and str(args.json_out) == "-")
    print_perf(perf, _design_label(args, d), console)
    result = perf.to_json()
    if args.simulate:
        result["simulation"] = _simulate(w, d, dev, perf, console)
    if args.json_out is not None:
        write_json(args.json_out, result)
    if args.plots is not None:
        label = _design_label(args, d)
        paths = [figures.roofline([(label, perf)], args.plots / "roofline.png", dev),
                 figures.stage_bars([(label, perf)], args.plots / "stages.png")]
        for p in paths:
            console.print(f"wrote {p}")
    return 0


def _design_label(args: argparse.Namespace, d: Any) -> str:
    """The design a table models, named by where it came from (the build's manifest or the design file): its
    recorded name describes the workload it was chosen for, not the one modeled."""
    from vckattn.hw.design.manifest import default_manifest

    if args.design is not None:
        base = f"design {args.design.name}"
    else:
        base = f"build {Path(args.design_from_manifest or default_manifest()).stem}"
    return base + (" (modified)" if d.name.endswith("(modified)") else "")


def _simulate(w: Any, d: Any, dev: Any, perf: Any, console: Any) -> dict:
    """Run the discrete-event simulation of each normalizer's layer and print it beside the closed form, with the
    headline figure: the slower of the two."""
    from rich.table import Table

    from vckattn.hw.design import simulate

    t = Table(title=f"simulated graph vs closed form, one layer, {workload_title(w)} (both MODELED)")
    for col in ("normalizer", "closed form", "simulated", "difference", "headline (slower)", "sim events"):
        t.add_column(col, justify="left" if col == "normalizer" else "right")
    out = {}
    for n in w.normalizers:
        try:
            sim = simulate.simulate(w, d, dev, n)
        except simulate.Deadlock as exc:
            raise UserError(f"--simulate: {exc}") from None
        closed = next(x["seconds"] for x in perf.layer_seconds if x["normalizer"] == n)
        diff = sim.seconds / closed - 1
        head, which = simulate.headline(closed, sim.seconds)
        t.add_row(n, _fmt_s(closed), _fmt_s(sim.seconds), f"{diff:+.1%}", f"{_fmt_s(head)} ({which})",
                  f"{sim.events:,}")
        out[n] = {**sim.to_json(), "closed_form_seconds": closed, "difference": diff, "headline_seconds": head,
                  "headline_from": which}
    console.print(t)
    return out


# -------------------------------------------------------------------------------------------- explore


def run_explore(args: argparse.Namespace) -> int:
    import time
    from dataclasses import replace

    from tqdm import tqdm

    from vckattn.host import perf_plots as figures
    from vckattn.host.cli.common import make_console
    from vckattn.host.progress import bar_disable
    from vckattn.hw.design import explore
    from vckattn.hw.design.manifest import default_manifest, load_manifest
    from vckattn.hw.perf import model

    if not 0 <= args.headroom < 1:
        raise UserError("--headroom must be in [0, 1)")
    if args.scope == "sublayer":
        return run_explore_sublayer(args)
    if args.tile_cap != 0.8:
        raise UserError("--tile-cap applies to --scope sublayer only")
    output_file(args.json_out, what="--json")
    output_dir(args.plots, what="--plots")
    w = build_workload(args)
    dev = model.load_device(args.board)
    console = make_console(stderr=args.json_out is not None and str(args.json_out) == "-")
    per_search = explore.candidate_count(w, dev, args.pl_clock)
    t0 = time.perf_counter()
    with tqdm(total=5 * per_search, desc="explore (5 searches)", unit="cand", disable=bar_disable(not args.quiet),
              leave=False, file=sys.stderr) as bar:
        try:
            ex = explore.explore(w, dev, pl_clock_mhz=args.pl_clock, headroom=args.headroom,
                                 progress=bar.update)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    elapsed = time.perf_counter() - t0
    print_perf(ex.swiftmax, "best SwiftMax design", console)
    print_perf(ex.online_softmax, "best online-softmax design", console)
    if ex.online_equal_resources is not None:
        print_perf(ex.online_equal_resources, "online softmax at the SwiftMax design's resources", console)
    sp, lr = ex.speedup_equal_resources, ex.lut_ratio_equal_throughput
    no_fit = f"none: no online-softmax design fits its {ex.swiftmax.used['dsp']:g} DSPs, " \
        f"{ex.swiftmax.used['lut']:,.0f} LUTs"
    console.print(f"[bold]SwiftMax vs online softmax (modeled): speedup at equal resources "
                  f"{no_fit if sp is None else f'{sp:.2f}x'}; normalizer LUT ratio at equal throughput "
                  f"{'n/a' if lr is None else f'{lr:.1%}'}[/bold] (search: {elapsed:.1f} s)")
    report = ex.to_json()
    report["search_seconds"] = elapsed
    if args.plots is not None:
        name = default_manifest()
        built = model.design_from_manifest(load_manifest(name).data)
        points = []
        try:  # the committed best design, where it runs the workload (its keys and head size)
            points.append((f"{name} (committed)", model.evaluate(replace(w, layers=("swiftmax",) * len(w.layers)),
                                                                 built, dev)))
        except ValueError:
            pass
        points += [("best SwiftMax", ex.swiftmax), ("best online softmax", ex.online_softmax)]
        if ex.online_equal_resources is not None:
            points.append(("online softmax, equal resources", ex.online_equal_resources))
        paths = [figures.roofline(points, args.plots / "roofline.png", dev),
                 figures.stage_bars(points, args.plots / "stages.png")]
        cases = []
        for seq in (128, 512):
            wf = replace(w, seq=seq, batch=8, heads=12, d_head=64, kv_heads=None, norm_site=None,
                         layers=("swiftmax",) * 12)
            exf = ex if (w.seq, w.batch, w.heads, w.d_head, len(w.layers)) == (seq, 8, 12, 64, 12) and \
                w.norm_site is None else explore.explore(wf, dev, pl_clock_mhz=args.pl_clock,
                                                          headroom=args.headroom)
            other = exf.online_equal_resources.design if exf.online_equal_resources else exf.online_softmax.design
            cases.append(figures.Fig5Case(seq, exf.swiftmax.design, other))
        # one step per (sequence length, batch) timed on the CPU
        with tqdm(total=len(cases) * len(figures.BATCHES), desc="Fig. 5 CPU timing", unit="case",
                  disable=bar_disable(not (args.quiet or args.no_cpu)), leave=False, file=sys.stderr) as bar:
            data = figures.fig5_data(cases, cpu=not args.no_cpu, dev=dev,
                                     progress=lambda msg: (bar.set_postfix_str(msg), bar.update(1)))
        write_json(args.plots / "fig5.json", data)
        paths += figures.fig5_plots(data, args.plots)
        report["fig5"] = data
        for p in paths:
            console.print(f"wrote {p}")
    report["scope"] = "attention"
    if args.json_out is not None:
        write_json(args.json_out, report)
    return 0


def run_explore_sublayer(args: argparse.Namespace) -> int:
    """``vckattn perf explore --scope sublayer``: SwiftMax against online softmax for the whole sublayer."""
    import time

    from vckattn.host import perf_plots as figures
    from vckattn.host.cli.common import make_console
    from vckattn.hw.design import explore_sublayer

    shape = sublayer_shape(args, "explore")
    if args.normalizer is not None:
        raise UserError("--normalizer: perf explore compares both normalizers")
    _refuse_unbuilt_sublayer(shape, "online_softmax")  # the comparison needs both normalizers built
    output_file(args.json_out, what="--json")
    output_dir(args.plots, what="--plots")
    console = make_console(stderr=args.json_out is not None and str(args.json_out) == "-")
    t0 = time.perf_counter()
    try:
        ex = explore_sublayer.explore_sublayer(shape, args.tile_cap, args.headroom)
    except ValueError as exc:
        raise InputError(f"--scope sublayer: {exc}") from None
    elapsed = time.perf_counter() - t0
    _print_split(ex.swiftmax, "best SwiftMax split", console)
    _print_split(ex.online_softmax, "best online-softmax split", console)
    for title, c in (("online softmax at the SwiftMax split's resources", ex.online_equal_resources),
                     ("SwiftMax, fewest normalizer LUTs at equal throughput", ex.swiftmax_equal_throughput),
                     ("online softmax, fewest normalizer LUTs at equal throughput", ex.online_equal_throughput)):
        if c is not None:
            n = c["normalizer_resources"]
            console.print(f"{title}: {_split_units(c['split'])['attention']}, {c['split']['n_qkv']} + "
                          f"{c['split']['n_o']} cascades, {c['kernels']} kernels; {c['seconds'] * 1e6:,.1f} µs = "
                          f"{c['fraction_of_peak']:.1%} of peak; normalizers {n['lut']:,.0f} LUTs, {n['ff']:,.0f} "
                          f"FFs, {n['dsp']:,.0f} DSPs")
    sp, lr = ex.speedup_equal_resources, ex.lut_ratio_equal_throughput
    console.print(f"workload: encoder sublayer, {shape.heads} heads x {shape.head_dim} (d_model {shape.d_model}), "
                  f"S = {shape.seq}, batch {shape.batch}; every split within {args.tile_cap:.0%} of the AIE tiles and "
                  f"80% of every other resource (PLIOs, LUT, FF, DSP, BRAM, URAM), its normalizers alone within "
                  f"{1 - args.headroom:.0%} of the PL's LUTs, FFs and DSPs")
    console.print(f"[bold]SwiftMax vs online softmax, whole sublayer (modeled): speedup at equal resources "
                  f"{'none: no online-softmax split fits' if sp is None else f'{sp:.2f}x'}; normalizer LUT ratio at "
                  f"equal throughput {'n/a' if lr is None else f'{lr:.1%}'}[/bold] (search: {elapsed:.1f} s)")
    report = ex.to_json()
    report["search_seconds"] = elapsed
    if args.plots is not None:
        known = {shape.seq: ex} if (shape.batch, shape.heads, shape.head_dim) == (8, 12, 64) else {}
        data = figures.fig5_sublayer_data(cpu=not args.no_cpu, tile_cap=args.tile_cap, headroom=args.headroom,
                                          explorations=known)
        write_json(args.plots / "fig5_sublayer.json", data)
        path = figures.fig5_sublayer_plot(data, args.plots / "fig5_sublayer.png")
        report["fig5_sublayer"] = data
        console.print(f"wrote {path}")
    if args.json_out is not None:
        write_json(args.json_out, report)
    return 0


# ------------------------------------------------------------------------------------------- validate


def run_validate(args: argparse.Namespace) -> int:
    from rich.table import Table

    from vckattn.host.cli.common import make_console
    from vckattn.hw.perf import calibration, calibration_fit, gemm_kernels, published

    output_file(args.json_out, what="--json")
    rows = published.validate()
    stored = calibration.load_fit()
    loo = calibration_fit.leave_one_out()
    console = make_console(stderr=args.json_out is not None and str(args.json_out) == "-")
    tol, goal = published.TOLERANCE, published.GOAL
    fit_row = next(r for r in rows if r["role"] == "fit")
    fitted = ", ".join(f"{k} = {calibration.param(k):.2f} {calibration.PARAMETERS[k].unit}" for k in calibration.FITTED)
    console.print(f"MODELED. Calibration fitted on ONE design, {fit_row['name']} ({fit_row['board']}; "
                  f"{fit_row['citation']}): {fitted}; residual {fit_row['error']:+.2e} "
                  f"(reproduce: {calibration.FIT_COMMAND}).")
    console.print("held parameters: " + "; ".join(
        f"{k} = {p.value:g} {p.unit}" for k, p in calibration.PARAMETERS.items() if k not in calibration.FITTED))
    t = Table(title="MODELED: published AIE designs vs the model, validated WITHOUT refitting")
    for col in ("design", "role", "board", "published (source)", "modeled", "error", "within", "modeled bound",
                "kernel", "kernel eff."):
        t.add_column(col, justify="right" if col in ("modeled", "error", "kernel eff.") else "left")
    for r in rows:
        unit = "TOPS" if r["dtype"] == "int8" else "TFLOPS"
        dims = "x".join(str(x) for x in r["kernel_dims"])
        within = "fit" if r["role"] == "fit" else ("goal" if abs(r["error"]) <= goal else
                                                   "bound" if abs(r["error"]) <= tol else "OUTSIDE")
        t.add_row(r["name"], r["role"], r["board"], f"{r['published'] / 1e12:.2f} {unit} ({r['published_what']})",
                  f"{r['modeled'] / 1e12:.2f} {unit}", f"{r['error']:+.1%}", within, r["bound_by"],
                  f"{r['kernel']} {dims}", f"{r['kernel_efficiency']:.1%}")
    console.print(t)
    val = [r for r in rows if r["role"] == "validation"]
    outside = [r["name"] for r in val if abs(r["error"]) > tol]
    console.print(f"validated designs within +-{tol:.0%} (bound): {len(val) - len(outside)} of {len(val)}; within "
                  f"+-{goal:.0%} (goal): {sum(abs(r['error']) <= goal for r in val)} of {len(val)}"
                  + (f" (outside: {', '.join(outside)})" if outside else "")
                  + "; how independent these designs are, and why each lands where it does: docs/validation.md")
    lt = Table(title="MODELED: leave-one-out -- fit on each design in turn, error on the others")
    lt.add_column("fitted on")
    lt.add_column("hand-off (cycles)", justify="right")
    names = [r["name"] for r in rows]
    for n in names:
        lt.add_column(n, justify="right")
    lt.add_column("worst", justify="right")
    for row in loo:
        lt.add_row(row["fit_design"], f"{row['parameters'][calibration.FITTED[0]]:.1f}",
                   *[("(fit)" if n == row["fit_design"] else f"{row['errors'][n]:+.1%}") for n in names],
                   f"{row['worst']:.1%}")
    console.print(lt)
    for kernel, (dims, eff, source) in gemm_kernels.PUBLISHED_EFFICIENCY.items():
        modeled = gemm_kernels.kernel_efficiency(kernel, dims)
        console.print(f"single kernel {kernel} {'x'.join(map(str, dims))}: published {eff:.1%}, modeled {modeled:.1%} "
                      f"({modeled / eff - 1:+.1%}); {source}")
    predictions = [published.predict(g) for g in published.PREDICTIONS]
    for r in predictions:
        unit = "TOPS" if r["dtype"] == "int8" else "TFLOPS"
        console.print(f"MODELED prediction, not validated ({r['published_what']}): {r['name']} {r['board']}: "
                      f"{r['modeled'] / 1e12:.2f} {unit}, bound by {r['bound_by']}")
    for r in [*rows, *predictions]:
        console.print(f"{r['name']}: {r['citation']}; parameters: {r['parameters_from']}")
    if args.json_out is not None:
        single = [{"kernel": k, "dims": list(dims), "published_efficiency": eff, "source": source,
                   "modeled_efficiency": gemm_kernels.kernel_efficiency(k, dims)}
                  for k, (dims, eff, source) in gemm_kernels.PUBLISHED_EFFICIENCY.items()]
        params = {k: {"value": p.value, "unit": p.unit, "meaning": p.meaning, "obtained": p.obtained,
                      "fitted": k in calibration.FITTED} for k, p in calibration.PARAMETERS.items()}
        write_json(args.json_out, {"modeled": True, "tolerance": tol, "goal": goal, "fit": stored,
                                   "parameters": params, "designs": rows, "validation": val, "leave_one_out": loo,
                                   "single_kernels": single, "predictions_without_published_figure": predictions})
    return 0

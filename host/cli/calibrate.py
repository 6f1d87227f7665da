"""``vckattn calibrate stats|swiftmax``: SwiftMax statistics and layer-wise replace-and-tune."""

from __future__ import annotations

import argparse
from pathlib import Path

from vckattn.golden.errors import InputError, UserError

from .common import (
    Subparsers,
    examples,
    fit_length,
    index_list,
    missing_subcommand,
    output_dir,
    positive_int,
    read_sentences,
)

#: the default of --max-length (cut to the model's positions when it has fewer)
DEFAULT_MAX_LENGTH = 128

#: The data-parallel command line (this package's CLI is the module ``vckattn.host.cli``). accelerate's ``--cpu
#: --num_processes 2`` starts one process unless it is given an MPI hostfile; ``--multi_gpu`` (torchrun) starts N
#: processes, which use gloo on the CPU when there is no GPU or with ``--device cpu``.
LAUNCH = ("accelerate launch --multi_gpu --num_processes 2 -m vckattn calibrate swiftmax MODEL --data D "
          "--out DIR --device cpu")
EPILOG = (f"data parallel (two CPU processes; `accelerate launch --cpu --num_processes 2` starts only one without an "
          f"MPI hostfile):\n  {LAUNCH}\n"
          "on N GPUs:\n  accelerate launch --multi_gpu --num_processes N -m vckattn calibrate ... "
          "--device cuda\nseveral nodes: add --num_machines, --machine_rank, --main_process_ip and an --out on a "
          "shared file system.\nEach global batch of --batch-size samples is split over the processes; only the "
          "main process writes outputs.")

STATS_EXAMPLE = "vckattn calibrate stats minilm --data pydoc --out results/calib/minilm --samples 64"
TUNE_EXAMPLE = ("vckattn calibrate swiftmax minilm --data pydoc --out results/tune/minilm --epochs-per-stage 1 "
                "--train-samples 64 --eval-samples 32")
STATS_DESCRIPTION = ("Run MODEL with softmax on --samples calibration samples of --data and collect, per layer and "
                     "head, the row maxima z_max of the attention scores and S = sum_j exp(z_j - z_max). Writes "
                     "OUT/stats.json (summaries and the proposed initial SwiftMax beta/gamma) and OUT/stats_hist.png "
                     "(histograms; S on a log axis).")
HCCS_EXAMPLE = ("vckattn calibrate hccs S/softmax_model --data rotten-tomatoes --out results/tune/hccs --epochs 1 "
                "--train-samples 256 --eval-samples 512 --max-length 64")
HCCS_DESCRIPTION = ("HCCS, the clipped-linear softmax surrogate of arXiv:2604.02292 as aie4ml's int8 kernel computes "
                    "it (a peer of SwiftMax, docs/accuracy.md): every layer's softmax replaced at once by HCCS with "
                    "per-head integer B/S/Dmax calibrated offline on --calib-samples training samples (nearest the "
                    "softmax model's weights on the int8 scores the export would give each layer), then "
                    "quantization-aware retraining of the whole model on the labels for --epochs epochs at "
                    "--main-lr, the constants fixed. Reports the softmax model in float and on the same int8 scores "
                    "(P in UQ0.8), HCCS before and after retraining; writes OUT/hccs.json and OUT/model. HCCS keeps "
                    "the row maximum and the row sum; vckattn has no HCCS kernel (no export).")
TUNE_DESCRIPTION = ("Algorithm 1 (docs/methods.md section 1): shallow to deep, replace --layers-per-stage layers' "
                    "softmax "
                    "by SwiftMax and train their beta/gamma (main weights frozen unless --main-lr) for "
                    "--epochs-per-stage epochs on --objective, evaluating each epoch. A checkpoint per stage goes to "
                    "OUT/checkpoints (rerunning the same command resumes after an interruption); the tuned model to "
                    "OUT/model, which `vckattn export OUT/model` reads.")


def add_calibrate(sub: Subparsers) -> None:
    p = sub.add_parser(
        "calibrate",
        help="SwiftMax: softmax statistics and layer-wise replace-and-tune (Algorithm 1) on a real model",
        description="SwiftMax calibration (docs/methods.md section 1). `stats`: per layer and head the row maxima "
        "z_max "
        "of the attention scores and S = sum_j exp(z_j - z_max) on calibration data; histograms (PNG), JSON, "
        "proposed initial beta/gamma. `swiftmax`: Algorithm 1 - shallow to deep, replace L layers' softmax per "
        "stage by SwiftMax and train their beta/gamma (main weights frozen) for E epochs on an objective, "
        "evaluating each epoch; a checkpoint per stage in OUT/checkpoints (the same command resumes after an "
        "interruption); the tuned model in OUT/model, which `vckattn export OUT/model` reads. MODEL: `minilm` or a "
        "Hugging Face folder. --data: a text file (one sentence a line), pydoc, rotten-tomatoes, digits, mnist5k. "
        "Both steps run under Hugging Face accelerate: --device, --mixed-precision, and data parallel over the "
        f"processes of `accelerate launch` ({LAUNCH}); only the main process writes outputs.",
        epilog=examples(STATS_EXAMPLE, TUNE_EXAMPLE, "vckattn export results/tune/minilm/model --out build/minilm"),
    )
    csub = p.add_subparsers(title="steps", dest="calibrate", metavar="STEP", parser_class=type(p))
    for name, helptext, description, example in (
            ("stats", "collect z_max / S statistics: histograms, JSON, proposed beta/gamma", STATS_DESCRIPTION,
             STATS_EXAMPLE),
            ("swiftmax", "layer-wise replace-and-tune with checkpoints and resume", TUNE_DESCRIPTION, TUNE_EXAMPLE),
            ("hccs", "the HCCS peer: per-head calibration, then quantization-aware retraining", HCCS_DESCRIPTION,
             HCCS_EXAMPLE)):
        c = csub.add_parser(name, help=helptext, description=description,
                            epilog=examples(example, note="" if name == "hccs" else EPILOG))
        c.add_argument("model", metavar="MODEL", help="`minilm` or a Hugging Face model folder")
        c.add_argument("--data", required=True, metavar="D",
                       help="text file, pydoc, rotten-tomatoes, digits or mnist5k")
        c.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
        c.add_argument("--batch-size", type=positive_int, default=16, metavar="N")
        c.add_argument("--max-length", type=positive_int, default=None, metavar="T",
                       help="tokens per text sample (default: 128, or the model's positions when it has fewer)")
        c.add_argument("--seed", type=int, default=0, metavar="S", help="data shuffle and torch seed (default 0)")
        c.add_argument("--quiet", action="store_true", help="no progress bars")
        c.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                       help="where to run (auto: cuda when available; under `accelerate launch --cpu`: the CPU)")
        c.add_argument("--mixed-precision", choices=("no", "fp16", "bf16"), default="no",
                       help="autocast the forward passes (fp16: CUDA only, with a loss scaler; default no)")
        if name == "stats":
            c.add_argument("--samples", type=positive_int, default=256, metavar="N", help="calibration samples")
            c.add_argument("--overwrite", action="store_true", help="replace stats.json / stats_hist.png in --out")
            c.set_defaults(func=run_calibrate_stats)
        elif name == "hccs":
            c.add_argument("--objective", choices=("task",), default="task",
                           help="task: the labels' cross-entropy (the only objective of the retraining)")
            c.add_argument("--epochs", type=positive_int, default=1, metavar="E",
                           help="quantization-aware retraining epochs over --train-samples (default 1)")
            c.add_argument("--main-lr", type=float, default=5e-5, metavar="LR",
                           help="AdamW learning rate of the whole model in the retraining (default 5e-5)")
            c.add_argument("--calib-samples", type=positive_int, default=64, metavar="N",
                           help="training samples the B/S/Dmax of each head are calibrated on (default 64)")
            c.add_argument("--score-percentile", type=float, default=99.9, metavar="P",
                           help="the percentile of |q|, |k| the int8 score grid is set from (default 99.9)")
            c.add_argument("--train-samples", type=positive_int, default=256, metavar="N")
            c.add_argument("--eval-samples", type=positive_int, default=128, metavar="N")
            c.set_defaults(func=run_calibrate_hccs)
        else:
            c.add_argument("--objective", choices=("distill", "task"), default="distill",
                           help="distill: keep the softmax model's outputs; task: the labels' cross-entropy")
            c.add_argument("--epochs-per-stage", type=positive_int, default=2, metavar="E")
            c.add_argument("--layers-per-stage", type=positive_int, default=1, metavar="L")
            c.add_argument("--lr", type=float, default=0.05, help="Adam learning rate of beta and log gamma")
            c.add_argument("--main-lr", type=float, default=0.0, metavar="LR",
                           help="also train the main weights at this (tiny) learning rate (default 0: frozen)")
            c.add_argument("--init", choices=("mean", "max", "consmax"), default="mean",
                           help="initial beta/gamma from the statistics: mean (the paper) or max z_max; consmax: "
                           "ConSmax's fixed beta 2.5, gamma 100 (with --one-shot --per-head --main-lr: ConSmax-style "
                           "constants learned with the model)")
            c.add_argument("--per-head", action="store_true",
                           help="one beta/gamma per head (ConSmax granularity; the kernels hold a register set per "
                           "head, so the tuned model exports as it is)")
            c.add_argument("--one-shot", action="store_true",
                           help="replace all layers at once and tune them together (the ablation)")
            c.add_argument("--layers", type=index_list, metavar="I[,I...]", help="layers to replace (default all)")
            c.add_argument("--p-frac", type=int, default=None, metavar="F",
                           help="tune for the kernel's P format of scale 2^-F: the SwiftMax of the replaced layers "
                           "saturates at (2^8 - 1)·2^-F, as the kernel does, and `vckattn export` gives them that "
                           "format, and P is rounded to its 2^-F grid in the float path (e.g. 8: P <= 0.996, "
                           "softmax's range; default: no saturation, no rounding)")
            c.add_argument("--score-bits", type=int, choices=(8, 16, 32), default=None, metavar="B",
                           help="tune on B-bit scores, as the design computes them: each layer's scores narrowed "
                           "in float to the grid the export gives it, P rounded to its 2^-F grid with --p-frac "
                           "(straight-through gradients); 32: float scores (default: the committed default "
                           "design's, 8)")
            c.add_argument("--score-percentile", type=float, default=99.9, metavar="P",
                           help="the percentile of |q|, |k| the modeled score grid is set from: the export's "
                           "--percentile (100: --calib-method minmax; default 99.9, the tuned flow's)")
            c.add_argument("--train-samples", type=positive_int, default=256, metavar="N")
            c.add_argument("--eval-samples", type=positive_int, default=128, metavar="N")
            c.set_defaults(func=run_calibrate_swiftmax)
    p.set_defaults(func=lambda args: missing_subcommand(p))


def check_data(spec: str) -> None:
    """A --data file (not a named source) exists and is readable UTF-8 with a sentence: InputError (status 4)
    otherwise, before any model is loaded."""
    from vckattn.host.calibrate import IMAGE_SOURCES, TEXT_SOURCES

    if spec in TEXT_SOURCES + IMAGE_SOURCES:
        return
    if not Path(spec).exists():
        raise InputError(f"--data {spec}: no such file (or use one of {', '.join(TEXT_SOURCES + IMAGE_SOURCES)})")
    read_sentences(Path(spec), "--data")


def model_positions(spec: str) -> int | None:
    """``max_position_embeddings`` of MODEL's config.json (None for a ViT, or when it cannot be read here: the
    model load then reports the problem)."""
    from vckattn.host.checkpoints import read_config_json, resolve_checkpoint

    try:
        cfg = read_config_json(resolve_checkpoint(spec).path)
    except (UserError, OSError, ValueError):
        return None
    n = cfg.get("max_position_embeddings") if cfg.get("model_type") != "vit" else None
    return n if isinstance(n, int) and n > 0 else None


def max_length(args: argparse.Namespace) -> int:
    """--max-length, checked against (or, by default, fitted to) the model's positions, before any model load."""
    return fit_length(args.max_length, DEFAULT_MAX_LENGTH, model_positions(args.model), "--max-length")


def run_calibrate_stats(args: argparse.Namespace) -> int:
    from vckattn.host import calibrate

    output_dir(args.out, what="--out")
    old = [n for n in ("stats.json", "stats_hist.png") if (args.out / n).exists()]
    if old and not args.overwrite:
        raise UserError(f"--out {args.out} already holds {' and '.join(old)}; pass --overwrite to replace them")
    check_data(args.data)
    length = max_length(args)
    rt = calibrate.make_runtime(args.device, args.mixed_precision)
    rep = calibrate.run_stats(args.model, args.data, args.out, args.samples, args.batch_size, length,
                              args.seed, progress=not args.quiet, runtime=rt)
    if not rt.is_main:
        return 0
    print(f"{rep['model']}: {rep['samples']} samples of {rep['data']} in {rep['seconds']:.1f} s")
    for lay in rep["layers"]:
        print(f"  layer {lay['layer']}: z_max mean {lay['z_max']['mean']:.3f} (p99 {lay['z_max']['p99']:.2f}), "
              f"S mean {lay['sum_exp']['mean']:.3f}")
    print(f"wrote {args.out / 'stats.json'} and {args.out / 'stats_hist.png'}")
    return 0


def run_calibrate_swiftmax(args: argparse.Namespace) -> int:
    from vckattn.host import calibrate

    if not (args.lr > 0):
        raise UserError("--lr must be > 0")
    output_dir(args.out, what="--out")
    check_data(args.data)
    if args.p_frac is not None and not 0 <= args.p_frac <= 16:
        raise UserError(f"--p-frac {args.p_frac}: give a P scale 2^-F with F in 0..16")
    cfg = calibrate.TuneConfig(args.model, args.data, args.objective, args.train_samples, args.eval_samples,
                               args.batch_size, max_length(args), args.seed, args.init, args.per_head, args.one_shot,
                               args.layers, args.p_frac,
                               args.score_bits if args.score_bits is not None else calibrate.default_score_bits(),
                               args.score_percentile)
    if args.main_lr < 0:
        raise UserError("--main-lr must be >= 0")
    if not 0 < args.score_percentile <= 100:
        raise UserError(f"--score-percentile {args.score_percentile}: give a percentile in (0, 100]")
    rt = calibrate.make_runtime(args.device, args.mixed_precision)
    rep = calibrate.run_swiftmax(cfg, args.out, args.epochs_per_stage, args.layers_per_stage, args.lr,
                                 progress=not args.quiet, main_lr=args.main_lr, runtime=rt)
    if not rt.is_main:
        return 0
    if rep["processes"] > 1:
        print(f"data parallel over {rep['processes']} processes ({rep['device']})")
    if rep["resumed_stages"]:
        print(f"resumed after {rep['resumed_stages']} completed stage(s) found in {args.out / 'checkpoints'}")
    print(f"{rep['model']} on {rep['data']}, objective {args.objective} ({rep['metric']}):")
    dep = rep.get("deployed")
    if dep is not None:
        grid = ("float scores" if dep["score_bits"] >= 32 else
                f"int{dep['score_bits']} scores (LSB per layer {', '.join(f'{v:.3g}' for v in dep['score_steps'])})")
        print(f"  on the deployed numerics: {grid}{', P rounded to its format' if dep['p_round'] else ''}")
    untuned = "ConSmax's beta 2.5, gamma 100" if args.init == "consmax" else "statistical beta/gamma"
    print(f"  softmax {rep['softmax_baseline']:.4f}  untuned {untuned} {rep['untuned_statistical']:.4f}")
    for st in rep["stages"]:
        print(f"  stage {st['stage']} layers {st['layers']}: {rep['metric']} per epoch "
              f"{', '.join(f'{v:.4f}' for v in st['metrics'])}  ({st['seconds']:.1f} s)")
    print(f"  final {rep['final']:.4f}; tuning {rep['tune_seconds']:.1f} s; model in {rep['model_dir']}")
    return 0


def run_calibrate_hccs(args: argparse.Namespace) -> int:
    from vckattn.host import calibrate

    if not args.main_lr > 0:
        raise UserError("--main-lr must be > 0 (the retraining trains the whole model)")
    if not 0 < args.score_percentile <= 100:
        raise UserError(f"--score-percentile {args.score_percentile}: give a percentile in (0, 100]")
    output_dir(args.out, what="--out")
    check_data(args.data)
    cfg = calibrate.TuneConfig(args.model, args.data, args.objective, args.train_samples, args.eval_samples,
                               args.batch_size, max_length(args), args.seed, "mean", True, True, None, None, 8,
                               args.score_percentile)
    rt = calibrate.make_runtime(args.device, args.mixed_precision)
    rep = calibrate.run_hccs(cfg, args.out, args.epochs, args.main_lr, args.calib_samples,
                             progress=not args.quiet, runtime=rt)
    print(f"{rep['model']} on {rep['data']}, HCCS ({rep['metric']} on {rep['samples']['held_out']} held-out samples):")
    print(f"  softmax {rep['softmax_baseline']:.4f}  softmax on int8 scores, P in UQ0.8 "
          f"{rep['softmax_int8_scores']:.4f}  HCCS calibrated, not retrained {rep['hccs_direct']:.4f}")
    print(f"  retrained: {', '.join(f'{v:.4f}' for v in rep['metrics'])} per epoch  (calibration "
          f"{rep['calibration_seconds']:.1f} s, retraining {rep['train_seconds']:.1f} s)")
    print(f"  final {rep['final']:.4f}; wrote {args.out / 'hccs.json'} and {rep['model_dir']}")
    return 0

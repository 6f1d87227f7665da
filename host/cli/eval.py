"""``vckattn eval``: a whole model with a bundle's attention layers on a backend, scored end to end."""

from __future__ import annotations

import argparse
from pathlib import Path

from vckattn.host.output import write_json

from .common import Subparsers, device_options, examples, index_list, output_dir, output_file, positive_int


def add_eval(sub: Subparsers) -> None:
    p = sub.add_parser(
        "eval",
        help="score a model end to end with a bundle's attention layers on a backend (embedding cosine, accuracy)",
        description="Run the bundle's source checkpoint in float with every attention layer of the bundle (or "
        "--layers) replaced by the bundle's integer layer on a backend (the same per-layer device call as "
        "`vckattn run`; residuals, norms, MLPs and other layers stay float), on held-out sentences (Python "
        "reference-manual text from a topic disjoint from the export's calibration sentences). Reports the "
        "mean-pooled sentence-embedding cosine to the float softmax model for: the float softmax model (1.0), "
        "the float SwiftMax model (the bundle's beta/gamma in float) and the bundle on the backend; and per "
        "layer the cosine of the attention output against the float layer on the same input and against the "
        "softmax model. --task scores a classifier by its accuracy on a data set's test split instead: "
        "rotten-tomatoes (a sentiment classifier: a checkpoint with a sequence-classification head), digits or "
        "mnist5k (a ViT image classifier; a ViT takes images only, so its bundles are scored this way).",
        epilog=examples("vckattn export minilm --out B --normalizer softmax",
                        "vckattn eval --bundle B --backend emu --manifest engine_small_dual --json eval.json "
                        "--plots plots/",
                        "vckattn eval --bundle B --backend emu --sentences 8 --layers 0,1",
                        "vckattn eval --bundle VIT_B --backend rtl --task digits --samples 64"),
    )
    p.add_argument("--bundle", type=Path, required=True, metavar="B", help="bundle folder (vckattn export)")
    p.add_argument("--backend", choices=("emu", "rtl", "csim", "xrt", "pynq"), default="emu",
                   help="device backend (default: emu)")
    p.add_argument("--layers", type=index_list, metavar="I[,I...]",
                   help="0-based layers to put on the backend (default: all of the bundle's)")
    p.add_argument("--manifest", metavar="M", help="bitstream manifest file or name in bitstreams/, e.g. "
                   "engine_small (default: the committed best design, vck5000_engine; vck190_engine for pynq; "
                   "online-softmax layers need a build with both normalizers, engine_small_dual); a sublayer build "
                   "(sublayer_small_encoder, sublayer_small_decoder) puts each layer's whole attention sublayer on "
                   "the backend")
    p.add_argument("--checkpoint", type=Path, metavar="PATH", help="the source checkpoint, if it moved since export")
    p.add_argument("--sentences", type=positive_int, default=32, metavar="N",
                   help="held-out sentences (default 32)")
    p.add_argument("--max-tokens", type=positive_int, default=None, metavar="T",
                   help="truncate sentences to T tokens (default 128, or the model's positions when it has fewer)")
    p.add_argument("--task", choices=("rotten-tomatoes", "digits", "mnist5k"),
                   help="score a classifier by its accuracy on the data set's test split instead of the "
                        "sentence-embedding cosine: rotten-tomatoes (a checkpoint with a sequence-classification "
                        "head), digits or mnist5k (a ViT image classifier)")
    p.add_argument("--samples", type=positive_int, default=256, metavar="N",
                   help="--task: test snippets or images (default 256)")
    p.add_argument("--reference", metavar="CHECKPOINT",
                   help="the softmax model to compare with (default: the model the source was tuned from, as "
                        "`vckattn calibrate swiftmax` records it, else the bundle's source checkpoint with softmax "
                        "in every layer)")
    p.add_argument("--xclbin", type=Path, metavar="F", help="xrt/pynq: the built xclbin")
    p.add_argument("--device", type=int, default=0, metavar="N", help="xrt: card index (default 0)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="rtl: cocotb random seed")
    p.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="write the report as JSON")
    p.add_argument("--plots", type=Path, metavar="DIR", help="write layers.png and end_to_end.png to DIR")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from vckattn.host import eval as ev

    from .run import check_device_flags

    check_device_flags(args)
    output_file(args.json_out, what="--json")
    output_dir(args.plots, what="--plots")
    opts = device_options(args)
    report = ev.evaluate(args.bundle, args.backend, layers=args.layers, manifest_path=args.manifest,
                         checkpoint=args.checkpoint, n_sentences=args.sentences, max_tokens=args.max_tokens,
                         device_options=opts, progress=not args.quiet, task=args.task, reference=args.reference,
                         n_samples=args.samples)
    ev.print_report(report)
    if args.json_out is not None:
        write_json(args.json_out, report)
        print(f"wrote {args.json_out}")
    if args.plots is not None:
        for path in ev.write_plots(report, args.plots):
            print(f"wrote {path}")
    return 0

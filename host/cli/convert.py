"""``vckattn convert bhyt``: replace a Llama model's RMSNorms by BHyT (:mod:`vckattn.host.convert_cmd`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from vckattn.golden.errors import UserError
from vckattn.host import convert_cmd
from vckattn.host.convert_cmd import DEFAULT_KAPPA, DEFAULT_LAM_ATTN, DEFAULT_LAM_MLP, DEFAULT_T, REPORT_NAME

from .common import Subparsers, examples, output_dir, positive_float, positive_int


def add_convert(sub: Subparsers) -> None:
    """Register ``convert`` (``convert bhyt MODEL --out DIR …``) on the CLI's subparsers."""
    p = sub.add_parser(
        "convert",
        help="convert a model's norms: `convert bhyt` replaces a Llama model's RMSNorms by BHyT",
        description="Replace every decoder layer's two RMSNorms by BHyT (one reduction per block; the second site "
        "uses s_hat^2 = s^2 + c_attn lam_A^2/kappa^2). c_attn = ||W_V W_O||_F^2/(T d) is computed per layer from "
        "the real weights (GQA-expanded), gamma is copied from the RMSNorms. MODEL: a Hugging Face Llama folder, a "
        "Llama .gguf, `smollm2`, or a golden decoder .pt. Writes a checkpoint `vckattn export` reads (a model folder, "
        "or DIR/model.pt for a golden input), DIR/bhyt_convert.json, and prints the per-layer table.",
        epilog=examples("vckattn convert bhyt smollm2 --out build/smollm2_bhyt",
                        "vckattn export build/smollm2_bhyt --out build/bundles/smollm2_bhyt"),
    )
    p.add_argument("what", choices=("bhyt",), help="the conversion (bhyt)")
    p.add_argument("model", metavar="MODEL", help="Llama folder, .gguf, smollm2, or golden .pt")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.add_argument("--seq-len", type=positive_int, default=DEFAULT_T, metavar="T",
                   help="T of c_attn, the (maximum) sequence length (default: %(default)s)")
    p.add_argument("--lam-attn", type=positive_float, default=DEFAULT_LAM_ATTN, metavar="L",
                   help="initial lambda of the attention site (default: %(default)s)")
    p.add_argument("--lam-mlp", type=positive_float, default=DEFAULT_LAM_MLP, metavar="L",
                   help="initial lambda of the MLP site (default: %(default)s)")
    p.add_argument("--kappa", type=positive_float, default=DEFAULT_KAPPA, metavar="K",
                   help="Chebyshev factor kappa (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")
    p.set_defaults(func=run_convert)


def run_convert(args: argparse.Namespace) -> int:
    if args.what != "bhyt":  # argparse restricts choices; kept for a clear message if called directly
        raise UserError(f"convert: unknown conversion {args.what!r}; choose bhyt")
    output_dir(args.out, what="--out")
    report = convert_cmd.convert_bhyt(args.model, args.out, args.seq_len, args.lam_attn, args.lam_mlp, args.kappa,
                                      args.overwrite)
    print(f"BHyT conversion of {report['source']} (kappa={report['kappa']}, T={report['seq_len']}):")
    print(convert_cmd.format_table(report))
    print(f"wrote {report['checkpoint']} and {Path(args.out) / REPORT_NAME}")
    print(f"next: vckattn export {report['checkpoint']} --out BUNDLE")
    return 0

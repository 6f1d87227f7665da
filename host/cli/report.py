"""``vckattn report errors|quant``: accuracy of the bit-exact integer model."""

from __future__ import annotations

import argparse
from pathlib import Path

from vckattn.golden.errors import InputError, UserError
from vckattn.golden.online_softmax_int import P_ROUNDINGS

from .common import Subparsers, examples, missing_subcommand, output_file, positive_int, read_sentences


def add_report(sub: Subparsers) -> None:
    p = sub.add_parser(
        "report",
        help="accuracy of the bit-exact integer model (per operator; per layer of a real checkpoint)",
        description="Accuracy of the integer model. `errors`: every hardware operator against a float64 "
        "reference, exhaustively where it has at most 2^20 inputs, with its documented error budget. "
        "`quant`: each attention layer of a real BERT-family checkpoint (default: the shipped MiniLM) "
        "quantized end to end and run on real text, against the float golden model: relative error and "
        "cosine per layer, for the online-softmax baseline and for SwiftMax.",
        epilog=examples("vckattn report errors --json results/errors.json",
                        "vckattn report quant --json results/quant.json"),
    )
    rsub = p.add_subparsers(title="reports", dest="report", metavar="REPORT", parser_class=type(p))
    e = rsub.add_parser(
        "errors", help="error of every integer operator vs float64, with its budget",
        description="Measure every integer hardware operator (exp2, reciprocal, rsqrt, tanh, requantization, ...) "
        "against a float64 reference, exhaustively where it has at most 2^20 inputs, and print its maximum error "
        "next to its documented budget. Exit status 1 when an operator exceeds its budget.",
        epilog=examples("vckattn report errors", "vckattn report errors --json results/errors.json"),
    )
    e.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    e.set_defaults(func=run_report_errors)
    q = rsub.add_parser(
        "quant", help="per-layer integer-vs-float error of a real checkpoint on real text",
        description="Quantize each attention layer of a BERT-family checkpoint (default: the shipped "
        "all-MiniLM-L6-v2) end to end, calibrate it on the first 32 sentences and run it on the next 16 against "
        "the float golden model: relative error and cosine per layer, for the online-softmax baseline and for "
        "SwiftMax.",
        epilog=examples("vckattn report quant", "vckattn report quant path/to/bert-model --data sentences.txt "
                        "--json results/quant.json", "vckattn report quant --seq-len 512"),
    )
    q.add_argument("checkpoint", nargs="?", type=Path, default=None,
                   help="Hugging Face BERT-family model folder (default: the shipped all-MiniLM-L6-v2)")
    q.add_argument("--data", type=Path, metavar="FILE",
                   help="UTF-8 text, one sentence per line: the first 32 calibrate, the next 16 are evaluated "
                        "(default: sentences from CPython's documentation)")
    q.add_argument("--seq-len", type=positive_int, metavar="S",
                   help="long inputs: calibrate on 2 and evaluate on 2 inputs of exactly S tokens, each made of "
                        "consecutive sentences (default: one sentence per input)")
    q.add_argument("--online-p-rounding", choices=P_ROUNDINGS, default=None,
                   help="P rounding of the online-softmax kernel (default: the build's, cumulative; nearest rounds "
                        "each P on its own, for comparison)")
    q.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    q.set_defaults(func=run_report_quant)
    p.set_defaults(func=lambda args: missing_subcommand(p))


def run_report_errors(args: argparse.Namespace) -> int:
    from vckattn.host import reports

    output_file(args.json_out, what="--json")
    rows = reports.run_errors(args.json_out)
    return 0 if all(r["violations"] == 0 for r in rows) else 1


def run_report_quant(args: argparse.Namespace) -> int:
    from vckattn.host import reports

    output_file(args.json_out, what="--json")
    if args.checkpoint is not None and not (args.checkpoint / "config.json").is_file():
        raise InputError(f"{args.checkpoint}: not a Hugging Face model folder (no config.json)")
    sentences = None
    if args.data is not None:
        sentences = read_sentences(args.data, "--data")
    try:
        reports.run_quant(args.checkpoint, sentences, args.json_out, seq_len=args.seq_len,
                          online_p_rounding=args.online_p_rounding)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return 0

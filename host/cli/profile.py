"""``vckattn profile``: precision profile of a model against the hardware's fixed-point formats."""

from __future__ import annotations

import argparse

from .common import Subparsers, examples


def add_profile(sub: Subparsers) -> None:
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
        epilog=examples("vckattn profile minilm --max-sentences 16 --out results/profile/minilm",
                        "vckattn profile path/to/hf-model --data sentences.txt --json profile.json"),
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
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--truncate", action="store_true", help="cut sentences longer than the model's positions to them")
    p.set_defaults(func=run_profile)


def run_profile(args: argparse.Namespace) -> int:
    from vckattn.host import profile

    return profile.main(args)

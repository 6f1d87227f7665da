"""The ``vckattn`` command line.

Subcommands live in a small registry: each command is one ``add_<name>(subparsers)`` function in the
module of its command group (:mod:`.doctor`, :mod:`.profile`, :mod:`.calibrate`, :mod:`.convert`,
:mod:`.report`, :mod:`.bench`, :mod:`.hw`, :mod:`.perf`, :mod:`.export` (export, inspect), :mod:`.run` (run, deploy),
:mod:`.board` (board selftest), :mod:`.eval`)
that builds its parser and sets ``func`` (called with the parsed namespace, returning the exit code).
To add a command, write such a function and append it to :data:`COMMANDS`. Command implementations
are imported lazily inside ``func`` so that ``vckattn --help`` stays fast. The parser class and the
shared argument helpers are in :mod:`.common` (re-exported here).

User errors (bad arguments, unreadable inputs, unwritable paths, …) print one line on stderr and exit with
the status of their kind (:data:`vckattn.golden.errors.EXIT_CODES`, README "Exit statuses"); they never show a
traceback. Commands signal them by raising :class:`UserError` (or a subclass naming its ``exit_code``). An
unexpected exception is a bug: one line saying where the full trace was written, status 70; ``--debug`` (any
position) or ``VCKATTN_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable

from vckattn import __version__
from vckattn.golden.errors import EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, UserError

from . import bench, board, calibrate, convert, doctor, eval, export, hw, perf, profile, report, run
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
    board.add_board,
    eval.add_eval,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``vckattn`` parser with every command of :data:`COMMANDS`."""
    parser = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks instead of one-line errors (also VCKATTN_DEBUG=1)")
    parser.add_argument("--build-dir", metavar="DIR", dest="global_build_dir", default=None,
                        help="where build outputs go (Verilog, simulator and g++ builds, synthesis; also "
                             "VCKATTN_BUILD_DIR; default: build/ in a checkout, else the per-user cache)")
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND",
                                parser_class=Parser)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``vckattn ARGV``; returns the exit status (:data:`vckattn.golden.errors.EXIT_CODES`; the console
    script's entry point).

    A :class:`UserError` is one line on stderr with its kind's status. Any other exception is a bug: one line
    that says so and where the full trace was written (``--debug`` or ``VCKATTN_DEBUG=1`` re-raises it
    instead, so the traceback shows)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("VCKATTN_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and argument errors
        return _exit_code(exc.code)
    if getattr(args, "func", None) is not None and getattr(args, "global_build_dir", None):
        from .common import writable_folder

        try:
            writable_folder(args.global_build_dir, "--build-dir")  # a folder it can write, before any work
        except UserError as exc:
            print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
            return int(exc.exit_code)
        os.environ["VCKATTN_BUILD_DIR"] = str(args.global_build_dir)  # read by vckattn.golden.paths.build_root
    if getattr(args, "func", None) is None:
        choices = ", ".join(sub for sub in command_names(parser))
        print(f"{PROG}: error: no command given; choose one of: {choices} (see `{PROG} --help`)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return int(getattr(exc, "exit_code", EXIT_USAGE))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `vckattn doctor --json - | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 0
    except ModuleNotFoundError as exc:  # an optional extra that is not installed (golden/extras.py)
        from vckattn.golden.extras import EXTRA_OF, missing_extra

        if debug:
            raise
        if (exc.name or "").split(".")[0] not in EXTRA_OF:
            return _internal(exc, argv)
        err = missing_extra(f"`vckattn {args.command}`", exc.name or "")
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as exc:
        if debug:
            raise
        if exc.errno in _ENVIRONMENT_ERRNOS and exc.filename is not None:  # a place the user's system cannot write
            print(f"{PROG}: error: {os.fsdecode(exc.filename)}: {exc.strerror} (the file system refuses it; for build "
                  "outputs choose another place with --build-dir DIR)", file=sys.stderr)
            return EXIT_INPUT
        return _internal(exc, argv)
    except Exception as exc:  # a bug: say so in one line, keep the trace for the report
        if debug:
            raise
        return _internal(exc, argv)


#: OSErrors that say the user's file system refuses a write (read-only, no permission, full, over quota): an
#: output the user can move (status 4), not a bug
_ENVIRONMENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})


def _internal(exc: BaseException, argv: list[str]) -> int:
    """Report an unexpected exception (a bug) in one line; the trace goes to a file. Whatever goes wrong while
    reporting it (an unwritable cache, text that cannot be encoded) never raises: the report is the last word."""
    try:
        where = _write_trace(argv)
    except Exception as err:  # noqa: BLE001 - the crash report must not crash
        where = f"(nowhere: {type(err).__name__}; rerun with --debug)"
    message = f"{type(exc).__name__}: {_one_line(str(exc))[:300]}".encode("utf-8", "backslashreplace").decode()
    print(f"{PROG}: internal error: {message} -- this is a bug in vckattn; please report it with the full trace, "
          f"written to {where} (or rerun with --debug)", file=sys.stderr)
    return EXIT_INTERNAL


def _one_line(text: str) -> str:
    """The message on one line (a multi-line message keeps its first line and says how many follow)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else text.strip()
    return f"{lines[0]} (+{len(lines) - 1} more lines; --debug shows them)"


def _write_trace(argv: list[str]) -> str:
    """The current exception's traceback, with the command line and versions, in the per-user cache folder;
    returns the file's path (or a note that it could not be written)."""
    import datetime
    import platform
    import traceback

    from vckattn.golden.paths import cache_dir

    text = (f"vckattn {__version__}, Python {platform.python_version()} on {platform.platform()}\n"
            f"command: vckattn {' '.join(argv)}\n\n{traceback.format_exc()}")
    try:
        folder = cache_dir("crash")
        path = folder / f"trace-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
        path.write_text(text, encoding="utf-8", errors="backslashreplace")  # argv may hold undecodable bytes
        return str(path)
    except (OSError, UserError) as exc:
        return f"(nowhere: {exc}; rerun with --debug)"


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


__all__ = ["COMMANDS", "PROG", "Parser", "Subparsers", "build_parser", "command_names", "index_list", "main",
           "missing_subcommand", "positive_float", "positive_int", "read_sentences"]

"""What the command modules share: the parser class and the argument helpers."""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from pathlib import Path

from vckattn.golden.errors import UserError

PROG = "vckattn"
#: exit status when a layer's integer attention does not follow its float model (``run --min-cosine``, the
#: export check); 1 = not bit-exact, 2 = a user error
EXIT_FIDELITY = 3

#: the type of ``parser.add_subparsers()``, which every ``add_<command>(sub)`` function receives
Subparsers = argparse._SubParsersAction


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs: runs of unindented lines are refilled to the terminal's width as paragraphs;
    blank lines and indented lines (example command lines) are kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        para: list[str] = []

        def flush() -> None:
            if para:
                out.extend(textwrap.wrap(" ".join(para), width, initial_indent=indent, subsequent_indent=indent,
                                         break_on_hyphens=False, break_long_words=False))
                para.clear()

        for line in text.splitlines():
            if not line.strip() or line[:1].isspace():
                flush()
                out.append(indent + line if line.strip() else "")
            else:
                para.append(re.sub(r"\s+", " ", line.strip()))
        flush()
        return "\n".join(out)


def examples(*lines: str, note: str = "") -> str:
    """An ``epilog``: ``example:`` / ``examples:`` and the command lines, indented (kept as written by
    :class:`HelpFormatter`), then an optional note paragraph."""
    head = "example:" if len(lines) == 1 else "examples:"
    text = head + "\n" + "\n".join(f"  {ln}" for ln in lines)
    return f"{text}\n\n{note}" if note else text


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line on stderr (no usage dump) with a pointer to --help. Its default
    ``formatter_class`` is :class:`HelpFormatter` (refilled paragraphs, example lines kept)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


#: the width of tables written to a pipe or a file (no terminal to fit): wide enough that no cell is cut
PIPE_WIDTH = 10_000


def make_console(file=None, *, stderr: bool = False, **kwargs):
    """The project's one way to make a rich ``Console`` for tables and reports.

    On a terminal: rich's defaults (the terminal's width, colour). When the output is not a terminal (piped,
    redirected, captured): ``$COLUMNS`` if set, else :data:`PIPE_WIDTH` columns, so that tables render in full
    (no cell cut with "…" or folded), and no highlighting of numbers. ``file``/``stderr``/``kwargs``: as for
    ``rich.console.Console``."""
    from rich.console import Console

    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    isatty = getattr(stream, "isatty", None)
    tty = bool(isatty and isatty())
    if not tty and "width" not in kwargs:
        columns = os.environ.get("COLUMNS", "")
        kwargs["width"] = int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
        kwargs.setdefault("highlight", False)
    return Console(file=file, stderr=stderr, **kwargs)


def command_names(parser: argparse.ArgumentParser) -> list[str]:
    """The subcommands of ``parser``, in registration (--help) order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def missing_subcommand(parser: argparse.ArgumentParser) -> int:
    """The ``func`` of a command group called without its subcommand: a UserError listing them."""
    names = ", ".join(command_names(parser))
    raise UserError(f"{parser.prog}: choose one of: {names} (see `{parser.prog} --help`)")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def index_list(text: str) -> list[int]:
    """argparse type: comma-separated 0-based layer indices (at least one)."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of layer indices: {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"no layer indices in {text!r}")
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"layer indices must be >= 0: {text!r}")
    return values


def read_sentences(path: Path) -> list[str]:
    """The non-blank lines of a UTF-8 text file, stripped; UserError if unreadable or empty."""
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read text ({exc})") from None
    lines = [ln for ln in lines if ln]
    if not lines:
        raise UserError(f"{path}: no sentences (the file is empty)")
    return lines


__all__ = ["PROG", "HelpFormatter", "Parser", "Subparsers", "command_names", "examples", "index_list",
           "make_console", "missing_subcommand", "positive_float", "positive_int", "read_sentences"]


def device_options(args: argparse.Namespace) -> dict:
    """The backend options of ``run``/``eval`` from their flags: ``--seed`` (rtl), ``--xclbin`` (xrt/pynq, required),
    ``--device`` (xrt card index)."""
    opts: dict = {}
    if args.backend == "rtl" and args.seed is not None:
        opts["seed"] = args.seed
    if args.backend in ("xrt", "pynq"):
        if args.xclbin is None:
            raise UserError(f"--backend {args.backend} needs --xclbin")
        opts["xclbin"] = args.xclbin
        if args.backend == "xrt":
            opts["device_index"] = args.device
    return opts

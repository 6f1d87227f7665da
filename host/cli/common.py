"""What the command modules share: the parser class and the argument helpers."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import textwrap
from pathlib import Path

from vckattn.golden.errors import InputError, UserError
from vckattn.host.textdata import read_sentences, read_text

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
    """An ``epilog``: ``example:`` and the command lines, indented (kept as written by :class:`HelpFormatter`),
    then an optional note paragraph."""
    text = "example:\n" + "\n".join(f"  {ln}" for ln in lines)
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
    dups = sorted({v for v in values if values.count(v) > 1})
    if dups:
        raise argparse.ArgumentTypeError(f"layer index {', '.join(map(str, dups))} given twice: {text!r}")
    return values


def check_text(text: str, what: str = "--text") -> str:
    """``text`` unless it is empty or only whitespace, or holds bytes that are not UTF-8 (InputError, status 4).
    Python keeps the undecodable bytes of a command-line argument as lone surrogates (``surrogateescape``); they
    are reported as the bytes they were."""
    if not text or not text.strip():
        raise InputError(f"{what} is empty (give some words to run)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = text[exc.start:exc.end].encode("utf-8", "surrogateescape")
        raise InputError(f"{what} is not UTF-8 text (byte {raw[:4].hex(' ')} at character {exc.start}; set the "
                         "terminal to UTF-8 or convert the text)") from None
    return text


def fit_length(value: int | None, default: int, limit: int | None, flag: str) -> int:
    """A token-count option against the model's positions ``limit`` (None: unknown or not a text model): the
    option's ``default`` when not given (cut to ``limit``: a model with fewer positions gets all of them), else
    ``value``; InputError (status 4) when a given value exceeds ``limit``."""
    if value is None:
        return default if limit is None else min(default, limit)
    if limit is not None and value > limit:
        raise InputError(f"{flag} {value} is more than the model's {limit} positions (give at most {limit})")
    return value


def _writable_folder(folder: Path, what: str, target: Path) -> None:
    """InputError unless ``folder`` (the place ``target`` goes) is an existing, writable folder."""
    probe = folder
    while not probe.exists() and probe != probe.parent:  # the nearest thing that exists on the way up
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError(f"{what} {target}: {probe} is a file, not a folder")
    if probe != folder:
        raise InputError(f"{what} {target}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{what} {target}: the folder {folder} is not writable")
    try:  # what os.access cannot see (a read-only file system, or permissions root ignores): create a file there
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"{what} {target}: cannot write in the folder {folder} ({exc.strerror or exc})") from None


def output_file(path: Path | str | None, overwrite: bool = True, what: str = "--json") -> Path | None:
    """Check an output file path before any work: not a folder, its folder exists and is writable, and (unless
    ``overwrite``) it does not exist yet. ``None`` and ``-`` (stdout) pass through. InputError (status 4) for a
    path that cannot be written; UserError (2) for an existing file without --overwrite."""
    if path is None or str(path) == "-":
        return None if path is None else Path(path)
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} {p} is a folder; give a file path")
    _writable_folder(p.parent if str(p.parent) else Path("."), what, p)
    if p.exists() and not overwrite:
        raise UserError(f"{what} {p} exists; pass --overwrite to replace it")
    return p


def output_dir(path: Path | str | None, overwrite: bool = True, what: str = "--out",
               empty: bool = False) -> Path | None:
    """Check an output folder before any work: not an existing file, its nearest existing ancestor a writable
    folder (missing folders are created when written), and with ``empty`` (unless ``overwrite``) empty or absent.
    InputError (4) for a path that cannot be a folder; UserError (2) for a non-empty one without --overwrite."""
    if path is None:
        return None
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{what} {p} is a file, not a folder")
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError(f"{what} {p}: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"{what} {p}: {probe} is not writable")
    try:  # what os.access cannot see (a read-only file system, or permissions root ignores)
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot write in {probe} ({exc.strerror or exc})") from None
    if empty and not overwrite and p.is_dir() and any(p.iterdir()):
        raise UserError(f"{what} {p} exists and is not empty; pass --overwrite to replace it")
    return p


def writable_folder(path: Path | str, what: str) -> Path:
    """Create the folder ``path`` (with its parents) and prove it writable by creating and removing a file in it,
    before any work: InputError (status 4) naming the file system's answer otherwise (a read-only file system, no
    permission, a file in the way). For folders the command fills later (``--build-dir``)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p):
            pass
    except FileExistsError:
        raise InputError(f"{what} {p}: a file is in the way, not a folder") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot write there ({exc.strerror or exc})") from None
    return p


def check_npz(path: Path, keys: list[str] | None = None, width: int | None = None) -> dict:
    """Check an input npz before any model is loaded: readable, each of ``keys`` present (default: every
    ``layer{i}_input``), 2-D floating point ``(tokens, width)`` with at least one token, the same token count for all;
    ``keep`` (optional) of shape ``(tokens,)``. Returns the npz's arrays by name. InputError (status 4) otherwise.
    A missing or unreadable file is an InputError too ("cannot read the input npz")."""
    import zipfile

    import numpy as np

    path = Path(path)
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: cannot read the input npz: {exc}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise InputError(f"{path}: not an npz archive (a single .npy array); use the format --save writes")
    try:
        arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: cannot read the input npz (truncated or corrupt: {exc})") from None
    names = keys if keys is not None else sorted(k for k in arrays if k.endswith("_input"))
    if not names:
        raise InputError(f"{path}: no layer{{i}}_input arrays (has {', '.join(arrays) or 'nothing'})")
    tokens = None
    for name in names:
        if name not in arrays:
            raise InputError(f"{path}: no array {name!r} (has {', '.join(arrays) or 'nothing'})")
        a = arrays[name]
        if a.dtype.kind != "f":
            raise InputError(f"{path}: {name} has dtype {a.dtype}, expected floating point (float32)")
        if a.ndim != 2:
            raise InputError(f"{path}: {name} has shape {a.shape}, expected (tokens, hidden): 2-D")
        if a.shape[0] == 0:
            raise InputError(f"{path}: {name} has zero tokens")
        if width is not None and a.shape[1] != width:
            raise InputError(f"{path}: {name} has shape {a.shape}, expected (tokens, {width})")
        if tokens is not None and a.shape[0] != tokens:
            raise InputError(f"{path}: {name} has {a.shape[0]} tokens, other layers {tokens}")
        tokens = a.shape[0]
    if "keep" in arrays and arrays["keep"].shape != (tokens,):
        raise InputError(f"{path}: keep has shape {arrays['keep'].shape}, expected ({tokens},)")
    return arrays


__all__ = ["PROG", "HelpFormatter", "Parser", "Subparsers", "check_npz", "check_text",
           "command_names", "examples", "fit_length", "index_list", "make_console", "missing_subcommand", "output_dir",
           "output_file", "positive_float", "positive_int", "read_sentences", "read_text", "writable_folder"]


def device_options(args: argparse.Namespace) -> dict:
    """The backend options of ``run``/``eval`` from their flags: ``--seed`` (rtl), ``--xclbin`` (xrt/pynq, required
    except for xrt under ``VCKATTN_EMULATION``),
    ``--device`` (xrt card index), ``--aie-path vector`` (csim of an engine build: the AIE kernels' vector path)."""
    opts: dict = {}
    if args.backend == "rtl" and args.seed is not None:
        opts["seed"] = args.seed
    if getattr(args, "aie_path", "scalar") == "vector":
        if args.backend != "csim":
            raise UserError("--aie-path vector selects the csim backend's AIE kernel path; use --backend csim")
        opts["vector"] = True
    if args.backend in ("xrt", "pynq"):
        from vckattn.host.backends.emulation import emulation_mode

        emulated = args.backend == "xrt" and emulation_mode() is not None  # the manifest names the design
        if args.xclbin is None and not emulated:
            raise UserError(f"--backend {args.backend} needs --xclbin")
        opts["xclbin"] = args.xclbin
        if args.backend == "xrt":
            opts["device_index"] = args.device
    return opts

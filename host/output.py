"""The one writer of the toolkit's files and reports: atomic writes (a file is whole or untouched) and JSON
reports in one format (2-space indent, UTF-8, a trailing newline, numpy scalars and arrays as numbers)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vckattn.golden.errors import InputError

__all__ = ["atomic_path", "json_text", "umask", "write_json", "write_text_atomic"]


def umask() -> int:
    """The process's file-creation mask (read without changing it for longer than the call)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path in ``path``'s folder to write to; moved onto ``path`` (``os.replace``) only when the block
    ends without an exception, so ``path`` is never half-written. The file gets the mode any new file of the user
    gets (0666 less the umask; ``mkstemp``'s own 0600 would make reports unreadable to the user's group)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".tmp", dir=path.parent or ".")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _plain(o: object) -> object:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def json_text(obj: Any) -> str:
    """``obj`` as a report's JSON text: 2-space indent, UTF-8 characters kept, a trailing newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False, default=_plain) + "\n"


def write_json(path: Path | str, obj: Any) -> None:
    """Write the report ``obj`` to ``path`` (``"-"``: standard output) atomically, creating its folder;
    InputError (status 4) naming the file system's answer when it cannot be written."""
    text = json_text(obj)
    if str(path) == "-":
        sys.stdout.write(text)
        return
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out, text)
    except OSError as exc:
        raise InputError(f"cannot write {out}: {exc.strerror or exc}") from None

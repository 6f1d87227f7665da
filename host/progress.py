"""Progress bars: tqdm on stderr, the project's one progress library (rich is for tables only)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TextIO


@contextlib.contextmanager
def announced_steps(total: int, desc: str, unit: str = "step", disable: bool | None = None,
                    file: TextIO | None = None) -> Iterator[Callable[[str], None]]:
    """A tqdm bar over ``total`` steps for work that announces each step before doing it.

    Yields ``announce(what)``: the previous step is done, ``what`` starts (shown after the bar). On leaving
    the block every step counts as done. ``disable``: tqdm's (``None``: no bar unless the bar's stream is a
    terminal). ``file``: the bar's stream (default ``sys.stderr``; e.g. a copy of the terminal's stderr while the
    process's own stderr goes to a log file).
    """
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit=unit, file=file or sys.stderr, disable=disable, leave=False) as bar:
        started = 0

        def announce(what: str) -> None:
            nonlocal started
            if started:
                bar.update(1)
            started += 1
            bar.set_postfix_str(what)

        yield announce
        bar.update(bar.total - bar.n)


def bar_disable(progress: bool) -> bool | None:
    """tqdm's ``disable`` for a command's ``progress`` flag: no bar when ``progress`` is off, and otherwise a bar
    only on a terminal (tqdm's ``None``): a log piped to a file or another program gets no bar redraws."""
    return None if progress else True


def bars_on(progress: bool, stream: TextIO | None = None) -> bool:
    """``progress`` and ``stream`` (default stderr) is a terminal: whether other libraries' bars (transformers')
    may show."""
    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(progress and isatty and isatty())


__all__ = ["announced_steps", "bar_disable", "bars_on"]

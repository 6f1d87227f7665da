"""Where vckattn writes what it builds (a leaf module like :mod:`.errors`: every layer may import it).

Build outputs — generated Verilog, Verilator and g++ builds, synthesis runs, crash traces — never go into the
installed package. They go under :func:`build_root`:

1. ``$VCKATTN_BUILD_DIR`` when set (``vckattn --build-dir DIR`` sets it for the command);
2. ``<checkout>/build`` when vckattn runs from a source checkout (a ``pyproject.toml`` beside the package and
   not inside ``site-packages``): what ``make`` and the tests use;
3. otherwise the per-user cache folder (``platformdirs.user_cache_dir("vckattn")``, e.g.
   ``~/.cache/vckattn`` on Linux).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

#: the package's folder (the repository root in a checkout)
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
ENV = "VCKATTN_BUILD_DIR"

__all__ = ["ENV", "PACKAGE_ROOT", "build_lock", "build_root", "cache_dir", "is_checkout"]


def is_checkout() -> bool:
    """vckattn runs from a source checkout (not from an installed wheel)."""
    return (PACKAGE_ROOT / "pyproject.toml").is_file() and "site-packages" not in PACKAGE_ROOT.parts \
        and "dist-packages" not in PACKAGE_ROOT.parts


def build_root() -> Path:
    """The folder build outputs go under (module docstring); not created here."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser().resolve()
    if is_checkout():
        return PACKAGE_ROOT / "build"
    import platformdirs

    return Path(platformdirs.user_cache_dir("vckattn")) / "build"


def cache_dir(*parts: str) -> Path:
    """``build_root()/parts...``, created; :class:`~vckattn.golden.errors.InputError` (status 4) when the file
    system refuses it (read-only, no permission), naming how to choose another place."""
    from .errors import InputError

    path = build_root().joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the build folder {path}: {exc.strerror or exc} (choose another with "
                         f"--build-dir DIR or {ENV})") from None
    return path


@contextlib.contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` (``fcntl.flock`` on ``folder/.lock``, the folder created) while a build runs
    in it: the build caches are shared by processes (the parallel test workers), one build per folder at a time."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)

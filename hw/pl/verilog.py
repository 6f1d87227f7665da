"""Verilog generation from the Amaranth components (build outputs go under :func:`~vckattn.golden.paths.build_root`)."""

from __future__ import annotations

from pathlib import Path

from vckattn.golden.extras import require
from vckattn.golden.paths import build_root

__all__ = ["generate_verilog", "hw_build_root"]  # and HW_BUILD_ROOT (module __getattr__)


def hw_build_root() -> Path:
    """Default parent folder of generated Verilog and simulator builds: ``build_root()/sim`` (read at call time)."""
    return build_root() / "sim"


def __getattr__(name: str) -> Path:
    # HW_BUILD_ROOT is computed on each access so that VCKATTN_BUILD_DIR set later (--build-dir) applies.
    if name == "HW_BUILD_ROOT":
        return hw_build_root()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def generate_verilog(component: object, name: str, out_dir: Path | str | None = None) -> Path:
    """Convert an Amaranth 0.5 ``wiring.Component`` to a Verilog file.

    The module is named ``name`` and its ports are the component's signature members
    (flattened, ``__``-joined for nested members) plus ``clk``/``rst`` when it has
    synchronous logic in the default ``sync`` domain.

    Args:
        component: The ``wiring.Component`` instance to convert.
        name: Verilog module name and file stem.
        out_dir: Output folder; default ``build_root()/sim/<name>``.

    Returns:
        Path of the written ``<out_dir>/<name>.v``. The file is only rewritten when its
        content changes, so simulator builds stay incremental.
    """
    require("Verilog generation", "amaranth")
    from amaranth.back import verilog

    out = Path(out_dir) if out_dir is not None else hw_build_root() / name
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.v"
    text = verilog.convert(component, name=name)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path

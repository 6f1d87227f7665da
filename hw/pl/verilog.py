"""Verilog generation from the Amaranth components (build outputs go to ``build/``, never into git)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["HW_BUILD_ROOT", "generate_verilog"]

#: Default parent folder of generated Verilog and simulator builds (git-ignored).
HW_BUILD_ROOT: Path = Path(__file__).resolve().parents[2] / "build" / "sim"


def generate_verilog(component: object, name: str, out_dir: Path | str | None = None) -> Path:
    """Convert an Amaranth 0.5 ``wiring.Component`` to a Verilog file.

    The module is named ``name`` and its ports are the component's signature members
    (flattened, ``__``-joined for nested members) plus ``clk``/``rst`` when it has
    synchronous logic in the default ``sync`` domain.

    Args:
        component: The ``wiring.Component`` instance to convert.
        name: Verilog module name and file stem.
        out_dir: Output folder; default ``<repo>/build/sim/<name>``.

    Returns:
        Path of the written ``<out_dir>/<name>.v``. The file is only rewritten when its
        content changes, so simulator builds stay incremental.
    """
    from amaranth.back import verilog

    out = Path(out_dir) if out_dir is not None else HW_BUILD_ROOT / name
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.v"
    text = verilog.convert(component, name=name)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path

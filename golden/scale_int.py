"""Scale kernel (the PL infrastructure's demonstration kernel), bit-exact integer model and registers.

Per element ``x`` (signed ``in_width``) at column ``j`` of its row::

    y = keep ? clamp(((x · a) >> s) + bias[j mod 16], out_width signed) : 0

``a``: signed 16-bit register; ``s``: unsigned 5-bit register (``>>`` is an arithmetic shift, floor
division by ``2^s``); ``bias``: 16-entry signed 8-bit memory. :func:`scale_regmap` is the one
declaration of its registers (``hw/pl/scale.py`` and ``sim/tb_scale.py`` derive from it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .regmap import Mem, Reg, RegisterMap

__all__ = ["BIAS_DEPTH", "SCALE_ID", "scale_int", "scale_regmap"]

#: Value of the kernel's read-only ID register.
SCALE_ID = 0x5CA1E001
#: Entries of the ``bias`` memory (column ``j`` uses entry ``j mod BIAS_DEPTH``).
BIAS_DEPTH = 16


def scale_regmap(lanes: int = 4) -> RegisterMap:
    """The scale kernel's register map (the ``bias`` memory has one kernel read port per lane)."""
    return RegisterMap(
        [
            Reg("a", 16, signed=True, reset=1, doc="multiplier a (signed 16-bit)"),
            Reg("s", 5, doc="arithmetic right shift s (0..31)"),
            Reg("frames", 32, access="ro", doc="input frames (TLAST handshakes) since reset"),
        ],
        [Mem("bias", 8, BIAS_DEPTH, signed=True, read_ports=lanes, doc="bias[j mod 16] added to column j")],
        ident=SCALE_ID,
        version=1,
    )


def scale_int(rows: Sequence[np.ndarray], masks: Sequence[np.ndarray], a: int, s: int, bias: Sequence[int],
              out_width: int) -> list[np.ndarray]:
    """The kernel on rows of integers: ``keep ? clamp(((x * a) >> s) + bias[j % 16]) : 0`` per element."""
    lo, hi = -(1 << (out_width - 1)), (1 << (out_width - 1)) - 1
    b = np.asarray(bias, dtype=np.int64)
    out = []
    for row, keep in zip(rows, masks, strict=True):
        j = np.arange(len(row))
        y = np.clip(((np.asarray(row).astype(np.int64) * a) >> s) + b[j % BIAS_DEPTH], lo, hi)
        out.append(np.where(keep, y, 0))
    return out

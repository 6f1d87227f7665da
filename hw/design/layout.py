"""Where the engine's AIE kernels and PLIOs go on the XCVC1902 array (50 columns x 8 rows).

The full description: ``docs/internals/hw.md``, section ``hw/design/layout.py``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

ARRAY_COLUMNS = 50
ARRAY_ROWS = 8
#: interface columns without a PL interface on the xcvc1902 (UG1079 (AI Engine Kernel and Graph Programming Guide),
#: "Shim Constraint": "columns 0-5 cannot be used for PLIO for the xcvc1902-vsva2197-2MP-e-S device")
NO_PL_COLUMNS_DOCUMENTED: tuple[int, ...] = tuple(range(0, 6))
#: PL interface tiles of the VC1902 (AM009 (AI Engine Architecture Manual), "AI Engine to Programmable Logic
#: Interface": "only 39 array interface tiles are available to the PL interface")
PL_INTERFACE_TILES = 39
#: interface columns the layout places PLIOs on: after the documented 0-5, the next 39 (6-44); 45-49 left out as a
#: labeled choice (the five other columns without a PL interface are not named in a public document)
PL_COLUMNS: tuple[int, ...] = tuple(c for c in range(ARRAY_COLUMNS) if c not in NO_PL_COLUMNS_DOCUMENTED)[
    :PL_INTERFACE_TILES]
PL_COLUMNS_SOURCE = ("AM009 'AI Engine to Programmable Logic Interface' (39 of 50 interface tiles reach the PL); "
                     "UG1079 'Shim Constraint' (columns 0-5 cannot hold a PLIO on the xcvc1902); columns 45-49 left "
                     "out: CHOICE (the other five are not named publicly), so no more than 39 columns are used")
#: 128-bit PLIOs per interface column and direction (8 PL->AIE and 6 AIE->PL 64-bit streams, two a PLIO)
PLIOS_PER_COLUMN = {"in": 4, "out": 3}


def pipeline_plios(score_plios: int = 1) -> tuple[tuple[str, str], ...]:
    """The PLIOs of one pipeline with ``score_plios`` score channels: (name suffix, direction seen from the AIE
    array): ``q_in``, ``k_in``, ``v_in``, per channel ``c`` ``p_in{c}`` and ``s_out{c}``, then ``o_out``."""
    if score_plios < 1:
        raise ValueError(f"score_plios must be >= 1, got {score_plios}")
    chans = range(score_plios)
    return (("q_in", "in"), ("k_in", "in"), ("v_in", "in"), *((f"p_in{c}", "in") for c in chans),
            *((f"s_out{c}", "out") for c in chans), ("o_out", "out"))


class LayoutError(ValueError):
    """A design that does not fit the array with this layout."""


def cascade_step(row: int) -> int:
    """+1 (east) on even rows, -1 (west) on odd rows: the column step from a kernel to its cascade successor."""
    return 1 if row % 2 == 0 else -1


def plio_name(pipeline: int, suffix: str) -> str:
    return f"p{pipeline}_{suffix}"


def qk_name(pipeline: int, j: int) -> str:
    return f"p{pipeline}_qk{j}"


def pv_name(pipeline: int, j: int) -> str:
    return f"p{pipeline}_pv{j}"


def rq_name(pipeline: int) -> str:
    return f"p{pipeline}_rq"


@dataclass(frozen=True)
class Layout:
    """Tile ``(column, row)`` of every kernel and interface column of every PLIO."""

    pipelines: int
    kernels: int
    tiles: dict[str, tuple[int, int]]
    plio_columns: dict[str, int]
    score_plios: int = 1

    def plios(self) -> list[tuple[str, str]]:
        """Every PLIO ``(name, direction)``, pipeline by pipeline."""
        return [(plio_name(i, s), d) for i in range(self.pipelines) for s, d in pipeline_plios(self.score_plios)]


def max_pipelines(kernels: int) -> int:
    """The most pipelines of ``kernels`` kernels a kind (and a requantizer) this layout places."""
    width = kernels + 1
    return (ARRAY_COLUMNS // width) * (ARRAY_ROWS // 2) if width <= ARRAY_COLUMNS else 0


@functools.lru_cache(maxsize=1024)
def layout(pipelines: int, kernels: int, score_plios: int = 1) -> Layout:
    """The placement of ``pipelines`` pipelines of ``kernels`` QKᵀ and ``kernels`` P·V kernels and ``score_plios``
    score channels (one shared object per arguments: the explorer asks for each many times; read it, never change
    it).

    Raises:
        LayoutError: more pipelines than :func:`max_pipelines`, or more PLIOs than the PL columns offer.
    """
    if pipelines < 1 or kernels < 1:
        raise LayoutError("pipelines and kernels must be >= 1")
    cap = max_pipelines(kernels)
    if pipelines > cap:
        raise LayoutError(f"{pipelines} pipelines of {kernels}+{kernels}+1 kernels do not fit the {ARRAY_COLUMNS}x"
                          f"{ARRAY_ROWS} array in blocks of {kernels + 1} columns x 2 rows (at most {cap})")
    width = kernels + 1
    per_pair = ARRAY_COLUMNS // width
    used_cols = min(pipelines, per_pair) * width
    left = (ARRAY_COLUMNS - used_cols) // 2
    tiles: dict[str, tuple[int, int]] = {}
    centres: list[float] = []
    for i in range(pipelines):
        pair, block = divmod(i, per_pair)
        c0 = left + block * width
        pv_row, qk_row = 2 * pair, 2 * pair + 1
        for j in range(width):
            col = c0 + j if cascade_step(pv_row) > 0 else c0 + width - 1 - j
            tiles[pv_name(i, j) if j < kernels else rq_name(i)] = (col, pv_row)
            if j < kernels:
                tiles[qk_name(i, j)] = (c0 + j, qk_row)
        centres.append(c0 + (width - 1) / 2)
    free = {c: dict(PLIOS_PER_COLUMN) for c in PL_COLUMNS}
    columns: dict[str, int] = {}
    for i in range(pipelines):
        for suffix, direction in pipeline_plios(score_plios):
            options = [c for c in PL_COLUMNS if free[c][direction] > 0]
            if not options:
                raise LayoutError(f"no PL interface column has a free {direction}put PLIO for {plio_name(i, suffix)}")
            col = min(options, key=lambda c: (abs(c - centres[i]), c))
            free[col][direction] -= 1
            columns[plio_name(i, suffix)] = col
    return Layout(pipelines, kernels, tiles, columns, score_plios)


__all__ = ["ARRAY_COLUMNS", "ARRAY_ROWS", "Layout", "LayoutError", "NO_PL_COLUMNS_DOCUMENTED", "PLIOS_PER_COLUMN",
           "PL_COLUMNS", "PL_COLUMNS_SOURCE", "PL_INTERFACE_TILES", "cascade_step", "layout", "max_pipelines",
           "pipeline_plios", "plio_name", "pv_name", "qk_name", "rq_name"]

"""Named parameters for the AIE costs no kernel's code shows. MODELED.

The full description: ``docs/internals/hw.md``, section ``hw/perf/calibration.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = ["FIT_COMMAND", "FIT_DESIGN", "FITTED", "PARAMETERS", "STORE_PATH", "Parameter", "load_fit", "param"]

#: the one published design the fitted parameters are fitted on (a name of vckattn.hw.perf.published.DESIGNS)
FIT_DESIGN = "MaxEVA int8 (P1, 13x4x6)"
#: the parameters the fit solves for (one: one published figure fits one unknown)
FITTED: tuple[str, ...] = ("sync_cycles_per_port",)
#: where the fit is stored
STORE_PATH = Path(__file__).resolve().parent / "data" / "calibration.json"
#: the command that reproduces the stored fit
FIT_COMMAND = "make regen"


@dataclass(frozen=True)
class Parameter:
    """One named cost: ``value`` in ``unit``; ``meaning`` says what it stands for, ``obtained`` how it was got."""

    name: str
    value: float
    unit: str
    meaning: str
    obtained: str


def _p(name: str, value: float, unit: str, meaning: str, obtained: str) -> tuple[str, Parameter]:
    return name, Parameter(name, value, unit, meaning, obtained)


#: name -> parameter. Values in the units stated.
PARAMETERS: dict[str, Parameter] = dict([
    _p("loop_fill_cycles", 8, "cycles per loop invocation",
       "pipeline fill + drain of one invocation of a software-pipelined loop (or of a flattened kernel's one "
       "straight-line schedule)",
       "ASSUMPTION: UG1079 'Software Pipelining of Loops' illustrates a 9-cycle iteration whose pipelined loop "
       "runs n iterations in n + 8 cycles (latency - II)"),
    _p("sync_cycles_per_port", 10, "cycles per buffer port and call",
       "hand-off of one buffer through its lock: per window port and call on the kernel (with the function's "
       "initialization), and per buffer a stream (DMA channel, PLIO) carries, on that stream",
       "ASSUMPTION within UG1079 'Run-Time Ratio' ('tens of cycles, depending on the interface numbers')"),
    _p("stream_backpressure_factor", 1.0, "dimensionless (>= 1)",
       "slow-down of a stream-fed phase when the stream switch back-pressures it (1 = none)",
       "ASSUMPTION: no back-pressure; UG1079 'AI Engine Tile Interface' gives one 32-bit stream word per "
       "cycle per port as the ceiling"),
])


def load_fit(path: Path = STORE_PATH) -> dict[str, Any] | None:
    """The stored fit (``None`` when there is none yet)."""
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _apply_stored() -> None:
    stored = load_fit()
    if not stored:
        return
    for name, value in stored["parameters"].items():
        if name in PARAMETERS:
            PARAMETERS[name] = replace(
                PARAMETERS[name], value=float(value),
                obtained=f"FITTED on {stored['design']} (published {stored['published']:.4g}, residual "
                         f"{stored['residual']:+.2e}) by `{stored['command']}`; {PARAMETERS[name].obtained}")


_apply_stored()


def param(name: str) -> float:
    """The value of the named parameter (in its unit); ``KeyError`` naming the known ones if unknown."""
    try:
        return PARAMETERS[name].value
    except KeyError:
        raise KeyError(f"unknown calibration parameter {name!r}; known: {sorted(PARAMETERS)}") from None

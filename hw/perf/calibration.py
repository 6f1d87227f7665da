"""Named parameters for the AIE costs no kernel's code shows. MODELED.

Buffer hand-offs through locks and DMA, loop and call overheads and stream back-pressure are not visible in a
kernel's operation counts. Each is one named :class:`Parameter` here, read by the cost modules through
:func:`param`. The fitted ones are fitted once, on one published design, by :func:`fit`
(see ``docs/validation.md``); the others are assumptions, each with its source.

The fit (:func:`fit`): ``sync_cycles_per_port`` -- the hand-off of one buffer through its lock (and, on the
stream side, the DMA's buffer-descriptor switch) -- is the one free parameter, solved so that the modeled
throughput of ONE published design equals its published throughput (bisection, deterministic), every other
parameter held at its stated value. The fitting design is :data:`FIT_DESIGN`, MaxEVA int8 (P1, 13x4x6, VCK190):
its figure comes from AMD's cycle-accurate AIE simulator (no PL, no DDR), it is bound by the matmul kernel,
whose code is public and modeled as written, and 77.01 TOPS on 312 kernels is 1,328 cycles an iteration where
the kernel's code counts 1,024 MAC issues, 128 cycles of accumulator drains and 4 loop fills -- the rest (about
144 cycles, three buffer ports) is the cost no code shows. The result is stored in
``hw/perf/data/calibration.json`` with the command that reproduces it (``python -m
vckattn.hw.perf.calibration --write``); ``tests/test_perf_calibration.py`` checks it equals a refit.

This module imports nothing of the performance model at import time (the fit imports it when called), so
every cost module can import it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = ["FIT_DESIGN", "FITTED", "PARAMETERS", "STORE_PATH", "Parameter", "fit", "leave_one_out", "load_fit",
           "param", "validation"]

#: the one published design the fitted parameters are fitted on (a name of vckattn.hw.perf.published.DESIGNS)
FIT_DESIGN = "MaxEVA int8 (P1, 13x4x6)"
#: the parameters the fit solves for (one: one published figure fits one unknown)
FITTED: tuple[str, ...] = ("sync_cycles_per_port",)
#: where the fit is stored
STORE_PATH = Path(__file__).resolve().parent / "data" / "calibration.json"
#: the command that reproduces the stored fit
FIT_COMMAND = "python -m vckattn.hw.perf.calibration --write"


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


# ---------------------------------------------------------------------------------------------------- fit

_LOW, _HIGH = 0.0, 20000.0  # cycles: the range the hand-off is searched in


def _design(name: str) -> Any:
    from . import published

    for g in published.DESIGNS:
        if g.name == name:
            return g
    raise KeyError(f"no published design {name!r}; known: {[g.name for g in published.DESIGNS]}")


def fit(design: str = FIT_DESIGN, held: dict[str, float] | None = None) -> dict[str, Any]:
    """Fit :data:`FITTED` on ONE published design: the hand-off (cycles) for which the modeled throughput
    equals the published one, by bisection on [0, 20,000] (the modeled throughput never rises with it).
    Clamped to the range when the model cannot reach the figure; ``residual`` (modeled / published - 1)
    says by how much. ``held`` overrides held parameters by name (a sensitivity study; the stored fit uses
    none). Deterministic: 200 halvings. MODELED."""
    from . import published

    g = _design(design)
    name = FITTED[0]

    fixed = {k: PARAMETERS[k].value for k in PARAMETERS if k not in FITTED}
    fixed.update(held or {})

    def err(value: float) -> float:
        return published.predict(g, params={**fixed, name: value})["error"]

    lo, hi = _LOW, _HIGH
    if err(lo) <= 0:
        value = lo
    elif err(hi) >= 0:
        value = hi
    else:
        for _ in range(200):
            mid = (lo + hi) / 2
            if err(mid) > 0:
                lo = mid
            else:
                hi = mid
        value = (lo + hi) / 2
    value = round(value, 6)
    return {"design": g.name, "board": g.board, "published": g.published, "published_what": g.published_what,
            "citation": g.citation, "parameters": {name: value}, "residual": err(value),
            "held": fixed, "command": FIT_COMMAND}


def validation(params: dict[str, float] | None = None, fit_design: str = FIT_DESIGN) -> list[dict[str, Any]]:
    """Every published design other than ``fit_design``, modeled with ``params`` (default: the stored
    fit) WITHOUT refitting: rows of :func:`vckattn.hw.perf.published.predict`. MODELED."""
    from . import published

    return [published.predict(g, params=params) for g in published.DESIGNS if g.name != fit_design]


def leave_one_out() -> list[dict[str, Any]]:
    """Fit on each published design in turn and model the others with that fit: one row per fitting
    design (``fit``: the fit, ``errors``: design -> modeled / published - 1 on every other design). MODELED."""
    from . import published

    rows = []
    for g in published.DESIGNS:
        f = fit(g.name)
        errors = {r["name"]: r["error"] for r in validation(f["parameters"], g.name)}
        rows.append({"fit_design": g.name, "parameters": f["parameters"], "residual": f["residual"],
                     "errors": errors, "worst": max(abs(e) for e in errors.values())})
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m vckattn.hw.perf.calibration [--write]``: print the fit (and store it with ``--write``)."""
    ap = argparse.ArgumentParser(description="Fit the calibration parameters on one published design.")
    ap.add_argument("--write", action="store_true", help=f"store the fit in {STORE_PATH.name}")
    args = ap.parse_args(argv)
    result = fit()
    text = json.dumps(result, indent=2, sort_keys=True) + "\n"
    if args.write:
        STORE_PATH.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

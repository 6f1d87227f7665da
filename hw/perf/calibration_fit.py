"""The calibration's fit: the costs no kernel's code shows (:mod:`.calibration`) fitted on ONE published design and
the others modeled without refitting (:mod:`.published`). MODELED.
``make regen`` stores the fit in ``hw/perf/data/calibration.json``."""

from __future__ import annotations

from typing import Any

from . import published
from .calibration import FIT_COMMAND, FIT_DESIGN, FITTED, PARAMETERS

__all__ = ["fit", "leave_one_out", "validation"]

_LOW, _HIGH = 0.0, 20000.0  # cycles: the range the hand-off is searched in


def _design(name: str) -> Any:
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
    return [published.predict(g, params=params) for g in published.DESIGNS if g.name != fit_design]


def leave_one_out() -> list[dict[str, Any]]:
    """Fit on each published design in turn and model the others with that fit: one row per fitting
    design (``fit``: the fit, ``errors``: design -> modeled / published - 1 on every other design). MODELED."""
    rows = []
    for g in published.DESIGNS:
        f = fit(g.name)
        errors = {r["name"]: r["error"] for r in validation(f["parameters"], g.name)}
        rows.append({"fit_design": g.name, "parameters": f["parameters"], "residual": f["residual"],
                     "errors": errors, "worst": max(abs(e) for e in errors.values())})
    return rows

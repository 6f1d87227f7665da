"""SwiftMax against online softmax for the whole encoder sublayer: MODELED, not measured.

The full description: ``docs/internals/hw.md``, section ``hw/design/explore_sublayer.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vckattn.hw.design.explore import HEADROOM, TIE
from vckattn.hw.perf import sublayer
from vckattn.hw.perf.sublayer import LANES, SublayerShape

__all__ = ["EQUAL_RESOURCE_KEYS", "NORMALIZER_KEYS", "SublayerExploration", "best_placeable", "explore_sublayer",
           "first_placeable", "normalizer_resources", "passes_aie_rules"]

#: the normalizer resources counted (each within the device less the headroom)
NORMALIZER_KEYS = ("lut", "ff", "dsp")
#: those the equal-resources comparison caps at the SwiftMax split's (with the AIE kernels)
EQUAL_RESOURCE_KEYS = ("lut", "ff")


def normalizer_resources(c: dict[str, Any]) -> dict[str, float]:
    """LUTs, FFs and DSPs of a split's normalizer instances (one a score channel), and their count."""
    from vckattn.hw.perf.model import kernel_fit

    sp = c["split"]
    n = sp["n_att"] * (sp["score_channels"] or sp["kq"])
    per = kernel_fit(sp["normalizer"], LANES, 8, sp["swiftmax_products"] if sp["normalizer"] == "swiftmax"
                        else "auto")
    return {"instances": float(n), **{k: n * v for k, v in zip(NORMALIZER_KEYS, per, strict=False)}}


@dataclass
class SublayerExploration:
    """The explorer's report for one sublayer shape (module docstring); each entry a :func:`.sublayer.split_cost`
    with its ``"normalizer_resources"``."""

    shape: SublayerShape
    tile_cap: float
    swiftmax: dict[str, Any]
    online_softmax: dict[str, Any]
    online_equal_resources: dict[str, Any] | None
    swiftmax_equal_throughput: dict[str, Any] | None
    online_equal_throughput: dict[str, Any] | None
    headroom: float = HEADROOM

    @property
    def speedup_equal_resources(self) -> float | None:
        if self.online_equal_resources is None:
            return None
        return self.online_equal_resources["seconds"] / self.swiftmax["seconds"]

    @property
    def lut_ratio_equal_throughput(self) -> float | None:
        if self.online_equal_throughput is None or self.swiftmax_equal_throughput is None:
            return None
        return (self.swiftmax_equal_throughput["normalizer_resources"]["lut"]
                / self.online_equal_throughput["normalizer_resources"]["lut"])

    def to_json(self) -> dict[str, Any]:
        return {
            "modeled": True, "scope": "sublayer", "tile_cap": self.tile_cap, "headroom": self.headroom,
            "best": {"swiftmax": self.swiftmax, "online_softmax": self.online_softmax},
            "online_softmax_equal_resources": self.online_equal_resources,
            "swiftmax_equal_throughput": self.swiftmax_equal_throughput,
            "online_softmax_equal_throughput": self.online_equal_throughput,
            "speedup_equal_resources": self.speedup_equal_resources,
            "lut_ratio_equal_throughput": self.lut_ratio_equal_throughput,
            "definitions": {
                "best": f"fastest split of the AIE array within {self.tile_cap:.0%} of its tiles (every kernel "
                        "one tile, within a tile's data memory) and 80% of every other resource (PLIOs in and out, "
                        f"LUT, FF, DSP, BRAM, URAM), its normalizer instances alone within {1 - self.headroom:.0%} "
                        "of the device's LUTs, FFs and DSPs",
                "speedup_equal_resources": "online-softmax seconds per sublayer on its fastest split within the "
                                           "SwiftMax split's AIE kernels and its normalizers' LUTs and FFs (DSPs "
                                           "not capped: SwiftMax uses none) / SwiftMax seconds per sublayer",
                "lut_ratio_equal_throughput": "LUTs of the normalizer instances of the SwiftMax split / of the "
                                              "online-softmax split, each the split with the fewest normalizer LUTs "
                                              "that reaches the slower of the two best splits' throughput",
            },
        }


def passes_aie_rules(s: SublayerShape, c: dict[str, Any]) -> bool:
    """Whether split ``c`` (a :func:`.sublayer.split_cost`) of ``s`` places on the array and its generated AIE graph
    passes every AIE rule of the design-rule check (:func:`.check.sublayer_context` on
    :func:`.sublayer_build.graph_build`: the same graph whichever normalizer the split's PL runs)."""
    from vckattn.hw.design import check
    from vckattn.hw.design.render import GenerateError
    from vckattn.hw.design.sublayer_build import graph_build

    try:
        ctx = check.sublayer_context(graph_build("candidate", s, c["split"]))
    except GenerateError:
        return False
    return not any(vs for _, vs in check.run_rules(ctx))


def first_placeable(s: SublayerShape, ranked: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first split of ``ranked`` that places and passes the AIE rules (:func:`passes_aie_rules`), or None."""
    return next((c for c in ranked if passes_aie_rules(s, c)), None)


def best_placeable(s: SublayerShape, tile_cap: float = 0.8, built: bool = False, **tiles: Any) -> dict[str, Any]:
    """The fastest split of :func:`.sublayer.splits` (fixed fields ``tiles`` as there) whose generated graph places
    and passes every AIE rule: the model's best split checked as it will place; with ``built``, also one whose PL
    top the generator builds (:func:`.pl_top.top_problem`). ValueError when none does."""
    from vckattn.hw.design.pl_top import top_problem

    ranked = sorted(sublayer.splits(s, tile_cap, **tiles), key=lambda c: c["seconds"])
    if built:
        ranked = [c for c in ranked if top_problem(s, sublayer.SublayerSplit.from_json(c["split"])) is None]
    best = first_placeable(s, ranked)
    if best is None:
        raise ValueError(f"no split of the {s.family} sublayer places on the array and passes the AIE rules"
                         + (" with a PL top the generator builds" if built else ""))
    return {**best, "tile_cap": tile_cap, "faster_unplaceable": ranked.index(best)}


def _with_resources(c: dict[str, Any]) -> dict[str, Any]:
    return {**c, "normalizer_resources": normalizer_resources(c)}


def _fewest_luts(s: SublayerShape, found: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    ok = [c for c in found if c["seconds"] <= target * (1 + TIE)]
    return first_placeable(s, sorted(ok, key=lambda c: (normalizer_resources(c)["lut"], c["kernels"], c["seconds"])))


def explore_sublayer(s: SublayerShape, tile_cap: float = 0.8, headroom: float = HEADROOM) -> SublayerExploration:
    """The five choices of the module docstring for sublayer ``s`` (ValueError when no split fits)."""
    from vckattn.hw.perf.model import Design, load_device, resources_available

    avail = resources_available(Design(), load_device("vck5000"))
    room = {k: avail[k] * (1 - headroom) for k in NORMALIZER_KEYS}
    found = {n: [c for c in sublayer.splits(s, tile_cap, normalizer=n)
                 if all(normalizer_resources(c)[k] <= room[k] for k in NORMALIZER_KEYS)] for n in sublayer.NORMALIZERS}
    if not all(found.values()):
        raise ValueError("no split fits the device (every resource within the cap, its normalizers the PL)")
    ranked = {n: first_placeable(s, sorted(v, key=lambda c: c["seconds"])) for n, v in found.items()}
    if not all(ranked.values()):
        raise ValueError("no split that fits the device places on the array and passes the AIE rules")
    best: dict[str, dict[str, Any]] = {n: c for n, c in ranked.items() if c is not None}
    bs = best["swiftmax"]
    cap = normalizer_resources(bs)
    eq_r = [c for c in found["online_softmax"] if c["kernels"] <= bs["kernels"]
            and all(normalizer_resources(c)[k] <= cap[k] for k in EQUAL_RESOURCE_KEYS)]
    target = max(b["seconds"] for b in best.values())
    ts, to = _fewest_luts(s, found["swiftmax"], target), _fewest_luts(s, found["online_softmax"], target)
    pick = first_placeable(s, sorted(eq_r, key=lambda c: c["seconds"]))
    return SublayerExploration(
        shape=s, tile_cap=tile_cap, swiftmax=_with_resources(bs),
        online_softmax=_with_resources(best["online_softmax"]),
        online_equal_resources=None if pick is None else _with_resources(pick),
        swiftmax_equal_throughput=None if ts is None else _with_resources(ts),
        online_equal_throughput=None if to is None else _with_resources(to), headroom=headroom)

"""Design-space exploration: the fastest buildable design per normalizer under the device's limits.

The space is what issue #16 builds: ``pipelines`` pipelines, each with ``k`` QKᵀ and ``k`` P·V AIE
kernels owning key slices (K and V resident in the kernels' data memory, partial O along the
cascade), scores leaving the AIE as int8 or int16 through its shift-round-saturate, ``score_plios``
128-bit score PLIOs (and as many P PLIOs) per pipeline, one normalizer instance of ``lanes`` lanes
per score PLIO, Q/K/V over ``in_plios`` and O over one PLIO, at one PL clock.

The search is pruned, not blind: for every (score width, tile shape, kernels per pipeline, score
PLIOs, lanes, Q/K/V PLIOs) it computes the design's per-pipeline resources once (the model's
resources are linear in ``pipelines``), takes the largest pipeline count that fits, and then the
smallest pipeline count that is as fast (time does not improve once DDR or another shared stage
bounds it). Kernels per pipeline stop at the key-block count (more kernels would idle) and at the
kernel data memory; lanes stop at the scores one PLIO beat carries. Among the designs within
``TIE`` of the fastest, the one with the fewest LUTs wins (a design that only adds LUTs is not
faster). Runs in seconds on one core.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from vckattn.hw.engine.model import MAX_KERNELS

from .model import (
    RESOURCE_KEYS,
    Design,
    Device,
    Perf,
    Workload,
    evaluate,
    layer_seconds,
    load_device,
    resources_available,
    resources_used,
)

#: designs within this relative time of the fastest count as equally fast (the fewest LUTs wins)
TIE = 0.005
Q_ROWS = (16, 32, 64)
KEY_BLOCKS = (32, 64)
SCORE_BITS = (8, 16)
#: Q/K/V PLIOs per pipeline: the engine streams qk_in and v_in (hw/ENGINE.md), so only 2 is buildable
IN_PLIOS = (2,)
PLIO_BITS = 128
#: LUT headroom the explorer keeps free by default (the issue's goal: >= 20%)
LUT_HEADROOM = 0.20
#: resources whose budget is capped in the equal-resources comparison (SwiftMax needs no BRAM/URAM
#: buffers; capping those would forbid online softmax's row buffers altogether)
EQUAL_RESOURCE_KEYS = ("aie_tiles", "plio_in", "plio_out", "lut", "ff", "dsp")


@dataclass
class Choice:
    """A candidate: its design, modeled seconds per layer and LUTs."""

    design: Design
    seconds: float
    lut: float


def _lanes_options(score_bits: int) -> list[int]:
    top = PLIO_BITS // score_bits
    return [2 ** i for i in range(int(math.log2(top)) + 1)]


def candidates(w: Workload, dev: Device, pl_clock_mhz: float) -> Iterator[Design]:
    """One-pipeline designs of the search space whose kernels fit the AIE data memory."""
    norms = set(w.normalizers)
    for bits in SCORE_BITS:
        for q_rows in Q_ROWS:
            for kb in KEY_BLOCKS:
                nb = -(-w.seq // kb)
                for k in range(1, min(nb, MAX_KERNELS) + 1):  # a pipeline has at most MAX_KERNELS key slices
                    if k > 1 and -(-nb // k) == -(-nb // (k - 1)):
                        continue  # same key slice as k - 1 kernels: only more tiles
                    base = Design(pipelines=1, qk_kernels=k, pv_kernels=k, q_rows=q_rows, key_block=kb,
                                  score_bits=bits, plio_bits=PLIO_BITS, score_plios=1, in_plios=1, out_plios=1,
                                  lanes_swiftmax=0, lanes_online_softmax=0, pl_clock_mhz=pl_clock_mhz,
                                  kv_resident=True, score_switch=False, o_bits=32, host_seconds_per_tile=0.0)
                    if resources_used(w, _with_lanes(base, norms, 1), dev)["aie_kernel_memory_bytes"] > \
                            dev.tile_memory_bytes:
                        continue
                    for s in range(1, k + 1):
                        for lanes in _lanes_options(bits):
                            for n_in in IN_PLIOS:
                                yield _with_lanes(replace(base, score_plios=s, in_plios=n_in), norms, lanes)


def _with_lanes(d: Design, norms: set[str], lanes: int) -> Design:
    return replace(d, lanes_swiftmax=lanes if "swiftmax" in norms else 0,
                   lanes_online_softmax=lanes if "online_softmax" in norms else 0)


def _max_pipelines(w: Workload, d: Design, dev: Device, budget: dict[str, float]) -> int:
    one = resources_used(w, d, dev)
    two = resources_used(w, replace(d, pipelines=2), dev)
    n = 10 ** 9
    for key, cap in budget.items():
        per = two[key] - one[key]
        const = one[key] - per
        if per <= 0:
            if one[key] > cap:
                return 0
            continue
        n = min(n, int(math.floor((cap - const) / per + 1e-9)))
    return max(n, 0)


def _best_for(w: Workload, d: Design, dev: Device, budget: dict[str, float]) -> Choice | None:
    n_max = _max_pipelines(w, d, dev, budget)
    if n_max < 1:
        return None
    tiles = w.batch * w.heads * -(-w.seq // d.q_rows)
    n_max = min(n_max, tiles)

    def t(n: int) -> float:
        return layer_seconds(w, replace(d, pipelines=n), dev)

    groups = w.batch * w.heads
    tops = sorted({n_max, min(n_max, groups)})
    best_n = min(tops, key=t)
    best_t = t(best_n)
    # the smallest pipeline count as fast (time is non-increasing in pipelines up to the group count)
    lo, hi = 1, best_n
    while lo < hi:
        mid = (lo + hi) // 2
        if t(mid) <= best_t * (1 + TIE / 4):
            hi = mid
        else:
            lo = mid + 1
    design = replace(d, pipelines=lo)
    return Choice(design, t(lo), resources_used(w, design, dev)["lut"])


def search(w: Workload, dev: Device | None = None, budget: dict[str, float] | None = None,
           pl_clock_mhz: float | None = None, lut_headroom: float = LUT_HEADROOM,
           max_seconds: float | None = None, progress: Callable[[int], None] | None = None) -> Choice | None:
    """The fastest design for ``w`` within ``budget`` (default: the device, with ``lut_headroom`` of the
    LUTs kept free); with ``max_seconds``, instead the design with the fewest LUTs that is at most that
    slow. ``progress(n)`` is called after each ``n`` candidates."""
    dev = dev or load_device()
    clock = pl_clock_mhz or float(dev.pl_clock_mhz["model_default"])
    if budget is None:
        probe = Design(pl_clock_mhz=clock)
        budget = {k: v for k, v in resources_available(probe, dev).items() if k != "aie_kernel_memory_bytes"}
        budget["lut"] = budget["lut"] * (1 - lut_headroom)
    found: list[Choice] = []
    count = 0
    for d in candidates(w, dev, clock):
        c = _best_for(w, d, dev, budget)
        count += 1
        if progress is not None and count % 64 == 0:
            progress(64)
        if c is not None:
            found.append(c)
    if progress is not None:
        progress(count % 64)
    if not found:
        return None
    if max_seconds is not None:
        ok = [c for c in found if c.seconds <= max_seconds * (1 + TIE)]
        return min(ok, key=lambda c: (c.lut, c.seconds)) if ok else None
    fastest = min(c.seconds for c in found)
    near = [c for c in found if c.seconds <= fastest * (1 + TIE)]
    return min(near, key=lambda c: (c.lut, c.seconds))


def candidate_count(w: Workload, dev: Device | None = None, pl_clock_mhz: float | None = None) -> int:
    """How many one-pipeline candidates :func:`search` visits (for a progress bar)."""
    dev = dev or load_device()
    clock = pl_clock_mhz or float(dev.pl_clock_mhz["model_default"])
    return sum(1 for _ in candidates(w, dev, clock))


@dataclass
class Exploration:
    """The explorer's report for one workload shape: the best design per normalizer, SwiftMax against
    online softmax at equal resources (speedup) and at equal throughput (LUT ratio)."""

    swiftmax: Perf
    online_softmax: Perf
    online_equal_resources: Perf | None
    swiftmax_equal_throughput: Perf | None
    online_equal_throughput: Perf | None
    lut_headroom: float

    @property
    def speedup_equal_resources(self) -> float | None:
        if self.online_equal_resources is None:
            return None
        return self.online_equal_resources.seconds_per_layer / self.swiftmax.seconds_per_layer

    @property
    def lut_ratio_equal_throughput(self) -> float | None:
        """SwiftMax normalizer LUTs / online-softmax normalizer LUTs, each on its design with the fewest
        LUTs that reaches the slower of the two best designs' throughput."""
        if self.online_equal_throughput is None or self.swiftmax_equal_throughput is None:
            return None
        return (self.swiftmax_equal_throughput.used["lut_normalizers"]
                / self.online_equal_throughput.used["lut_normalizers"])

    @property
    def lut_ratio_equal_throughput_design(self) -> float | None:
        """The same for the whole designs' LUTs (movers, buffers and normalizers)."""
        if self.online_equal_throughput is None or self.swiftmax_equal_throughput is None:
            return None
        return self.swiftmax_equal_throughput.used["lut"] / self.online_equal_throughput.used["lut"]

    def to_json(self) -> dict:
        return {
            "modeled": True,
            "best": {"swiftmax": self.swiftmax.to_json(), "online_softmax": self.online_softmax.to_json()},
            "online_softmax_equal_resources": None if self.online_equal_resources is None
            else self.online_equal_resources.to_json(),
            "swiftmax_equal_throughput": None if self.swiftmax_equal_throughput is None
            else self.swiftmax_equal_throughput.to_json(),
            "online_softmax_equal_throughput": None if self.online_equal_throughput is None
            else self.online_equal_throughput.to_json(),
            "speedup_equal_resources": self.speedup_equal_resources,
            "lut_ratio_equal_throughput": self.lut_ratio_equal_throughput,
            "lut_ratio_equal_throughput_design": self.lut_ratio_equal_throughput_design,
            "definitions": {
                "best": f"fastest design within the device with {self.lut_headroom:.0%} of the LUTs kept free; "
                        f"among designs within {TIE:.1%} of the fastest, the fewest LUTs",
                "speedup_equal_resources": "online-softmax seconds/layer on its fastest design within the SwiftMax "
                                           "design's AIE tiles, PLIOs, LUTs, FFs and DSPs (BRAM/URAM up to the "
                                           "device: SwiftMax needs no row buffers) / SwiftMax seconds/layer",
                "lut_ratio_equal_throughput": "LUTs of the normalizer instances of the SwiftMax design / of the "
                                              "online-softmax design, each the design with the fewest LUTs that "
                                              "reaches the slower of the two best designs' throughput",
            },
        }


def explore(w: Workload, dev: Device | None = None, pl_clock_mhz: float | None = None,
            lut_headroom: float = LUT_HEADROOM, progress: Callable[[int], None] | None = None) -> Exploration:
    """Run the five searches for workload shape ``w`` (its layers' normalizers are replaced: all
    SwiftMax, all online softmax)."""
    dev = dev or load_device()
    n = len(w.layers)
    ws = replace(w, layers=("swiftmax",) * n)
    wo = replace(w, layers=("online_softmax",) * n)
    kw = {"dev": dev, "pl_clock_mhz": pl_clock_mhz, "progress": progress}
    best_s = search(ws, lut_headroom=lut_headroom, **kw)
    best_o = search(wo, lut_headroom=lut_headroom, **kw)
    if best_s is None or best_o is None:
        raise ValueError(f"no design of the search space fits the device for this workload (S = {w.seq}: a "
                         f"pipeline holds at most {MAX_KERNELS} key slices, each within one AIE tile's memory)")
    perf_s = evaluate(ws, best_s.design, dev)
    budget = {k: perf_s.used[k] for k in EQUAL_RESOURCE_KEYS}
    probe = resources_available(best_s.design, dev)
    budget.update({k: probe[k] for k in ("bram", "uram")})
    eq_r = search(wo, budget=budget, **kw)
    # equal throughput: the slower of the two best designs' time, reached with the fewest LUTs by each
    target = max(best_s.seconds, best_o.seconds)
    eq_ts = search(ws, lut_headroom=lut_headroom, max_seconds=target, **kw)
    eq_to = search(wo, lut_headroom=lut_headroom, max_seconds=target, **kw)
    return Exploration(
        swiftmax=perf_s, online_softmax=evaluate(wo, best_o.design, dev),
        online_equal_resources=None if eq_r is None else evaluate(wo, eq_r.design, dev),
        swiftmax_equal_throughput=None if eq_ts is None else evaluate(ws, eq_ts.design, dev),
        online_equal_throughput=None if eq_to is None else evaluate(wo, eq_to.design, dev),
        lut_headroom=lut_headroom,
    )


__all__ = ["EQUAL_RESOURCE_KEYS", "Choice", "Exploration", "LUT_HEADROOM", "RESOURCE_KEYS", "TIE", "candidate_count",
           "candidates", "explore", "search"]

"""Design-space exploration: the fastest buildable engine design per normalizer under the device's limits.

The full description: ``docs/internals/hw.md``, section ``hw/design/explore.py``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import astuple, dataclass, replace

from vckattn.hw.perf import engine
from vckattn.hw.perf.model import (
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
from vckattn.hw.spec.functional import MAX_KERNELS, ONLINE_LANES

#: designs within this relative time of the fastest count as equally fast (the fewest LUTs wins)
TIE = 0.005
Q_ROWS = (8, 16, 32, 64)
#: kernels per pipeline, powers of two up to the build's limit (the V slices' packet ids k + j: 5 bits)
KERNELS = tuple(2 ** i for i in range(MAX_KERNELS.bit_length()) if 2 ** i <= MAX_KERNELS)
SCORE_BITS = (8, 16)
PLIO_BITS = 128
#: fraction of every resource the explorer keeps free by default
HEADROOM = 0.20
#: resources the headroom applies to (the per-kernel data memory is a fit check, not a budget)
BUDGET_KEYS = ("aie_tiles", "plio_in", "plio_out", *RESOURCE_KEYS)
#: resources whose budget is capped in the equal-resources comparison (SwiftMax needs no BRAM/URAM
#: buffers; capping those would forbid online softmax's row buffers altogether)
EQUAL_RESOURCE_KEYS = ("aie_tiles", "plio_in", "plio_out", "lut", "ff", "dsp")


def default_budget(dev: Device, headroom: float = HEADROOM, pl_clock_mhz: float | None = None) -> dict[str, float]:
    """The device's resources less ``headroom`` of each (:data:`BUDGET_KEYS`)."""
    probe = Design(pl_clock_mhz=pl_clock_mhz or float(dev.pl_clock_mhz["model_default"]))
    avail = resources_available(probe, dev)
    return {k: avail[k] * (1 - headroom) for k in BUDGET_KEYS}


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
    """One-pipeline engine designs of the search space whose kernels fit an AIE tile's data memory."""
    norms = set(w.normalizers)
    d_build = engine.build_d(w.d_head)
    for bits in SCORE_BITS:
        for q_rows in Q_ROWS:
            for k in KERNELS:
                keys = engine.build_keys(w.seq, k)
                base = Design(pipelines=1, qk_kernels=k, pv_kernels=k, q_rows=q_rows, key_block=16,
                              score_bits=bits, plio_bits=PLIO_BITS, score_plios=1, in_plios=3, out_plios=1,
                              lanes_swiftmax=0, lanes_online_softmax=0, pl_clock_mhz=pl_clock_mhz,
                              kv_resident=True, o_bits=8,
                              max_seq=keys, head_dim=d_build)
                try:  # a build the kernels' limits refuse (slice sizes, packet counts, mask indices) is no candidate
                    mem = resources_used(w, _with_lanes(base, norms, 1), dev)["aie_kernel_memory_bytes"]
                except ValueError:
                    continue
                if mem > dev.tile_memory_bytes:
                    continue
                # the SwiftMax lanes' products: LUTs (8-bit default) or DSP blocks (the same function)
                products = ("auto", "dsp") if bits <= 8 and "swiftmax" in norms else ("auto",)
                online = "online_softmax" in norms  # the generator's online channel: m = 1, ONLINE_LANES lanes
                for m in (1,) if online else (x for x in KERNELS if x <= k and k % x == 0):
                    for lanes in (x for x in _lanes_options(bits) if not online or x in ONLINE_LANES):
                        for prod in products:
                            yield _with_lanes(replace(base, score_plios=m, swiftmax_products=prod), norms, lanes)


def _with_lanes(d: Design, norms: set[str], lanes: int) -> Design:
    """``d`` with ``lanes`` lanes of each normalizer in ``norms``; a build with online softmax only still carries
    one SwiftMax lane a channel (the generator builds SwiftMax into every engine)."""
    return replace(d, lanes_swiftmax=lanes if "swiftmax" in norms else 1,
                   lanes_online_softmax=lanes if "online_softmax" in norms else 0)


def design_builds(d: Design, dev: Device) -> bool:
    """Whether ``vckattn hw generate`` builds ``d`` on the device's board and the design-rule check passes."""
    return _builds_cached(astuple(replace(d, name="")), dev.board)


@functools.lru_cache(maxsize=4096)
def _builds_cached(fields: tuple, board: str) -> bool:
    from vckattn.hw.design import check, render
    from vckattn.hw.design.layout import LayoutError, layout

    d = Design(*fields)
    seq = d.max_seq or render.BERT_SEQ
    heads = (d.head_dim,) if d.head_dim else render.HEAD_DIMS
    try:
        render.check_design(d, seq, heads)
        layout(d.pipelines, d.qk_kernels, d.score_plios)
    except (render.GenerateError, LayoutError):
        return False
    return check.passes(d, board, seq)


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


def best_for(w: Workload, d: Design, dev: Device, budget: dict[str, float]) -> Choice | None:
    """The smallest pipeline count of ``d`` as fast as the most that fit ``budget``, lowered until the generator
    builds it and the design-rule check passes on the device's board (None: no pipeline count does)."""
    n_max = _max_pipelines(w, d, dev, budget)
    if n_max < 1:
        return None
    n_max = min(n_max, w.batch * w.heads)  # whole groups are dealt: more pipelines than groups idle

    def t(n: int) -> float:
        return layer_seconds(w, replace(d, pipelines=n), dev)

    best_n = n_max
    best_t = t(best_n)
    # the smallest pipeline count as fast (time is non-increasing in pipelines up to the group count)
    lo, hi = 1, best_n
    while lo < hi:
        mid = (lo + hi) // 2
        if t(mid) <= best_t * (1 + TIE / 4):
            hi = mid
        else:
            lo = mid + 1
    while lo >= 1 and not design_builds(replace(d, pipelines=lo), dev):
        lo -= 1
    if lo < 1:
        return None
    design = replace(d, pipelines=lo)
    return Choice(design, t(lo), resources_used(w, design, dev)["lut"])


def search(w: Workload, dev: Device | None = None, budget: dict[str, float] | None = None,
           pl_clock_mhz: float | None = None, headroom: float = HEADROOM,
           max_seconds: float | None = None, progress: Callable[[int], None] | None = None) -> Choice | None:
    """The fastest design for ``w`` within ``budget`` (default: the device with ``headroom`` of every resource
    kept free); with ``max_seconds``, instead the design with the fewest LUTs that is at most that slow.
    ``progress(n)`` is called after each ``n`` candidates."""
    dev = dev or load_device()
    clock = pl_clock_mhz or float(dev.pl_clock_mhz["model_default"])
    if budget is None:
        budget = default_budget(dev, headroom, clock)
    found: list[Choice] = []
    count = 0
    for d in candidates(w, dev, clock):
        c = best_for(w, d, dev, budget)
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
    headroom: float

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
                "best": f"fastest design within the device with {self.headroom:.0%} of every resource kept free; "
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
            headroom: float = HEADROOM, progress: Callable[[int], None] | None = None) -> Exploration:
    """Run the five searches for workload shape ``w`` (its layers' normalizers are replaced: all
    SwiftMax, all online softmax)."""
    dev = dev or load_device()
    n = len(w.layers)
    ws = replace(w, layers=("swiftmax",) * n)
    wo = replace(w, layers=("online_softmax",) * n)
    kw = {"dev": dev, "pl_clock_mhz": pl_clock_mhz, "progress": progress}
    best_s = search(ws, headroom=headroom, **kw)
    best_o = search(wo, headroom=headroom, **kw)
    if best_s is None or best_o is None:
        raise ValueError(f"no design of the search space fits the device for this workload (S = {w.seq}: a "
                         f"pipeline holds at most {MAX_KERNELS} key slices, each within one AIE tile's memory)")
    perf_s = evaluate(ws, best_s.design, dev)
    budget = {k: perf_s.used[k] for k in EQUAL_RESOURCE_KEYS}
    full = default_budget(dev, headroom, pl_clock_mhz)
    budget.update({k: full[k] for k in ("bram", "uram")})
    eq_r = search(wo, budget=budget, **kw)
    # equal throughput: the slower of the two best designs' time, reached with the fewest LUTs by each
    target = max(best_s.seconds, best_o.seconds)
    eq_ts = search(ws, headroom=headroom, max_seconds=target, **kw)
    eq_to = search(wo, headroom=headroom, max_seconds=target, **kw)
    return Exploration(
        swiftmax=perf_s, online_softmax=evaluate(wo, best_o.design, dev),
        online_equal_resources=None if eq_r is None else evaluate(wo, eq_r.design, dev),
        swiftmax_equal_throughput=None if eq_ts is None else evaluate(ws, eq_ts.design, dev),
        online_equal_throughput=None if eq_to is None else evaluate(wo, eq_to.design, dev),
        headroom=headroom,
    )


__all__ = ["BUDGET_KEYS", "Choice", "EQUAL_RESOURCE_KEYS", "Exploration", "HEADROOM", "RESOURCE_KEYS", "TIE",
           "best_for", "candidate_count", "candidates", "default_budget", "design_builds", "explore", "search"]

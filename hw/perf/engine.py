"""The engine (stream contract v3, ``hw/ENGINE.md``) costed from its own code: MODELED, not measured.

The full description: ``docs/internals/hw.md``, section ``hw/perf/engine.py``.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vckattn.hw.pl import timing
from vckattn.hw.spec.schedule import deal_groups

from . import engine_aie

#: bytes of one header beat (TILE, SLICE, PACKET, RESULT: hw/ENGINE.md)
HEADER_BYTES = 16
#: bytes one 128-bit PLIO beat carries
PLIO_BEAT_BYTES = 16
#: bytes the AIE side of a PLIO (a 32-bit stream) and a tile DMA channel move per AIE cycle (AM009)
AIE_STREAM_BYTES = 4
#: descriptor bytes per command the movers read from DDR (hw/ENGINE.md "The host")
DESCRIPTOR_BYTES = 32
#: A record beats the output mover writes per PL cycle (hw/hls/s2mm_engine.cpp: a plain writer, II = 1 per beat of
#: 16 int8)
S2MM_BEATS_PER_CYCLE = 1
#: bits per element of the record the requantizer sends out: int8 A (``hw/ENGINE.md``)
ENGINE_O_BITS = 8
#: ping-pong: every buffer port has two halves (ADF buffer ports, UG1079)
BUFFER_HALVES = 2
#: MACs per AIE core cycle at int8 (UG1079)
PEAK_MACS = 128


def deal(groups: int, pipelines: int) -> list[list[int]]:
    """The (batch, head) groups each pipeline works on, in order: the host's own dealing
    (:func:`vckattn.hw.spec.schedule.deal_groups`, whole groups round-robin)."""
    return deal_groups(groups, pipelines)


@dataclass(frozen=True)
class Geometry:
    """Everything the timing needs about one workload on one engine design (sizes in bytes, rates in bytes/s)."""

    pipelines: int
    k: int  # QK^T (= P.V) kernels per pipeline
    m: int  # score channels per pipeline
    q_rows: int
    d: int  # head size the kernels compute (D)
    keys: int  # MAX_KEYS: keys every group is padded to
    sk: int  # keys per slice
    score_bits: int
    lanes: int
    f_aie: float
    f_pl: float
    seq: int
    heads: int
    kv_heads: int
    batch: int
    causal: bool
    normalizer: str
    o_bits: int = ENGINE_O_BITS

    @property
    def groups(self) -> int:
        return self.batch * self.heads

    @property
    def tiles_per_group(self) -> int:
        return -(-self.seq // self.q_rows)

    @property
    def per_channel(self) -> int:
        """Kernels (packets per tile) sharing one score channel."""
        return self.k // self.m

    # buffer contents (hw/ENGINE.md "Buffer sizes")
    @property
    def q_bytes(self) -> int:
        return HEADER_BYTES + self.q_rows * self.d

    @property
    def kv_bytes(self) -> int:
        return HEADER_BYTES + self.sk * self.d

    @property
    def s_bytes(self) -> int:
        return HEADER_BYTES + self.q_rows * self.sk * self.score_bits // 8

    @property
    def p_bytes(self) -> int:
        return HEADER_BYTES + self.q_rows * self.sk

    @property
    def o_bytes(self) -> int:
        """The requantizer's record over o_out: the header and ``Q_ROWS × D`` elements of ``o_bits`` (8: the int8
        A record)."""
        return HEADER_BYTES + self.o_bits // 8 * self.q_rows * self.d

    @property
    def a_bytes(self) -> int:
        """A record bytes written to DDR per tile (int8) plus its done-log entry."""
        return self.q_rows * self.d + HEADER_BYTES

    @property
    def link_rate(self) -> float:
        """Bytes/s through one 128-bit PLIO into or out of an AIE buffer."""
        return min(PLIO_BEAT_BYTES * self.f_pl, AIE_STREAM_BYTES * self.f_aie)

    def rows_of(self, r: int) -> int:
        """Valid query rows of tile ``r`` of a group."""
        return min(self.q_rows, self.seq - r * self.q_rows)

    def masked(self, r: int, j: int) -> bool:
        """Whether tile ``r`` of a group holds a masked score in slice ``j`` (the kernel then runs its masked loop,
        ``hw/ENGINE.md``): fewer valid rows than ``Q_ROWS``, or a row's key limit inside or before the slice."""
        if self.rows_of(r) < self.q_rows:
            return True
        lim = min(self.seq, r * self.q_rows + 1) if self.causal else self.seq
        return lim < (j + 1) * self.sk


def build_keys(seq: int, k: int) -> int:
    """``MAX_KEYS`` of a build for sequences up to ``seq`` with ``k`` kernels: ``seq`` rounded up to a multiple of
    ``16·k`` (every slice a multiple of 16 keys)."""
    unit = 16 * k
    return -(-seq // unit) * unit


def build_d(d_head: int) -> int:
    """The head size ``D`` a build computes for heads of ``d_head``: rounded up to a multiple of 16."""
    return -(-d_head // 16) * 16


def geometry(w: Any, d: Any, dev: Any, normalizer: str) -> Geometry:
    """The geometry of workload ``w`` on engine design ``d`` (ValueError where the build cannot run it)."""
    k, m = d.qk_kernels, d.score_plios
    if d.pv_kernels != k:
        raise ValueError(f"qk_kernels ({k}) must equal pv_kernels ({d.pv_kernels}): P.V kernel j owns slice j")
    if k % m:
        raise ValueError(f"score_plios ({m}) must divide the kernels per pipeline ({k})")
    keys = d.max_seq if d.max_seq else build_keys(w.seq, k)
    if keys % (16 * k):
        raise ValueError(f"max_seq {keys} is not a multiple of 16 x {k} kernels (slices of whole 16-key blocks)")
    if w.seq > keys:
        raise ValueError(f"seq {w.seq} is longer than the design's max_seq {keys}")
    if d.o_bits != ENGINE_O_BITS:
        raise ValueError(f"o_bits {d.o_bits}: an engine design sends int8 A records (o_bits {ENGINE_O_BITS}; the "
                         "requantizer at the end of the P.V cascade)")
    dd = d.head_dim if getattr(d, "head_dim", None) else build_d(w.d_head)
    if w.d_head > dd:
        raise ValueError(f"head size {w.d_head} is larger than the design's {dd}")
    return Geometry(pipelines=d.pipelines, k=k, m=m, q_rows=d.q_rows, d=dd, keys=keys, sk=keys // k,
                    score_bits=d.score_bits, lanes=d.lanes(normalizer), f_aie=dev.aie_clock_hz,
                    f_pl=d.pl_clock_mhz * 1e6, seq=w.seq, heads=w.heads, kv_heads=w.n_kv_heads, batch=w.batch,
                    causal=bool(getattr(w, "causal", False)), normalizer=normalizer, o_bits=d.o_bits)


# ------------------------------------------------------------------------------------------------ per tile


@dataclass(frozen=True)
class TileCosts:
    """Seconds one tile ``r`` of a group spends in each per-tile stage of a pipeline."""

    q_in: float  # the Q buffer over q_in (broadcast to the k QK^T kernels)
    qk: float  # the slowest of the k QK^T invocations (they share the broadcast Q)
    channel: float  # one score channel: its k/m packets out, through the PL, P back
    pv: float  # the P.V chain (the slowest invocation; the cascade keeps them in step)
    rq: float  # the requantizer at the cascade's end
    o_out: float  # the A record over o_out
    s2mm: float  # the output mover writing it
    qk_each: tuple[float, ...]  # per slice j
    pv_each: tuple[float, ...]


def pv_variant(j: int, k: int) -> str:
    """The P.V kernel variant of slice ``j`` of ``k`` (:mod:`.engine_aie`): the first, or one with a cascade in."""
    if not 0 <= j < k:
        raise ValueError(f"slice {j} of {k}")
    return "pv_first" if j == 0 else "pv_mid"


def cascade_blocks(g: Geometry) -> int:
    """O blocks (4 rows x 8 features) a tile sends along the cascade."""
    return (g.q_rows // 4) * (g.d // 8)


@functools.lru_cache(maxsize=65536)
def _cycles(kernel: str, q_rows: int, sk: int, d: int, score_bits: int, masked: bool) -> float:
    return float(engine_aie.invocation_cycles(kernel, q_rows, sk, d, score_bits, masked=masked)["total"])


def kernel_seconds(g: Geometry, kernel: str, masked: bool = False) -> float:
    """Seconds of one invocation of ``kernel`` (:mod:`.engine_aie`)."""
    return _cycles(kernel, g.q_rows, g.sk, g.d, g.score_bits, masked) / g.f_aie


def packet_seconds(g: Geometry) -> float:
    """Seconds one score packet occupies its channel: the slowest of its transfer out (s buffer -> PLIO), the PL's
    slots and P's transfer back (the three stream without buffering between them)."""
    if g.normalizer == "swiftmax":
        pl_s = timing.engine_packet_slots(g.q_rows * g.sk, g.lanes) / g.f_pl
    else:
        pl_s = g.q_rows * g.sk / timing.elements_per_cycle("online_softmax", g.lanes) / g.f_pl
    return max(g.s_bytes / g.link_rate, pl_s, g.p_bytes / g.link_rate)


def tile_costs(g: Geometry, r: int) -> TileCosts:
    """The per-stage seconds of tile ``r`` of a group."""
    qk_each = tuple(kernel_seconds(g, "qk", g.masked(r, j)) for j in range(g.k))
    pv_each = tuple(kernel_seconds(g, pv_variant(j, g.k)) for j in range(g.k))
    if g.normalizer == "swiftmax":
        channel = g.per_channel * packet_seconds(g)
    else:  # a row-assembling normalizer sees the whole tile on one unit (module docstring of .model)
        channel = timing.stream_cycles("online_softmax", g.q_rows, g.keys, g.lanes) / g.f_pl
        channel = max(channel, g.k * g.s_bytes / (g.m * g.link_rate))
    return TileCosts(q_in=g.q_bytes / g.link_rate, qk=max(qk_each), channel=channel, pv=max(pv_each),
                     rq=kernel_seconds(g, "rq"), o_out=g.o_bytes / g.link_rate,
                     s2mm=(g.o_bytes / PLIO_BEAT_BYTES) / S2MM_BEATS_PER_CYCLE / g.f_pl,
                     qk_each=qk_each, pv_each=pv_each)


P_AHEAD = 2
"""Tiles a score channel can deliver before the P.V kernels start: their p ports are ping-pong buffers."""


def kv_seconds(g: Geometry) -> float:
    """Seconds one group's K and V slices take: ``k`` buffers over k_in and ``k`` over v_in, in parallel."""
    return g.k * g.kv_bytes / g.link_rate


# ------------------------------------------------------------------------------------------------ the layer


@dataclass
class StageTime:
    """One stage of the layer: ``busy`` seconds of work on the busiest instance, the ``head`` before its first
    unit can start and the ``tail`` after its last unit until the layer ends; what bounds it."""

    name: str
    busy: float
    head: float
    tail: float
    bound_by: str
    on_chip: bool = True

    @property
    def span(self) -> float:
        return self.head + self.busy + self.tail


def ddr_bytes(g: Geometry, operands: str) -> dict[str, float]:
    """Bytes one layer moves over the card's DDR: Q per tile, K/V per group per pipeline that works on it, the
    command descriptors, A and the done logs."""
    if operands == "on_chip":
        return {"reads": 0.0, "writes": 0.0}
    tiles = g.groups * g.tiles_per_group
    # each group goes to one pipeline whole, so its K/V (padded to MAX_KEYS x D, re-tiled) are read once
    reads = tiles * (g.q_rows * g.d) + g.groups * 2 * g.keys * g.d
    reads += (tiles + 2 * 2 * g.k * g.groups) * DESCRIPTOR_BYTES  # the k and v movers each read the whole kv list
    writes = tiles * g.a_bytes
    return {"reads": float(reads), "writes": float(writes)}


def layer_time(w: Any, d: Any, dev: Any, normalizer: str) -> tuple[list[StageTime], float, str]:
    """The stages of one layer, the layer's modeled seconds and its bottleneck stage (module docstring)."""
    g = geometry(w, d, dev, normalizer)
    groups_of = deal(g.groups, g.pipelines)
    busiest = max(range(g.pipelines), key=lambda p: len(groups_of[p]))
    n_groups = len(groups_of[busiest])
    per_tile = [tile_costs(g, r) for r in range(g.tiles_per_group)]

    def total(attr: str) -> float:
        return n_groups * sum(getattr(c, attr) for c in per_tile)

    first, last = per_tile[0], per_tile[-1]
    kv = kv_seconds(g)
    if w.operands != "on_chip":
        # the first round's K/V loads: every pipeline dealt a group reads its slices from the one bank at once
        active = sum(1 for x in groups_of if x)
        kv = max(kv, active * 2 * g.k * (g.sk * g.d + 2 * DESCRIPTOR_BYTES) / dev.ddr_bytes_per_s)
    # head: a QK^T kernel needs its K slice (slices j = 0..k-1 go first) and its Q; the P.V kernels need V (the
    # group's last k slices); tail: the last tile through the stages behind
    head_qk = max(g.k * g.kv_bytes / g.link_rate, first.q_in)
    pl_lat = timing.ENGINE_OUT_DELAY / g.f_pl
    lat_channel = (g.s_bytes / g.link_rate + pl_lat + g.p_bytes / g.link_rate) if normalizer == "swiftmax" \
        else first.channel
    # the requantizer takes the blocks as the last P.V kernel passes them on: it ends at least one block after it
    tail_rq = last.o_out + last.s2mm
    tail_pv = last.rq / cascade_blocks(g) + tail_rq
    head_pv = max(head_qk + first.qk + lat_channel, kv)
    head_rq = head_pv + first.pv / cascade_blocks(g)
    tail_channel = last.pv + tail_pv
    tail_qk = lat_channel + tail_channel
    stages = [
        StageTime("kv_in", n_groups * kv, 0.0, first.qk + lat_channel + last.pv + tail_pv,
                  f"PLIOs k_in and v_in (K and V slices, {g.k} x {g.kv_bytes} B each a group, in parallel)"),
        StageTime("q_in", total("q_in"), 0.0, last.qk + tail_qk, "PLIO q_in (Q, broadcast)"),
        StageTime("aie_qk", total("qk"), head_qk, tail_qk,
                  f"AIE QK^T kernels ({engine_aie_label(g, 'qk')})"),
        # the channel runs at most P_AHEAD tiles ahead of the P.V kernels (their ping-pong p buffers), which wait
        # for their V slices
        StageTime("pl_channel", total("channel"), max(head_qk + first.qk, head_pv - P_AHEAD * first.channel),
                  tail_channel,
                  f"score channel: {g.per_channel} packet(s) a tile out, PL {normalizer} ({g.lanes} lanes x "
                  f"{g.f_pl / 1e6:g} MHz), P back"),
        StageTime("aie_pv", total("pv"), head_pv, tail_pv, f"AIE P.V kernels ({engine_aie_label(g, 'pv')})"),
        StageTime("aie_rq", total("rq"), head_rq, tail_rq, "AIE requantizer (O to int8 A, at the cascade's end)"),
        StageTime("o_out", total("o_out"), head_rq + first.rq, last.s2mm, "PLIO o_out (A records, int8)"),
        StageTime("s2mm", total("s2mm"), head_rq + first.rq + first.o_out, 0.0,
                  "PL output mover (writes A, one beat a cycle)"),
    ]
    if w.operands != "on_chip":
        b = ddr_bytes(g, w.operands)
        busy = (b["reads"] + b["writes"]) / dev.ddr_bytes_per_s
        lat_tile = first.qk + lat_channel + first.pv / cascade_blocks(g) + first.rq + first.o_out + first.s2mm
        # the bank is shared round by round: while every pipeline works on its r-th group the bank serves them all;
        # in the last rounds only the pipelines dealt more groups are left, and the bank waits for them
        per_group = max(s.busy for s in stages) / n_groups
        counts = [len(x) for x in groups_of]
        rounds = sum(max(busy * sum(c > r for c in counts) / g.groups, per_group) for r in range(n_groups))
        stages.insert(0, StageTime("ddr", busy, 0.0, lat_tile + max(0.0, rounds - busy),
                                   "DDR (reads + writes, one bank)", on_chip=False))
    if w.operands == "host":
        if dev.pcie_bytes_per_s is None:
            raise ValueError(f"{dev.board} has no PCIe host link; use operands 'ddr'")
        up = w.batch * w.seq * w.d_head * (w.heads + 2 * w.n_kv_heads)
        down = w.batch * w.seq * w.d_head * w.heads
        stages.insert(0, StageTime("host_link", max(up, down) / dev.pcie_bytes_per_s, 0.0, 0.0,
                                   "PCIe (per direction)", on_chip=False))
    top = max(stages, key=lambda s: s.span)
    return stages, top.span, top.name


def engine_aie_label(g: Geometry, which: str) -> str:
    if which == "qk":
        eff = engine_aie.efficiency("qk", g.q_rows, g.sk, g.d, g.score_bits)
        return f"{g.k} a pipeline, {eff:.0%} of the MAC peak a tile"
    eff = min(engine_aie.efficiency(pv_variant(j, g.k), g.q_rows, g.sk, g.d, g.score_bits) for j in {0, g.k - 1})
    return f"{g.k} a pipeline, cascade, {eff:.0%} of the MAC peak a tile"


def kernel_report(w: Any, d: Any, dev: Any, normalizer: str = "swiftmax") -> list[dict[str, Any]]:
    """Each engine kernel's modeled cycles and efficiency (MACs / (cycles x 128)) for one tile of this workload; the
    requantizer has no MACs (efficiency None)."""
    g = geometry(w, d, dev, normalizer)
    out = []
    for kernel, masked in (("qk", False), ("qk", True), *((pv_variant(j, g.k), False) for j in
                                                          sorted({0, g.k - 1})), ("rq", False)):
        cyc = engine_aie.invocation_cycles(kernel, g.q_rows, g.sk, g.d, g.score_bits, masked=masked)
        macs = engine_aie.invocation_macs(kernel, g.q_rows, g.sk, g.d, g.score_bits)
        out.append({"kernel": kernel + (" (masked tile)" if masked else ""), "q_rows": g.q_rows, "slice_keys": g.sk,
                    "d": g.d, "macs": macs, "cycles": cyc["total"],
                    "efficiency": macs / (cyc["total"] * PEAK_MACS) if macs else None})
    return out


# ------------------------------------------------------------------------------------------------ resources


def memory_bytes(g: Geometry) -> dict[str, int]:
    """Data memory of each kernel variant (bytes): its ping-pong buffers and its state, as the C++ kernels declare
    them (:func:`vckattn.hw.spec.functional.kernel_memory`; a test compares with ``sizeof``)."""
    from vckattn.hw.spec.functional import EngineParams, kernel_memory

    return kernel_memory(EngineParams(pipelines=1, kernels=g.k, score_plios=g.m, q_rows=g.q_rows, d=g.d,
                                      max_keys=g.keys, score_bits=g.score_bits, lanes=1))


def plios(d: Any) -> dict[str, int]:
    """128-bit PLIOs of the design: in q_in, k_in, v_in and m p_in per pipeline; out m s_out and o_out."""
    return {"in": d.pipelines * (3 + d.score_plios), "out": d.pipelines * (d.score_plios + 1)}


INFRA_FILE = Path(__file__).resolve().parent / "data" / "pl_infrastructure.json"
RESOURCE_KEYS = ("lut", "ff", "dsp", "bram", "uram")


@functools.cache
def infrastructure() -> dict[str, Any]:
    """The per-instance costs of the movers and their AXI4 master ports (with sources)."""
    return json.loads(INFRA_FILE.read_text(encoding="utf-8"))


def parts_resources(count: dict[str, int]) -> dict[str, float]:
    """PL resources of ``count`` instances of each part of ``pl_infrastructure.json`` (``{part: instances}``)."""
    parts = infrastructure()["parts"]
    return {r: float(sum(n * parts[part][r]["value"] for part, n in count.items())) for r in RESOURCE_KEYS}


def infrastructure_per_pipeline(ddr_ports: bool = True) -> dict[str, float]:
    """PL resources of one pipeline's movers and AXI4 master ports (``pl_infrastructure.json``); without
    ``ddr_ports`` a pipeline fed from the sublayer's PL buffers: its output writer alone, without master ports (its
    q, k and v streams come from the buffers' readers, costed with the buffers: ``hw/perf/sublayer.py:
    buffer_logic``)."""
    count = dict(infrastructure()["ports_per_pipeline"]["value"])
    if not ddr_ports:
        count = {"s2mm_engine": count["s2mm_engine"]}
    return parts_resources(count)


def resources(w: Any, d: Any, dev: Any, normalizers: tuple[str, ...],
              pl_resources: Any, ddr_ports: bool = True) -> dict[str, float]:
    """Resources of engine design ``d`` for workload ``w``: AIE tiles (``2k`` kernels and the requantizer a
    pipeline), the largest kernel's buffers, PLIOs, and the
    PL -- the score channels' normalizer lanes (``pl_resources(kernel, lanes, score_bits, products)``: Yosys), an online
    softmax's row-assembly buffers, and every pipeline's movers and AXI4 master ports (:func:`infrastructure`;
    ``ddr_ports`` False: no master ports, the movers read and write PL buffers). ``axi_masters`` counts the master
    ports into the one DDR bank."""
    g = geometry(w, d, dev, normalizers[0])
    mem = memory_bytes(g)
    io = plios(d)
    used: dict[str, float] = {"aie_tiles": float((2 * d.qk_kernels + 1) * d.pipelines),
                              "aie_kernel_memory_bytes": float(max(mem.values()) + dev.tile_memory_reserve_bytes),
                              "plio_in": float(io["in"]), "plio_out": float(io["out"])}
    pl_used = dict.fromkeys(RESOURCE_KEYS, 0.0)
    channels = d.pipelines * d.score_plios
    norm_lut = 0.0
    for n in normalizers:
        lanes = d.lanes(n)
        per = pl_resources(n, lanes, d.score_bits, d.swiftmax_products if n == "swiftmax" else "auto")
        for key, v in zip(RESOURCE_KEYS, per, strict=True):
            pl_used[key] += channels * v
        norm_lut += channels * per[0]
        if n == "online_softmax":  # a double-buffered tile of scores and of P per pipeline, in URAM
            bits = 2 * g.q_rows * g.keys * (g.score_bits + 8)
            pl_used["uram"] += d.pipelines * max(math.ceil(bits / dev.uram_bits),
                                                 2 * math.ceil(PLIO_BEAT_BYTES * 8 / dev.uram_width_bits))
    infra = infrastructure_per_pipeline(ddr_ports)
    for key in RESOURCE_KEYS:
        pl_used[key] += d.pipelines * infra[key]
    used.update(pl_used)
    used["lut_normalizers"] = norm_lut
    used["axi_masters"] = float(d.pipelines * infrastructure()["ports_per_pipeline"]["value"]["axi_master"]
                                if ddr_ports else 0)
    return used


__all__ = ["BUFFER_HALVES", "Geometry", "StageTime", "TileCosts", "build_d", "build_keys", "cascade_blocks",
           "ddr_bytes", "deal", "geometry", "kernel_report", "kernel_seconds", "kv_seconds", "layer_time",
           "memory_bytes", "packet_seconds", "parts_resources", "plios", "pv_variant", "resources", "tile_costs"]

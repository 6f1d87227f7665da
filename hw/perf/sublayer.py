"""The whole attention sublayer on the card, in closed form: MODELED, not measured.

The full description: ``docs/internals/hw.md``, section ``hw/perf/sublayer.py``.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

from vckattn.hw.spec.gemm import GemmParams

from . import banks, engine, engine_aie, gemm_proj
from .aie import PEAK_MACS_PER_CYCLE

__all__ = ["DEVICE", "FAMILIES", "LANES", "NORMALIZERS", "RESOURCES", "RESOURCE_CAP", "SEQUENCE_SLOTS", "SITE_LANES",
           "W_SHARES", "SublayerShape", "SublayerSplit", "attention_design", "attention_geometry", "attention_memory",
           "available", "bert_base", "best_split", "broadcast_groups", "buffers", "deal_projection", "default_qkv_tile",
           "descriptor_fifos", "first_reload_bytes", "gemm_params", "launch_runs", "movers", "out_share", "pl_units",
           "plios", "refit", "resources", "rope_lanes", "routers", "schedule", "share_groups", "site_seconds",
           "site_stage", "site_units", "split_cost", "splits", "sublayer_macs", "tile_caps", "w_link_seconds",
           "weight_loads"]

#: sequences of Q/K/V (and of A) the PL holds between two stages (URAM: ``4·S·d`` bytes a sequence): the stages
#: hand over whole sequences and a stage's instances finish a sequence at different times (uneven dealing), so two
#: (double buffering) would stall them
SEQUENCE_SLOTS = 4
#: lanes of a score channel's normalizer instance: one 128-bit beat of int8 scores a PL cycle
LANES = 16
#: the attention normalizers a split can use
NORMALIZERS = ("swiftmax", "online_softmax")


#: the sublayer families the model costs (golden/stages.py): ``encoder`` (post-LN BERT: Q/K/V, attention, W_O,
#: residual) and ``decoder`` (BHyT Llama: site A on X before Q/K/V, RoPE on Q and K, causal attention)
FAMILIES = ("encoder", "decoder")


@dataclass(frozen=True)
class SublayerShape:
    """The sublayer: ``batch`` sequences of ``seq`` tokens, ``heads`` query heads × ``head_dim`` (= d_model),
    ``kv_heads`` K/V heads (grouped-query attention when fewer; None: ``heads``), of ``family`` (:data:`FAMILIES`)."""

    batch: int
    seq: int
    heads: int = 12
    head_dim: int = 64
    kv_heads: int | None = None
    family: str = "encoder"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        if self.heads % self.n_kv:
            raise ValueError(f"kv_heads {self.n_kv} must divide heads {self.heads}")

    @property
    def d_model(self) -> int:
        return self.heads * self.head_dim

    @property
    def n_kv(self) -> int:
        """K/V heads."""
        return self.kv_heads or self.heads

    @property
    def qkv_cols(self) -> int:
        """Output channels of the fused Q/K/V projection: ``(heads + 2·kv_heads)·head_dim``."""
        return (self.heads + 2 * self.n_kv) * self.head_dim

    @property
    def decoder(self) -> bool:
        return self.family == "decoder"

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


@dataclass(frozen=True)
class SublayerSplit:
    """How the array is split: ``n_qkv`` / ``n_o`` projection cascades, ``n_att`` attention pipelines of ``kq`` +
    ``kq`` kernels with ``q_rows`` query rows a tile. The GEMM tiles ``(rows, cols, kslice)`` of the Q/K/V cascades
    (``qkv_tile``, int8 out) and the W_O cascades (``o_tile``, int32 out: fewer rows a tile, so that its buffers fit
    a tile's memory with the 4-byte outputs); each is a build of the projection GEMM kernel. The defaults are the
    shapes of highest modeled efficiency that fit a tile's memory and keep their x and out buffers within a PLIO's
    rate (``python -m vckattn.sim.gemm_proj_perf`` lists the candidates). ``normalizer``: the attention pipelines'
    normalizer (:data:`NORMALIZERS`); ``score_channels``: score channels (a normalizer instance each) a pipeline,
    dividing ``kq`` (None: ``kq``, one a kernel pair); ``swiftmax_products``: how the SwiftMax lanes multiply
    (:data:`.pl.SWIFTMAX_PRODUCTS`: ``"auto"`` in LUTs, ``"dsp"`` in DSP blocks; the same function); ``w_share``:
    projection cascades a w PLIO serves (:func:`share_groups`), packet-split to their kernels; ``x_on_chip``: all of
    X kept in the PL for the residual (read once), or only :data:`SEQUENCE_SLOTS` sequences of it (each read again
    from DDR for the residual: ``N·d`` more DDR bytes)."""

    @property
    def channels(self) -> int:
        """Score channels a pipeline."""
        return self.score_channels or self.kq

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SublayerSplit:
        """The split of a JSON object (a :func:`split_cost`'s ``split``: its tiles as lists)."""
        return cls(**{**data, "qkv_tile": tuple(data["qkv_tile"]), "o_tile": tuple(data["o_tile"])})

    n_qkv: int
    n_o: int
    n_att: int
    kq: int
    q_rows: int = 32
    qkv_tile: tuple[int, int, int] = (16, 48, 192)
    o_tile: tuple[int, int, int] = (8, 48, 192)
    normalizer: str = "swiftmax"
    score_channels: int | None = None
    swiftmax_products: str = "auto"
    w_share: int = 1
    x_on_chip: bool = True


def _device() -> dict[str, float]:
    """The VCK5000 from ``hw/perf/device.json`` (AIE tiles, AIE clock, DDR bandwidth, the data memory a kernel may
    use: a tile's less the runtime's reserve), the engine's PL clock (250 MHz, the model's default design) and the
    link widths of :mod:`.engine` (a 128-bit PLIO, the tile DMA's 32-bit stream)."""
    from . import engine
    from .model import Design, load_device

    dev = load_device("vck5000")
    return {"aie_tiles": dev.aie_tiles, "aie_clock_hz": dev.aie_clock_hz, "ddr_bytes_per_s": dev.ddr_bytes_per_s,
            "kernel_memory_bytes": dev.tile_memory_bytes - dev.tile_memory_reserve_bytes,
            "pl_clock_hz": Design.__dataclass_fields__["pl_clock_mhz"].default * 1e6,
            "plio_bytes": engine.PLIO_BEAT_BYTES, "dma_bytes_per_cycle": engine.AIE_STREAM_BYTES}


#: the device numbers the sublayer model uses (:func:`_device`)
DEVICE = _device()


def _io_cycles(nbytes: int) -> float:
    """AIE cycles to move ``nbytes`` through one 128-bit PLIO at the PL clock, or through the tile DMA's 32-bit
    stream at the AIE clock, whichever is slower (every buffer crosses both)."""
    plio = nbytes / DEVICE["plio_bytes"] * DEVICE["aie_clock_hz"] / DEVICE["pl_clock_hz"]
    return max(plio, nbytes / DEVICE["dma_bytes_per_cycle"])


def sublayer_macs(s: SublayerShape) -> dict[str, int]:
    """MACs of each stage: ``qkv`` N·d·(H + 2·H_kv)·D, ``attention`` 2·B·H·S²·D (a causal decoder: only the keys
    at or before each query, 2·B·H·D·S(S+1)/2), ``o`` N·d·d (units: multiply-accumulates)."""
    d = s.d_model
    pairs = s.seq * (s.seq + 1) // 2 if s.decoder else s.seq * s.seq
    return {"qkv": s.tokens * d * s.qkv_cols, "attention": 2 * s.batch * s.heads * pairs * s.head_dim,
            "o": s.tokens * d * d}


@functools.cache
def gemm_params(tile: tuple[int, int, int], d_model: int, out_bits: int) -> GemmParams:
    """The projection cascade of GEMM tile ``(rows, cols, kslice)`` over ``d_model`` features: ``d_model / kslice``
    kernels (the tile's ``kslice`` is the even split that sets the cascade's length), their own K-slices balanced so
    that the last kernel, which also drains the tile, finishes with the others (:func:`.gemm_proj.balanced`, within
    a kernel's data memory; the even split where no balanced one fits, for the memory check to refuse)."""
    rows, cols, kslice = tile
    k = d_model // kslice
    try:
        return gemm_proj.balanced(k, rows, cols, d_model, out_bits, int(DEVICE["kernel_memory_bytes"]))
    except ValueError:
        return GemmParams(k, rows, cols, kslice, out_bits)


@functools.cache
def _tile_cycles(kq: int, q_rows: int, sk: int, d: int) -> float:
    """Cycles of a tile of an attention pipeline of ``kq`` + ``kq`` kernels and the requantizer: its slowest
    kernel."""
    kernels = ["qk", "pv_first", "rq"] + (["pv_mid"] if kq > 1 else [])
    return max(engine_aie.invocation_cycles(k, q_rows, sk, d)["total"] for k in kernels)


def deal_projection(blocks: int, batch: int, n: int) -> list[list[tuple[int, int]]]:
    """The (output-channel block, sequence) units of a projection stage dealt to ``n`` cascades: per cascade its
    units in the order it runs them. The units in block-major order (``u = block·batch + sequence``) are cut into
    ``n`` contiguous runs as even as can be (cascade ``c``: units ``⌊c·U/n⌋ .. ⌊(c+1)·U/n⌋ - 1``), so a cascade
    serves one block or a few neighbours; every cascade runs its units sequence by sequence (for each sequence, its
    blocks in order), so a sequence leaves the stage once every cascade has done its units of it."""
    if blocks < 1 or batch < 1 or n < 1:
        raise ValueError(f"need blocks, batch and cascades >= 1, got {blocks}, {batch}, {n}")
    units = blocks * batch
    return [sorted(((u // batch, u % batch) for u in range(c * units // n, (c + 1) * units // n)),
                   key=lambda x: (x[1], x[0])) for c in range(n)]


def weight_loads(units: list[tuple[int, int]]) -> int:
    """Weight blocks a cascade reads running ``units`` in order: one whenever the block differs from the previous
    unit's (its w buffer holds one block; the other half is being refilled)."""
    return sum(1 for i, (blk, _) in enumerate(units) if i == 0 or units[i - 1][0] != blk)


def _x_in(s: SublayerShape, b: int, first_reloads: float) -> float:
    """When X of sequence ``b`` is on chip: X is read in sequence order from the launch's start, beside the first
    reloads (``first_reloads`` bytes: :func:`first_reload_bytes`)."""
    return _shared_bank((b + 1) * s.seq * s.d_model, first_reloads)


def share_groups(n: int, share: int) -> list[list[int]]:
    """Cascades ``0 .. n-1`` in groups of ``share`` consecutive ones (the last may be smaller): the cascades a w
    PLIO serves, or whose outputs merge onto one output PLIO."""
    if share < 1:
        raise ValueError(f"a PLIO serves at least one cascade, got {share}")
    return [list(range(i, min(i + share, n))) for i in range(0, n, share)]


def out_share(p: GemmParams) -> int:
    """Cascades of build ``p`` whose outputs merge onto one output PLIO (packet merge): the most whose tiles,
    drained back to back (lock-step cascades finish their tiles together), take no longer than one cascade's
    compute, so that the merge never slows a cascade."""
    return max(1, int(gemm_proj.cascade_cycles(p) // _io_cycles(p.rows * p.cols * p.out_bits // 8)))


def w_link_seconds(s: SublayerShape, tile: tuple[int, int, int]) -> float:
    """Seconds one weight block (every kernel's K-slice of ``cols`` channels, a header each) takes through a w
    PLIO into its cascade's kernels."""
    _, cols, kslice = tile
    link = min(DEVICE["plio_bytes"] * DEVICE["pl_clock_hz"], DEVICE["dma_bytes_per_cycle"] * DEVICE["aie_clock_hz"])
    return s.d_model // kslice * (engine.HEADER_BYTES + kslice * cols) / link


def _shared_bank(nbytes: float, other: float) -> float:
    """Seconds until the first ``nbytes`` of one of two movers that start reading the one DDR bank together are
    in, the other with ``other`` bytes to read (the bank alternates between them: half its rate each while both
    read)."""
    return (2 * nbytes if nbytes <= other else nbytes + other) / DEVICE["ddr_bytes_per_s"]


@functools.cache
def first_reload_bytes(s: SublayerShape, tile: tuple[int, int, int], n: int, out_cols: int) -> int:
    """Bytes of the blocks the cascades of a projection stage ask for at the launch's start: every cascade that
    switches block during the launch asks for its second one at once (its w buffer's other half is free)."""
    dealt = deal_projection(out_cols // tile[1], s.batch, n)
    return sum(1 for u in dealt if weight_loads(u) > 1) * tile[1] * s.d_model


@functools.cache
def _cascade(s: SublayerShape, tile: tuple[int, int, int], n: int, out_cols: int, out_bits: int,
             w_share: int = 1, first_reloads: float | None = None) -> dict[str, Any]:
    """One projection stage on ``n`` cascades of GEMM tile ``(rows, cols, kslice)``, ``w_share`` cascades a w
    PLIO: seconds for the launch (the busiest cascade), kernels, weight bytes read (all loads; the first of each
    cascade), the next sublayer's first blocks on each w PLIO (``prefetch``: per w PLIO, whether a cascade of it
    reloads during the launch, and the seconds its first blocks take through it), memory, and the work of each
    cascade on each sequence with the stage's fill and tail (``"work"``, ... for :func:`schedule`).
    ``first_reloads``: for the first stage, the bytes of every stage's first reloads (:func:`first_reload_bytes`),
    which share the bank with X at the start."""
    rows, cols, kslice = tile
    _check_tile(s, tile, out_cols, out_bits == 8)
    k = s.d_model // kslice
    p = gemm_params(tile, s.d_model, out_bits)
    compute = gemm_proj.cascade_cycles(p)
    # a tile: each kernel's x buffer (its own K-slice stream: the longest), the last kernel's output (out_share
    # cascades merge onto one output PLIO, within the compute: out_share)
    io = {"x_in": _io_cycles(rows * max(p.slices)), "out": _io_cycles(rows * cols * out_bits // 8)}
    chain = max(compute, *io.values())
    dealt = deal_projection(out_cols // cols, s.batch, n)
    unit = math.ceil(s.seq / rows) * chain / DEVICE["aie_clock_hz"]
    per = max(len(u) for u in dealt)
    loads = [weight_loads(u) for u in dealt]
    # the reloads (a block after a cascade's first) come through the one weight mover while the stage runs, and
    # through their w PLIO (shared by w_share cascades): the busiest cascade's units take at least their share of
    # that DDR time and of the busiest w PLIO's
    reloads = [x - bool(x) for x in loads]
    w_s = w_link_seconds(s, tile)
    w_groups = share_groups(n, w_share)
    unit = max(unit, sum(reloads) * cols * s.d_model / DEVICE["ddr_bytes_per_s"] / per,
               max(sum(reloads[c] for c in g) for g in w_groups) * w_s / per)
    # a switch's block comes in while the cascade runs its unit before (its w buffer's other half) and may queue
    # behind a block of every other reloading cascade of its w PLIO: the unit after a switch waits for what of
    # that does not fit in one unit
    items = [[(b, unit) for _, b in u] for u in dealt]
    if first_reloads is not None:
        # the first stage's first reloads, asked for at the start: read from DDR in cascade order beside X, then
        # each through its w PLIO; a cascade's first switch waits for its block
        queued, link_free = 0.0, [0.0] * len(w_groups)
        for c, u in enumerate(dealt):
            if not reloads[c]:
                continue
            queued += cols * s.d_model
            g = c // w_share
            link_free[g] = max(_shared_bank(queued, s.tokens * s.d_model), link_free[g]) + w_s
            i = next(i for i in range(1, len(u)) if u[i][0] != u[i - 1][0])
            reach = max(_x_in(s, u[i][1], first_reloads), _x_in(s, u[0][1], first_reloads) + i * unit)
            if link_free[g] > reach:
                items[c][i] = (items[c][i][0], items[c][i][1] + link_free[g] - reach)
    for g in w_groups:
        wait = sum(1 for c in g if reloads[c]) * w_s - unit
        for c in g if wait > 0 else ():
            for i in range(1, len(dealt[c])):
                if dealt[c][i][0] != dealt[c][i - 1][0]:
                    items[c][i] = (items[c][i][0], max(items[c][i][1], unit + wait))
    # the cascades of a broadcast group take their x tiles together: a unit takes as long on all of them as on the
    # slowest
    for g in broadcast_groups(dealt):
        for i in range(len(dealt[g[0]])):
            longest = max(items[c][i][1] for c in g)
            for c in g:
                items[c][i] = (items[c][i][0], longest)
    busiest = max(sum(x for _, x in it) for it in items)
    memory = p.data_bytes()
    return {"seconds": busiest, "kernels": n * k,
            "chain_cycles": chain, "compute_cycles": compute, "io_cycles": io, "units_busiest": per,
            "weight_bytes": sum(loads) * cols * s.d_model, "first_weight_bytes": sum(map(bool, loads)) * cols
            * s.d_model, "prefetch": [(any(reloads[c] for c in g), sum(bool(loads[c]) for c in g) * w_s)
                                       for g in w_groups],
            "w_share": w_share, "out_share": out_share(p), "kernel_memory_bytes": memory,
            "efficiency": rows * cols * kslice / (chain * PEAK_MACS_PER_CYCLE),
            "work": _by_sequence(items, s.batch),
            # a tile's latency (its x in, compute, its output out) beyond the tile interval: when a sequence's
            # last tile is through after its last interval
            "fill_seconds": 0.0, "tail_seconds": (io["x_in"] + compute + io["out"] - chain) / DEVICE["aie_clock_hz"]}


def attention_memory(q_rows: int, sk: int, d: int) -> int:
    """Largest data memory of an attention kernel (bytes): its ping-pong buffers and state as the kernels declare
    them (:func:`vckattn.hw.spec.functional.kernel_memory`, = the C++ ``sizeof``; int8 scores)."""
    from vckattn.hw.spec.functional import EngineParams, kernel_memory

    return max(kernel_memory(EngineParams(pipelines=1, kernels=1, score_plios=1, q_rows=q_rows, d=d, max_keys=sk,
                                          score_bits=8, lanes=1)).values())


def attention_geometry(s: SublayerShape, sp: SublayerSplit) -> engine.Geometry:
    """The attention pipelines of split ``sp`` as an engine :class:`~.engine.Geometry`: ``n_att`` pipelines of
    ``kq`` + ``kq`` kernels, ``sp.channels`` score channels with a :data:`LANES`-lane normalizer each, int8 scores,
    the build's keys = ``seq``, causal for a decoder, ``kv_heads`` K/V heads."""
    if sp.normalizer not in NORMALIZERS:
        raise ValueError(f"normalizer must be one of {NORMALIZERS}, got {sp.normalizer!r}")
    if sp.kq % sp.channels:
        raise ValueError(f"score_channels {sp.channels} must divide kq {sp.kq}")
    if s.seq % sp.kq or (s.seq // sp.kq) % 16:
        raise ValueError(f"seq {s.seq} must split into {sp.kq} slices of a multiple of 16 keys")
    return engine.Geometry(pipelines=sp.n_att, k=sp.kq, m=sp.channels, q_rows=sp.q_rows, d=engine.build_d(s.head_dim),
                           keys=s.seq, sk=s.seq // sp.kq, score_bits=8, lanes=LANES, f_aie=DEVICE["aie_clock_hz"],
                           f_pl=DEVICE["pl_clock_hz"], seq=s.seq, heads=s.heads, kv_heads=s.n_kv, batch=s.batch,
                           causal=s.decoder, normalizer=sp.normalizer)


def _attention(s: SublayerShape, sp: SublayerSplit) -> dict[str, Any]:
    return _attention_of(s, sp.n_att, sp.kq, sp.q_rows, sp.normalizer, sp.channels)


@functools.cache
def _attention_of(s: SublayerShape, n_att: int, kq: int, q_rows: int, normalizer: str,
                  channels: int) -> dict[str, Any]:
    sp = SublayerSplit(0, 0, n_att, kq, q_rows=q_rows, normalizer=normalizer, score_channels=channels)
    g = attention_geometry(s, sp)
    sk = g.sk
    compute = _tile_cycles(sp.kq, sp.q_rows, sk, s.head_dim)
    f = DEVICE["aie_clock_hz"]
    if s.decoder:  # causal: the diagonal slices' QKᵀ kernels apply the mask (engine_aie's masked variant)
        compute = max(compute, engine.kernel_seconds(g, "qk", True) * f)
    # a tile of a pipeline: Q in; its score channels (scores out through the normalizer, P back: the engine model's
    # costing of either normalizer, engine.tile_costs); A out
    io = {"q_in": _io_cycles(sp.q_rows * s.head_dim), "scores": engine.tile_costs(g, 0).channel * f,
          "a_out": _io_cycles(sp.q_rows * s.head_dim)}
    tile = max(compute, *io.values())
    dealt = engine.deal(g.groups, sp.n_att)
    group = g.tiles_per_group * tile / f
    tiles = max(len(x) for x in dealt) * g.tiles_per_group  # the busiest pipeline
    return {"seconds": tiles * tile / f, "kernels": (2 * sp.kq + 1) * sp.n_att,
            "tile_cycles": tile,
            "compute_cycles": compute, "io_cycles": io,
            "kernel_memory_bytes": attention_memory(sp.q_rows, sk, s.head_dim),
            "efficiency": sp.q_rows * sk * s.head_dim / (tile * PEAK_MACS_PER_CYCLE),
            "work": _by_sequence([[(grp // s.heads, group) for grp in x] for x in dealt], s.batch),
            # a group that waits for its sequence: its K and V slices come in first; a tile's latency (Q in, QKᵀ,
            # its channel, P·V, the requantizer, A out) beyond the tile interval
            "fill_seconds": engine.kv_seconds(g),
            "tail_seconds": _latency(engine.tile_costs(g, 0)) - tile / f}


#: bytes a second one bank of a PL buffer gives its read port: one 128-bit beat a PL cycle (hw/pl/slot_buffer.py),
#: shared beat by beat among the readers wired to the bank (its round-robin arbiter)
BANK_BYTES_PER_S = banks.BEAT_BITS // 8 * DEVICE["pl_clock_hz"]


def qkv_bank_seconds(s: SublayerShape, sp: SublayerSplit, qkv_ready: list[float],
                     window: float) -> tuple[float, float]:
    """What the Q/K/V buffer's banks (:func:`qkv_layout`, :data:`~.banks.BANK_BEATS` beats a bank,
    :data:`BANK_BYTES_PER_S` each) cost the attention pipelines, in seconds: ``(kv_fill, wave_reads)``.

    The groups that start together share the banks: the i-th group dealt to every pipeline (:func:`.engine.deal`, a
    wave) of the sequences the Q/K/V stage hands over within ``window`` seconds of the wave's first (``qkv_ready``:
    when each sequence is handed over; ``window``: a group's time through its pipeline with no wait). Each such
    group reads its Q (``seq × d`` bytes), K and V from the banks the layout puts them in, and the readers on one
    bank share its one beat a cycle. ``kv_fill``: the longest any bank takes to give such groups their K and V (the
    fill before their first tile); ``wave_reads``: the longest any bank takes to give them all they read (Q tiles
    stream in while K and V come in, so this bounds the fill and the tiles together). The worst of each. A split
    whose concurrent groups each have banks of their own costs no more than its links."""
    lay = qkv_layout(s, sp)
    bb, beat = banks.BANK_BEATS, banks.BEAT_BITS // 8

    def spread(first: int, into: dict[int, int]) -> None:
        """Adds the head block of beats ``first .. first + head_beats - 1`` to ``into`` bank by bank."""
        lo, hi = first, first + lay.head_beats
        while lo < hi:
            end = min(hi, (lo // bb + 1) * bb)
            into[lo // bb] = into.get(lo // bb, 0) + end - lo
            lo = end

    waves: dict[int, list[int]] = {}
    dealt = engine.deal(s.batch * s.heads, sp.n_att)
    for x in dealt:
        for i, grp in enumerate(x):
            waves.setdefault(i, []).append(grp)
    # per wave, its groups whose sequences are handed over within ``window`` of the first (its first key): they
    # read together; and with them, for the fill, the next wave's groups handed over by then (each pipeline takes
    # its next group's K and V into the other half of its buffers as soon as they are there)
    together: list[tuple[int, float, list[int]]] = []  # (wave, its first hand-over, its groups)
    for i in sorted(waves):
        by_seq: dict[int, list[int]] = {}
        for grp in waves[i]:
            by_seq.setdefault(grp // s.heads, []).append(grp)
        first = None
        for b in sorted(by_seq, key=lambda b: qkv_ready[b]):
            if first is None or qkv_ready[b] - first > window:
                first = qkv_ready[b]
                together.append((i, first, []))
            together[-1][2].extend(by_seq[b])
    kv_fill = reads = 0.0
    for i, first, groups in together:
        nxt = [x[i + 1] for x in dealt if i + 1 < len(x) and qkv_ready[x[i + 1] // s.heads] <= first + window]
        kv: dict[int, int] = {}
        q: dict[int, int] = {}
        for grp in groups:
            b, h = divmod(grp, s.heads)
            spread(lay.head_block("q", b, h), q)
            spread(lay.head_block("k", b, h), kv)
            spread(lay.head_block("v", b, h), kv)
        every = {k: q.get(k, 0) + kv.get(k, 0) for k in q.keys() | kv.keys()}
        for grp in nxt:
            b, h = divmod(grp, s.heads)
            spread(lay.head_block("k", b, h), kv)
            spread(lay.head_block("v", b, h), kv)
        kv_fill = max(kv_fill, max(kv.values()) * beat / BANK_BYTES_PER_S)
        reads = max(reads, max(every.values()) * beat / BANK_BYTES_PER_S)
    return kv_fill, reads


def _bank_charged(s: SublayerShape, sp: SublayerSplit, att: dict[str, Any], qkv_ready: list[float]) -> dict[str, Any]:
    """The attention stage ``att`` (:func:`_attention`) with the Q/K/V banks charged (:func:`qkv_bank_seconds`): a
    group's K and V come in no faster than their banks give them, its tiles end no sooner than the reads of the
    busiest bank it shares plus the last tile, and a pipeline starts a group no more often than that bank gives a
    wave all it reads."""
    g = attention_geometry(s, sp)
    tile = att["tile_cycles"] / DEVICE["aie_clock_hz"]
    alone = g.tiles_per_group * tile
    kv_fill, reads = qkv_bank_seconds(s, sp, qkv_ready, att["fill_seconds"] + alone)
    # a pipeline waiting for a sequence: its group's K and V, then its tiles, or all the wave reads and the last
    # tile; one busy with the wave before: the next group's K, V and Q come in while it works, one wave's reads
    # at a time (the waves follow each other through the bank)
    group = max(alone, reads)
    fill = max(max(att["fill_seconds"], kv_fill) + alone, reads + tile) - group
    dealt = engine.deal(g.groups, sp.n_att)
    return {**att, "seconds": max(len(x) for x in dealt) * group, "fill_seconds": fill,
            "bank_seconds": {"kv_fill": kv_fill, "wave_reads": reads},
            "work": _by_sequence([[(grp // s.heads, group) for grp in x] for x in dealt], s.batch)}


def _by_sequence(work: list[list[tuple[int, float]]], batch: int) -> tuple[tuple[tuple[int, float], ...], ...]:
    """Per sequence, the (instance, seconds) of every instance with work on it, from each instance's (sequence,
    seconds) items in run order (an instance runs its items of a sequence back to back, sequences in order)."""
    out: list[dict[int, float]] = [{} for _ in range(batch)]
    for c, items in enumerate(work):
        prev = -1
        for b, secs in items:
            if b < prev:
                raise ValueError("an instance's items must come in sequence order")
            prev = b
            out[b][c] = out[b].get(c, 0.0) + secs
    return tuple(tuple(d.items()) for d in out)


def _latency(c: engine.TileCosts) -> float:
    """Seconds from a tile's first Q beat to its A record out of an attention pipeline with no wait."""
    return c.q_in + c.qk + c.channel + c.pv + c.rq + c.o_out


def schedule(batch: int, stages: list[dict[str, Any]], start: list[float] | None = None,
             refill: float | None = None) -> dict[str, Any]:
    """When each sequence leaves each stage (seconds from the launch's start), the stages handing over whole
    sequences (module docstring). ``stages`` in order, each with ``"work"`` (per sequence, the (instance, seconds)
    of every instance's work on it, a whole number of tile intervals: :func:`_by_sequence`), ``"fill_seconds"``
    (what an instance waiting for a sequence needs after the hand-off before its first tile) and ``"tail_seconds"``
    (a tile's latency through the stage beyond its interval). An instance starts its items of sequence b after its
    previous item, after the stage before has handed over b (plus the fill), and after the stage after has freed
    the slot of sequence ``b - SEQUENCE_SLOTS`` (the first stage after ``start[b]``, when its input is in; with
    ``refill``, its input too is held in :data:`SEQUENCE_SLOTS` slots: sequence b's comes in, ``refill`` seconds,
    after the one before it and once the first stage has handed over ``b - SEQUENCE_SLOTS``). Returns
    ``"ready"``: per stage, per sequence, when its last tile of the sequence is out (its last item's end plus the
    tail); ``"end"``: the last; ``"input"``: when each sequence's input is in."""
    start = start or [0.0] * batch
    ready = [[0.0] * batch for _ in stages]
    ends: list[dict[int, float]] = [{} for _ in stages]
    arrived, inputs = 0.0, [0.0] * batch
    for b in range(batch):
        for i, st in enumerate(stages):
            t_in = start[b] if i == 0 else ready[i - 1][b] + st["fill_seconds"]
            if i == 0 and refill is not None and b >= SEQUENCE_SLOTS:
                t_in = max(t_in, max(arrived, ready[0][b - SEQUENCE_SLOTS]) + refill)
            if i == 0:
                arrived = inputs[b] = t_in
            if i + 1 < len(stages) and b >= SEQUENCE_SLOTS:
                t_in = max(t_in, ready[i + 1][b - SEQUENCE_SLOTS])
            last, end_of = t_in, ends[i]
            for c, secs in st["work"][b]:
                e = end_of.get(c, 0.0)
                e = (e if e > t_in else t_in) + secs
                end_of[c] = e
                if e > last:
                    last = e
            ready[i][b] = last + st["tail_seconds"]
    return {"ready": ready, "end": ready[-1][-1], "input": inputs}


def rope_lanes(s: SublayerShape, sp: SublayerSplit) -> int:
    """Lanes of a Q/K/V output PLIO's RoPE unit (``hw/pl/rope_records.py``): the fewest (a power of two, whole beats
    of a half row, at most a 128-bit beat's 16) that take the ``rows × cols`` int8 outputs of the PLIO's merged
    cascades (:func:`plios` ``out_share``) within a cascade's tile interval (``chain_cycles`` AIE cycles at the PL
    clock), so that the unit never slows them."""
    rows, cols, _ = sp.qkv_tile
    chain = _cascade(s, sp.qkv_tile, sp.n_qkv, s.qkv_cols, 8, sp.w_share)["chain_cycles"]
    merged = plios(s, sp)["qkv"]["out_share"]
    need = merged * rows * cols / (chain * DEVICE["pl_clock_hz"] / DEVICE["aie_clock_hz"])
    lanes = 1
    while lanes < min(need, 16):
        lanes *= 2
    if s.head_dim % (2 * lanes):
        raise ValueError(f"a RoPE unit of {lanes} lanes does not divide head_dim {s.head_dim} into whole beats")
    return lanes


def pl_units(s: SublayerShape, sp: SublayerSplit, rope: bool | None = None) -> dict[str, Any]:
    """The sublayer's PL units at its throughput, MODELED: each unit's LUT/FF/DSP/BRAM/URAM from its Yosys fit
    (:func:`.pl.resources`, UltraScale+ cells as a proxy for the Versal PL) times the units needed to keep pace
    with the AIE stages' output PLIOs (128 bits a PL cycle):

    * ``residual``: one unit a W_O cascade, ``lanes`` = the int32 accumulators a PLIO beat carries (4);
    * ``requant``: none: the GEMM's last cascade kernel requantizes Q/K/V and the attention pipelines'
      requantizer kernel A (on the AIE);
    * ``bhyt_exact`` (a decoder sublayer): BHyT site A on X (its statistic computed on chip), :func:`site_units`
      units of :data:`SITE_LANES` lanes reading X from the X buffer and writing U into its slots (:func:`buffers`);
    * ``rope`` (``rope=True``, default: a decoder sublayer; Q and K rotated on their way out of the Q/K/V cascades,
      ``hw/pl/rope_records.py``): one unit a Q/K/V output PLIO of :func:`rope_lanes` lanes (its cascades' average
      output rate, not the PLIO's peak: the unit backpressures the out buffers' drain, within the tile interval),
      each with its own table of the sequence's ``seq`` positions of ``head_dim`` 64: the unit as built, its
      wrapper and table included, from its Yosys fit (:func:`.banks.rope_records_cost`).

    Returns ``{"units": {name: {"count", "lanes", <resource>: total}}, "total": {<resource>: ...},
    "fraction": {<resource>: total / the device's PL}}`` (resources: ``lut, ff, dsp, bram, uram``)."""
    from . import pl
    from .model import load_device

    dev = load_device("vck5000").pl
    keys = ("lut", "ff", "dsp", "bram", "uram")
    rope = s.decoder if rope is None else rope
    plan = {"residual": (sp.n_o, DEVICE["plio_bytes"] // 4), "requant": (0, 1),
            "rope": (plios(s, sp)["qkv"]["out"], rope_lanes(s, sp)) if rope else (0, 1),
            "bhyt_exact": (site_units(s, sp), SITE_LANES) if s.decoder else (0, 1)}
    units = {}
    for name, (count, lanes) in plan.items():
        r = pl.resources(name, lanes)
        units[name] = {"count": count, "lanes": lanes, **{k: count * r[k] for k in keys}}
        if name == "rope":  # the unit as built, its table of the sequence's positions
            rr = banks.rope_records_cost(lanes, s.seq)
            units[name].update({k: count * rr[k] for k in rr})
    total = {k: sum(u[k] for u in units.values()) for k in keys}
    return {"units": units, "total": total, "fraction": {k: total[k] / dev[k] for k in keys}}


#: cascades a w PLIO may serve (:attr:`SublayerSplit.w_share`), the fewest that fit the PLIOs chosen
W_SHARES = (1, 2, 4, 8)
#: the fraction of every resource of the device a split may use (the AIE tiles: ``tile_cap``, this by default)
RESOURCE_CAP = 0.8
#: the resources a split uses and is checked on (each within :data:`RESOURCE_CAP` of the device's, the AIE tiles
#: within ``tile_cap``: :func:`resources`)
RESOURCES = ("aie_tiles", "plio_in", "plio_out", "lut", "ff", "dsp", "bram", "uram")
#: bits a stream into or out of a PL buffer moves a PL cycle: one 128-bit PLIO beat
STREAM_BITS = 8 * engine.PLIO_BEAT_BYTES


@functools.cache
def available() -> dict[str, float]:
    """The VCK5000's limits of every :data:`RESOURCES` entry (``hw/perf/device.json``: 400 AIE tiles; 156 in and
    117 out usable 128-bit PLIOs, CHARM's CDSE; the PL less the shell: 880K LUT, 1.76M FF, 1,968 DSP58, 867
    BRAM36, 420 URAM) and the memory blocks' bits and port widths (URAM288 4K × 72, BRAM36 512 × 72, AM007)."""
    from .model import Design, device_data, load_device, resources_available

    dev = load_device("vck5000")
    avail = resources_available(Design(plio_bits=engine.PLIO_BEAT_BYTES * 8), dev)
    raw = device_data()["devices"]["vck5000"]
    return {**{k: avail[k] for k in RESOURCES}, "uram_bits": dev.uram_bits, "uram_width_bits": dev.uram_width_bits,
            "bram_bits": raw["bram_bits"]["value"], "bram_width_bits": raw["bram_width_bits"]["value"]}


def broadcast_groups(dealt: list[list[tuple[int, int]]]) -> list[list[int]]:
    """The cascades of a projection stage that share x streams (:func:`deal_projection`'s dealing): those that run
    the same sequences in the same order, as many units of each, so that they take the same x tiles in lock-step.
    A group has one x stream per K-slice, broadcast by the AIE stream switch to its cascades' kernels of that
    K-slice (as the engine broadcasts q_in to its QKᵀ kernels); cascades in different places of the sequences need
    their own streams."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for c, units in enumerate(dealt):
        if units:
            groups.setdefault(tuple(b for _, b in units), []).append(c)
    return list(groups.values())


@functools.cache
def _stage_streams(s: SublayerShape, tile: tuple[int, int, int], n: int, out_cols: int, out_bits: int,
                   w_share: int) -> dict[str, int]:
    """A projection stage's 128-bit PLIOs: ``x`` one a K-slice a broadcast group (:func:`broadcast_groups`),
    ``w`` one a ``w_share`` cascades (their weight blocks, packet-split to their kernels as the engine's k_in
    splits K), ``out`` one a :func:`out_share` cascades (their last kernels' output buffers, packet-merged);
    ``cascades``: those with work, ``groups``: broadcast groups."""
    dealt = deal_projection(out_cols // tile[1], s.batch, n)
    groups = len(broadcast_groups(dealt))

    def used(share: int) -> int:
        return sum(1 for g in share_groups(n, share) if any(dealt[c] for c in g))

    merge = out_share(gemm_params(tile, s.d_model, out_bits))
    return {"x": s.d_model // tile[2] * groups, "w": used(w_share), "out": used(merge),
            "cascades": sum(1 for u in dealt if u), "groups": groups, "w_share": w_share, "out_share": merge}


def attention_design(s: SublayerShape, sp: SublayerSplit) -> tuple[Any, Any]:
    """The attention pipelines of split ``sp`` as the engine model's workload and design (operands on chip)."""
    from .model import Design, Workload

    g = attention_geometry(s, sp)
    w = Workload(heads=s.heads, d_head=s.head_dim, seq=s.seq, batch=s.batch, layers=(sp.normalizer,),
                 kv_heads=s.n_kv, operands="on_chip", causal=s.decoder)
    lanes = {"lanes_swiftmax": LANES if sp.normalizer == "swiftmax" else 0,
             "lanes_online_softmax": LANES if sp.normalizer == "online_softmax" else 0}
    d = Design(pipelines=sp.n_att, qk_kernels=sp.kq, pv_kernels=sp.kq, q_rows=sp.q_rows, score_bits=8,
               score_plios=sp.channels, swiftmax_products=sp.swiftmax_products, pl_clock_mhz=g.f_pl / 1e6, o_bits=8,
               max_seq=g.keys, head_dim=g.d, **lanes)
    return w, d


def _attention_resources(s: SublayerShape, sp: SublayerSplit) -> dict[str, float]:
    """The attention pipelines' resources as the engine model counts them (:func:`.engine.resources`): AIE tiles,
    PLIOs (q_in, k_in, v_in and a p_in a channel in; an s_out a channel and o_out out), the score channels'
    normalizer instances (their Yosys fits, SwiftMax's products in LUTs or DSPs; online softmax's row-assembly
    buffers in URAM) and each pipeline's A writer into the A buffer, without AXI4 master ports (its q, k and v
    readers are costed with the buffers: :func:`buffer_logic`)."""
    return _attention_resources_of(s, SublayerSplit(0, 0, sp.n_att, sp.kq, q_rows=sp.q_rows, normalizer=sp.normalizer,
                                                    score_channels=sp.channels,
                                                    swiftmax_products=sp.swiftmax_products))


@functools.cache
def _attention_resources_of(s: SublayerShape, sp: SublayerSplit) -> dict[str, float]:
    from .model import kernel_fit, load_device

    w, d = attention_design(s, sp)
    return engine.resources(w, d, load_device("vck5000"), (sp.normalizer,), kernel_fit, ddr_ports=False)


@functools.cache
def _attention_plios(n_att: int, channels: int) -> dict[str, int]:
    from .model import Design

    return engine.plios(Design(pipelines=n_att, qk_kernels=channels, pv_kernels=channels, score_plios=channels))


def plios(s: SublayerShape, sp: SublayerSplit) -> dict[str, Any]:
    """128-bit PLIOs of split ``sp``, in (PL → AIE) and out: each projection stage's x streams (one a K-slice a
    broadcast group), w streams and output PLIOs (:func:`_stage_streams`), the attention pipelines' as the engine
    counts them (:func:`.engine.plios`)."""
    qkv = _stage_streams(s, sp.qkv_tile, sp.n_qkv, s.qkv_cols, 8, sp.w_share)
    o = _stage_streams(s, sp.o_tile, sp.n_o, s.d_model, 32, sp.w_share)
    att = _attention_plios(sp.n_att, sp.channels)
    return {"qkv": qkv, "o": o, "attention": att, "in": qkv["x"] + qkv["w"] + o["x"] + o["w"] + att["in"],
            "out": qkv["out"] + o["out"] + att["out"]}


def _block_channels(s: SublayerShape, n: int, cols: int, out_cols: int) -> list[list[tuple[int, int]]]:
    """Per cascade of a projection stage (``n`` cascades of ``cols`` channels a block), the channel ranges of the
    blocks dealt to it (:func:`deal_projection`)."""
    dealt = deal_projection(out_cols // cols, s.batch, n)
    return [sorted({(blk * cols, (blk + 1) * cols) for blk, _ in u}) for u in dealt]


def qkv_layout(s: SublayerShape, sp: SublayerSplit, bank_beats: int = banks.BANK_BEATS) -> Any:
    """The Q/K/V buffer's layout for split ``sp`` (:class:`~vckattn.hw.spec.qkv_buffer.QkvLayout`:
    :data:`SEQUENCE_SLOTS` sequences, the pipelines' Q tiles and key slices; a head block's slots dealt to the banks
    of ``bank_beats`` it spans, as many as divide the slots)."""
    from vckattn.hw.spec.qkv_buffer import QkvLayout

    lay = QkvLayout(s.head_dim, s.heads, s.n_kv, s.seq, sp.q_rows, s.seq // sp.kq, SEQUENCE_SLOTS)
    spans = lay.head_stride // bank_beats if lay.head_stride % bank_beats == 0 else 1
    interleave = max(n for n in range(1, SEQUENCE_SLOTS + 1) if SEQUENCE_SLOTS % n == 0 and n & (n - 1) == 0
                     and n <= spans)
    return replace(lay, interleave=interleave)


def qkv_buffer(s: SublayerShape, sp: SublayerSplit, bank_beats: int = banks.BANK_BEATS) -> banks.BankedBuffer:
    """The Q/K/V buffer as built (:func:`qkv_layout`, banks of ``bank_beats``): one re-tiler an output PLIO of the
    Q/K/V stage (:func:`share_groups` of :func:`out_share` cascades), wired to the banks of the heads of its
    cascades' blocks in every slot; per attention pipeline (in order) its q, k and v readers, wired to the banks of
    the heads of the groups dealt to it (:func:`.engine.deal`)."""
    lay = qkv_layout(s, sp, bank_beats)
    bb = bank_beats

    def head_banks(first: int) -> frozenset[int]:
        return frozenset(range(first // bb, (first + lay.head_beats - 1) // bb + 1))

    def channel_banks(lo: int, hi: int) -> frozenset[int]:
        """Every slot's banks of the heads of Q/K/V channels ``lo .. hi - 1``."""
        got: set[int] = set()
        for head in range(lo // s.head_dim, (hi - 1) // s.head_dim + 1):
            base = head * lay.head_stride  # Q heads, then K, then V, each block its slots: the layout's order
            for slot in range(SEQUENCE_SLOTS):
                got |= head_banks(base + lay.place(slot) * lay.head_beats)
        return frozenset(got)

    channels = _block_channels(s, sp.n_qkv, sp.qkv_tile[1], s.qkv_cols)
    merge = plios(s, sp)["qkv"]["out_share"]
    writers = [frozenset().union(*(channel_banks(lo, hi) for c in grp for lo, hi in channels[c]))
               for grp in share_groups(sp.n_qkv, merge) if any(channels[c] for c in grp)]
    g = attention_geometry(s, sp)
    readers: list[frozenset[int]] = []
    for dealt in engine.deal(g.groups, sp.n_att):
        heads = sorted({grp % s.heads for grp in dealt})
        slots = sorted({(grp // s.heads) % SEQUENCE_SLOTS for grp in dealt})
        for kind in ("q", "k", "v"):
            readers.append(frozenset().union(*(head_banks(lay.head_block(kind, b, h)) for h in heads for b in slots)))
    return banks.BankedBuffer("qkv", lay.beats, tuple(writers), tuple(readers), bb)


@functools.cache
def banked_buffers(s: SublayerShape, sp: SublayerSplit) -> dict[str, banks.BankedBuffer]:
    """The PL buffers between the stages as the PL top builds them (``hw/ENGINE.md``, "The sublayer's PL side";
    :class:`.banks.BankedBuffer`): their beats in banks of :data:`.banks.BANK_BEATS`, each write stream and read
    port wired to the banks the schedule makes it touch:

    * ``x``: all of X (``x_on_chip``) or :data:`SEQUENCE_SLOTS` sequences, one region a K-slice of the Q/K/V stage
      (its rows' features of the slice in the A layout, from a bank boundary). Written by the X mover (every bank);
      read by the Q/K/V stage's x readers (one a K-slice a broadcast group: its region; an encoder's), the residual
      paths with ``x_on_chip`` (one a W_O cascade: the regions of its blocks' channels) and the decoder's site
      units (every bank);
    * ``u`` (a decoder): :data:`SEQUENCE_SLOTS` sequences of U in the same regions, written by the site units
      (every bank), read by the Q/K/V stage's x readers;
    * ``qkv``: :class:`~vckattn.hw.spec.qkv_buffer.QkvLayout`'s :data:`SEQUENCE_SLOTS` slots. Written by one
      re-tiler an output PLIO (the banks of the heads of its cascades' blocks, in every slot); read by each
      pipeline's q, k and v readers (the banks of the heads of the groups dealt to it, :func:`.engine.deal`);
    * ``a``: :data:`SEQUENCE_SLOTS` sequences of A, one region a K-slice of the W_O stage. Written by every
      pipeline's A writer (the regions of its heads' channels); read by the W_O stage's x readers."""
    out = x_buffers(s, sp)
    out["qkv"] = qkv_buffer(s, sp)
    out["a"] = a_buffer(s, sp)
    return out


def x_layout(s: SublayerShape, sp: SublayerSplit, bank_beats: int = banks.BANK_BEATS, slots: int | None = None) -> Any:
    """The X (or U) buffer's layout for split ``sp`` (:class:`~vckattn.hw.spec.slice_buffer.SliceLayout`: one region
    a K-slice of the Q/K/V stage, its x blocks of ``qkv_tile`` rows): ``slots`` sequences, by default all of X with
    ``x_on_chip`` (one slot a sequence), else :data:`SEQUENCE_SLOTS`."""
    from vckattn.hw.spec.slice_buffer import SliceLayout

    if slots is None:
        slots = s.batch if sp.x_on_chip else min(s.batch, SEQUENCE_SLOTS)
    return SliceLayout(gemm_params(sp.qkv_tile, s.d_model, 8).slices, sp.qkv_tile[0], s.seq, slots, bank_beats)


def x_buffers(s: SublayerShape, sp: SublayerSplit, bank_beats: int = banks.BANK_BEATS) -> dict[str, banks.BankedBuffer]:
    """The X buffer (and a decoder's U buffer) as built (:func:`x_layout`). X: written by the X writer (every
    bank); read by the Q/K/V stage's x readers (an encoder's; one a K-slice a broadcast group, each its region),
    the residual paths with ``x_on_chip`` (one a W_O cascade, the regions of its blocks' channels) and a decoder's
    site units (every bank). U (a decoder): :data:`SEQUENCE_SLOTS` sequences, written by the site units (every
    bank), read by the x readers."""
    lay = x_layout(s, sp, bank_beats)
    every = frozenset(range(lay.banks))
    residual = [] if not sp.x_on_chip else [
        frozenset(b for j in sorted({lay.slice_of(f) for lo, hi in ch for f in range(lo, hi, 16)})
                  for b in lay.region_banks(j))
        for ch in _block_channels(s, sp.n_o, sp.o_tile[1], s.d_model) if ch]
    groups = plios(s, sp)["qkv"]["groups"]

    def x_readers(lo: Any) -> list[frozenset[int]]:
        return [frozenset(lo.region_banks(j)) for _ in range(groups) for j in range(len(lo.slices))]

    if not s.decoder:
        return {"x": banks.BankedBuffer("x", lay.beats, (every,), tuple(x_readers(lay) + residual), bank_beats)}
    sites = [every] * site_units(s, sp)
    u = x_layout(s, sp, bank_beats, min(s.batch, SEQUENCE_SLOTS))
    every_u = frozenset(range(u.banks))
    return {"x": banks.BankedBuffer("x", lay.beats, (every,), tuple(sites + residual), bank_beats),
            "u": banks.BankedBuffer("u", u.beats, tuple([every_u] * len(sites)), tuple(x_readers(u)), bank_beats)}


def a_layout(s: SublayerShape, sp: SublayerSplit, bank_beats: int = banks.BANK_BEATS) -> Any:
    """The A buffer's layout for split ``sp`` (:class:`~vckattn.hw.spec.slice_buffer.SliceLayout`:
    :data:`SEQUENCE_SLOTS` sequences, one region a K-slice of the W_O stage, its x blocks of ``o_tile`` rows)."""
    from vckattn.hw.spec.slice_buffer import SliceLayout

    return SliceLayout(gemm_params(sp.o_tile, s.d_model, 32).slices, sp.o_tile[0], s.seq, SEQUENCE_SLOTS, bank_beats)


def a_buffer(s: SublayerShape, sp: SublayerSplit, bank_beats: int = banks.BANK_BEATS) -> banks.BankedBuffer:
    """The A buffer as built (:func:`a_layout`): per attention pipeline (in order) its A writer, wired to the regions
    of the K-slices that hold its heads' channels (the heads of the groups dealt to it, :func:`.engine.deal`); per
    broadcast group of the W_O stage one reader a K-slice, wired to its region."""
    lay = a_layout(s, sp, bank_beats)
    g = attention_geometry(s, sp)
    writers = []
    for dealt in engine.deal(g.groups, sp.n_att):
        js = {lay.slice_of(h * s.head_dim + f) for h in {grp % s.heads for grp in dealt}
              for f in range(0, s.head_dim, 16)}
        writers.append(frozenset(b for j in js for b in lay.region_banks(j)))
    readers = [frozenset(lay.region_banks(j)) for _ in range(plios(s, sp)["o"]["groups"])
               for j in range(len(lay.slices))]
    return banks.BankedBuffer("a", lay.beats, tuple(writers), tuple(readers), bank_beats)


def buffers(s: SublayerShape, sp: SublayerSplit) -> dict[str, dict[str, Any]]:
    """The PL buffers between the stages as built (:func:`banked_buffers`): per buffer its data ``bytes`` (X: all
    of it with ``x_on_chip``, else :data:`SEQUENCE_SLOTS` sequences; U, Q/K/V and A: :data:`SEQUENCE_SLOTS`
    sequences), ``banks``, write streams and read ports (``writers``, ``readers``, ``streams`` both), the
    (writer, bank) and (bank, read port) wires, the memory blocks its banks take in URAM (``uram``) or BRAM
    (``bram``), and its logic (``lut``, ``ff``: the slot buffer's fit)."""
    slots_tokens = min(s.batch, SEQUENCE_SLOTS) * s.seq
    data = {"x": (s.tokens if sp.x_on_chip else slots_tokens) * s.d_model, "u": slots_tokens * s.d_model,
            "qkv": SEQUENCE_SLOTS * s.seq * s.qkv_cols, "a": SEQUENCE_SLOTS * s.seq * s.d_model}
    return {k: {"bytes": data[k], "banks": b.banks, "writers": len(b.writers), "readers": len(b.readers),
                "streams": len(b.writers) + len(b.readers), "write_pairs": b.write_pairs, "read_pairs": b.read_pairs,
                "uram": b.blocks("uram"), "bram": b.blocks("bram"), **b.logic()}
            for k, b in banked_buffers(s, sp).items()}


def buffer_logic(s: SublayerShape, sp: SublayerSplit) -> dict[str, float]:
    """LUT and FF of the buffers' parts, MODELED from their Yosys fits (``hw/perf/data/pl_buffers.json``): every
    buffer's arbiters, multiplexers and slot counters; a reader on every read port; a re-tiler on every Q/K/V
    output PLIO; a row unit on every residual path's reader (:func:`residual_paths`) and on every site unit's
    (ASSUMPTION: the row unit's fit, made on residual records of 1 to 4 blocks, taken to a token row's
    ``d_model / 16``; the site unit's tag FIFO and address adders are not counted)."""
    bufs = banked_buffers(s, sp)
    ports = sum(len(b.readers) for b in bufs.values())
    rt = banks.retiler_cost(sp.qkv_tile[1])
    rd = banks.reader_cost()
    xr = banks.x_rows_cost(sp.o_tile[1] // 16)
    xs = banks.x_rows_cost(s.d_model // 16)
    return {k: sum(b.logic()[k] for b in bufs.values()) + ports * rd[k] + len(bufs["qkv"].writers) * rt[k]
            + residual_paths(s, sp) * xr[k] + site_units(s, sp) * xs[k] for k in banks.KEYS}


def residual_paths(s: SublayerShape, sp: SublayerSplit) -> int:
    """Residual paths that read X from the X buffer (``hw/pl/buffer_path.py: x_path``): one a W_O cascade with
    output blocks, with ``x_on_chip``; none without (X comes in again from DDR)."""
    return sum(1 for ch in _block_channels(s, sp.n_o, sp.o_tile[1], s.d_model) if ch) if sp.x_on_chip else 0


def movers(s: SublayerShape, sp: SublayerSplit, io: dict[str, Any] | None = None) -> dict[str, int]:
    """The sublayer's HLS movers, in the parts of ``pl_infrastructure.json`` (ASSUMPTIONS there): three list movers
    (``hw/hls/mm2s_list.cpp``: the X mover, the weight mover and the descriptor mover) and an R writer
    (``hw/hls/s2mm_records.cpp``) on every W_O output; AXI4 master ports: two a list mover (its commands, its
    source) and one an R writer. The buffers' writers and readers are PL logic, costed with the buffers
    (:func:`buffer_logic`); the w streams are the w router's outputs (:func:`routers`)."""
    io = io or plios(s, sp)
    return {"mm2s_list": 3, "s2mm_records": io["o"]["out"], "axi_master": 2 * 3 + io["o"]["out"]}


def launch_runs(s: SublayerShape, sp: SublayerSplit, bank_beats: int = banks.BANK_BEATS
                ) -> dict[str, list[list[Any]]]:
    """Every buffer reader's runs (:class:`~vckattn.hw.spec.qkv_buffer.Run`) for a launch of ``s.batch``
    sequences, per buffer of :func:`banked_buffers` in its readers' order: an encoder's X buffer's x readers and
    residual readers; a decoder's X buffer's site readers (:func:`~vckattn.hw.spec.slice_buffer.site_runs`) and
    residual readers, and its U buffer's x readers; the q, k and v readers of every pipeline, the a readers."""
    from vckattn.hw.spec.qkv_buffer import reader_runs
    from vckattn.hw.spec.slice_buffer import residual_runs, site_runs, x_reader_runs

    units = deal_projection(s.qkv_cols // sp.qkv_tile[1], s.batch, sp.n_qkv)
    x_lay = x_layout(s, sp, bank_beats)
    u_lay = x_layout(s, sp, bank_beats, min(s.batch, SEQUENCE_SLOTS)) if s.decoder else x_lay
    x = x_reader_runs(u_lay, [units[grp[0]] for grp in broadcast_groups(units)], s.batch)
    rows, cols = sp.o_tile[:2]
    o_units = deal_projection(s.d_model // cols, s.batch, sp.n_o)
    res = residual_runs(x_lay, [u for u in o_units if u], s.batch, rows, cols) if sp.x_on_chip else []
    g = attention_geometry(s, sp)
    sites = site_runs(x_lay, site_units(s, sp), s.batch) if s.decoder else []
    out = {"x": [*sites, *res], "u": x} if s.decoder else {"x": [*x, *res]}
    out["qkv"] = reader_runs(qkv_layout(s, sp, bank_beats), engine.deal(g.groups, sp.n_att), s.batch)
    out["a"] = x_reader_runs(a_layout(s, sp, bank_beats), [o_units[grp[0]] for grp in broadcast_groups(o_units)],
                             s.batch)
    return out


def descriptor_fifos(s: SublayerShape, sp: SublayerSplit) -> list[int]:
    """The descriptor router's FIFO depths (beats), one a buffer reader in :func:`launch_runs`' order: two of the
    reader's largest sequences (:func:`vckattn.hw.spec.descriptors.descriptor_depths`), counted from the dealing
    without making the runs (the explorer costs thousands of splits; a test keeps the counts equal to
    :func:`launch_runs`')."""
    from vckattn.hw.spec.descriptors import fifo_depth as fifo

    units = deal_projection(s.qkv_cols // sp.qkv_tile[1], s.batch, sp.n_qkv)
    slices_x = len(gemm_params(sp.qkv_tile, s.d_model, 8).slices)
    tiles_x = s.seq // sp.qkv_tile[0]
    x = [fifo([tiles_x * sum(bb == b for _, bb in units[grp[0]]) for b in range(s.batch)])
         for grp in broadcast_groups(units) for _ in range(slices_x)]
    rows, cols = sp.o_tile[:2]
    o_units = deal_projection(s.d_model // cols, s.batch, sp.n_o)
    res = []
    if sp.x_on_chip:
        lay = x_layout(s, sp)
        reach = [len({lay.slice_of(f) for f in range(blk * cols, (blk + 1) * cols, 16)})
                 for blk in range(s.d_model // cols)]
        res = [fifo([s.seq // 4 * sum(reach[blk] for blk, bb in u if bb == b) for b in range(s.batch)])
               for u in o_units if u]
    q_lay, g = qkv_layout(s, sp), attention_geometry(s, sp)
    per_group = {"q": q_lay.max_seq // q_lay.q_rows, "k": q_lay.max_seq // q_lay.slice_keys,
                 "v": q_lay.max_seq // q_lay.slice_keys}
    qkv = [fifo([per_group[kind] * sum(grp // s.heads == b for grp in groups) for b in range(s.batch)])
           for groups in engine.deal(g.groups, sp.n_att) for kind in ("q", "k", "v")]
    tiles_a = s.seq // rows
    a = [fifo([tiles_a * sum(bb == b for _, bb in o_units[grp[0]]) for b in range(s.batch)])
         for grp in broadcast_groups(o_units) for _ in range(len(gemm_params(sp.o_tile, s.d_model, 32).slices))]
    n_site = site_units(s, sp)
    sites = [fifo([slices_x * len(range(u, s.seq // 4, n_site))] * s.batch) for u in range(n_site)]
    order = [*sites, *res, *x] if s.decoder else [*x, *res]
    return order + qkv + a


#: entries of each w router FIFO: the w streams take a block at a time into their kernels' buffers
W_ROUTER_DEPTH = 4


def routers(s: SublayerShape, sp: SublayerSplit, io: dict[str, Any] | None = None) -> dict[str, float]:
    """LUT, FF and BRAM of the stream routers (``hw/pl/stream_router.py``; their Yosys fit,
    :func:`.banks.router_cost`): the descriptor router (a FIFO a buffer reader, :func:`descriptor_fifos`) and the w
    router (a FIFO of :data:`W_ROUTER_DEPTH` a w stream of the Q/K/V and W_O stages)."""
    io = io or plios(s, sp)
    d = banks.router_cost(descriptor_fifos(s, sp))
    w = banks.router_cost([W_ROUTER_DEPTH] * (io["qkv"]["w"] + io["o"]["w"]))
    return {k: d[k] + w[k] for k in ("lut", "ff", "bram")}


def resources(s: SublayerShape, sp: SublayerSplit, rope: bool | None = None,
              limits: tuple[tuple[str, float], ...] = ()) -> dict[str, Any]:
    """Every resource split ``sp`` uses (:data:`RESOURCES`) against the device's (:func:`available`, or
    ``limits`` in its place), MODELED:

    * ``aie_tiles``: every kernel on its own tile (the Q/K/V and W_O cascades' kernels, the pipelines' ``2·kq + 1``);
    * ``plio_in`` / ``plio_out``: :func:`plios`;
    * the PL: the attention pipelines' normalizers and A writers (:func:`_attention_resources`), the PL units
      (:func:`pl_units`: the residual adds, RoPE with ``rope``), the HLS movers (:func:`movers`), the stream
      routers with their FIFOs (:func:`routers`), the buffers' logic with their readers and re-tilers
      (:func:`buffer_logic`) and
      the buffers' banks (:func:`buffers`), each buffer placed in URAM or BRAM, whichever leaves the fuller of the
      two the emptier (the largest first).

    Returns ``{"used", "available", "fraction", "fullest", "parts", "buffers", "plios"}``."""
    avail = {**available(), **dict(limits)}
    io = plios(s, sp)
    att = _attention_resources(s, sp)
    pl_keys = engine.RESOURCE_KEYS
    units = pl_units(s, sp, rope)["total"]
    moving = engine.parts_resources(movers(s, sp, io))
    logic = buffer_logic(s, sp)
    route = routers(s, sp, io)
    parts = {"attention": {k: att[k] for k in pl_keys}, "pl_units": dict(units), "movers": moving,
             "routers": {k: route.get(k, 0.0) for k in pl_keys},
             "buffer_logic": {k: logic.get(k, 0.0) for k in pl_keys}}
    used = {k: sum(p[k] for p in parts.values()) for k in pl_keys}
    bufs = buffers(s, sp)
    for name in sorted(bufs, key=lambda k: -bufs[k]["bytes"]):
        b = bufs[name]

        def fuller(mem: str, b: dict[str, Any] = b) -> float:
            after = {m: used[m] + (b[m] if m == mem else 0) for m in ("uram", "bram")}
            return max(after[m] / avail[m] for m in after)

        b["memory"] = min(("uram", "bram"), key=fuller)
        used[b["memory"]] += b[b["memory"]]
    parts["buffers"] = {k: float(sum(b[b["memory"]] for b in bufs.values() if b["memory"] == k) if k in
                                 ("uram", "bram") else 0.0) for k in pl_keys}
    used["aie_tiles"] = float(sp.n_qkv * s.d_model // sp.qkv_tile[2] + sp.n_o * s.d_model // sp.o_tile[2]
                              + att["aie_tiles"])
    used["plio_in"], used["plio_out"] = float(io["in"]), float(io["out"])
    used = {k: used[k] for k in RESOURCES}
    fraction = {k: used[k] / avail[k] for k in RESOURCES}
    return {"used": used, "available": {k: avail[k] for k in RESOURCES}, "fraction": fraction,
            "fullest": max(fraction, key=lambda k: fraction[k]), "parts": parts, "buffers": bufs, "plios": io}


def split_cost(s: SublayerShape, sp: SublayerSplit, limits: tuple[tuple[str, float], ...] = (),
               used: dict[str, Any] | None = None) -> dict[str, Any]:
    """The modeled time and fraction of peak of one split (module doc; JSON-ready), with every resource it uses
    (``"resources"``: :func:`resources`, against the device's limits or ``limits``; ``used``: that result when
    the caller has it already)."""
    macs = sublayer_macs(s)
    w1 = (first_reload_bytes(s, sp.qkv_tile, sp.n_qkv, s.qkv_cols)
          + first_reload_bytes(s, sp.o_tile, sp.n_o, s.d_model))
    staged = {**({"site": site_stage(s, sp)} if s.decoder else {}),
              "qkv": _cascade(s, sp.qkv_tile, sp.n_qkv, s.qkv_cols, 8, sp.w_share, float(w1)),
              "attention": _attention(s, sp), "o": _cascade(s, sp.o_tile, sp.n_o, s.d_model, 32, sp.w_share)}
    # the Q/K/V cascades start a sequence once its X is on chip, read in sequence order, sharing the bank with the
    # first reloads (their first weights are on chip: prefetched while the previous sublayer ran, after its X)
    start = [_x_in(s, b, float(w1)) for b in range(s.batch)]
    x_seq = s.seq * s.d_model / DEVICE["ddr_bytes_per_s"]
    flow = schedule(s.batch, list(staged.values()), start, None if sp.x_on_chip else x_seq)
    # the attention pipelines' reads at the Q/K/V buffer's banks, for the sequences handed over together
    qkv_ready = flow["ready"][list(staged).index("qkv")]
    staged["attention"] = _bank_charged(s, sp, staged["attention"], qkv_ready)
    flow = schedule(s.batch, list(staged.values()), start, None if sp.x_on_chip else x_seq)
    st = {k: {x: y for x, y in v.items() if x != "work"} for k, v in staged.items()}
    times = {k: v["seconds"] for k, v in st.items()}
    top = max(times, key=lambda k: times[k])
    compute = flow["end"] + sp.o_tile[0] * sp.o_tile[1] / DEVICE["ddr_bytes_per_s"]  # + the last tile's write
    # + X in (again for the residual when it is not kept), the output out
    ddr_bytes = st["qkv"]["weight_bytes"] + st["o"]["weight_bytes"] + (2 if sp.x_on_chip else 3) * s.tokens * s.d_model
    ddr = ddr_bytes / DEVICE["ddr_bytes_per_s"]
    # the next sublayer's first weight blocks, once all of X is in and, on a w PLIO whose cascades reload, once
    # their stage is done (the w buffers' halves are free then): through the one weight mover from DDR and then
    # each through its w PLIO (the w PLIOs in parallel, a shared one a block after the other)
    first = st["qkv"]["first_weight_bytes"] + st["o"]["first_weight_bytes"]
    block = max(sp.qkv_tile[1], sp.o_tile[1]) * s.d_model / DEVICE["ddr_bytes_per_s"]
    ready = dict(zip(staged, flow["ready"], strict=True))
    x_all = flow["input"][-1]  # all of X is in
    links = max((ready[k][-1] if busy else x_all) + secs + block
                for k in ("qkv", "o") for busy, secs in st[k]["prefetch"])
    prefetch = max(x_all + first / DEVICE["ddr_bytes_per_s"], links)
    total = max(compute, ddr, prefetch)
    bound = "ddr" if ddr >= max(compute, prefetch) else "w_prefetch" if prefetch > compute else top
    ops = 2 * sum(macs.values())
    peak = DEVICE["aie_tiles"] * PEAK_MACS_PER_CYCLE * 2 * DEVICE["aie_clock_hz"]
    return {"shape": _fields(s), "split": _fields(sp), "stages": st, "ops": ops, "start_seconds": start[0],
            "sequence_ready": dict(zip(staged, flow["ready"], strict=True)),
            "kernels": sum(v["kernels"] for v in st.values()),
            "kernel_memory_bytes": max(v["kernel_memory_bytes"] for v in st.values()), "compute_seconds": compute,
            "ddr_bytes": ddr_bytes, "ddr_seconds": ddr, "prefetch_seconds": prefetch, "seconds": total,
            "bound": bound,
            "tops": ops / total / 1e12, "fraction_of_peak": ops / total / peak, "pl": pl_units(s, sp),
            "resources": resources(s, sp, limits=limits) if used is None else used}


#: lanes of a decoder's BHyT site A unit: one 128-bit beat of int8 X a PL cycle
SITE_LANES = 16


def site_seconds(s: SublayerShape, sp: SublayerSplit) -> float:
    """Seconds the decoder's site A units take for one sequence of X: its ``seq`` tokens dealt evenly to
    :func:`site_units` units of :data:`SITE_LANES` lanes (a token's statistic before its output, the unit's
    latency: :func:`vckattn.hw.pl.timing.stream_cycles`), at the PL clock."""
    from vckattn.hw.pl import timing

    tokens = -(-s.seq // site_units(s, sp))
    return timing.stream_cycles("bhyt_exact", tokens, s.d_model, SITE_LANES) / DEVICE["pl_clock_hz"]


def site_units(s: SublayerShape, sp: SublayerSplit) -> int:
    """Site A units of a decoder split (0 for an encoder): the fewest whose time for a sequence is no more than the
    Q/K/V stage's per sequence, so that the site never slows the cascades (each unit reads X from the X buffer and
    writes U into the U slots)."""
    from vckattn.hw.pl import timing

    if not s.decoder:
        return 0
    per_seq = _cascade(s, sp.qkv_tile, sp.n_qkv, s.qkv_cols, 8, sp.w_share)["seconds"] / s.batch
    one = timing.stream_cycles("bhyt_exact", s.seq, s.d_model, SITE_LANES) / DEVICE["pl_clock_hz"]
    return min(s.seq, max(1, math.ceil(one / per_seq)))


def site_stage(s: SublayerShape, sp: SublayerSplit) -> dict[str, Any]:
    """The decoder's site A as the first stage of the schedule: its units on each sequence in turn, U into
    :data:`SEQUENCE_SLOTS` slots (MODELED)."""
    t = site_seconds(s, sp)
    return {"seconds": s.batch * t, "kernels": 0, "kernel_memory_bytes": 0, "units": site_units(s, sp),
            "work": tuple(((0, t),) for _ in range(s.batch)), "fill_seconds": 0.0, "tail_seconds": 0.0}


def _fields(obj: Any) -> dict[str, Any]:
    """A flat dataclass of immutable fields (ints, strings, tuples of ints) as a dict: ``asdict`` without its deep
    copy (the explorer costs tens of thousands of splits)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def tile_caps(tile_cap: float = RESOURCE_CAP) -> dict[str, float]:
    """The fraction of each of :data:`RESOURCES` a split may use: ``tile_cap`` of the AIE tiles,
    :data:`RESOURCE_CAP` of the rest."""
    return {k: tile_cap if k == "aie_tiles" else RESOURCE_CAP for k in RESOURCES}


def _check_tile(s: SublayerShape, tile: tuple[int, int, int], out_cols: int, qkv: bool = False) -> None:
    if s.d_model % tile[2] or out_cols % tile[1]:
        raise ValueError(f"d_model {s.d_model} / outputs {out_cols} not multiples of kslice {tile[2]} / cols "
                         f"{tile[1]}")
    if qkv and s.decoder and tile[1] % s.head_dim:
        raise ValueError(f"a decoder's Q/K/V tile of {tile[1]} channels splits head rows of {s.head_dim}: RoPE "
                         "rotates features f and f + D/2 of a row, so a tile holds whole head rows (cols a "
                         "multiple of the head size)")


def default_qkv_tile(s: SublayerShape) -> tuple[int, int, int]:
    """The Q/K/V GEMM tile a search of ``s`` uses unless told otherwise: :class:`SublayerSplit`'s, or for a decoder
    (whose tiles hold whole head rows for RoPE) ``(16, 64, 96)``, the fastest such tile of SmolLM2-135M's
    sublayer (six kernels of 112 features and one of 16, balanced: :func:`gemm_params`)."""
    return (16, 64, 96) if s.decoder else SublayerSplit.qkv_tile


def splits(s: SublayerShape, tile_cap: float = 0.8, limits: tuple[tuple[str, float], ...] = (),
           **tiles: Any) -> Iterator[dict[str, Any]]:
    """The cost (:func:`split_cost`) of every split whose kernels fit a tile's data memory and that uses at most
    ``tile_cap`` of the AIE tiles and :data:`RESOURCE_CAP` of EVERY other resource (:data:`RESOURCES`: PLIOs in
    and out, LUT, FF, DSP, BRAM, URAM; :func:`resources`, against the device's or ``limits``): every Q/K/V and W_O
    cascade count, ``kq`` in 1, 2, 4, every score channel count dividing it and as many attention pipelines as the
    rest of the tiles hold; a SwiftMax split's lanes multiply in LUTs or in DSP blocks, whichever leaves its fullest
    resource the emptier; a w PLIO serves the fewest cascades (:data:`W_SHARES`) that keep the PLIOs within the cap;
    all of X stays on chip unless it does not fit the URAM and BRAM (``tiles``: ``qkv_tile``, ``o_tile``,
    ``q_rows``, ``normalizer``, ``score_channels``, ``swiftmax_products``, ``w_share``, ``x_on_chip``: fixed, as
    :class:`SublayerSplit`)."""
    avail = {**available(), **dict(limits)}
    cap = int(tile_caps(tile_cap)["aie_tiles"] * avail["aie_tiles"])
    caps = tile_caps(tile_cap)
    tiles = {"qkv_tile": default_qkv_tile(s), **tiles}
    for tile, out_cols, qkv in ((tiles["qkv_tile"], s.qkv_cols, True),
                                (tiles.get("o_tile", SublayerSplit.o_tile), s.d_model, False)):
        _check_tile(s, tile, out_cols, qkv)
    k_qkv = s.d_model // tiles["qkv_tile"][2]
    k_o = s.d_model // tiles.get("o_tile", SublayerSplit.o_tile)[2]
    swift = tiles.get("normalizer", "swiftmax") == "swiftmax"
    products = [tiles["swiftmax_products"]] if "swiftmax_products" in tiles else (["auto", "dsp"] if swift else
                                                                                  ["auto"])
    for kq in (1, 2, 4):
        if s.seq % kq or (s.seq // kq) % 16:
            continue
        for n_qkv in range(1, cap // k_qkv):
            for n_o in range(1, (cap - n_qkv * k_qkv) // k_o + 1):
                n_att = (cap - n_qkv * k_qkv - n_o * k_o) // (2 * kq + 1)
                if n_att < 1:
                    continue
                for m in ([tiles["score_channels"]] if tiles.get("score_channels") else
                          [x for x in (1, 2, 4) if x <= kq and kq % x == 0]):
                    # the fewest cascades a w PLIO that keeps the PLIOs within the cap (the PLIOs first: the
                    # cheapest check; all of them again below)
                    fixed = {k: v for k, v in tiles.items() if k in ("qkv_tile", "o_tile")}
                    share = None
                    for ws in ([tiles["w_share"]] if "w_share" in tiles else W_SHARES):
                        io = plios(s, SublayerSplit(n_qkv, n_o, n_att, kq, score_channels=m, w_share=ws, **fixed))
                        if io["in"] <= caps["plio_in"] * avail["plio_in"] and io["out"] <= caps["plio_out"] * \
                                avail["plio_out"]:
                            share = ws
                            break
                    if share is None:
                        continue
                    for x_on_chip in [tiles["x_on_chip"]] if "x_on_chip" in tiles else [True, False]:
                        best = None
                        for prod in products:
                            if best is not None and best[1]["fullest"] != "lut":
                                break  # DSP products only take LUTs off
                            sp = SublayerSplit(n_qkv, n_o, n_att, kq, **{**tiles, "score_channels": m,
                                                                         "swiftmax_products": prod, "w_share": share,
                                                                         "x_on_chip": x_on_chip})
                            r = resources(s, sp, limits=limits)
                            if best is None or max(r["fraction"].values()) < max(best[1]["fraction"].values()):
                                best = (sp, r)
                        sp, r = best
                        fits = all(r["fraction"][k] <= caps[k] for k in RESOURCES)  # every resource within its cap
                        if fits or r["fullest"] not in ("uram", "bram"):
                            break  # X in slots only when all of it does not fit the PL's memory
                    if not fits:
                        continue
                    c = split_cost(s, sp, limits, used=r)
                    if c["kernel_memory_bytes"] > DEVICE["kernel_memory_bytes"]:
                        continue
                    yield c


def best_split(s: SublayerShape, tile_cap: float = 0.8, limits: dict[str, float] | None = None,
               **tiles: Any) -> dict[str, Any]:
    """The split with the shortest modeled time of :func:`splits` (the first found among equals); ``limits``: some
    of the device's limits replaced (:data:`RESOURCES` names)."""
    return copy.deepcopy(_best_split(s, tile_cap, tuple(sorted((limits or {}).items())),
                                     tuple(sorted(tiles.items()))))


@functools.lru_cache(maxsize=64)
def _best_split(s: SublayerShape, tile_cap: float, limits: tuple[tuple[str, float], ...],
                tiles: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    best = None
    for c in splits(s, tile_cap, limits, **dict(tiles)):
        if best is None or c["seconds"] < best["seconds"]:
            best = c
    if best is None:
        raise ValueError(f"no split fits the device (the AIE tiles within {tile_cap:.0%}, every other resource "
                         f"within {RESOURCE_CAP:.0%})")
    best["tile_cap"] = tile_cap
    return best


def refit(s: SublayerShape, sp: SublayerSplit, tile_cap: float = RESOURCE_CAP) -> SublayerSplit | None:
    """Split ``sp`` (found for another batch) made to fit shape ``s``: its w PLIO sharing (:data:`W_SHARES`, the
    fewest) and X on chip or in slots (on chip first) chosen again so that every resource stays within its cap;
    None where none fits."""
    from dataclasses import replace

    caps = tile_caps(tile_cap)
    for x_on_chip in (True, False):
        for ws in W_SHARES:
            c = replace(sp, w_share=ws, x_on_chip=x_on_chip)
            r = resources(s, c)
            if all(r["fraction"][k] <= caps[k] for k in RESOURCES):
                return c
    return None


def bert_base(seq: int, batch: int = 8) -> dict[str, Any]:
    """The best split for a BERT-base sublayer (12 × 64, d_model 768) of ``batch`` sequences of ``seq`` tokens."""
    return best_split(SublayerShape(batch, seq))


if __name__ == "__main__":
    for seq in (512, 128):
        r = bert_base(seq)
        sp, st = r["split"], r["stages"]
        print(f"BERT-base sublayer, S = {seq}, batch 8 (MODELED): {r['seconds'] * 1e6:.1f} us, {r['tops']:.1f} TOPS = "
              f"{r['fraction_of_peak']:.1%} of 128; {r['kernels']} kernels: {sp['n_qkv']} Q/K/V + {sp['n_o']} W_O "
              f"cascades, {sp['n_att']} attention pipelines of {sp['kq']}+{sp['kq']}; bound: {r['bound']}; stage us "
              + ", ".join(f"{k} {v['seconds'] * 1e6:.1f}" for k, v in st.items())
              + f"; DDR {r['ddr_bytes'] / 1e6:.2f} MB = {r['ddr_seconds'] * 1e6:.1f} us; resources "
              + ", ".join(f"{k} {v:.1%}" for k, v in r["resources"]["fraction"].items()))

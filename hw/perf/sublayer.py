"""The whole attention sublayer on the card, in closed form: MODELED, not measured.

What is costed: an encoder sublayer (X·W_qkvᵀ + b → Q, K, V int8; attention per (batch, head); A·W_Oᵀ + b → Y) for
``batch`` sequences of ``seq`` tokens, ``heads × head_dim`` = ``d_model``, with every op of the sublayer counted
(2 ops a MAC): ``8·N·d² + 4·B·S²·d`` for ``N = B·S`` tokens. The AIE array is split spatially between

* ``n_qkv`` projection cascades for Q/K/V and ``n_o`` for W_O, each ``k = d_model / kslice`` kernels of the
  projection GEMM (:mod:`.gemm_proj`: the cascade runs at its slowest kernel, the requantizing or int32 last one);
  the (output-channel block, sequence) pairs are dealt to the cascades in block-major order, contiguously; a cascade
  reads the weights of each block it serves once (weights read once a launch per cascade that uses them);
* ``n_att`` attention pipelines of the engine (:mod:`.engine_aie`: ``kq`` QKᵀ, ``kq`` P·V kernels and a
  requantizer, ``q_rows`` query rows a tile, ``S / kq`` keys a slice); whole (batch, head) groups are dealt
  round-robin, as the host does.

The three stages work on different sequences at once (the projections of sequence b + 1, the attention of b, W_O of
b − 1): ``T = max_i T_i + Σ_{i ≠ max} T_i / B`` (a three-stage pipeline over the ``B`` sequences). DDR: the
weights (each block once per cascade that serves it), X once (kept on chip for the
residual), the sublayer's int8 output once; ``T ≥ bytes / ddr_gbps``. The figure is ``ops / T`` against the
array's int8 peak (``tiles × 128 MACs × 2 × aie clock``).

Assumptions (each can make the real design slower):

* A tile of a stage takes the longest of its slowest kernel's modeled cycles (its own instrumented code:
  :mod:`.gemm_proj`, :mod:`.engine_aie`; not compiled by aiecompiler here) and the transfer of each of its buffers
  through one 128-bit PLIO at the PL clock (250 MHz, the model's default) and the tile DMA's 32-bit stream; DMA and
  compute overlap (ping-pong buffers); the attention pipelines have one score channel per kernel pair. It rules out
  tiles whose 4-byte Y or whose x slice outgrows a PLIO (16 rows × 64 channels over 128 features: Y 4 KB a tile,
  1,280 cycles of a PLIO against 1,099 of compute).
* The two projections are two builds of the GEMM kernel (its shape is a compile-time parameter): the graph must
  compile the Q/K/V and the W_O kernels with their own parameters.
* The PL keeps pace. Costed (:func:`pl_units`, from the Yosys fits of :mod:`.pl`, in ``split_cost``'s ``pl`` and
  within ``tile_cap`` of every PL resource in :func:`best_split`): the residual add, one 4-lane unit a W_O cascade
  (its int32 output PLIO carries 4 accumulators a PL cycle); the requantizers, none (Q/K/V are requantized by the
  GEMM's last kernel and A by the attention pipelines' requantizer kernel, on the AIE); RoPE, none for this
  encoder sublayer (:func:`pl_units` sizes it for a decoder). NOT costed: the SwiftMax lanes of the attention
  pipelines, the movers, the on-chip buffers of Q, K, V and A between the stages (``3·S·d`` + ``S·d`` bytes a
  sequence in URAM/BRAM) and of X (``N·d`` bytes); nor the PLIO count (X goes to all projection cascades by
  broadcast, one stream per K-slice; each cascade and pipeline has its own output PLIO).
* Stage hand-offs cost nothing beyond the pipeline fill ``Σ_{i ≠ max} T_i / B``; no launch overhead.
* At most ``tile_cap`` of the AIE tiles are used (default 80%: the resource headroom rule), every kernel on its own
  tile with its buffers and state in that tile's data memory less 2.5 KB of stack and heap.

Device numbers from ``hw/perf/device.json`` (VCK5000): 400 AIE tiles at 1.25 GHz (128 int8 TOPS), DDR 57 GB/s
measured with several readers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any

from . import engine_aie, gemm_proj
from .aie import PEAK_MACS_PER_CYCLE

__all__ = ["DEVICE", "SublayerShape", "SublayerSplit", "attention_memory", "best_split", "bert_base", "pl_units",
           "split_cost", "sublayer_macs"]


@dataclass(frozen=True)
class SublayerShape:
    """The sublayer: ``batch`` sequences of ``seq`` tokens, ``heads`` × ``head_dim`` (= d_model)."""

    batch: int
    seq: int
    heads: int = 12
    head_dim: int = 64

    @property
    def d_model(self) -> int:
        return self.heads * self.head_dim

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
    rate (``python -m vckattn.sim.gemm_proj_perf`` lists the candidates)."""

    n_qkv: int
    n_o: int
    n_att: int
    kq: int
    q_rows: int = 32
    qkv_tile: tuple[int, int, int] = (16, 48, 192)
    o_tile: tuple[int, int, int] = (8, 48, 192)


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
    """MACs of each stage: ``qkv`` N·d·3d, ``attention`` 2·B·H·S²·D, ``o`` N·d·d (units: multiply-accumulates)."""
    d = s.d_model
    return {"qkv": s.tokens * d * 3 * d, "attention": 2 * s.batch * s.heads * s.seq * s.seq * s.head_dim,
            "o": s.tokens * d * d}


@functools.cache
def _chain_cycles(k: int, rows: int, cols: int, kslice: int, out_bits: int) -> float:
    """Cycles of a tile of a ``k``-kernel projection cascade: its slowest kernel."""
    return max(gemm_proj.invocation_cycles(gemm_proj.variant(j, k), rows, cols, kslice, out_bits)["total"]
               for j in range(k))


@functools.cache
def _tile_cycles(kq: int, q_rows: int, sk: int, d: int) -> float:
    """Cycles of a tile of an attention pipeline of ``kq`` + ``kq`` kernels and the requantizer: its slowest
    kernel."""
    kernels = ["qk", "pv_first", "rq"] + (["pv_mid"] if kq > 1 else [])
    return max(engine_aie.invocation_cycles(k, q_rows, sk, d)["total"] for k in kernels)


def _cascade(s: SublayerShape, tile: tuple[int, int, int], n: int, out_cols: int, out_bits: int) -> dict[str, Any]:
    """One projection stage on ``n`` cascades of GEMM tile ``(rows, cols, kslice)``: seconds for the launch,
    kernels, weight bytes read, memory."""
    rows, cols, kslice = tile
    if s.d_model % kslice or out_cols % cols:
        raise ValueError(f"d_model {s.d_model} / outputs {out_cols} not multiples of kslice {kslice} / cols {cols}")
    k = s.d_model // kslice
    compute = _chain_cycles(k, rows, cols, kslice, out_bits)
    # a tile: each kernel's x buffer (its own K-slice stream, broadcast to the cascades), the last kernel's output
    io = {"x_in": _io_cycles(rows * kslice), "out": _io_cycles(rows * cols * out_bits // 8)}
    chain = max(compute, *io.values())
    blocks = out_cols // cols
    units = blocks * s.batch  # (column block, sequence) pairs, dealt in block-major order, contiguous
    per = math.ceil(units / n)
    loads = sum(len({u // s.batch for u in range(c * per, min(units, (c + 1) * per))}) for c in range(n))
    memory = max(gemm_proj.kernel_memory(gemm_proj.variant(j, k), rows, cols, kslice, out_bits) for j in range(k))
    return {"seconds": per * math.ceil(s.seq / rows) * chain / DEVICE["aie_clock_hz"], "kernels": n * k,
            "chain_cycles": chain, "compute_cycles": compute, "io_cycles": io, "units_busiest": per,
            "weight_bytes": loads * cols * s.d_model, "kernel_memory_bytes": memory,
            "efficiency": rows * cols * kslice / (chain * PEAK_MACS_PER_CYCLE)}


def attention_memory(q_rows: int, sk: int, d: int) -> int:
    """Largest data memory of an attention kernel (bytes): its ping-pong buffers and state as the kernels declare
    them (:func:`vckattn.hw.engine.model.kernel_memory`, = the C++ ``sizeof``; int8 scores)."""
    from vckattn.hw.engine.model import EngineParams, kernel_memory

    return max(kernel_memory(EngineParams(pipelines=1, kernels=1, score_plios=1, q_rows=q_rows, d=d, max_keys=sk,
                                          score_bits=8, lanes=1)).values())


def _attention(s: SublayerShape, sp: SublayerSplit) -> dict[str, Any]:
    if s.seq % sp.kq or (s.seq // sp.kq) % 16:
        raise ValueError(f"seq {s.seq} must split into {sp.kq} slices of a multiple of 16 keys")
    sk = s.seq // sp.kq
    compute = _tile_cycles(sp.kq, sp.q_rows, sk, s.head_dim)
    # a tile of a pipeline with one score channel a kernel pair: Q in, scores out and P in (int8), A out
    io = {"q_in": _io_cycles(sp.q_rows * s.head_dim), "scores": _io_cycles(sp.q_rows * sk),
          "a_out": _io_cycles(sp.q_rows * s.head_dim)}
    tile = max(compute, *io.values())
    groups = math.ceil(s.batch * s.heads / sp.n_att)  # whole (batch, head) groups round-robin: the busiest
    tiles = groups * math.ceil(s.seq / sp.q_rows)
    return {"seconds": tiles * tile / DEVICE["aie_clock_hz"], "kernels": (2 * sp.kq + 1) * sp.n_att,
            "tile_cycles": tile,
            "compute_cycles": compute, "io_cycles": io,
            "kernel_memory_bytes": attention_memory(sp.q_rows, sk, s.head_dim),
            "efficiency": sp.q_rows * sk * s.head_dim / (tile * PEAK_MACS_PER_CYCLE)}


def pl_units(s: SublayerShape, sp: SublayerSplit, rope: bool = False) -> dict[str, Any]:
    """The sublayer's PL units at its throughput, MODELED: each unit's LUT/FF/DSP/BRAM/URAM from its Yosys fit
    (:func:`.pl.resources`, UltraScale+ cells as a proxy for the Versal PL) times the units needed to keep pace
    with the AIE stages' output PLIOs (128 bits a PL cycle):

    * ``residual``: one unit a W_O cascade, ``lanes`` = the int32 accumulators a PLIO beat carries (4);
    * ``requant``: none: the GEMM's last cascade kernel requantizes Q/K/V and the attention pipelines'
      requantizer kernel A (on the AIE);
    * ``rope`` (``rope=True``, a decoder sublayer: Q and K rotated on their way out of the Q/K/V cascades): 8-lane
      units, enough for the 16 int8 elements a PLIO beat carries on every Q/K/V cascade, each with the registry
      build's table (``max_pos`` 256 positions of ``head_dim`` 64).

    Returns ``{"units": {name: {"count", "lanes", <resource>: total}}, "total": {<resource>: ...},
    "fraction": {<resource>: total / the device's PL}}`` (resources: ``lut, ff, dsp, bram, uram``)."""
    from . import pl
    from .model import load_device

    dev = load_device("vck5000").pl
    keys = ("lut", "ff", "dsp", "bram", "uram")
    rope_lanes = 8
    plan = {"residual": (sp.n_o, DEVICE["plio_bytes"] // 4), "requant": (0, 1),
            "rope": (sp.n_qkv * DEVICE["plio_bytes"] // rope_lanes if rope else 0, rope_lanes)}
    units = {}
    for name, (count, lanes) in plan.items():
        r = pl.resources(name, lanes)
        units[name] = {"count": count, "lanes": lanes, **{k: count * r[k] for k in keys}}
    total = {k: sum(u[k] for u in units.values()) for k in keys}
    return {"units": units, "total": total, "fraction": {k: total[k] / dev[k] for k in keys}}


def split_cost(s: SublayerShape, sp: SublayerSplit) -> dict[str, Any]:
    """The modeled time and fraction of peak of one split (module doc; JSON-ready)."""
    macs = sublayer_macs(s)
    st = {"qkv": _cascade(s, sp.qkv_tile, sp.n_qkv, 3 * s.d_model, 8), "attention": _attention(s, sp),
          "o": _cascade(s, sp.o_tile, sp.n_o, s.d_model, 32)}
    times = {k: v["seconds"] for k, v in st.items()}
    top = max(times, key=lambda k: times[k])
    compute = times[top] + sum(t for k, t in times.items() if k != top) / s.batch
    ddr_bytes = st["qkv"]["weight_bytes"] + st["o"]["weight_bytes"] + 2 * s.tokens * s.d_model  # + X in, R out
    ddr = ddr_bytes / DEVICE["ddr_bytes_per_s"]
    total = max(compute, ddr)
    ops = 2 * sum(macs.values())
    peak = DEVICE["aie_tiles"] * PEAK_MACS_PER_CYCLE * 2 * DEVICE["aie_clock_hz"]
    return {"shape": asdict(s), "split": asdict(sp), "stages": st, "ops": ops,
            "kernels": sum(v["kernels"] for v in st.values()),
            "kernel_memory_bytes": max(v["kernel_memory_bytes"] for v in st.values()), "compute_seconds": compute,
            "ddr_bytes": ddr_bytes, "ddr_seconds": ddr, "seconds": total, "bound": "ddr" if ddr > compute else top,
            "tops": ops / total / 1e12, "fraction_of_peak": ops / total / peak, "pl": pl_units(s, sp)}


def best_split(s: SublayerShape, tile_cap: float = 0.8, **tiles: Any) -> dict[str, Any]:
    """The split with the shortest modeled time within ``tile_cap`` of the AIE tiles (every kernel one tile) and of
    every PL resource of the costed PL units (:func:`pl_units`), over every cascade count and attention pipeline
    count and ``kq`` in 1, 2, 4 (``tiles``: ``qkv_tile``, ``o_tile``, ``q_rows``, as :class:`SublayerSplit`)."""
    cap = int(tile_cap * DEVICE["aie_tiles"])
    k_qkv = s.d_model // tiles.get("qkv_tile", SublayerSplit.qkv_tile)[2]
    k_o = s.d_model // tiles.get("o_tile", SublayerSplit.o_tile)[2]
    best = None
    for kq in (1, 2, 4):
        if s.seq % kq or (s.seq // kq) % 16:
            continue
        for n_qkv in range(1, cap // k_qkv):
            for n_o in range(1, (cap - n_qkv * k_qkv) // k_o + 1):
                n_att = (cap - n_qkv * k_qkv - n_o * k_o) // (2 * kq + 1)
                if n_att < 1:
                    continue
                c = split_cost(s, SublayerSplit(n_qkv, n_o, n_att, kq, **tiles))
                if c["kernel_memory_bytes"] > DEVICE["kernel_memory_bytes"]:
                    continue
                if max(c["pl"]["fraction"].values()) > tile_cap:  # the costed PL units within the cap
                    continue
                if best is None or c["seconds"] < best["seconds"]:
                    best = c
    if best is None:
        raise ValueError("no split fits the array")
    best["tile_cap"] = tile_cap
    return best


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
              + f"; DDR {r['ddr_bytes'] / 1e6:.2f} MB = {r['ddr_seconds'] * 1e6:.1f} us")

"""The whole sublayer's closed-form cost (hw/perf/sublayer.py, MODELED): the op count by hand, each stage's time from
the kernels' own modeled cycles and the dealing of the work, the three-stage pipeline and the DDR roof, the search
within the tile cap and the kernels' data memory, and the BERT-base figures the documentation quotes."""

from __future__ import annotations

import math

import pytest

from vckattn.hw.perf import engine_aie, gemm_proj, sublayer
from vckattn.hw.perf.sublayer import SublayerShape, SublayerSplit


def test_ops_are_every_op_of_the_sublayer():
    s = SublayerShape(batch=8, seq=512)
    m = sublayer.sublayer_macs(s)
    n, d = 8 * 512, 768
    assert m == {"qkv": n * d * 3 * d, "attention": 2 * 8 * 12 * 512 * 512 * 64, "o": n * d * d}
    c = sublayer.split_cost(s, SublayerSplit(48, 16, 10, 4))
    assert c["ops"] == 8 * n * d * d + 4 * 8 * 512 * 512 * d  # 2 ops a MAC


def test_stage_times_from_the_kernels_cycles_and_the_dealing():
    s = SublayerShape(batch=8, seq=512)
    sp = SublayerSplit(n_qkv=48, n_o=16, n_att=12, kq=4)
    assert (sp.qkv_tile, sp.o_tile) == ((16, 48, 192), (8, 48, 192))
    c = sublayer.split_cost(s, sp)
    last8 = gemm_proj.invocation_cycles("last", 16, 48, 192, 8)["total"]  # the cascade's slowest kernel
    assert last8 > gemm_proj.invocation_cycles("mid", 16, 48, 192, 8)["total"]
    # 48 column blocks x 8 sequences over 48 cascades: 8 units of 512 / 16 row tiles each; its x slice (3 KB) and
    # int8 out (768 B) take less than the compute through a PLIO at 250 MHz (3.2 bytes an AIE cycle)
    assert c["stages"]["qkv"]["io_cycles"] == {"x_in": 3072 / 3.2, "out": 768 / 3.2}
    assert c["stages"]["qkv"]["seconds"] == pytest.approx(8 * 32 * last8 / 1.25e9)
    o_chain = max(gemm_proj.invocation_cycles(k, 8, 48, 192, 32)["total"] for k in ("first", "mid", "last"))
    assert c["stages"]["o"]["seconds"] == pytest.approx(8 * 64 * o_chain / 1.25e9)  # 16 blocks over 16 cascades
    tile = max(engine_aie.invocation_cycles(k, 32, 128, 64)["total"] for k in ("qk", "pv_first", "pv_mid", "rq"))
    assert c["stages"]["attention"]["seconds"] == pytest.approx(8 * 16 * tile / 1.25e9)  # 96 groups / 12 pipelines
    # every stage does the same work for every sequence on every instance (one unit a cascade, one group a
    # pipeline): a flow shop, by hand. The bottleneck stage m runs all 8 sequences back to back; the stages before
    # it hand over the first sequence, those after take the last one; between two stages a tile's latency beyond
    # its interval (tail) and the attention's K/V load (fill)
    st = c["stages"]
    p = [st[k]["seconds"] / 8 for k in ("qkv", "attention", "o")]
    lag = [st["qkv"]["tail_seconds"] + st["attention"]["fill_seconds"], st["attention"]["tail_seconds"]]
    paths = [p[0] + lag[0] + p[1] + lag[1] + p[2] + 7 * p[m] for m in range(3)]
    end = c["start_seconds"] + max(paths) + st["o"]["tail_seconds"]
    assert c["start_seconds"] == pytest.approx(512 * 768 / sublayer.DEVICE["ddr_bytes_per_s"])  # X of sequence 0
    assert c["compute_seconds"] == pytest.approx(end + 8 * 48 / sublayer.DEVICE["ddr_bytes_per_s"])
    assert st["qkv"]["tail_seconds"] == pytest.approx((3072 / 3.2 + last8 + 768 / 3.2 - last8) / 1.25e9)
    assert c["kernels"] == 4 * 48 + 4 * 16 + (8 + 1) * 12  # a requantizer per attention pipeline
    # weights: every block read by exactly one cascade; X in and R out
    assert c["ddr_bytes"] == 3 * 768 * 768 + 768 * 768 + 2 * 8 * 512 * 768
    assert c["seconds"] == max(c["compute_seconds"], c["ddr_seconds"])


def test_a_plio_bound_tile_is_costed_by_its_transfer():
    """16 rows x 64 channels over 128 features with int32 out: 4 KB of Y a tile = 1,280 AIE cycles of a 128-bit
    PLIO at 250 MHz, more than the 1,099 cycles of compute."""
    s = SublayerShape(batch=8, seq=512)
    c = sublayer.split_cost(s, SublayerSplit(36, 12, 12, 4, o_tile=(16, 64, 128)))
    assert c["stages"]["o"]["compute_cycles"] == gemm_proj.invocation_cycles("last", 16, 64, 128, 32)["total"] < 1280
    assert c["stages"]["o"]["chain_cycles"] == 4096 / 3.2 == 1280


def test_the_dealing_runs_every_cascade_sequence_by_sequence():
    """deal_projection by hand: 3 blocks x 2 sequences in block-major order (b0s0 b0s1 b1s0 b1s1 b2s0 b2s1), cut
    into 2 runs of 3 units, each run in sequence order; a cascade reloads a block whenever it switches."""
    assert sublayer.deal_projection(3, 2, 2) == [[(0, 0), (1, 0), (0, 1)], [(2, 0), (1, 1), (2, 1)]]
    assert sublayer.weight_loads([(0, 0), (1, 0), (0, 1)]) == 3 and sublayer.weight_loads([(5, 0), (5, 1)]) == 1
    assert sublayer.deal_projection(2, 3, 4) == [[(0, 0)], [(0, 1), (0, 2)], [(1, 0)], [(1, 1), (1, 2)]]


def test_a_cascade_serving_several_blocks_reloads_them_every_sequence():
    s = SublayerShape(batch=8, seq=128)
    # 36 blocks of 64 channels x 8 sequences over 5 cascades of 57 or 58 units: each serves 7 to 9 blocks and,
    # running sequence by sequence, switches block at every unit
    c = sublayer.split_cost(s, SublayerSplit(n_qkv=5, n_o=1, n_att=4, kq=1, qkv_tile=(16, 64, 128)))
    assert c["stages"]["qkv"]["weight_bytes"] == 288 * 64 * 768
    assert c["stages"]["qkv"]["units_busiest"] == 58
    # one block a cascade: each block read once
    c = sublayer.split_cost(s, SublayerSplit(n_qkv=36, n_o=1, n_att=4, kq=1, qkv_tile=(16, 64, 128)))
    assert c["stages"]["qkv"]["weight_bytes"] == 36 * 64 * 768


def test_best_split_fits_the_cap_and_the_memory_and_respects_the_peak():
    for seq in (512, 128):
        r = sublayer.bert_base(seq)
        assert r["kernels"] <= 0.8 * 400 and r["kernel_memory_bytes"] <= sublayer.DEVICE["kernel_memory_bytes"]
        best_eff = max(v["efficiency"] for v in r["stages"].values())
        assert r["fraction_of_peak"] <= 0.8 * best_eff  # never more than the used tiles at their best kernel
        assert r["seconds"] >= r["ddr_seconds"]
    # too large an attention slice does not fit a tile: S = 512 in one slice is refused by the memory check
    assert sublayer.attention_memory(32, 512, 64) > sublayer.DEVICE["kernel_memory_bytes"]
    assert sublayer.bert_base(512)["split"]["kq"] > 1


def test_bert_base_figures():
    """The figures hw/ENGINE.md quotes (MODELED): BERT-base sublayer, batch 8."""
    r512, r128 = sublayer.bert_base(512), sublayer.bert_base(128)
    assert r512["fraction_of_peak"] == pytest.approx(0.471, abs=0.001)
    assert r128["fraction_of_peak"] == pytest.approx(0.464, abs=0.001)
    assert math.isclose(r512["tops"], r512["ops"] / r512["seconds"] / 1e12)


def test_online_softmax_channel_is_the_engine_models():
    """The attention pipelines' score channel with online softmax: the engine model's row-assembling cost
    (engine.tile_costs: the whole tile through one unit), slower than SwiftMax's packets at S = 512."""
    from vckattn.hw.perf import engine

    s = SublayerShape(batch=8, seq=512)
    sp = SublayerSplit(48, 16, 8, 4, normalizer="online_softmax", score_channels=1)
    c = sublayer.split_cost(s, sp)
    g = sublayer.attention_geometry(s, sp)
    assert (g.m, g.k, g.lanes, g.normalizer) == (1, 4, 16, "online_softmax")
    assert c["stages"]["attention"]["io_cycles"]["scores"] == pytest.approx(engine.tile_costs(g, 0).channel * 1.25e9)
    swift = sublayer.split_cost(s, SublayerSplit(48, 16, 8, 4))
    assert c["stages"]["attention"]["tile_cycles"] > 2 * swift["stages"]["attention"]["tile_cycles"]
    with pytest.raises(ValueError, match="divide"):
        sublayer.split_cost(s, SublayerSplit(48, 16, 8, 4, score_channels=3))


def test_pl_units_are_costed_from_their_synthesis_fits():
    """The sublayer's PL units (MODELED): a 4-lane residual add a W_O cascade (its int32 PLIO carries 4 accumulators
    a cycle), no PL requantizer (the AIE requantizes), RoPE only for a decoder (8-lane units, 16 int8 a PLIO beat);
    each unit's resources from pl.resources, the totals their sums, in split_cost and within the best split's cap."""
    from vckattn.hw.perf import pl

    s, sp = SublayerShape(batch=8, seq=512), SublayerSplit(48, 16, 12, 4)
    u = sublayer.pl_units(s, sp)
    assert (u["units"]["residual"]["count"], u["units"]["residual"]["lanes"]) == (16, 4)
    assert u["units"]["requant"]["count"] == 0 and u["units"]["rope"]["count"] == 0
    r = pl.resources("residual", 4)
    for k in ("lut", "ff", "dsp", "bram"):
        assert u["units"]["residual"][k] == pytest.approx(16 * r[k])
        assert u["total"][k] == pytest.approx(sum(v[k] for v in u["units"].values()))
    assert u["total"]["lut"] > 0 and u["fraction"]["lut"] == pytest.approx(u["total"]["lut"] / 880_000)
    d = sublayer.pl_units(s, sp, rope=True)
    assert (d["units"]["rope"]["count"], d["units"]["rope"]["lanes"]) == (96, 8)
    assert d["units"]["rope"]["bram"] == pytest.approx(96 * pl.resources("rope", 8)["bram"])
    assert d["total"]["lut"] > u["total"]["lut"]
    assert sublayer.split_cost(s, sp)["pl"] == u
    best = sublayer.bert_base(512)
    assert max(best["pl"]["fraction"].values()) <= 0.8

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
    t = {k: v["seconds"] for k, v in c["stages"].items()}
    assert c["compute_seconds"] == pytest.approx(max(t.values()) + (sum(t.values()) - max(t.values())) / 8)
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


def test_shared_blocks_are_read_by_every_cascade_that_serves_them():
    s = SublayerShape(batch=8, seq=128)
    c = sublayer.split_cost(s, SublayerSplit(n_qkv=5, n_o=1, n_att=4, kq=1, qkv_tile=(16, 64, 128)))
    # 288 (block, sequence) units, 8 a block, over 5 cascades of 58: the cuts at units 58, 116 and 174 fall inside
    # blocks 7, 14 and 21 (read by two cascades each), the cut at 232 = 29 x 8 between two blocks
    assert c["stages"]["qkv"]["weight_bytes"] == (36 + 3) * 64 * 768
    assert c["stages"]["qkv"]["units_busiest"] == 58


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
    assert r512["fraction_of_peak"] == pytest.approx(0.536, abs=0.001)
    assert r128["fraction_of_peak"] == pytest.approx(0.515, abs=0.001)
    assert math.isclose(r512["tops"], r512["ops"] / r512["seconds"] / 1e12)


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

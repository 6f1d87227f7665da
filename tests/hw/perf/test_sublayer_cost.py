"""The whole sublayer's closed-form cost (hw/perf/sublayer.py, MODELED): the op count by hand, each stage's time from
the kernels' own modeled cycles and the dealing of the work, the three-stage pipeline and the DDR roof, the search
within the tile cap and the kernels' data memory, and the BERT-base figures the documentation quotes."""

from __future__ import annotations

import itertools
import math

import pytest

from vckattn.hw.perf import banks, engine_aie, gemm_proj, sublayer
from vckattn.hw.perf.sublayer import SublayerShape, SublayerSplit


def test_ops_are_every_op_of_the_sublayer():
    s = SublayerShape(batch=8, seq=512)
    m = sublayer.sublayer_macs(s)
    n, d = 8 * 512, 768
    assert m == {"qkv": n * d * 3 * d, "attention": 2 * 8 * 12 * 512 * 512 * 64, "o": n * d * d}
    c = sublayer.split_cost(s, SublayerSplit(48, 16, 10, 4))
    assert c["ops"] == 8 * n * d * d + 4 * 8 * 512 * 512 * d  # 2 ops a MAC


def slowest(rows: int, cols: int, slices: tuple[int, ...], out_bits: int) -> float:
    """The slowest kernel of a cascade with K-slices ``slices``, each kernel costed on its own slice."""
    k = len(slices)
    return max(gemm_proj.invocation_cycles(gemm_proj.variant(j, k), rows, cols, ks, out_bits)["total"]
               for j, ks in enumerate(slices))


def test_stage_times_from_the_kernels_cycles_and_the_dealing():
    s = SublayerShape(batch=8, seq=512)
    sp = SublayerSplit(n_qkv=48, n_o=16, n_att=12, kq=4)
    assert (sp.qkv_tile, sp.o_tile) == ((16, 48, 192), (8, 48, 192))
    c = sublayer.split_cost(s, sp)
    # with four equal K-slices of 192 the last kernel (it also requantizes the tile) is the slowest; the cascade
    # takes 208, 208, 208 and 144 features instead, and its slowest kernel is faster
    assert gemm_proj.invocation_cycles("last", 16, 48, 192, 8)["total"] > \
        gemm_proj.invocation_cycles("mid", 16, 48, 192, 8)["total"]
    assert sublayer.gemm_params(sp.qkv_tile, 768, 8).slices == sublayer.gemm_params(sp.o_tile, 768, 32).slices == \
        (208, 208, 208, 144)
    last8 = slowest(16, 48, (208, 208, 208, 144), 8)
    assert last8 < 0.92 * slowest(16, 48, (192,) * 4, 8)
    # 48 column blocks x 8 sequences over 48 cascades: 8 units of 512 / 16 row tiles each; its longest x slice
    # (3.25 KB) and int8 out (768 B) take less than the compute through a PLIO at 250 MHz (3.2 bytes an AIE cycle)
    assert c["stages"]["qkv"]["io_cycles"] == {"x_in": 16 * 208 / 3.2, "out": 768 / 3.2}
    assert c["stages"]["qkv"]["seconds"] == pytest.approx(8 * 32 * last8 / 1.25e9)
    o_chain = slowest(8, 48, (208, 208, 208, 144), 32)
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
    assert st["qkv"]["tail_seconds"] == pytest.approx((16 * 208 / 3.2 + last8 + 768 / 3.2 - last8) / 1.25e9)
    assert c["kernels"] == 4 * 48 + 4 * 16 + (8 + 1) * 12  # a requantizer per attention pipeline
    # weights: every block read by exactly one cascade; X in and R out
    assert c["ddr_bytes"] == 3 * 768 * 768 + 768 * 768 + 2 * 8 * 512 * 768
    assert c["seconds"] == max(c["compute_seconds"], c["ddr_seconds"])


def test_a_plio_bound_tile_is_costed_by_its_transfer():
    """16 rows x 64 channels over 64 features with int32 out: 4 KB of Y a tile = 1,280 AIE cycles of a 128-bit
    PLIO at 250 MHz, more than the ~1,086 cycles of compute (over 128 features the compute, ~1,598, would hide it)."""
    s = SublayerShape(batch=8, seq=512)
    c = sublayer.split_cost(s, SublayerSplit(36, 12, 12, 4, o_tile=(16, 64, 64)))
    assert c["stages"]["o"]["compute_cycles"] == gemm_proj.invocation_cycles("last", 16, 64, 64, 32)["total"] < 1280
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
    """BERT-base sublayer, batch 8 (MODELED; not reported, the sublayer is not built): the fraction of peak is the
    ops by hand over the time against the array's peak by hand (400 tiles x 128 int8 MACs a cycle x 2 ops at
    1.25 GHz, AM009 'AI Engine Tile Architecture'), and no more than the used tiles at the best stage's efficiency."""
    peak = 400 * 128 * 2 * 1.25e9
    for seq in (512, 128):
        r = sublayer.bert_base(seq)
        n, d = 8 * seq, 768
        assert r["ops"] == 8 * n * d * d + 4 * 8 * seq * seq * d
        assert math.isclose(r["tops"], r["ops"] / r["seconds"] / 1e12)
        assert r["fraction_of_peak"] == pytest.approx(r["ops"] / r["seconds"] / peak)
        best_eff = max(v["efficiency"] for v in r["stages"].values())
        assert r["fraction_of_peak"] <= r["kernels"] / 400 * best_eff


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
    # online softmax: the score channel bounds the tile, above the kernels' compute; SwiftMax's packets fit under
    # the same compute, so its tile is compute-bound and faster
    on, sw = c["stages"]["attention"], swift["stages"]["attention"]
    assert on["tile_cycles"] == on["io_cycles"]["scores"] > on["compute_cycles"] == sw["compute_cycles"]
    assert sw["tile_cycles"] == sw["compute_cycles"] > sw["io_cycles"]["scores"]
    assert on["tile_cycles"] > 1.5 * sw["tile_cycles"]
    with pytest.raises(ValueError, match="divide"):
        sublayer.split_cost(s, SublayerSplit(48, 16, 8, 4, score_channels=3))


def test_pl_units_are_costed_from_their_synthesis_fits():
    """The sublayer's PL units (MODELED): a 4-lane residual add a W_O cascade (its int32 PLIO carries 4 accumulators
    a cycle), no PL requantizer (the AIE requantizes), RoPE only for a decoder (a unit a Q/K/V output PLIO at its
    merged cascades' output rate, each its own table of the sequence's positions, as hw/pl/rope_records.py is
    built); each unit's resources from pl.resources, the totals their sums, in split_cost and within the best
    split's cap."""
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
    # a Q/K/V cascade sends 16 x 48 int8 a tile interval (its slowest kernel's cycles at 1.25 GHz = 1/5 as many
    # PL cycles at 250 MHz): 2.2 a PL cycle; an output PLIO merges 6 of the 48 cascades: 13.3 a PL cycle, so 16
    # lanes; 8 units, each its own 16-BRAM table of 256 positions, twice that for S = 512
    last8 = gemm_proj.invocation_cycles("last", 16, 48, 192, 8)["total"]
    assert sublayer.plios(s, sp)["qkv"]["out_share"] == 6 and sublayer.plios(s, sp)["qkv"]["out"] == 8
    assert 8 < 6 * 16 * 48 / (last8 / 5) <= 16
    assert (d["units"]["rope"]["count"], d["units"]["rope"]["lanes"]) == (8, 16)
    rr = banks.rope_records_cost(16, 512)  # the unit as built, its wrapper and a table of 512 positions
    assert rr["bram"] == pytest.approx(32) and rr["dsp"] == pytest.approx(32)
    assert rr["lut"] > pl.resources("rope", 16)["lut"]  # the wrapper costs LUTs the kernel's fit leaves out
    for k in ("lut", "ff", "dsp", "bram"):
        assert d["units"]["rope"][k] == pytest.approx(8 * rr[k])
    assert d["total"]["lut"] > u["total"]["lut"]
    assert sublayer.split_cost(s, sp)["pl"] == u
    best = sublayer.bert_base(512)
    assert max(best["pl"]["fraction"].values()) <= 0.8


# ------------------------------------------------------------------------------------------ every resource

#: the VCK5000's limits, as device.json gives them (with their sources): 400 AIE tiles; 156 in / 117 out usable
#: 128-bit PLIOs (CHARM);
#: 880K LUT after the shell, 1.8M FF less 2.2%, 1,968 DSP58, 967 BRAM36 less 100 and 463 URAM less 43 (CHARM)
LIMITS = {"aie_tiles": 400, "plio_in": 156, "plio_out": 117, "lut": 880_000, "ff": 1_760_000, "dsp": 1968,
          "bram": 867, "uram": 420}


def _split(r: dict) -> SublayerSplit:
    sp = r["split"]
    return SublayerSplit(**{**sp, "qkv_tile": tuple(sp["qkv_tile"]), "o_tile": tuple(sp["o_tile"])})


def test_every_resource_is_reported_and_within_the_cap_on_the_best_splits():
    for seq in (512, 128):
        r = sublayer.bert_base(seq)["resources"]
        assert set(r["fraction"]) == set(LIMITS) == set(r["used"]) == set(r["available"])
        assert r["available"] == pytest.approx(LIMITS)
        for k, v in r["fraction"].items():
            assert v == pytest.approx(r["used"][k] / LIMITS[k]) and 0 < v <= 0.8, (seq, k, v)
        assert r["fullest"] == max(r["fraction"], key=r["fraction"].get)
        # the PL's total is its parts': the attention pipelines, the PL units, the movers, the routers, the buffers
        for k in ("lut", "ff", "dsp", "bram", "uram"):
            assert r["used"][k] == pytest.approx(sum(p[k] for p in r["parts"].values()))
        assert r["parts"]["buffers"]["uram"] + r["parts"]["buffers"]["bram"] > 0
        assert min(r["parts"][p]["lut"] for p in ("attention", "movers", "routers")) > 0


def test_broadcast_groups_are_the_cascades_in_lock_step():
    """By hand: cascades with the same sequences in the same order share x streams."""
    # 2 blocks x 3 sequences on 4 cascades: [(0,0)], [(0,1),(0,2)], [(1,0)], [(1,1),(1,2)]: 0 and 2 run sequence
    # 0, 1 and 3 sequences 1 and 2
    assert sublayer.broadcast_groups(sublayer.deal_projection(2, 3, 4)) == [[0, 2], [1, 3]]
    # 3 blocks x 2 sequences on 2 cascades: sequences (0, 0, 1) and (0, 1, 1): no sharing
    assert sublayer.broadcast_groups(sublayer.deal_projection(3, 2, 2)) == [[0], [1]]
    # cascades dividing the blocks: one block each, every sequence in order: one group
    assert sublayer.broadcast_groups(sublayer.deal_projection(48, 8, 48)) == [list(range(48))]
    assert sublayer.share_groups(5, 2) == [[0, 1], [2, 3], [4]]


def test_plio_counts_by_hand():
    """S = 512, batch 8, 48 Q/K/V + 16 W_O cascades (one block each: one broadcast group a stage), 12 pipelines of
    2 + 2 kernels, one score channel each, a w PLIO a cascade."""
    s, sp = SublayerShape(batch=8, seq=512), SublayerSplit(48, 16, 12, 2, score_channels=1)
    io = sublayer.plios(s, sp)
    last8 = slowest(16, 48, (208, 208, 208, 144), 8)  # the cascades' K-slices (gemm_params)
    o_chain = slowest(8, 48, (208, 208, 208, 144), 32)
    # outputs merged as long as their tiles (768 B int8 / 1,536 B int32 at 3.2 B an AIE cycle) fit the compute
    # (~1,549 and ~829 cycles: 6 Q/K/V outputs a PLIO, W_O's one each)
    q_merge, o_merge = int(last8 // (768 / 3.2)), max(1, int(o_chain // (1536 / 3.2)))
    assert (q_merge, o_merge) == (6, 1)
    qkv_in = 768 // 192 + 48  # one x stream a K-slice (broadcast), a w PLIO a cascade
    o_in = 768 // 192 + 16
    att_in, att_out = 12 * (3 + 1), 12 * (1 + 1)  # q_in, k_in, v_in, p_in; s_out, o_out
    assert io["in"] == qkv_in + o_in + att_in == 120
    assert io["out"] == math.ceil(48 / q_merge) + math.ceil(16 / o_merge) + att_out == 48
    # a w PLIO for 4 cascades: 12 + 4
    assert sublayer.plios(s, SublayerSplit(48, 16, 12, 2, score_channels=1, w_share=4))["in"] == 120 - 48 - 16 + 16
    # 43 Q/K/V cascades over 48 blocks: the dealing's distinct sequence orders, counted here, each its 4 x streams
    dealt = sublayer.deal_projection(48, 8, 43)
    orders = {tuple(b for _, b in u) for u in dealt}
    sp43 = SublayerSplit(43, 16, 9, 4, score_channels=4)
    assert sublayer.plios(s, sp43)["in"] == 4 * len(orders) + 43 + 4 + 16 + 9 * (3 + 4) > 0.8 * 156


def pl_bram(kernel: str, lanes: int) -> float:
    from vckattn.hw.perf import pl

    return pl.resources(kernel, lanes)["bram"]


def test_buffer_banks_blocks_and_wiring_by_hand():
    """BERT-base, S = 512, batch 8, on 48 Q/K/V cascades, 16 W_O cascades and 12 pipelines: each buffer's banks of
    4,096 beats (a URAM's depth; two URAMs side by side for 128 bits, or 16 BRAM36), and the banks each stream is
    wired to, by hand."""
    s, sp = SublayerShape(batch=8, seq=512), SublayerSplit(48, 16, 12, 2, score_channels=1)
    b = sublayer.buffers(s, sp)
    bb = sublayer.banked_buffers(s, sp)
    n, d = 8 * 512, 768
    assert (b["x"]["bytes"], b["qkv"]["bytes"], b["a"]["bytes"]) == (n * d, 4 * 3 * 512 * d, 4 * 512 * d)
    # X: one region a K-slice of the Q/K/V cascade (208, 208, 208, 144 features): 4,096 tokens x 13 beats = 13
    # banks, x 9 beats = 9 banks; 48 banks = 96 URAM (85.3 URAM of bytes: a 128-bit beat in 144 bits)
    assert sublayer.gemm_params(sp.qkv_tile, d, 8).slices == (208, 208, 208, 144)
    assert b["x"]["banks"] == 3 * 13 + 9 == 48 and (b["x"]["uram"], b["x"]["bram"]) == (96, 48 * 16)
    assert math.ceil(8 * n * d / (4096 * 72)) == 86
    # Q/K/V: 36 heads x 4 slots x (512 x 64 / 16 = 2,048 beats) = 72 banks: a head's block of 4 slots is two
    # banks (slots 0-1, slots 2-3)
    assert b["qkv"]["banks"] == 4 * 36 * 2048 // 4096 == 72 and b["qkv"]["uram"] == 144
    # pipeline p serves head p of every sequence (96 groups dealt round-robin to 12): its q reader reads head p's
    # Q block (banks 2p, 2p + 1) and no other pipeline does; its k reader head p's K block after the 12 Q blocks
    q0 = bb["qkv"].readers[0]
    assert q0 == frozenset({0, 1})
    k5 = bb["qkv"].readers[3 * 5 + 1]
    assert k5 == frozenset({2 * 12 + 2 * 5, 2 * 12 + 2 * 5 + 1})
    assert all(not (bb["qkv"].readers[3 * p] & bb["qkv"].readers[3 * r]) for p in range(12) for r in range(p))
    # A: 4 sequences of W_O's K-slices (208, 208, 208, 144): 2,048 tokens x 13 beats = 26,624 beats = 7 banks
    # (6.5 filled), x 9 beats = 5 banks (4.5): 26 banks; pipeline p writes head p's 64 channels into the regions
    # of the K-slices that hold them (slices from features 0, 208, 416, 624)
    assert b["a"]["banks"] == 3 * 7 + 5 == 26 and (b["a"]["uram"], b["a"]["bram"]) == (52, 26 * 16)
    assert bb["a"].writers[0] == frozenset(range(7))  # channels 0-63: slice 0
    assert bb["a"].writers[3] == frozenset(range(14))  # 192-255: slices 0 and 1
    assert bb["a"].writers[4] == frozenset(range(7, 14))  # 256-319: slice 1
    assert bb["a"].writers[9] == frozenset(range(14, 26))  # 576-639: slices 2 and 3
    # every buffer's x readers: one a K-slice a broadcast group, wired to its region only
    groups = sublayer.plios(s, sp)["qkv"]["groups"]
    assert bb["x"].readers[:4] == (frozenset(range(13)), frozenset(range(13, 26)), frozenset(range(26, 39)),
                                   frozenset(range(39, 48)))
    assert len(bb["x"].readers) == 4 * groups + 16  # and a residual path a W_O cascade
    r = sublayer.resources(s, sp)
    placed = {k: v["memory"] for k, v in r["buffers"].items()}
    assert r["used"]["uram"] == sum(b[k]["uram"] for k in b if placed[k] == "uram")  # SwiftMax: no URAM of its own
    # the descriptor router's FIFOs (two of a reader's largest sequences) of 128 entries or more in block RAM, two
    # RAMB36 a 512: the 4 x readers' (32 descriptors a sequence: 128), the 16 residual readers' (4 rows of a record a
    # descriptor, 128 a sequence: 512; 256 for the two whose records reach two K-slices: 1,024) and the 4 a
    # readers' (256); the 36 q, k and v readers' (64 or fewer) in LUTRAM
    fifos = sublayer.descriptor_fifos(s, sp)
    assert fifos[:4] == [128] * 4 and sorted(fifos[4:20]) == [512] * 14 + [1024] * 2 and fifos[-4:] == [256] * 4
    assert len(fifos) == 60 and max(fifos[20:56]) == 64
    router_bram = 4 * 2 + 14 * 2 + 2 * 4 + 4 * 2
    assert r["parts"]["routers"]["bram"] == router_bram
    assert r["used"]["bram"] == sum(b[k]["bram"] for k in b if placed[k] == "bram") + 16 * pl_bram("residual", 4) + (
        3 * 2 + 16) * 1 + router_bram  # 16 residual adds; the AXI4 master ports of the X, weight and descriptor
    # movers (two each) and the 16 R writers (one each)


def test_buffer_logic_is_its_parts_fits():
    """The buffers' logic: each buffer's slot-buffer fit on its wires and banks, a reader a read port, a re-tiler a
    Q/K/V output PLIO, a row unit a residual path (hw/perf/data/pl_buffers.json, Yosys); checked on points it was
    not fitted on, every buffer of the full-size builds synthesized with its wiring: each build's buffers together
    within 15%, each buffer within 40% (the fit is linear in wires and banks; Yosys's logic is not: the encoder's
    Q/K/V buffer, many banks of one writer and one reader each, costs more a bank than the sweep's buffers)."""
    from vckattn.hw.perf import banks

    s, sp = SublayerShape(batch=8, seq=512), SublayerSplit(48, 16, 12, 2, score_channels=1)
    bb = sublayer.banked_buffers(s, sp)
    fit = banks.load_data()["slot_buffer"]["fit"]["lut"]
    ports = sum(len(x.readers) for x in bb.values())

    def terms(x: banks.BankedBuffer) -> dict[str, float]:  # wires; each bank's n·log2 n multiplexer trees
        w = [sum(b in st for st in x.writers) for b in range(x.banks)]
        r = [sum(b in st for st in x.readers) for b in range(x.banks)]
        return {"write_pairs": sum(w), "read_pairs": sum(r), "banks": x.banks,
                "write_mux": sum(n * math.log2(n) for n in w if n > 1),
                "read_mux": sum(n * math.log2(n) for n in r if n > 1)}

    want = sum(max(0.0, fit["base"] + sum(fit[f"per_{k}"] * v for k, v in terms(x).items())) for x in bb.values())
    want += ports * banks.load_data()["buffer_reader"]["cost"]["lut"] + len(bb["qkv"].writers) * (
        banks.load_data()["retiler"]["fit"]["lut"]["base"] + 48 * banks.load_data()["retiler"]["fit"]["lut"]["per_col"])
    # a residual path's row unit beside each of the 16 W_O cascades (its records 48 channels: 3 blocks a row)
    xr = banks.load_data()["x_rows"]["fit"]["lut"]
    assert sublayer.residual_paths(s, sp) == 16
    want += 16 * (xr["base"] + 3 * xr["per_row_beat"])
    assert sublayer.buffer_logic(s, sp)["lut"] == pytest.approx(want)
    assert sublayer.resources(s, sp)["parts"]["buffer_logic"]["lut"] == pytest.approx(want)
    held = banks.load_data()["slot_buffer"]["held_out"]
    assert {(h["build"], h["buffer"]) for h in held} == {("vck5000_sublayer", k) for k in ("x", "qkv", "a")} | {
        ("vck5000_sublayer_decoder", k) for k in ("x", "u", "qkv", "a")}
    for build in ("vck5000_sublayer", "vck5000_sublayer_decoder"):
        mine = [h for h in held if h["build"] == build]
        assert sum(h["fit"]["lut"] for h in mine) == pytest.approx(sum(h["lut"] for h in mine), rel=0.15)
    for h in held:
        assert abs(h["rel_error"]["lut"]) <= 0.40 and abs(h["rel_error"]["ff"]) <= 0.05, h


def test_the_buffer_fit_takes_the_terms_the_sweep_predicts_best():
    """The slot buffer fit's terms are the candidate set whose leave-one-out error over the sweep's own points is the
    smallest (hw/perf/data/pl_buffers.json: candidates), and it predicts them better than wires alone."""
    from vckattn.hw.perf import banks

    cand = banks.load_data()["slot_buffer"]["candidates"]
    best = min(cand, key=lambda c: cand[c]["mean"])
    assert best == " + ".join(banks.FEATURES)
    assert cand[best]["mean"] < cand["write_pairs + read_pairs + banks"]["mean"]


def test_a_split_over_any_resource_is_ruled_out():
    """A device with fewer LUTs rules the default best split out; one with too few PLIOs or URAM/BRAM has no
    split at all; every split searched stays within the cap of every resource."""
    s = SublayerShape(batch=8, seq=128)
    best = sublayer.bert_base(128)
    lut = best["resources"]["used"]["lut"]
    small = sublayer.best_split(s, limits={"lut": lut / 0.8 * 0.95})
    assert small["resources"]["used"]["lut"] <= 0.8 * lut / 0.8 * 0.95 < lut
    assert small["split"] != best["split"] and small["seconds"] >= best["seconds"]
    with pytest.raises(ValueError, match="no split fits"):
        sublayer.best_split(s, limits={"plio_in": 10})  # 4 + 1 + 4 + 1 + 4 in at the least
    with pytest.raises(ValueError, match="no split fits"):
        sublayer.best_split(s, limits={"uram": 10, "bram": 100})  # X alone: 786 KB
    tiny = SublayerShape(batch=2, seq=128, heads=6)  # the first splits searched (the whole search is ~45,000)
    for c in itertools.islice(sublayer.splits(tiny, limits=(("plio_out", 60),)), 400):
        assert max(c["resources"]["fraction"].values()) <= 0.8 and c["resources"]["used"]["plio_out"] <= 48


def test_swiftmax_lanes_multiply_in_dsps_when_the_luts_are_short():
    """The same split with the SwiftMax products in DSP blocks: fewer LUTs, 16 DSPs a 16-lane instance more (the
    Yosys fits); a device short of LUTs gets the DSP build."""
    from vckattn.hw.perf import pl

    s = SublayerShape(batch=8, seq=128)
    best = sublayer.bert_base(128)
    sp = _split(best)
    lut = sublayer.resources(s, sp)["used"]
    dsp = sublayer.resources(s, SublayerSplit(**{**best["split"], "qkv_tile": sp.qkv_tile, "o_tile": sp.o_tile,
                                                 "swiftmax_products": "dsp"}))["used"]
    inst = sp.n_att * sp.channels
    assert dsp["dsp"] - lut["dsp"] == pytest.approx(inst * pl.resources("swiftmax", 16, 8, "dsp")["dsp"])
    assert lut["lut"] - dsp["lut"] == pytest.approx(inst * (pl.resources("swiftmax", 16, 8)["lut"]
                                                            - pl.resources("swiftmax", 16, 8, "dsp")["lut"]))
    short = sublayer.best_split(s, limits={"lut": (dsp["lut"] + 1) / 0.8})
    assert short["split"]["swiftmax_products"] == "dsp"


def test_a_decoder_sized_rope_fits_with_a_unit_a_plio():
    """RoPE on every Q/K/V output PLIO of the best S = 128 split (48 cascades, 8 PLIOs) with the rest of the
    sublayer: within 80% of the PL; each unit its own table of 128 positions (8 BRAM36: 16 features' cos and sin a
    lane bank, as synthesized)."""
    s = SublayerShape(batch=8, seq=128)
    sp = _split(sublayer.bert_base(128))
    assert sp.n_qkv == 48
    r = sublayer.resources(s, sp, rope=True)
    assert max(r["fraction"].values()) <= 0.8
    rope = sublayer.pl_units(s, sp, rope=True)["units"]["rope"]
    assert rope["count"] == sublayer.plios(s, sp)["qkv"]["out"] == 8
    assert rope["bram"] == pytest.approx(8 * banks.rope_records_cost(rope["lanes"], 128)["bram"]) and \
        rope["bram"] == pytest.approx(8 * 8)


def test_x_in_slots_when_all_of_it_does_not_fit():
    """Batch 32 at S = 512: all of X (12 MiB, 342 URAM) does not fit beside the Q/K/V buffer, so the best split
    holds 4 sequences of it and reads each again from DDR for the residual (N·d more DDR bytes); by hand."""
    s = SublayerShape(batch=32, seq=512)
    n, d = 32 * 512, 768
    sp = SublayerSplit(48, 16, 7, 4, score_channels=4, w_share=4)
    whole, slots = sublayer.split_cost(s, sp), sublayer.split_cost(s, SublayerSplit(**{**sp.__dict__,
                                                                                      "x_on_chip": False}))
    assert whole["resources"]["buffers"]["x"]["bytes"] == n * d
    assert slots["resources"]["buffers"]["x"]["bytes"] == 4 * 512 * d
    assert math.ceil(8 * n * d / (4096 * 72)) == 342 and whole["resources"]["fraction"]["uram"] > 0.8
    assert slots["ddr_bytes"] - whole["ddr_bytes"] == n * d
    assert max(slots["resources"]["fraction"].values()) <= 0.8
    best = sublayer.best_split(s)
    assert best["split"]["x_on_chip"] is False and max(best["resources"]["fraction"].values()) <= 0.8


#: SmolLM2-135M's sublayer converted to BHyT: 9 query and 3 K/V heads of 64, RoPE, causal
SMOLLM2 = SublayerShape(batch=8, seq=512, heads=9, head_dim=64, kv_heads=3, family="decoder")


def test_a_decoder_counts_its_grouped_query_projection_and_its_causal_attention():
    """Q/K/V: (9 + 2·3)·64 = 960 outputs a token; attention: only the keys at or before each query."""
    m = sublayer.sublayer_macs(SMOLLM2)
    n, d = 8 * 512, 576
    assert m == {"qkv": n * d * 960, "attention": 2 * 8 * 9 * (512 * 513 // 2) * 64, "o": n * d * d}
    assert SMOLLM2.qkv_cols == 960 and SublayerShape(8, 512).qkv_cols == 3 * 768
    with pytest.raises(ValueError, match="kv_heads 4 must divide heads 9"):
        SublayerShape(8, 512, heads=9, kv_heads=4)
    with pytest.raises(ValueError, match="family"):
        SublayerShape(8, 512, family="vit")


def test_a_decoder_runs_site_a_first_with_units_that_keep_pace_and_keeps_u_beside_x():
    """Site A (BHyT's exact site, its statistic on chip) is the decoder's first stage: as many 16-lane units as
    keep a sequence within the Q/K/V stage's time for it, their resources and the U buffer counted; the attention
    geometry is causal with 3 K/V heads; a RoPE unit on each Q/K/V output PLIO."""
    sp = SublayerSplit(**sublayer.best_split(SMOLLM2)["split"])
    c = sublayer.split_cost(SMOLLM2, sp)
    assert list(c["stages"]) == ["site", "qkv", "attention", "o"]
    units = sublayer.site_units(SMOLLM2, sp)
    assert units >= 2 and c["stages"]["site"]["units"] == units
    per_seq = c["stages"]["qkv"]["seconds"] / 8
    assert sublayer.site_seconds(SMOLLM2, sp) <= per_seq
    if units > 1:  # one unit fewer would not keep pace
        from vckattn.hw.pl import timing
        tokens = -(-512 // (units - 1))
        assert timing.stream_cycles("bhyt_exact", tokens, 576, 16) / 250e6 > per_seq
    pl = sublayer.pl_units(SMOLLM2, sp)["units"]
    assert pl["bhyt_exact"]["count"] == units and pl["rope"]["count"] == sublayer.plios(SMOLLM2, sp)["qkv"]["out"]
    bufs = sublayer.buffers(SMOLLM2, sp)
    assert bufs["u"]["bytes"] == 4 * 512 * 576 and bufs["qkv"]["bytes"] == 4 * 512 * 960
    g = sublayer.attention_geometry(SMOLLM2, sp)
    assert g.causal and g.kv_heads == 3
    enc = sublayer.split_cost(SublayerShape(8, 512), SublayerSplit(**sublayer.bert_base(512)["split"]))
    assert "site" not in enc["stages"] and "u" not in sublayer.buffers(SublayerShape(8, 512),
                                                                        SublayerSplit(**enc["split"]))


def test_a_decoder_q_k_v_tile_holds_whole_head_rows():
    """RoPE rotates features f and f + D/2 of a head row, so a decoder's Q/K/V output record must hold whole head
    rows: a 48-channel tile is refused (naming RoPE), the encoder (no RoPE) keeps it, and the decoder's search
    uses 64-channel tiles."""
    dec = SublayerShape(batch=8, seq=512, heads=9, head_dim=64, kv_heads=3, family="decoder")
    with pytest.raises(ValueError, match="RoPE"):
        sublayer.split_cost(dec, SublayerSplit(20, 24, 14, 4, qkv_tile=(16, 48, 192), score_channels=2))
    sublayer.split_cost(dec, SublayerSplit(20, 24, 14, 4, qkv_tile=(16, 64, 96), score_channels=2))
    sublayer.split_cost(SublayerShape(batch=8, seq=512), SublayerSplit(36, 16, 12, 4, score_channels=2))
    assert sublayer.default_qkv_tile(dec) == (16, 64, 96)
    assert sublayer.best_split(dec)["split"]["qkv_tile"][1] % 64 == 0


@pytest.mark.parametrize("name", ["vck5000_sublayer", "vck5000_sublayer_decoder"])
def test_the_descriptor_fifos_are_the_launchs_own_lists(name):
    """The descriptor router of a full-size build: a FIFO a reader the model wires (a decoder's site readers among
    them, counted from their own runs), each reader's runs inside the banks it is wired to, each FIFO two of its
    largest sequences; and its routers' BRAM the rule's."""
    from vckattn.hw.design.sublayer_build import FULL_SIZE_BUILDS, FULL_SIZE_SHAPES, split_of
    from vckattn.hw.perf import banks
    from vckattn.hw.spec.descriptors import DESCRIPTOR_BEATS

    s = SublayerShape(**FULL_SIZE_SHAPES[name])
    sp = SublayerSplit(**split_of(FULL_SIZE_BUILDS[name]))
    bb, runs = sublayer.banked_buffers(s, sp), sublayer.launch_runs(s, sp)
    assert sum(len(b.readers) for b in bb.values()) == sum(len(r) for r in runs.values())
    for key, rr in runs.items():
        wired = bb[key].readers  # a decoder's X buffer: its site readers first
        assert len(wired) == len(rr)
        for banks_of, reader in zip(wired, rr, strict=True):
            assert {b for r in reader if not r.quiet for b in
                    range(r.first // banks.BANK_BEATS, (r.first + r.beats - 1) // banks.BANK_BEATS + 1)} <= banks_of
    fifos = sublayer.descriptor_fifos(s, sp)
    mine = [2 * DESCRIPTOR_BEATS * max(sum(r.b == b for r in reader) for b in range(s.batch))
            for rr in runs.values() for reader in rr]
    assert fifos == [max(4, m) for m in mine]
    # residual readers: 4 rows of a record a descriptor (a BERT-base W_O record of 8 rows x 48 channels)
    assert max(fifos) >= 512
    assert sublayer.routers(s, sp)["bram"] == banks.router_bram(fifos) > 0


def test_the_rope_units_cost_is_their_synthesis_fit():
    """Every RoPE unit on the records the sweep synthesized (hw/perf/data/pl_buffers.json: rope_records, Yosys)
    within 5% of the fit in LUTs (LUTRAM counted as 8 LUTs a cell) and FFs, its DSP and BRAM exactly: 2 DSP a lane,
    a BRAM36 every 16 positions."""
    for p in banks.load_data()["rope_records"]["points"]:
        cost = banks.rope_records_cost(p["lanes"], p["max_pos"])
        assert cost["lut"] == pytest.approx(p["lut_total"], rel=0.05), p
        assert cost["ff"] == pytest.approx(p["ff"], rel=0.05), p
        assert (round(cost["dsp"]), round(cost["bram"])) == (p["dsp"], p["bram"])
        assert (p["dsp"], p["bram"]) == (2 * p["lanes"], p["max_pos"] // 16)


def test_the_routers_cost_is_their_synthesis_fit():
    """Every stream router the sweep synthesized (hw/perf/data/pl_buffers.json: stream_router, Yosys) within 20% of
    the fit in LUTs (LUTRAM counted as 8 LUTs a cell) and FFs, its BRAM exactly the model's rule."""
    from vckattn.hw.perf import banks

    points = banks.load_data()["stream_router"]["points"]
    assert {p["depth"] < banks.ROUTER_BRAM_DEPTH for p in points} == {True, False}  # LUTRAM and block-RAM FIFOs
    for p in points:
        cost = banks.router_cost([p["depth"]] * int(p["outputs"]))
        assert cost["lut"] == pytest.approx(p["lut_total"], rel=0.2), p
        assert cost["ff"] == pytest.approx(p["ff"], rel=0.2), p
        assert cost["bram"] == p["bram"], p

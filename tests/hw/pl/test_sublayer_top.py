"""The sublayer's PL top (hw/pl/sublayer_top.py, made from a split by hw/design/pl_top.py) on Verilator through
cocotb (sim/tb_sublayer_top.py), an encoder's and a decoder's: one launch through every path at once, every reader's
descriptors from one routed stream, the weights through the w router, the residual units (a decoder's RoPE and site
units too) programmed through the one register port; every output must be golden's. And what the top refuses."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from vckattn.hw.design.pl_top import (
    TopError,
    launch_headers,
    qkv_records,
    r_writer_args,
    register_writes,
    top_plan,
    weight_bytes,
    weight_image,
    weight_list,
    weight_loads,
    x_list,
)
from vckattn.hw.perf import engine, sublayer
from vckattn.hw.perf.sublayer import SublayerShape, SublayerSplit
from vckattn.hw.pl.sublayer_top import top_regmaps
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_sublayer_top"
#: 6 sequences of 32 tokens, 4 heads of 16 features (d_model 64), all of X on chip; 8 Q/K/V cascades of 8 x 16
#: tiles over K-slices of 48 and 16 features (six, then two, to an output PLIO), 4 attention pipelines of 2 + 2
#: kernels, 4 W_O cascades of 8 x 32 tiles in two broadcast groups (a cascade an output PLIO: a residual path
#: each); banks of 64 beats
SHAPE = SublayerShape(batch=6, seq=32, heads=4, head_dim=16, kv_heads=4, family="encoder")
SPLIT = SublayerSplit(8, 4, 4, 2, q_rows=8, qkv_tile=(8, 16, 32), o_tile=(8, 32, 32), score_channels=1)
BANK_BEATS = 64
#: the decoder: 6 sequences of 32 tokens, 2 query heads and 1 K/V head of 32 features (d_model 64, RoPE on records
#: of one head row, 32 channels), the encoder's split otherwise: two site units from X to U, two RoPE units (four
#: cascades to an output PLIO)
DECODER = SublayerShape(batch=6, seq=32, heads=2, head_dim=32, kv_heads=1, family="decoder")
DECODER_SPLIT = dataclasses.replace(SPLIT, qkv_tile=(8, 32, 32))


def unit_registers(s: SublayerShape, p: object) -> tuple[dict, list]:
    """Random constants of the top's units, as JSON for the testbench (which computes golden's outputs with them),
    and the writes that program them (register_writes): the residual units' per-channel rq_y and rq_x; a decoder's
    RoPE tables of random angles and a typical BHyT site A (λ 2, κ 10, random-sign γ)."""
    from vckattn.golden.bhyt_int import bhyt_site_registers
    from vckattn.golden.requant import RequantRegisters
    from vckattn.golden.sublayer import ResidualRegisters
    from vckattn.sim.tb_rope_records import random_angle_tables

    rng = np.random.default_rng(2026)
    d = s.d_model
    res = {"y_mult": rng.integers(1 << 14, 1 << 17, size=d).tolist(), "y_shift": rng.integers(20, 28, size=d).tolist(),
           "x_mult": int(rng.integers(1 << 16, 1 << 17)), "x_shift": int(rng.integers(10, 20))}
    residual = ResidualRegisters(RequantRegisters(np.asarray(res["y_mult"]), np.asarray(res["y_shift"])),
                                 RequantRegisters(np.int64(res["x_mult"]), np.int64(res["x_shift"])), 1.0)
    out: dict = {"residual": res}
    rope = site = None
    if s.decoder:
        rope = random_angle_tables(rng, p.rope_max_seq, s.head_dim)
        site = bhyt_site_registers(2.0, 10.0, rng.uniform(0.25, 1.75, d) * rng.choice([-1.0, 1.0], d), d, 0.05, 0.05)
        out["rope_tables"] = [t.tolist() for t in rope]
        out["site"] = {**site.scalars(), "gamma": np.asarray(site.gamma).tolist(), "s_out": site.s_out}
    return out, [list(w) for w in register_writes(p, d, residual, rope, site)]


def mover_streams(s: SublayerShape, sp: SublayerSplit, tp: object) -> dict:
    """A launch's X (random int8, its extremes among it) and the streams the X and descriptor movers send for it:
    the host's lists (x_list; the routed descriptors of every run with its header beat, launch_headers) through the
    list mover in C-simulation, each packet (to TLAST) a list of hex beats."""
    from vckattn.hw.spec.descriptors import mover_list, routed_descriptors
    from vckattn.sim.sublayer_movers_csim import mm2s_list
    from vckattn.sim.tb_residual import random_x

    def packets(cmds: np.ndarray, src: np.ndarray) -> list[list[str]]:
        data, last, sent = mm2s_list(cmds, src)
        assert sent == len(cmds)
        ends = np.flatnonzero(last)
        starts = [0, *(ends[:-1] + 1)]
        return [[beat.tobytes().hex() for beat in data[a:z + 1]] for a, z in zip(starts, ends, strict=True)]

    x = random_x(np.random.default_rng(5), s.batch * s.seq * s.d_model).reshape(s.batch, s.seq, s.d_model)
    heads = launch_headers(s, sp, tp, [s.seq] * s.batch)
    desc = routed_descriptors([list(zip(rr, hh, strict=True)) for rr, hh in zip(tp.runs, heads, strict=True)])
    return {"x_data": x.tolist(), "x_stream": packets(*x_list(s, sp, x)), "desc_stream": packets(*mover_list(desc)),
            "headers": [[h.hex() for h in hh] for hh in heads]}


def plan(s: SublayerShape, sp: SublayerSplit) -> tuple[object, dict]:
    tp = top_plan(s, sp, BANK_BEATS, max_d=s.d_model)
    p = tp.params
    rows, cols = sp.qkv_tile[:2]
    qkv_writers = qkv_records(s, sp)
    g = sublayer.attention_geometry(s, sp)
    o_units = [u for u in sublayer.deal_projection(s.d_model // sp.o_tile[1], s.batch, sp.n_o) if u]
    top = tp.top()
    w_stream = [[int(w.stream), [cmd.tobytes().hex() for cmd in cmds]] for w, cmds in weight_list(s, sp)]
    image_bytes = max(o + 16 * n for o, n in weight_image(s, sp).values())
    regs, writes = unit_registers(s, p)
    return top, {**regs, **mover_streams(s, sp, tp), "register_writes": writes, "batch": s.batch, "heads": s.heads,
                 "head_dim": s.head_dim,
                 "q_rows": sp.q_rows,
                 "x": dataclasses.asdict(p.x_layout), "a": dataclasses.asdict(p.a_layout),
                 "qkv": dataclasses.asdict(p.qkv_layout), "qkv_rows": rows, "qkv_cols": cols,
                 "qkv_writers": qkv_writers, "a_writers": engine.deal(g.groups, sp.n_att), "o_units": o_units,
                 "readers": p.readers, "runs": [[dataclasses.asdict(r) for r in rr] for rr in tp.runs],
                 "o_rows": p.o_rows, "o_cols": p.o_cols, "w_streams": p.w_streams, "max_d": p.max_d,
                 "sub_width": top.decoder.sub_width, "buffers": [list(b) for b in p.buffers],
                 "windows": [name for name, _ in top_regmaps(p)[0]], "weights": w_stream, "image_bytes": image_bytes,
                 **({"u": dataclasses.asdict(p.u_layout),
                     "rope": {"rotated": p.rope_rotated, "lanes": p.rope_lanes, "max_seq": p.rope_max_seq}}
                    if p.decoder else {})}


def test_the_top_is_the_models_split():
    """The top's parts are those the model costs: a re-tiler a Q/K/V output PLIO, an A writer a pipeline, a reader a
    buffer read port, a residual path a W_O output PLIO, a w router output a w PLIO, a descriptor FIFO a reader at the
    model's depths."""
    tp = top_plan(SHAPE, SPLIT, BANK_BEATS)
    p, io = tp.params, sublayer.plios(SHAPE, SPLIT)
    assert len(p.qkv_write_banks) == io["qkv"]["out"] and len(p.a_write_banks) == SPLIT.n_att
    assert len(p.residual_banks) == io["o"]["out"] == sublayer.residual_paths(SHAPE, SPLIT)
    assert p.w_streams == io["qkv"]["w"] + io["o"]["w"]
    assert len(p.x_read_banks) == io["qkv"]["x"] and len(p.a_read_banks) == io["o"]["x"]
    full = top_plan(SHAPE, SPLIT)  # the model's banks
    assert list(full.params.desc_depths) == sublayer.descriptor_fifos(SHAPE, SPLIT)


def test_the_weight_loads_cover_every_cascades_units_sequence_by_sequence():
    """Every cascade's loads: a load a K-slice of each run of units with one block, its row tiles those units' (the
    launch's row tiles, consecutive), the W_O cascades' after the Q/K/V cascades' of the same sequence, every load
    of sequence b before any of b + 1; packet ids those of the cascade's place in its w group."""
    loads = weight_loads(SHAPE, SPLIT)
    assert [w.b for w in loads] == sorted(w.b for w in loads)
    for name, tile, cols, n in (("qkv", SPLIT.qkv_tile, SHAPE.qkv_cols, SPLIT.n_qkv),
                                ("o", SPLIT.o_tile, SHAPE.d_model, SPLIT.n_o)):
        k = len(sublayer.gemm_params(tile, SHAPE.d_model, 8 if name == "qkv" else 32).slices)
        per_seq = SHAPE.seq // tile[0]
        dealt = [u for u in sublayer.deal_projection(cols // tile[1], SHAPE.batch, n) if u]
        for c, units in enumerate(dealt):
            mine = [w for w in loads if (w.stage, w.cascade) == (name, c)]
            assert sorted({w.slice for w in mine}) == list(range(k))
            for j in range(k):
                tiles = [(w.col_block, t) for w in mine if w.slice == j for t in range(w.first_tile,
                                                                                       w.first_tile + w.tiles)]
                assert tiles == [(blk, b * per_seq + t) for blk, b in units for t in range(per_seq)]
            assert {w.packet for w in mine} == {(c % SPLIT.w_share) * k + j for j in range(k)}
    assert len({w.stream for w in loads}) == sublayer.plios(SHAPE, SPLIT)["qkv"]["w"] + \
        sublayer.plios(SHAPE, SPLIT)["o"]["w"]


@pytest.mark.tool("g++", "hls4ml")
def test_the_weight_movers_list_sends_a_routed_packet_a_load():
    """The weight mover's list through the list mover (C-simulation): a packet (to TLAST) a load, its ROUTE beat to
    the load's w stream, its WSLICE header, then the load's block and K-slice of the weight image, whole."""
    from vckattn.hw.spec import streams
    from vckattn.sim.sublayer_movers_csim import mm2s_list

    wl = weight_list(SHAPE, SPLIT)
    image = weight_image(SHAPE, SPLIT)
    src = np.random.default_rng(3).integers(0, 256, max(o + 16 * n for o, n in image.values()), dtype=np.uint8)
    data, last, sent = mm2s_list(np.concatenate([c for _, c in wl]), src)
    assert sent == 2 * len(wl) and last.sum() == len(wl)
    ends = np.flatnonzero(last)
    starts = np.concatenate([[0], ends[:-1] + 1])
    for (w, _), a, z in zip(wl, starts, ends, strict=True):
        route = streams.decode("route", data[a])
        assert (route["dest"], route["op"]) == (w.stream, streams.OP_ROUTE)
        head = streams.decode("wslice", data[a + 1])
        assert (head["packet_id"], head["slice"], head["col_block"], head["first_tile"], head["tiles"]) == \
            (w.packet, w.slice, w.col_block, w.first_tile, w.tiles)
        offset, beats = image[(w.stage, w.col_block, w.slice)]
        assert z - a - 1 == beats and data[a + 2:z + 1].tobytes() == src[offset:offset + 16 * beats].tobytes()


def test_the_decoders_top_is_the_models_split():
    """A decoder's top: the model's site units, each reading X and writing U; the U buffer's x readers; a RoPE unit a
    Q/K/V output PLIO rotating the Q and K channels, of the model's lanes; the descriptor FIFOs at the model's
    depths; a register window a unit."""
    tp = top_plan(DECODER, DECODER_SPLIT, BANK_BEATS)
    p, io = tp.params, sublayer.plios(DECODER, DECODER_SPLIT)
    assert p.readers["site"] == sublayer.site_units(DECODER, DECODER_SPLIT) == 2
    assert p.readers["x"] == io["qkv"]["x"] and p.u_layout.slots == sublayer.SEQUENCE_SLOTS
    assert p.rope_units == io["qkv"]["out"] == sublayer.pl_units(DECODER, DECODER_SPLIT)["units"]["rope"]["count"]
    assert p.rope_rotated == 3 * 32 and p.rope_lanes == sublayer.rope_lanes(DECODER, DECODER_SPLIT)
    assert list(top_plan(DECODER, DECODER_SPLIT).params.desc_depths) == \
        sublayer.descriptor_fifos(DECODER, DECODER_SPLIT)
    wins = [name for name, _ in top_regmaps(p)[0]]
    assert wins == ["status", *(f"r{i}" for i in range(4)), "rope0", "rope1", "site0", "site1"]


@pytest.mark.parametrize("family", ["encoder", "decoder"])
def test_the_gemm_kernels_take_every_xtile_with_its_weights(family):
    """The x and a readers' XTILE headers (launch_headers) are what each projection kernel checks: its K-slice as
    packet id and slice, and, cascade by cascade, the tags in the order the kernel takes them are the row tiles of its
    weight loads in order (each load's first_tile .. + tiles: a kernel refuses a tile its weights do not serve)."""
    from vckattn.hw.spec import streams

    s, sp = (SHAPE, SPLIT) if family == "encoder" else (DECODER, DECODER_SPLIT)
    tp = top_plan(s, sp, BANK_BEATS)
    heads = launch_headers(s, sp, tp, [s.seq] * s.batch)
    assert [len(h) for h in heads] == [len(r) for r in tp.runs]
    n = tp.params.readers
    x_first = n["site"] + n["residual"] if family == "decoder" else 0
    loads = weight_loads(s, sp)
    checked = 0
    for stage, tile, cols, cascades, first, bits in (("qkv", sp.qkv_tile, s.qkv_cols, sp.n_qkv, x_first, 8),
                                                     ("o", sp.o_tile, s.d_model, sp.n_o, sum(n.values()) - n["a"], 32)):
        k = len(sublayer.gemm_params(tile, s.d_model, bits).slices)
        dealt = sublayer.deal_projection(cols // tile[1], s.batch, cascades)
        work = [c for c in range(len(dealt)) if dealt[c]]
        for gi, grp in enumerate(sublayer.broadcast_groups(dealt)):
            for j in range(k):
                r = first + gi * k + j
                sent = [streams.decode("xtile", np.frombuffer(h, np.uint8))
                        for h, run in zip(heads[r], tp.runs[r], strict=True) if not run.quiet]
                assert {(d["packet_id"], d["slice"], d["op"]) for d in sent} == {(j, j, streams.OP_X_TILE)}
                for c in grp:
                    want = [t for w in loads if (w.stage, w.cascade, w.slice) == (stage, work.index(c), j)
                            for t in range(w.first_tile, w.first_tile + w.tiles)]
                    assert [d["tag"] for d in sent] == want, (stage, c, j)
                    checked += 1
    assert checked >= 2 * 2


@pytest.mark.tool("g++", "hls4ml")
def test_the_weight_image_is_what_the_gemm_kernels_compute_with():
    """A layer's weight image (weight_bytes), each load's WSLICE header (weight_list) on its payload from the image,
    through the GEMM cascades in C-simulation: the Q/K/V cascade's requantized int8 and the W_O cascade's int32 Y are
    golden's, for every output block."""
    from vckattn.golden.quant_attention import QuantLinear
    from vckattn.golden.requant import requant_registers, requantize
    from vckattn.hw.spec.streams import BEAT_BYTES
    from vckattn.sim.gemm_csim import gemm_buffers, run_gemm

    s, sp = DECODER, DECODER_SPLIT
    rng = np.random.default_rng(11)
    d = s.d_model
    x = rng.integers(-128, 128, (2 * sp.qkv_tile[0] + 3, d)).astype(np.int8)
    wq, bq = rng.integers(-128, 128, (s.qkv_cols, d)).astype(np.int8), rng.integers(-5000, 5000, s.qkv_cols)
    rq = requant_registers(2.0 ** rng.uniform(-13, -10, s.qkv_cols))
    wo, bo = rng.integers(-128, 128, (d, d)).astype(np.int8), rng.integers(-5000, 5000, d)
    image = weight_bytes(s, sp, (wq, bq, rq), (wo, bo))
    offsets = weight_image(s, sp)
    assert len(image) == max(o + BEAT_BYTES * n for o, n in offsets.values())
    for name, tile, (w, b, r), bits in (("qkv", sp.qkv_tile, (wq, bq, rq), 8), ("o", sp.o_tile, (wo, bo, None), 32)):
        p = sublayer.gemm_params(tile, d, bits)
        xs, ws, t = gemm_buffers(p, x, w, b, r)
        ours = []
        for j in range(p.kernels):  # golden's own headers, each block's payload from the image
            size = p.w_buffer_bytes(j)
            heads = [ws[j][i * size:i * size + BEAT_BYTES] for i in range(len(ws[j]) // size)]
            ours.append(b"".join(h + image[o:o + BEAT_BYTES * n].tobytes()
                                 for blk, h in enumerate(heads) for o, n in [offsets[(name, blk, j)]]))
            assert ours[j] == ws[j]
        res = run_gemm(p, x, w, b, r, buffers=(xs, ours, t))
        acc = QuantLinear(w, np.ones(len(b)), b).acc(x)
        want = acc if r is None else requantize(acc, r)
        assert res.ok and np.array_equal(res.out.astype(np.int64), want)


@pytest.mark.tool("g++", "hls4ml")
def test_the_x_movers_list_puts_every_token_where_the_x_buffer_holds_it():
    """X of a launch (shorter than the build's sequences: zero padded) through the list mover in C-simulation
    (x_list): a packet a sequence, its RESULT header naming it; its beats, written where the X writer puts them
    (region by region from the sequence's slot), are each token's 16 features at SliceLayout.beat."""
    from vckattn.hw.spec import streams
    from vckattn.sim.sublayer_movers_csim import mm2s_list

    s, sp = DECODER, DECODER_SPLIT
    lay = sublayer.x_layout(s, sp)
    x = np.random.default_rng(4).integers(-128, 128, (s.batch, s.seq - 5, s.d_model)).astype(np.int8)
    data, last, sent = mm2s_list(*x_list(s, sp, x))
    assert sent == s.batch and last.sum() == s.batch
    ends = np.flatnonzero(last)
    xp = np.zeros((s.batch, s.seq, s.d_model), np.int8)
    xp[:, :x.shape[1]] = x
    for b, (a, z) in enumerate(zip([0, *(ends[:-1] + 1)], ends, strict=True)):
        assert streams.decode("result", data[a])["tile_id"] == b
        payload, image = data[a + 1:z + 1], {}
        for j, k in enumerate(lay.slices):  # the X writer's addresses (hw/pl/x_writer.py)
            n = s.seq * k // 16
            base = lay.region_first(j) + (b % lay.slots) * n
            image.update({base + i: payload[sum(s.seq * kk // 16 for kk in lay.slices[:j]) + i] for i in range(n)})
        assert len(image) == len(payload)
        for t in range(s.seq):
            for f in range(0, s.d_model, 16):
                assert image[lay.beat(b, t, f)].view(np.int8).tolist() == xp[b, t, f:f + 16].tolist(), (b, t, f)


@pytest.mark.tool("g++", "hls4ml")
def test_the_r_writers_put_every_residual_row_in_r_once():
    """Each R writer (C-simulation) with its arguments (r_writer_args) on its residual path's records, as the top sends
    them (a header with elem_bits 8, then the record's rows of R): together they write every token and channel of R
    once, each where its record's tile id and column block say; none refuses a record or leaves a beat."""
    from vckattn.hw.spec import streams
    from vckattn.sim.sublayer_movers_csim import s2mm_records

    s, sp = SHAPE, SPLIT
    rows, cols = sp.o_tile[:2]
    tiles = s.seq // rows
    r = np.random.default_rng(8).integers(-128, 128, (s.batch * s.seq, s.d_model)).astype(np.int8)
    r[r.view(np.uint8) == 0xA5] = 0  # the C-simulation's mark of a byte never written
    units = [u for u in sublayer.deal_projection(s.d_model // cols, s.batch, sp.n_o) if u]
    args = r_writer_args(s, sp)
    assert len(args) == len(units) == sublayer.residual_paths(s, sp)
    written = np.zeros(r.shape, np.int64)
    for us, a in zip(units, args, strict=True):
        records = b"".join(streams.encode("gresult", tile_id=b * tiles + t, rows=rows, col_block=blk, elem_bits=8,
                                          cols=cols).tobytes()
                           + r[(b * tiles + t) * rows:(b * tiles + t + 1) * rows, blk * cols:(blk + 1) * cols].tobytes()
                           for blk, b in us for t in range(tiles))
        out, status, left = s2mm_records(np.frombuffer(records, np.uint8), **a)
        assert status == 0 and left == 0
        mine = out.view(np.uint8) != 0xA5
        assert np.array_equal(out[mine], r[mine])
        written += mine
    assert (written == 1).all()


def test_what_the_top_does_not_build_is_refused():
    with pytest.raises(TopError, match="RoPE units rotate whole head rows of 32"):
        top_plan(DECODER, SPLIT, BANK_BEATS)  # records of 16 channels: half a head row
    with pytest.raises(TopError, match="RoPE unit of 16 lanes does not divide head_dim 16"):
        top_plan(dataclasses.replace(SHAPE, kv_heads=2, family="decoder"), SPLIT, BANK_BEATS)
    with pytest.raises(TopError, match="X on chip"):
        top_plan(SHAPE, dataclasses.replace(SPLIT, x_on_chip=False), BANK_BEATS)


@pytest.mark.sim
@pytest.mark.tool("verilator", "g++", "hls4ml")
@pytest.mark.parametrize("family", ["encoder", "decoder"])
def test_a_launch_through_the_top(family, tmp_path):
    top, p = plan(SHAPE, SPLIT) if family == "encoder" else plan(DECODER, DECODER_SPLIT)
    name = "sublayer_top_small" if family == "encoder" else "sublayer_top_decoder_small"
    (tmp_path / "plan.json").write_text(json.dumps(p))  # too long for an environment variable
    res = run_cocotb(name, [generate_verilog(top, name)], TB, testcase="test_a_launch_through_the_top",
                     extra_env={"VCKATTN_TB_SUBLAYER_TOP": str(tmp_path / "plan.json")})
    assert [t.name for t in res.passed] == ["test_a_launch_through_the_top"], res.tests

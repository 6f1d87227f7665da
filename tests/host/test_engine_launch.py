"""The engine's host side (host/engine.py) and functional model (hw/spec/functional.py) against golden.

The reference is golden's integer layer of the engine (``narrow_layer``: narrow scores and the 16-bit output
multiplier; + ``attention_int``), computed without any engine code; the engine path goes through the command lists
(the output requantization in the LOAD_V headers), the movers' streams, the model's kernels and the done/A buffers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.engine import (
    RQ_MULT_BITS,
    engine_p,
    narrow_scores,
    score_max,
    score_shift_for,
    sentinel,
)
from vckattn.golden.quant_attention import calibrate_attention, head_operands, narrow_layer, score_absmax
from vckattn.golden.requant import RequantRegisters, requant_registers
from vckattn.golden.stages import attention_int
from vckattn.host.engine import (
    EngineMaskError,
    EngineRequantError,
    EngineShapeError,
    TileError,
    check_done,
    commands,
    heads_from_a,
    plan_launch,
    streams_of,
    valid_keys,
)
from vckattn.hw.spec import streams
from vckattn.hw.spec.functional import EngineParams, EngineStreamError, run_launch_model

#: an engine layer's output requantization (the 16-bit multiplier) for launches whose A is not checked
RQ = requant_registers(1 / 3000, bits=RQ_MULT_BITS)


def _layer(d_model=128, heads=4, kv=None, causal=False, seq=70, batch=3, bits=8, seed=0, pad=20):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d_model, heads, n_kv_heads=kv).double()
    x = np.random.default_rng(seed).normal(size=(batch, seq, d_model))
    keep = np.ones((batch, seq), bool)
    if pad:
        keep[min(1, batch - 1), seq - pad:] = False
    layer = calibrate_attention(mha, x, keep, "swiftmax", beta=3.0, gamma=5.0, causal=causal)
    return narrow_layer(layer, bits), x, keep


def _engine(layer, x, keep, params):
    ops = head_operands(layer, x, keep)
    launch = plan_launch(params, ops["q"], ops["k"], ops["v"], ops["keep"], layer.causal, layer.score_shift,
                         layer.rq_a)
    qq, kv = streams_of(launch)
    a, done = run_launch_model(params, qq, kv, launch.cmds.n_tiles, layer.swiftmax, layer.sm_fmt)
    check_done(launch.cmds, np.concatenate(done))
    return heads_from_a(launch.cmds, a), launch, np.concatenate(done)


def _golden_heads(layer, x, keep):
    _, tr = attention_int(layer, x, keep)
    b, s, _ = x.shape
    return tr["a"].reshape(b, s, layer.n_heads, layer.head_dim).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("pipelines,kernels,plios,bits,causal,kv,q_rows", [
    (1, 1, 1, 8, False, None, 16), (2, 4, 2, 8, False, None, 16), (3, 2, 1, 16, False, None, 12),
    (2, 4, 1, 8, True, None, 16), (2, 2, 2, 8, False, 2, 8), (4, 8, 4, 16, True, 1, 16),
])
def test_engine_launch_bit_exact_with_golden(pipelines, kernels, plios, bits, causal, kv, q_rows):
    layer, x, keep = _layer(kv=kv, causal=causal, bits=bits, seed=pipelines * 10 + kernels)
    p = EngineParams(pipelines=pipelines, kernels=kernels, score_plios=plios, q_rows=q_rows, d=64, max_keys=128,
                     score_bits=bits)
    got, launch, _ = _engine(layer, x, keep, p)
    want = _golden_heads(layer, x, keep)
    assert got.shape == want.shape
    assert np.array_equal(got, want)
    # every (batch, head) group went to exactly one pipeline, round-robin
    owners = np.concatenate([np.full(len(t), i) for i, t in enumerate(launch.cmds.tiles)])
    assert sorted(np.concatenate(launch.cmds.tiles).tolist()) == list(range(launch.cmds.n_tiles))
    assert len(set(owners)) == min(pipelines, 3 * layer.n_heads)


@pytest.mark.parametrize("d_model, heads", [(128, 2), (96, 2)])
def test_engine_head_sizes_and_short_sequence(d_model, heads):
    """Head size 64 (= D) and 48 (zero-padded to D = 64); 9 tokens against 64 keys a group: three of the four key
    slices hold only padding (fully masked)."""
    layer, x, keep = _layer(d_model=d_model, heads=heads, seq=9, batch=2, pad=3)
    p = EngineParams(pipelines=2, kernels=4, q_rows=16, d=64, max_keys=64, score_bits=8)
    got, _, _ = _engine(layer, x, keep, p)
    assert np.array_equal(got, _golden_heads(layer, x, keep))


def test_shapes_the_engine_cannot_run_are_refused_in_one_line():
    p = EngineParams(pipelines=1, kernels=2, q_rows=16, d=64, max_keys=64)
    keep = np.ones((1, 1, 65), bool)
    for shape, message in [((1, 2, 65, 32), "longer than this engine's 64 keys"), ((1, 2, 40, 80), "head size 80"),
                           ((1, 2, 40, 40), "head size 40")]:
        q = np.zeros(shape, np.int8)
        with pytest.raises(EngineShapeError, match=message) as e:
            plan_launch(p, q, q, q, keep[:, :, :shape[2]], False, 0, RQ)
        assert "\n" not in str(e.value) and e.value.exit_code == 4


def test_check_done_names_the_broken_tile():
    layer, x, keep = _layer()
    p = EngineParams(pipelines=2, kernels=2, q_rows=16, d=32, max_keys=128, score_bits=8)
    _, launch, done = _engine(layer, x, keep, p)
    c = launch.cmds

    def broken(fn):
        d = done.copy()
        fn(d)
        with pytest.raises(TileError) as e:
            check_done(c, d)
        return str(e.value)

    def set_field(buf, row, **kw):
        f = streams.decode("result", buf[row])
        f.update(kw)
        buf[row] = streams.encode("result", **f)

    assert "misrouted" in broken(lambda d: set_field(d, 2, pipeline=1))
    assert "duplicate" in broken(lambda d: d.__setitem__(3, d[2]))
    start1 = int(c.done_start[1])
    msg = broken(lambda d: set_field(d, 0, tile_id=int(c.tiles[1][0])))  # pipeline 1's tile in pipeline 0's log
    assert "not sent to this pipeline" in msg or "duplicate" in msg
    assert "out of order" in broken(lambda d: d.__setitem__([start1, start1 + 1], d[[start1 + 1, start1]]))
    assert "head size" in broken(lambda d: set_field(d, 5, d=16))
    with pytest.raises(TileError, match="records"):
        check_done(c, done[:-1])


def test_dropped_tile_is_named():
    layer, x, keep = _layer()
    p = EngineParams(pipelines=2, kernels=2, q_rows=16, d=32, max_keys=128, score_bits=8)
    _, launch, done = _engine(layer, x, keep, p)
    d = done.copy()
    f = streams.decode("result", d[4])
    d[4] = streams.encode("result", **(f | {"tile_id": int(streams.decode("result", d[6])["tile_id"])}))
    with pytest.raises(TileError, match="duplicate|dropped"):
        check_done(launch.cmds, d)


def test_left_padding_is_refused_with_the_sequence_named():
    keep = np.ones((2, 1, 8), bool)
    keep[1, 0, :3] = False  # left padding
    with pytest.raises(EngineMaskError, match="sequence 1"):
        valid_keys(keep, causal=False)
    assert valid_keys(np.tril(np.ones((1, 8, 8), bool)), causal=True) == (8,)


def test_commands_are_cached_per_geometry():
    p = EngineParams(pipelines=2, kernels=2, q_rows=16, d=32, max_keys=128)
    q = np.zeros((1, 2, 40, 32), np.int8)
    k = np.zeros((1, 2, 40, 32), np.int8)
    keep = np.ones((1, 1, 40), bool)
    a = plan_launch(p, q, k, k, keep, False, 3, RQ).cmds
    assert plan_launch(p, q, k, k, keep, False, 3, RQ).cmds is a
    b = plan_launch(p, q, k, k, keep, False, 4, RQ).cmds
    assert b is not a
    hdr = streams.decode("tile", b.q[0][1, :16])
    assert hdr["op"] == streams.OP_TILE and hdr["score_shift"] == 4
    assert commands.cache_info().hits >= 1
    # another layer's requantization: the LOAD_V headers carry it (the int16's two's complement), LOAD_K none
    rq = RequantRegisters(np.int64(-20000), np.int64(62))
    c = plan_launch(p, q, k, k, keep, False, 4, rq).cmds
    assert c is not b and [np.array_equal(x, y) for x, y in zip(c.q, b.q, strict=True)] == [True, True]
    f = streams.decode_many("slice", c.kv[0][:, :16])
    v = f["op"] == streams.OP_LOAD_V
    assert v.any() and (~v).any()
    assert (f["rq_mult"][v] == (-20000) & 0xFFFF).all() and (f["rq_shift"][v] == 62).all()
    assert (f["rq_mult"][~v] == 0).all() and (f["rq_shift"][~v] == 0).all()
    assert streams.int16_of(int(f["rq_mult"][v][0])) == -20000


def test_requantizations_the_engine_cannot_apply_are_refused_in_one_line():
    """The engine's last P.V kernel takes one signed 16-bit multiplier and a shift of 0..62: the reference layer's
    18-bit rq_a, a per-channel one or a shift beyond the SRS range are refused (narrow_layer makes the engine's)."""
    layer, _, _ = _layer()
    wide = narrow_layer(layer, 32)
    assert int(wide.rq_a.mult) >= 1 << 15 and int(layer.rq_a.mult) < 1 << 15
    p = EngineParams(pipelines=1, kernels=2, q_rows=16, d=32, max_keys=64)
    q = np.zeros((1, 2, 40, 32), np.int8)
    keep = np.ones((1, 1, 40), bool)
    for rq, message in [(wide.rq_a, "signed 16-bit"), (RequantRegisters(np.int64(100), np.int64(63)), "shift 63"),
                        (RequantRegisters(np.array([100, 101]), np.array([20, 20])), "per-channel")]:
        with pytest.raises(EngineRequantError, match=message) as e:
            plan_launch(p, q, q, q, keep, False, 0, rq)
        assert "\n" not in str(e.value) and e.value.exit_code == 4


def test_model_rejects_tiles_and_slices_the_kernels_would_refuse():
    layer, x, keep = _layer()
    p = EngineParams(pipelines=1, kernels=2, q_rows=16, d=32, max_keys=128)
    ops = head_operands(layer, x, keep)
    launch = plan_launch(p, ops["q"], ops["k"], ops["v"], ops["keep"], False, layer.score_shift, layer.rq_a)
    qq, kv = streams_of(launch)

    def run(q_in, kv_in):
        return run_launch_model(p, [q_in], [kv_in], launch.cmds.n_tiles, layer.swiftmax, layer.sm_fmt)

    qsize, ksize = 16 + p.q_rows * p.d, 16 + p.slice_keys * p.d
    bad = qq[0].copy()  # the second group's first tile claims the first group's tile id
    t_per = launch.cmds.t_per
    f = streams.decode("tile", bad[t_per * qsize:t_per * qsize + 16])
    bad[t_per * qsize:t_per * qsize + 16] = streams.encode("tile", **(f | {"tag": 0}))
    with pytest.raises(EngineStreamError, match="not one of the K slice's tiles"):
        run(bad, kv[0])
    with pytest.raises(EngineStreamError, match="not whole q buffers"):
        run(qq[0][:-5], kv[0])
    bad = kv[0].copy()  # a LOAD_V routed to a QK^T kernel
    f = streams.decode("slice", bad[2 * ksize:2 * ksize + 16])
    bad[2 * ksize:2 * ksize + 16] = streams.encode("slice", **(f | {"packet_id": 0}))
    with pytest.raises(EngineStreamError, match="packet id 0"):
        run(qq[0], bad)
    bad = kv[0].copy()  # a V slice whose requantization shift is beyond the SRS range
    f = streams.decode("slice", bad[3 * ksize:3 * ksize + 16])
    bad[3 * ksize:3 * ksize + 16] = streams.encode("slice", **(f | {"rq_shift": 63}))
    with pytest.raises(EngineStreamError, match="rq_shift 63"):
        run(qq[0], bad)
    bad = qq[0].copy()
    f = streams.decode("tile", bad[:16])
    bad[:16] = streams.encode("tile", **(f | {"rows": 17}))
    with pytest.raises(EngineStreamError, match="rows 17"):
        run(bad, kv[0])


# ------------------------------------------------------------------------------------------ golden/engine.py


@pytest.mark.parametrize("bits", [8, 16])
def test_score_shift_is_the_smallest_that_does_not_saturate(bits):
    rng = np.random.default_rng(bits)
    for m in [0, 1, score_max(bits), score_max(bits) + 1, *rng.integers(1, 1 << 30, 200).tolist()]:
        s = score_shift_for(m, bits)
        assert abs(int(narrow_scores(np.array([m, -m]), s, bits)[0])) <= score_max(bits)
        if s:
            assert int(narrow_scores(np.array([m]), s - 1, bits)[0]) == score_max(bits)  # one less saturates
            assert int(np.round(m / 2.0 ** (s - 1) + 1e-9)) > score_max(bits) or m >> (s - 1) >= score_max(bits)


def test_narrow_scores_never_produce_the_sentinel_and_p_is_zero_there():
    acc = np.array([-(1 << 40), -1000, -1, 0, 1, 1000, 1 << 40])
    for bits in (8, 16):
        s = narrow_scores(acc, 2, bits)
        assert s.min() == -score_max(bits) and s.max() == score_max(bits)
        assert (s != sentinel(bits)).all()
    layer, _, _ = _layer()
    p = engine_p(np.array([sentinel(8), -127, 0, 127]), layer.swiftmax, 8)
    assert p[0] == 0 and p[3] > 0


def test_narrow_layer_keeps_the_calibration_maximum_unsaturated():
    layer, x, keep = _layer(bits=8)
    m = score_absmax(layer, x, keep)
    assert m == layer.score_absmax > 0
    assert layer.score_shift == score_shift_for(m, 8) > 0
    wide = narrow_layer(layer, 32)
    assert wide.score_bits == 32 and wide.score_shift == 0 and wide.sm_fmt.acc_bits == 24
    assert narrow_layer(wide, 8).swiftmax == layer.swiftmax
    # the output requantization: the engine's layer folds s_v·2^-p_frac/s_a into a signed 16-bit multiplier (the
    # int16 operand of the AIE's 32x16 multiply), the int32 reference layer into 18 bits
    from vckattn.golden.swiftmax_int import fold_multiplier

    ratio = layer.s_v * 2.0**-layer.p_frac / layer.s_a
    assert (int(layer.rq_a.mult), int(layer.rq_a.shift)) == fold_multiplier(ratio, RQ_MULT_BITS)
    assert 1 << 14 <= int(layer.rq_a.mult) < 1 << 15
    assert (int(wide.rq_a.mult), int(wide.rq_a.shift)) == fold_multiplier(ratio, 18)
    back = narrow_layer(wide, 8).rq_a
    assert (int(back.mult), int(back.shift)) == (int(layer.rq_a.mult), int(layer.rq_a.shift))
    with pytest.raises(ValueError, match="score_absmax"):
        from dataclasses import replace
        narrow_layer(replace(wide, score_absmax=None), 8)


def test_merge_order_does_not_change_the_launch_and_packets_round_trip():
    from vckattn.hw.spec.functional import merge, parse_packets, qk_stage

    layer, x, keep = _layer(bits=16)
    p = EngineParams(pipelines=2, kernels=4, q_rows=16, d=32, max_keys=128, score_bits=16)
    ops = head_operands(layer, x, keep)
    launch = plan_launch(p, ops["q"], ops["k"], ops["v"], ops["keep"], False, layer.score_shift, layer.rq_a)
    qq, kv = streams_of(launch)
    runs = [run_launch_model(p, qq, kv, launch.cmds.n_tiles, layer.swiftmax, layer.sm_fmt, seed=s)
            for s in (None, 1, 2)]
    for a, done in runs[1:]:
        assert np.array_equal(a, runs[0][0])
        assert all(np.array_equal(x, y) for x, y in zip(done, runs[0][1], strict=True))
    pk = merge(qk_stage(p, qq[0], kv[0]), np.random.default_rng(3))
    assert [q.header["packet_id"] for q in pk] != sorted(q.header["packet_id"] for q in pk)  # really interleaved
    beats = np.concatenate([q.beats(signed=True) for q in pk])
    back = parse_packets(beats, p.q_rows, signed=True, where="s")
    assert [b.header for b in back] == [q.header for q in pk]
    assert all(np.array_equal(b.values, q.values) for b, q in zip(back, pk, strict=True))
    assert (np.concatenate([q.values.ravel() for q in pk]) == -(1 << 15)).any()  # the sentinel travels


def test_pv_stage_names_a_misrouted_p_packet():
    from vckattn.hw.spec.functional import channel_packets, pl_stage, pv_stage, qk_stage, split_channel

    layer, x, keep = _layer()
    p = EngineParams(pipelines=1, kernels=2, q_rows=16, d=32, max_keys=128)
    ops = head_operands(layer, x, keep)
    launch = plan_launch(p, ops["q"], ops["k"], ops["v"], ops["keep"], False, layer.score_shift, layer.rq_a)
    qq, kv = streams_of(launch)
    per_kernel = split_channel(p, 0, pl_stage(channel_packets(p, qk_stage(p, qq[0], kv[0]), 0), layer.swiftmax, 8))
    a = np.zeros((launch.cmds.n_tiles, 16, p.d), np.int8)
    swapped = [list(q) for q in per_kernel]
    swapped[1][0], swapped[1][1] = swapped[1][1], swapped[1][0]  # kernel 1 gets tile 1's packet first
    with pytest.raises(EngineStreamError, match="while the cascade carries tile"):
        pv_stage(p, 0, kv[0], swapped, a)
    crossed = [per_kernel[1], per_kernel[0]]  # the split crossed: kernel 0 gets slice 1's packets
    with pytest.raises(EngineStreamError, match="slice 1 .misrouted"):
        pv_stage(p, 0, kv[0], crossed, a)
    assert len(pv_stage(p, 0, kv[0], per_kernel, a)) == launch.cmds.n_tiles


@pytest.mark.parametrize("causal", [False, True])
def test_patched_command_lists_equal_lists_built_from_scratch(causal):
    from vckattn.host.engine import Geometry, _build

    p = EngineParams(pipelines=3, kernels=2, q_rows=16, d=32, max_keys=128)
    rng = np.random.default_rng(int(causal))
    for _ in range(4):
        g = Geometry(3, 4, 2, 70, 32, tuple(int(x) for x in rng.integers(1, 71, 3)), causal, int(rng.integers(0, 20)),
                     int(rng.integers(-(1 << 15), 1 << 15)), int(rng.integers(0, 63)))
        fast, slow = commands(p, g), _build(p, g)
        assert fast.geometry == slow.geometry == g
        for a, b in zip(fast.q + fast.kv, slow.q + slow.kv, strict=True):
            assert np.array_equal(a, b)
        assert np.array_equal(fast.done_expected, slow.done_expected)
        assert not fast.q[0].flags.writeable


def test_command_lists_follow_the_schedule_and_the_contract():
    """Per pipeline: its groups (hw/spec/schedule.py deal_groups), one TILE per tile with the payload offset of the
    tile's row of Q, and per group k LOAD_K then k LOAD_V slices with their routing word, slice index and tile range."""
    from vckattn.host.engine import Geometry, _build
    from vckattn.hw.spec.schedule import deal_groups

    p = EngineParams(pipelines=3, kernels=4, q_rows=8, d=32, max_keys=128)
    g = Geometry(2, 4, 2, 20, 32, (20, 15), False, 3, 17000, 24)
    c = _build(p, g)
    t_per = 3
    for pipe, groups in enumerate(deal_groups(8, 3)):
        want_tiles = [grp * t_per + r for grp in groups for r in range(t_per)]
        assert c.tiles[pipe].tolist() == want_tiles
        f = streams.decode_many("tile", c.q[pipe][:, :16])
        assert f["tag"].tolist() == want_tiles and (f["op"] == streams.OP_TILE).all()
        offs = c.q[pipe][:, 16:24].copy().view("<u8").reshape(-1)
        assert offs.tolist() == [t * p.q_rows * p.d for t in want_tiles]
        kv = streams.decode_many("slice", c.kv[pipe][:, :16])
        kv_offs = c.kv[pipe][:, 16:24].copy().view("<u8").reshape(-1)
        for n, grp in enumerate(groups):
            b, h = divmod(grp, 4)
            rows = slice(8 * n, 8 * n + 8)
            assert kv["packet_id"][rows].tolist() == list(range(8))
            assert kv["op"][rows].tolist() == [streams.OP_LOAD_K] * 4 + [streams.OP_LOAD_V] * 4
            assert kv["slice"][rows].tolist() == [0, 1, 2, 3] * 2
            assert (kv["first_tile"][rows] == grp * t_per).all() and (kv["tiles"][rows] == t_per).all()
            assert kv["rq_mult"][rows].tolist() == [0] * 4 + [17000] * 4
            assert kv["rq_shift"][rows].tolist() == [0] * 4 + [24] * 4
            assert kv_offs[rows].tolist() == [((b * 2 + h // 2) * 4 + j) * 32 * 32 for j in [0, 1, 2, 3] * 2]


def test_the_scheduler_deals_whole_groups_round_robin():
    from vckattn.hw.spec.schedule import deal_groups, tiles_per_pipeline

    assert deal_groups(10, 3) == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert deal_groups(2, 4) == [[0], [1], [], []]
    assert tiles_per_pipeline(96, 32, 41) == [96] * 14 + [64] * 27  # BERT-base batch 8: the busiest pipeline 96 tiles
    assert sorted(g for p in deal_groups(37, 5) for g in p) == list(range(37))
    with pytest.raises(ValueError):
        deal_groups(3, 0)

"""The engine's online-softmax path, golden and functional model: the score channel gathers a tile's ``k`` key slices
into whole rows (``golden/engine.py: engine_online_p``), bit-exact with ``golden/online_softmax_int`` on the same
rows; whole launches of online-softmax layers through the model (``hw/spec/functional.py``) bit-exact with golden's
integer layer (``attention_int`` of the narrow-score layer), whatever the order the kernels' packets merge in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.engine import (
    engine_format,
    engine_online_format,
    engine_online_p,
    engine_online_registers,
    engine_regmap,
    engine_scores,
    sentinel,
    tile_keep,
)
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat, online_softmax_int
from vckattn.golden.quant_attention import calibrate_attention, head_operands, narrow_layer
from vckattn.golden.stages import attention_int
from vckattn.golden.swiftmax_int import swiftmax_regmap
from vckattn.host.engine import check_done, heads_from_a, plan_launch, streams_of
from vckattn.hw.spec.functional import (
    EngineParams,
    EngineStreamError,
    Packet,
    merge,
    online_stage,
    run_launch_model,
)


@pytest.mark.parametrize("bits,k,sk,q_rows,lanes", [(8, 2, 64, 16, 4), (16, 4, 32, 8, 2), (8, 1, 48, 4, 8)])
def test_gathered_rows_are_online_softmax_int_of_the_rows(bits, k, sk, q_rows, lanes):
    """Slices of narrow scores (masked by the tile's keep: padding rows, valid keys, causal) -> P slices equal to
    online_softmax_int on the whole rows with the keep mask itself (not the sentinel), cut the same way."""
    rng = np.random.default_rng(bits + k)
    fmt = engine_online_format(lanes)
    regs = engine_online_registers(0.05, 0.04, 64, 3, fmt)
    keys = k * sk
    for rows, q0, valid, causal in [(q_rows, 0, keys, False), (q_rows - 3, 0, keys - 7, False),
                                    (q_rows, 5, keys - 20, True), (0, 0, keys, False)]:
        acc = rng.integers(-9000, 9000, (q_rows, keys))
        keep = tile_keep(q_rows, keys, rows, q0, valid, causal)
        s = engine_scores(acc, keep, 3, bits)
        slices = s.reshape(q_rows, k, sk).transpose(1, 0, 2)
        got = engine_online_p(slices, regs, bits, fmt)
        want = online_softmax_int(np.where(keep, s, 0), regs, keep, fmt)
        assert got.shape == (k, q_rows, sk)
        assert np.array_equal(got.transpose(1, 0, 2).reshape(q_rows, keys), want)
        assert np.all(got.transpose(1, 0, 2).reshape(q_rows, keys)[~keep] == 0)
        if rows:
            assert got.sum() > 0
    assert engine_online_format(4) == OnlineSoftmaxFormat()
    assert engine_online_format(2).block == 2


def test_register_map_of_a_dual_build():
    """A SwiftMax-only build's map is SwiftMax's, unchanged; a dual build adds the mode and the online registers after
    SwiftMax's, whose offsets (the memories' too) do not move."""
    fmt = engine_format(8)
    sm = swiftmax_regmap(fmt, read_ports=2)
    assert engine_regmap(fmt, ("swiftmax",), 2).describe() == sm.describe()
    dual = engine_regmap(fmt, ("swiftmax", "online_softmax"), 2)
    for e in sm.describe():
        assert dual.offset(e["name"]) == e["offset"]
    assert [r.name for r in dual.writable][-3:] == ["normalizer", "os_a_mult", "os_a_shift"]
    assert dual.ident == sm.ident
    with pytest.raises(ValueError):
        engine_regmap(fmt, ("online_softmax",))


def _packets(p, tiles, rng):
    """Per kernel, one score packet per tile (random scores, some masked)."""
    out = []
    for j in range(p.kernels):
        q = []
        for t in tiles:
            s = rng.integers(-127, 128, (p.q_rows, p.slice_keys))
            s[rng.random(s.shape) < 0.2] = sentinel(8)
            q.append(Packet({"packet_id": j, "tile_id": t, "slice": j, "elem_bits": 8, "rows": p.q_rows,
                             "count": p.q_rows * p.slice_keys, "head": 0}, s))
        out.append(q)
    return out


def test_online_stage_gathers_tiles_in_any_merge_order_and_refuses_what_the_unit_cannot_take():
    p = EngineParams(pipelines=1, kernels=4, score_plios=1, q_rows=8, d=64, max_keys=128, score_bits=8, lanes=4)
    fmt = engine_online_format(4)
    regs = engine_online_registers(0.05, 0.05, 64, 2, fmt)
    rng = np.random.default_rng(3)
    tiles = [7, 9, 10, 30]
    per = _packets(p, tiles, rng)
    ref = online_stage(p, merge(per), regs, fmt)
    assert [(pk.header["tile_id"], pk.header["slice"]) for pk in ref] == [(t, j) for t in tiles for j in range(4)]
    for pk in ref:
        assert pk.header["elem_bits"] == 8
    for seed in range(4):
        got = online_stage(p, merge(per, np.random.default_rng(seed), ahead=1), regs, fmt)
        assert all(a.header == b.header and np.array_equal(a.values, b.values) for a, b in zip(got, ref, strict=True))
    s = np.stack([per[j][1].values for j in range(4)])
    assert np.array_equal(np.stack([pk.values for pk in ref[4:8]]), engine_online_p(s, regs, 8, fmt))
    with pytest.raises(EngineStreamError, match="third tile"):
        online_stage(p, [per[0][0], per[0][1], per[0][2]], regs, fmt)
    with pytest.raises(EngineStreamError, match="1 of 4 slices"):
        online_stage(p, [per[0][0]], regs, fmt)
    with pytest.raises(EngineStreamError, match="slice 0 twice"):
        online_stage(p, [per[0][0], per[0][0]], regs, fmt)
    with pytest.raises(EngineStreamError, match="score_plios 1"):
        online_stage(EngineParams(pipelines=1, kernels=4, score_plios=2, q_rows=8, d=64, max_keys=128), ref, regs, fmt)


def test_bounded_merge_keeps_kernels_within_one_tile():
    per = [[(j, t) for t in range(6)] for j in range(3)]
    for seed in range(5):
        out = merge(per, np.random.default_rng(seed), ahead=1)  # type: ignore[arg-type]
        sent = [0, 0, 0]
        for j, t in out:
            assert t == sent[j]
            sent[j] += 1
            assert max(sent) - min(sent) <= 2 and t <= min(sent) + 1
        assert sorted(out) == sorted(x for q in per for x in q)


def _online_layer(seed, causal, bits, seq=70, batch=2, pad=15):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(128, 4).double()
    x = np.random.default_rng(seed).normal(size=(batch, seq, 128))
    keep = np.ones((batch, seq), bool)
    keep[batch - 1, seq - pad:] = False
    layer = calibrate_attention(mha, x, keep, "softmax", causal=causal)
    return narrow_layer(layer, bits), x, keep


@pytest.mark.parametrize("pipelines,kernels,bits,causal,q_rows,seed", [
    (2, 2, 8, False, 16, 1), (1, 4, 16, True, 8, 2), (3, 1, 8, True, 12, None)])
def test_online_softmax_launch_bit_exact_with_golden(pipelines, kernels, bits, causal, q_rows, seed):
    layer, x, keep = _online_layer(pipelines + kernels, causal, bits)
    assert layer.normalizer != "swiftmax" and layer.online is not None
    p = EngineParams(pipelines=pipelines, kernels=kernels, score_plios=1, q_rows=q_rows, d=64, max_keys=128,
                     score_bits=bits, lanes=4)
    ops = head_operands(layer, x, keep)
    launch = plan_launch(p, ops["q"], ops["k"], ops["v"], ops["keep"], layer.causal, layer.score_shift, layer.rq_a)
    qq, kv = streams_of(launch)
    a, done = run_launch_model(p, qq, kv, launch.cmds.n_tiles, layer.online, engine_online_format(4, layer.os_fmt),
                               seed=seed)
    check_done(launch.cmds, np.concatenate(done))
    _, tr = attention_int(layer, x, keep)
    b, s, _ = x.shape
    want = tr["a"].reshape(b, s, layer.n_heads, layer.head_dim).transpose(0, 2, 1, 3)
    assert np.array_equal(heads_from_a(launch.cmds, a), want)
    with pytest.raises(ValueError, match="OnlineSoftmaxFormat"):
        run_launch_model(p, qq, kv, launch.cmds.n_tiles, layer.online, None)


def test_a_dual_build_defines_its_online_lanes_for_the_cpp():
    """The build parameters a design's engine_config.h and the C-simulation's -D flags carry: a build with both
    normalizers adds VCKATTN_ENGINE_ONLINE_LANES (the online-softmax channel's lanes); a SwiftMax-only build's are
    unchanged."""
    base = EngineParams(pipelines=2, kernels=2, q_rows=16, d=64, max_keys=128)
    dual = EngineParams(pipelines=2, kernels=2, q_rows=16, d=64, max_keys=128, online_lanes=4)
    assert "VCKATTN_ENGINE_ONLINE_LANES" not in base.macros()
    assert dual.macros() == {**base.macros(), "VCKATTN_ENGINE_ONLINE_LANES": 4}
    assert "-DVCKATTN_ENGINE_ONLINE_LANES=4" in dual.defines()

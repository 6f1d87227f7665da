"""The engine's online-softmax score channel as the C-simulation runs it (the PL top's Amaranth
``OnlineChannel``, Verilated: ``sim/cpp/pl_channel.h``), on its own and inside whole launches
(``sim/cpp/engine_csim_tb.cpp`` on a build with both normalizers), bit for bit against golden: each tile's P is
``golden/engine.py: engine_online_p`` (``online_softmax_int`` on the tile's whole rows), the P packets leave in slice
order with their score packets' headers (``elem_bits`` 8), as ``hw/spec/functional.py: online_stage`` sends them;
whole online-softmax launches equal golden's integer attention layer (``attention_int``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.engine import (
    engine_online_format,
    engine_online_p,
    engine_online_registers,
    engine_scores,
    tile_keep,
)
from vckattn.golden.quant_attention import calibrate_attention, head_operands, narrow_layer
from vckattn.golden.stages import attention_int
from vckattn.host.engine import check_done, heads_from_a, plan_launch
from vckattn.hw.spec import streams
from vckattn.hw.spec.functional import EngineParams, Packet, merge, online_stage, parse_packets
from vckattn.sim.engine_csim import pl_register_writes, run_launch, run_online_channel

pytestmark = pytest.mark.tool("g++", "hls4ml", "verilator")

#: channel builds: the small dual instance's shape (int8, 2 slices, 4 lanes), int16 scores on 4 slices of 2 lanes, one
#: slice of 8 lanes (the whole row in one packet), and 1 lane
CHANNELS = {
    "small_dual": EngineParams(pipelines=1, kernels=2, q_rows=16, d=64, max_keys=128, score_bits=8, online_lanes=4),
    "k4_int16": EngineParams(pipelines=1, kernels=4, q_rows=8, d=64, max_keys=128, score_bits=16, online_lanes=2),
    "k1_lanes8": EngineParams(pipelines=1, kernels=1, q_rows=4, d=64, max_keys=48, score_bits=8, online_lanes=8),
    "k2_lanes1": EngineParams(pipelines=1, kernels=2, q_rows=8, d=64, max_keys=64, score_bits=8, online_lanes=1),
}


def _tiles(p: EngineParams, rng: np.random.Generator) -> list[tuple[dict[str, int], np.ndarray]]:
    """(header fields, stream scores (Q_ROWS, MAX_KEYS)) of tiles covering the edges: full, padding rows and
    masked keys, causal rows (q0 > 0), a fully masked tile, saturated scores, one key kept a row, several heads."""
    keys, b = p.max_keys, p.score_bits
    top = (1 << (b - 1)) - 1
    specs = [(p.q_rows, 0, keys, False), (p.q_rows - 1, 0, keys - 7, False), (p.q_rows, 5, keys - 20, True),
             (0, 0, keys, False), (p.q_rows, 0, keys, False), (p.q_rows, 0, 1, False), (2, 0, keys // 2, True)]
    out = []
    for t, (rows, q0, valid, causal) in enumerate(specs):
        keep = tile_keep(p.q_rows, keys, rows, q0, valid, causal)
        acc = rng.integers(-60 * top, 60 * top, (p.q_rows, keys))
        if t == 4:  # saturated: every kept score at +/- the largest valid score
            acc = np.where(rng.random(acc.shape) < 0.5, 1 << 40, -(1 << 40))
        s = engine_scores(acc, keep, 6, b)
        head = {"tile_id": 100 + 3 * t, "rows": rows, "head": t % 5}
        out.append((head, s))
    return out


def _slices(p: EngineParams, tiles: list[tuple[dict[str, int], np.ndarray]]) -> list[list[Packet]]:
    """Per kernel j, its score packet of every tile (slice j of the tile's scores), in tile order."""
    sk = p.slice_keys
    return [[Packet({"packet_id": j, "tile_id": h["tile_id"], "slice": j, "elem_bits": p.score_bits,
                     "rows": h["rows"], "count": p.q_rows * sk, "head": h["head"]}, s[:, j * sk:(j + 1) * sk])
             for h, s in tiles] for j in range(p.kernels)]


def _stream(packets: list[Packet]) -> np.ndarray:
    return np.concatenate([pk.beats(signed=True) for pk in packets])


def _per_packet(p: EngineParams) -> int:
    return 1 + p.q_rows * p.slice_keys // 16


def _assert_channel_exact(p, packets, regs, fmt, res) -> None:
    """The channel's P stream equals golden's: every tile's P packets in slice order (online_stage, whose P is
    engine_online_p), headers as received with elem_bits 8, TLAST on each packet's last beat only."""
    assert res.leftover == 0
    want = online_stage(p, packets, regs, fmt)
    got = parse_packets(res.beats, p.q_rows, signed=False, where="P stream")
    assert [g.header for g in got] == [w.header for w in want]
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g.values, w.values), g.header
    per = 1 + p.q_rows * p.slice_keys // 16
    assert res.last.tolist() == ([False] * (per - 1) + [True]) * len(want)


@pytest.mark.parametrize("build", sorted(CHANNELS))
def test_channel_is_bit_exact_with_golden_in_every_slice_order(build):
    p = CHANNELS[build]
    fmt = engine_online_format(p.online_lanes)
    rng = np.random.default_rng(len(build))
    per = _slices(p, _tiles(p, rng))
    orders = {"round robin (slices in order)": merge(per),
              "slices in reverse": merge(per[::-1]),
              **{f"random, seed {k}": merge(per, np.random.default_rng(k), ahead=1) for k in range(2)}}
    for scale, shift in ((0.03, 6), (0.2, 0), (0.001, 9)):
        regs = engine_online_registers(scale, 0.05, 64, shift, fmt)
        for name, packets in orders.items():
            res = run_online_channel(p, _stream(packets), regs, len(packets) * _per_packet(p))
            try:
                _assert_channel_exact(p, packets, regs, fmt, res)
            except AssertionError as exc:
                raise AssertionError(f"{build}, {name}, registers {regs}: {exc}") from None
    if p.kernels > 1:  # a reversed merge really does send a tile's slices out of order
        assert [pk.header["slice"] for pk in orders["slices in reverse"][:p.kernels]] == list(range(p.kernels))[::-1]


def test_channel_p_is_golden_online_softmax_of_the_rows():
    """Independently of the stream model: P of one tile equals online_softmax_int-based engine_online_p on the
    gathered slices, masked keys 0, and a fully masked row all 0."""
    p = CHANNELS["small_dual"]
    fmt = engine_online_format(p.online_lanes)
    regs = engine_online_registers(0.05, 0.04, 64, 3, fmt)
    rng = np.random.default_rng(11)
    keep = tile_keep(p.q_rows, p.max_keys, p.q_rows - 2, 3, p.max_keys - 9, True)
    s = engine_scores(rng.integers(-900, 900, (p.q_rows, p.max_keys)), keep, 3, 8)
    per = _slices(p, [({"tile_id": 7, "rows": p.q_rows - 2, "head": 1}, s)])
    packets = merge(per)
    res = run_online_channel(p, _stream(packets), regs, len(packets) * _per_packet(p))
    got = np.concatenate([g.values for g in parse_packets(res.beats, p.q_rows, False, "P")], axis=1)
    want = engine_online_p(np.stack([pk.values for pk in packets]), regs, 8, fmt)
    assert np.array_equal(got, np.concatenate(list(want), axis=1))
    assert np.all(got[~keep] == 0) and np.all(got[p.q_rows - 2:] == 0) and got[keep].sum() > 0


def _raw_packet(p: EngineParams, tile: int, j: int, count: int) -> np.ndarray:
    """A score packet header with any ``count`` and its ceil(count / E) payload beats (values 1)."""
    per_beat = 128 // p.score_bits
    head = streams.encode("packet", packet_id=j % 32, tile_id=tile, slice=j, elem_bits=p.score_bits, rows=p.q_rows,
                          count=count, head=0).reshape(1, 16)
    return np.concatenate([head, np.ones((-(-count // per_beat), 16), np.uint8)])


def test_channel_drops_what_it_cannot_take_and_waits_with_a_third_tile():
    p = CHANNELS["small_dual"]
    fmt = engine_online_format(p.online_lanes)
    regs = engine_online_registers(0.05, 0.04, 64, 3, fmt)
    rng = np.random.default_rng(5)
    per = _slices(p, _tiles(p, rng)[:3])
    good = merge(per)
    # a packet of another count (not a whole beat of scores) and one of slice k are consumed and dropped; the rest
    # is exact
    bad = [_raw_packet(p, 100, 0, p.q_rows * p.slice_keys - 8), _raw_packet(p, 100, p.kernels, p.q_rows * p.slice_keys)]
    beats = np.concatenate([bad[0], _stream(good[:1]), bad[1], _stream(good[1:])])
    res = run_online_channel(p, beats, regs, len(good) * _per_packet(p))
    assert res.leftover == 0
    got = parse_packets(res.beats, p.q_rows, signed=False, where="P stream")
    want = online_stage(p, good, regs, fmt)
    assert [g.header for g in got] == [w.header for w in want]
    assert all(np.array_equal(g.values, w.values) for g, w in zip(got, want, strict=True))
    # three tiles open at once: the channel holds two, so the third one's packet waits (it is not taken) and no
    # tile is complete: nothing comes out
    third = [per[0][0], per[0][1], per[0][2]]
    res = run_online_channel(p, _stream(third), regs, 1)
    assert len(res.beats) == 0 and res.leftover >= p.q_rows * p.slice_keys // 16
    # a tile still incomplete at the end: nothing of it is sent; the complete tiles are
    res = run_online_channel(p, _stream(good[:3]), regs, len(good) * _per_packet(p))
    complete = {pk.header["tile_id"] for pk in good[:3] if sum(q.header["tile_id"] == pk.header["tile_id"]
                                                                 for q in good[:3]) == p.kernels}
    assert len(res.beats) == len(complete) * p.kernels * _per_packet(p)


def test_pl_register_writes_of_a_dual_build():
    """The AXI4-Lite writes of a launch, at the engine map's offsets: SwiftMax's registers and memory entries,
    then normalizer, os_a_mult, os_a_shift; SwiftMax's registers written 0 on an online-softmax launch; an
    online-softmax launch on a SwiftMax-only build is refused, and a SwiftMax launch without its registers."""
    from vckattn.golden.engine import ENGINE_NORMALIZERS, engine_format, engine_regmap
    from vckattn.golden.swiftmax_int import swiftmax_registers

    p = CHANNELS["small_dual"]
    fmt = engine_online_format(p.online_lanes)
    osr = engine_online_registers(0.05, 0.04, 64, 3, fmt)
    sm = swiftmax_registers(0.05, 0.04, 64, 0.5, 1.0, 8)
    m = engine_regmap(engine_format(p.score_bits), ENGINE_NORMALIZERS)
    at = {r.name: m.offset(r.name) for r in m.regs}
    w_sm, w_os = dict(pl_register_writes(p, sm)), dict(pl_register_writes(p, None, osr))
    assert w_sm[at["normalizer"]] == 0 and w_sm[at["a_mult"]] == int(sm.a_mult) & 0xFFFFFFFF
    assert w_sm[m.offset("b_beta")] == int(sm.b_beta) & 0xFFFFFFFF
    assert (w_os[at["normalizer"]], w_os[at["os_a_mult"]], w_os[at["os_a_shift"]]) == \
        (1, int(osr.a_mult) & 0xFFFFFFFF, int(osr.a_shift))
    assert not any(w for o, w in w_os.items() if o not in (at["normalizer"], at["os_a_mult"], at["os_a_shift"]))
    # an online-softmax launch writes every register and leaves SwiftMax's per-head memories as they are (as the
    # host does); a SwiftMax launch also writes every memory entry
    assert set(w_os) == {m.offset(r.name) for r in m.writable}
    assert set(w_sm) - set(w_os) == {m.offset(mem.name) + 4 * e for mem in m.mems for e in range(mem.depth)}
    small = EngineParams(pipelines=1, kernels=2, q_rows=16, d=64, max_keys=128, score_bits=8)
    assert at["normalizer"] not in dict(pl_register_writes(small, sm))
    with pytest.raises(ValueError, match="SwiftMax only"):
        pl_register_writes(small, None, osr)
    with pytest.raises(ValueError, match="SwiftMax registers"):
        pl_register_writes(p, None)


def _online_layer(seed: int, causal: bool, bits: int, heads: int = 4, seq: int = 70, batch: int = 2, pad: int = 15):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(32 * heads, heads).double()
    x = np.random.default_rng(seed).normal(size=(batch, seq, 32 * heads))
    keep = np.ones((batch, seq), bool)
    keep[batch - 1, seq - pad:] = False
    layer = calibrate_attention(mha, x, keep, "softmax", causal=causal)
    return narrow_layer(layer, bits), x, keep


@pytest.mark.parametrize("pipelines,kernels,bits,causal,q_rows,lanes", [
    (2, 2, 8, False, 16, 4),  # the engine_small_dual instance's build
    (1, 4, 16, True, 8, 2),
])
def test_online_softmax_launch_is_bit_exact_with_golden(pipelines, kernels, bits, causal, q_rows, lanes):
    """Whole launches of an online-softmax layer (masked keys, causal rows, several heads and groups) through the
    engine's C++: the A records equal golden's integer layer, whatever the packets' merge order; the channels ran
    online softmax."""
    layer, x, keep = _online_layer(pipelines + kernels, causal, bits)
    assert layer.normalizer != "swiftmax" and layer.online is not None
    p = EngineParams(pipelines=pipelines, kernels=kernels, score_plios=1, q_rows=q_rows, d=32, max_keys=128,
                     score_bits=bits, lanes=4, online_lanes=lanes)
    ops = head_operands(layer, x, keep)
    launch = plan_launch(p, ops["q"], ops["k"], ops["v"], ops["keep"], layer.causal, layer.score_shift, layer.rq_a)
    _, tr = attention_int(_with_block(layer, lanes), x, keep)
    b, s, _ = x.shape
    want = tr["a"].reshape(b, s, layer.n_heads, layer.head_dim).transpose(0, 2, 1, 3)
    for seed in (0, 1):
        res = run_launch(launch, None, seed=seed, online=layer.online)
        assert res.ok, (res.failed, res.leftover, res.missing)
        assert res.normalizer == "online_softmax"
        check_done(launch.cmds, np.concatenate(res.done))
        assert np.array_equal(heads_from_a(launch.cmds, res.a), want)


def _with_block(layer, lanes: int):
    """The layer with the build's online-softmax block (its unit's lanes): what the engine computes."""
    from dataclasses import replace

    return replace(layer, os_fmt=engine_online_format(lanes, layer.os_fmt))

"""The engine's command-list mover (hw/hls/mm2s_engine.cpp) in C-simulation: it sends exactly the streams the
host's command lists describe (host/engine.py: streams_of, the reference), for every pipeline of a launch."""

from __future__ import annotations

import numpy as np
import pytest

from vckattn.host.engine import CMD_BYTES, plan_launch, streams_of
from vckattn.hw.engine import streams
from vckattn.hw.engine.model import EngineParams

pytestmark = pytest.mark.tool("g++", "hls4ml")


def _launch(causal=False, kv=2, d=32, seq=70):
    rng = np.random.default_rng(seq + d)
    q = rng.integers(-128, 128, (2, 4, seq, d), dtype=np.int8)
    k = rng.integers(-128, 128, (2, kv, seq, d), dtype=np.int8)
    v = rng.integers(-128, 128, (2, kv, seq, d), dtype=np.int8)
    keep = np.ones((2, seq if causal else 1, seq), bool)
    keep[1, :, seq - 9:] = False
    if causal:
        keep &= np.tril(np.ones((seq, seq), bool))[None]
    p = EngineParams(pipelines=3, kernels=2, q_rows=16, key_block=32, max_keys=128)
    return p, plan_launch(p, q, k, v, keep, causal, 5)


@pytest.mark.parametrize("causal,kv,d", [(False, 2, 32), (True, 1, 64), (False, 4, 16)])
def test_mover_streams_equal_the_command_lists(causal, kv, d):
    from vckattn.sim.engine_movers_csim import mm2s_engine

    p, la = _launch(causal, kv, d)
    qk, vv = streams_of(la)
    for pipe in range(p.pipelines):
        got, sent = mm2s_engine(la.cmds.qk[pipe], la.q, la.k, p.q_rows, p.key_block)
        assert sent == len(la.cmds.qk[pipe])
        assert np.array_equal(got.reshape(-1), qk[pipe])
        got, sent = mm2s_engine(la.cmds.v[pipe], None, la.v, p.q_rows, p.key_block)
        assert sent == len(la.cmds.v[pipe])
        assert np.array_equal(got.reshape(-1), vv[pipe])


def test_mover_stops_at_a_bad_command():
    from vckattn.sim.engine_movers_csim import mm2s_engine

    p, la = _launch()
    cm = la.cmds.qk[0].copy()
    f = streams.decode("command", cm[2, :16])
    cm[2, :16] = streams.encode("command", **(f | {"op": 9}))
    got, sent = mm2s_engine(cm, la.q, la.k, p.q_rows, p.key_block)
    assert sent == 2
    qk, _ = streams_of(la)
    assert np.array_equal(got.reshape(-1), qk[0][:len(got) * 16])  # the two good commands, nothing more
    cm = la.cmds.qk[0].copy()
    cm[1, 16:24] = np.array([8], "<u8").view(np.uint8)  # an offset that is not a whole beat
    assert mm2s_engine(cm, la.q, la.k, p.q_rows, p.key_block)[1] == 1
    assert CMD_BYTES == 32


def test_mover_passes_the_tile_heads_through():
    """The TILE commands' query head (streams.COMMAND head, word 1 bits 8..15, beside the 8-bit d) reaches
    the AIE unchanged: the mover copies the header beat as the host wrote it."""
    from vckattn.sim.engine_movers_csim import mm2s_engine

    p, la = _launch(d=64)
    cm = la.cmds.qk[0].copy()
    tiles = [i for i in range(len(cm)) if streams.decode("command", cm[i, :16])["op"] == streams.OP_TILE]
    assert len(tiles) > 2
    want = {}
    for n, i in enumerate(tiles):  # heads 31, 16, 1, ...: every bit of the field, next to d = 64
        f = streams.decode("command", cm[i, :16])
        cm[i, :16] = streams.encode("command", **(f | {"head": (31 + 17 * n) % 32}))
        want[n] = cm[i, :16].copy()
    qk, _ = streams_of(la)  # the unpatched streams
    got, sent = mm2s_engine(cm, la.q, la.k, p.q_rows, p.key_block)
    assert sent == len(cm)
    expect = qk[0].reshape(-1, 16).copy()
    pos = 0
    for n, i in enumerate(tiles):  # the n-th TILE header of the stream: the original header, replaced
        orig = la.cmds.qk[0][i, :16]
        pos = next(j for j in range(pos, len(expect)) if np.array_equal(expect[j], orig))
        expect[pos] = want[n]
        pos += 1
    beats = got.reshape(-1, 16)
    assert np.array_equal(beats, expect)
    heads = [streams.decode("command", w)["head"] for w in want.values()]
    assert heads[:3] == [31, 16, 1] and len(set(heads)) == len(heads[:32])

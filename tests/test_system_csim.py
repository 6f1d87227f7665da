"""System C-simulation: the Versal build's HLS movers, score_switch, HLS SwiftMax and the AIE matmul kernels'
scalar path, chained through the hw/STREAMS.md streams, against the bit-exact golden tiles (emu backend).

This is the test that the host's DDR layouts, the movers, the AIE kernels, the switch's corner turns and
the normalizer all agree with each other and with golden."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hw_jobs import emu_results, make_job, make_layer, same_results
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.csim import CsimDevice
from vckattn.host.tile_buffers import blank_out, pack_kv, pack_tiles
from vckattn.hw.manifest import load_manifest

pytestmark = pytest.mark.tool("g++", "hls4ml")

MANIFEST = load_manifest("vck5000_attention")


def _csim(layer, job, tiles_per_launch=16):
    dev = CsimDevice(MANIFEST, tiles_per_launch=tiles_per_launch)
    with dev:
        dev.configure(layer)
        return list(dev.run(job)), dev.launches


@pytest.mark.parametrize("head_dim, heads, kv_heads, seq, per_launch", [
    (32, 2, 1, 45, 16),   # causal + padded second sequence, GQA 2:1, keys_pad 64
    (64, 4, 2, 70, 5),    # head size 64, GQA 4:2, three key blocks, several launches with a short last one
])
def test_system_csim_is_bit_exact_with_golden(head_dim, heads, kv_heads, seq, per_launch):
    layer = make_layer("swiftmax", heads=heads, kv_heads=kv_heads, head_dim=head_dim, seed=head_dim)
    job = make_job(MANIFEST, heads=heads, kv_heads=kv_heads, seq=seq, head_dim=head_dim, seed=seq)
    got, launches = _csim(layer, job, per_launch)
    want = emu_results(MANIFEST, layer, job)
    assert launches == -(-len(job.tiles) // per_launch)
    assert same_results(got, want)
    assert any(np.any(r.a != 0) for r in got)  # the layer produces signal, not all-zero tiles


def test_system_csim_stream_accounting():
    """Beats per stream as hw/STREAMS.md counts them, and nothing left over."""
    from vckattn.host.backends.hwio import requant_scalars
    from vckattn.sim.system_csim import run_launch

    layer = make_layer("swiftmax", heads=2, kv_heads=1, head_dim=32)
    job = make_job(MANIFEST, heads=2, kv_heads=1, seq=45, head_dim=32)
    tiles = job.tiles[:3]
    n, kp, d = len(tiles), job.keys_pad, 32
    res = run_launch(pack_tiles(job, tiles), pack_kv(job), blank_out(n, 32, d), n, d, kp, 1, requant_scalars(layer),
                     layer.swiftmax)
    n_kb = kp // 32
    assert res.leftover == {} and res.framing_errors == 0
    assert res.beats == {"q": n * (1 + 32 * d // 16), "k": n * n_kb * 32 * d // 16,
                         "s": n * n_kb * 32 * 32 // 4, "scores": n * 32 * kp // 4, "P": n * 32 * kp // 4,
                         "v": n * (1 + n_kb * 32 * d // 16), "p": n * n_kb * 32 * 32 // 16, "o": n * 32 * d // 4}


def test_a_wrong_register_is_caught():
    """A perturbed SwiftMax register changes the output: the comparison is not vacuous."""
    import dataclasses

    layer = make_layer("swiftmax")
    job = make_job(MANIFEST)
    bad = dataclasses.replace(layer, swiftmax=layer.swiftmax.map(lambda r: r.replace(b_beta=r.b_beta + 700)))
    got, _ = _csim(bad, job)
    assert not same_results(got, emu_results(MANIFEST, layer, job))


def test_csim_refuses_online_softmax():
    dev = CsimDevice(MANIFEST)
    with pytest.raises(DeviceError, match="use --backend rtl"):
        dev.configure(make_layer("softmax"))


def _per_head_layer(heads: int, kv_heads: int, head_dim: int, seed: int):
    """A layer with a different beta / gamma per head (SwiftMax register map v2)."""
    layer = make_layer("swiftmax", heads=heads, kv_heads=kv_heads, head_dim=head_dim, seed=seed, per_head=True)
    assert not layer.swiftmax.uniform and len({(r.b_beta, r.c_out) for r in layer.swiftmax}) == heads
    return layer


@pytest.mark.parametrize("head_dim, heads, kv_heads, seq, per_launch", [
    (32, 4, 2, 45, 16),  # every launch mixes the heads' tiles
    (64, 4, 1, 40, 3),   # several launches, tiles of different heads in one launch
])
def test_system_csim_per_head_layer_is_bit_exact_with_attention_int(head_dim, heads, kv_heads, seq, per_launch):
    """Per-head SwiftMax constants end to end: the host packs each tile's head into its descriptor, mm2s_tiles
    sends it on the mask stream, score_switch puts it on TUSER and the HLS SwiftMax selects b_beta[h] /
    c_out[h]; the layer equals golden attention_int."""
    from vckattn.golden.quant_attention import attention_int
    from vckattn.host.scheduler import run_layer

    layer = _per_head_layer(heads, kv_heads, head_dim, seed=head_dim + heads)
    rng = np.random.default_rng(seq)
    x = rng.normal(0.0, 1.0, (2, seq, heads * head_dim))
    keep = np.ones((2, seq), bool)
    keep[1, seq - 9:] = False
    dev = CsimDevice(MANIFEST, tiles_per_launch=per_launch)
    with dev:
        run = run_layer(dev, layer, x, keep)
    out, trace = attention_int(layer, x, keep)
    np.testing.assert_array_equal(run.y, trace["y"])
    np.testing.assert_array_equal(run.out, out)
    assert np.any(trace["a"] != 0)
    # the per-head constants matter: the same layer with head 0's constants everywhere differs
    import dataclasses

    from vckattn.golden.swiftmax_int import SwiftMaxHeads

    flat = dataclasses.replace(layer, swiftmax=SwiftMaxHeads.broadcast(layer.swiftmax[0], heads))
    assert not np.array_equal(attention_int(flat, x, keep)[1]["y"], trace["y"])

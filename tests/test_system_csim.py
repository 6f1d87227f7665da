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
    bad = dataclasses.replace(layer, swiftmax=layer.swiftmax.replace(b_beta=layer.swiftmax.b_beta + 700))
    got, _ = _csim(bad, job)
    assert not same_results(got, emu_results(MANIFEST, layer, job))


def test_csim_refuses_online_softmax():
    dev = CsimDevice(MANIFEST)
    with pytest.raises(DeviceError, match="use --backend rtl"):
        dev.configure(make_layer("softmax"))

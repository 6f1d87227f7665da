"""Engine builds behind the Device interface (host/backends/engine.py): one launch per layer through the scheduler,
bit-exact with golden's narrow-score integer layer, on the emu (functional model) and csim (the engine's C++)
backends, SwiftMax layers and, on a build with both normalizers, online-softmax layers; the refusals (online softmax
where the build or the backend lacks it, a format the build's channel does not compute, wrong score width, masks the
engine cannot express)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.quant_attention import attention_int, calibrate_attention, narrow_layer
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.engine import ENGINE_BACKENDS
from vckattn.host.engine import EngineMaskError, EngineShapeError
from vckattn.host.scheduler import run_layer
from vckattn.hw.manifest import Manifest


def engine_manifest(pipelines=2, kernels=2, plios=1, lanes=2, bits=8, q_rows=16, max_seq=128,
                    online_lanes=0) -> Manifest:
    """A minimal engine manifest (the fields the engine backends read); ``online_lanes`` > 0: both normalizers."""
    eng = {"pipelines": pipelines, "kernels_per_pipeline": kernels, "score_plios": plios, "d": 64,
           "max_keys": max_seq, "slice_keys": max_seq // kernels, "score_bits": bits}
    if online_lanes:
        eng["lanes_online_softmax"] = online_lanes
    return Manifest({"name": f"test_engine_p{pipelines}k{kernels}", "board": "vck5000",
                     "normalizers": ["swiftmax", "softmax"] if online_lanes else ["swiftmax"],
                     "max_seq_len": max_seq,
                     "tile": {"q_rows": q_rows, "key_block": 32, "lanes": lanes, "head_dims": [32, 64]},
                     "engine": eng, "kernels": []}, Path("<test>"))


def _layer(normalizer="swiftmax", causal=False, seed=0, d_model=128, heads=4):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d_model, heads).double()
    x = np.random.default_rng(seed).normal(size=(3, 45, d_model))
    keep = np.ones((3, 45), bool)
    keep[2, 30:] = False
    kw = {"beta": 3.0, "gamma": 5.0} if normalizer == "swiftmax" else {}
    return calibrate_attention(mha, x, keep, normalizer, causal=causal, **kw), x, keep


@pytest.mark.parametrize("backend, options", [
    ("emu", {}), pytest.param("csim", {}, marks=pytest.mark.tool("g++", "hls4ml")),
    pytest.param("csim", {"vector": True}, marks=pytest.mark.tool("g++", "hls4ml"))])
@pytest.mark.parametrize("causal", [False, True])
def test_engine_layer_bit_exact_through_the_scheduler(backend, options, causal):
    layer, x, keep = _layer(causal=causal, seed=int(causal))
    narrow = narrow_layer(layer, 8)
    want, trace = attention_int(narrow, x, keep)
    with ENGINE_BACKENDS[backend](engine_manifest(), **options) as dev:
        lr = run_layer(dev, narrow, x, keep)
    assert np.array_equal(lr.y, trace["y"])
    assert np.array_equal(lr.out, want)
    assert lr.tiles == 3 * 4 * 3 and lr.job is None and dev.launches == 1


@pytest.mark.parametrize("backend", ["emu", pytest.param("csim", marks=pytest.mark.tool("g++", "hls4ml"))])
@pytest.mark.parametrize("causal", [False, True])
def test_online_softmax_layer_bit_exact_on_a_dual_build(backend, causal):
    """An online-softmax layer on a build with both normalizers: the csim backend's HLS online-softmax channel and the
    functional model both give golden's integer layer."""
    layer, x, keep = _layer("softmax", causal=causal, seed=2 + int(causal))
    narrow = narrow_layer(layer, 8)
    want, trace = attention_int(narrow, x, keep)
    with ENGINE_BACKENDS[backend](engine_manifest(online_lanes=4)) as dev:
        lr = run_layer(dev, narrow, x, keep)
    assert np.array_equal(lr.y, trace["y"]) and np.array_equal(lr.out, want)
    assert dev.launches == 1


def test_online_softmax_layer_of_another_format_is_refused_on_csim():
    """The C++ channel computes the build's online-softmax format only: a layer rounding P another way is refused in
    one line before any launch (the functional model, which takes any format, still runs it)."""
    from dataclasses import replace

    layer, x, keep = _layer("softmax")
    narrow = narrow_layer(layer, 8)
    nearest = replace(narrow, os_fmt=replace(narrow.os_fmt, p_rounding="nearest"))
    with pytest.raises(DeviceError, match=r"p_rounding 'nearest' \(the build's: 'cumulative'\)"):
        ENGINE_BACKENDS["csim"](engine_manifest(online_lanes=4)).configure(nearest)
    ENGINE_BACKENDS["emu"](engine_manifest(online_lanes=4)).configure(nearest)
    ENGINE_BACKENDS["csim"](engine_manifest(online_lanes=4)).configure(narrow)


def test_engine_refuses_what_it_cannot_run():
    layer, x, keep = _layer()
    dev = ENGINE_BACKENDS["emu"](engine_manifest())
    with pytest.raises(DeviceError, match="8-bit scores"):
        dev.configure(layer)  # an int32-score layer
    soft, _, _ = _layer("softmax")
    with pytest.raises(DeviceError, match="softmax|SwiftMax"):
        dev.configure(narrow_layer(soft, 8))
    left = keep.copy()
    left[0] = np.roll(left[2], 15)  # left padding
    with pytest.raises(EngineMaskError, match="sequence 0"):
        run_layer(dev, narrow_layer(layer, 8), x, left)
    short = ENGINE_BACKENDS["emu"](engine_manifest(max_seq=32))  # 45 tokens against 32 keys a group
    with pytest.raises(EngineShapeError, match="longer than this engine's 32 keys"):
        run_layer(short, narrow_layer(layer, 8), x, keep)


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("seq", [22, 100])
def test_rtl_engine_cycles_match_the_performance_model(seq):
    """The model's PL cycles of a layer on the small generated instance (2 pipelines x 1 score channel x 2 lanes)
    against the Verilator run of the same layer without backpressure (within 5%)."""
    from vckattn.hw.manifest import load_manifest
    from vckattn.hw.perf.model import design_from_json, engine_pl_cycles, workload_from_flags

    manifest = load_manifest("engine_small")
    torch.manual_seed(seq)
    mha = MultiHeadAttention(384, 12).double()
    x = np.random.default_rng(seq).normal(size=(1, seq, 384))
    layer = narrow_layer(calibrate_attention(mha, x, None, "swiftmax", beta=3.0, gamma=5.0), 8)
    with ENGINE_BACKENDS["rtl"](manifest, pauses=False) as dev:
        lr = run_layer(dev, layer, x)
    assert np.array_equal(lr.y, attention_int(layer, x)[1]["y"])
    design = design_from_json(manifest.data["engine"]["design"])
    modeled = engine_pl_cycles(workload_from_flags(12, 32, seq), design)
    print(f"seq {seq}: modeled {modeled} PL cycles, Verilator {dev.last_cycles}")
    assert abs(modeled - dev.last_cycles) <= 0.05 * dev.last_cycles, (modeled, dev.last_cycles)

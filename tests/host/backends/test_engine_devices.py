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
from vckattn.golden.quant_attention import calibrate_attention, narrow_layer
from vckattn.golden.stages import attention_int
from vckattn.host.attention_layer import run_layer
from vckattn.host.backends import device_class
from vckattn.host.backends.base import DeviceError
from vckattn.host.engine import EngineMaskError, EngineShapeError
from vckattn.hw.design.manifest import Manifest


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
    ("emu", {}), pytest.param("csim", {}, marks=pytest.mark.tool("g++", "hls4ml", "verilator")),
    pytest.param("csim", {"vector": True}, marks=pytest.mark.tool("g++", "hls4ml", "verilator"))])
@pytest.mark.parametrize("causal", [False, True])
def test_engine_layer_bit_exact_through_the_scheduler(backend, options, causal):
    layer, x, keep = _layer(causal=causal, seed=int(causal))
    narrow = narrow_layer(layer, 8)
    want, trace = attention_int(narrow, x, keep)
    with device_class(backend)(engine_manifest(), **options) as dev:
        lr = run_layer(dev, narrow, x, keep)
    assert np.array_equal(lr.y, trace["y"])
    assert np.array_equal(lr.out, want)
    assert lr.tiles == 3 * 4 * 3 and dev.launches == 1


@pytest.mark.parametrize("backend", ["emu", pytest.param("csim", marks=pytest.mark.tool("g++", "hls4ml", "verilator"))])
@pytest.mark.parametrize("causal", [False, True])
def test_online_softmax_layer_bit_exact_on_a_dual_build(backend, causal):
    """An online-softmax layer on a build with both normalizers: the csim backend's online-softmax channel (the PL
    top Verilated) and the functional model both give golden's integer layer."""
    layer, x, keep = _layer("softmax", causal=causal, seed=2 + int(causal))
    narrow = narrow_layer(layer, 8)
    want, trace = attention_int(narrow, x, keep)
    with device_class(backend)(engine_manifest(online_lanes=4)) as dev:
        lr = run_layer(dev, narrow, x, keep)
    assert np.array_equal(lr.y, trace["y"]) and np.array_equal(lr.out, want)
    assert dev.launches == 1


def test_online_softmax_layer_of_another_format_is_refused_on_csim_and_rtl():
    """The C++ channel and the PL top's online-softmax unit compute the build's online-softmax format only: a layer
    rounding P another way is refused in one line before any launch (the functional model, which takes any format,
    still runs it)."""
    from dataclasses import replace

    layer, x, keep = _layer("softmax")
    narrow = narrow_layer(layer, 8)
    nearest = replace(narrow, os_fmt=replace(narrow.os_fmt, p_rounding="nearest"))
    for backend in ("csim", "rtl"):
        with pytest.raises(DeviceError, match=r"p_rounding 'nearest' \(the build's: 'cumulative'\)"):
            device_class(backend)(engine_manifest(online_lanes=4)).configure(nearest)
        device_class(backend)(engine_manifest(online_lanes=4)).configure(narrow)
    device_class("emu")(engine_manifest(online_lanes=4)).configure(nearest)
    device_class("csim")(engine_manifest(online_lanes=4)).configure(narrow)


def test_engine_refuses_what_it_cannot_run():
    layer, x, keep = _layer()
    dev = device_class("emu")(engine_manifest())
    with pytest.raises(DeviceError, match="8-bit scores"):
        dev.configure(layer)  # an int32-score layer
    soft, _, _ = _layer("softmax")
    with pytest.raises(DeviceError, match="softmax|SwiftMax"):
        dev.configure(narrow_layer(soft, 8))
    left = keep.copy()
    left[0] = np.roll(left[2], 15)  # left padding
    with pytest.raises(EngineMaskError, match="sequence 0"):
        run_layer(dev, narrow_layer(layer, 8), x, left)
    short = device_class("emu")(engine_manifest(max_seq=32))  # 45 tokens against 32 keys a group
    with pytest.raises(EngineShapeError, match="longer than this engine's 32 keys"):
        run_layer(short, narrow_layer(layer, 8), x, keep)


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("seq", [22, 100])
def test_rtl_engine_cycles_match_the_performance_model(seq):
    """The model's PL cycles of a layer on the small generated instance (2 pipelines x 1 score channel x 2 lanes)
    against the Verilator run of the same layer without backpressure (within 5%)."""
    from vckattn.hw.design.manifest import load_manifest
    from vckattn.hw.perf.model import design_from_json, engine_pl_cycles, workload_from_flags

    manifest = load_manifest("engine_small")
    torch.manual_seed(seq)
    mha = MultiHeadAttention(384, 12).double()
    x = np.random.default_rng(seq).normal(size=(1, seq, 384))
    layer = narrow_layer(calibrate_attention(mha, x, None, "swiftmax", beta=3.0, gamma=5.0), 8)
    with device_class("rtl")(manifest, pauses=False) as dev:
        lr = run_layer(dev, layer, x)
    assert np.array_equal(lr.y, attention_int(layer, x)[1]["y"])
    design = design_from_json(manifest.data["engine"]["design"])
    modeled = engine_pl_cycles(workload_from_flags(12, 32, seq), design)
    print(f"seq {seq}: modeled {modeled} PL cycles, Verilator {dev.last_cycles}")
    assert abs(modeled - dev.last_cycles) <= 0.05 * dev.last_cycles, (modeled, dev.last_cycles)


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_rtl_per_head_gqa_causal_under_backpressure_and_a_wrong_map():
    """The generated PL top in Verilator under random backpressure: per-head β/γ (each head's rows read its own
    b_beta / c_out entries), grouped K/V heads, causal masks: bit-exact with golden. The same run with a manifest
    whose map swaps two registers' offsets is not (what `vckattn run` reports as not bit-exact)."""
    import copy

    from vckattn.hw.design.manifest import load_manifest

    torch.manual_seed(7)
    mha = MultiHeadAttention(128, 4, 2).double()
    x = np.random.default_rng(7).normal(size=(2, 40, 128))
    keep = np.ones((2, 40), bool)
    keep[1, 29:] = False
    layer = narrow_layer(calibrate_attention(mha, x, keep, "swiftmax", causal=True, beta=np.array([0.5, 2.5, 5.0, 1.0]),
                                             gamma=np.array([1.0, 6.0, 30.0, 2.0])), 8)
    assert not layer.swiftmax.uniform
    want = attention_int(layer, x, keep)[1]["y"]
    good = load_manifest("engine_small")
    with device_class("rtl")(good, pauses=True) as dev:
        assert np.array_equal(run_layer(dev, layer, x, keep).y, want)
    data = copy.deepcopy(good.data)
    regs = {r["name"]: r for r in next(k for k in data["kernels"] if k["name"] == "engine_pl")["registers"]}
    regs["u_hi"]["offset"], regs["u_lo"]["offset"] = regs["u_lo"]["offset"], regs["u_hi"]["offset"]
    with device_class("rtl")(Manifest(data, good.file), pauses=True) as dev:
        assert not np.array_equal(run_layer(dev, layer, x, keep).y, want)


def test_check_bundle_refuses_what_the_build_cannot_run():
    """A bundle's head size, sequence length, SwiftMax format and head count against an engine build's manifest."""
    from types import SimpleNamespace

    from vckattn.hw.design.manifest import ManifestError, check_bundle, load_manifest

    manifest = load_manifest("engine_small")
    b = SimpleNamespace(manifest={"model": {"head_dim": 48, "num_heads": 12}, "formats": dict(manifest.data["formats"]),
                                  "layers": []})
    with pytest.raises(ManifestError, match=r"head_dim 48 is not supported by this build \(supports \(32, 64\)\)"):
        check_bundle(manifest, b)
    b.manifest["model"]["head_dim"] = 32
    check_bundle(manifest, b, seq_len=128)
    with pytest.raises(ManifestError, match="129 tokens is longer than this build's maximum 128"):
        check_bundle(manifest, b, seq_len=129)
    b.manifest["formats"] = {"swiftmax": dict(manifest.data["formats"]["swiftmax"], t_frac=9)}
    with pytest.raises(ManifestError, match=r"different swiftmax format \(fields \['t_frac'\] differ\)"):
        check_bundle(manifest, b)
    b.manifest["formats"] = dict(manifest.data["formats"])
    b.manifest["model"]["num_heads"] = 33  # one more head than the PL top's register sets
    with pytest.raises(ManifestError, match="33 heads; this build's SwiftMax kernel holds 32 register sets"):
        check_bundle(manifest, b)

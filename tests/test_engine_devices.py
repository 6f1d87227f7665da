"""Engine builds behind the Device interface (host/backends/engine.py): one launch per layer through the scheduler,
bit-exact with golden's narrow-score integer layer, on the emu (functional model) and csim (the engine's C++)
backends; the refusals (online softmax, wrong score width, masks the engine cannot express)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.quant_attention import attention_int, calibrate_attention, narrow_layer
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.engine import ENGINE_BACKENDS
from vckattn.host.engine import EngineMaskError
from vckattn.host.scheduler import run_layer
from vckattn.hw.manifest import Manifest


def engine_manifest(pipelines=2, kernels=2, lanes=2, bits=8, q_rows=16, max_seq=128) -> Manifest:
    """A minimal engine manifest (the fields the engine backends read)."""
    return Manifest({"name": f"test_engine_p{pipelines}k{kernels}", "board": "vck5000",
                     "normalizers": ["swiftmax"], "max_seq_len": max_seq,
                     "tile": {"q_rows": q_rows, "key_block": 32, "lanes": lanes, "head_dims": [32, 64]},
                     "engine": {"pipelines": pipelines, "kernels_per_pipeline": kernels, "score_bits": bits},
                     "kernels": []}, Path("<test>"))


def _layer(normalizer="swiftmax", causal=False, seed=0, d_model=128, heads=4):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d_model, heads).double()
    x = np.random.default_rng(seed).normal(size=(3, 45, d_model))
    keep = np.ones((3, 45), bool)
    keep[2, 30:] = False
    kw = {"beta": 3.0, "gamma": 5.0} if normalizer == "swiftmax" else {}
    return calibrate_attention(mha, x, keep, normalizer, causal=causal, **kw), x, keep


@pytest.mark.parametrize("backend", ["emu", pytest.param("csim", marks=pytest.mark.tool("g++", "hls4ml"))])
@pytest.mark.parametrize("causal", [False, True])
def test_engine_layer_bit_exact_through_the_scheduler(backend, causal):
    layer, x, keep = _layer(causal=causal, seed=int(causal))
    narrow = narrow_layer(layer, 8)
    want, trace = attention_int(narrow, x, keep)
    with ENGINE_BACKENDS[backend](engine_manifest()) as dev:
        lr = run_layer(dev, narrow, x, keep)
    assert np.array_equal(lr.y, trace["y"])
    assert np.array_equal(lr.out, want)
    assert lr.tiles == 3 * 4 * 3 and lr.job is None and dev.launches == 1


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
    with pytest.raises(DeviceError, match="no driver for engine builds"):
        ENGINE_BACKENDS["xrt"](engine_manifest()).open()

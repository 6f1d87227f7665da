"""The rtl backend (PL normalizer kernels in Verilator) through the host scheduler: bit-exact with the
golden layer under random stalls, for both normalizers and a GQA + causal layer; a manifest whose
register offsets disagree with the RTL gives wrong results, which the host reports."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.quant_attention import attention_int, calibrate_attention
from vckattn.host.scheduler import run_layer
from vckattn.hw.manifest import Manifest, load_manifest

pytestmark = [pytest.mark.sim, pytest.mark.tool("verilator")]


def _layer(normalizer: str, kv: int | None = None, causal: bool = False, heads: int = 2,
           beta: float | list[float] = 2.5, gamma: float | list[float] = 4.0):
    torch.manual_seed(1)
    d = 32 * heads  # head_dim 32 (a hardware tile size)
    mha = MultiHeadAttention(d, heads, n_kv_heads=kv, bias=True).double()
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (1, 40, d))
    keep = np.ones((1, 40), bool)
    keep[0, 35:] = False
    return calibrate_attention(mha, x, keep, normalizer, beta=np.asarray(beta), gamma=np.asarray(gamma),
                               causal=causal), x, keep


@pytest.mark.parametrize("normalizer,kv,causal", [("swiftmax", None, False), ("softmax", None, False),
                                                  ("swiftmax", 1, True)])
def test_rtl_backend_bit_exact_under_stalls(normalizer, kv, causal):
    from vckattn.host.backends.rtl import RtlDevice

    layer, x, keep = _layer(normalizer, kv, causal)
    with RtlDevice(load_manifest("vck5000_attention"), pauses=True) as dev:
        lr = run_layer(dev, layer, x, keep)
    _, ints = attention_int(layer, x, keep)
    assert np.array_equal(lr.y, ints["y"])
    assert len(lr.job.tiles) == 4 and lr.cycles >= 35 * 2 * 64 // 4  # 35 valid rows x 2 heads, 16 beats each


def test_rtl_backend_catches_a_manifest_that_disagrees_with_the_rtl():
    from vckattn.host.backends.rtl import RtlDevice

    layer, x, keep = _layer("swiftmax")
    good = load_manifest("vck5000_attention")
    data = copy.deepcopy(good.data)
    regs = next(k for k in data["kernels"] if k["name"] == "swiftmax")["registers"]
    by_name = {r["name"]: r for r in regs}
    by_name["u_hi"]["offset"], by_name["u_lo"]["offset"] = by_name["u_lo"]["offset"], by_name["u_hi"]["offset"]
    with RtlDevice(Manifest(data, good.file)) as dev:
        lr = run_layer(dev, layer, x, keep)
    _, ints = attention_int(layer, x, keep)
    assert not np.array_equal(lr.y, ints["y"])  # run reports bit_exact false for this


def test_rtl_backend_per_head_constants_bit_exact():
    """Per-head β/γ (4 heads, GQA, causal): each tile's rows stream with its head on TUSER and the per-head
    memories are programmed, so the layer is bit-exact; a manifest from the current kernel sources (map v2)."""
    from vckattn.host.backends.rtl import RtlDevice
    from vckattn.hw.manifest import build_manifest

    layer, x, keep = _layer("swiftmax", kv=2, causal=True, heads=4, beta=[0.5, 2.5, 5.0, 1.0],
                            gamma=[1.0, 6.0, 30.0, 2.0])
    assert not layer.swiftmax.uniform
    with RtlDevice(Manifest(build_manifest("vck5000_attention"), "vck5000_attention.json"), pauses=True) as dev:
        lr = run_layer(dev, layer, x, keep)
    _, ints = attention_int(layer, x, keep)
    assert {t.head for t in lr.job.tiles} == {0, 1, 2, 3}
    assert np.array_equal(lr.y, ints["y"])

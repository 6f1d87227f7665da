"""Host tiler, scheduler and the emu backend: bit-exact against the golden integer layer, and every
tile-accounting fault (dropped, duplicated, reordered, unknown, malformed tile) named in the error."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.quant_attention import attention_int, calibrate_attention
from vckattn.host.backends.base import Device
from vckattn.host.backends.emu import EmuDevice
from vckattn.host.scheduler import run_layer
from vckattn.host.tiler import LayerJob, TileError, TileResult, collect_results, plan_tiles
from vckattn.hw.manifest import ManifestError, check_bundle, load_manifest


@pytest.fixture(scope="module")
def manifest():
    return load_manifest("vck5000_attention")


def _layer(normalizer: str, d: int = 64, heads: int = 2, kv: int | None = None, seed: int = 0):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d, heads, n_kv_heads=kv, bias=True).double()
    rng = np.random.default_rng(seed)
    # sequences longer than a tile (32 rows) and not a multiple of it; one padded sequence
    x = rng.normal(0, 1, (2, 45, d))
    keep = np.ones((2, 45), bool)
    keep[1, 30:] = False
    layer = calibrate_attention(mha, x, keep, normalizer, beta=2.5, gamma=4.0)
    return layer, x, keep


@pytest.mark.parametrize("normalizer", ["swiftmax", "softmax"])
def test_emu_through_tiles_equals_golden_layer(manifest, normalizer):
    layer, x, keep = _layer(normalizer)
    with EmuDevice(manifest) as dev:
        lr = run_layer(dev, layer, x, keep)
    out, ints = attention_int(layer, x, keep)
    assert np.array_equal(lr.y, ints["y"])
    assert np.array_equal(lr.out, out)
    # 2 sequences x 2 heads x ceil(45/32) query tiles
    assert len(lr.job.tiles) == 2 * 2 * 2
    assert lr.job.keys_pad == 64


def test_gqa_head_to_kv_head_mapping(manifest):
    q = np.zeros((1, 4, 5, 32), np.int8)
    k = np.zeros((1, 2, 5, 32), np.int8)
    job = plan_tiles(q, k, k, np.ones((1, 1, 5), bool), manifest.tile)
    assert [t.kv_head for t in job.tiles] == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="3 kv heads"):
        plan_tiles(q, np.zeros((1, 3, 5, 32), np.int8), np.zeros((1, 3, 5, 32), np.int8), np.ones((1, 1, 5), bool),
                   manifest.tile)


def test_masks_padding_and_causal(manifest):
    s = 40
    keep = np.tril(np.ones((s, s), bool))[None] & np.array([True] * 35 + [False] * 5)[None, None, :]
    q = np.ones((1, 1, s, 32), np.int8)
    job = plan_tiles(q, q, q, keep, manifest.tile)
    t1 = job.tiles[1]  # rows 32..39
    assert t1.q0 == 32 and t1.rows == 8
    assert t1.keep.shape == (32, 64)
    assert t1.keep[0, :33].all() and not t1.keep[0, 33:].any()  # row 32 sees keys 0..32
    assert t1.keep[5, :35].all() and not t1.keep[5, 35:].any()  # row 37: causal, but keys 35.. are padding
    assert not t1.keep[8:].any()  # padded query rows see nothing
    assert not t1.q[8:].any()


class Faulty(Device):
    """Wraps the emu backend and corrupts the returned tile stream (test double, not a backend)."""

    name = "faulty"
    where = "test"

    def __init__(self, manifest, fault: str, at: int) -> None:
        super().__init__(manifest)
        self.inner, self.fault, self.at = EmuDevice(manifest), fault, at

    def configure(self, layer) -> None:
        super().configure(layer)
        self.inner.configure(layer)

    def run(self, job: LayerJob) -> Iterator[TileResult]:
        res = list(self.inner.run(job))
        i = self.at
        if self.fault == "drop":
            del res[i]
        elif self.fault == "drop_last":
            res.pop()
        elif self.fault == "duplicate":
            res.insert(i + 1, res[i])
        elif self.fault == "reorder":
            res[i], res[i + 1] = res[i + 1], res[i]
        elif self.fault == "unknown":
            res[i] = TileResult(999, res[i].a)
        elif self.fault == "shape":
            res[i] = TileResult(res[i].tile_id, res[i].a[:5])
        elif self.fault == "dtype":
            res[i] = TileResult(res[i].tile_id, res[i].a.astype(np.int16))
        yield from res


@pytest.mark.parametrize("fault,at,message", [
    ("drop", 3, r"tile 3 \(sequence 0, head 1, query rows 32\.\.44\) missing: tile 4 arrived in its place"),
    ("drop_last", 0, r"tile 7 \(sequence 1, head 1, query rows 32\.\.44\) missing: the device returned 7 of 8"),
    ("duplicate", 2, r"tile 2 \(sequence 0, head 1, query rows 0\.\.31\) returned twice"),
    ("reorder", 5, r"tile 5 \(sequence 1, head 0, query rows 32\.\.44\) out of order: tile 6 arrived before it"),
    ("unknown", 4, r"unknown tile id 999 .* while waiting for tile 4"),
    ("shape", 1, r"tile 1 .* result has shape \(5, 32\)"),
    ("dtype", 0, r"tile 0 .* dtype int16"),
])
def test_tile_accounting_errors_name_the_tile(manifest, fault, at, message):
    layer, x, keep = _layer("swiftmax", d=64, heads=2)
    with pytest.raises(TileError, match=message):
        run_layer(Faulty(manifest, fault, at), layer, x, keep, index=0)


def test_collect_results_in_order_only(manifest):
    q = np.zeros((1, 1, 64, 32), np.int8)
    job = plan_tiles(q, q, q, np.ones((1, 1, 64), bool), manifest.tile)
    a = np.zeros((32, 32), np.int8)
    out = collect_results(job, [TileResult(0, a + 1), TileResult(1, a + 2)])
    assert (out[0, 0, :32] == 1).all() and (out[0, 0, 32:] == 2).all()
    with pytest.raises(TileError, match="out of order"):
        collect_results(job, [TileResult(1, a), TileResult(0, a)])


def test_emu_propagates_worker_errors(manifest):
    layer, x, keep = _layer("swiftmax")
    layer.rq_a = None  # broken constants: the worker thread fails, the consumer sees the error
    with pytest.raises((TypeError, AttributeError)):
        run_layer(EmuDevice(manifest), layer, x, keep)


def test_check_bundle_refuses_mismatches(manifest):
    # the bits of a bundle check_bundle reads
    b = SimpleNamespace(manifest={"model": {"head_dim": 48, "num_heads": 12}, "formats": dict(manifest.data["formats"]),
                                  "layers": []})
    with pytest.raises(ManifestError, match="head_dim 48 is not supported"):
        check_bundle(manifest, b)
    b.manifest["model"]["head_dim"] = 32
    check_bundle(manifest, b, seq_len=1024)
    with pytest.raises(ManifestError, match="1025 tokens is longer than this build's maximum 1024"):
        check_bundle(manifest, b, seq_len=1025)
    b.manifest["formats"] = {"swiftmax": dict(manifest.data["formats"]["swiftmax"], t_frac=9),
                             "online_softmax": manifest.data["formats"]["online_softmax"]}
    with pytest.raises(ManifestError, match=r"different swiftmax format \(fields \['t_frac'\] differ\)"):
        check_bundle(manifest, b)
    b.manifest["formats"] = dict(manifest.data["formats"])
    b.manifest["model"]["num_heads"] = 33  # one more head than the kernel's register sets
    with pytest.raises(ManifestError, match="33 heads; this build's SwiftMax kernel holds 32 register sets"):
        check_bundle(manifest, b)

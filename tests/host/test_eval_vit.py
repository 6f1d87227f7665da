"""`vckattn eval` scores a ViT image classifier (digits) with its attention layers on a backend: the float softmax
model's accuracy (checked against Hugging Face's own forward here), the bundle's, and their agreement; on emu and,
for a few images and one layer, on rtl (the online-softmax RTL kernel in Verilator), whose outputs equal emu's bit
for bit, so every figure is the same."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from vckattn.host.cli import main


@pytest.fixture(scope="module")
def vit_bundle(tmp_path_factory) -> tuple[Path, Path]:
    """A ViTForImageClassification for digits (8×8, patch 2: 16 patches + [CLS]; hidden 64, 2 heads of 32, a size
    the hardware builds run), randomly initialised, exported with the online-softmax baseline calibrated on digits
    train images."""
    from transformers import ViTConfig, ViTForImageClassification

    root = tmp_path_factory.mktemp("vit_eval")
    torch.manual_seed(0)
    cfg = ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, image_size=8,
                    patch_size=2, num_channels=1, num_labels=10)
    ViTForImageClassification(cfg).eval().save_pretrained(root / "vit")
    assert main(["export", str(root / "vit"), "--out", str(root / "b"), "--normalizer", "softmax", "--calib",
                 "digits", "--check-samples", "16", "--quiet"]) == 0
    return root / "vit", root / "b"


def _eval(bundle: Path, out: Path, *extra: str) -> dict:
    assert main(["eval", "--bundle", str(bundle), "--manifest", "engine_small_dual", "--task", "digits", "--quiet",
                 "--json", str(out), *extra]) == 0  # an online-softmax bundle: a build that carries both normalizers
    return json.loads(out.read_text())


def test_vit_eval_on_emu(vit_bundle, tmp_path):
    from transformers import ViTForImageClassification

    from vckattn.host import datasets

    folder, bundle = vit_bundle
    r = _eval(bundle, tmp_path / "e.json", "--backend", "emu", "--samples", "32")
    assert r["task"] == "digits" and r["sentences"]["count"] == 32 and r["sentences"]["tokens"] == 32 * 17
    e = r["end_to_end"]
    test = datasets.digits(0).test
    x = torch.from_numpy((np.asarray(test.x[:32], np.float32) - 0.5) / 0.5)[:, None]
    with torch.no_grad():
        pred = ViTForImageClassification.from_pretrained(folder).eval()(pixel_values=x).logits.argmax(-1).numpy()
    assert e["float_softmax"]["accuracy"] == pytest.approx(float(np.mean(pred == test.y[:32])), abs=1e-12)
    assert e["float_softmax"]["agreement"] == 1.0 and e["float_swiftmax"] == e["float_softmax"]
    assert e["backend"]["agreement"] >= 0.9  # the integer online softmax keeps the predictions
    assert [p["layer"] for p in r["per_layer"]] == [0, 1]
    assert all(p["backend_vs_float_layer"]["cosine"] > 0.99 for p in r["per_layer"])


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_vit_eval_on_rtl_equals_emu(vit_bundle, tmp_path):
    _, bundle = vit_bundle
    args = ("--samples", "2", "--layers", "0")
    rtl = _eval(bundle, tmp_path / "rtl.json", "--backend", "rtl", *args)
    emu = _eval(bundle, tmp_path / "emu.json", "--backend", "emu", *args)
    assert rtl["backend"] == "rtl" and rtl["per_layer"][0]["tiles"] == emu["per_layer"][0]["tiles"] > 0
    assert rtl["end_to_end"] == emu["end_to_end"]
    for key in ("backend_vs_float_layer", "backend_vs_softmax_model"):
        assert rtl["per_layer"][0][key] == emu["per_layer"][0][key], key

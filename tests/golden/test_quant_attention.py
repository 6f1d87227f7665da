"""The quantized attention layer (emulator of the attention block) end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import require_module

from vckattn.golden.aie_matmul import UINT8, tile_matmul
from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.quant_attention import (
    calibrate_attention,
    compare,
    finish_int,
    float_attention,
    head_operands,
    normalizer_int,
)
from vckattn.golden.requant import requantize
from vckattn.golden.stages import attention_int
from vckattn.golden.swiftmax_int import SwiftMaxFormat, swiftmax_int, swiftmax_int_tabulated, swiftmax_registers


@pytest.fixture(scope="module")
def layer_and_data():
    torch.manual_seed(0)
    mha = MultiHeadAttention(64, 4, bias=True).double()
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (3, 12, 64))
    keep = np.ones((3, 12), bool)
    keep[1, 7:] = False
    keep[2, 3:] = False
    return mha, x, keep


@pytest.mark.parametrize("normalizer", ["softmax", "swiftmax"])
def test_padding_invariance_is_bit_exact(layer_and_data, normalizer):
    # A sequence padded inside a batch and the same sequence alone give identical integers.
    mha, x, keep = layer_and_data
    layer = calibrate_attention(mha, x, keep, normalizer, beta=2.0, gamma=3.0)
    _, batched = attention_int(layer, x, keep)
    for b, n in ((1, 7), (2, 3)):
        _, alone = attention_int(layer, x[b:b + 1, :n], keep[b:b + 1, :n])
        assert np.array_equal(batched["y"][b, :n], alone["y"][0])
        assert np.all(batched["p"][b][..., n:] == 0)  # masked keys carry exactly zero weight


@pytest.mark.parametrize("normalizer", ["softmax", "swiftmax"])
def test_integer_layer_tracks_float_golden(layer_and_data, normalizer):
    mha, x, keep = layer_and_data
    layer = calibrate_attention(mha, x, keep, normalizer, beta=2.0, gamma=3.0)
    out, tr = attention_int(layer, x, keep)
    ref = float_attention(mha, x, keep, normalizer, beta=2.0, gamma=3.0)["y"]
    m = compare(out, ref, keep)
    assert m["cosine"] > 0.99 and m["rel_error"] < 0.15, m
    for name in ("q", "k", "v", "a"):
        assert tr[name].min() >= -128 and tr[name].max() <= 127
    assert tr["p"].min() >= 0 and tr["p"].max() <= 255


@pytest.mark.parametrize("normalizer", ["softmax", "swiftmax"])
def test_stages_compose_to_attention_int(layer_and_data, normalizer):
    # head_operands -> QKᵀ -> normalizer_int -> P·V -> requant -> finish_int is attention_int (what a host tiler
    # reuses); a BERT-style layer: no GQA, not causal, no RoPE.
    mha, x, keep = layer_and_data
    layer = calibrate_attention(mha, x, keep, normalizer, beta=2.0, gamma=3.0)
    assert layer.n_kv_heads == layer.n_heads == 4 and not layer.causal
    out, tr = attention_int(layer, x, keep)
    ops = head_operands(layer, x, keep)
    assert set(ops) == {"x", "q", "k", "v", "keep"} and set(tr) == {"x", "q", "k", "v", "s", "p", "o", "a", "y"}
    assert ops["q"].shape == ops["k"].shape == (3, 4, 12, 16) and ops["keep"].shape == (3, 1, 12)
    s = tile_matmul(ops["q"], np.swapaxes(ops["k"], -1, -2))
    p = normalizer_int(layer, s, ops["keep"][:, None])
    a = requantize(tile_matmul(p, ops["v"], a_fmt=UINT8), layer.rq_a).astype(np.int8)
    out2, y = finish_int(layer, a)
    assert np.array_equal(s, tr["s"]) and np.array_equal(p, tr["p"]) and np.array_equal(y, tr["y"])
    assert np.array_equal(out2, out)


def test_tabulated_swiftmax_equals_direct():
    fmt = SwiftMaxFormat()
    regs = swiftmax_registers(0.05, 0.04, 64, 1.5, 2.0, 9, fmt)
    rng = np.random.default_rng(5)
    for acc in (rng.integers(-40000, 40000, (4, 64, 64)), rng.integers(-(1 << 26), 1 << 26, (3, 50)),
                np.array([[5, 5, 5]]), np.array([[-(1 << 30), 1 << 30, 0, 17]])):
        keep = rng.random(acc.shape) > 0.2
        assert np.array_equal(swiftmax_int_tabulated(acc, regs, keep, fmt), swiftmax_int(acc, regs, keep, fmt))


def test_minilm_quantized_layers_report():
    require_module("transformers")
    from vckattn.host.reports import run_quant

    rep = run_quant(n_calib=16, n_eval=8)
    assert [e["layer"] for e in rep["layers"]] == list(range(6))
    for e in rep["layers"]:
        assert e["softmax"]["cosine"] > 0.98, e
        assert e["swiftmax"]["cosine"] > 0.99, e
        # the engine's int8 scores keep SwiftMax above 0.99 per layer (the engine's goal); int16 changes nothing
        assert e["swiftmax"]["int8_scores"]["cosine"] > 0.99, e
        assert e["swiftmax"]["int16_scores"]["cosine"] > e["swiftmax"]["cosine"] - 1e-4, e
        assert e["swiftmax"]["int8_scores"]["score_shift"] > 0


@pytest.mark.slow
def test_online_softmax_long_rows_on_real_minilm():
    """S = 512 (real text, two inputs made of consecutive sentences): MiniLM layer 0's online-softmax integer layer
    against its float layer. Rounding each P on its own (UQ0.8: most weights of a 512-key row are half an LSB) loses
    the rows' mass (cosine ≈ 0.97); the kernel's cumulative rounding keeps every layer above 0.99."""
    require_module("transformers")
    from dataclasses import replace

    from transformers import AutoModel, AutoTokenizer

    from vckattn.golden import convert
    from vckattn.golden.blocks import BertLayer
    from vckattn.golden.pretrained import minilm_dir
    from vckattn.host.textdata import long_texts

    tok = AutoTokenizer.from_pretrained(minilm_dir())
    texts = long_texts(tok, 2, 512)
    assert len(texts) == 2 and all(len(tok(t, verbose=False)["input_ids"]) >= 512 for t in texts)
    assert texts[0].startswith(long_texts(tok, 1, 64)[0])  # consecutive sentences from the same start
    model = AutoModel.from_pretrained(minilm_dir(), dtype=torch.float64).eval()
    enc = tok(texts, truncation=True, max_length=512, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc, output_hidden_states=True).hidden_states[0].numpy()
    keep = enc["attention_mask"].numpy().astype(bool)
    cfg = model.config
    blk = BertLayer(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size).double().load_hf(
        convert.decoder_layers(model)[0])
    layer = calibrate_attention(blk.attn, h[:1], keep[:1], "softmax")
    ref = float_attention(blk.attn, h[1:], keep[1:], "softmax")["y"]
    cos = {}
    for rounding in ("nearest", "cumulative"):
        q = replace(layer, os_fmt=replace(layer.os_fmt, p_rounding=rounding))
        cos[rounding] = compare(attention_int(q, h[1:], keep[1:])[0], ref)["cosine"]
    assert layer.os_fmt.p_rounding == "cumulative"
    assert cos["nearest"] < 0.985 and cos["cumulative"] > 0.99, cos


def test_report_quant_refuses_a_sequence_longer_than_the_model(capsys):
    require_module("transformers")
    from vckattn.host.cli import main

    assert main(["report", "quant", "--seq-len", "600"]) == 2
    err = capsys.readouterr().err
    assert "--seq-len 600: the model has 512 positions" in err and err.count("\n") == 1

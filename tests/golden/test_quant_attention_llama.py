"""The integer attention layer on Llama-style attention: integer RoPE, grouped-query attention, causal mask."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import require_module

from vckattn.golden.attention import MultiHeadAttention, apply_rope, rope_cos_sin
from vckattn.golden.quant_attention import (
    QuantAttentionLayer,
    QuantLinear,
    calibrate_attention,
    compare,
    finish_int,
    float_attention,
    head_operands,
)
from vckattn.golden.requant import RequantRegisters
from vckattn.golden.rope_int import rope_error_bound, rope_int, rope_tables_int
from vckattn.golden.stages import attention_int

FRAC = 14


def _direct_rope(x: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The integer RoPE written out element by element with Python integers (independent of rope_int)."""
    out = np.empty(x.shape, dtype=np.int64)
    d = x.shape[-1]
    h = d // 2
    for idx in np.ndindex(x.shape[:-1]):
        row, cr, sr = x[idx], c[idx[-1]], s[idx[-1]]
        for i in range(d):
            rot = -int(row[i + h]) if i < h else int(row[i - h])  # rotate_half: [-x2, x1]
            acc = int(row[i]) * int(cr[i]) + rot * int(sr[i])
            y = (acc + (1 << (FRAC - 1))) >> FRAC  # round half up (>> floors)
            out[idx + (i,)] = min(127, max(-128, y))
    return out


# --------------------------------------------------------------------------- integer RoPE


def test_rope_tables_round_half_even_and_saturate():
    lsb = 2.0**-FRAC
    cos = np.array([[1.0, -1.0, 0.5, (8192 + 0.5) * lsb, (8193 + 0.5) * lsb, -(8193 + 0.5) * lsb, 2.5, -3.0]])
    sin = -cos
    c, s = rope_tables_int(cos, sin)
    assert c.dtype == np.int16 and s.dtype == np.int16 and c.shape == cos.shape
    assert c.tolist() == [[16384, -16384, 8192, 8192, 8194, -8194, 32767, -32768]]  # ties to even; saturation
    assert s.tolist() == [[-16384, 16384, -8192, -8192, -8194, 8194, -32768, 32767]]
    ct, st = rope_tables_int(torch.from_numpy(cos), torch.from_numpy(sin))  # torch tables (as HF gives)
    assert np.array_equal(ct, c) and np.array_equal(st, s)


def test_rope_int_equals_direct_integer_formula():
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (2, 3, 5, 8))
    x[0, 0] = -128  # rotate_half(-128) = +128: must not wrap in int8
    x[0, 1] = 127
    x[0, 2, :, :4], x[0, 2, :, 4:] = -128, 127
    c = rng.integers(-32768, 32768, (5, 8))
    s = rng.integers(-32768, 32768, (5, 8))
    c[0], s[0] = -32768, 32767  # the table extremes
    c[1], s[1] = 32767, 32767
    c[2], s[2] = 16384, 16384  # cos = sin = 1: |y| up to 255 before saturation
    c[3], s[3] = 8192, -8192  # exact halves: ties of the output rounding
    got = rope_int(x.astype(np.int8), c.astype(np.int16), s.astype(np.int16))
    want = _direct_rope(x, c, s)
    assert got.dtype == np.int8
    assert np.array_equal(got, want)
    assert (want == 127).any() and (want == -128).any()  # saturation corners exercised
    with pytest.raises(ValueError):
        rope_int(np.array([[128, 0]]), c[:1, :2], s[:1, :2])  # not int8
    with pytest.raises(ValueError):
        rope_int(np.array([[1, 0]], np.int8), np.array([[1 << 15, 0]]), s[:1, :2])  # not int16


def test_rope_int_tracks_float_rope_within_budget():
    """Budget (int8 LSBs of x): each Q1.14 table entry is within 2^-15 of cos/sin, so each of the two products
    is off by at most |x_i|·2^-15 resp. |rotate_half(x)_i|·2^-15; the output rounding adds 0.5 LSB.
    Saturation to int8 is 1-Lipschitz, so the bound also holds against the float result clipped to int8."""
    rng = np.random.default_rng(1)
    d, seq = 64, 96
    positions = torch.cat((torch.arange(48), torch.arange(4000, 4048)))  # long-context angles too
    cos, sin = rope_cos_sin(positions, d, dtype=torch.float64)
    x = rng.integers(-128, 128, (2, 4, seq, d))
    x[0, 0, :8] = -128
    x[0, 1, :8] = 127
    y = rope_int(x.astype(np.int8), *rope_tables_int(cos, sin)).astype(np.float64)
    ref = apply_rope(torch.from_numpy(x.astype(np.float64)), cos, sin).numpy()
    err = np.abs(y - np.clip(ref, -128, 127))
    rh = np.concatenate((-x[..., d // 2:], x[..., :d // 2]), axis=-1)
    bound = 0.5 + (np.abs(x) + np.abs(rh)) * 2.0**-15
    assert np.array_equal(rope_error_bound(x), bound)
    assert np.all(err <= bound + 1e-9), float((err - bound).max())
    excess = err - 0.5
    print(f"\nrope_int vs float RoPE: max |err| = {err.max():.5f} LSB (bound <= {bound.max():.5f}); "
          f"max excess over the 0.5 LSB rounding = {excess.max():.5f} LSB; mean |err| = {err.mean():.4f} LSB")
    assert err.max() > 0.45  # the rounding term is really there (the check is not vacuous)
    assert np.abs(ref).max() > 128  # ... and saturation was exercised


# --------------------------------------------------------------------------- the layer


def _llama_case(bias: bool = False, seed: int = 0):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(64, 8, n_kv_heads=2, bias=bias).double()
    rng = np.random.default_rng(seed)
    seq = 20
    x = rng.normal(0, 1, (3, seq, 64))
    keep = np.ones((3, seq), bool)
    keep[1, 13:] = False  # right padding
    keep[2, 5:] = False
    cos, sin = rope_cos_sin(torch.arange(seq), mha.head_dim, dtype=torch.float64)
    return mha, x, keep, (cos, sin)


def _rep_linear(ql: QuantLinear, n_kv: int, n_rep: int) -> QuantLinear:
    """K/V projection with each K/V head's output channels duplicated for its n_rep query heads."""
    def rep(a):
        return None if a is None else np.repeat(a.reshape(n_kv, -1, *a.shape[1:]), n_rep, axis=0).reshape(
            -1, *a.shape[1:])
    return QuantLinear(rep(ql.w), rep(ql.s_w), rep(ql.b))


def _rep_requant(rq: RequantRegisters, n_kv: int, n_rep: int) -> RequantRegisters:
    return RequantRegisters(*(np.repeat(np.asarray(a).reshape(n_kv, -1), n_rep, axis=0).reshape(-1)
                              for a in (rq.mult, rq.shift)))


@pytest.mark.parametrize("normalizer", ["softmax", "swiftmax"])
@pytest.mark.parametrize("use_rope", [False, True])
def test_gqa_equals_duplicated_kv_heads(normalizer, use_rope):
    mha, x, keep, rope = _llama_case(bias=True)
    rope = rope if use_rope else None
    layer = calibrate_attention(mha, x, keep, normalizer, beta=2.0, gamma=3.0, rope=rope, causal=True)
    assert (layer.n_heads, layer.n_kv_heads, layer.n_rep, layer.causal) == (8, 2, 4, True)
    kv, rep = layer.n_kv_heads, layer.n_rep
    full = dataclasses.replace(layer, n_kv_heads=layer.n_heads,
                               k_proj=_rep_linear(layer.k_proj, kv, rep), v_proj=_rep_linear(layer.v_proj, kv, rep),
                               rq_k=_rep_requant(layer.rq_k, kv, rep), rq_v=_rep_requant(layer.rq_v, kv, rep))
    out_g, tr_g = attention_int(layer, x, keep, rope=rope)
    out_f, tr_f = attention_int(full, x, keep, rope=rope)
    assert tr_g["k"].shape == (3, 20, 2 * 8) and tr_f["k"].shape == (3, 20, 8 * 8)
    for n in ("s", "p", "o", "a", "y"):
        assert np.array_equal(tr_g[n], tr_f[n]), n
    assert np.array_equal(out_g, out_f)
    # query head h used K/V head h // rep
    ops = head_operands(layer, x, keep, rope=rope)
    ops_f = head_operands(full, x, keep, rope=rope)
    for h in range(layer.n_heads):
        assert np.array_equal(ops["k"][:, h // rep], ops_f["k"][:, h])
        assert np.array_equal(ops["v"][:, h // rep], ops_f["v"][:, h])


@pytest.mark.parametrize("normalizer", ["softmax", "swiftmax"])
def test_causal_rows_ignore_future_tokens(normalizer):
    mha, x, keep, rope = _llama_case()
    layer = calibrate_attention(mha, x, keep, normalizer, beta=2.0, gamma=3.0, rope=rope, causal=True)
    m = 9
    x2 = x.copy()
    x2[:, m:] = np.random.default_rng(7).normal(0, 3, x2[:, m:].shape)  # new future tokens
    _, t1 = attention_int(layer, x, keep, rope=rope)
    _, t2 = attention_int(layer, x2, keep, rope=rope)
    assert np.array_equal(t1["y"][:, :m], t2["y"][:, :m])
    assert not np.array_equal(t1["y"][:, m:], t2["y"][:, m:])
    assert np.all(np.triu(t1["p"], k=1) == 0)  # keys j > i carry exactly zero weight
    # the prefix alone (tables of its positions) gives the same integers as inside the longer sequence
    _, alone = attention_int(layer, x[:, :m], keep[:, :m], rope=tuple(t[:m] for t in rope))
    assert np.array_equal(alone["y"], t1["y"][:, :m])
    # without the causal mask the earlier rows do see the future (the check above has power)
    _, b1 = attention_int(dataclasses.replace(layer, causal=False), x, keep, rope=rope)
    _, b2 = attention_int(dataclasses.replace(layer, causal=False), x2, keep, rope=rope)
    assert not np.array_equal(b1["y"][0, :m], b2["y"][0, :m])


@pytest.mark.parametrize("normalizer", ["softmax", "swiftmax"])
def test_llama_integer_layer_tracks_float_golden(normalizer):
    mha, x, keep, rope = _llama_case()
    layer = calibrate_attention(mha, x, keep, normalizer, beta=2.0, gamma=3.0, rope=rope, causal=True)
    out, tr = attention_int(layer, x, keep, rope=rope)
    f = float_attention(mha, x, keep, normalizer, 2.0, 3.0, rope=rope, causal=True)
    m = compare(out, f["y"], keep)
    print(f"\nLlama-style ({normalizer}, GQA 8/2, RoPE, causal): {m}")
    assert m["cosine"] > 0.99 and m["rel_error"] < 0.15, m
    # the float golden is the MultiHeadAttention module itself
    if normalizer == "softmax":
        with torch.no_grad():
            y_mod = mha(torch.from_numpy(x), keep=torch.from_numpy(keep)[:, None, None, :], causal=True, rope=rope)
        assert np.abs(y_mod.numpy() - f["y"]).max() < 1e-12
    # s_q / s_k cover the projections and the rotated values (neither saturates). An error of at most E LSB per
    # element of the int8 projection becomes at most E·(|cos| + |sin|) <= √2·E after the rotation, plus the
    # integer RoPE's own 0.5 + 2^-7 LSB.
    for n, s in (("q", layer.s_q), ("k", layer.s_k)):
        assert max(np.abs(f[n]).max(), np.abs(f[f"{n}_pre"]).max()) == pytest.approx(127 * s, rel=1e-12)
        e_pre = np.abs(tr[f"{n}_pre"] - f[f"{n}_pre"] / s).max()
        e_rot = np.abs(tr[n] - f[n] / s).max()
        print(f"{n}: int8 projection vs float {e_pre:.3f} LSB, after RoPE {e_rot:.3f} LSB")
        assert e_rot <= np.sqrt(2) * e_pre + 0.5 + 2.0**-7
    # the stages: head_operands -> ... -> finish_int
    ops = head_operands(layer, x, keep, rope=rope)
    assert ops["q"].shape == (3, 8, 20, 8) and ops["k"].shape == ops["v"].shape == (3, 2, 20, 8)
    assert ops["q"].dtype == ops["k"].dtype == ops["v"].dtype == np.int8
    assert ops["keep"].shape == (3, 20, 20) and ops["keep"].dtype == bool
    assert np.array_equal(ops["keep"][1], np.tril(np.ones((20, 20), bool)) & keep[1][None, :])
    b, s, _ = x.shape
    a_heads = tr["a"].reshape(b, s, 8, 8).transpose(0, 2, 1, 3)
    out2, y2 = finish_int(layer, a_heads)
    assert np.array_equal(y2, tr["y"]) and np.array_equal(out2, out)


def test_rope_table_shapes():
    """(S, D) tables, HF's (1, S, D), and per-sequence (B, S, D) tables give the same integers."""
    mha, x, keep, (cos, sin) = _llama_case()
    layer = calibrate_attention(mha, x, keep, "softmax", rope=(cos, sin), causal=True)
    _, t = attention_int(layer, x, keep, rope=(cos, sin))
    _, t1 = attention_int(layer, x, keep, rope=(cos[None].float(), sin[None].float()))  # HF: float32 (1, S, D)
    _, tb = attention_int(layer, x, keep, rope=(cos.expand(3, -1, -1).numpy(), sin.expand(3, -1, -1).numpy()))
    for n in ("q", "k", "y"):
        assert np.array_equal(t[n], tb[n]), n
    # float32 tables (HF's dtype) can move a table entry by at most one LSB
    c64, _ = rope_tables_int(cos, sin)
    c32, _ = rope_tables_int(cos.float(), sin.float())
    assert np.abs(c64.astype(np.int64) - c32).max() <= 1
    assert compare(t1["y"].astype(np.float64), t["y"].astype(np.float64))["min_cosine"] > 0.9999
    with pytest.raises(ValueError, match="does not match"):
        attention_int(layer, x, keep, rope=(cos[:5], sin[:5]))


def test_to_quant_layer_defaults():
    mha, x, keep, _ = _llama_case()
    layer = calibrate_attention(mha, x, keep)
    assert isinstance(layer, QuantAttentionLayer) and layer.n_kv_heads == 2 and not layer.causal
    with pytest.raises(ValueError, match="multiple"):
        dataclasses.replace(layer, n_kv_heads=3)


# --------------------------------------------------------------------------- export round trip


def test_llama_export_round_trip(tmp_path):
    """Export a tiny HF Llama (GQA 6/2) and run each bundle layer on held-out inputs captured from the HF model."""
    require_module("transformers")
    from hf_tiny import tiny_llama
    from transformers import AutoTokenizer

    from vckattn.golden.pretrained import minilm_dir
    from vckattn.host.bundle import load_bundle
    from vckattn.host.export import export_checkpoint, to_quant_layer
    from vckattn.host.textdata import real_sentences

    tok = AutoTokenizer.from_pretrained(minilm_dir())  # any tokenizer; the embedding is resized to it
    model = tiny_llama()
    model.resize_token_embeddings(tok.vocab_size, mean_resizing=False)
    model.save_pretrained(tmp_path / "llama")
    tok.save_pretrained(tmp_path / "llama")
    bundles = {n: load_bundle(export_checkpoint(tmp_path / "llama", tmp_path / n, real_sentences(16), normalizer=n,
                                                swiftmax_init="max", progress=False, check_hardware=False,
                                                min_model_fidelity=-1, check_samples=4))  # head size 8: golden only
               for n in ("softmax", "swiftmax")}

    seen: dict = {}
    hooks = []
    for i, blk in enumerate(model.layers):
        def pre(_m, _args, kwargs, i=i):
            seen[i] = {"x": kwargs["hidden_states"].double().numpy(), "rope": kwargs["position_embeddings"]}

        def post(_m, _args, out, i=i):
            seen[i]["y"] = out[0].double().numpy()
        hooks += [blk.self_attn.register_forward_pre_hook(pre, with_kwargs=True),
                  blk.self_attn.register_forward_hook(post)]
    enc = tok(real_sentences(8, start_topic=60), padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        model(**enc, use_cache=False)
    for h in hooks:
        h.remove()
    keep = enc["attention_mask"].numpy().astype(bool)

    for i, blk in enumerate(model.layers):
        x, rope = seen[i]["x"], seen[i]["rope"]
        assert rope[0].shape == (1, x.shape[1], 8)  # HF tables carry a batch dim of 1
        # softmax bundle: against the HF layer itself
        layer = to_quant_layer(bundles["softmax"], i)
        assert (layer.n_heads, layer.n_kv_heads, layer.causal) == (6, 2, True)
        out, _ = attention_int(layer, x, keep, rope=rope)
        m = compare(out, seen[i]["y"], keep)
        print(f"\nlayer {i} softmax bundle vs HF attention: {m}")
        assert m["cosine"] > 0.98, m
        # SwiftMax bundle: against the golden float layer with the bundle's β, γ (HF weights copied)
        mha = MultiHeadAttention(48, 6, 2, 8, bias=False).double()
        with torch.no_grad():
            for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
                getattr(mha, p).weight.copy_(getattr(blk.self_attn, p).weight)
        sm = bundles["swiftmax"].manifest["layers"][i]["swiftmax"]
        layer = to_quant_layer(bundles["swiftmax"], i)
        out, _ = attention_int(layer, x, keep, rope=rope)
        ref = float_attention(mha, x, keep, "swiftmax", sm["beta"], sm["gamma"], rope=rope, causal=True)["y"]
        m = compare(out, ref, keep)
        print(f"layer {i} SwiftMax bundle vs golden float SwiftMax: {m}")
        assert m["cosine"] > 0.98, m
        assert np.abs(float_attention(mha, x, keep, "softmax", rope=rope, causal=True)["y"] - seen[i]["y"])[
            keep].max() < 1e-12  # the golden float layer is the HF layer

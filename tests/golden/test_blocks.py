"""Golden blocks against Hugging Face transformers' own layers (fp64, same weights)."""

from __future__ import annotations

import pytest
import torch
from conftest import require_module
from hf_tiny import F64, right_padding, tiny_bert, tiny_llama, tiny_vit

from vckattn.golden.attention import padding_keep
from vckattn.golden.blocks import BertLayer, LlamaBlock, ViTBlock

require_module("transformers")


def test_bert_layers_match_hf(gen):
    model = tiny_bert()
    cfg = model.config
    ids = torch.randint(0, cfg.vocab_size, (2, 10), generator=gen)
    mask = right_padding([10, 6], 10)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).last_hidden_state
        h = model.embeddings(input_ids=ids)
        for hf_layer in model.encoder.layer:
            blk = BertLayer(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size,
                            cfg.layer_norm_eps).to(F64).load_hf(hf_layer)
            h = blk(h, keep=padding_keep(mask))
    valid = mask.bool()
    torch.testing.assert_close(h[valid], ref[valid], rtol=0, atol=1e-12)


def test_vit_blocks_match_hf(gen):
    model = tiny_vit()
    cfg = model.config
    pix = torch.randn(2, 1, 16, 16, generator=gen, dtype=F64)
    with torch.no_grad():
        ref = model(pixel_values=pix).last_hidden_state
        h = model.embeddings(pix)
        for hf_layer in model.layers:
            blk = ViTBlock(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size,
                           cfg.layer_norm_eps).to(F64).load_hf(hf_layer)
            h = blk(h)
        h = model.layernorm(h)
    torch.testing.assert_close(h, ref, rtol=0, atol=1e-12)


def _golden_llama_stack(model, ids, mask, rope=None):
    """Embeddings (HF) -> golden LlamaBlocks with the HF weights -> final norm (HF)."""
    cfg = model.config
    h = model.embed_tokens(ids)
    for hf_layer in model.layers:
        blk = LlamaBlock(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
                         cfg.intermediate_size, "rmsnorm", cfg.rms_norm_eps,
                         cfg.rope_parameters["rope_theta"]).to(F64).load_hf(hf_layer)
        h = blk(h, keep=padding_keep(mask), rope=rope)
    return model.norm(h)



def test_llama_blocks_match_hf_gqa_rope_causal(gen):
    # Hugging Face computes LlamaRMSNorm and the RoPE tables in float32 even in a float64 model,
    # so the whole stack agrees to float32 rounding (error budget: a few float32 ulps of O(1)
    # activations per norm, < 1e-5) ...
    model = tiny_llama()
    ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=gen)
    mask = right_padding([12, 7], 12)
    valid = mask.bool()
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).last_hidden_state
        got = _golden_llama_stack(model, ids, mask)
    torch.testing.assert_close(got[valid], ref[valid], rtol=0, atol=1e-5)


def test_llama_attention_and_mlp_match_hf_exactly(gen):
    # ... while the float64 parts, attention (GQA, RoPE, causal) and the SwiGLU MLP, agree to fp64.
    model = tiny_llama()
    cfg = model.config
    hf_layer = model.layers[0]
    blk = LlamaBlock(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
                     cfg.intermediate_size).to(F64).load_hf(hf_layer)
    x = torch.randn(2, 12, cfg.hidden_size, generator=gen, dtype=F64)
    with torch.no_grad():
        rope = model.rotary_emb(x, torch.arange(12)[None])
        ref_attn, _ = hf_layer.self_attn(hidden_states=x, position_embeddings=rope, attention_mask=None)
        torch.testing.assert_close(blk.attn(x, causal=True, rope=rope), ref_attn, rtol=0, atol=1e-12)
        torch.testing.assert_close(blk.mlp(x), hf_layer.mlp(x), rtol=0, atol=1e-12)


def test_load_hf_rejects_mismatched_layer():
    model = tiny_bert()
    blk = BertLayer(48, 4, 64)
    with pytest.raises(ValueError, match="shape mismatch"):
        blk.load_hf(model.encoder.layer[0])
    with pytest.raises(KeyError, match="no tensor"):
        LlamaBlock(32, 4).load_hf(model.encoder.layer[0])


@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm", "dyt", "lns", "periln", "bhyt", "bhytstar"])
def test_llama_block_norm_variants_run_and_train(gen, norm):
    blk = LlamaBlock(32, 4, 2, 64, norm=norm, layer=3, seq_len=16).to(F64)
    if norm in ("bhyt", "bhytstar"):
        c = blk.refresh_c_attn()
        assert c > 0 and float(blk.bhyt.c_attn) == pytest.approx(c)
    x = torch.randn(2, 8, 32, generator=gen, dtype=F64)
    y = blk(x)
    assert y.shape == x.shape and torch.isfinite(y).all()
    y.square().mean().backward()
    grads = {n: p.grad for n, p in blk.named_parameters()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values()), norm


def test_llama_block_causality(gen):
    blk = LlamaBlock(32, 4, 2, 64, norm="bhyt").to(F64)
    x = torch.randn(1, 8, 32, generator=gen, dtype=F64)
    y1 = blk(x)
    x2 = x.clone()
    x2[0, 5:] += 1.0  # change the future only
    y2 = blk(x2)
    torch.testing.assert_close(y1[0, :5], y2[0, :5], rtol=0, atol=0)
    assert not torch.allclose(y1[0, 5:], y2[0, 5:])


def test_bhyt_block_form_matches_manual_sequence(gen):
    blk = LlamaBlock(32, 4, 2, 64, norm="bhyt", lam_attn=2.0, lam_mlp=1.0, kappa=10.0, seq_len=8).to(F64)
    c = blk.refresh_c_attn()
    x = torch.randn(1, 6, 32, generator=gen, dtype=F64)
    s2 = (x * x).mean(-1, keepdim=True)
    u = torch.tanh(2.0 * x / (10.0 * torch.sqrt(s2 + 1e-6)))
    from vckattn.golden.attention import rope_cos_sin

    h = x + blk.attn(u, causal=True, rope=rope_cos_sin(torch.arange(6), 8, 10000.0, F64))
    v = torch.tanh(1.0 * h / (10.0 * torch.sqrt(s2 + c * 4.0 / 100.0 + 1e-6)))
    ref = h + blk.mlp(v)
    torch.testing.assert_close(blk(x), ref, rtol=0, atol=1e-13)

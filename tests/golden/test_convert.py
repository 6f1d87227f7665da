"""In-place conversion of real and tiny Hugging Face models."""

from __future__ import annotations

import pytest
import torch
from conftest import require_module
from hf_tiny import F64, right_padding, tiny_bert, tiny_llama, tiny_vit

from vckattn.golden import calibrate, convert
from vckattn.golden.attention import padding_keep
from vckattn.golden.bhyt import BHyTBlockNorms, c_attn_from_weights
from vckattn.golden.blocks import LlamaBlock
from vckattn.golden.normalizers import SwiftMax
from vckattn.host.textdata import real_sentences

require_module("transformers")


@pytest.fixture(scope="module")
def minilm():
    from vckattn.golden.pretrained import load_minilm

    return load_minilm(torch.float32)


def test_minilm_softmax_conversion_reproduces_hf(minilm):
    tok, model = minilm
    sents = real_sentences(8)
    assert len(sents) == 8
    batch = tok(sents, padding=True, return_tensors="pt")
    assert batch["attention_mask"].sum(1).min() < batch["attention_mask"].shape[1]  # padding present
    with torch.no_grad():
        ref = model(**batch).last_hidden_state  # Hugging Face's own attention (sdpa)
    impl_before = model.config._attn_implementation
    convert.swap_attention_normalizer(model, "softmax")
    try:
        assert model.config._attn_implementation == convert.ATTN_IMPL
        with torch.no_grad():
            got = model(**batch).last_hidden_state
    finally:
        for a in convert.attention_modules(model):
            del a.vckattn_normalizer
        model.set_attn_implementation(impl_before)
    valid = batch["attention_mask"].bool()
    for i in range(len(sents)):
        v = valid[i]
        rel = float((got[i][v] - ref[i][v]).norm() / ref[i][v].norm())
        assert rel <= 1e-5, f"sentence {i}: relative error {rel:.2e}"


def test_minilm_swiftmax_conversion_selected_layers(minilm):
    tok, model = minilm
    impl_before = model.config._attn_implementation
    try:
        norms = convert.swap_attention_normalizer(model, "swiftmax", layers=[0, 2], beta=[4.0, 3.5], gamma=[2.0, 1.5])
        attns = convert.attention_modules(model)
        assert sorted(norms) == [0, 2]
        assert [hasattr(a, "vckattn_normalizer") for a in attns] == [True, False, True, False, False, False]
        assert attns[2].vckattn_normalizer.beta.item() == 3.5 and attns[2].vckattn_normalizer.gamma.item() == 1.5
        keys = [k for k in model.state_dict() if "vckattn_normalizer" in k]
        assert keys == ["encoder.layer.0.attention.self.vckattn_normalizer.beta",
                        "encoder.layer.0.attention.self.vckattn_normalizer.gamma",
                        "encoder.layer.2.attention.self.vckattn_normalizer.beta",
                        "encoder.layer.2.attention.self.vckattn_normalizer.gamma"]
    finally:
        for a in convert.attention_modules(model):
            if hasattr(a, "vckattn_normalizer"):
                del a.vckattn_normalizer
        model.set_attn_implementation(impl_before)


def test_swiftmax_padding_invariance_proves_exact_zero_mask():
    # SwiftMax does not normalize rows, so any weight left on a padded key would change the
    # valid tokens' outputs: padded-in-a-batch and alone must agree.
    model = tiny_bert()
    convert.swap_attention_normalizer(model, "swiftmax", beta=0.5, gamma=3.0)
    ids = torch.randint(1, 100, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = right_padding([9, 5], 9)
    with torch.no_grad():
        batched = model(input_ids=ids, attention_mask=mask).last_hidden_state
        alone = model(input_ids=ids[1:, :5], attention_mask=mask[1:, :5]).last_hidden_state
        garbage = ids.clone()
        garbage[1, 5:] = 7  # different padding content must not matter either
        batched2 = model(input_ids=garbage, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(batched[1, :5], alone[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(batched[1, :5], batched2[1, :5], rtol=0, atol=1e-12)


def test_swiftmax_beta_gamma_train_with_frozen_weights():
    model = tiny_bert()
    norms = convert.swap_attention_normalizer(model, "swiftmax", per_head=True)
    assert norms[0].beta.shape == (4,)
    for name, p in model.named_parameters():
        p.requires_grad_("vckattn_normalizer" in name)
    ids = torch.randint(1, 100, (2, 6))
    model(input_ids=ids).last_hidden_state.square().mean().backward()
    for n in norms.values():
        assert n.beta.grad is not None and n.gamma.grad is not None
        assert torch.all(n.beta.grad != 0)


def test_vit_and_llama_softmax_conversion_is_identity():
    pix = torch.randn(2, 1, 16, 16, generator=torch.Generator().manual_seed(1), dtype=F64)
    vit = tiny_vit()
    with torch.no_grad():
        ref = vit(pixel_values=pix).last_hidden_state
        convert.swap_attention_normalizer(vit, "softmax")
        torch.testing.assert_close(vit(pixel_values=pix).last_hidden_state, ref, rtol=0, atol=1e-12)

    llama = tiny_llama()
    ids = torch.randint(0, 100, (2, 10), generator=torch.Generator().manual_seed(2))
    mask = right_padding([10, 6], 10)
    valid = mask.bool()
    with torch.no_grad():
        ref = llama(input_ids=ids, attention_mask=mask).last_hidden_state
        convert.swap_attention_normalizer(llama, "online_softmax")
        got = llama(input_ids=ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(got[valid], ref[valid], rtol=0, atol=1e-12)


def test_llama_swiftmax_conversion_stays_causal():
    llama = tiny_llama()
    convert.swap_attention_normalizer(llama, "swiftmax", base="2", beta=1.0, gamma=4.0)
    ids = torch.randint(0, 100, (1, 10), generator=torch.Generator().manual_seed(3))
    ids2 = ids.clone()
    ids2[0, 6:] = (ids2[0, 6:] + 1) % 100
    with torch.no_grad():
        a = llama(input_ids=ids).last_hidden_state
        b = llama(input_ids=ids2).last_hidden_state
    torch.testing.assert_close(a[0, :6], b[0, :6], rtol=0, atol=0)


def test_conversion_errors_are_clear():
    model = tiny_bert()
    with pytest.raises(ValueError, match="out of range"):
        convert.swap_attention_normalizer(model, "swiftmax", layers=[5])
    with pytest.raises(ValueError, match="beta: got 1 values for 2"):
        convert.swap_attention_normalizer(model, "swiftmax", beta=[1.0])
    with pytest.raises(ValueError, match="unknown normalizer"):
        convert.swap_attention_normalizer(model, "sparsemax")
    with pytest.raises(ValueError, match="Llama-style"):
        convert.convert_llama_norms_to_bhyt(model)
    with pytest.raises(ValueError, match="unsupported model type"):
        convert.swap_attention_normalizer(torch.nn.Linear(2, 2))


def test_bhyt_conversion_equals_golden_bhyt_blocks():
    llama = tiny_llama(layers=3)
    cfg = llama.config
    rms_w = [layer.input_layernorm.weight.detach().clone() for layer in llama.layers]
    golden = []
    for layer in llama.layers:
        blk = LlamaBlock(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size,
                         norm="bhyt", lam_attn=2.0, lam_mlp=1.0, kappa=10.0, seq_len=32).to(F64).load_hf(layer)
        with torch.no_grad():
            blk.bhyt.weight_attn.copy_(layer.input_layernorm.weight)
            blk.bhyt.weight_mlp.copy_(layer.post_attention_layernorm.weight)
        blk.refresh_c_attn()
        golden.append(blk)
    norms = convert.convert_llama_norms_to_bhyt(llama, 2.0, 1.0, 10.0, seq_len=32)
    assert sorted(norms) == [0, 1, 2]
    for i, layer in enumerate(llama.layers):
        assert isinstance(layer.bhyt, BHyTBlockNorms)
        torch.testing.assert_close(layer.bhyt.weight_attn, rms_w[i], rtol=0, atol=0)
        want = c_attn_from_weights(layer.self_attn.v_proj.weight, layer.self_attn.o_proj.weight, 6, 2, 32)
        assert float(layer.bhyt.c_attn) == pytest.approx(float(want), rel=1e-12) and float(want) > 0
    assert type(llama.norm).__name__ == "LlamaRMSNorm"  # the final norm stays RMSNorm
    sd_keys = [k for k in llama.state_dict() if ".bhyt." in k or "layernorm" in k]
    assert not any("layernorm" in k for k in sd_keys)  # no duplicated parameters under the site modules
    assert "layers.0.bhyt.c_attn" in sd_keys

    ids = torch.randint(0, 100, (2, 10), generator=torch.Generator().manual_seed(4))
    mask = right_padding([10, 7], 10)
    with torch.no_grad():
        got = llama(input_ids=ids, attention_mask=mask).last_hidden_state
        h = llama.embed_tokens(ids)
        rope = llama.rotary_emb(h, torch.arange(10)[None])
        for blk in golden:
            h = blk(h, keep=padding_keep(mask), rope=rope)
        want = llama.norm(h)
    valid = mask.bool()
    torch.testing.assert_close(got[valid], want[valid], rtol=0, atol=1e-12)


def test_bhyt_refresh_and_training():
    llama = tiny_llama()
    convert.convert_llama_norms_to_bhyt(llama, seq_len=16, exact_second_stat=False)
    layer = llama.layers[1]
    before = float(layer.bhyt.c_attn)
    with torch.no_grad():
        layer.self_attn.o_proj.weight.mul_(2.0)
    after = convert.refresh_bhyt_c_attn(llama)[1]
    assert after == pytest.approx(4.0 * before, rel=1e-12)
    ids = torch.randint(0, 100, (2, 8))
    llama(input_ids=ids).last_hidden_state.square().mean().backward()
    assert layer.bhyt.lam_attn.grad is not None and layer.bhyt.lam_mlp.grad is not None
    assert layer.bhyt.weight_mlp.grad is not None


def test_collect_softmax_stats_proposes_beta_gamma():
    model = tiny_bert()
    ids = torch.randint(1, 100, (3, 8))
    stats = calibrate.collect_softmax_stats(model, [{"input_ids": ids}])
    assert len(stats) == 2
    for s in stats:
        assert s["rows"] == 3 * 4 * 8
        assert 1.0 <= s["gamma"] <= 8.0  # S = sum exp(z - z_max) lies in [1, Sk]
    norms = convert.swap_attention_normalizer(model, "swiftmax", beta=[s["beta"] for s in stats],
                                              gamma=[s["gamma"] for s in stats])
    assert isinstance(norms[1], SwiftMax) and norms[1].beta.item() == pytest.approx(stats[1]["beta"])

"""Golden attention against torch.nn.functional.scaled_dot_product_attention (fp64)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vckattn.golden.attention import (
    MultiHeadAttention,
    apply_rope,
    attention,
    blockwise_softmax_attention,
    causal_keep,
    padding_keep,
    rope_cos_sin,
)
from vckattn.golden.normalizers import OnlineSoftmax, Softmax, SwiftMax

F64 = torch.float64
ATOL = 1e-6  # the bound; measured errors are ~1e-15


def _qkv(gen, b=2, h=4, hkv=4, sq=9, sk=9, d=16):
    q = torch.randn(b, h, sq, d, generator=gen, dtype=F64)
    k = torch.randn(b, hkv, sk, d, generator=gen, dtype=F64)
    v = torch.randn(b, hkv, sk, d, generator=gen, dtype=F64)
    return q, k, v


def _padding(b, sk, lengths):
    m = torch.zeros(b, sk, dtype=torch.long)
    for i, n in enumerate(lengths):
        m[i, :n] = 1
    return m


def test_plain_matches_sdpa(gen):
    q, k, v = _qkv(gen)
    out, _ = attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=ATOL)


def test_padding_mask_matches_sdpa(gen):
    q, k, v = _qkv(gen, sq=11, sk=11)
    keep = padding_keep(_padding(2, 11, [11, 6]))
    out, w = attention(q, k, v, Softmax(), keep=keep)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(out, ref, rtol=0, atol=ATOL)
    assert torch.all(w[1, :, :, 6:] == 0)


def test_causal_matches_sdpa(gen):
    q, k, v = _qkv(gen, sq=13, sk=13)
    out, _ = attention(q, k, v, causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=0, atol=ATOL)


def test_causal_with_cache_offset_matches_explicit_mask(gen):
    # 3 new queries attending to 10 keys (7 cached): bottom-right aligned causal mask
    q, k, v = _qkv(gen, sq=3, sk=10)
    keep = causal_keep(3, 10)
    assert keep.tolist()[0] == [True] * 8 + [False] * 2
    out, _ = attention(q, k, v, causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep), rtol=0, atol=ATOL)


@pytest.mark.parametrize("h,hkv", [(8, 2), (6, 3), (4, 1)])
def test_gqa_causal_padding_matches_sdpa(gen, h, hkv):
    q, k, v = _qkv(gen, h=h, hkv=hkv, sq=10, sk=10)
    keep = padding_keep(_padding(2, 10, [10, 7])) & causal_keep(10, 10)
    out, _ = attention(q, k, v, keep=keep)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
    torch.testing.assert_close(out, ref, rtol=0, atol=ATOL)


@pytest.mark.parametrize("block", [1, 4, 16])
def test_online_normalizer_and_blockwise_attention_match_sdpa(gen, block):
    q, k, v = _qkv(gen, h=6, hkv=2, sq=12, sk=12)
    keep = padding_keep(_padding(2, 12, [12, 5]))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep & causal_keep(12, 12), enable_gqa=True)
    out, _ = attention(q, k, v, OnlineSoftmax(block), keep=keep, causal=True)
    torch.testing.assert_close(out, ref, rtol=0, atol=ATOL)
    out2 = blockwise_softmax_attention(q, k, v, keep=keep, causal=True, block=block)
    torch.testing.assert_close(out2, ref, rtol=0, atol=ATOL)


def test_custom_scale_matches_sdpa(gen):
    q, k, v = _qkv(gen)
    out, _ = attention(q, k, v, scale=0.37)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.37), rtol=0, atol=ATOL)


def test_swiftmax_attention_is_weighted_sum_without_normalization(gen):
    q, k, v = _qkv(gen)
    sm = SwiftMax(beta=0.5, gamma=4.0).double()
    out, w = attention(q, k, v, sm)
    z = q @ k.transpose(-1, -2) / 4.0  # sqrt(16)
    torch.testing.assert_close(w, torch.exp(torch.clamp(z - 0.5, -10, 40)) / 4.0, rtol=1e-14, atol=0)
    torch.testing.assert_close(out, w @ v, rtol=1e-14, atol=1e-14)


def test_rope_matches_complex_rotation(gen):
    # Independent reference: rotate-half RoPE == complex multiplication of (x_i, x_{i+D/2}) by e^{i p f}
    d, s = 8, 5
    x = torch.randn(1, 1, s, d, generator=gen, dtype=F64)
    cos, sin = rope_cos_sin(torch.arange(s), d, 10000.0, F64)
    got = apply_rope(x, cos, sin)
    xc = torch.complex(x[..., : d // 2], x[..., d // 2 :])
    f = 10000.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)
    rot = torch.polar(torch.ones(s, d // 2, dtype=F64), torch.arange(s, dtype=F64)[:, None] * f)
    ref_c = xc * rot
    torch.testing.assert_close(got, torch.cat((ref_c.real, ref_c.imag), dim=-1), rtol=0, atol=1e-13)


def test_mha_module_matches_nn_multihead_attention(gen):
    # torch's own nn.MultiheadAttention as the reference (same weights, padding mask)
    d, h = 24, 4
    ref = torch.nn.MultiheadAttention(d, h, batch_first=True, dtype=F64)
    mine = MultiHeadAttention(d, h, bias=True).double()
    with torch.no_grad():
        wq, wk, wv = ref.in_proj_weight.chunk(3)
        bq, bk, bv = ref.in_proj_bias.chunk(3)
        for lin, w, bias in ((mine.q_proj, wq, bq), (mine.k_proj, wk, bk), (mine.v_proj, wv, bv)):
            lin.weight.copy_(w)
            lin.bias.copy_(bias)
        mine.o_proj.weight.copy_(ref.out_proj.weight)
        mine.o_proj.bias.copy_(ref.out_proj.bias)
    x = torch.randn(2, 7, d, generator=gen, dtype=F64)
    pad = _padding(2, 7, [7, 4])
    expected, _ = ref(x, x, x, key_padding_mask=~pad.bool(), need_weights=False)
    got = mine(x, keep=padding_keep(pad))
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)

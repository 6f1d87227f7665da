"""The integer attention sublayer (golden/sublayer.py): against its float64 reference on real checkpoint layers
(MiniLM; the BHyT-converted SmolLM2, slow), composition with the integer attention layer called directly,
hand-computed rounding/saturation at its requantization points, GQA shapes and RoPE against a float RoPE.

Measured figures (mean per-token cosine over valid tokens, calibration on 16 / 12 sentences, evaluation on
held-out sentences; printed with ``pytest -s``):

* MiniLM, 6 layers: attention branch Y ≥ 0.984 (online softmax; SwiftMax ≥ 0.9991), residual R ≥ 0.9972,
  LayerNorm output ≥ 0.9983;
* SmolLM2-135M converted to BHyT, untrained (layers 0, 1, 15, 29): BHyT output U ≥ 0.9984, Y ≥ 0.9995 (online
  softmax; SwiftMax ≥ 0.9956), H' = H + Y ≥ 0.9956.

"softmax" here is the integer online softmax against the float softmax; SwiftMax uses the untuned ``max``
initialisation of β, γ, the same in the integer and the float sublayer.

The bounds below sit under these figures with margin.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import require_module

from vckattn.golden.attention import rope_cos_sin
from vckattn.golden.bhyt_int import bhyt_site_registers
from vckattn.golden.blocks import BertLayer, LlamaBlock
from vckattn.golden.quant_attention import compare, narrow_layer
from vckattn.golden.requant import RequantRegisters
from vckattn.golden.rope_int import rope_error_bound, rope_int
from vckattn.golden.stages import attention_int, sublayer_int
from vckattn.golden.sublayer import (
    SUBLAYER_FORMAT,
    DecoderSublayer,
    ResidualRegisters,
    calibrate_decoder,
    calibrate_encoder,
    decoder_sublayer_float,
    encoder_sublayer_float,
    host_layernorm,
    quantize_input,
    residual_add_int,
    residual_registers,
    rope_tables,
    swiftmax_constants,
)

# earned bounds (module doc: the measured figures)
ENC_Y = {"softmax": 0.975, "swiftmax": 0.997}
ENC_R, ENC_OUT = 0.994, 0.996
DEC_U = 0.996
DEC_Y = {"softmax": 0.998, "swiftmax": 0.99}
DEC_MID = 0.99


def _y_real(sub, y: np.ndarray) -> np.ndarray:
    return y * (sub.attn.s_a * sub.attn.o_proj.s_w)


# ------------------------------------------------------------------------------------------ MiniLM (encoder)


@pytest.fixture(scope="module")
def minilm_states():
    require_module("transformers")
    from vckattn.golden.pretrained import load_minilm
    from vckattn.host.textdata import real_sentences

    tok, model = load_minilm(torch.float64)

    def capture(sents):
        enc = tok(sents, padding=True, truncation=True, max_length=64, return_tensors="pt")
        with torch.no_grad():
            out = model(**enc, output_hidden_states=True)
        return [h.numpy() for h in out.hidden_states], enc["attention_mask"].numpy().astype(bool)

    return model, capture(real_sentences(16)), capture(real_sentences(8, start_topic=60))


@pytest.mark.parametrize("normalizer", ["softmax", "swiftmax"])
def test_encoder_sublayer_tracks_float_on_minilm(minilm_states, normalizer):
    model, (hc, kc), (he, ke) = minilm_states
    for i, hf_layer in enumerate(model.encoder.layer):
        blk = BertLayer(384, 12, 1536).double().load_hf(hf_layer)
        beta, gamma = swiftmax_constants(blk.attn, hc[i], kc) if normalizer == "swiftmax" else (0.0, 1.0)
        sub = calibrate_encoder(blk.attn, blk.norm1, hc[i], kc, normalizer, beta, gamma)
        r, tr = sublayer_int(sub, quantize_input(he[i], sub.attn.s_x), ke)
        f = encoder_sublayer_float(blk.attn, blk.norm1, he[i], ke, normalizer, beta, gamma)
        # the float reference is the checkpoint's layer up to its LayerNorm
        with torch.no_grad():
            hf = hf_layer.attention(torch.from_numpy(he[i]), attention_mask=None if ke.all() else
                                    (1.0 - torch.from_numpy(ke[:, None, None, :]).double()) * -1e30)[0].numpy()
        if normalizer == "softmax":
            assert np.abs(hf - f["out"])[ke].max() < 1e-6
        my = compare(_y_real(sub, tr["y"]), f["y"], ke)
        mr = compare(r * sub.residual.s_out, f["r"], ke)
        out = host_layernorm(r, sub.residual.s_out, sub.ln_weight, sub.ln_bias, sub.ln_eps)
        mo = compare(out, f["out"], ke)
        print(f"\nMiniLM layer {i} {normalizer}: Y cos {my['cosine']:.5f}  R cos {mr['cosine']:.5f}  "
              f"LN(R) cos {mo['cosine']:.5f} (min per token {mo['min_cosine']:.5f})")
        assert my["cosine"] > ENC_Y[normalizer], (i, my)
        assert mr["cosine"] > ENC_R, (i, mr)
        assert mo["cosine"] > ENC_OUT, (i, mo)
        assert r.dtype == np.int8 and r.shape == he[i].shape


@pytest.mark.parametrize("normalizer, score_bits", [("softmax", 32), ("swiftmax", 8)])
def test_encoder_attention_is_the_integer_attention_layer(minilm_states, normalizer, score_bits):
    """Composition: the sublayer's Q/K/V, A and W_O accumulators equal quant_attention's layer run directly (also
    with the engine's 8-bit scores)."""
    model, (hc, kc), (he, ke) = minilm_states
    blk = BertLayer(384, 12, 1536).double().load_hf(model.encoder.layer[2])
    beta, gamma = swiftmax_constants(blk.attn, hc[2], kc) if normalizer == "swiftmax" else (0.0, 1.0)
    sub = calibrate_encoder(blk.attn, blk.norm1, hc[2], kc, normalizer, beta, gamma)
    sub = dataclasses.replace(sub, attn=narrow_layer(sub.attn, score_bits))
    assert sub.attn.score_bits == score_bits
    x = quantize_input(he[2], sub.attn.s_x)
    _, tr = sublayer_int(sub, x, ke)
    _, ref = attention_int(sub.attn, x, ke, x_is_int=True)
    b, s, _ = x.shape
    assert np.array_equal(tr["q"].transpose(0, 2, 1, 3).reshape(b, s, -1), ref["q"])
    assert np.array_equal(tr["a"].transpose(0, 2, 1, 3).reshape(b, s, -1), ref["a"])
    assert np.array_equal(tr["p"], ref["p"]) and np.array_equal(tr["y"], ref["y"])


# ------------------------------------------------------------------------------------------ decoder, small


def _small_decoder(seed: int = 0):
    torch.manual_seed(seed)
    blk = LlamaBlock(48, 6, 2, 96, "bhyt", seq_len=16).double()
    with torch.no_grad():
        blk.bhyt.weight_attn.uniform_(0.5, 1.5)
    blk.refresh_c_attn()
    g = torch.Generator().manual_seed(seed + 1)
    h = torch.randn(3, 12, 48, generator=g, dtype=torch.float64).numpy()
    keep = np.ones((3, 12), bool)
    keep[1, 9:] = False
    rope = rope_cos_sin(torch.arange(12), 8, dtype=torch.float64)
    return blk, h, keep, rope


def test_decoder_gqa_rope_shapes_and_composition():
    blk, h, keep, rope = _small_decoder()
    sub = calibrate_decoder(blk.attn, blk.bhyt, h, keep, rope)
    assert (sub.attn.n_heads, sub.attn.n_kv_heads, sub.attn.causal) == (6, 2, True)
    hi = quantize_input(h, sub.s_h)
    c, s = rope_tables(rope, 3, 12, 8)
    assert c.dtype == np.int16 and c.shape == (12, 8) and int(c[0, 0]) == 1 << SUBLAYER_FORMAT.rope_frac
    out, tr = sublayer_int(sub, hi, keep, (c, s))
    assert out.shape == h.shape and out.dtype == np.int8
    assert tr["q"].shape == (3, 6, 12, 8) and tr["k"].shape == tr["v"].shape == (3, 2, 12, 8)
    assert tr["stat"].shape == (3, 12, 1) and np.array_equal(tr["stat"], (hi.astype(np.int64) ** 2).sum(-1, keepdims=1))
    # composition: quant_attention's layer on the same int8 attention input (its RoPE from the float tables)
    _, ref = attention_int(sub.attn, tr["u"], keep, x_is_int=True, rope=rope)
    for name in ("q", "k", "a"):
        assert np.array_equal(tr[name].transpose(0, 2, 1, 3).reshape(3, 12, -1), ref[name]), name
    assert np.array_equal(tr["p"], ref["p"]) and np.array_equal(tr["y"], ref["y"])
    # causal: no query attends a later key
    assert not np.any(np.triu(tr["p"], k=1))


def test_decoder_rope_against_float_rope():
    """The sublayer's rotated Q/K are the float rotation of its int8 projections within the RoPE budget."""
    blk, h, keep, rope = _small_decoder(seed=3)
    sub = calibrate_decoder(blk.attn, blk.bhyt, h, keep, rope)
    c, s = rope_tables(rope, 3, 12, 8)
    _, tr = sublayer_int(sub, quantize_input(h, sub.s_h), keep, (c, s))
    _check_rope(tr, rope)


def _check_rope(tr: dict, rope) -> None:
    """``tr``'s rotated q, k against the float rotation of its int8 projections: within the RoPE budget."""
    cos, sin = (np.asarray(t.detach().double().numpy() if hasattr(t, "detach") else t, np.float64) for t in rope)
    if cos.ndim == 3:  # (1, S, D) from Hugging Face: a head axis
        cos, sin = cos[:, None], sin[:, None]
    for pre, got in (("q_pre", "q"), ("k_pre", "k")):
        x = tr[pre].astype(np.float64)
        half = x.shape[-1] // 2
        rot = np.concatenate((-x[..., half:], x[..., :half]), -1)
        ref = np.clip(x * cos + rot * sin, -128, 127)
        err = np.abs(tr[got] - ref)
        assert np.all(err <= rope_error_bound(tr[pre])), float(err.max())
        assert err.max() > 0  # the rotation did something the int8 grid had to round


def test_decoder_tracks_float_small():
    blk, h, keep, rope = _small_decoder(seed=5)
    sub = calibrate_decoder(blk.attn, blk.bhyt, h, keep, rope)
    c, s = rope_tables(rope, 3, 12, 8)
    out, tr = sublayer_int(sub, quantize_input(h, sub.s_h), keep, (c, s))
    f = decoder_sublayer_float(blk.attn, blk.bhyt, h, keep, rope)
    assert compare(tr["u"] * sub.attn.s_x, f["u"], keep)["cosine"] > 0.99
    assert compare(out * sub.residual.s_out, f["h_mid"], keep)["cosine"] > 0.99


# ------------------------------------------------------------------------------------------ requantization points


def _regs(mult_y, shift_y, mult_x, shift_x) -> ResidualRegisters:
    return ResidualRegisters(RequantRegisters(np.asarray(mult_y, np.int64), np.asarray(shift_y, np.int64)),
                             RequantRegisters(np.int64(mult_x), np.int64(shift_x)), 1.0)


def test_residual_add_rounds_half_up_once_and_saturates():
    # x' = 256·x, y' = 128·y: out = round_half_up(x + y/2), saturated to int8
    regs = _regs(128, 0, 256, 0)
    x = np.array([10, 10, -10, 127, -128, -128, 0, -1])
    y = np.array([1, -1, -1, 1, -1, -3, 5, 0])
    assert residual_add_int(y[:, None], x[:, None], regs).ravel().tolist() == [11, 10, -10, 127, -128, -128, 3, -1]


def test_residual_addends_round_half_up_and_saturate_at_res_bits():
    # per channel: channel 0 y' = round_half_up(3y/4); channel 1 y' = y (mult 1, shift 0); x' = x·2^16
    regs = _regs([3, 1], [2, 0], 1 << 16, 0)
    # channel 0: y = 342 -> 3·342/4 = 256.5 -> 257 (half up) -> 257/256 -> 1
    y = np.array([[342, 0], [-342, 0], [0, 1 << 30], [0, -(1 << 30)]])
    x = np.array([[0, 0], [0, 0], [0, -128], [0, 127]])
    got = residual_add_int(y, x, regs)
    # -342·3/4 = -256.5 -> -256 (half up) -> -256/256 = -1
    assert got[:2, 0].tolist() == [1, -1]
    # y' saturates at 2^23 - 1 (res_bits = 24): (2^23 - 1) - 2^23 = -1 -> round_half_up(-1/256) = 0; unsaturated it
    # would be +127. And -2^23 + 127·2^16 = -2^23 + 8323072 = -65536 -> -256 -> saturate -128
    assert got[2:, 1].tolist() == [0, -128]


def test_residual_registers_fold_the_scale_ratio():
    regs = residual_registers(np.array([0.003, 0.0007]), 0.02, 0.05)
    for ratio, m, s in ((0.06, regs.rq_y.mult[0], regs.rq_y.shift[0]), (0.014, regs.rq_y.mult[1], regs.rq_y.shift[1]),
                        (0.4, regs.rq_x.mult, regs.rq_x.shift)):
        real = ratio * 2 ** SUBLAYER_FORMAT.res_frac
        assert abs(int(m) * 2.0 ** -int(s) / real - 1) < 2.0 ** -(SUBLAYER_FORMAT.mult_bits - 2)
        assert 1 << (SUBLAYER_FORMAT.mult_bits - 2) <= int(m) < 1 << (SUBLAYER_FORMAT.mult_bits - 1)
    with pytest.raises(ValueError):
        residual_registers(1.0, 0.02, 0.0)


def test_constants_outside_their_formats_are_refused():
    blk, h, keep, rope = _small_decoder()
    sub = calibrate_decoder(blk.attn, blk.bhyt, h, keep, rope)
    wide = dataclasses.replace(sub.attn, rq_v=RequantRegisters(np.int64(1 << 17), np.int64(20)))
    with pytest.raises(ValueError, match="rq_v multiplier does not fit 18"):
        dataclasses.replace(sub, attn=wide)
    sub.attn.o_proj.b = np.full(48, 1 << 31, np.int64)
    with pytest.raises(ValueError, match="o_proj bias does not fit 32"):
        dataclasses.replace(sub)
    with pytest.raises(ValueError, match="causal"):
        DecoderSublayer(sub.s_h, sub.site_a, dataclasses.replace(sub.attn, causal=False), sub.residual)


def test_projection_and_rope_requantization_by_hand():
    """A hand-built decoder: Q = requant(U·W_Qᵀ + b) with mult 1, shift 1 (half up, saturating); RoPE with cos = 0,
    sin = 1 rotates by a quarter turn, so -(-128) saturates to 127; V = U + b saturating; A = P·V at 2^-6
    (half up, saturating)."""
    blk, h, keep, rope = _small_decoder()
    sub = calibrate_decoder(blk.attn, blk.bhyt, h, keep, rope)
    layer = sub.attn
    layer.q_proj.w = np.zeros((48, 48), np.int8)
    layer.q_proj.w[np.arange(48), np.arange(48)] = 1  # identity: the accumulator is U (+ bias)
    layer.q_proj._wt = None
    layer.q_proj.b = np.zeros(48, np.int64)
    layer.q_proj.b[:4] = [0, 255, -300, -256]
    layer.rq_q = RequantRegisters(np.int64(1), np.int64(1))
    # V = saturate8(U·I + b_V) on K/V head 0 (mult 1, shift 0); A = saturate8(round_half_up(P·V / 64))
    layer.v_proj.w = np.zeros((16, 48), np.int8)
    layer.v_proj.w[np.arange(16), np.arange(16)] = 1
    layer.v_proj._wt = None
    layer.v_proj.b = np.zeros(16, np.int64)
    layer.v_proj.b[:4] = [200, -200, 3, 0]
    layer.rq_v = RequantRegisters(np.int64(1), np.int64(0))
    layer.rq_a = RequantRegisters(np.int64(1), np.int64(6))
    site_a = bhyt_site_registers(1.0, 1.0, np.ones(48), 48, s_in=1.0, s_stat=1.0, s_out=1 / 127)
    sub = DecoderSublayer(sub.s_h, site_a, layer, sub.residual)
    hi = np.zeros((1, 2, 48), np.int8)
    hi[0, :, :4] = [[1, 1, 1, -1], [1, 1, 1, -1]]
    hi[0, :, 4:] = 100
    c = np.zeros((2, 8), np.int16)
    s = np.full((2, 8), 1 << SUBLAYER_FORMAT.rope_frac, np.int16)
    _, tr = sublayer_int(sub, hi, None, (c, s))
    u = tr["u"][0, 0, :4].astype(np.int64)
    acc = u + np.array([0, 255, -300, -256])
    expect = np.clip(np.floor((acc + 1) / 2), -128, 127)  # round half up of acc/2, saturate
    assert tr["q_pre"][0, 0, 0, :4].tolist() == expect.tolist()
    assert acc[1] >= 255 and expect[1] == 127 and acc[2] < -257 and expect[2] == -128  # both saturations reached
    assert np.any(acc % 2 == 1) and np.any((acc % 2 == 1) & (acc < 0))  # ties, one negative, rounded half up
    # rotate_half with cos 0, sin 1: y[:4] = -x[4:], y[4:] = x[:4]
    qp = tr["q_pre"][0, :, 0].astype(np.int64)
    want = np.clip(np.concatenate((-qp[:, 4:], qp[:, :4]), -1), -128, 127)
    assert np.array_equal(tr["q"][0, :, 0], want)
    x = np.full((1, 1, 1, 8), -128, np.int8)
    assert rope_int(x, c[:1], s[:1]).ravel().tolist() == [127] * 4 + [-128] * 4
    # V and A, written out: V saturates at ±127/-128; A = P·V rounded half up at 2^-6, saturated
    v = np.clip(tr["u"][0, :, :16].astype(np.int64) + layer.v_proj.b, -128, 127)
    assert np.array_equal(tr["v"][0, 0], v[:, :8])
    assert tr["v"][0, 0, 0, :2].tolist() == [127, -128]
    p = tr["p"][0].astype(np.int64)  # (H, S, S): query heads 0..2 read K/V head 0
    for head in range(3):
        o = p[head] @ v[:, :8]
        a = np.clip(np.floor((o + 32) / 64), -128, 127)
        assert np.array_equal(tr["a"][0, head], a), head
    assert tr["a"][0, 0, 0, 0] == 127 and tr["a"][0, 0, 0, 1] == -128  # P·V/64 beyond int8 on the first row
    # and the output rows, exactly: the first query attends only itself
    assert np.array_equal(tr["o"][0, 0, 0], p[0, 0, 0] * v[0, :8])


# ------------------------------------------------------------------------------------------ SmolLM2 (decoder), slow


@pytest.mark.slow
@pytest.mark.parametrize("normalizer", ["softmax", "swiftmax"])
def test_decoder_sublayer_tracks_float_on_bhyt_smollm2(smollm2_states, normalizer):
    model, layers, (cc, kc), (ce, ke) = smollm2_states
    for i in layers:
        blk = LlamaBlock(576, 9, 3, 1536, "bhyt", seq_len=64).double().load_hf(model.layers[i])
        blk.bhyt.load_state_dict(model.layers[i].bhyt.state_dict())
        beta, gamma = 0.0, 1.0
        if normalizer == "swiftmax":
            with torch.no_grad():
                u = blk.bhyt.attn_site(torch.from_numpy(cc[i]["h"]))[0].numpy()
            beta, gamma = swiftmax_constants(blk.attn, u, kc, rope=cc[i]["rope"], causal=True)
        sub = calibrate_decoder(blk.attn, blk.bhyt, cc[i]["h"], kc, cc[i]["rope"], normalizer, beta, gamma)
        hi = quantize_input(ce[i]["h"], sub.s_h)
        c, s = rope_tables(ce[i]["rope"], *hi.shape[:2], 64)
        out, tr = sublayer_int(sub, hi, ke, (c, s))
        f = decoder_sublayer_float(blk.attn, blk.bhyt, ce[i]["h"], ke, ce[i]["rope"], normalizer, beta, gamma)
        _check_rope(tr, ce[i]["rope"])
        mu = compare(tr["u"] * sub.attn.s_x, f["u"], ke)
        my = compare(_y_real(sub, tr["y"]), f["y"], ke)
        mh = compare(out * sub.residual.s_out, f["h_mid"], ke)
        print(f"\nSmolLM2-BHyT layer {i} {normalizer}: U cos {mu['cosine']:.5f}  Y cos {my['cosine']:.5f}  "
              f"H' cos {mh['cosine']:.5f} (min per token {mh['min_cosine']:.5f})")
        assert mu["cosine"] > DEC_U, (i, mu)
        assert my["cosine"] > DEC_Y[normalizer], (i, my)
        assert mh["cosine"] > DEC_MID, (i, mh)


@pytest.fixture(scope="module")
def smollm2_states():
    require_module("transformers")
    require_module("gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vckattn.golden import convert
    from vckattn.host.checkpoints import gguf_folder
    from vckattn.host.export.sources import resolve_checkpoint
    from vckattn.host.textdata import real_sentences

    src = resolve_checkpoint("smollm2")
    folder = gguf_folder(src)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).model
    convert.convert_llama_norms_to_bhyt(model, seq_len=64)
    layers = [0, 1, 15, 29]

    def capture(sents):
        seen: dict = {}
        hooks = []
        for i in layers:
            def pre(_m, args, kwargs, i=i):
                seen[i] = {"h": (args[0] if args else kwargs["hidden_states"]).double().numpy().copy(),
                           "rope": kwargs["position_embeddings"]}
            hooks.append(model.layers[i].register_forward_pre_hook(pre, with_kwargs=True))
        enc = tok(sents, padding=True, truncation=True, max_length=48, return_tensors="pt")
        with torch.no_grad():
            model(**enc, use_cache=False)
        for hk in hooks:
            hk.remove()
        return seen, enc["attention_mask"].numpy().astype(bool)

    return model, layers, capture(real_sentences(12)), capture(real_sentences(6, start_topic=60))

"""The bundle carries each layer's whole attention sublayer (host/export/sublayer.py, schema 4), and the host rebuilds
it exactly: MiniLM (encoder) and a BHyT Llama (decoder: the golden checkpoint, and a Hugging Face Llama converted to
BHyT for the checkpoint's own RoPE), every register against golden's constant functions of an independent
calibration, the integer sublayer bit-exact with golden's and within its error budget of the float sublayer; a
tampered sublayer is refused with one line naming the field; write -> load -> describe round trip."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
import torch
from conftest import require_module, tool_available

require_module("transformers")

from vckattn.golden.attention import rope_cos_sin  # noqa: E402
from vckattn.golden.bhyt_int import bhyt_site_registers  # noqa: E402
from vckattn.golden.quant_attention import compare  # noqa: E402
from vckattn.golden.requant import symmetric_scale  # noqa: E402
from vckattn.golden.rope_int import rope_tables_int  # noqa: E402
from vckattn.golden.stages import sublayer_int  # noqa: E402
from vckattn.golden.sublayer import (  # noqa: E402
    DecoderSublayer,
    EncoderSublayer,
    calibrate_encoder,
    decoder_sublayer_float,
    encoder_sublayer_float,
    host_layernorm,
    quantize_input,
    residual_registers,
    rope_tables,
)
from vckattn.host.bundle import BundleError, describe, load_bundle, write_bundle  # noqa: E402
from vckattn.host.export import (  # noqa: E402
    DEFAULT_SEQ_LEN,
    GoldenStack,
    export_checkpoint,
    save_golden_checkpoint,
    sublayer_rope,
    to_quant_layer,
    to_sublayer,
)
from vckattn.host.textdata import real_sentences  # noqa: E402

#: the sublayer's error budget against its float64 reference (tests/golden/test_sublayer_int.py's earned bounds on
#: MiniLM: residual R ≥ 0.994, LayerNorm output ≥ 0.996; SmolLM2 BHyT: H' ≥ 0.99)
ENC_R, ENC_OUT, DEC_MID = 0.994, 0.996, 0.99
#: export options for the tiny test models (head size 8): a bundle of the golden integer model only
GOLDEN_ONLY = {"check_hardware": False, "min_model_fidelity": -1, "check_samples": 4}
ENC_TRACE = ("x", "q", "k", "v", "s", "p", "o", "a", "y")
DEC_TRACE = ("h", "stat", "u", "q_pre", "k_pre", "q", "k", "v", "s", "p", "o", "a", "y")
TINY = {"family": "llama", "num_layers": 2, "vocab_size": 256, "max_seq_len": 64,
        "block": {"d_model": 48, "n_heads": 6, "n_kv_heads": 2, "d_ff": 96, "norm": "bhyt", "lam_attn": 1.7,
                  "lam_mlp": 1.2, "kappa": 10.0, "seq_len": 256}}
CALIB_BYTES = 24  # the tiny model's calibration length: every calibration sentence is longer (no padding)


def _f32(s_w: np.ndarray) -> np.ndarray:
    """Weight scales as the bundle stores them (float32): the residual's rq_y derives from these."""
    return np.asarray(s_w, np.float32).astype(np.float64)


def _same_residual(a, b) -> bool:
    return (a.s_out == b.s_out and all(np.array_equal(getattr(x, p), getattr(y, p)) for x, y in
                                       ((a.rq_x, b.rq_x), (a.rq_y, b.rq_y)) for p in ("mult", "shift")))


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# ------------------------------------------------------------------------------------------ MiniLM (encoder)


@pytest.fixture(scope="module")
def minilm_states():
    """The float MiniLM's hidden states on the calibration text of the ``minilm_bundle`` fixture (12 sentences, one
    padded batch, its default sequence length) and on 6 held-out sentences, and its first two blocks (golden)."""
    from vckattn.golden.blocks import BertLayer
    from vckattn.golden.pretrained import load_minilm

    tok, model = load_minilm()

    def run(sentences):
        enc = tok(sentences, padding=True, truncation=True, max_length=DEFAULT_SEQ_LEN, return_tensors="pt")
        with torch.no_grad():
            hs = model(**enc, output_hidden_states=True).hidden_states
        return [h.numpy().astype(np.float64) for h in hs], enc["attention_mask"].numpy().astype(bool)

    cfg = model.config
    blocks = [BertLayer(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size).double().load_hf(layer)
              for layer in model.encoder.layer[:2]]
    return run(real_sentences(12)), run(real_sentences(6, start_topic=60)), blocks


def test_minilm_sublayer_from_the_bundle_is_golden_bit_for_bit(minilm_bundle, minilm_states):
    """Every constant of the bundle's encoder sublayer equals golden's ``calibrate_encoder`` on the same checkpoint and
    calibration text (rq_y: golden's derivation from the float32 W_O scales the bundle stores), and
    ``sublayer_int`` of the bundle's sublayer equals golden's bit for bit on held-out text, within the error
    budget of the float sublayer."""
    b = load_bundle(minilm_bundle)
    (cx, ck), (hx, hk), blocks = minilm_states
    assert b.manifest["schema_version"] == 4 and b.manifest["formats"]["sublayer"]["res_frac"] == 8
    for i, blk in enumerate(blocks):
        sm = b.manifest["layers"][i]["swiftmax"]
        beta, gamma = sm["beta"], sm["gamma"]
        gold = calibrate_encoder(blk.attn, blk.norm1, cx[i], ck, "swiftmax", beta, gamma)
        # the bundle stores W_O's per-channel scales as float32: rq_y is golden's derivation from those
        s_y = gold.attn.s_a * _f32(gold.attn.o_proj.s_w)
        ref = dataclasses.replace(gold, residual=residual_registers(s_y, gold.attn.s_x, gold.residual.s_out))
        f64 = residual_registers(gold.attn.s_a * gold.attn.o_proj.s_w, gold.attn.s_x, gold.residual.s_out)
        moved = np.flatnonzero(ref.residual.rq_y.mult != f64.rq_y.mult)
        assert np.all(np.abs(ref.residual.rq_y.mult[moved] - f64.rq_y.mult[moved]) <= 1)  # float32 rounding: 1 LSB
        print(f"\nMiniLM layer {i}: rq_y from the float32 scales differs from the float64 derivation in "
              f"{moved.size} of {s_y.size} channels (by 1 LSB)")
        sub = to_sublayer(b, i)
        assert isinstance(sub, EncoderSublayer)
        assert (sub.attn.s_x, sub.attn.s_a) == (gold.attn.s_x, gold.attn.s_a)
        assert _same_residual(sub.residual, ref.residual), i
        assert np.array_equal(sub.ln_weight, ref.ln_weight) and np.array_equal(sub.ln_bias, ref.ln_bias)
        assert sub.ln_eps == ref.ln_eps == 1e-12
        x = quantize_input(hx[i], sub.attn.s_x)
        r_b, tr_b = sublayer_int(sub, x, hk)
        r_g, tr_g = sublayer_int(ref, x, hk)
        assert np.array_equal(r_b, r_g), i
        for n in ENC_TRACE:
            assert np.array_equal(tr_b[n], tr_g[n]), (i, n)
        f = encoder_sublayer_float(blk.attn, blk.norm1, hx[i], hk, "swiftmax", beta, gamma)
        mr = compare(r_b * sub.residual.s_out, f["r"], hk)
        mo = compare(host_layernorm(r_b, sub.residual.s_out, sub.ln_weight, sub.ln_bias, sub.ln_eps), f["out"], hk)
        print(f"MiniLM layer {i}, the bundle's sublayer against the float sublayer: R cos {mr['cosine']:.5f}, LN(R) "
              f"cos {mo['cosine']:.5f}")
        assert mr["cosine"] > ENC_R and mo["cosine"] > ENC_OUT, (i, mr, mo)


# ------------------------------------------------------------------------------------------ BHyT Llama (decoder)


def _tiny_stack() -> GoldenStack:
    torch.manual_seed(0)
    stack = GoldenStack(TINY)
    with torch.no_grad():
        for blk in stack.layers:
            blk.bhyt.weight_attn.uniform_(0.5, 1.5)
            blk.bhyt.weight_mlp.uniform_(-1.5, 1.5)
            blk.refresh_c_attn()
    return stack.eval()


@torch.no_grad()
def _capture(stack: GoldenStack, sentences: list[str], n_bytes: int) -> tuple[list[dict], np.ndarray]:
    """Each block's input h, attention input u, attention output y and RoPE tables on ``sentences`` as UTF-8 bytes
    (at most ``n_bytes``, right-padded), and the keep mask."""
    ids = [list(s.encode("utf-8"))[:n_bytes] for s in sentences]
    width = max(map(len, ids))
    x = torch.zeros((len(ids), width), dtype=torch.long)
    keep = torch.zeros((len(ids), width), dtype=torch.bool)
    for j, t in enumerate(ids):
        x[j, :len(t)], keep[j, :len(t)] = torch.tensor(t), True
    seen: list[dict] = [{} for _ in stack.layers]
    hooks = []
    for i, blk in enumerate(stack.layers):
        hooks.append(blk.register_forward_pre_hook(lambda _m, a, i=i: seen[i].__setitem__("h", a[0])))

        def pre(_m, a, kw, i=i):  # noqa: ANN001, ANN202 - a torch forward pre-hook
            seen[i]["u"], seen[i]["rope"] = a[0], kw["rope"]

        hooks.append(blk.attn.register_forward_pre_hook(pre, with_kwargs=True))
        hooks.append(blk.attn.register_forward_hook(lambda _m, _a, o, i=i: seen[i].__setitem__("y", o)))
    stack(x, keep)
    for h in hooks:
        h.remove()
    out = [{k: (tuple(t.double().numpy() for t in v) if k == "rope" else v.double().numpy()) for k, v in s.items()}
           for s in seen]
    return out, keep.numpy()


@pytest.fixture(scope="module")
def tiny_bundle(tmp_path_factory):
    """The tiny golden BHyT Llama (2 layers, head size 8, GQA 6/2, 64 positions) exported with SwiftMax on 8
    sentences cut to 24 bytes (no padding), and the time the export took."""
    import time

    root = tmp_path_factory.mktemp("tiny_sublayer")
    ck = save_golden_checkpoint(root / "tiny.pt", TINY, _tiny_stack().state_dict())
    t0 = time.perf_counter()
    path = export_checkpoint(ck, root / "b", real_sentences(8), normalizer="swiftmax", seq_len=CALIB_BYTES,
                             progress=False, **GOLDEN_ONLY)
    return load_bundle(path), time.perf_counter() - t0


def test_bhyt_decoder_sublayer_from_the_bundle_is_golden_bit_for_bit(tiny_bundle):
    """The decoder sublayer's constants (s_h, site A, residual) equal golden's functions of an independent calibration
    (max-abs of h and h + Attn(u)), the bundle's RoPE tables equal golden's int16 tables of the positions the model
    ran (and of every position up to max_seq_len), and ``sublayer_int`` of the bundle's sublayer with the
    bundle's tables equals golden's bit for bit on held-out text; it tracks the float sublayer within its budget."""
    b, seconds = tiny_bundle
    print(f"\ntiny BHyT Llama export (2 layers, 8 sentences): {seconds:.1f} s")
    man = b.manifest
    stack = _tiny_stack()
    cal, keep = _capture(stack, real_sentences(8), CALIB_BYTES)
    assert keep.all()  # no padding: the exporter's positions are the valid tokens, as golden's calibration takes
    held, hkeep = _capture(stack, [*real_sentences(3, start_topic=60), "A short one."], 64)
    assert not hkeep.all()  # a padded held-out batch
    full_c, full_s = rope_tables_int(*rope_cos_sin(torch.arange(64), 8, 10000.0, torch.float32))
    assert np.array_equal(b.tensors["rope.cos"], full_c) and np.array_equal(b.tensors["rope.sin"], full_s)
    for i, blk in enumerate(stack.layers):
        c = cal[i]
        nb = blk.bhyt.double().requires_grad_(False)
        layer = to_quant_layer(b, i)
        s_h, s_mid = float(symmetric_scale(c["h"])), float(symmetric_scale(c["h"] + c["y"]))
        assert layer.s_x == float(symmetric_scale(c["u"]))
        site_a = bhyt_site_registers(float(nb.lam_attn), nb.kappa, nb.weight_attn.detach().numpy(), 48, s_h, s_h,
                                     layer.s_x, eps=nb.eps)
        ref = DecoderSublayer(s_h, site_a, layer, residual_registers(layer.s_a * layer.o_proj.s_w, s_h, s_mid))
        sub = to_sublayer(b, i)
        assert isinstance(sub, DecoderSublayer) and sub.s_h == s_h and _same_residual(sub.residual, ref.residual)
        assert sub.site_a.scalars() == site_a.scalars() and sub.site_a.s_out == site_a.s_out == layer.s_x
        assert np.array_equal(sub.site_a.gamma, site_a.gamma)
        seq = keep.shape[1]
        assert [np.array_equal(t, g) for t, g in zip(sublayer_rope(b, i, seq), rope_tables(c["rope"], 8, seq, 8),
                                                      strict=True)] == [True, True]
        h = held[i]
        hq = quantize_input(h["h"], sub.s_h)
        seq = hq.shape[1]
        out_b, tr_b = sublayer_int(sub, hq, hkeep, tuple(sublayer_rope(b, i, seq)))
        out_g, tr_g = sublayer_int(ref, hq, hkeep, tuple(rope_tables(h["rope"], 4, seq, 8)))
        assert np.array_equal(out_b, out_g), i
        for n in DEC_TRACE:
            assert np.array_equal(tr_b[n], tr_g[n]), (i, n)
        sm = man["layers"][i]["swiftmax"]
        f = decoder_sublayer_float(blk.attn, blk.bhyt, h["h"], hkeep, h["rope"], "swiftmax", sm["beta"], sm["gamma"])
        m = compare(out_b * sub.residual.s_out, f["h_mid"], hkeep)
        print(f"tiny BHyT layer {i}: H' = H + Y cos {m['cosine']:.5f} (min per token {m['min_cosine']:.5f})")
        assert m["cosine"] > DEC_MID, (i, m)


def test_hf_llama_bhyt_rope_tables_are_the_checkpoints(tmp_path):
    """A Hugging Face Llama converted to BHyT: the bundle's RoPE tables are the int16 tables of the checkpoint's own
    rotary embedding (the position embeddings its layers received on real text), and its sublayer rebuilds."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    from vckattn.golden import convert
    from vckattn.golden.pretrained import minilm_dir

    tok = AutoTokenizer.from_pretrained(minilm_dir())
    torch.manual_seed(0)
    llama = LlamaModel(LlamaConfig(vocab_size=tok.vocab_size, hidden_size=48, intermediate_size=96,
                                   num_hidden_layers=1, num_attention_heads=6, num_key_value_heads=2,
                                   max_position_embeddings=96, rope_theta=500.0)).eval()
    convert.convert_llama_norms_to_bhyt(llama, lam_attn=1.5, lam_mlp=0.8, seq_len=96)
    llama.save_pretrained(tmp_path / "llama")
    tok.save_pretrained(tmp_path / "llama")
    cfg = json.loads((tmp_path / "llama" / "config.json").read_text())
    cfg["vckattn_bhyt"] = {"kappa": 10.0, "seq_len": 96}
    (tmp_path / "llama" / "config.json").write_text(json.dumps(cfg))
    b = load_bundle(export_checkpoint(tmp_path / "llama", tmp_path / "b", real_sentences(4), normalizer="softmax",
                                      progress=False, **GOLDEN_ONLY))
    assert b.tensors["rope.cos"].shape == (96, 8) and b.tensors["rope.cos"].dtype == np.int16
    seen = {}
    hook = llama.layers[0].self_attn.register_forward_pre_hook(
        lambda _m, _a, kw: seen.__setitem__("rope", kw["position_embeddings"]), with_kwargs=True)
    enc = tok(real_sentences(4, start_topic=60), padding=True, return_tensors="pt")
    with torch.no_grad():
        llama(**enc, use_cache=False)
    hook.remove()
    seq = enc["input_ids"].shape[1]
    want = rope_tables(seen["rope"], 4, seq, 8)
    got = sublayer_rope(b, 0, seq)
    assert all(np.array_equal(g, w.reshape(g.shape)) for g, w in zip(got, want, strict=True))
    later = sublayer_rope(b, 0, 16, start=80)  # positions 80..95 (a continuing sequence)
    assert np.array_equal(later[0], b.tensors["rope.cos"][80:96])
    with pytest.raises(BundleError, match=r"model\.max_seq_len: = 96: positions 90\.\.105 are outside") as e:
        sublayer_rope(b, 0, 16, start=90)
    _one_line(e)
    sub = to_sublayer(b, 0)
    assert isinstance(sub, DecoderSublayer) and sub.attn.online is not None


@pytest.mark.slow
def test_smollm2_bhyt_sublayer(tmp_path):
    """SmolLM2-135M converted to BHyT, its first layer exported: the bundle's RoPE tables are those the checkpoint's
    layers receive, the decoder sublayer's s_h and BHyT site A registers are golden's calibrate_decoder ones on the same
    (unpadded) calibration text, and the bundle's integer sublayer tracks the float sublayer on held-out text within
    the budget measured on this checkpoint (tests/golden/test_sublayer_int.py)."""
    import time

    require_module("gguf")
    from vckattn.golden.sublayer import calibrate_decoder
    from vckattn.host.convert_cmd import convert_bhyt
    from vckattn.host.export import load_model, resolve_checkpoint

    resolve_checkpoint("smollm2")  # installed by `make setup`: a missing checkpoint is a failure, not a skip
    t0 = time.perf_counter()
    conv = convert_bhyt("smollm2", tmp_path / "conv", seq_len=64)["checkpoint"]
    t1 = time.perf_counter()
    b = load_bundle(export_checkpoint(conv, tmp_path / "b", real_sentences(6), normalizer="swiftmax",
                                      swiftmax_init="max", swiftmax_per_head=False, max_layers=1, seq_len=12,
                                      progress=False, min_model_fidelity=-1, check_samples=4))
    t2 = time.perf_counter()
    print(f"\nSmolLM2 BHyT conversion {t1 - t0:.1f} s, export of layer 0 {t2 - t1:.1f} s")
    assert b.tensors["rope.cos"].shape == (8192, 64)
    m = load_model(resolve_checkpoint(conv), False)
    ly = m.layers[0]

    @torch.no_grad()
    def capture(sentences: list[str], n: int) -> tuple[np.ndarray, tuple, np.ndarray]:
        seen = {}

        def pre(_m, a, kw):  # noqa: ANN001, ANN202 - a torch forward pre-hook
            seen["h"] = (a[0] if a else kw["hidden_states"]).double().numpy()
            seen["rope"] = tuple(t.double().numpy() for t in kw["position_embeddings"])

        hook = ly.block_module.register_forward_pre_hook(pre, with_kwargs=True)
        enc = m.tokenizer(sentences, padding=True, truncation=True, max_length=n, return_tensors="pt")
        m.model(**enc, use_cache=False)
        hook.remove()
        return seen["h"], seen["rope"], enc["attention_mask"].numpy().astype(bool)

    hc, rc, kc = capture(real_sentences(6), 12)
    assert kc.all()  # unpadded: the exporter's positions are golden's valid tokens
    # the BHyT sites' scales (s_h, and s_out: what site M reads) come from the float model's own forward (softmax:
    # the SwiftMax of this untuned export is the bundle's only); golden's calibrate_decoder on the same text
    gold = calibrate_decoder(ly.mha, ly.bhyt, hc, kc, rc)
    sub = to_sublayer(b, 0)
    assert isinstance(sub, DecoderSublayer) and sub.s_h == gold.s_h
    for k in ("k_mult", "k_shift", "eps_int", "c_int"):
        assert sub.site_a.scalars()[k] == gold.site_a.scalars()[k], k
    # s_out: max |h + Attn(u)|, the float32 model's attention output here, golden's float64 one there
    assert sub.residual.s_out == pytest.approx(gold.residual.s_out, rel=1e-4)
    he, re_, ke = capture(real_sentences(4, start_topic=60), 32)
    seq = he.shape[1]
    c, s = sublayer_rope(b, 0, seq)
    want = rope_tables(re_, 4, seq, 64)
    assert np.array_equal(c, want[0].reshape(c.shape)) and np.array_equal(s, want[1].reshape(s.shape))
    out, tr = sublayer_int(sub, quantize_input(he, sub.s_h), ke, (c, s))
    sm = b.manifest["layers"][0]["swiftmax"]  # the float sublayer with the bundle's normalizer
    f = decoder_sublayer_float(ly.mha, ly.bhyt, he, ke, re_, "swiftmax", sm["beta"], sm["gamma"])
    mu = compare(tr["u"] * sub.attn.s_x, f["u"], ke)
    mh = compare(out * sub.residual.s_out, f["h_mid"], ke)
    print(f"SmolLM2 BHyT layer 0 from the bundle: U cos {mu['cosine']:.5f}, H' = H + Y cos {mh['cosine']:.5f}")
    assert mu["cosine"] > 0.996 and mh["cosine"] > DEC_MID, (mu, mh)

    # the bundle's whole sublayer through `vckattn run` on the sublayer build: BHyT site A, the fused Q/K/V GEMM,
    # RoPE, the engine, W_O and the residual add, every unit programmed from the bundle and read back exactly
    from vckattn.host.run import run

    text = "The committee approved the new budget after a long debate about schools, roads and the city's parks."
    backends = ["emu"]
    if tool_available("g++") and tool_available("hls4ml") and tool_available("verilator"):
        backends.append("csim")
    for backend in backends:
        r = run(b.path, backend, text=text, manifest_path="sublayer_small_decoder", progress=False)
        row = r["layers"][0]
        assert r["family"] == "decoder" and row["bit_exact"] and row["first_difference"] is None, row
        assert row["cosine"] > DEC_MID, row
        assert set(row["registers"]) == {"bhyt_site", "rope", "residual"}
        assert all(v["read_back"] == "exact" for v in row["registers"].values())
        assert row["registers"]["bhyt_site"]["words"] == 7 + 576  # k_mult, k_shift, eps/c lo+hi, g_frac; gamma


# ------------------------------------------------------------------------------------------ refusals, round trip


def _rewrite(tmp_path, b, edit, name: str = "t"):
    """Write bundle ``b`` with ``edit(manifest, tensors)`` applied (write_bundle runs every check load_bundle does)."""
    man, ten = copy.deepcopy(b.manifest), {k: v.copy() for k, v in b.tensors.items()}
    edit(man, ten)
    return write_bundle(tmp_path / name, man, ten)


def _drop(man, ten, name):
    del ten[name]
    man["tensors"].pop(name)
    for layer in man["layers"]:
        if name in layer["tensors"]:
            layer["tensors"].remove(name)


def _bump(ten, name, j, by=1):
    ten[name][j] += by


DECODER_REFUSALS = [
    (lambda m, t: m["layers"][0]["sublayer"]["residual"]["rq_x"].__setitem__(
        "mult", m["layers"][0]["sublayer"]["residual"]["rq_x"]["mult"] + 1),
     r"layers\[0\]\.sublayer\.residual\.rq_x\.mult: = \d+, but residual_registers\(s_a·o_proj\.weight_scale, "
     r"sublayer\.s_h, residual\.s_out\) gives \d+"),
    (lambda m, t: _bump(t, "layers.1.residual.rq_y.mult", 3),
     r"layers\[1\]\.sublayer\.residual\.rq_y\.mult: channel 3 = \d+, but residual_registers"),
    (lambda m, t: (t.__setitem__("rope.cos", t["rope.cos"][:63].copy())),
     r"layers\[0\]\.sublayer\.rope\.cos: tensor 'rope\.cos' is int16 Q2\.14 of shape \[63, 8\]; expected int16 "
     r"Q2\.14 of shape \[64, 8\]"),
    (lambda m, t: t.__setitem__("rope.sin", t["rope.cos"].copy()),
     r"layers\[0\]\.sublayer\.rope\.sin: position 0 must be the identity"),
    (lambda m, t: t.__setitem__("rope.sin", (t["rope.sin"] // 2).astype(np.int16)),
     r"layers\[0\]\.sublayer\.rope\.sin: position \d+, dimension \d+: cos² \+ sin² = \d+, not 2\^28"),
    (lambda m, t: m["layers"][0]["sublayer"].__setitem__("s_h", m["layers"][0]["sublayer"]["s_h"] * 1.01),
     r"layers\[0\]\.bhyt\.site_m\.k_mult: = \d+, but bhyt_site_registers\(lam_mlp, kappa, d, s_in = "
     r"sublayer\.residual\.s_out, s_stat = sublayer\.s_h"),
    (lambda m, t: m["layers"][0]["bhyt"]["site_a"].__setitem__("s_out", m["layers"][0]["bhyt"]["site_a"]["s_out"] * 2),
     r"layers\[0\]\.bhyt\.site_a\.s_out: = .*, but scales\.s_x = .*: site A writes the attention input"),
    (lambda m, t: m["layers"][0]["sublayer"].__setitem__("layernorm", {"weight": "x", "bias": "y", "eps": 1e-5}),
     r"layers\[0\]\.sublayer\.layernorm: a decoder sublayer has no layernorm"),
    (lambda m, t: m["layers"][0]["sublayer"].pop("rope"), r"layers\[0\]\.sublayer\.rope: missing \(required in a"),
    (lambda m, t: m["layers"][0]["sublayer"]["residual"].__setitem__("colour", 1),
     r"layers\[0\]\.sublayer\.residual\.colour: unknown field"),
    (lambda m, t: m["layers"][0]["sublayer"].__setitem__("kind", "encoder"),
     r'layers\[0\]\.sublayer\.kind: = "encoder", but a llama model with norm "bhyt" has a decoder sublayer'),
    (lambda m, t: m.__setitem__("schema_version", 3),
     r"layers\[0\]\.sublayer: sublayer constants need schema_version 4 \(this manifest says 3\)"),
    (lambda m, t: m["formats"].pop("sublayer"), r"formats\.sublayer: missing: a bundle with sublayer constants"),
    (lambda m, t: m["formats"]["sublayer"].__setitem__("res_frac", 6),
     r"formats\.sublayer\.res_frac: = 6, but this vckattn's kernels are built with 8"),
]


@pytest.mark.parametrize("edit, message", DECODER_REFUSALS, ids=range(len(DECODER_REFUSALS)))
def test_a_tampered_decoder_sublayer_is_refused_naming_the_field(tiny_bundle, tmp_path, edit, message):
    b, _ = tiny_bundle
    with pytest.raises(BundleError, match=message) as e:
        _rewrite(tmp_path, b, edit)
    _one_line(e)
    assert not (tmp_path / "t").exists()


def test_encoder_refusals_and_a_bundle_without_a_sublayer(minilm_bundle, tmp_path):
    """A missing LayerNorm tensor, a LayerNorm of the wrong shape or a decoder field in an encoder sublayer is refused
    naming the field; a bundle without sublayer constants (schema 3) still loads, and ``to_sublayer`` says to
    re-export it."""
    b = load_bundle(minilm_bundle)
    cases = [
        (lambda m, t: _drop(m, t, "layers.0.layernorm.weight"),
         r"layers\[0\]\.sublayer\.layernorm\.weight: refers to tensor 'layers\.0\.layernorm\.weight', which is not in "
         "the bundle"),
        (lambda m, t: t.__setitem__("layers.1.layernorm.bias", t["layers.1.layernorm.bias"][:100].copy()),
         r"layers\[1\]\.sublayer\.layernorm\.bias: tensor 'layers\.1\.layernorm\.bias' is float32 float32 of shape "
         r"\[100\]; expected float32 of shape \[384\]"),
        (lambda m, t: m["layers"][1]["sublayer"].__setitem__("s_h", 0.1),
         r"layers\[1\]\.sublayer\.s_h: an encoder sublayer has no s_h"),
        (lambda m, t: _bump(t, "layers.0.residual.rq_y.shift", 200),
         r"layers\[0\]\.sublayer\.residual\.rq_y\.shift: channel 200 = \d+, but residual_registers\(s_a·o_proj\."
         r"weight_scale, scales\.s_x, residual\.s_out\)"),
    ]
    for edit, message in cases:
        with pytest.raises(BundleError, match=message) as e:
            _rewrite(tmp_path, b, edit)
        _one_line(e)

    def old(m, t):
        m["schema_version"] = 3
        m["formats"].pop("sublayer")
        for layer in m["layers"]:
            sub = layer.pop("sublayer")
            for name in (*sub["residual"]["rq_y"].values(), *list(sub["layernorm"].values())[:2]):
                _drop(m, t, name)

    v3 = load_bundle(_rewrite(tmp_path, b, old, "v3"))
    assert describe(v3)["layers"][0]["sublayer"] is None
    assert np.array_equal(to_quant_layer(v3, 0).q_proj.w, to_quant_layer(b, 0).q_proj.w)
    with pytest.raises(BundleError, match=r"layers\[0\]\.sublayer: absent: this bundle \(schema_version 3\) carries "
                                          r"the attention constants only; re-export it") as e:
        to_sublayer(v3, 0)
    _one_line(e)
    with pytest.raises(BundleError, match=r"layers\[0\]\.sublayer\.rope: absent: an encoder sublayer has no RoPE"):
        sublayer_rope(b, 0, 4)


def test_sublayer_round_trips_through_write_load_and_describe(tiny_bundle, minilm_bundle, tmp_path, capsys):
    from vckattn.host import cli

    for name, b in (("decoder", tiny_bundle[0]), ("encoder", load_bundle(minilm_bundle))):
        again = load_bundle(_rewrite(tmp_path, b, lambda m, t: None, name))
        assert cli.main(["inspect", str(again.path)]) == 0
        shown = {"decoder": "decoder in 2 of 2 layers: residual add, BHyT site A before the attention, RoPE tables "
                            "64 x 8",
                 "encoder": "encoder in 2 of 2 layers: residual add, LayerNorm after it on the host (eps 1e-12)"}
        assert shown[name] in " ".join(capsys.readouterr().out.split())
        assert again.manifest["layers"] == b.manifest["layers"] and again.manifest["formats"] == b.manifest["formats"]
        assert again.tensors.keys() == b.tensors.keys()
        assert all(np.array_equal(again.tensors[n], a) and again.tensors[n].dtype == a.dtype
                   for n, a in b.tensors.items())
        d = describe(again)
        for i, layer in enumerate(b.manifest["layers"]):
            s, sub = d["layers"][i]["sublayer"], layer["sublayer"]
            assert s["kind"] == name and s["s_out"] == sub["residual"]["s_out"]
            r1, r2 = to_sublayer(again, i).residual, to_sublayer(b, i).residual
            assert _same_residual(r1, r2)
            if name == "decoder":
                assert s["s_h"] == sub["s_h"] and s["rope_shape"] == [64, 8] and s["bhyt_eps"] == 1e-6
            else:
                assert s["ln_eps"] == sub["layernorm"]["eps"]
        if name == "decoder":
            assert d["tensors"]["outside_layers"] == ["rope.cos", "rope.sin"]

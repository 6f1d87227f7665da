"""`vckattn export`: checkpoint -> bundle -> golden integer layer, on real models and a golden BHyT model."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import require_module

require_module("transformers")

from vckattn.golden.bhyt import mean_square  # noqa: E402
from vckattn.golden.bhyt_int import bhyt_site_registers  # noqa: E402
from vckattn.golden.normalizers import SwiftMax  # noqa: E402
from vckattn.golden.quant_attention import calibrate_attention, compare, float_attention  # noqa: E402
from vckattn.golden.stages import attention_int  # noqa: E402
from vckattn.golden.swiftmax_int import check_registers  # noqa: E402
from vckattn.host import cli  # noqa: E402
from vckattn.host.bundle import load_bundle  # noqa: E402
from vckattn.host.export import GoldenStack, export_checkpoint, save_golden_checkpoint, to_quant_layer  # noqa: E402
from vckattn.host.textdata import real_sentences  # noqa: E402

INT_TRACE = ("x", "q", "k", "v", "s", "p", "o", "a", "y")
PROJ = ("q_proj", "k_proj", "v_proj", "o_proj")
F32_EPS = 2.0**-24  # relative rounding of the float32 weight scales stored in the bundle
HELD_OUT = 12  # held-out sentences the integer layers run on


# --------------------------------------------------------------------------- MiniLM


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """Bundles of MiniLM + the float model's hidden states on real text. Bundles: ``softmax`` and ``swiftmax``
    (max-abs scales; SwiftMax β, γ per layer = the mean-statistics init, written despite the export check),
    ``percentile`` (SwiftMax with the per-layer max-z_max init, 99.99th-percentile scales)."""
    from vckattn.golden.blocks import BertLayer
    from vckattn.golden.pretrained import load_minilm

    out = tmp_path_factory.mktemp("minilm")
    seconds, bundles = {}, {}
    for name, kw in (("softmax", {"normalizer": "softmax"}),
                     ("swiftmax", {"normalizer": "swiftmax", "swiftmax_init": "mean", "swiftmax_per_head": False,
                                   "allow_low_fidelity": True}),  # the paper's init fails the export check
                     ("percentile", {"normalizer": "swiftmax", "method": "percentile", "swiftmax_init": "max",
                                     "swiftmax_per_head": False,  # untuned: any whole-model figure is accepted
                                     "min_model_fidelity": -1})):
        t0 = time.perf_counter()
        path = export_checkpoint("minilm", out / name, progress=False, **kw)
        seconds[name] = time.perf_counter() - t0
        bundles[name] = load_bundle(path)
    tok, model = load_minilm()
    calib, held = real_sentences(32), real_sentences(HELD_OUT, start_topic=60)

    def run(sentences):
        enc = tok(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
        with torch.no_grad():
            hs = model(**enc, output_hidden_states=True).hidden_states
        return [h.numpy().astype(np.float64) for h in hs], enc["attention_mask"].numpy().astype(bool), enc

    cx, ck, cenc = run(calib)
    hx, hk, _ = run(held)
    cfg = model.config
    blocks = [BertLayer(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size).double().load_hf(layer)
              for layer in model.encoder.layer]
    from vckattn.golden import calibrate

    stats = calibrate.collect_softmax_stats(model, [cenc])  # last: switches the model to the vckattn attention
    print(f"\nMiniLM export seconds (model load included): {seconds}")
    return {"bundles": bundles, "seconds": seconds, "blocks": blocks, "calib": (cx, ck), "held": (hx, hk),
            "stats": stats, "runs": {}}


def _bundle_run(minilm, name: str, i: int):
    """``attention_int`` of layer ``i`` of bundle ``name`` on the held-out text (cached: it is the slow part)."""
    key = (name, i)
    if key not in minilm["runs"]:
        layer = to_quant_layer(minilm["bundles"][name], i)
        minilm["runs"][key] = (layer, *attention_int(layer, minilm["held"][0][i], minilm["held"][1]))
    return minilm["runs"][key]


@pytest.mark.parametrize("name", ["softmax", "swiftmax"])
def test_minilm_weights_within_half_lsb(minilm, name):
    b = minilm["bundles"][name]
    assert b.manifest["source"]["kind"] == "hf-folder" and b.manifest["model"]["num_layers"] == 6
    for i, blk in enumerate(minilm["blocks"]):
        for p in PROJ:
            w = getattr(blk.attn, p).weight.detach().numpy()
            w_int = b.tensors[f"layers.{i}.{p}.weight"]
            s_w = b.tensors[f"layers.{i}.{p}.weight_scale"].astype(np.float64)
            assert w_int.dtype == np.int8 and s_w.shape == (w.shape[0],)
            err = np.abs(w_int.astype(np.float64) * s_w[:, None] - w)
            # half an LSB per channel (plus the float32 rounding of the stored scale: <= 127 * 2^-24 LSB)
            assert np.all(err <= s_w[:, None] * (0.5 + 128 * F32_EPS)), (i, p, float((err / s_w[:, None]).max()))
            assert np.all(np.abs(w_int).max(axis=1) == 127)  # max-abs per channel uses the full int8 range


def _float_vs_int(minilm, name: str) -> list[tuple[int, dict, int]]:
    hx, hk = minilm["held"]
    rows = []
    for i, blk in enumerate(minilm["blocks"]):
        entry = minilm["bundles"][name].manifest["layers"][i]
        beta, gamma = (0.0, 1.0) if entry["swiftmax"] is None else (entry["swiftmax"]["beta"],
                                                                     entry["swiftmax"]["gamma"])
        layer, out, _ = _bundle_run(minilm, name, i)
        ref = float_attention(blk.attn, hx[i], hk, layer.normalizer, beta, gamma)["y"]
        rows.append((i, compare(out, ref, hk), layer.p_frac))
    return rows


def _print_rows(title: str, rows) -> None:
    print(f"\n{title}: integer layer (from the bundle) vs float golden layer, {HELD_OUT} held-out sentences")
    print("layer  rel.err   cosine    min.cos   P scale")
    for i, m, pf in rows:
        print(f"{i:5d}  {m['rel_error']:.4f}  {m['cosine']:.5f}  {m['min_cosine']:.5f}  2^-{pf}")


@pytest.mark.parametrize("name", ["softmax", "swiftmax"])
def test_minilm_bundle_layer_is_bit_exact_with_golden_calibration(minilm, name):
    b = minilm["bundles"][name]
    cx, ck = minilm["calib"]
    hx, hk = minilm["held"]
    for i, blk in enumerate(minilm["blocks"]):
        entry = b.manifest["layers"][i]
        beta, gamma = (0.0, 1.0) if entry["swiftmax"] is None else (entry["swiftmax"]["beta"],
                                                                     entry["swiftmax"]["gamma"])
        direct = calibrate_attention(blk.attn, cx[i], ck, name, beta, gamma)
        layer = to_quant_layer(b, i)
        assert layer.normalizer == name
        assert (layer.s_x, layer.s_q, layer.s_k, layer.s_v, layer.s_a, layer.p_frac) == (
            direct.s_x, direct.s_q, direct.s_k, direct.s_v, direct.s_a, direct.p_frac)
        assert layer.swiftmax == direct.swiftmax and layer.online == direct.online
        for mine, ref in ((layer.rq_q, direct.rq_q), (layer.rq_k, direct.rq_k), (layer.rq_v, direct.rq_v),
                          (layer.rq_a, direct.rq_a)):
            assert np.array_equal(mine.mult, ref.mult) and np.array_equal(mine.shift, ref.shift)
        for p in PROJ:
            mine, ref = getattr(layer, p), getattr(direct, p)
            assert np.array_equal(mine.w, ref.w) and np.array_equal(mine.b, ref.b)
        _, out_b, tr_b = _bundle_run(minilm, name, i)
        out_g, tr_g = attention_int(direct, hx[i], hk)
        for n in INT_TRACE:
            assert np.array_equal(tr_b[n], tr_g[n]), (i, n)
        np.testing.assert_allclose(out_b, out_g, rtol=1e-6, atol=0)  # float32 weight scales only dequantize


def test_minilm_float_vs_quantized_error(minilm):
    rows = {name: _float_vs_int(minilm, name) for name in minilm["bundles"]}
    _print_rows("MiniLM softmax (online-softmax kernel), max-abs scales", rows["softmax"])
    _print_rows("MiniLM SwiftMax, beta = mean z_max init (untuned), max-abs scales", rows["swiftmax"])
    _print_rows("MiniLM SwiftMax, beta = max z_max init, 99.99th-percentile scales", rows["percentile"])
    assert all(m["cosine"] > 0.98 for _, m, _ in rows["softmax"]), rows["softmax"]
    assert all(m["cosine"] > 0.99 for _, m, _ in rows["percentile"]), rows["percentile"]
    # the untuned mean-statistics init: β/γ are a starting point for tuning; only check the output is finite
    assert all(np.isfinite(m["rel_error"]) for _, m, _ in rows["swiftmax"])


def test_minilm_swiftmax_init_matches_collect_softmax_stats(minilm):
    b = minilm["bundles"]["swiftmax"]
    assert "initialised from calibration" in b.manifest["calibration"]["data"]
    for entry, st in zip(b.manifest["layers"], minilm["stats"], strict=True):  # per layer: one value, every head
        assert entry["swiftmax"]["beta"] == pytest.approx([st["beta"]] * 12, rel=1e-4)
        assert entry["swiftmax"]["gamma"] == pytest.approx([st["gamma"]] * 12, rel=1e-4)
        check_registers(to_quant_layer(b, entry["index"]).swiftmax)


def test_minilm_percentile_scales(minilm):
    pct, mm = minilm["bundles"]["percentile"], minilm["bundles"]["softmax"]
    cal = pct.manifest["calibration"]
    assert cal["method"] == "percentile" and cal["percentile"] == 99.99
    assert "beta = max z_max" in cal["data"]
    assert mm.manifest["calibration"]["method"] == "minmax" and mm.manifest["calibration"]["percentile"] is None
    cx, _ = minilm["calib"]
    for i, (ep, em) in enumerate(zip(pct.manifest["layers"], mm.manifest["layers"], strict=True)):
        for s in ("s_x", "s_q", "s_k", "s_v"):  # s_a depends on the normalizer
            assert 0 < ep["scales"][s] <= em["scales"][s]
        assert ep["scales"]["s_x"] == pytest.approx(np.percentile(np.abs(cx[i]), 99.99) / 127, rel=1e-12)
        assert min(ep["swiftmax"]["beta"]) > minilm["stats"][i]["beta"]  # the largest z_max, not the mean
    # weights do not depend on the activation calibration
    assert np.array_equal(pct.tensors["layers.0.q_proj.weight"], mm.tensors["layers.0.q_proj.weight"])


def test_minilm_export_is_fast(minilm):
    assert max(minilm["seconds"].values()) < 60, minilm["seconds"]


# --------------------------------------------------------------------------- SmolLM2 (GGUF, Llama)


@pytest.mark.slow
def test_smollm2_gguf_export(tmp_path):
    require_module("gguf")
    from vckattn.host.export import resolve_checkpoint

    resolve_checkpoint("smollm2")  # installed by `make setup`: a missing checkpoint is a failure, not a skip
    t0 = time.perf_counter()
    path = export_checkpoint("smollm2", tmp_path / "smol", real_sentences(8), layers=[0, 29], progress=False,
                             min_model_fidelity=-1, check_samples=8)  # untuned SwiftMax: any whole-model figure
    seconds = time.perf_counter() - t0
    print(f"\nSmolLM2-135M GGUF export (30 layers, 8 calibration sentences, model load included): {seconds:.1f} s")
    b = load_bundle(path)
    man = b.manifest
    assert man["source"]["kind"] == "gguf" and man["source"]["model_type"] == "llama"
    assert man["norm"] == "rmsnorm" and man["normalizer"] == "swiftmax"
    m = man["model"]
    assert (m["num_layers"], m["hidden_size"], m["num_heads"], m["num_kv_heads"], m["head_dim"]) == (30, 576, 9, 3, 64)
    assert [e["index"] for e in man["layers"]] == list(range(30))
    assert [e["index"] for e in man["layers"] if e["swiftmax"] is not None] == [0, 29]
    for e in man["layers"]:
        i = e["index"]
        assert b.tensors[f"layers.{i}.k_proj.weight"].shape == (192, 576)
        assert b.tensors[f"layers.{i}.q_proj.weight"].dtype == np.int8
        assert f"layers.{i}.q_proj.bias" not in b.tensors  # Llama: no biases
        layer = to_quant_layer(b, i)
        assert layer.n_heads == 9 and layer.k_proj.w.shape == (192, 576)
        if layer.swiftmax is not None:
            check_registers(layer.swiftmax)
        else:
            assert layer.online is not None and layer.p_frac == 8


# --------------------------------------------------------------------------- golden BHyT model


#: export options for tiny test models (head size 8): a bundle of the golden integer model only (no hardware build
#: runs it, so that check is off), whose random weights keep no particular whole-model figure
GOLDEN_ONLY = {"check_hardware": False, "min_model_fidelity": -1, "check_samples": 4}


def _build_with_head_size(tmp_path: Path, head_dim: int) -> str:
    """A bitstream manifest file like engine_small_dual's whose tile takes ``head_dim`` (a user's own build)."""
    import copy

    from vckattn.hw.design.manifest import load_manifest

    m = copy.deepcopy(load_manifest("engine_small_dual").data)
    m["tile"]["head_dims"] = sorted({head_dim, int(m["engine"]["d"])})  # the engine takes head sizes up to its D
    path = tmp_path / f"hd{head_dim}.json"
    path.write_text(json.dumps(m), encoding="utf-8")
    return str(path)


BHYT_CONFIG = {"family": "llama", "num_layers": 2, "vocab_size": 256, "max_seq_len": 64,
               "block": {"d_model": 48, "n_heads": 6, "n_kv_heads": 2, "d_ff": 96, "norm": "bhyt",
                         "lam_attn": 1.7, "lam_mlp": 1.2, "kappa": 10.0, "seq_len": 256}}


def _tiny_bhyt_stack() -> GoldenStack:
    torch.manual_seed(0)
    stack = GoldenStack(BHYT_CONFIG)
    with torch.no_grad():
        for blk in stack.layers:
            blk.bhyt.weight_attn.uniform_(0.5, 1.5)
            blk.bhyt.weight_mlp.uniform_(-1.5, 1.5)
            blk.refresh_c_attn()
    stack.layers[1].attn.normalizer = SwiftMax(1.5, 4.0)  # a "tuned" layer: β, γ come from the checkpoint
    return stack.eval()


@torch.no_grad()
def _independent_bhyt_calibration(stack: GoldenStack, sentences: list[str]) -> list[dict]:
    """The exporter's documented calibration, redone here: UTF-8 byte ids, right-padded, max-abs scales."""
    ids = [list(s.encode("utf-8"))[:128] for s in sentences]
    width = max(map(len, ids))
    x = torch.zeros((len(ids), width), dtype=torch.long)
    keep = torch.zeros((len(ids), width), dtype=torch.bool)
    for b, t in enumerate(ids):
        x[b, :len(t)], keep[b, :len(t)] = torch.tensor(t), True
    seen: list[dict] = [{} for _ in stack.layers]
    hooks = []
    for i, blk in enumerate(stack.layers):
        hooks.append(blk.register_forward_pre_hook(lambda _m, a, i=i: seen[i].__setitem__("h", a[0].double())))
        hooks.append(blk.attn.register_forward_pre_hook(lambda _m, a, i=i: seen[i].__setitem__("u", a[0].double())))
        hooks.append(blk.attn.register_forward_hook(lambda _m, _a, o, i=i: seen[i].__setitem__("y", o.double())))
    stack(x, keep)
    for h in hooks:
        h.remove()
    out = []
    for blk, s in zip(stack.layers, seen, strict=True):
        nb = blk.bhyt.double()
        mid = s["h"] + s["y"]
        v = nb.mlp_site(mid, mean_square(s["h"]))
        sc = {k: float(t.abs().max()) / 127 for k, t in (("h", s["h"]), ("u", s["u"]), ("mid", mid), ("v", v))}
        a = bhyt_site_registers(float(nb.lam_attn), nb.kappa, nb.weight_attn.numpy(), 48, sc["h"], sc["h"], sc["u"])
        m = bhyt_site_registers(float(nb.lam_mlp), nb.kappa, nb.weight_mlp.numpy(), 48, sc["mid"], sc["h"], sc["v"],
                                c_attn=float(nb.c_attn), lam_attn=float(nb.lam_attn))
        out.append({"site_a": a, "site_m": m, "s_x": sc["u"], "c_attn": float(nb.c_attn)})
        blk.bhyt.float()
    return out


def test_golden_bhyt_model_export(tmp_path):
    stack = _tiny_bhyt_stack()
    ck = save_golden_checkpoint(tmp_path / "tiny_bhyt.pt", BHYT_CONFIG, stack.state_dict())
    sentences = real_sentences(8)
    path = export_checkpoint(ck, tmp_path / "tiny.bundle", sentences, normalizer="swiftmax", progress=False,
                             **GOLDEN_ONLY)
    b = load_bundle(path)
    man = b.manifest
    assert man["source"]["kind"] == "state-dict" and man["norm"] == "bhyt"
    assert man["model"]["num_kv_heads"] == 2 and man["model"]["vocab_size"] == 256
    heads = man["model"]["num_heads"]  # the checkpoint's per-layer β, γ: the same for every head
    sm = man["layers"][1]["swiftmax"]
    assert sm["beta"] == [1.5] * heads and sm["gamma"] == [4.0] * heads
    assert "from the checkpoint for layers [1]" in man["calibration"]["data"]
    expect = _independent_bhyt_calibration(_tiny_bhyt_stack(), sentences)
    for i, (entry, exp) in enumerate(zip(man["layers"], expect, strict=True)):
        bh = entry["bhyt"]
        assert bh["kappa"] == 10.0 and bh["seq_len"] == 256
        assert bh["c_attn"] == pytest.approx(exp["c_attn"], rel=1e-6) and bh["c_attn"] > 0
        assert entry["scales"]["s_x"] == pytest.approx(exp["s_x"], rel=1e-12)
        for site, tname in (("site_a", "gamma_attn"), ("site_m", "gamma_mlp")):
            regs = exp[site]
            assert {k: bh[site][k] for k in regs.scalars()} == regs.scalars(), (i, site)
            assert bh[site]["s_out"] == pytest.approx(regs.s_out, rel=1e-12)
            g = b.tensors[f"layers.{i}.bhyt.{tname}"]
            assert g.dtype == np.int16 and np.array_equal(g, regs.gamma), (i, site)
        assert bh["site_a"]["s_out"] == entry["scales"]["s_x"]  # site A writes the attention input scale
    assert man["layers"][0]["bhyt"]["site_m"]["c_int"] >= 0


# --------------------------------------------------------------------------- other Hugging Face inputs


def test_hf_converted_llama_vit_and_bare_safetensors(tmp_path):
    """A Llama folder saved after convert_llama_norms_to_bhyt + swap_attention_normalizer (β/γ, BHyT read from
    the state dict), a ViT folder (synthetic images), and a bare BERT .safetensors with config.json beside it."""
    import shutil

    from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaModel, ViTConfig, ViTModel

    from vckattn.golden import convert
    from vckattn.golden.pretrained import minilm_dir

    tok = AutoTokenizer.from_pretrained(minilm_dir())  # any tokenizer with the models' vocabulary size
    sentences = real_sentences(4)
    torch.manual_seed(0)
    llama = LlamaModel(LlamaConfig(vocab_size=tok.vocab_size, hidden_size=48, intermediate_size=96,
                                   num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2)).eval()
    norms = convert.convert_llama_norms_to_bhyt(llama, lam_attn=1.5, lam_mlp=0.8, seq_len=512)
    convert.swap_attention_normalizer(llama, "swiftmax", [1], beta=2.0, gamma=5.0)
    llama.save_pretrained(tmp_path / "llama")
    tok.save_pretrained(tmp_path / "llama")
    cfg = json.loads((tmp_path / "llama" / "config.json").read_text())
    cfg["vckattn_bhyt"] = {"kappa": 10.0, "seq_len": 512}
    (tmp_path / "llama" / "config.json").write_text(json.dumps(cfg))
    b = load_bundle(export_checkpoint(tmp_path / "llama", tmp_path / "llama.b", sentences, progress=False,
                                      **GOLDEN_ONLY))
    man = b.manifest
    assert man["norm"] == "bhyt" and man["source"]["kind"] == "hf-folder"
    # the checkpoint's per-layer β, γ: the same for each of the 6 query heads
    assert (man["layers"][1]["swiftmax"]["beta"], man["layers"][1]["swiftmax"]["gamma"]) == ([2.0] * 6, [5.0] * 6)
    for e in man["layers"]:
        assert e["bhyt"]["lam_attn"] == 1.5 and e["bhyt"]["seq_len"] == 512
        assert e["bhyt"]["c_attn"] == pytest.approx(float(norms[e["index"]].c_attn), rel=1e-6)
        assert e["bhyt"]["site_a"]["s_out"] == e["scales"]["s_x"]

    torch.manual_seed(0)
    vit = ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                             image_size=16, patch_size=4, num_channels=1), add_pooling_layer=False).eval()
    vit.save_pretrained(tmp_path / "vit")
    b = load_bundle(export_checkpoint(tmp_path / "vit", tmp_path / "vit.b", sentences, normalizer="softmax",
                                      progress=False, **GOLDEN_ONLY))
    assert b.manifest["model"]["max_seq_len"] == 17 and b.manifest["model"]["vocab_size"] is None
    assert b.manifest["calibration"]["data"].startswith("synthetic images")
    assert b.manifest["calibration"]["data_sha256"] is None  # a ViT reads no text: no corpus hash
    assert b.tensors["layers.1.o_proj.bias"].dtype == np.int32

    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=64)).eval()
    bert.save_pretrained(tmp_path / "bert")
    tok.save_pretrained(tmp_path / "bert")
    (tmp_path / "bare").mkdir()
    for f in ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        if (tmp_path / "bert" / f).exists():
            shutil.copy(tmp_path / "bert" / f, tmp_path / "bare" / f)
    shutil.copy(tmp_path / "bert" / "model.safetensors", tmp_path / "bare" / "weights.safetensors")
    bare = load_bundle(export_checkpoint(tmp_path / "bare" / "weights.safetensors", tmp_path / "bare.b", sentences,
                                         normalizer="softmax", progress=False, **GOLDEN_ONLY))
    folder = load_bundle(export_checkpoint(tmp_path / "bert", tmp_path / "bert.b", sentences, normalizer="softmax",
                                           progress=False, **GOLDEN_ONLY))
    assert bare.manifest["source"]["kind"] == "safetensors" and folder.manifest["source"]["kind"] == "hf-folder"
    assert bare.manifest["source"]["sha256"] == folder.manifest["source"]["sha256"]  # the same weight bytes
    assert bare.manifest["layers"] == folder.manifest["layers"]
    assert all(np.array_equal(bare.tensors[n], folder.tensors[n]) for n in folder.tensors)


# --------------------------------------------------------------------------- CLI


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["export", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_cli_export_writes_bundle(tmp_path, capsys):
    ck = save_golden_checkpoint(tmp_path / "tiny.pt", BHYT_CONFIG, _tiny_bhyt_stack().state_dict())
    calib = tmp_path / "calib.txt"
    calib.write_text("\n".join(real_sentences(6)) + "\n\n", encoding="utf-8")
    full = load_bundle(export_checkpoint(ck, tmp_path / "full", real_sentences(6), normalizer="softmax",
                                         progress=False, **GOLDEN_ONLY))
    out = tmp_path / "b"
    # head size 8: no committed build runs it; --manifest names a build that does (what a user's own build would)
    hd8 = _build_with_head_size(tmp_path, 8)
    rc, _, err = _cli(capsys, str(ck), "--out", str(out), "--calib", str(calib), "--normalizer", "softmax",
                      "--max-layers", "1", "--quiet")
    assert rc == 4 and "no committed hardware build runs head size 8" in err, err
    rc, _, err = _cli(capsys, str(ck), "--out", str(out), "--calib", str(calib), "--normalizer", "softmax",
                      "--max-layers", "1", "--quiet", "--manifest", hd8, "--min-model-fidelity", "-1")
    assert rc == 0, err
    man = load_bundle(out).manifest
    assert man["model"]["num_layers"] == 1 and [e["index"] for e in man["layers"]] == [0]
    assert man["calibration"]["samples"] == 6 and str(calib) in man["calibration"]["data"]
    import hashlib

    assert man["calibration"]["data_sha256"] == hashlib.sha256(calib.read_bytes()).hexdigest()
    # stopping the calibration forward after the last exported layer changes nothing in that layer
    assert man["layers"][0]["scales"] == full.manifest["layers"][0]["scales"]
    assert man["layers"][0]["bhyt"] == full.manifest["layers"][0]["bhyt"]
    rc, _, err = _cli(capsys, str(ck), "--out", str(out), "--calib", str(calib), "--layers", "1", "--quiet",
                      "--manifest", hd8, "--min-model-fidelity", "-1")
    assert rc == 2 and "exists" in err and "--overwrite" in err
    rc, _, err = _cli(capsys, str(ck), "--out", str(out), "--calib", str(calib), "--layers", "1", "--overwrite",
                      "--quiet", "--manifest", hd8, "--min-model-fidelity", "-1")
    assert rc == 0, err
    man = load_bundle(out).manifest
    assert [e["index"] for e in man["layers"] if e["swiftmax"]] == [1] and man["normalizer"] == "swiftmax"


def test_cli_errors_are_one_line(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    notgolden = tmp_path / "plain.pt"
    torch.save({"weight": torch.zeros(2)}, notgolden)
    bare = tmp_path / "lonely" / "model.safetensors"
    bare.parent.mkdir()
    bare.write_bytes(b"")
    out = str(tmp_path / "never")
    # (arguments, message, exit status of the kind: 2 usage, 4 bad input file; README "Exit statuses")
    cases = [
        (("does-not-exist", "--out", out), "does not exist", 4),
        ((str(gpt2), "--out", out), "unsupported model_type 'gpt2'", 4),
        (("minilm", "--out", out, "--calib", str(empty)), "no sentences", 4),
        (("minilm", "--out", out, "--calib", str(tmp_path / "missing.txt")), "does not exist", 4),
        (("minilm", "--out", out, "--layers", "0,6"), "out of range", 2),
        (("minilm", "--out", out, "--percentile", "99"), "--calib-method percentile", 2),
        ((str(notgolden), "--out", out), "not a vckattn golden checkpoint", 4),
        ((str(bare), "--out", out), "config.json", 4),
    ]
    for argv, needle, status in cases:
        rc, _, err = _cli(capsys, *argv)
        assert rc == status if status is not None else rc in (2, 4), (argv, rc, err)
        assert needle in err, (argv, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "never").exists()
    rc, _, err = _cli(capsys, "minilm", "--out", out, "--normalizer", "consmax")
    assert rc == 2 and "consmax" in err


def test_export_refuses_a_layer_that_does_not_follow_its_float_layer(tmp_path, capsys):
    """The export check: mean-initialised (untuned) SwiftMax puts MiniLM layer 0's P far outside its 8-bit format,
    so the integer layer does not follow its float layer. `export` refuses in one line (the layer, the worst head,
    the figures, the fix), exit 3, and writes nothing; --allow-low-fidelity writes it with the warning recorded,
    which `inspect` shows. The default (per-head `max`) passes the check with every figure recorded."""
    out = tmp_path / "b"
    args = ["export", "minilm", "--out", str(out), "--swiftmax-init", "mean", "--max-layers", "1", "--quiet"]
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 3 and len(err.strip().splitlines()) == 1, err
    assert "layer 0 output cosine" in err and "worst head" in err and "below 0.8:" in err and "--swiftmax-init max" \
        in err and "Traceback" not in err
    assert not out.exists()
    code = cli.main([*args, "--allow-low-fidelity"])
    assert code == 0, capsys.readouterr().err
    b = load_bundle(out)
    warning, *whole = b.manifest["warnings"]  # the layer's; the whole model's after it, if it is low too
    assert warning.startswith("layer 0 output cosine") and all(w.startswith("the whole model") for w in whole)
    fid = b.manifest["model_fidelity"]
    assert bool(whole) == (fid["score"] < fid["threshold"])
    fid = b.manifest["layers"][0]["fidelity"]
    assert fid["cosine"] < 0.8 and len(fid["head_cosine"]) == 12 and fid["threshold"] == 0.8
    capsys.readouterr()
    assert cli.main(["inspect", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "warning" in shown and "layer 0 output cosine" in shown
    good = tmp_path / "good"
    # untuned `max`: every layer passes its check; the whole model does not (written to be inspected)
    assert cli.main(["export", "minilm", "--out", str(good), "--max-layers", "2", "--quiet",
                     "--allow-low-fidelity"]) == 0
    gb = load_bundle(good)
    assert [w.split(" with ")[0] for w in gb.manifest["warnings"]] == ["the whole model"]
    for e in gb.manifest["layers"]:
        f = e["fidelity"]
        assert min(f["cosine"], *f["head_cosine"]) >= 0.8 and len(set(e["swiftmax"]["beta"])) == 12, f


def test_fidelity_advice_names_the_fix_for_where_the_constants_came_from():
    """The refusal's fix depends on the β/γ: tuned without the P format (a one-hot head's P ≈ 10^7: only tuning for
    the format helps, percentile scales do not), tuned for it (percentile scales), or initialised at export."""
    from vckattn.host.export.fidelity import fidelity_problem

    fid = {"cosine": 0.0, "head_cosine": [0.98, 0.71], "threshold": 0.8}
    tuned = fidelity_problem(0, fid, "swiftmax", from_checkpoint=True, saturating=False)
    assert "layer 0 output cosine 0.000 (worst head 1: 0.710 alone)" in tuned
    assert "`vckattn calibrate swiftmax … --p-frac 8`" in tuned and "percentile" not in tuned
    sat = fidelity_problem(0, fid, "swiftmax", from_checkpoint=True, saturating=True)
    assert "--calib-method percentile --percentile 99.9" in sat and "--p-frac" not in sat
    assert "--swiftmax-init max" in fidelity_problem(0, fid, "swiftmax", init="mean")
    assert fidelity_problem(0, {"cosine": 0.9, "head_cosine": [0.9], "threshold": 0.8}, "swiftmax", True) is None

"""`vckattn run` end to end on the default design (vck5000_engine; rtl on engine_small): real MiniLM bundle and text on
the emu, csim and rtl backends, a tiny Llama
(RoPE, GQA, causal), the JSON report's shape, --save/--input round trip, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from vckattn.host.cli import main
from vckattn.host.export import export_checkpoint
from vckattn.host.textdata import real_sentences
from vckattn.hw.design.manifest import load_manifest

TEXT = "The quick brown fox jumps over the lazy dog, and the attention block must get every bit right."
LAYER_KEYS = {"layer", "bit_exact", "first_difference", "max_abs_error", "max_rel_error", "cosine", "tiles",
              "device_seconds", "host_seconds", "normalizer", "beta_source", "threshold"}


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_run_emu_text_report_save_and_input_round_trip(minilm_bundle, tmp_path, capsys):
    js, npz = tmp_path / "r.json", tmp_path / "s.npz"
    code, out, err = _cli(capsys, "run", "--bundle", str(minilm_bundle), "--backend", "emu", "--text", TEXT,
                          "--json", str(js), "--save", str(npz), "--quiet")
    assert code == 0, err
    rep = json.loads(js.read_text())
    assert set(rep) == {"backend", "device", "manifest", "bundle", "scope", "family", "tokens", "tiles", "layers",
                        "elements_per_second", "model_fidelity", "calibration"}
    assert (rep["scope"], rep["family"]) == ("attention", "attention")  # an attention build: the attention core
    assert rep["model_fidelity"] == json.loads((minilm_bundle / "manifest.json").read_text())["model_fidelity"]
    assert rep["backend"] == "emu" and [r["layer"] for r in rep["layers"]] == [0, 1]
    for r in rep["layers"]:
        assert set(r) == LAYER_KEYS  # no "cycles" off the rtl backend
        assert r["bit_exact"] is True and r["first_difference"] is None
        assert r["cosine"] > 0.99 and 0 < r["max_rel_error"] < 0.2, r
    tokens = rep["tokens"]
    q_rows = load_manifest(rep["manifest"]).data["engine"]["design"]["q_rows"]  # the default design's query tile
    assert rep["tiles"] == 2 * 12 * -(-tokens // q_rows)  # layers x heads x query tiles
    assert rep["elements_per_second"] > 0
    saved = np.load(npz)
    assert sorted(saved.files) == ["layer0_input", "layer0_output", "layer1_input", "layer1_output"]
    assert saved["layer0_input"].shape == (tokens, 384) and saved["layer0_output"].shape == (tokens, 384)
    assert "bit-exact" in out

    # the saved inputs fed back give the same outputs, bit for bit after dequantization
    npz2 = tmp_path / "s2.npz"
    code, _, err = _cli(capsys, "run", "--bundle", str(minilm_bundle), "--input", str(npz), "--save", str(npz2),
                        "--quiet")
    assert code == 0, err
    again = np.load(npz2)
    for k in saved.files:
        assert np.array_equal(again[k], saved[k]), k


def test_run_refusals_are_one_line(minilm_bundle, tmp_path, capsys):
    small = load_manifest("engine_small").data | {"max_seq_len": 32}
    eng = small["engine"]  # a build of 32 keys a group
    small["engine"] = eng | {"max_keys": 32, "slice_keys": 16, "design": eng["design"] | {"max_seq": 32}}
    mf = tmp_path / "small.json"
    mf.write_text(json.dumps(small))
    long_text = " ".join(real_sentences(4))
    # (arguments, message, exit status of the kind: 2 usage, 4 bad input, 5 bad bundle/manifest; README)
    cases = [
        (["--manifest", str(mf), "--text", long_text], "longer than this build's maximum 32", 5),
        (["--text", TEXT, "--layers", "5"], "no layer(s) [5] in the bundle", 2),
        (["--text", TEXT, "--backend", "xrt"], "--backend xrt needs --xclbin", 2),
        (["--input", str(tmp_path / "missing.npz")], "cannot read the input npz", 4),
        (["--text", TEXT, "--manifest", str(tmp_path / "nope.json")], "cannot read", 5),
    ]
    np.savez(tmp_path / "bad.npz", layer0_input=np.zeros((5, 7)))
    cases.append((["--input", str(tmp_path / "bad.npz"), "--layers", "0"], "layer0_input has shape (5, 7)", 4))
    np.savez(tmp_path / "nan.npz", layer0_input=np.full((5, 384), np.nan))
    cases.append((["--input", str(tmp_path / "nan.npz"), "--layers", "0"], "holds NaN or Inf", 4))
    for extra, message, status in cases:
        code, out, err = _cli(capsys, "run", "--bundle", str(minilm_bundle), "--quiet", *extra)
        assert code == status, (extra, out, err)
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, (extra, err)


def test_run_xrt_without_xrt_says_what_is_missing(minilm_bundle, tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyxrt", None)  # XRT not installed (true on this machine anyway)
    (tmp_path / "a.xclbin").write_bytes(b"\0" * 64)
    code, _, err = _cli(capsys, "run", "--bundle", str(minilm_bundle), "--backend", "xrt", "--xclbin",
                        str(tmp_path / "a.xclbin"), "--text", TEXT, "--quiet")
    assert code == 6 and "XRT not found" in err, err  # a missing tool


def _tiny_llama_folder(tmp_path):
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    from vckattn.golden.pretrained import minilm_dir

    tok = AutoTokenizer.from_pretrained(minilm_dir())
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=128, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    LlamaModel(cfg).eval().save_pretrained(tmp_path / "llama")
    tok.save_pretrained(tmp_path / "llama")
    return tmp_path / "llama"


def test_run_llama_rope_gqa_causal_on_emu(tmp_path, capsys):
    folder = _tiny_llama_folder(tmp_path)
    bundle = export_checkpoint(folder, tmp_path / "llama.b", real_sentences(6), normalizer="swiftmax",
                               swiftmax_init="max", progress=False, min_model_fidelity=-1,  # untuned, random
                               check_samples=4)
    js = tmp_path / "r.json"
    code, _, err = _cli(capsys, "run", "--bundle", str(bundle), "--text", " ".join(real_sentences(3)), "--json",
                        str(js), "--quiet")
    assert code == 0, err
    rep = json.loads(js.read_text())
    assert rep["tokens"] > 32  # more than one query tile: causal masks across tiles
    for r in rep["layers"]:
        assert r["bit_exact"] is True and r["cosine"] > 0.98, r


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_run_rtl_minilm_layer0_bit_exact(minilm_heads_bundle, tmp_path, capsys):
    """Per-head constants on the small engine's PL top: each tile's rows carry its head to the per-head memories."""
    js = tmp_path / "r.json"
    code, _, err = _cli(capsys, "run", "--bundle", str(minilm_heads_bundle), "--backend", "rtl", "--layers", "0",
                        "--manifest", "engine_small", "--text", "Attention on the Versal array.", "--json", str(js),
                        "--quiet", "--seed", "7")
    assert code == 0, err
    rep = json.loads(js.read_text())
    (r,) = rep["layers"]
    assert r["bit_exact"] is True and set(r) == LAYER_KEYS | {"cycles"}
    # every valid score of the 12 heads passes one of the 2 channels x 2 SwiftMax lanes: cycles >= scores / 4
    assert r["cycles"] >= 12 * rep["tokens"] ** 2 // 4


@pytest.mark.tool("g++", "hls4ml", "verilator")
def test_run_csim_minilm_both_layers_bit_exact(minilm_bundle, tmp_path, capsys):
    """The real MiniLM layers through the default design's C++ (vck5000_engine: HLS movers, AIE kernels' scalar
    path, the PL top's SwiftMax channels Verilated)."""
    js = tmp_path / "r.json"
    code, _, err = _cli(capsys, "run", "--bundle", str(minilm_bundle), "--backend", "csim", "--text", TEXT,
                        "--json", str(js), "--quiet")
    assert code == 0, err
    rep = json.loads(js.read_text())
    assert rep["backend"] == "csim" and rep["manifest"] == "vck5000_engine"
    assert [r["bit_exact"] for r in rep["layers"]] == [True, True]
    assert all(r["cosine"] > 0.99 for r in rep["layers"])


@pytest.mark.tool("g++", "hls4ml", "verilator")
def test_run_csim_minilm_per_head_bit_exact(minilm_heads_bundle, tmp_path, capsys):
    """Per-head constants through the default design's C++: the head rides the tile header to the PL top's SwiftMax
    per-head registers."""
    js = tmp_path / "r.json"
    code, _, err = _cli(capsys, "run", "--bundle", str(minilm_heads_bundle), "--backend", "csim", "--layers", "0",
                        "--text", TEXT, "--json", str(js), "--quiet")
    assert code == 0, err
    (r,) = json.loads(js.read_text())["layers"]
    assert r["bit_exact"] is True and r["cosine"] > 0.95, r


def test_run_min_cosine_refuses_a_bundle_whose_layers_do_not_follow_the_float_model(tmp_path, capsys):
    """A mean-init (untuned) SwiftMax export of MiniLM, written despite the export check, runs bit-exact but its
    layers do not follow the float model: `run` says so in one line and exits 3 (1 stays "not bit-exact");
    --min-cosine -1 accepts it."""
    bundle = export_checkpoint("minilm", tmp_path / "mean", real_sentences(12), normalizer="swiftmax",
                               swiftmax_init="mean", max_layers=1, progress=False, allow_low_fidelity=True)
    js = tmp_path / "r.json"
    code, _, err = _cli(capsys, "run", "--bundle", str(bundle), "--text", TEXT, "--json", str(js), "--quiet")
    rep = json.loads(js.read_text())  # the report is written either way
    (r,) = rep["layers"]
    # the default threshold is the one the export check held the layer to (recorded in the bundle)
    assert r["bit_exact"] is True and r["cosine"] < r["threshold"] == 0.8, r
    assert code == 3 and len(err.strip().splitlines()) == 1
    assert f"layer 0: cosine {r['cosine']:.4f}" in err and "the export check's threshold 0.8" in err
    assert "calibrate swiftmax" in err and "--swiftmax-init" not in err
    code, _, err = _cli(capsys, "run", "--bundle", str(bundle), "--text", TEXT, "--min-cosine", "-1", "--quiet")
    assert code == 0, err
    code, _, err = _cli(capsys, "run", "--bundle", str(bundle), "--text", TEXT, "--min-cosine", "1.5", "--quiet")
    assert code == 2 and "-1..1" in err

"""BHyT conversion (golden and HF), the c_attn refresh callback, `vckattn convert bhyt`, the depth experiment."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from conftest import require_module
from hf_tiny import F64, tiny_bert, tiny_llama

from vckattn.golden.bhyt import c_attn_from_weights, c_attn_refresh_interval
from vckattn.golden.bhyt_train import CAttnRefresh, TinyDecoder, hf_trainer_callback, refresh_all_c_attn
from vckattn.golden.blocks import LlamaBlock
from vckattn.host import cli, convert_cmd
from vckattn.host.export import GoldenStack, save_golden_checkpoint

require_module("transformers")


def _c_attn_by_hand(w_v, w_o, n_heads, n_kv, seq_len):
    """‖Σ_h W_V,h W_O,h‖_F² / (T d) with query head h reading value head h // (H / Hkv), written out per head."""
    d = w_v.shape[1]
    hd = w_v.shape[0] // n_kv
    g = n_heads // n_kv
    m = torch.zeros(d, d, dtype=F64)
    for h in range(n_heads):
        kv = h // g
        m += w_v[kv * hd:(kv + 1) * hd].double().T @ w_o[:, h * hd:(h + 1) * hd].double().T
    return float(m.pow(2).sum() / (seq_len * d))


# --------------------------------------------------------------------------- conversions


@torch.no_grad()
def test_hf_llama_conversion_matches_golden_bhyt_blocks_gqa():
    from vckattn.golden import convert

    model = tiny_llama(seed=1)  # 6 query heads, 2 kv heads (GQA)
    cfg = model.config
    ids = torch.randint(0, cfg.vocab_size, (2, 10), generator=torch.Generator().manual_seed(0))
    norms = convert.convert_llama_norms_to_bhyt(model, lam_attn=1.7, lam_mlp=0.9, kappa=10.0, seq_len=64)
    got = model(ids).last_hidden_state

    h = model.embed_tokens(ids)
    rope = model.rotary_emb(h, torch.arange(10)[None])
    for i, layer in enumerate(model.layers):
        w_v, w_o = layer.self_attn.v_proj.weight, layer.self_attn.o_proj.weight
        expect_c = _c_attn_by_hand(w_v, w_o, 6, 2, 64)
        assert float(norms[i].c_attn) == pytest.approx(expect_c, rel=1e-12)
        assert float(norms[i].c_attn) == pytest.approx(float(c_attn_from_weights(w_v, w_o, 6, 2, 64)), rel=1e-12)
        blk = LlamaBlock(48, 6, 2, 96, "bhyt", seq_len=64).to(F64).load_hf(layer)
        blk.bhyt.load_state_dict(layer.bhyt.state_dict())
        assert float(blk.bhyt.lam_attn) == pytest.approx(1.7) and float(blk.bhyt.lam_mlp) == pytest.approx(0.9)
        torch.testing.assert_close(blk.bhyt.weight_attn, layer.bhyt.weight_attn)
        assert blk.refresh_c_attn() == pytest.approx(expect_c, rel=1e-12)
        h = blk(h, rope=rope)
    torch.testing.assert_close(got, model.norm(h), rtol=0, atol=1e-10)


def _golden_rms_decoder(seed: int = 0) -> TinyDecoder:
    torch.manual_seed(seed)
    dec = TinyDecoder(256, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, d_ff=64, norm="rmsnorm", seq_len=32)
    with torch.no_grad():
        for blk in dec.layers:
            blk.norm1.weight.uniform_(0.5, 1.5)
            blk.norm2.weight.uniform_(0.5, 1.5)
    return dec.eval()


@torch.no_grad()
def test_golden_decoder_conversion_and_export(tmp_path):
    from vckattn.host.bundle import load_bundle
    from vckattn.host.export import export_checkpoint
    from vckattn.host.textdata import real_sentences

    dec = _golden_rms_decoder()
    config, state = dec.golden_checkpoint()
    src = save_golden_checkpoint(tmp_path / "rms.pt", config, state)
    report = convert_cmd.convert_bhyt(src, tmp_path / "out", seq_len=48, lam_attn=1.5, lam_mlp=0.7)
    assert report["checkpoint"] == str(tmp_path / "out" / "model.pt")
    assert json.loads((tmp_path / "out" / "bhyt_convert.json").read_text())["layers"] == report["layers"]

    ck = torch.load(report["checkpoint"], weights_only=True)
    assert ck["config"]["block"]["norm"] == "bhyt" and ck["config"]["block"]["seq_len"] == 48
    got_stack = GoldenStack(ck["config"])
    got_stack.load_state_dict(ck["state_dict"])
    ref = TinyDecoder(256, 2, 32, 4, n_kv_heads=2, d_ff=64, norm="bhyt", seq_len=48, lam_attn=1.5, lam_mlp=0.7)
    ref.embed.load_state_dict(dec.embed.state_dict())
    for i, (rb, sb) in enumerate(zip(ref.layers, dec.layers, strict=True)):
        rb.attn.load_state_dict(sb.attn.state_dict())
        for p in ("gate_proj", "up_proj", "down_proj"):
            getattr(rb, p).load_state_dict(getattr(sb, p).state_dict())
        rb.bhyt.weight_attn.copy_(sb.norm1.weight)
        rb.bhyt.weight_mlp.copy_(sb.norm2.weight)
        c = rb.refresh_c_attn()
        assert report["layers"][i]["c_attn"] == pytest.approx(c, rel=1e-6)
        assert c == pytest.approx(_c_attn_by_hand(sb.attn.v_proj.weight, sb.attn.o_proj.weight, 4, 2, 48), rel=1e-9)
        assert report["layers"][i]["var_increment"] == pytest.approx(c * 1.5**2 / 100, rel=1e-6)
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(3))
    want = ref.embed(ids)
    for blk in ref.layers:
        want = blk(want)
    torch.testing.assert_close(got_stack.eval()(ids), want, rtol=1e-6, atol=1e-6)

    # a tiny model (head size 8): a bundle of the golden integer model only, any whole-model figure
    b = load_bundle(export_checkpoint(report["checkpoint"], tmp_path / "b", real_sentences(4), progress=False,
                                      check_hardware=False, min_model_fidelity=-1, check_samples=4))
    assert b.manifest["norm"] == "bhyt"
    for e, row in zip(b.manifest["layers"], report["layers"], strict=True):
        assert e["bhyt"]["c_attn"] == pytest.approx(row["c_attn"], rel=1e-6) and e["bhyt"]["seq_len"] == 48
        assert e["bhyt"]["lam_attn"] == pytest.approx(1.5) and "site_m" in e["bhyt"]


# --------------------------------------------------------------------------- the refresh callback


def test_callback_refresh_steps_and_values():
    torch.manual_seed(0)
    dec = TinyDecoder(256, n_layers=2, d_model=32, n_heads=4, norm="bhyt", seq_len=16)
    assert all(float(b.bhyt.c_attn) > 0 for b in dec.layers)  # refreshed below; buffers start at 0 otherwise
    assert c_attn_refresh_interval(200) == 4 and c_attn_refresh_interval(10) == 1
    assert c_attn_refresh_interval(10**6) == 1000
    r = CAttnRefresh(dec, total_steps=200)
    assert r.interval == 4 and r.refresh_steps == [0]
    c0 = [float(b.bhyt.c_attn) for b in dec.layers]
    for step in range(1, 13):
        r.on_step(step)
    assert r.refresh_steps == [0, 4, 8, 12]
    with torch.no_grad():
        for b in dec.layers:
            b.attn.v_proj.weight.mul_(2.0)
    assert r.on_step(13) is None
    assert [float(b.bhyt.c_attn) for b in dec.layers] == pytest.approx(c0)  # not yet
    vals = r.on_step(16)
    assert [float(b.bhyt.c_attn) for b in dec.layers] == pytest.approx([4 * c for c in c0], rel=1e-5)
    for i, b in enumerate(dec.layers):
        assert vals[i] == pytest.approx(float(c_attn_from_weights(b.attn.v_proj.weight, b.attn.o_proj.weight,
                                                                  4, 4, 16)), rel=1e-12)
    with pytest.raises(ValueError, match="no BHyT blocks"):
        CAttnRefresh(TinyDecoder(256, 1, 16, 2, norm="rmsnorm"), 10)


def test_callback_on_converted_hf_llama_and_trainer_adapter():
    from vckattn.golden import convert

    model = tiny_llama(seed=2)
    convert.convert_llama_norms_to_bhyt(model, seq_len=32)
    cb = hf_trainer_callback(model)
    cb.on_train_begin(None, SimpleNamespace(max_steps=100), None)
    assert cb.refresher.interval == 2
    layer = model.layers[1]
    with torch.no_grad():
        layer.self_attn.o_proj.weight.mul_(3.0)
    cb.on_step_end(None, SimpleNamespace(global_step=1), None)
    assert cb.refresher.refresh_steps == [0]
    cb.on_step_end(None, SimpleNamespace(global_step=2), None)
    assert cb.refresher.refresh_steps == [0, 2]
    want = c_attn_from_weights(layer.self_attn.v_proj.weight, layer.self_attn.o_proj.weight, 6, 2, 32)
    assert float(layer.bhyt.c_attn) == pytest.approx(float(want), rel=1e-12)
    assert refresh_all_c_attn(model)[1] == pytest.approx(float(want), rel=1e-12)


# --------------------------------------------------------------------------- the CLI command


def _cli(monkeypatch, argv):
    """``vckattn ARGV`` with the convert command registered (whether or not cli.COMMANDS has it yet)."""
    if "convert" not in cli.command_names(cli.build_parser()):
        monkeypatch.setattr(cli, "COMMANDS", [*cli.COMMANDS, cli.convert.add_convert])
    return cli.main(argv)


def test_cli_convert_hf_llama_then_export(tmp_path, monkeypatch, capsys):
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    from vckattn.golden.pretrained import minilm_dir
    from vckattn.host.bundle import load_bundle

    tok = AutoTokenizer.from_pretrained(minilm_dir())
    torch.manual_seed(0)
    llama = LlamaModel(LlamaConfig(vocab_size=tok.vocab_size, hidden_size=48, intermediate_size=96,
                                   num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2)).eval()
    llama.save_pretrained(tmp_path / "llama")
    tok.save_pretrained(tmp_path / "llama")
    rc = _cli(monkeypatch, ["convert", "bhyt", str(tmp_path / "llama"), "--out", str(tmp_path / "conv"),
                            "--seq-len", "256", "--lam-attn", "1.5", "--lam-mlp", "0.8"])
    out = capsys.readouterr().out
    assert rc == 0 and "c_attn" in out and "vckattn export" in out
    report = json.loads((tmp_path / "conv" / "bhyt_convert.json").read_text())
    assert len(report["layers"]) == 2 and report["seq_len"] == 256
    for row, layer in zip(report["layers"], llama.layers, strict=True):
        want = c_attn_from_weights(layer.self_attn.v_proj.weight, layer.self_attn.o_proj.weight, 6, 2, 256)
        assert row["c_attn"] == pytest.approx(float(want), rel=1e-6)
    import copy

    from vckattn.hw.design.manifest import load_manifest

    build = copy.deepcopy(load_manifest("engine_small").data)  # a build that takes this tiny model's head size 8
    build["tile"]["head_dims"] = [8, int(build["engine"]["d"])]  # the engine takes head sizes up to its D
    (tmp_path / "hd8.json").write_text(json.dumps(build), encoding="utf-8")
    rc = cli.main(["export", str(tmp_path / "conv"), "--out", str(tmp_path / "bundle"), "--quiet", "--manifest",
                   str(tmp_path / "hd8.json"), "--min-model-fidelity", "-1", "--check-samples", "4"])
    assert rc == 0
    man = load_bundle(tmp_path / "bundle").manifest
    assert man["norm"] == "bhyt"
    for e, row in zip(man["layers"], report["layers"], strict=True):
        assert e["bhyt"]["c_attn"] == pytest.approx(row["c_attn"], rel=1e-6)
        assert e["bhyt"]["seq_len"] == 256 and e["bhyt"]["lam_attn"] == pytest.approx(1.5)
        assert {"site_a", "site_m"} <= set(e["bhyt"])


def test_cli_convert_one_line_errors(tmp_path, monkeypatch, capsys):
    def err(argv):
        capsys.readouterr()  # drop what the set-up printed (save_pretrained's progress bar)
        rc = _cli(monkeypatch, argv)
        lines = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, lines
        return lines[0]

    assert "no such file" in err(["convert", "bhyt", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    tiny_bert().save_pretrained(tmp_path / "bert")
    assert "not a Llama" in err(["convert", "bhyt", str(tmp_path / "bert"), "--out", str(tmp_path / "o")])
    torch.manual_seed(0)
    dyt = TinyDecoder(256, 1, 16, 2, norm="dyt")
    ck = save_golden_checkpoint(tmp_path / "dyt.pt", *dyt.golden_checkpoint())
    assert "starts from 'rmsnorm'" in err(["convert", "bhyt", str(ck), "--out", str(tmp_path / "o")])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    rms = save_golden_checkpoint(tmp_path / "rms.pt", *_golden_rms_decoder().golden_checkpoint())
    assert "--overwrite" in err(["convert", "bhyt", str(rms), "--out", str(tmp_path / "full")])
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    assert "cannot read" in err(["convert", "bhyt", str(tmp_path / "junk.pt"), "--out", str(tmp_path / "o")])


# --------------------------------------------------------------------------- the depth experiment


def test_bhyt_depth_smoke(tmp_path):
    from research.experiments import bhyt_depth

    out = tmp_path / "exp"
    assert bhyt_depth.main(["--layers", "2", "--width", "32", "--heads", "4", "--steps", "4", "--eval-every", "2",
                            "--batch", "2", "--seq", "16", "--val-batches", "1", "--out", str(out)]) == 0
    for name in ("loss.png", "variance_depth.png", "approx_vs_actual.png"):
        assert (out / name).stat().st_size > 1000
    rep = json.loads((out / "bhyt_depth.json").read_text())
    assert rep["seed"] == 0 and rep["wall_s"] > 0 and rep["command"].startswith("python -m")
    assert set(rep["models"]) == {"rmsnorm", "dyt", "bhyt"}
    for r in rep["models"].values():
        assert len(r["train_loss"]) == 4 and [s for s, _ in r["val_loss"]] == [0, 2, 4]
        assert len(r["variance_depth"]["mean_square"]) == 3 and r["train_wall_s"] > 0
    bh = rep["models"]["bhyt"]
    assert bh["c_attn_refresh"]["interval"] == 1 and bh["c_attn_refresh"]["steps"] == [0, 1, 2, 3, 4]
    assert len(bh["approx_vs_actual"]) == 2
    assert {"rmse", "rel_rmse", "pearson_r", "mean_ratio", "c_attn"} <= set(bh["approx_vs_actual"][0])

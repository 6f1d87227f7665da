"""SwiftMax calibration: statistics, one replace-and-tune stage, resume, and the CLI end to end (MiniLM →
calibrate → export)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from tests.hf_tiny import right_padding, tiny_bert
from vckattn.golden import calibrate as cal
from vckattn.host.cli import main


def _batches(seed=0, n=3):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(1, 120, (4, 12), generator=g)
        out.append({"input_ids": ids, "attention_mask": right_padding([12, 9, 5, 12], 12).long()})
    return out


def test_collect_stats_matches_an_independent_computation():
    model = tiny_bert()
    bs = _batches(n=1)
    stats = cal.collect_stats(model, bs)
    b = bs[0]
    with torch.no_grad():
        hs = model(**b, output_hidden_states=True).hidden_states
    for i, layer in enumerate(model.encoder.layer):
        att = layer.attention.self
        torch.set_grad_enabled(False)
        q = att.query(hs[i]).view(4, 12, 4, 8).transpose(1, 2)
        k = att.key(hs[i]).view(4, 12, 4, 8).transpose(1, 2)
        z = q @ k.transpose(-1, -2) / math.sqrt(8)
        keep = b["attention_mask"].bool()[:, None, None, :]
        z = z.masked_fill(~keep, -math.inf)
        zmax = z.amax(-1)
        s = torch.exp(z - zmax[..., None]).sum(-1)
        st = stats[i]
        real = b["attention_mask"].bool()[:, None, :].expand(4, 4, 12)  # rows of padded queries are left out
        assert st.z_max.size == 4 * (12 + 9 + 5 + 12)
        np.testing.assert_allclose(np.sort(st.z_max), np.sort(zmax[real].numpy()), rtol=1e-10)
        np.testing.assert_allclose(np.sort(st.sum_exp), np.sort(s[real].numpy()), rtol=1e-10)
        assert sorted(np.unique(st.head)) == [0, 1, 2, 3]
        for h in range(4):  # per-head attribution
            np.testing.assert_allclose(np.sort(st.z_max[st.head == h]), np.sort(zmax[:, h][real[:, h]].numpy()),
                                       rtol=1e-10)
    torch.set_grad_enabled(True)


def test_propose_init_modes():
    stats = cal.collect_stats(tiny_bert(), _batches())
    b, g = cal.propose_init(stats, "mean")
    assert b[0] == pytest.approx(stats[0].z_max.mean()) and g[1] == pytest.approx(stats[1].sum_exp.mean())
    bm, gm = cal.propose_init(stats, "max")
    assert bm[0] == pytest.approx(stats[0].z_max.max()) and all(x > 0 for x in gm)
    bh, gh = cal.propose_init(stats, "mean", per_head=True)
    assert len(bh[0]) == 4 and bh[0][2] == pytest.approx(stats[0].z_max[stats[0].head == 2].mean())
    with pytest.raises(ValueError, match="mode"):
        cal.propose_init(stats, "median")


def _distill_setup(seed=0):
    teacher = tiny_bert(seed)
    bs = _batches(seed)
    with torch.no_grad():
        targets = [cal.mean_pool(teacher(**b).last_hidden_state, b["attention_mask"]) for b in bs]
    train = [b | {"_t": t} for b, t in zip(bs, targets, strict=True)]

    def loss_fn(m, b):
        out = m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
        return cal.embedding_distillation_loss(cal.mean_pool(out, b["attention_mask"]), b["_t"])

    def eval_fn(m):
        with torch.no_grad():
            return float(1 - sum(float(loss_fn(m, b)) for b in train) / len(train))

    return teacher, train, loss_fn, eval_fn


def test_one_stage_tunes_beta_gamma_only():
    _, train, loss_fn, eval_fn = _distill_setup()
    model = tiny_bert()
    b0, g0 = cal.propose_init(cal.collect_stats(model, [{k: b[k] for k in ("input_ids", "attention_mask")}
                                                         for b in train]), "mean")
    init = ([b + 3.0 for b in b0], g0)  # a poor start (P too small by e^3): tuning must recover
    before = {k: v.clone() for k, v in model.state_dict().items()}
    untuned = tiny_bert()
    cal.apply_swiftmax(untuned, {0: init[0][0]}, {0: init[1][0]})
    start = eval_fn(untuned)
    logs = cal.replace_and_tune(model, lambda: train, loss_fn, eval_fn, init, layers=[0], epochs_per_stage=4, lr=0.1)
    (log,) = logs
    assert log.layers == [0] and len(log.metrics) == 4 and log.seconds > 0
    sm = cal.swiftmax_layers(model)
    assert list(sm) == [0]
    assert float(sm[0].beta) != pytest.approx(init[0][0]) and float(sm[0].gamma) != pytest.approx(init[1][0])
    assert float(sm[0].gamma) > 0 and log.metrics[-1] > start  # tuning improved the held-out objective
    after = model.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed == []  # main weights frozen (β/γ live in new modules, not in the old state dict)


def test_resume_after_an_interruption(tmp_path):
    _, train, loss_fn, eval_fn = _distill_setup()
    steps = []
    kw = dict(layers_per_stage=1, epochs_per_stage=2, lr=0.1, ckpt_dir=tmp_path, config={"run": "a"},
              on_step=lambda: steps.append(1))
    m1 = tiny_bert()
    init = cal.propose_init(cal.collect_stats(m1, [{k: b[k] for k in ("input_ids", "attention_mask")}
                                                   for b in train]), "mean")
    full = cal.replace_and_tune(m1, lambda: train, loss_fn, eval_fn, init, **kw)
    assert [lg.stage for lg in full] == [0, 1] and len(steps) == 2 * 2 * len(train)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["swiftmax_stage00.json", "swiftmax_stage01.json"]

    # interrupted after stage 0: the second run trains only stage 1 and ends where the full run ended
    (tmp_path / "swiftmax_stage01.json").unlink()
    steps.clear()
    m2 = tiny_bert()
    again = cal.replace_and_tune(m2, lambda: train, loss_fn, eval_fn, init, **kw)
    assert len(steps) == 2 * len(train) and [lg.stage for lg in again] == [0, 1]
    assert again[0] == full[0]
    assert again[1].betas == pytest.approx(full[1].betas) and again[1].gammas == pytest.approx(full[1].gammas)

    # everything done: nothing trains, the model gets the checkpoint's β/γ
    steps.clear()
    m3 = tiny_bert()
    cal.replace_and_tune(m3, lambda: train, loss_fn, eval_fn, init, **kw)
    assert steps == [] and float(cal.swiftmax_layers(m3)[1].beta) == pytest.approx(full[1].betas[1])

    with pytest.raises(ValueError, match="different configuration"):
        cal.replace_and_tune(tiny_bert(), lambda: train, loss_fn, eval_fn, init, **(kw | {"lr": 0.2}))


def test_cli_stats_and_swiftmax_on_minilm_then_export(tmp_path, capsys):
    """The real MiniLM: stats, one replace-and-tune stage, resume message, and the tuned model exports."""
    out = tmp_path / "stats"
    assert main(["calibrate", "stats", "minilm", "--data", "pydoc", "--samples", "16", "--out", str(out),
                 "--quiet"]) == 0
    rep = json.loads((out / "stats.json").read_text())
    assert len(rep["layers"]) == 6 and (out / "stats_hist.png").stat().st_size > 10_000
    assert set(rep["proposed"]) == {"mean", "max", "mean_per_head", "max_per_head"}

    run = tmp_path / "tune"
    argv = ["calibrate", "swiftmax", "minilm", "--data", "pydoc", "--train-samples", "16", "--eval-samples", "8",
            "--batch-size", "8", "--max-length", "32", "--layers", "0", "--epochs-per-stage", "1", "--out", str(run),
            "--quiet"]
    assert main(argv) == 0
    rep = json.loads((run / "swiftmax.json").read_text())
    assert rep["stages"][0]["layers"] == [0] and 0 < rep["final"] <= 1
    capsys.readouterr()
    assert main(argv) == 0  # everything checkpointed: resumes, trains nothing
    assert "resumed after 1 completed stage" in capsys.readouterr().out

    # one short stage from the per-layer mean init leaves layer 0's P far outside the 8-bit format (its one-hot
    # head): the export check refuses it in one line; written anyway, the bundle carries the tuned β and the warning
    bundle = tmp_path / "bundle"
    capsys.readouterr()
    export = ["export", str(run / "model"), "--out", str(bundle), "--layers", "0", "--quiet"]
    assert main(export) == 3
    assert "layer 0" in capsys.readouterr().err and not bundle.exists()
    assert main([*export, "--allow-low-fidelity"]) == 0
    man = json.loads((bundle / "manifest.json").read_text())
    layer0 = next(e for e in man["layers"] if e["index"] == 0)
    assert layer0["swiftmax"]["beta"] == pytest.approx([rep["stages"][0]["betas"]["0"]] * 12, rel=1e-6)
    assert man["warnings"] and man["warnings"][0].startswith("layer 0")


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["calibrate", "stats", "minilm", "--data", str(tmp_path / "nope.txt"), "--out", str(tmp_path)]) == 4
    assert "no such file" in capsys.readouterr().err  # a missing input file: status 4, as for every command
    assert main(["calibrate", "swiftmax", "minilm", "--data", "pydoc", "--objective", "task", "--out",
                 str(tmp_path)]) == 2
    assert "needs a classification model" in capsys.readouterr().err


def test_main_lr_trains_the_weights_and_resume_restores_them(tmp_path):
    _, train, loss_fn, eval_fn = _distill_setup()
    m1 = tiny_bert()
    init = cal.propose_init(cal.collect_stats(m1, [{k: b[k] for k in ("input_ids", "attention_mask")}
                                                   for b in train]), "mean")
    w0 = m1.encoder.layer[0].attention.self.query.weight.clone()
    kw = dict(layers=[0], epochs_per_stage=1, lr=0.1, main_lr=1e-3, ckpt_dir=tmp_path / "ck", config={"r": 1})
    cal.replace_and_tune(m1, lambda: train, loss_fn, eval_fn, init, **kw)
    w1 = m1.encoder.layer[0].attention.self.query.weight
    assert not torch.equal(w0, w1) and (tmp_path / "ck" / "main_stage00.pt").is_file()
    m2 = tiny_bert()  # a fresh model resumes into the trained one
    cal.replace_and_tune(m2, lambda: train, loss_fn, eval_fn, init, **kw)
    assert torch.equal(m2.encoder.layer[0].attention.self.query.weight, w1)


def test_cli_task_objective_on_a_vit_with_digits(tmp_path, capsys):
    """Labeled images: the digits train split trains, its validation split evaluates (accuracy)."""
    from transformers import ViTConfig, ViTForImageClassification

    from vckattn.host.calibrate import load_data

    d = load_data("digits")
    assert d.kind == "image" and d.items.shape[1:] == (8, 8) and len(d.held_out) > 100
    torch.manual_seed(0)
    cfg = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=8,
                    patch_size=2, num_channels=1, num_labels=10)
    ViTForImageClassification(cfg).save_pretrained(tmp_path / "vit")
    run = tmp_path / "tune"
    assert main(["calibrate", "swiftmax", str(tmp_path / "vit"), "--data", "digits", "--objective", "task",
                 "--train-samples", "64", "--eval-samples", "64", "--epochs-per-stage", "1", "--out", str(run),
                 "--quiet"]) == 0, capsys.readouterr().err
    rep = json.loads((run / "swiftmax.json").read_text())
    assert rep["metric"] == "accuracy" and "validation split" in rep["held_out"]
    assert [s["layers"] for s in rep["stages"]] == [[0], [1]] and 0 <= rep["final"] <= 1


def test_per_head_tuned_model_exports_and_runs(tmp_path, capsys):
    """Per-head β/γ from replace-and-tune reach the bundle head by head (a register set per head; the exporter
    refused them before the kernels had per-head registers) and the layer runs bit-exact."""
    run = tmp_path / "tune"
    assert main(["calibrate", "swiftmax", "minilm", "--data", "pydoc", "--train-samples", "16", "--eval-samples", "8",
                 "--batch-size", "8", "--max-length", "32", "--layers", "0", "--epochs-per-stage", "1", "--per-head",
                 "--out", str(run), "--quiet"]) == 0
    rep = json.loads((run / "swiftmax.json").read_text())
    tuned_b, tuned_g = rep["stages"][0]["betas"]["0"], rep["stages"][0]["gammas"]["0"]
    assert len(tuned_b) == 12 and len(set(tuned_b)) == 12
    bundle = tmp_path / "bundle"
    assert json.loads((run / "model" / "vckattn_tuning.json").read_text())["base"] == "minilm"
    assert main(["export", str(run / "model"), "--out", str(bundle), "--layers", "0", "--max-layers", "1",
                 "--min-fidelity", "-1", "--min-model-fidelity", "-1", "--check-samples", "4", "--quiet"]) == 0
    man = json.loads((bundle / "manifest.json").read_text())
    # the whole-model check compares with the model the folder was tuned from (its main weights may have moved)
    assert man["model_fidelity"]["reference"].startswith("minilm with softmax in every layer (the model")
    assert man["layers"][0]["swiftmax"]["source"] == "checkpoint"
    sm = man["layers"][0]["swiftmax"]
    assert sm["beta"] == pytest.approx(tuned_b, rel=1e-6) and sm["gamma"] == pytest.approx(tuned_g, rel=1e-6)
    assert len(set(sm["registers"]["b_beta"])) == 12
    js = tmp_path / "r.json"
    capsys.readouterr()
    assert main(["run", "--bundle", str(bundle), "--backend", "emu", "--text", "Per-head constants on the device.",
                 "--json", str(js), "--min-cosine", "-1", "--quiet"]) == 0, capsys.readouterr().err
    assert json.loads(js.read_text())["layers"][0]["bit_exact"] is True


def test_replace_and_tune_for_a_p_format_saturates_and_checkpoints_it(tmp_path):
    """``p_max`` (the top of the P format the layers are tuned for): every replaced layer's SwiftMax saturates there
    during and after tuning, the checkpoints record it (a resume with another saturation is refused) and a resumed
    model gets it back."""
    _, train, loss_fn, eval_fn = _distill_setup()
    model = tiny_bert()
    init = cal.propose_init(cal.collect_stats(model, [{k: b[k] for k in ("input_ids", "attention_mask")}
                                                      for b in train]), "mean", per_head=True)
    kw = dict(epochs_per_stage=1, lr=0.1, ckpt_dir=tmp_path, config={"run": "sat"})
    cal.replace_and_tune(model, lambda: train, loss_fn, eval_fn, init, p_max=0.99609375, **kw)
    sm = cal.swiftmax_layers(model)
    assert sorted(sm) == [0, 1] and all(float(n.p_max) == 0.99609375 for n in sm.values())
    assert json.loads((tmp_path / "swiftmax_stage01.json").read_text())["config"]["p_max"] == 0.99609375
    key = "encoder.layer.0.attention.self.vckattn_normalizer.p_max"
    assert float(model.state_dict()[key]) == 0.99609375  # saved with the model (save_pretrained)
    again = tiny_bert()
    cal.replace_and_tune(again, lambda: train, loss_fn, eval_fn, init, p_max=0.99609375, **kw)  # resumes
    assert all(float(n.p_max) == 0.99609375 for n in cal.swiftmax_layers(again).values())
    with pytest.raises(ValueError, match="different configuration"):
        cal.replace_and_tune(tiny_bert(), lambda: train, loss_fn, eval_fn, init, p_max=0.498046875, **kw)
    with pytest.raises(ValueError, match="different configuration"):  # nor without one
        cal.replace_and_tune(tiny_bert(), lambda: train, loss_fn, eval_fn, init, **kw)
    plain = tiny_bert()
    cal.apply_swiftmax(plain, {0: 1.0}, {0: 2.0}, p_max={1: 0.5})
    assert cal.swiftmax_layers(plain)[0].p_max is None


@pytest.mark.slow
def test_tuned_for_the_p_format_exports_without_percentile_and_runs(tmp_path, capsys):
    """`--p-frac 8`: MiniLM layer 0 tuned with its SwiftMax saturating at 255/256 (the one-hot head's rows, which
    unsaturated reach P ≈ 10^7 and break the 8-bit format, see the test above) exports with the default max-abs
    scales, passes the export check, records its saturation and P format, and runs bit-exact on emu against its
    saturating float layer."""
    run = tmp_path / "tune"
    assert main(["calibrate", "swiftmax", "minilm", "--data", "pydoc", "--train-samples", "16", "--eval-samples", "8",
                 "--batch-size", "8", "--max-length", "32", "--layers", "0", "--epochs-per-stage", "1", "--per-head",
                 "--p-frac", "8", "--out", str(run), "--quiet"]) == 0
    assert json.loads((run / "swiftmax.json").read_text())["p_max"] == 0.99609375
    bundle = tmp_path / "bundle"
    capsys.readouterr()
    assert main(["export", str(run / "model"), "--out", str(bundle), "--layers", "0", "--max-layers", "1",
                 "--quiet"]) == 0, capsys.readouterr().err
    layer0 = json.loads((bundle / "manifest.json").read_text())["layers"][0]
    assert layer0["p_frac"] == 8 and layer0["swiftmax"]["p_max"] == 0.99609375
    assert layer0["fidelity"]["cosine"] > 0.95 and min(layer0["fidelity"]["head_cosine"]) > 0.9, layer0["fidelity"]
    js = tmp_path / "r.json"
    assert main(["run", "--bundle", str(bundle), "--backend", "emu", "--text", "Saturating SwiftMax on the device.",
                 "--json", str(js), "--quiet"]) == 0, capsys.readouterr().err
    rl = json.loads(js.read_text())["layers"][0]
    assert rl["bit_exact"] is True and rl["cosine"] > 0.95, rl

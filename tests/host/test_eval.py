"""``vckattn eval``: a whole MiniLM with a 2-layer bundle's attention on the emu backend, scored end to end."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from vckattn.host import eval as ev
from vckattn.host import run_common, scoring
from vckattn.host.cli import main

N_SENTENCES = 8


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    from vckattn.host.export import export_checkpoint
    from vckattn.host.textdata import real_sentences

    out = tmp_path_factory.mktemp("eval") / "b"
    export_checkpoint("minilm", out, real_sentences(12), normalizer="swiftmax", swiftmax_init="max", max_layers=2,
                      progress=False, swiftmax_per_head=False, min_model_fidelity=-1, check_samples=8)  # untuned
    return out


@pytest.fixture(scope="module")
def softmax_bundle(tmp_path_factory) -> Path:
    from vckattn.host.export import export_checkpoint
    from vckattn.host.textdata import real_sentences

    out = tmp_path_factory.mktemp("eval-softmax") / "b"
    export_checkpoint("minilm", out, real_sentences(12), normalizer="softmax", max_layers=2, progress=False)
    return out


@pytest.fixture(scope="module")
def cli_report(bundle, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("eval-out")
    rc = main(["eval", "--bundle", str(bundle), "--backend", "emu", "--sentences", str(N_SENTENCES), "--quiet",
               "--json", str(out / "r.json"), "--plots", str(out / "plots")])
    assert rc == 0
    return json.loads((out / "r.json").read_text()), out / "plots"


def _metric_with(bundle: Path, runner_of, corrupt: bool = False) -> float:
    """The backend metric recomputed here: a fresh model, the runner ``runner_of(b, qls, keep)`` in eval's wrapper
    (the bundle's layers narrowed to engine_small_dual's scores, as its device runs them)."""
    from vckattn.golden.quant_attention import narrow_layer
    from vckattn.host.export import to_quant_layer
    from vckattn.hw.design.manifest import load_manifest

    b, layers, m = run_common.load_inputs(bundle, None, None, False)
    bits = int(load_manifest("engine_small_dual").data["engine"]["score_bits"])
    qls = {i: narrow_layer(to_quant_layer(b, i), bits) for i in layers}
    if corrupt:  # layer 1's output requantization multiplier with the wrong sign
        rq = qls[1].rq_a
        qls[1] = dataclasses.replace(qls[1], rq_a=dataclasses.replace(rq, mult=-rq.mult))
    data = scoring.held_out(m, N_SENTENCES)
    with scoring.stages_on(m, "attention", layers, None, {}):
        ref = scoring.embeddings(m, data)
    with scoring.stages_on(m, "attention", layers, runner_of(b, qls, data.keep), {}):
        got = scoring.embeddings(m, data)
    return scoring.cosine_to(got, ref)["mean_cosine"]


def test_json_shape_and_plots(cli_report):
    r, plots = cli_report
    assert r["report"] == "eval" and r["backend"] == "emu" and r["layers"] == [0, 1]
    assert r["sentences"]["count"] == N_SENTENCES and r["sentences"]["tokens"] > N_SENTENCES
    assert set(r["end_to_end"]) == {"float_softmax", "float_swiftmax", "backend"}
    for v in r["end_to_end"].values():
        assert set(v) == {"mean_cosine", "min_cosine"} and -1.0 <= v["min_cosine"] <= v["mean_cosine"] <= 1.0 + 1e-12
    assert r["end_to_end"]["float_softmax"]["mean_cosine"] == pytest.approx(1.0, abs=1e-12)
    # max-init SwiftMax is far from softmax; the integer path tracks the float SwiftMax model
    sm, be = r["end_to_end"]["float_swiftmax"]["mean_cosine"], r["end_to_end"]["backend"]["mean_cosine"]
    assert sm < 0.99 and abs(be - sm) < 0.02
    assert [p["layer"] for p in r["per_layer"]] == [0, 1]
    for p in r["per_layer"]:
        assert p["normalizer"] == "swiftmax" and p["beta"] is not None and p["tiles"] > 0
        for k in ("backend_vs_float_layer", "backend_vs_softmax_model", "float_swiftmax_vs_softmax_model"):
            assert set(p[k]) == {"max_abs_error", "max_rel_error", "cosine"}
        assert p["backend_vs_float_layer"]["cosine"] > 0.99
    for name in ("layers.png", "end_to_end.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_backend_metric_equals_golden_integer_model(bundle, cli_report):
    r, _ = cli_report
    golden = _metric_with(bundle, lambda _b, qls, keep: scoring.golden_runner(qls, keep))
    assert r["end_to_end"]["backend"]["mean_cosine"] == pytest.approx(golden, abs=1e-12)


def test_softmax_bundle_and_a_corrupted_register(softmax_bundle):
    """A softmax bundle: no SwiftMax layer, so the float SwiftMax model is the softmax model; the integer
    softmax layers on emu keep the embeddings; one register wrong on the device path and the metric falls."""
    from vckattn.host.backends.staged import StagedDevice
    from vckattn.hw.design.manifest import load_manifest

    r = ev.evaluate(softmax_bundle, "emu", n_sentences=N_SENTENCES, progress=False, manifest_path="engine_small_dual")
    assert r["end_to_end"]["float_swiftmax"]["mean_cosine"] == pytest.approx(1.0, abs=1e-12)
    good = r["end_to_end"]["backend"]["mean_cosine"]
    assert good > 0.999
    assert all(p["normalizer"] == "softmax" and p["beta"] is None for p in r["per_layer"])
    device = StagedDevice(load_manifest("engine_small_dual"), "emu")
    with device:
        broken = _metric_with(softmax_bundle, lambda b, qls, keep: ev.device_runner(device, b, qls, keep, {}),
                              corrupt=True)
    assert broken < good - 0.1


@pytest.mark.parametrize("argv, needle, status", [
    (["--layers", "5"], "--layers: no layer(s) [5]", 2),
    (["--bundle", "/nonexistent/bundle"], "/nonexistent/bundle", 5),  # a bad bundle
])
def test_user_errors_are_one_line(bundle, capsys, argv, needle, status):
    args = ["eval", "--bundle", str(bundle), "--quiet", *argv]
    assert main(args) == status
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_help_has_an_example(capsys):
    assert main(["eval", "--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"example:\s+vckattn export minilm", out) and "--manifest" in out


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> tuple[Path, Path]:
    """A MiniLM sentiment-classifier checkpoint (BertForSequenceClassification; its head fitted for a few steps
    on rotten-tomatoes train snippets so that its predictions mean something) and its 2-layer softmax bundle."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    from vckattn.golden.pretrained import minilm_dir
    from vckattn.host import datasets
    from vckattn.host.export import export_checkpoint
    from vckattn.host.textdata import real_sentences

    folder = tmp_path_factory.mktemp("clf") / "model"
    tok = AutoTokenizer.from_pretrained(minilm_dir())
    torch.manual_seed(0)
    model = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    train = datasets.rotten_tomatoes(0).train
    enc = tok(list(train.x)[:64], padding=True, truncation=True, max_length=48, return_tensors="pt")
    opt = torch.optim.Adam(model.classifier.parameters(), lr=1e-2)
    for _ in range(5):
        loss = model(**enc, labels=torch.as_tensor(train.y[:64])).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    bundle = folder.parent / "b"
    export_checkpoint(folder, bundle, real_sentences(12), normalizer="softmax", max_layers=2, progress=False)
    return folder, bundle


def test_task_accuracy_of_a_classifier(classifier, tmp_path, capsys):
    """--task rotten-tomatoes: accuracy of the softmax model (computed here independently), of the float
    SwiftMax model and of the bundle on the backend, with agreement with the softmax model's predictions."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    from vckattn.host import datasets

    folder, bundle = classifier
    js = tmp_path / "t.json"
    rc = main(["eval", "--bundle", str(bundle), "--manifest", "engine_small_dual", "--task", "rotten-tomatoes",
               "--samples", "48", "--quiet",
               "--json", str(js), "--plots", str(tmp_path / "plots")])
    assert rc == 0, capsys.readouterr().err
    r = json.loads(js.read_text())
    assert r["task"] == "rotten-tomatoes" and r["sentences"]["count"] == 48
    e = r["end_to_end"]
    assert set(e["backend"]) == {"accuracy", "agreement"} and e["float_softmax"]["agreement"] == 1.0
    test = datasets.rotten_tomatoes(0).test
    tok = AutoTokenizer.from_pretrained(folder)
    model = BertForSequenceClassification.from_pretrained(folder).eval()
    enc = tok(list(test.x)[:48], padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        pred = model(**enc).logits.argmax(-1).numpy()
    assert e["float_softmax"]["accuracy"] == pytest.approx(float(np.mean(pred == test.y[:48])), abs=1e-12)
    assert e["float_swiftmax"] == e["float_softmax"]  # a softmax bundle: no SwiftMax layer
    assert e["backend"]["agreement"] >= 0.9  # the integer softmax layers keep the predictions
    assert (tmp_path / "plots" / "end_to_end.png").stat().st_size > 1000
    assert "accuracy" in capsys.readouterr().out


def test_task_needs_a_classifier_and_reference_must_match(bundle, tmp_path, capsys):
    from hf_tiny import tiny_bert
    from transformers import AutoTokenizer

    from vckattn.golden.pretrained import minilm_dir

    assert main(["eval", "--bundle", str(bundle), "--task", "rotten-tomatoes", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no sequence-classification head" in err and err.count("\n") == 1
    other = tmp_path / "tiny"
    tiny_bert().float().save_pretrained(other)
    AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(other)
    capsys.readouterr()
    assert main(["eval", "--bundle", str(bundle), "--reference", str(other), "--quiet"]) == 4  # as --checkpoint
    err = capsys.readouterr().err
    assert f"--reference {other}" in err and "2 layers" in err and "6 layers" in err and err.count("\n") == 1


def test_reference_checkpoint_is_the_softmax_model(bundle):
    """--reference minilm (the bundle's own source) scores the same as the default reference."""
    a = ev.evaluate(bundle, "emu", n_sentences=N_SENTENCES, progress=False)
    b = ev.evaluate(bundle, "emu", n_sentences=N_SENTENCES, progress=False, reference="minilm")
    for k, v in a["end_to_end"].items():
        assert b["end_to_end"][k] == pytest.approx(v, abs=1e-9), k
    assert b["reference"] == "minilm"

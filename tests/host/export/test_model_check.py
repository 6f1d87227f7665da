"""The whole-model export check (host/export/model_check.py): the bundle's model, every exported attention layer
integer, scored against the softmax model on held-out inputs; recorded in the bundle (schema 3), shown by `inspect`
and `run`; below the threshold the export refuses naming the exact commands that fix it (exit 3), unless
--allow-low-fidelity. And `run`'s default threshold and advice agree with the export's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vckattn.golden.errors import EXIT_FIDELITY, EXIT_INPUT
from vckattn.host.bundle import load_bundle
from vckattn.host.cli import main
from vckattn.host.export.fidelity import fix_for
from vckattn.host.export.model_check import DEFAULT_MIN_MODEL_FIDELITY
from vckattn.host.textdata import eval_sentences, real_sentences

TEXT = "Attention on the Versal array."
N = 8  # held-out sentences of the check in these tests (the command's default is 32)


def _export(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["export", *argv])
    return rc, capsys.readouterr().err


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    """MiniLM untuned SwiftMax in all six layers (the default export: refused, then written with
    --allow-low-fidelity; its first two layers alone keep the model) and the online-softmax baseline of the first two
    layers (passes)."""
    from vckattn.host.export import export_checkpoint

    root = tmp_path_factory.mktemp("model_check")
    out = {"swiftmax": root / "swiftmax", "softmax": root / "softmax"}
    export_checkpoint("minilm", out["softmax"], real_sentences(12), normalizer="softmax", max_layers=2,
                      progress=False, check_samples=N)
    # built here, not by the test of the refusal, so that every test of the module has it under any test order
    # or pytest-xdist distribution
    rc = main(["export", "minilm", "--out", str(out["swiftmax"]), "--max-layers", "6", "--check-samples", str(N),
               "--quiet", "--allow-low-fidelity"])
    assert rc == 0
    return out | {"root": root}


def test_untuned_export_is_refused_with_the_exact_fix(bundles, capsys):
    """The README's old first example (`export minilm`, untuned per-head `max` SwiftMax): every integer layer follows
    its float layer, but the model is not kept. One line, exit 3, nothing written; the fix is the tuning command
    with the user's own model and paths, then the export of the tuned model; never a default as a fix."""
    out = bundles["root"] / "refused"
    rc, err = _export(capsys, "minilm", "--out", str(out), "--max-layers", "6", "--check-samples", str(N), "--quiet")
    assert rc == EXIT_FIDELITY, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "the whole model with its 6 integer attention layers scores" in err and "embedding cosine" in err
    assert f"below {DEFAULT_MIN_MODEL_FIDELITY:g}" in err and "float SwiftMax model scores" in err
    assert (f"`vckattn calibrate swiftmax minilm --data pydoc --out {out}.tune --per-head --init mean "
            "--epochs-per-stage 3 --main-lr 2e-5 --p-frac 8`") in err
    assert f"`vckattn export {out}.tune/model --out {out} --overwrite --calib-method percentile --percentile 99.9`" \
        in err
    assert "--swiftmax-init" not in err  # `max` is the default: never advised
    assert not out.exists()

    # the same export with --allow-low-fidelity (the fixture's bundle) is written, the low figure recorded
    man = load_bundle(bundles["swiftmax"]).manifest
    fid = man["model_fidelity"]
    assert man["schema_version"] == 4 and fid["metric"] == "embedding_cosine" and fid["layers"] == list(range(6))
    assert fid["score"] < fid["threshold"] == DEFAULT_MIN_MODEL_FIDELITY and fid["samples"] == N
    assert fid["float_swiftmax"] is not None and fid["float_swiftmax"] < fid["threshold"]
    assert fid["min"] <= fid["score"]
    (warning,) = man["warnings"]  # the per-layer check passes (`max`): only the whole model is recorded as low
    assert warning.startswith("the whole model")
    assert all(e["swiftmax"]["source"] == "calibration" for e in man["layers"])


def test_the_recorded_score_is_what_eval_measures(bundles):
    """An independent path to the same figure: `vckattn eval` on emu (the bundle read back, one launch a layer
    through the engine's functional model, 8-bit scores as every committed design) on the same held-out sentences
    gives the score the export recorded (the export scores the integer
    layers with float64 weight scales, the bundle stores float32 ones, from which run and eval re-derive the
    registers: a rounding of a derived multiplier can flip, so the two agree to 5e-5 -- 1.9e-5 apart measured on
    this untuned SwiftMax bundle, on CPUs whose BLAS rounds the float path differently)."""
    from vckattn.host import eval as ev

    for name in ("softmax", "swiftmax"):
        fid = load_bundle(bundles[name]).manifest["model_fidelity"]
        r = ev.evaluate(bundles[name], "emu", n_sentences=N, progress=False, manifest_path="engine_small_dual")
        assert r["end_to_end"]["backend"]["mean_cosine"] == pytest.approx(fid["score"], abs=5e-5), name
        if fid["float_swiftmax"] is not None:
            assert r["end_to_end"]["float_swiftmax"]["mean_cosine"] == pytest.approx(fid["float_swiftmax"], abs=1e-9)
    soft = load_bundle(bundles["softmax"]).manifest
    assert soft["model_fidelity"]["score"] > 0.99 and "warnings" not in soft
    assert soft["model_fidelity"]["float_swiftmax"] is None  # no SwiftMax layer


def test_held_out_inputs_are_not_the_calibration_inputs(tmp_path, capsys):
    """The check's default sentences are the evaluation set; a calibration sentence is dropped from the held-out
    ones, and a check on nothing but calibration text is refused."""
    from vckattn.host.export import load_model, resolve_checkpoint
    from vckattn.host.export.model_check import check_data

    held = eval_sentences(N)
    m = load_model(resolve_checkpoint("minilm"), progress=False)
    cd = check_data(m, None, held[:3], 128, N)
    assert cd.data.sentences == eval_sentences(N + 3)[3:] and not set(cd.data.sentences) & set(held[:3])
    assert cd.data.sentences[0] not in real_sentences(32)  # the default calibration text
    calib = tmp_path / "calib.txt"
    calib.write_text("\n".join(held) + "\n", encoding="utf-8")
    rc, err = _export(capsys, "minilm", "--out", str(tmp_path / "b"), "--calib", str(calib), "--check-data",
                      str(calib), "--normalizer", "softmax", "--max-layers", "1", "--quiet")
    assert rc == EXIT_INPUT and "every sentence is also a calibration sentence" in err and err.count("\n") == 1
    assert not (tmp_path / "b").exists()


def test_inspect_and_run_show_the_whole_model_figure(bundles, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    capsys.readouterr()
    assert main(["inspect", str(bundles["swiftmax"])]) == 0
    out = capsys.readouterr().out
    assert "whole model (export check): embedding cosine" in out and "BELOW" in out and "threshold 0.9" in out
    assert "SwiftMax per head, untuned" in out
    js = tmp_path / "r.json"
    assert main(["run", "--bundle", str(bundles["softmax"]), "--manifest", "engine_small_dual", "--text", TEXT,
                 "--quiet", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    fid = load_bundle(bundles["softmax"]).manifest["model_fidelity"]
    assert f"embedding cosine {fid['score']:.4f}" in out and "passes" in out
    assert json.loads(js.read_text())["model_fidelity"] == fid
    assert main(["inspect", str(bundles["softmax"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_fidelity"] == fid


def test_run_holds_a_layer_to_the_export_checks_threshold(minilm_heads_bundle, tmp_path, capsys):
    """`run`'s default --min-cosine is the threshold the export held the layer to (recorded in the bundle): a per-head
    bundle that passed the export check runs an ordinary sentence with exit 0. When a layer falls below a threshold,
    the advice fits the bundle: untuned constants are to be tuned (no `--swiftmax-init max`, which such a bundle
    may already use)."""
    js = tmp_path / "r.json"
    capsys.readouterr()
    assert main(["run", "--bundle", str(minilm_heads_bundle), "--text", TEXT, "--quiet", "--json", str(js)]) == 0
    rows = json.loads(js.read_text())["layers"]
    man = load_bundle(minilm_heads_bundle).manifest
    assert [r["threshold"] for r in rows] == [e["fidelity"]["threshold"] for e in man["layers"]]
    assert all(r["beta_source"] == "calibration" and r["normalizer"] == "swiftmax" for r in rows)
    capsys.readouterr()
    assert main(["run", "--bundle", str(minilm_heads_bundle), "--text", TEXT, "--quiet", "--min-cosine",
                 "0.99999"]) == EXIT_FIDELITY
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "below --min-cosine 0.99999" in err and "tune β/γ" in err
    assert "--swiftmax-init" not in err


def test_advice_never_names_a_setting_in_use():
    """fix_for: tuned constants get percentile scales (never an initialisation); percentile scales in use are not
    advised again; the `max` initialisation is advised only when another one is in use."""
    tuned = fix_for("swiftmax", True, "TUNE", init="mean", method="minmax")
    assert "--calib-method percentile --percentile 99.9" in tuned and "--swiftmax-init" not in tuned
    tuned_pct = fix_for("swiftmax", True, "TUNE", method="percentile", percentile=99.9)
    assert "--calib-method" not in tuned_pct and "--calib FILE" in tuned_pct
    assert "--swiftmax-init max" in fix_for("swiftmax", False, "TUNE", init="mean")
    assert "--swiftmax-init" not in fix_for("swiftmax", False, "TUNE", init="max") and "TUNE" in \
        fix_for("swiftmax", False, "TUNE", init="max")
    assert "--calib-method" not in fix_for("softmax", None, method="percentile", percentile=99.0)
    assert "--calib-method percentile" in fix_for("softmax", None, method="minmax")


def test_a_classifier_is_checked_by_agreement(tmp_path, capsys):
    """A sequence classifier's whole model is scored by the agreement of its predicted class with the softmax
    model's, on the held-out sentences: a share of the N inputs, no worst-input cosine."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from vckattn.golden.pretrained import minilm_dir

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, num_labels=3)
    BertForSequenceClassification(cfg).eval().save_pretrained(tmp_path / "clf")
    AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(tmp_path / "clf")
    rc, err = _export(capsys, str(tmp_path / "clf"), "--out", str(tmp_path / "b"), "--normalizer", "softmax",
                      "--check-samples", str(N), "--min-model-fidelity", "-1", "--quiet")
    assert rc == 0, err
    fid = load_bundle(tmp_path / "b").manifest["model_fidelity"]
    assert fid["metric"] == "agreement" and fid["min"] is None and fid["samples"] == N
    assert fid["score"] in {k / N for k in range(N + 1)}
    assert np.isfinite(fid["score"]) and "held-out reference-manual sentences" in fid["data"]
    rc, err = _export(capsys, str(tmp_path / "clf"), "--out", str(tmp_path / "r"), "--normalizer", "softmax",
                      "--check-samples", str(N), "--min-model-fidelity", "1.01", "--quiet")
    assert rc == EXIT_FIDELITY and "--check-data rotten-tomatoes" in err, err  # the labeled check named


def test_refusal_tunes_for_the_p_format_when_tuned_constants_were_not():
    """fix_command: a tuned checkpoint whose float SwiftMax model keeps the model but was not tuned for the kernel's
    P format (no p_max) gets the tuning for that format (--p-frac 8, from the original model), not percentile
    scales; tuned for it, the integer path's fix stays percentile scales."""
    from vckattn.host.export.model_check import fix_command

    unsat = fix_command("T/model", "B", "D", tuned=True, float_low=False, has_swiftmax=True, percentile_used=True,
                        base="S", unsaturated=True)
    assert "8-bit P format" in unsat and "vckattn calibrate swiftmax S --data D" in unsat and "--p-frac 8" in unsat
    sat = fix_command("T/model", "B", "D", tuned=True, float_low=False, has_swiftmax=True, percentile_used=False,
                      base="S")
    assert "--p-frac" not in sat and "--calib-method percentile --percentile 99.9" in sat


def test_a_classifier_on_labeled_inputs_is_checked_by_the_accuracy_it_keeps(tmp_path, capsys):
    """With labeled held-out inputs (--check-data rotten-tomatoes) a classifier is scored by the accuracy it keeps
    against the softmax model: 1 - max(0, softmax accuracy - bundle accuracy); the softmax model's accuracy is the
    one Hugging Face's own forward pass gives on the same snippets and labels."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from vckattn.golden.pretrained import minilm_dir
    from vckattn.host import datasets

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, num_labels=2)
    clf = BertForSequenceClassification(cfg).eval()
    clf.save_pretrained(tmp_path / "clf")
    tok = AutoTokenizer.from_pretrained(minilm_dir())
    tok.save_pretrained(tmp_path / "clf")
    rc, err = _export(capsys, str(tmp_path / "clf"), "--out", str(tmp_path / "b"), "--check-data", "rotten-tomatoes",
                      "--check-samples", str(N), "--min-model-fidelity", "-1", "--allow-low-fidelity", "--quiet")
    assert rc == 0, err
    fid = load_bundle(tmp_path / "b").manifest["model_fidelity"]
    a = fid["accuracy"]
    assert fid["metric"] == "accuracy" and fid["samples"] == N and "rotten-tomatoes test snippets" in fid["data"]
    assert fid["score"] == pytest.approx(1 - max(0.0, a["softmax"] - a["bundle"]))
    assert fid["float_swiftmax"] == pytest.approx(1 - max(0.0, a["softmax"] - a["float_swiftmax"]))
    test = datasets.rotten_tomatoes(0).test  # the default calibration text (CPython's docs) holds none of them
    enc = tok(list(test.x[:N]), padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        pred = clf(**enc).logits.argmax(-1).numpy()
    assert a["softmax"] == pytest.approx(float((pred == np.asarray(test.y[:N])).mean()))


def test_a_classifier_refusal_names_accuracies_and_the_task_recipe():
    """The refusal of a classifier checked on labeled inputs gives both accuracies, and its tuning fix tunes on that
    data set with the task objective and the P format (not on the calibration text)."""
    from vckattn.host.export.model_check import fix_command, model_problem

    fix = fix_command("S", "B", "calib.txt", tuned=False, float_low=True, has_swiftmax=True, percentile_used=False,
                      task="rotten-tomatoes")
    assert "vckattn calibrate swiftmax S --data rotten-tomatoes --out B.tune --objective task" in fix
    assert "--p-frac 8" in fix and "calib.txt" not in fix
    fid = {"metric": "accuracy", "score": 0.93, "min": None, "float_swiftmax": 0.94, "threshold": 0.97,
           "samples": 256, "data": "256 rotten-tomatoes test snippets", "layers": [0, 1],
           "accuracy": {"softmax": 0.78, "bundle": 0.71, "float_swiftmax": 0.72, "agreement": 0.8}}
    line = model_problem(fid, fix)
    assert "accuracy 0.710 on 256 rotten-tomatoes test snippets against the softmax model's 0.780" in line
    assert "accuracy kept 0.930, below 0.97" in line
    assert model_problem(fid | {"score": 1.0}, fix) is None

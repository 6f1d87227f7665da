"""`vckattn calibrate hccs` and `calibrate swiftmax --init consmax`: SwiftMax's peers through the CLI, on a tiny
random 2-layer classifier (what is checked is the flow, not an accuracy)."""

from __future__ import annotations

import json

import pytest
import torch

from vckattn.golden.normalizers import hccs_check
from vckattn.host.cli import main


def test_hccs_calibrates_per_head_then_retrains_the_model(tiny_classifier, tmp_path, capsys):
    out = tmp_path / "hccs"
    assert main(["calibrate", "hccs", str(tiny_classifier), "--data", "rotten-tomatoes", "--train-samples", "32",
                 "--eval-samples", "16", "--calib-samples", "16", "--batch-size", "8", "--max-length", "32",
                 "--epochs", "2", "--main-lr", "1e-3", "--device", "cpu", "--out", str(out), "--quiet"]) == 0
    assert "HCCS" in capsys.readouterr().out
    r = json.loads((out / "hccs.json").read_text())
    assert r["samples"] == {"calibration": 16, "train": 32, "held_out": 16}
    assert len(r["metrics"]) == 2 and r["final"] == r["metrics"][-1]
    assert len(r["score_steps"]) == 2 and all(s > 0 for s in r["score_steps"])
    for i in range(2):  # one constant set per head, each one the kernel holds for these rows
        assert len(r["hccs"]["B"][i]) == len(r["hccs"]["S"][i]) == len(r["hccs"]["Dmax"][i]) == 4
        hccs_check(torch.tensor(r["hccs"]["B"][i]), torch.tensor(r["hccs"]["S"][i]),
                   torch.tensor(r["hccs"]["Dmax"][i]), r["cols"])
    # the retraining trained the main weights
    from safetensors.torch import load_file

    before, after = load_file(tiny_classifier / "model.safetensors"), load_file(out / "model" / "model.safetensors")
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(before[key], after[key])


def test_consmax_init_starts_every_head_from_the_fixed_constants(tiny_classifier, tmp_path):
    out = tmp_path / "consmax"
    assert main(["calibrate", "swiftmax", str(tiny_classifier), "--data", "rotten-tomatoes", "--objective", "task",
                 "--init", "consmax", "--one-shot", "--per-head", "--p-frac", "8", "--train-samples", "16",
                 "--eval-samples", "8", "--batch-size", "8", "--max-length", "32", "--epochs-per-stage", "1",
                 "--lr", "1e-9", "--device", "cpu", "--out", str(out), "--quiet"]) == 0
    r = json.loads((out / "swiftmax.json").read_text())
    stage = r["stages"][0]
    assert stage["layers"] == [0, 1]  # one shot: all layers in one stage
    for i in ("0", "1"):  # lr 1e-9: still where ConSmax starts
        assert stage["betas"][i] == pytest.approx([2.5] * 4, abs=1e-6)
        assert stage["gammas"][i] == pytest.approx([100.0] * 4, rel=1e-6)


def test_help_documents_the_peers(capsys):
    assert main(["calibrate", "hccs", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--calib-samples", "--epochs", "--main-lr", "aie4ml", "row maximum"):
        assert flag in text
    assert main(["calibrate", "swiftmax", "--help"]) == 0
    assert "consmax" in capsys.readouterr().out


def test_hccs_needs_a_learning_rate(tiny_classifier, tmp_path, capsys):
    rc = main(["calibrate", "hccs", str(tiny_classifier), "--data", "rotten-tomatoes", "--main-lr", "0",
               "--out", str(tmp_path / "x"), "--quiet"])
    assert rc != 0 and "--main-lr" in capsys.readouterr().err

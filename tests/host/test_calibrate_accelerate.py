"""`vckattn calibrate` under Hugging Face accelerate: a data-parallel run (two CPU processes through
``accelerate launch``) tunes the same β/γ as one process on the same global batches; device and
mixed-precision errors are one line; ``--help`` documents the flags and the launch command.

Tolerance of the comparison: each process computes its half of every global batch (per-process batch =
``--batch-size`` / 2) and the gradients of β and log γ are averaged over the two processes, which is the
global batch's mean gradient up to float32 rounding: the halves are padded to their own lengths (other
matmul shapes, so other reduction orders) and the mean is taken as (a + b)/2 instead of one sum. Those
differences are ~1e-7 relative per step; Adam normalizes each step (|Δ| ≈ lr), so after the few steps
here the parameters differ by ~1e-6 relative; rtol 1e-5 leaves a margin of 10 (measured: ≤ 4e-7 for
the task objective below). The tiny model has no dropout (dropout masks would differ between the runs).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vckattn
from vckattn.host.cli import main

RTOL = 1e-5  # float32 reduction order only (module docstring)


def _argv(model: Path, out: Path) -> list[str]:
    return ["calibrate", "swiftmax", str(model), "--data", "rotten-tomatoes", "--objective", "task",
            "--train-samples", "32", "--eval-samples", "16", "--batch-size", "8", "--max-length", "32",
            "--epochs-per-stage", "2", "--lr", "0.1", "--device", "cpu", "--out", str(out), "--quiet"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(args: list[str], processes: int = 2) -> subprocess.CompletedProcess:
    """``accelerate launch --multi_gpu --num_processes N -m vckattn ARGS`` with this interpreter and
    this checkout's package (torchrun under the hood; on a machine without GPUs the processes use gloo)."""
    root = str(Path(vckattn.__file__).parent.parent)  # the folder that holds the `vckattn` package
    env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
                        "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(_free_port()), "-m", "vckattn", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def test_data_parallel_two_processes_tune_what_one_process_tunes(tiny_classifier, tmp_path):
    one = tmp_path / "one"
    assert main(_argv(tiny_classifier, one)) == 0
    two = tmp_path / "two"
    res = _launch(_argv(tiny_classifier, two))
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("data parallel over 2 processes") == 1  # only the main process prints
    r1, r2 = (json.loads((d / "swiftmax.json").read_text()) for d in (one, two))
    assert r1["processes"] == 1 and r2["processes"] == 2
    assert [s["layers"] for s in r2["stages"]] == [[0], [1]]
    for s1, s2 in zip(r1["stages"], r2["stages"], strict=True):
        for key in ("betas", "gammas"):
            assert s2[key].keys() == s1[key].keys()
            for layer, v in s1[key].items():
                assert s2[key][layer] == pytest.approx(v, rel=RTOL), (s1["stage"], key, layer)
        assert s2["metrics"] == pytest.approx(s1["metrics"], abs=1e-9)  # accuracy: the same predictions
        assert s2["losses"] == pytest.approx(s1["losses"], rel=RTOL)
    # β actually moved (the comparison is not of two untouched initialisations)
    init_beta = json.loads((one / "checkpoints" / "swiftmax_stage00.json").read_text())["log"]["betas"]["0"]
    assert r1["stages"][-1]["betas"]["0"] != init_beta
    assert sorted(p.name for p in (two / "checkpoints").iterdir()) == ["swiftmax_stage00.json",
                                                                        "swiftmax_stage01.json"]
    assert (two / "model" / "config.json").is_file()

    # resume under the launcher: everything checkpointed, nothing trains, the same β/γ
    res = _launch(_argv(tiny_classifier, two))
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("resumed after 2 completed stage(s)") == 1
    r3 = json.loads((two / "swiftmax.json").read_text())
    assert r3["stages"] == r2["stages"] and r3["resumed_stages"] == 2


def test_device_and_precision_errors_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    base = ["calibrate", "stats", "minilm", "--data", "pydoc", "--out", str(tmp_path)]
    assert main(base + ["--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--device cuda: no CUDA device" in err and len(err.splitlines()) == 1
    assert main(base + ["--device", "cpu", "--mixed-precision", "fp16"]) == 2
    err = capsys.readouterr().err.strip()
    assert "fp16 needs CUDA" in err and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_help_documents_the_flags_and_the_launch_command(capsys):
    for step in ("stats", "swiftmax"):
        assert main(["calibrate", step, "--help"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "--device {cpu,cuda,auto}" in out and "--mixed-precision {no,fp16,bf16}" in out
        assert "accelerate launch --multi_gpu --num_processes 2 -m vckattn calibrate swiftmax" in out

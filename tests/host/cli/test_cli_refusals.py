"""Inputs the toolkit cannot run right are refused before any work, in one line, with the status of their kind
(golden/errors.py EXIT_CODES), and never as an internal error or a traceback: a missing or empty tokenizer, a ViT
given text, shapes no committed build runs, defaults beyond a model's positions, a checkpoint that is not the
bundle's source, NaN/Inf weights, sequence lengths beyond the design space, unwritable outputs and build folders,
undecodable text, a crash while reporting a crash. Also: written files get the user's umask, and progress bars
show only on a terminal."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from vckattn.golden.errors import EXIT_BUNDLE, EXIT_INPUT, EXIT_INTERNAL, EXIT_USAGE
from vckattn.host.cli import main

TEXT = "Attention on the Versal array."
DUAL = ("--manifest", "engine_small_dual")  # a build with online softmax: these bundles are softmax exports
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line(err: str, status: int, rc: int) -> None:
    assert rc == status, (rc, err)
    assert err.count("\n") == 1 and err.startswith("vckattn"), err
    assert "Traceback" not in err and "internal error" not in err and "Warning" not in err, err


def _tiny_bert(folder: Path, positions: int = 512, tokenizer: bool = True, classes: int | None = None) -> Path:
    """A randomly initialised BERT of MiniLM's vocabulary (head size 32) saved with `save_pretrained`; with
    MiniLM's tokenizer files unless ``tokenizer`` is False."""
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    from vckattn.golden.pretrained import minilm_dir

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=positions, num_labels=classes or 2)
    (BertForSequenceClassification(cfg) if classes else BertModel(cfg)).eval().save_pretrained(folder)
    if tokenizer:
        for f in TOKENIZER_FILES:
            if (minilm_dir() / f).exists():
                shutil.copy(minilm_dir() / f, folder / f)
    return folder


@pytest.fixture(scope="module")
def softmax_bundle(tmp_path_factory) -> Path:
    from vckattn.host.export import export_checkpoint
    from vckattn.host.textdata import real_sentences

    out = tmp_path_factory.mktemp("refusals") / "minilm"
    return export_checkpoint("minilm", out, real_sentences(4), normalizer="softmax", max_layers=1, progress=False,
                             check_samples=4)


# ------------------------------------------------------------------------------------------- the tokenizer


def test_a_folder_without_tokenizer_files_is_refused(tmp_path, capsys):
    """transformers 5 builds an empty vocabulary for a `save_pretrained` BERT folder without tokenizer files: every
    word becomes [UNK]. export, calibrate, and run/eval of a bundle whose source lost its tokenizer refuse it."""
    bare = _tiny_bert(tmp_path / "bare", tokenizer=False)
    rc, _, err = _cli(capsys, "export", str(bare), "--out", str(tmp_path / "b"), "--normalizer", "softmax", "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "maps 100% of the words" in err and "[UNK]" in err and "tokenizer files" in err
    assert not (tmp_path / "b").exists()
    rc, _, err = _cli(capsys, "calibrate", "stats", str(bare), "--data", "pydoc", "--out", str(tmp_path / "s"),
                      "--samples", "4", "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "[UNK]" in err

    good = _tiny_bert(tmp_path / "good")
    rc, _, err = _cli(capsys, "export", str(good), "--out", str(tmp_path / "g"), "--normalizer", "softmax",
                      "--check-samples", "4", "--min-fidelity", "-1", "--min-model-fidelity", "-1", "--quiet")
    assert rc == 0, err
    for f in TOKENIZER_FILES:
        (good / f).unlink(missing_ok=True)  # the weights (and so the recorded hash) are unchanged
    rc, _, err = _cli(capsys, "run", "--bundle", str(tmp_path / "g"), *DUAL, "--text", TEXT, "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "[UNK]" in err
    rc, _, err = _cli(capsys, "eval", "--bundle", str(tmp_path / "g"), *DUAL, "--sentences", "2", "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "[UNK]" in err


def test_unknown_share_of_a_real_tokenizer_is_zero():
    from transformers import AutoTokenizer

    from vckattn.golden.pretrained import minilm_dir
    from vckattn.host.textdata import real_sentences, unknown_share

    assert unknown_share(AutoTokenizer.from_pretrained(minilm_dir()), real_sentences(32)) == 0.0


# ------------------------------------------------------------------------------------------- ViT and shapes


def _vit(folder: Path, heads: int, classes: int | None = 10) -> Path:
    from transformers import ViTConfig, ViTForImageClassification, ViTModel

    torch.manual_seed(0)
    cfg = ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=heads, intermediate_size=128,
                    image_size=8, patch_size=2, num_channels=1, num_labels=classes or 2)
    model = ViTForImageClassification(cfg) if classes else ViTModel(cfg, add_pooling_layer=False)
    model.eval().save_pretrained(folder)
    return folder


def test_vit_takes_images_and_no_text(tmp_path, capsys):
    """A ViT bundle records no text corpus's hash (it read none), refuses --text at `run` and text at `export
    --calib`, and `eval` scores it on images only."""
    vit = _vit(tmp_path / "vit", heads=2)
    rc, _, err = _cli(capsys, "export", str(vit), "--out", str(tmp_path / "b"), "--normalizer", "softmax",
                      "--calib", "digits", "--check-samples", "8", "--quiet")
    assert rc == 0, err
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert man["calibration"]["data_sha256"] is None and "digits train images" in man["calibration"]["data"]
    fid = man["model_fidelity"]  # labeled test images: the accuracy the classifier keeps
    assert fid["metric"] == "accuracy" and "digits test images" in fid["data"] and "agreement" in fid["accuracy"]
    rc, _, err = _cli(capsys, "export", str(vit), "--out", str(tmp_path / "s"), "--normalizer", "softmax",
                      "--check-samples", "8", "--quiet")
    assert rc == 0, err
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["calibration"]["data_sha256"] is None
    text = tmp_path / "calib.txt"
    text.write_text("a sentence of text\n", encoding="utf-8")
    rc, _, err = _cli(capsys, "export", str(vit), "--out", str(tmp_path / "t"), "--calib", str(text), "--quiet")
    _one_line(err, EXIT_USAGE, rc)
    assert "a ViT calibrates on images" in err and not (tmp_path / "t").exists()
    rc, _, err = _cli(capsys, "run", "--bundle", str(tmp_path / "b"), *DUAL, "--text", TEXT, "--quiet")
    _one_line(err, EXIT_USAGE, rc)
    assert "a ViT takes images, not --text" in err and "--input" in err
    rc, _, err = _cli(capsys, "eval", "--bundle", str(tmp_path / "b"), *DUAL, "--quiet")
    _one_line(err, EXIT_USAGE, rc)
    assert "--task digits" in err


def test_a_head_size_no_build_runs_is_refused_at_export_and_by_perf(tmp_path, capsys):
    """Head size 16 (a ViT of hidden 64 with 4 heads): no committed build runs it. `export` refuses with the list of
    what runs (before the model is loaded); `perf --bundle` agrees instead of modeling it."""
    from hw_jobs import bundle_parts

    from vckattn.host.bundle import write_bundle

    vit = _vit(tmp_path / "vit16", heads=4, classes=None)
    rc, _, err = _cli(capsys, "export", str(vit), "--out", str(tmp_path / "b"), "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "no committed hardware build runs head size 16" in err and "head sizes 32, 64" in err
    assert "vck5000_engine" in err and "up to 512 tokens" in err
    hd16 = write_bundle(tmp_path / "hd16", *bundle_parts("swiftmax", head_dim=16, heads=4))
    rc, out, err = _cli(capsys, "perf", "--bundle", str(hd16))
    _one_line(err, EXIT_BUNDLE, rc)
    assert "head size 16" in err and "fits" not in out
    manifest, tensors, meta = bundle_parts("swiftmax", head_dim=32, heads=2)
    manifest["layers"][0]["score_absmax"] = 20_000  # the score maximum the committed engine's 8-bit scores need
    hd32 = write_bundle(tmp_path / "hd32", manifest, tensors, meta)
    rc, out, err = _cli(capsys, "perf", "--bundle", str(hd32))
    assert rc == 0 and "fits the device" in out, err


def test_runnable_problem_names_the_nearest_build():
    from vckattn.hw.design.manifest import runnable_problem

    assert runnable_problem(32, 12, {"swiftmax", "softmax"}, 128) is None  # engine_small_dual
    assert runnable_problem(64, 32, {"swiftmax"}, 512) is None  # vck5000_engine
    long_soft = runnable_problem(32, 12, {"softmax"}, 512)  # online softmax at full size: no committed build
    assert long_soft.startswith("no committed hardware build runs 512 tokens") and \
        "engine_small_dual: head sizes 32, 64, up to 32 heads, up to 128 tokens, swiftmax and softmax" in long_soft
    assert runnable_problem(32, 12, {"softmax"}, 2048).startswith("no committed hardware build runs 2048 tokens")
    assert "40 heads" in runnable_problem(64, 40, {"swiftmax"})


# ------------------------------------------------------------------------------------------- positions


def test_defaults_adapt_to_a_model_with_few_positions(tmp_path, capsys):
    """A model of 64 positions: `calibrate stats` and `export` cut their 128-token defaults to 64 (they crashed
    before); a value given beyond the positions is refused."""
    bert = _tiny_bert(tmp_path / "bert64", positions=64)
    rc, out, err = _cli(capsys, "calibrate", "stats", str(bert), "--data", "pydoc", "--out", str(tmp_path / "s"),
                        "--samples", "4", "--quiet")
    assert rc == 0, err
    assert json.loads((tmp_path / "s" / "stats.json").read_text())["samples"] == 4
    rc, _, err = _cli(capsys, "calibrate", "stats", str(bert), "--data", "pydoc", "--out", str(tmp_path / "s2"),
                      "--max-length", "100", "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "--max-length 100 is more than the model's 64 positions" in err and not (tmp_path / "s2").exists()
    long = tmp_path / "long.txt"
    long.write_text(" ".join(["attention"] * 200) + "\n", encoding="utf-8")
    rc, _, err = _cli(capsys, "export", str(bert), "--out", str(tmp_path / "b"), "--calib", str(long),
                      "--normalizer", "softmax", "--check-samples", "4", "--min-fidelity", "-1",
                      "--min-model-fidelity", "-1", "--quiet")
    assert rc == 0, err
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["calibration"]["tokens"] == 64


# ------------------------------------------------------------------------------------------- checkpoints


def test_a_checkpoint_other_than_the_source_is_refused(softmax_bundle, tmp_path, capsys):
    """`run --checkpoint` of another model: the recorded hash of the source's weights differs; refused before the
    model is loaded (it was an internal error)."""
    other = _tiny_bert(tmp_path / "other")
    for cmd in (["run", "--bundle", str(softmax_bundle), "--text", TEXT],
                ["eval", "--bundle", str(softmax_bundle), "--sentences", "2"]):
        rc, _, err = _cli(capsys, *cmd, *DUAL, "--checkpoint", str(other), "--quiet")
        _one_line(err, EXIT_INPUT, rc)
        assert f"--checkpoint {other} is not the bundle's source" in err and "sha256" in err


@pytest.mark.parametrize("where, value", [("encoder.layer.1.attention.self.key.weight", float("nan")),
                                          ("encoder.layer.0.output.dense.bias", float("inf"))])
def test_nan_or_inf_weights_are_named(where, value, tmp_path, capsys):
    """A weight that is NaN or Inf: the tensor is named, no numpy warning leaks, no default is advised."""
    from safetensors.torch import load_file, save_file

    bert = _tiny_bert(tmp_path / "bert")
    state = load_file(str(bert / "model.safetensors"))
    key = next(k for k in state if k.endswith(where))
    state[key].view(-1)[3] = value
    save_file(state, str(bert / "model.safetensors"), metadata={"format": "pt"})
    for cmd in (["export", str(bert), "--out", str(tmp_path / "b"), "--normalizer", "softmax"],
                ["calibrate", "stats", str(bert), "--data", "pydoc", "--out", str(tmp_path / "s"), "--samples", "4"]):
        rc, _, err = _cli(capsys, *cmd, "--quiet")
        _one_line(err, EXIT_INPUT, rc)
        assert f"tensor {where} holds {value}" in err and "--calib-method" not in err and "--swiftmax-init" not in err
    assert not (tmp_path / "b").exists() and not (tmp_path / "s").exists()


# ------------------------------------------------------------------------------------------- perf explore


def test_explore_handles_long_sequences(capsys):
    """`perf explore --seq 1025 / 2048`: a pipeline holds at most MAX_KERNELS key slices (it was an internal error,
    "kernels must be 1..N"); 10^6 tokens fit no design of the search space: a usage error naming why."""
    from vckattn.hw.design import explore
    from vckattn.hw.perf import model
    from vckattn.hw.spec.functional import MAX_KERNELS, EngineParams

    dev = model.load_device()
    for seq in (1025, 2048):
        w = model.Workload(heads=12, d_head=64, seq=seq, batch=8, layers=("swiftmax",) * 12)
        kernels = {d.qk_kernels for d in explore.candidates(w, dev, 300.0)}  # built MAX_KERNELS + 1 before
        assert kernels and max(kernels) <= MAX_KERNELS and all(EngineParams(1, k) for k in kernels)
    rc, out, err = _cli(capsys, "perf", "explore", "--seq", "1025", "--quiet")
    assert rc == 0 and "best SwiftMax design" in out, err
    rc, _, err = _cli(capsys, "perf", "explore", "--seq", "1000000", "--quiet")
    _one_line(err, EXIT_USAGE, rc)
    assert "S = 1000000" in err and f"{MAX_KERNELS} key slices" in err


# ------------------------------------------------------------------------------------------- outputs and text


def _unwritable(tmp_path: Path) -> Path:
    """A folder this process cannot write in: permissions for a user, sysfs (which refuses even root) for root."""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        return ro
    if not Path("/sys").is_dir():
        pytest.skip("root without /sys: no folder here refuses root's writes")
    return Path("/sys")


def test_unwritable_outputs_are_refused_before_the_work(softmax_bundle, tmp_path, capsys):
    """--json in a folder that refuses writes (os.access cannot tell for root or a read-only file system): refused
    before the model is loaded, not after the whole run; --build-dir likewise."""
    ro = _unwritable(tmp_path)
    rc, _, err = _cli(capsys, "run", "--bundle", str(softmax_bundle), *DUAL, "--text", TEXT, "--json",
                      str(ro / "r.json"), "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert f"--json {ro / 'r.json'}" in err
    rc, _, err = _cli(capsys, "--build-dir", str(ro / "build"), "run", "--bundle", str(softmax_bundle), "--text",
                      TEXT, *DUAL, "--backend", "rtl", "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert f"--build-dir {ro / 'build'}" in err and "cannot write" in err
    assert os.environ.get("VCKATTN_BUILD_DIR") != str(ro / "build")


def test_text_that_is_not_utf8_is_refused(softmax_bundle, capsys):
    """Undecodable bytes on the command line reach Python as lone surrogates: refused as input (status 4; it was
    exit 1 with a traceback from the crash handler)."""
    text = b"caf\xe9 au lait".decode("utf-8", "surrogateescape")
    rc, _, err = _cli(capsys, "run", "--bundle", str(softmax_bundle), *DUAL, "--text", text, "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "--text is not UTF-8 text (byte e9 at character 3" in err


def test_the_crash_report_never_crashes(monkeypatch, tmp_path, capsys):
    """An internal error whose message and command line hold undecodable text, and a crash folder that cannot be
    created: still one line, status 70."""
    from vckattn.host import cli

    bad = b"\xff".decode("utf-8", "surrogateescape")

    def boom(_args):
        raise RuntimeError(f"broken {bad}")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    sub = next(a for a in parser._actions if a.dest == "command")
    sub.choices["doctor"].set_defaults(func=boom)
    monkeypatch.setenv("VCKATTN_BUILD_DIR", str(tmp_path / "crash-here"))
    rc, _, err = _cli(capsys, "doctor", f"--json={bad}")
    assert rc == EXIT_INTERNAL and err.count("\n") == 1 and "RuntimeError: broken" in err
    traces = list((tmp_path / "crash-here" / "crash").glob("trace-*.txt"))
    assert len(traces) == 1 and "\\udcff" in traces[0].read_text(encoding="utf-8")
    monkeypatch.setenv("VCKATTN_BUILD_DIR", str(_unwritable(tmp_path) / "crash-there"))
    rc, _, err = _cli(capsys, "doctor", f"--json={bad}")
    assert rc == EXIT_INTERNAL and err.count("\n") == 1 and "(nowhere:" in err and "Traceback" not in err


def test_a_folder_given_as_a_file_is_named_as_a_folder(tmp_path, capsys):
    (tmp_path / "adir").mkdir()
    rc, _, err = _cli(capsys, "export", "minilm", "--out", str(tmp_path / "b"), "--calib", str(tmp_path / "adir"),
                      "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "is a folder, not a file" in err
    rc, _, err = _cli(capsys, "export", "minilm", "--out", str(tmp_path / "b"), "--calib", str(tmp_path / "none"),
                      "--quiet")
    _one_line(err, EXIT_INPUT, rc)
    assert "does not exist" in err


def test_similar_problems_get_the_same_status(softmax_bundle, tmp_path, capsys):
    """A missing input file is status 4 for every command; a backend that cannot run the bundle is a usage problem
    (2), refused before the model is loaded; a build that cannot run it is a bundle/build mismatch (5) naming the build
    that can."""
    missing = str(tmp_path / "missing")
    for cmd in (["export", "minilm", "--out", str(tmp_path / "b"), "--calib", missing + ".txt"],
                ["calibrate", "stats", "minilm", "--data", missing + ".txt", "--out", str(tmp_path / "s")],
                ["profile", missing, "--out", str(tmp_path / "p")],
                ["report", "quant", "--data", missing + ".txt"],
                ["run", "--bundle", str(softmax_bundle), *DUAL, "--text", TEXT, "--checkpoint",
                 missing]):
        rc, _, err = _cli(capsys, *cmd)
        _one_line(err, EXIT_INPUT, rc)
        assert "missing" in err
    xclbin = tmp_path / "a.xclbin"
    xclbin.write_bytes(bytes(256))
    rc, _, err = _cli(capsys, "run", "--bundle", str(softmax_bundle), *DUAL, "--text", TEXT, "--backend",
                      "pynq", "--xclbin", str(xclbin), "--quiet")
    _one_line(err, EXIT_USAGE, rc)
    assert "the pynq backend runs an engine's SwiftMax layers only" in err and "--backend emu, rtl or csim" in err
    rc, _, err = _cli(capsys, "run", "--bundle", str(softmax_bundle), "--text", TEXT, "--quiet")  # the default design
    _one_line(err, EXIT_BUNDLE, rc)
    assert "vck5000_engine" in err and "needs softmax" in err and "engine_small_dual" in err


# ------------------------------------------------------------------------------------------- files and bars


def test_written_files_get_the_users_umask(tmp_path):
    from vckattn.host.output import write_text_atomic

    old = os.umask(0o027)
    try:
        write_text_atomic(tmp_path / "a.json", "{}\n")
        os.umask(0o002)
        write_text_atomic(tmp_path / "b.json", "{}\n")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o664


def test_progress_bars_only_on_a_terminal(tmp_path, capsys):
    """Without --quiet, on a stderr that is not a terminal (a pipe, a log file; capsys here): no bar redraws."""
    assert not sys.stderr.isatty()
    rc, _, err = _cli(capsys, "export", "minilm", "--out", str(tmp_path / "b"), "--normalizer", "softmax",
                      "--max-layers", "1", "--check-samples", "4")
    assert rc == 0, err
    assert "\r" not in err and "it/s" not in err and "%|" not in err
    assert err.startswith("exported 1 of 6 layers") and err.count("\n") == 1
    assert np.isfinite(json.loads((tmp_path / "b" / "manifest.json").read_text())["model_fidelity"]["score"])

"""Bad inputs to every subcommand: each is refused with the exit status of its kind
(golden/errors.py EXIT_CODES), in exactly one line on stderr, without a traceback, before any model is loaded or
simulated, and without writing (or half-writing) any output.

Each case is ``(name, argv, status, needle, outputs)``: ``argv`` may name ``{tmp}`` (this test's folder) and
``{bundle}`` (a 1-layer MiniLM softmax bundle); ``needle`` must be in the error line; ``outputs`` are paths (under
``{tmp}``) that must not exist afterwards, or, when they existed before, be byte-identical.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from vckattn.golden.errors import EXIT_BUNDLE, EXIT_INPUT, EXIT_USAGE
from vckattn.host.cli import main

TEXT = "Attention on the Versal array."
NOT_UTF8 = b"caf\xe9 au lait\nthe second line\n"  # Latin-1


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    from vckattn.host.export import export_checkpoint
    from vckattn.host.textdata import real_sentences

    out = tmp_path_factory.mktemp("bad_inputs") / "minilm"
    return export_checkpoint("minilm", out, real_sentences(4), normalizer="softmax", max_layers=1, progress=False)


def _files(tmp: Path, bundle: Path) -> None:
    """The inputs the cases name."""
    (tmp / "latin1.txt").write_bytes(NOT_UTF8)
    (tmp / "blank.txt").write_text("  \n\t\n", encoding="utf-8")
    (tmp / "file.txt").write_text("a file, not a folder\n", encoding="utf-8")
    (tmp / "adir").mkdir()
    full = tmp / "full"
    full.mkdir()
    (full / "keep.txt").write_text("someone's work\n", encoding="utf-8")
    (tmp / "existing.json").write_text('{"keep": true}\n', encoding="utf-8")
    stats = tmp / "stats_out"
    stats.mkdir()
    (stats / "stats.json").write_text('{"earlier": "run"}\n', encoding="utf-8")
    np.savez(tmp / "int8.npz", layer0_input=np.zeros((5, 384), np.int8))
    np.savez(tmp / "str.npz", layer0_input=np.array([["a"] * 384] * 5))
    np.savez(tmp / "3d.npz", layer0_input=np.zeros((1, 5, 384), np.float32))
    np.savez(tmp / "zero.npz", layer0_input=np.zeros((0, 384), np.float32))
    np.savez(tmp / "nokey.npz", hidden=np.zeros((5, 384), np.float32))
    np.savez(tmp / "badkeep.npz", layer0_input=np.zeros((5, 384), np.float32), keep=np.ones(3, bool))
    (tmp / "garbage.pt").write_bytes(b"this is not a PyTorch file at all" * 10)
    # bundles: manifest.json truncated, tensors truncated, NaN weights
    for name in ("trunc_manifest", "trunc_tensors", "nan_weights"):
        shutil.copytree(bundle, tmp / name)
    man = (tmp / "trunc_manifest" / "manifest.json").read_bytes()
    (tmp / "trunc_manifest" / "manifest.json").write_bytes(man[: len(man) // 2])
    ten = (tmp / "trunc_tensors" / "tensors.safetensors").read_bytes()
    (tmp / "trunc_tensors" / "tensors.safetensors").write_bytes(ten[: len(ten) // 2])
    _nan_weights(tmp / "nan_weights")
    # a bitstream manifest for another head size (64 only; MiniLM's heads are 32 wide)
    import copy

    from vckattn.hw.design.manifest import load_manifest

    other = copy.deepcopy(load_manifest("engine_small").data)
    other["tile"]["head_dims"] = [64]
    (tmp / "hd64.json").write_text(json.dumps(other), encoding="utf-8")
    (tmp / "bad_design.json").write_text('{"pipelines": -3, "q_rows": "many"}', encoding="utf-8")
    (tmp / "notjson.json").write_text("{ not json", encoding="utf-8")


def _nan_weights(folder: Path) -> None:
    """Put a NaN into a float tensor of the bundle, with its sha256 and the manifest seal updated, so that only the
    value check can catch it."""
    from safetensors.numpy import load_file

    from vckattn.host.bundle import _write_files, tensor_sha256

    m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    t = load_file(str(folder / "tensors.safetensors"))
    name = next(k for k, v in t.items() if v.dtype.kind == "f")
    t[name] = t[name].copy()
    t[name].flat[0] = np.nan
    m["tensors"][name]["sha256"] = tensor_sha256(t[name])
    _write_files(folder, m, t)


LONG = " ".join(["attention"] * 700)  # > 512 tokens

B = "{bundle}"
RUN = ["run", "--bundle", B, "--manifest", "engine_small_dual", "--quiet"]  # a build with online softmax
EVAL = ["eval", "--bundle", B, "--manifest", "engine_small_dual", "--quiet"]

CASES = [
    # ---- run: text
    ("run empty text", [*RUN, "--text", ""], EXIT_INPUT, "--text is empty", []),
    ("run whitespace text", [*RUN, "--text", "  \n\t "], EXIT_INPUT, "--text is empty", []),
    ("run text longer than the model", [*RUN, "--text", LONG], EXIT_INPUT, "--truncate", []),
    # ---- run: --input npz
    ("run npz int8 dtype", [*RUN, "--input", "{tmp}/int8.npz"], EXIT_INPUT, "dtype int8", []),
    ("run npz string dtype", [*RUN, "--input", "{tmp}/str.npz"], EXIT_INPUT, "dtype", []),
    ("run npz 3-D", [*RUN, "--input", "{tmp}/3d.npz"], EXIT_INPUT, "shape (1, 5, 384)", []),
    ("run npz zero tokens", [*RUN, "--input", "{tmp}/zero.npz"], EXIT_INPUT, "zero tokens", []),
    ("run npz missing key", [*RUN, "--input", "{tmp}/nokey.npz", "--layers", "0"], EXIT_INPUT, "'layer0_input'",
     []),
    ("run npz bad keep", [*RUN, "--input", "{tmp}/badkeep.npz"], EXIT_INPUT, "keep has shape", []),
    # ---- run: outputs
    ("run --json dir", [*RUN, "--text", TEXT, "--json", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("run --json under a file", [*RUN, "--text", TEXT, "--json", "{tmp}/file.txt/out.json"], EXIT_INPUT,
     "is a file, not a folder", []),
    ("run --json missing parent", [*RUN, "--text", TEXT, "--json", "{tmp}/nowhere/out.json"], EXIT_INPUT,
     "does not exist", ["nowhere"]),
    ("run --save dir", [*RUN, "--text", TEXT, "--save", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("run --save under a file", [*RUN, "--text", TEXT, "--save", "{tmp}/file.txt/s.npz"], EXIT_INPUT,
     "is a file", []),
    # ---- run: layers, numbers, checkpoint
    ("run --layers 0,0", [*RUN, "--text", TEXT, "--layers", "0,0"], EXIT_USAGE, "given twice", []),
    ("run --layers 99", [*RUN, "--text", TEXT, "--layers", "99"], EXIT_USAGE, "no layer(s) [99]", []),
    ("run --layers -1", [*RUN, "--text", TEXT, "--layers", "-1"], EXIT_USAGE, "--layers", []),
    ("run --device -1", [*RUN, "--text", TEXT, "--backend", "xrt", "--xclbin", "{tmp}/file.txt", "--device", "-1"],
     EXIT_USAGE, "--device", []),
    ("run --min-cosine 2", [*RUN, "--text", TEXT, "--min-cosine", "2"], EXIT_USAGE, "cosine", []),
    ("run garbage checkpoint", [*RUN, "--text", TEXT, "--checkpoint", "{tmp}/garbage.pt"], EXIT_INPUT,
     "garbage.pt", []),
    ("run missing xclbin", [*RUN, "--text", TEXT, "--backend", "xrt", "--xclbin", "{tmp}/none.xclbin"], EXIT_INPUT,
     "none.xclbin", []),
    # ---- run: bundles and manifests
    ("run truncated manifest.json", ["run", "--bundle", "{tmp}/trunc_manifest", "--text", TEXT], EXIT_BUNDLE,
     "manifest.json", []),
    ("run truncated tensors", ["run", "--bundle", "{tmp}/trunc_tensors", "--text", TEXT], EXIT_BUNDLE,
     "tensors", []),
    ("run NaN weights", ["run", "--bundle", "{tmp}/nan_weights", "--text", TEXT], EXIT_BUNDLE, "must be finite", []),
    ("inspect NaN weights", ["inspect", "{tmp}/nan_weights"], EXIT_BUNDLE, "must be finite", []),
    ("run unknown --manifest", [*RUN, "--text", TEXT, "--manifest", "no_such_build"], EXIT_BUNDLE,
     "no_such_build", []),
    ("run --manifest head size 64 only", [*RUN, "--text", TEXT, "--manifest", "{tmp}/hd64.json"], EXIT_BUNDLE,
     "head", []),
    ("run missing bundle", ["run", "--bundle", "{tmp}/nobundle", "--text", TEXT], EXIT_BUNDLE, "nobundle", []),
    ("run non-UTF-8 --text", [*RUN, "--text", NOT_UTF8.decode("utf-8", "surrogateescape")], EXIT_INPUT,
     "not UTF-8", []),
    ("run --backend pynq on online softmax", [*RUN, "--text", TEXT, "--backend", "pynq", "--xclbin", "{tmp}/file.txt"],
     EXIT_USAGE, "--backend emu, rtl or csim", []),
    ("run online softmax on the default design", ["run", "--bundle", B, "--quiet", "--text", TEXT], EXIT_BUNDLE,
     "engine_small_dual", []),
    ("run --checkpoint a folder without a model", [*RUN, "--text", TEXT, "--checkpoint", "{tmp}/adir"], EXIT_INPUT,
     "adir", []),
    ("--build-dir a file", ["--build-dir", "{tmp}/file.txt", *RUN, "--text", TEXT], EXIT_INPUT, "--build-dir", []),
    # ---- eval
    ("eval --sentences 0", [*EVAL, "--sentences", "0"], EXIT_USAGE, "must be >= 1", []),
    ("eval --sentences 100000", [*EVAL, "--sentences", "100000"], EXIT_USAGE, "--sentences", []),
    ("eval --max-tokens 0", [*EVAL, "--max-tokens", "0"], EXIT_USAGE, "must be >= 1", []),
    ("eval --max-tokens 4096", [*EVAL, "--max-tokens", "4096"], EXIT_INPUT, "512 positions", []),
    ("eval --manifest head size 64 only", [*EVAL, "--manifest", "{tmp}/hd64.json"], EXIT_BUNDLE, "head_dim", []),
    ("eval --xclbin missing", [*EVAL, "--backend", "pynq", "--xclbin", "{tmp}/none.xclbin"], EXIT_INPUT,
     "none.xclbin", []),
    ("eval --layers 0,0", [*EVAL, "--layers", "0,0"], EXIT_USAGE, "given twice", []),
    ("eval --json dir", [*EVAL, "--json", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("eval --plots file", [*EVAL, "--plots", "{tmp}/file.txt"], EXIT_INPUT, "is a file", []),
    ("eval --plots under a file", [*EVAL, "--plots", "{tmp}/file.txt/plots"], EXIT_INPUT, "is a file", []),
    ("eval unknown --manifest", [*EVAL, "--manifest", "no_such_build"], EXIT_BUNDLE, "no_such_build", []),
    ("eval truncated bundle", ["eval", "--bundle", "{tmp}/trunc_manifest"], EXIT_BUNDLE, "manifest.json", []),
    ("eval --task digits on a text bundle", [*EVAL, "--task", "digits"], EXIT_USAGE, "image set", []),
    ("eval --checkpoint missing", [*EVAL, "--checkpoint", "{tmp}/nomodel"], EXIT_INPUT, "nomodel", []),
    # ---- profile
    ("profile non-UTF-8 --data", ["profile", "minilm", "--data", "{tmp}/latin1.txt", "--out", "{tmp}/prof"],
     EXIT_INPUT, "UTF-8", ["prof"]),
    ("profile --out file", ["profile", "minilm", "--out", "{tmp}/file.txt"], EXIT_INPUT, "is a file", []),
    ("profile --json dir", ["profile", "minilm", "--out", "{tmp}/prof", "--json", "{tmp}/adir"], EXIT_INPUT,
     "is a folder", ["prof"]),
    ("profile --max-sentences 0", ["profile", "minilm", "--max-sentences", "0", "--out", "{tmp}/prof"], EXIT_USAGE,
     "--max-sentences", ["prof"]),
    ("profile missing checkpoint", ["profile", "{tmp}/nomodel", "--out", "{tmp}/prof"], EXIT_INPUT, "nomodel",
     ["prof"]),  # a missing input: status 4, as `export` and `run` give it
    # ---- calibrate
    ("calibrate stats --out file", ["calibrate", "stats", "minilm", "--data", "pydoc", "--out", "{tmp}/file.txt"],
     EXIT_INPUT, "is a file", []),
    ("calibrate stats --out under a file", ["calibrate", "stats", "minilm", "--data", "pydoc", "--out",
                                            "{tmp}/file.txt/o"], EXIT_INPUT, "is a file", []),
    ("calibrate stats existing output", ["calibrate", "stats", "minilm", "--data", "pydoc", "--out",
                                         "{tmp}/stats_out"], EXIT_USAGE, "--overwrite", ["stats_out/stats.json"]),
    ("calibrate stats non-UTF-8 --data", ["calibrate", "stats", "minilm", "--data", "{tmp}/latin1.txt", "--out",
                                          "{tmp}/cal"], EXIT_INPUT, "UTF-8", ["cal"]),
    ("calibrate stats blank --data", ["calibrate", "stats", "minilm", "--data", "{tmp}/blank.txt", "--out",
                                      "{tmp}/cal"], EXIT_INPUT, "blank.txt", ["cal"]),
    ("calibrate swiftmax --lr 0", ["calibrate", "swiftmax", "minilm", "--data", "pydoc", "--out", "{tmp}/cal",
                                   "--lr", "0"], EXIT_USAGE, "--lr", ["cal"]),
    ("calibrate swiftmax --layers 0,0", ["calibrate", "swiftmax", "minilm", "--data", "pydoc", "--out", "{tmp}/cal",
                                         "--layers", "0,0"], EXIT_USAGE, "given twice", ["cal"]),
    ("calibrate swiftmax --out file", ["calibrate", "swiftmax", "minilm", "--data", "pydoc", "--out",
                                       "{tmp}/file.txt"], EXIT_INPUT, "is a file", []),
    ("calibrate stats missing --data file", ["calibrate", "stats", "minilm", "--data", "{tmp}/none.txt", "--out",
                                             "{tmp}/cal"], EXIT_INPUT, "no such file", ["cal"]),
    ("calibrate swiftmax --data a folder", ["calibrate", "swiftmax", "minilm", "--data", "{tmp}/adir", "--out",
                                            "{tmp}/cal"], EXIT_INPUT, "is a folder", ["cal"]),
    ("calibrate stats --max-length beyond the positions", ["calibrate", "stats", "minilm", "--data", "pydoc", "--out",
                                                            "{tmp}/cal", "--max-length", "600"], EXIT_INPUT,
     "512 positions", ["cal"]),
    ("calibrate stats --batch-size 0", ["calibrate", "stats", "minilm", "--data", "pydoc", "--out", "{tmp}/cal",
                                        "--batch-size", "0"], EXIT_USAGE, "must be >= 1", ["cal"]),
    # ---- convert
    ("convert --out file", ["convert", "bhyt", "smollm2", "--out", "{tmp}/file.txt"], EXIT_INPUT, "is a file", []),
    ("convert --kappa 0", ["convert", "bhyt", "smollm2", "--out", "{tmp}/conv", "--kappa", "0"], EXIT_USAGE,
     "must be > 0", ["conv"]),
    ("convert --seq-len -4", ["convert", "bhyt", "smollm2", "--out", "{tmp}/conv", "--seq-len", "-4"], EXIT_USAGE,
     "must be >= 1", ["conv"]),
    # ---- report
    ("report quant non-UTF-8 --data", ["report", "quant", "--data", "{tmp}/latin1.txt"], EXIT_INPUT, "UTF-8", []),
    ("report errors --json dir", ["report", "errors", "--json", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("report quant --json under a file", ["report", "quant", "--json", "{tmp}/file.txt/q.json"], EXIT_INPUT,
     "is a file", []),
    ("report unknown", ["report", "bogus"], EXIT_USAGE, "invalid choice", []),
    # ---- bench
    ("bench emulator --seq 0", ["bench", "emulator", "--seq", "0"], EXIT_USAGE, "must be >= 1", []),
    ("bench emulator --json dir", ["bench", "emulator", "--json", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("bench host --json under a file", ["bench", "host", "--json", "{tmp}/file.txt/h.json"], EXIT_INPUT,
     "is a file", []),
    ("bench host --d-head 48", ["bench", "host", "--d-head", "48"], EXIT_USAGE, "invalid choice", []),
    # ---- hw
    ("hw generate bad design", ["hw", "generate", "{tmp}/bad_design.json", "--out", "{tmp}/gen"], EXIT_INPUT,
     "bad_design.json", ["gen"]),
    ("hw generate design not JSON", ["hw", "generate", "{tmp}/notjson.json", "--out", "{tmp}/gen"], EXIT_INPUT,
     "not valid JSON", ["gen"]),
    ("hw generate --out file", ["hw", "generate", "best", "--out", "{tmp}/file.txt"], EXIT_INPUT, "is a file", []),
    ("hw generate --max-seq 0", ["hw", "generate", "best", "--out", "{tmp}/gen", "--max-seq", "0"], EXIT_USAGE,
     "--max-seq", ["gen"]),
    ("hw report --json dir", ["hw", "report", "--json", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("hw generate missing design file", ["hw", "generate", "{tmp}/no_such_design.json", "--out", "{tmp}/gen"],
     EXIT_INPUT, "no_such_design.json", ["gen"]),
    # ---- perf
    ("perf --pipelines 0", ["perf", "--pipelines", "0"], EXIT_USAGE, "pipelines", []),
    ("perf impossible design", ["perf", "--score-plios", "64"], EXIT_USAGE, "score_plios must be <=", []),
    ("perf sequence beyond the design", ["perf", "--seq", "100000"], EXIT_USAGE, "max_seq", []),
    ("perf --json dir", ["perf", "--json", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("perf --plots file", ["perf", "--plots", "{tmp}/file.txt"], EXIT_INPUT, "is a file", []),
    ("perf --design not JSON", ["perf", "--design", "{tmp}/notjson.json"], EXIT_INPUT, "notjson.json", []),
    ("perf explore --plots file", ["perf", "explore", "--plots", "{tmp}/file.txt"], EXIT_INPUT, "is a file", []),
    ("perf explore --seq 1000000", ["perf", "explore", "--seq", "1000000", "--quiet"], EXIT_USAGE, "S = 1000000",
     []),
    ("perf --config missing", ["perf", "--config", "{tmp}/none.json"], EXIT_INPUT, "none.json", []),
    # ---- export
    ("export --out file", ["export", "minilm", "--out", "{tmp}/file.txt"], EXIT_INPUT, "is a file", []),
    ("export --out under a file", ["export", "minilm", "--out", "{tmp}/file.txt/b"], EXIT_INPUT, "is a file", []),
    ("export --out non-empty without --overwrite", ["export", "minilm", "--out", "{tmp}/full"], EXIT_USAGE,
     "--overwrite", ["full/keep.txt"]),
    ("export non-UTF-8 --calib", ["export", "minilm", "--out", "{tmp}/exp", "--calib", "{tmp}/latin1.txt"],
     EXIT_INPUT, "UTF-8", ["exp"]),
    ("export garbage .pt", ["export", "{tmp}/garbage.pt", "--out", "{tmp}/exp"], EXIT_INPUT, "garbage.pt", ["exp"]),
    ("export --layers 0,0", ["export", "minilm", "--out", "{tmp}/exp", "--layers", "0,0"], EXIT_USAGE, "given twice",
     ["exp"]),
    ("export --seq-len 4096", ["export", "minilm", "--out", "{tmp}/exp", "--seq-len", "4096"], EXIT_INPUT, "512",
     ["exp"]),
    ("export --overwrite=yes", ["export", "minilm", "--out", "{tmp}/exp", "--overwrite=yes"], EXIT_USAGE,
     "--overwrite", ["exp"]),
    ("export --calib a folder", ["export", "minilm", "--out", "{tmp}/exp", "--calib", "{tmp}/adir"], EXIT_INPUT,
     "is a folder", ["exp"]),
    ("export --calib missing", ["export", "minilm", "--out", "{tmp}/exp", "--calib", "{tmp}/none.txt"], EXIT_INPUT,
     "does not exist", ["exp"]),
    ("export --check-data missing", ["export", "minilm", "--out", "{tmp}/exp", "--check-data", "{tmp}/none.txt"],
     EXIT_INPUT, "none.txt", ["exp"]),
    ("export --calib digits for a text model", ["export", "minilm", "--out", "{tmp}/exp", "--calib", "digits"],
     EXIT_USAGE, "images calibrate a ViT", ["exp"]),
    # ---- inspect
    ("inspect truncated manifest", ["inspect", "{tmp}/trunc_manifest"], EXIT_BUNDLE, "manifest.json", []),
    ("inspect truncated tensors", ["inspect", "{tmp}/trunc_tensors"], EXIT_BUNDLE, "tensors", []),
    ("inspect a file", ["inspect", "{tmp}/file.txt"], EXIT_BUNDLE, "file.txt", []),
    # ---- deploy
    ("deploy missing xclbin", ["deploy", "--xclbin", "{tmp}/none.xclbin", "--bundle", B], EXIT_INPUT,
     "none.xclbin", []),
    ("deploy --json dir", ["deploy", "--xclbin", "{tmp}/file.txt", "--bundle", B, "--json", "{tmp}/adir"],
     EXIT_INPUT, "is a folder", []),
    ("deploy truncated bundle", ["deploy", "--xclbin", "{tmp}/file.txt", "--bundle", "{tmp}/trunc_manifest"],
     EXIT_BUNDLE, "manifest.json", []),
    # ---- board selftest
    ("selftest missing xclbin", ["board", "selftest", "--manifest", "engine_small", "--xclbin", "{tmp}/none.xclbin"],
     EXIT_INPUT, "none.xclbin", []),
    ("selftest --json dir", ["board", "selftest", "--manifest", "engine_small", "--xclbin", "{tmp}/file.txt",
                             "--json", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("selftest manifest not JSON", ["board", "selftest", "--manifest", "{tmp}/file.txt", "--xclbin", "{tmp}/file.txt"],
     EXIT_BUNDLE, "file.txt", []),
    ("selftest --timeout-ms abc", ["board", "selftest", "--manifest", "engine_small", "--timeout-ms", "abc"],
     EXIT_USAGE, "not an integer", []),
    ("selftest --device -1", ["board", "selftest", "--manifest", "engine_small", "--xclbin", "{tmp}/file.txt",
                              "--device", "-1"], EXIT_USAGE, "card index", []),
    ("board without action", ["board"], EXIT_USAGE, "choose one of: selftest", []),
    # ---- doctor
    ("doctor --json dir", ["doctor", "--fast", "--json", "{tmp}/adir"], EXIT_INPUT, "is a folder", []),
    ("doctor --json under a file", ["doctor", "--fast", "--json", "{tmp}/file.txt/d.json"], EXIT_INPUT,
     "is a file", []),
    ("doctor --yosys-timeout 0", ["doctor", "--yosys-timeout", "0"], EXIT_USAGE, "must be > 0", []),
]


def _snapshot(tmp: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tmp)): p.read_bytes() for p in tmp.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name, argv, status, needle, outputs", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_with_its_status(name, argv, status, needle, outputs, bundle, tmp_path, capsys):
    _files(tmp_path, bundle)
    before = _snapshot(tmp_path)
    existed = {o: (tmp_path / o).exists() for o in outputs}
    argv = [a.format(tmp=tmp_path, bundle=bundle) for a in argv]
    capsys.readouterr()
    t0 = time.perf_counter()
    code = main(argv)
    seconds = time.perf_counter() - t0
    cap = capsys.readouterr()
    err = cap.err
    assert code == status, (name, code, err, cap.out)
    assert "Traceback" not in err + cap.out, (name, err)
    assert err.count("\n") == 1 and err.endswith("\n"), (name, err)
    assert needle in err, (name, needle, err)
    assert "weights_only" not in err and "=True" not in err and "Namespace(" not in err, (name, err)
    assert "internal error" not in err, (name, err)
    for o in outputs:
        assert (tmp_path / o).exists() == existed[o], (name, o)
    assert _snapshot(tmp_path) == before, (name, "an input or output changed")  # nothing written or half-written
    assert seconds < 10, (name, f"{seconds:.1f} s: the check must come before any model load or simulation")


def test_layer_list_parser_refuses_duplicates():
    import argparse

    from vckattn.host.cli.common import index_list

    assert index_list("0,2,1") == [0, 2, 1]
    for bad in ("0,0", "1,2,1", "", "a", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            index_list(bad)


def test_output_validators(tmp_path):
    from vckattn.golden.errors import InputError, UserError
    from vckattn.host.cli.common import output_dir, output_file
    from vckattn.host.output import write_text_atomic

    (tmp_path / "f").write_text("x")
    assert output_file(None) is None and str(output_file("-")) == "-"
    assert output_file(tmp_path / "new.json") == tmp_path / "new.json"
    with pytest.raises(InputError):
        output_file(tmp_path)
    with pytest.raises(InputError):
        output_file(tmp_path / "f" / "x.json")
    with pytest.raises(UserError):
        output_file(tmp_path / "f", overwrite=False)
    assert output_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    with pytest.raises(InputError):
        output_dir(tmp_path / "f")
    write_text_atomic(tmp_path / "f", "new")
    assert (tmp_path / "f").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_run_truncate_runs_a_long_text(minilm_bundle, tmp_path, capsys):
    """--truncate: the text is cut to the model's 512 positions (said on stderr) and the run goes on (a SwiftMax
    bundle on the default design, which takes 512 tokens)."""
    js = tmp_path / "r.json"
    code = main(["run", "--bundle", str(minilm_bundle), "--quiet", "--text", LONG, "--truncate", "--json", str(js)])
    cap = capsys.readouterr()
    assert code in (0, 3), cap.err
    assert "--truncate keeps the first 512" in cap.err
    assert json.loads(js.read_text())["tokens"] == 512
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temporary file left behind

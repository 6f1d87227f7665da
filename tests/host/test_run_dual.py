"""`vckattn run` on the small engine with both normalizers (``engine_small_dual``: ``engine_small`` with an
online-softmax unit beside each score channel's SwiftMax lanes): a MiniLM bundle whose layers use different
normalizers (layer 0 SwiftMax, layer 1 online softmax), each layer with its own, bit-exact with golden's narrow-score
layer on the emu, csim (the engine's C++ with the PL top Verilated: SwiftMax and online softmax), rtl and
emulated-card xrt backends; the refusals (one line, documented exit status) where a build or a backend does not
carry a layer's normalizer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vckattn.host.cli import main

TEXT = ("The quick brown fox jumps over the lazy dog, and the attention block must get every bit right, "
        "across two pipelines and their key slices.")


def _mixed(swiftmax: Path, softmax: Path, out: Path, order: tuple[str, str]) -> Path:
    """A bundle whose layer ``i`` (and its tensors) comes from the ``order[i]`` bundle."""
    from vckattn.host.bundle import load_bundle, write_bundle

    src = {"swiftmax": load_bundle(swiftmax), "softmax": load_bundle(softmax)}
    base = src["swiftmax"]  # a SwiftMax model may have online-softmax layers (not the other way round)
    man = json.loads(json.dumps(base.manifest))
    tensors = dict(base.tensors)
    for i, name in enumerate(order):
        b = src[name]
        man["layers"][i] = json.loads(json.dumps(b.manifest["layers"][i]))
        for t in [t for t in b.tensors if t.startswith(f"layers.{i}.")]:
            tensors[t] = b.tensors[t]
            man["tensors"][t] = b.manifest["tensors"][t]
    meta = {t: {k: v for k, v in man["tensors"][t].items() if k in ("format", "scale")} for t in tensors}
    return write_bundle(out, {k: v for k, v in man.items() if k != "tensors"}, tensors, meta)


@pytest.fixture(scope="module")
def mixed_bundle(minilm_bundle, tmp_path_factory) -> Path:
    from vckattn.host.export import export_checkpoint
    from vckattn.host.textdata import real_sentences

    folder = tmp_path_factory.mktemp("mixed")
    softmax = export_checkpoint("minilm", folder / "softmax", real_sentences(12), normalizer="softmax", max_layers=2,
                                progress=False, min_model_fidelity=-1, check_samples=8)
    return _mixed(minilm_bundle, softmax, folder / "mixed", ("swiftmax", "softmax"))


def _run(bundle: Path, manifest: str, backend: str, tmp_path: Path, capsys, *extra: str) -> tuple[int, dict, str]:
    js = tmp_path / f"{backend}.json"
    code = main(["run", "--bundle", str(bundle), "--manifest", manifest, "--backend", backend, "--text", TEXT,
                 "--json", str(js), "--quiet", "--min-cosine", "0.95", *extra])
    err = capsys.readouterr().err
    return code, (json.loads(js.read_text()) if code == 0 else {}), err


@pytest.mark.parametrize("backend", [
    "emu", pytest.param("csim", marks=pytest.mark.tool("g++", "hls4ml", "verilator")),
    pytest.param("rtl", marks=[pytest.mark.sim, pytest.mark.tool("verilator")])])
def test_mixed_layers_on_the_dual_engine_are_bit_exact(mixed_bundle, tmp_path, capsys, backend):
    code, rep, err = _run(mixed_bundle, "engine_small_dual", backend, tmp_path, capsys)
    assert code == 0, err
    assert rep["manifest"] == "engine_small_dual" and rep["backend"] == backend
    assert [(r["layer"], r["normalizer"]) for r in rep["layers"]] == [(0, "swiftmax"), (1, "softmax")]
    for r in rep["layers"]:
        assert r["bit_exact"] is True, r
        assert r["cosine"] > 0.95, r
        assert r["tiles"] == 12 * -(-rep["tokens"] // 16)
        if backend == "rtl":
            assert r["cycles"] > 0


def test_a_layer_the_build_does_not_carry_is_refused_in_one_line(mixed_bundle, tmp_path, capsys):
    """engine_small carries SwiftMax only: the online-softmax layer is refused before any model is loaded (the
    manifest status, 5), naming the layer and the normalizer."""
    code, _, err = _run(mixed_bundle, "engine_small", "emu", tmp_path, capsys)
    assert code == 5, err
    assert len(err.strip().splitlines()) == 1 and re.search(r"layer 1 needs softmax, which this build lacks", err)
    # the SwiftMax layer alone still runs there
    code, rep, err = _run(mixed_bundle, "engine_small", "emu", tmp_path, capsys, "--layers", "0")
    assert code == 0 and rep["layers"][0]["bit_exact"] is True, err


@pytest.mark.tool("g++", "hls4ml", "verilator")
def test_mixed_layers_on_the_emulated_card_are_bit_exact(mixed_bundle, tmp_path, capsys, monkeypatch):
    """``VCKATTN_EMULATION=csim``: the xrt backend's host code programs each layer's normalizer into the PL top's
    registers; the emulated card's C-simulation runs the one the register says."""
    monkeypatch.setenv("VCKATTN_EMULATION", "csim")
    code, rep, err = _run(mixed_bundle, "engine_small_dual", "xrt", tmp_path, capsys)
    assert code == 0, err
    assert rep["backend"] == "xrt" and rep["device"].startswith("emulation")
    assert [(r["layer"], r["normalizer"], r["bit_exact"]) for r in rep["layers"]] == [(0, "swiftmax", True),
                                                                                     (1, "softmax", True)]


@pytest.mark.parametrize("backend", ["pynq", "xrt"])
def test_a_backend_without_the_online_unit_refuses_the_layer(mixed_bundle, tmp_path, capsys, monkeypatch, backend):
    """A card is programmed for SwiftMax layers only (pynq, and xrt on a card, not emulated): an online-softmax layer is
    refused in one line, a usage problem (status 2), before any work, naming the backends that run it."""
    monkeypatch.delenv("VCKATTN_EMULATION", raising=False)
    xclbin = tmp_path / "engine_small_dual.xclbin"
    xclbin.write_bytes(b"xclbin2\0")  # never read: the refusal comes first
    code, _, err = _run(mixed_bundle, "engine_small_dual", backend, tmp_path, capsys, "--xclbin", str(xclbin))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"the {backend} backend runs an engine's SwiftMax layers only; layer(s) [1] use online softmax" in err
    assert "emu, rtl or csim" in err and "VCKATTN_EMULATION=csim" in err

"""`vckattn run` on an engine build (stream contract v3): the real MiniLM layers (12 heads of 32, zero-padded to the
build's D = 64) through the small generated instance (2 pipelines x 2 QKᵀ/P·V kernels, one score channel of 2 SwiftMax
lanes, int8 scores, 128 keys a group), bit-exact with golden's narrow-score layer on the emu, csim (the engine's C++:
movers, the AIE kernels' scalar path and, with --aie-path vector, their vector path) and rtl (the generated PL top in
Verilator, random backpressure) backends."""

from __future__ import annotations

import json

import pytest

from vckattn.host.cli import main

TEXT = ("The quick brown fox jumps over the lazy dog, and the attention block must get every bit right, "
        "across two pipelines and their key slices.")


#: the integer layers' cosine vs the float golden that each granularity reaches on TEXT (per head: a shared P
#: scale serves heads whose P spans differ, so the export check's 0.95 is the bound)
MIN_COSINE = {"layer": 0.99, "head": 0.95}


@pytest.mark.parametrize(("backend", "granularity", "path"), [
    ("emu", "layer", "scalar"), ("emu", "head", "scalar"),
    pytest.param("csim", "layer", "scalar", marks=pytest.mark.tool("g++", "hls4ml", "verilator")),
    pytest.param("csim", "head", "vector", marks=pytest.mark.tool("g++", "hls4ml", "verilator")),
    pytest.param("rtl", "head", "scalar", marks=[pytest.mark.sim, pytest.mark.full, pytest.mark.tool("verilator")]),
])
def test_minilm_on_the_small_engine_is_bit_exact(minilm_bundle, minilm_heads_bundle, tmp_path, capsys, backend,
                                                 granularity, path):
    bundle = minilm_bundle if granularity == "layer" else minilm_heads_bundle
    js = tmp_path / "r.json"
    code = main(["run", "--bundle", str(bundle), "--manifest", "engine_small", "--backend", backend,
                 "--text", TEXT, "--json", str(js), "--quiet", "--min-cosine", str(MIN_COSINE[granularity]),
                 *(["--aie-path", path] if path != "scalar" else [])])
    err = capsys.readouterr().err
    assert code == 0, err
    rep = json.loads(js.read_text())
    assert rep["manifest"] == "engine_small" and [r["layer"] for r in rep["layers"]] == [0, 1]
    for r in rep["layers"]:
        assert r["bit_exact"] is True, r
        assert r["cosine"] > MIN_COSINE[granularity], r
        assert r["tiles"] == 12 * -(-rep["tokens"] // 16)
        if backend == "rtl":
            assert r["cycles"] > 0


def test_aie_path_vector_needs_csim(minilm_bundle, capsys):
    code = main(["run", "--bundle", str(minilm_bundle), "--manifest", "engine_small", "--backend", "emu",
                 "--text", TEXT, "--quiet", "--aie-path", "vector"])
    err = capsys.readouterr().err
    assert code != 0 and "--aie-path vector" in err and len(err.strip().splitlines()) == 1


def test_engine_refuses_a_bundle_without_score_absmax(minilm_bundle, tmp_path, capsys):
    """A bundle written before narrow scores existed cannot run on an engine: one line, the fix named."""
    import copy

    from vckattn.host.bundle import load_bundle, write_bundle

    b = load_bundle(minilm_bundle)
    man = copy.deepcopy(b.manifest)
    for e in man["layers"]:
        e.pop("score_absmax")
    old = tmp_path / "old"
    write_bundle(old, man, b.tensors)
    code = main(["run", "--bundle", str(old), "--manifest", "engine_small", "--backend", "emu", "--text", TEXT,
                 "--quiet"])
    err = capsys.readouterr().err
    assert code != 0 and "score_absmax" in err and "re-export" in err and len(err.strip().splitlines()) == 1

"""Bitstream manifests: every committed file validates, is an engine build with every stream linked, and broken
manifests are refused naming the file and field. (That the committed engine manifests are what the generator writes,
register offsets included, is ``tests/hw/design/test_generate.py: test_committed_engine_manifests_are_generated``.)"""

from __future__ import annotations

import copy
import json

import pytest

from vckattn.hw.design.manifest import (
    BITSTREAMS,
    BUILDS,
    DEFAULT_DESIGN,
    ManifestError,
    compute_units,
    default_manifest,
    load_manifest,
    validate_manifest,
)


def _committed(name: str) -> dict:
    return json.loads((BITSTREAMS / f"{name}.json").read_text())


def test_default_designs_are_the_boards_builds():
    assert default_manifest() == DEFAULT_DESIGN == "vck5000_engine" and default_manifest("pynq") == "vck190_engine"
    for name, (board, platform) in BUILDS.items():
        m = load_manifest(name)
        assert (m.data["board"], m.data["platform"]) == (board, platform) and m.engine is not None
    assert {b for b, _ in BUILDS.values()} == {"vck5000", "vck190"}


@pytest.mark.parametrize("name,mutate,field,message", [
    ("engine_small", lambda d: d.pop("tile"), "(top level)", "'tile' is a required property"),
    ("engine_small", lambda d: d.pop("engine"), "(top level)", "'engine' is a required property"),
    ("engine_small", lambda d: d["tile"].update(lanes=3), "tile", "multiples of lanes"),
    ("engine_small", lambda d: d.update(max_seq_len=1000), "max_seq_len", "multiple of tile.key_block"),
    ("engine_small", lambda d: d["xclbin"].update(uuid="not-a-uuid"), "xclbin.uuid", "does not match"),
    ("engine_small", lambda d: d["kernels"][1]["registers"][2].update(offset=6), "kernels.1.registers.2.offset",
     "multiple of 4"),
    ("engine_small", lambda d: d["kernels"].append(copy.deepcopy(d["kernels"][0])), "kernels",
     "duplicate kernel names"),
    ("engine_small", lambda d: d.update(normalizers=["swiftmax", "softmax"]), "normalizers", "'softmax' has no kernel"),
    # a build with both normalizers needs the online-softmax format its unit computes
    ("engine_small_dual", lambda d: d["formats"]["online_softmax"].update(block=8), "formats.online_softmax.block",
     "engine.lanes_online_softmax"),
    ("engine_small_dual", lambda d: d["formats"].pop("online_softmax"), "formats.online_softmax", "needs its format"),
    # the stage list: what runs each device stage must be in the manifest, in the declared order, attention among them
    ("engine_small", lambda d: d.pop("stages"), "(top level)", "'stages' is a required property"),
    ("engine_small", lambda d: d["stages"][0].update(stage="qkv", by="sublayer.gemm.qkv"), "stages",
     "the attention stage runs on the device"),
    ("engine_small", lambda d: d["stages"].insert(0, {"stage": "o_proj", "where": "aie", "by": "graph"}), "stages",
     "leave the order"),
    ("engine_small",
     lambda d: d["stages"].append({"stage": "residual", "where": "pl", "by": "sublayer.units.residual"}), "stages.1.by",
     "'sublayer.units.residual' is not part of this manifest"),
    ("engine_small", lambda d: d["stages"][0].update(where="pl"), "stages.0.where", "attention cannot run on pl"),
    ("sublayer_small_encoder", lambda d: d["stages"].pop(0), "stages",
     "a sublayer build of the encoder family runs"),
    ("sublayer_small_decoder", lambda d: d["stages"][1].update(by="sublayer.gemm.kv"), "stages.1.by",
     "'sublayer.gemm.kv' is not part"),
])
def test_broken_manifests_are_refused(name, mutate, field, message):
    d = _committed(name)
    validate_manifest(copy.deepcopy(d), "m.json")
    mutate(d)
    with pytest.raises(ManifestError) as e:
        validate_manifest(d, "m.json")
    assert e.value.field == field and message in e.value.message, str(e.value)
    assert str(e.value).startswith("m.json: ")


def test_load_manifest_file_errors(tmp_path):
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        load_manifest(tmp_path / "bad.json")


def _set_link(m, i, **kw):
    m["connectivity"][i].update(kw)


def _drop_port(m, kernel, port):
    k = next(k for k in m["kernels"] if k["name"] == kernel)
    k["ports"] = [p for p in k["ports"] if p["name"] != port]


@pytest.mark.parametrize("mutate, field, message", [
    (lambda m: _set_link(m, 0, to="ai_engine_0.nope"), "connectivity.0.to", "no stream port"),
    (lambda m: _set_link(m, 0, to="ai_engine_0.p0_s_out0"), "connectivity.0.to", "not an input"),
    (lambda m: _set_link(m, 9, to="engine_pl.s0"), "connectivity.9.to", "connected twice"),
    (lambda m: _set_link(m, 6, to="ai_engine_0.p0_q_in"), "connectivity.6.to", "connected twice"),
    (lambda m: m["connectivity"].pop(), "connectivity", "unconnected: ai_engine_0.p1_o_out, s2mm_engine_1.a_in"),
    (lambda m: m["graph"]["plios"][0].update(bits=64), "connectivity.0", "differ in width"),
    (lambda m: _drop_port(m, "engine_pl", "s0"), "connectivity.3.to", "no stream port"),
])
def test_broken_connectivity_is_refused(mutate, field, message):
    """The stream links (Vitis ``sc=``) must join existing output/input streams of equal width, each once."""
    m = _committed("engine_small")
    links = [(c["from"], c["to"]) for c in m["connectivity"]]
    assert [links[i] for i in (0, 3, 6, 9)] == [
        ("mm2s_engine_q_0.out", "ai_engine_0.p0_q_in"), ("ai_engine_0.p0_s_out0", "engine_pl.s0"),
        ("mm2s_engine_q_1.out", "ai_engine_0.p1_q_in"), ("ai_engine_0.p1_s_out0", "engine_pl.s1")]
    mutate(m)
    with pytest.raises(ManifestError) as exc:
        validate_manifest(m, "x.json")
    assert exc.value.field == field and message in exc.value.message


def test_every_committed_manifest_validates_with_every_stream_linked():
    """bitstreams/*.json are all manifests (the deploy command reads them all), every one an engine build (stream
    contract v3) whose every AXI4-Stream port of every compute unit and every PLIO is linked."""
    names = sorted(p.stem for p in BITSTREAMS.glob("*.json") if p.name != "manifest_schema.json")
    assert {"vck5000_engine", "vck190_engine", "engine_small", "engine_small_dual"} <= set(names)
    for name in names:
        m = load_manifest(BITSTREAMS / f"{name}.json")
        assert m.engine is not None and m.data["streams"] == {"doc": "hw/ENGINE.md", "version": 3}, name
        linked = {e for link in m.data["connectivity"] for e in (link["from"], link["to"])}
        axis = {f"{cu}.{p['name']}" for k in m.data["kernels"] for cu in compute_units(k) for p in k["ports"]
                if p["protocol"] == "axis"}
        assert axis <= linked and {f"ai_engine_0.{p['name']}" for p in m.data["graph"]["plios"]} <= linked, name

"""Bitstream manifests: the committed files validate, equal what the kernels' Python generates, and
broken manifests are refused naming the file and field."""

from __future__ import annotations

import copy
import json

import pytest

from vckattn.hw.manifest import BITSTREAMS, BUILDS, ManifestError, build_manifest, load_manifest, validate_manifest


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_committed_manifest_is_generated_and_valid(name):
    committed = json.loads((BITSTREAMS / f"{name}.json").read_text())
    generated = build_manifest(name)
    # the UUID is recorded by the build (make xclbin); everything else must match the sources
    committed["xclbin"]["uuid"] = None
    assert committed == generated, f"bitstreams/{name}.json is stale: regenerate with write_manifests()"
    m = load_manifest(name)
    assert m.tile.lanes == 4 and m.max_seq_len == 1024
    assert m.register_offset("swiftmax", "a_mult") == 0x08


def test_register_maps_match_the_rtl():
    from vckattn.golden.online_softmax_int import online_softmax_regmap
    from vckattn.golden.swiftmax_int import swiftmax_regmap

    m = load_manifest("vck5000_attention")
    for kernel, rm in (("swiftmax", swiftmax_regmap()), ("online_softmax", online_softmax_regmap(1024))):
        for e in rm.describe():
            assert m.register_offset(kernel, e["name"]) == e["offset"]


@pytest.mark.parametrize("mutate,field,message", [
    (lambda d: d.pop("tile"), "(top level)", "'tile' is a required property"),
    (lambda d: d["tile"].update(lanes=3), "tile", "multiples of lanes"),
    (lambda d: d.update(max_seq_len=1000), "max_seq_len", "multiple of tile.key_block"),
    (lambda d: d["xclbin"].update(uuid="not-a-uuid"), "xclbin.uuid", "does not match"),
    (lambda d: d["kernels"][3]["registers"][2].update(offset=6), "kernels.3.registers.2.offset", "multiple of 4"),
    (lambda d: d["kernels"].append(copy.deepcopy(d["kernels"][0])), "kernels", "duplicate kernel names"),
    (lambda d: d.update(normalizers=["swiftmax", "softmax"], kernels=d["kernels"][:4]), "normalizers",
     "'softmax' has no kernel"),
    (lambda d: d["formats"]["online_softmax"].update(block=8), "formats.online_softmax.block", "tile.lanes"),
])
def test_broken_manifests_are_refused(mutate, field, message):
    d = build_manifest("vck5000_attention")
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
    (lambda m: _set_link(m, 0, to="ai_engine_0.s_out"), "connectivity.0.to", "not an input"),
    (lambda m: _set_link(m, 4, to="score_switch.s_in"), "connectivity.4.to", "connected twice"),
    (lambda m: _set_link(m, 4, to="ai_engine_0.q_in"), "connectivity.4.to", "connected twice"),
    (lambda m: m["connectivity"].pop(), "connectivity", "unconnected: ai_engine_0.o_out, s2mm_out.o_in"),
    (lambda m: m["graph"]["plios"][0].update(bits=64), "connectivity.0", "differ in width"),
    (lambda m: _drop_port(m, "score_switch", "mask_in"), "connectivity.4.to", "no stream port"),
])
def test_broken_connectivity_is_refused(mutate, field, message):
    """The stream links (Vitis ``sc=``) must join existing output/input streams of equal width, each once."""
    m = build_manifest("vck5000_attention")
    mutate(m)
    with pytest.raises(ManifestError) as exc:
        validate_manifest(m, "x.json")
    assert exc.value.field == field and message in exc.value.message


def test_every_axis_port_is_linked_in_both_builds():
    for name in BUILDS:
        m = build_manifest(name)
        linked = {e for link in m["connectivity"] for e in (link["from"], link["to"])}
        axis = {f"{k['name']}.{p['name']}" for k in m["kernels"] for p in k["ports"] if p["protocol"] == "axis"}
        assert axis <= linked and {f"ai_engine_0.{p['name']}" for p in m["graph"]["plios"]} <= linked


def test_every_committed_manifest_validates():
    """bitstreams/*.json are all manifests (the deploy command reads them all): v1 builds and engines alike."""
    names = sorted(p.stem for p in BITSTREAMS.glob("*.json") if p.name != "manifest_schema.json")
    assert {"vck5000_attention", "vck190_attention", "vck5000_engine", "vck190_engine", "engine_small"} <= set(names)
    for name in names:
        m = load_manifest(BITSTREAMS / f"{name}.json")
        assert (m.engine is None) == name.endswith("_attention")

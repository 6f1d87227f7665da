"""Bitstream manifests: the committed files validate, equal what the kernels' Python generates, and
broken manifests are refused naming the file and field."""

from __future__ import annotations

import copy
import json

import pytest

from vckattn.host.manifest import BITSTREAMS, BUILDS, ManifestError, build_manifest, load_manifest, validate_manifest


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
    from vckattn.hw.pl.online_softmax import online_softmax_regmap
    from vckattn.hw.pl.swiftmax import swiftmax_regmap

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

"""Deployment bundles (host/bundle.py): write -> load round trip, every refusal, a fuzz test, `vckattn inspect`."""

from __future__ import annotations

import copy
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import fields, is_dataclass
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy as stnp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vckattn
from vckattn.golden.bhyt_int import NormFormat, bhyt_site_registers
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat, online_softmax_registers
from vckattn.golden.requant import requant_registers
from vckattn.golden.swiftmax_int import SwiftMaxFormat, choose_out_frac, swiftmax_head_registers
from vckattn.host import bundle as B
from vckattn.host import cli
from vckattn.host.bundle import Bundle, BundleError, describe, load_bundle, write_bundle
from vckattn.host.export.writer import numeric_formats

D, HEADS, HEAD_DIM, VOCAB = 8, 2, 4, 32
MODEL_FIDELITY = {"metric": "embedding_cosine", "score": 0.93, "min": 0.88, "float_swiftmax": 0.94, "threshold": 0.9,
                  "samples": 32, "data": "32 held-out reference-manual sentences", "layers": [0, 1],
                  "reference": "the source checkpoint with softmax in every layer"}
S_H = 0.05  # scale of the block input h (BHyT statistic)


# --------------------------------------------------------------------------- a small valid bundle


def make_parts(seed: int = 0) -> tuple[dict, dict[str, np.ndarray], dict[str, dict]]:
    """(manifest without tensors, tensors, tensor_meta) of a 2-layer bundle: layer 0 SwiftMax, layer 1
    online softmax, both with BHyT blocks; registers from the golden constant functions."""
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {"embeddings.word": rng.normal(size=(VOCAB, D)).astype(np.float32)}
    meta: dict[str, dict] = {}
    layers = []
    for i, normalizer in enumerate(("swiftmax", "softmax")):
        pre = f"layers.{i}."
        s_x, s_q, s_k, s_v, s_a = 0.021 + 0.001 * i, 0.031, 0.027, 0.019, 0.011
        s_w = {}
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            s_w[proj] = rng.uniform(0.001, 0.01, D).astype(np.float32)
            tensors[pre + proj + ".weight"] = rng.integers(-127, 128, (D, D)).astype(np.int8)
            tensors[pre + proj + ".weight_scale"] = s_w[proj]
            tensors[pre + proj + ".bias"] = rng.integers(-5000, 5000, D).astype(np.int32)
            meta[pre + proj + ".weight"] = {"format": "Q8.0", "scale": pre + proj + ".weight_scale"}
            meta[pre + proj + ".bias"] = {"format": "Q20.0", "scale": None}
        requant = {}
        for which, s_out in (("q", s_q), ("k", s_k), ("v", s_v)):
            r = requant_registers(s_x * s_w[which + "_proj"].astype(np.float64) / s_out)
            tensors[pre + f"requant.{which}.mult"] = r.mult.astype(np.int32)
            tensors[pre + f"requant.{which}.shift"] = r.shift.astype(np.int8)
            meta[pre + f"requant.{which}.mult"] = {"format": "Q18.0"}
            requant[which] = {"mult": pre + f"requant.{which}.mult", "shift": pre + f"requant.{which}.shift"}
        if normalizer == "swiftmax":  # schema 2: per-head constants
            beta, gamma = [1.25 + 0.5 * h for h in range(HEADS)], [3.5 + h for h in range(HEADS)]
            p_frac = choose_out_frac(1.7)
            sm = {"beta": beta, "gamma": gamma,
                  "registers": swiftmax_head_registers(s_q, s_k, HEAD_DIM, beta, gamma, p_frac, HEADS).as_dict()}
            osm = None
        else:
            p_frac = OnlineSoftmaxFormat().out_frac
            sm, osm = None, {"registers": online_softmax_registers(s_q, s_k, HEAD_DIM).as_dict()}
        rq_a = requant_registers(s_v * 2.0**-p_frac / s_a)
        requant["a"] = {"mult": rq_a.mult, "shift": rq_a.shift}  # numpy scalars: write_bundle converts them
        lam_attn, lam_mlp, kappa, c_attn = 2.0 + i, 1.5, 10.0, 0.4
        site_a = bhyt_site_registers(lam_attn, kappa, rng.uniform(0.5, 1.5, D), D, S_H, S_H)
        site_m = bhyt_site_registers(lam_mlp, kappa, rng.uniform(0.5, 1.5, D), D, 0.07, S_H, c_attn=c_attn,
                                     lam_attn=lam_attn)
        bhyt = {"lam_attn": lam_attn, "lam_mlp": lam_mlp, "kappa": kappa, "c_attn": c_attn, "seq_len": 16}
        for site, regs, tname in (("site_a", site_a, "gamma_attn"), ("site_m", site_m, "gamma_mlp")):
            tensors[pre + "bhyt." + tname] = regs.gamma.astype(np.int16)
            meta[pre + "bhyt." + tname] = {"format": f"Q{16 - regs.g_frac}.{regs.g_frac}"}
            bhyt[site] = {**regs.scalars(), "s_out": regs.s_out}
        layers.append({
            "index": i, "scales": {"s_x": s_x, "s_q": s_q, "s_k": s_k, "s_v": s_v, "s_a": s_a}, "p_frac": p_frac,
            "swiftmax": sm, "online_softmax": osm, "requant": requant, "bhyt": bhyt,
            "tensors": sorted(n for n in tensors if n.startswith(pre)),
        })
    manifest = {
        "source": {"path": "/models/tiny-bert", "kind": "hf-folder", "sha256": "ab" * 32, "model_type": "bert"},
        "model": {"family": "bert", "hidden_size": D, "num_layers": 2, "num_heads": HEADS, "num_kv_heads": HEADS,
                  "head_dim": HEAD_DIM, "intermediate_size": 16, "max_seq_len": 16, "vocab_size": VOCAB},
        "normalizer": "swiftmax", "norm": "bhyt",
        "calibration": {"method": "minmax", "percentile": None, "samples": 16, "tokens": 200,
                        "data": "builtin:cpython-docs", "data_sha256": "cd" * 32},
        "formats": numeric_formats(),
        "layers": layers,
    }
    return manifest, tensors, meta


def same_content(a: Bundle, b: Bundle) -> bool:
    return (a.manifest == b.manifest and a.tensors.keys() == b.tensors.keys()
            and all(x.dtype == b.tensors[n].dtype and x.shape == b.tensors[n].shape
                    and np.array_equal(x, b.tensors[n]) for n, x in a.tensors.items()))


def write_raw(folder: Path, manifest: dict, tensors: dict[str, np.ndarray], seal: bool = True) -> None:
    """Write bundle files without any check (to build invalid bundles); seals the manifest when it can."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / B.MANIFEST_FILE).write_text(json.dumps(manifest, indent=2))
    metadata = None
    if seal:
        try:
            metadata = {B.SEAL_KEY: B._manifest_digest(manifest)}
        except (TypeError, ValueError):  # NaN etc.: unsealed (the loader finds the NaN first)
            metadata = None
    stnp.save_file(tensors, folder / B.TENSORS_FILE, metadata=metadata)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Bundle:
    manifest, tensors, meta = make_parts()
    manifest["model_fidelity"] = dict(MODEL_FIDELITY)  # schema 3's fields: a downgraded version must be refused
    manifest["layers"][0]["swiftmax"]["source"] = "calibration"
    path = write_bundle(tmp_path_factory.mktemp("good") / "bundle", manifest, tensors, meta)
    return load_bundle(path)


# --------------------------------------------------------------------------- round trip, write semantics


def test_round_trip(tmp_path):
    manifest, tensors, meta = make_parts()
    original = copy.deepcopy(manifest)
    path = write_bundle(tmp_path / "b", manifest, tensors, meta)
    assert path == tmp_path / "b"
    assert manifest == original  # the caller's dict is not modified
    assert sorted(p.name for p in path.iterdir()) == ["manifest.json", "tensors.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["b"]  # no temporary folders left
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o777 & ~umask  # readable by whoever may read the parent's files

    b = load_bundle(path)
    assert b.path == path
    assert b.tensors.keys() == tensors.keys()
    for name, a in tensors.items():
        assert b.tensor(name).dtype == a.dtype and np.array_equal(b.tensor(name), a), name
    m = b.manifest
    assert m["schema"] == "vckattn.bundle" and m["schema_version"] == B.SCHEMA_VERSION == 4
    assert m["tool"] == {"name": "vckattn", "version": vckattn.__version__}
    assert m["created"].endswith("Z")
    for key in ("source", "model", "normalizer", "norm", "calibration", "formats"):
        assert m[key] == original[key], key
    expect_layers = json.loads(json.dumps(original["layers"], default=int))
    assert m["layers"] == expect_layers
    assert b.layer(1) == expect_layers[1]
    assert type(m["layers"][0]["requant"]["a"]["mult"]) is int
    t = m["tensors"]["layers.0.q_proj.weight"]
    assert t["dtype"] == "int8" and t["shape"] == [D, D] and t["format"] == "Q8.0"
    assert t["scale"] == "layers.0.q_proj.weight_scale"
    assert t["sha256"] == B.tensor_sha256(tensors["layers.0.q_proj.weight"])
    assert m["tensors"]["embeddings.word"]["format"] == "float32" and m["tensors"]["embeddings.word"]["scale"] is None
    assert m["tensors"]["layers.0.requant.q.shift"]["format"] == "Q8.0"  # default from the dtype
    with pytest.raises(IndexError):
        b.layer(2)
    with pytest.raises(KeyError):
        b.tensor("nope")

    # write a loaded bundle again (format/scale come from its manifest): identical content
    again = load_bundle(write_bundle(tmp_path / "again", b.manifest, b.tensors))
    assert same_content(again, b)


def test_describe_and_inspect(good, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    d = describe(good)
    assert d["model"]["num_layers"] == 2 and d["normalizer"] == "swiftmax" and d["norm"] == "bhyt"
    l0, l1 = d["layers"]
    assert l0["normalizer"] == "swiftmax" and l0["beta"] == [1.25, 1.75] and l0["gamma"] == [3.5, 4.5]
    assert l0["per_head"] and d["warnings"] == [] and l0["fidelity"] is None
    assert l0["p_scale"] == 2.0 ** -l0["p_frac"]
    assert l1["normalizer"] == "softmax" and l1["beta"] is None and l1["p_frac"] == 8
    assert l1["bhyt"]["lam_attn"] == 3.0 and l1["scales"]["s_a"] == 0.011
    assert d["tensors"]["count"] == len(good.tensors)
    assert d["tensors"]["bytes"] == sum(a.nbytes for a in good.tensors.values())
    assert d["tensors"]["by_dtype"]["int8"]["count"] == 2 * 4 + 2 * 3
    assert d["tensors"]["outside_layers"] == ["embeddings.word"]
    assert l0["tensor_bytes"] == sum(good.tensors[n].nbytes for n in good.layer(0)["tensors"])
    json.dumps(d)

    assert cli.main(["inspect", str(good.path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    for word in ("bert", "SwiftMax", "online softmax", "abababababab", "minmax", "builtin:cpython-docs", "BHyT"):
        assert word in out, word
    assert cli.main(["inspect", str(good.path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out) == json.loads(json.dumps(d))


def test_inspect_is_registered():
    assert "inspect" in cli.command_names(cli.build_parser())


def test_schema_file_matches_golden_formats():
    from jsonschema.validators import Draft202012Validator

    schema = json.loads(B.SCHEMA_PATH.read_text())
    Draft202012Validator.check_schema(schema)

    def props(node: dict) -> dict:
        node = node if "$ref" not in node else schema["$defs"][node["$ref"].split("/")[-1]]
        return node.get("properties", {})

    def same_fields(node: dict, obj) -> None:
        p = props(node)
        assert set(p) == {f.name for f in fields(obj)}, type(obj).__name__
        assert set(node.get("required", schema["$defs"].get(node.get("$ref", "/x").split("/")[-1], {})
                            .get("required", []))) == set(p)
        for f in fields(obj):
            if is_dataclass(getattr(obj, f.name)):
                same_fields(p[f.name], getattr(obj, f.name))

    fmts = schema["properties"]["formats"]["properties"]
    # max_heads is a build parameter (the bitstream manifest's), not a numeric format of the bundle
    assert set(props(fmts["swiftmax"])) == {f.name for f in fields(SwiftMaxFormat())} - {"max_heads"}
    assert set(numeric_formats()["swiftmax"]) == set(props(fmts["swiftmax"]))
    same_fields(fmts["online_softmax"], OnlineSoftmaxFormat())
    same_fields(fmts["norm"], NormFormat())


def test_write_validates_like_load(tmp_path):
    manifest, tensors, meta = make_parts()
    manifest["layers"][0]["swiftmax"]["registers"]["a_shift"] = 99
    with pytest.raises(BundleError) as exc:
        write_bundle(tmp_path / "b", manifest, tensors, meta)
    e = exc.value
    assert e.file == str(tmp_path / "b" / "manifest.json")
    assert e.field == "layers[0].swiftmax.registers.a_shift" and "outside 0..47" in e.message
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary folder left

    manifest, tensors, meta = make_parts()
    tensors["layers.0.q_proj.weight_scale"][3] = np.nan
    with pytest.raises(BundleError, match=r"tensors\.safetensors: layers\.0\.q_proj\.weight_scale: contains nan"):
        write_bundle(tmp_path / "b", manifest, tensors, meta)
    manifest, tensors, meta = make_parts()
    tensors["x.f64"] = np.zeros(3)
    with pytest.raises(BundleError, match=r"x\.f64: dtype float64 cannot be stored"):
        write_bundle(tmp_path / "b", manifest, tensors, meta)
    manifest, tensors, meta = make_parts()
    manifest["source"]["opened"] = object()
    with pytest.raises(BundleError, match=r"source\.opened: a object cannot be stored"):
        write_bundle(tmp_path / "b", manifest, tensors, meta)
    manifest, tensors, meta = make_parts()
    meta["nope"] = {"format": "Q8.0"}
    with pytest.raises(BundleError, match="tensor_meta names a tensor that is not being written"):
        write_bundle(tmp_path / "b", manifest, tensors, meta)
    assert list(tmp_path.iterdir()) == []


def test_write_target_rules(tmp_path):
    manifest, tensors, meta = make_parts()
    target = tmp_path / "b"
    target.mkdir()  # an empty folder is fine
    write_bundle(target, manifest, tensors, meta)
    with pytest.raises(BundleError, match="a bundle already exists here; pass overwrite=True"):
        write_bundle(target, manifest, tensors, meta)
    before = load_bundle(target).manifest["created"]
    manifest2 = copy.deepcopy(manifest)
    manifest2["created"] = "2030-01-02T03:04:05Z"
    write_bundle(target, manifest2, tensors, meta, overwrite=True)
    assert load_bundle(target).manifest["created"] == "2030-01-02T03:04:05Z" != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(BundleError, match="exists and is not a bundle folder .*notes.txt.*refusing"):
        write_bundle(other, manifest, tensors, meta, overwrite=True)
    assert (other / "notes.txt").read_text() == "keep me" and sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(BundleError, match="exists and is not a folder"):
        write_bundle(tmp_path / "file", manifest, tensors, meta, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "file", "other"]


def test_write_creates_parents_and_relative_paths(tmp_path, monkeypatch):
    manifest, tensors, meta = make_parts()
    monkeypatch.chdir(tmp_path)
    out = write_bundle(Path("deep/er/b"), manifest, tensors, meta)
    assert out == Path("deep/er/b") and load_bundle(tmp_path / "deep/er/b").manifest["model"]["hidden_size"] == D


# --------------------------------------------------------------------------- refusals: one per class


def _manifest_case(edit, field: str, message: str, reseal: bool = True):
    return ("manifest", edit, reseal, "manifest.json", field, message)


def _set(path, value):
    def edit(m):
        node = m
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    return edit


def _delete(path):
    def edit(m):
        node = m
        for p in path[:-1]:
            node = node[p]
        del node[path[-1]]
    return edit


def _add(path, delta):
    def edit(m):
        node = m
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] += delta
    return edit


def _swap_layers(m):
    m["layers"].reverse()


def _layer_lists_foreign_tensor(m):
    m["layers"][1]["tensors"].append("layers.0.q_proj.weight")
    m["layers"][0]["tensors"].remove("layers.0.q_proj.weight")


def _unlisted(m):
    m["layers"][0]["tensors"].remove("layers.0.bhyt.gamma_attn")


def _both_normalizers(m):
    m["layers"][0]["online_softmax"] = m["layers"][1]["online_softmax"]


MANIFEST_CASES = [
    _manifest_case(_set(("schema",), "acme.bundle"), "schema", 'unknown schema "acme.bundle": not a vckattn bundle'),
    _manifest_case(_set(("schema_version",), 5), "schema_version",
                   "unsupported schema_version 5: this vckattn 0.1.0 reads schema_version 1, 2, 3, 4; it was written "
                   "by a newer vckattn: upgrade vckattn"),
    _manifest_case(_delete(("schema_version",)), "schema_version",
                   "missing (this vckattn 0.1.0 reads schema_version 1, 2, 3, 4)"),
    _manifest_case(_set(("schema_version",), 1), "layers[0].swiftmax.beta",
                   "per-head values need schema_version 2"),
    _manifest_case(_set(("layers", 0, "swiftmax", "gamma"), [3.5]), "layers[0].swiftmax.gamma",
                   "schema_version 4 needs one value per query head (2, model.num_heads)"),
    _manifest_case(_set(("layers", 0, "swiftmax", "registers", "b_beta"), -1000),
                   "layers[0].swiftmax.registers.b_beta", "schema_version 4 needs one value per query head"),
    _manifest_case(_delete(("layers", 1, "scales", "s_v")), "layers[1].scales.s_v", "missing (required field)"),
    _manifest_case(_set(("model", "hidden_size"), "8"), "model.hidden_size", 'must be integer, got string "8"'),
    _manifest_case(_set(("model", "hidden_size"), 8.0), "model.hidden_size", "must be integer, got number 8.0"),
    _manifest_case(_set(("layers", 0, "colour"), "red"), "layers[0].colour", "unknown field (allowed here: "),
    _manifest_case(_set(("model", "family"), "gpt"), "model.family",
                   'must be one of "bert", "vit", "llama"; got "gpt"'),
    _manifest_case(_set(("source", "sha256"), "xyz"), "source.sha256", "must be a sha256 digest"),
    _manifest_case(_set(("created",), "yesterday"), "created", "must be an ISO 8601 UTC time"),
    _manifest_case(_set(("created",), "2026-13-01T00:00:00Z"), "created", "not a valid date and time"),
    _manifest_case(_set(("calibration", "percentile"), 99.9), "calibration.percentile", "must be null"),
    _manifest_case(_set(("layers", 0, "scales", "s_x"), math.nan), "layers[0].scales.s_x",
                   "must be a finite number, got nan"),
    _manifest_case(_set(("layers", 0, "swiftmax", "beta", 1), math.inf), "layers[0].swiftmax.beta[1]",
                   "must be a finite number, got inf"),
    _manifest_case(_set(("layers", 0, "swiftmax", "gamma", 0), -3.5), "layers[0].swiftmax.gamma[0]",
                   "must be > 0; got -3.5"),
    _manifest_case(_set(("layers", 1, "scales", "s_q"), 0.0), "layers[1].scales.s_q", "must be > 0; got 0.0"),
    _manifest_case(_set(("layers", 1, "bhyt", "kappa"), 0), "layers[1].bhyt.kappa", "must be > 0; got 0"),
    _manifest_case(_set(("layers", 1, "bhyt", "c_attn"), -math.inf), "layers[1].bhyt.c_attn", "finite"),
    _manifest_case(_set(("layers", 0, "bhyt", "lam_attn"), -2.0), "layers[0].bhyt.lam_attn", "must be > 0"),
    _manifest_case(_set(("layers", 0, "swiftmax", "registers", "a_shift"), 99),
                   "layers[0].swiftmax.registers.a_shift", "a_shift 99 outside 0..47"),
    _manifest_case(_set(("layers", 0, "swiftmax", "registers", "a_mult"), 1 << 30),
                   "layers[0].swiftmax.registers.a_mult", "does not fit 24 signed bits"),
    _manifest_case(_set(("layers", 0, "swiftmax", "registers", "c_out", 1), -(1 << 23) - 1),
                   "layers[0].swiftmax.registers.c_out", "head 1: c_out"),
    _manifest_case(_add(("layers", 0, "swiftmax", "registers", "b_beta", 1), 100),
                   "layers[0].swiftmax.registers.b_beta",
                   "but swiftmax_head_registers(s_q, s_k, model.head_dim, beta, gamma, p_frac) gives"),
    _manifest_case(_set(("layers", 0, "swiftmax", "beta", 0), 1e9), "layers[0].swiftmax",
                   "beta/gamma/s_q/s_k give no representable registers"),
    _manifest_case(_add(("layers", 0, "swiftmax", "registers", "out_frac"), 1),
                   "layers[0].swiftmax.registers.out_frac", "but p_frac = 7"),
    _manifest_case(_set(("layers", 0, "swiftmax", "p_max"), 1.0), "layers[0].swiftmax.p_max",
                   "= 1.0, but the kernel saturates at (2^8 - 1)·2^-p_frac = 1.9921875 (p_frac 7)"),
    _manifest_case(_set(("layers", 0, "swiftmax", "p_max"), 0.0), "layers[0].swiftmax.p_max", "must be > 0"),
    _manifest_case(_set(("formats", "online_softmax", "p_rounding"), "nearest"), "formats.online_softmax.p_rounding",
                   '= "nearest", but this vckattn\'s kernels are built with "cumulative"'),
    _manifest_case(_set(("formats", "online_softmax", "p_rounding"), "stochastic"),
                   "formats.online_softmax.p_rounding", "must be one of"),
    _manifest_case(_delete(("formats", "online_softmax", "p_rounding")), "formats.online_softmax.p_rounding",
                   "missing (required field)"),
    _manifest_case(_set(("layers", 1, "online_softmax", "registers", "a_shift"), -1),
                   "layers[1].online_softmax.registers.a_shift", "-1 outside 0..47"),
    _manifest_case(_set(("layers", 1, "online_softmax", "registers", "a_mult"), 0),
                   "layers[1].online_softmax.registers.a_mult", "0 outside 1..8388607"),
    _manifest_case(_add(("layers", 1, "online_softmax", "registers", "a_mult"), 2),
                   "layers[1].online_softmax.registers.a_mult", "online_softmax_registers(s_q, s_k, model.head_dim)"),
    _manifest_case(_set(("layers", 1, "p_frac"), 7), "layers[1].p_frac", "output P is UQ0.8"),
    _manifest_case(_add(("layers", 1, "requant", "a", "mult"), 5), "layers[1].requant.a.mult",
                   "requant_registers(s_v·2^-p_frac/s_a) gives"),
    _manifest_case(_set(("layers", 0, "requant", "a", "shift"), 63), "layers[0].requant.a.shift", "must be <= 62"),
    _manifest_case(_set(("layers", 0, "bhyt", "site_a", "k_mult"), 1 << 20), "layers[0].bhyt.site_a.k_mult",
                   "outside 1..131071 (positive, 18-bit signed register)"),
    _manifest_case(_add(("layers", 0, "bhyt", "site_a", "k_mult"), 3), "layers[0].bhyt.site_a.k_mult",
                   "bhyt_site_registers(lam_attn, kappa, d=model.hidden_size, s_in=s_stat) gives"),
    _manifest_case(_set(("layers", 0, "bhyt", "site_m", "eps_int"), 1 << 41), "layers[0].bhyt.site_m.eps_int",
                   "outside 0..2^40-1"),
    _manifest_case(_set(("layers", 0, "bhyt", "site_a", "c_int"), 5), "layers[0].bhyt.site_a.c_int", "must be 0"),
    _manifest_case(_set(("layers", 0, "bhyt", "site_m", "g_frac"), 32), "layers[0].bhyt.site_m.g_frac",
                   "must be <= 31; got 32"),
    _manifest_case(_set(("layers", 0, "bhyt"), None), "layers[0].bhyt", 'norm is "bhyt": every layer needs'),
    _manifest_case(_set(("layers", 0, "swiftmax"), None), "layers[0].swiftmax",
                   "exactly one of swiftmax and online_softmax must be set (the other null); got neither"),
    _manifest_case(_both_normalizers, "layers[0].swiftmax", "got both"),
    _manifest_case(_set(("normalizer",), "softmax"), "layers[0].swiftmax", 'normalizer is "softmax"'),
    _manifest_case(_set(("formats", "swiftmax", "acc_bits"), 16), "formats.swiftmax.acc_bits",
                   "= 16, but this vckattn's kernels are built with 24"),
    _manifest_case(_set(("formats", "norm", "tanh", "interp"), False), "formats.norm.tanh.interp", "built with true"),
    _manifest_case(_swap_layers, "layers[0].index", "= 1, expected 0 (layers are listed in order 0..1)"),
    _manifest_case(_set(("model", "num_layers"), 3), "model.num_layers", "= 3, but the manifest lists 2 layers"),
    _manifest_case(_set(("model", "num_kv_heads"), 3), "model.num_kv_heads", "does not divide num_heads"),
    _manifest_case(lambda m: m["layers"][0]["tensors"].append("layers.0.nope"), "layers[0].tensors[20]",
                   "tensor 'layers.0.nope' is not in the bundle's tensors"),
    _manifest_case(_layer_lists_foreign_tensor, "layers[1].tensors[20]",
                   "tensor 'layers.0.q_proj.weight' of layer 1 must be named layers.1.*"),
    _manifest_case(_unlisted, 'tensors["layers.0.bhyt.gamma_attn"]', "not listed in layers[0].tensors"),
    _manifest_case(_set(("tensors", "layers.0.q_proj.weight", "scale"), "layers.0.nope"),
                   'tensors["layers.0.q_proj.weight"].scale', "refers to tensor 'layers.0.nope', which is not in"),
    _manifest_case(_set(("tensors", "layers.0.q_proj.weight", "scale"), "layers.0.k_proj.bias"),
                   'tensors["layers.0.q_proj.weight"].scale', "must be 1-D float32"),
    _manifest_case(_set(("tensors", "layers.0.q_proj.weight", "scale"), -1.0),
                   'tensors["layers.0.q_proj.weight"].scale', "must be > 0"),
    _manifest_case(_set(("tensors", "embeddings.word", "scale"), 0.5), 'tensors["embeddings.word"].scale',
                   "a float32 tensor has no quantization scale"),
    _manifest_case(_set(("layers", 0, "requant", "q", "mult"), "layers.0.nope"), "layers[0].requant.q.mult",
                   "refers to tensor 'layers.0.nope', which is not in the bundle"),
    _manifest_case(_set(("layers", 0, "requant", "k", "shift"), "layers.0.k_proj.weight_scale"),
                   "layers[0].requant.k.shift", "must hold integer registers, not float32"),
    _manifest_case(_set(("tensors", "layers.0.q_proj.weight", "format"), "Q16.0"),
                   'tensors["layers.0.q_proj.weight"].dtype', "= int8, but format Q16.0 is stored as int16"),
    _manifest_case(_set(("tensors", "layers.0.q_proj.weight", "format"), "Q1.-5"),
                   'tensors["layers.0.q_proj.weight"].format', "format Q1.-5 has -4 bits"),
    _manifest_case(_set(("tensors", "bad name!"), {}), 'tensors["bad name!"]', "invalid tensor name"),
    _manifest_case(_set(("tensors", "layers.0.q_proj.weight", "dtype"), "uint8"),
                   'tensors["layers.0.q_proj.weight"].dtype', "must be one of"),
    # edited after export, not resealed: every check passes, the seal does not
    _manifest_case(_set(("source", "path"), "/elsewhere"), "", "does not match the manifest sealed into "
                   "tensors.safetensors at export", reseal=False),
]


def test_saturating_swiftmax_layer_round_trips(good, tmp_path):
    """A layer tuned for its P format records its float SwiftMax's saturation, the top of that format."""
    m = copy.deepcopy(good.manifest)
    m["layers"][0]["swiftmax"]["p_max"] = 1.9921875  # (2^8 - 1)·2^-7, p_frac 7
    write_raw(tmp_path / "b", m, good.tensors)
    b = load_bundle(tmp_path / "b")
    assert b.manifest["layers"][0]["swiftmax"]["p_max"] == 1.9921875
    assert [e["p_max"] for e in describe(b)["layers"]] == [1.9921875, None]


@pytest.mark.parametrize("case", MANIFEST_CASES, ids=lambda c: c[4] or c[5][:30])
def test_manifest_refusals(good, tmp_path, case):
    _, edit, reseal, fname, field, message = case
    m = copy.deepcopy(good.manifest)
    edit(m)
    folder = tmp_path / "b"
    write_raw(folder, m, good.tensors, seal=reseal)
    if not reseal:  # keep the seal of the unedited manifest
        stnp.save_file(good.tensors, folder / B.TENSORS_FILE,
                       metadata={B.SEAL_KEY: B._manifest_digest(good.manifest)})
    with pytest.raises(BundleError) as exc:
        load_bundle(folder)
    e = exc.value
    assert e.file == str(folder / fname)
    assert e.field == field, str(e)
    assert message in e.message, str(e)
    assert str(e) == (f"{e.file}: {field}: {e.message}" if field else f"{e.file}: {e.message}")
    assert "\n" not in str(e)


def _tensors_case(edit, field: str, message: str, fname: str = "tensors.safetensors"):
    return (edit, fname, field, message)


def _drop(name):
    return lambda m, t: t.pop(name)


def _extra(m, t):
    t["layers.0.stowaway"] = np.zeros(2, np.int8)


def _retype(m, t):
    t["layers.0.q_proj.weight"] = t["layers.0.q_proj.weight"].astype(np.int16)


def _reshape(m, t):
    t["layers.0.q_proj.weight"] = t["layers.0.q_proj.weight"].reshape(4, 16)


def _change_value(m, t):
    t["layers.0.q_proj.weight"][0, 0] ^= 1


def _consistent(name, new):
    """Replace a tensor and update its manifest entry (so the sha256 matches)."""
    def edit(m, t):
        t[name] = new(t[name].copy())
        m["tensors"][name]["sha256"] = B.tensor_sha256(t[name])
        m["tensors"][name]["dtype"] = t[name].dtype.name
    return edit


def _setitem(a, idx, v):
    a[idx] = v
    return a


TENSOR_CASES = [
    _tensors_case(_drop("layers.1.o_proj.bias"), "layers.1.o_proj.bias",
                  "listed in manifest.json but missing from tensors.safetensors"),
    _tensors_case(_extra, "layers.0.stowaway", "in tensors.safetensors but not listed in manifest.json"),
    _tensors_case(_retype, "layers.0.q_proj.weight", "stored as int16, but manifest.json says int8"),
    _tensors_case(_reshape, "layers.0.q_proj.weight", "has shape [4, 16], but manifest.json says [8, 8]"),
    _tensors_case(_change_value, "layers.0.q_proj.weight", "does not match manifest.json"),
    _tensors_case(_consistent("layers.0.k_proj.weight_scale", lambda a: _setitem(a, 2, np.nan)),
                  "layers.0.k_proj.weight_scale", "contains nan at index [2] (float tensors must be finite)"),
    _tensors_case(_consistent("embeddings.word", lambda a: _setitem(a, (3, 1), -np.inf)), "embeddings.word",
                  "contains -inf at index [3, 1]"),
    _tensors_case(_consistent("layers.1.v_proj.weight_scale", lambda a: _setitem(a, 5, 0.0)),
                  "layers.1.v_proj.weight_scale", "per-channel scales (of layers.1.v_proj.weight) must be > 0; "
                                                  "found 0.0 at index 5"),
    _tensors_case(_consistent("layers.1.o_proj.bias", lambda a: _setitem(a, 1, 1 << 21)), "layers.1.o_proj.bias",
                  "outside its format Q20.0 (-524288..524287)"),
    _tensors_case(_consistent("layers.0.requant.v.shift", lambda a: _setitem(a, 0, 63)), "layers.0.requant.v.shift",
                  "requant shift registers of layers[0].requant.v must be in 0..62; found 63 at index 0"),
    _tensors_case(_consistent("layers.0.requant.q.mult", lambda a: _setitem(a, 7, 0)), "layers.0.requant.q.mult",
                  "must be in 1..131071; found 0 at index 7"),
]


@pytest.mark.parametrize("case", TENSOR_CASES, ids=lambda c: c[3][:40])
def test_tensor_refusals(good, tmp_path, case):
    edit, fname, field, message = case
    m, t = copy.deepcopy(good.manifest), {k: v.copy() for k, v in good.tensors.items()}
    edit(m, t)
    folder = tmp_path / "b"
    write_raw(folder, m, t)
    with pytest.raises(BundleError) as exc:
        load_bundle(folder)
    e = exc.value
    assert e.file == str(folder / fname) and e.field == field, str(e)
    assert message in e.message, str(e)


def test_file_refusals(good, tmp_path):
    def refused(folder: Path, file: Path, field: str, message: str) -> None:
        with pytest.raises(BundleError) as exc:
            load_bundle(folder)
        e = exc.value
        assert (e.file, e.field) == (str(file), field), str(e)
        assert message in e.message, str(e)

    refused(tmp_path / "absent", tmp_path / "absent", "", "no such bundle folder")
    (tmp_path / "plain").write_text("x")
    refused(tmp_path / "plain", tmp_path / "plain", "", "not a folder")

    def fresh(name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(good.path, folder)
        return folder

    f = fresh("no-manifest")
    (f / "manifest.json").unlink()
    refused(f, f / "manifest.json", "", "missing (a bundle folder holds manifest.json and tensors.safetensors)")
    f = fresh("no-tensors")
    (f / "tensors.safetensors").unlink()
    refused(f, f / "tensors.safetensors", "", "missing")
    f = fresh("dir-tensors")
    (f / "tensors.safetensors").unlink()
    (f / "tensors.safetensors").mkdir()
    refused(f, f / "tensors.safetensors", "", "not a regular file")

    text = (good.path / "manifest.json").read_bytes()
    for name, data, message in (
        ("truncated", text[: len(text) // 2], "not valid JSON (truncated?)"),
        ("garbage", b"\x00\x01 not json", "not valid JSON: Expecting value (line 1, column 1)"),
        ("empty", b"", "empty (truncated?)"),
        ("latin1", b'{"schema": "caf\xe9"}', "not UTF-8 text (byte 15)"),
        ("array", b"[1, 2]", "top level must be a JSON object, got array"),
        ("deep", b"[" * 100000 + b"]" * 100000, "nested too deeply"),
        ("trailing", text + b"{}", "not valid JSON: Extra data"),
    ):
        f = fresh(name)
        (f / "manifest.json").write_bytes(data)
        refused(f, f / "manifest.json", "", message)
    f = fresh("duplicate")
    (f / "manifest.json").write_bytes(b'{"schema": "vckattn.bundle", "schema": "vckattn.bundle"}')
    refused(f, f / "manifest.json", "schema", "the same key appears twice in one JSON object")

    data = (good.path / "tensors.safetensors").read_bytes()
    for name, blob in (("st-truncated", data[:-7]), ("st-appended", data + b"junk"), ("st-empty", b""),
                       ("st-header", b"\xff" * 8 + data[8:]), ("st-json", data[:8] + b"[" + data[9:])):
        f = fresh(name)
        (f / "tensors.safetensors").write_bytes(blob)
        refused(f, f / "tensors.safetensors", "", "not a readable safetensors file (SafetensorError: ")

    f = fresh("unsealed")
    stnp.save_file(good.tensors, f / "tensors.safetensors")
    refused(f, f / "tensors.safetensors", '__metadata__["vckattn.manifest_sha256"]', "missing: no manifest seal")

    other_manifest, other_tensors, other_meta = make_parts(seed=1)
    other = write_bundle(tmp_path / "other", other_manifest, other_tensors, other_meta)
    f = fresh("mixed")
    shutil.copy(other / "tensors.safetensors", f / "tensors.safetensors")
    refused(f, f / "tensors.safetensors", "embeddings.word", "does not match manifest.json")


def test_unexpected_exception_becomes_bundle_error(good, tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(B, "_read_tensors", boom)
    with pytest.raises(BundleError) as exc:
        load_bundle(good.path)
    assert exc.value.file == str(good.path / "tensors.safetensors")
    assert exc.value.message == "cannot read (RuntimeError: disk on fire)"


def test_bundle_error_pickles():
    import pickle

    e = pickle.loads(pickle.dumps(BundleError("a/manifest.json", "layers[0].p_frac", "bad\nthing")))
    assert (e.file, e.field, e.message, str(e)) == ("a/manifest.json", "layers[0].p_frac", "bad thing",
                                                    "a/manifest.json: layers[0].p_frac: bad thing")


# --------------------------------------------------------------------------- fuzz


def _paths(node, prefix=()):
    """Every path into the manifest (dict keys and list indices), parents before children."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append(prefix + (k,))
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append(prefix + (i,))
            out.extend(_paths(v, prefix + (i,)))
    return out


def _get(node, path):
    for p in path:
        node = node[p]
    return node


def _jclass(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    return type(v).__name__


REPLACEMENTS = [None, True, 1.5, 7, "x", [], {}]
# Fields whose value the loader cannot cross-check, so a resealed edit to another valid value loads:
# nullable metadata, a tensor's informational scale, and float constants that no register is derived from
# in the manifest (s_x feeds the per-channel requant tensors; λ_mlp, c_attn, s_out feed site M / the host).
# The whole-model check's record and a layer's β/γ source are what the exporter measured and knew: no other field
# is derived from them (schema 3).
FREE = {("model", "vocab_size"), ("calibration", "data_sha256"), ("tensors", "*", "scale"),
        ("layers", "*", "scales", "s_x"), ("layers", "*", "bhyt", "lam_mlp"), ("layers", "*", "bhyt", "c_attn"),
        ("layers", "*", "bhyt", "site_a", "s_out"), ("layers", "*", "bhyt", "site_m", "s_out"),
        ("model_fidelity",), *(("model_fidelity", k) for k in ("metric", "score", "min", "float_swiftmax",
                                                                 "threshold", "samples", "data", "reference",
                                                                 "layers")),
        ("model_fidelity", "layers", "*"), ("layers", "*", "swiftmax", "source")}


def _is_free(path: tuple) -> bool:
    for pattern in FREE:
        if len(pattern) == len(path) and all(p == "*" or p == q for p, q in zip(pattern, path, strict=True)):
            return True
    return False


def _mutate_json(data, m: dict, tensors: dict[str, np.ndarray]) -> tuple[str, tuple | None]:
    """Apply one random JSON edit to ``m`` in place; returns (description, the edited path)."""
    op = data.draw(st.sampled_from(["delete", "type", "number", "rename", "shape", "version"]), label="json op")
    if op == "delete":
        path = data.draw(st.sampled_from(_paths(m)), label="path")
        parent = _get(m, path[:-1])
        del parent[path[-1]]
        return f"delete {path}", path
    if op == "type":
        path = data.draw(st.sampled_from(_paths(m)), label="path")
        old = _get(m, path)
        choices = [r for r in REPLACEMENTS if _jclass(r) != _jclass(old)]
        _get(m, path[:-1])[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(choices), label="value"))
        return f"type {path}", path
    if op == "number":
        numbers = [p for p in _paths(m) if _jclass(_get(m, p)) == "number"]
        path = data.draw(st.sampled_from(numbers), label="path")
        old = _get(m, path)
        kind = data.draw(st.sampled_from(["nan", "inf", "-inf", "huge", "negative"]), label="number")
        new = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "negative": -old,
               "huge": (1 << 70) if isinstance(old, int) else 1e300}[kind]
        _get(m, path[:-1])[path[-1]] = new
        return f"number {kind} {path}", path
    if op == "rename":
        name = data.draw(st.sampled_from(sorted(m["tensors"])), label="tensor")
        new = data.draw(st.sampled_from([name + "_x", "layers.9.x", "layers.1.moved", "Zeta"]), label="new name")
        everywhere = data.draw(st.booleans(), label="everywhere")
        text = json.dumps(m)
        if everywhere:
            text = text.replace(json.dumps(name), json.dumps(new))
        else:
            entry = m["tensors"].pop(name)
            m["tensors"][new] = entry
            text = json.dumps(m)
        m.clear()
        m.update(json.loads(text))
        return f"rename {name} -> {new} ({'everywhere' if everywhere else 'entry'})", None
    if op == "shape":
        name = data.draw(st.sampled_from(sorted(m["tensors"])), label="tensor")
        shape = m["tensors"][name]["shape"]
        how = data.draw(st.sampled_from(["append", "drop", "grow", "reverse"]), label="how")
        new = {"append": shape + [1], "drop": shape[:-1], "grow": [shape[0] + 1] + shape[1:] if shape else [1],
               "reverse": shape[::-1]}[how]
        m["tensors"][name]["shape"] = new
        return f"shape {how} {name}", None
    value = data.draw(st.sampled_from([0, 2, 99, "1", 1.0, None, True]), label="version")
    m["schema_version"] = value
    return f"schema_version {value!r}", ("schema_version",)


def _mutate_tensors(data, tensors: dict[str, np.ndarray]) -> str:
    op = data.draw(st.sampled_from(["value", "dtype", "drop", "add", "rename"]), label="tensor op")
    names = sorted(tensors)
    name = data.draw(st.sampled_from(names), label="tensor")
    if op == "value":
        a = tensors[name].copy()
        a.reshape(-1).view(np.uint8)[data.draw(st.integers(0, a.nbytes - 1), label="byte")] ^= 1
        tensors[name] = a
    elif op == "dtype":
        new = data.draw(st.sampled_from([d for d in B.DTYPES if d != tensors[name].dtype.name]), label="dtype")
        tensors[name] = tensors[name].astype(new)
    elif op == "drop":
        del tensors[name]
    elif op == "add":
        tensors["layers.0.zz_extra"] = np.zeros(3, np.int8)
    else:
        tensors[name + "_renamed"] = tensors.pop(name)
    return f"tensors {op} {name}"


STATS: Counter = Counter()

#: mutation families and how many mutated bundles each gets (together > 300)
FAMILIES = {"bytes": 250, "json-resealed": 250, "json": 100, "tensors": 100}


@pytest.fixture(scope="module")
def pristine(good):
    return {"manifest": (good.path / "manifest.json").read_bytes(),
            "tensors": (good.path / "tensors.safetensors").read_bytes()}


def _fuzz_one(data, family: str, good: Bundle, pristine: dict[str, bytes]) -> None:
    """Mutate the good bundle once; load_bundle must refuse it with a BundleError or return the original."""
    files = {"manifest": B.MANIFEST_FILE, "tensors": B.TENSORS_FILE}
    root = Path(tempfile.mkdtemp(prefix="vckattn-fuzz-"))
    try:
        folder = root / "b"
        folder.mkdir()
        blobs = dict(pristine)
        manifest = copy.deepcopy(good.manifest)
        edited, reseal, delete = None, False, None
        if family == "bytes":
            kind = data.draw(st.sampled_from(["flip", "truncate", "append", "delete"]), label="kind")
            which = data.draw(st.sampled_from(["manifest", "tensors"]), label="file")
            blob = bytearray(blobs[which])
            if kind == "flip":
                for _ in range(data.draw(st.integers(1, 4), label="flips")):
                    pos = data.draw(st.integers(0, len(blob) - 1), label="pos")
                    blob[pos] ^= data.draw(st.integers(1, 255), label="mask")
            elif kind == "truncate":
                del blob[data.draw(st.integers(0, len(blob) - 1), label="length"):]
            elif kind == "append":
                blob += data.draw(st.binary(min_size=1, max_size=64), label="garbage")
            else:
                delete = data.draw(st.sampled_from([which, "folder", "as-dir"]), label="delete")
            blobs[which] = bytes(blob)
            what = f"{kind} {delete or which}"
        elif family.startswith("json"):
            what, edited = _mutate_json(data, manifest, {})
            blobs["manifest"] = json.dumps(manifest, indent=2).encode()
            if family == "json-resealed":  # the seal matches the edit: the field checks must catch it
                try:
                    blobs["tensors"] = stnp.save(good.tensors, metadata={B.SEAL_KEY: B._manifest_digest(manifest)})
                    reseal = True
                except (TypeError, ValueError):  # NaN/inf cannot be sealed
                    pass
        else:
            tensors = {k: v.copy() for k, v in good.tensors.items()}
            what = _mutate_tensors(data, tensors)
            blobs["tensors"] = stnp.save(tensors, metadata={B.SEAL_KEY: B._manifest_digest(good.manifest)})
        for which, blob in blobs.items():
            (folder / files[which]).write_bytes(blob)
        if delete == "folder":
            shutil.rmtree(folder)
        elif delete == "as-dir":
            (folder / B.TENSORS_FILE).unlink()
            (folder / B.TENSORS_FILE).mkdir()
        elif delete is not None:
            (folder / files[delete]).unlink()

        try:
            got = load_bundle(folder)
        except BundleError as e:  # any other exception type fails the test
            assert "\n" not in str(e) and e.file.startswith(str(folder)) and e.message, (what, str(e))
            STATS[(family, "refused")] += 1
            return
        if same_content(got, good):
            STATS[(family, "loaded, unchanged (no-op mutation)")] += 1
            return
        # A resealed edit of a field the loader cannot cross-check may load: exactly as edited.
        assert reseal and edited is not None and _is_free(edited), f"accepted a changed bundle: {what}"
        assert got.manifest == manifest and same_content(Bundle(folder, manifest, good.tensors), got), what
        STATS[(family, "loaded, free field changed as edited")] += 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_fuzz_mutated_bundles(good, pristine, family):
    """Random byte flips / truncation / garbage / deleted files, JSON edits (with and without a matching
    seal) and tensor edits: load_bundle returns the original bundle or raises BundleError, nothing else."""
    for key in [k for k in STATS if k[0] == family]:
        del STATS[key]

    @settings(max_examples=FAMILIES[family], deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def run(data):
        _fuzz_one(data, family, good, pristine)

    run()
    runs = {k[1]: v for k, v in STATS.items() if k[0] == family}
    print(f"\nfuzz {family}: {sum(runs.values())} mutated bundles: {runs}")
    assert sum(runs.values()) >= 0.9 * FAMILIES[family], runs
    assert runs.get("refused", 0) >= 0.75 * sum(runs.values()), runs


# --------------------------------------------------------------------------- the CLI on bad bundles


def _bad_bundles(good: Bundle, root: Path) -> list[Path]:
    rng = random.Random(7)
    manifest = (good.path / "manifest.json").read_bytes()
    tensors = (good.path / "tensors.safetensors").read_bytes()
    out = []
    for i in range(12):
        folder = root / f"bad{i}"
        shutil.copytree(good.path, folder)
        if i % 4 == 0:
            blob = bytearray(manifest)
            blob[rng.randrange(len(blob))] ^= 0xFF
            (folder / "manifest.json").write_bytes(bytes(blob))
        elif i % 4 == 1:
            (folder / "tensors.safetensors").write_bytes(tensors[: rng.randrange(len(tensors))])
        elif i % 4 == 2:
            m = copy.deepcopy(good.manifest)
            m["layers"][rng.randrange(2)]["scales"]["s_k"] = rng.choice([-1.0, 0.0, math.nan])
            write_raw(folder, m, good.tensors)
        else:
            blob = bytearray(tensors)
            blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
            (folder / "tensors.safetensors").write_bytes(bytes(blob))
        out.append(folder)
    out.append(root / "absent")
    return out


def test_inspect_bad_bundles_in_process(good, tmp_path, capsys):
    for folder in _bad_bundles(good, tmp_path):
        assert cli.main(["inspect", str(folder)]) == 5, folder  # a bad bundle
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith(f"vckattn: error: {folder}") and err.endswith("\n") and err.count("\n") == 1, err
        assert "Traceback" not in err


def test_inspect_bad_bundles_subprocess(good, tmp_path):
    bad = _bad_bundles(good, tmp_path)
    env = {**os.environ, "COLUMNS": "120"}
    for folder in (bad[0], bad[2]):
        r = subprocess.run([sys.executable, "-m", "vckattn.host.cli", "inspect", str(folder)], capture_output=True,
                           text=True, timeout=120, env=env)
        assert r.returncode == 5, r.stderr  # a bad bundle
        assert r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith(f"vckattn: error: {folder}")
    r = subprocess.run([sys.executable, "-m", "vckattn.host.cli", "inspect", str(good.path), "--json"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stderr == "" and json.loads(r.stdout)["model"]["hidden_size"] == D


def test_seal_is_what_protects_unchecked_fields(good, tmp_path):
    """s_x feeds only the per-channel requant tensors, so no manifest check can tell a changed s_x: an edited
    manifest loads only when it is sealed again (i.e. written through write_bundle)."""
    m = copy.deepcopy(good.manifest)
    m["layers"][0]["scales"]["s_x"] *= 2
    unsealed = tmp_path / "unsealed"
    shutil.copytree(good.path, unsealed)
    (unsealed / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleError, match="manifest.json: does not match the manifest sealed into"):
        load_bundle(unsealed)
    write_raw(tmp_path / "resealed", m, good.tensors)
    assert load_bundle(tmp_path / "resealed").manifest == m


def test_schema_register_fields_come_from_the_declarations():
    """The bundle's register fields are the kernels' writable registers (declared once in golden) plus
    SwiftMax's out_frac: the schema file names none of them itself."""
    from vckattn.golden.online_softmax_int import online_softmax_regmap
    from vckattn.golden.swiftmax_int import swiftmax_regmap

    schema = B._schema()
    sm, osm = schema["$defs"]["swiftmax_registers"], schema["$defs"]["online_softmax_registers"]
    rm = swiftmax_regmap()  # the writable registers and the per-head memories (b_beta, c_out), plus out_frac
    assert set(sm["required"]) == {r.name for r in rm.writable} | {m.name for m in rm.mems} | {"out_frac"}
    assert osm["required"] == [r.name for r in online_softmax_regmap().writable]
    assert "a_mult" not in B.SCHEMA_PATH.read_text()


def test_schema_1_bundle_loads_with_the_same_constants_for_every_head(tmp_path):
    """A schema-1 bundle (one β/γ and one b_beta/c_out per layer) still loads: its constants mean every head."""
    from vckattn.golden.swiftmax_int import swiftmax_registers
    from vckattn.host.export import to_quant_layer

    manifest, tensors, meta = make_parts()
    sm = manifest["layers"][0]["swiftmax"]
    s = manifest["layers"][0]["scales"]
    p_frac = manifest["layers"][0]["p_frac"]
    sm["beta"], sm["gamma"] = 1.25, 3.5
    sm["registers"] = swiftmax_registers(s["s_q"], s["s_k"], HEAD_DIM, 1.25, 3.5, p_frac).as_dict()
    manifest["schema_version"] = 1
    b = load_bundle(write_bundle(tmp_path / "v1", manifest, tensors, meta))
    assert b.manifest["schema_version"] == 1
    layer = to_quant_layer(b, 0)
    assert layer.swiftmax.n_heads == HEADS and layer.swiftmax.uniform
    assert layer.swiftmax[1] == swiftmax_registers(s["s_q"], s["s_k"], HEAD_DIM, 1.25, 3.5, p_frac)
    summary = describe(b)["layers"][0]
    assert summary["beta"] == 1.25 and not summary["per_head"]



def test_schema_3_records_the_whole_model_check_and_schema_2_still_loads(tmp_path):
    """Schema 3 adds the whole-model check (``model_fidelity``) and each SwiftMax layer's β/γ ``source``; `describe`
    (what `vckattn inspect` prints) shows both. A schema-2 bundle (written by the previous vckattn: neither field)
    still loads and describes them as not recorded; a schema-2 manifest carrying a schema-3 field is refused, and
    so is a check that names a layer the bundle lacks."""
    manifest, tensors, meta = make_parts()
    manifest["model_fidelity"] = dict(MODEL_FIDELITY)
    manifest["layers"][0]["swiftmax"]["source"] = "checkpoint"
    b = load_bundle(write_bundle(tmp_path / "v3", manifest, tensors, meta))
    assert b.manifest["schema_version"] == B.SCHEMA_VERSION
    d = describe(b)
    assert d["model_fidelity"] == MODEL_FIDELITY and d["layers"][0]["beta_source"] == "checkpoint"

    old, tensors, meta = make_parts()
    old["schema_version"] = 2
    v2 = load_bundle(write_bundle(tmp_path / "v2", old, tensors, meta))
    assert v2.manifest["schema_version"] == 2 and "model_fidelity" not in v2.manifest
    d2 = describe(v2)
    assert d2["model_fidelity"] is None and d2["layers"][0]["beta_source"] is None

    for edit, field in ((lambda m: m.__setitem__("model_fidelity", dict(MODEL_FIDELITY)), "model_fidelity"),
                        (lambda m: m["layers"][0]["swiftmax"].__setitem__("source", "calibration"), "layers")):
        bad = copy.deepcopy(old)
        edit(bad)
        with pytest.raises(BundleError, match=f"{field}: .*needs schema_version 3"):
            write_bundle(tmp_path / "bad", bad, tensors, meta)
    stray = copy.deepcopy(manifest)
    stray["model_fidelity"]["layers"] = [0, 5]
    with pytest.raises(BundleError, match=r"model_fidelity\.layers: names layer\(s\) \[5\]"):
        write_bundle(tmp_path / "stray", stray, tensors, meta)
    assert not (tmp_path / "bad").exists() and not (tmp_path / "stray").exists()

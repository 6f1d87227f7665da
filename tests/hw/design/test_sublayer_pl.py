"""The full-size sublayers, the encoder and the decoder, generated whole (hw/design/sublayer_pl.py,
hw/design/generate.py): each manifest declares every kernel and every stream link between the PL top, the movers, the
normalizer channels, the R writers and the AIE graph's PLIOs, each port once; the design-rule check reads its movers'
code and the model's PL resources; `hw generate` writes the folder a Vitis build needs (the PL top's Verilog with its
Vitis wrapper, the link configuration) and `hw check FOLDER` passes it on every rule; `make xclbin DRY_RUN=1` lists
every command with every input present."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from vckattn.host.cli import main
from vckattn.hw.design import check
from vckattn.hw.design.manifest import BITSTREAMS, validate_manifest
from vckattn.hw.design.sublayer_build import FULL_SIZE_BUILDS, SUBLAYER_BUILDS, build_top_plan, sublayer_manifest
from vckattn.hw.design.sublayer_pl import SUBLAYER_PL

ENC = FULL_SIZE_BUILDS["vck5000_sublayer"]
DEC = FULL_SIZE_BUILDS["vck5000_sublayer_decoder"]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def manifest() -> dict:
    m = sublayer_manifest(ENC)
    validate_manifest(m)
    return m


@pytest.fixture(scope="module", params=[ENC, DEC, *SUBLAYER_BUILDS.values()],
                ids=["encoder", "decoder", *SUBLAYER_BUILDS])
def each_manifest(request: pytest.FixtureRequest) -> tuple:
    m = sublayer_manifest(request.param)
    validate_manifest(m)
    return request.param, m


def _endpoints(m: dict) -> Counter:
    return Counter(end for link in m["connectivity"] for end in (link["from"], link["to"]))


def test_every_stream_port_is_linked_once(each_manifest):
    """Every AXI4-Stream port of every compute unit and every PLIO of the graph is in exactly one link, and every
    link joins an output to an input."""
    _, manifest = each_manifest
    ends = _endpoints(manifest)
    ports = {}
    for k in manifest["kernels"]:
        for cu in k.get("compute_units") or [k["name"]]:
            for p in k["ports"]:
                if p["protocol"] == "axis":
                    ports[f"{cu}.{p['name']}"] = p["direction"]
    for p in manifest["graph"]["plios"]:  # seen from the PL: an AIE input is a link's end
        ports[f"ai_engine_0.{p['name']}"] = "out" if p["direction"] == "out" else "in"
    assert set(ends) == set(ports), sorted(set(ends) ^ set(ports))[:6]
    assert all(n == 1 for n in ends.values()), [e for e, n in ends.items() if n != 1][:6]
    for link in manifest["connectivity"]:
        assert ports[link["from"]] == "out" and ports[link["to"]] == "in", link


def test_the_top_is_the_builds_split(manifest):
    """The PL top's section is its plan's (the model's split) and its register windows hold every residual unit."""
    plan = build_top_plan(ENC)
    top = manifest["sublayer"]["pl_top"]
    assert top["readers"] == plan.params.readers and top["descriptor_fifos"] == list(plan.params.desc_depths)
    regs = next(k for k in manifest["kernels"] if k["name"] == SUBLAYER_PL)["registers"]
    bases = {r["offset"] >> top["register_window_bits"] for r in regs}
    assert bases == set(range(1 + top["residual_paths"]))
    assert sum(r["name"].endswith("_y_mult") for r in regs) == top["residual_paths"] == 16


def test_the_decoders_top_holds_its_site_and_rope_units(each_manifest):
    """Every build's PL top is its plan's: a decoder's site readers first, its U buffer's x readers, a register window
    a residual, RoPE and site unit, in that order (the RoPE units' tables, the site units' γ among them)."""
    build, manifest = each_manifest
    p = build_top_plan(build).params
    top = manifest["sublayer"]["pl_top"]
    assert top["readers"] == p.readers and top["descriptor_fifos"] == list(p.desc_depths)
    regs = next(k for k in manifest["kernels"] if k["name"] == SUBLAYER_PL)["registers"]
    wins = top["windows"]
    assert wins == ["status", *(f"r{i}" for i in range(len(p.residual_banks))),
                    *(f"rope{i}" for i in range(p.rope_units)), *(f"site{i}" for i in range(len(p.site_banks)))]
    assert {r["offset"] >> top["register_window_bits"] for r in regs} == set(range(len(wins)))
    for r in regs:
        prefix = r["name"].split("_")[0]
        assert r["offset"] >> top["register_window_bits"] == (wins.index(prefix) if prefix in wins else 0), r["name"]
    assert sum(r["name"].endswith("_gamma") for r in regs) == len(p.site_banks)
    assert sum(r["name"].startswith("rope") and r["name"].endswith("_pos_base") for r in regs) == p.rope_units
    if build.family == "encoder":
        assert list(top["readers"]) == ["x", "residual", "qkv", "a"] and not p.rope_units and not p.site_banks
    else:
        assert list(top["readers"]) == ["site", "residual", "x", "qkv", "a"] and p.rope_units and p.site_banks
    if build is ENC:
        assert top["readers"]["residual"] == 16
    if build is DEC:
        assert (top["readers"]["site"], top["readers"]["residual"], p.rope_units) == (3, 24, 5)


def test_the_committed_manifest_is_the_generated_one(each_manifest):
    build, manifest = each_manifest
    committed = json.loads((BITSTREAMS / f"{build.name}.json").read_text())
    assert committed == json.loads(json.dumps(manifest))


def test_the_pl_rules_read_the_code_and_the_model():
    """22 m_axi ports: the list mover's two bundles x 3 compute units and the R writer's one x 16, as the model
    counts them; a model that counted one R writer fewer fails PL-MAXI; a device a third the size fails PL-RES."""
    ctx = check.sublayer_context(ENC)
    assert ctx.bundles == {"mm2s_list": 2, "s2mm_records": 1} and ctx.compute_units == {"mm2s_list": 3,
                                                                                         "s2mm_records": 16}
    assert not [v for _, vs in check.run_rules(ctx) for v in vs] and not ctx.unchecked
    fewer = replace(ctx, used={**ctx.used, "axi_masters": ctx.used["axi_masters"] - 1})
    assert [v.rule for _, vs in check.run_rules(fewer) for v in vs] == ["PL-MAXI"]
    small = replace(ctx, available={k: v / 3 for k, v in ctx.available.items()})
    assert {v.rule for _, vs in check.run_rules(small) for v in vs} == {"PL-RES"}


def test_the_decoders_pl_rules_pass_on_its_code_and_model():
    """The decoder's movers: the list mover's three compute units and an R writer a W_O output PLIO (24), 30 m_axi
    ports as the model counts them; every rule passes, none unchecked."""
    ctx = check.sublayer_context(DEC)
    assert ctx.compute_units == {"mm2s_list": 3, "s2mm_records": 24} and ctx.used["axi_masters"] == 2 * 3 + 24
    assert not [v for _, vs in check.run_rules(ctx) for v in vs] and not ctx.unchecked


@pytest.mark.slow
def test_generate_writes_the_whole_build_and_check_passes_it(tmp_path, capsys, each_manifest):
    """`hw generate NAME` (the encoder, the decoder) writes the manifest (the committed one), system.cfg with a line a
    link, the normalizer channels' and the PL top's packaging; the PL top's Vitis wrapper has a port a manifest
    signal; `hw check FOLDER` passes every rule."""
    build, manifest = each_manifest
    out = tmp_path / build.name
    assert main(["hw", "generate", build.name, "--out", str(out)]) == 0
    assert "not written" not in capsys.readouterr().out
    assert json.loads((out / "manifest.json").read_text()) == json.loads(json.dumps(manifest))
    cfg = (out / "system.cfg").read_text()
    assert cfg.count("\nsc=") == len(manifest["connectivity"])
    writers = manifest["sublayer"]["pl_top"]["residual_paths"]
    assert f"nk=s2mm_records:{writers}:" in cfg and "nk=mm2s_list:3:mm2s_list_x.mm2s_list_w.mm2s_list_desc" in cfg
    pl = out / "pl_sublayer"
    assert {p.name for p in pl.iterdir()} == {"sublayer_pl.v", "sublayer_pl_core.v", "kernel.xml",
                                              "package_kernel.tcl"}
    wrapper = (pl / "sublayer_pl.v").read_text()
    top = next(k for k in manifest["kernels"] if k["name"] == SUBLAYER_PL)
    for port in top["ports"]:
        name = "s_axi_control" if port["protocol"] == "axi4lite" else port["name"]
        assert re.search(rf"\b{name}_\w+\b", wrapper), name
    assert (out / "pl" / "engine_pl.v").is_file()
    assert main(["hw", "check", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NOT CHECKED" not in text and "all 14 rules pass" in text


@pytest.mark.full
@pytest.mark.parametrize("name", ["vck5000_sublayer", "vck5000_sublayer_decoder", *SUBLAYER_BUILDS])
def test_make_xclbin_dry_run_lists_every_input(tmp_path, name):
    """`make xclbin DESIGN=NAME DRY_RUN=1` exits 0 for every committed sublayer build: every input present, every
    command printed (the sublayer's PL top packaged from its own folder)."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    res = subprocess.run(["make", "-f", "hw/vitis/Makefile", "xclbin", f"DESIGN={name}", "DRY_RUN=1",
                          f"BUILD={tmp_path}", f"VENV={Path(sys.executable).parents[1]}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "MISSING" not in res.stdout
    assert re.search(r"cd \S+/pl_sublayer && vivado .* -source package_kernel.tcl", res.stdout)
    assert re.search(r"v\+\+ .* -l --config \S+/system.cfg", res.stdout)

"""The sublayer's AIE graph (``hw/design/gemm_graph.py`` with ``render.render_graph_h``) and its design-rule check:
the full-size build is the closed-form model's best split; the generated graph has the PLIOs and kernels the model
costs (so the two can disagree); every cascade is a chain of the right kernel functions with the x broadcast, the
packet-split weights and the packet-merged outputs; every sublayer build passes every AIE rule, and builds or graphs
broken on purpose are refused by the rule they break."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace

import pytest

from vckattn.golden.errors import EXIT_INPUT
from vckattn.host.cli import main
from vckattn.hw.design import check, gemm_graph, render
from vckattn.hw.design import layout as lay
from vckattn.hw.design.explore_sublayer import best_placeable, first_placeable, passes_aie_rules
from vckattn.hw.design.sublayer_build import FULL_SIZE_BUILDS, FULL_SIZE_SHAPES, SUBLAYER_BUILDS, split_build, split_of
from vckattn.hw.perf import sublayer as sl

FULL = FULL_SIZE_BUILDS["vck5000_sublayer"]
SMALL_DEC = SUBLAYER_BUILDS["sublayer_small_decoder"]
ALL = {**SUBLAYER_BUILDS, **FULL_SIZE_BUILDS}
BERT = sl.SublayerShape(8, 512)
AIE_RULES = {r.id for r in check.RULES} - {"PL-RES", "AXI-MASTERS", "PL-MAXI"}


def _violations(ctx: check.Context) -> list[check.Violation]:
    return [v for _, vs in check.run_rules(ctx) for v in vs]


@pytest.mark.parametrize("name", sorted(FULL_SIZE_BUILDS))
def test_each_full_size_build_is_the_models_best_split_that_places(name):
    """The full-size builds are the fastest splits whose generated graphs pass every AIE rule; today that is the
    closed form's best split itself (none faster is refused)."""
    shape = sl.SublayerShape(**FULL_SIZE_SHAPES[name])
    best = best_placeable(shape)
    assert split_build(name, shape, best["split"]) == FULL_SIZE_BUILDS[name]
    assert split_of(FULL_SIZE_BUILDS[name]) == best["split"]
    assert best["faster_unplaceable"] == 0 and best["split"] == sl.best_split(shape)["split"]


def test_the_search_skips_splits_whose_graph_breaks_an_aie_rule():
    """43 Q/K/V cascades beside 9 pipelines of 2 score channels: within every resource cap of the model, but its
    generated graph needs more streams across a column boundary than the switches have (AIE-ROUTE); a split with
    more cascades than the array holds does not place at all. The search passes over both to the next split."""
    crowded = sl.split_cost(BERT, sl.SublayerSplit(43, 16, 9, 4, score_channels=2, w_share=2))
    assert max(crowded["resources"]["fraction"].values()) <= 0.8
    bad = [v.rule for v in _violations(check.sublayer_context(split_build("x", BERT, crowded["split"])))]
    assert "AIE-ROUTE" in bad
    too_many = sl.split_cost(BERT, sl.SublayerSplit(80, 16, 9, 4, score_channels=2, w_share=2))
    best = sl.best_split(BERT)
    assert not passes_aie_rules(BERT, crowded) and not passes_aie_rules(BERT, too_many)
    assert first_placeable(BERT, [crowded, too_many, best]) is best
    assert first_placeable(BERT, [crowded, too_many]) is None


def test_the_decoder_build_is_smollm2_with_grouped_query_attention():
    dec = FULL_SIZE_BUILDS["vck5000_sublayer_decoder"]
    assert (dec.family, dec.d_model, dec.qkv_cols) == ("decoder", 576, (9 + 2 * 3) * 64)
    assert dec.qkv.k == dec.o.k == 576


def test_the_generated_graph_has_the_plios_and_kernels_the_model_costs():
    split = sl.SublayerSplit(**sl.best_split(BERT)["split"])
    io = sl.plios(BERT, split)
    graph = check.sublayer_context(FULL).graph
    per_stage = Counter()
    for name, (d, bits, _) in graph.plios.items():
        assert bits == 128
        stage = name.split("_")[0]
        kind = ("x" if "_x" in name else "w" if "_w" in name else "out") if stage in ("qkv", "o") else d
        per_stage[("attention" if stage.startswith("p") else stage, kind)] += 1
    for stage in ("qkv", "o"):
        for kind in ("x", "w", "out"):
            assert per_stage[(stage, kind)] == io[stage][kind], (stage, kind)
    assert per_stage[("attention", "in")] == io["attention"]["in"]
    assert per_stage[("attention", "out")] == io["attention"]["out"]
    used = sl.resources(BERT, split)["used"]
    assert len(graph.kernels) == used["aie_tiles"] == 316
    assert sum(1 for d, _, _ in graph.plios.values() if d == "in") == used["plio_in"]
    assert sum(1 for d, _, _ in graph.plios.values() if d == "out") == used["plio_out"]


def test_each_cascade_is_a_chain_of_its_kernel_functions_with_broadcast_x_split_w_and_merged_out():
    ctx = check.sublayer_context(FULL)
    g = ctx.graph
    conns = {(c.src, c.dst): c.kinds for c in g.connections}
    for st in FULL.gemm_stages():
        k = st.params.kernels
        last = "gemm_proj_last_rq" if st.name == "qkv" else "gemm_proj_last_y"
        for c in range(st.cascades):
            names = [gemm_graph.cascade_kernel(st.name, c, j) for j in range(k)]
            assert [g.kernels[n][0] for n in names] == (["gemm_proj_first<0>"] + [f"gemm_proj_mid<{j}>"
                                                                                   for j in range(1, k - 1)]
                                                         + [f"{last}<{k - 1}>"])
            for a, b in zip(names, names[1:], strict=False):
                assert conns[(f"{a}.out[0]", f"{b}.in[2]")] == ("cascade",)
            (xg,) = [i for i, grp in enumerate(st.x_groups) if c in grp]
            for j, n in enumerate(names):
                assert conns[(f"{st.name}_x{xg}_{j}.out[0]", f"{n}.in[0]")] == ("window",)
        # one x PLIO a K-slice a group, broadcast to every cascade of the group
        for i, grp in enumerate(st.x_groups):
            fan = [c for c in g.connections if c.src == f"{st.name}_x{i}_0.out[0]"]
            assert len(fan) == len(grp)
        # packet ids: a w split serves w_share cascades' kernels; an out merge the cascades of its group
        for i, grp in enumerate(st.w_groups):
            assert g.packet[f"{st.name}_w{i}_split"] == ("pktsplit", len(grp) * k)
        for i, grp in enumerate(st.out_groups):
            if len(grp) > 1:
                assert g.packet[f"{st.name}_out{i}_merge"] == ("pktmerge", len(grp))
    assert ctx.gemm[gemm_graph.cascade_kernel("o", 0, 0)] == FULL.o


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_sublayer_build_passes_every_aie_rule(name):
    """Every rule on every committed build (their PL tops are generated)."""
    ctx = check.sublayer_context(ALL[name])
    assert {r.id for r, _ in check.run_rules(ctx)} == {r.id for r in check.RULES}
    assert not ctx.unchecked
    assert _violations(ctx) == []


def test_a_weight_split_with_too_many_packet_ids_is_refused():
    wide = replace(FULL, w_share=9)  # 9 cascades x 4 kernels = 36 packet ids on one w stream
    bad = [v for v in _violations(check.sublayer_context(wide)) if v.rule == "AIE-PKT"]
    assert bad and all("_w" in v.message and v.found == 36 for v in bad)


def test_a_cascade_kernel_moved_off_its_row_is_refused():
    ctx = check.sublayer_context(FULL)
    k = gemm_graph.cascade_kernel("qkv", 3, 2)
    func, (c, r) = ctx.graph.kernels[k]
    ctx.graph.kernels[k] = (func, (c, r + 1))
    bad = [v for v in _violations(ctx) if v.rule == "AIE-CASCADE"]
    assert any(k in v.message for v in bad)


def test_the_kernels_memory_is_the_gemm_builds():
    """A GEMM kernel's data memory is its own build's (hw/spec/gemm.py), not an attention kernel's: a W_O tile of
    twice the rows no longer fits a tile's memory with the runtime's reserve."""
    ctx = check.sublayer_context(FULL)
    assert not _violations(ctx)
    big = replace(FULL.o, rows=2 * FULL.o.rows)
    ctx.gemm.update({k: big for k in ctx.gemm if k.startswith("o")})
    bad = [v for v in _violations(ctx) if v.rule in ("AIE-DM", "AIE-BANKS")]
    assert bad and all(re.search(r"\bo\d+_k\d", v.message) for v in bad)


def test_too_many_cascades_do_not_place():
    crowded = replace(FULL, o_cascades=40)
    with pytest.raises(render.GenerateError, match="no 4 free tiles"):
        check.sublayer_context(crowded)


def test_the_placement_keeps_cascades_in_the_rows_direction_and_plios_on_pl_columns():
    ctx = check.sublayer_context(FULL)
    for k, (_, (c, r)) in ctx.graph.kernels.items():
        assert 0 <= c < lay.ARRAY_COLUMNS and 0 <= r < lay.ARRAY_ROWS, k
    assert len({t for _, t in ctx.graph.kernels.values()}) == len(ctx.graph.kernels)  # one kernel a tile
    assert all(col in lay.PL_COLUMNS for _, _, col in ctx.graph.plios.values())


def _candidate(tmp_path):
    """A build folder of the AIE half alone: an explorer's candidate (the small decoder's split under another name),
    whose PL top is not generated."""
    from vckattn.hw.design import generate as gen
    from vckattn.hw.design.sublayer_build import BUILD_SHAPES, build_shape, graph_build

    cand = graph_build("candidate", build_shape(SMALL_DEC), split_of(SMALL_DEC))
    assert cand.name not in BUILD_SHAPES
    out = tmp_path / "candidate"
    gen.generate_sublayer(cand, "vck5000", out)
    return cand, out


def test_cli_checks_a_sublayer_build(tmp_path, capsys):
    """The committed builds, whose PL tops are generated, on every rule; a folder of a build whose PL top is not (an
    explorer's candidate) on the AIE rules, its PL rules listed as not checked."""
    out = tmp_path / "drc.json"
    assert main(["hw", "check", "vck5000_sublayer", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "36 Q/K/V + 16 W_O GEMM cascades" in text and "NOT CHECKED" not in text
    doc = json.loads(out.read_text())
    assert doc["passed"] is True and doc["complete"] is True
    assert {r["rule"] for r in doc["rules"]} == {r.id for r in check.RULES}
    assert main(["hw", "check", "vck5000_sublayer_decoder", "--json", str(out)]) == 0
    assert "15 Q/K/V + 24 W_O GEMM cascades" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["passed"] is True and doc["complete"] is True
    assert main(["hw", "check", "sublayer_small_decoder", "--json", str(out)]) == 0
    assert "NOT CHECKED" not in capsys.readouterr().out and json.loads(out.read_text())["complete"] is True
    _, folder = _candidate(tmp_path)
    assert main(["hw", "check", str(folder), "--json", str(out)]) == 0
    assert "NOT CHECKED" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["passed"] is True and doc["complete"] is False
    assert set(doc["unchecked"]) == {"PL-RES", "AXI-MASTERS", "PL-MAXI"}
    assert {r["rule"] for r in doc["rules"]} == AIE_RULES


def test_an_online_softmax_split_is_checked_on_its_graph():
    """The score channels' normalizer is in the PL: an online-softmax split's AIE graph is its SwiftMax twin's, and
    the best online-softmax split places and passes (the generator writes no online-only attention design, so the
    split is not refused for its lanes)."""
    best = sl.best_split(sl.SublayerShape(8, 128), normalizer="online_softmax")
    assert best["split"]["normalizer"] == "online_softmax"
    assert passes_aie_rules(sl.SublayerShape(8, 128), best)


def test_generate_writes_the_sublayer_aie_sources_and_check_reads_them_back(tmp_path, capsys):
    """Generating a build whose PL top is not generated (an explorer's candidate) writes the AIE half (the graph the
    check ran on, each stage's kernels source with its build parameters, the build) and not the rest; `hw check
    FOLDER` checks the folder's own graph, so an edit to it is caught. (The committed builds' whole folders:
    tests/hw/design/test_sublayer_pl.py.)"""
    cand, out = _candidate(tmp_path)
    assert not (out / "manifest.json").exists() and not (out / "system.cfg").exists()
    aie = out / "aie"
    assert {p.name for p in aie.iterdir()} == {"engine_config.h", "graph.h", "graph.cpp", "gemm_qkv.cc", "gemm_o.cc"}
    assert (out / "diagram.png").read_bytes().startswith(b"\x89PNG")
    assert check.parse_graph((aie / "graph.h").read_text()) == check.sublayer_context(cand).graph
    for st in cand.gemm_stages():
        src = (aie / st.source).read_text()
        for d in st.params.defines():
            assert f"#define {d[2:].replace('=', ' ')}\n" in src
        assert src.rstrip().endswith('#include "gemm_proj.cc"  // hw/aie/engine')
    doc = json.loads((out / "build.json").read_text())
    assert doc["board"] == "vck5000"
    from vckattn.hw.design.sublayer_build import SublayerBuild
    assert SublayerBuild.from_json(doc["sublayer"]).to_json() == cand.to_json()
    assert main(["hw", "check", str(out)]) == 0
    capsys.readouterr()
    # the folder's graph, edited: a cascade's second kernel moved one row up
    graph = aie / "graph.h"
    k = gemm_graph.cascade_kernel("qkv", 0, 1)
    m = re.search(rf"adf::location<adf::kernel>\({k}\) = adf::tile\((\d+), (\d+)\);", graph.read_text())
    graph.write_text(graph.read_text().replace(m.group(0), f"adf::location<adf::kernel>({k}) = adf::tile("
                                                              f"{m.group(1)}, {int(m.group(2)) + 1});"))
    assert main(["hw", "check", str(out)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "AIE-CASCADE" in err and len(err.strip().splitlines()) == 1


def test_generate_refuses_a_sublayer_that_breaks_an_aie_rule(tmp_path):
    wide = replace(FULL, w_share=9)
    from vckattn.hw.design import generate as gen
    with pytest.raises(render.DesignRuleError, match="AIE-PKT"):
        gen.generate_sublayer(wide, "vck5000", tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("text", "why"), [("{", "Expecting property name"),
                                           ('{"board": "vck5000", "sublayer": {"name": "x"}}', "no 'qkv'")])
def test_check_refuses_a_broken_sublayer_folder_in_one_line(tmp_path, capsys, text, why):
    (tmp_path / "aie").mkdir()
    (tmp_path / "build.json").write_text(text)
    assert main(["hw", "check", str(tmp_path)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "not a sublayer build written by `vckattn hw generate`" in err and why in err
    assert len(err.strip().splitlines()) == 1


def test_generate_refuses_a_sublayers_own_fields(tmp_path, capsys):
    assert main(["hw", "generate", "vck5000_sublayer", "--out", str(tmp_path / "x"), "--max-seq", "128"]) == 2
    err = capsys.readouterr().err
    assert "a sublayer build's are its own" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x" / "aie").exists()

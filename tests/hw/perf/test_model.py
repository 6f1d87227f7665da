"""The block-level performance model (hw/perf/model.py, explore.py; published.py: test_perf_published.py).

Everything here is checked against what does not come from the model itself: physical bounds
computed from the design's own parameters and device.json, the committed manifest, monotonicity,
resource limits. No figure of the model is hard-coded.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vckattn.hw.design import explore, report
from vckattn.hw.design.manifest import default_manifest, load_manifest
from vckattn.hw.perf import engine_aie, model
from vckattn.hw.perf.model import Design, Workload, evaluate, load_device

DEV = load_device("vck5000")
BERT = Workload(heads=12, d_head=64, seq=512, batch=8, layers=("swiftmax",) * 12)
MANIFEST = load_manifest(default_manifest()).data


# ------------------------------------------------------------------------------------------ device data


def _numbers(node, path=()):
    if isinstance(node, dict) and "value" in node and "source" in node:
        yield path, node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _numbers(v, (*path, k))


@pytest.mark.parametrize("board", ["vck5000", "vck190"])
def test_every_device_number_has_a_unit_and_a_source(board):
    data = json.loads(model.DEVICE_FILE.read_text())
    entries = list(_numbers(data["devices"][board]))
    assert len(entries) >= 20
    cited = tuple(data["sources"])  # short names of the documents listed under "sources"
    for path, e in entries:
        src = e["source"]
        assert isinstance(src, str) and (any(c in src for c in cited) or "assumption" in src), path
        assert isinstance(e.get("unit"), str) and e["unit"], path
    keys = {p[-1] for p, _ in entries}
    for need in ("aie_tiles", "aie_clock_mhz", "macs_per_cycle", "tile_data_memory_bytes", "plio_usable_128bit",
                 "lut", "ff", "dsp", "bram", "uram", "pl_clock_mhz", "ddr_gbps", "pcie_gbps"):
        assert need in keys, need


def test_device_limits_match_the_reference():
    # device.json (DS950, DS957, UG1079): 400 tiles x 128 int8 MACs x 1.25 GHz = 128 TOPS; CHARM's usable PLIOs;
    # 880K LUT after the shell
    assert DEV.peak_int8_ops == pytest.approx(128e12)
    assert DEV.plio_available(128) == {"in": 156, "out": 117}
    assert DEV.plio_available(64) == {"in": 312, "out": 234}
    assert DEV.pl["lut"] == 880_000
    assert load_device("vck190").pl["lut"] > DEV.pl["lut"]  # no PCIe shell on the VCK190
    with pytest.raises(ValueError, match="unknown board"):
        load_device("u55c")


# ----------------------------------------------------------------------------------- the committed design


def test_the_committed_design_comes_from_its_manifest():
    d = model.design_from_manifest(MANIFEST)
    eng, tile = MANIFEST["engine"], MANIFEST["tile"]
    assert d.pipelines == eng["pipelines"] and d.qk_kernels == d.pv_kernels == eng["kernels_per_pipeline"]
    assert (d.score_plios, d.score_bits, d.lanes_swiftmax) == (eng["score_plios"], eng["score_bits"], eng["lanes"])
    assert (d.max_seq, d.head_dim) == (eng["max_keys"], eng["d"])
    assert (d.q_rows, d.key_block) == (tile["q_rows"], tile["key_block"])
    assert d.pl_clock_mhz == MANIFEST["clocks_mhz"]["pl"]
    assert d.kv_resident and d.plio_bits == 128 and d.o_bits == 8
    with pytest.raises(ValueError, match="not an engine build"):
        model.design_from_manifest({"name": "no_engine", "graph": {"kernels": ["qk", "pv"]}})


def test_the_committed_design_fits_is_ddr_bound_and_shows_why():
    """On BERT-base S = 512, batch 8 the committed engine fits the device, its bottleneck is the one DDR bank, it never
    beats its DDR roof, and on chip it never beats what its score channels carry (a score out as int8, a P back, over
    128-bit PLIOs at the PL clock; 4·d ops a score)."""
    d = model.design_from_manifest(MANIFEST)
    p = evaluate(BERT, d, DEV)
    assert p.fits and p.bottleneck == "ddr"
    assert p.ddr_roof_seconds <= p.device_seconds_per_layer
    links = d.pipelines * d.score_plios
    scores_per_s = links * _plio_rate(d) / (d.score_bits / 8)
    assert 0 < p.tops_on_chip * 1e12 <= 4 * BERT.d_head * scores_per_s * (1 + 1e-9)


def test_the_committed_design_costs_its_kernels_instrumented_cycles():
    """Each AIE kernel of the committed design costs the cycles of the committed instrumented data (hw/perf/data/
    engine_kernels.json, whose counts the C-simulated vector path makes: tests/hw/perf/test_engine_aie.py)."""
    d = model.design_from_manifest(MANIFEST)
    rows = {(r["kernel"] + (" (masked tile)" if r["masked"] else ""), r["q_rows"], r["sk"], r["d"], r["score_bits"]):
            r for r in engine_aie.load_data()["bert_base"]}
    kernels = evaluate(BERT, d, DEV).kernels
    assert {k["kernel"] for k in kernels} == {"qk", "qk (masked tile)", "pv_first", "pv_mid", "rq"}
    for k in kernels:
        r = rows[(k["kernel"], k["q_rows"], k["slice_keys"], k["d"], d.score_bits)]
        assert k["cycles"] == r["cycles"]["total"] and k["macs"] == r["macs"], k["kernel"]


def test_json_has_every_field():
    p = evaluate(BERT, model.design_from_manifest(MANIFEST), DEV).to_json()
    for key in ("device", "workload", "design", "stages", "seconds_per_layer", "tops", "fraction_of_peak",
                "bottleneck", "resources", "kernels", "ddr_roof", "assumptions"):
        assert key in p, key
    assert set(p["resources"]) >= {"used", "available"}
    names = [s["name"] for s in p["stages"]]
    assert names == ["ddr", "kv_in", "q_in", "aie_qk", "pl_channel", "aie_pv", "aie_rq", "o_out", "s2mm", "host"]
    for s in p["stages"]:
        assert set(s) >= {"name", "seconds", "bound_by"} and s["seconds"] >= 0
    assert p["bottleneck"] in names
    assert p["tops"] == pytest.approx(BERT.ops_per_layer / p["seconds_per_layer"] / 1e12)
    assert p["fraction_of_peak"] == pytest.approx(p["tops"] / 128)
    json.dumps(p)


@pytest.mark.parametrize(("change", "message"), [({"kv_resident": False}, "kv_resident must be true"),
                                                 ({"score_bits": 32}, "score_bits must be 8 or 16"),
                                                 ({"plio_bits": 64}, "plio_bits must be 128")])
def test_a_design_that_is_not_the_engine_is_refused(change, message):
    """The model costs the engine only: a design it cannot cost is refused by every entry point, not costed."""
    d = replace(model.design_from_manifest(MANIFEST), **change)
    for call in (lambda: evaluate(BERT, d, DEV), lambda: model.layer_seconds(BERT, d, DEV),
                 lambda: model.resources_used(BERT, d, DEV), lambda: model.traffic(BERT, d, DEV)):
        with pytest.raises(ValueError, match=message):
            call()


# ----------------------------------------------------------------------- validation (b): physical bounds


def _plio_rate(d: Design) -> float:
    return min(d.plio_bits / 8 * d.pl_clock_mhz * 1e6, 4 * DEV.aie_clock_hz)


designs = st.builds(
    Design,
    pipelines=st.integers(1, 64), qk_kernels=st.integers(1, 16), pv_kernels=st.integers(1, 16),
    q_rows=st.sampled_from([16, 32, 64]), key_block=st.sampled_from([16, 32]), score_bits=st.sampled_from([8, 16]),
    plio_bits=st.just(128), score_plios=st.just(1), lanes_swiftmax=st.sampled_from([1, 2, 4, 8, 16]),
    lanes_online_softmax=st.sampled_from([1, 2, 4, 8, 16]), pl_clock_mhz=st.sampled_from([200.0, 250.0, 300.0]),
    swiftmax_products=st.sampled_from(["auto", "dsp"]),
)
workloads = st.builds(
    Workload, heads=st.sampled_from([1, 4, 12]), d_head=st.sampled_from([32, 64]), seq=st.integers(16, 1024),
    batch=st.integers(1, 16), layers=st.sampled_from([("swiftmax",), ("online_softmax",),
                                                      ("swiftmax", "online_softmax")]),
    operands=st.sampled_from(["ddr", "on_chip", "host"]),
    norm_site=st.sampled_from([None, "bhyt_approx", "rmsnorm", "layernorm"]),
)


def _valid(d: Design, score_plios: int) -> Design:
    """An engine design (stream contract v3) must pair each QK^T kernel with a P.V kernel, have score channels that
    divide its kernels and lanes that fit a beat."""
    k = min(d.qk_kernels, 16)
    m = max(x for x in (1, 2, 4, 8, 16) if x <= min(score_plios, k) and k % x == 0)
    lanes = min(d.lanes_swiftmax, 128 // d.score_bits)
    return replace(d, qk_kernels=k, pv_kernels=k, score_plios=m, lanes_swiftmax=lanes,
                   lanes_online_softmax=min(d.lanes_online_softmax, 128 // d.score_bits))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads, d=designs, score_plios=st.integers(1, 16))
def test_modeled_time_never_beats_the_physical_bounds(w, d, score_plios):
    d = _valid(d, score_plios)
    try:
        p = evaluate(w, d, DEV)
    except ValueError as exc:  # a tile whose scores overflow the packet header's count: no build runs it
        assume("16-bit count" not in str(exc))
        raise
    t = p.seconds_per_layer
    n_scores = w.batch * w.heads * w.seq * w.seq
    assert t >= w.ops_per_layer / DEV.peak_int8_ops  # ops / peak MACs of the whole array
    assert t >= w.ops_per_layer / (2 * d.aie_kernels * 128 * DEV.aie_clock_hz) * (1 - 1e-9)  # of the kernels used
    links = d.pipelines * d.score_plios
    assert t >= n_scores * d.score_bits / 8 / (links * _plio_rate(d)) * (1 - 1e-9)  # scores AIE -> PL
    assert t >= n_scores / (links * _plio_rate(d)) * (1 - 1e-9)  # P (uint8) PL -> AIE
    for n in w.normalizers:  # elements / (lanes x clock): only the layers of that normalizer
        share = w.layers.count(n) / len(w.layers)
        assert t >= share * n_scores / (links * d.lanes(n) * d.pl_clock_mhz * 1e6) * (1 - 1e-9)
    if w.operands != "on_chip":  # Q, K, V read and A written at least once
        assert t >= 4 * w.batch * w.heads * w.seq * w.d_head / DEV.ddr_bytes_per_s * (1 - 1e-9)
    if w.operands == "host":
        assert t >= 3 * w.batch * w.heads * w.seq * w.d_head / DEV.pcie_bytes_per_s * (1 - 1e-9)
    # a design that exceeds any resource is never reported as fitting
    over = [k for k, avail in p.available.items() if p.used[k] > avail]
    assert p.fits == (not over)
    if d.aie_kernels > DEV.aie_tiles or d.pipelines * (d.score_plios + d.out_plios) > DEV.plio_available(d.plio_bits)[
            "out"]:
        assert not p.fits


def test_resource_overflow_is_named():
    d = Design(pipelines=300, qk_kernels=1, pv_kernels=1, score_bits=8, lanes_swiftmax=16, lanes_online_softmax=0)
    p = evaluate(BERT, d, DEV)
    assert not p.fits and "aie_tiles" in p.over and "plio_out" in p.over
    big = Design(pipelines=4, qk_kernels=1, pv_kernels=1, q_rows=32, score_bits=8)
    q = evaluate(replace(BERT, seq=1024), big, DEV)  # a 1024 x 64 K slice does not fit 32 KB
    assert "aie_kernel_memory_bytes" in q.over


# --------------------------------------------------------------------------------------- monotonicity


BASE = Design(pipelines=4, qk_kernels=4, pv_kernels=4, q_rows=32, key_block=16, score_bits=16, score_plios=2,
              lanes_swiftmax=4, lanes_online_softmax=4)


@pytest.mark.parametrize("w", [BERT, replace(BERT, operands="on_chip", layers=("online_softmax",))])
def test_more_hardware_is_never_slower(w):
    t0 = evaluate(w, BASE, DEV).seconds_per_layer
    for change in ({"pipelines": 8}, {"lanes_swiftmax": 8, "lanes_online_softmax": 8}, {"score_bits": 8},
                   {"score_plios": 4}, {"pl_clock_mhz": 300.0}):
        assert evaluate(w, replace(BASE, **change), DEV).seconds_per_layer <= t0 * (1 + 1e-12), change


def test_more_work_is_never_faster():
    t0 = evaluate(BERT, BASE, DEV).seconds_per_layer
    for change in ({"batch": 16}, {"seq": 1024}, {"heads": 16}):
        assert evaluate(replace(BERT, **change), BASE, DEV).seconds_per_layer > t0, change


def test_norm_site_bhyt_has_no_buffer_and_shorter_latency_than_rmsnorm():
    from vckattn.hw.pl import timing

    w = replace(BERT, operands="on_chip")
    b = evaluate(replace(w, norm_site="bhyt_approx"), BASE, DEV)
    r = evaluate(replace(w, norm_site="rmsnorm"), BASE, DEV)
    assert b.stage("norm_site").latency_s < r.stage("norm_site").latency_s
    # the first output of a 1024-element token: BHyT's unit streams it through, RMSNorm holds the whole token
    beats = 1024 // 4
    first_out = {k: timing.stream_cycles(k, 1, 1024, 4) - beats for k in ("bhyt_approx", "rmsnorm")}
    assert first_out["bhyt_approx"] == timing.latency_cycles("bhyt_approx", 4)  # no buffer: the pipeline alone
    assert first_out["rmsnorm"] >= timing.latency_cycles("rmsnorm", 4) + beats - 1 > first_out["bhyt_approx"]
    plain = evaluate(w, BASE, DEV)
    assert b.seconds_per_layer > plain.seconds_per_layer and r.seconds_per_layer > plain.seconds_per_layer


# ----------------------------------------------------------------------------------- workload sources


def test_workload_from_hf_config_and_bundle_info():
    bert = {"model_type": "bert", "num_attention_heads": 12, "hidden_size": 768, "num_hidden_layers": 12,
            "max_position_embeddings": 512, "layer_norm_eps": 1e-12}
    w = model.workload_from_hf_config(bert, batch=8)
    assert (w.heads, w.d_head, w.seq, len(w.layers), w.norm_site) == (12, 64, 512, 12, None)
    llama = {"model_type": "llama", "num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576,
             "num_hidden_layers": 30, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5}
    w = model.workload_from_hf_config(llama, seq=256)
    assert (w.heads, w.n_kv_heads, w.d_head, w.seq, w.norm_site) == (9, 3, 64, 256, "rmsnorm")
    m = {"family": "llama", "hidden_size": 576, "num_heads": 9, "num_kv_heads": 3, "head_dim": 64, "max_seq_len": 128}
    w = model.workload_from_bundle_info(m, ["swiftmax", "softmax"], "bhyt")
    assert w.layers == ("swiftmax", "online_softmax") and w.norm_site == "bhyt_approx" and w.seq == 128
    with pytest.raises(ValueError, match="kv_heads"):
        Workload(heads=12, d_head=64, seq=8, kv_heads=5)
    with pytest.raises(ValueError, match="normalizer"):
        Workload(heads=12, d_head=64, seq=8, layers=("relu",))


def test_design_json_round_trip_and_checks():
    d = replace(BASE, name="x")
    assert model.design_from_json(json.loads(json.dumps(d.to_json()))) == d
    with pytest.raises(ValueError, match="unknown design fields"):
        model.design_from_json({**d.to_json(), "bogus": 1})
    with pytest.raises(ValueError, match="score_plios"):
        Design(qk_kernels=2, score_plios=3)
    with pytest.raises(ValueError, match="PLIO limit"):
        evaluate(BERT, replace(BASE, pl_clock_mhz=700.0), DEV)
    with pytest.raises(ValueError, match="no online_softmax lanes"):
        evaluate(replace(BERT, layers=("online_softmax",)), replace(BASE, lanes_online_softmax=0), DEV)


# ------------------------------------------------------------------------------------------ exploration


def _random_feasible(w: Workload, rng: random.Random, budget: dict) -> list[tuple[Design, float]]:
    out = []
    cands = list(explore.candidates(w, DEV, 250.0))
    for d in rng.sample(cands, 60):
        n_max = explore._max_pipelines(w, d, DEV, budget)
        if n_max < 1:
            continue
        d = replace(d, pipelines=rng.randint(1, n_max))
        p = evaluate(w, d, DEV)
        assert p.fits
        out.append((d, p.seconds_per_layer))
    return out


@pytest.mark.parametrize("norm", ["swiftmax", "online_softmax"])
def test_explorer_finds_a_fitting_design_no_sampled_design_beats(norm):
    w = replace(BERT, layers=(norm,) * 12)
    t0 = time.perf_counter()
    best = explore.search(w, DEV)
    assert time.perf_counter() - t0 < 60
    p = evaluate(w, best.design, DEV)
    budget = explore.default_budget(DEV)
    assert p.fits and all(p.used[k] <= budget[k] * (1 + 1e-9) for k in budget)
    assert p.seconds_per_layer == pytest.approx(best.seconds)
    # an engine design: narrow scores through the SRS, resident K/V slices, 128-bit PLIOs
    model.check_engine(best.design)
    assert best.design.kv_resident and best.design.score_bits in (8, 16) and best.design.plio_bits == 128
    for _d, t in _random_feasible(w, random.Random(0), budget):
        assert t >= best.seconds * (1 - explore.TIE)


def test_explore_report_and_comparisons():
    ex = explore.explore(BERT, DEV)
    r = ex.to_json()
    assert set(r) >= {"best", "speedup_equal_resources", "lut_ratio_equal_throughput"}
    assert set(r["best"]) == {"swiftmax", "online_softmax"}
    s, o = ex.swiftmax, ex.online_softmax
    assert s.workload.layers == ("swiftmax",) * 12 and o.workload.layers == ("online_softmax",) * 12
    eq = ex.online_equal_resources
    assert eq is not None
    for k in explore.EQUAL_RESOURCE_KEYS:  # equal resources means within the SwiftMax design's budget
        assert eq.used[k] <= s.used[k] * (1 + 1e-9), k
    assert ex.speedup_equal_resources == pytest.approx(eq.seconds_per_layer / s.seconds_per_layer)
    # the online design at SwiftMax's budget cannot beat online softmax's own best design
    assert eq.seconds_per_layer >= o.seconds_per_layer * (1 - explore.TIE)
    a, b = ex.swiftmax_equal_throughput, ex.online_equal_throughput
    target = max(s.seconds_per_layer, o.seconds_per_layer)
    assert a.seconds_per_layer <= target * (1 + explore.TIE) and b.seconds_per_layer <= target * (1 + explore.TIE)
    assert ex.lut_ratio_equal_throughput == pytest.approx(a.used["lut_normalizers"] / b.used["lut_normalizers"])
    assert 0 < ex.lut_ratio_equal_throughput
    json.dumps(r)


# validation (c), published designs: tests/hw/perf/test_published.py


# ------------------------------------------------------------------------------- docs/performance.md


def test_documented_tables_are_what_the_model_says():
    text = (Path(__file__).resolve().parents[3] / "docs" / "performance.md").read_text(encoding="utf-8")
    assert report.current_block(text) == report.readme_block(), (
        "docs/performance.md's perf tables are stale: "
        "run `make regen`")
    assert report.replace_block("a\n" + report.BEGIN + "old" + report.END + "\nb", "NEW") == "a\nNEW\nb"
    with pytest.raises(ValueError):
        report.replace_block("no block", "x")


# ------------------------------------------------------------------------------------------ end to end


def _fake_layer(batch, heads, seq, head_dim, seed=0):
    """A narrow SwiftMax layer for the fake card (as tests/host/backends/test_xrt.py builds one)."""
    import numpy as np
    import torch

    from vckattn.golden.attention import MultiHeadAttention
    from vckattn.golden.quant_attention import calibrate_attention, narrow_layer

    torch.manual_seed(seed)
    mha = MultiHeadAttention(head_dim * heads, heads, heads, head_dim).double()
    x = np.random.default_rng(seed).normal(size=(batch, seq, head_dim * heads))
    keep = np.ones((batch, seq), bool)
    layer = calibrate_attention(mha, x, keep, "swiftmax", causal=False, beta=3.0, gamma=5.0)
    return narrow_layer(layer, 8), x, keep


def test_host_calls_counted_equal_the_calls_on_the_fake_card(monkeypatch, tmp_path, xrt_stub):
    """The host's calls per layer that the model prices (host/launch_counts.py, the launch on a recording runtime)
    are the calls the xrt backend makes on the FAKE card behind the FAKE pyxrt (tests/fakes): compute-unit starts and
    waits, buffer syncs each way with their bytes, graph runs."""
    import sys

    from fakes import fake_pyxrt
    from fakes.engine_card import FakeEngineCard
    from fakes.xrt_stub import card_handler
    from hw_jobs import manifest_with_uuid, write_xclbin

    from vckattn.host.attention_layer import run_layer
    from vckattn.host.backends import device_class
    from vckattn.host.engine import params_from_manifest
    from vckattn.host.launch_counts import count_launch

    manifest = manifest_with_uuid("engine_small")
    card = FakeEngineCard(manifest)
    monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt.module_for(card))
    xrt_stub.set_handler(card_handler(card))
    batch, heads, seq, head_dim = 3, 4, 45, 32
    layer, x, keep = _fake_layer(batch, heads, seq, head_dim)
    with device_class("xrt")(manifest, xclbin=write_xclbin(tmp_path / "engine_small.xclbin")) as dev:
        dev.configure(layer)
        start = len(card.log)
        run_layer(dev, layer, x, keep)
    log = card.log[start:]
    syncs = [e for e in log if e["op"] == "bo.sync"]
    p = params_from_manifest(manifest)
    got = count_launch(p.pipelines, p.kernels, p.score_plios, p.q_rows, p.d, p.max_keys, batch, heads, heads, seq,
                       head_dim)
    assert got.cu_starts == sum(e["op"] == "start" for e in log) == 4 * p.pipelines
    assert got.cu_waits == sum(e["op"] == "wait" for e in log)
    assert got.syncs_to_device == sum(e["dir"] == "to_device" for e in syncs)
    assert got.syncs_from_device == sum(e["dir"] == "from_device" for e in syncs)
    assert got.bytes_to_device == sum(e["nbytes"] for e in syncs if e["dir"] == "to_device")
    assert got.bytes_from_device == sum(e["nbytes"] for e in syncs if e["dir"] == "from_device")
    assert got.graph_runs == len(xrt_stub.calls("graph.run")) == 1


def test_the_recording_runtime_refuses_register_access():
    """The recording runtime counts a launch and nothing else: a register access (configure) is refused by name."""
    from vckattn.host.launch_counts import _recording_device
    from vckattn.hw.spec.functional import EngineParams

    dev = _recording_device(EngineParams(pipelines=1, kernels=2, score_plios=1, q_rows=16, d=64, max_keys=128))
    with pytest.raises(RuntimeError, match="no register port"):
        dev._register_port()


@pytest.mark.parametrize("pipelines", [1, 3, 16])
def test_host_calls_follow_the_launch_as_documented(pipelines):
    """The launch as host/backends/engine_hw.py documents it: per pipeline three mm2s movers and one s2mm mover
    started and waited for, a command list per mover and a zeroed done log synced to the card; Q, K, V once; the A
    buffer and every done log back; one graph run. Q, K, V and A cross PCIe at least once."""
    from vckattn.host.launch_counts import count_launch

    b, h, s, d = 8, 12, 512, 64
    c = count_launch(pipelines, 8, 4, 32, d, 512, b, h, h, s)
    assert (c.cu_starts, c.cu_waits, c.graph_runs, c.graph_waits) == (4 * pipelines, 4 * pipelines, 1, 1)
    assert (c.syncs_to_device, c.syncs_from_device) == (3 + 4 * pipelines, 1 + pipelines)
    assert c.bytes_to_device >= 3 * b * h * s * d and c.bytes_from_device >= b * h * s * d


def test_end_to_end_is_the_device_time_plus_the_priced_host_calls():
    """End to end = the card's time (operands in DDR) + each counted call at its cited price + the bytes at the PCIe
    rate + the host's LayerNorm (an encoder) + the projections only when the host does them; every part labeled."""
    from vckattn.host.launch_counts import with_end_to_end
    from vckattn.hw.perf import host_cost

    d = model.design_from_manifest(load_manifest(default_manifest()).data)
    for operands in ("ddr", "host"):
        w = replace(BERT, operands=operands)
        assert evaluate(w, d, DEV).end_to_end is None  # the host layer counts the host's calls
        p = with_end_to_end(evaluate(w, d, DEV))
        e = p.end_to_end
        c = e.counts
        assert e.parts["cu_starts"] == pytest.approx(c.cu_starts * 17e-6)  # github.com/Xilinx/XRT/issues/6601
        assert e.parts["syncs_fixed"] == pytest.approx(c.syncs * 19e-6)  # github.com/Xilinx/XRT/issues/6590
        assert e.parts["pcie_bytes"] == pytest.approx((c.bytes_to_device + c.bytes_from_device) / 16e9)
        assert ("host_qkv_projections" in e.parts) == (operands == "host") and "host_layernorm" in e.parts
        assert p.end_to_end_seconds_per_layer == pytest.approx(p.end_to_end_device_seconds + sum(e.parts.values()))
        ddr = evaluate(replace(w, operands="ddr"), d, DEV)
        assert p.end_to_end_device_seconds == pytest.approx(ddr.device_seconds_per_layer)
        assert p.end_to_end_seconds_per_layer > p.device_seconds_per_layer
        assert all(e.sources[k] for k in ("cu_start", "cu_wait", "graph_run", "sync_fixed", "pcie_bytes", "counts",
                                          *(k for k in e.parts if k.startswith("host_"))))
        assert "XRT" in e.sources["cu_start"] and host_cost.host_ops()["measured"] is True
        j = p.to_json()["end_to_end"]
        assert j["modeled"] and j["counts"]["cu_starts"] == c.cu_starts and j["end_to_end_seconds_per_layer"] > 0


def test_host_measurements_are_stored_with_command_machine_and_date():
    from vckattn.hw.perf import host_cost

    data = host_cost.host_ops()
    assert data["measured"] is True and data["command"].startswith("python -m vckattn.hw.perf.host_cost")
    assert data["machine"] and len(data["date"]) == 10
    ops = {(r["op"], r["seq"]) for r in data["rows"]}
    assert {("layernorm", 512), ("qkv_projections", 512), ("layernorm", 128)} <= ops
    assert all(r["seconds"] > 0 for r in data["rows"])


def test_a_config_whose_heads_do_not_divide_its_hidden_size_is_refused():
    with pytest.raises(ValueError, match="not a multiple of num_attention_heads 7"):
        model.workload_from_hf_config({"hidden_size": 100, "num_attention_heads": 7, "num_hidden_layers": 2})
    w = model.workload_from_hf_config({"hidden_size": 96, "num_attention_heads": 4, "head_dim": 32,
                                       "num_hidden_layers": 1})  # an explicit head size is the model's own
    assert (w.heads, w.d_head) == (4, 32)


# ------------------------------------------------------------------------------------------ sources


ROOT = Path(__file__).resolve().parents[3]
#: how a citation of a file of this repository (or of a file outside it, such as shared/...) starts: a top-level
#: folder; files of other public repositories (CHARM's CDSE/cdse.py, aie_api's headers) are cited with their repository
LOCAL = ("golden/", "hw/", "host/", "sim/", "tests/", "docs/", "bitstreams/", "shared/", "reference/", "../")


def _cited_files(text: str) -> set[str]:
    """Paths a text cites as files of this repository (or outside it): a top-level folder first, or a bare
    Markdown file name."""
    import re

    names = re.findall(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:md|py|json|cpp|h|hpp|cfg|toml))\b", text)
    return {n for n in names if n.startswith(LOCAL) or ("/" not in n and n.endswith(".md"))}


def _exists(name: str) -> bool:
    return (ROOT / name).exists() if "/" in name else any(ROOT.glob(f"**/{name}"))


def test_every_cited_file_is_in_the_repository():
    """Every device limit and cost cites a public document or a file of this repository: no file named in
    device.json, the perf data or the perf code is missing from the repository (VERSAL.md, a reference outside it,
    must not be cited)."""
    files = [ROOT / "hw" / "perf" / "device.json", *sorted((ROOT / "hw" / "perf").glob("*.py")),
             *sorted((ROOT / "hw" / "perf" / "data").glob("*.json"))]
    missing = {}
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert "VERSAL" not in text, f"{f.name} cites VERSAL.md, which is not in the repository"
        bad = sorted(n for n in _cited_files(text) if not _exists(n))
        if bad:
            missing[f.name] = bad
    assert not missing, missing


def test_the_citation_check_catches_a_missing_file():
    assert "shared/reference/VERSAL.md" in _cited_files("source: shared/reference/VERSAL.md, table 1")
    assert not _cited_files("CHARM (github.com/arc-research-lab/CHARM, CDSE/cdse.py)")  # a public repository's
    assert _cited_files("see VERSAL.md") == {"VERSAL.md"} and not _exists("VERSAL.md")
    assert not _exists("shared/reference/VERSAL.md") and _exists("hw/perf/device.json") and _exists("device.json")

"""``vckattn perf`` and ``vckattn perf explore`` (host/cli/perf.py) against the model's own API."""

from __future__ import annotations

import json

import pytest
from hw_jobs import bundle_parts

from vckattn.host import perf_plots as figures
from vckattn.host.bundle import write_bundle
from vckattn.host.cli import main
from vckattn.hw.design.manifest import default_manifest, load_manifest
from vckattn.hw.perf import model

PNG = b"\x89PNG\r\n\x1a\n"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_has_a_description_and_an_example(capsys):
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and " perf " in out
    for argv in (("perf", "--help"), ("perf", "explore", "--help")):
        code, out, _ = _run(capsys, *argv)
        assert code == 0
        assert "MODELED" in out and "example:" in out and "vckattn perf" in out
        for gone in ("--kv-streamed", "--key-block", "--in-plios", "--plio-bits", "vck5000_attention", "two-tile",
                     "reference build"):
            assert gone not in out, gone
    code, out, _ = _run(capsys, "perf", "--help")
    assert f"bitstreams/{default_manifest()}.json" in out  # the default design named where the flags are


def test_perf_json_equals_the_model(capsys):
    code, out, err = _run(capsys, "perf", "--design-from-manifest", "engine_small", "--seq", "128", "--batch",
                          "2", "--layers", "3", "--json", "-")
    assert code == 0, err
    got = json.loads(out)
    d = model.design_from_manifest(load_manifest("engine_small").data)
    w = model.Workload(heads=12, d_head=64, seq=128, batch=2, layers=("swiftmax",) * 3)
    want = model.evaluate(w, d, model.load_device())
    assert got["seconds_per_layer"] == pytest.approx(want.seconds_per_layer)
    assert got["bottleneck"] == want.bottleneck and got["tops"] == pytest.approx(want.tops)
    assert got["design"]["name"] == "engine_small" and got["workload"]["layers"] == 3
    assert "MODELED" in err  # the tables go to stderr when the JSON goes to stdout


def test_design_flags_and_plots(capsys, tmp_path):
    out_json = tmp_path / "p.json"
    code, out, err = _run(capsys, "perf", "--pipelines", "4", "--qk-kernels", "4", "--pv-kernels", "4",
                          "--score-bits", "8", "--score-plios", "1", "--lanes", "8", "--normalizer", "softmax",
                          "--json", str(out_json), "--plots", str(tmp_path / "plots"))
    assert code == 0, err
    got = json.loads(out_json.read_text())
    assert got["design"]["pipelines"] == 4 and got["design"]["score_bits"] == 8
    assert got["design"]["lanes_online_softmax"] == 8 and got["workload"]["normalizers"] == ["online_softmax"] * 12
    assert "bottleneck" in out and "resources" in out
    for name in ("roofline.png", "stages.png"):
        assert (tmp_path / "plots" / name).read_bytes().startswith(PNG)


def test_a_design_the_generator_does_not_build_is_refused_not_modeled(capsys):
    """Only designs that can exist are modeled: one the generator refuses (online softmax on two score channels of a
    pipeline; 16 online-softmax lanes) exits 2, one the design-rule check fails (16 pipelines of 8 + 8 kernels with 4
    channels of 16 lanes: 85% of the LUTs with every mover's m_axi ports) exits 4, each in one line."""
    base = ("perf", "--pipelines", "4", "--qk-kernels", "4", "--pv-kernels", "4", "--score-bits", "8")
    for flags in (("--score-plios", "2", "--lanes", "8"), ("--score-plios", "1", "--lanes", "16")):
        code, out, err = _run(capsys, *base, *flags, "--normalizer", "softmax")
        assert code == 2 and err.count("\n") == 1 and "design:" in err and not out, err
    code, out, err = _run(capsys, "perf", "--pipelines", "16", "--qk-kernels", "8", "--pv-kernels", "8",
                          "--score-plios", "4", "--lanes", "16")
    assert code == 4 and err.count("\n") == 1 and "PL-RES" in err and "UG949" in err and not out, err


def test_design_file_round_trip(capsys, tmp_path):
    code, out, _ = _run(capsys, "perf", "--pipelines", "2", "--json", "-")
    assert code == 0
    first = json.loads(out)
    (tmp_path / "d.json").write_text(json.dumps(first))
    code, out, _ = _run(capsys, "perf", "--design", str(tmp_path / "d.json"), "--json", "-")
    assert code == 0 and json.loads(out)["seconds_per_layer"] == pytest.approx(first["seconds_per_layer"])


def test_workload_from_config_and_bundle(capsys, tmp_path):
    cfg = {"model_type": "llama", "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
           "num_hidden_layers": 4, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, out, err = _run(capsys, "perf", "--config", str(tmp_path / "config.json"), "--seq", "128", "--json", "-")
    assert code == 0, err
    w = json.loads(out)["workload"]
    assert (w["heads"], w["kv_heads"], w["d_head"], w["seq"], w["layers"], w["norm_site"]) == (8, 2, 64, 128, 4,
                                                                                                "rmsnorm")
    b = write_bundle(tmp_path / "b", *bundle_parts("softmax", head_dim=32, heads=2))
    # the committed best design builds SwiftMax only: the build's own refusal, as `run` gives it (bad manifest, 5)
    code, out, err = _run(capsys, "perf", "--bundle", str(b), "--json", "-")
    assert code == 5 and "softmax, which this build lacks" in err and len(err.strip().splitlines()) == 1
    # a design point of one's own (--design) is modeled for the bundle's shape, if it has the layers' normalizer
    committed = model.design_from_manifest(load_manifest(default_manifest()).data)
    for lanes, want in ((0, 2), (8, 0)):
        # one score channel a pipeline: the online-softmax unit's rule (a tile's whole rows meet on one channel)
        (tmp_path / "d.json").write_text(json.dumps(committed.to_json() | {"lanes_online_softmax": lanes,
                                                                           "score_plios": 1}))
        code, out, err = _run(capsys, "perf", "--bundle", str(b), "--design", str(tmp_path / "d.json"), "--json", "-")
        assert code == want, err
        assert ("no online_softmax lanes" in err) == (want == 2)
    w = json.loads(out)["workload"]
    assert (w["heads"], w["d_head"], w["seq"], w["normalizers"]) == (2, 32, 64, ["online_softmax"])


@pytest.mark.parametrize("argv, message", [
    (("--normalizer", "swiftmax,softmax", "--layers", "3"), "2 normalizers for 3 layers"),
    (("--bundle", "x", "--config", "y"), "not both"),
    (("--design-from-manifest", "no_such_build"), "no_such_build"),
    (("--normalizer", "relu"), "unknown normalizer"),
    (("--seq", "4096", "--design-from-manifest", "vck5000_engine"), "max_seq"),
    (("--pl-clock", "900"), "PLIO limit"),
    (("--kv-streamed",), "unrecognized arguments"),
    (("--score-bits", "32"), "invalid choice"),
])
def test_user_errors_are_one_line(capsys, argv, message):
    code, out, err = _run(capsys, "perf", *argv)
    status = 5 if "no_such_build" in argv else 2  # an unknown bitstream manifest is a bad-manifest error
    assert code == status and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_explore_json(capsys, tmp_path):
    code, out, err = _run(capsys, "perf", "explore", "--seq", "256", "--batch", "4", "--layers", "2", "--quiet",
                          "--json", "-")
    assert code == 0, err
    r = json.loads(out)
    assert set(r["best"]) == {"swiftmax", "online_softmax"}
    assert r["speedup_equal_resources"] > 0 and r["lut_ratio_equal_throughput"] > 0
    best = r["best"]["swiftmax"]
    assert best["resources"]["fits"] and best["workload"]["seq"] == 256
    d = model.design_from_json(best["design"])
    w = model.Workload(heads=12, d_head=64, seq=256, batch=4, layers=("swiftmax",) * 2)
    assert model.evaluate(w, d).seconds_per_layer == pytest.approx(best["seconds_per_layer"])
    # every proposed design is generated and passes the design-rule check: about 40 s on an idle 2-core machine,
    # up to about 75 s beside another test worker
    assert r["search_seconds"] < 120
    assert r["scope"] == "attention"


def test_explore_plots_fig5_without_cpu(capsys, tmp_path):
    code, out, err = _run(capsys, "perf", "explore", "--quiet", "--plots", str(tmp_path), "--no-cpu")
    assert code == 0, err
    for name in ("roofline.png", "stages.png", "fig5_batch.png", "fig5_layers.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG), name
    data = json.loads((tmp_path / "fig5.json").read_text())
    assert [c["seq"] for c in data["cases"]] == [128, 512]
    for case in data["cases"]:
        assert [r["batch"] for r in case["by_batch"]] == list(figures.BATCHES)
        assert [r["replaced"] for r in case["by_layers_replaced"]] == list(range(13))
        assert case["by_layers_replaced"][0]["board_speedup"] == pytest.approx(1.0)
        # the modeled times come from the model for the designs written beside them
        d = model.design_from_json(case["swiftmax_design"])
        w = model.Workload(heads=12, d_head=64, seq=case["seq"], batch=2, layers=("swiftmax",) * 12)
        row = next(r for r in case["by_batch"] if r["batch"] == 2)
        assert row["board_swiftmax_s"] == pytest.approx(model.evaluate(w, d).seconds_total)


def test_fig5_cpu_timing_is_measured_and_labeled(tmp_path):
    d = model.Design(pipelines=2, qk_kernels=2, pv_kernels=2, score_bits=8, lanes_swiftmax=8, lanes_online_softmax=8)
    data = figures.fig5_data([figures.Fig5Case(32, d, d)], heads=2, d_head=16, layers=2, batches=(1, 3),
                             layer_batch=2, cpu=True, cpu_repeats=1)
    rows = data["cases"][0]["by_batch"]
    assert all(r["cpu_softmax_s"] > 0 and r["cpu_swiftmax_s"] > 0 for r in rows)
    assert "measured" in data["modeled"] and "modeled" in data["modeled"]
    paths = figures.fig5_plots(data, tmp_path)
    assert all(p.read_bytes().startswith(PNG) for p in paths)
    # chunked timing covers the whole batch: 3 entries in chunks of 2 = one chunk of 2 + one of 1
    assert figures.cpu_layer_seconds(3, 2, 32, 16, "swiftmax", repeats=1, chunk=2) > 0


def test_bert_workload_default_matches_the_issue(capsys):
    code, out, _ = _run(capsys, "perf", "--json", "-")
    assert code == 0
    w = json.loads(out)["workload"]
    assert (w["heads"], w["d_head"], w["seq"], w["batch"], w["layers"]) == (12, 64, 512, 8, 12)


def test_default_design_is_the_committed_engine(capsys, tmp_path):
    committed = model.design_from_manifest(load_manifest(default_manifest()).data)
    code, out, err = _run(capsys, "perf", "--json", "-")
    assert code == 0, err
    assert model.design_from_json(json.loads(out)["design"]) == committed
    # 16-bit scores: 8 of them fill a 128-bit beat, so at most 8 lanes
    code, out, err = _run(capsys, "perf", "--pipelines", "3", "--score-bits", "16", "--lanes", "8", "--json", "-")
    assert code == 0, err
    d, p = json.loads(out)["design"], json.loads(out)
    assert d["kv_resident"] and "score_switch" not in d and d["pipelines"] == 3 and d["score_bits"] == 16
    assert d["lanes_swiftmax"] == 8
    assert d["qk_kernels"] == committed.qk_kernels and d["q_rows"] == committed.q_rows
    assert [k["kernel"] for k in p["kernels"]][:2] == ["qk", "qk (masked tile)"]
    assert all(0 < k["efficiency"] <= 1 for k in p["kernels"] if k["kernel"] != "rq")
    assert [k for k in p["kernels"] if k["kernel"] == "rq"][0]["efficiency"] is None  # no MACs: requantizes
    (tmp_path / "d.json").write_text(json.dumps(d))
    code, _, err = _run(capsys, "perf", "--design", str(tmp_path / "d.json"), "--design-from-manifest",
                        default_manifest())
    assert code == 2 and "one of" in err
    # a design the model cannot cost (not the engine's) is refused in one line, not costed
    (tmp_path / "d32.json").write_text(json.dumps({**d, "score_bits": 32}))
    code, _, err = _run(capsys, "perf", "--design", str(tmp_path / "d32.json"))
    assert code == 2 and "score_bits must be 8 or 16" in err and len(err.strip().splitlines()) == 1


def test_validate_lists_the_published_designs(capsys):
    from vckattn.hw.perf import published

    code, out, err = _run(capsys, "perf", "validate", "--json", "-")
    assert code == 0, err
    rows = json.loads(out)["designs"]
    assert [r["name"] for r in rows] == [g.name for g in published.DESIGNS]
    for r, g in zip(rows, published.DESIGNS, strict=True):
        assert r["published"] == g.published and r["error"] == pytest.approx(r["modeled"] / r["published"] - 1)
        assert r["kernel"] == g.kernel and 0 < r["kernel_efficiency"] <= 1
    single = json.loads(out)["single_kernels"]
    assert [s["kernel"] for s in single] == ["charm_fp32", "aries_fp32"]
    assert all(0 < s["modeled_efficiency"] <= 1 for s in single)
    assert "MaxEVA" in err and "ARIES" in err and "CHARM" in err and "docs/validation.md" in err


#: a small sublayer (MiniLM-like: 6 heads x 64, d_model 384, two sequences of 128)
SMALL = ("--seq", "128", "--batch", "2", "--heads", "6")


@pytest.mark.parametrize("argv", [("perf", "--scope", "sublayer", "--normalizer", "softmax"),
                                  ("perf", "explore", "--scope", "sublayer", "--seq", "512"),
                                  ("perf", "explore", "--scope", "sublayer", *SMALL, "--tile-cap", "0.3")])
def test_scope_sublayer_refuses_what_the_generator_does_not_build(capsys, argv):
    """The generator writes a sublayer's score channels with SwiftMax only: an online-softmax sublayer, and the
    comparison of the two, get no figure -- one line, status 2, naming why; no JSON, no table."""
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "SwiftMax lanes only" in err
    assert "TOPS" not in err and "of peak" not in err


def test_scope_sublayer_reports_the_built_encoder(capsys, tmp_path):
    """BERT-base, S = 512, batch 8: the split reported is the committed full-size encoder's, which the generator
    writes whole (its PL top built), at 35% of the int8 peak or more (MODELED); a small sublayer simulated beside
    its closed form within 10%."""
    from vckattn.hw.design.sublayer_build import FULL_SIZE_BUILDS, split_of

    out = tmp_path / "sub.json"
    code, _, err = _run(capsys, "perf", "--scope", "sublayer", "--seq", "512", "--batch", "8", "--json", str(out))
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["modeled"] is True and doc["fraction_of_peak"] >= 0.35
    want = split_of(FULL_SIZE_BUILDS["vck5000_sublayer"])
    got = {k: tuple(v) if isinstance(v, list) else v for k, v in doc["split"].items()}
    assert got == want
    code, _, err = _run(capsys, "perf", "--scope", "sublayer", *SMALL, "--tile-cap", "0.3", "--simulate", "--json",
                        str(out))
    assert code == 0, err
    assert abs(json.loads(out.read_text())["simulation"]["difference"]) < 0.10


def test_scope_sublayer_still_refuses_attention_flags_first(capsys):
    for extra in (["--operands", "on_chip"], ["--design-from-manifest", "vck5000_engine"], ["--board", "vck190"],
                  ["--tile-cap", "1.5"], ["--layers", "2"], ["--pipelines", "4"], ["--normalizer", "relu"]):
        code, _, err = _run(capsys, "perf", "--scope", "sublayer", *extra)
        assert code == 2 and err.count("\n") == 1 and "SwiftMax lanes only" not in err, (extra, err)
    for extra in (["--normalizer", "softmax"], ["--board", "vck190"], ["--pl-clock", "300"], ["--kv-heads", "2"],
                  ["--tile-cap", "0"]):
        code, _, err = _run(capsys, "perf", "explore", "--scope", "sublayer", *extra)
        assert code == 2 and err.count("\n") == 1 and "SwiftMax lanes only" not in err, (extra, err)
    code, _, err = _run(capsys, "perf", "--tile-cap", "0.5")
    assert code == 2 and "--scope sublayer only" in err
    code, _, err = _run(capsys, "perf", "explore", "--tile-cap", "0.5")
    assert code == 2 and "--scope sublayer only" in err


@pytest.mark.parametrize("argv", [("perf", "--operands", "on_chip"),
                                  ("perf", "--operands", "on_chip", "--pipelines", "16", "--qk-kernels", "8",
                                   "--pv-kernels", "8", "--score-plios", "4", "--json", "-"),
                                  ("perf", "explore", "--operands", "on_chip", "--seq", "128")])
def test_on_chip_operands_are_refused(capsys, argv):
    """No on-chip operand feeder is generated: `--operands on_chip` reports no figure (one line, status 2)."""
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "on-chip operand feeder" in err and "TOPS" not in err


def test_device_and_end_to_end_side_by_side(capsys):
    """`perf` prints the device time and the end-to-end time of a layer side by side, in text and JSON: the host's
    calls counted from its launch code, each priced with its source, the host's own operations measured here."""
    from vckattn.host.launch_counts import with_end_to_end
    from vckattn.hw.perf import host_cost

    for operands in ("ddr", "host"):
        code, out, err = _run(capsys, "perf", "--seq", "512", "--batch", "8", "--operands", operands, "--json", "-")
        assert code == 0, err
        got = json.loads(out)
        e = got["end_to_end"]
        d = model.design_from_manifest(load_manifest(default_manifest()).data)
        want = with_end_to_end(model.evaluate(model.Workload(heads=12, d_head=64, seq=512, batch=8,
                                                             layers=("swiftmax",) * 12, operands=operands),
                                              d, model.load_device()))
        assert e["end_to_end_seconds_per_layer"] == pytest.approx(want.end_to_end_seconds_per_layer)
        assert e["device_seconds_per_layer"] == pytest.approx(want.end_to_end_device_seconds)
        assert e["end_to_end_seconds_per_layer"] > e["device_seconds_per_layer"] > 0
        assert e["counts"]["cu_starts"] == 4 * d.pipelines and e["counts"]["graph_runs"] == 1
        assert ("host_qkv_projections" in e["parts_seconds"]) == (operands == "host")
        assert "device vs end to end" in err and "MODELED" in err and "MEASURED here" in err
        assert "compute-unit starts" in err and "buffer syncs" in err and "Alveo U25" in err
        assert "github.com/Xilinx/XRT/issues/6601" in e["sources"]["cu_start"]
        assert f"{e['counts']['cu_starts']} compute-unit starts" in err
        assert host_cost.host_ops()["date"] in err


def test_a_config_whose_heads_do_not_divide_its_hidden_size_is_refused(capsys, tmp_path):
    """hidden 100 with 7 heads is no model: one line, status 4 (a bad input file), no figure."""
    cfg = {"model_type": "bert", "hidden_size": 100, "num_attention_heads": 7, "num_hidden_layers": 2}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for argv in (("perf",), ("perf", "explore")):
        code, out, err = _run(capsys, *argv, "--config", str(tmp_path / "config.json"))
        assert code == 4 and out == "" and len(err.strip().splitlines()) == 1
        assert "hidden_size 100 is not a multiple of num_attention_heads 7" in err


def test_every_table_title_names_the_workload(capsys, tmp_path):
    """The tables name the workload they model: the config's model name and shape, or the flags' shape."""
    cfg = {"model_type": "bert", "hidden_size": 384, "num_attention_heads": 6, "num_hidden_layers": 2,
           "max_position_embeddings": 128}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, out, err = _run(capsys, "perf", "--config", str(tmp_path / "config.json"), "--batch", "2")
    assert code == 0, err
    text = " ".join(out.replace("│", " ").split())  # titles wrap on a narrow terminal
    shape = "bert: 6 heads x 64, S = 128, batch 2, 2 layers"
    assert text.count(shape) >= 4 and "BERT-base" not in text  # stages, kernels, resources, end to end
    code, out, err = _run(capsys, "perf", "--seq", "128", "--batch", "1", "--heads", "4", "--layers", "3",
                          "--design-from-manifest", "engine_small")
    assert code == 0, err
    assert " ".join(out.split()).count("4 heads x 64, S = 128, batch 1, 3 layers") >= 4


def test_fig5_for_the_sublayer(tmp_path):
    """Fig. 5 for the whole sublayer: its numbers from the closed form on the splits written beside them, the
    workload in the title, a PNG."""
    from vckattn.hw.perf import sublayer

    data = figures.fig5_sublayer_data(cpu=False, tile_cap=0.3)
    assert [c["seq"] for c in data["cases"]] == [128, 512] and "BERT-base encoder sublayer" in data["workload"]
    for case in data["cases"]:
        assert [r["batch"] for r in case["by_batch"]] == list(figures.BATCHES)
        assert case["by_layers_replaced"][0]["board_speedup"] == pytest.approx(1.0)
        sp = case["swiftmax_split"]
        split = sublayer.SublayerSplit(**{**sp, "qkv_tile": tuple(sp["qkv_tile"]), "o_tile": tuple(sp["o_tile"])})
        row = next(r for r in case["by_batch"] if r["batch"] == 2)
        fitted = sublayer.refit(sublayer.SublayerShape(2, case["seq"]), split, 0.3)
        want = 12 * sublayer.split_cost(sublayer.SublayerShape(2, case["seq"]), fitted)["seconds"]
        assert row["board_swiftmax_s"] == pytest.approx(want)
        # the split of the search's batch fits there; every row says whether its splits fit at its batch
        assert next(r for r in case["by_batch"] if r["batch"] == 8)["fits"] is True
        assert all(isinstance(r["fits"], bool) for r in case["by_batch"])
    path = figures.fig5_sublayer_plot(data, tmp_path / "fig5_sublayer.png")
    assert path.read_bytes().startswith(PNG)

"""PL performance model (hw/perf/pl.py): API contract, the synthesis data and fits, the cycle formulas against
the RTL constants and Verilator, and whole-layer streams through the normalizers and the token-buffered norm
kernels on Verilator (sim/tb_perf_stream.py: bit-exact outputs, measured cycles within 5% of the model)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from vckattn.hw.perf import pl
from vckattn.hw.perf.pl import (
    KERNELS,
    load_data,
    resources,
)
from vckattn.hw.pl import timing
from vckattn.hw.pl.timing import (
    TIMING,
    elements_per_cycle,
    latency_cycles,
    stream_cycles,
)

# ------------------------------------------------------------------------------------------ API contract


@pytest.mark.parametrize("call", [
    lambda: resources("softmax", 4),
    lambda: latency_cycles("layernorm", 4),
    lambda: stream_cycles("nope", 1, 128, 4),
    lambda: elements_per_cycle("", 4),
])
def test_unknown_kernel_names_the_known_ones(call: object) -> None:
    with pytest.raises(ValueError) as exc:
        call()  # type: ignore[operator]
    for k in KERNELS:
        assert k in str(exc.value)


def test_argument_checks() -> None:
    with pytest.raises(ValueError):
        resources("swiftmax", 0)
    with pytest.raises(ValueError):
        resources("swiftmax", 4, score_bits=12)  # not synthesized
    with pytest.raises(ValueError):
        stream_cycles("swiftmax", 0, 128, 4)
    with pytest.raises(ValueError):
        stream_cycles("swiftmax", 1, 128, 4, in_beats_per_cycle=0.0)
    # the norm kernels take int8 activations whatever the score width
    assert resources("rmsnorm", 4, score_bits=8) == resources("rmsnorm", 4)


def test_resource_keys_and_values() -> None:
    for k in KERNELS:
        r = resources(k, 4)
        assert set(r) == {"lut", "ff", "dsp", "bram", "uram", "lutram"}
        assert r["lut"] > 0 and r["ff"] > 0 and all(v >= 0 for v in r.values())
        assert resources(k, 8)["lut"] > r["lut"]  # more lanes, more logic


# ------------------------------------------------------------------------------------------ synthesis data


def test_data_file_provenance() -> None:
    d = load_data()
    assert d["command"].startswith("python -m vckattn.sim.pl_perf --out hw/perf/data/pl_kernels.json")
    assert "synth_xilinx -family xcup" in d["synthesis"]["script"]
    assert "not board measurements" in d["description"].lower()
    assert set(d["kernels"]) == set(KERNELS)
    for k in ("swiftmax", "online_softmax"):
        assert {"32", "16", "8"} <= set(d["kernels"][k]["widths"])


@pytest.mark.parametrize("kernel", KERNELS)
def test_fit_reproduces_the_synthesized_points(kernel: str) -> None:
    """resources() at a synthesized lane count is the fit, within the residual the JSON records; the
    linear-in-lanes model describes LUT and FF of every kernel to within 10%, but RoPE's LUTs to within 16%
    (its table's read multiplexers shrink as more lanes split it into banks: 403 LUTs at 1 lane, 333 at 2)."""
    for w, entry in load_data()["kernels"][kernel]["widths"].items():
        pts = entry["points"]
        assert {1, 2, 4, 8} <= {p["lanes"] for p in pts}
        for p in pts:
            got = resources(kernel, p["lanes"], int(w))
            for m in ("lut", "ff", "dsp", "bram"):
                tol = entry["fit"][m]["max_abs_residual"] + 2e-3  # the JSON rounds to 4 decimals
                assert abs(got[m] - p[m]) <= tol, (kernel, w, p["lanes"], m, got[m], p[m])
        for m in ("lut", "ff"):
            bound = 0.16 if (kernel, m) == ("rope", "lut") else 0.10
            assert entry["fit"][m]["max_rel_residual"] <= bound, (kernel, w, m, entry["fit"][m])


def test_narrower_scores_are_smaller() -> None:
    """Online softmax: fewer LUTs for narrower scores. SwiftMax: fewer DSPs (int8 none: its products are LUTs,
    which cost LUTs, at most 700 a lane; int16 one DSP a lane, 24-bit saturated int32 scores two) and fewer
    LUTs from int32 to int16."""
    k = "online_softmax"
    assert resources(k, 8, 8)["lut"] < resources(k, 8, 16)["lut"] < resources(k, 8, 32)["lut"]
    k = "swiftmax"
    assert resources(k, 8, 16)["lut"] < resources(k, 8, 32)["lut"]
    assert resources(k, 8, 8)["dsp"] == 0 < resources(k, 8, 16)["dsp"] < resources(k, 8, 32)["dsp"]
    fits = {w: load_data()["kernels"][k]["widths"][w]["fit"] for w in ("8", "16", "32")}
    assert {w: f["dsp"]["per_lane"] for w, f in fits.items()} == {"8": 0.0, "16": 1.0, "32": 2.0}
    assert fits["8"]["lut"]["per_lane"] <= 700


def test_swiftmax_dsp_products_variant() -> None:
    """The int8 SwiftMax build whose lanes multiply in a DSP block (the sweep's ``dsp`` variant): one DSP and
    fewer LUTs a lane than the LUT-product build, its points reproduced by its fit; wider scores multiply in a
    DSP by default (the same figures); ``products`` is a SwiftMax option only."""
    entry = load_data()["kernels"]["swiftmax"]["variants"]["dsp"]
    assert entry["build_params"] == {"lut_product": False}
    for p in entry["widths"]["8"]["points"]:
        got = resources("swiftmax", p["lanes"], 8, "dsp")
        assert abs(got["lut"] - p["lut"]) <= entry["widths"]["8"]["fit"]["lut"]["max_abs_residual"] + 2e-3
        assert got["dsp"] == p["dsp"] == p["lanes"]
    lut, dsp = resources("swiftmax", 16, 8), resources("swiftmax", 16, 8, "dsp")
    assert dsp["dsp"] == 16 > lut["dsp"] == 0 and dsp["lut"] < 0.8 * lut["lut"]
    assert resources("swiftmax", 8, 16, "dsp") == resources("swiftmax", 8, 16)
    with pytest.raises(ValueError, match="products"):
        resources("online_softmax", 4, 8, "dsp")
    with pytest.raises(ValueError, match="products"):
        resources("swiftmax", 4, 8, "lut")


# ------------------------------------------------------------------------------------------ cycle formulas


def test_timing_constants_are_the_rtl_ones() -> None:
    from vckattn.hw.pl import online_softmax as osm
    from vckattn.hw.pl.bhyt_approx import BHyTApproxKernel
    from vckattn.hw.pl.bhyt_exact import BHyTExactKernel
    from vckattn.hw.pl.rmsnorm import RMSNormKernel
    from vckattn.hw.pl.swiftmax_lane import SwiftMaxLane

    assert TIMING["swiftmax"].out_delay == SwiftMaxLane.LATENCY + 1
    assert TIMING["bhyt_approx"].out_delay == BHyTApproxKernel.LATENCY + 1
    assert TIMING["bhyt_exact"].out_delay == BHyTExactKernel.LATENCY + 1
    assert TIMING["rmsnorm"].out_delay == RMSNormKernel.LATENCY + 1
    assert TIMING["online_softmax"].issue_delay == osm.PASS1_LATENCY + 2  # + the buffered descriptor FIFO
    assert TIMING["online_softmax"].out_delay == osm.PASS2_LATENCY + 1
    assert TIMING["online_softmax"].slots == osm.OnlineSoftmaxKernel(4).max_rows
    from vckattn.hw.pl.requant import RequantKernel
    from vckattn.hw.pl.residual import ResidualKernel
    from vckattn.hw.pl.rope import RopeKernel

    assert TIMING["residual"].out_delay == ResidualKernel.LATENCY + 1
    assert TIMING["requant"].out_delay == RequantKernel.LATENCY + 1
    assert TIMING["rope"].out_delay == RopeKernel.LATENCY + 1
    assert latency_cycles("rope", 4) + 64 // 4 - 1 == RopeKernel(4, 64).row_latency()


@pytest.mark.parametrize("kernel", KERNELS)
def test_latency_and_rate_match_verilator(kernel: str) -> None:
    """The kernels' own test_throughput on Verilator (recorded by the sweep) against the formulas."""
    points = load_data()["kernels"][kernel]["cycles"]
    assert points, f"no Verilator measurement of {kernel} in the data file"
    for p in points:
        n = p["lanes"]
        assert p["single_beat_latency_cycles"] == latency_cycles(kernel, n), p
        assert abs(p["elements_per_cycle"] - elements_per_cycle(kernel, n)) <= 0.01 * n, p
        if TIMING[kernel].buffered:  # the test streams full rows back to back: first-output latency
            beats = -(-p["row_len"] // n)
            assert p["latency_cycles"] == latency_cycles(kernel, n) + beats - 1, p


def test_closed_form_equals_the_row_recurrence() -> None:
    """Where the closed form applies it must equal the general recurrence (which it short-cuts)."""
    for kernel in ("online_softmax", "bhyt_exact", "rmsnorm"):
        t = TIMING[kernel]
        for n in (3, 4, 7, 16, 33):
            if (t.slots - 2) * n < t.issue_delay - 1:
                continue
            for rows in (1, 2, 9, 50):
                for r in (Fraction(1), Fraction(1, 3), Fraction(2, 5), Fraction(1, 4)):
                    assert timing._row_recurrence(t, rows, n, r) == stream_cycles(kernel, rows, 4 * n, 4, float(r)), (
                        kernel, n, rows, r)


def test_stream_cycles_shape() -> None:
    # element-wise: beats back to back plus the pipeline
    assert stream_cycles("swiftmax", 1, 4, 4) == latency_cycles("swiftmax", 4) + 1
    assert stream_cycles("swiftmax", 12, 128, 4) == 12 * 32 - 1 + 7 + 1
    # a rate above one beat per cycle is capped at one
    assert stream_cycles("online_softmax", 10, 256, 4, 3.0) == stream_cycles("online_softmax", 10, 256, 4, 1.0)
    # slower source, more cycles; source-bound streams scale with 1/rate
    fast, slow = stream_cycles("swiftmax", 100, 128, 4, 1.0), stream_cycles("swiftmax", 100, 128, 4, 0.25)
    assert slow > 3.9 * fast
    # short online-softmax rows are limited by the descriptor FIFO: fewer beats per cycle than the source
    assert stream_cycles("online_softmax", 400, 4, 4) > 1.5 * stream_cycles("swiftmax", 400, 4, 4)


# ------------------------------------------------------------------------------------------ whole-layer streams


def _layer_stream(kernel: str, lanes: int, rows: int, row_len: int, rates: str, tmp_path: Path,
                  in_width: int = 32) -> list[dict]:
    from vckattn.hw.pl.kernels import build_component
    from vckattn.sim.runner import generate_verilog, run_cocotb

    top = f"perf_{kernel}_l{lanes}" + (f"_w{in_width}" if in_width != 32 else "")
    params = {"in_width": in_width} if kernel in ("swiftmax", "online_softmax") else {}
    src = generate_verilog(build_component(kernel, lanes, **params), top)
    out = tmp_path / "stream.json"
    run_cocotb(top, [src], "vckattn.sim.tb_perf_stream", extra_env={
        "TB_PERF_KERNEL": kernel, "TB_PERF_ROWS": str(rows), "TB_PERF_ROW_LEN": str(row_len),
        "TB_PERF_RATES": rates, "TB_PERF_OUT": str(out), "TB_PERF_TOLERANCE": "0.05"})
    results = json.loads(out.read_text())
    assert [Fraction(r["rate"]) for r in results] == [Fraction(s) for s in rates.split(",")]
    for r in results:
        print(f"{kernel} l{lanes} {rows}x{row_len} rate {r['rate']}: measured {r['measured_cycles']} "
              f"modeled {r['modeled_cycles']} ({100 * r['rel_error']:+.2f}%)")
        assert r["elements"] == rows * row_len
        assert r["in_width"] == (in_width if "in_width" in params else 8)
        assert abs(r["measured_cycles"] - r["modeled_cycles"]) <= 0.05 * r["modeled_cycles"], r
    return results


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("heads", [4, pytest.param(12, marks=pytest.mark.full)])
def test_swiftmax_whole_layer_stream(heads: int, tmp_path: Path) -> None:
    """Today's design: SwiftMax, 4 lanes, int32 scores; ``heads`` x 128 rows of 128 keys (12: a BERT-base layer)
    with the AIE side producing 1, 1/3 and 1/4 beats per cycle."""
    _layer_stream("swiftmax", 4, heads * 128, 128, "1,1/3,1/4", tmp_path)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_online_softmax_streams(tmp_path: Path) -> None:
    """Online softmax, 4 lanes: 4 heads x 128 rows of 128 keys at 1 and 1/4 beats per cycle; short rows (2 beats)
    where its descriptor FIFO stalls the source (the row recurrence); padded rows of 130 keys."""
    res = _layer_stream("online_softmax", 4, 4 * 128, 128, "1,1/4", tmp_path)
    assert all(r["input_wait_cycles"] == 0 for r in res)
    short = _layer_stream("online_softmax", 4, 300, 8, "1,1/2", tmp_path)
    assert short[0]["input_wait_cycles"] > 0  # the regime the recurrence models
    _layer_stream("online_softmax", 4, 64, 130, "2/3", tmp_path)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("in_width", [8, 16])
def test_swiftmax_narrow_scores(in_width: int, tmp_path: Path) -> None:
    """SwiftMaxKernel(in_width=8/16) (the sweep's narrower score widths) is bit-exact against the golden model
    (an int8/int16 score never reaches the 24-bit saturation) and keeps the cycle model."""
    _layer_stream("swiftmax", 4, 48, 128, "1", tmp_path, in_width=in_width)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("kernel", [pytest.param("rmsnorm", marks=pytest.mark.full), "bhyt_exact"])
def test_token_norm_streams(kernel: str, tmp_path: Path) -> None:
    """The ping-pong token kernels, 4 lanes: a BERT-base layer's 128 tokens of d = 768 at 1 and 1/3 beats per
    cycle, and short padded tokens (d = 6: 2 beats) at full rate."""
    _layer_stream(kernel, 4, 128, 768, "1,1/3", tmp_path)
    _layer_stream(kernel, 4, 200, 6, "1", tmp_path)


# ------------------------------------------------------------------------------------------ engine PL top


def test_engine_constants_are_the_rtl_ones() -> None:
    from vckattn.hw.pl.engine import EnginePipeline, EnginePL, issue_slots
    from vckattn.hw.pl.swiftmax_lane import SwiftMaxLane

    assert timing.ENGINE_OUT_DELAY == EnginePipeline.LATENCY == EnginePL.LATENCY == SwiftMaxLane.LATENCY + 1
    for lanes in (1, 2, 4, 8, 16):
        for count in (0, 1, 15, 16, 17, 100, 4096):
            assert timing.engine_packet_slots(count, lanes) == issue_slots(count, lanes)


def test_engine_stream_cycles_shape() -> None:
    from vckattn.hw.pl.timing import engine_packet_slots, engine_stream_cycles

    # full rate at lanes = scores per beat: one input beat per cycle (int8: 16 lanes; int16: 8 lanes, 2 beats a P beat)
    assert engine_stream_cycles([[256] * 10], 16, 8) == 10 * (1 + 16) + 7
    assert engine_stream_cycles([[256] * 10], 8, 16) == 10 * (1 + 32) + 7
    # fewer lanes: proportionally more cycles for the payload; a header still takes one
    assert engine_packet_slots(256, 4) == 1 + 64 and engine_packet_slots(256, 1) == 1 + 256
    # ragged counts round up to whole P beats; an empty packet is its header
    assert engine_packet_slots(17, 16) == 3 and engine_packet_slots(0, 2) == 1
    # pipelines run in parallel: the longest one counts; none busy is 0 cycles
    assert engine_stream_cycles([[16], [512], []], 16, 8) == engine_stream_cycles([[512]], 16, 8)
    assert engine_stream_cycles([[], []], 4, 8) == 0
    for bad in (lambda: engine_stream_cycles([[16]], 16, 16), lambda: engine_stream_cycles([[16]], 3, 8),
                lambda: engine_stream_cycles([[16]], 4, 32), lambda: engine_packet_slots(-1, 4)):
        with pytest.raises(ValueError):
            bad()


def test_update_keeps_every_other_entry_and_refuses_another_yosys():
    """`--update` puts the new kernels' entries into the file and leaves every other entry of it as it was."""
    from vckattn.sim.pl_perf import merge_sweep

    old = json.loads(pl.DATA_FILE.read_text())
    new = {"synthesis": dict(old["synthesis"]), "command": "python -m vckattn.sim.pl_perf --kernels x",
           "kernels": {"x": {"widths": {}}, "rope": {"widths": {"8": {}}}}}
    out = merge_sweep(old, new)
    assert out["kernels"]["x"] == {"widths": {}} and out["kernels"]["rope"] == {"widths": {"8": {}}}
    for k in old["kernels"]:
        if k not in new["kernels"]:
            assert json.dumps(out["kernels"][k], indent=1) == json.dumps(old["kernels"][k], indent=1)
    assert {k: v for k, v in out.items() if k != "kernels"} == {k: v for k, v in old.items() if k != "kernels"}
    with pytest.raises(ValueError, match="whole sweep again"):
        merge_sweep(old, {**new, "synthesis": {**old["synthesis"], "version": "Yosys 0.0"}})

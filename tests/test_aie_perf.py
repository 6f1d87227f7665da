"""AIE side of the performance model (``hw/perf/aie.py``): modeled tile cycles from the kernels' own
vector code.

* The closed-form operation counts (derived from the loop trip counts of ``attention_kernels.h``)
  EQUAL the counts of the instrumented vector path (``aie_api_emu.h`` + test bench ``--op-counts``)
  for the committed build at keys 32..1024, d 16/32/64 and for two other tile shapes.
* Counting changes no result: every measured tile is checked bit for bit against the golden model
  (``sim/aie_perf.measure_shape``); ``tests/test_aie_kernels.py`` runs the same build on its own cases.
* The committed ``hw/perf/data/aie_tiles.json`` is what the code gives today (counts regenerated
  for two shapes; constants, cost table and cycles recomputed).
* Physical checks: MACs from the mmul counts, stream beats from the stream formats' byte counts,
  cycles never below the MAC peak or the stream ports' 32 bits per cycle.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from conftest import require_tools

from vckattn.hw.perf import aie
from vckattn.sim import aie_perf
from vckattn.sim.aie_csim import (
    DEFAULT_SHAPE,
    KernelShape,
    build,
    pack_k_stream,
    pack_p_stream,
    pack_q_stream,
    pack_v_stream,
    tb_input,
)

needs_csim = pytest.mark.tool("g++", "hls4ml")

OTHER_SHAPES = (KernelShape(q_rows=8, key_block=16, max_d=32, max_kb=4),
                KernelShape(q_rows=16, key_block=64, max_d=128, max_kb=8))


@needs_csim
@pytest.mark.parametrize("kernel", aie.KERNELS)
def test_closed_form_equals_instrumented_default_build(kernel: str) -> None:
    require_tools("g++", "hls4ml")
    geometry = [(keys, d) for keys in (32, 96, 512, 1024) for d in (16, 32, 64)]
    measured = aie_perf.measure_shape(kernel, DEFAULT_SHAPE, geometry)
    for counts, (keys, d) in zip(measured, geometry, strict=True):
        assert aie.op_counts(kernel, 32, keys, d) == counts, (kernel, keys, d)


@needs_csim
@pytest.mark.parametrize("shape", OTHER_SHAPES, ids=lambda s: f"{s.q_rows}x{s.key_block}x{s.max_d}x{s.max_kb}")
@pytest.mark.parametrize("kernel", aie.KERNELS)
def test_closed_form_equals_instrumented_other_shapes(kernel: str, shape: KernelShape) -> None:
    require_tools("g++", "hls4ml")
    kb = shape.key_block
    geometry = [(keys, d) for keys in (kb, shape.max_kb * kb) for d in range(16, shape.max_d + 1, 16)]
    measured = aie_perf.measure_shape(kernel, shape, geometry)
    for counts, (keys, d) in zip(measured, geometry, strict=True):
        assert aie.op_counts(kernel, shape.q_rows, keys, d, key_block=kb) == counts, (kernel, shape, keys, d)


@needs_csim
def test_data_file_counts_up_to_date() -> None:
    """Two committed tiles' counts regenerated through the C-sim (the data cannot go stale)."""
    require_tools("g++", "hls4ml")
    data = aie.load_data()
    picks = [("qk_matmul", 32, 32, 512, 64), ("pv_matmul", 8, 16, 64, 32)]
    for kernel, q_rows, kb, keys, d in picks:
        (tile,) = [t for t in data["tiles"] if (t["kernel"], t["q_rows"], t["key_block"], t["keys"], t["d"])
                   == (kernel, q_rows, kb, keys, d)]
        assert aie_perf.measure(kernel, q_rows, keys, d, kb) == tile["counts"], (kernel, keys, d)


def test_data_file_matches_model() -> None:
    """Constants, cost table and every tile's modeled figures in the committed JSON are what the
    model computes now, and the closed form equals every committed instrumented count."""
    data = aie.load_data()
    # round-trip through JSON so that tuples/ints compare like the stored values
    assert data["slots"] == json.loads(json.dumps(aie.SLOTS))
    assert data["cost_table"] == json.loads(json.dumps(aie.COST_TABLE))
    assert data["loop_fill_cycles"] == aie.LOOP_FILL_CYCLES
    assert data["peak_macs_per_cycle"] == aie.PEAK_MACS_PER_CYCLE
    assert data["generated_by"] == aie_perf.COMMAND
    measured = {(shape.q_rows, shape.key_block, keys, d) for shape, geo in aie_perf.MEASURED for keys, d in geo}
    assert {(t["q_rows"], t["key_block"], t["keys"], t["d"]) for t in data["tiles"]} == measured
    assert len(data["tiles"]) == 2 * len(measured)
    for t in data["tiles"]:
        args = (t["kernel"], t["q_rows"], t["keys"], t["d"])
        assert t["closed_form_equal"] is True
        assert aie.op_counts(*args, key_block=t["key_block"]) == t["counts"], args
        report = json.loads(json.dumps(aie.tile_report(*args, key_block=t["key_block"])))
        for key in ("macs", "cycles", "breakdown", "bottleneck", "efficiency", "compute_efficiency"):
            assert t[key] == report[key], (args, key)


def test_every_instrumented_operation_has_a_sourced_cost() -> None:
    data = aie.load_data()
    ops = {op for t in data["tiles"] for op in t["counts"]}
    for op in ops:
        issues = aie.cost_of(op)
        assert issues and all(slot in aie.SLOTS and n > 0 for slot, n in issues.items()), op
    for entry in [*aie.COST_TABLE.values(), *aie.SLOTS.values()]:
        assert len(entry["source"]) > 20
    with pytest.raises(KeyError, match="no cost"):
        aie.cost_of("mmul<2,8,8,int8,int8>.mac")


def test_macs_and_stream_beats_from_the_instrumented_counts() -> None:
    """Independent of the model: the committed counts' mmul calls carry exactly the tile's MACs, and
    their stream beats are the stream formats' bytes (sim/aie_csim packers) / 16."""
    data = aie.load_data()
    for t in data["tiles"]:
        c, r, kb, keys, d = t["counts"], t["q_rows"], t["key_block"], t["keys"], t["d"]
        mmul = sum(n for op, n in c.items() if op.startswith("mmul<4,16,8,") and op.endswith((".mul", ".mac")))
        assert mmul * aie.MMUL_MACS == r * keys * d == t["macs"]
        if t["kernel"] == "qk_matmul":
            q_bytes = len(pack_q_stream([np.zeros((r, d), np.int8)], keys // kb))
            k_bytes = len(pack_k_stream([np.zeros((keys, d), np.int8)], kb))
            assert (c["stream.read128:q"], c["stream.read128:k"]) == (q_bytes // 16, k_bytes // 16)
            assert c["stream.write128:s"] == r * keys * 4 // 16
        else:
            v_bytes = len(pack_v_stream([np.zeros((keys, d), np.int8)], kb))
            p_bytes = len(pack_p_stream([np.zeros((r, keys), np.uint8)], kb))
            assert (c["stream.read128:v"], c["stream.read128:p"]) == (v_bytes // 16, p_bytes // 16)
            assert c["stream.write128:o"] == r * d * 4 // 16


@pytest.mark.parametrize("kernel", aie.KERNELS)
@pytest.mark.parametrize(("q_rows", "key_block"), [(32, 32), (8, 16), (64, 64)])
def test_cycles_respect_physical_bounds(kernel: str, q_rows: int, key_block: int) -> None:
    for keys in (key_block, 4 * key_block, 32 * key_block):
        for d in (16, 48, 64, 128):
            b = aie.tile_breakdown(kernel, q_rows, keys, d, key_block=key_block)
            macs = aie.tile_macs(kernel, q_rows, keys, d, key_block=key_block)
            assert macs == q_rows * keys * d
            assert b["compute"] >= macs / aie.PEAK_MACS_PER_CYCLE
            in_bytes = (16 + (q_rows * d + keys * d if kernel == "qk_matmul" else keys * d + q_rows * keys))
            out_bytes = 4 * (q_rows * keys if kernel == "qk_matmul" else q_rows * d)
            assert b["stream_in"] >= in_bytes / 4 and b["stream_out"] >= out_bytes / 4  # 32 bits a cycle
            assert b["total"] == pytest.approx(b["stream_in"] + b["compute"] + b["stream_out"])
            parts = sum(v for k, v in b.items() if k.startswith("compute."))
            assert b["compute"] == pytest.approx(parts)
            assert aie.tile_cycles(kernel, q_rows, keys, d, key_block=key_block) == b["total"]
            eff = aie.tile_efficiency(kernel, q_rows, keys, d, key_block=key_block)
            assert 0 < eff < 1 and eff == pytest.approx(macs / (b["total"] * 128))


def test_hand_count_qk_block_vector_slot() -> None:
    """qk (32, 512, 64), counted by hand from vec::qk_block: 16 key blocks x 8 x 4 C blocks, each
    4 mmul calls (4 MAC instructions each) + 2 one-shuffle and 1 two-select interleave_zip."""
    c_blocks = 16 * (32 // 4) * (32 // 8)
    slots = aie.phase_cycles(aie.phase_counts("qk_matmul", 32, 512, 64)["qk_block"])
    assert slots["vector"] == c_blocks * (4 * 4 + 2 * 1 + 1 * 2)
    assert slots["load"] == c_blocks * 4 * (4 + 4) / 2  # per db: 4 x 128-bit K rows + 4 x 256-bit Q^T
    assert slots["store"] == c_blocks * 8
    assert max(slots, key=slots.get) == "vector"


@pytest.mark.parametrize(("args", "match"), [
    (("softmax", 32, 512, 64), "kernel must be"),
    (("qk_matmul", 12, 512, 64), "q_rows"),
    (("qk_matmul", 32, 500, 64), "multiple of key_block"),
    (("pv_matmul", 32, 512, 24), "multiple of 16"),
])
def test_bad_geometry(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        aie.tile_cycles(*args)


@needs_csim
def test_op_counts_flag_needs_the_vector_build() -> None:
    require_tools("g++", "hls4ml")
    proc = subprocess.run([str(build()), "--op-counts", "/dev/null"], input=tb_input("qk", b"", b""),
                          capture_output=True, check=False)
    assert proc.returncode == 2 and b"needs the vector-path build" in proc.stderr
    proc = subprocess.run([str(build()), "--bogus"], input=b"", capture_output=True, check=False)
    assert proc.returncode == 2 and b"unknown argument" in proc.stderr

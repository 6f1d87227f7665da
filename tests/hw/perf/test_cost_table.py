"""The AIE1 cost table (hw/perf/aie.py) the kernel models share: every entry sourced and on known slots, an unknown
operation refused, and no entry that no kernel of the toolkit counts (the engine's attention kernels, the projection
GEMM kernels, the published GEMM kernels the model is validated on)."""

from __future__ import annotations

import json

import pytest

from vckattn.hw.perf import aie, engine_aie, gemm_kernels, gemm_proj


def test_every_entry_has_a_source_and_known_slots():
    for op, entry in aie.COST_TABLE.items():
        assert len(entry["source"].strip()) > 20, op
        assert set(entry["issues"]) <= set(aie.SLOTS), op
        assert all(isinstance(n, int) and n > 0 for n in entry["issues"].values()), op
        assert aie.cost_of(op) == entry["issues"], op
    for slot, s in aie.SLOTS.items():
        assert s["per_cycle"] > 0 and len(s["source"].strip()) > 20, slot


def test_an_operation_without_a_cost_is_refused():
    with pytest.raises(KeyError, match="add it to COST_TABLE"):
        aie.cost_of("mmul<2,8,8,int8,int8>.mac")
    with pytest.raises(KeyError):
        aie.phase_cycles({"load_v<16,int8>": 1, "no_such_op": 1})


def test_phase_cycles_by_hand():
    """Issues / slot throughput on every slot: 4 mmul<4,16,8> macs (4 vector issues each), 6 loads (2 a cycle), 3
    stores (1 a cycle)."""
    cyc = aie.phase_cycles({"mmul<4,16,8,int8,int8>.mac": 4, "load_v<16,int8>": 6, "store_v<16,int8>": 3})
    assert set(cyc) == set(aie.SLOTS)
    assert (cyc["vector"], cyc["load"], cyc["store"]) == (16.0, 3.0, 3.0)
    assert sum(cyc.values()) == 22.0


def test_every_entry_is_counted_by_some_kernel():
    """No dead entries: each operation of the table is counted by the engine's kernels (the committed instrumented
    counts and the closed form over int8/int16, masked and unmasked, several row blocks), the projection GEMM kernels
    (their committed instrumented counts) or the published GEMM kernels (their own shapes)."""
    used: set[str] = set()
    for path in (engine_aie.DATA_PATH, gemm_proj.DATA_PATH):
        data = json.loads(path.read_text())
        for b in data["builds"]:
            for row in b["invocations"]:
                used |= set(row["counts"])
    for kernel in engine_aie.KERNELS:
        for bits in (8, 16):
            for masked in ((False, True) if kernel == "qk" else (False,)):
                for q_rows in (4, 8, 12, 32):
                    used |= set(engine_aie.op_counts(kernel, q_rows, 32, 32, bits, masked))
    shapes = {"maxeva_int8": (32, 128, 32), "maxeva_add_int32": (64,), "maxeva_add_float": (64,),
              "charm_fp32": (32, 32, 32), "charm_fp32_acc": (32, 32, 32), "aries_fp32": (32, 32, 32),
              "aries_fp32_acc": (32, 32, 32)}
    assert set(shapes) == set(gemm_kernels.KERNELS)
    for kernel, dims in shapes.items():
        used |= set(gemm_kernels.op_counts(kernel, dims))
    assert set(aie.COST_TABLE) - used == set()

"""The engine kernels' AIE cost model (hw/perf/engine_aie.py): its closed-form operation counts EQUAL the counts the
kernels' vector path makes over the counting AIE API emulation, for every kernel invocation of whole launches
(sim/engine_aie_perf.py, through the engine C-simulation), over many shapes (Q_ROWS 4..32 with one or two row blocks
a register block, SK 16..128, D 16..64, int8 and int16 scores, masked and unmasked tiles, k = 1..4 with every P.V
variant and the requantizer); every counted operation has a sourced cost; the committed data file is what the model
computes now; the cycles respect the slots' physical bounds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vckattn.hw.perf import aie, engine_aie

needs_csim = pytest.mark.tool("g++", "hls4ml", "verilator")

#: builds whose launches are counted here (one g++ vector-path build each; the first three are shared with
#: tests/sim/test_engine_csim.py and the data file): every variant qk / qk_masked / pv_first / pv_mid and rq
BUILDS = [
    dict(kernels=2, score_plios=1, q_rows=16, d=64, max_keys=128, score_bits=8),
    dict(kernels=4, score_plios=2, q_rows=12, d=32, max_keys=128, score_bits=16),
    dict(kernels=3, score_plios=3, q_rows=16, d=16, max_keys=96, score_bits=8),
    dict(kernels=1, score_plios=1, q_rows=4, d=16, max_keys=16, score_bits=8),
    dict(kernels=2, score_plios=1, q_rows=8, d=48, max_keys=64, score_bits=16),
]


@needs_csim
@pytest.mark.parametrize("build", BUILDS,
                         ids=lambda b: "k{kernels}_q{q_rows}_d{d}_keys{max_keys}_s{score_bits}".format(**b))
def test_closed_form_equals_the_instrumented_counts_of_every_invocation(build):
    from vckattn.sim.engine_aie_perf import invocations

    p, inv = invocations(build)
    seen = set()
    for x in inv:
        masked = bool(x["masked"])
        closed = engine_aie.op_counts(x["kernel"], p.q_rows, p.slice_keys, p.d, p.score_bits, masked)
        assert closed == x["counts"], (x["kernel"], x["j"], x["tile"], masked)
        seen.add((x["kernel"], masked))
        for op in x["counts"]:
            assert aie.cost_of(op) is not None  # KeyError for an operation without a cost
    want = {("qk", False), ("qk", True), ("pv_first", False), ("rq", False)}
    if p.kernels > 1:
        want.add(("pv_mid", False))
    assert seen == want
    assert len(inv) == (2 * p.kernels + 1) * 5  # 5 tiles, one invocation of each kernel each


def test_every_engine_operation_has_a_sourced_cost():
    ops = set()
    for kernel in engine_aie.KERNELS:
        for bits in (8, 16):
            for masked in ((False, True) if kernel == "qk" else (False,)):
                for q_rows in (4, 8, 12, 32):
                    ops |= set(engine_aie.op_counts(kernel, q_rows, 32, 32, bits, masked))
    for op in sorted(ops):
        entry = aie.COST_TABLE[op]
        assert entry["source"].strip(), op
        assert set(entry["issues"]) <= set(aie.SLOTS), op
    for slot in ("cascade_in", "cascade_out", "scalar"):
        assert aie.SLOTS[slot]["per_cycle"] > 0 and aie.SLOTS[slot]["source"]


def test_data_file_matches_the_model():
    """The committed JSON (python -m vckattn.sim.engine_aie_perf) holds instrumented counts the closed form equals, and
    modeled figures the model computes now."""
    from vckattn.golden.engine import slice_keys
    from vckattn.sim.engine_aie_perf import BERT_SHAPES, COMMAND, MEASURED

    data = engine_aie.load_data()
    assert data["generated_by"] == COMMAND
    assert data["slots"] == json.loads(json.dumps(aie.SLOTS))
    assert data["loop_fill_cycles"] == aie.loop_fill_cycles()
    assert data["sync_ports"] == {k: engine_aie.sync_ports(k) for k in engine_aie.KERNELS}
    assert [b["build"] for b in data["builds"]] == [dict(m) for m in MEASURED]
    for b in data["builds"]:
        p = b["build"]
        sk = slice_keys(p["max_keys"], p["kernels"])
        assert b["slice_keys"] == sk and b["invocations"]
        for row in b["invocations"]:
            kernel, masked = row["variant"].removesuffix("_masked"), row["variant"].endswith("_masked")
            args = (kernel, p["q_rows"], sk, p["d"], p["score_bits"], masked)
            assert row["closed_form_equal"] is True
            assert engine_aie.op_counts(*args) == row["counts"], args
            assert row["cycles"] == json.loads(json.dumps(engine_aie.invocation_cycles(*args)))
            for op in row["counts"]:
                assert data["cost_table"][op] == json.loads(json.dumps(aie.COST_TABLE[op]))
    assert {(r["q_rows"], r["sk"]) for r in data["bert_base"]} == set(BERT_SHAPES)


@pytest.mark.parametrize("kernel", engine_aie.KERNELS)
@pytest.mark.parametrize("q_rows, sk, d, bits", [(32, 128, 64, 8), (16, 64, 64, 16), (4, 16, 16, 8), (12, 48, 32, 8)])
def test_cycles_respect_physical_bounds(kernel, q_rows, sk, d, bits):
    """At least the MACs at the core's peak (128 int8 MACs a cycle), or for the requantizer its cascade words, and every
    slot's own bound; masking only adds."""
    for masked in ((False, True) if kernel == "qk" else (False,)):
        cyc = engine_aie.invocation_cycles(kernel, q_rows, sk, d, bits, masked)
        macs = engine_aie.invocation_macs(kernel, q_rows, sk, d, bits, masked)
        assert cyc["overhead"] == engine_aie.overhead_cycles(kernel) > 0
        assert cyc["total"] >= macs / aie.PEAK_MACS_PER_CYCLE + cyc["overhead"]
        assert cyc["total"] == pytest.approx(sum(v for k, v in cyc.items() if k != "total"))
        if kernel == "rq":  # no MACs: at least its cascade words in, one a cycle (four per O block, the header word)
            assert engine_aie.efficiency(kernel, q_rows, sk, d, bits, masked) == 0
            assert cyc["total"] >= 4 * (q_rows // 4) * (d // 8) + 1 + cyc["overhead"]
        else:
            assert 0 < engine_aie.efficiency(kernel, q_rows, sk, d, bits, masked) < 1
    if kernel == "qk":
        assert engine_aie.invocation_cycles(kernel, q_rows, sk, d, bits, True)["total"] > \
            engine_aie.invocation_cycles(kernel, q_rows, sk, d, bits, False)["total"]


def test_hand_count_of_the_bert_qk_tile():
    """QK^T of a 32-row tile against a 128-key slice, D 64: 32 x 128 x 64 MACs in 4 x 16 x 8 mmuls of 4 vector issues
    (mmul_8_8.hpp), 2x1 register blocks: the inner loop over the D/16 = 4 feature blocks is entered once per block,
    4 row-block pairs x 16 key blocks = 64 entries, each paying one fill."""
    phases = engine_aie.phase_counts("qk", 32, 128, 64, 8)
    mmuls = 32 // 4 * 128 // 8 * 64 // 16
    assert phases["mmul"]["mmul<4,16,8,int8,int8>.mul"] + phases["mmul"]["mmul<4,16,8,int8,int8>.mac"] == mmuls
    slots = aie.phase_cycles(phases["mmul"])
    assert slots["vector"] == 4 * mmuls == 32 * 128 * 64 / 128
    # per feature block: 2 Q blocks (8 x 128-bit) + 1 K^T block (8 x 128-bit) = 16 loads, two a cycle = the 8 vector
    # issues of the two mmuls
    assert slots["load"] == slots["vector"]
    assert engine_aie.loop_invocations("qk", 32, 128, 64, 8)["mmul"] == 4 * 16
    cyc = engine_aie.invocation_cycles("qk", 32, 128, 64, 8)
    assert cyc["mmul"] == 2048 + 64 * aie.loop_fill_cycles()
    # the drain of a block: loop control of the key-block loop (2), the q / k / s bases (3), the db loop's count (1)
    # on the scalar slot; plus the row-block-pair loop's control (2) four times
    assert phases["drain"]["scalar"] == 64 * 6 + 4 * 2
    assert cyc["total"] == pytest.approx(sum(v for k, v in cyc.items() if k != "total"))
    # P.V of the middle kernel: 32 x 128 x 64 MACs in mmul<4,8,8> of 2 issues; 64 O blocks of 4 cascade words in and out
    pv = engine_aie.phase_counts("pv_mid", 32, 128, 64)
    assert pv["drain"]["readincr_v<8>(input_cascade<acc48>)"] == pv["drain"]["writeincr(output_cascade<acc48>)"] \
        == 32 // 4 * 64 // 8 * 4
    assert aie.phase_cycles(pv["mmul"])["vector"] == 2 * (32 // 4) * (128 // 8) * (64 // 8)
    assert engine_aie.loop_invocations("pv_mid", 32, 128, 64)["mmul"] == 4 * 8


def test_loop_control_constants_are_the_kernels():
    """The per-iteration and per-entry loop-control costs of the model are the ones the emulation header defines."""
    from vckattn.sim.hls_csim import REPO_ROOT

    text = (REPO_ROOT / "hw" / "aie" / "aie_api_emu.h").read_text()
    assert f"#define VCK_LOOP_ITER {aie.LOOP_ITER_SCALAR_OPS}\n" in text
    assert f"#define VCK_LOOP_ENTRY {aie.LOOP_ENTRY_SCALAR_OPS}\n" in text
    # the AI Engine fallback agrees: one definition, in the header both kernels' headers include
    k = (REPO_ROOT / "hw" / "aie" / "engine" / "aie_common.h").read_text()
    assert f"#define VCK_LOOP_ITER {aie.LOOP_ITER_SCALAR_OPS}\n" in k and \
        f"#define VCK_LOOP_ENTRY {aie.LOOP_ENTRY_SCALAR_OPS}\n" in k
    for name in ("engine_kernels.h", "gemm_kernels.h"):
        text = (REPO_ROOT / "hw" / "aie" / "engine" / name).read_text()
        assert '#include "aie_common.h"' in text and "#define VCK_LOOP_ITER" not in text, name


def test_register_blocks_fit_the_accumulator_file():
    """AIE1 has four 768-bit accumulator registers (UG1079 'Accumulator Registers': bm0..bm3, each two 384-bit halves of
    eight acc48 lanes): 4 x 768 / 48 = 64 acc48 lanes. Each kernel's register block is RB (<= 2) mmul outputs of 4 x 8 =
    32 lanes (read from the kernel source: one accumulator array of RB entries, RB = 2 at most): at most 64 lanes."""
    import re

    from vckattn.sim.hls_csim import REPO_ROOT

    lanes_in_file = 4 * 768 // 48
    for name, mmul in (("engine_kernels.h", "QkMmul"), ("engine_kernels.h", "PvMmul"), ("gemm_kernels.h", "GemmMmul")):
        text = (REPO_ROOT / "hw" / "aie" / "engine" / name).read_text()
        arrays = re.findall(rf"{mmul} c(\[[^\]]+\])+;", text)
        decls = re.findall(rf"{mmul} c((?:\[[^\]]+\])+);", text)
        assert arrays and decls == ["[S::RB]"], (name, mmul, decls)
        assert re.search(r"RB = \w+ % 8 == 0 \? 2 : 1;", text), name
        assert 2 * 4 * 8 <= lanes_in_file  # RB = 2 blocks of 4 x 8 lanes
        assert 2 * 2 * 4 * 8 > lanes_in_file  # a 2 x 2 block would not fit


@pytest.mark.parametrize("args, match", [(("qx", 32, 128, 64), "kernel must be"), (("qk", 30, 128, 64), "q_rows"),
                                         (("qk", 32, 120, 64), "slice keys"), (("qk", 32, 128, 40), "d=40"),
                                         (("qk", 32, 128, 64, 32), "score_bits"),
                                         (("pv_mid", 32, 128, 64, 8, True), "masked")])
def test_bad_shapes(args, match):
    with pytest.raises(ValueError, match=match):
        engine_aie.invocation_cycles(*args)


def test_macs_from_the_instrumented_counts():
    """Independent of the model: in every committed invocation the counted mmul calls carry exactly the tile's MACs
    (mmul<4,16,8>: 512 a call, mmul<4,8,8>: 256), ``Q_ROWS x SK x D`` for QK^T and P.V, none for the requantizer."""
    from vckattn.golden.engine import slice_keys

    per_call = {"mmul<4,16,8,": 4 * 16 * 8, "mmul<4,8,8,": 4 * 8 * 8}
    data = engine_aie.load_data()
    for b in data["builds"]:
        p = b["build"]
        sk = slice_keys(p["max_keys"], p["kernels"])
        for row in b["invocations"]:
            macs = sum(n * m for op, n in row["counts"].items() for pre, m in per_call.items()
                       if op.startswith(pre) and op.endswith((".mul", ".mac")))
            want = 0 if row["variant"] == "rq" else p["q_rows"] * sk * p["d"]
            assert macs == want == row["macs"], (p, row["variant"])


def test_op_counts_need_the_vector_path():
    """The counts come from the instrumented vector path only: asking the scalar build for them is refused."""
    from vckattn.hw.spec.functional import EngineParams
    from vckattn.sim.engine_csim import run_engine_launch

    p = EngineParams(pipelines=1, kernels=1, q_rows=4, d=16, max_keys=16)
    empty = np.zeros((0, 32), np.uint8)
    with pytest.raises(ValueError, match="op_counts needs the vector path"):
        run_engine_launch(p, [empty], [empty], empty, empty, empty, [0], None, vector=False, op_counts=True)


def test_bank_conflicts_by_hand():
    """Two 128-bit loads a cycle; an even and an odd word of a double bank are in different banks (UG1079 'AI Engine
    Memory'): loads pair even with odd, each leftover same-parity pair may share a bank and costs a cycle."""
    assert aie.bank_conflict_cycles([0, 16]) == 0
    assert aie.bank_conflict_cycles([0, 32]) == 1
    assert aie.bank_conflict_cycles([16, 48, 80, 112, 0]) == 1  # 4 odd words, 1 even: one odd pair left over
    assert aie.bank_conflict_cycles([16 * i for i in range(8)]) == 0
    # the kernels' operand blocks span whole pairs of words: no conflict at any shape
    for kernel in engine_aie.KERNELS:
        for q_rows, sk, d in ((32, 128, 64), (12, 48, 32), (4, 16, 16)):
            assert engine_aie.bank_conflicts(kernel, q_rows, sk, d) == 0

"""Validation of the AIE cost path against published AIE GEMM designs (hw/perf/gemm_kernels.py,
hw/perf/published.py; what it covers and what not: docs/validation.md).

* The published kernels' renderings (hw/aie/published/gemm_kernels.h: MaxEVA's int8 mmul<4,8,4> kernel
  and adder, CHARM's fp32 fpmac kernel) compute what a plain reference computes, exactly, over many
  shapes -- and the test bench notices a kernel that does not.
* Their closed-form operation counts EQUAL the instrumented counts over many shapes.
* The kernel model charges the code's own structure: MaxEVA's flattened loops have no per-block fill,
  one mmul<4,8,4> is 128 MACs in one vector issue, CHARM's two fp32 accumulators hide the two-cycle
  accumulation; every counted operation has a sourced cost.
* Modeled vs published: CHARM's single-kernel efficiency (95%, its README) within 10%; the three
  published designs within :data:`published.TOLERANCE` -- two are outside it today (strict expected
  failures with the reason: a fix shows up as an unexpected pass). No published or modeled figure is
  written into these tests.
"""

from __future__ import annotations

import math
import shutil

import pytest
from conftest import require_tools

from vckattn.hw.perf import aie, gemm_kernels, published
from vckattn.hw.perf.model import load_device
from vckattn.sim import published_gemm
from vckattn.sim.hls_csim import RunError, compile_cpp, run_binary

needs_csim = pytest.mark.tool("g++", "hls4ml")

#: shapes for the closed-form and correctness checks (each kernel's own constraints; the published
#: designs' shapes included)
CASES: tuple[tuple[str, tuple[int, ...]], ...] = (
    *(("maxeva_int8", s) for s in ((8, 8, 8), (16, 16, 16), (32, 128, 32), (64, 64, 32), (8, 256, 16),
                                   (32, 8, 64), (24, 40, 56))),
    *(("maxeva_add_int32", (e,)) for e in (8, 64, 1024)),
    *(("maxeva_add_float", (e,)) for e in (8, 1024)),
    *((k, s) for k in ("charm_fp32", "charm_fp32_acc")
      for s in ((8, 8, 2), (8, 16, 4), (16, 32, 8), (32, 32, 32), (64, 32, 32), (32, 64, 16), (16, 8, 32))),
)


# ------------------------------------------------------------------------------------- instrumented


@needs_csim
def test_closed_form_equals_instrumented_counts() -> None:
    """Every case runs through the test bench (which checks the kernel's output exactly against its
    reference, or fails the run) and its counts equal the closed form."""
    require_tools("g++", "hls4ml")
    measured = published_gemm.measure(CASES)
    for counts, (kernel, dims) in zip(measured, CASES, strict=True):
        assert gemm_kernels.op_counts(kernel, dims) == counts, (kernel, dims)


@needs_csim
def test_test_bench_catches_a_wrong_kernel(tmp_path) -> None:
    """The exact reference check can fail: the same test bench over a copy of the renderings with one
    operand swapped in each kernel stops with status 1."""
    require_tools("g++", "hls4ml")
    src = published_gemm.AIE_DIR
    (tmp_path / "published").mkdir()
    for name in ("aie_api_emu.h", "aie1_intrinsics_emu.h"):
        shutil.copy(src / name, tmp_path / name)
    text = (src / "published" / "gemm_kernels.h").read_text()
    for good, bad in (("c01.mac(a0, b1);", "c01.mac(a1, b1);"),
                      ("ext_w(buf_b, half), 4 + t, 0x0);", "ext_w(buf_b, half), 5 + t, 0x0);")):
        assert text.count(good) == 1, good
        text = text.replace(good, bad)
    (tmp_path / "published" / "gemm_kernels.h").write_text(text)
    exe = compile_cpp([published_gemm.TB_CPP], "published_gemm_tb_mutant",
                      extra_flags=["-std=c++17", "-O1", f"-I{tmp_path}"],
                      depends=[tmp_path / "published" / "gemm_kernels.h"])
    for case in ("maxeva_int8:32x128x32", "charm_fp32:32x32x32"):
        with pytest.raises(RunError, match="status 1"):
            run_binary(exe, args=[case])
    run_binary(exe, args=["maxeva_add_int32:64"])  # the untouched kernel still passes


@needs_csim
def test_test_bench_refuses_malformed_cases() -> None:
    require_tools("g++", "hls4ml")
    exe = published_gemm.build()
    for case in ("maxeva_int8:31x8x8", "charm_fp32:32x32", "nonsense:8", "maxeva_int8"):
        with pytest.raises(RunError, match="status 2"):
            run_binary(exe, args=[case])


# ---------------------------------------------------------------------------------------- kernel model


def test_closed_form_rejects_shapes_the_kernels_cannot_run() -> None:
    for kernel, dims in (("maxeva_int8", (4, 8, 8)), ("maxeva_int8", (8, 12, 8)), ("charm_fp32", (32, 32, 3)),
                         ("maxeva_add_float", (12,)), ("charm_fp32", (32, 32)), ("nope", (8,))):
        with pytest.raises(ValueError):
            gemm_kernels.op_counts(kernel, dims)


@pytest.mark.parametrize("dims", [(16, 16, 16), (32, 128, 32), (64, 64, 32), (8, 256, 16)])
def test_maxeva_int8_macs_and_flattened_loops(dims) -> None:
    """One mmul<4,8,4> is 128 MACs in one vector issue and binds once K >= 16 (at K = 8 the two 256-bit
    stores of each result do); the flattened kernel pays one schedule fill per call, whatever its number
    of 2 x 2 blocks (no per-block loop fill: its loops are unrolled)."""
    m, k, n = dims
    counts = gemm_kernels.op_counts("maxeva_int8", dims)
    mmul = counts["mmul<4,8,4,int8,int8>.mul"] + counts.get("mmul<4,8,4,int8,int8>.mac", 0)
    assert mmul * 4 * 8 * 4 == m * k * n == gemm_kernels.kernel_macs("maxeva_int8", dims)
    b = gemm_kernels.kernel_breakdown("maxeva_int8", dims)
    assert b["bottleneck_slot"] == "vector" and b["issue"] == mmul
    assert b["loop_fill"] == aie.LOOP_FILL_CYCLES
    assert b["total"] == mmul + aie.LOOP_FILL_CYCLES + 3 * gemm_kernels.SYNC_CYCLES_PER_PORT
    bigger = gemm_kernels.kernel_breakdown("maxeva_int8", (2 * m, k, n))
    assert bigger["total"] - b["total"] == mmul  # twice the blocks: only the issues double


@pytest.mark.parametrize("kernel", ["charm_fp32", "charm_fp32_acc"])
def test_charm_fp32_macs_accumulators_and_loop_fills(kernel) -> None:
    """One fpmac is 8 MACs in one vector issue; two interleaved accumulators make the two-cycle fp32
    accumulation exactly as long as the issues (it never binds); one fill per entry of the pipelined
    reduction loop, i.e. per 8 x 2 block."""
    for dims in ((32, 32, 32), (64, 32, 16), (8, 64, 2)):
        h1, w1, w2 = dims
        counts = gemm_kernels.op_counts(kernel, dims)
        assert counts["fpmac(v8float,v16float,v8float)"] * 8 == h1 * w1 * w2
        b = gemm_kernels.kernel_breakdown(kernel, dims)
        assert b["fp32_accumulation"] == b["issue"] == counts["fpmac(v8float,v16float,v8float)"]
        assert b["loop_fill"] == aie.LOOP_FILL_CYCLES * (h1 // 8) * (w2 // 2)
    assert gemm_kernels.loop_fills(kernel, (32, 8, 32)) == 0  # w1 = 8: the reduction loop never iterates


def test_every_published_kernel_operation_has_a_sourced_cost() -> None:
    ops = {op for kernel, dims in CASES for op in gemm_kernels.op_counts(kernel, dims)}
    free = set()
    for op in ops:
        issues = aie.cost_of(op)
        assert all(slot in aie.SLOTS and n > 0 for slot, n in issues.items()), op
        assert len(aie.COST_TABLE[op]["source"]) > 20, op
        if not issues:
            free.add(op)
    # the only operations that take no slot: an undefined register and the windows' pointer moves
    assert free == {"undef_v16float", "window_incr(float)", "window_decr(float)"}


def test_charm_single_kernel_efficiency_against_its_published_figure() -> None:
    """CHARM's README: mm_kernel0 reaches 95% on 32x32x32 (AMD's cycle-accurate simulator). The model,
    from the kernel's own code, must agree within 10% (it is lower: one fill per reduction-loop entry)."""
    dims, eff, _source = gemm_kernels.PUBLISHED_EFFICIENCY["charm_fp32"]
    modeled = gemm_kernels.kernel_efficiency("charm_fp32", dims)
    assert abs(modeled / eff - 1) <= 0.10, modeled
    assert modeled <= 1.0


# ------------------------------------------------------------------------------------ published designs

#: designs outside the tolerance today, with why (docs/validation.md); strict: a fix shows up
OUTSIDE = {
    "MaxEVA int8": "the int8 kernel as written is ~96% efficient and every stage of the design is balanced at "
                   "1,024 cycles per iteration; the AIE simulator's ~1,330 holds ~270 cycles of overheads outside "
                   "the kernel's code (window DMA/lock hand-offs, broadcast stalls) that the model does not have",
    "CHARM fp32": "bound by its packet-switched PLIOs at the full PL rate; the board reaches ~80% of that rate "
                  "(PL data movers, DDR) and the PL side is not modeled from its code",
}


@pytest.mark.parametrize("name", [
    pytest.param(g.name, marks=[pytest.mark.xfail(strict=True, reason=why)
                                for key, why in OUTSIDE.items() if g.name.startswith(key)])
    for g in published.DESIGNS])
def test_published_designs_within_tolerance(name) -> None:
    g = next(g for g in published.DESIGNS if g.name == name)
    r = published.predict(g)
    assert r["published"] == g.published
    assert abs(r["error"]) <= published.TOLERANCE, (r["modeled"], r["published"], r["bound_by"])


def test_three_designs_two_data_types_two_kernel_codes() -> None:
    """MaxEVA int8, MaxEVA fp32 and CHARM fp32 are all reported, each through its own kernel's code:
    the int8 design through MaxEVA's int8 kernel, the fp32 designs through CHARM's fp32 kernel (no fp32
    figure is scaled from an int8 one)."""
    rows = {r["name"].split(" (")[0]: r for r in published.validate()}
    assert set(rows) == {"MaxEVA int8", "MaxEVA fp32", "CHARM fp32 6144^3"}
    assert rows["MaxEVA int8"]["kernel"] == "maxeva_int8"
    assert rows["MaxEVA fp32"]["kernel"] == rows["CHARM fp32 6144^3"]["kernel"] == "charm_fp32"
    for r in rows.values():
        assert r["kernel_cycles"] == gemm_kernels.kernel_cycles(r["kernel"], tuple(r["kernel_dims"]))
        assert r["terms_seconds"]["AIE core (kernel's own code)"] == pytest.approx(r["kernel_cycles"] / 1.25e9)


def test_modeled_designs_stay_below_physical_bounds() -> None:
    for g, r in zip(published.DESIGNS, published.validate(), strict=True):
        dev = load_device(g.board)
        assert math.isfinite(r["modeled"]) and r["modeled"] > 0
        peak = dev.peak_ops(r["dtype"]) * r["aie_cores"] / dev.aie_tiles
        assert r["modeled"] <= peak  # never above the peak of the cores it uses
        ops = 2 * g.m * g.k * g.n * g.matmul_kernels
        plio = min(16 * g.pl_clock_mhz * 1e6, 4 * g.aie_clock_mhz * 1e6)
        for _name, _count, streams, nbytes in g.plio_groups:  # nor above any PLIO's rate
            assert r["modeled"] <= ops / (streams * nbytes / plio) * (1 + 1e-12)
        assert 0 < r["kernel_efficiency"] <= 1

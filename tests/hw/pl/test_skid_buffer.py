"""SkidBuffer (AXI4-Stream register slice): cocotb on Verilator (and Icarus when installed)."""

from __future__ import annotations

import pytest

from vckattn.hw.pl.stream import SkidBuffer
from vckattn.sim.runner import (
    SIM_BUILD_ROOT,
    SimulationFailed,
    generate_verilog,
    run_cocotb,
    verilator_fst_args,
)

TB = "vckattn.sim.tb_skid_buffer"
WIDTH = 32

SIMULATORS = [
    pytest.param("verilator", marks=pytest.mark.tool("verilator")),
    pytest.param("icarus", marks=pytest.mark.tool("icarus")),  # optional: skips when missing, even in CI
]


@pytest.mark.sim
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_skid_buffer(simulator: str) -> None:
    src = generate_verilog(SkidBuffer(WIDTH), "skid_buffer")
    res = run_cocotb("skid_buffer", [src], TB, simulator=simulator)
    names = {t.name for t in res.passed}
    assert {"test_random_traffic", "test_throughput"} <= names, res.tests


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_runner_reports_failures() -> None:
    """A deliberately failing cocotb test must fail loudly: seed, FST waveform, repro command."""
    # Same module as test_skid_buffer, so the (non-traced) Verilator build is shared.
    src = generate_verilog(SkidBuffer(WIDTH), "skid_buffer")
    with pytest.raises(SimulationFailed) as info:
        run_cocotb(
            "skid_buffer",
            [src],
            TB,
            seed=12345,
            testcase="test_selftest_must_fail",
            extra_env={"VCKATTN_TB_SELFTEST_FAIL": "1"},
        )
    msg = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert "test_selftest_must_fail" in msg
    assert "COCOTB_RANDOM_SEED=12345" in msg
    res = info.value.results
    assert res is not None and res.seed == 12345
    # FST needs liblz4 (runtime at least); the runner falls back to VCD without it.
    expected_suffix = ".fst" if verilator_fst_args() is not None else ".vcd"
    assert res.waves is not None and res.waves.suffix == expected_suffix and res.waves.stat().st_size > 0
    assert str(res.waves) in msg
    assert res.waves.is_relative_to(SIM_BUILD_ROOT)


def test_skid_buffer_amaranth_sim() -> None:
    """Fast pre-check in Amaranth's own simulator (no Verilator): ordering, and that
    s_axis_tready is registered (never changes when m_axis_tready changes within a cycle)."""
    import random

    from amaranth.sim import Simulator, SimulatorContext

    dut = SkidBuffer(16)
    rng = random.Random(2024)
    sent = [rng.getrandbits(16) for _ in range(600)]
    got: list[int] = []

    async def bench(ctx: SimulatorContext) -> None:
        ctx.set(dut.s_axis_tvalid, 0)
        await ctx.tick().repeat(2)
        i = 0
        for _ in range(5000):
            if len(got) == len(sent):
                break
            ctx.set(dut.s_axis_tvalid, i < len(sent) and rng.random() < 0.7)
            ctx.set(dut.s_axis_tdata, sent[i] if i < len(sent) else 0)
            ctx.set(dut.s_axis_tlast, i % 7 == 6)
            ready_before = ctx.get(dut.s_axis_tready)
            ctx.set(dut.m_axis_tready, 1 - ctx.get(dut.m_axis_tready))
            assert ctx.get(dut.s_axis_tready) == ready_before, "comb path m_axis_tready -> s_axis_tready"
            ctx.set(dut.m_axis_tready, rng.random() < 0.6)
            assert ctx.get(dut.s_axis_tready) == ready_before, "comb path m_axis_tready -> s_axis_tready"
            if ctx.get(dut.m_axis_tvalid) and ctx.get(dut.m_axis_tready):
                assert ctx.get(dut.m_axis_tlast) == (len(got) % 7 == 6)
                got.append(ctx.get(dut.m_axis_tdata))
            if ctx.get(dut.s_axis_tvalid) and ctx.get(dut.s_axis_tready):
                i += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(10e-9)
    sim.add_testbench(bench)
    sim.run()
    assert got == sent

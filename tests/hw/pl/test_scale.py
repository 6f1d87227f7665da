"""ScaleKernel (AXI4-Lite register file + stall pipeline + kernel harness demo): cocotb on Verilator,
plus fast checks of the register map layout and the pipeline in Amaranth's simulator."""

from __future__ import annotations

import pytest

from vckattn.golden.scale_int import SCALE_ID, scale_regmap
from vckattn.hw.pl.axil import Mem, Reg, RegisterMap
from vckattn.hw.pl.scale import ScaleKernel
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_scale"
# Amaranth/Yosys Verilog is width-correct by Verilog's extension rules, but Verilator lints
# mixed-width signed operators (WIDTHEXPAND) and casez without default (CASEINCOMPLETE).


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("lanes", [1, 4])
def test_scale_kernel(lanes: int) -> None:
    name = f"scale_kernel_l{lanes}"
    src = generate_verilog(ScaleKernel(lanes), name)
    res = run_cocotb(name, [src], TB)
    names = {t.name for t in res.passed}
    assert {
        "test_axil_registers",
        "test_axil_handshake_orders",
        "test_memory",
        "test_random_traffic",
        "test_throughput",
    } <= names, res.tests


def test_regmap_layout() -> None:
    rm = RegisterMap(
        [Reg("a", 16, signed=True, reset=-2), Reg("b", 1), Reg("st", 32, access="ro")],
        [Mem("t0", 8, 5), Mem("t1", 32, 64, signed=True, readback=False), Mem("t2", 4, 1)],
        base=0x4000_0000,
        ident=0xABCD0001,
        version=3,
    )
    offs = {d["name"]: d["offset"] for d in rm.describe()}
    # ID, VERSION, regs at 4-byte strides, then power-of-two aligned memory windows.
    assert offs == {"ID": 0, "VERSION": 4, "a": 8, "b": 12, "st": 16, "t0": 32, "t1": 256, "t2": 512}
    assert rm.offset("t1") == 256 and rm.address("t1") == 0x4000_0100
    assert rm.addr_width == 12
    d = {x["name"]: x for x in rm.describe()}
    assert d["ID"]["value"] == 0xABCD0001 and d["ID"]["access"] == "ro"
    assert d["a"]["signed"] and d["a"]["reset"] == -2 and d["st"]["access"] == "ro"
    assert d["t0"]["depth"] == 5 and d["t0"]["window_bytes"] == 32 and d["t1"]["access"] == "wo"
    with pytest.raises(ValueError):
        RegisterMap([Reg("ID", 8)])
    with pytest.raises(ValueError):
        Reg("x", 8, reset=256)
    with pytest.raises(ValueError):
        RegisterMap([Reg("x", 8)], base=0x100)
    assert scale_regmap(4).offset("bias") == 0x40


def test_scale_kernel_amaranth_sim() -> None:
    """Fast pre-check without Verilator: AXI-Lite write/read, one frame through the pipeline
    with the sink stalling, II = 1 when it does not."""
    from amaranth.sim import Simulator, SimulatorContext

    lanes = 2
    dut = ScaleKernel(lanes)
    rm = dut.regmap
    xs = [[5, -7], [100, -128], [3, 0]]  # one frame of three beats
    keep = [0b11, 0b01, 0b11]
    out: list[tuple[int, int, int, int]] = []

    async def axil_write(ctx: SimulatorContext, off: int, val: int) -> int:
        ctx.set(dut.s_axil_awaddr, off)
        ctx.set(dut.s_axil_awvalid, 1)
        ctx.set(dut.s_axil_wdata, val & 0xFFFFFFFF)
        ctx.set(dut.s_axil_wstrb, 0xF)
        ctx.set(dut.s_axil_wvalid, 1)
        ctx.set(dut.s_axil_bready, 1)
        await ctx.tick()
        ctx.set(dut.s_axil_awvalid, 0)
        ctx.set(dut.s_axil_wvalid, 0)
        while not ctx.get(dut.s_axil_bvalid):
            await ctx.tick()
        resp = ctx.get(dut.s_axil_bresp)
        await ctx.tick()
        return resp

    async def axil_read(ctx: SimulatorContext, off: int) -> tuple[int, int]:
        ctx.set(dut.s_axil_araddr, off)
        ctx.set(dut.s_axil_arvalid, 1)
        ctx.set(dut.s_axil_rready, 1)
        await ctx.tick()
        ctx.set(dut.s_axil_arvalid, 0)
        while not ctx.get(dut.s_axil_rvalid):
            await ctx.tick()
        got = ctx.get(dut.s_axil_rdata), ctx.get(dut.s_axil_rresp)
        await ctx.tick()
        return got

    async def bench(ctx: SimulatorContext) -> None:
        await ctx.tick().repeat(2)
        assert await axil_read(ctx, 0) == (SCALE_ID, 0)
        assert await axil_write(ctx, rm.offset("a"), -300) == 0
        assert await axil_write(ctx, rm.offset("s"), 2) == 0
        for k in range(4):
            assert await axil_write(ctx, rm.offset("bias") + 4 * k, 10 * k - 15) == 0
        assert await axil_read(ctx, rm.offset("a")) == ((-300) & 0xFFFFFFFF, 0)
        assert await axil_read(ctx, rm.offset("bias") + 4) == ((-5) & 0xFFFFFFFF, 0)
        assert await axil_write(ctx, 0x20, 1) == 2 and await axil_read(ctx, 0x20) == (0, 2)
        for rep in range(2):  # rep 0: sink stalls every other cycle; rep 1: always ready
            b = 0
            for cyc in range(40):
                ctx.set(dut.m_axis_tready, 1 if rep else cyc % 2)
                ctx.set(dut.s_axis_tvalid, b < 3)
                if b < 3:
                    word = sum((v & 0xFF) << (8 * i) for i, v in enumerate(xs[b]))
                    ctx.set(dut.s_axis_tdata, word)
                    ctx.set(dut.s_axis_tuser, keep[b])
                    ctx.set(dut.s_axis_tlast, b == 2)
                if ctx.get(dut.m_axis_tvalid) and ctx.get(dut.m_axis_tready):
                    w = ctx.get(dut.m_axis_tdata)
                    out.append((cyc, w, ctx.get(dut.m_axis_tuser), ctx.get(dut.m_axis_tlast)))
                if b < 3 and ctx.get(dut.s_axis_tready):
                    b += 1
                await ctx.tick()
            ctx.set(dut.s_axis_tvalid, 0)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()

    def golden(x: int, k: int) -> int:
        return max(-(1 << 15), min((1 << 15) - 1, ((x * -300) >> 2) + (10 * k - 15 if k < 4 else 0)))

    assert len(out) == 6
    for idx, (_, w, user, last) in enumerate(out):
        b = idx % 3
        vals = [(w >> (16 * i)) & 0xFFFF for i in range(lanes)]
        vals = [v - (1 << 16) if v >> 15 else v for v in vals]
        want = [golden(xs[b][i], (b * lanes + i) % 16) if keep[b] >> i & 1 else 0 for i in range(lanes)]
        assert vals == want and user == keep[b] and last == (b == 2), (idx, vals, want)
    cycles = [c for c, *_ in out[3:]]
    assert cycles == [cycles[0], cycles[0] + 1, cycles[0] + 2], "bubbles with the sink always ready"

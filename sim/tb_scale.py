"""cocotb 2.x testbench for :class:`vckattn.hw.pl.scale.ScaleKernel` (harness demo).

The full description: ``docs/internals/sim.md``, section ``sim/tb_scale.py``.
"""

from __future__ import annotations

import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiResp

from vckattn.golden.scale_int import BIAS_DEPTH, SCALE_ID, scale_int, scale_regmap
from vckattn.hw.pl.scale import ScaleKernel
from vckattn.sim.kernel_tb import KernelHarness, start

OUT_SIGNED = True


def dut_shape(dut: SimHandleBase) -> tuple[int, int, int]:
    """(lanes, in_width, out_width) from the DUT's port widths."""
    lanes = len(dut.s_axis_tuser)
    return lanes, len(dut.s_axis_tdata) // lanes, len(dut.m_axis_tdata) // lanes


def make_harness(dut: SimHandleBase) -> KernelHarness:
    lanes, iw, ow = dut_shape(dut)
    return KernelHarness(dut, lanes=lanes, in_width=iw, out_width=ow, in_signed=True, out_signed=OUT_SIGNED)


def random_rows(
    rng: np.random.Generator, n_elements: int, in_width: int, max_len: int, p_masked: float
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rows, masks, total = [], [], 0
    lo, hi = -(1 << (in_width - 1)), 1 << (in_width - 1)
    while total < n_elements:
        n = int(rng.choice([1, 2, 3, 5, rng.integers(1, max_len + 1), rng.integers(1, max_len + 1)]))
        rows.append(rng.integers(lo, hi, size=n))
        kind = rng.random()
        if kind < 0.05:
            masks.append(np.zeros(n, dtype=bool))  # fully masked row
        else:
            masks.append(rng.random(n) >= p_masked)
        total += n
    return rows, masks


# --------------------------------------------------------------------------------------------
# AXI4-Lite
# --------------------------------------------------------------------------------------------


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def test_axil_registers(dut: SimHandleBase) -> None:
    lanes, _, _ = dut_shape(dut)
    rm = scale_regmap(lanes)
    await start(dut)
    h = make_harness(dut)

    assert await h.read_reg(rm, "ID") == SCALE_ID
    assert await h.read_reg(rm, "VERSION") == 1
    assert await h.read_reg(rm, "a") == 1, "reset value of a"
    assert await h.read_reg(rm, "s") == 0, "reset value of s"
    assert await h.read_reg(rm, "frames") == 0, "frames after reset"

    # Signed register: two's complement in, sign-extended out.
    await h.write_regs(rm, {"a": -12345, "s": 31})
    assert await h.read_reg(rm, "a") == -12345
    raw, resp = await h.read_word(rm.offset("a"))
    assert resp == AxiResp.OKAY and raw == (-12345) & 0xFFFFFFFF, hex(raw)
    assert await h.read_reg(rm, "s") == 31
    # Bits above the width are ignored on write.
    assert await h.write_word(rm.offset("s"), 0xFFFFFFE5) == AxiResp.OKAY
    assert await h.read_reg(rm, "s") == 5
    # WSTRB: a one-byte write to byte 1 of a changes bits [8, 16) only.
    await h.write_regs(rm, {"a": 0x1234})
    assert await h.write_bytes(rm.offset("a") + 1, b"\x80") == AxiResp.OKAY
    assert await h.read_reg(rm, "a") == -0x8000 + 0x34  # 0x8034 as signed 16
    assert await h.write_bytes(rm.offset("a"), b"\xcd") == AxiResp.OKAY
    assert await h.read_reg(rm, "a") == -0x8000 + 0xCD
    a_now = -0x8000 + 0xCD

    # Read-only words: SLVERR, no effect.
    for name in ("ID", "VERSION", "frames"):
        assert await h.write_word(rm.offset(name), 0xDEADBEEF) == AxiResp.SLVERR, name
    assert await h.read_reg(rm, "ID") == SCALE_ID
    assert await h.read_reg(rm, "frames") == 0

    # Unmapped words: gap after the registers, past the memory window, end of the aperture.
    bias_end = rm.offset("bias") + 4 * BIAS_DEPTH
    unmapped = [rm.offset("frames") + 4, rm.offset("bias") - 4, bias_end, bias_end + 0x100, (1 << rm.addr_width) - 4]
    for off in unmapped:
        assert await h.write_word(off, 0xFFFFFFFF) == AxiResp.SLVERR, hex(off)
        data, resp = await h.read_word(off)
        assert resp == AxiResp.SLVERR and data == 0, (hex(off), resp, hex(data))
    assert await h.read_reg(rm, "a") == a_now and await h.read_reg(rm, "s") == 5, "unmapped write had an effect"

    # Random accesses with random stalls on every channel (AW/W in any order, B/R held).
    rng = random.Random(cocotb.RANDOM_SEED)
    h.set_axil_pauses(rng, prob=0.4)
    model = {"a": a_now, "s": 5}
    bias_model: dict[int, int] = {}
    for _ in range(300):
        op = rng.random()
        if op < 0.3:
            name = rng.choice(["a", "s"])
            v = rng.randint(-(1 << 15), (1 << 15) - 1) if name == "a" else rng.randint(0, 31)
            await h.write_regs(rm, {name: v})
            model[name] = v
        elif op < 0.5:
            k, v = rng.randrange(BIAS_DEPTH), rng.randint(-128, 127)
            await h.write_mem(rm, "bias", [v], start=k)
            bias_model[k] = v
        elif op < 0.6:
            off = rng.choice(unmapped)
            if rng.random() < 0.5:
                assert await h.write_word(off, rng.getrandbits(32)) == AxiResp.SLVERR
            else:
                assert await h.read_word(off) == (0, AxiResp.SLVERR)
        elif op < 0.8:
            name = rng.choice(["a", "s"])
            assert await h.read_reg(rm, name) == model[name], name
        elif bias_model:
            k = rng.choice(sorted(bias_model))
            assert (await h.read_mem(rm, "bias", 1, start=k))[0] == bias_model[k], k


async def _raw_write(
    dut: SimHandleBase, addr: int, data: int, strb: int, aw_at: int, w_at: int, b_at: int
) -> int:
    """Drive one AXI4-Lite write by hand: AWVALID from cycle ``aw_at``, WVALID from ``w_at``,
    BREADY from ``b_at``. Checks BVALID only after both handshakes and BRESP/BVALID holding
    while BREADY is low. Returns BRESP."""
    aw_done = w_done = False
    held: int | None = None
    c = 0
    while True:
        await RisingEdge(dut.clk)
        dut.s_axil_awvalid.value = int(not aw_done and c >= aw_at)
        dut.s_axil_awaddr.value = addr
        dut.s_axil_wvalid.value = int(not w_done and c >= w_at)
        dut.s_axil_wdata.value = data
        dut.s_axil_wstrb.value = strb
        dut.s_axil_bready.value = int(c >= b_at)
        await ReadOnly()
        bvalid = int(dut.s_axil_bvalid.value)
        if held is not None:
            assert bvalid and int(dut.s_axil_bresp.value) == held, f"cycle {c}: BVALID/BRESP not held"
        if bvalid:
            assert aw_done and w_done, f"cycle {c}: BVALID before both AW and W handshakes"
            held = int(dut.s_axil_bresp.value)
            if int(dut.s_axil_bready.value):
                resp = held
                await RisingEdge(dut.clk)
                dut.s_axil_bready.value = 0
                return resp
        if int(dut.s_axil_awvalid.value) and int(dut.s_axil_awready.value):
            aw_done = True
        if int(dut.s_axil_wvalid.value) and int(dut.s_axil_wready.value):
            w_done = True
        c += 1
        assert c < 100, "write did not complete"


async def _raw_read(dut: SimHandleBase, addr: int, ar_at: int, r_at: int) -> tuple[int, int]:
    """Drive one AXI4-Lite read by hand; check RVALID/RDATA/RRESP hold while RREADY is low."""
    ar_done = False
    held: tuple[int, int] | None = None
    c = 0
    while True:
        await RisingEdge(dut.clk)
        dut.s_axil_arvalid.value = int(not ar_done and c >= ar_at)
        dut.s_axil_araddr.value = addr
        dut.s_axil_rready.value = int(c >= r_at)
        await ReadOnly()
        rvalid = int(dut.s_axil_rvalid.value)
        now = (int(dut.s_axil_rdata.value), int(dut.s_axil_rresp.value))
        if held is not None:
            assert rvalid and now == held, f"cycle {c}: RVALID/RDATA/RRESP not held"
        if rvalid:
            assert ar_done, f"cycle {c}: RVALID before the AR handshake"
            held = now
            if int(dut.s_axil_rready.value):
                await RisingEdge(dut.clk)
                dut.s_axil_rready.value = 0
                return now
        if int(dut.s_axil_arvalid.value) and int(dut.s_axil_arready.value):
            ar_done = True
        c += 1
        assert c < 100, "read did not complete"


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def test_axil_handshake_orders(dut: SimHandleBase) -> None:
    lanes, _, _ = dut_shape(dut)
    rm = scale_regmap(lanes)
    for sig in ("awvalid", "wvalid", "bready", "arvalid", "rready"):
        getattr(dut, f"s_axil_{sig}").value = 0
    dut.s_axis_tvalid.value = 0
    dut.m_axis_tready.value = 0
    await start(dut)
    a_off, b_off = rm.offset("a"), rm.offset("bias")
    value = 0x1000
    for aw_at, w_at in ((0, 0), (0, 3), (3, 0), (2, 2), (0, 1), (1, 0)):
        for b_at in (0, 4):
            value += 7
            assert await _raw_write(dut, a_off, value, 0xF, aw_at, w_at, b_at) == 0, (aw_at, w_at, b_at)
            for r_at in (0, 3):
                assert await _raw_read(dut, a_off, ar_at=b_at, r_at=r_at) == (value, 0)
    # memory entry, W before AW, and a read-only target
    assert await _raw_write(dut, b_off + 4 * 3, (-5) & 0xFFFFFFFF, 0xF, 3, 0, 2) == 0
    assert await _raw_read(dut, b_off + 4 * 3, 0, 2) == ((-5) & 0xFFFFFFFF, 0)
    assert await _raw_write(dut, rm.offset("ID"), 0, 0xF, 1, 0, 0) == 2
    assert await _raw_read(dut, rm.offset("ID"), 0, 0) == (SCALE_ID, 0)
    # unaligned address: the low two bits are ignored
    assert await _raw_read(dut, a_off + 2, 0, 0) == (value, 0)


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def test_memory(dut: SimHandleBase) -> None:
    lanes, _, _ = dut_shape(dut)
    rm = scale_regmap(lanes)
    await start(dut)
    h = make_harness(dut)
    rng = random.Random(cocotb.RANDOM_SEED)
    bias = [-128, 127, -1, 0] + [rng.randint(-128, 127) for _ in range(BIAS_DEPTH - 4)]
    await h.write_mem(rm, "bias", bias)
    assert await h.read_mem(rm, "bias", BIAS_DEPTH) == bias
    raw, resp = await h.read_word(rm.offset("bias"))
    assert resp == AxiResp.OKAY and raw == 0xFFFFFF80, f"bias[0] = -128 must read 0xffffff80, got {raw:#x}"
    part = [rng.randint(-128, 127) for _ in range(5)]
    await h.write_mem(rm, "bias", part, start=7)
    bias[7:12] = part
    assert await h.read_mem(rm, "bias", BIAS_DEPTH) == bias
    # Bits above the entry width are dropped on write.
    assert await h.write_word(rm.offset("bias") + 4 * 2, 0x12345_67F) == AxiResp.OKAY
    assert (await h.read_mem(rm, "bias", 1, start=2))[0] == 0x7F


# --------------------------------------------------------------------------------------------
# Streams
# --------------------------------------------------------------------------------------------


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_random_traffic(dut: SimHandleBase) -> None:
    lanes, iw, ow = dut_shape(dut)
    rm = scale_regmap(lanes)
    await start(dut)
    h = make_harness(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    pyrng = random.Random(cocotb.RANDOM_SEED)
    h.set_random_pauses(pyrng, in_prob=0.3, out_prob=0.4)
    total = int(os.environ.get("TB_SCALE_ELEMENTS", "20000"))
    configs = [
        # (a, s): moderate gain; then a large gain with a small shift, which saturates often
        (int(rng.integers(-3000, 3000)), int(rng.integers(4, 9))),
        (int(rng.choice([-1, 1]) * rng.integers(20000, 32768)), int(rng.integers(0, 3))),
    ]
    n_rows = n_elems = n_sat = 0
    for a, s in configs:
        bias = [int(v) for v in rng.integers(-128, 128, size=BIAS_DEPTH)]
        await h.write_regs(rm, {"a": a, "s": s})
        await h.write_mem(rm, "bias", bias)
        rows, masks = random_rows(rng, total // len(configs), iw, max_len=48, p_masked=0.2)
        expected = scale_int(rows, masks, a, s, bias, ow)
        n_sat += sum(int(np.sum(np.abs(e) >= (1 << (ow - 1)) - 1)) for e in expected)
        stats = await h.run_rows(rows, masks, expected)
        n_rows += stats.rows
        n_elems += stats.elements
        dut._log.info(
            "a=%d s=%d: %d elements in %d rows, %d cycles (%.3f elem/cycle), input stalled %d cycles",
            a, s, stats.elements, stats.rows, stats.cycles, stats.elements_per_cycle, stats.in_ready_low,
        )
        assert stats.in_ready_low > 0, "backpressure never reached s_axis_tready"
    assert n_elems >= total
    assert n_sat > 0, "no saturating element was generated"
    assert await h.read_reg(rm, "frames") == n_rows


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    lanes, iw, ow = dut_shape(dut)
    rm = scale_regmap(lanes)
    await start(dut)
    h = make_harness(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    a, s = -77, 3
    bias = [int(v) for v in rng.integers(-128, 128, size=BIAS_DEPTH)]
    await h.write_regs(rm, {"a": a, "s": s})
    await h.write_mem(rm, "bias", bias)
    row_len = 16 * lanes
    rows = [rng.integers(-(1 << (iw - 1)), 1 << (iw - 1), size=row_len) for _ in range(max(64, 2048 // row_len))]
    masks = [rng.random(row_len) >= 0.1 for _ in rows]
    t = await h.measure_throughput(rows, scale_int(rows, masks, a, s, bias, ow), masks)
    dut._log.info(
        "throughput: %d elements, %.4f elements/cycle (%.4f beats/cycle), latency %d cycles",
        t.elements, t.elements_per_cycle, t.beats_per_cycle, t.latency,
    )
    assert t.beats_per_cycle == 1.0 and t.elements_per_cycle == lanes, t
    assert t.latency == ScaleKernel.LATENCY + 1, t.latency

"""Online-softmax kernel (hw/pl/online_softmax.py): cocotb on Verilator against the golden model,
plus fast checks in Amaranth's simulator (random stalls on both streams, short rows, an
overflowing row, a format whose output shift is negative) and of the documented register map."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vckattn.golden.funcunits import RecipConfig
from vckattn.golden.online_softmax_int import (
    OnlineSoftmaxFormat,
    OnlineSoftmaxRegisters,
    online_softmax_int,
    online_softmax_registers,
    online_softmax_regmap,
)
from vckattn.hw.pl import online_softmax as osm
from vckattn.hw.pl.online_softmax import OnlineSoftmaxKernel, buffer_bits
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_online_softmax"


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize(("lanes", "max_keys", "elements"), [(4, 1024, 20_000), (1, 256, 5_000),
                                                          pytest.param(4, 1024, 100_000, marks=pytest.mark.full),
                                                          pytest.param(1, 256, 20_000, marks=pytest.mark.full)])
def test_online_softmax_kernel(lanes: int, max_keys: int, elements: int) -> None:
    name = f"online_softmax_l{lanes}_k{max_keys}"
    src = generate_verilog(OnlineSoftmaxKernel(lanes, max_keys), name)
    res = run_cocotb(name, [src], TB, extra_env={"TB_OSM_ELEMENTS": str(elements)})
    names = {t.name for t in res.passed}
    assert {"test_registers", "test_random_traffic", "test_overflow", "test_throughput"} <= names, res.tests


def test_buffer_bits_and_regmap_docstring() -> None:
    assert buffer_bits(4, 1024) == 2 * 256 * (4 * 18 + 6) == 39_936
    assert buffer_bits(1, 256) == 2 * 256 * 24
    # the register table of the kernel's description (docs/internals/hw.md) matches the RegisterMap
    rm = online_softmax_regmap(1024)
    page = (Path(__file__).resolve().parents[3] / "docs" / "internals" / "hw.md").read_text(encoding="utf-8")
    doc = page.split("## hw/pl/online_softmax.py", 1)[1].split("\n## ", 1)[0]
    for d in rm.describe():
        pat = rf"^{d['name']}\s+0x{d['offset']:02X}\s+{d['access']}"
        assert re.search(pat, doc, re.M), f"docstring row for {d['name']} at {d['offset']:#x} ({d['access']})"
    assert f"`{osm.ONLINE_SOFTMAX_ID:#010X}`".replace("0X", "0x") in doc
    with pytest.raises(ValueError):
        osm.OnlineSoftmaxGeometry(4, 1022, OnlineSoftmaxFormat(block=4))
    with pytest.raises(ValueError):
        osm.OnlineSoftmaxGeometry(4, 1 << 15, OnlineSoftmaxFormat(block=4))  # beyond the golden's sum_bits


# --------------------------------------------------------------------------------------------
# Amaranth simulator (no Verilator)
# --------------------------------------------------------------------------------------------


def _simulate(dut: OnlineSoftmaxKernel, rows: list[np.ndarray], masks: list[np.ndarray],
              regs: OnlineSoftmaxRegisters, in_prob: float, out_prob: float, seed: int) -> list[tuple[int, int, int]]:
    """Stream ``rows`` through ``dut`` with random source idles and sink stalls; return output beats
    ``(tdata, tuser, tlast)``."""
    from amaranth.sim import Simulator

    lanes, iw = dut.lanes, dut.in_width
    beats = []
    for row, mk in zip(rows, masks, strict=True):
        nb = -(-len(row) // lanes)
        for b in range(nb):
            vals, ks = row[b * lanes:(b + 1) * lanes], mk[b * lanes:(b + 1) * lanes]
            word = sum((int(v) & ((1 << iw) - 1)) << (i * iw) for i, v in enumerate(vals))
            beats.append((word, sum(int(k) << i for i, k in enumerate(ks)), int(b == nb - 1)))
    rng = np.random.default_rng(seed)
    out: list[tuple[int, int, int]] = []
    rm = dut.regmap

    async def write(ctx, off: int, val: int) -> None:
        ctx.set(dut.s_axil_awaddr, off)
        ctx.set(dut.s_axil_wdata, val & 0xFFFFFFFF)
        ctx.set(dut.s_axil_wstrb, 0xF)
        ctx.set(dut.s_axil_awvalid, 1)
        ctx.set(dut.s_axil_wvalid, 1)
        ctx.set(dut.s_axil_bready, 1)
        await ctx.tick()
        ctx.set(dut.s_axil_awvalid, 0)
        ctx.set(dut.s_axil_wvalid, 0)
        while not ctx.get(dut.s_axil_bvalid):
            await ctx.tick()
        assert ctx.get(dut.s_axil_bresp) == 0
        await ctx.tick()

    async def bench(ctx) -> None:
        await ctx.tick().repeat(2)
        await write(ctx, rm.offset("a_mult"), regs.a_mult)
        await write(ctx, rm.offset("a_shift"), regs.a_shift)
        k = cyc = 0
        while len(out) < len(beats):
            cyc += 1
            assert cyc < 50 * len(beats) + 1000, "stream stuck"
            valid = k < len(beats) and rng.random() >= in_prob
            ctx.set(dut.s_axis_tvalid, int(valid))
            if valid:
                word, user, last = beats[k]
                ctx.set(dut.s_axis_tdata, word)
                ctx.set(dut.s_axis_tuser, user)
                ctx.set(dut.s_axis_tlast, last)
            ready = int(rng.random() >= out_prob)
            ctx.set(dut.m_axis_tready, ready)
            if ready and ctx.get(dut.m_axis_tvalid):
                out.append((ctx.get(dut.m_axis_tdata), ctx.get(dut.m_axis_tuser), ctx.get(dut.m_axis_tlast)))
            if valid and ctx.get(dut.s_axis_tready):
                k += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    return out


def _check(dut: OnlineSoftmaxKernel, rows: list[np.ndarray], masks: list[np.ndarray],
           out: list[tuple[int, int, int]], regs: OnlineSoftmaxRegisters) -> None:
    lanes, ob = dut.lanes, dut.fmt.out_bits
    pos = 0
    for r, (row, mk) in enumerate(zip(rows, masks, strict=True)):
        nb = -(-len(row) // lanes)
        frame = out[pos:pos + nb]
        pos += nb
        assert [b[2] for b in frame] == [0] * (nb - 1) + [1], f"row {r}: TLAST"
        got = np.array([(w >> (i * ob)) & ((1 << ob) - 1) for w, _, _ in frame for i in range(lanes)])[:len(row)]
        gk = np.array([(u >> i) & 1 for _, u, _ in frame for i in range(lanes)], dtype=bool)[:len(row)]
        if len(row) > dut.max_keys:
            nk = dut.max_keys
            assert not got.any() and np.array_equal(gk[:nk], mk[:nk]) and not gk[nk:].any(), f"overflow row {r}"
            continue
        exp = online_softmax_int(row[None, :], regs, mk[None, :], dut.fmt)[0]  # the DUT's format, its P rounding
        assert np.array_equal(got, exp), f"row {r} (length {len(row)}): got {got}, expected {exp}"
        assert np.array_equal(gk, mk), f"row {r}: TUSER"
    assert pos == len(out)


def _rows(rng: np.random.Generator, n_rows: int, max_len: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rows, masks = [], []
    for _ in range(n_rows):
        n = int(rng.choice([1, 2, 3, int(rng.integers(1, max_len + 1)), max_len]))
        kind = rng.random()
        if kind < 0.3:
            row = rng.integers(-(1 << 31), 1 << 31, n)
        elif kind < 0.4:
            row = np.full(n, int(rng.integers(-(1 << 24), 1 << 24)))
        elif kind < 0.6:  # ascending: the running max (and the stored step prefix) grows every beat
            row = int(rng.integers(-(1 << 20), 0)) + np.cumsum(rng.integers(0, 2 ** rng.integers(1, 12), n))
        else:
            row = rng.normal(0, 2.0 ** rng.integers(2, 22), n).astype(np.int64)
        mk = rng.random(n) >= rng.choice([0.0, 0.3, 1.0])
        rows.append(row.astype(np.int64))
        masks.append(mk)
    return rows, masks


@pytest.mark.parametrize("p_rounding", ["cumulative", "nearest"])
@pytest.mark.parametrize(("lanes", "regs"), [(2, online_softmax_registers(0.05, 0.05, 64)),
                                             (3, online_softmax_registers(1.0, 1.0, 1)),
                                             (1, OnlineSoftmaxRegisters(-(1 << 23), 40)),
                                             (4, OnlineSoftmaxRegisters(-(1 << 23), 47))])
def test_amaranth_sim_random_stalls(lanes: int, regs: OnlineSoftmaxRegisters, p_rounding: str) -> None:
    """Short rows (incl. one overflowing row) with idles and backpressure in Amaranth's simulator, for both P
    roundings (the cumulative one carries the row's rounding residue across beats and stalls)."""
    dut = OnlineSoftmaxKernel(lanes, 4 * lanes, max_rows=2, fmt=OnlineSoftmaxFormat(p_rounding=p_rounding))
    rng = np.random.default_rng(lanes)
    rows, masks = _rows(rng, 30, 4 * lanes)
    rows.insert(7, rng.integers(-1000, 1000, 6 * lanes + 1))
    masks.insert(7, rng.random(6 * lanes + 1) >= 0.2)
    extremes = np.array([-(1 << 31), -(1 << 23), (1 << 31) - 1, (1 << 23) - 1, 0, 1, -1], dtype=np.int64)
    rows.insert(3, extremes)
    masks.insert(3, np.ones(len(extremes), dtype=bool))
    out = _simulate(dut, rows, masks, regs, in_prob=0.3, out_prob=0.5, seed=lanes)
    _check(dut, rows, masks, out, regs)


@pytest.mark.parametrize("p_rounding", ["cumulative", "nearest"])
def test_amaranth_sim_negative_output_shift(p_rounding: str) -> None:
    """A format with ``15 + 15 - sum_frac - out_frac < 0`` (p = e2·r_mant shifted left for small l)."""
    fmt = replace(OnlineSoftmaxFormat(), sum_frac=16, sum_bits=24, out_bits=10, out_frac=16,
                  recip=RecipConfig(mant_bits=14, lut_bits=7, out_frac=15), p_rounding=p_rounding)
    assert fmt.pow2.out_frac + fmt.recip.out_frac - fmt.sum_frac - fmt.out_frac < 0
    dut = OnlineSoftmaxKernel(2, 8, fmt=fmt)
    rng = np.random.default_rng(5)
    regs = online_softmax_registers(0.5, 0.5, 4, dut.fmt)
    rows, masks = _rows(rng, 25, 8)
    out = _simulate(dut, rows, masks, regs, in_prob=0.2, out_prob=0.2, seed=5)
    _check(dut, rows, masks, out, regs)

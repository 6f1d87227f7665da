"""cocotb 2.x testbench for :class:`vckattn.hw.pl.online_softmax.OnlineSoftmaxKernel`.

The full description: ``docs/internals/sim.md``, section ``sim/tb_online_softmax.py``.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.axi import AxiResp

from vckattn.golden.online_softmax_int import (
    ONLINE_SOFTMAX_ID,
    ONLINE_SOFTMAX_VERSION,
    OnlineSoftmaxFormat,
    OnlineSoftmaxRegisters,
    online_softmax_int,
    online_softmax_registers,
    online_softmax_regmap,
)
from vckattn.hw.pl.online_softmax import PASS1_LATENCY, buffer_bits
from vckattn.sim.kernel_tb import KernelHarness, start

OUT_BITS = 8


def dut_shape(dut: SimHandleBase) -> tuple[int, int]:
    """(lanes, in_width) from the DUT's port widths."""
    lanes = len(dut.s_axis_tuser)
    return lanes, len(dut.s_axis_tdata) // lanes


def make_harness(dut: SimHandleBase) -> KernelHarness:
    lanes, iw = dut_shape(dut)
    return KernelHarness(dut, lanes=lanes, in_width=iw, out_width=OUT_BITS, in_signed=True, out_signed=False)


async def read_max_keys(h: KernelHarness) -> int:
    return await h.read_reg(online_softmax_regmap(1), "max_keys")


def expected_row(row: np.ndarray, keep: np.ndarray, regs: OnlineSoftmaxRegisters, lanes: int) -> np.ndarray:
    """Golden P of one row; asserts that padding the row with masked keys (what the kernel sees)
    does not change it."""
    fmt = OnlineSoftmaxFormat(block=lanes)
    exp = online_softmax_int(np.asarray(row, dtype=np.int64)[None, :], regs, np.asarray(keep)[None, :], fmt)[0]
    n = len(row)
    npad = -(-n // lanes) * lanes
    if npad != n:
        rp = np.zeros(npad, dtype=np.int64)
        rp[:n] = row
        kp = np.zeros(npad, dtype=bool)
        kp[:n] = keep
        exp_pad = online_softmax_int(rp[None, :], regs, kp[None, :], fmt)[0][:n]
        assert np.array_equal(exp, exp_pad), "golden model changes when the row is padded with masked keys"
    return exp


def random_scores(rng: np.random.Generator, n: int, in_width: int) -> np.ndarray:
    lo, hi = -(1 << (in_width - 1)), (1 << (in_width - 1)) - 1
    kind = rng.random()
    if kind < 0.35:  # attention-like: Gaussian with a random spread
        x = rng.normal(0.0, 2.0 ** rng.uniform(2, 22), n) + rng.normal(0, 2.0 ** rng.uniform(0, 20))
    elif kind < 0.5:  # anywhere in the input range (mostly saturating at 24 bits)
        x = rng.integers(lo, hi, n, endpoint=True)
    elif kind < 0.6:  # all equal
        x = np.full(n, rng.integers(-(1 << 24), 1 << 24))
    elif kind < 0.7:  # extremes of int32 and of the 24-bit saturation
        x = rng.choice([lo, hi, 1 << 23, (1 << 23) - 1, -(1 << 23), -(1 << 23) - 1, 0, 1, -1], n)
    elif kind < 0.8:  # near ties around a common value
        x = rng.integers(-(1 << 22), 1 << 22) + rng.integers(-3, 4, n)
    elif kind < 0.9:  # ascending ramp: the running max grows by small and large steps every beat
        x = rng.integers(-(1 << 20), 0) + np.cumsum(rng.integers(0, 2 ** rng.integers(1, 12), n))
    else:  # one large outlier in small noise
        x = rng.integers(-64, 64, n)
        x[rng.integers(0, n)] = rng.integers(1 << 10, 1 << 23)
    return np.clip(np.asarray(x, dtype=np.float64).round(), lo, hi).astype(np.int64)


def random_mask(rng: np.random.Generator, n: int) -> np.ndarray:
    kind = rng.random()
    if kind < 0.35:
        return np.ones(n, dtype=bool)
    if kind < 0.42:
        return np.zeros(n, dtype=bool)  # fully masked row
    if kind < 0.5:
        mk = np.zeros(n, dtype=bool)
        mk[rng.integers(0, n)] = True  # a single kept key
        return mk
    if kind < 0.6:
        mk = np.zeros(n, dtype=bool)
        mk[: rng.integers(1, n + 1)] = True  # causal-style prefix
        return mk
    return rng.random(n) >= rng.uniform(0.05, 0.9)


def random_length(rng: np.random.Generator, max_keys: int, lanes: int) -> int:
    choices = [1, 2, 3, lanes + 1, int(rng.integers(1, 65)), int(rng.integers(1, 65)),
               int(rng.integers(1, max_keys + 1)), int(rng.integers(max_keys // 2, max_keys + 1))]
    return min(max(1, int(rng.choice(choices))), max_keys)


#: Register sets of the random test: (label, registers).
REGISTER_SETS: list[tuple[str, OnlineSoftmaxRegisters]] = [
    ("s_q=s_k=0.05 d=64", online_softmax_registers(0.05, 0.05, 64)),
    ("s_q=0.02 s_k=0.03 d=128", online_softmax_registers(0.02, 0.03, 128)),
    ("s_q=s_k=1 d=1", online_softmax_registers(1.0, 1.0, 1)),
    ("s_q=s_k=26 d=1 (largest foldable A)", online_softmax_registers(26.0, 26.0, 1)),
    ("s_q=s_k=1e-6 d=4096", online_softmax_registers(1e-6, 1e-6, 4096)),
    ("s_q=s_k=1e-9 d=4096 (a_shift 62)", online_softmax_registers(1e-9, 1e-9, 4096)),
    ("raw a_mult=-2^23 a_shift=0", OnlineSoftmaxRegisters(-(1 << 23), 0)),
    ("raw a_mult=2^23-1 a_shift=0", OnlineSoftmaxRegisters((1 << 23) - 1, 0)),
    ("raw a_mult=5e6 a_shift=47", OnlineSoftmaxRegisters(5_000_000, 47)),
    ("raw a_mult=-7 a_shift=48", OnlineSoftmaxRegisters(-7, 48)),
]


# --------------------------------------------------------------------------------------------


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    rm = online_softmax_regmap(1)
    await start(dut)
    h = make_harness(dut)
    assert await h.read_reg(rm, "ID") == ONLINE_SOFTMAX_ID
    assert await h.read_reg(rm, "VERSION") == ONLINE_SOFTMAX_VERSION
    max_keys = await h.read_reg(rm, "max_keys")
    lanes, _ = dut_shape(dut)
    assert max_keys >= lanes and max_keys % lanes == 0, max_keys
    assert await h.read_reg(rm, "rows") == 0 and await h.read_reg(rm, "overflow_rows") == 0
    assert await h.read_reg(rm, "a_mult") == 0 and await h.read_reg(rm, "a_shift") == 0
    for v in (-1, -(1 << 23), (1 << 23) - 1, 7745410, -123456):
        await h.write_regs(rm, {"a_mult": v})
        assert await h.read_reg(rm, "a_mult") == v
        raw, resp = await h.read_word(rm.offset("a_mult"))
        assert resp == AxiResp.OKAY and raw == v & 0xFFFFFFFF, f"a_mult {v}: raw {raw:#x} (sign extension)"
    for v in (0, 1, 22, 62, 63):
        await h.write_regs(rm, {"a_shift": v})
        assert await h.read_reg(rm, "a_shift") == v
    assert await h.write_word(rm.offset("a_shift"), 0xFFFFFF7F) == AxiResp.OKAY
    assert await h.read_reg(rm, "a_shift") == 0x3F, "bits above the 6-bit register are ignored"
    for name in ("ID", "VERSION", "rows", "overflow_rows", "max_keys"):
        before = await h.read_word(rm.offset(name))
        assert await h.write_word(rm.offset(name), 0x1234) == AxiResp.SLVERR, name
        assert await h.read_word(rm.offset(name)) == before, name
    unmapped = rm.offset("max_keys") + 4
    assert await h.write_word(unmapped, 1) == AxiResp.SLVERR
    assert await h.read_word(unmapped) == (0, AxiResp.SLVERR)


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_random_traffic(dut: SimHandleBase) -> None:
    lanes, iw = dut_shape(dut)
    rm = online_softmax_regmap(1)
    await start(dut)
    h = make_harness(dut)
    max_keys = await read_max_keys(h)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.3, out_prob=0.4)
    total = int(os.environ.get("TB_OSM_ELEMENTS", "100000"))
    per_set = -(-total // len(REGISTER_SETS))
    n_rows = n_elems = n_sat = n_full = n_masked_rows = n_max = n_single = 0
    stalled = 0
    for s, (label, regs) in enumerate(REGISTER_SETS):
        await h.write_regs(rm, regs.as_dict())
        rows, masks = [], []
        count = 0
        while count < per_set:
            n = max_keys if (s == 0 and not rows) else random_length(rng, max_keys, lanes)
            rows.append(random_scores(rng, n, iw))
            masks.append(random_mask(rng, n))
            count += n
        expected = []
        for row, mk in zip(rows, masks, strict=True):
            expected.append(expected_row(row, mk, regs, lanes))
            n_sat += int(np.sum(np.abs(row) >= (1 << 23)))
            n_full += not mk.any()
            n_max += len(row) == max_keys
            n_single += len(row) == 1
        n_masked_rows += sum(not mk.all() for mk in masks)
        stats = await h.run_rows(rows, masks, expected)
        n_rows += stats.rows
        n_elems += stats.elements
        stalled += stats.in_ready_low
        dut._log.info(
            "%s (a_mult=%d, a_shift=%d): %d elements in %d rows, %d cycles (%.3f elem/cycle), input stalled %d",
            label, regs.a_mult, regs.a_shift, stats.elements, stats.rows, stats.cycles, stats.elements_per_cycle,
            stats.in_ready_low,
        )
    dut._log.info(
        "total %d elements in %d rows: %d rows of max_keys=%d, %d single-key, %d fully masked, %d with masked keys, "
        "%d saturating scores",
        n_elems, n_rows, n_max, max_keys, n_single, n_full, n_masked_rows, n_sat,
    )
    assert n_elems >= total and n_max >= 1 and n_full >= 1 and n_single >= 1 and n_sat > 0
    assert stalled > 0, "backpressure never reached s_axis_tready"
    assert await h.read_reg(rm, "rows") == n_rows
    assert await h.read_reg(rm, "overflow_rows") == 0


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_overflow(dut: SimHandleBase) -> None:
    lanes, iw = dut_shape(dut)
    rm = online_softmax_regmap(1)
    await start(dut)
    h = make_harness(dut)
    max_keys = await read_max_keys(h)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.2, out_prob=0.3)
    regs = online_softmax_registers(0.05, 0.05, 64)
    await h.write_regs(rm, regs.as_dict())
    long_len = max_keys + 2 * lanes + 1
    lengths = [5, long_len, 7, max_keys, 1]
    rows = [random_scores(rng, n, iw) for n in lengths]
    masks = [random_mask(rng, n) for n in lengths]
    masks[1] = rng.random(long_len) >= 0.2
    frames = h.rows_to_frames(rows, masks)
    for f in frames:
        h.source.send_nowait(f)
    got = []
    for r, f in enumerate(frames):
        g = await with_timeout(h.sink.recv(compact=False), 200_000, "ns")
        assert len(g.tdata) == len(f.tdata), f"frame {r}: {len(g.tdata)} beats, expected {len(f.tdata)}"
        got.append(g)
    await ClockCycles(h.clk, 8)
    assert h.sink.empty()
    out_rows, out_masks = h.frames_to_rows(got, lengths)
    max_beats = max_keys // lanes
    for r, (row, mk) in enumerate(zip(rows, masks, strict=True)):
        if r == 1:
            assert not out_rows[r].any(), "an overflowing row must output zeros"
            tuser = [int(u) for u in got[r].tuser]
            assert tuser[:max_beats] == [int(u) for u in frames[r].tuser[:max_beats]]
            assert not any(tuser[max_beats:]), "beats beyond the buffer carry TUSER 0"
        else:
            exp = expected_row(row, mk, regs, lanes)
            assert np.array_equal(out_rows[r], exp), f"row {r} (length {len(row)}) after the overflow"
            assert np.array_equal(out_masks[r], mk)
    assert await h.read_reg(rm, "overflow_rows") == 1
    assert await h.read_reg(rm, "rows") == len(rows)


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    lanes, iw = dut_shape(dut)
    rm = online_softmax_regmap(1)
    await start(dut)
    h = make_harness(dut)
    max_keys = await read_max_keys(h)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    regs = online_softmax_registers(0.05, 0.05, 64)
    await h.write_regs(rm, regs.as_dict())

    lo, hi = -(1 << (iw - 1)), (1 << (iw - 1)) - 1
    spread = min(3000.0, hi / 4)  # narrow score builds (in_width = 8, 16): a quarter of their range

    def batch(n_keys: int, n_rows: int) -> tuple[list, list, list]:
        rows = [np.clip(rng.normal(0, spread, n_keys), lo, hi).astype(np.int64) for _ in range(n_rows)]
        masks = [rng.random(n_keys) >= 0.1 for _ in range(n_rows)]
        return rows, masks, [expected_row(r, k, regs, lanes) for r, k in zip(rows, masks, strict=True)]

    n_long = max(4, 8192 // max_keys)
    t = await h.measure_throughput(*_order(batch(max_keys, n_long)))
    beats = max_keys // lanes
    after_last = t.latency - (beats - 1)
    dut._log.info(
        "rows of %d keys: %d elements, %.4f elements/cycle (%.4f beats/cycle), latency %d cycles "
        "(%d after the row's last input beat)",
        max_keys, t.elements, t.elements_per_cycle, t.beats_per_cycle, t.latency, after_last,
    )
    short = min(64, max_keys)
    ts = await h.measure_throughput(*_order(batch(short, max(16, 2048 // short))))
    dut._log.info("rows of %d keys: %.4f elements/cycle, latency %d cycles", short, ts.elements_per_cycle, ts.latency)
    one = await h.measure_throughput(*_order(batch(lanes, 64)))
    dut._log.info("rows of %d keys (1 beat): %.4f elements/cycle", lanes, one.elements_per_cycle)
    out = os.environ.get("VCKATTN_METRICS_OUT")
    if out:
        with open(out, "w") as fh:
            json.dump({
                "elements_per_cycle": t.elements_per_cycle,
                "latency_cycles": t.latency,
                "buffer_bits": buffer_bits(lanes, max_keys),
                "row_keys": max_keys,
                "latency_after_last_input_cycles": after_last,
                f"elements_per_cycle_{short}_key_rows": ts.elements_per_cycle,
                f"elements_per_cycle_{lanes}_key_rows": one.elements_per_cycle,
            }, fh, indent=1)
    assert t.elements_per_cycle >= 0.99 * lanes, t
    assert after_last >= PASS1_LATENCY, after_last


def _order(b: tuple[list, list, list]) -> tuple[list, list, list]:
    """(rows, masks, expected) -> measure_throughput's argument order (rows, expected, masks)."""
    rows, masks, expected = b
    return rows, expected, masks

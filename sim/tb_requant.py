"""cocotb 2.x testbench for :class:`vckattn.hw.pl.requant.RequantKernel` (run by ``tests/hw/pl/test_requant.py``).

The full description: ``docs/internals/sim.md``, section ``sim/tb_requant.py``.
"""

from __future__ import annotations

import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase

from vckattn.golden.requant import REQUANT_ID, RequantRegisters, requant_regmap, requantize
from vckattn.hw.pl.requant import ACC_WIDTH, RequantKernel
from vckattn.sim.kernel_tb import KernelHarness, start
from vckattn.sim.sublayer_tb import check_register_readback, edge_requant, load_vectors, write_metrics


def _setup(dut: SimHandleBase) -> tuple[int, int]:
    lanes = len(dut.s_axis_tdata) // ACC_WIDTH
    return lanes, int(os.environ.get("VCKATTN_TB_MAX_D", "1024"))


def _harness(dut: SimHandleBase, lanes: int) -> KernelHarness:
    return KernelHarness(dut, lanes=lanes, in_width=ACC_WIDTH, out_width=8, in_signed=True, out_signed=True,
                         user=False)


def golden(rows: list[np.ndarray], mult: np.ndarray, shift: np.ndarray) -> list[np.ndarray]:
    """Each token through :func:`requantize` with the first ``len(row)`` channels' registers."""
    return [requantize(r, RequantRegisters(mult[:len(r)], shift[:len(r)])).astype(np.int64) for r in rows]


def random_acc(rng: np.random.Generator, n: int) -> np.ndarray:
    """int32 accumulators: full range, small, the extremes, and odd values (ties at shift 17 with ``2^16``)."""
    kind = rng.integers(0, 4, size=n)
    full = rng.integers(-(1 << 31), 1 << 31, size=n)
    small = rng.integers(-5000, 5000, size=n)
    ext = rng.choice([-(1 << 31), (1 << 31) - 1, -1, 0, 1], size=n)
    odd = 2 * rng.integers(-(1 << 12), 1 << 12, size=n) + 1
    return np.choose(kind, [full, small, ext, odd]).astype(np.int64)


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    lanes, max_d = _setup(dut)
    await start(dut)
    h = _harness(dut, lanes)
    await check_register_readback(h, requant_regmap(lanes, max_d), REQUANT_ID, random.Random(cocotb.RANDOM_SEED))


@cocotb.test(timeout_time=40, timeout_unit="ms")
async def test_random_traffic(dut: SimHandleBase) -> None:
    lanes, max_d = _setup(dut)
    rm = requant_regmap(lanes, max_d)
    await start(dut)
    h = _harness(dut, lanes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.3, out_prob=0.4)
    d = min(max_d, 96)
    mult, shift = edge_requant(rng, d)
    await h.write_regs(rm, {"per_channel": 1, "mult": list(mult), "shift": list(shift)})
    lengths = [d, 1, lanes, d - 1, *rng.integers(1, d + 1, size=10)]
    rows = [random_acc(rng, int(n)) for n in lengths]
    exp = golden(rows, mult, shift)
    assert any(np.any(np.abs(e) == 128) or np.any(e == 127) for e in exp), "no saturating output"
    await h.run_rows(rows, None, exp)
    # per-tensor: entry 0 for every channel
    await h.write_regs(rm, {"per_channel": 0, "mult": [1 << 16], "shift": [17]})
    rows2 = [random_acc(rng, int(n)) for n in rng.integers(1, d + 1, size=6)]
    ties = [r[(r % 2 == 1) & (np.abs(r) < 250)] for r in rows2]
    assert sum(len(t) for t in ties) > 0, "no rounding tie"
    await h.run_rows(rows2, None, golden(rows2, np.full(d, 1 << 16), np.full(d, 17)))
    assert await h.read_reg(rm, "tokens") == len(rows) + len(rows2)
    assert await h.read_reg(rm, "overlong") == 0


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    lanes, max_d = _setup(dut)
    rm = requant_regmap(lanes, max_d)
    await start(dut)
    h = _harness(dut, lanes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    d = 16 * lanes
    mult, shift = edge_requant(rng, d)
    await h.write_regs(rm, {"per_channel": 1, "mult": list(mult), "shift": list(shift)})
    rows = [random_acc(rng, d) for _ in range(max(16, 1024 // d))]
    t = await h.measure_throughput(rows, golden(rows, mult, shift))
    dut._log.info("throughput %.4f elements/cycle, latency %d cycles", t.elements_per_cycle, t.latency)
    write_metrics(elements_per_cycle=t.elements_per_cycle, latency_cycles=t.latency, d=d)
    assert t.beats_per_cycle == 1.0 and t.elements_per_cycle == lanes, t
    assert t.latency == RequantKernel.LATENCY + 1, t.latency


@cocotb.test(timeout_time=40, timeout_unit="ms")
async def test_real_vectors(dut: SimHandleBase) -> None:
    lanes, max_d = _setup(dut)
    rm = requant_regmap(lanes, max_d)
    v = load_vectors()
    await start(dut)
    h = _harness(dut, lanes)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.2, out_prob=0.2)
    await h.write_regs(rm, {"per_channel": 1, "mult": list(v["mult"]), "shift": list(v["shift"])})
    acc = v["acc"].reshape(-1, v["acc"].shape[-1])
    await h.run_rows(list(acc), None, list(v["expected"].reshape(acc.shape)))
    dut._log.info("real vectors: %d tokens of %d channels bit-exact", *acc.shape)

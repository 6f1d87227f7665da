"""cocotb 2.x testbench for :class:`vckattn.hw.pl.rope.RopeKernel` (run by ``tests/hw/pl/test_rope.py``).

The full description: ``docs/internals/sim.md``, section ``sim/tb_rope.py``.
"""

from __future__ import annotations

import os
import random

import cocotb
import numpy as np
import torch
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.axi import AxiStreamFrame

from vckattn.golden.attention import rope_cos_sin
from vckattn.golden.rope_int import ROPE_ID, rope_int, rope_regmap, rope_table_banks, rope_tables_int
from vckattn.hw.pl.rope import RopeKernel
from vckattn.sim.kernel_tb import KernelHarness, frames_to_rows, pack, start
from vckattn.sim.sublayer_tb import check_register_readback, load_vectors, write_metrics


class Bench:
    def __init__(self, dut: SimHandleBase) -> None:
        self.dut = dut
        self.lanes = len(dut.s_axis_tdata) // 8
        self.max_pos = 1 << len(dut.s_axis_tuser)
        self.head_dim = int(os.environ.get("VCKATTN_TB_HEAD_DIM", "64"))
        self.rm = rope_regmap(self.lanes, self.head_dim, self.max_pos)
        self.h = KernelHarness(dut, lanes=self.lanes, in_width=8, out_width=8, in_signed=True, out_signed=True,
                               user=False)

    async def tables(self, c: np.ndarray, s: np.ndarray) -> None:
        await self.h.write_regs(self.rm, rope_table_banks(c, s, self.lanes, self.head_dim, self.max_pos))

    def frames(self, rows: list[np.ndarray], tusers: list[int], per_frame: list[int]) -> list[AxiStreamFrame]:
        """Frames of ``per_frame[f]`` rows each; TUSER of every beat = its row's position word."""
        out, r = [], 0
        for k in per_frame:
            tdata, tuser = [], []
            for row, u in zip(rows[r:r + k], tusers[r:r + k], strict=True):
                for b in range(0, self.head_dim, self.lanes):
                    tdata.append(pack([int(v) for v in row[b:b + self.lanes]], 8, self.lanes))
                    tuser.append(int(u))
            out.append(AxiStreamFrame(tdata, tuser=tuser))
            r += k
        return out

    async def run(self, rows: list[np.ndarray], tusers: list[int], expected: list[np.ndarray],
                  per_frame: list[int] | None = None) -> list[int]:
        """Send ``rows`` (TUSER ``tusers``) in frames, receive as many frames with their beats, check every
        element against ``expected``; returns the cycles of the output handshakes' frames (first beats)."""
        per_frame = per_frame or [1] * len(rows)
        assert sum(per_frame) == len(rows)
        frames = self.frames(rows, tusers, per_frame)
        for f in frames:
            self.h.source.send_nowait(f)
        got, r = [], 0
        for f, k in zip(frames, per_frame, strict=True):
            g = await with_timeout(self.h.sink.recv(compact=False), 200_000, "ns")
            assert len(g.tdata) == len(f.tdata), f"frame of {k} rows: {len(g.tdata)} beats, sent {len(f.tdata)}"
            out = frames_to_rows([g], [k * self.head_dim], self.lanes, 8, signed=True)[0][0]
            got += list(out.reshape(k, self.head_dim))
            r += k
        await ClockCycles(self.dut.clk, 8)
        assert self.h.sink.empty(), "extra output frames"
        bad = [(i, np.nonzero(g != e)[0][:4]) for i, (g, e) in enumerate(zip(got, expected, strict=True))
               if not np.array_equal(g, e)]
        assert not bad, f"{len(bad)} rows differ; first: row {bad[0][0]} at {bad[0][1]}: " \
                        f"got {got[bad[0][0]][bad[0][1]]}, expected {expected[bad[0][0]][bad[0][1]]}"
        return self.h.monitor.out_beats


def llama_tables(max_pos: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Llama's RoPE tables (θ = 10000) for positions ``0..max_pos-1``, int16 Q1.14."""
    cos, sin = rope_cos_sin(torch.arange(max_pos), head_dim, dtype=torch.float64)
    return rope_tables_int(cos, sin)


def random_tables(rng: np.random.Generator, max_pos: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Rotate-half int16 tables: random, with the extremes, and ``c = 2^13, s = 0`` (exact ties) at position 1."""
    h = head_dim // 2
    c = rng.integers(-(1 << 15), 1 << 15, size=(max_pos, h))
    s = rng.integers(-(1 << 15), 1 << 15, size=(max_pos, h))
    c[0, :], s[0, :] = -(1 << 15), -(1 << 15)
    c[1, :], s[1, :] = 1 << 13, 0
    c[2, :], s[2, :] = (1 << 15) - 1, -(1 << 15)
    return np.concatenate([c, c], 1).astype(np.int16), np.concatenate([s, s], 1).astype(np.int16)


def random_rows(rng: np.random.Generator, n: int, head_dim: int) -> list[np.ndarray]:
    rows = [rng.integers(-128, 128, size=head_dim) for _ in range(n)]
    rows[0][:] = -128
    if n > 1:
        rows[1][:] = np.where(np.arange(head_dim) % 2, 127, -128)
    return [r.astype(np.int64) for r in rows]


def golden(rows: list[np.ndarray], pos: list[int], c: np.ndarray, s: np.ndarray) -> list[np.ndarray]:
    return [rope_int(r[None], c[p:p + 1], s[p:p + 1]).reshape(-1).astype(np.int64) for r, p in zip(rows, pos,
                                                                                                    strict=True)]


@cocotb.test(timeout_time=10, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    await start(dut)
    b = Bench(dut)
    await check_register_readback(b.h, b.rm, ROPE_ID, random.Random(cocotb.RANDOM_SEED), entries=12)


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def test_random_traffic(dut: SimHandleBase) -> None:
    await start(dut)
    b = Bench(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    b.h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.3, out_prob=0.4)
    n_rows = 0
    for tables in (llama_tables(b.max_pos, b.head_dim), random_tables(rng, b.max_pos, b.head_dim)):
        c, s = tables
        await b.tables(c, s)
        pos = [0, b.max_pos - 1, 1, 2, *rng.integers(0, b.max_pos, size=12)]
        rows = random_rows(rng, len(pos), b.head_dim)
        exp = golden(rows, pos, c, s)
        per_frame = [1, 2, 3, 1, 1, 2, 3, 1, 2]
        await b.run(rows, pos, exp, per_frame)
        n_rows += len(rows)
    # ties: every odd x at position 1 of the random tables
    assert any(np.any(r % 2 == 1) for r, p in zip(rows, pos, strict=True) if p == 1)
    assert any(np.any(np.abs(e) == 128) or np.any(e == 127) for e in exp), "no saturation"
    # pos_base, and positions that wrap past max_pos
    base = b.max_pos // 2 + 3
    await b.h.write_regs(b.rm, {"pos_base": base})
    tusers = [0, b.max_pos // 2 - 4, b.max_pos // 2 - 3, b.max_pos - 1, 5]
    true_pos = [(u + base) % b.max_pos for u in tusers]
    wraps = sum(u + base >= b.max_pos for u in tusers)
    rows = random_rows(rng, len(tusers), b.head_dim)
    await b.run(rows, tusers, golden(rows, true_pos, c, s))
    n_rows += len(rows)
    assert await b.h.read_reg(b.rm, "rows") == n_rows
    assert await b.h.read_reg(b.rm, "pos_overflow") == wraps == 2


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    await start(dut)
    b = Bench(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    c, s = llama_tables(min(b.max_pos, 64), b.head_dim)  # the first 64 positions: a short table write
    await b.tables(c, s)
    pos = [int(p) for p in rng.integers(0, min(b.max_pos, 64), size=max(16, 2048 // b.head_dim))]
    rows = random_rows(rng, len(pos), b.head_dim)
    b.h.clear_pauses()
    await ClockCycles(dut.clk, 2)
    i0, o0 = len(b.h.monitor.in_beats), len(b.h.monitor.out_beats)
    await b.run(rows, pos, golden(rows, pos, c, s))
    ins, outs = b.h.monitor.in_beats[i0:], b.h.monitor.out_beats[o0:]
    span = outs[-1] - outs[0] + 1
    per_cycle = len(rows) * b.head_dim / span
    latency = outs[0] - ins[0]
    dut._log.info("throughput %.4f elements/cycle, latency %d cycles", per_cycle, latency)
    write_metrics(elements_per_cycle=per_cycle, latency_cycles=latency, d=b.head_dim)
    assert len(outs) == span and per_cycle == b.lanes, (len(outs), span)
    assert latency == b.head_dim // b.lanes + RopeKernel.LATENCY + 1, latency


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_real_vectors(dut: SimHandleBase) -> None:
    v = load_vectors()
    await start(dut)
    b = Bench(dut)
    b.h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.2, out_prob=0.2)
    c, s = v["c"], v["s"]
    await b.tables(c, s)
    rows, pos = list(v["x"].reshape(-1, b.head_dim)), [int(p) for p in v["pos"].reshape(-1)]
    exp = golden(rows, pos, c, s)
    assert np.array_equal(np.stack(exp), v["expected"].reshape(-1, b.head_dim)), "expected is not golden's"
    await b.run(rows, pos, exp)
    dut._log.info("real vectors: %d rows of %d bit-exact", len(rows), b.head_dim)

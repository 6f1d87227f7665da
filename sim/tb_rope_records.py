"""cocotb 2.x testbench for :class:`vckattn.hw.pl.rope_records.RopeRecords` (run by
``tests/hw/pl/test_rope_records.py``).

The geometry comes from ``VCKATTN_TB_ROPE_RECORDS`` (JSON: ``rows``, ``cols``, ``head_dim``, ``heads``,
``kv_heads``, ``max_seq``, ``lanes``, ``batch``, ``records``). Random-angle float cos/sin tables for every position
(quantized by :func:`~vckattn.golden.rope_int.rope_tables_int`) are written over AXI4-Lite; GRESULT records of
random int8 Q/K/V (the extremes included) of several sequences and row tiles, Q, K and V column blocks mixed, go in
a shuffled order under random source idles and sink backpressure. Every output beat must be the golden one: the
header as sent; for a Q/K block each head row rotated by :func:`~vckattn.golden.rope_int.rope_int` at its position
``(tile_id mod T) · rows + row``; a V block as sent.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.axi import AxiStreamFrame

from vckattn.golden.rope_int import ROPE_ID, rope_int, rope_regmap, rope_table_banks, rope_tables_int
from vckattn.hw.pl.rope import RopeKernel
from vckattn.hw.spec import streams
from vckattn.sim.kernel_tb import KernelHarness, start
from vckattn.sim.sublayer_tb import check_register_readback

BEAT = streams.BEAT_BYTES
ENV = "VCKATTN_TB_ROPE_RECORDS"


@dataclass(frozen=True)
class Geometry:
    rows: int
    cols: int
    head_dim: int
    heads: int
    kv_heads: int
    max_seq: int
    lanes: int
    batch: int
    records: int

    @property
    def rotated(self) -> int:
        return (self.heads + self.kv_heads) * self.head_dim

    @property
    def channels(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    @property
    def tiles(self) -> int:
        return self.max_seq // self.rows

    @property
    def blocks(self) -> int:
        return self.channels // self.cols


def geometry() -> Geometry:
    return Geometry(**json.loads(os.environ[ENV]))


def random_angle_tables(rng: np.random.Generator, positions: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Float rotate-half tables ``(positions, head_dim)`` of random angles (each frequency in both halves, as
    Llama's), quantized to int16 Q1.14: every position a different rotation, position 0 included."""
    ang = rng.uniform(0, 2 * math.pi, size=(positions, head_dim // 2))
    ang = np.concatenate([ang, ang], axis=1)
    return rope_tables_int(np.cos(ang), np.sin(ang))


def random_payload(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    x = rng.integers(-128, 128, size=(rows, cols))
    x[0, :4] = [-128, 127, -128, 127]
    x[-1, -2:] = [127, -128]
    return x.astype(np.int8)


def record_frame(g: Geometry, tile_id: int, col_block: int, payload: np.ndarray) -> AxiStreamFrame:
    """A GRESULT record as one frame of 128-bit beats (header first; byte ``i`` of a beat = element ``i``)."""
    head = streams.encode("gresult", tile_id=tile_id, rows=g.rows, col_block=col_block, elem_bits=8,
                          cols=g.cols).tobytes()
    raw = head + payload.astype(np.int8).tobytes()
    return AxiStreamFrame([int.from_bytes(raw[i:i + BEAT], "little") for i in range(0, len(raw), BEAT)])


def expected_payload(g: Geometry, tile_id: int, col_block: int, x: np.ndarray, c: np.ndarray,
                     s: np.ndarray) -> np.ndarray:
    """Golden: the record's rows rotated head row by head row at their positions (a Q/K block), or as sent (V)."""
    if col_block * g.cols >= g.rotated:
        return x.copy()
    p0 = (tile_id % g.tiles) * g.rows
    heads = x.reshape(g.rows, g.cols // g.head_dim, g.head_dim)
    cp, sp = c[p0:p0 + g.rows, None, :], s[p0:p0 + g.rows, None, :]  # (rows, 1, D): one position a record row
    return rope_int(heads, cp, sp).reshape(g.rows, g.cols)


class Bench:
    def __init__(self, dut: SimHandleBase) -> None:
        self.dut = dut
        self.g = g = geometry()
        assert len(dut.s_axis_tdata) == len(dut.m_axis_tdata) == 8 * BEAT
        self.rm = rope_regmap(g.lanes, g.head_dim, g.max_seq)
        self.h = KernelHarness(dut, lanes=BEAT, in_width=8, out_width=8, in_signed=True, out_signed=True,
                               user=False)

    async def tables(self, c: np.ndarray, s: np.ndarray) -> None:
        g = self.g
        await self.h.write_regs(self.rm, rope_table_banks(c, s, g.lanes, g.head_dim, g.max_seq))

    async def run(self, recs: list[tuple[int, int, np.ndarray]], c: np.ndarray, s: np.ndarray) -> list[np.ndarray]:
        """Send the records ``(tile_id, col_block, payload)`` in the order given, receive as many, compare every
        beat with golden; returns the payloads received."""
        g = self.g
        frames = [record_frame(g, t, cb, x) for t, cb, x in recs]
        want = [record_frame(g, t, cb, expected_payload(g, t, cb, x, c, s)) for t, cb, x in recs]
        for f in frames:
            self.h.source.send_nowait(f)
        got = []
        cycles = 400 * sum(len(f.tdata) for f in frames) * BEAT // g.lanes + 10_000
        for n, (w, (t, cb, _)) in enumerate(zip(want, recs, strict=True)):
            f = await with_timeout(self.h.sink.recv(compact=False), cycles * 4, "ns")
            assert len(f.tdata) == len(w.tdata), f"record {n}: {len(f.tdata)} beats, sent {len(w.tdata)}"
            bad = [i for i, (a, b) in enumerate(zip(f.tdata, w.tdata, strict=True)) if int(a) != int(b)]
            assert not bad, f"record {n} (tile {t}, block {cb}): {len(bad)} beats differ, first {bad[:4]}"
            raw = b"".join(int(v).to_bytes(BEAT, "little") for v in f.tdata[1:])
            got.append(np.frombuffer(raw, dtype=np.int8).reshape(g.rows, g.cols))
        await ClockCycles(self.dut.clk, 32)
        assert self.h.sink.empty(), "beats after the last record"
        assert len(got) == len(recs)
        return got


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    await start(dut)
    b = Bench(dut)
    await check_register_readback(b.h, b.rm, ROPE_ID, random.Random(cocotb.RANDOM_SEED), entries=6)


@cocotb.test(timeout_time=2000, timeout_unit="ms")
async def test_records(dut: SimHandleBase) -> None:
    """Shuffled Q/K/V records of several sequences and row tiles (the first and the last tile among them) under
    random idles and backpressure, every beat against golden."""
    await start(dut)
    b = Bench(dut)
    g = b.g
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    rnd = random.Random(cocotb.RANDOM_SEED)
    c, s = random_angle_tables(rng, g.max_seq, g.head_dim)
    await b.tables(c, s)
    b.h.set_random_pauses(rnd, in_prob=0.3, out_prob=0.4)
    rot_blocks = g.rotated // g.cols
    q_blocks = g.heads * g.head_dim // g.cols
    kinds = {"q": range(0, max(q_blocks, 1)), "k": range(q_blocks, rot_blocks), "v": range(rot_blocks, g.blocks)}
    picks: set[tuple[int, int]] = set()
    while len(picks) < g.records:  # Q, K and V in turn; the first and the last row tile first
        i = len(picks)
        r = (0, g.tiles - 1)[i] if i < 2 else rnd.randrange(g.tiles)
        picks.add((rnd.randrange(g.batch) * g.tiles + r, rnd.choice(kinds[("q", "k", "v")[i % 3]])))
    recs = [(t, cb, random_payload(rng, g.rows, g.cols)) for t, cb in sorted(picks)]
    rnd.shuffle(recs)
    got = await b.run(recs, c, s)
    rotated = [(x, y) for (_, cb, x), y in zip(recs, got, strict=True) if cb < rot_blocks]
    assert rotated and len(rotated) < len(recs), "records of both kinds"
    assert all(not np.array_equal(x, y) for x, y in rotated), "a rotated record came out as it went in"
    assert await b.h.read_reg(b.rm, "rows") == len(rotated) * g.rows * (g.cols // g.head_dim)
    assert await b.h.read_reg(b.rm, "pos_overflow") == 0
    dut._log.info("%d records (%d rotated) bit-exact", len(recs), len(rotated))


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    """No idles or backpressure: rotated records at one kernel beat a cycle (a 128-bit beat in and out every
    ``16 / lanes`` cycles, plus the header's cycle), pass-through records at one beat a cycle."""
    await start(dut)
    b = Bench(dut)
    g = b.g
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    c, s = random_angle_tables(rng, g.rows, g.head_dim)  # row tile 0 only: positions 0 .. rows-1
    await b.tables(c, s)
    b.h.clear_pauses()
    rot_blocks = g.rotated // g.cols
    payload_beats = g.rows * g.cols // BEAT
    k = BEAT // g.lanes
    n = 3
    mon = b.h.monitor
    for kind, blocks in (("rotated", range(rot_blocks)), ("pass-through", range(rot_blocks, g.blocks))):
        recs = [(bb * g.tiles, blocks[bb % len(blocks)], random_payload(rng, g.rows, g.cols))
                for bb in range(n)]
        await ClockCycles(dut.clk, 4)
        i0, o0 = len(mon.in_beats), len(mon.out_beats)
        await b.run(recs, c, s)
        ins, outs = mon.in_beats[i0:], mon.out_beats[o0:]
        assert len(ins) == len(outs) == n * (1 + payload_beats)
        in_span, out_span = ins[-1] - ins[0] + 1, outs[-1] - outs[0] + 1
        latency = outs[1] - ins[1]  # the first payload beat's
        dut._log.info("%s: %d records of %d beats: input %d cycles, output %d cycles, payload latency %d", kind, n,
                      1 + payload_beats, in_span, out_span, latency)
        if kind == "rotated":
            # per record: the header's cycle and k cycles a payload beat, in and out (the output's header leaves at
            # once, its payload a kernel row later)
            bound = n * (1 + k * payload_beats)
            assert in_span <= bound, (in_span, bound)
            assert latency <= g.head_dim // g.lanes + RopeKernel.LATENCY + 2, latency
            assert out_span <= bound + latency, (out_span, bound, latency)
        else:
            assert in_span == out_span == n * (1 + payload_beats), (in_span, out_span)

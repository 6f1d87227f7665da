"""cocotb 2.x testbench for :class:`vckattn.hw.pl.buffer_reader.BufferReader` (run by
``tests/hw/pl/test_buffer_reader.py``).

A Python model of the buffer's bank answers the read port (random grants, the data ``READ_LATENCY`` cycles after a
granted read) and of its access control holds each slot empty until a random time, then full until the reader's
release. Random descriptors (header beat, first beat, run length 0..40, slot, release) go in with random pauses;
every output packet must be the header beat then the buffer's beats ``first .. first + beats - 1``, TLAST on the
last; no read of a slot before it is full; one release per releasing descriptor, naming its slot.
"""

from __future__ import annotations

import logging
import random

import cocotb
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from vckattn.hw.pl.buffer_reader import READ_LATENCY
from vckattn.hw.spec import streams
from vckattn.sim.kernel_tb import pause_pattern, start


def beat_of(words: bytes) -> int:
    return int.from_bytes(words, "little")


def _streams(dut: SimHandleBase, rnd: random.Random | None = None) -> tuple[AxiStreamSource, AxiStreamSink]:
    """The descriptor source and the output sink, one "byte" a beat (frames are lists of 128-bit beats); with
    ``rnd``, random pauses on both."""
    src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_lanes=1)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_lanes=1)
    for x in (src, sink):
        x.log.setLevel(logging.WARNING)
        if rnd is not None:
            x.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))
    return src, sink


class Bank:
    """The buffer's memory and access control as the reader sees them."""

    def __init__(self, dut: SimHandleBase, rnd: random.Random, size: int, slots: int, grant_prob: float) -> None:
        self.dut, self.rnd, self.grant_prob = dut, rnd, grant_prob
        self.mem = [rnd.getrandbits(128) for _ in range(size)]
        self.full = [False] * slots
        self.turn = [0] * slots  # flips at every release of the slot
        self.read_while_empty: list[tuple[int, int]] = []
        self.releases: list[int] = []

    async def serve(self) -> None:
        pipe: list[int | None] = [None] * (READ_LATENCY - 1)  # reads granted, their data not yet on rd_data
        dut = self.dut
        while True:
            gnt = self.rnd.random() < self.grant_prob
            dut.rd_gnt.value = int(gnt)
            await ReadOnly()
            req, addr = int(dut.rd_req.value), int(dut.rd_addr.value)
            rel, rel_slot = int(dut.release_valid.value), int(dut.release_slot.value)
            await RisingEdge(dut.clk)
            if rel:
                self.releases.append(rel_slot)
                self.full[rel_slot] = False
                self.turn[rel_slot] ^= 1
            pipe.insert(0, addr if (req and gnt) else None)
            out = pipe.pop()  # the read granted READ_LATENCY - 1 edges ago: its data for the next edge
            if req and gnt and not any(self.full):  # the runs go in order: only the current run's slot is full
                self.read_while_empty.append((addr, self.full.copy()))
            dut.rd_data.value = self.mem[out] if out is not None else 0
            dut.slot_full.value = sum(1 << i for i, f in enumerate(self.full) if f)
            dut.slot_turn.value = sum(t << i for i, t in enumerate(self.turn))


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def test_runs_of_the_buffer_after_their_slot_fills(dut: SimHandleBase) -> None:
    await start(dut)
    rnd = random.Random(cocotb.RANDOM_SEED)
    slots, size = len(dut.slot_full), 1 << len(dut.rd_addr)
    bank = Bank(dut, rnd, size, slots, grant_prob=0.7)
    dut.slot_full.value = 0
    dut.slot_turn.value = 0
    dut.rd_gnt.value = 0
    src, sink = _streams(dut, rnd)
    cocotb.start_soon(bank.serve())

    descs = []
    hdr_turn = {}
    for i in range(40):
        slot = i // 8 % slots  # eight runs of one slot, the last releasing it
        n = rnd.choice([0, 1, 2, 7, 16, 40]) if i % 5 else rnd.randint(1, 40)
        first = rnd.randrange(0, size - n + 1)
        if i == 15:  # the second group's release: a quiet one
            n = 0
        quiet = int(n == 0 and (i == 15 or rnd.random() < 0.5))  # sends nothing, waits for its slot, may release
        descs.append((rnd.getrandbits(128), first, n, slot, int(i % 8 == 7), quiet))
        hdr_turn[descs[-1]] = i // 8 // slots % 2  # the group's turn in its slot

    async def fill() -> None:  # each slot fills some time after the previous one was released
        for k in range(0, len(descs), 8):
            s = descs[k][3]
            await ClockCycles(dut.clk, rnd.randint(10, 200))
            bank.full[s] = True
            while bank.releases.count(s) < sum(1 for d in descs[:k + 8] if d[3] == s and d[4]):
                await RisingEdge(dut.clk)

    cocotb.start_soon(fill())
    for d in descs:
        hdr, first, n, slot, rel, quiet = d
        run = streams.encode("rdesc", first=first, beats=n, slot=slot, release=rel, turn=hdr_turn[d],
                             quiet=quiet).tobytes()
        await src.send(AxiStreamFrame([hdr, beat_of(run)]))
    for k, (hdr, first, n, _, _, quiet) in enumerate(descs):
        if quiet:
            continue
        got = await sink.recv(compact=False)
        want = [hdr, *bank.mem[first:first + n]]
        assert [int(x) for x in got.tdata] == want, f"descriptor {k}: {len(got.tdata)} beats, {n + 1} expected"
    await ClockCycles(dut.clk, 20)
    assert sink.empty()
    assert not bank.read_while_empty, f"reads of a slot before it filled: {bank.read_while_empty[:4]}"
    assert bank.releases == [d[3] for d in descs if d[4]], bank.releases
    assert any(d[5] for d in descs) and any(d[5] and d[4] for d in descs), "no quiet release drawn"
    dut._log.info("%d runs, %d beats", len(descs), sum(d[2] for d in descs))


async def _always_ready(dut: SimHandleBase) -> tuple[Bank, AxiStreamSource, AxiStreamSink]:
    """The reader started beside a bank that grants every read, every slot full in turn 0; no pauses."""
    await start(dut)
    slots, size = len(dut.slot_full), 1 << len(dut.rd_addr)
    bank = Bank(dut, random.Random(cocotb.RANDOM_SEED), size, slots, grant_prob=1.0)
    bank.full = [True] * slots
    dut.slot_full.value, dut.slot_turn.value = (1 << slots) - 1, 0
    src, sink = _streams(dut)
    cocotb.start_soon(bank.serve())
    return bank, src, sink


@cocotb.test(timeout_time=10, timeout_unit="ms")
async def test_a_beat_a_cycle(dut: SimHandleBase) -> None:
    """Granted every cycle and a sink that never stalls: a run of 64 beats leaves in 65 consecutive cycles."""
    bank, src, sink = await _always_ready(dut)
    run = streams.encode("rdesc", first=3, beats=64, slot=0, release=0).tobytes()
    await src.send(AxiStreamFrame([5, beat_of(run)]))
    cycles, seen, first = 0, 0, None
    while seen < 65:
        await RisingEdge(dut.clk)
        await ReadOnly()
        cycles += 1
        if int(dut.m_axis_tvalid.value) and int(dut.m_axis_tready.value):
            first = cycles if first is None else first
            seen += 1
    assert cycles - first + 1 == 65, f"65 beats over {cycles - first + 1} cycles"
    got = await sink.recv(compact=False)
    assert [int(x) for x in got.tdata] == [5, *bank.mem[3:67]]


@cocotb.test(timeout_time=10, timeout_unit="ms")
async def test_waits_for_its_turn(dut: SimHandleBase) -> None:
    """A slot full with the sequence before the reader's own (the other turn): nothing is read until it turns."""
    bank, src, sink = await _always_ready(dut)
    run = streams.encode("rdesc", first=0, beats=4, slot=1, release=1, turn=1).tobytes()
    await src.send(AxiStreamFrame([9, beat_of(run)]))
    await ClockCycles(dut.clk, 100)
    assert sink.empty() and not bank.releases, "read the sequence of the other turn"
    bank.turn[1] = 1
    got = await sink.recv(compact=False)
    assert [int(x) for x in got.tdata] == [9, *bank.mem[0:4]]
    # a quiet release waits for its turn like a run, and sends nothing
    await ClockCycles(dut.clk, 5)
    quiet = streams.encode("rdesc", first=0, beats=0, slot=0, release=1, turn=1, quiet=1).tobytes()
    await src.send(AxiStreamFrame([7, beat_of(quiet)]))
    await ClockCycles(dut.clk, 50)
    assert bank.releases == [1], f"released {bank.releases} before slot 0 turned"
    bank.turn[0] = 1
    await ClockCycles(dut.clk, 10)
    assert bank.releases == [1, 0] and sink.empty(), "the quiet release sent a beat or did not release"

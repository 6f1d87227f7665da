"""cocotb 2.x testbench for :class:`vckattn.hw.pl.slot_buffer.SlotBuffer` with its readers
(:class:`vckattn.sim.buffer_harness.BufferHarness`; run by ``tests/hw/pl/test_slot_buffer.py``).

More sequences than slots go through the buffer: for each sequence its writers write every beat of its slot (the
beats dealt at random to the writers, each writer's in a random order), and every reader reads the whole slot in
runs of random lengths, the last releasing it. With ``VCKATTN_TB_WIRING`` (JSON: ``bank_beats``, per writer and
per reader its banks), each beat goes to a writer wired to its bank, and each reader reads, in runs, only the beats
of the slot in its banks. Writers run ahead: the beats of a sequence whose slot still holds
an earlier one must wait until every reader has released it. Random pauses on every stream. Every reader's
packets must be the run's header beat and exactly the beats that sequence wrote there.
"""

from __future__ import annotations

import json
import logging
import os
import random

import cocotb
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from vckattn.hw.pl.slot_buffer import write_user
from vckattn.hw.spec import streams
from vckattn.sim.kernel_tb import pause_pattern, start


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_sequences_through_the_slots(dut: SimHandleBase) -> None:
    slots, slot_beats = len(dut.slot_full), int(os.environ["VCKATTN_TB_SLOT_BEATS"])
    writers = sum(1 for w in range(64) if hasattr(dut, f"s_axis_w{w}_tdata"))
    readers = sum(1 for r in range(64) if hasattr(dut, f"s_axis_r{r}_tdata"))
    sequences = 3 * slots
    await start(dut)
    rnd = random.Random(cocotb.RANDOM_SEED)

    def pauses(x: object) -> None:
        x.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))  # type: ignore[attr-defined]
        x.log.setLevel(logging.WARNING)  # type: ignore[attr-defined]

    wsrc = [AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s_axis_w{w}"), dut.clk, dut.rst, byte_lanes=1)
            for w in range(writers)]
    rsrc = [AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s_axis_r{r}"), dut.clk, dut.rst, byte_lanes=1)
            for r in range(readers)]
    rsink = [AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m_axis_r{r}"), dut.clk, dut.rst, byte_lanes=1)
             for r in range(readers)]
    for x in (*wsrc, *rsrc, *rsink):
        pauses(x)

    wiring = json.loads(os.environ.get("VCKATTN_TB_WIRING", "null"))

    def wired(banks: list[list[int]] | None, n: int, b: int, i: int) -> list[int]:
        """The streams (of ``n``) wired to beat ``i`` of sequence ``b``'s slot."""
        if banks is None:
            return list(range(n))
        bank = ((b % slots) * slot_beats + i) // wiring["bank_beats"]
        return [k for k in range(n) if bank in banks[k]]

    def runs(offsets: list[int]) -> list[tuple[int, int]]:
        """``offsets`` (sorted) as (first, beats) runs of consecutive ones."""
        out: list[tuple[int, int]] = []
        for i in offsets:
            if out and out[-1][0] + out[-1][1] == i:
                out[-1] = (out[-1][0], out[-1][1] + 1)
            else:
                out.append((i, 1))
        return out

    data = [[rnd.getrandbits(128) for _ in range(slot_beats)] for _ in range(sequences)]
    expected: list[list[list[int]]] = [[] for _ in range(readers)]
    for b in range(sequences):
        base = (b % slots) * slot_beats
        deal: list[list[int]] = [[] for _ in range(writers)]
        for i in range(slot_beats):
            deal[rnd.choice(wired(wiring and wiring["write"], writers, b, i))].append(i)
        for w in range(writers):
            rnd.shuffle(deal[w])
            if deal[w]:
                slot_bits = max(1, (slots - 1).bit_length())
                addr_bits = len(dut.s_axis_w0_tuser) - slot_bits - 1
                await wsrc[w].send(AxiStreamFrame([data[b][i] for i in deal[w]], tuser=[
                    write_user(base + i, b % slots, b // slots % 2, addr_bits, slot_bits) for i in deal[w]]))
        for r in range(readers):
            mine = [i for i in range(slot_beats) if r in wired(wiring and wiring["read"], readers, b, i)]
            pieces = []
            for first, beats in runs(mine):  # each run of its beats cut at random lengths
                at = 0
                while at < beats:
                    n = min(beats - at, rnd.randint(1, slot_beats))
                    pieces.append((first + at, n))
                    at += n
            for k, (at, n) in enumerate(pieces):
                hdr = rnd.getrandbits(128)
                run = streams.encode("rdesc", first=base + at, beats=n, slot=b % slots,
                                     release=int(k == len(pieces) - 1), turn=b // slots % 2).tobytes()
                await rsrc[r].send(AxiStreamFrame([hdr, int.from_bytes(run, "little")]))
                expected[r].append([hdr, *data[b][at:at + n]])
    for r in range(readers):
        for k, want in enumerate(expected[r]):
            got = await rsink[r].recv(compact=False)
            assert [int(x) for x in got.tdata] == want, f"reader {r}, run {k}: not the beats its sequence wrote"
    await ClockCycles(dut.clk, 20)
    assert all(s.empty() for s in rsink)
    assert int(dut.slot_full.value) == 0, "a slot still full after every reader released it"
    dut._log.info("%d sequences through %d slots: %d writers, %d readers", sequences, slots, writers, readers)

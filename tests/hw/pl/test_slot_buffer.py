"""The PL slot buffer (hw/pl/slot_buffer.py) with its readers (hw/pl/buffer_reader.py) on Verilator through cocotb
(sim/tb_slot_buffer.py): three times as many sequences as slots, each written by several writers in random order
and read whole by every reader in runs of random lengths, under backpressure everywhere: every run is what its
sequence wrote, a slot is never overwritten before all its readers have released it, and all slots end empty."""

from __future__ import annotations

import json

import pytest

from vckattn.hw.pl.slot_buffer import SlotBuffer
from vckattn.sim.buffer_harness import BufferHarness
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_slot_buffer"

#: (slots, slot_beats, bank_beats, writers, readers): banks smaller than a slot and straddling slots, one bank
GEOMETRIES = {"s2_b8_w2_r3": (2, 24, 8, 2, 3), "s3_b64_w3_r2": (3, 20, 64, 3, 2)}
#: a buffer whose streams are each wired to some banks only (slots of 3 banks of 8 beats, banks 0-2 and 3-5):
#: reader 0 reads each slot's first bank, reader 1 its other two, reader 2 its middle one; writer 0 writes the first
#: two banks of a slot, writer 1 the last two (the middle bank has both)
WIRED = {"bank_beats": 8, "write": [[0, 1, 3, 4], [1, 2, 4, 5]], "read": [[0, 3], [1, 2, 4, 5], [1, 4]]}


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_sequences_through_the_slots(name: str) -> None:
    slots, slot_beats, bank_beats, writers, readers = GEOMETRIES[name]
    top = f"slot_buffer_{name}"
    src = [generate_verilog(BufferHarness(slots, slot_beats, bank_beats, writers, readers), top)]
    res = run_cocotb(top, src, TB, testcase="test_sequences_through_the_slots",
                     extra_env={"VCKATTN_TB_SLOT_BEATS": str(slot_beats)})
    assert [t.name for t in res.passed] == ["test_sequences_through_the_slots"], res.tests


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_streams_wired_to_some_banks_only() -> None:
    """Each stream reaches only its banks: every run still the beats its sequence wrote, every slot freed."""
    top = "slot_buffer_wired"
    src = [generate_verilog(BufferHarness(2, 24, 8, 2, 3, WIRED["write"], WIRED["read"]), top)]
    res = run_cocotb(top, src, TB, testcase="test_sequences_through_the_slots",
                     extra_env={"VCKATTN_TB_SLOT_BEATS": "24", "VCKATTN_TB_WIRING": json.dumps(WIRED)})
    assert [t.name for t in res.passed] == ["test_sequences_through_the_slots"], res.tests


def test_wiring_is_checked() -> None:
    buf = SlotBuffer(2, 24, 8, 2, 3, 3, WIRED["write"], WIRED["read"])
    assert (buf.write_pairs, buf.read_pairs) == (8, 8)
    assert SlotBuffer(2, 24, 8, 2, 3, 3).read_pairs == 18  # every read port to each of the 6 banks
    with pytest.raises(ValueError, match=r"banks \[2, 5\] have no writer"):
        SlotBuffer(2, 24, 8, 2, 3, 3, [[0, 1, 3, 4], [1, 4]])
    with pytest.raises(ValueError, match="read port 1: banks"):
        SlotBuffer(2, 24, 8, 2, 3, 3, read_banks=[[0], [6], [1]])
    with pytest.raises(ValueError, match="2 bank lists for 3 read ports"):
        SlotBuffer(2, 24, 8, 2, 3, 3, read_banks=[[0], [1]])


def test_refuses_banks_that_are_not_a_power_of_two() -> None:
    with pytest.raises(ValueError, match="power of two"):
        SlotBuffer(2, 24, 12, 2, 2, 2)

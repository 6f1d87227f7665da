"""The PL slot buffer (hw/pl/slot_buffer.py) with its readers (hw/pl/buffer_reader.py) on Verilator through cocotb
(sim/tb_slot_buffer.py): three times as many sequences as slots, each written by several writers in random order
and read whole by every reader in runs of random lengths, under backpressure everywhere: every run is what its
sequence wrote, a slot is never overwritten before all its readers have released it, and all slots end empty."""

from __future__ import annotations

import pytest

from vckattn.hw.pl.slot_buffer import SlotBuffer
from vckattn.sim.buffer_harness import BufferHarness
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_slot_buffer"

#: (slots, slot_beats, bank_beats, writers, readers): banks smaller than a slot and straddling slots, one bank
GEOMETRIES = {"s2_b8_w2_r3": (2, 24, 8, 2, 3), "s3_b64_w3_r2": (3, 20, 64, 3, 2)}


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


def test_refuses_banks_that_are_not_a_power_of_two() -> None:
    with pytest.raises(ValueError, match="power of two"):
        SlotBuffer(2, 24, 12, 2, 2, 2)

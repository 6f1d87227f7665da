"""The sublayer's PL buffers as they are built (``hw/pl/slot_buffer.py``), MODELED: banks of 128-bit beats, the
banks each write stream and each read port is wired to, the memory blocks the banks take, and the logic of the
arbiters, multiplexers, readers and re-tilers from their Yosys fits (``hw/perf/data/pl_buffers.json``,
``python -m vckattn.sim.pl_buffers``).

A bank is :data:`BANK_BEATS` beats deep: one URAM288's depth (4K × 72 bits, AM007), two URAMs side by side for a
128-bit beat (144 bits: 1/8 of every URAM's bits unused), or 16 BRAM36 (512 × 72 each, two side by side, eight
deep, cascaded in the block). Memory blocks are counted per bank: a bank partly filled takes its whole blocks.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BANK_BEATS", "BEAT_BITS", "DATA_FILE", "BankedBuffer", "load_data", "logic", "reader_cost",
           "retiler_cost"]

#: bits of a buffer beat (one 128-bit PLIO beat)
BEAT_BITS = 128
#: beats of a bank: one URAM288's depth
BANK_BEATS = 4096
#: memory blocks (depth, width bits) of the PL (AM007: URAM288 4K × 72, RAMB36 512 × 72)
BLOCKS = {"uram": (4096, 72), "bram": (512, 72)}
DATA_FILE: Path = Path(__file__).resolve().parent / "data" / "pl_buffers.json"
KEYS = ("lut", "ff")


@functools.cache
def load_data() -> dict[str, Any]:
    """The parsed ``pl_buffers.json``."""
    return json.loads(DATA_FILE.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class BankedBuffer:
    """One PL buffer as built: ``beats`` 128-bit beats in banks of ``bank_beats`` (:data:`BANK_BEATS`; smaller in
    the simulation's small builds), per write stream and per read port the banks it is wired to (``writers``,
    ``readers``: one frozenset of bank indices each)."""

    name: str
    beats: int
    writers: tuple[frozenset[int], ...]
    readers: tuple[frozenset[int], ...]
    bank_beats: int = BANK_BEATS

    @property
    def banks(self) -> int:
        return math.ceil(self.beats / self.bank_beats)

    @property
    def write_pairs(self) -> int:
        """(writer, bank) wires."""
        return sum(len(w) for w in self.writers)

    @property
    def read_pairs(self) -> int:
        """(bank, read port) wires."""
        return sum(len(r) for r in self.readers)

    def blocks(self, memory: str) -> int:
        """Memory blocks (``"uram"`` or ``"bram"``) of the banks: each bank whole blocks, two side by side."""
        depth, width = BLOCKS[memory]
        return self.banks * math.ceil(self.bank_beats / depth) * math.ceil(BEAT_BITS / width)

    def logic(self) -> dict[str, float]:
        """LUT and FF of the buffer's arbiters, multiplexers and slot counters (the slot buffer's fit)."""
        return logic(self.write_pairs, self.read_pairs, self.banks)


def logic(write_pairs: int, read_pairs: int, banks: int) -> dict[str, float]:
    """LUT and FF of a slot buffer's logic (its memory not included), from the fit over Yosys syntheses."""
    fit = load_data()["slot_buffer"]["fit"]
    return {k: max(0.0, fit[k]["base"] + fit[k]["per_write_pair"] * write_pairs + fit[k]["per_read_pair"] * read_pairs
                   + fit[k]["per_bank"] * banks) for k in KEYS}


def reader_cost() -> dict[str, float]:
    """LUT and FF of one buffer reader (``hw/pl/buffer_reader.py``)."""
    return {k: float(v) for k, v in load_data()["buffer_reader"]["cost"].items()}


def retiler_cost(cols: int) -> dict[str, float]:
    """LUT and FF of one Q/K/V re-tiler of records ``cols`` channels wide (``hw/pl/retiler.py``)."""
    fit = load_data()["retiler"]["fit"]
    return {k: max(0.0, fit[k]["base"] + fit[k]["per_col"] * cols) for k in KEYS}

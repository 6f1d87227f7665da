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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BANK_BEATS", "BEAT_BITS", "DATA_FILE", "FEATURES", "ROUTER_FEATURES", "BankedBuffer", "load_data", "logic",
           "reader_cost", "retiler_cost", "router_bram", "router_cost", "router_features", "wiring_features",
           "x_rows_cost"]

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

    def features(self) -> dict[str, float]:
        """What its logic is fitted on (:func:`wiring_features`)."""
        return wiring_features(self.banks, self.writers, self.readers)

    def logic(self) -> dict[str, float]:
        """LUT and FF of the buffer's arbiters, multiplexers and slot counters (the slot buffer's fit)."""
        return logic(self.features())


#: the slot buffer fit's terms (:func:`wiring_features`), after its constant ``base``
FEATURES = ("write_pairs", "read_pairs", "write_mux", "read_mux", "banks")


def wiring_features(banks: int, writers: Sequence[Iterable[int]], readers: Sequence[Iterable[int]]
                    ) -> dict[str, float]:
    """A slot buffer's wiring as its logic's fit takes it: ``write_pairs`` and ``read_pairs`` ((stream, bank)
    wires: a bank's arbiter grows with its requesters), ``write_mux`` = Σ over banks of ``n · log2 n`` for the ``n``
    writers wired to it, ``read_mux`` the same for its read ports (a multiplexer tree of ``n`` inputs), ``banks``."""
    wb, rb = [0] * banks, [0] * banks
    for streams, count in ((writers, wb), (readers, rb)):
        for st in streams:
            for b in st:
                count[b] += 1

    def mux(counts: list[int]) -> float:
        return sum(n * math.log2(n) for n in counts if n > 1)

    return {"write_pairs": float(sum(wb)), "read_pairs": float(sum(rb)), "write_mux": mux(wb), "read_mux": mux(rb),
            "banks": float(banks)}


def logic(features: dict[str, float], fit: dict[str, Any] | None = None) -> dict[str, float]:
    """LUT and FF of a slot buffer's logic (its memory not included) of wiring ``features``
    (:func:`wiring_features`), from the fit over Yosys syntheses (``fit``: one not yet written to the data file)."""
    fit = fit or load_data()["slot_buffer"]["fit"]
    return {k: max(0.0, fit[k]["base"] + sum(fit[k][f"per_{n}"] * features[n] for n in FEATURES)) for k in KEYS}


def reader_cost() -> dict[str, float]:
    """LUT and FF of one buffer reader (``hw/pl/buffer_reader.py``)."""
    return {k: float(v) for k, v in load_data()["buffer_reader"]["cost"].items()}


def x_rows_cost(row_beats: int) -> dict[str, float]:
    """LUT (its LUTRAM included) and FF of one residual path's row unit of records ``row_beats`` 16-feature blocks
    wide (``hw/pl/x_rows.py``)."""
    fit = load_data()["x_rows"]["fit"]
    return {k: max(0.0, fit[k]["base"] + fit[k]["per_row_beat"] * row_beats) for k in KEYS}


def rope_records_cost(lanes: int, positions: int) -> dict[str, float]:
    """LUT (its LUTRAM included), FF, DSP and BRAM36 of one RoPE unit on a Q/K/V output PLIO's records, as built
    (``hw/pl/rope_records.py``: the kernel, its table of ``positions`` positions of 64 features, the records'
    wrapper), from its Yosys fit."""
    fit = load_data()["rope_records"]["fit"]
    return {k: max(0.0, fit[k]["base"] + fit[k]["per_lane"] * lanes + fit[k]["per_position"] * positions)
            for k in (*KEYS, "dsp", "bram")}


def retiler_cost(cols: int) -> dict[str, float]:
    """LUT and FF of one Q/K/V re-tiler of records ``cols`` channels wide (``hw/pl/retiler.py``)."""
    fit = load_data()["retiler"]["fit"]
    return {k: max(0.0, fit[k]["base"] + fit[k]["per_col"] * cols) for k in KEYS}


#: a stream router's FIFO of at least this many entries is a block RAM (Yosys maps shallower ones to LUTRAM; the
#: sweep checks the rule on every point it synthesizes)
ROUTER_BRAM_DEPTH = 128
#: the stream router fit's terms (:func:`router_features`), after its constant ``base``
ROUTER_FEATURES = ("outputs", "lutram_blocks", "bram_fifos")


def router_bram(depths: Sequence[int]) -> int:
    """BRAM36 of a stream router's FIFOs (``hw/pl/stream_router.py``) of ``depths`` entries: a FIFO of
    :data:`ROUTER_BRAM_DEPTH` entries or more takes two RAMB36 (72 bits each, 129-bit entries) a 512 entries."""
    return sum(2 * math.ceil(d / BLOCKS["bram"][0]) for d in depths if d >= ROUTER_BRAM_DEPTH)


def router_features(depths: Sequence[int]) -> dict[str, float]:
    """A stream router's FIFOs as its logic's fit takes them: ``outputs``; ``lutram_blocks`` = Σ ⌈depth / 32⌉ over
    its LUTRAM FIFOs (a LUTRAM cell is 32 entries deep); ``bram_fifos``: its block-RAM FIFOs."""
    small = [d for d in depths if d < ROUTER_BRAM_DEPTH]
    return {"outputs": float(len(depths)), "lutram_blocks": float(sum(math.ceil(d / 32) for d in small)),
            "bram_fifos": float(len(depths) - len(small))}


def router_cost(depths: Sequence[int], fit: dict[str, Any] | None = None) -> dict[str, float]:
    """LUT (its LUTRAM included), FF and BRAM of one stream router with FIFOs of ``depths`` entries (the fit over
    Yosys syntheses, ``fit``: one not yet written to the data file; BRAM: :func:`router_bram`)."""
    fit = fit or load_data()["stream_router"]["fit"]
    f = router_features(depths)
    cost = {k: max(0.0, fit[k]["base"] + sum(fit[k][f"per_{n}"] * f[n] for n in ROUTER_FEATURES)) for k in KEYS}
    return {**cost, "bram": float(router_bram(depths))}

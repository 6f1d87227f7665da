"""The sublayer's PL buffers held per K-slice of the projection stage that reads them: X (and a decoder's U) for the
Q/K/V stage, A for the W_O stage (``hw/ENGINE.md``, "The sublayer's PL side"). Declared once for the units that write
them (the A writer, ``hw/pl/a_writer.py``), the readers' descriptors and the performance model's banks.

Addresses are in 16-byte beats. The buffer holds ``slots`` sequences of ``max_seq`` tokens (sequence ``b`` in slot
``b % slots``); it is cut into one region a K-slice ``j`` (``slices[j]`` features, a multiple of 16), each from a
bank boundary (``bank_beats``). Region ``j`` holds, for every row tile ``R`` of ``rows`` tokens of the slots (slot
by slot, ``max_seq / rows`` tiles each), the ``rows × slices[j]`` block a GEMM x reader sends after its XTILE
header: the A layout of ``mmul<4,16,8>`` (``golden/gemm_proj.py: pack_x``: 4 × 16 blocks, a row of blocks first,
row-major inside; a beat is one row's 16 features).

A residual path reads X again for the W_O stage's output records (``rows × cols`` of one sequence, channels
``block · cols ..``): for every 4 rows of a record and every K-slice its channels reach, the beats of those rows and
channels are one run (16-feature blocks in order, the 4 rows inside), so a record's 4 rows are a few runs whose beats,
in order, are its 16-feature blocks in order, the 4 rows inside (``hw/pl/x_rows.py`` turns them into rows).

A decoder's site units read X whole, token row by token row, to write U (``hw/pl/site_unit.py``): a site reader
sends, for every 4 tokens dealt to its unit, one run a K-slice, in order (``site_runs``), so that the 4 tokens' runs,
in order, are their 16-feature blocks in order, the 4 tokens inside.
"""

from __future__ import annotations

from dataclasses import dataclass

from vckattn.hw.spec.qkv_buffer import Run, with_release
from vckattn.hw.spec.streams import BEAT_BYTES

__all__ = ["SliceLayout", "residual_runs", "site_groups", "site_runs", "x_reader_runs"]


@dataclass(frozen=True)
class SliceLayout:
    """The buffer's geometry (module docstring): K-slice widths ``slices``, the reading GEMM's tile ``rows`` (a
    multiple of 4 dividing ``max_seq``), ``slots`` sequences of ``max_seq`` tokens, banks of ``bank_beats``."""

    slices: tuple[int, ...]
    rows: int
    max_seq: int
    slots: int
    bank_beats: int

    def __post_init__(self) -> None:
        if not self.slices or any(k < 16 or k % 16 for k in self.slices):
            raise ValueError(f"K-slices {self.slices}: each a positive multiple of 16")
        if self.rows < 4 or self.rows % 4 or self.max_seq % self.rows:
            raise ValueError(f"tiles of {self.rows} rows (a multiple of 4) over {self.max_seq} tokens")
        if self.slots < 1 or self.bank_beats < 1:
            raise ValueError("at least one slot and one beat a bank")

    @property
    def tokens(self) -> int:
        """Tokens held: ``slots · max_seq``."""
        return self.slots * self.max_seq

    @property
    def features(self) -> int:
        return sum(self.slices)

    def block_beats(self, j: int) -> int:
        """Beats of one row tile's block of K-slice ``j``."""
        return self.rows * self.slices[j] // BEAT_BYTES

    def region_first(self, j: int) -> int:
        """First beat of K-slice ``j``'s region (a bank boundary)."""
        return sum(self.region_banks_count(i) for i in range(j)) * self.bank_beats

    def region_banks_count(self, j: int) -> int:
        return -(-self.tokens * self.slices[j] // BEAT_BYTES // self.bank_beats)

    def region_banks(self, j: int) -> range:
        """The banks of K-slice ``j``'s region."""
        first = self.region_first(j) // self.bank_beats
        return range(first, first + self.region_banks_count(j))

    @property
    def banks(self) -> int:
        return sum(self.region_banks_count(j) for j in range(len(self.slices)))

    @property
    def beats(self) -> int:
        """Beats of the whole buffer (whole banks)."""
        return self.banks * self.bank_beats

    def slice_of(self, feature: int) -> int:
        """The K-slice that holds ``feature``."""
        at = 0
        for j, k in enumerate(self.slices):
            if feature < at + k:
                return j
            at += k
        raise ValueError(f"feature {feature} beyond {self.features}")

    def block(self, b: int, tile: int, j: int) -> int:
        """First beat of row tile ``tile`` (of ``max_seq / rows``) of sequence ``b``, K-slice ``j``."""
        tiles = self.max_seq // self.rows
        return self.region_first(j) + ((b % self.slots) * tiles + tile) * self.block_beats(j)

    def beat(self, b: int, token: int, feature: int) -> int:
        """The beat holding features ``feature .. feature + 15`` (``feature`` a multiple of 16) of ``token`` of
        sequence ``b``."""
        j = self.slice_of(feature)
        f16 = (feature - sum(self.slices[:j])) // 16
        i = token % self.rows
        return self.block(b, token // self.rows, j) + ((i // 4) * (self.slices[j] // 16) + f16) * 4 + i % 4


def x_reader_runs(layout: SliceLayout, units: list[list[tuple[int, int]]], batch: int) -> list[list[Run]]:
    """Every x reader's runs for a launch of ``batch`` sequences: per broadcast group (``units``: its cascades'
    (output block, sequence) units, in the order they run them) one reader a K-slice, each sending, unit by unit,
    every row tile's block of its K-slice of the unit's sequence; each reader releases every sequence's slot once
    (its last run of the sequence, or a quiet release where its group has none), in sequence order."""
    tiles = layout.max_seq // layout.rows
    out: list[list[Run]] = []
    for group in units:
        for j in range(len(layout.slices)):
            runs: list[Run] = []
            for b in range(batch):
                slot, turn = b % layout.slots, b // layout.slots % 2
                mine = [Run("x", b, j, t, layout.block(b, t, j), layout.block_beats(j), slot, turn, False)
                        for _, bb in group if bb == b for t in range(tiles)]
                runs += with_release(mine, Run("x", b, j, -1, 0, 0, slot, turn, True, True))
            out.append(runs)
    return out


def residual_runs(layout: SliceLayout, units: list[list[tuple[int, int]]], batch: int, rows: int,
                  cols: int) -> list[list[Run]]:
    """Every residual X reader's runs for a launch of ``batch`` sequences: per W_O cascade (``units``: its (output
    block, sequence) units, in the order it runs them) one reader, sending for every record of every unit (row tiles
    of ``rows`` tokens, channels ``block · cols .. + cols``), 4 rows at a time, one run per K-slice the channels
    reach (module docstring; ``index``: the 4 rows' first token, ``head``: the block); each reader releases every
    sequence's slot once (its last run of the sequence, or a quiet release), in sequence order."""
    if rows % 4 or layout.max_seq % rows or cols % 16:
        raise ValueError(f"records of {rows} x {cols}: rows a multiple of 4 dividing {layout.max_seq}, cols of 16")
    out: list[list[Run]] = []
    for cascade in units:
        runs: list[Run] = []
        for b in range(batch):
            slot, turn = b % layout.slots, b // layout.slots % 2
            mine: list[Run] = []
            for blk, bb in cascade:
                if bb != b:
                    continue
                lo, hi = blk * cols, (blk + 1) * cols
                if hi > layout.features:
                    raise ValueError(f"block {blk} of {cols} channels beyond {layout.features}")
                for tok in range(0, layout.max_seq, 4):
                    f = lo
                    while f < hi:
                        j = layout.slice_of(f)
                        end = min(hi, sum(layout.slices[:j + 1]))
                        mine.append(Run("r", b, blk, tok, layout.beat(b, tok, f), (end - f) // 16 * 4, slot, turn,
                                        False))
                        f = end
            runs += with_release(mine, Run("r", b, -1, -1, 0, 0, slot, turn, True, True))
        out.append(runs)
    return out


def site_groups(layout: SliceLayout, units: int, unit: int) -> range:
    """The groups of 4 tokens of a sequence that site unit ``unit`` of ``units`` takes (group ``g``: tokens
    ``4g .. 4g + 3``): every ``units``-th, from ``unit``."""
    return range(unit, layout.max_seq // 4, units)


def site_runs(layout: SliceLayout, units: int, batch: int) -> list[list[Run]]:
    """Every site reader's runs for a launch of ``batch`` sequences: per site unit (``units`` of them, each its
    :func:`site_groups`), sequence by sequence, for each of its groups of 4 tokens one run a K-slice (its 4 tokens'
    beats of the slice: contiguous, ``4 · slices[j] / 16`` beats; ``head``: the K-slice, ``index``: the first
    token); each reader releases every sequence's slot once (its last run of the sequence, or a quiet release)."""
    if units < 1:
        raise ValueError(f"{units} site units: at least one")
    out: list[list[Run]] = []
    for u in range(units):
        runs: list[Run] = []
        for b in range(batch):
            slot, turn = b % layout.slots, b // layout.slots % 2
            mine = [Run("s", b, j, 4 * g, layout.beat(b, 4 * g, sum(layout.slices[:j])), layout.slices[j] // 4,
                        slot, turn, False)
                    for g in site_groups(layout, units, u) for j in range(len(layout.slices))]
            runs += with_release(mine, Run("s", b, -1, -1, 0, 0, slot, turn, True, True))
        out.append(runs)
    return out

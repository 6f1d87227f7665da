"""X rows for a residual path: a residual X reader's runs in, the record's rows out, ``lanes`` int8 a beat
(``hw/ENGINE.md``, "The sublayer's PL side": the residual path beside each W_O output PLIO).

The reader (``hw/pl/buffer_reader.py``) sends, for each of its descriptors, a header beat and a run of the X buffer
(``hw/spec/slice_buffer.py: residual_runs``): for every 4 rows of a W_O record, the ``row_beats`` 16-feature blocks
of the record's channels in order, the 4 rows inside each (beat ``k`` is block ``k / 4`` of row ``k mod 4``), over one
run or a few (one per K-slice the channels reach). The unit drops each run's header beat (the beat after a TLAST,
and the first), keeps the ``4 · row_beats`` beats of 4 rows in one half of a two-half memory while it sends the other
half's: row by row, each row's blocks in order, each block ``16 / lanes`` beats of ``lanes`` int8 (the residual unit's
``s_axis_res``, ``hw/pl/residual.py``), TLAST on a row's last beat. One beat in a cycle, one beat out a cycle.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory

from .pipeline import axis_port

__all__ = ["XRows"]

BEAT_BITS = 128


class XRows(wiring.Component):
    """Runs of 4 rows in (``s_axis``, 128 bits, a header beat first in each run), rows out (``m_axis``,
    ``lanes × 8`` bits); module docstring.

    Args:
        row_beats: 16-feature blocks of a record's row (``cols / 16``).
        lanes: int8 elements a beat out (dividing 16).
    """

    def __init__(self, row_beats: int, lanes: int = 4) -> None:
        if row_beats < 1 or lanes < 1 or 16 % lanes:
            raise ValueError(f"row_beats {row_beats} >= 1 and lanes {lanes} dividing 16")
        self.row_beats, self.lanes = row_beats, lanes
        super().__init__({**axis_port("s_axis", BEAT_BITS, sink=True),
                          **axis_port("m_axis", lanes * 8, sink=False)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = 4 * self.row_beats  # beats of 4 rows
        parts = 16 // self.lanes
        m.submodules.mem = mem = Memory(shape=BEAT_BITS, depth=2 * n, init=[])
        wr, rd = mem.write_port(), mem.read_port(domain="comb")

        # ---- in: drop the header beat of each run, keep the rest in the filling half
        header = Signal(init=1)  # the next beat is a run's header
        w_half, w_idx = Signal(), Signal(range(n))
        full = Signal(2)
        take = Signal()
        m.d.comb += [self.s_axis_tready.eq(header | ~full.bit_select(w_half, 1)),
                     take.eq(self.s_axis_tvalid & self.s_axis_tready)]
        m.d.comb += [wr.addr.eq(w_half * n + w_idx), wr.data.eq(self.s_axis_tdata),
                     wr.en.eq(take & ~header)]
        set_full = Signal(2)
        with m.If(take):
            m.d.sync += header.eq(self.s_axis_tlast)
            with m.If(~header):
                with m.If(w_idx == n - 1):
                    m.d.sync += [w_idx.eq(0), w_half.eq(~w_half)]
                    m.d.comb += set_full.eq(1 << w_half)
                with m.Else():
                    m.d.sync += w_idx.eq(w_idx + 1)

        # ---- out: the sending half, row r, block f, part p of the block
        r_half = Signal()
        row, blk, part = Signal(range(4)), Signal(range(max(self.row_beats, 2))), Signal(range(max(parts, 2)))
        give = Signal()
        clear_full = Signal(2)
        m.d.comb += [rd.addr.eq(r_half * n + blk * 4 + row),
                     self.m_axis_tdata.eq(rd.data if parts == 1 else rd.data.word_select(part, self.lanes * 8)),
                     self.m_axis_tvalid.eq(full.bit_select(r_half, 1)),
                     self.m_axis_tlast.eq((blk == self.row_beats - 1) & (part == parts - 1)),
                     give.eq(self.m_axis_tvalid & self.m_axis_tready)]
        with m.If(give):
            with m.If(part == parts - 1):
                m.d.sync += part.eq(0)
                with m.If(blk == self.row_beats - 1):
                    m.d.sync += blk.eq(0)
                    with m.If(row == 3):
                        m.d.sync += [row.eq(0), r_half.eq(~r_half)]
                        m.d.comb += clear_full.eq(1 << r_half)
                    with m.Else():
                        m.d.sync += row.eq(row + 1)
                with m.Else():
                    m.d.sync += blk.eq(blk + 1)
            with m.Else():
                m.d.sync += part.eq(part + 1)
        m.d.sync += full.eq((full | set_full) & ~clear_full)
        return m

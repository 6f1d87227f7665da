"""The A writer: an attention pipeline's A records in, the addressed beats of the A buffer out (``hw/ENGINE.md``, "The
sublayer's PL side"; the buffer's layout: :class:`~vckattn.hw.spec.slice_buffer.SliceLayout`, one region a K-slice of
the W_O stage).

A record (``hw/spec/streams.py`` RESULT): one header beat (``tile_id = (b · heads + h) · T + r``: sequence ``b``,
query head ``h``, row tile ``r`` of ``T = max_seq / q_rows``), then ``q_rows × d`` int8 row-major, ``d / 16`` beats
a row (a beat is one row's 16 features of head ``h``), TLAST on its last beat. Each payload beat goes, as it is, to
the place of its token (``r · q_rows + i``) and features (``h · d + 16 c``) in the W_O stage's x blocks
(:meth:`SliceLayout.beat`); ``m_axis_tuser`` names its address, the sequence's slot and its turn
(:func:`.slot_buffer.write_user`), ``m_axis_tlast`` a record's last beat. One beat a cycle, no buffering: the
address is computed beside the beat (the sequence ``b = g / heads`` of the record's group ``g`` by a multiplication
with the reciprocal, exact for every group of ``max_groups``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring

from vckattn.hw.spec.slice_buffer import SliceLayout
from vckattn.hw.spec.streams import field

from .pipeline import axis_port

__all__ = ["AWriter", "reciprocal"]

BEAT_BITS = 128


def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what} {n}: a power of two")
    return n.bit_length() - 1


def reciprocal(divisor: int, below: int) -> tuple[int, int]:
    """``(m, s)`` with ``(g · m) >> s == g // divisor`` for every ``0 <= g < below`` (checked)."""
    bits = max(1, (below - 1).bit_length())
    s = bits + divisor.bit_length()
    m = -(-(1 << s) // divisor)
    if any((g * m) >> s != g // divisor for g in range(below)):
        raise AssertionError(f"no exact reciprocal of {divisor} below {below}")
    return m, s


class AWriter(wiring.Component):
    """A records in, addressed A-buffer beats out (module docstring).

    Ports: ``s_axis_tdata[128]``, ``s_axis_tlast``, ``s_axis_tvalid``, ``s_axis_tready``; ``m_axis_tdata[128]``,
    ``m_axis_tuser[addr_bits + slot_bits + 1]``, ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; ``clk``,
    ``rst``.

    Args:
        layout: The A buffer (``rows``, ``slots`` and ``max_seq / q_rows`` powers of two; every K-slice boundary on
            a head's 16-feature beat).
        heads: Query heads.
        d: Head size (a power of two, at least 16).
        q_rows: Rows of an attention tile (a power of two).
        max_groups: Groups ``b · heads + h`` a launch may name (the largest batch times ``heads``).
    """

    def __init__(self, layout: SliceLayout, heads: int, d: int, q_rows: int, max_groups: int) -> None:
        _log2(layout.rows, "W_O tile rows")
        _log2(layout.slots, "slots")
        _log2(d, "head size")
        self.t_bits = _log2(layout.max_seq // q_rows, "max_seq / q_rows")
        _log2(q_rows, "q_rows")
        if d < 16 or layout.features != heads * d:
            raise ValueError(f"{heads} heads of {d} features against K-slices of {layout.features}")
        self.layout, self.heads, self.d, self.q_rows = layout, heads, d, q_rows
        self.recip = reciprocal(heads, max_groups)
        self.max_groups = max_groups
        self.addr_bits = max(1, (layout.beats - 1).bit_length())
        self.slot_bits = max(1, (layout.slots - 1).bit_length())
        super().__init__({
            **axis_port("s_axis", BEAT_BITS, sink=True),
            **axis_port("m_axis", BEAT_BITS, sink=False, user_width=self.addr_bits + self.slot_bits + 1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        lo, heads, d = self.layout, self.heads, self.d
        mult, shift = self.recip
        beats_row = d // 16
        g_bits = max(1, (self.max_groups - 1).bit_length())

        # the record's group, sequence, head and row tile (from its header)
        tile = field("result", "tile_id").bits_of(self.s_axis_tdata)
        g_in = Signal(g_bits)
        m.d.comb += g_in.eq(tile >> self.t_bits)
        b_in = Signal(g_bits)
        m.d.comb += b_in.eq((g_in * mult) >> shift)
        b, h, r = Signal(g_bits), Signal(range(max(heads, 2))), Signal(max(1, self.t_bits))
        k = Signal(range(self.q_rows * beats_row + 1))  # the payload beat

        # the beat's place: token (within its slot), its 16 features
        i = k >> (beats_row.bit_length() - 1)  # the row within the record
        c = k & (beats_row - 1)
        slot = Signal(self.slot_bits)
        m.d.comb += slot.eq(b & (lo.slots - 1))
        turn = (b >> (lo.slots.bit_length() - 1)) & 1
        token = Signal(range(lo.tokens + 1))  # of the slots' tokens: slot · max_seq + r · q_rows + i
        m.d.comb += token.eq(slot * lo.max_seq + r * self.q_rows + i)
        row_tile = token >> (lo.rows.bit_length() - 1)
        ri = token & (lo.rows - 1)
        feature = Signal(range(heads * d + 1))
        m.d.comb += feature.eq(h * d + c * 16)
        addr = Signal(self.addr_bits)
        starts = [sum(lo.slices[:j]) for j in range(len(lo.slices))]
        choice = None  # the first K-slice whose end is above the feature: built from the last K-slice down
        for j in reversed(range(len(lo.slices))):
            here = (lo.region_first(j) + row_tile * lo.block_beats(j)
                    + ((ri >> 2) * (lo.slices[j] // 16) + ((feature - starts[j]) >> 4)) * 4 + (ri & 3))
            choice = here if choice is None else Mux(feature < starts[j + 1], here, choice)
        m.d.comb += addr.eq(choice)
        last = k == self.q_rows * beats_row - 1

        with m.FSM():
            with m.State("HEADER"):
                m.d.comb += self.s_axis_tready.eq(1)
                with m.If(self.s_axis_tvalid):
                    m.d.sync += [b.eq(b_in), h.eq(g_in - b_in * heads), r.eq(tile & ((1 << self.t_bits) - 1)),
                                 k.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.m_axis_tvalid.eq(self.s_axis_tvalid), self.s_axis_tready.eq(self.m_axis_tready),
                             self.m_axis_tdata.eq(self.s_axis_tdata),
                             self.m_axis_tuser.eq(Cat(addr, slot, turn)), self.m_axis_tlast.eq(last)]
                with m.If(self.s_axis_tvalid & self.m_axis_tready):
                    m.d.sync += k.eq(k + 1)
                    with m.If(last):
                        m.next = "HEADER"
        return m

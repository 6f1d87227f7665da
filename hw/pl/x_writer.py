"""The X writer: the X mover's stream in, the addressed beats of the X buffer out (``hw/ENGINE.md``, "The sublayer's
PL side"; the buffer's layout: :class:`~vckattn.hw.spec.slice_buffer.SliceLayout`, one region a K-slice of the Q/K/V
stage).

The host lays X out once a launch in the order the buffer holds it, so that the mover only copies: one record a
sequence, a header beat (``hw/spec/streams.py`` RESULT, ``tile_id`` = the sequence ``b``), then the sequence's
``max_seq · features / 16`` beats, K-slice by K-slice and, in each, row tile by row tile (``pack_x`` of each
block), TLAST on the last. Within a K-slice's region a sequence's blocks are consecutive, so the writer counts
addresses from the region's first beat of the sequence's slot. ``m_axis_tuser``: the address, the slot ``b % slots``
and the turn ``(b / slots) mod 2`` (:func:`.slot_buffer.write_user`); with ``slots`` not a power of two (all of X on
chip, one slot a sequence) every ``b`` must be below ``slots``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring

from vckattn.hw.spec.slice_buffer import SliceLayout
from vckattn.hw.spec.streams import field

from .pipeline import axis_port
from .slot_buffer import slot_turn

__all__ = ["XWriter"]

BEAT_BITS = 128


class XWriter(wiring.Component):
    """The X mover's records in, addressed X-buffer beats out (module docstring).

    Ports: ``s_axis_*`` (128 bits), ``m_axis_tdata[128]``, ``m_axis_tuser[addr_bits + slot_bits + 1]``,
    ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; ``clk``, ``rst``.

    Args:
        layout: The X buffer.
    """

    def __init__(self, layout: SliceLayout) -> None:
        self.layout = layout
        self.addr_bits = max(1, (layout.beats - 1).bit_length())
        self.slot_bits = max(1, (layout.slots - 1).bit_length())
        super().__init__({
            **axis_port("s_axis", BEAT_BITS, sink=True),
            **axis_port("m_axis", BEAT_BITS, sink=False, user_width=self.addr_bits + self.slot_bits + 1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        lo = self.layout
        n_j = len(lo.slices)
        per_slot = [lo.max_seq * k // 16 for k in lo.slices]  # a sequence's beats of each K-slice's region

        seq = field("result", "tile_id").bits_of(self.s_axis_tdata)
        slot, turn = Signal(self.slot_bits), Signal()
        j = Signal(range(max(n_j, 2)))
        n = Signal(range(max(per_slot) + 1))  # the beat within the sequence's part of region j
        addr = Signal(self.addr_bits)

        def base(jj: int, s: object) -> object:
            return lo.region_first(jj) + s * per_slot[jj]

        with m.FSM():
            with m.State("HEADER"):
                m.d.comb += self.s_axis_tready.eq(1)
                with m.If(self.s_axis_tvalid):
                    s_in, t_in = slot_turn(seq, lo.slots, self.slot_bits)
                    m.d.sync += [slot.eq(s_in), j.eq(0), n.eq(0), addr.eq(base(0, s_in)), turn.eq(t_in)]
                    m.next = "DATA"
            with m.State("DATA"):
                end_of_region = Signal()
                for jj in range(n_j):
                    with m.If(j == jj):
                        m.d.comb += end_of_region.eq(n == per_slot[jj] - 1)
                last = end_of_region & (j == n_j - 1)
                m.d.comb += [self.m_axis_tvalid.eq(self.s_axis_tvalid), self.s_axis_tready.eq(self.m_axis_tready),
                             self.m_axis_tdata.eq(self.s_axis_tdata), self.m_axis_tuser.eq(Cat(addr, slot, turn)),
                             self.m_axis_tlast.eq(last)]
                with m.If(self.s_axis_tvalid & self.m_axis_tready):
                    with m.If(last):
                        m.next = "HEADER"
                    with m.Elif(end_of_region):
                        m.d.sync += [j.eq(j + 1), n.eq(0)]
                        for jj in range(n_j - 1):
                            with m.If(j == jj):
                                m.d.sync += addr.eq(base(jj + 1, slot))
                    with m.Else():
                        m.d.sync += [n.eq(n + 1), addr.eq(addr + 1)]
        return m

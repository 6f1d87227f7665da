"""A decoder's BHyT site A unit in the sublayer's PL top (``hw/ENGINE.md``, "The sublayer's PL side"): a site
reader's runs of X in, U = BHyT(X) out as addressed beats of the U buffer, for the Q/K/V stage's x readers.

In: ``s_axis``, the site reader's runs (``hw/spec/slice_buffer.py: site_runs``): for every 4 tokens dealt to the
unit, one run a K-slice of the X buffer, each a SITE header beat (``hw/spec/streams.py``: ``seq`` b, ``token``,
``slice``) then the 4 tokens' beats of the slice (16-feature blocks in order, the 4 tokens inside), TLAST on its
last beat. The runs of a group go, in order, through a row unit (:class:`.x_rows.XRows`, 16 lanes: one 16-feature
block a beat) that turns them into token rows, TLAST at each row's end, then through the site's BHyT unit
(:class:`.bhyt_exact.BHyTExactKernel`, 16 lanes, its registers on ``s_axil``): each token's statistic
``S = Σ x²`` computed over the row, ``u = bhyt_site_int(x, S, regs)`` (``golden/bhyt_int.py``) out.

Where the U rows go: the header of a group's slice-0 run names its sequence and first token; the unit keeps them
(its slot ``b % slots`` and turn ``(b / slots) mod 2``, as the X writer takes a sequence, ``hw/pl/x_writer.py``)
in a small FIFO of ``tags`` groups, which the BHyT unit's rows leave in the order they came. Out: ``m_axis``, one
beat a U block: its data, ``m_axis_tuser`` its address in the U buffer (:meth:`SliceLayout.beat` of the token and
the block's first feature), the slot and the turn on top (:func:`.slot_buffer.write_user`), TLAST on a row's last
beat. One beat a cycle in and out when neither side waits (the BHyT unit's two passes over its token buffer take
a row's beats twice: its own rate).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered

from vckattn.golden.bhyt_int import NormFormat
from vckattn.hw.spec.slice_buffer import SliceLayout
from vckattn.hw.spec.streams import field

from .axil import axil_members
from .bhyt_exact import BHyTExactKernel
from .pipeline import axis_port
from .slot_buffer import slot_turn
from .x_rows import XRows

__all__ = ["SiteUnit"]


BEAT_BITS = 128
#: int8 a beat through the row unit and the BHyT unit: one 16-feature block
LANES = 16


class SiteUnit(wiring.Component):
    """X runs in, addressed U beats out (module docstring).

    Ports: ``s_axis_*`` (128 bits), ``m_axis_tdata[128]``, ``m_axis_tuser[addr_bits + slot_bits + 1]``,
    ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; the BHyT unit's ``s_axil_*``; ``clk``, ``rst``.

    Args:
        layout: The U buffer (the X buffer's K-slices and tiles, its own slots).
        max_d: The BHyT unit's token buffer (``layout.features`` or more, a multiple of 16).
        fmt: The BHyT unit's number formats.
        tags: Groups of 4 tokens between the row unit's input and the U writes (at least the row unit's 8 rows
            and the BHyT unit's two tokens: 4).
    """

    def __init__(self, layout: SliceLayout, max_d: int = 1024, fmt: NormFormat = NormFormat(), tags: int = 4) -> None:
        if max_d < layout.features or max_d % LANES:
            raise ValueError(f"a BHyT unit of max_d {max_d} (a multiple of {LANES}) for tokens of {layout.features}")
        if layout.rows & (layout.rows - 1):
            raise ValueError(f"row tiles of {layout.rows} tokens: the unit takes a power of two")
        if tags < 4:
            raise ValueError(f"{tags} tags: at least 4 groups of tokens are in flight")
        self.layout, self.tags = layout, tags
        self.addr_bits = max(1, (layout.beats - 1).bit_length())
        self.slot_bits = max(1, (layout.slots - 1).bit_length())
        self.rows = XRows(layout.features // 16, LANES)
        self.kernel = BHyTExactKernel(LANES, max_d, fmt)
        self.regmap = self.kernel.regmap
        super().__init__({
            **axis_port("s_axis", BEAT_BITS, sink=True),
            **axis_port("m_axis", BEAT_BITS, sink=False, user_width=self.addr_bits + self.slot_bits + 1),
            **axil_members("s_axil", self.regmap.addr_width),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        lo = self.layout
        m.submodules.rows = rows = self.rows
        m.submodules.kernel = kern = self.kernel
        for name in kern.signature.members:  # the register port straight through
            if name.startswith("s_axil_"):
                a, b = getattr(self, name), getattr(kern, name)
                m.d.comb += (a.eq(b) if kern.signature.members[name].flow == wiring.Out else b.eq(a))

        # ---- in: each run's header beat sniffed on its way into the row unit; a group's slice-0 header tagged
        tile_bits = max(1, (lo.slots * lo.max_seq // lo.rows - 1).bit_length())
        row_log = lo.rows.bit_length() - 1  # rows: a power of two
        grp_bits = max(1, row_log - 2)
        m.submodules.tags = tags = SyncFIFOBuffered(width=self.slot_bits + 1 + tile_bits + grp_bits, depth=self.tags)
        header = Signal(init=1)  # the next beat is a run's header
        hdr = self.s_axis_tdata
        seq, token = field("site", "seq").bits_of(hdr), field("site", "token").bits_of(hdr)
        tagged = header & (field("site", "slice").bits_of(hdr) == 0)
        slot, turn = slot_turn(seq, lo.slots, self.slot_bits)
        tiles = lo.max_seq // lo.rows
        m.d.comb += [tags.w_data.eq(Cat(slot, turn,
                                        (slot * tiles + (token >> row_log))[:tile_bits],
                                        (token >> 2)[:grp_bits] if row_log > 2 else Const(0, 1))),
                     rows.s_axis_tdata.eq(self.s_axis_tdata), rows.s_axis_tlast.eq(self.s_axis_tlast),
                     rows.s_axis_tvalid.eq(self.s_axis_tvalid & (~tagged | tags.w_rdy)),
                     self.s_axis_tready.eq(rows.s_axis_tready & (~tagged | tags.w_rdy)),
                     tags.w_en.eq(self.s_axis_tvalid & self.s_axis_tready & tagged)]
        with m.If(self.s_axis_tvalid & self.s_axis_tready):
            m.d.sync += header.eq(self.s_axis_tlast)

        # ---- the row unit's token rows through the BHyT unit
        m.d.comb += [kern.s_axis_tdata.eq(rows.m_axis_tdata), kern.s_axis_tlast.eq(rows.m_axis_tlast),
                     kern.s_axis_tvalid.eq(rows.m_axis_tvalid), rows.m_axis_tready.eq(kern.s_axis_tready)]

        # ---- out: U rows addressed from the head tag; row i of the group, K-slice j, block f of the slice
        t_slot = tags.r_data[:self.slot_bits]
        t_turn = tags.r_data[self.slot_bits]
        t_tile = tags.r_data[self.slot_bits + 1:self.slot_bits + 1 + tile_bits]
        t_grp = tags.r_data[self.slot_bits + 1 + tile_bits:]
        n_j = len(lo.slices)
        i = Signal(2)
        j = Signal(range(max(n_j, 2)))
        f = Signal(range(max(lo.slices) // 16))
        addr = Signal(self.addr_bits)
        terms = Array(lo.region_first(jj) + t_tile * lo.block_beats(jj) + t_grp * (lo.slices[jj] // 16) * 4
                      for jj in range(n_j))
        m.d.comb += addr.eq(terms[j] + f * 4 + i)
        last_f = Signal()
        m.d.comb += last_f.eq(Array(Const(k // 16 - 1) for k in lo.slices)[j] == f)
        row_end = last_f & (j == n_j - 1)
        m.d.comb += [self.m_axis_tdata.eq(kern.m_axis_tdata), self.m_axis_tuser.eq(Cat(addr, t_slot, t_turn)),
                     self.m_axis_tlast.eq(row_end), self.m_axis_tvalid.eq(kern.m_axis_tvalid & tags.r_rdy),
                     kern.m_axis_tready.eq(self.m_axis_tready & tags.r_rdy)]
        with m.If(self.m_axis_tvalid & self.m_axis_tready):
            with m.If(row_end):
                m.d.sync += [j.eq(0), f.eq(0), i.eq(i + 1)]
                with m.If(i == 3):
                    m.d.comb += tags.r_en.eq(1)
            with m.Elif(last_f):
                m.d.sync += [j.eq(j + 1), f.eq(0)]
            with m.Else():
                m.d.sync += f.eq(f + 1)
        return m

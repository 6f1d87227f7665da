"""A residual path of the sublayer's PL top (``hw/ENGINE.md``, "The residual path"): one W_O output PLIO's records
and the X rows beside them in, R records out for the R writer (``hw/hls/s2mm_records.cpp``).

In: ``s_axis_y``, the W_O cascade's records as its last kernel sends them: a GRESULT header beat
(``hw/spec/streams.py``: ``tile_id``, ``rows``, ``col_block``, ``elem_bits`` = 32, ``cols``), then ``tile_rows ×
cols`` int32 row-major, 4 a beat (the padding rows included; TLAST is not read: the record's length is the build's);
``s_axis_x``, X over the same rows and channels, ``lanes`` int8 a beat, TLAST at each row's end (the residual
reader's row unit, :mod:`.x_rows`).

Out: ``m_axis_r``, per record its header with ``elem_bits`` 8, then ``tile_rows × cols`` int8 row-major R, 16 a
beat, TLAST on the record's last beat: the R writer's record.

Between them, the residual unit (:class:`.residual.ResidualKernel`, its registers on ``s_axil``): each row of a
record is a token whose TUSER is ``col_block · cols / lanes`` (its first channel, in beats), so the unit's per-channel
tables are indexed from the record's channels. A record whose ``cols`` is not the build's, or whose ``elem_bits``
is not 32, cannot be read right: its payload and its rows of X are dropped (the build's length), its header goes out
alone and unchanged (``elem_bits`` 32: the R writer refuses it) and the sticky ``bad_record`` is set.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from vckattn.golden.sublayer import SUBLAYER_FORMAT, SublayerFormat
from vckattn.hw.spec.streams import field

from .axil import axil_members
from .pipeline import axis_port
from .residual import ResidualKernel

__all__ = ["ResidualPath"]

BEAT_BITS = 128
#: int32 accumulators a Y beat (a 128-bit PLIO beat)
Y_PER_BEAT = 4


class ResidualPath(wiring.Component):
    """W_O records and X rows in, R records out (module docstring).

    Ports: ``s_axis_y_*`` (128 bits), ``s_axis_x_*`` (``lanes · 8`` bits, TLAST a row), ``m_axis_r_*`` (128 bits,
    TLAST a record), ``bad_record`` (sticky), the residual unit's ``s_axil_*``; ``clk``, ``rst``.

    Args:
        tile_rows: Rows of a W_O record (the cascade's tile rows, padding included).
        cols: Channels of a W_O record (a multiple of 16).
        max_d: Channels of the residual unit's tables (d_model or more).
        fmt: The sublayer's formats.
    """

    LANES = Y_PER_BEAT

    def __init__(self, tile_rows: int, cols: int, max_d: int = 1024, fmt: SublayerFormat = SUBLAYER_FORMAT) -> None:
        if tile_rows < 1 or cols < 16 or cols % 16 or max_d < cols or max_d % self.LANES:
            raise ValueError(f"records of {tile_rows} x {cols}: rows >= 1, cols a multiple of 16, within max_d "
                             f"{max_d} (a multiple of {self.LANES})")
        self.tile_rows, self.cols, self.max_d = tile_rows, cols, max_d
        self.unit = ResidualKernel(self.LANES, max_d, fmt)
        self.regmap = self.unit.regmap
        super().__init__({
            **axis_port("s_axis_y", BEAT_BITS, sink=True),
            **axis_port("s_axis_x", self.LANES * fmt.act_bits, sink=True),
            **axis_port("m_axis_r", BEAT_BITS, sink=False),
            "bad_record": Out(1),
            **axil_members("s_axil", self.unit.regmap.addr_width),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.unit = unit = self.unit
        for name in self.unit.signature.members:  # the register port straight through
            if name.startswith("s_axil_"):
                a, b = getattr(self, name), getattr(unit, name)
                m.d.comb += (a.eq(b) if self.unit.signature.members[name].flow == wiring.Out else b.eq(a))

        row_beats = self.cols // Y_PER_BEAT  # Y beats (and residual tokens' beats) a row
        y_beats = self.tile_rows * row_beats
        out_beats = self.tile_rows * self.cols // 16
        f_bits, f_cols, f_block = field("gresult", "elem_bits"), field("gresult", "cols"), field("gresult", "col_block")

        header = Signal(BEAT_BITS)
        y_left = Signal(range(y_beats + 1))
        in_row = Signal(range(row_beats))
        base = Signal(unit.base_bits)
        bad = Signal()

        # X straight into the unit; its R (4 int8 a beat) packed 4 to a 128-bit beat
        m.d.comb += [unit.s_axis_res_tdata.eq(self.s_axis_x_tdata), unit.s_axis_res_tvalid.eq(self.s_axis_x_tvalid),
                     self.s_axis_x_tready.eq(unit.s_axis_res_tready)]
        pack = Signal(BEAT_BITS - 32)
        packed = Signal(range(4))
        out_left = Signal(range(out_beats + 1))

        with m.FSM():
            with m.State("HEADER"):
                m.d.comb += self.s_axis_y_tready.eq(1)
                with m.If(self.s_axis_y_tvalid):
                    hdr = self.s_axis_y_tdata
                    good = (f_bits.bits_of(hdr) == 32) & (f_cols.bits_of(hdr) == self.cols)
                    m.d.sync += [header.eq(hdr), bad.eq(~good), y_left.eq(y_beats), in_row.eq(0),
                                 base.eq(f_block.bits_of(hdr) * (self.cols // self.LANES)), out_left.eq(out_beats)]
                    with m.If(good):
                        m.d.sync += header[f_bits.bit:f_bits.bit + f_bits.width].eq(8)
                    with m.Else():
                        m.d.sync += self.bad_record.eq(1)
                    m.next = "SEND_HEADER"
            with m.State("SEND_HEADER"):
                m.d.comb += [self.m_axis_r_tdata.eq(header), self.m_axis_r_tvalid.eq(1),
                             self.m_axis_r_tlast.eq(bad)]
                with m.If(self.m_axis_r_tready):
                    m.next = "DROP"
                    with m.If(~bad):
                        m.next = "BODY"
            with m.State("BODY"):  # Y into the unit a row a token; R out packed
                m.d.comb += [unit.s_axis_tdata.eq(self.s_axis_y_tdata), unit.s_axis_tuser.eq(base),
                             unit.s_axis_tvalid.eq(self.s_axis_y_tvalid & (y_left != 0)),
                             unit.s_axis_tlast.eq(in_row == row_beats - 1),
                             self.s_axis_y_tready.eq(unit.s_axis_tready & (y_left != 0))]
                with m.If(self.s_axis_y_tvalid & self.s_axis_y_tready):
                    m.d.sync += [y_left.eq(y_left - 1), in_row.eq(Mux(in_row == row_beats - 1, 0, in_row + 1))]
                full = packed == 3
                m.d.comb += [self.m_axis_r_tdata.eq(Cat(pack, unit.m_axis_tdata)),
                             self.m_axis_r_tvalid.eq(unit.m_axis_tvalid & full),
                             self.m_axis_r_tlast.eq(out_left == 1),
                             unit.m_axis_tready.eq(~full | self.m_axis_r_tready)]
                with m.If(unit.m_axis_tvalid & unit.m_axis_tready):
                    m.d.sync += packed.eq(packed + 1)
                    for k in range(3):
                        with m.If(packed == k):
                            m.d.sync += pack[32 * k:32 * (k + 1)].eq(unit.m_axis_tdata)
                    with m.If(full):
                        m.d.sync += [packed.eq(0), out_left.eq(out_left - 1)]
                        with m.If(out_left == 1):
                            m.next = "HEADER"
            with m.State("DROP"):  # a record it cannot read: its Y and its rows of X out of the way, together
                m.d.comb += [unit.s_axis_res_tvalid.eq(0), self.s_axis_y_tready.eq(self.s_axis_x_tvalid),
                             self.s_axis_x_tready.eq(self.s_axis_y_tvalid)]
                with m.If(self.s_axis_y_tvalid & self.s_axis_x_tvalid):
                    m.d.sync += y_left.eq(y_left - 1)
                    with m.If(y_left == 1):
                        m.next = "HEADER"
        return m


"""RoPE on a Q/K/V GEMM cascade's output records: the Q and K channels of each record rotated at their rows'
positions, the V channels and the headers passed through (``hw/ENGINE.md``, "The sublayer's PL side"; the
records feed the Q/K/V re-tiler, :mod:`.retiler`).

A record (``hw/spec/streams.py`` GRESULT): one 128-bit header beat (``tile_id = b · T + r``: sequence ``b``, row
tile ``r`` of ``T = max_seq / rows``; ``col_block``: the record's channels ``[col_block · cols, (col_block + 1) ·
cols)`` of the fused Q/K/V output, whose channels are the Q heads, then the K heads, then V), then ``rows × cols``
int8 row-major, ``cols / 16`` beats a row (byte ``i`` of a beat = element ``i``, little-endian in TDATA); TLAST on
its last beat. The unit reads ``tile_id`` and ``col_block`` with :func:`vckattn.hw.spec.streams.field`; the
header's other fields are not read, and the record's length is the build's ``rows × cols / 16`` beats (the
framing is trusted: ``s_axis_tlast`` is not read, ``m_axis_tlast`` marks the counted last beat of each record).

* The header goes out unchanged (TLAST 0), after the previous record's last beat.
* A record of rotated channels (``col_block · cols < rotated``: the Q and K heads): each row is ``cols / head_dim``
  head rows of ``head_dim`` int8, each rotated by rotate-half RoPE at the position

  ``p = (tile_id mod T) · rows + i``  (``i``: the row within the record, ``0 .. rows - 1``)

  bit-exactly :func:`vckattn.golden.rope_int.rope_int` with the tables' row ``p``, by one
  :class:`~vckattn.hw.pl.rope.RopeKernel` ``(lanes, head_dim, max_pos = max_seq)``: each 128-bit beat is cut into
  ``16 / lanes`` kernel beats (lane ``j`` of kernel beat ``q`` = byte ``q · lanes + j``) carrying ``p`` on the
  kernel's TUSER, and the kernel's output beats are packed back into 128-bit beats in the same order.
* A record of V channels (``col_block · cols >= rotated``) passes through unchanged.

Records and beats leave in the order they came; the output follows the records one at a time (header, then the
payload from the kernel or from the pass-through buffer), so a pass-through record waits behind a rotated one still
in the kernel, and the input stalls once the two-beat pass-through buffer is full.

Registers: the kernel's AXI4-Lite block is the unit's ``s_axil_*``, the same map,
:func:`vckattn.golden.rope_int.rope_regmap` ``(lanes, head_dim, max_seq)`` (``self.regmap``): the cos/sin table
banks (:func:`~vckattn.golden.rope_int.rope_table_banks`), ``pos_base`` (added to every position: leave it 0 for
the formula above), the ``rows`` and ``pos_overflow`` counters (in head rows). Write the tables while no record is
in flight.

Throughput: a rotated record's payload at one kernel beat (``lanes`` int8) a cycle when neither side stalls, i.e. a
128-bit beat every ``16 / lanes`` cycles in and out; header and pass-through beats one a cycle; one cycle of a
record's header on the input. A rotated record's first payload beat leaves ``head_dim / lanes +
RopeKernel.LATENCY + 2`` cycles after its input handshake (the kernel's row latency, then one cycle to pack).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring

from vckattn.golden.rope_int import check_rope_geometry, rope_pos_bits, rope_regmap
from vckattn.hw.spec.streams import field

from .axil import axil_members
from .pipeline import axis_port
from .rope import IN_WIDTH, RopeKernel
from .stream import SkidBuffer

__all__ = ["RopeRecords", "check_records_geometry"]

BEAT_BITS = 128
BEAT_BYTES = BEAT_BITS // 8


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def check_records_geometry(rows: int, cols: int, head_dim: int, rotated: int, max_seq: int, lanes: int) -> None:
    """ValueError, naming the rule, unless: ``lanes`` a power of two dividing 16 and ``head_dim`` a positive
    multiple of ``2 · lanes`` (:func:`~vckattn.golden.rope_int.check_rope_geometry`); ``max_seq`` a power of two;
    ``rows`` a power of two, at most ``max_seq``; ``cols`` a positive multiple of 16 and of ``head_dim``;
    ``rotated`` a multiple of ``cols`` (>= 0)."""
    if not _pow2(lanes) or lanes > BEAT_BYTES:
        raise ValueError(f"lanes {lanes} must be a power of two dividing {BEAT_BYTES}")
    if not _pow2(max_seq):
        raise ValueError(f"max_seq {max_seq} must be a power of two (positions are log2(max_seq)-bit indices)")
    check_rope_geometry(lanes, head_dim, max_seq)
    if not _pow2(rows) or rows > max_seq:
        raise ValueError(f"rows {rows} must be a power of two, at most max_seq = {max_seq}")
    if cols < BEAT_BYTES or cols % BEAT_BYTES:
        raise ValueError(f"cols {cols} must be a positive multiple of {BEAT_BYTES} (whole beats a row)")
    if cols % head_dim:
        raise ValueError(f"cols {cols} must be a multiple of head_dim {head_dim} (whole head rows a record row)")
    if rotated < 0 or rotated % cols:
        raise ValueError(f"rotated {rotated} must be a multiple of cols {cols} (a record is all rotated or all "
                         "passed through)")


class RopeRecords(wiring.Component):
    """GRESULT records in, the same records out with their Q and K channels rotated by RoPE (module docstring).

    Ports: ``s_axis_tdata[128]``, ``s_axis_tlast`` (not read), ``s_axis_tvalid``, ``s_axis_tready``;
    ``m_axis_tdata[128]``, ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; the AXI4-Lite slave
    ``s_axil_*`` of the :class:`~vckattn.hw.pl.rope.RopeKernel` (``regmap``); ``clk``, ``rst``.

    Args:
        rows: Rows of a record (the GEMM build's ROWS), a power of two at most ``max_seq``.
        cols: Channels of a record (COLS), a multiple of 16 and of ``head_dim``.
        head_dim: The head size ``D`` (a multiple of ``2 · lanes``).
        rotated: Channels rotated: ``(heads + kv_heads) · head_dim`` (Q then K); a multiple of ``cols``. Records
            of the channels from ``rotated`` on (V) pass through.
        max_seq: Positions of the table (a power of two); positions ``0 .. max_seq - 1``.
        lanes: The kernel's int8 a beat: a power of two dividing 16.
    """

    def __init__(self, rows: int = 16, cols: int = 64, head_dim: int = 64, rotated: int = 768, max_seq: int = 512,
                 lanes: int = 8) -> None:
        check_records_geometry(rows, cols, head_dim, rotated, max_seq, lanes)
        self.rows, self.cols, self.head_dim, self.rotated = rows, cols, head_dim, rotated
        self.max_seq, self.lanes = max_seq, lanes
        self.pos_bits = rope_pos_bits(max_seq)
        self.regmap = rope_regmap(lanes, head_dim, max_seq)
        super().__init__({
            **axis_port("s_axis", BEAT_BITS, sink=True),
            **axis_port("m_axis", BEAT_BITS, sink=False),
            **axil_members("s_axil", self.regmap.addr_width),
        })

    @property
    def record_beats(self) -> int:
        """Beats of a record: the header and ``rows · cols / 16`` payload beats."""
        return 1 + self.rows * self.cols // BEAT_BYTES

    def elaborate(self, platform: object) -> Module:
        m = Module()
        rows, nb = self.rows, self.cols // BEAT_BYTES  # nb: beats a record row
        k = BEAT_BYTES // self.lanes  # kernel beats a 128-bit beat
        kw = self.lanes * IN_WIDTH
        tiles = self.max_seq // rows
        tile_f, cb_f = field("gresult", "tile_id"), field("gresult", "col_block")

        m.submodules.kernel = kern = RopeKernel(self.lanes, self.head_dim, self.max_seq)
        for name, member in axil_members("s_axil", self.regmap.addr_width).items():
            mine, theirs = getattr(self, name), getattr(kern, name)
            m.d.comb += (theirs.eq(mine) if member.flow == wiring.In else mine.eq(theirs))
        # the pass-through buffer: headers (TDATA bit 128 = the record is rotated) and V beats (TLAST: the record's
        # last beat)
        m.submodules.direct = direct = SkidBuffer(BEAT_BITS + 1)

        # ---------------- input: headers and V beats to the buffer, Q/K beats cut into kernel beats
        rtile = Signal(range(max(tiles, 2)))
        sub = Signal(range(max(k, 2)))  # kernel beat within the 128-bit beat
        c = Signal(range(max(nb, 2)))  # beat within the record row
        r = Signal(range(max(rows, 2)))  # row within the record
        row_end, rec_end = Signal(), Signal()
        m.d.comb += [row_end.eq(c == nb - 1), rec_end.eq(row_end & (r == rows - 1))]
        tid = tile_f.bits_of(self.s_axis_tdata)
        rot_hdr = Signal()  # the header on s_axis is of a rotated record
        m.d.comb += rot_hdr.eq(cb_f.bits_of(self.s_axis_tdata) < self.rotated // self.cols)
        pos = Signal(self.pos_bits)
        m.d.comb += pos.eq(rtile * rows + r)

        def advance() -> None:  # one 128-bit payload beat taken: the next (c, r); HEADER after the record's last
            with m.If(row_end):
                m.d.sync += [c.eq(0), r.eq(r + 1)]
                with m.If(rec_end):
                    m.d.sync += r.eq(0)
                    m.next = "HEADER"
            with m.Else():
                m.d.sync += c.eq(c + 1)

        with m.FSM(name="input"):
            with m.State("HEADER"):
                m.d.comb += [direct.s_axis_tvalid.eq(self.s_axis_tvalid), self.s_axis_tready.eq(direct.s_axis_tready),
                             direct.s_axis_tdata.eq(Cat(self.s_axis_tdata, rot_hdr)), direct.s_axis_tlast.eq(0)]
                with m.If(self.s_axis_tvalid & direct.s_axis_tready):
                    m.d.sync += [rtile.eq(tid % tiles), c.eq(0), r.eq(0), sub.eq(0)]
                    with m.If(rot_hdr):
                        m.next = "ROTATE"
                    with m.Else():
                        m.next = "PASS"
            with m.State("PASS"):
                m.d.comb += [direct.s_axis_tvalid.eq(self.s_axis_tvalid), self.s_axis_tready.eq(direct.s_axis_tready),
                             direct.s_axis_tdata.eq(self.s_axis_tdata), direct.s_axis_tlast.eq(rec_end)]
                with m.If(self.s_axis_tvalid & direct.s_axis_tready):
                    advance()
            with m.State("ROTATE"):
                last_sub = sub == k - 1
                m.d.comb += [kern.s_axis_tvalid.eq(self.s_axis_tvalid),
                             kern.s_axis_tdata.eq(self.s_axis_tdata.word_select(sub, kw) if k > 1
                                                  else self.s_axis_tdata),
                             kern.s_axis_tuser.eq(pos), kern.s_axis_tlast.eq(rec_end & last_sub),
                             self.s_axis_tready.eq(kern.s_axis_tready & last_sub)]
                with m.If(self.s_axis_tvalid & kern.s_axis_tready):
                    with m.If(last_sub):
                        m.d.sync += sub.eq(0)
                        advance()
                    with m.Else():
                        m.d.sync += sub.eq(sub + 1)

        # ---------------- the kernel's beats packed into 128-bit beats
        parts = [Signal(kw, name=f"part{q}") for q in range(k - 1)]
        ps = Signal(range(max(k, 2)))
        out_data, out_last, out_valid, out_taken = Signal(BEAT_BITS), Signal(), Signal(), Signal()
        kfire, full_next = Signal(), Signal()
        m.d.comb += [
            full_next.eq(ps == k - 1),
            kern.m_axis_tready.eq(~full_next | ~out_valid | out_taken),
            kfire.eq(kern.m_axis_tvalid & kern.m_axis_tready),
        ]
        with m.If(out_taken):
            m.d.sync += out_valid.eq(0)
        with m.If(kfire):
            with m.If(full_next):
                m.d.sync += [out_data.eq(Cat(*parts, kern.m_axis_tdata)), out_last.eq(kern.m_axis_tlast),
                             out_valid.eq(1), ps.eq(0)]
            with m.Else():
                for q, part in enumerate(parts):
                    with m.If(ps == q):
                        m.d.sync += part.eq(kern.m_axis_tdata)
                m.d.sync += ps.eq(ps + 1)

        # ---------------- output: one record at a time, header first
        fire = Signal()
        m.d.comb += fire.eq(self.m_axis_tvalid & self.m_axis_tready)
        with m.FSM(name="output"):
            with m.State("HEADER"):
                m.d.comb += [self.m_axis_tvalid.eq(direct.m_axis_tvalid),
                             self.m_axis_tdata.eq(direct.m_axis_tdata[:BEAT_BITS]), self.m_axis_tlast.eq(0),
                             direct.m_axis_tready.eq(self.m_axis_tready)]
                with m.If(fire):
                    with m.If(direct.m_axis_tdata[BEAT_BITS]):
                        m.next = "ROTATED"
                    with m.Else():
                        m.next = "PASS"
            with m.State("PASS"):
                m.d.comb += [self.m_axis_tvalid.eq(direct.m_axis_tvalid),
                             self.m_axis_tdata.eq(direct.m_axis_tdata[:BEAT_BITS]),
                             self.m_axis_tlast.eq(direct.m_axis_tlast), direct.m_axis_tready.eq(self.m_axis_tready)]
                with m.If(fire & direct.m_axis_tlast):
                    m.next = "HEADER"
            with m.State("ROTATED"):
                m.d.comb += [self.m_axis_tvalid.eq(out_valid), self.m_axis_tdata.eq(out_data),
                             self.m_axis_tlast.eq(out_last), out_taken.eq(self.m_axis_tready & out_valid)]
                with m.If(fire & out_last):
                    m.next = "HEADER"
        return m

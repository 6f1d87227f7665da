"""The Q/K/V re-tiler: a Q/K/V GEMM cascade's output records in, the beats of the Q/K/V buffer out, each with its
address (``hw/ENGINE.md``, "The sublayer's PL side"; the buffer's layout: :mod:`vckattn.hw.spec.qkv_buffer`).

A record (``hw/spec/streams.py`` GRESULT): one header beat (``tile_id = b · T + r``: sequence ``b``, row tile
``r`` of ``T = max_seq / rows``; ``col_block``), then ``rows × cols`` int8 row-major, ``cols / 16`` beats a row;
TLAST on its last beat. The unit takes the record's rows eight at a time (``8 · cols / 16`` beats) and writes,
for each 16-channel column of them, eight beats:

* Q (channels of a query head): the eight rows' beats as they are, each at its place in its Q tile's A layout
  (a beat of the A layout is one row's 16 features);
* K: the 8 keys × 16 features transposed into the eight beats of Kᵀ's 16×8 block (beat ``m``: features ``2m``,
  ``2m + 1``, each over the 8 keys);
* V: the 8 keys × 16 features as two 8×8 blocks of V's B layout (beat ``m``: keys ``2(m % 4)``, ``2(m % 4) + 1``,
  each over the 8 features ``8(m // 4) ..``).

``m_axis_tuser`` is the beat's address in the buffer, its sequence's slot and its turn in the slot on top
(``(b / slots) mod 2``; :func:`.slot_buffer.write_user`), ``m_axis_tlast`` marks a record's last write. The unit
takes eight rows, then writes them (``16 · cols / 16`` cycles for 8 rows at one beat a cycle each way): half a
beat a cycle on average, against the ~0.15 of a Q/K/V cascade's output PLIO.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring

from vckattn.hw.spec.qkv_buffer import QkvLayout
from vckattn.hw.spec.streams import field

from .pipeline import axis_port

__all__ = ["QkvRetiler"]

BEAT_BITS = 128
#: rows transposed together (8 keys: a 16x8 block of K^T, two 8x8 blocks of V)
GROUP = 8


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class QkvRetiler(wiring.Component):
    """Q/K/V GEMM records in, addressed Q/K/V buffer beats out (module docstring).

    Ports: ``s_axis_tdata[128]``, ``s_axis_tlast``, ``s_axis_tvalid``, ``s_axis_tready``; ``m_axis_tdata[128]``,
    ``m_axis_tuser[addr_bits + slot_bits + 1]`` (the beat's address, slot and turn), ``m_axis_tlast``,
    ``m_axis_tvalid``, ``m_axis_tready``;
    ``clk``, ``rst``.

    Args:
        layout: The Q/K/V buffer (:class:`~vckattn.hw.spec.qkv_buffer.QkvLayout`); ``d``, ``slots`` and
            ``max_seq / rows`` powers of two, ``q_rows`` and ``slice_keys`` multiples of 8.
        rows: Rows of a record (the GEMM build's ROWS, a multiple of 8).
        cols: Channels of a record (COLS, a multiple of 16).
    """

    def __init__(self, layout: QkvLayout, rows: int, cols: int) -> None:
        if rows < GROUP or rows % GROUP or cols < 16 or cols % 16 or layout.qkv_cols % cols:
            raise ValueError(f"records of {rows} x {cols}: rows a multiple of 8, cols of 16 dividing "
                             f"{layout.qkv_cols}")
        if layout.max_seq % rows or not _pow2(layout.max_seq // rows) or not _pow2(layout.slots) \
                or not _pow2(layout.d):
            raise ValueError("max_seq / rows, slots and d must be powers of two")
        if layout.q_rows % GROUP or layout.slice_keys % GROUP:
            raise ValueError("q_rows and slice_keys must be multiples of 8")
        self.layout, self.rows, self.cols = layout, rows, cols
        self.addr_bits = max(1, (layout.beats - 1).bit_length())
        self.slot_bits = max(1, (layout.slots - 1).bit_length())
        super().__init__({
            **axis_port("s_axis", BEAT_BITS, sink=True),
            **axis_port("m_axis", BEAT_BITS, sink=False, user_width=self.addr_bits + self.slot_bits + 1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        lo, rows, cols = self.layout, self.rows, self.cols
        nb = cols // 16  # beats a row
        tiles = lo.max_seq // rows
        d_beats = lo.d // 16

        buf = Array(Signal(BEAT_BITS, name=f"row{i // nb}_c{i % nb}") for i in range(GROUP * nb))
        fill = Signal(range(GROUP * nb + 1))
        slot = Signal(range(max(lo.slots, 2)))
        turn = Signal()  # the sequence's turn in its slot, (b / slots) mod 2 (hw/pl/slot_buffer.py)
        rtile = Signal(range(max(tiles, 2)))
        col_block = Signal(16)
        group = Signal(range(rows // GROUP + 1))
        c = Signal(range(nb + 1))
        mm = Signal(range(GROUP))
        tile_f, cb_f = field("gresult", "tile_id"), field("gresult", "col_block")

        # ---- the output beat (c, mm) of the held group: its rows, its kind, its address
        sel = [buf[k * nb + c] for k in range(GROUP)]  # the column's 8 row beats
        col = Signal(range(lo.qkv_cols + cols))
        m.d.comb += col.eq(col_block * cols + c * 16)
        q_end, k_end = lo.heads * lo.d, (lo.heads + lo.kv_heads) * lo.d
        is_q, is_k = col < q_end, (col >= q_end) & (col < k_end)
        rel = Signal.like(col)  # the channel within Q, K or V
        m.d.comb += rel.eq(Mux(is_q, col, Mux(is_k, col - q_end, col - k_end)))
        head = rel >> (lo.d.bit_length() - 1)
        db = (rel & (lo.d - 1)) >> 4  # the 16-feature block within the head
        r0 = Signal(range(lo.max_seq))  # the group's first row (key) within its sequence
        m.d.comb += r0.eq(rtile * rows + group * GROUP)
        base = Signal(self.addr_bits)
        # the sequence's place within a head's block (QkvLayout.place): the slot's low bits, the bank it is dealt
        # to, on top
        lo_bits = (lo.interleave - 1).bit_length()
        hi_bits = (lo.slots - 1).bit_length() - lo_bits
        place = Cat(slot[lo_bits:lo_bits + hi_bits], slot[:lo_bits]) if lo_bits and hi_bits else slot
        m.d.comb += base.eq(place * lo.head_beats)

        q_row = r0 + mm
        q_addr = (base + head * lo.head_stride + (q_row // lo.q_rows) * lo.tile_beats
                  + (((q_row % lo.q_rows) >> 2) * d_beats + db) * 4 + (q_row & 3))
        s_idx, jb = r0 // lo.slice_keys, (r0 % lo.slice_keys) >> 3
        kv_off = head * lo.head_stride + s_idx * lo.slice_beats
        k_addr = base + lo.k_base + kv_off + (jb * d_beats + db) * GROUP + mm
        eb = (db << 1) + (mm >> 2)  # V: the 8-feature block of the beat
        v_addr = base + lo.v_base + kv_off + (eb * (lo.slice_keys // 8) + jb) * 4 + (mm & 3)

        rows_sel = Array(sel)
        q_data, k_data, v_data = [], [], []
        for n in range(16):  # byte n of the output beat mm
            q_data.append(rows_sel[mm].word_select(n, 8))
            k_data.append(Array(sel[n % 8].word_select(2 * x + n // 8, 8) for x in range(GROUP))[mm])
            v_data.append(Array(sel[2 * (x % 4) + n // 8].word_select(8 * (x // 4) + n % 8, 8)
                                for x in range(GROUP))[mm])

        out_data, out_addr = Signal(BEAT_BITS), Signal(self.addr_bits)
        with m.If(is_q):
            m.d.comb += [out_data.eq(Cat(*q_data)), out_addr.eq(q_addr)]
        with m.Elif(is_k):
            m.d.comb += [out_data.eq(Cat(*k_data)), out_addr.eq(k_addr)]
        with m.Else():
            m.d.comb += [out_data.eq(Cat(*v_data)), out_addr.eq(v_addr)]
        last_group = group == rows // GROUP - 1
        last_beat = (c == nb - 1) & (mm == GROUP - 1)

        with m.FSM():
            with m.State("HEADER"):
                m.d.comb += self.s_axis_tready.eq(1)
                with m.If(self.s_axis_tvalid):
                    tid = tile_f.bits_of(self.s_axis_tdata)
                    m.d.sync += [rtile.eq(tid % tiles), slot.eq((tid // tiles) % lo.slots),
                                 turn.eq((tid // tiles // lo.slots) & 1),
                                 col_block.eq(cb_f.bits_of(self.s_axis_tdata)), group.eq(0), fill.eq(0)]
                    m.next = "FILL"
            with m.State("FILL"):
                m.d.comb += self.s_axis_tready.eq(1)
                with m.If(self.s_axis_tvalid):
                    m.d.sync += [buf[fill].eq(self.s_axis_tdata), fill.eq(fill + 1)]
                    with m.If(fill == GROUP * nb - 1):
                        m.d.sync += [c.eq(0), mm.eq(0)]
                        m.next = "EMIT"
            with m.State("EMIT"):
                m.d.comb += [self.m_axis_tvalid.eq(1), self.m_axis_tdata.eq(out_data),
                             self.m_axis_tuser.eq(Cat(out_addr, slot, turn)),
                             self.m_axis_tlast.eq(last_group & last_beat)]
                with m.If(self.m_axis_tready):
                    m.d.sync += mm.eq(mm + 1)
                    with m.If(mm == GROUP - 1):
                        m.d.sync += c.eq(c + 1)
                    with m.If(last_beat):
                        m.d.sync += [fill.eq(0), group.eq(group + 1)]
                        m.next = "NEXT"
            with m.State("NEXT"):
                with m.If(group == rows // GROUP):
                    m.next = "HEADER"
                with m.Else():
                    m.next = "FILL"
        return m

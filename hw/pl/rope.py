"""RoPE unit: int8 Q or K rows in, rotated int8 rows out, ``lanes`` elements per cycle.

The full description: ``docs/internals/hw.md``, section ``hw/pl/rope.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import memory, wiring

from vckattn.golden.rope_int import ROPE_FRAC, check_rope_geometry, rope_pos_bits, rope_regmap

from .axil import RegisterFile, axil_members
from .pipeline import StallPipeline, axis_port
from .requant import saturate
from .stream import Slot

__all__ = ["RopeKernel", "buffer_bits"]

IN_WIDTH = 8


def buffer_bits(lanes: int = 4, head_dim: int = 64, max_pos: int = 256) -> int:
    """Row-buffer bits: two ping-pong rows of ``head_dim`` int8 elements (and a TLAST bit a beat); the table
    (``max_pos · head_dim/2 · 32`` bits) is a register memory, not counted here."""
    check_rope_geometry(lanes, head_dim, max_pos)
    return 2 * (head_dim * IN_WIDTH + head_dim // lanes)


class RopeKernel(wiring.Component):
    """Rotate-half RoPE on int8 rows by int16 Q1.14 tables at each row's position; II = 1 beat.

    Ports: ``s_axis_tdata[lanes*8]``, ``s_axis_tuser[log2 max_pos]`` (position), ``s_axis_tlast``,
    ``s_axis_tvalid``, ``s_axis_tready``; ``m_axis_tdata[lanes*8]``, ``m_axis_tlast``, ``m_axis_tvalid``,
    ``m_axis_tready``; the AXI4-Lite slave ``s_axil_*``; ``clk``, ``rst``. See the module docstring.

    Args:
        lanes: Elements per beat (>= 1).
        head_dim: Row length ``D``; a multiple of ``2·lanes``.
        max_pos: Positions of the table; a power of two.
    """

    LATENCY = 4  # stage registers after the issue; issue-to-output handshake latency is LATENCY + 1

    def __init__(self, lanes: int = 4, head_dim: int = 64, max_pos: int = 256) -> None:
        check_rope_geometry(lanes, head_dim, max_pos)
        self.lanes, self.head_dim, self.max_pos = lanes, head_dim, max_pos
        self.pos_bits = rope_pos_bits(max_pos)
        self.regmap = rope_regmap(lanes, head_dim, max_pos)
        self.regfile = RegisterFile(self.regmap)
        super().__init__({
            **axis_port("s_axis", lanes * IN_WIDTH, sink=True, user_width=self.pos_bits),
            **axis_port("m_axis", lanes * IN_WIDTH, sink=False),
            **axil_members("s_axil", self.regmap.addr_width),
        })
        self.pipe = StallPipeline(self.LATENCY, lanes * IN_WIDTH)

    def row_latency(self) -> int:
        """Cycles from a row's first input handshake to its first output handshake, beats back to back into an
        idle unit: ``head_dim/lanes + LATENCY + 1``."""
        return self.head_dim // self.lanes + self.LATENCY + 1

    def formal_slots(self) -> list[Slot]:
        """Beat places of the issue pipeline, oldest first (the row buffers are not slots)."""
        return self.pipe.formal_slots()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, nb = self.lanes, self.head_dim // self.lanes
        hb = nb // 2  # beats of half a row (frequencies of a position in one bank: hb)
        w = n * IN_WIDTH
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        reg = regs.reg
        m.submodules.pipe = pipe = self.pipe

        # ---- row memory: 2 buffers x nb beats of data; the beats' TLAST bits in flops (read at issue)
        rowmem = memory.Memory(shape=unsigned(w), depth=2 * nb, init=[])
        m.submodules.rowmem = rowmem
        wport = rowmem.write_port()
        rport = rowmem.read_port()  # the beat
        pport = rowmem.read_port()  # its partner (data only)

        full = Signal(2)
        last_bits = Signal(2 * nb)
        pos_buf = [Signal(self.pos_bits, name=f"pos_buf{k}") for k in range(2)]

        # ---------------- writer ----------------
        wsel = Signal()
        wb = Signal(range(nb))
        rows, overflow = Signal(32), Signal(32)
        m.d.comb += [reg["rows"].eq(rows), reg["pos_overflow"].eq(overflow)]
        in_ready, in_fire = Signal(), Signal()
        m.d.comb += [
            in_ready.eq(~full.bit_select(wsel, 1)),
            self.s_axis_tready.eq(in_ready),
            in_fire.eq(self.s_axis_tvalid & in_ready),
            wport.addr.eq(Mux(wsel, wb + nb, wb)),
            wport.data.eq(self.s_axis_tdata),
            wport.en.eq(in_fire),
        ]
        with m.If(in_fire):
            m.d.sync += last_bits.bit_select(Mux(wsel, wb + nb, wb), 1).eq(self.s_axis_tlast)
        pos_sum = Signal(self.pos_bits + 1)
        m.d.comb += pos_sum.eq(self.s_axis_tuser + reg["pos_base"])
        row_end = Signal()
        m.d.comb += row_end.eq(in_fire & (wb == nb - 1))
        with m.If(in_fire):
            with m.If(wb == 0):  # the row's position, from its first beat
                for k in range(2):
                    with m.If(wsel == k):
                        m.d.sync += pos_buf[k].eq(pos_sum[:self.pos_bits])
                with m.If(pos_sum[self.pos_bits]):
                    m.d.sync += overflow.eq(overflow + 1)
            with m.If(wb == nb - 1):
                m.d.sync += [wb.eq(0), wsel.eq(~wsel), rows.eq(rows + 1)]
            with m.Else():
                m.d.sync += wb.eq(wb + 1)

        # ---------------- reader: the pipeline's stage 0 ----------------
        rsel = Signal()
        rb = Signal(range(nb))
        base = Mux(rsel, nb, 0)
        m.d.comb += [pipe.in_valid.eq(full.bit_select(rsel, 1)), pipe.in_last.eq(last_bits.bit_select(base + rb, 1))]
        issue_end = Signal()
        m.d.comb += issue_end.eq(pipe.in_fire & (rb == nb - 1))
        with m.If(pipe.in_fire):
            with m.If(rb == nb - 1):
                m.d.sync += [rb.eq(0), rsel.eq(~rsel)]
            with m.Else():
                m.d.sync += rb.eq(rb + 1)
        for k in range(2):
            with m.If(row_end & (wsel == k)):
                m.d.sync += full[k].eq(1)
            with m.Elif(issue_end & (rsel == k)):
                m.d.sync += full[k].eq(0)

        first = Signal()  # the issued beat is in the row's first half
        m.d.comb += first.eq(rb < hb)
        fb = Signal(range(max(hb, 2)))  # frequency beat: b mod hb
        m.d.comb += fb.eq(Mux(first, rb, rb - hb))
        partner = Mux(first, rb + hb, rb - hb)
        m.d.comb += [rport.addr.eq(base + rb), rport.en.eq(pipe.ce),
                     pport.addr.eq(base + partner), pport.en.eq(pipe.ce)]
        pos = Mux(rsel, pos_buf[1], pos_buf[0])
        tab = []
        for i in range(n):
            port = regs.mem_read_port(f"table{i}", 0)
            m.d.comb += [port.addr.eq(pos * hb + fb), port.en.eq(pipe.ce)]
            tab.append(port.data)

        # stage 1: the reads
        first1 = pipe.reg(m, first, name="first1")
        outs = []
        # stage 2: products
        first2 = pipe.reg(m, first1, name="first2")
        for i in range(n):
            x = rport.data[i * IN_WIDTH:(i + 1) * IN_WIDTH].as_signed()
            xp = pport.data[i * IN_WIDTH:(i + 1) * IN_WIDTH].as_signed()
            c, s = tab[i][:16].as_signed(), tab[i][16:].as_signed()
            pc = pipe.reg(m, x * c, name=f"pc{i}")
            ps = pipe.reg(m, xp * s, name=f"ps{i}")
            acc = pipe.reg(m, Mux(first2, pc - ps, pc + ps), name=f"acc{i}")  # stage 3
            r = Signal(signed(len(acc) - ROPE_FRAC + 1), name=f"r{i}")
            m.d.comb += r.eq((acc + (1 << (ROPE_FRAC - 1))) >> ROPE_FRAC)
            outs.append(pipe.reg(m, saturate(m, r, IN_WIDTH, f"sat{i}"), name=f"y{i}"))  # stage 4
        m.d.comb += pipe.out_data.eq(Cat(*outs))
        m.d.comb += [
            self.m_axis_tvalid.eq(pipe.m_axis_tvalid),
            pipe.m_axis_tready.eq(self.m_axis_tready),
            self.m_axis_tdata.eq(pipe.m_axis_tdata),
            self.m_axis_tlast.eq(pipe.m_axis_tlast),
        ]
        return m

"""SwiftMax normalizer kernel: AXI4-Stream in/out, AXI4-Lite constants, ``lanes`` elements per cycle.

The full description: ``docs/internals/hw.md``, section ``hw/pl/swiftmax.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring

from vckattn.golden.swiftmax_int import SWIFTMAX_ID, SwiftMaxFormat, swiftmax_regmap

from .axil import RegisterFile, axil_members
from .pipeline import StallPipeline, axis_port
from .stream import Slot
from .swiftmax_lane import SwiftMaxLane

__all__ = ["SWIFTMAX_ID", "SwiftMaxKernel", "swiftmax_regmap", "buffer_bits"]

IN_WIDTH = 32


def buffer_bits(lanes: int) -> int:
    """Row/token buffer bits: none (element-wise)."""
    return 0


class SwiftMaxKernel(wiring.Component):
    """``lanes`` SwiftMax lanes behind one stall pipeline; see the module docstring."""

    def __init__(self, lanes: int = 4, fmt: SwiftMaxFormat = SwiftMaxFormat(), in_width: int = IN_WIDTH,
                 lut_product: bool | None = None) -> None:
        """``lut_product``: each lane's ``sat · a_mult`` from LUTs (True) or a DSP block (False); default
        :func:`~vckattn.hw.pl.swiftmax_lane.lut_product_default` (LUTs for scores of at most 8 bits).
        The same function either way."""
        if lanes < 1:
            raise ValueError("lanes must be >= 1")
        if in_width < 2:
            raise ValueError("in_width must be >= 2")
        self.lanes, self.fmt, self.in_width, self.lut_product = lanes, fmt, in_width, lut_product
        self.regmap = swiftmax_regmap(fmt)
        self.regfile = RegisterFile(self.regmap)
        self.LATENCY = SwiftMaxLane.LATENCY
        super().__init__({
            **axis_port("s_axis", lanes * in_width, sink=True, user_width=lanes + fmt.head_bits),
            **axis_port("m_axis", lanes * fmt.out_bits, sink=False, user_width=lanes),
            **axil_members("s_axil", self.regmap.addr_width),
        })
        self.pipe = StallPipeline(self.LATENCY, lanes * fmt.out_bits, user_width=lanes)

    def formal_slots(self) -> list[Slot]:
        """Beat places oldest first, for the formal proofs: the stall pipeline's."""
        return self.pipe.formal_slots()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, iw = self.lanes, self.in_width
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        m.submodules.pipe = pipe = self.pipe
        pipe.connect(m, self)

        # per-head constants: one read port per memory for every lane (one head per beat)
        hb = self.fmt.head_bits
        head_in = self.s_axis_tuser[n:n + hb]
        head_1 = Signal(max(hb, 1), name="head_1")  # the head of the beat in stage 1
        rp_b = regs.mem_read_port("b_beta", 0)
        rp_c = regs.mem_read_port("c_out", 0)
        m.d.comb += [rp_b.en.eq(pipe.ce), rp_c.en.eq(pipe.ce)]
        if hb:
            with m.If(pipe.ce):
                m.d.sync += head_1.eq(head_in)
            m.d.comb += [rp_b.addr.eq(head_in), rp_c.addr.eq(head_1[:hb])]

        outs = []
        for i in range(n):
            lane = SwiftMaxLane(self.fmt, iw, lut_product=self.lut_product)
            m.submodules[f"lane{i}"] = lane
            m.d.comb += [lane.en.eq(pipe.ce),
                         lane.acc.eq(self.s_axis_tdata[i * iw:(i + 1) * iw].as_signed()),
                         lane.keep.eq(self.s_axis_tuser[i] & self.s_axis_tvalid)]
            for r in self.regmap.writable:
                m.d.comb += getattr(lane, r.name).eq(regs.reg[r.name])
            m.d.comb += [lane.b_beta.eq(rp_b.data), lane.c_out.eq(rp_c.data)]
            outs.append(lane.p)
        m.d.comb += pipe.out_data.eq(Cat(*outs))

        # status counters
        elements, rows = Signal(32), Signal(32)
        kept = sum(self.s_axis_tuser[i] for i in range(n))
        with m.If(pipe.in_fire):
            m.d.sync += elements.eq(elements + kept)
            with m.If(self.s_axis_tlast):
                m.d.sync += rows.eq(rows + 1)
        m.d.comb += [regs.reg["elements"].eq(elements), regs.reg["rows"].eq(rows)]
        return m

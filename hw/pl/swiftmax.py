"""SwiftMax normalizer kernel: AXI4-Stream in/out, AXI4-Lite constants, ``lanes`` elements per cycle.

Golden model: :func:`vckattn.golden.swiftmax_int.swiftmax_int` (bit for bit). Register
values come from :func:`vckattn.golden.swiftmax_int.swiftmax_registers`.

Element-wise and reduction-free: no row buffer, no row state; the only storage is the
pipeline (:class:`~vckattn.hw.pl.swiftmax_lane.SwiftMaxLane`, 6 stages) and the 2-beat
output skid buffer. Each lane computes ``p = 2^(clamp(A·acc − β·log2e) − log2 γ + out_frac)``
with one multiply, adds/clamps, a 64-entry 2^f table with linear interpolation and a shift. Scores
narrower than ``acc_bits`` need no saturation; with ``in_width <= 8`` (int8 scores) the lane uses no DSP
block (the multiply from LUTs), otherwise one DSP multiply per lane (two DSP48E2 for 24-bit scores); the
2^f interpolation is always in LUTs (:class:`~vckattn.hw.pl.swiftmax_lane.SwiftMaxLane`).

Streams (the project's framing contract, :mod:`vckattn.sim.kernel_tb`):

* ``s_axis``: TDATA = ``lanes`` signed ``in_width``-bit scores (QKᵀ accumulators from the AIE;
  ``in_width`` = 32 by default, narrower builds for int8/int16 scores), lane i in bits
  ``[in_width·i, in_width·(i + 1))``; the lane saturates them to ``acc_bits`` = 24 (a score of
  at most 24 bits never saturates); TUSER (``lanes + fmt.head_bits`` bits): bit i = keep flag of lane i
  (0 = masked: padding, causal mask, or the padding of a short last beat), bits
  ``[lanes, lanes + head_bits)`` = the head index ``h`` of the beat's scores (every lane of a beat belongs
  to one head; the head may change on any beat, also inside a row); TLAST = last beat of a score row.
* ``m_axis``: TDATA = ``lanes`` unsigned 8-bit P (scale ``2^-out_frac``), masked lanes exactly 0;
  TUSER = the input keep bits (``lanes`` bits, no head); TLAST = the input TLAST. Rows pass through unchanged in
  length and order (a row is only framing here: nothing is computed across it).

Throughput ``lanes`` elements per cycle (1 beat/cycle) whenever the sink is ready; latency
7 cycles from input to output handshake (6 stages + skid buffer).

Registers (AXI4-Lite, 32-bit words): declared once, by
:func:`vckattn.golden.swiftmax_int.swiftmax_regmap` (names, widths, signedness, offsets, meanings;
the manifests record the table). Each writable register (shared by every head) feeds the lane input of
the same name; ``elements`` and ``rows`` are
read-only status counters. The per-head constants are the memories ``b_beta`` and ``c_out``
(``fmt.max_heads`` entries each, entry ``h`` for the scores of head ``h``), one kernel read port each,
shared by the lanes (a beat has one head): the ``b_beta`` port is addressed with the input beat's head in
the cycle the beat enters the pipeline (enabled by the pipeline's clock enable), so its data arrives with
the stage-1 product and feeds every lane's stage 2; the head is delayed one enabled stage and addresses
the ``c_out`` port, whose data feeds stage 3. Both read ports are enabled only by the clock enable, so
their data holds through stalls. A memory entry written while scores of its head are in flight may
affect them (write the constants between layers, as every register).

The 2^f table is a ROM holding :meth:`Pow2Config.table` (a pure function, the same for
every layer and model); per-layer state is only the registers and the two memories, so one
bitstream serves every layer of every model.
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

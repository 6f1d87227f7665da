"""SwiftMax normalizer kernel: AXI4-Stream in/out, AXI4-Lite constants, ``lanes`` elements per cycle.

Golden model: :func:`vckattn.golden.swiftmax_int.swiftmax_int` (bit for bit). Register
values come from :func:`vckattn.golden.swiftmax_int.swiftmax_registers`.

Element-wise and reduction-free: no row buffer, no row state; the only storage is the
pipeline (:class:`~vckattn.hw.pl.swiftmax_lane.SwiftMaxLane`, 6 stages) and the 2-beat
output skid buffer. Each lane computes ``p = 2^(clamp(A·acc − β·log2e) − log2 γ + out_frac)``
with one multiply, adds/clamps, a 64-entry 2^f table with linear interpolation and a shift.

Streams (the project's framing contract, :mod:`vckattn.sim.kernel_tb`):

* ``s_axis``: TDATA = ``lanes`` signed 32-bit scores (QKᵀ accumulators from the AIE), lane i
  in bits ``[32 i, 32 i + 32)``; TUSER bit i = keep flag of lane i (0 = masked: padding,
  causal mask, or the padding of a short last beat); TLAST = last beat of a score row.
* ``m_axis``: TDATA = ``lanes`` unsigned 8-bit P (scale ``2^-out_frac``), masked lanes exactly 0;
  TUSER = the input keep bits; TLAST = the input TLAST. Rows pass through unchanged in
  length and order (a row is only framing here: nothing is computed across it).

Throughput ``lanes`` elements per cycle (1 beat/cycle) whenever the sink is ready; latency
7 cycles from input to output handshake (6 stages + skid buffer). Registers (AXI4-Lite,
32-bit words; offsets from :func:`swiftmax_regmap`, also listed by ``describe()``):

=========  ======  ===========================================================
register   type    meaning (all Q.t_frac values are log2-domain, t_frac = 12)
=========  ======  ===========================================================
ID         ro      ``0x5F1F7A01``
VERSION    ro      1
a_mult     s24     ``A·2^t_frac ≈ a_mult·2^-a_shift``, A = s_q s_k log2(e)/sqrt(d)
a_shift    u6      right shift of the score product (round half up)
b_beta     s24     ``−β·log2e`` in Q.12
u_lo       s24     clamp low ``−10·log2e`` in Q.12 (the float operator's clamp)
u_hi       s24     clamp high ``40·log2e`` in Q.12
c_out      s24     ``out_frac − log2 γ`` in Q.12
elements   ro u32  kept elements processed since reset (status)
rows       ro u32  rows (TLAST beats) processed since reset (status)
=========  ======  ===========================================================

The 2^f table is a ROM holding :meth:`Pow2Config.table` (a pure function, the same for
every layer and model); per-layer state is only the six constants above, so one bitstream
serves every layer of every model.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring

from vckattn.golden.swiftmax_int import SwiftMaxFormat

from .axil import Reg, RegisterFile, RegisterMap, axil_members
from .pipeline import StallPipeline, axis_port
from .swiftmax_lane import SwiftMaxLane

__all__ = ["SWIFTMAX_ID", "SwiftMaxKernel", "swiftmax_regmap", "buffer_bits"]

SWIFTMAX_ID = 0x5F1F7A01
IN_WIDTH = 32


def swiftmax_regmap(fmt: SwiftMaxFormat = SwiftMaxFormat()) -> RegisterMap:
    """The kernel's AXI4-Lite register map."""
    rb = fmt.reg_bits
    return RegisterMap(
        [
            Reg("a_mult", fmt.a_bits, signed=True, doc="A·2^t_frac ≈ a_mult·2^-a_shift"),
            Reg("a_shift", 6, doc="right shift of acc·a_mult (round half up)"),
            Reg("b_beta", rb, signed=True, doc="-beta·log2(e), Q.t_frac"),
            Reg("u_lo", rb, signed=True, doc="clamp low of (z - beta)·log2(e), Q.t_frac"),
            Reg("u_hi", rb, signed=True, doc="clamp high of (z - beta)·log2(e), Q.t_frac"),
            Reg("c_out", rb, signed=True, doc="out_frac - log2(gamma), Q.t_frac"),
            Reg("elements", 32, access="ro", doc="kept elements processed since reset"),
            Reg("rows", 32, access="ro", doc="rows (TLAST beats) processed since reset"),
        ],
        ident=SWIFTMAX_ID,
        version=1,
    )


def buffer_bits(lanes: int) -> int:
    """Row/token buffer bits: none (element-wise)."""
    return 0


class SwiftMaxKernel(wiring.Component):
    """``lanes`` SwiftMax lanes behind one stall pipeline; see the module docstring."""

    def __init__(self, lanes: int = 4, fmt: SwiftMaxFormat = SwiftMaxFormat()) -> None:
        if lanes < 1:
            raise ValueError("lanes must be >= 1")
        self.lanes, self.fmt = lanes, fmt
        self.regmap = swiftmax_regmap(fmt)
        self.regfile = RegisterFile(self.regmap)
        self.LATENCY = SwiftMaxLane.LATENCY
        super().__init__({
            **axis_port("s_axis", lanes * IN_WIDTH, sink=True, user_width=lanes),
            **axis_port("m_axis", lanes * fmt.out_bits, sink=False, user_width=lanes),
            **axil_members("s_axil", self.regmap.addr_width),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = self.lanes
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        m.submodules.pipe = pipe = StallPipeline(self.LATENCY, n * self.fmt.out_bits, user_width=n)
        pipe.connect(m, self)

        outs = []
        for i in range(n):
            lane = SwiftMaxLane(self.fmt, IN_WIDTH)
            m.submodules[f"lane{i}"] = lane
            m.d.comb += [lane.en.eq(pipe.ce),
                         lane.acc.eq(self.s_axis_tdata[i * IN_WIDTH:(i + 1) * IN_WIDTH].as_signed()),
                         lane.keep.eq(self.s_axis_tuser[i] & self.s_axis_tvalid)]
            for name in ("a_mult", "a_shift", "b_beta", "u_lo", "u_hi", "c_out"):
                m.d.comb += getattr(lane, name).eq(regs.reg[name])
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

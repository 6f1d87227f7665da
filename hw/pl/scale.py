"""ScaleKernel: a tiny demonstration kernel for the shared PL infrastructure.

The full description: ``docs/internals/hw.md``, section ``hw/pl/scale.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring

from vckattn.golden.scale_int import BIAS_DEPTH, scale_regmap

from .axil import RegisterFile, axil_members
from .pipeline import StallPipeline, axis_port
from .stream import Slot

__all__ = ["ScaleKernel"]

class ScaleKernel(wiring.Component):
    """Per-lane ``saturate(((x * a) >> s) + bias[col mod 16])`` with keep masks; II = 1 beat.

    Ports: ``s_axis_tdata[lanes*in_width]``, ``s_axis_tuser[lanes]``, ``s_axis_tlast``,
    ``s_axis_tvalid``, ``s_axis_tready``; ``m_axis_tdata[lanes*out_width]``,
    ``m_axis_tuser[lanes]``, ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; the
    AXI4-Lite slave ``s_axil_*``; ``clk``, ``rst``.

    Args:
        lanes: Elements per beat (>= 1).
        in_width: Signed input element width.
        out_width: Signed output element width (saturated).
    """

    LATENCY = 3  # stage registers; input-to-output handshake latency is LATENCY + 1

    def __init__(self, lanes: int = 1, in_width: int = 8, out_width: int = 16) -> None:
        if lanes < 1:
            raise ValueError("lanes must be >= 1")
        self.lanes, self.in_width, self.out_width = lanes, in_width, out_width
        self.regmap = scale_regmap(lanes)
        self.regfile = RegisterFile(self.regmap)
        super().__init__({
            **axis_port("s_axis", lanes * in_width, sink=True, user_width=lanes),
            **axis_port("m_axis", lanes * out_width, sink=False, user_width=lanes),
            **axil_members("s_axil", self.regmap.addr_width),
        })
        self.pipe = StallPipeline(self.LATENCY, lanes * out_width, user_width=lanes)

    def formal_slots(self) -> list[Slot]:
        """Beat places oldest first, for the formal proofs: the stall pipeline's."""
        return self.pipe.formal_slots()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, iw, ow = self.lanes, self.in_width, self.out_width
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        m.submodules.pipe = pipe = self.pipe
        pipe.connect(m, self)

        a, s = regs.reg["a"], regs.reg["s"]

        # Status: input frames accepted.
        frames = Signal(32)
        with m.If(pipe.in_fire & self.s_axis_tlast):
            m.d.sync += frames.eq(frames + 1)
        m.d.comb += regs.reg["frames"].eq(frames)

        # Column counter (mod 16) of lane 0 of the current input beat; restarts after TLAST.
        col = Signal(range(BIAS_DEPTH))
        with m.If(pipe.in_fire):
            m.d.sync += col.eq(Mux(self.s_axis_tlast, 0, (col + n)[: len(col)]))

        hi, lo = (1 << (ow - 1)) - 1, -(1 << (ow - 1))
        outs = []
        for i in range(n):
            x = self.s_axis_tdata[i * iw : (i + 1) * iw].as_signed()
            # stage 1: product, and the bias entry for column col + i (memory = 1 stage)
            p = pipe.reg(m, x * a, name=f"p{i}")
            port = regs.mem_read_port("bias", i)
            m.d.comb += [port.addr.eq((col + i)[: len(col)]), port.en.eq(pipe.ce)]
            # stage 2: arithmetic shift (p is signed) and bias
            t = pipe.reg(m, (p >> s) + port.data, name=f"t{i}")
            # stage 3: saturate, zero masked elements
            sat = Signal(signed(ow), name=f"sat{i}")
            with m.If(t > hi):
                m.d.comb += sat.eq(hi)
            with m.Elif(t < lo):
                m.d.comb += sat.eq(lo)
            with m.Else():
                m.d.comb += sat.eq(t)
            outs.append(pipe.reg(m, Mux(pipe.user[2][i], sat, 0), name=f"y{i}"))
        m.d.comb += pipe.out_data.eq(Cat(*outs))
        return m

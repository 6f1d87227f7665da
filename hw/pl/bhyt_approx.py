"""BHyT approximate-variance unit (site M, the MLP input): AXI4-Stream in/out, ``lanes`` elements per cycle.

The full description: ``docs/internals/hw.md``, section ``hw/pl/bhyt_approx.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring

from vckattn.golden.bhyt_int import NormFormat, bhyt_approx_regmap

from .axil import RegisterFile, axil_members
from .norm_lanes import BHyTLane, BHyTScaleUnit, bhyt_lanes, bhyt_scale
from .pipeline import StallPipeline, axis_port
from .stream import Slot

__all__ = ["BHyTApproxKernel", "buffer_bits"]

IN_WIDTH = 8


def buffer_bits(lanes: int = 4, max_d: int = 1024) -> int:
    """Token/row buffer bits of the unit: 0 (element-wise; only pipeline registers and the skid buffer)."""
    return 0


def _index_bits(max_d: int) -> int:
    return max(1, (max_d - 1).bit_length())


class BHyTApproxKernel(wiring.Component):
    """BHyT site M: ``sat8(γ ⊙ tanh(arg))`` from the forwarded statistic; II = 1 beat, no token buffer.

    Ports: ``s_axis_tdata[lanes*8]``, ``s_axis_tuser[stat_bits]`` (``S`` of the token, on every
    beat), ``s_axis_tlast``, ``s_axis_tvalid``, ``s_axis_tready``; ``m_axis_tdata[lanes*8]``,
    ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; AXI4-Lite slave ``s_axil_*``;
    ``clk``, ``rst``. See the module docstring.

    Args:
        lanes: Elements per beat (>= 1).
        max_d: Longest token (entries of ``γ``).
        fmt: Build-time number formats (the golden model's).
    """

    LATENCY = BHyTScaleUnit.LATENCY + BHyTLane.LATENCY  # stage registers; handshake latency LATENCY + 1

    def __init__(self, lanes: int = 4, max_d: int = 1024, fmt: NormFormat = NormFormat()) -> None:
        if lanes < 1 or max_d < 1:
            raise ValueError(f"lanes and max_d must be >= 1 (got {lanes}, {max_d})")
        self.lanes, self.max_d, self.fmt = lanes, max_d, fmt
        self.regmap = bhyt_approx_regmap(lanes, max_d, fmt)
        self.regfile = RegisterFile(self.regmap)
        super().__init__({
            **axis_port("s_axis", lanes * IN_WIDTH, sink=True, user_width=fmt.stat_bits),
            **axis_port("m_axis", lanes * fmt.out_bits, sink=False),
            **axil_members("s_axil", self.regmap.addr_width),
        })
        self.pipe = StallPipeline(self.LATENCY, lanes * fmt.out_bits)

    def formal_slots(self) -> list[Slot]:
        """Beat places oldest first, for the formal proofs: the stall pipeline's."""
        return self.pipe.formal_slots()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, fmt = self.lanes, self.fmt
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        m.submodules.pipe = pipe = self.pipe
        pipe.connect(m, self)
        reg = regs.reg

        # Status: tokens accepted.
        tokens = Signal(32)
        with m.If(pipe.in_fire & self.s_axis_tlast):
            m.d.sync += tokens.eq(tokens + 1)
        m.d.comb += reg["tokens"].eq(tokens)

        # Element index of lane 0 of the input beat; cleared after TLAST.
        col = Signal(unsigned(_index_bits(self.max_d)))
        with m.If(pipe.in_fire):
            m.d.sync += col.eq(Mux(self.s_axis_tlast, 0, col + n))

        # Stages 1..5: the token scale from S (TUSER of this very beat).
        scale = bhyt_scale(m, reg, pipe.ce, self.s_axis_tuser, fmt)
        s = BHyTScaleUnit.LATENCY
        q = self.s_axis_tdata
        for k in range(1, s + 1):
            q = pipe.reg(m, q, name=f"q{k}")
        idx = col
        for k in range(1, s):
            idx = pipe.reg(m, idx, name=f"idx{k}")

        # Stage 5: gamma read (address from stage 4); stages 6..10: the lanes.
        g = []
        for i in range(n):
            port = regs.mem_read_port("gamma", i)
            m.d.comb += [port.addr.eq(idx + i), port.en.eq(pipe.ce)]
            g.append(port.data)
        outs = bhyt_lanes(m, reg, pipe.ce, scale, q, g, fmt, IN_WIDTH)
        m.d.comb += pipe.out_data.eq(Cat(*outs))
        return m

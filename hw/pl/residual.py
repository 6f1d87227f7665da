"""Residual add: the W_O accumulators ``Y`` and the residual input ``X`` in, ``R = X + Y`` int8 out, ``lanes``
elements per cycle.

The full description: ``docs/internals/hw.md``, section ``hw/pl/residual.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import wiring

from vckattn.golden.sublayer import SUBLAYER_FORMAT, SublayerFormat, residual_regmap

from .axil import RegisterFile, axil_members
from .pipeline import StallPipeline, axis_port
from .requant import ACC_WIDTH, STAGES, channel_counter, requant_stages, saturate
from .stream import Slot

__all__ = ["ResidualKernel", "buffer_bits"]


def buffer_bits(lanes: int = 4, max_d: int = 1024) -> int:
    """Row buffer bits: none (element-wise)."""
    return 0


class ResidualKernel(wiring.Component):
    """``R = saturate8(round_half_up((y' + x') · 2^-res_frac))``, two joined input streams; II = 1 beat.

    Ports: ``s_axis_tdata[lanes*32]`` (Y), ``s_axis_tuser[base_bits]`` (the token's first channel in beats, read
    on its first beat: a token that is channels ``tuser·lanes ..`` of a row, as a W_O output record's rows are;
    0 for whole rows), ``s_axis_tlast``, ``s_axis_tvalid``, ``s_axis_tready``;
    ``s_axis_res_tdata[lanes*8]`` (X), ``s_axis_res_tlast``, ``s_axis_res_tvalid``, ``s_axis_res_tready``;
    ``m_axis_tdata[lanes*8]``, ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; the AXI4-Lite slave
    ``s_axil_*``; ``clk``, ``rst``. See the module docstring.

    Args:
        lanes: Elements per beat (>= 1).
        max_d: Channels of the ``rq_y`` tables (the longest token, d_model); a multiple of ``lanes``.
        fmt: The sublayer's formats (multiplier width, ``res_bits``, ``res_frac``, int8 activations).
        in_width: Width of the signed ``Y`` in (32: the W_O cascade's int32; narrower builds for the formal
            proofs).
    """

    LATENCY = 1 + STAGES + 1  # stage registers; input-to-output handshake latency is LATENCY + 1

    def __init__(self, lanes: int = 4, max_d: int = 1024, fmt: SublayerFormat = SUBLAYER_FORMAT,
                 in_width: int = ACC_WIDTH) -> None:
        if lanes < 1 or max_d < lanes or max_d % lanes:
            raise ValueError(f"max_d {max_d} must be a positive multiple of lanes {lanes}")
        if fmt.res_frac < 1:
            raise ValueError("res_frac must be >= 1")
        self.lanes, self.max_d, self.fmt, self.in_width = lanes, max_d, fmt, in_width
        self.regmap = residual_regmap(lanes, max_d, fmt)
        self.regfile = RegisterFile(self.regmap)
        aw = fmt.act_bits
        self.base_bits = max(1, (max_d // lanes - 1).bit_length())
        super().__init__({
            **axis_port("s_axis", lanes * in_width, sink=True, user_width=self.base_bits),
            **axis_port("s_axis_res", lanes * aw, sink=True),
            **axis_port("m_axis", lanes * aw, sink=False),
            **axil_members("s_axil", self.regmap.addr_width),
        })
        self.pipe = StallPipeline(self.LATENCY, lanes * aw)

    def formal_slots(self) -> list[Slot]:
        """Beat places oldest first, for the formal proofs: the stall pipeline's."""
        return self.pipe.formal_slots()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, fmt, aw, iw = self.lanes, self.fmt, self.fmt.act_bits, self.in_width
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        m.submodules.pipe = pipe = self.pipe
        reg = regs.reg

        # the join: both inputs move together, when both are valid and the pipeline advances
        m.d.comb += [
            pipe.in_valid.eq(self.s_axis_tvalid & self.s_axis_res_tvalid),
            pipe.in_last.eq(self.s_axis_tlast),
            self.s_axis_tready.eq(pipe.ce & self.s_axis_res_tvalid),
            self.s_axis_res_tready.eq(pipe.ce & self.s_axis_tvalid),
            self.m_axis_tdata.eq(pipe.m_axis_tdata),
            self.m_axis_tvalid.eq(pipe.m_axis_tvalid),
            self.m_axis_tlast.eq(pipe.m_axis_tlast),
            pipe.m_axis_tready.eq(self.m_axis_tready),
        ]

        tokens, overlong = Signal(32), Signal(32)
        m.d.comb += [reg["tokens"].eq(tokens), reg["overlong"].eq(overlong)]
        col = channel_counter(m, pipe.in_fire, self.s_axis_tlast, n, self.max_d, tokens, overlong,
                              base=self.s_axis_tuser)

        half = 1 << (fmt.res_frac - 1)
        outs = []
        for i in range(n):
            y = pipe.reg(m, self.s_axis_tdata[i * iw:(i + 1) * iw].as_signed(), name=f"y{i}")
            x = pipe.reg(m, self.s_axis_res_tdata[i * aw:(i + 1) * aw].as_signed(), name=f"x{i}")
            ports = [regs.mem_read_port(t, i) for t in ("y_mult", "y_shift")]
            for port in ports:
                m.d.comb += [port.addr.eq(col + i), port.en.eq(pipe.ce)]
            ya = requant_stages(m, pipe, y, ports[0].data, ports[1].data, fmt.res_bits, f"ly{i}")
            xa = requant_stages(m, pipe, x, reg["x_mult"], reg["x_shift"], fmt.res_bits, f"lx{i}")
            s = Signal(signed(fmt.res_bits + 1), name=f"sum{i}")
            m.d.comb += s.eq(ya + xa)
            r = Signal(signed(fmt.res_bits + 1 - fmt.res_frac + 1), name=f"r{i}")
            m.d.comb += r.eq((s + half) >> fmt.res_frac)
            outs.append(pipe.reg(m, saturate(m, r, aw, f"sat{i}"), name=f"out{i}"))
        m.d.comb += pipe.out_data.eq(Cat(*outs))
        return m

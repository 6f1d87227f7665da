"""RMSNorm baseline kernel: token-buffered, ``lanes`` elements per cycle.

The full description: ``docs/internals/hw.md``, section ``hw/pl/rmsnorm.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Value

from vckattn.golden.bhyt_int import NormFormat
from vckattn.golden.regmap import wide_names
from vckattn.golden.rmsnorm_int import rmsnorm_regmap

from .axil import RegisterFile, RegisterMap
from .norm_lanes import RMSNormLane, RMSNormScaleUnit
from .pipeline import StallPipeline
from .token_engine import IN_WIDTH, TokenNormKernel, token_buffer_bits

__all__ = ["RMSNormKernel", "buffer_bits"]

#: Token-buffer bits: two ping-pong buffers of ``max_d`` int8 elements (the token engine's).
buffer_bits = token_buffer_bits


class RMSNormKernel(TokenNormKernel):
    """Integer RMSNorm: per-token ``S``, ping-pong token buffers, II = 1 beat.

    Ports: ``s_axis_tdata[lanes*8]``, ``s_axis_tlast``, ``s_axis_tvalid``, ``s_axis_tready``;
    ``m_axis_tdata[lanes*8]``, ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``;
    AXI4-Lite slave ``s_axil_*``; ``clk``, ``rst``. See the module docstring.

    Args:
        lanes: Elements per beat (>= 1).
        max_d: Longest token; a multiple of ``lanes``.
        fmt: Build-time number formats (the golden model's).
    """

    SCALE_LATENCY = RMSNormScaleUnit.LATENCY
    LANE_LATENCY = RMSNormLane.LATENCY
    LATENCY = SCALE_LATENCY + LANE_LATENCY

    def __init__(self, lanes: int = 4, max_d: int = 1024, fmt: NormFormat = NormFormat()) -> None:
        super().__init__(lanes, max_d, fmt, user_width=0)

    def _make_regmap(self, lanes: int, max_d: int, fmt: NormFormat) -> RegisterMap:
        return rmsnorm_regmap(lanes, max_d, fmt)

    def _datapath(self, m: Module, regs: RegisterFile, pipe: StallPipeline, stat: Value, q: Value,
                  g: list[Value]) -> list[Value]:
        fmt, reg = self.fmt, regs.reg
        m.submodules.scale = scale = RMSNormScaleUnit(fmt)
        m.d.comb += [
            scale.en.eq(pipe.ce),
            scale.stat.eq(stat),
            scale.eps_int.eq(Cat(*(reg[x] for x in wide_names("eps_int", fmt.stat_bits)))),
            scale.g_frac.eq(reg["g_frac"]),
        ]
        outs = []
        for i in range(self.lanes):
            lane = RMSNormLane(fmt)
            m.submodules[f"lane{i}"] = lane
            m.d.comb += [
                lane.en.eq(pipe.ce),
                lane.q.eq(q[i * IN_WIDTH:(i + 1) * IN_WIDTH].as_signed()),
                lane.r.eq(scale.r),
                lane.sh.eq(scale.sh),
                lane.g.eq(g[i]),
            ]
            outs.append(lane.out)
        return outs

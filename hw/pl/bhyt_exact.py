"""BHyT exact-statistics unit (site A, the attention input): token-buffered, ``lanes`` elements per cycle.

The full description: ``docs/internals/hw.md``, section ``hw/pl/bhyt_exact.py``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Value

from vckattn.golden.bhyt_int import NormFormat, bhyt_exact_regmap

from .axil import RegisterFile, RegisterMap
from .norm_lanes import BHyTLane, BHyTScaleUnit, bhyt_lanes, bhyt_scale
from .pipeline import StallPipeline
from .token_engine import IN_WIDTH, TokenNormKernel, token_buffer_bits

__all__ = ["BHyTExactKernel", "buffer_bits"]

#: Token-buffer bits: two ping-pong buffers of ``max_d`` int8 elements (the token engine's).
buffer_bits = token_buffer_bits


class BHyTExactKernel(TokenNormKernel):
    """BHyT site A: exact per-token ``S``, ping-pong token buffers, II = 1 beat; ``S`` out on TUSER.

    Ports: ``s_axis_tdata[lanes*8]``, ``s_axis_tlast``, ``s_axis_tvalid``, ``s_axis_tready``;
    ``m_axis_tdata[lanes*8]``, ``m_axis_tuser[stat_bits]`` (``S``), ``m_axis_tlast``,
    ``m_axis_tvalid``, ``m_axis_tready``; AXI4-Lite slave ``s_axil_*``; ``clk``, ``rst``.
    See the module docstring.

    Args:
        lanes: Elements per beat (>= 1).
        max_d: Longest token; a multiple of ``lanes``.
        fmt: Build-time number formats (the golden model's).
    """

    SCALE_LATENCY = BHyTScaleUnit.LATENCY
    LANE_LATENCY = BHyTLane.LATENCY
    LATENCY = SCALE_LATENCY + LANE_LATENCY

    def __init__(self, lanes: int = 4, max_d: int = 1024, fmt: NormFormat = NormFormat()) -> None:
        super().__init__(lanes, max_d, fmt, user_width=fmt.stat_bits)

    def _make_regmap(self, lanes: int, max_d: int, fmt: NormFormat) -> RegisterMap:
        return bhyt_exact_regmap(lanes, max_d, fmt)

    def _datapath(self, m: Module, regs: RegisterFile, pipe: StallPipeline, stat: Value, q: Value,
                  g: list[Value]) -> list[Value]:
        scale = bhyt_scale(m, regs.reg, pipe.ce, stat, self.fmt)
        return bhyt_lanes(m, regs.reg, pipe.ce, scale, q, g, self.fmt, IN_WIDTH)

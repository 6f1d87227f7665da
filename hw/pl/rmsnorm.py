"""RMSNorm baseline kernel: token-buffered, ``lanes`` elements per cycle.

Golden model: ``rmsnorm_int(q, regs, fmt)`` of :mod:`vckattn.golden.rmsnorm_int`, bit for bit,
for the registers of :func:`~vckattn.golden.rmsnorm_int.rmsnorm_registers`;
:func:`~vckattn.golden.rmsnorm_int.rmsnorm_register_values` turns those into register writes.

Math::

    S    = Σ q²                                   over the token (the reduction)
    r, k = rsqrt(max(S + eps_int, 1))             r in UQ1.15
    out  = sat8((q·r·g[j] + 2^(sh-1)) >> sh),  sh = 15 + k + g_frac
           g[j] = γ_j √d / s_out · 2^g_frac (int16)

Architecture: the shared two-pass engine of :mod:`vckattn.hw.pl.token_engine` (read its
docstring), the same as :class:`~vckattn.hw.pl.bhyt_exact.BHyTExactKernel`: pass 1 fills one
of two ping-pong token buffers while summing ``S``; pass 2 reads it back through a
:class:`~vckattn.hw.pl.pipeline.StallPipeline` with one
:class:`~vckattn.hw.pl.norm_lanes.RMSNormScaleUnit` (fed ``S`` with every beat; stages 1-4)
and one :class:`~vckattn.hw.pl.norm_lanes.RMSNormLane` per lane (stages 5-6; ``q`` from the
token buffer at stage 1 delayed to stage 4, ``γ`` read ports at stage 4). Pass 1 of token
t+1 overlaps pass 2 of token t: **throughput ``lanes`` elements/cycle** in steady state.

This is what BHyT's site M avoids: the second RMSNorm of a block needs this token buffer and
reduction again (over ``h' = h + Attn(u)``), site M only a constant.

Streams
-------
* ``s_axis``: TDATA = ``lanes`` signed int8, element ``j`` of the token in lane ``j % lanes``
  of beat ``j // lanes``; one token per frame, TLAST on its last beat; no TUSER. ``d`` is
  inferred from TLAST (``1 <= d <= max_d``); a padded last beat must have **zero padding
  lanes**; longer tokens are truncated to ``max_d`` (counted in ``overlong``).
* ``m_axis``: TDATA = ``lanes`` signed int8 outputs (scale ``s_out``), same layout and beats,
  TLAST on the last beat; no TUSER.

Latency: ``LATENCY`` = 6 pass-2 stage registers; a token of ``n = ceil(d/lanes)`` beats
streamed back to back into an idle kernel leaves its first output beat ``n + 7`` cycles after
its first input beat (263 cycles for d = 1024 at lanes = 4).

Storage: :func:`buffer_bits` = ``2 · max_d · 8`` token-buffer bits (16,384 for max_d = 1024),
plus per buffer ``S`` and a beat index, the ``q`` delay line (3 × 8·lanes bits) and the ``γ``
memory (``max_d`` × 16 bits of parameters).

Registers (AXI4-Lite, 32-bit words): declared once by :func:`vckattn.golden.rmsnorm_int.rmsnorm_regmap` (names, widths,
signedness, offsets and meanings; the manifests and ``RegisterMap.describe()`` list them).
The 40-bit ``eps_int`` is split into ``_lo``/``_hi`` words; the ``gamma`` memory sits in its own
aligned window.

All registers reset to 0. Write registers and ``γ`` while the kernel is idle.
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

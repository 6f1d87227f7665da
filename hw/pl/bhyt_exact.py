"""BHyT exact-statistics unit (site A, the attention input): token-buffered, ``lanes`` elements per cycle.

Golden model: ``bhyt_site_int(q, sum_of_squares(q), regs, fmt)`` of
:mod:`vckattn.golden.bhyt_int`, bit for bit, for the registers of
:func:`~vckattn.golden.bhyt_int.bhyt_site_registers` (``c_attn = 0`` at site A; any ``c_int``
works, e.g. a site-M register set). :func:`~vckattn.golden.bhyt_int.bhyt_register_values` turns golden registers into
register writes.

Math (docs/methods.md §3): the block's only reduction, ``S = Σ q²`` over the token, then per
element (``F = 12`` fraction bits of the tanh argument)::

    v    = max(S + c_int + eps_int, 1)                    (r, k) = rsqrt(v)   r in UQ1.15
    c    = (r·k_mult + 2^7) >> 8                          sh = k_shift + 7 + k
    a    = (q·c + 2^(sh-1)) >> sh                         tanh argument, Q.12
    out  = sat8((tanh(a)·g[j] + 2^(14+g_frac)) >> (15 + g_frac))      g[j] = γ_j/s_out·2^g_frac

Architecture: the shared two-pass engine of :mod:`vckattn.hw.pl.token_engine` (read its
docstring): pass 1 streams the token into one of two ping-pong token buffers while summing
``S``; pass 2 reads it back through a :class:`~vckattn.hw.pl.pipeline.StallPipeline` with one
:class:`~vckattn.hw.pl.norm_lanes.BHyTScaleUnit` (fed ``S`` with every beat; stages 1-5) and
one :class:`~vckattn.hw.pl.norm_lanes.BHyTLane` per lane (stages 6-10; ``q`` read from the
token buffer at stage 1 and delayed to stage 5, ``γ`` read ports at stage 5). Pass 1 of token
t+1 overlaps pass 2 of token t: **throughput ``lanes`` elements/cycle** in steady state.

Streams
-------
* ``s_axis``: TDATA = ``lanes`` signed int8, element ``j`` of the token in lane ``j % lanes``
  (bits ``[8i, 8i+8)``) of beat ``j // lanes``; one token per frame, TLAST on its last beat.
  No TUSER. ``d`` (token length) is inferred from TLAST; ``1 <= d <= max_d``; a padded last
  beat must have **zero padding lanes**. Longer tokens are truncated to ``max_d`` (counted in
  ``overlong``).
* ``m_axis``: TDATA = ``lanes`` signed int8 outputs (scale ``s_out``), same layout and beats,
  TLAST on the last beat; **TUSER = the token's statistic ``S``** (``stat_bits`` = 40 bits,
  unsigned) **on every beat of the token** — what site M
  (:class:`~vckattn.hw.pl.bhyt_approx.BHyTApproxKernel`) takes on its ``s_axis_tuser``.

Latency: ``LATENCY`` = 10 pass-2 stage registers; a token of ``n = ceil(d/lanes)`` beats
streamed back to back into an idle kernel leaves its first output beat ``n + 11`` cycles after
its first input beat (``n`` to fill the buffer, 10 stages, 1 skid buffer); e.g. 267 cycles
for d = 1024 at lanes = 4.

Storage: :func:`buffer_bits` = ``2 · max_d · 8`` token-buffer bits (16,384 for max_d = 1024),
plus per buffer ``S`` (25 bits at max_d = 1024) and a beat index; the ``q`` delay line
(4 × 8·lanes bits), the ``S`` TUSER delay line (10 × 40 bits), the ``γ`` memory
(``max_d`` × 16 bits of parameters).

Registers (AXI4-Lite, 32-bit words): declared once by :func:`vckattn.golden.bhyt_int.bhyt_exact_regmap` (names, widths,
signedness, offsets and meanings; the manifests and ``RegisterMap.describe()`` list them).
The 40-bit statistic constants are split into ``_lo``/``_hi`` words (:func:`vckattn.golden.regmap.wide_regs`);
the golden model needs ``k_shift + 7 + k <= 62``; the ``gamma`` memory sits in its own aligned window
(0x1000 for ``max_d`` = 1024).

All registers reset to 0. Write registers and ``γ`` while the kernel is idle.
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

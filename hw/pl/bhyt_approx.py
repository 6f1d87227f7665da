"""BHyT approximate-variance unit (site M, the MLP input): AXI4-Stream in/out, ``lanes`` elements per cycle.

Golden model: :func:`vckattn.golden.bhyt_int.bhyt_site_int` (bit for bit) with the statistic of
site A and the site-M registers of :func:`vckattn.golden.bhyt_int.bhyt_site_registers`
(``c_attn``, ``lam_attn`` given); :func:`~vckattn.golden.bhyt_int.bhyt_register_values` turns those
into register writes.

Math (docs/methods.md §3)
--------------------
The float operator is ``γ ⊙ tanh(λ x / (κ sqrt(ŝ² + ε)))``. Site A (attention input) uses the
exact ``s² = mean(h²)`` of the block input ``h``; site M (MLP input, ``h' = h + Attn(u)``) does
**not** reduce its own input but uses ``ŝ² = s² + C`` with ``C = c_attn λ_A² / κ²`` — the
statistic ``S = Σ q_h²`` of the *block input* (computed once, by site A, and forwarded beside
the stream) plus a constant. In integers (``s_stat`` = scale of ``h``, ``d`` = hidden size)::

    v     = max(S + c_int + eps_int, 1)     c_int = C·d/s_stat²,  eps_int = ε·d/s_stat²
    r, k  = rsqrt(v)                        v^-1/2 ≈ r·2^-(15+k), r in UQ1.15
    c     = (r·k_mult + 2^7) >> 8           per-token scale (once per beat: the scale unit)
    a     = (q·c + 2^(sh-1)) >> sh,  sh = k_shift + 7 + k        tanh argument, Q.12
    y     = tanh(a)                         Q1.15 (256-entry table + linear interpolation)
    out   = sat8((y·g[j] + 2^(14+g_frac)) >> (15 + g_frac))    g[j] = γ_j/s_out·2^g_frac

so the unit is purely element-wise: no reduction, no token buffer, no per-token state besides
the element counter that addresses ``γ``.

Streams (the project's framing contract, :mod:`vckattn.sim.kernel_tb`)
---------------------------------------------------------------------
* ``s_axis``: TDATA = ``lanes`` signed int8 ``h'`` values, element ``j`` of a token in lane
  ``j % lanes`` (bits ``[8 i, 8 i + 8)``) of beat ``j // lanes``; one token per frame, TLAST on
  its last beat; a short last beat is padded (padding lanes give don't-care outputs).
  TUSER = the token's statistic ``S`` (``stat_bits`` = 40 bits, unsigned), **the same value on
  every beat of the token** (site A's kernel emits it that way on its ``m_axis_tuser``). The
  unit reads ``S`` on every beat, so nothing is latched per token.
* ``m_axis``: TDATA = ``lanes`` signed int8 outputs (scale ``s_out``), same lane layout;
  TLAST = input TLAST (same beats per frame). **No TUSER**: ``S`` is consumed here (the MLP
  does not need it) and not passed on.
* Tokens must have ``d <= max_d`` elements (``γ`` has ``max_d`` entries); longer tokens
  wrap the element counter (unsupported).

Pipeline (:class:`~vckattn.hw.pl.pipeline.StallPipeline`, one global stall ``ce``)
--------------------------------------------------------------------------------
L = 10 stage registers + the 2-beat output skid buffer; II = 1 beat/cycle (``lanes``
elements/cycle) whenever the sink is ready; **latency 11 cycles** from input to output
handshake.

* stages 1-5: :class:`~vckattn.hw.pl.norm_lanes.BHyTScaleUnit` (``S`` of the beat → ``c``,
  ``sh``); in parallel the beat's ``q`` is delayed 5 stages and its element index 4 stages;
  the ``γ`` read ports (one per lane, address = element index ``j = beat·lanes + lane``,
  counter cleared after TLAST) are stage 5.
* stages 6-10: one :class:`~vckattn.hw.pl.norm_lanes.BHyTLane` per lane (``q``, ``c``, ``sh``,
  ``γ[j]`` all of stage 5).

Storage: **0 token/row buffer bits** (:func:`buffer_bits`). Besides the pipeline registers
the unit holds the ``γ`` memory (``max_d`` × 16 bits: parameters, not data) and the 2-beat
output skid buffer. Pipeline registers outside the scale unit and the lanes: the ``q`` delay
line (5 × 8·lanes bits), the element counter and its 4 delayed copies (5 × ⌈log2 max_d⌉), and
valid/TLAST (2 × 10). Yosys (``synth_xilinx -family xcup``, :mod:`vckattn.hw.pl.synth`) at
lanes=4, max_d=1024, whole kernel including the AXI4-Lite register file: 1184 FF + 41 SRL16E,
4490 LUT, 18 DSP, 5 RAMB18 (``γ``: one copy per read port, 4 lanes + AXI readback).

Registers (AXI4-Lite, 32-bit words): declared once by
:func:`vckattn.golden.bhyt_int.bhyt_approx_regmap` (names, widths, signedness, offsets and meanings;
the manifests and ``RegisterMap.describe()`` list them). Same layout as the exact kernel's up to
``tokens`` (no ``overlong``: there is no token buffer).

``eps_int`` and ``c_int`` are ``stat_bits`` = 40 bits wide and AXI4-Lite registers at most 32,
so each is split into a ``_lo`` (32 bits) and a ``_hi`` word
(:func:`~vckattn.golden.bhyt_int.bhyt_register_values` does the split); the kernel uses ``{_hi, _lo}``.
Write registers and ``γ`` while the unit is idle. All registers reset to 0.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring

from vckattn.golden.bhyt_int import NormFormat, bhyt_approx_regmap

from .axil import RegisterFile, axil_members
from .norm_lanes import BHyTLane, BHyTScaleUnit, bhyt_lanes, bhyt_scale
from .pipeline import StallPipeline, axis_port

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

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, fmt = self.lanes, self.fmt
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        m.submodules.pipe = pipe = StallPipeline(self.LATENCY, n * fmt.out_bits)
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

"""One lane of the SwiftMax normalizer datapath (Amaranth) — golden: :func:`vckattn.golden.swiftmax_int.swiftmax_int`.

Element-wise, initiation interval 1, no row state. With ``en`` as the global clock
enable (stall) of the kernel pipeline, the stages are (F = ``t_frac``):

====  ======================================================================
S1    ``acc`` saturated to ``acc_bits``, times the score multiplier (one DSP multiply)
S2    round-half-up right shift of the product, plus the β term (golden steps 2-3)
S3    clamp, plus the output offset: ``t`` in Q.F; ``n = t >> F`` and the fraction go to the 2^f unit
S4-5  :class:`~vckattn.hw.pl.funcunits.Pow2FracUnit` ``m = 2^f`` (UQ1.15), n and keep delayed
S6    ``p = min((m + 2^(s-1)) >> s, 2^out_bits - 1)`` with ``s = 15 - min(n, cap)``; 0 if masked
====  ======================================================================

``LATENCY = 6`` enabled cycles from ``acc``/``keep`` to ``p``. The shared register inputs
(the map's writable registers) are held constant while the kernel runs (they come from the
AXI4-Lite register block). ``b_beta`` and ``c_out`` are per-element values (the entries of the
``b_beta``/``c_out`` memories for the element's head): ``b_beta`` is sampled in the enabled cycle that
computes S2 of an element (one enabled cycle after its ``acc``), ``c_out`` in the one that computes S3 (two
enabled cycles after ``acc``) -- what a synchronous memory read port gives when it is addressed with the
element's head at issue (``b_beta``) and with that head delayed one enabled stage (``c_out``), both enabled
by ``en``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vckattn.golden.swiftmax_int import SwiftMaxFormat, swiftmax_regmap
from vckattn.hw.pl.axil import shape_of
from vckattn.hw.pl.funcunits import Pow2FracUnit

__all__ = ["SwiftMaxLane"]


class SwiftMaxLane(wiring.Component):
    """SwiftMax datapath for one element per cycle.

    Ports: ``en``; ``acc`` (signed ``in_width``), ``keep``; one input per writable register and per memory
    of :func:`~vckattn.golden.swiftmax_int.swiftmax_regmap` (same name, width and signedness; the memory
    inputs ``b_beta``/``c_out`` are the element's entries, aligned with stages 2 / 3: module docstring);
    output ``p`` (unsigned ``out_bits``), valid ``LATENCY`` enabled cycles after the input.
    """

    LATENCY = 6

    def __init__(self, fmt: SwiftMaxFormat = SwiftMaxFormat(), in_width: int = 32) -> None:
        self.fmt = fmt
        self.in_width = in_width
        super().__init__({
            "en": In(1),
            "acc": In(signed(in_width)),
            "keep": In(1),
            **{r.name: In(shape_of(r)) for r in swiftmax_regmap(fmt).writable},
            **{mem.name: In(shape_of(mem)) for mem in swiftmax_regmap(fmt).mems},
            "p": Out(unsigned(fmt.out_bits)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        fmt = self.fmt
        en = self.en
        amax = (1 << (fmt.acc_bits - 1)) - 1
        prod_w = fmt.acc_bits + fmt.a_bits

        # S1: saturate, multiply
        sat = Signal(signed(fmt.acc_bits))
        m.d.comb += sat.eq(Mux(self.acc > amax, amax, Mux(self.acc < -amax - 1, -amax - 1, self.acc)))
        prod = Signal(signed(prod_w))
        keep = [Signal(name=f"keep{i}") for i in range(self.LATENCY - 1)]  # keep[i] rides with stage i+1
        with m.If(en):
            m.d.sync += [prod.eq(sat * self.a_mult), keep[0].eq(self.keep)]

        # S2: round-half-up right shift, + b_beta
        half = Signal(unsigned(prod_w))
        m.d.comb += half.eq((1 << self.a_shift) >> 1)
        u = Signal(signed(prod_w + 1))
        with m.If(en):
            m.d.sync += [u.eq(((prod + half) >> self.a_shift) + self.b_beta), keep[1].eq(keep[0])]

        # S3: clamp, + c_out
        uc = Signal(signed(prod_w + 1))
        m.d.comb += uc.eq(Mux(u < self.u_lo, self.u_lo, Mux(u > self.u_hi, self.u_hi, u)))
        t = Signal(signed(fmt.reg_bits + 2))
        with m.If(en):
            m.d.sync += [t.eq(uc + self.c_out), keep[2].eq(keep[1])]

        # S4-S5: 2^f unit; n delayed alongside
        pu = Pow2FracUnit(fmt.pow2)
        m.submodules.pow2 = pu
        n = [Signal(signed(fmt.reg_bits + 2 - fmt.t_frac), name=f"n{i}") for i in range(pu.LATENCY)]
        m.d.comb += [pu.en.eq(en), pu.f.eq(t[:fmt.t_frac])]
        with m.If(en):
            m.d.sync += [n[0].eq(t >> fmt.t_frac), keep[3].eq(keep[2])]
            for i in range(1, pu.LATENCY):
                m.d.sync += [n[i].eq(n[i - 1]), keep[3 + i].eq(keep[2 + i])]

        # S6: s = out_frac_m - min(n, cap) (>= out_frac_m - cap > 0); round half up; saturate; mask
        cap = fmt.out_max.bit_length() + 1
        mf = fmt.pow2.out_frac
        nmin = Signal(signed(len(n[-1])))
        m.d.comb += nmin.eq(Mux(n[-1] > cap, cap, n[-1]))
        s = Signal(signed(len(nmin) + 2))
        m.d.comb += s.eq(mf - nmin)
        mwidth = mf + 2
        q = Signal(unsigned(mwidth + 1))
        with m.If(s >= mwidth + 1):  # shifts past every bit of m (+ half) round to 0
            m.d.comb += q.eq(0)
        with m.Else():
            sh = s.as_unsigned()[:6]
            m.d.comb += q.eq((pu.m + ((1 << sh) >> 1)) >> sh)
        with m.If(en):
            m.d.sync += self.p.eq(Mux(keep[-1], Mux(q > fmt.out_max, fmt.out_max, q), 0))
        return m

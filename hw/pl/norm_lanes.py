"""Datapaths of the BHyT and RMSNorm units (Amaranth) — golden: :mod:`vckattn.golden.bhyt_int`,
:mod:`vckattn.golden.rmsnorm_int`.

The full description: ``docs/internals/hw.md``, section ``hw/pl/norm_lanes.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from amaranth.hdl import Cat, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vckattn.golden.bhyt_int import C_SHIFT, NormFormat
from vckattn.golden.regmap import wide_names
from vckattn.hw.pl.funcunits import RsqrtUnit, TanhUnit

__all__ = ["BHyTLane", "BHyTScaleUnit", "RMSNormLane", "RMSNormScaleUnit", "bhyt_lanes", "bhyt_scale"]

SH_BITS = 7  # right-shift amounts up to 127


def _round_shift(x: Signal, sh: Signal) -> object:
    """``(x + (2^sh >> 1)) >> sh`` — round half up by a variable right shift (sh >= 0)."""
    return (x + ((1 << sh) >> 1)) >> sh


def _sat(x: object, bits: int) -> object:
    hi, lo = (1 << (bits - 1)) - 1, -(1 << (bits - 1))
    return Mux(x > hi, hi, Mux(x < lo, lo, x))


class BHyTScaleUnit(wiring.Component):
    """Per-token scale of a BHyT site (see the module docstring). Latency 5."""

    LATENCY = 5

    def __init__(self, fmt: NormFormat = NormFormat()) -> None:
        self.fmt = fmt
        super().__init__({
            "en": In(1), "stat": In(unsigned(fmt.stat_bits)),
            "c_int": In(unsigned(fmt.stat_bits)), "eps_int": In(unsigned(fmt.stat_bits)),
            "k_mult": In(unsigned(fmt.k_bits)), "k_shift": In(unsigned(6)),
            "c": Out(unsigned(fmt.rsqrt.out_frac + 2 + fmt.k_bits - C_SHIFT + 1)), "sh": Out(unsigned(SH_BITS)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        fmt = self.fmt
        v = Signal(unsigned(fmt.stat_bits + 2))
        with m.If(self.en):
            total = self.stat + self.c_int + self.eps_int
            m.d.sync += v.eq(Mux(total == 0, 1, total))
        rs = RsqrtUnit(fmt.rsqrt, in_width=fmt.stat_bits + 2)
        m.submodules.rsqrt = rs
        m.d.comb += [rs.en.eq(self.en), rs.x.eq(v)]
        with m.If(self.en):
            m.d.sync += [self.c.eq(_round_shift(rs.mant * self.k_mult, C_SHIFT)),
                         self.sh.eq(self.k_shift + fmt.rsqrt.out_frac - C_SHIFT + rs.exp)]
        return m


class BHyTLane(wiring.Component):
    """One element of a BHyT site: tanh of the scaled input times γ, int8 out. Latency 5."""

    LATENCY = 5

    def __init__(self, fmt: NormFormat = NormFormat(), c_width: int = 26) -> None:
        self.fmt = fmt
        super().__init__({
            "en": In(1), "q": In(signed(8)), "c": In(unsigned(c_width)), "sh": In(unsigned(SH_BITS)),
            "g": In(signed(fmt.g_bits)), "g_frac": In(unsigned(5)), "out": Out(signed(fmt.out_bits)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        fmt = self.fmt
        a = Signal(signed(fmt.arg_frac + 12))
        prod = self.q * self.c
        with m.If(self.en):
            # |a| beyond the tanh unit's input width saturates the unit anyway: clamp to its range
            m.d.sync += a.eq(_sat(_round_shift(prod, self.sh), len(a)))
        th = TanhUnit(fmt.tanh, in_width=len(a))
        m.submodules.tanh = th
        m.d.comb += [th.en.eq(self.en), th.a.eq(a)]
        g = [Signal(signed(fmt.g_bits), name=f"g{i}") for i in range(1 + th.LATENCY)]
        with m.If(self.en):
            m.d.sync += g[0].eq(self.g)
            for i in range(1, len(g)):
                m.d.sync += g[i].eq(g[i - 1])
        with m.If(self.en):
            m.d.sync += self.out.eq(_sat(_round_shift(th.y * g[-1], fmt.tanh.out_frac + self.g_frac), fmt.out_bits))
        return m


class RMSNormScaleUnit(wiring.Component):
    """Per-token scale of the integer RMSNorm: ``r`` and the output shift. Latency 4."""

    LATENCY = 4

    def __init__(self, fmt: NormFormat = NormFormat()) -> None:
        self.fmt = fmt
        super().__init__({
            "en": In(1), "stat": In(unsigned(fmt.stat_bits)), "eps_int": In(unsigned(fmt.stat_bits)),
            "g_frac": In(unsigned(5)),
            "r": Out(unsigned(fmt.rsqrt.out_frac + 2)), "sh": Out(unsigned(SH_BITS)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        fmt = self.fmt
        v = Signal(unsigned(fmt.stat_bits + 1))
        with m.If(self.en):
            total = self.stat + self.eps_int
            m.d.sync += v.eq(Mux(total == 0, 1, total))
        rs = RsqrtUnit(fmt.rsqrt, in_width=fmt.stat_bits + 1)
        m.submodules.rsqrt = rs
        m.d.comb += [rs.en.eq(self.en), rs.x.eq(v)]
        m.d.comb += [self.r.eq(rs.mant), self.sh.eq(fmt.rsqrt.out_frac + rs.exp + self.g_frac)]
        return m


class RMSNormLane(wiring.Component):
    """One element of the integer RMSNorm: ``sat8((q·r·g + half) >> sh)``. Latency 2."""

    LATENCY = 2

    def __init__(self, fmt: NormFormat = NormFormat()) -> None:
        self.fmt = fmt
        super().__init__({
            "en": In(1), "q": In(signed(8)), "r": In(unsigned(fmt.rsqrt.out_frac + 2)), "sh": In(unsigned(SH_BITS)),
            "g": In(signed(fmt.g_bits)), "out": Out(signed(fmt.out_bits)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        qr = Signal(signed(8 + self.fmt.rsqrt.out_frac + 3))
        g1 = Signal(signed(self.fmt.g_bits))
        sh1 = Signal(unsigned(SH_BITS))
        with m.If(self.en):
            m.d.sync += [qr.eq(self.q * self.r), g1.eq(self.g), sh1.eq(self.sh)]
            m.d.sync += self.out.eq(_sat(_round_shift(qr * g1, sh1), self.fmt.out_bits))
        return m


# ------------------------------------------------------------------ the BHyT datapath, wired to its registers
# (shared by both BHyT kernels: the exact site with its token buffer, and the approximate-variance unit)


def bhyt_scale(m: Module, reg: Mapping[str, Value], en: Value, stat: Value, fmt: NormFormat) -> BHyTScaleUnit:
    """A :class:`BHyTScaleUnit` (``m.submodules.scale``) on the token statistic ``stat``, its constants
    from the BHyT registers ``reg`` (:func:`vckattn.golden.bhyt_int.bhyt_exact_regmap`; the 40-bit ones
    reassembled from their words)."""

    def wide(name: str) -> Value:
        return Cat(*(reg[x] for x in wide_names(name, fmt.stat_bits)))

    m.submodules.scale = scale = BHyTScaleUnit(fmt)
    m.d.comb += [scale.en.eq(en), scale.stat.eq(stat), scale.c_int.eq(wide("c_int")),
                 scale.eps_int.eq(wide("eps_int")), scale.k_mult.eq(reg["k_mult"]), scale.k_shift.eq(reg["k_shift"])]
    return scale


def bhyt_lanes(m: Module, reg: Mapping[str, Value], en: Value, scale: BHyTScaleUnit, q: Value,
               g: Sequence[Value], fmt: NormFormat, in_width: int = 8) -> list[Value]:
    """One :class:`BHyTLane` per element of the beat ``q`` (``len(g)`` lanes of ``in_width`` bits),
    fed the scale unit's ``c``/``sh`` and lane ``i``'s ``γ`` entry ``g[i]``; returns the lane outputs."""
    outs = []
    for i, gi in enumerate(g):
        lane = BHyTLane(fmt, c_width=len(scale.c))
        m.submodules[f"lane{i}"] = lane
        m.d.comb += [lane.en.eq(en), lane.q.eq(q[i * in_width:(i + 1) * in_width].as_signed()),
                     lane.c.eq(scale.c), lane.sh.eq(scale.sh), lane.g.eq(gi), lane.g_frac.eq(reg["g_frac"])]
        outs.append(lane.out)
    return outs

"""One lane of the SwiftMax normalizer datapath (Amaranth) — golden: :func:`vckattn.golden.swiftmax_int.swiftmax_int`.

The full description: ``docs/internals/hw.md``, section ``hw/pl/swiftmax_lane.py``.
"""

from __future__ import annotations

import functools

import numpy as np
from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vckattn.golden.funcunits import pow2
from vckattn.golden.swiftmax_int import SwiftMaxFormat, swiftmax_regmap
from vckattn.hw.pl.arith import lut_multiply
from vckattn.hw.pl.axil import shape_of
from vckattn.hw.pl.funcunits import Pow2FracUnit

__all__ = ["LUT_PRODUCT_MAX_BITS", "SwiftMaxLane", "lut_product_default", "shift_range"]

#: Widest saturated score whose product ``sat · a_mult`` the lane builds from LUTs by default (a DSP above).
LUT_PRODUCT_MAX_BITS = 8


def lut_product_default(fmt: SwiftMaxFormat, in_width: int) -> bool:
    """Whether the lane builds ``sat · a_mult`` from LUTs by default: when the saturated score
    (``min(in_width, acc_bits)`` bits) is at most :data:`LUT_PRODUCT_MAX_BITS` wide."""
    return min(in_width, fmt.acc_bits) <= LUT_PRODUCT_MAX_BITS


@functools.lru_cache(maxsize=16)
def shift_range(fmt: SwiftMaxFormat) -> tuple[int, int]:
    """``(n_lo, n_hi)``: the integer parts ``n = t >> t_frac`` that matter to the output.

    Every ``n <= n_lo`` gives the same P as ``n_lo`` (0) and every ``n >= n_hi`` the same as ``n_hi``, for
    every fraction: found by evaluating the golden ``pow2`` over all fractions for each ``n`` (the result
    rises with ``n`` and stops changing at the golden's cap). ValueError unless the shift at ``n_hi`` is
    at least 1 (the lane's rounding needs it).
    """
    cfg = fmt.pow2
    f = np.arange(1 << fmt.t_frac, dtype=np.int64)
    cap = fmt.out_max.bit_length() + 1

    def p(n: int) -> np.ndarray:
        return pow2((n << fmt.t_frac) + f, fmt.t_frac, 0, fmt.out_max, cfg, "half_up")

    n_lo = cap
    while n_lo > -(cfg.out_frac + 4) and p(n_lo - 1).any():
        n_lo -= 1
    n_lo -= 1  # the largest n whose P is 0 for every fraction
    if p(n_lo).any() or p(n_lo - 1).any():
        raise ValueError("no n below which every P is 0")
    n_hi = n_lo
    while n_hi < cap and not (p(n_hi) == fmt.out_max).all():
        n_hi += 1
    if cfg.out_frac - n_hi < 1:
        raise ValueError(f"pow2.out_frac {cfg.out_frac} leaves no rounding bit at n = {n_hi}")
    return n_lo, n_hi


class SwiftMaxLane(wiring.Component):
    """SwiftMax datapath for one element per cycle.

    Ports: ``en``; ``acc`` (signed ``in_width``), ``keep``; one input per writable register and per memory
    of :func:`~vckattn.golden.swiftmax_int.swiftmax_regmap` (same name, width and signedness; the memory
    inputs ``b_beta``/``c_out`` are the element's entries, aligned with stages 2 / 3: module docstring);
    output ``p`` (unsigned ``out_bits``), valid ``LATENCY`` enabled cycles after the input.

    Args:
        fmt: The kernel's build format.
        in_width: Width of the ``acc`` input (signed).
        lut_product: Build ``sat · a_mult`` from LUTs (True) or DSP blocks (False); default
            :func:`lut_product_default`. The 2^f unit never uses a DSP block. Same function either way.
    """

    LATENCY = 6

    def __init__(self, fmt: SwiftMaxFormat = SwiftMaxFormat(), in_width: int = 32,
                 lut_product: bool | None = None) -> None:
        self.fmt = fmt
        self.in_width = in_width
        self.lut_product = lut_product_default(fmt, in_width) if lut_product is None else lut_product
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
        w = min(self.in_width, fmt.acc_bits)  # saturated score width
        prod_w = w + fmt.a_bits

        # S1: saturate (only an input wider than acc_bits), multiply
        sat = Signal(signed(w))
        if self.in_width > fmt.acc_bits:
            amax = (1 << (fmt.acc_bits - 1)) - 1
            m.d.comb += sat.eq(Mux(self.acc > amax, amax, Mux(self.acc < -amax - 1, -amax - 1, self.acc)))
        else:
            m.d.comb += sat.eq(self.acc)
        prod = Signal(signed(prod_w))
        keep = [Signal(name=f"keep{i}") for i in range(self.LATENCY - 1)]  # keep[i] rides with stage i+1
        product = lut_multiply(m, sat, self.a_mult, "product") if self.lut_product else sat * self.a_mult
        with m.If(en):
            m.d.sync += [prod.eq(product), keep[0].eq(self.keep)]

        # S2: round-half-up right shift, + b_beta. floor((prod + 2^(k-1)) / 2^k) = (q >> 1) + q[0] with
        # q = (2·prod) >> k (also for k = 0): the rounding increment is the adder's carry-in.
        q2 = Signal(signed(prod_w + 1))
        m.d.comb += q2.eq((prod << 1) >> self.a_shift)
        u = Signal(signed(prod_w + 1))
        with m.If(en):
            m.d.sync += [u.eq((q2 >> 1) + self.b_beta + q2[0]), keep[1].eq(keep[0])]

        # S3: clamp, + c_out
        uc = Signal(signed(prod_w + 1))
        m.d.comb += uc.eq(Mux(u < self.u_lo, self.u_lo, Mux(u > self.u_hi, self.u_hi, u)))
        t = Signal(signed(fmt.reg_bits + 2))
        with m.If(en):
            m.d.sync += [t.eq(uc + self.c_out), keep[2].eq(keep[1])]

        # S4-S5: 2^f unit; beside it the shift of S6, sh = n_hi - clamp(n, n_lo, n_hi) (module docstring)
        pu = Pow2FracUnit(fmt.pow2, lut_product=True)
        m.submodules.pow2 = pu
        n_lo, n_hi = shift_range(fmt)
        nt = Signal(signed(fmt.reg_bits + 2 - fmt.t_frac))
        m.d.comb += [pu.en.eq(en), pu.f.eq(t[:fmt.t_frac]), nt.eq(t >> fmt.t_frac)]
        n = [Signal(range(n_hi - n_lo + 1), name=f"n{i}") for i in range(pu.LATENCY)]
        with m.If(en):
            m.d.sync += [n[0].eq(Mux(nt > n_hi, 0, Mux(nt < n_lo, n_hi - n_lo, n_hi - nt))), keep[3].eq(keep[2])]
            for i in range(1, pu.LATENCY):
                m.d.sync += [n[i].eq(n[i - 1]), keep[3 + i].eq(keep[2 + i])]

        # S6: q = round_half_up(m / 2^s), s = out_frac_m - n = s_min + sh, as (floor(m / 2^(s-1)) + 1) >> 1;
        # saturate; mask
        s_min = fmt.pow2.out_frac - n_hi
        q = Signal(unsigned(len(pu.m) - s_min + 1))
        m.d.comb += q.eq((((pu.m >> (s_min - 1)) >> n[-1]) + 1) >> 1)
        with m.If(en):
            m.d.sync += self.p.eq(Mux(keep[-1], Mux(q > fmt.out_max, fmt.out_max, q), 0))
        return m

"""Integer arithmetic built from LUTs and carry chains (no DSP blocks).

Yosys' ``synth_xilinx`` maps every ``*`` whose operands are at least 2 bits wide and whose product is
at least 9 bits wide to DSP48E2 blocks (Amaranth has no attribute to say otherwise). Where a product is
cheaper in fabric -- a narrow operand, DSP blocks as the limiting resource -- :func:`lut_multiply`
builds it explicitly from radix-4 Booth partial products summed by a chain of two-operand adders, which
Yosys maps to LUTs and CARRY chains. The result is the exact two's-complement product.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed

__all__ = ["lut_multiply"]


def _as_signed(x: Value) -> Value:
    """``x`` as a signed value of the same numeric value (an unsigned one gains a zero sign bit)."""
    if x.shape().signed:
        return x
    return Cat(x, Const(0, 1)).as_signed()


def lut_multiply(m: Module, x: Value, y: Value, name: str) -> Signal:
    """The exact product ``x · y`` from radix-4 Booth partial products and a chain of adders (no DSP).

    ``x`` is the operand that is recoded into digits: the narrower one (it sets the number of partial
    products, ``ceil((len(x) + 1) / 2)`` for an unsigned ``x``, ``ceil(len(x) / 2)`` for a signed one);
    ``y`` the wider one. Either may be signed or unsigned.

    Digit ``k`` of ``x`` is ``d_k = x[2k-1] + x[2k] - 2·x[2k+1]`` in ``{-2..2}`` (``x[-1] = 0``); its
    partial product ``|d_k|·y``, bit-inverted when ``d_k < 0``, is added to the running sum at bit
    ``2k`` with the negation's ``+1`` as the adder's carry-in. Only bits ``2k`` and up of the running sum
    pass through adder ``k`` (the lower ones are final), so each adder is ``len(y) + 3`` bits wide and
    each bit one LUT (partial-product select and sum) on a carry chain.

    Returns a combinational signal named ``name``: signed, ``len(x) + len(y)`` bits (plus one per
    unsigned operand), which holds every product exactly.
    """
    xs, ys = _as_signed(x), _as_signed(y)
    wx, wy = len(xs), len(ys)
    if wx % 2:  # sign-extend to an even width
        xs = Cat(xs, xs[-1]).as_signed()
        wx += 1
    width = len(x) + len(y) + (not x.shape().signed) + (not y.shape().signed)
    ext = Cat(Const(0, 1), xs)  # ext[i + 1] = xs[i]; ext[0] = x[-1] = 0
    acc: Value | None = None
    for k in range(wx // 2):
        b0, b1, b2 = ext[2 * k], ext[2 * k + 1], ext[2 * k + 2]
        one = b0 ^ b1  # |d_k| = 1
        two = (b2 & ~b1 & ~b0) | (~b2 & b1 & b0)  # |d_k| = 2
        neg = b2  # d_k < 0, or d_k = -0 (all three set): ~0 + 1 = 0
        mag = Mux(one, ys, Mux(two, ys << 1, 0))
        pp = Signal(signed(wy + 1), name=f"{name}_pp{k}")
        m.d.comb += pp.eq(Mux(neg, ~mag, mag))
        part = Signal(signed(wy + 3), name=f"{name}_hi{k}")  # bits 2k.. of the running sum
        if acc is None:
            m.d.comb += part.eq(pp + neg)
            acc = part
        else:
            m.d.comb += part.eq(acc[2 * k:].as_signed() + pp + neg)
            acc = Cat(acc[:2 * k], part).as_signed()
    out = Signal(signed(width), name=name)
    m.d.comb += out.eq(acc)
    return out

"""Table-based function units in Amaranth — the gateware of :mod:`vckattn.golden.funcunits`.

The full description: ``docs/internals/hw.md``, section ``hw/pl/funcunits.py``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from vckattn.golden.funcunits import (
    Pow2Config,
    RecipConfig,
    TanhConfig,
    recip_table,
    rsqrt_octave_table,
)

from .arith import lut_multiply

__all__ = ["Pow2FracUnit", "RecipUnit", "RsqrtUnit", "TanhUnit", "leading_one", "rom"]


def rom(m: Module, name: str, table: list[int], width: int, ports: int = 2) -> tuple[Memory, list]:
    """A ROM initialised with ``table`` (unsigned ``width``-bit words) with ``ports`` synchronous
    read ports; returns the memory and its ports (``addr``, ``en``, ``data``)."""
    mem = Memory(shape=unsigned(width), depth=len(table), init=[int(v) for v in table])
    m.submodules[name] = mem
    return mem, [mem.read_port() for _ in range(ports)]


def leading_one(m: Module, x: Signal, name: str) -> Signal:
    """Combinational priority encoder: index of the most significant set bit of ``x`` (0 if x == 0)."""
    e = Signal(range(max(len(x), 2)), name=name)
    for i in range(len(x)):
        with m.If(x[i]):
            m.d.comb += e.eq(i)
    return e


class Pow2FracUnit(wiring.Component):
    """``m = 2^(f / 2^in_frac)`` in UQ1.out_frac for ``f`` in ``[0, 2^in_frac)``.

    Stage 1: ROM reads ``T[idx]``, ``T[idx+1]`` (``idx`` = top ``lut_bits`` of f), ``r`` registered.
    Stage 2: ``m = T[idx] + ((T[idx+1] - T[idx]) * r) >> rbits``.

    ``lut_product=True`` builds the same function without a DSP block: stage 1 reads ``T[idx]`` and the
    step ``D[idx] = T[idx+1] - T[idx]`` (a second ROM; the table rises, so ``D >= 0`` and the floor shift
    of the golden model is a plain one), and stage 2 forms ``D·r`` from LUTs and carry chains
    (:func:`~vckattn.hw.pl.arith.lut_multiply`).
    """

    LATENCY = 2

    def __init__(self, cfg: Pow2Config = Pow2Config(), lut_product: bool = False) -> None:
        self.cfg = cfg
        self.lut_product = lut_product
        super().__init__({"en": In(1), "f": In(cfg.in_frac), "m": Out(cfg.out_frac + 2)})

    def elaborate(self, platform: object) -> Module:
        if self.lut_product:
            return self._elaborate_lut_product()
        m = Module()
        cfg = self.cfg
        rbits = cfg.in_frac - cfg.lut_bits
        table = [int(v) for v in cfg.table()]
        _, (p0, p1) = rom(m, "table", table, cfg.out_frac + 2)
        idx = self.f >> rbits
        m.d.comb += [p0.addr.eq(idx), p1.addr.eq(idx + 1), p0.en.eq(self.en), p1.en.eq(self.en)]
        r = Signal(max(rbits, 1))
        with m.If(self.en):
            m.d.sync += r.eq(self.f[:rbits] if rbits else 0)
        base = p0.data
        diff = Signal(signed(cfg.out_frac + 3))
        m.d.comb += diff.eq(p1.data - base)  # unsigned difference reinterpreted as signed (exact width)
        interp = Signal(signed(cfg.out_frac + 3 + rbits))
        m.d.comb += interp.eq((diff * r) >> rbits)  # signed × unsigned, arithmetic shift = floor
        with m.If(self.en):
            m.d.sync += self.m.eq(base + interp if cfg.interp else base)
        return m

    def _elaborate_lut_product(self) -> Module:
        m = Module()
        cfg = self.cfg
        rbits = cfg.in_frac - cfg.lut_bits
        table = [int(v) for v in cfg.table()]
        steps = [b - a for a, b in zip(table, table[1:], strict=False)]
        if min(steps) < 0:
            raise ValueError("lut_product needs a non-decreasing 2^f table")
        _, (p0,) = rom(m, "table", table[:-1], cfg.out_frac + 2, ports=1)
        _, (pd,) = rom(m, "step", steps, max(max(steps).bit_length(), 1), ports=1)
        idx = self.f >> rbits
        m.d.comb += [p0.addr.eq(idx), pd.addr.eq(idx), p0.en.eq(self.en), pd.en.eq(self.en)]
        r = Signal(max(rbits, 1))
        with m.If(self.en):
            m.d.sync += r.eq(self.f[:rbits] if rbits else 0)
        if not (cfg.interp and rbits):
            with m.If(self.en):
                m.d.sync += self.m.eq(p0.data)
            return m
        prod = lut_multiply(m, r, pd.data, "interp")  # D·r >= 0: the golden floor shift is a plain one
        with m.If(self.en):
            m.d.sync += self.m.eq(p0.data + (prod >> rbits))
        return m


class _MantissaUnit(wiring.Component):
    """Shared body of :class:`RecipUnit` and :class:`RsqrtUnit` (see the golden ``recip``/``rsqrt``).

    Stage 1: leading-one ``e`` of x; normalized fraction ``frac`` (``mant_bits`` bits) by a
    left or right barrel shift (floor); registered with ``e``.
    Stage 2: ROM reads at ``idx`` / ``idx + 1`` (rsqrt: plus ``odd·(2^lut_bits + 1)``), ``r`` registered.
    Stage 3: interpolation, registered ``mant``; ``exp`` = e (recip) or e >> 1 (rsqrt).
    """

    LATENCY = 3

    def __init__(self, cfg: RecipConfig, in_width: int, sqrt: bool) -> None:
        self.cfg = cfg
        self.in_width = in_width
        self.sqrt = sqrt
        super().__init__({"en": In(1), "x": In(in_width), "mant": Out(cfg.out_frac + 2),
                          "exp": Out(range(in_width))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        mb, rbits = cfg.mant_bits, cfg.mant_bits - cfg.lut_bits
        table = [int(v) for v in (rsqrt_octave_table(cfg) if self.sqrt else recip_table(cfg))]
        _, (p0, p1) = rom(m, "table", table, cfg.out_frac + 2)

        # stage 1: normalize
        e = leading_one(m, self.x, "e")
        norm = Signal(mb + 1)  # x * 2^(mb - e), floor: in [2^mb, 2^(mb+1))
        with m.If(e >= mb):
            m.d.comb += norm.eq(self.x >> (e - mb).as_unsigned())
        with m.Else():
            m.d.comb += norm.eq(self.x << (mb - e).as_unsigned())
        frac1 = Signal(mb)
        e1 = Signal.like(e)
        with m.If(self.en):
            m.d.sync += [frac1.eq(norm[:mb]), e1.eq(e)]

        # stage 2: table reads
        idx = Signal(range(len(table)))
        if self.sqrt:
            m.d.comb += idx.eq((frac1 >> rbits) + Mux(e1[0], (1 << cfg.lut_bits) + 1, 0))
        else:
            m.d.comb += idx.eq(frac1 >> rbits)
        m.d.comb += [p0.addr.eq(idx), p1.addr.eq(idx + 1), p0.en.eq(self.en), p1.en.eq(self.en)]
        r2 = Signal(max(rbits, 1))
        e2 = Signal.like(e)
        with m.If(self.en):
            m.d.sync += [r2.eq(frac1[:rbits] if rbits else 0), e2.eq(e1)]

        # stage 3: interpolation (decreasing tables: diff < 0, arithmetic shift = floor)
        diff = Signal(signed(cfg.out_frac + 3))
        m.d.comb += diff.eq(p1.data - p0.data)
        interp = Signal(signed(cfg.out_frac + 3 + rbits))
        m.d.comb += interp.eq((diff * r2) >> rbits)
        with m.If(self.en):
            m.d.sync += [self.mant.eq(p0.data + interp if cfg.interp else p0.data),
                         self.exp.eq(e2 >> 1 if self.sqrt else e2)]
        return m


class RecipUnit(_MantissaUnit):
    """``1/x ≈ mant · 2^-(out_frac + exp)`` for ``x >= 1`` (``in_width`` bits). Latency 3."""

    def __init__(self, cfg: RecipConfig = RecipConfig(), in_width: int = 34) -> None:
        super().__init__(cfg, in_width, sqrt=False)


class RsqrtUnit(_MantissaUnit):
    """``1/sqrt(x) ≈ mant · 2^-(out_frac + exp)`` for ``x >= 1`` (``in_width`` bits). Latency 3."""

    def __init__(self, cfg: RecipConfig = RecipConfig(mant_bits=14, lut_bits=6, out_frac=15),
                 in_width: int = 40) -> None:
        super().__init__(cfg, in_width, sqrt=True)


class TanhUnit(wiring.Component):
    """``y = tanh(a / 2^in_frac)`` as signed Q1.out_frac for a signed ``in_width``-bit ``a``.

    Stage 1: ``|a|``, saturation flag (``|a| > 2^(in_frac + range_log2) - 1``), clamp; sign kept.
    Stage 2: ROM reads at ``idx``, ``idx + 1``; ``r`` registered.
    Stage 3: interpolation; saturated inputs take the last entry; sign restored.
    """

    LATENCY = 3

    def __init__(self, cfg: TanhConfig = TanhConfig(), in_width: int = 24) -> None:
        self.cfg = cfg
        super().__init__({"en": In(1), "a": In(signed(in_width)), "y": Out(signed(cfg.out_frac + 2))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        table = [int(v) for v in cfg.table()]
        _, (p0, p1) = rom(m, "table", table, cfg.out_frac + 1)
        top = (1 << (cfg.in_frac + cfg.range_log2)) - 1
        rbits = cfg.in_frac + cfg.range_log2 - cfg.lut_bits

        mag = Signal(len(self.a) + 1)
        m.d.comb += mag.eq(Mux(self.a < 0, -self.a, self.a))
        mag1 = Signal(range(top + 1))
        sat1, neg1 = Signal(), Signal()
        with m.If(self.en):
            m.d.sync += [sat1.eq(mag > top), neg1.eq(self.a < 0), mag1.eq(Mux(mag > top, top, mag))]

        m.d.comb += [p0.addr.eq(mag1 >> rbits), p1.addr.eq((mag1 >> rbits) + 1),
                     p0.en.eq(self.en), p1.en.eq(self.en)]
        r2 = Signal(max(rbits, 1))
        sat2, neg2 = Signal(), Signal()
        with m.If(self.en):
            m.d.sync += [r2.eq(mag1[:rbits] if rbits else 0), sat2.eq(sat1), neg2.eq(neg1)]

        diff = Signal(signed(cfg.out_frac + 2))
        m.d.comb += diff.eq(p1.data - p0.data)
        y = Signal(signed(cfg.out_frac + 2))
        m.d.comb += y.eq(Mux(sat2, table[-1], p0.data + ((diff * r2) >> rbits) if cfg.interp else p0.data))
        with m.If(self.en):
            m.d.sync += self.y.eq(Mux(neg2, -y, y))
        return m

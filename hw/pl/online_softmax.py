"""Online-softmax normalizer kernel (the baseline SwiftMax replaces): two passes over a row buffer.

The full description: ``docs/internals/hw.md``, section ``hw/pl/online_softmax.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from vckattn.golden.funcunits import Pow2Config
from vckattn.golden.online_softmax_int import (
    NEG_SENTINEL,
    ONLINE_SOFTMAX_ID,
    OnlineSoftmaxFormat,
    online_softmax_regmap,
)

from .axil import RegisterFile, axil_members
from .funcunits import Pow2FracUnit, RecipUnit
from .pipeline import StallPipeline, axis_port

__all__ = [
    "ONLINE_SOFTMAX_ID",
    "OnlineSoftmaxGeometry",
    "OnlineSoftmaxKernel",
    "buffer_bits",
    "online_softmax_regmap",
]

IN_WIDTH = 32
#: Pass-1 stages from the input handshake to the descriptor push.
PASS1_LATENCY = 13
#: Pass-2 stage registers (the output skid buffer adds one more cycle).
PASS2_LATENCY = 8


def _ceil_shift(x: int, f: int) -> int:
    return -((-x) >> f)


@dataclass(frozen=True)
class OnlineSoftmaxGeometry:
    """Widths and sizes derived from ``(lanes, max_keys, fmt)`` (all Python ints)."""

    lanes: int
    max_keys: int
    fmt: OnlineSoftmaxFormat

    def __post_init__(self) -> None:
        if self.lanes < 1:
            raise ValueError("lanes must be >= 1")
        if self.max_keys < self.lanes or self.max_keys % self.lanes:
            raise ValueError(f"max_keys ({self.max_keys}) must be a positive multiple of lanes ({self.lanes})")
        if self.max_keys > self.fmt.max_keys():
            raise ValueError(f"max_keys {self.max_keys} exceeds the format's {self.fmt.max_keys()} (sum_bits)")
        if self.fmt.pow2.in_frac != self.fmt.t_frac:
            raise ValueError("the 2^f unit's in_frac must equal t_frac")

    @property
    def max_beats(self) -> int:
        return self.max_keys // self.lanes

    @property
    def depth(self) -> int:
        """Row buffer depth in beats (two rows of ``max_keys``)."""
        return 2 * self.max_beats

    @property
    def prod_range(self) -> tuple[int, int]:
        f = self.fmt
        acc = (-(1 << (f.acc_bits - 1)), (1 << (f.acc_bits - 1)) - 1)
        mul = (-(1 << (f.a_bits - 1)), (1 << (f.a_bits - 1)) - 1)
        ps = [x * y for x in acc for y in mul]
        return min(ps), max(ps)

    @property
    def u_zero_shift(self) -> int:
        """Smallest a_shift for which round_half_up(prod >> a_shift) is 0 for every prod."""
        lo, hi = self.prod_range
        s = 1
        while not (-(1 << (s - 1)) <= lo and hi < (1 << (s - 1))):
            s += 1
        return s

    @property
    def sentinel_ceil(self) -> int:
        return _ceil_shift(NEG_SENTINEL, self.fmt.t_frac)

    @property
    def m_range(self) -> tuple[int, int]:
        lo, hi = self.prod_range
        f = self.fmt.t_frac
        return min(self.sentinel_ceil, _ceil_shift(lo, f)), max(self.sentinel_ceil, _ceil_shift(hi, f))

    @property
    def pow2_zero_shift(self) -> int:
        """Right shift from which golden ``pow2`` rounds the UQ1.out_frac mantissa (<= 2^(cf+1)) to 0."""
        return self.fmt.pow2.out_frac + 3

    @property
    def step_max(self) -> int:
        """Saturation of the per-beat max step / of ``m_row - m'_b`` in pass 2 (a power of two).

        ``t <= -step_max·2^F`` must give pow2 = 0 in pass 2 (out_frac = pow2.out_frac) and in
        pass 1 (out_frac = sum_frac): right shifts of at least ``pow2.out_frac + 3``.
        """
        s = 1
        while s < max(self.pow2_zero_shift, self.fmt.sum_frac + 3):
            s *= 2
        return s

    @property
    def step_bits(self) -> int:
        return self.step_max.bit_length()

    @property
    def a_bits(self) -> int:
        """Bits of the stored ``a = min(-t, 2^a_bits - 1)``."""
        return self.fmt.t_frac + self.step_max.bit_length() - 1

    @property
    def word_bits(self) -> int:
        """Row buffer word (one beat): lanes × (a + keep) + step."""
        return self.lanes * (self.a_bits + 1) + self.step_bits

    @property
    def l_bits(self) -> int:
        """Width of the running sum: holds ``max_keys · 2^sum_frac``."""
        return (self.max_keys << self.fmt.sum_frac).bit_length()

    @property
    def total_bits(self) -> int:
        return (self.step_max * self.max_beats).bit_length()


def buffer_bits(lanes: int, max_keys: int = 1024, fmt: OnlineSoftmaxFormat | None = None) -> int:
    """Row buffer bits (both halves of the ping-pong/circular buffer) of :class:`OnlineSoftmaxKernel`."""
    fmt = replace(fmt or OnlineSoftmaxFormat(), block=lanes)
    g = OnlineSoftmaxGeometry(lanes, max_keys, fmt)
    return g.depth * g.word_bits


def _pow2_shifts(m: Module, n: Value, cfg: Pow2Config, out_frac: int, out_max: int,
                 name: str) -> tuple[Signal, Signal]:
    """Golden ``pow2`` shift for integer exponent part ``n`` as (left, right) amounts.

    ``shift = cfg.out_frac - min(n + out_frac, cap)``; shifts >= ``cfg.out_frac + 3`` all give 0
    (the mantissa is <= 2^(cfg.out_frac + 1)), so the right amount saturates there.
    """
    cap = out_max.bit_length() + 1
    cf = cfg.out_frac
    zero_s = cf + 3
    s_lo = cf - cap
    left = Signal(range(max(-s_lo, 1) + 1), name=f"{name}_sl")
    right = Signal(range(zero_s + 1), name=f"{name}_sr")
    nn = Signal(signed(len(n) + 2), name=f"{name}_nn")
    s = Signal(signed(max((zero_s + 1).bit_length(), (-s_lo).bit_length()) + 2), name=f"{name}_s")
    m.d.comb += nn.eq(n + out_frac)
    with m.If(nn >= cap):
        m.d.comb += s.eq(s_lo)
    with m.Elif(nn <= cf - zero_s):
        m.d.comb += s.eq(zero_s)
    with m.Else():
        m.d.comb += s.eq(cf - nn)
    m.d.comb += [left.eq(Mux(s < 0, -s, 0)), right.eq(Mux(s > 0, s, 0))]
    return left, right


def _shift_half_up(x: Value, left: Value, right: Value) -> Value:
    """``shift_round(x, right - left, "half_up")`` for unsigned x with one of left/right zero."""
    return ((x << left) + ((1 << right) >> 1)) >> right


class OnlineSoftmaxKernel(wiring.Component):
    """Online-softmax normalizer (Softermax-style two-pass), ``lanes`` scores per beat.

    Ports: ``s_axis_tdata[lanes*in_width]``, ``s_axis_tuser[lanes]``, ``s_axis_tlast``,
    ``s_axis_tvalid``, ``s_axis_tready``; ``m_axis_tdata[lanes*8]``, ``m_axis_tuser[lanes]``,
    ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; AXI4-Lite ``s_axil_*``; ``clk``, ``rst``.

    Args:
        lanes: Scores per beat (= the golden ``block``).
        max_keys: Longest row handled exactly (a multiple of ``lanes``); the row buffer holds
            two such rows.
        in_width: Input score width (signed; saturated to ``fmt.acc_bits``).
        max_rows: Rows that may be between the input and pass 2 at once (descriptor FIFO).
        fmt: Golden format (``block`` is set to ``lanes``).
        axil: Own AXI4-Lite register file (default). ``False``: no ``s_axil_*``; the writable registers are
            inputs (``a_mult``, ``a_shift``) and the status outputs (``rows``, ``overflow_rows``), for a top that
            holds the registers (the engine's PL top).
    """

    def __init__(self, lanes: int = 4, max_keys: int = 1024, in_width: int = IN_WIDTH, *, max_rows: int = 8,
                 fmt: OnlineSoftmaxFormat | None = None, axil: bool = True) -> None:
        fmt = replace(fmt or OnlineSoftmaxFormat(), block=lanes)
        self.geom = OnlineSoftmaxGeometry(lanes, max_keys, fmt)  # validates lanes/max_keys/fmt
        if in_width < 2 or max_rows < 1:
            raise ValueError("need in_width >= 2 and max_rows >= 1")
        self.lanes, self.max_keys, self.in_width, self.max_rows = lanes, max_keys, in_width, max_rows
        self.fmt = fmt
        self.regmap = online_softmax_regmap(max_keys)
        self.axil = axil
        self.regfile = RegisterFile(self.regmap) if axil else None
        regs: dict[str, wiring.Member] = (axil_members("s_axil", self.regmap.addr_width) if axil else {
            "a_mult": In(signed(fmt.a_bits)), "a_shift": In(6), "rows": Out(32), "overflow_rows": Out(32)})
        super().__init__({
            **axis_port("s_axis", lanes * in_width, sink=True, user_width=lanes),
            **axis_port("m_axis", lanes * fmt.out_bits, sink=False, user_width=lanes),
            **regs,
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        g, fmt, n = self.geom, self.fmt, self.lanes
        F, iw = fmt.t_frac, self.in_width
        if self.regfile is not None:
            m.submodules.regs = regs = self.regfile
            regs.connect_axil(m, self)
            a_mult, a_shift = regs.reg["a_mult"], regs.reg["a_shift"]
            status = regs.reg
        else:
            a_mult, a_shift = self.a_mult, self.a_shift
            status = {"rows": self.rows, "overflow_rows": self.overflow_rows}

        def R(value: object, name: str, *, reset: bool = False) -> Signal:
            """Free-running pass-1 register (no stall)."""
            v = Value.cast(value)
            r = Signal(v.shape(), name=name, reset_less=not reset)
            m.d.sync += r.eq(v)
            return r

        def chain(value: object, name: str, stages: int, *, reset: bool = False) -> list[Value]:
            out = [Value.cast(value)]
            for k in range(1, stages + 1):
                out.append(R(out[-1], f"{name}{k}", reset=reset))
            return out

        # ------------------------------------------------------------------ storage
        word = data.StructLayout({
            "a": data.ArrayLayout(unsigned(g.a_bits), n),
            "keep": unsigned(n),
            "step": unsigned(g.step_bits),
        })
        assert word.size == g.word_bits
        m.submodules.rowbuf = rowbuf = Memory(shape=word, depth=g.depth, init=[])
        wport = rowbuf.write_port()
        rport = rowbuf.read_port(domain="sync")
        lmax_exp = g.l_bits
        desc = data.StructLayout({
            "rmant": unsigned(fmt.recip.out_frac + 2),
            "rexp": Shape.cast(range(lmax_exp)),
            "zero": unsigned(1),
            "total": unsigned(g.total_bits),
            "beats": unsigned(32),
        })
        m.submodules.dfifo = dfifo = SyncFIFOBuffered(width=desc.size, depth=self.max_rows + 1)

        def wrap_inc(p: Signal) -> Value:
            return Mux(p == g.depth - 1, 0, p + 1)

        # ------------------------------------------------------------------ input admission
        in_row = Signal()  # a beat of the current row was accepted, its TLAST not yet
        idx0 = Signal(range(g.max_beats + 1))  # beats of the current row accepted, saturating
        rif = Signal(range(self.max_rows + 1))  # rows admitted whose descriptor is not yet popped
        reserved = Signal(range(g.depth + 1))  # row buffer slots taken (admitted beats not yet read)
        store0 = Signal()
        first0 = Signal()
        tready = Signal()
        in_fire = Signal()
        m.d.comb += [
            store0.eq(idx0 < g.max_beats),
            first0.eq(~in_row),
            tready.eq((in_row | (rif < self.max_rows)) & (~store0 | (reserved < g.depth))),
            self.s_axis_tready.eq(tready),
            in_fire.eq(self.s_axis_tvalid & tready),
        ]
        with m.If(in_fire):
            m.d.sync += [
                in_row.eq(~self.s_axis_tlast),
                idx0.eq(Mux(self.s_axis_tlast, 0, Mux(store0, idx0 + 1, idx0))),
            ]

        # ------------------------------------------------------------------ pass 1
        v = chain(in_fire, "p1_valid", PASS1_LATENCY, reset=True)
        first = chain(first0, "p1_first", 9)
        last = chain(self.s_axis_tlast, "p1_last", 9)
        store = chain(store0, "p1_store", 5)
        keep = chain(self.s_axis_tuser, "p1_keep", 8)

        # P1: saturate, multiply
        amax = (1 << (fmt.acc_bits - 1)) - 1
        lo, hi = g.prod_range
        prod_shape = Shape.cast(range(lo, hi + 1))
        prod1 = []
        for i in range(n):
            x = self.s_axis_tdata[i * iw:(i + 1) * iw].as_signed()
            sat = Signal(signed(fmt.acc_bits), name=f"p1_sat{i}")
            m.d.comb += sat.eq(Mux(x > amax, amax, Mux(x < -amax - 1, -amax - 1, x)))
            p = Signal(prod_shape, name=f"p1_prod{i}", reset_less=True)
            m.d.sync += p.eq(sat * a_mult)
            prod1.append(p)

        # P2: u = round_half_up(prod >> a_shift)
        u2 = []
        for i in range(n):
            full = Signal(signed(len(prod1[i]) + 2), name=f"p1_usum{i}")
            m.d.comb += full.eq((prod1[i] + ((1 << a_shift) >> 1)) >> a_shift)
            u = Signal(prod_shape, name=f"p1_u2_{i}", reset_less=True)
            m.d.sync += u.eq(Mux(a_shift >= g.u_zero_shift, 0, full))
            u2.append(u)

        # P3: block max of ceil(u / 2^F) over lanes, masked lanes = ceil(S / 2^F)
        m_lo, m_hi = g.m_range
        m_shape = Shape.cast(range(m_lo, m_hi + 1))
        cands = []
        for i in range(n):
            c = Signal(m_shape, name=f"p1_ceil{i}")
            m.d.comb += c.eq(Mux(keep[2][i], (u2[i] + ((1 << F) - 1)) >> F, g.sentinel_ceil))
            cands.append(c)
        while len(cands) > 1:
            nxt = []
            for j in range(0, len(cands) - 1, 2):
                mx = Signal(m_shape, name=f"p1_max{len(cands)}_{j}")
                m.d.comb += mx.eq(Mux(cands[j] >= cands[j + 1], cands[j], cands[j + 1]))
                nxt.append(mx)
            if len(cands) % 2:
                nxt.append(cands[-1])
            cands = nxt
        mb3 = R(cands[0], "p1_mb3")
        u3 = [R(u2[i], f"p1_u3_{i}") for i in range(n)]

        # P4: running max and step (state: only updated by valid beats)
        m4 = Signal(m_shape, name="p1_m4")
        d4 = Signal(range(64), name="p1_d4")
        diff = Signal(signed(m_shape.width + 2), name="p1_mdiff")
        m.d.comb += diff.eq(mb3 - m4)
        with m.If(v[3]):
            m.d.sync += [
                m4.eq(Mux(first[3] | (diff > 0), mb3, m4)),
                d4.eq(Mux(first[3] | (diff <= 0), 0, Mux(diff >= 63, 63, diff))),
            ]
        u4 = [R(u3[i], f"p1_u4_{i}") for i in range(n)]

        # P5: t = u - m'·2^F; step prefix sum; row buffer write; 2^f table input
        # Kept lanes have t <= 0; t <= -2^a_bits gives pow2 = 0 here and in pass 2, so t is
        # clamped to [-2^a_bits, 0] (masked lanes: don't care).
        t_min = -(1 << g.a_bits)
        t5 = []
        for i in range(n):
            tf = Signal(signed(len(u4[i]) + m_shape.width + F + 2), name=f"p1_tfull{i}")
            m.d.comb += tf.eq(u4[i] - (m4 << F))
            tc = Signal(range(t_min, 1), name=f"p1_tclamp{i}")
            m.d.comb += tc.eq(Mux(tf < t_min, t_min, Mux(tf > 0, 0, tf)))
            t5.append(R(tc, f"p1_t5_{i}"))
        step5 = R(Mux(d4 > g.step_max, g.step_max, d4), "p1_step5")
        pfx5 = Signal(range(g.step_max * g.max_beats + 1), name="p1_prefix5")
        with m.If(v[4]):
            m.d.sync += pfx5.eq(Mux(first[4], 0, pfx5) + Mux(d4 > g.step_max, g.step_max, d4))
        wr_ptr = Signal(range(g.depth), name="wr_ptr")
        amax_st = (1 << g.a_bits) - 1
        for i in range(n):
            neg = Signal(signed(len(t5[i]) + 1), name=f"p1_negt{i}")
            m.d.comb += neg.eq(-t5[i])
            m.d.comb += wport.data.a[i].eq(Mux(neg < 0, 0, Mux(neg > amax_st, amax_st, neg)))
        m.d.comb += [
            wport.data.keep.eq(keep[5]),
            wport.data.step.eq(step5),
            wport.addr.eq(wr_ptr),
            wport.en.eq(v[5] & store[5]),
        ]
        with m.If(v[5] & store[5]):
            m.d.sync += wr_ptr.eq(wrap_inc(wr_ptr))

        # P6-P8: 2^f, shift, mask
        sum_max = 1 << fmt.sum_frac
        e8 = []
        for i in range(n):
            pu = Pow2FracUnit(fmt.pow2)
            m.submodules[f"p1_pow2_{i}"] = pu
            m.d.comb += [pu.en.eq(1), pu.f.eq(t5[i][:F])]
            sl, sr = _pow2_shifts(m, t5[i] >> F, fmt.pow2, fmt.sum_frac, sum_max, f"p1_{i}")
            sl7 = R(R(sl, f"p1_sl6_{i}"), f"p1_sl7_{i}")
            sr7 = R(R(sr, f"p1_sr6_{i}"), f"p1_sr7_{i}")
            q = Signal(unsigned(len(pu.m) + len(sl7) + 2 ** len(sl7)), name=f"p1_q{i}")
            m.d.comb += q.eq(_shift_half_up(pu.m, sl7, sr7))
            e = Signal(range(sum_max + 1), name=f"p1_e8_{i}", reset_less=True)
            m.d.sync += e.eq(Mux(keep[7][i], Mux(q > sum_max, sum_max, q), 0))
            e8.append(e)

        # P9: lane sum;  P10: l = (l >> d) + s
        s9 = R(sum(e8[1:], e8[0]), "p1_s9")
        d = chain(d4, "p1_d", 5)  # d[5] = d9 (d4 is stage 4)
        d9 = d[5]
        lsum = Signal(g.l_bits, name="p1_l")
        cnt = Signal(32, name="p1_beats")
        with m.If(v[9]):
            m.d.sync += [
                lsum.eq(Mux(first[9], 0, lsum >> d9) + s9),
                cnt.eq(Mux(first[9], 1, cnt + 1)),
            ]
        rd10 = R(v[9] & last[9], "p1_rowdone10", reset=True)
        tot = chain(pfx5, "p1_tot", 8)  # tot[5] = stage 10, tot[8] = stage 13

        # P11-P13: reciprocal, descriptor
        m.submodules.recip = rcp = RecipUnit(fmt.recip, in_width=g.l_bits)
        m.d.comb += [rcp.en.eq(1), rcp.x.eq(lsum)]
        rd = chain(rd10, "p1_rowdone1", 3, reset=True)
        z11 = R((lsum == 0) | (cnt > g.max_beats), "p1_zero11")
        z13 = R(R(z11, "p1_zero12"), "p1_zero13")
        nb13 = R(R(R(cnt, "p1_nb11"), "p1_nb12"), "p1_nb13")
        wdesc = data.View(desc, dfifo.w_data)
        m.d.comb += [
            wdesc.rmant.eq(rcp.mant),
            wdesc.rexp.eq(rcp.exp),
            wdesc.zero.eq(z13),
            wdesc.total.eq(tot[8]),
            wdesc.beats.eq(nb13),
            dfifo.w_en.eq(rd[3]),
        ]
        overflow_rows = Signal(32)
        with m.If(rd[3] & (nb13 > g.max_beats)):
            m.d.sync += overflow_rows.eq(overflow_rows + 1)
        m.d.comb += status["overflow_rows"].eq(overflow_rows)

        # ------------------------------------------------------------------ pass 2
        ob = fmt.out_bits
        m.submodules.pipe = pipe = StallPipeline(PASS2_LATENCY, n * ob, user_width=n, user_passthrough=False)
        ce = pipe.ce
        head = data.View(desc, dfifo.r_data)
        idx = Signal(32, name="p2_idx")
        rd_ptr = Signal(range(g.depth), name="rd_ptr")
        last0 = Signal()
        stored0 = Signal()
        m.d.comb += [
            last0.eq(idx == head.beats - 1),
            stored0.eq(idx < g.max_beats),
            pipe.in_valid.eq(dfifo.r_rdy),
            pipe.in_last.eq(last0),
            dfifo.r_en.eq(pipe.in_fire & last0),
            rport.addr.eq(rd_ptr),
            rport.en.eq(ce),
            self.m_axis_tdata.eq(pipe.m_axis_tdata),
            self.m_axis_tuser.eq(pipe.m_axis_tuser),
            self.m_axis_tvalid.eq(pipe.m_axis_tvalid),
            self.m_axis_tlast.eq(pipe.m_axis_tlast),
            pipe.m_axis_tready.eq(self.m_axis_tready),
        ]
        with m.If(pipe.in_fire):
            m.d.sync += idx.eq(Mux(last0, 0, idx + 1))
        issue_stored = Signal()
        m.d.comb += issue_stored.eq(pipe.in_fire & stored0)
        with m.If(issue_stored):
            m.d.sync += rd_ptr.eq(wrap_inc(rd_ptr))

        # admission bookkeeping (pass 1 and pass 2 both touch the counters)
        pop = Signal()
        m.d.comb += pop.eq(dfifo.r_en & dfifo.r_rdy)
        m.d.sync += [
            rif.eq(rif + (in_fire & first0) - pop),
            reserved.eq(reserved + (in_fire & store0) - issue_stored),
        ]

        # S1: buffer word; row constants ride along
        stored1 = pipe.reg(m, stored0, "p2_stored1")
        first1 = pipe.reg(m, idx == 0, "p2_first1")
        zero1 = pipe.reg(m, head.zero, "p2_zero1")
        rmant1 = pipe.reg(m, head.rmant, "p2_rmant1")
        rexp1 = pipe.reg(m, head.rexp, "p2_rexp1")
        tot1 = pipe.reg(m, head.total, "p2_tot1")
        keep1 = Signal(n, name="p2_keep1")
        m.d.comb += keep1.eq(Mux(stored1, rport.data.keep, 0))

        # S2: prefix of steps, D = min(step_max, total - prefix)
        pfx = Signal(range(g.step_max * g.max_beats + 1), name="p2_prefix")
        pfx_n = Signal.like(pfx, name="p2_prefix_next")
        m.d.comb += pfx_n.eq(Mux(first1, 0, pfx) + rport.data.step)
        with m.If(ce & pipe.valid[1]):
            m.d.sync += pfx.eq(pfx_n)
        rem = Signal(signed(len(pfx) + 2), name="p2_rem")
        m.d.comb += rem.eq(tot1 - pfx_n)
        dd2 = pipe.reg(m, Mux(rem < 0, 0, Mux(rem > g.step_max, g.step_max, rem)).as_unsigned()[:g.step_bits],
                       "p2_D2")
        a2 = [pipe.reg(m, rport.data.a[i], f"p2_a2_{i}") for i in range(n)]
        keep2 = pipe.reg(m, keep1, "p2_keep2")

        def carry(sig: Value, name: str, frm: int, to: int) -> Value:
            for k in range(frm + 1, to + 1):
                sig = pipe.reg(m, sig, f"{name}{k}")
            return sig

        # S3: t = -(a + D·2^F)
        t3 = []
        for i in range(n):
            t = Signal(signed(g.a_bits + 3), name=f"p2_t3_{i}")
            m.d.comb += t.eq(-(a2[i] + (dd2 << F)))
            t3.append(pipe.reg(m, t, f"p2_t3r_{i}"))

        # S4-S5: 2^f table; S6: e2 = pow2(t), out_frac = pow2.out_frac, clip 2^out_frac
        cf = fmt.pow2.out_frac
        e6 = []
        for i in range(n):
            pu = Pow2FracUnit(fmt.pow2)
            m.submodules[f"p2_pow2_{i}"] = pu
            m.d.comb += [pu.en.eq(ce), pu.f.eq(t3[i][:F])]
            sl, sr = _pow2_shifts(m, t3[i] >> F, fmt.pow2, cf, 1 << cf, f"p2_{i}")
            sl5 = carry(sl, f"p2_sl{i}_", 3, 5)
            sr5 = carry(sr, f"p2_sr{i}_", 3, 5)
            q = Signal(unsigned(len(pu.m) + 2 ** len(sl5) + 1), name=f"p2_q{i}")
            m.d.comb += q.eq(_shift_half_up(pu.m, sl5, sr5))
            e6.append(pipe.reg(m, Mux(q > (1 << cf), 1 << cf, q)[:cf + 1], f"p2_e6_{i}"))

        # S7: e2 · r_mant;  S8: round, clip, mask
        rmant6 = carry(rmant1, "p2_rmant", 1, 6)
        rexp7 = carry(rexp1, "p2_rexp", 1, 7)
        zero7 = carry(zero1, "p2_zero", 1, 7)
        keep7 = carry(keep2, "p2_keep", 2, 7)
        prod7 = [pipe.reg(m, e6[i] * rmant6, f"p2_prod7_{i}") for i in range(n)]
        c_shift = fmt.pow2.out_frac + fmt.recip.out_frac - fmt.sum_frac - fmt.out_frac
        right = Signal(range(max(c_shift, 0) + lmax_exp + 1), name="p2_right")
        if c_shift >= 0:
            left: Value = Const(0, 1)
            m.d.comb += right.eq(rexp7 + c_shift)
        else:  # only for l < 2^-c_shift (r_exp < -c_shift): general formats
            left = Signal(range(-c_shift + 1), name="p2_left")
            m.d.comb += [right.eq(Mux(rexp7 >= -c_shift, rexp7 + c_shift, 0)),
                         left.eq(Mux(rexp7 < -c_shift, -c_shift - rexp7, 0))]
        outs = []
        if fmt.p_rounding == "nearest":
            for i in range(n):
                q = Signal(unsigned(len(prod7[i]) + 2 ** len(left) + 1), name=f"p2_pq{i}")
                m.d.comb += q.eq(_shift_half_up(prod7[i], left, right))
                p = Mux(q > fmt.out_max, fmt.out_max, q)[:ob]
                outs.append(pipe.reg(m, Mux(keep7[i] & ~zero7, p, 0), f"p2_p8_{i}"))
        else:
            # cumulative: p_k = Q_k - Q_(k-1), Q_k = (w_in + x_0 + ... + x_k) << left >> right, where the carry w
            # holds the low `right` bits of the row's rounded running sum (w = 2^(right-1) at the row's start: the
            # half of round-half-up); x = 0 for masked lanes, so they output 0
            first7 = carry(first1, "p2_first", 1, 7)
            w = Signal(unsigned(max(c_shift, 0) + lmax_exp), name="p2_carry")  # < 2^right
            half = Signal.like(w, name="p2_half")
            m.d.comb += half.eq((Const(1, 1) << right) >> 1)
            acc = Signal(unsigned(max(len(w), len(prod7[0])) + n.bit_length() + 1), name="p2_acc_in")
            m.d.comb += acc.eq(Mux(first7, half, w))
            q_prev: Value = Const(0, 1)
            for i in range(n):
                x = Mux(keep7[i] & ~zero7, prod7[i], 0)
                nxt = Signal.like(acc, name=f"p2_acc{i}")
                m.d.comb += nxt.eq(acc + x)
                q = Signal(unsigned(len(nxt) + 2 ** len(left)), name=f"p2_pq{i}")
                m.d.comb += q.eq((nxt << left) >> right)
                d = Signal(unsigned(len(q)), name=f"p2_pd{i}")
                m.d.comb += d.eq(q - q_prev)  # >= 0: the running sum only grows
                p = Mux(d > fmt.out_max, fmt.out_max, d)[:ob]
                outs.append(pipe.reg(m, p, f"p2_p8_{i}"))
                acc, q_prev = nxt, q
            with m.If(ce & pipe.valid[7]):
                m.d.sync += w.eq(acc & ((Const(1, 1) << right) - 1))
        keep8 = pipe.reg(m, keep7, "p2_keep8")
        m.d.comb += [pipe.out_data.eq(Cat(*outs)), pipe.out_user.eq(keep8)]

        # status
        rows = Signal(32)
        with m.If(self.m_axis_tvalid & self.m_axis_tready & self.m_axis_tlast):
            m.d.sync += rows.eq(rows + 1)
        m.d.comb += status["rows"].eq(rows)
        return m

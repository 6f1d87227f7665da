"""Token-buffered two-pass engine shared by the norm kernels that reduce their own input.

The full description: ``docs/internals/hw.md``, section ``hw/pl/token_engine.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value, unsigned
from amaranth.lib import memory, wiring

from vckattn.golden.bhyt_int import NormFormat, check_token_geometry

from .axil import RegisterFile, RegisterMap, axil_members
from .pipeline import StallPipeline, axis_port

__all__ = ["IN_WIDTH", "TokenNormKernel", "stat_bits_needed", "token_buffer_bits"]

IN_WIDTH = 8  # int8 input elements


def token_buffer_bits(lanes: int = 4, max_d: int = 1024) -> int:
    """Bits of the ping-pong token memory: two buffers of ``max_d`` int8 elements."""
    check_token_geometry(lanes, max_d)
    return 2 * max_d * IN_WIDTH


def stat_bits_needed(max_d: int) -> int:
    """Bits of ``S = Σ q²`` over at most ``max_d`` int8 values (``|q| <= 128``)."""
    return (max_d * (1 << 14)).bit_length()


class TokenNormKernel(wiring.Component):
    """Base of the token-buffered norm kernels (see the module docstring).

    A subclass sets ``SCALE_LATENCY`` / ``LANE_LATENCY`` (of its scale unit and lanes), builds
    its :class:`RegisterMap` (``_make_regmap``) and its datapath (``_datapath``).

    Ports: ``s_axis_tdata[lanes*8]`` (int8 elements), ``s_axis_tlast``, ``s_axis_tvalid``,
    ``s_axis_tready``; ``m_axis_tdata[lanes*8]`` (int8), ``m_axis_tlast``, ``m_axis_tvalid``,
    ``m_axis_tready`` and, if ``user_width``, ``m_axis_tuser[user_width]`` (the token's ``S``
    zero-extended, on every beat); the AXI4-Lite slave ``s_axil_*``; ``clk``, ``rst``.

    Args:
        lanes: Elements per beat (>= 1).
        max_d: Longest token (elements); a multiple of ``lanes``. Depth of ``γ`` and of each
            token buffer (``max_d/lanes`` beats).
        fmt: Number formats of the golden model.
        user_width: Width of ``m_axis_tuser`` carrying ``S`` (0: no TUSER).
    """

    SCALE_LATENCY = 0  # stage of the scale unit's output (= of q and gamma at the lanes' inputs)
    LANE_LATENCY = 0
    LATENCY = 0  # SCALE_LATENCY + LANE_LATENCY: pass-2 stage registers (beat issue -> output: LATENCY + 1)

    def __init__(self, lanes: int, max_d: int, fmt: NormFormat, user_width: int = 0) -> None:
        check_token_geometry(lanes, max_d)
        assert self.LATENCY == self.SCALE_LATENCY + self.LANE_LATENCY and self.SCALE_LATENCY >= 2
        self.lanes, self.max_d, self.fmt = lanes, max_d, fmt
        self.max_beats = max_d // lanes
        self.user_width = user_width
        self.stat_width = stat_bits_needed(max_d)
        if self.stat_width > fmt.stat_bits:
            raise ValueError(f"S of {max_d} int8 values needs {self.stat_width} bits > stat_bits {fmt.stat_bits}")
        self.regmap = self._make_regmap(lanes, max_d, fmt)
        self.regfile = RegisterFile(self.regmap)
        super().__init__({
            **axis_port("s_axis", lanes * IN_WIDTH, sink=True),
            **axis_port("m_axis", lanes * fmt.out_bits, sink=False, user_width=user_width),
            **axil_members("s_axil", self.regmap.addr_width),
        })

    def token_latency(self, d: int) -> int:
        """Cycles from a token's first input handshake to its first output handshake when its
        beats arrive back to back into an idle kernel: ``ceil(d/lanes) + LATENCY + 1``."""
        return -(-min(d, self.max_d) // self.lanes) + self.LATENCY + 1

    # ---------------- subclass hooks ----------------

    def _make_regmap(self, lanes: int, max_d: int, fmt: NormFormat) -> RegisterMap:
        raise NotImplementedError

    def _datapath(self, m: Module, regs: RegisterFile, pipe: StallPipeline, stat: Value, q: Value,
                  g: list[Value]) -> list[Value]:
        """Build the scale unit and lanes. ``stat``: ``S`` of the stage-0 beat (stat_bits);
        ``q``: the beat's TDATA at stage ``SCALE_LATENCY``; ``g[i]``: ``γ`` of lane ``i`` at stage
        ``SCALE_LATENCY``. Returns the lanes' int8 outputs at stage ``LATENCY``; every register
        must be enabled by ``pipe.ce``."""
        raise NotImplementedError

    # ---------------- the engine ----------------

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, fmt, nb = self.lanes, self.fmt, self.max_beats
        sl = self.SCALE_LATENCY
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        reg = regs.reg
        m.submodules.pipe = pipe = StallPipeline(self.LATENCY, n * fmt.out_bits, user_width=self.user_width)

        # ---- token memory: 2 buffers x nb beats (buffer 1 at words nb..2nb-1)
        tokmem = memory.Memory(shape=unsigned(n * IN_WIDTH), depth=2 * nb, init=[])
        m.submodules.tokmem = tokmem
        wport = tokmem.write_port()
        rport = tokmem.read_port()

        sw = self.stat_width
        full = Signal(2)  # buffer k holds a complete token not yet fully issued
        stat_buf = [Signal(sw, name=f"stat_buf{k}") for k in range(2)]
        last_buf = [Signal(range(nb), name=f"last_buf{k}") for k in range(2)]

        # ---------------- pass 1: writer ----------------
        wsel = Signal()
        wb = Signal(range(nb + 1))  # beat index in the token; saturates at nb (overlong token)
        acc = Signal(sw)
        tokens = Signal(32)
        overlong = Signal(32)
        m.d.comb += [reg["tokens"].eq(tokens), reg["overlong"].eq(overlong)]

        in_ready = Signal()
        in_fire = Signal()
        m.d.comb += [
            in_ready.eq(~full.bit_select(wsel, 1)),
            self.s_axis_tready.eq(in_ready),
            in_fire.eq(self.s_axis_tvalid & in_ready),
        ]
        qs = [self.s_axis_tdata[i * IN_WIDTH:(i + 1) * IN_WIDTH].as_signed() for i in range(n)]
        beat_sq = Signal(2 * IN_WIDTH + (n - 1).bit_length())
        m.d.comb += beat_sq.eq(sum((q * q).as_unsigned() for q in qs))
        in_range = Signal()
        m.d.comb += in_range.eq(wb < nb)
        add = Mux(in_range, beat_sq, 0)
        m.d.comb += [
            wport.addr.eq(Mux(wsel, wb + nb, wb)),
            wport.data.eq(self.s_axis_tdata),
            wport.en.eq(in_fire & in_range),
        ]
        tok_end = Signal()  # the TLAST beat is accepted this cycle
        m.d.comb += tok_end.eq(in_fire & self.s_axis_tlast)
        with m.If(in_fire):
            with m.If(self.s_axis_tlast):
                m.d.sync += [acc.eq(0), wb.eq(0), wsel.eq(~wsel), tokens.eq(tokens + 1)]
                with m.If(~in_range):
                    m.d.sync += overlong.eq(overlong + 1)
                for k in range(2):
                    with m.If(wsel == k):
                        m.d.sync += [stat_buf[k].eq(acc + add), last_buf[k].eq(Mux(in_range, wb, nb - 1))]
            with m.Else():
                m.d.sync += [acc.eq(acc + add), wb.eq(wb + in_range)]

        # ---------------- pass 2: reader (the pipeline's stage 0) ----------------
        rsel = Signal()
        rb = Signal(range(nb))
        issue_valid = Signal()
        issue_last = Signal()
        stat0 = Signal(fmt.stat_bits)
        m.d.comb += [
            issue_valid.eq(full.bit_select(rsel, 1)),
            issue_last.eq(rb == Mux(rsel, last_buf[1], last_buf[0])),
            stat0.eq(Mux(rsel, stat_buf[1], stat_buf[0])),
            pipe.in_valid.eq(issue_valid),
            pipe.in_last.eq(issue_last),
        ]
        issue_end = Signal()  # the last beat of buffer rsel is issued this cycle
        m.d.comb += issue_end.eq(pipe.in_fire & issue_last)
        with m.If(pipe.in_fire):
            with m.If(issue_last):
                m.d.sync += [rb.eq(0), rsel.eq(~rsel)]
            with m.Else():
                m.d.sync += rb.eq(rb + 1)
        for k in range(2):
            # A buffer is set by the writer only while it is empty and cleared by the reader
            # only while it is full: the two never hit the same buffer in one cycle.
            with m.If(tok_end & (wsel == k)):
                m.d.sync += full[k].eq(1)
            with m.Elif(issue_end & (rsel == k)):
                m.d.sync += full[k].eq(0)

        # Token memory read at issue: q is stage 1 (held during stalls: en = ce).
        m.d.comb += [rport.addr.eq(Mux(rsel, rb + nb, rb)), rport.en.eq(pipe.ce)]
        q = rport.data
        for k in range(2, sl + 1):
            q = pipe.reg(m, q, name=f"q{k}")
        # Beat index delayed to stage sl-1; the gamma read ports make stage sl.
        b = rb
        for k in range(1, sl):
            b = pipe.reg(m, b, name=f"b{k}")
        g = []
        for i in range(n):
            port = regs.mem_read_port("gamma", i)
            m.d.comb += [port.addr.eq(b * n + i), port.en.eq(pipe.ce)]
            g.append(port.data)

        outs = self._datapath(m, regs, pipe, stat0, q, g)
        m.d.comb += pipe.out_data.eq(Cat(*outs))

        # Output port.
        m.d.comb += [
            self.m_axis_tdata.eq(pipe.m_axis_tdata),
            self.m_axis_tvalid.eq(pipe.m_axis_tvalid),
            self.m_axis_tlast.eq(pipe.m_axis_tlast),
            pipe.m_axis_tready.eq(self.m_axis_tready),
        ]
        if self.user_width:
            m.d.comb += [pipe.in_user.eq(stat0), self.m_axis_tuser.eq(pipe.m_axis_tuser)]
        return m

"""Requantizer: int32 accumulators in, int8 out, per output channel, ``lanes`` elements per cycle.

The full description: ``docs/internals/hw.md``, section ``hw/pl/requant.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring

from vckattn.golden.requant import requant_regmap

from .axil import RegisterFile, axil_members
from .pipeline import StallPipeline, axis_port
from .stream import Slot

__all__ = ["ACC_WIDTH", "RequantKernel", "buffer_bits", "channel_counter", "requant_stages", "saturate"]

ACC_WIDTH = 32  # int32 accumulators in
OUT_WIDTH = 8  # int8 out
#: stage registers of :func:`requant_stages` after its (stage-1) inputs
STAGES = 3


def buffer_bits(lanes: int = 4, max_d: int = 1024) -> int:
    """Row buffer bits: none (element-wise)."""
    return 0


def saturate(m: Module, v: Value, bits: int, name: str) -> Signal:
    """``v`` clamped to signed ``bits`` (combinational)."""
    hi, lo = (1 << (bits - 1)) - 1, -(1 << (bits - 1))
    out = Signal(signed(bits), name=name)
    with m.If(v > hi):
        m.d.comb += out.eq(hi)
    with m.Elif(v < lo):
        m.d.comb += out.eq(lo)
    with m.Else():
        m.d.comb += out.eq(v)
    return out


def requant_stages(m: Module, pipe: StallPipeline, acc: Value, mult: Value, shift: Value, out_bits: int,
                   name: str) -> Signal:
    """``saturate_out(round_half_up(acc · mult · 2^-shift))`` in :data:`STAGES` pipeline stages after its inputs
    (signed ``acc`` and ``mult``, unsigned ``shift``; module doc). Returns the stage register (signed
    ``out_bits``)."""
    p = pipe.reg(m, acc * mult, name=f"{name}_p")
    sh = pipe.reg(m, shift, name=f"{name}_sh")
    t = pipe.reg(m, (p << 1) >> sh, name=f"{name}_t")
    r = Signal(signed(len(t)), name=f"{name}_r")
    m.d.comb += r.eq((t + 1) >> 1)
    return pipe.reg(m, saturate(m, r, out_bits, f"{name}_sat"), name=f"{name}_y")


def channel_counter(m: Module, fire: Value, last: Value, lanes: int, max_d: int, tokens: Signal,
                    overlong: Signal, base: Value | None = None) -> Value:
    """Channel of lane 0 of the current input beat: steps by ``lanes`` per accepted beat (``fire``), restarts
    after TLAST (``last``) at channel 0, or at channel ``base · lanes`` (``base`` in beats, sampled on each token's
    first beat: a token that is the run of channels ``base · lanes ..`` of a longer row); stays at the last beat's
    base (``max_d - lanes``) for a token that runs past ``max_d`` or starts beyond it (counted in ``overlong`` at
    its TLAST); ``tokens`` counts TLASTs."""
    col = Signal(range(max_d), name="col")
    over = Signal(name="over")
    eff: Value = col
    past = Const(0)  # the token starts beyond max_d
    if base is not None:
        first = Signal(init=1, name="first")  # the next beat starts a token
        past = Signal(name="base_past")
        start = Signal(range(max_d), name="col_start")
        eff = Signal(range(max_d), name="col_eff")
        m.d.comb += [past.eq(first & (base * lanes > max_d - lanes)),
                     start.eq(Mux(base * lanes > max_d - lanes, max_d - lanes, base * lanes)),
                     eff.eq(Mux(first, start, col))]
        with m.If(fire):
            m.d.sync += first.eq(last)
    with m.If(fire):
        with m.If(last):
            m.d.sync += [col.eq(0), over.eq(0), tokens.eq(tokens + 1)]
            with m.If(over | past):
                m.d.sync += overlong.eq(overlong + 1)
        with m.Elif(~past & (eff + lanes < max_d)):
            m.d.sync += col.eq(eff + lanes)
        with m.Else():
            m.d.sync += [col.eq(eff), over.eq(1)]
    return eff


class RequantKernel(wiring.Component):
    """Per-channel int32 → int8 requantization; II = 1 beat (module doc).

    Ports: ``s_axis_tdata[lanes*32]``, ``s_axis_tlast``, ``s_axis_tvalid``, ``s_axis_tready``;
    ``m_axis_tdata[lanes*8]``, ``m_axis_tlast``, ``m_axis_tvalid``, ``m_axis_tready``; the AXI4-Lite slave
    ``s_axil_*``; ``clk``, ``rst``.

    Args:
        lanes: Elements per beat (>= 1).
        max_d: Channels of the tables (longest token); a multiple of ``lanes``.
        mult_bits: Width of the signed multipliers.
        in_width: Width of the signed accumulators in (32: the GEMM's int32; narrower builds for the formal
            proofs).
    """

    LATENCY = 1 + STAGES  # stage registers; input-to-output handshake latency is LATENCY + 1

    def __init__(self, lanes: int = 4, max_d: int = 1024, mult_bits: int = 18, in_width: int = ACC_WIDTH) -> None:
        if lanes < 1 or max_d < lanes or max_d % lanes:
            raise ValueError(f"max_d {max_d} must be a positive multiple of lanes {lanes}")
        self.lanes, self.max_d, self.mult_bits, self.in_width = lanes, max_d, mult_bits, in_width
        self.regmap = requant_regmap(lanes, max_d, mult_bits)
        self.regfile = RegisterFile(self.regmap)
        super().__init__({
            **axis_port("s_axis", lanes * in_width, sink=True),
            **axis_port("m_axis", lanes * OUT_WIDTH, sink=False),
            **axil_members("s_axil", self.regmap.addr_width),
        })
        self.pipe = StallPipeline(self.LATENCY, lanes * OUT_WIDTH)

    def formal_slots(self) -> list[Slot]:
        """Beat places oldest first, for the formal proofs: the stall pipeline's."""
        return self.pipe.formal_slots()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, iw = self.lanes, self.in_width
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        m.submodules.pipe = pipe = self.pipe
        pipe.connect(m, self)
        reg = regs.reg

        tokens, overlong = Signal(32), Signal(32)
        m.d.comb += [reg["tokens"].eq(tokens), reg["overlong"].eq(overlong)]
        col = channel_counter(m, pipe.in_fire, self.s_axis_tlast, n, self.max_d, tokens, overlong)

        outs = []
        for i in range(n):
            acc = pipe.reg(m, self.s_axis_tdata[i * iw:(i + 1) * iw].as_signed(), name=f"acc{i}")
            ports = [regs.mem_read_port(t, i) for t in ("mult", "shift")]
            for port in ports:
                m.d.comb += [port.addr.eq(Mux(reg["per_channel"], col + i, 0)), port.en.eq(pipe.ce)]
            outs.append(requant_stages(m, pipe, acc, ports[0].data, ports[1].data, OUT_WIDTH, f"l{i}"))
        m.d.comb += pipe.out_data.eq(Cat(*outs))
        return m

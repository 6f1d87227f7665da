"""The stream router: one stream of routed packets in, one stream an output out (``hw/ENGINE.md``, "The sublayer's
PL side": the descriptor router, which deals the descriptor mover's one stream to every buffer reader).

A packet is a ROUTE beat (``hw/spec/streams.py``: ``dest``, ``op`` = ROUTE) and the beats after it, up to and
including the one with TLAST; those beats go, in order and with their TLAST, into output ``dest``'s FIFO; the
ROUTE beat itself goes nowhere. A packet whose first beat is not a ROUTE beat, or names no output, is dropped to
its TLAST and sets the sticky ``bad_route`` (the host reads it through the register file: nothing is delivered
wrong in silence). A ROUTE beat with TLAST is an empty packet.

An output whose FIFO is full holds the input (and every packet behind it) until it drains. The descriptor
streams are deadlock-free because the host sends them sequence by sequence (every reader's descriptors of
sequence ``b`` before any of ``b + 1``: :func:`vckattn.hw.spec.descriptors.routed_descriptors`) and every FIFO
holds a reader's largest sequence's descriptors (:func:`vckattn.hw.spec.descriptors.descriptor_depths`): a held
packet waits only on sequences whose descriptors have all gone before it.

Throughput: one beat a cycle while the outputs take them; each packet's ROUTE beat costs a cycle.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import Out

from vckattn.hw.spec.streams import OP_ROUTE, field

from .pipeline import axis_port

__all__ = ["StreamRouter"]

BEAT_BITS = 128


class StreamRouter(wiring.Component):
    """Routed packets in, a FIFO an output (module docstring).

    Ports: ``s_axis_*`` (128 bits, TLAST ends a packet); per output ``r``: ``m_axis_out<r>_*`` (128 bits, the
    packets' TLAST); ``bad_route`` (sticky: a packet was dropped); ``clk``, ``rst``.

    Args:
        depths: Per output, its FIFO's entries (>= 4): at least its largest sequence's beats for a descriptor
            stream (module docstring).
    """

    def __init__(self, depths: Sequence[int]) -> None:
        if not depths or any(d < 4 for d in depths):
            raise ValueError(f"FIFO depths {list(depths)}: at least one output, each >= 4 entries")
        if len(depths) > field("route", "dest").max + 1:
            raise ValueError(f"{len(depths)} outputs: the ROUTE beat names at most {field('route', 'dest').max + 1}")
        self.depths = list(depths)
        members: dict = {"bad_route": Out(1), **axis_port("s_axis", BEAT_BITS, sink=True)}
        for r in range(len(self.depths)):
            members |= axis_port(f"m_axis_out{r}", BEAT_BITS, sink=False)
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = len(self.depths)
        fifos = []
        for r, depth in enumerate(self.depths):
            m.submodules[f"fifo{r}"] = f = SyncFIFOBuffered(width=BEAT_BITS + 1, depth=depth)
            fifos.append(f)
            m.d.comb += [getattr(self, f"m_axis_out{r}_tdata").eq(f.r_data[:BEAT_BITS]),
                         getattr(self, f"m_axis_out{r}_tlast").eq(f.r_data[BEAT_BITS]),
                         getattr(self, f"m_axis_out{r}_tvalid").eq(f.r_rdy),
                         f.r_en.eq(getattr(self, f"m_axis_out{r}_tready")),
                         f.w_data.eq(Cat(self.s_axis_tdata, self.s_axis_tlast))]
        dest = Signal(range(max(2, n)))
        room = Array(f.w_rdy for f in fifos)[dest]
        f_dest, f_op = field("route", "dest"), field("route", "op")
        beat = self.s_axis_tdata
        take = self.s_axis_tvalid & self.s_axis_tready
        with m.FSM():
            with m.State("ROUTE"):
                m.d.comb += self.s_axis_tready.eq(1)
                with m.If(self.s_axis_tvalid):
                    good = (f_op.bits_of(beat) == OP_ROUTE) & (f_dest.bits_of(beat) < n)
                    with m.If(~good):
                        m.d.sync += self.bad_route.eq(1)
                    with m.If(~self.s_axis_tlast & good):
                        m.d.sync += dest.eq(f_dest.bits_of(beat))
                        m.next = "FORWARD"
                    with m.Elif(~self.s_axis_tlast):
                        m.next = "DROP"
            with m.State("FORWARD"):
                m.d.comb += self.s_axis_tready.eq(room)
                for r, f in enumerate(fifos):
                    m.d.comb += f.w_en.eq(self.s_axis_tvalid & (dest == r))
                with m.If(take & self.s_axis_tlast):
                    m.next = "ROUTE"
            with m.State("DROP"):
                m.d.comb += self.s_axis_tready.eq(1)
                with m.If(take & self.s_axis_tlast):
                    m.next = "ROUTE"
        return m

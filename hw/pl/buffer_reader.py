"""A PL buffer reader: descriptors in, a header beat and a run of buffer beats out, one AIE input stream's worth
(``hw/ENGINE.md``, "The sublayer's PL side": the q, k and v readers of the attention pipelines, the x and a
readers of the projection stages).

A descriptor is two 128-bit beats on ``s_axis``: the header beat to send as it is (TILE, SLICE or XTILE), then the
RDESC beat (``hw/spec/streams.py``: ``first``, ``beats``, ``slot``, ``release``, ``turn``). The reader waits until
its slot is full with the sequence of its turn (``slot_full[slot]`` and ``slot_turn[slot] == turn``, from the
buffer's access control: a reader ahead of another must not take the sequence before its own), sends the header
beat, then ``beats`` beats read from ``first`` onwards through its read port, TLAST on the last (a run of 0 beats:
the header alone, with TLAST); a descriptor with ``release`` then pulses ``release_valid`` with ``release_slot``
(the buffer counts its readers' releases to free the slot). A ``quiet`` descriptor (0 beats) sends nothing: it
waits for its slot like any other and releases it, for a reader that has no run in a sequence its buffer counts
it for.

The read port is shared with other readers through the bank's arbiter: the reader raises ``rd_req`` with
``rd_addr``; a cycle with ``rd_gnt`` takes the read, and its data is on ``rd_data`` ``READ_LATENCY`` cycles later.
The reader asks only while its output FIFO has room for every read in flight, so backpressure on ``m_axis`` never
loses a beat, and at one beat a cycle when the port is granted every cycle and the sink takes every beat.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from vckattn.hw.spec.streams import field

from .pipeline import axis_port

__all__ = ["BufferReader"]

BEAT_BITS = 128
#: cycles from a granted read to its data
READ_LATENCY = 1


class BufferReader(wiring.Component):
    """Descriptors in, header + buffer run out (module docstring).

    Ports: ``s_axis_*`` (descriptors, 128 bits), ``m_axis_*`` (128 bits, TLAST on a run's last beat),
    ``rd_addr[addr_bits]``, ``rd_req``, ``rd_gnt``, ``rd_data[128]``, ``slot_full[slots]``, ``slot_turn[slots]``,
    ``release_valid``, ``release_slot``; ``clk``, ``rst``.

    Args:
        addr_bits: Width of the buffer's beat addresses.
        slots: Sequence slots of the buffer.
        depth: Output FIFO entries (at least ``READ_LATENCY + 2``, for a beat a cycle).
    """

    def __init__(self, addr_bits: int, slots: int, depth: int = 4) -> None:
        if addr_bits < 1 or slots < 1 or depth < READ_LATENCY + 2:
            raise ValueError(f"addr_bits {addr_bits}, slots {slots} >= 1 and depth {depth} >= {READ_LATENCY + 2}")
        self.addr_bits, self.slots, self.depth = addr_bits, slots, depth
        self.slot_bits = max(1, (slots - 1).bit_length())
        super().__init__({
            **axis_port("s_axis", BEAT_BITS, sink=True),
            **axis_port("m_axis", BEAT_BITS, sink=False),
            "rd_addr": Out(addr_bits), "rd_req": Out(1), "rd_gnt": In(1), "rd_data": In(BEAT_BITS),
            "slot_full": In(slots), "slot_turn": In(slots), "release_valid": Out(1),
            "release_slot": Out(self.slot_bits),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        f_first, f_beats = field("rdesc", "first"), field("rdesc", "beats")
        f_slot, f_release, f_turn = field("rdesc", "slot"), field("rdesc", "release"), field("rdesc", "turn")
        f_quiet = field("rdesc", "quiet")
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=BEAT_BITS + 1, depth=self.depth)

        header = Signal(BEAT_BITS)
        addr = Signal(self.addr_bits)
        left = Signal(16)  # reads still to issue
        slot = Signal(self.slot_bits)
        release, turn, quiet = Signal(), Signal(), Signal()
        # reads granted, their data not yet in the FIFO: a shift register of READ_LATENCY stages (data, last)
        flight = [Signal(name=f"flight{i}") for i in range(READ_LATENCY)]
        flight_last = [Signal(name=f"flight_last{i}") for i in range(READ_LATENCY)]
        in_flight = sum(f.as_unsigned() for f in flight)
        room, room_after_header = Signal(), Signal()
        m.d.comb += [room.eq(fifo.level + in_flight + 1 <= self.depth),
                     room_after_header.eq(fifo.level + in_flight + 2 <= self.depth)]

        granted = Signal()
        m.d.comb += granted.eq(self.rd_req & self.rd_gnt)
        m.d.sync += [flight[0].eq(granted), flight_last[0].eq(granted & (left == 1))]
        with m.If(granted):  # rd_req is raised in WAIT and READ only
            m.d.sync += [addr.eq(addr + 1), left.eq(left - 1)]
        for i in range(1, READ_LATENCY):
            m.d.sync += [flight[i].eq(flight[i - 1]), flight_last[i].eq(flight_last[i - 1])]

        hdr_push = Signal()
        m.d.comb += [
            fifo.w_en.eq(flight[-1] | hdr_push),
            fifo.w_data.eq(Cat(self.rd_data, flight_last[-1])),
            self.m_axis_tdata.eq(fifo.r_data[:BEAT_BITS]),
            self.m_axis_tlast.eq(fifo.r_data[BEAT_BITS]),
            self.m_axis_tvalid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.m_axis_tready),
            self.rd_addr.eq(addr),
            self.release_slot.eq(slot),
        ]
        with m.If(hdr_push):
            m.d.comb += fifo.w_data.eq(Cat(header, left == 0))  # a run of no beats: the header alone

        with m.FSM():
            with m.State("HEADER"):
                m.d.comb += self.s_axis_tready.eq(1)
                with m.If(self.s_axis_tvalid):
                    m.d.sync += header.eq(self.s_axis_tdata)
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.s_axis_tready.eq(1)
                with m.If(self.s_axis_tvalid):
                    beats = f_beats.bits_of(self.s_axis_tdata)
                    m.d.sync += [addr.eq(f_first.bits_of(self.s_axis_tdata)), left.eq(beats),
                                 slot.eq(f_slot.bits_of(self.s_axis_tdata)),
                                 release.eq(f_release.bits_of(self.s_axis_tdata)),
                                 turn.eq(f_turn.bits_of(self.s_axis_tdata)),
                                 quiet.eq(f_quiet.bits_of(self.s_axis_tdata))]
                    m.next = "WAIT"
            with m.State("WAIT"):  # the slot full and room for the header (no read in flight here): the header in,
                # and the first read asked for in the same cycle (its data lands after the header)
                ready = self.slot_full.bit_select(slot, 1) & (self.slot_turn.bit_select(slot, 1) == turn)
                with m.If(ready & quiet):  # a release alone
                    m.d.sync += left.eq(0)
                    m.next = "READ"
                with m.Elif(ready & fifo.w_rdy):
                    m.d.comb += [hdr_push.eq(1), self.rd_req.eq((left != 0) & room_after_header)]
                    m.next = "READ"
            with m.State("READ"):
                m.d.comb += self.rd_req.eq((left != 0) & room)
                with m.If((left == 0) & ~Cat(*flight).any()):
                    m.d.comb += self.release_valid.eq(release)
                    m.next = "HEADER"
        return m

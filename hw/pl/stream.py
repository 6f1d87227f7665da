"""AXI4-Stream building blocks for the PL kernels (Amaranth 0.5).

Port naming
-----------
Every stream port is a *flat* group of signals named ``<prefix>_t<field>``, e.g.
``s_axis_tdata``, ``s_axis_tvalid``, ``s_axis_tready``, ``s_axis_tlast``. Amaranth's
``verilog.convert`` keeps top-level member names as Verilog port names, so the generated
module has exactly those ports and cocotbext-axi's ``AxiStreamBus.from_prefix(dut, "s_axis")``
binds to them directly. (A nested ``wiring.Signature`` would instead produce
``s_axis__tdata``, which cocotbext-axi does not recognise.)

The clock and reset come from Amaranth's default ``sync`` domain; in the generated Verilog
they are the ports ``clk`` and ``rst`` (reset is synchronous and active-high).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer", "Slot", "axis_members"]


@dataclass(frozen=True)
class Slot:
    """One place of a component that holds a beat, for the formal proofs (:mod:`vckattn.hw.pl.formal`).

    A component lists its slots oldest first (``formal_slots()``): the beat in slot ``i`` leaves before
    the beat in slot ``i + 1``. ``fields`` are the beat's output-side values as held there, by field name
    (``"last"``, ``"user"``, ``"data"``, ...); a slot names only the fields it holds.
    """

    valid: Value
    fields: dict[str, Value] = field(default_factory=dict)


def axis_members(prefix: str, width: int, *, sink: bool) -> dict[str, wiring.Member]:
    """Signature members of one flat AXI4-Stream port (TDATA, TVALID, TREADY, TLAST).

    Args:
        prefix: Port name prefix, e.g. ``"s_axis"`` or ``"m_axis"``.
        width: TDATA width in bits (>= 1).
        sink: ``True`` for a slave/input port (the component receives data and drives
            TREADY), ``False`` for a master/output port.

    Returns:
        A mapping suitable for ``wiring.Component.__init__`` / ``wiring.Signature``.
    """
    if width < 1:
        raise ValueError(f"TDATA width must be >= 1 bit, got {width}")
    fwd, bwd = (In, Out) if sink else (Out, In)
    return {
        f"{prefix}_tdata": fwd(width),
        f"{prefix}_tvalid": fwd(1),
        f"{prefix}_tready": bwd(1),
        f"{prefix}_tlast": fwd(1),
    }


class SkidBuffer(wiring.Component):
    """AXI4-Stream register slice: a 2-entry skid buffer with registered outputs.

    Ports (Verilog names): ``clk``, ``rst``; slave ``s_axis_tdata[width]``, ``s_axis_tvalid``,
    ``s_axis_tready``, ``s_axis_tlast``; master ``m_axis_tdata[width]``, ``m_axis_tvalid``,
    ``m_axis_tready``, ``m_axis_tlast``.

    Framing: TDATA and TLAST travel together as one beat; beats leave in the order they
    arrive, none is dropped or duplicated, so packet boundaries (TLAST) are preserved.

    Timing:

    * Latency: 1 clock cycle. A beat accepted on rising edge *n* (``s_axis_tvalid &
      s_axis_tready``) is presented on ``m_axis`` from edge *n* on and can be taken by the
      sink at edge *n + 1* at the earliest.
    * Throughput: 1 beat per cycle whenever the sink is ready; the buffer never inserts
      bubbles.
    * Every output (``m_axis_tdata/tvalid/tlast`` and ``s_axis_tready``) is driven directly by
      a flip-flop, so there is no combinational path from ``m_axis_tready`` (or anything
      else) to ``s_axis_tready``. This is what lets a kernel put the slice at its output
      to break long ready/valid timing paths.
    * Storage: one output register plus one skid register (2 beats). When the sink stalls
      while a beat is in flight, the beat is parked in the skid register and
      ``s_axis_tready`` drops on the next cycle.
    * Reset (``rst`` high, synchronous): both registers empty, ``m_axis_tvalid = 0`` and
      ``s_axis_tready = 0``; ``s_axis_tready`` rises on the first cycle after reset.

    Args:
        width: TDATA width in bits (>= 1).
    """

    def __init__(self, width: int) -> None:
        self.width = width
        super().__init__({
            **axis_members("s_axis", width, sink=True),
            **axis_members("m_axis", width, sink=False),
        })
        # State (named here so that the formal proofs can state invariants over it: formal_slots()).
        # Output register: m_axis_tdata/tlast/tvalid are these flops' outputs directly.
        self.out_data = Signal(width, name="out_data")
        self.out_last = Signal(name="out_last")
        self.out_valid = Signal(name="out_valid")
        # Skid register: holds the beat accepted while the output register was stalled.
        self.skid_data = Signal(width, name="skid_data")
        self.skid_last = Signal(name="skid_last")
        self.skid_valid = Signal(name="skid_valid")

    def formal_slots(self) -> list[Slot]:
        """The two beat places, oldest first: the output register, then the skid register."""
        return [Slot(self.out_valid, {"data": self.out_data, "last": self.out_last}),
                Slot(self.skid_valid, {"data": self.skid_data, "last": self.skid_last})]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        out_data, out_last, out_valid = self.out_data, self.out_last, self.out_valid
        skid_data, skid_last, skid_valid = self.skid_data, self.skid_last, self.skid_valid
        # Registered TREADY: always equals ~skid_valid except in the first cycle after reset.
        ready = Signal()

        s_fire = Signal()  # a beat is accepted on the slave side this cycle
        out_free = Signal()  # the output register can be (re)loaded this cycle
        m.d.comb += [
            self.m_axis_tdata.eq(out_data),
            self.m_axis_tlast.eq(out_last),
            self.m_axis_tvalid.eq(out_valid),
            self.s_axis_tready.eq(ready),
            s_fire.eq(self.s_axis_tvalid & ready),
            out_free.eq(~out_valid | self.m_axis_tready),
        ]

        # Next value of skid_valid, needed to register TREADY without a comb path.
        skid_valid_next = Signal()
        m.d.comb += skid_valid_next.eq(skid_valid)

        with m.If(out_free):
            with m.If(skid_valid):
                # Drain the skid register first (TREADY is low, so nothing arrives now).
                m.d.sync += [out_data.eq(skid_data), out_last.eq(skid_last), out_valid.eq(1)]
                m.d.comb += skid_valid_next.eq(0)
            with m.Else():
                # Pass-through path: the new beat (if any) goes straight to the output register.
                m.d.sync += out_valid.eq(s_fire)
                with m.If(s_fire):
                    m.d.sync += [out_data.eq(self.s_axis_tdata), out_last.eq(self.s_axis_tlast)]
        with m.Elif(s_fire):
            # Output stalled while a beat arrives: park it in the skid register.
            m.d.sync += [skid_data.eq(self.s_axis_tdata), skid_last.eq(self.s_axis_tlast)]
            m.d.comb += skid_valid_next.eq(1)

        m.d.sync += [skid_valid.eq(skid_valid_next), ready.eq(~skid_valid_next)]
        return m

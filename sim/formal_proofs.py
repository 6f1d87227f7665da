"""The harnesses of the formal proofs and their must-fail mutants; ``python -m vckattn.sim.formal_proofs`` runs
them (``make formal``) and prints the table.

The full description: ``docs/internals/sim.md``, section ``sim/formal_proofs.py``.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Fragment, Module, Mux, ResetSignal, Signal, Value
from amaranth.lib import wiring

from vckattn.golden.bhyt_int import NormFormat
from vckattn.golden.kernels import AXIL, AXIS, COMPONENT_PROOFS, KERNELS, FormalProof
from vckattn.golden.swiftmax_int import SwiftMaxFormat
from vckattn.hw.pl.axil import RegisterFile, RegisterMap
from vckattn.hw.pl.formal import (
    AxiLite,
    AxilLedger,
    Checks,
    Stream,
    StreamLedger,
    assert_hold,
    assert_lane_hold,
    assert_reset_idle,
    assume_master,
    assume_source,
    drive_free,
    past,
)
from vckattn.hw.pl.kernels import PL_KERNELS
from vckattn.hw.pl.norm_lanes import BHyTLane, BHyTScaleUnit, RMSNormLane, RMSNormScaleUnit
from vckattn.hw.pl.pipeline import StallPipeline
from vckattn.hw.pl.stream import SkidBuffer, Slot
from vckattn.hw.pl.swiftmax_lane import SwiftMaxLane
from vckattn.hw.spec.streams import BEAT_BYTES, PACKET

from .formal import FormalResult, check, elaborate_checks

__all__ = ["HARNESSES", "MUTANTS", "Spec", "all_proofs", "run_proof"]

Build = Callable[[Module, Checks], None]
Mutation = Callable[[Module, SimpleNamespace, SimpleNamespace, Value], dict[str, Value]]


# ---------------------------------------------------------------------------------------------- mutants


def _ports(m: Module, dut: wiring.Component, mutate: Mutation | None) -> SimpleNamespace:
    """The component's flat ports as the harness sees them: the component's own signals, or (with a
    mutation) new signals wired through, the mutation replacing some of them."""
    if mutate is None:
        return SimpleNamespace(**{n: getattr(dut, n) for n in dut.signature.members})
    outer = SimpleNamespace(**{n: Signal.like(getattr(dut, n), name=f"port_{n}") for n in dut.signature.members})
    inner = SimpleNamespace(**{n: getattr(dut, n) for n in dut.signature.members})
    glitch = Signal(name="glitch")
    drive_free(m, glitch)
    repl = mutate(m, outer, inner, glitch)
    for n, member in dut.signature.members.items():
        if member.flow == wiring.In:
            m.d.comb += getattr(inner, n).eq(repl.get(n, getattr(outer, n)))
        else:
            m.d.comb += getattr(outer, n).eq(repl.get(n, getattr(inner, n)))
    return outer


def _stall(m: Module, o: SimpleNamespace, p: str) -> Signal:
    """1 in a cycle after one with ``<p>_tvalid`` and not ``<p>_tready`` (and no reset)."""
    return past(m, getattr(o, f"{p}_tvalid") & ~getattr(o, f"{p}_tready") & ~ResetSignal(), name=f"mut_{p}_stall")


def axis_mutants(p: str) -> dict[str, Mutation]:
    """Stream mutants of output port ``p``."""

    def drop_valid(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        # TVALID falls for a cycle while the beat waits (the beat stays: a pure protocol violation)
        return {f"{p}_tvalid": getattr(i, f"{p}_tvalid") & ~(g & _stall(m, i, p))}

    def data_under_stall(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        return {f"{p}_tdata": getattr(i, f"{p}_tdata") ^ Mux(g & _stall(m, i, p), 1, 0)}

    def lose_beat(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        # a beat shown for the first time while the sink is not ready: the component sees it taken, the sink
        # never sees it (TVALID does not fall under a stall: only the bookkeeping can tell)
        lost = g & ~_stall(m, o, p) & ~getattr(o, f"{p}_tready")
        return {f"{p}_tready": getattr(o, f"{p}_tready") | lost, f"{p}_tvalid": getattr(i, f"{p}_tvalid") & ~lost}

    def duplicate_beat(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        # the sink takes the beat, the component does not let it go: it is delivered again
        return {f"{p}_tready": getattr(o, f"{p}_tready") & ~g}

    def move_last(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        # TLAST flipped on a beat (its packet split or merged with the next); the flip holds while it waits
        flip = Signal(name="mut_flip")
        waiting = _stall(m, i, p)
        m.d.sync += flip.eq(Mux(waiting, flip, g))
        return {f"{p}_tlast": getattr(i, f"{p}_tlast") ^ Mux(waiting, flip, g)}

    def valid_after_reset(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        after = past(m, ResetSignal(), init=1, name="mut_after_reset")
        return {f"{p}_tvalid": getattr(i, f"{p}_tvalid") | (after & g)}

    def hang(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        # after a glitch in a cycle that shows no beat the output never shows TVALID again (no beat is withdrawn
        # under a stall: only liveness can tell)
        dead = Signal(name="mut_dead")
        m.d.sync += dead.eq(dead | (g & ~getattr(i, f"{p}_tvalid")))
        return {f"{p}_tvalid": getattr(i, f"{p}_tvalid") & ~dead, f"{p}_tready": getattr(o, f"{p}_tready") & ~dead}

    return {"drop_valid": drop_valid, "data_under_stall": data_under_stall, "lose_beat": lose_beat,
            "duplicate_beat": duplicate_beat, "move_last": move_last, "valid_after_reset": valid_after_reset,
            "hang": hang}


def axil_mutants(p: str = "s_axil") -> dict[str, Mutation]:
    """AXI4-Lite mutants of slave port ``p``."""

    def bresp_okay(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        return {f"{p}_bresp": Const(0, 2)}

    def spurious_b(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        # a response no request asked for, held until taken
        extra = Signal(name="mut_extra")
        new = g & ~getattr(i, f"{p}_bvalid")
        m.d.sync += extra.eq((extra | new) & ~getattr(o, f"{p}_bready"))
        return {f"{p}_bvalid": getattr(i, f"{p}_bvalid") | extra | new,
                f"{p}_bready": getattr(o, f"{p}_bready") & ~extra & ~new}

    def lost_b(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        dead = Signal(name="mut_dead")
        m.d.sync += dead.eq(dead | g)
        return {f"{p}_bvalid": getattr(i, f"{p}_bvalid") & ~dead, f"{p}_bready": getattr(o, f"{p}_bready") & ~dead}

    def rdata_flip(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        # one bit of RDATA wrong for a whole response
        flip = Signal(name="mut_flip")
        waiting = past(m, getattr(i, f"{p}_rvalid") & ~getattr(o, f"{p}_rready"), name="mut_r_wait")
        m.d.sync += flip.eq(Mux(waiting, flip, g))
        return {f"{p}_rdata": getattr(i, f"{p}_rdata") ^ Mux(waiting, flip, g)}

    def strobes_ignored(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        return {f"{p}_wstrb": Const(0xF, 4)}

    return {"bresp_okay": bresp_okay, "spurious_b": spurious_b, "lost_b": lost_b, "rdata_flip": rdata_flip,
            "strobes_ignored": strobes_ignored}


def lane_mutants() -> dict[str, Mutation]:
    def en_ignored(m: Module, o: SimpleNamespace, i: SimpleNamespace, g: Value) -> dict[str, Value]:
        return {"en": Const(1, 1)}  # the lane advances in every cycle, stalled or not

    return {"en_ignored": en_ignored}


#: Mutant name -> the properties that catch it (the mutant must fail at least one of them).
MUTANTS: dict[str, tuple[str, ...]] = {
    "drop_valid": ("axis.hold",),
    "data_under_stall": ("axis.hold",),
    "lose_beat": ("axis.count", "axis.framing", "axis.liveness"),
    "duplicate_beat": ("axis.count", "axis.framing"),
    "move_last": ("axis.framing",),
    "valid_after_reset": ("axis.reset_idle",),
    "hang": ("axis.liveness",),
    "bresp_okay": ("axil.ro_ignores_writes",),
    "spurious_b": ("axil.no_spurious",),
    "lost_b": ("axil.one_response",),
    "rdata_flip": ("axil.readback",),
    "strobes_ignored": ("axil.readback",),
    "en_ignored": ("lane.hold",),
}


def _mutation(mutant: str | None, families: dict[str, Mutation]) -> Mutation | None:
    if mutant is None:
        return None
    if mutant not in families:
        raise ValueError(f"mutant {mutant!r} does not apply here (have {', '.join(families)})")
    return families[mutant]


def _in_names(dut: wiring.Component) -> set[str]:
    return {n for n, mem in dut.signature.members.items() if mem.flow == wiring.In}


def _inputs(dut: wiring.Component, o: SimpleNamespace) -> list[Value]:
    return [getattr(o, n) for n, mem in dut.signature.members.items() if mem.flow == wiring.In]


# ---------------------------------------------------------------------------------------------- harnesses


@dataclass(frozen=True)
class Spec:
    """A harness: ``harness(mutant)`` -> build function (``mutant=None``: the component itself, with the
    invariants), and what the proof's depth must cover: ``latency`` (cycles a beat or request may take) and
    ``buffer`` (beats the component holds when full)."""

    harness: Callable[[str | None], Build]
    latency: int
    buffer: int
    what: str


def _ledger_stream(m: Module, chk: Checks, s_in: Stream, s_out: Stream, o: SimpleNamespace,
                   **kw: object) -> StreamLedger:
    assume_source(chk, s_in)
    assert_hold(chk, s_out)
    assert_reset_idle(chk, {s_out.name: s_out.valid})
    return StreamLedger(chk, s_in, s_out, **kw)  # type: ignore[arg-type]


def _max_beats(chk: Checks, s: Stream, beats: int) -> None:
    """``packet.max_beats``: an input packet has at most ``beats`` beats (the ``beats``-th carries TLAST)."""
    m = chk.m
    idx = Signal(range(beats + 1), name=f"{s.name}_beat_index")
    with m.If(s.fire):
        m.d.sync += idx.eq(Mux(s.last, 0, idx + 1))
    chk.env("packet.max_beats", s.name, ~s.valid | (idx < beats - 1) | s.last)


def _exact_beats(chk: Checks, s: Stream, beats: int) -> None:
    """``packet.exact_beats``: an input packet has exactly ``beats`` beats (TLAST on the ``beats``-th only)."""
    m = chk.m
    idx = Signal(range(beats), name=f"{s.name}_row_index")
    with m.If(s.fire):
        m.d.sync += idx.eq(Mux(s.last, 0, idx + 1))
    chk.env("packet.exact_beats", s.name, ~s.valid | (s.last == (idx == beats - 1)))


def skid_buffer(width: int = 4, *, capacity: int = 2, bound: int = 0) -> Spec:
    """SkidBuffer: (a)-(d), TDATA and TLAST passed through; induction over its two slots. ``capacity`` and
    ``bound`` are the claims (2 beats, no cycle without delivery while the sink is ready)."""

    def harness(mutant: str | None) -> Build:
        def build(m: Module, chk: Checks) -> None:
            m.submodules.dut = dut = SkidBuffer(width)
            o = _ports(m, dut, _mutation(mutant, axis_mutants("m_axis")))
            drive_free(m, *_inputs(dut, o))
            s_in, s_out = Stream.of(o, "s_axis"), Stream.of(o, "m_axis")
            _ledger_stream(m, chk, s_in, s_out, o, capacity=capacity, bound=bound,
                           expect={"data": o.s_axis_tdata, "last": o.s_axis_tlast},
                           slots=None if mutant else dut.formal_slots())
        return build

    return Spec(harness, latency=1, buffer=2, what=f"SkidBuffer({width})")


def stall_pipeline(latency: int = 3, width: int = 4, user: int = 2, *, bound: int | None = None) -> Spec:
    """StallPipeline: the input is ``in_valid``/``in_last``/``in_user`` with ``ce`` as its TREADY; the kernel's
    stage-L data (``out_data``) is free; TLAST and TUSER followed beat by beat. Liveness ``bound``: the latency
    (the claim)."""

    def harness(mutant: str | None) -> Build:
        def build(m: Module, chk: Checks) -> None:
            m.submodules.dut = dut = StallPipeline(latency, width, user_width=user)
            o = _ports(m, dut, _mutation(mutant, axis_mutants("m_axis")))
            drive_free(m, *_inputs(dut, o))
            s_in = Stream("s", o.in_valid, o.ce, {"last": o.in_last, "user": o.in_user})
            s_out = Stream.of(o, "m_axis")
            _ledger_stream(m, chk, s_in, s_out, o, capacity=latency + 2, bound=latency if bound is None else bound,
                           expect={"last": o.in_last, "user": o.in_user},
                           slots=None if mutant else dut.formal_slots())
        return build

    return Spec(harness, latency=latency + 1, buffer=2,
                what=f"StallPipeline(latency={latency}, data={width}, user={user})")


def stream_kernel(make: Callable[[], wiring.Component], what: str, *, latency: int, capacity: int, bound: int,
                  buffer: int = 2, user: int = 0, packet_beats: int | None = None, slots: bool = True,
                  cover_full: bool = True, exact: bool = False) -> Spec:
    """A kernel with ``s_axis`` -> ``m_axis``, one output beat per input beat: (a)-(d); TLAST (and the low
    ``user`` bits of TUSER, passed through) followed beat by beat. Every input is free -- the AXI4-Lite port
    included: the host may write any register at any time. ``packet_beats``: the kernel buffers whole
    packets of at most that many beats (``packet.max_beats``; liveness counts complete packets only).
    ``slots``: the component's ``formal_slots()`` invariants (unbounded proof). ``latency``: cycles from a
    packet's first beat in to its first beat out; ``buffer``: beats the kernel stores (its skid buffer, its
    token or row buffers); ``capacity``: most beats in flight (buffers and pipeline stages); ``cover_full``:
    cover a full kernel (off where ``capacity`` is an upper bound no short trace reaches); ``exact``: packets of
    exactly ``packet_beats`` beats (``packet.exact_beats``, a kernel with fixed-length rows)."""

    def harness(mutant: str | None) -> Build:
        def build(m: Module, chk: Checks) -> None:
            m.submodules.dut = dut = make()
            o = _ports(m, dut, _mutation(mutant, axis_mutants("m_axis")))
            drive_free(m, *_inputs(dut, o))
            s_in, s_out = Stream.of(o, "s_axis"), Stream.of(o, "m_axis")
            expect: dict[str, Value] = {"last": o.s_axis_tlast}
            if user:
                expect["user"] = o.s_axis_tuser[:user]
            if packet_beats:
                (_exact_beats if exact else _max_beats)(chk, s_in, packet_beats)
            _ledger_stream(m, chk, s_in, s_out, o, capacity=capacity, bound=bound, expect=expect,
                           packet_end=o.s_axis_tlast if packet_beats else None, cover_full=cover_full,
                           slots=dut.formal_slots() if slots and not mutant else None)
        return build

    return Spec(harness, latency=latency, buffer=buffer, what=what)


def register_file(make_regmap: Callable[[], RegisterMap], what: str, *, bound: int = 2) -> Spec:
    """The register file of a map: the AXI4-Lite properties; ``ro`` registers driven by a free constant (the
    kernel's value), kernel read ports free, the master assumed to follow the protocol."""

    def harness(mutant: str | None) -> Build:
        def build(m: Module, chk: Checks) -> None:
            rm = make_regmap()
            m.submodules.dut = dut = RegisterFile(rm)
            o = _ports(m, dut, _mutation(mutant, axil_mutants()))
            drive_free(m, *_inputs(dut, o))
            ro = {r.name: dut.reg[r.name] for r in rm.regs if r.access == "ro"}
            drive_free(m, *ro.values(), const=True)
            invariants = mutant is None
            for ports in dut.mem_ports.values():
                for port in ports[1:] if invariants else ports:  # port 0: the ledger's view of the picked entry
                    drive_free(m, port.addr, port.en)
            a = AxiLite.of(o)
            assume_master(chk, a)
            assert_reset_idle(chk, {"b": a.bvalid, "r": a.rvalid}, "axil.reset_idle")
            AxilLedger(chk, a, rm, ro_values=ro, bound=bound, regfile=dut if invariants else None)
        return build

    return Spec(harness, latency=bound + 2, buffer=2, what=what)


def lane(make: Callable[[], wiring.Component], what: str, latency: int, registers: tuple[str, ...] = ()) -> Spec:
    """A datapath lane (``en`` clock enable): every output holds after a cycle with ``en`` low. ``registers``:
    inputs that come from the kernel's register file, assumed to hold (``regs.stable``: the host writes
    registers while the kernel is idle)."""

    def harness(mutant: str | None) -> Build:
        def build(m: Module, chk: Checks) -> None:
            m.submodules.dut = dut = make()
            o = _ports(m, dut, _mutation(mutant, lane_mutants()))
            drive_free(m, *(v for n, v in vars(o).items() if n not in registers and n in _in_names(dut)))
            drive_free(m, *(getattr(o, n) for n in registers), const=True)
            if registers:
                chk.declare("regs.stable")  # the register inputs are free constants
            outs = {n: getattr(o, n) for n, mem in dut.signature.members.items() if mem.flow == wiring.Out}
            assert_lane_hold(chk, o.en, outs)
            chk.cover("stall_after_change", past(m, ~o.en) & _changed(m, outs))
        return build

    return Spec(harness, latency=latency, buffer=0, what=what)


def _changed(m: Module, outs: dict[str, Value]) -> Value:
    """1 when some output differs from its value of two cycles before (the lane moved, then stalled)."""
    diff = [(v != past(m, past(m, v, name=f"{k}_q1"), name=f"{k}_q2")).as_unsigned() for k, v in outs.items()]
    return Cat(*diff).any()


# ---------------------------------------------------------------------------------------------- the engine top

_FIELDS = {f.name: f for f in PACKET}


def _field(data: Value, name: str) -> Value:
    f = _FIELDS[name]
    lo = 32 * f.word + f.lo
    return data[lo:lo + f.width]


def engine(channels: int, lanes: int, score_bits: int, *, slots: bool = True) -> Spec:
    """The engine's PL top (:class:`~vckattn.hw.pl.engine.EnginePL`): per score channel ``s{i}`` -> ``p{i}``, packets
    framed by the header's ``count`` (:data:`vckattn.hw.spec.streams.PACKET`; input TLAST is not
    interpreted). The harness parses the input packets itself (from the stream declaration), so it knows for
    every accepted beat whether it completes an output beat, its expected TLAST, and -- for a header -- the
    output header (``elem_bits`` rewritten to 8); P data (the lanes') is not compared."""
    from vckattn.hw.pl.engine import EnginePipeline, EnginePL

    per_in = 128 // score_bits  # scores per input beat
    latency = EnginePipeline.LATENCY

    def harness(mutant: str | None) -> Build:
        def build(m: Module, chk: Checks) -> None:
            m.submodules.dut = dut = EnginePL(channels, lanes, score_bits)
            o = _ports(m, dut, _mutation(mutant, axis_mutants("p0")))  # mutants break channel 0
            drive_free(m, *_inputs(dut, o))
            for i in range(channels):
                s_in, s_out = Stream.of(o, f"s{i}"), Stream.of(o, f"p{i}")
                data = getattr(o, f"s{i}_tdata")
                # the harness's own parse of the input packets: in_payload, payload beats left
                cw = _FIELDS["count"].width
                left = Signal(range(-(-((1 << cw) - 1) // per_in) + 1), name=f"s{i}_left")
                in_pay = Signal(name=f"s{i}_in_payload")
                count = _field(data, "count")
                beats = Signal.like(left, name=f"s{i}_payload_beats")
                m.d.comb += beats.eq((count + per_in - 1) // per_in)
                with m.If(s_in.fire):
                    with m.If(~in_pay):
                        m.d.sync += [in_pay.eq(count != 0), left.eq(beats)]
                    with m.Else():
                        m.d.sync += [left.eq(left - 1), in_pay.eq(left != 1)]
                is_hdr = ~in_pay
                # a payload beat completes a P beat (16 P): every beat for int8 scores; for int16 every second
                # one, and the packet's last
                pb = BEAT_BYTES // per_in  # input beats per P beat (1 or 2)
                k_in = Signal(range(max(pb, 2)), name=f"s{i}_sub_beat")
                with m.If(s_in.fire & in_pay):
                    m.d.sync += k_in.eq(Mux((k_in == pb - 1) | (left == 1), 0, k_in + 1))
                with m.If(s_in.fire & ~in_pay):
                    m.d.sync += k_in.eq(0)
                produces = is_hdr | (k_in == pb - 1) | (left == 1)
                last = Mux(is_hdr, count == 0, left == 1)
                lo = 32 * _FIELDS["elem_bits"].word + _FIELDS["elem_bits"].lo
                hi = lo + _FIELDS["elem_bits"].width
                header_out = Cat(data[:lo], Const(8, hi - lo), data[hi:])
                with m.If(ResetSignal()):
                    m.d.sync += [in_pay.eq(0), k_in.eq(0)]
                pipe_slots = None
                if slots and not mutant:
                    pipe = dut.pipes[i]
                    # the harness's parse agrees with the pipeline's issue state; elements left from the group
                    # issuing now: none while the pipeline pads the packet's last P beat (int16 scores)
                    subs = per_in // lanes
                    elems = Signal(range(-(1 << (cw + 1)), 1 << (cw + 1)), name=f"s{i}_elements_left")
                    pad = Signal(name=f"s{i}_padding")
                    m.d.comb += [elems.eq(pipe.rem + pipe.sub * lanes), pad.eq(pipe.in_payload & (elems <= 0))]
                    # a padded P beat is owed from its last input beat on, before any slot holds it
                    pipe_slots = [*pipe.formal_slots(), Slot(pad, {"last": Const(1, 1), "hdr": Const(0, 1)})]
                    for j, inv in enumerate([
                        in_pay == (pipe.in_payload & ~pad),
                        ~in_pay | (elems > 0) & (left == (elems + per_in - 1) // per_in),
                        ~in_pay | (pipe.grp == k_in * subs + pipe.sub),
                        in_pay | pad | (pipe.sub == 0) & (pipe.grp == 0),
                        in_pay | (k_in == 0),
                        # padding only fills the second input beat's groups of a P beat (int16 scores)
                        ~pad | (pipe.grp >= subs) & (elems > -per_in),
                        *_group_invariants(pipe, lanes),
                    ]):
                        chk.prop("axis.count", f"pipe{i}_issue{j}", inv)
                # a packet's last P beat waits for its padding groups (int16 scores) before the lanes' stages
                pad_groups = (BEAT_BYTES - per_in) // lanes if per_in < BEAT_BYTES else 0
                bound = latency - 1 + pad_groups
                ledger = _ledger_stream(m, chk, s_in, s_out, o, capacity=latency + 1, bound=bound, name=f"pipe{i}",
                                        expect={"last": last, "data": (header_out, is_hdr)}, produces=produces,
                                        slots=pipe_slots, slot_expect={"hdr": is_hdr})
                if pipe_slots:
                    _liveness_invariants(chk, f"pipe{i}", ledger.stuck, dut.pipes[i], bound)
        return build

    return Spec(harness, latency=latency, buffer=2,
                what=f"EnginePL(channels={channels}, lanes={lanes}, score_bits={score_bits})")


def _liveness_invariants(chk: Checks, key: str, stuck: Value, pipe: wiring.Component, bound: int) -> None:
    """``axis.liveness`` made inductive: while the sink is ready and nothing leaves, every enabled cycle moves
    each beat one place closer to the output (the skid buffer is empty, so the stage enable is high), so the
    cycles already waiting (``stuck``) plus the oldest beat's distance to the output stay within ``bound``.
    Distances: the skid buffer's output register 0, its skid register 1, lane stage ``k`` ``LATENCY - k``
    (the padding pseudo-slot of int16 packets is newer than every real slot and needs no bound here)."""
    slots = pipe.formal_slots()
    stages = len(pipe.stage_valid)
    dist = [0, 1] + [stages + 1 - k for k in range(stages, 0, -1)]
    assert len(slots) == len(dist)
    # the stage enable is the skid buffer's registered TREADY: low only with its skid register full, or in
    # the first cycle after reset (nothing held)
    chk.prop("axis.liveness", f"{key}_ce", pipe.ce | slots[1].valid | ~Cat(*(s.valid for s in slots)).any())
    older = Const(0, 1)
    for j, (s, d) in enumerate(zip(slots, dist, strict=True)):
        chk.prop("axis.liveness", f"{key}_oldest{j}", ~(s.valid & ~older) | (stuck + d <= bound))
        older = older | s.valid


def _group_invariants(pipe: wiring.Component, lanes: int) -> list[Value]:
    """Which lane-stage slots complete a P beat (``emit``), from the issue state: ``groups = 16 / lanes`` slots
    make a P beat; a payload slot's group number counts back from the group issuing now (``grp``) over the
    valid payload slots newer than it, or from ``groups - 1`` when a newer header shows that its packet ended
    (a packet's payload ends on a P-beat boundary: its last group is ``groups - 1``)."""
    groups = BEAT_BYTES // lanes
    if groups == 1:
        return [~v | e for v, e in zip(pipe.stage_valid, pipe.stage_emit, strict=True)]
    out = []
    mask = groups - 1
    for k in range(len(pipe.stage_valid)):  # index k: stage k + 1; newer stages have smaller indices
        newer = Const(0, 4)
        header_newer = Const(0, 1)
        for i in range(k - 1, -1, -1):
            payload = pipe.stage_valid[i] & ~pipe.stage_hdr[i] & ~header_newer
            newer = newer + payload.as_unsigned()
            header_newer = header_newer | (pipe.stage_valid[i] & pipe.stage_hdr[i])
        grp_k = (Mux(header_newer, groups - 1, pipe.grp - 1) - newer).as_unsigned() & mask
        out.append(~(pipe.stage_valid[k] & ~pipe.stage_hdr[k]) | (pipe.stage_emit[k] == (grp_k == mask)))
        out.append(~(pipe.stage_valid[k] & pipe.stage_hdr[k]) | pipe.stage_emit[k])
    return out


def engine_from_manifest(name: str, **kw: object) -> Spec:
    """:func:`engine` at a bitstream manifest's parameters (its ``engine`` section)."""
    from vckattn.hw.design.manifest import load_manifest

    e = load_manifest(name).engine
    assert e is not None, f"{name} has no engine section"
    return engine(e.channels, e.lanes, e.score_bits, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- registry


def _kernel(name: str, **kw: object) -> Callable[[], wiring.Component]:
    """The registry kernel ``name`` built with ``kw`` (the proof's build parameters)."""
    cls = PL_KERNELS[name].component

    def make() -> wiring.Component:
        return cls(**kw)  # type: ignore[operator]

    return make


def _regmap_of(make: Callable[[], wiring.Component]) -> Callable[[], RegisterMap]:
    """The register map of the kernel ``make()`` builds (built and elaborated once, for its map only:
    elaborating it uses every sub-component it made, so none is reported unused)."""

    @functools.cache
    def regmap() -> RegisterMap:
        kernel = make()
        Fragment.get(kernel, None)
        return kernel.regmap  # type: ignore[attr-defined, no-any-return]
    return regmap


_SWIFTMAX = dict(lanes=1, in_width=8)
_NORM = dict(lanes=1, max_d=2)
_SOFTMAX = dict(lanes=1, max_keys=2, in_width=8, max_rows=2)
_SCALE = dict(lanes=1, in_width=4, out_width=4)
_REQUANT = dict(lanes=1, max_d=2, mult_bits=4, in_width=4)
_ROPE = dict(lanes=1, head_dim=2, max_pos=2)


def _harnesses() -> dict[str, Callable[[], Spec]]:
    from vckattn.golden.sublayer import SublayerFormat
    from vckattn.hw.pl.bhyt_exact import BHyTExactKernel
    from vckattn.hw.pl.online_softmax import PASS1_LATENCY, PASS2_LATENCY
    from vckattn.hw.pl.requant import RequantKernel
    from vckattn.hw.pl.residual import ResidualKernel
    from vckattn.hw.pl.rmsnorm import RMSNormKernel
    from vckattn.hw.pl.rope import RopeKernel

    sm, nm, osm, sc = _kernel("swiftmax", **_SWIFTMAX), _kernel("bhyt_exact", **_NORM), \
        _kernel("online_softmax", **_SOFTMAX), _kernel("scale", **_SCALE)
    ap, rms = _kernel("bhyt_approx", **_NORM), _kernel("rmsnorm", **_NORM)
    nb = _NORM["max_d"] // _NORM["lanes"]
    kb = _SOFTMAX["max_keys"] // _SOFTMAX["lanes"]
    osm_lat = PASS1_LATENCY + 2 + 1 + PASS2_LATENCY + 1  # pass 1, descriptor FIFO, issue, pass 2, skid
    fmt = SwiftMaxFormat()
    rq, rp = _kernel("requant", **_REQUANT), _kernel("rope", **_ROPE)
    rs = _kernel("residual", lanes=1, max_d=2, fmt=SublayerFormat(mult_bits=4, res_bits=6, res_frac=2), in_width=4)
    rq_lat, rs_lat, rp_lat = RequantKernel.LATENCY, ResidualKernel.LATENCY, RopeKernel.LATENCY
    rb = _ROPE["head_dim"] // _ROPE["lanes"]
    return {
        "skid_buffer": lambda: skid_buffer(4),
        "stall_pipeline": lambda: stall_pipeline(3, 4, 2),
        "swiftmax_lane": lambda: lane(lambda: SwiftMaxLane(fmt, 8), "SwiftMaxLane(in_width=8)", SwiftMaxLane.LATENCY),
        "bhyt_scale_unit": lambda: lane(lambda: BHyTScaleUnit(NormFormat()), "BHyTScaleUnit", BHyTScaleUnit.LATENCY),
        "bhyt_lane": lambda: lane(lambda: BHyTLane(NormFormat()), "BHyTLane", BHyTLane.LATENCY),
        "rmsnorm_scale_unit": lambda: lane(lambda: RMSNormScaleUnit(NormFormat()), "RMSNormScaleUnit",
                                           RMSNormScaleUnit.LATENCY, registers=("eps_int", "g_frac")),
        "rmsnorm_lane": lambda: lane(lambda: RMSNormLane(NormFormat()), "RMSNormLane", RMSNormLane.LATENCY),
        "swiftmax": lambda: stream_kernel(sm, "SwiftMaxKernel(lanes=1, in_width=8)", latency=SwiftMaxLane.LATENCY + 1,
                                          capacity=SwiftMaxLane.LATENCY + 2, bound=SwiftMaxLane.LATENCY, user=1),
        "swiftmax_regs": lambda: register_file(_regmap_of(sm), "RegisterFile(swiftmax_regmap())"),
        "scale": lambda: stream_kernel(sc, "ScaleKernel(lanes=1, in_width=4, out_width=4)", latency=4, capacity=5,
                                       bound=3, user=1),
        "scale_regs": lambda: register_file(_regmap_of(sc), "RegisterFile(scale_regmap(lanes=1))"),
        "bhyt_approx": lambda: stream_kernel(ap, "BHyTApproxKernel(lanes=1, max_d=2)", latency=11, capacity=12,
                                             bound=10),
        "bhyt_approx_regs": lambda: register_file(_regmap_of(ap), "RegisterFile(bhyt_approx_regmap(1, 2))"),
        "bhyt_exact": lambda: stream_kernel(nm, "BHyTExactKernel(lanes=1, max_d=2)",
                                            latency=BHyTExactKernel.LATENCY + 1 + nb, buffer=2 * nb,
                                            capacity=2 * nb + BHyTExactKernel.LATENCY + 2,
                                            bound=BHyTExactKernel.LATENCY + 1, packet_beats=nb, slots=False),
        "bhyt_exact_regs": lambda: register_file(_regmap_of(nm), "RegisterFile(bhyt_exact_regmap(1, 2))"),
        "rmsnorm": lambda: stream_kernel(rms, "RMSNormKernel(lanes=1, max_d=2)", latency=RMSNormKernel.LATENCY + 1 + nb,
                                         buffer=2 * nb, capacity=2 * nb + RMSNormKernel.LATENCY + 2,
                                         bound=RMSNormKernel.LATENCY + 1,
                                         packet_beats=nb, slots=False),
        "rmsnorm_regs": lambda: register_file(_regmap_of(rms), "RegisterFile(rmsnorm_regmap(1, 2))"),
        "online_softmax": lambda: stream_kernel(osm, "OnlineSoftmaxKernel(lanes=1, max_keys=2, in_width=8, max_rows=2)",
                                                latency=osm_lat + kb, buffer=2 * kb,
                                                capacity=2 * kb + PASS2_LATENCY + 2,
                                                bound=osm_lat, user=1, packet_beats=kb, slots=False,
                                                # the capacity (both row buffers, pass 2's stages and the skid
                                                # buffer all full) is an upper bound: pass 2 (one global
                                                # stall) fills its stages only from 5 rows back to back, and
                                                # the descriptor FIFO (max_rows = 2) lets 2 through; a BMC
                                                # of 38 cycles did not reach it
                                                cover_full=False),
        "online_softmax_regs": lambda: register_file(_regmap_of(osm), "RegisterFile(online_softmax_regmap(2))"),
        "requant": lambda: stream_kernel(rq, "RequantKernel(lanes=1, max_d=2, mult_bits=4, in_width=4)",
                                         latency=rq_lat + 1, capacity=rq_lat + 2, bound=rq_lat),
        "requant_regs": lambda: register_file(_regmap_of(rq), "RegisterFile(requant_regmap(1, 2, 4))"),
        # the residual stream (s_axis_res) is a free input: the proof holds whatever it does
        "residual": lambda: stream_kernel(rs, "ResidualKernel(lanes=1, max_d=2, mult_bits=4, res_bits=6, res_frac=2, "
                                          "in_width=4)", latency=rs_lat + 1, capacity=rs_lat + 2, bound=rs_lat),
        "residual_regs": lambda: register_file(_regmap_of(rs), "RegisterFile(residual_regmap(1, 2, mult_bits=4))"),
        "rope": lambda: stream_kernel(rp, "RopeKernel(lanes=1, head_dim=2, max_pos=2)", latency=rp_lat + 1 + rb,
                                      buffer=2 * rb, capacity=2 * rb + rp_lat + 2, bound=rp_lat + 1,
                                      packet_beats=rb, slots=False, exact=True),
        "rope_regs": lambda: register_file(_regmap_of(rp), "RegisterFile(rope_regmap(1, 2, 2))"),
        "engine_small": lambda: engine_from_manifest("engine_small"),
        "engine_c4_l16_int8": lambda: engine(4, 16, 8),
        "engine_c1_l8_int16": lambda: engine(1, 8, 16),
        "engine_small_regs": lambda: register_file(lambda: _engine_regmap("engine_small"),
                                                   "RegisterFile of EnginePL(engine_small)"),
    }


def _engine_regmap(name: str) -> RegisterMap:
    from vckattn.golden.engine import engine_format
    from vckattn.golden.swiftmax_int import swiftmax_regmap
    from vckattn.hw.design.manifest import load_manifest

    e = load_manifest(name).engine
    assert e is not None
    return swiftmax_regmap(engine_format(e.score_bits), read_ports=e.channels)


#: Harness name -> its spec (built on demand).
HARNESSES: dict[str, Callable[[], Spec]] = _harnesses()


def all_proofs() -> list[tuple[str, FormalProof]]:
    """Every declared proof with its owner (a kernel's name, or ``component``)."""
    out = [(k.name, p) for k in KERNELS.values() for p in k.proofs]
    out += [("component", p) for p in COMPONENT_PROOFS]
    return out


# ---------------------------------------------------------------------------------------------- running


@dataclass
class ProofRun:
    """A proof with its covers and its mutant, run."""

    proof: FormalProof
    result: FormalResult
    covers: list[FormalResult]
    mutant: FormalResult | None
    mutant_breaks: bool  # the mutant failed the property MUTANTS names

    @property
    def ok(self) -> bool:
        return (self.result.status == "proven" and all(c.status == "reached" for c in self.covers)
                and self.mutant is not None and self.mutant.status == "failed" and self.mutant_breaks)

    @property
    def seconds(self) -> float:
        return self.result.seconds + sum(c.seconds for c in self.covers) + (self.mutant.seconds if self.mutant else 0)


def run_proof(p: FormalProof, *, timeout: float = 600.0, covers: bool = True, mutant: bool = True) -> ProofRun:
    """Prove ``p``, reach each of its harness's covers, and check that its mutant fails."""
    spec = HARNESSES[p.harness]()
    build = spec.harness(None)
    res = check(build, p.name, method=p.method, depth=p.depth, engine=p.engine, cuts=p.cuts, timeout=timeout)
    cov = []
    if covers:
        for c in elaborate_checks(build).covers:
            cov.append(check(build, p.name, method="bmc", depth=p.trace_depth or p.depth, engine=p.engine,
                             cuts=p.cuts, target=c, timeout=timeout))
    mres, breaks = None, False
    if mutant:
        mb = spec.harness(p.mutant)
        depth = p.depth if p.method == "bmc" else p.trace_depth or p.depth
        mres = check(mb, f"{p.name}__{p.mutant}", method="bmc", depth=depth, engine=p.engine, cuts=p.cuts,
                     timeout=timeout)
        asserts = elaborate_checks(mb).asserts
        caught = [asserts[n] for n in mres.failed_checks if n in asserts]
        breaks = any(c in MUTANTS[p.mutant] for c in caught)
        mres.failed_properties = sorted(set(caught))
    return ProofRun(p, res, cov, mres, breaks)


def properties_label(props: tuple[str, ...]) -> str:
    """The properties of a proof, short: ``axis.*`` (all of (a)-(d)), ``axil.*`` (all five), else their ids."""
    if props == AXIS:
        return "axis.* (a)-(d)"
    if props == AXIL:
        return "axil.* (all)"
    return ", ".join(props)


def _table(runs: Iterable[tuple[str, ProofRun]]) -> str:
    """The results as a markdown table: depth is the induction bound or BMC depth, then the covers' (and an
    induction's mutant's) trace depth; time is the proof, its covers and its mutant together."""
    rows = [("kernel", "proof", "properties", "method", "depth", "time (s)", "mutant that fails", "result")]
    for owner, r in runs:
        p = r.proof
        mut = f"{p.mutant}: {r.mutant.status} {', '.join(r.mutant.failed_properties)}" if r.mutant else "-"
        depth = str(p.depth) + (f" / {p.trace_depth}" if p.trace_depth else "")
        rows.append((owner, p.name, properties_label(p.properties), p.method + (" (cut)" if p.cuts else ""), depth,
                     f"{r.seconds:.1f}", mut, "ok" if r.ok else "FAIL"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run the formal proofs of the PL kernels (their covers and must-fail "
                                             "mutants too) and print the table.")
    ap.add_argument("--fast", action="store_true", help="only the fast set (the one `make test` runs)")
    ap.add_argument("--table", metavar="FILE", help="also write the results table (markdown) to FILE")
    ap.add_argument("names", nargs="*", help="only these proofs (default: all)")
    args = ap.parse_args(argv)
    # a terminated run unwinds (SystemExit), so the runner kills its solver processes on the way out
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    todo = [(o, p) for o, p in all_proofs() if (not args.fast or p.fast) and (not args.names or p.name in args.names)]
    if args.names and len(todo) != len(set(args.names)):
        known = ", ".join(p.name for _, p in all_proofs())
        print(f"error: unknown proof name(s); known: {known}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    runs = []
    for owner, p in todo:
        r = run_proof(p)
        runs.append((owner, r))
        print(f"{'ok  ' if r.ok else 'FAIL'} {p.name}: {r.result.summary()}", flush=True)
        if not r.ok:
            for x in [r.result, *r.covers, *([r.mutant] if r.mutant else [])]:
                if x.status not in ("proven", "reached") or x is r.mutant:
                    print(x.report(), flush=True)
    table = _table(runs)
    summary = f"{len(runs)} proofs, {sum(1 for _, r in runs if r.ok)} ok, {time.monotonic() - t0:.0f} s"
    print()
    print(table)
    print(f"\n{summary}")
    if args.table:
        Path(args.table).write_text(f"{table}\n\n{summary}\n", encoding="utf-8")
    return 0 if all(r.ok for _, r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

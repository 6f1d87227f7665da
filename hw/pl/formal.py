"""Formal properties of the PL kernels' AXI4-Stream and AXI4-Lite ports, in Amaranth (0.5).

The full description: ``docs/internals/hw.md``, section ``hw/pl/formal.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Const, Module, Mux, ResetSignal, Signal, Value

from vckattn.golden.regmap import AXIL_DATA_WIDTH, Mem, RegisterMap

from .stream import Slot

__all__ = [
    "ASSUMPTIONS",
    "PROPERTIES",
    "AxiLite",
    "AxilLedger",
    "Checks",
    "Slot",
    "Stream",
    "StreamLedger",
    "assert_hold",
    "assert_lane_hold",
    "assert_reset_idle",
    "assume_master",
    "assume_source",
    "drive_free",
    "past",
]

#: Every property the library states, by id: what it claims (module docstring).
PROPERTIES: dict[str, str] = {
    "axis.hold": "(a) while TVALID and not TREADY: TVALID, TDATA, TLAST and TUSER hold",
    "axis.count": "(b) beats accepted minus beats delivered within [0, capacity]",
    "axis.framing": "(b) the n-th beat out has the n-th beat in's TLAST (and TUSER/TDATA where passed through)",
    "axis.reset_idle": "(c) TVALID low after reset and at power-up",
    "axis.liveness": "(d) TREADY held high: a held complete beat leaves within the latency bound",
    "axil.one_response": "one response per request, within the bound while BREADY/RREADY are high",
    "axil.no_spurious": "no BVALID/RVALID without an outstanding request",
    "axil.readback": "a read returns the exact word last written (ro: the kernel's value; unmapped: SLVERR, 0)",
    "axil.ro_ignores_writes": "writes to ro registers, ID/VERSION and unmapped words answer SLVERR and change nothing",
    "axil.reset_idle": "BVALID and RVALID low after reset and at power-up",
    "lane.hold": "after a cycle with en low every output holds",
}

#: Every environment assumption, by id (on inputs only).
ASSUMPTIONS: dict[str, str] = {
    "axis.source": "an input stream's source holds TVALID and its payload until TREADY",
    "axil.master": "the AXI4-Lite master holds AWVALID/WVALID/ARVALID and their payload until accepted",
    "packet.max_beats": "an input packet has at most the kernel's longest packet of beats",
    "packet.exact_beats": "an input packet has exactly the kernel's row length of beats",
    "regs.stable": "a lane's register inputs (from the register file) hold their value (written while idle)",
}


def past(m: Module, value: Value, *, init: int = 0, name: str | None = None) -> Signal:
    """``value`` one cycle ago (``init`` at power-up); a harness register that reset does not touch."""
    v = Value.cast(value)
    r = Signal(v.shape(), init=init, reset_less=True, name=name)
    m.d.sync += r.eq(v)
    return r


class Checks:
    """The named assertions, assumptions and covers of one harness.

    Every check is a named 1-bit signal (``assert_*``, ``assume_*``, ``cover_*``) so that a counterexample
    shows which one failed. ``mode``:

    * ``"prove"``: assertions become ``Assert``, assumptions ``Assume``; covers are not emitted.
    * ``"cover"``: assumptions become ``Assume``; only the cover ``target`` is emitted, as ``Assert(~cover)``,
      so that a counterexample is a trace that reaches it (and a proof shows that it is unreachable).

    Args:
        m: The harness module.
        mode: ``"prove"`` or ``"cover"``.
        target: The cover to reach (``"cover"`` mode).
    """

    def __init__(self, m: Module, mode: str = "prove", target: str | None = None) -> None:
        if mode not in ("prove", "cover"):
            raise ValueError(f"mode must be 'prove' or 'cover', got {mode!r}")
        if mode == "cover" and not target:
            raise ValueError("cover mode needs the cover's name")
        self.m, self.mode, self.target = m, mode, target
        self.asserts: dict[str, str] = {}  # check name -> property id
        self.assumes: dict[str, str] = {}  # check name -> assumption id
        self.covers: list[str] = []
        self.watch: list[Value] = []  # signals a counterexample table shows, besides the checks

    @staticmethod
    def _key(kind: str, ident: str, key: str) -> str:
        base = f"{kind}_{ident.replace('.', '_')}"
        return f"{base}_{key}" if key else base

    def prop(self, ident: str, key: str, cond: Value) -> Signal:
        """Assert ``cond`` in every cycle as (an instance ``key`` of) property ``ident``."""
        if ident not in PROPERTIES:
            raise ValueError(f"unknown property {ident!r}")
        name = self._key("assert", ident, key)
        if name in self.asserts:
            raise ValueError(f"check {name} stated twice")
        ok = Signal(name=name)
        self.m.d.comb += ok.eq(cond)
        self.asserts[name] = ident
        if self.mode == "prove":
            self.m.d.comb += Assert(ok)
        return ok

    def env(self, ident: str, key: str, cond: Value) -> Signal:
        """Assume ``cond`` in every cycle (environment assumption ``ident`` on inputs)."""
        if ident not in ASSUMPTIONS:
            raise ValueError(f"unknown assumption {ident!r}")
        name = self._key("assume", ident, key)
        if name in self.assumes:
            raise ValueError(f"check {name} stated twice")
        ok = Signal(name=name)
        self.m.d.comb += [ok.eq(cond), Assume(ok)]
        self.assumes[name] = ident
        return ok

    def declare(self, ident: str) -> None:
        """Record assumption ``ident`` where the harness makes it by construction (e.g. a register input
        driven by a free constant rather than a free sequence) instead of with ``Assume``."""
        if ident not in ASSUMPTIONS:
            raise ValueError(f"unknown assumption {ident!r}")
        self.assumes[f"by_construction_{ident.replace('.', '_')}"] = ident

    def cover(self, key: str, cond: Value) -> Signal:
        """A reachability check: some trace satisfying the assumptions reaches ``cond``."""
        name = f"cover_{key}"
        if name in self.covers:
            raise ValueError(f"cover {name} stated twice")
        hit = Signal(name=name)
        self.m.d.comb += hit.eq(cond)
        self.covers.append(name)
        if self.mode == "cover" and self.target == name:
            self.m.d.comb += Assert(~hit)
        return hit

    @property
    def properties(self) -> set[str]:
        """The property ids asserted."""
        return set(self.asserts.values())


def drive_free(m: Module, *signals: Value, const: bool = False) -> None:
    """Drive each input with a free value: a new one every cycle (``AnySeq``), or one per trace (``AnyConst``)."""
    for s in signals:
        m.d.comb += s.eq((AnyConst if const else AnySeq)(Value.cast(s).shape()))


# ---------------------------------------------------------------------------------------------- AXI4-Stream


@dataclass(frozen=True)
class Stream:
    """One AXI4-Stream port as the properties see it: TVALID, TREADY and the payload fields by name
    (``data``, ``last``, ``user``: those the port has)."""

    name: str
    valid: Value
    ready: Value
    payload: dict[str, Value] = field(default_factory=dict)

    @classmethod
    def of(cls, component: object, prefix: str, name: str | None = None) -> Stream:
        """The flat port ``<prefix>_t{valid,ready,data,last,user}`` of ``component``
        (:func:`vckattn.hw.pl.stream.axis_members` naming)."""
        payload = {f: getattr(component, f"{prefix}_t{f}") for f in ("data", "last", "user")
                   if hasattr(component, f"{prefix}_t{f}")}
        return cls(name or prefix, getattr(component, f"{prefix}_tvalid"), getattr(component, f"{prefix}_tready"),
                   payload)

    @property
    def fire(self) -> Value:
        return self.valid & self.ready

    @property
    def last(self) -> Value:
        return self.payload.get("last", Const(0, 1))


def _stalled(m: Module, s: Stream) -> Signal:
    """1 in a cycle whose previous cycle had TVALID and not TREADY (and no reset)."""
    return past(m, s.valid & ~s.ready & ~ResetSignal(), name=f"{s.name}_stalled")


def _held(m: Module, s: Stream) -> Value:
    """TVALID and every payload field equal to the previous cycle's."""
    same = [s.valid]
    for f, v in s.payload.items():
        same.append(v == past(m, v, name=f"{s.name}_{f}_q"))
    return Cat(*same).all()


def assume_source(chk: Checks, s: Stream) -> None:
    """``axis.source`` on input stream ``s``: its source holds TVALID and the payload until TREADY."""
    chk.env("axis.source", s.name, ~_stalled(chk.m, s) | _held(chk.m, s))


def assert_hold(chk: Checks, s: Stream) -> None:
    """``axis.hold`` (a) on output stream ``s``."""
    chk.prop("axis.hold", s.name, ~_stalled(chk.m, s) | _held(chk.m, s))


def _after_reset(m: Module) -> Signal:
    """1 at power-up and in every cycle after a reset cycle."""
    return past(m, ResetSignal(), init=1, name="after_reset")


def assert_reset_idle(chk: Checks, valids: Mapping[str, Value], ident: str = "axis.reset_idle") -> None:
    """``axis.reset_idle`` (c) (or ``axil.reset_idle``): each of ``valids`` (by port name) is low at power-up
    and after reset."""
    after = _after_reset(chk.m)
    for key, v in valids.items():
        chk.prop(ident, key, ~after | ~v)


def _popcount(bits: Sequence[Value]) -> Value:
    return sum((Value.cast(b).as_unsigned() for b in bits), Const(0, 1))


class StreamLedger:
    """Ghost bookkeeping between a component's input stream and its output stream: ``axis.count``,
    ``axis.framing``, ``axis.liveness`` and the covers "a full packet under a stall" and "full".

    The component owes one output beat for every accepted input beat for which ``produces`` is 1 (default:
    every beat); ``expect`` gives, for the accepted beat, the output-side value of each field the
    ``axis.framing`` check compares (at least ``last``), and the output stream's ``payload`` the delivered
    ones. One beat, chosen by the environment (a free ``tag`` input), is followed from its acceptance to its
    delivery. For an unbounded proof by induction, ``slots`` (the component's beat places, oldest first,
    fields in output form) give the invariants: the number of valid slots equals the beats owed, and the
    followed beat sits in the slot at its position with its fields.

    Args:
        chk: The harness's checks.
        s_in, s_out: The input and output streams.
        capacity: Most beats the component may owe (``axis.count``).
        bound: ``axis.liveness`` bound: most consecutive cycles with TREADY high, a complete beat held and
            nothing delivered.
        expect: Field name -> the expected output value of the accepted input beat (output form), or a pair
            ``(value, when)``: compare the field only for beats accepted with ``when`` high (e.g. the data of
            header beats only).
        produces: 1 when the accepted input beat makes the component owe one output beat (default 1).
        packet_end: For packet-buffered components: 1 when the accepted beat completes its packet (the
            component starts a packet's output only then); liveness counts only beats of complete packets.
        slots: The component's beat places (induction invariants), or ``None`` (BMC).
        slot_expect: Fields (like ``expect``) that only the slots hold, not the output port (e.g. whether the
            beat is a header): the followed beat's slot must hold them too.
        name: Instance key of the checks.
        cover_full: Cover a full component (``owed == capacity``): off where ``capacity`` is a sound upper
            bound that no short trace reaches.
    """

    def __init__(self, chk: Checks, s_in: Stream, s_out: Stream, *, capacity: int, bound: int,
                 expect: Mapping[str, Value | tuple[Value, Value]], produces: Value | None = None,
                 packet_end: Value | None = None,
                 slots: Sequence[Slot] | None = None, slot_expect: Mapping[str, Value] | None = None,
                 name: str = "", cover_full: bool = True) -> None:
        m = chk.m
        key = name or f"{s_in.name}_{s_out.name}"
        if "last" not in expect:
            raise ValueError("axis.framing compares at least TLAST: expect needs 'last'")
        for f in expect:
            if f != "last" and f not in s_out.payload:
                raise ValueError(f"output stream {s_out.name} has no field {f!r}")
        rst = ResetSignal()
        produce = Value.cast(produces if produces is not None else Const(1, 1))
        win = s_in.fire & produce  # the component now owes one more beat
        wout = s_out.fire
        cw = range(capacity + 2)

        # ---- axis.count: owed beats
        owed = Signal(cw, name=f"{key}_owed")
        m.d.sync += owed.eq(owed + win - wout)
        chk.prop("axis.count", f"{key}_out_of_nothing", ~(wout & (owed == 0)))
        chk.prop("axis.count", f"{key}_capacity", owed <= capacity)

        # ---- axis.framing: one beat, tagged by the environment, followed to its delivery
        tag = Signal(name=f"{key}_tag")
        drive_free(m, tag)
        following = Signal(name=f"{key}_following")
        ahead = Signal(cw, name=f"{key}_ahead")  # beats the component delivers before the followed one
        exp = {f: (v if isinstance(v, tuple) else (v, None)) for f, v in {**expect, **(slot_expect or {})}.items()}
        rec = {f: Signal(Value.cast(v).shape(), name=f"{key}_rec_{f}") for f, (v, _) in exp.items()}
        rec_when: dict[str, Value] = {f: Signal(name=f"{key}_rec_{f}_when") if w is not None else Const(1, 1)
                                      for f, (_, w) in exp.items()}
        out_val = {f: (s_out.last if f == "last" else s_out.payload[f]) for f in expect}

        def same(f: str, v: Value) -> Value:
            return ~rec_when[f] | (v == rec[f])

        its_turn = following & (ahead == 0) & wout
        check = Cat(*(same(f, out_val[f]) for f in expect)).all()
        chk.prop("axis.framing", key, ~its_turn | check)
        start = win & tag & (~following | its_turn)
        with m.If(start):
            m.d.sync += [following.eq(1), ahead.eq(owed - wout)]
            m.d.sync += [rec[f].eq(v) for f, (v, _) in exp.items()]
            m.d.sync += [rec_when[f].eq(w) for f, (_, w) in exp.items() if w is not None]
        with m.Elif(its_turn):
            m.d.sync += following.eq(0)
        with m.Elif(following & wout):
            m.d.sync += ahead.eq(ahead - 1)
        chk.prop("axis.framing", f"{key}_position", ~following | (ahead < owed))

        if slots is not None:
            chk.prop("axis.count", f"{key}_slots", _popcount([s.valid for s in slots]) == owed)
            before = Const(0, 1)
            for i, s in enumerate(slots):
                here = following & s.valid & (before == ahead)
                eq = [same(f, s.fields[f]) for f in exp if f in s.fields]
                if eq:
                    chk.prop("axis.framing", f"{key}_slot{i}", ~here | Cat(*eq).all())
                before = before + s.valid.as_unsigned()

        # ---- axis.liveness: complete beats held, sink ready, nothing delivered
        if packet_end is None:
            complete = owed
        else:
            open_ = Signal(cw, name=f"{key}_open")  # owed beats of the packet still being accepted
            with m.If(s_in.fire & packet_end):
                m.d.sync += open_.eq(0)
            with m.Elif(win):
                m.d.sync += open_.eq(open_ + 1)
            complete = owed - open_
            chk.prop("axis.count", f"{key}_open", open_ <= owed)
        stuck = Signal(range(bound + 2), name=f"{key}_stuck")
        with m.If((complete != 0) & s_out.ready & ~wout & (stuck <= bound)):
            m.d.sync += stuck.eq(stuck + 1)
        with m.Elif(~((complete != 0) & s_out.ready & ~wout)):
            m.d.sync += stuck.eq(0)
        chk.prop("axis.liveness", key, stuck <= bound)

        # ---- covers: a packet of several beats delivered whole while the sink stalled it; the component full
        stalled = Signal(name=f"{key}_pkt_stalled")
        beats = Signal(range(3), name=f"{key}_pkt_beats")  # beats of the packet delivered so far (saturating)
        with m.If(wout & s_out.last):
            m.d.sync += [stalled.eq(0), beats.eq(0)]
        with m.Else():
            with m.If(s_out.valid & ~s_out.ready):
                m.d.sync += stalled.eq(1)
            with m.If(wout & (beats < 2)):
                m.d.sync += beats.eq(beats + 1)
        chk.cover(f"{key}_packet_under_stall", wout & s_out.last & stalled & (beats != 0))
        if cover_full:
            chk.cover(f"{key}_full", owed == capacity)

        # harness state resets with the component
        with m.If(rst):
            m.d.sync += [owed.eq(0), following.eq(0), stuck.eq(0), stalled.eq(0), beats.eq(0)]
            if packet_end is not None:
                m.d.sync += open_.eq(0)
        chk.watch += [owed, tag, following, ahead, stuck]
        self.owed, self.following, self.ahead, self.stuck = owed, following, ahead, stuck


# ---------------------------------------------------------------------------------------------- lanes


def assert_lane_hold(chk: Checks, en: Value, outputs: Mapping[str, Value]) -> None:
    """``lane.hold``: after a cycle with ``en`` low (and no reset), each output equals its previous value."""
    m = chk.m
    idle = past(m, ~en & ~ResetSignal(), name="lane_idle")
    for key, v in outputs.items():
        chk.prop("lane.hold", key, ~idle | (v == past(m, v, name=f"{key}_q")))


# ---------------------------------------------------------------------------------------------- AXI4-Lite

_AXIL = ("awaddr", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp", "bvalid", "bready",
         "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid", "rready")
RESP_OKAY, RESP_SLVERR = 0, 2


@dataclass(frozen=True)
class AxiLite:
    """A flat AXI4-Lite slave port (:func:`vckattn.hw.pl.axil.axil_members` naming), field -> signal."""

    sig: dict[str, Value]

    @classmethod
    def of(cls, component: object, prefix: str = "s_axil") -> AxiLite:
        return cls({f: getattr(component, f"{prefix}_{f}") for f in _AXIL})

    def __getattr__(self, name: str) -> Value:
        try:
            return self.sig[name]
        except KeyError:
            raise AttributeError(name) from None

    def inputs(self) -> list[Value]:
        return [self.sig[f] for f in ("awaddr", "awvalid", "wdata", "wstrb", "wvalid", "bready", "araddr", "arvalid",
                                      "rready")]


def assume_master(chk: Checks, a: AxiLite) -> None:
    """``axil.master``: AWVALID/WVALID/ARVALID and their payload hold until accepted."""
    m = chk.m
    for ch, payload in (("aw", ("awaddr",)), ("w", ("wdata", "wstrb")), ("ar", ("araddr",))):
        valid, ready = a.sig[f"{ch}valid"], a.sig[f"{ch}ready"]
        waiting = past(m, valid & ~ready & ~ResetSignal(), name=f"axil_{ch}_waiting")
        same = [valid] + [a.sig[p] == past(m, a.sig[p], name=f"axil_{p}_q") for p in payload]
        chk.env("axil.master", ch, ~waiting | Cat(*same).all())


class _Decode:
    """What the register map says about one word address (``word``: byte address >> 2)."""

    def __init__(self, m: Module, rm: RegisterMap, word: Value, ro_values: Mapping[str, Value], name: str) -> None:
        self.writable = Signal(name=f"{name}_writable")
        self.readable = Signal(name=f"{name}_readable")
        self.is_reg = Signal(name=f"{name}_is_rw_reg")
        self.is_mem = Signal(name=f"{name}_is_mem")
        self.fixed = Signal(name=f"{name}_fixed")  # a constant or a kernel-driven (ro) word
        self.fixed_word = Signal(AXIL_DATA_WIDTH, name=f"{name}_fixed_word")
        self.reset_word = Signal(AXIL_DATA_WIDTH, name=f"{name}_reset_word")
        self._m, self._hits, self._name = m, [], name
        for e in rm.entries():
            w0 = e.offset >> 2
            if e.kind == "mem":
                spec = e.spec
                assert isinstance(spec, Mem)
                k = spec.index_bits
                hit = ((word >> k) == (w0 >> k)) & ((word & ((1 << k) - 1)) < spec.depth) if k else word == w0
            else:
                hit = word == w0
            self._hits.append((hit, e))
            with m.If(hit):
                if e.kind == "const":
                    m.d.comb += [self.readable.eq(1), self.fixed.eq(1), self.fixed_word.eq(e.value)]
                elif e.kind == "reg" and e.access == "ro":
                    m.d.comb += [self.readable.eq(1), self.fixed.eq(1),
                                 self.fixed_word.eq(_extend(ro_values[e.name], e.width, e.signed))]
                elif e.kind == "reg":
                    m.d.comb += [self.readable.eq(1), self.writable.eq(1), self.is_reg.eq(1),
                                 self.reset_word.eq(_extend(Const(e.spec.reset, e.width), e.width, e.signed))]
                else:
                    m.d.comb += [self.writable.eq(1), self.is_mem.eq(1), self.readable.eq(int(e.access != "wo"))]

    def extend(self, v: Value, what: str) -> Signal:
        """The low bits of the 32-bit ``v`` that the addressed entry keeps, sign/zero-extended as it reads."""
        out = Signal(AXIL_DATA_WIDTH, name=f"{self._name}_{what}")
        for hit, e in self._hits:
            if e.kind in ("reg", "mem"):
                with self._m.If(hit):
                    self._m.d.comb += out.eq(_extend(v, e.width, e.signed))
        return out


def _extend(v: Value, width: int, is_signed: bool) -> Value:
    """The low ``width`` bits of ``v``, sign- or zero-extended to 32 bits."""
    low = Value.cast(v).as_unsigned()[:width]
    return Cat(low, Mux(low[width - 1], (1 << (AXIL_DATA_WIDTH - width)) - 1, 0)) if is_signed and width < 32 \
        else low


class AxilLedger:
    """The AXI4-Lite properties of one register file (module docstring), with its ghost bookkeeping.

    Args:
        chk: The harness's checks.
        a: The slave port.
        regmap: The register map it implements.
        ro_values: The kernel-driven value of each ``ro`` register (its ``reg[name]`` signal).
        bound: ``axil.one_response`` bound (cycles with BREADY/RREADY high and the response outstanding).
        regfile: For an unbounded proof by induction, the :class:`~vckattn.hw.pl.axil.RegisterFile` whose
            named state (``aw_full``, ``aw_word``, ``w_full``, ``w_data``, ``w_strb``, ``b_valid``,
            ``ar_busy``, ``r_valid``, ``reg``, ``mem_ports``) the invariants relate to the bookkeeping; the
            ledger then drives kernel read port 0 of every memory (the picked word's entry, always enabled).
        name: Instance key.
    """

    def __init__(self, chk: Checks, a: AxiLite, regmap: RegisterMap, *, ro_values: Mapping[str, Value],
                 bound: int, regfile: object | None = None, name: str = "axil") -> None:
        m = chk.m
        rst = ResetSignal()
        wa = regmap.addr_width - 2
        aw_fire = a.awvalid & a.awready
        w_fire = a.wvalid & a.wready
        ar_fire = a.arvalid & a.arready
        b_fire = a.bvalid & a.bready
        r_fire = a.rvalid & a.rready

        # ---- outstanding requests: AWs and Ws accepted minus B handshakes; ARs minus R handshakes
        aw_n = Signal(range(4), name=f"{name}_aw_out")
        w_n = Signal(range(4), name=f"{name}_w_out")
        ar_n = Signal(range(3), name=f"{name}_ar_out")
        m.d.sync += [aw_n.eq(aw_n + aw_fire - b_fire), w_n.eq(w_n + w_fire - b_fire), ar_n.eq(ar_n + ar_fire - r_fire)]
        chk.prop("axil.no_spurious", "b", ~a.bvalid | ((aw_n != 0) & (w_n != 0)))
        chk.prop("axil.no_spurious", "r", ~a.rvalid | (ar_n != 0))
        chk.prop("axil.one_response", "outstanding", (aw_n <= 2) & (w_n <= 2) & (ar_n <= 1))

        # a new response: BVALID now, and not the one held from the previous cycle
        b_held = past(m, a.bvalid & ~a.bready & ~rst, name=f"{name}_b_held")
        b_new = Signal(name=f"{name}_b_new")
        m.d.comb += b_new.eq(a.bvalid & ~b_held)

        # ---- bounded response
        w_pending = Signal(name=f"{name}_w_pending")
        m.d.comb += w_pending.eq((aw_n != 0) & (w_n != 0))
        for ch, pend, ready, fire in (("b", w_pending, a.bready, b_fire), ("r", ar_n != 0, a.rready, r_fire)):
            stuck = Signal(range(bound + 2), name=f"{name}_{ch}_stuck")
            waiting = pend & ready & ~fire
            with m.If(waiting & (stuck <= bound)):
                m.d.sync += stuck.eq(stuck + 1)
            with m.Elif(~waiting):
                m.d.sync += stuck.eq(0)
            with m.If(rst):
                m.d.sync += stuck.eq(0)
            chk.prop("axil.one_response", f"{ch}_bound", stuck <= bound)

        # ---- the requests not yet answered, in order (AW and W queues of 2)
        def queue(fire: Value, pop: Value, width: int, qname: str,
                  value: Value) -> tuple[Value, Signal, list[Signal]]:
            q = [Signal(width, name=f"{name}_{qname}{i}") for i in range(2)]
            n = Signal(range(3), name=f"{name}_{qname}_n")
            head = Mux(n == 0, value, q[0])  # the request accepted in this very cycle when the queue is empty
            with m.If(pop & ~fire):
                m.d.sync += [q[0].eq(q[1]), n.eq(n - 1)]
            with m.Elif(fire & ~pop):
                with m.If(n == 0):
                    m.d.sync += q[0].eq(value)
                with m.Else():
                    m.d.sync += q[1].eq(value)
                m.d.sync += n.eq(n + 1)
            with m.Elif(fire & pop):
                with m.If(n == 2):
                    m.d.sync += [q[0].eq(q[1]), q[1].eq(value)]
                with m.Elif(n == 1):
                    m.d.sync += q[0].eq(value)
            with m.If(rst):
                m.d.sync += n.eq(0)
            return head, n, q

        aw_head, aw_qn, aw_q = queue(aw_fire, b_new, wa, "awq", a.awaddr[2:])
        w_head, w_qn, w_q = queue(w_fire, b_new, AXIL_DATA_WIDTH + 4, "wq", Cat(a.wdata, a.wstrb))
        chk.prop("axil.no_spurious", "b_new", ~b_new | (((aw_qn != 0) | aw_fire) & ((w_qn != 0) | w_fire)))

        # ---- axil.ro_ignores_writes: the response code of every write
        dw = _Decode(m, regmap, aw_head, ro_values, f"{name}_wr")
        chk.prop("axil.ro_ignores_writes", "bresp",
                 ~b_new | (a.bresp == Mux(dw.writable, RESP_OKAY, RESP_SLVERR)))

        # ---- axil.readback on one word the environment picks
        word = Signal(wa, name=f"{name}_word")
        drive_free(m, word, const=True)
        d = _Decode(m, regmap, word, ro_values, f"{name}_rd")
        known = Signal(name=f"{name}_known", reset_less=True)
        val = Signal(AXIL_DATA_WIDTH, name=f"{name}_val", reset_less=True)  # the word a read must return
        # at power-up and after a reset a register holds its reset value; memories keep their contents
        fresh = _after_reset(m) & d.is_reg
        known_now = known | fresh
        val_now = Mux(fresh, d.reset_word, val)
        wdata, wstrb = w_head[:AXIL_DATA_WIDTH], w_head[AXIL_DATA_WIDTH:]
        merged = Cat(*(Mux(wstrb[b], wdata[8 * b:8 * b + 8], val_now[8 * b:8 * b + 8]) for b in range(4)))
        ext_reg = d.extend(merged, "merged")
        ext_mem = d.extend(wdata, "wdata")
        m.d.sync += [known.eq(known_now), val.eq(val_now)]
        # a response shows that the write was performed in the cycle before (even if a reset now drops it)
        with m.If(b_new & (aw_head == word) & d.writable):
            m.d.sync += [known.eq(1), val.eq(Mux(d.is_reg, ext_reg, ext_mem))]

        # a read is clean when no write is in flight from its AR to its R handshake
        clean = Signal(name=f"{name}_clean")
        quiet = (aw_n == 0) & (w_n == 0) & ~aw_fire & ~w_fire
        rd_word = Signal(wa, name=f"{name}_rd_word")
        with m.If(ar_fire):
            m.d.sync += [clean.eq(quiet), rd_word.eq(a.araddr[2:])]
        with m.Elif(~quiet):
            m.d.sync += clean.eq(0)
        with m.If(rst):
            m.d.sync += clean.eq(0)
        mine = r_fire & clean & (rd_word == word)
        expect_word = Mux(d.fixed, d.fixed_word, val_now)
        good = Mux(d.readable,
                   (a.rresp == RESP_OKAY) & (~(d.fixed | known_now) | (a.rdata == expect_word)),
                   (a.rresp == RESP_SLVERR) & (a.rdata == 0))
        chk.prop("axil.readback", "word", ~mine | good)

        # covers: a write answered OKAY; the picked word read back after a write to it
        chk.cover(f"{name}_write_okay", b_new & (a.bresp == RESP_OKAY))
        chk.cover(f"{name}_readback_written", mine & known & ~fresh & d.writable & d.readable)

        if regfile is not None:
            rf = regfile
            inv = [
                aw_n == rf.aw_full + rf.b_valid, w_n == rf.w_full + rf.b_valid, ar_n == rf.ar_busy + rf.r_valid,
                aw_qn == rf.aw_full + b_new, w_qn == rf.w_full + b_new,
                ~rf.aw_full | (Mux(b_new, aw_q[1], aw_q[0]) == rf.aw_word),
                ~rf.w_full | (Mux(b_new, w_q[1], w_q[0]) == Cat(rf.w_data, rf.w_strb)),
                ~clean | (aw_n == 0) & (w_n == 0),
                ~(rf.ar_busy | rf.r_valid) | (rd_word == past(m, Mux(ar_fire, a.araddr[2:], rd_word),
                                                                  name=f"{name}_rd_word_q")) | ~clean,
            ]
            for i, c in enumerate(inv):
                chk.prop("axil.one_response", f"state{i}", c)
            # the picked word's content equals the bookkeeping, except in the cycle a register takes a write
            content = Signal(AXIL_DATA_WIDTH, name=f"{name}_content")
            for hit, e in d._hits:
                if e.kind == "reg" and e.access == "rw":
                    with m.If(hit):
                        m.d.comb += content.eq(_extend(rf.reg[e.name], e.width, e.signed))
                elif e.kind == "mem":
                    spec = regmap.mem(e.name)
                    port = rf.mem_ports[e.name][0]
                    m.d.comb += [port.addr.eq(word[:spec.index_bits]), port.en.eq(1)]
                    with m.If(hit):
                        m.d.comb += content.eq(_extend(port.data, e.width, e.signed))
            chk.prop("axil.readback", "content", ~(known_now & (d.is_reg | d.is_mem) & ~(b_new & d.is_reg))
                     | (content == val_now))
            chk.prop("axil.readback", "reg_known", ~d.is_reg | known_now)
            chk.prop("axil.readback", "pending", ~(rf.r_valid & clean & (rd_word == word)) | good)
            chk.watch += [content]

        self.word, self.known, self.val = word, known, val
        self.aw_n, self.w_n, self.ar_n = aw_n, w_n, ar_n
        self.b_new = b_new
        chk.watch += [aw_n, w_n, ar_n, word, known, val, clean, b_new]

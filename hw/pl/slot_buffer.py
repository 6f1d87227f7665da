"""A PL buffer of the sublayer with its banks and its sequence slots' access control (``hw/ENGINE.md``, "The
sublayer's PL side"): addressed beats in from its writers (the re-tilers, the attention pipelines' A records),
runs of beats out to its readers (:mod:`.buffer_reader`).

The buffer is ``banks`` simple dual-port memories of ``bank_beats`` 128-bit beats each (bank = address /
``bank_beats``); each bank takes one write and one read a cycle, given round-robin among the writers and among
the readers that ask for it. It holds ``slots`` sequence slots of ``slot_beats`` beats each, anywhere in its address
space (``beats``: ``slots · slot_beats`` by default; the buffers held per K-slice interleave their slots).

Access control, per slot: it is *full* once ``slot_beats`` beats have been written into it (``slot_full[s]``, which
the readers wait on) and stays full until ``readers`` releases of it have come (``release_valid`` /
``release_slot`` of the readers); then it is empty again and its *turn* (``slot_turn[s]``, one bit) flips: sequence
``b`` is slot ``b % slots``'s turn ``(b / slots) mod 2``. Every write beat names its address, its sequence's slot
and turn (TUSER: :func:`write_user`) and waits (its writer's TREADY low) until its slot is in that turn and not
full: a writer ahead of the others never writes the next sequence into a slot still filling or being read, and a
reader waits for the turn it names, so a reader ahead of another never takes the sequence before its own.

Wiring: each writer and each read port reaches only the banks it is given (``write_banks``, ``read_banks``; all
by default), so a bank's write and read multiplexers, and a read port's data multiplexer, are only as wide as the
streams that use them (the sublayer's PL top wires each stream to the banks its schedule makes it touch). A beat
or read for a bank its stream is not wired to is never granted: that stream stalls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from amaranth.hdl import Cat, Const, Module, Signal, Value
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from .pipeline import axis_port

__all__ = ["SlotBuffer", "slot_turn", "write_user"]

BEAT_BITS = 128


def slot_turn(seq: Value, slots: int, slot_bits: int) -> tuple[Value, Value]:
    """A sequence number's slot ``seq mod slots`` and turn ``(seq / slots) mod 2`` as a writer takes them from a
    header (``slot_bits`` wide, and one bit). With ``slots`` not a power of two (one slot a sequence) every ``seq``
    must be below ``slots``: the slot is its low bits, the turn 0."""
    if slots & (slots - 1) == 0:
        return (seq & (slots - 1))[:slot_bits], ((seq >> (slots.bit_length() - 1)) & 1)[:1]
    return seq[:slot_bits], Const(0, 1)


def write_user(addr: int, slot: int, turn: int, addr_bits: int, slot_bits: int) -> int:
    """A write beat's TUSER: its address, its sequence's slot above it, the sequence's turn on top."""
    return addr | slot << addr_bits | turn << (addr_bits + slot_bits)


def _round_robin(m: Module, requests: list, name: str) -> tuple[Signal, Signal]:
    """A round-robin arbiter over ``requests``: (the index granted, whether any is). The requester after the last
    one granted comes first: the lowest requesting index above the last grant, else the lowest requesting index
    (two priority encoders, ``2n`` muxes deep)."""
    n = len(requests)
    req = Signal(n, name=f"{name}_req")
    m.d.comb += req.eq(Cat(*requests))
    last = Signal(range(max(n, 2)), name=f"{name}_last")
    above = Signal(n, name=f"{name}_above")  # the requests above the last grant
    m.d.comb += above.eq(req & ~((Const(2, n + 1) << last) - 1)[:n])
    grant = Signal(range(max(n, 2)), name=f"{name}_grant")
    any_req = Signal(name=f"{name}_any")
    m.d.comb += any_req.eq(req.any())
    for i in reversed(range(n)):  # the lowest index assigned last: it wins
        with m.If(req[i]):
            m.d.comb += grant.eq(i)
    for i in reversed(range(n)):
        with m.If(above[i]):
            m.d.comb += grant.eq(i)
    with m.If(any_req):
        m.d.sync += last.eq(grant)
    return grant, any_req


class SlotBuffer(wiring.Component):
    """Banks and slots (module docstring).

    Ports: per writer ``w``: ``s_axis_w<w>_tdata[128]``, ``s_axis_w<w>_tuser[addr_bits + slot_bits + 1]``
    (:func:`write_user`: the beat's address, its sequence's slot, its turn on top),
    ``s_axis_w<w>_tvalid``, ``s_axis_w<w>_tready``, ``s_axis_w<w>_tlast`` (not used); per reader ``r``:
    ``rd<r>_addr``, ``rd<r>_req``, ``rd<r>_gnt``, ``rd<r>_data`` (one cycle after the grant), ``rd<r>_release``,
    ``rd<r>_release_slot``; ``slot_full[slots]``, ``slot_turn[slots]``; ``clk``, ``rst``.

    Args:
        slots: Sequence slots.
        slot_beats: Beats a sequence writes into its slot.
        bank_beats: Beats of a bank (a power of two).
        writers: Write streams.
        readers_n: Read ports.
        readers: Releases that empty a full slot.
        write_banks: Per writer, the banks it is wired to (default: every bank).
        read_banks: Per read port, the banks it is wired to (default: every bank).
        beats: The address space (default ``slots · slot_beats``).
    """

    def __init__(self, slots: int, slot_beats: int, bank_beats: int, writers: int, readers_n: int,
                 readers: int, write_banks: Sequence[Iterable[int]] | None = None,
                 read_banks: Sequence[Iterable[int]] | None = None, beats: int | None = None) -> None:
        if bank_beats < 1 or bank_beats & (bank_beats - 1):
            raise ValueError(f"bank_beats {bank_beats}: a power of two")
        if min(slots, slot_beats, writers, readers_n, readers) < 1:
            raise ValueError("slots, slot_beats, writers, read ports and releases must be >= 1")
        self.slots, self.slot_beats, self.bank_beats = slots, slot_beats, bank_beats
        self.beats = slots * slot_beats if beats is None else beats
        if self.beats < slots * slot_beats:
            raise ValueError(f"{self.beats} beats cannot hold {slots} slots of {slot_beats}")
        self.banks = -(-self.beats // bank_beats)
        self.writers, self.readers_n, self.readers = writers, readers_n, readers
        self.write_banks = self._wiring(write_banks, writers, "writer")
        self.read_banks = self._wiring(read_banks, readers_n, "read port")
        lonely = sorted(set(range(self.banks)) - set().union(*self.write_banks))
        if lonely:
            raise ValueError(f"banks {lonely} have no writer: their slots could never fill")
        self.addr_bits = max(1, (self.beats - 1).bit_length())
        self.slot_bits = max(1, (slots - 1).bit_length())
        members: dict = {"slot_full": Out(slots), "slot_turn": Out(slots)}
        for w in range(writers):
            members |= axis_port(f"s_axis_w{w}", BEAT_BITS, sink=True,
                                 user_width=self.addr_bits + self.slot_bits + 1)
        for r in range(readers_n):
            members |= {f"rd{r}_addr": In(self.addr_bits), f"rd{r}_req": In(1), f"rd{r}_gnt": Out(1),
                        f"rd{r}_data": Out(BEAT_BITS), f"rd{r}_release": In(1),
                        f"rd{r}_release_slot": In(self.slot_bits)}
        super().__init__(members)

    def _wiring(self, given: Sequence[Iterable[int]] | None, n: int, what: str) -> tuple[tuple[int, ...], ...]:
        """Each stream's banks, sorted (every bank when ``given`` is None), checked."""
        if given is None:
            return tuple(tuple(range(self.banks)) for _ in range(n))
        if len(given) != n:
            raise ValueError(f"{len(given)} bank lists for {n} {what}s")
        out = tuple(tuple(sorted(set(g))) for g in given)
        for i, banks in enumerate(out):
            if not banks or banks[0] < 0 or banks[-1] >= self.banks:
                raise ValueError(f"{what} {i}: banks {list(banks)} not a non-empty subset of 0..{self.banks - 1}")
        return out

    @property
    def write_pairs(self) -> int:
        """(writer, bank) wires: the width of the write multiplexers."""
        return sum(len(b) for b in self.write_banks)

    @property
    def read_pairs(self) -> int:
        """(bank, read port) wires: the width of the read multiplexers."""
        return sum(len(b) for b in self.read_banks)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bb = self.bank_beats.bit_length() - 1
        full = [Signal(name=f"full{s}") for s in range(self.slots)]
        written = [Signal(range(self.slot_beats + 1), name=f"written{s}") for s in range(self.slots)]
        released = [Signal(range(self.readers + 1), name=f"released{s}") for s in range(self.slots)]
        turn = [Signal(name=f"turn{s}") for s in range(self.slots)]
        m.d.comb += [self.slot_full.eq(sum(f.as_unsigned() << s for s, f in enumerate(full))),
                     self.slot_turn.eq(sum(t.as_unsigned() << s for s, t in enumerate(turn)))]

        wr = [{k: getattr(self, f"s_axis_w{w}_{k}") for k in ("tdata", "tuser", "tvalid", "tready")}
              for w in range(self.writers)]
        waddr = [p["tuser"][:self.addr_bits] for p in wr]
        wslot = [p["tuser"][self.addr_bits:self.addr_bits + self.slot_bits] for p in wr]
        wturn = [p["tuser"][self.addr_bits + self.slot_bits] for p in wr]
        wheld = [Signal(name=f"wheld{w}") for w in range(self.writers)]  # its slot full, or in another turn
        for w in range(self.writers):
            for k in range(self.slots):
                with m.If(wslot[w] == k):
                    m.d.comb += wheld[w].eq(full[k] | (turn[k] != wturn[w]))
        rd = [{k: getattr(self, f"rd{r}_{k}") for k in ("addr", "req", "gnt", "data", "release", "release_slot")}
              for r in range(self.readers_n)]
        # per read port, which of its banks granted it last cycle (its data comes from there)
        got = [Signal(range(max(len(self.read_banks[r]), 2)), name=f"rd{r}_bank") for r in range(self.readers_n)]
        bank_data = []
        wrote = [[Signal(name=f"b{b}_wrote{s}") for s in range(self.slots)] for b in range(self.banks)]
        for b in range(self.banks):
            mem = memory.Memory(shape=BEAT_BITS, depth=self.bank_beats, init=[])
            m.submodules[f"bank{b}"] = mem
            wp, rp = mem.write_port(), mem.read_port(transparent_for=())
            # writes: the writers wired here with a beat for this bank that its slot takes (not full, in its turn)
            ws = [w for w in range(self.writers) if b in self.write_banks[w]]
            wreq = [wr[w]["tvalid"] & ((waddr[w] >> bb) == b) & ~wheld[w] for w in ws]
            wg, wany = _round_robin(m, wreq, f"b{b}_w")
            for i, w in enumerate(ws):
                with m.If(wany & (wg == i)):
                    m.d.comb += [wp.addr.eq(waddr[w][:bb] if bb else 0), wp.data.eq(wr[w]["tdata"]), wp.en.eq(1),
                                 wr[w]["tready"].eq(1)]
                    for s in range(self.slots):
                        m.d.comb += wrote[b][s].eq(wslot[w] == s)
            # reads: the read ports wired here asking for this bank
            rs = [r for r in range(self.readers_n) if b in self.read_banks[r]]
            bank_data.append(rp.data)
            if not rs:  # a bank no read port is wired to (its slots fill, nobody reads them)
                continue
            rreq = [rd[r]["req"] & ((rd[r]["addr"] >> bb) == b) for r in rs]
            rg, rany = _round_robin(m, rreq, f"b{b}_r")
            m.d.comb += rp.en.eq(rany)
            for i, r in enumerate(rs):
                with m.If(rany & (rg == i)):
                    m.d.comb += [rp.addr.eq(rd[r]["addr"][:bb] if bb else 0), rd[r]["gnt"].eq(1)]
                    m.d.sync += got[r].eq(self.read_banks[r].index(b))
        for r, q in enumerate(rd):
            for i, b in enumerate(self.read_banks[r]):
                with m.If(got[r] == i):
                    m.d.comb += q["data"].eq(bank_data[b])

        # the slots' counters
        for s in range(self.slots):
            n_writes = sum(wrote[b][s].as_unsigned() for b in range(self.banks))
            n_rel = sum((q["release"] & (q["release_slot"] == s)).as_unsigned() for q in rd)
            with m.If(full[s]):
                with m.If(released[s] + n_rel >= self.readers):
                    m.d.sync += [full[s].eq(0), written[s].eq(0), released[s].eq(0), turn[s].eq(~turn[s])]
                with m.Else():
                    m.d.sync += released[s].eq(released[s] + n_rel)
            with m.Else():
                m.d.sync += written[s].eq(written[s] + n_writes)
                with m.If(written[s] + n_writes >= self.slot_beats):
                    m.d.sync += full[s].eq(1)
        return m

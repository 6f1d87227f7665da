"""The engine's online-softmax score channel (stream contract v3, ``hw/ENGINE.md``): it gathers a tile's ``k`` score
packets (key slices of ``SK`` keys) into whole rows of ``MAX_KEYS = k·SK`` keys, normalizes them with
:class:`~vckattn.hw.pl.online_softmax.OnlineSoftmaxKernel` and sends the tile's ``k`` P packets back in slice order.

The full description: ``docs/internals/hw.md``, section ``hw/pl/engine_online.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from vckattn.golden.engine import engine_online_format, sentinel
from vckattn.hw.spec.functional import ONLINE_LANES
from vckattn.hw.spec.streams import BEAT_BYTES, Field, field

from .online_softmax import OnlineSoftmaxKernel
from .stream import axis_members

__all__ = ["HANDOVER", "ONLINE_LANES", "OnlineBuild", "OnlineChannel", "channel_cycles", "rows_bound"]

BEAT_BITS = 8 * BEAT_BYTES
#: block row: 8 keys of one row (the 4×8 block layout's row)
_W = 8
#: cycles of a tile besides the unit's rows and the sending (:func:`channel_cycles`): the start of its rows (1), the
#: score buffer's read (1), the last P row to the start of the sending (1), the first header's read (1)
HANDOVER = 4

_COUNT: Field = field("packet", "count")
_ELEM_BITS: Field = field("packet", "elem_bits")
_SLICE: Field = field("packet", "slice")
_TILE: Field = field("packet", "tile_id")


@dataclass(frozen=True)
class OnlineBuild:
    """The online-softmax channels of an engine build: the tile (``q_rows`` rows, ``kernels`` slices of
    ``slice_keys`` keys) and the unit's ``lanes``."""

    q_rows: int
    kernels: int
    slice_keys: int
    lanes: int


def channel_cycles(tiles: int, q_rows: int, kernels: int, slice_keys: int, score_bits: int, lanes: int) -> int:
    """Cycles from the first input beat to the last output beat of ``tiles`` tiles sent back to back (each tile's
    ``k`` packets in slice order, a source that never idles, a ready sink; closed form of the RTL, measured by
    ``tests/hw/pl/test_engine_top.py``): the first tile's packets in, the unit's
    :func:`vckattn.hw.pl.timing.stream_cycles` for all the tiles' rows back to back, one cycle between two tiles' rows
    (the next tile's start), :data:`HANDOVER` cycles and the last tile's ``k·(1 + Q_ROWS·SK / 16)`` beats out.
    Exact while the rows are the bound: the next tile's packets and the last one's sending fit in one tile's rows
    (:func:`rows_bound`); so a tile takes ``Q_ROWS·MAX_KEYS / L + 1`` cycles in steady state, the unit's rate."""
    from vckattn.hw.pl.timing import stream_cycles

    per_beat = BEAT_BITS // score_bits
    gather = kernels * (1 + q_rows * slice_keys // per_beat)
    rows = stream_cycles("online_softmax", tiles * q_rows, kernels * slice_keys, lanes)
    return gather + rows + (tiles - 1) + HANDOVER + kernels * (1 + q_rows * slice_keys // BEAT_BYTES)


def rows_bound(q_rows: int, kernels: int, slice_keys: int, score_bits: int, lanes: int) -> bool:
    """Whether a channel's tiles are bound by the unit's rows (:func:`channel_cycles`): one tile's rows
    (``Q_ROWS·MAX_KEYS / L`` cycles) outlast the unit's latency after a tile's last row, the sending of that tile and
    the gathering of the tile after next (which waits for its buffer)."""
    from vckattn.hw.pl.timing import TIMING

    t = TIMING["online_softmax"]
    keys = kernels * slice_keys
    latency = keys // lanes + t.issue_delay + t.out_delay
    send = kernels * (1 + q_rows * slice_keys // BEAT_BYTES)
    gather = kernels * (1 + q_rows * slice_keys * score_bits // BEAT_BITS)
    return latency + HANDOVER + send + gather <= q_rows * keys // lanes + 1


class OnlineChannel(wiring.Component):
    """One online-softmax score channel (module docstring).

    Ports: ``s_axis_*`` / ``m_axis_*`` (128-bit TDATA, TLAST); ``a_mult`` / ``a_shift`` (the online-softmax
    registers); status outputs ``kept`` (kept scores accepted this cycle) and ``packet`` (a header accepted this
    cycle).

    Args:
        q_rows: ``Q_ROWS`` (multiple of 4).
        kernels: ``k``, the slices of a tile (all on this channel).
        slice_keys: ``SK`` (multiple of 16).
        score_bits: 8 or 16.
        lanes: Online-softmax lanes (:data:`ONLINE_LANES`).
    """

    def __init__(self, q_rows: int, kernels: int, slice_keys: int, score_bits: int, lanes: int) -> None:
        if q_rows < 4 or q_rows % 4 or kernels < 1 or slice_keys < 16 or slice_keys % 16:
            raise ValueError(f"q_rows {q_rows} (multiple of 4), kernels {kernels} (>= 1), slice_keys {slice_keys} "
                             "(multiple of 16)")
        if score_bits not in (8, 16):
            raise ValueError(f"score_bits must be 8 or 16, got {score_bits}")
        if lanes not in ONLINE_LANES:
            raise ValueError(f"online-softmax lanes must be one of {ONLINE_LANES}, got {lanes}")
        self.q_rows, self.k, self.sk, self.bits, self.lanes = q_rows, kernels, slice_keys, score_bits, lanes
        self.max_keys = kernels * slice_keys
        self.fmt = engine_online_format(lanes)
        self.unit = OnlineSoftmaxKernel(lanes, self.max_keys, score_bits, fmt=self.fmt, axil=False)
        super().__init__({
            **axis_members("s_axis", BEAT_BITS, sink=True),
            **axis_members("m_axis", BEAT_BITS, sink=False),
            "a_mult": In(signed(self.fmt.a_bits)),
            "a_shift": In(6),
            "kept": Out(range(BEAT_BITS // score_bits + 1)),
            "packet": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        q, k, sk, b, lanes = self.q_rows, self.k, self.sk, self.bits, self.lanes
        per_beat = BEAT_BITS // b  # scores a beat (E)
        nsub = 4 * _W // per_beat  # beats of a 4x8 block (2 int8, 4 int16)
        kw = self.max_keys // _W  # block-row words of a row
        skw = sk // _W
        half = q // 2  # rows of a bank (row parity)
        sent_word = Const(sentinel(b) & ((1 << b) - 1), b)

        # ---------------- storage ----------------
        sbank = [Memory(shape=_W * b, depth=2 * half * kw, init=[]) for _ in range(2)]
        pbank = [Memory(shape=_W * 8, depth=2 * half * kw, init=[]) for _ in range(2)]
        hdrs = Memory(shape=BEAT_BITS, depth=2 * k, init=[])
        for i in range(2):
            m.submodules[f"scores{i}"] = sbank[i]
            m.submodules[f"p{i}"] = pbank[i]
        m.submodules.headers = hdrs
        s_w = [mem.write_port() for mem in sbank]
        s_r = [mem.read_port(domain="sync") for mem in sbank]
        p_w = [mem.write_port() for mem in pbank]
        p_r = [mem.read_port(domain="sync") for mem in pbank]
        h_w, h_r = hdrs.write_port(), hdrs.read_port(domain="sync")
        m.submodules.unit = unit = self.unit
        m.d.comb += [unit.a_mult.eq(self.a_mult), unit.a_shift.eq(self.a_shift)]

        # ---------------- tile buffers' state ----------------
        held = [Signal(name=f"held{i}") for i in range(2)]
        tile = [Signal(_TILE.width, name=f"tile{i}") for i in range(2)]
        got = [Signal(range(k + 1), name=f"got{i}") for i in range(2)]
        fed = [Signal(name=f"fed{i}") for i in range(2)]  # the tile's rows all went into the unit
        pdone = [Signal(name=f"pdone{i}") for i in range(2)]  # the tile's P rows are all in its P buffer
        aptr = Signal(name="alloc_ptr")  # the buffer the next new tile takes
        fptr = Signal(name="feed_ptr")  # the buffer whose rows go into the unit next
        cptr = Signal(name="collect_ptr")  # the P buffer the unit's rows go to
        eptr = Signal(name="emit_ptr")  # the oldest tile's buffer (sent next)
        free_now = Signal()  # the tile at eptr has been sent (this cycle)

        # ---------------- gather ----------------
        data = self.s_axis_tdata
        in_payload = Signal()
        good = Signal()  # the packet now in payload is stored
        slot = Signal()
        j_cur = Signal(range(max(k, 2)))
        left = Signal(_COUNT.width)  # payload beats still to come
        sub = Signal(range(max(nsub, 2)))
        jb = Signal(range(max(skw, 2)))
        ib = Signal(range(max(q // 4, 2)))

        h_tile = _TILE.bits_of(data)
        h_slice = _SLICE.bits_of(data)
        h_count = _COUNT.bits_of(data)
        h_good = Signal()
        m.d.comb += h_good.eq((h_count == q * sk) & (h_slice < k))
        match = [Signal(name=f"match{i}") for i in range(2)]
        for i in range(2):
            m.d.comb += match[i].eq(held[i] & (tile[i] == h_tile) & (got[i] != k))
        new_tile = Signal()
        m.d.comb += new_tile.eq(~match[0] & ~match[1])
        can_alloc = Signal()
        m.d.comb += can_alloc.eq(~Mux(aptr, held[1], held[0]))
        hdr_ok = Signal()  # the header beat can be taken now
        m.d.comb += hdr_ok.eq(~h_good | ~new_tile | can_alloc)
        m.d.comb += self.s_axis_tready.eq(in_payload | hdr_ok)
        hdr_fire = Signal()
        pay_fire = Signal()
        m.d.comb += [hdr_fire.eq(self.s_axis_tvalid & ~in_payload & hdr_ok),
                     pay_fire.eq(self.s_axis_tvalid & in_payload)]
        h_slot = Mux(match[1], 1, Mux(match[0], 0, aptr))
        n_beats = (h_count + per_beat - 1) >> (per_beat.bit_length() - 1)
        alloc = Signal()
        m.d.comb += alloc.eq(hdr_fire & h_good & new_tile)

        lo, hi = _ELEM_BITS.bit, _ELEM_BITS.bit + _ELEM_BITS.width
        m.d.comb += [
            h_w.addr.eq(h_slot * k + h_slice[:len(j_cur)]),
            h_w.data.eq(Cat(data[:lo], Const(8, _ELEM_BITS.width), data[hi:])),
            h_w.en.eq(hdr_fire & h_good),
        ]
        with m.If(hdr_fire):
            m.d.sync += [in_payload.eq(n_beats != 0), left.eq(n_beats), good.eq(h_good), slot.eq(h_slot),
                         j_cur.eq(h_slice[:len(j_cur)]), sub.eq(0), jb.eq(0), ib.eq(0)]
        with m.If(pay_fire):
            m.d.sync += left.eq(left - 1)
            with m.If(left == 1):
                m.d.sync += in_payload.eq(0)
            m.d.sync += sub.eq(Mux(sub == nsub - 1, 0, sub + 1))
            with m.If(sub == nsub - 1):
                m.d.sync += jb.eq(Mux(jb == skw - 1, 0, jb + 1))
                with m.If(jb == skw - 1):
                    m.d.sync += ib.eq(ib + 1)
        store = Signal()
        m.d.comb += store.eq(pay_fire & good)
        # block row words: int8: the beat is rows 2·sub and 2·sub + 1 of the block (banks 0, 1); int16: row sub
        ri = 2 * ib + (sub if nsub == 2 else sub >> 1)
        s_addr = (slot * half + ri) * kw + j_cur * skw + jb
        for i in range(2):
            m.d.comb += [s_w[i].addr.eq(s_addr)]
            if nsub == 2:
                m.d.comb += [s_w[i].data.eq(data[i * _W * b:(i + 1) * _W * b]), s_w[i].en.eq(store)]
            else:
                m.d.comb += [s_w[i].data.eq(data), s_w[i].en.eq(store & (sub[0] == i))]
        kept = [Signal(name=f"kept_in{e}") for e in range(per_beat)]
        for e in range(per_beat):
            m.d.comb += kept[e].eq(store & (data[e * b:(e + 1) * b] != sent_word))
        m.d.comb += [self.kept.eq(sum(kept)), self.packet.eq(hdr_fire)]
        slice_done = Signal()
        m.d.comb += slice_done.eq(store & (left == 1))

        for i in range(2):
            with m.If(alloc & (aptr == i)):
                m.d.sync += [held[i].eq(1), tile[i].eq(h_tile)]
            with m.Elif(free_now & (eptr == i)):
                m.d.sync += held[i].eq(0)
            with m.If(free_now & (eptr == i)):
                m.d.sync += got[i].eq(0)
            with m.Elif(slice_done & (slot == i)):
                m.d.sync += got[i].eq(got[i] + 1)
        with m.If(alloc):
            m.d.sync += aptr.eq(~aptr)
        with m.If(free_now):
            m.d.sync += eptr.eq(~eptr)

        # ---------------- rows into the unit (tile buffer fptr, its rows one after the other) ----------------
        complete = Signal()
        m.d.comb += complete.eq(Mux(fptr, held[1] & (got[1] == k) & ~fed[1], held[0] & (got[0] == k) & ~fed[0]))
        n_kb = self.max_keys // lanes  # beats of a row
        feeding = Signal()
        fi = Signal(range(q + 1))
        fk = Signal(range(max(n_kb, 2)))
        ov, olast, obank = Signal(name="feed_valid"), Signal(name="feed_last"), Signal(name="feed_bank")
        osel = Signal(range(max(_W // lanes, 2)), name="feed_sel")
        advance = Signal()
        m.d.comb += advance.eq(~ov | unit.s_axis_tready)
        issue = Signal()
        m.d.comb += issue.eq(feeding & advance)
        words_per_beat = _W // lanes
        f_word = fk >> (words_per_beat.bit_length() - 1) if words_per_beat > 1 else fk
        f_addr = (fptr * half + (fi >> 1)) * kw + f_word
        for i in range(2):
            m.d.comb += [s_r[i].addr.eq(f_addr), s_r[i].en.eq(advance)]
        with m.If(advance):
            m.d.sync += [ov.eq(issue), olast.eq(fk == n_kb - 1), obank.eq(fi[0]),
                         osel.eq(fk[:len(osel)] if words_per_beat > 1 else 0)]
        fed_now = Signal()  # the last beat of tile buffer fptr's rows issues now
        m.d.comb += fed_now.eq(issue & (fk == n_kb - 1) & (fi == q - 1))
        with m.If(issue):
            m.d.sync += fk.eq(Mux(fk == n_kb - 1, 0, fk + 1))
            with m.If(fk == n_kb - 1):
                m.d.sync += fi.eq(fi + 1)
        with m.If(fed_now):
            m.d.sync += [feeding.eq(0), fptr.eq(~fptr)]
        with m.Elif(~feeding & complete):
            m.d.sync += [feeding.eq(1), fi.eq(0), fk.eq(0)]
        word = Mux(obank, s_r[1].data, s_r[0].data)
        if words_per_beat > 1:
            lanes_data = word.word_select(osel, lanes * b)
        else:
            lanes_data = word
        keep_bits = Cat(*(lanes_data[e * b:(e + 1) * b] != sent_word for e in range(lanes)))
        m.d.comb += [unit.s_axis_tdata.eq(lanes_data), unit.s_axis_tuser.eq(keep_bits),
                     unit.s_axis_tlast.eq(olast), unit.s_axis_tvalid.eq(ov)]

        # ---------------- P rows into P buffer cptr (the unit's rows come out in order) ----------------
        ci = Signal(range(q))
        ck = Signal(range(max(n_kb, 2)))
        m.d.comb += unit.m_axis_tready.eq(1)
        p_fire = Signal()
        m.d.comb += p_fire.eq(unit.m_axis_tvalid)
        if words_per_beat > 1:
            acc = Signal(8 * (_W - lanes), name="p_acc")
            with m.If(p_fire):
                m.d.sync += acc.eq(Cat(acc[8 * lanes:], unit.m_axis_tdata))
            p_word = Cat(acc, unit.m_axis_tdata)
            word_done = ck[:words_per_beat.bit_length() - 1] == words_per_beat - 1
            c_word = ck >> (words_per_beat.bit_length() - 1)
        else:
            p_word = unit.m_axis_tdata
            word_done = Const(1, 1)
            c_word = ck
        for i in range(2):
            m.d.comb += [p_w[i].addr.eq((cptr * half + (ci >> 1)) * kw + c_word), p_w[i].data.eq(p_word),
                         p_w[i].en.eq(p_fire & word_done & (ci[0] == i))]
        rows_now = Signal()  # the tile's last P beat
        m.d.comb += rows_now.eq(p_fire & (ck == n_kb - 1) & (ci == q - 1))
        with m.If(p_fire):
            m.d.sync += ck.eq(Mux(ck == n_kb - 1, 0, ck + 1))
            with m.If(ck == n_kb - 1):
                m.d.sync += ci.eq(Mux(ci == q - 1, 0, ci + 1))
        with m.If(rows_now):
            m.d.sync += cptr.eq(~cptr)

        # ---------------- send (tile buffer eptr: its headers and P buffer) ----------------
        sending = Signal()
        sj = Signal(range(k + 1))
        s_hdr = Signal()  # the next beat to issue is slice sj's header
        n_pay = q * sk // BEAT_BYTES
        sp = Signal(range(max(n_pay, 2)))  # payload beat of the slice
        e_sub = Signal()
        e_jb = Signal(range(max(skw, 2)))
        e_ib = Signal(range(max(q // 4, 2)))
        tv, t_hdr, t_last, t_final = (Signal(name="out_valid"), Signal(name="out_hdr"), Signal(name="out_last"),
                                      Signal(name="out_final"))
        adv2 = Signal()
        m.d.comb += adv2.eq(~tv | self.m_axis_tready)
        issue2 = Signal()
        m.d.comb += issue2.eq(sending & adv2)
        m.d.comb += [h_r.addr.eq(eptr * k + sj[:len(j_cur)]), h_r.en.eq(adv2)]
        for i in range(2):
            m.d.comb += [p_r[i].addr.eq((eptr * half + 2 * e_ib + e_sub) * kw + sj[:len(j_cur)] * skw + e_jb),
                         p_r[i].en.eq(adv2)]
        last_pay = sp == n_pay - 1
        with m.If(adv2):
            m.d.sync += [tv.eq(issue2), t_hdr.eq(s_hdr), t_last.eq(~s_hdr & last_pay),
                         t_final.eq(~s_hdr & last_pay & (sj == k - 1))]
        ready_send = Signal()
        m.d.comb += ready_send.eq(Mux(eptr, pdone[1], pdone[0]))
        with m.If(issue2):
            with m.If(s_hdr):
                m.d.sync += [s_hdr.eq(0), sp.eq(0), e_sub.eq(0), e_jb.eq(0), e_ib.eq(0)]
            with m.Else():
                m.d.sync += [sp.eq(sp + 1), e_sub.eq(~e_sub)]
                with m.If(e_sub):
                    m.d.sync += e_jb.eq(Mux(e_jb == skw - 1, 0, e_jb + 1))
                    with m.If(e_jb == skw - 1):
                        m.d.sync += e_ib.eq(e_ib + 1)
                with m.If(last_pay):
                    m.d.sync += [s_hdr.eq(1), sj.eq(sj + 1)]
                    with m.If(sj == k - 1):
                        m.d.sync += sending.eq(0)
        with m.Elif(~sending & ~tv & ready_send & (sj == 0)):
            m.d.sync += [sending.eq(1), s_hdr.eq(1)]
        m.d.comb += [
            self.m_axis_tvalid.eq(tv),
            self.m_axis_tdata.eq(Mux(t_hdr, h_r.data, Cat(p_r[0].data, p_r[1].data))),
            self.m_axis_tlast.eq(t_last),
            free_now.eq(tv & self.m_axis_tready & t_final),
        ]
        with m.If(free_now):
            m.d.sync += sj.eq(0)
        for i in range(2):
            with m.If(free_now & (eptr == i)):
                m.d.sync += [fed[i].eq(0), pdone[i].eq(0)]
            with m.Else():
                with m.If(fed_now & (fptr == i)):
                    m.d.sync += fed[i].eq(1)
                with m.If(rows_now & (cptr == i)):
                    m.d.sync += pdone[i].eq(1)
        return m

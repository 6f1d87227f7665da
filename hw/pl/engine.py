"""The scalable engine's PL top (stream contract v3, ``hw/ENGINE.md``): one SwiftMax packet pipeline per score
channel (``P·m`` channels: ``m`` score channels of each of the engine's ``P`` pipelines), one shared register file.
Channel ``i·m + c`` serves score channel ``c`` of engine pipeline ``i``. Score packets carry their ``Q_ROWS × SK``
scores in the 4×8 block layout of the contract; the normalizer is element-wise, so P leaves in the same order.

The full description: ``docs/internals/hw.md``, section ``hw/pl/engine.py``.
"""

from __future__ import annotations

from pathlib import Path

from vckattn.golden.extras import require

require("the engine's PL generator", "amaranth")
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vckattn.golden.engine import engine_format, engine_regmap, sentinel
from vckattn.golden.swiftmax_int import SWIFTMAX_ID, swiftmax_regmap
from vckattn.hw.spec.streams import BEAT_BYTES, Field, field

from .axil import RegisterFile, axil_members, shape_of
from .engine_online import OnlineBuild, OnlineChannel
from .stream import SkidBuffer, Slot, axis_members
from .swiftmax_lane import SwiftMaxLane
from .verilog import generate_verilog

__all__ = ["BEAT_BITS", "LANES", "SWIFTMAX_ID", "EnginePL", "EnginePipeline", "generate_engine_verilog", "issue_slots",
           "lut_product_of"]

#: Bits of one stream beat.
BEAT_BITS = 8 * BEAT_BYTES
#: Bits of one P element on the output stream.
P_BITS = 8
#: Supported lane counts (at most the scores of one input beat).
LANES: tuple[int, ...] = (1, 2, 4, 8, 16)
#: Score widths the engine's PL top is built for.
ENGINE_SCORE_BITS: tuple[int, ...] = (8, 16)

_COUNT: Field = field("packet", "count")
_ELEM_BITS: Field = field("packet", "elem_bits")
_HEAD: Field = field("packet", "head")


def check_params(lanes: int, score_bits: int) -> None:
    """ValueError unless ``score_bits`` is 8 or 16 and ``lanes`` is in :data:`LANES` and at most
    ``128 / score_bits`` (the scores of one input beat)."""
    if score_bits not in ENGINE_SCORE_BITS:
        raise ValueError(f"score_bits must be one of {ENGINE_SCORE_BITS}, got {score_bits}")
    if lanes not in LANES or lanes > BEAT_BITS // score_bits:
        raise ValueError(f"lanes must be one of {LANES} and at most {BEAT_BITS // score_bits} for "
                         f"{score_bits}-bit scores, got {lanes}")


def issue_slots(count: int, lanes: int) -> int:
    """Slots (cycles at full rate) one packet of ``count`` scores takes in a pipeline of ``lanes`` lanes:
    the header plus ``16 / lanes`` groups per P beat, ``ceil(count / 16)`` P beats."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return 1 + (BEAT_BYTES // lanes) * -(-count // BEAT_BYTES)


class EnginePipeline(wiring.Component):
    """One packet pipeline: ``s_axis`` score packets in, ``m_axis`` P packets out (see the module docstring).

    Ports: ``s_axis_*`` / ``m_axis_*`` (128-bit TDATA, TLAST); one input per writable register of the
    SwiftMax register map (same name and shape); per-head constants: outputs ``ce`` (the stage enable),
    ``b_beta_addr`` (head of the group issuing now) and ``c_out_addr`` (that head one enabled stage later),
    to address synchronous read ports (enabled by ``ce``) of the ``b_beta``/``c_out`` memories whose data
    come back on the inputs ``b_beta``/``c_out``; status outputs ``kept`` (kept scores issued this cycle)
    and ``packet`` (a header beat accepted this cycle).

    Args:
        lanes: SwiftMax lanes (:data:`LANES`, at most ``128 / score_bits``).
        score_bits: Input score width, 8 or 16.
        lut_product: Each lane's ``sat · a_mult`` from LUTs (True) or a DSP block (False); default
            :func:`~vckattn.hw.pl.swiftmax_lane.lut_product_default` (LUTs for 8-bit scores). Same function.
    """

    #: Cycles from a slot's issue (its input handshake) to its output handshake: lanes (6) + skid buffer (1).
    LATENCY = SwiftMaxLane.LATENCY + 1

    def __init__(self, lanes: int, score_bits: int = 8, lut_product: bool | None = None) -> None:
        check_params(lanes, score_bits)
        self.lanes, self.score_bits, self.lut_product = lanes, score_bits, lut_product
        self.fmt = engine_format(score_bits)
        self.regmap = swiftmax_regmap(self.fmt)
        super().__init__({
            **axis_members("s_axis", BEAT_BITS, sink=True),
            **axis_members("m_axis", BEAT_BITS, sink=False),
            **{r.name: In(shape_of(r)) for r in self.regmap.writable},
            **{mem.name: In(shape_of(mem)) for mem in self.regmap.mems},
            "ce": Out(1),
            "b_beta_addr": Out(max(self.fmt.head_bits, 1)),
            "c_out_addr": Out(max(self.fmt.head_bits, 1)),
            "kept": Out(range(lanes + 1)),
            "packet": Out(1),
        })
        # The sideband delay line beside the lanes (index k - 1: stage k = 1..SwiftMaxLane.LATENCY) and the skid
        # buffer at the output, named here for the formal proofs (formal_slots()).
        depth = SwiftMaxLane.LATENCY
        self.stage_valid = [Signal(name=f"valid_{k}") for k in range(1, depth + 1)]
        self.stage_hdr = [Signal(name=f"hdr_{k}") for k in range(1, depth + 1)]
        self.stage_emit = [Signal(name=f"emit_{k}") for k in range(1, depth + 1)]
        self.stage_last = [Signal(name=f"last_{k}") for k in range(1, depth + 1)]
        self.stage_hdat = [Signal(BEAT_BITS, name=f"hdat_{k}", reset_less=True) for k in range(1, depth + 1)]
        self.skid = SkidBuffer(BEAT_BITS)
        # The issue state: in a packet's payload; rem = count - (first element of the group now issuing);
        # the group within the input beat (sub) and within the P beat (grp), constant 0 when there is one.
        subs, groups = BEAT_BITS // score_bits // lanes, BEAT_BYTES // lanes
        self.in_payload = Signal(name="in_payload")
        self.rem = Signal(signed(_COUNT.width + 2), name="rem")
        self.sub = Signal(range(subs), name="sub") if subs > 1 else Const(0, 1)
        self.grp = Signal(range(groups), name="grp") if groups > 1 else Const(0, 1)

    def formal_slots(self) -> list[Slot]:
        """Places of the P beats being made, oldest first (:class:`~vckattn.hw.pl.stream.Slot`): the skid
        buffer's two, then the lane stages from the last to the first, where a slot that completes a P beat
        (``emit``) holds one: fields ``last``, ``hdr`` (a header beat) and ``data`` (the header beat's data)."""
        slots = [Slot(s.valid, {"last": s.fields["last"], "data": s.fields["data"]}) for s in self.skid.formal_slots()]
        for k in range(len(self.stage_valid) - 1, -1, -1):
            slots.append(Slot(self.stage_valid[k] & self.stage_emit[k],
                              {"last": self.stage_last[k], "hdr": self.stage_hdr[k], "data": self.stage_hdat[k]}))
        return slots

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, b = self.lanes, self.score_bits
        per_beat = BEAT_BITS // b  # scores per input beat (E)
        subs = per_beat // n  # groups per input beat
        groups = BEAT_BYTES // n  # groups per P beat (G)
        cw = _COUNT.width + 2  # rem = count - (first element of the group), signed

        m.submodules.skid = skid = self.skid
        ce = Signal()
        m.d.comb += [ce.eq(skid.s_axis_tready), self.ce.eq(ce)]

        # ---------------- issue (stage 0) ----------------
        in_payload, rem, sub, grp = self.in_payload, self.rem, self.sub, self.grp
        assert len(rem) == cw
        data = self.s_axis_tdata
        count = _COUNT.bits_of(data)
        hb = self.fmt.head_bits
        head = Signal(max(hb, 1))  # the head of the packet whose payload is issuing (latched at its header)
        head_1 = Signal(max(hb, 1))  # the head of the slot in stage 1

        beat_exists = Signal()  # the current group's input beat is part of the payload (else: padding beat)
        m.d.comb += beat_exists.eq((rem + sub * n) > 0)
        last_of_beat = sub == subs - 1
        hdr_slot = Signal()
        pay_slot = Signal()
        m.d.comb += [
            hdr_slot.eq(~in_payload & self.s_axis_tvalid),
            pay_slot.eq(in_payload & (~beat_exists | self.s_axis_tvalid)),
            self.s_axis_tready.eq(ce & (~in_payload | (beat_exists & last_of_beat))),
        ]
        last_group = Signal()
        m.d.comb += last_group.eq((grp == groups - 1) & (rem <= n))

        with m.If(ce):
            m.d.sync += head_1.eq(head)
            with m.If(hdr_slot):
                m.d.sync += [in_payload.eq(count != 0), rem.eq(count)]
                if hb:
                    m.d.sync += head.eq(data[_HEAD.bit:_HEAD.bit + hb])
                m.d.sync += [s.eq(0) for s in (sub, grp) if isinstance(s, Signal)]
            with m.Elif(pay_slot):
                m.d.sync += rem.eq(rem - n)
                if subs > 1:
                    m.d.sync += sub.eq(Mux(last_of_beat, 0, sub + 1))
                if groups > 1:
                    m.d.sync += grp.eq(Mux(grp == groups - 1, 0, grp + 1))
                with m.If(last_group):
                    m.d.sync += in_payload.eq(0)

        # the group's scores and keep flags (payload slots only)
        group = data.word_select(sub, n * b) if subs > 1 else data[:n * b]
        keep = []
        for j in range(n):
            k = Signal(name=f"keep_in{j}")
            m.d.comb += k.eq(pay_slot & (group[j * b:(j + 1) * b] != Const(sentinel(b) & ((1 << b) - 1), b))
                             & (rem > j))
            keep.append(k)
        m.d.comb += [self.kept.eq(Mux(ce, sum(keep), 0)), self.packet.eq(ce & hdr_slot)]

        # header with elem_bits = 8
        lo, hi = _ELEM_BITS.bit, _ELEM_BITS.bit + _ELEM_BITS.width
        header = Cat(data[:lo], Const(P_BITS, _ELEM_BITS.width), data[hi:])

        # ---------------- lanes (stages 1..6) and the sideband beside them ----------------
        outs = []
        for j in range(n):
            lane = SwiftMaxLane(self.fmt, b, lut_product=self.lut_product)
            m.submodules[f"lane{j}"] = lane
            m.d.comb += [lane.en.eq(ce), lane.acc.eq(group[j * b:(j + 1) * b].as_signed()), lane.keep.eq(keep[j])]
            for r in self.regmap.writable:
                m.d.comb += getattr(lane, r.name).eq(getattr(self, r.name))
            m.d.comb += [lane.b_beta.eq(self.b_beta), lane.c_out.eq(self.c_out)]
            outs.append(lane.p)
        m.d.comb += [self.b_beta_addr.eq(head), self.c_out_addr.eq(head_1)]
        p = Cat(*outs)

        valid, is_hdr = hdr_slot | pay_slot, hdr_slot
        emit = hdr_slot | (grp == groups - 1)
        last = Mux(hdr_slot, count == 0, last_group)
        hdat = header
        for k in range(1, SwiftMaxLane.LATENCY + 1):
            sv = [self.stage_valid[k - 1], self.stage_hdr[k - 1], self.stage_emit[k - 1], self.stage_last[k - 1]]
            sd = self.stage_hdat[k - 1]
            with m.If(ce):
                m.d.sync += [sv[0].eq(valid), sv[1].eq(is_hdr), sv[2].eq(emit), sv[3].eq(last), sd.eq(hdat)]
            valid, is_hdr, emit, last = sv
            hdat = sd

        # ---------------- P beat assembly -> skid buffer ----------------
        if groups > 1:
            acc = Signal(P_BITS * (BEAT_BYTES - n), reset_less=True)  # earlier groups of the beat, oldest lowest
            with m.If(ce & valid & ~is_hdr):
                m.d.sync += acc.eq(Cat(acc[P_BITS * n:], p))
            beat = Cat(acc, p)
        else:
            beat = p
        m.d.comb += [
            skid.s_axis_tvalid.eq(valid & emit),
            skid.s_axis_tdata.eq(Mux(is_hdr, hdat, beat)),
            skid.s_axis_tlast.eq(last),
            self.m_axis_tdata.eq(skid.m_axis_tdata),
            self.m_axis_tvalid.eq(skid.m_axis_tvalid),
            self.m_axis_tlast.eq(skid.m_axis_tlast),
            skid.m_axis_tready.eq(self.m_axis_tready),
        ]
        return m


class EnginePL(wiring.Component):
    """``channels`` :class:`EnginePipeline` s behind one AXI4-Lite register file (see the module docstring).

    Args:
        channels: Score channels ``P·m`` (>= 1): stream ports ``s0..s{P·m-1}`` and ``p0..p{P·m-1}``.
        lanes: SwiftMax lanes per channel (:data:`LANES`, at most ``128 / score_bits``).
        score_bits: Input score width, 8 or 16.
        online: None (SwiftMax only), or the build's online-softmax channels
            (:class:`~vckattn.hw.pl.engine_online.OnlineBuild`): each channel then also carries an
            :class:`~vckattn.hw.pl.engine_online.OnlineChannel` and the register ``normalizer`` (0 SwiftMax, 1
            online softmax; :func:`vckattn.golden.engine.engine_regmap`) routes every channel's packets through one of
            the two (write it while the channels are idle, between layers).
        lut_product: The SwiftMax lanes' products from LUTs or DSP blocks (:class:`EnginePipeline`).
    """

    LATENCY = EnginePipeline.LATENCY

    def __init__(self, channels: int, lanes: int, score_bits: int = 8, online: OnlineBuild | None = None,
                 lut_product: bool | None = None) -> None:
        if channels < 1:
            raise ValueError(f"channels must be >= 1, got {channels}")
        check_params(lanes, score_bits)
        self.channels, self.lanes, self.score_bits = channels, lanes, score_bits
        self.fmt = engine_format(score_bits)
        self.online = online
        self.normalizers = ("swiftmax", "online_softmax") if online else ("swiftmax",)
        self.regmap = engine_regmap(self.fmt, self.normalizers, read_ports=channels)
        self.regfile = RegisterFile(self.regmap)
        self.pipes = [EnginePipeline(lanes, score_bits, lut_product) for _ in range(channels)]
        self.online_channels = [OnlineChannel(online.q_rows, online.kernels, online.slice_keys, score_bits,
                                              online.lanes) for _ in range(channels)] if online else []
        members: dict[str, wiring.Member] = {}
        for i in range(channels):
            members.update(axis_members(f"s{i}", BEAT_BITS, sink=True))
            members.update(axis_members(f"p{i}", BEAT_BITS, sink=False))
        members.update(axil_members("s_axil", self.regmap.addr_width))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.regs = regs = self.regfile
        regs.connect_axil(m, self)
        kept, packets = [], []
        for i in range(self.channels):
            pipe = self.pipes[i]
            m.submodules[f"pipe{i}"] = pipe
            if self.online:
                self._route(m, i, pipe, self.online_channels[i], kept, packets)
            else:
                for f in ("data", "valid", "last"):
                    m.d.comb += [getattr(pipe, f"s_axis_t{f}").eq(getattr(self, f"s{i}_t{f}")),
                                 getattr(self, f"p{i}_t{f}").eq(getattr(pipe, f"m_axis_t{f}"))]
                m.d.comb += [getattr(self, f"s{i}_tready").eq(pipe.s_axis_tready),
                             pipe.m_axis_tready.eq(getattr(self, f"p{i}_tready"))]
            for r in pipe.regmap.writable:
                m.d.comb += getattr(pipe, r.name).eq(regs.reg[r.name])
            for mem in self.regmap.mems:  # read port i of each per-head memory, addressed by pipeline i
                port = regs.mem_read_port(mem.name, i)
                m.d.comb += [port.en.eq(pipe.ce), getattr(pipe, mem.name).eq(port.data)]
                if self.fmt.head_bits:
                    m.d.comb += port.addr.eq(getattr(pipe, f"{mem.name}_addr"))
            kept.append(pipe.kept)
            packets.append(pipe.packet)
        elements, rows = Signal(32), Signal(32)
        m.d.sync += [elements.eq(elements + sum(kept)), rows.eq(rows + sum(packets))]
        m.d.comb += [regs.reg["elements"].eq(elements), regs.reg["rows"].eq(rows)]
        return m

    def _route(self, m: Module, i: int, pipe: EnginePipeline, oc: OnlineChannel, kept: list, packets: list) -> None:
        """Channel ``i`` of a build with both normalizers: its streams through the SwiftMax pipeline or the
        online-softmax channel, as the ``normalizer`` register says."""
        m.submodules[f"online{i}"] = oc
        mode = self.regfile.reg["normalizer"]
        for unit in (pipe, oc):
            m.d.comb += [unit.s_axis_tdata.eq(getattr(self, f"s{i}_tdata")),
                         unit.s_axis_tlast.eq(getattr(self, f"s{i}_tlast"))]
        m.d.comb += [
            pipe.s_axis_tvalid.eq(getattr(self, f"s{i}_tvalid") & ~mode),
            oc.s_axis_tvalid.eq(getattr(self, f"s{i}_tvalid") & mode),
            getattr(self, f"s{i}_tready").eq(Mux(mode, oc.s_axis_tready, pipe.s_axis_tready)),
            pipe.m_axis_tready.eq(getattr(self, f"p{i}_tready") & ~mode),
            oc.m_axis_tready.eq(getattr(self, f"p{i}_tready") & mode),
            oc.a_mult.eq(self.regfile.reg["os_a_mult"]),
            oc.a_shift.eq(self.regfile.reg["os_a_shift"]),
        ]
        for f in ("data", "valid", "last"):
            m.d.comb += getattr(self, f"p{i}_t{f}").eq(Mux(mode, getattr(oc, f"m_axis_t{f}"),
                                                           getattr(pipe, f"m_axis_t{f}")))
        kept.append(oc.kept)
        packets.append(oc.packet)


def lut_product_of(products: str) -> bool | None:
    """The lanes' ``lut_product`` for a design's ``swiftmax_products`` (``"auto"``: the lane's default, ``"dsp"``:
    a DSP block)."""
    if products not in ("auto", "dsp"):
        raise ValueError(f"swiftmax_products must be 'auto' or 'dsp', got {products!r}")
    return None if products == "auto" else False


def generate_engine_verilog(out_dir: Path, channels: int, lanes: int, score_bits: int,
                            name: str = "engine_pl", online: OnlineBuild | None = None,
                            lut_product: bool | None = None) -> Path:
    """Write the Verilog of :class:`EnginePL` ``(channels, lanes, score_bits, online, lut_product)`` as
    ``<out_dir>/<name>.v`` (module ``name``; rewritten only when its text changes) and return its path."""
    return generate_verilog(EnginePL(channels, lanes, score_bits, online, lut_product), name, out_dir)

"""Fixed-latency stream pipeline with a global stall and an output skid buffer (Amaranth 0.5).

The full description: ``docs/internals/hw.md``, section ``hw/pl/pipeline.py``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .stream import SkidBuffer, Slot, axis_members

__all__ = ["StallPipeline", "axis_port"]


def axis_port(prefix: str, data_width: int, *, sink: bool, user_width: int = 0) -> dict[str, wiring.Member]:
    """Flat AXI4-Stream port members (TDATA/TVALID/TREADY/TLAST, plus TUSER if ``user_width``).

    Same naming as :func:`vckattn.hw.pl.stream.axis_members` (``<prefix>_tuser`` binds in
    cocotbext-axi's ``AxiStreamBus.from_prefix``).
    """
    members = axis_members(prefix, data_width, sink=sink)
    if user_width:
        members[f"{prefix}_tuser"] = (In if sink else Out)(user_width)
    return members


class StallPipeline(wiring.Component):
    """Sideband/handshake shell of a fixed-latency, globally stalled stream pipeline.

    See the module docstring for the scheme. The kernel's datapath registers live in the
    kernel's own module (made with :meth:`reg`); this component holds the valid/TLAST/TUSER
    delay line and the output :class:`~vckattn.hw.pl.stream.SkidBuffer`.

    Ports (normally wired by :meth:`connect`): ``in_valid``, ``in_last``, ``in_user`` (from
    the kernel's slave port), ``out_data`` (driven by the kernel from its last stage) and the
    master-side ``m_axis_*`` (with ``m_axis_tuser`` if ``user_width``). ``ce`` (= the input
    TREADY) and ``in_fire`` are outputs; the attributes below are outputs the kernel reads.

    Attributes:
        ce: Global stage enable (1 = every stage advances this cycle); also ``s_axis_tready``.
        in_fire: ``in_valid & ce``: an input beat is accepted this cycle.
        valid: List of length ``latency + 1``; index k is the valid bit of the beat in stage k (index 0 = the
            input port itself); ``last`` and ``user`` are the same lists of TLAST and TUSER.

    Args:
        latency: Number of stage registers L (>= 1).
        data_width: Output TDATA width.
        user_width: TUSER width (0: no TUSER). The output TUSER is the input TUSER delayed by
            L stages unless ``user_passthrough=False``, in which case the kernel drives
            ``out_user`` from stage-L values.
        user_passthrough: See ``user_width``.
    """

    def __init__(self, latency: int, data_width: int, user_width: int = 0, *, user_passthrough: bool = True) -> None:
        if latency < 1:
            raise ValueError(f"latency must be >= 1, got {latency}")
        self.latency = latency
        self.data_width = data_width
        self.user_width = user_width
        self.user_passthrough = user_passthrough
        members: dict[str, wiring.Member] = {
            "in_valid": In(1),
            "in_last": In(1),
            "ce": Out(1),
            "in_fire": Out(1),
            "out_data": In(data_width),
            **axis_port("m_axis", data_width, sink=False, user_width=user_width),
        }
        if user_width:
            members["in_user"] = In(user_width)
            if not user_passthrough:
                members["out_user"] = In(user_width)
        super().__init__(members)
        self.valid: list[Value] = [self.in_valid] + [Signal(name=f"valid_{k}") for k in range(1, latency + 1)]
        self.last: list[Value] = [self.in_last] + [Signal(name=f"last_{k}") for k in range(1, latency + 1)]
        if user_width:
            self.user: list[Value] = [self.in_user] + [
                Signal(user_width, name=f"user_{k}") for k in range(1, latency + 1)
            ]
        else:
            self.user = []
        #: The output skid buffer (TDATA = {TUSER, TDATA}).
        self.skid = SkidBuffer(data_width + user_width)

    def formal_slots(self) -> list[Slot]:
        """Beat places oldest first (:class:`~vckattn.hw.pl.stream.Slot`): the skid buffer's two, then
        stages L..1 (their TLAST and TUSER; their data is the kernel's)."""
        dw = self.data_width
        slots = []
        for s in self.skid.formal_slots():
            fields = {"last": s.fields["last"], "data": s.fields["data"][:dw]}
            if self.user_width:
                fields["user"] = s.fields["data"][dw:]
            slots.append(Slot(s.valid, fields))
        for k in range(self.latency, 0, -1):
            fields = {"last": self.last[k]}
            if self.user_width:
                fields["user"] = self.user[k]
            slots.append(Slot(self.valid[k], fields))
        return slots

    def reg(self, m: Module, value: object, name: str | None = None) -> Signal:
        """A datapath stage register in module ``m``: loads ``value`` when ``ce`` is high.

        The register has ``value``'s shape and no reset (datapath flops need none; validity
        travels in ``valid``). Call it from the kernel's ``elaborate``.
        """
        v = Value.cast(value)
        r = Signal(v.shape(), name=name, reset_less=True)
        with m.If(self.ce):
            m.d.sync += r.eq(v)
        return r

    def connect(self, m: Module, kernel: object, in_prefix: str = "s_axis", out_prefix: str = "m_axis") -> None:
        """Wire the kernel's flat ``<in_prefix>_*`` / ``<out_prefix>_*`` ports to this shell.

        Drives ``<in_prefix>_tready`` from ``ce`` and all ``<out_prefix>_t*`` outputs; reads
        TVALID/TLAST (and TUSER when ``user_width``) of the input port. The kernel still drives
        ``out_data`` (and ``out_user`` without passthrough).
        """
        g = lambda p, f: getattr(kernel, f"{p}_t{f}")  # noqa: E731
        m.d.comb += [
            self.in_valid.eq(g(in_prefix, "valid")),
            self.in_last.eq(g(in_prefix, "last")),
            g(in_prefix, "ready").eq(self.ce),
            g(out_prefix, "data").eq(self.m_axis_tdata),
            g(out_prefix, "valid").eq(self.m_axis_tvalid),
            g(out_prefix, "last").eq(self.m_axis_tlast),
            self.m_axis_tready.eq(g(out_prefix, "ready")),
        ]
        if self.user_width:
            m.d.comb += [self.in_user.eq(g(in_prefix, "user")), g(out_prefix, "user").eq(self.m_axis_tuser)]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        dw, uw, n = self.data_width, self.user_width, self.latency
        m.submodules.skid = skid = self.skid
        m.d.comb += [self.ce.eq(skid.s_axis_tready), self.in_fire.eq(self.in_valid & skid.s_axis_tready)]
        with m.If(self.ce):
            for k in range(1, n + 1):
                m.d.sync += [self.valid[k].eq(self.valid[k - 1]), self.last[k].eq(self.last[k - 1])]
                if uw:
                    m.d.sync += self.user[k].eq(self.user[k - 1])
        # Skid buffer TDATA = {TUSER, TDATA}; it accepts exactly when ce (its TREADY) is high.
        if uw:
            out_user = self.user[n] if self.user_passthrough else self.out_user
            m.d.comb += skid.s_axis_tdata.eq(Cat(self.out_data, out_user))
        else:
            m.d.comb += skid.s_axis_tdata.eq(self.out_data)
        m.d.comb += [
            skid.s_axis_tvalid.eq(self.valid[n]),
            skid.s_axis_tlast.eq(self.last[n]),
            self.m_axis_tdata.eq(skid.m_axis_tdata[:dw]),
            self.m_axis_tvalid.eq(skid.m_axis_tvalid),
            self.m_axis_tlast.eq(skid.m_axis_tlast),
            skid.m_axis_tready.eq(self.m_axis_tready),
        ]
        if uw:
            m.d.comb += self.m_axis_tuser.eq(skid.m_axis_tdata[dw:])
        return m

"""A data path of the sublayer's PL top (``hw/ENGINE.md``, "The sublayer's PL side"): write units in, a PL buffer,
readers out. Three of them:

* :func:`qkv_path`: a re-tiler (:mod:`.retiler`) on every Q/K/V output PLIO, the Q/K/V buffer in the layout of
  :class:`~vckattn.hw.spec.qkv_buffer.QkvLayout`, a reader on every q, k and v stream of the attention pipelines;
* :func:`a_path`: an A writer (:mod:`.a_writer`) on every attention pipeline's A stream, the A buffer in the layout
  of :class:`~vckattn.hw.spec.slice_buffer.SliceLayout`, a reader on every x stream of the W_O stage;
* :func:`x_path`: an X writer (:mod:`.x_writer`) on the X mover's stream, the X buffer (the same layout, for the
  Q/K/V stage), a reader on every x stream of the Q/K/V stage and, with X kept on chip, a residual reader beside
  every W_O output PLIO, whose runs :mod:`.x_rows` turns into the record's rows for the residual unit.

A path's readers take their descriptors either each on its own stream or, with ``desc_depths``, all from one
routed stream through a descriptor router (:mod:`.stream_router`; the stream:
:func:`vckattn.hw.spec.descriptors.routed_descriptors`), as the PL top gives them from the descriptor mover.

Each write unit turns its stream's records into addressed beats (TUSER: :func:`.slot_buffer.write_user`) for the
buffer (:mod:`.slot_buffer`); each reader (:mod:`.buffer_reader`) sends, for each of its descriptors, the header
beat and the run of the buffer it names. Every write unit and reader is wired only to the banks it is given (the
performance model's wiring, ``hw/perf/sublayer.py: qkv_buffer``, ``a_buffer``, ``x_buffers``, from the
schedule). A slot is freed
once every reader has released it: a reader with no run in a sequence releases its slot with a quiet descriptor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from amaranth.hdl import Module
from amaranth.lib import wiring

from vckattn.hw.spec.qkv_buffer import QkvLayout
from vckattn.hw.spec.slice_buffer import SliceLayout

from .a_writer import AWriter
from .buffer_reader import BEAT_BITS, BufferReader
from .pipeline import axis_port
from .retiler import QkvRetiler
from .site_unit import SiteUnit
from .slot_buffer import SlotBuffer
from .stream_router import StreamRouter
from .x_rows import XRows
from .x_writer import XWriter

__all__ = ["BufferPath", "a_path", "connect_reader", "qkv_path", "u_path", "x_path"]

_AXIS = ("tdata", "tvalid", "tready", "tlast")


class BufferPath(wiring.Component):
    """Write units, a slot buffer and its readers, joined (module docstring).

    Ports: per write unit ``i``: ``s_axis_in<i>_*`` (its records); per reader ``r``: ``s_axis_desc<r>_*`` (its
    descriptors: header beat, RDESC beat; with ``desc_depths``, one ``s_axis_desc_*`` for all, routed, and
    ``bad_route``) and ``m_axis_rd<r>_*`` (its stream to the AIE, or its output unit's); ``slot_full``; ``clk``,
    ``rst``.

    Args:
        buffer: The buffer, one writer a write unit.
        units: The write units (``s_axis`` records in, ``m_axis`` addressed beats out, the buffer's TUSER).
        outputs: Per reader, a unit its stream goes through (``s_axis`` 128 bits in, ``m_axis`` out), or None;
            none by default.
        desc_depths: Per reader, its descriptor FIFO's entries behind one descriptor router
            (:func:`vckattn.hw.spec.descriptors.descriptor_depths`); None: a descriptor stream a reader.
    """

    def __init__(self, buffer: SlotBuffer, units: Sequence[wiring.Component],
                 outputs: Sequence[wiring.Component | None] = (), desc_depths: Sequence[int] | None = None) -> None:
        if len(units) != buffer.writers:
            raise ValueError(f"{len(units)} write units for a buffer of {buffer.writers} writers")
        outputs = list(outputs) or [None] * buffer.readers_n
        if len(outputs) != buffer.readers_n:
            raise ValueError(f"{len(outputs)} output units for {buffer.readers_n} readers")
        self.buffer, self.units, self.outputs = buffer, list(units), outputs
        self.readers = [BufferReader(buffer.addr_bits, buffer.slots) for _ in range(buffer.readers_n)]
        if desc_depths is not None and len(desc_depths) != buffer.readers_n:
            raise ValueError(f"{len(desc_depths)} descriptor FIFOs for {buffer.readers_n} readers")
        self.router = None if desc_depths is None else StreamRouter(desc_depths)
        members: dict = {"slot_full": wiring.Out(buffer.slots)}
        for i in range(len(units)):
            members |= axis_port(f"s_axis_in{i}", BEAT_BITS, sink=True)
        if self.router is not None:
            members |= {"bad_route": wiring.Out(1), **axis_port("s_axis_desc", BEAT_BITS, sink=True)}
        for r, out in enumerate(outputs):
            if self.router is None:
                members |= axis_port(f"s_axis_desc{r}", BEAT_BITS, sink=True)
            width = BEAT_BITS if out is None else len(out.m_axis_tdata)
            members |= axis_port(f"m_axis_rd{r}", width, sink=False)
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.buffer = buf = self.buffer
        m.d.comb += self.slot_full.eq(buf.slot_full)
        if self.router is not None:
            m.submodules.router = router = self.router
            m.d.comb += self.bad_route.eq(router.bad_route)
            for k in _AXIS:
                a, b = getattr(self, f"s_axis_desc_{k}"), getattr(router, f"s_axis_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
        for i, unit in enumerate(self.units):
            m.submodules[f"unit{i}"] = unit
            for k in _AXIS:
                a, b = getattr(self, f"s_axis_in{i}_{k}"), getattr(unit, f"s_axis_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
            for k in (*_AXIS, "tuser"):
                a, b = getattr(unit, f"m_axis_{k}"), getattr(buf, f"s_axis_w{i}_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
        for r, rd in enumerate(self.readers):
            m.submodules[f"reader{r}"] = rd
            out = rd
            if self.outputs[r] is not None:
                m.submodules[f"output{r}"] = out = self.outputs[r]
                for k in _AXIS:
                    a, b = getattr(rd, f"m_axis_{k}"), getattr(out, f"s_axis_{k}")
                    m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
            for k in _AXIS:
                a = getattr(self, f"s_axis_desc{r}_{k}") if self.router is None else \
                    getattr(self.router, f"m_axis_out{r}_{k}")
                b = getattr(rd, f"s_axis_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
                a, b = getattr(self, f"m_axis_rd{r}_{k}"), getattr(out, f"m_axis_{k}")
                m.d.comb += (b.eq(a) if k == "tready" else a.eq(b))
            connect_reader(m, buf, r, rd)
        return m


def connect_reader(m: Module, buf: SlotBuffer, r: int, rd: BufferReader) -> None:
    """Reader ``rd`` on the buffer's read port ``r``: its reads, grants, data, the slots' state and its releases."""
    m.d.comb += [getattr(buf, f"rd{r}_addr").eq(rd.rd_addr), getattr(buf, f"rd{r}_req").eq(rd.rd_req),
                 rd.rd_gnt.eq(getattr(buf, f"rd{r}_gnt")), rd.rd_data.eq(getattr(buf, f"rd{r}_data")),
                 rd.slot_full.eq(buf.slot_full), rd.slot_turn.eq(buf.slot_turn),
                 getattr(buf, f"rd{r}_release").eq(rd.release_valid),
                 getattr(buf, f"rd{r}_release_slot").eq(rd.release_slot)]


def qkv_path(layout: QkvLayout, rows: int, cols: int, bank_beats: int, write_banks: Sequence[Iterable[int]],
             read_banks: Sequence[Iterable[int]], desc_depths: Sequence[int] | None = None) -> BufferPath:
    """The Q/K/V path: a re-tiler of ``rows × cols`` records a writer, the Q/K/V buffer of ``layout`` in banks of
    ``bank_beats``, a reader a read port; each wired to its banks; with ``desc_depths``, the readers' descriptors
    through one descriptor router (:class:`BufferPath`)."""
    n_w, n_r = len(write_banks), len(read_banks)
    buf = SlotBuffer(layout.slots, layout.slot_beats, bank_beats, n_w, n_r, n_r, write_banks, read_banks,
                     beats=layout.beats)
    return BufferPath(buf, [QkvRetiler(layout, rows, cols) for _ in range(n_w)], desc_depths=desc_depths)


def a_path(layout: SliceLayout, heads: int, d: int, q_rows: int, max_groups: int,
           write_banks: Sequence[Iterable[int]], read_banks: Sequence[Iterable[int]],
           desc_depths: Sequence[int] | None = None) -> BufferPath:
    """The A path: an A writer a pipeline (``heads`` × ``d``, tiles of ``q_rows``, groups below ``max_groups``),
    the A buffer of ``layout``, a reader a W_O x stream; each wired to its banks; ``desc_depths`` as
    :func:`qkv_path`'s."""
    n_w, n_r = len(write_banks), len(read_banks)
    slot_beats = layout.max_seq * layout.features // 16
    buf = SlotBuffer(layout.slots, slot_beats, layout.bank_beats, n_w, n_r, n_r, write_banks, read_banks,
                     beats=layout.beats)
    return BufferPath(buf, [AWriter(layout, heads, d, q_rows, max_groups) for _ in range(n_w)],
                      desc_depths=desc_depths)


def x_path(layout: SliceLayout, write_banks: Sequence[Iterable[int]], read_banks: Sequence[Iterable[int]],
           residual_banks: Sequence[Iterable[int]] = (), row_beats: int = 1, lanes: int = 4,
           desc_depths: Sequence[int] | None = None) -> BufferPath:
    """The X path: an X writer a write stream (the X mover's), the X buffer of ``layout``, a reader a Q/K/V x
    stream and a residual reader a W_O output PLIO (``residual_banks``, after the x readers; its stream through
    :class:`~.x_rows.XRows` of ``row_beats`` blocks a row, ``lanes`` int8 a beat); each wired to its banks;
    ``desc_depths`` as :func:`qkv_path`'s."""
    reads = [*read_banks, *residual_banks]
    n_w, n_r = len(write_banks), len(reads)
    slot_beats = layout.max_seq * layout.features // 16
    buf = SlotBuffer(layout.slots, slot_beats, layout.bank_beats, n_w, n_r, n_r, write_banks, reads,
                     beats=layout.beats)
    outputs = [None] * len(read_banks) + [XRows(row_beats, lanes) for _ in residual_banks]
    return BufferPath(buf, [XWriter(layout) for _ in range(n_w)], outputs, desc_depths)


def u_path(layout: SliceLayout, write_banks: Sequence[Iterable[int]], read_banks: Sequence[Iterable[int]],
           max_d: int = 1024, desc_depths: Sequence[int] | None = None) -> BufferPath:
    """A decoder's U path: a site unit a write stream (:class:`~.site_unit.SiteUnit`: a site reader's runs of X in,
    BHyT site A's U out; its BHyT unit of ``max_d`` channels), the U buffer of ``layout``, a reader a Q/K/V x
    stream; each wired to its banks; ``desc_depths`` as :func:`qkv_path`'s."""
    n_w, n_r = len(write_banks), len(read_banks)
    slot_beats = layout.max_seq * layout.features // 16
    buf = SlotBuffer(layout.slots, slot_beats, layout.bank_beats, n_w, n_r, n_r, write_banks, read_banks,
                     beats=layout.beats)
    return BufferPath(buf, [SiteUnit(layout, max_d) for _ in range(n_w)], desc_depths=desc_depths)

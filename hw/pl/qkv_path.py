"""The Q/K/V path of the sublayer's PL top (``hw/ENGINE.md``, "The sublayer's PL side"): the Q/K/V stage's output
records in, the attention pipelines' q, k and v streams out.

A re-tiler (:mod:`.retiler`) on every Q/K/V output PLIO writes its records' beats into the Q/K/V buffer
(:mod:`.slot_buffer`) in the layout of :class:`~vckattn.hw.spec.qkv_buffer.QkvLayout`; a reader (:mod:`.buffer_reader`)
on every q, k and v stream sends, for each of its descriptors, the header beat and the run of the buffer it names.
Each re-tiler and reader is wired only to the banks it is given (the performance model's wiring,
``hw/perf/sublayer.py: qkv_buffer``, from the schedule: a re-tiler to the heads of its cascades' blocks, a pipeline's
readers to the heads of the groups dealt to it). A slot is freed once every reader has released it: a reader with no
run in a sequence releases its slot with a quiet descriptor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from amaranth.hdl import Module
from amaranth.lib import wiring

from vckattn.hw.spec.qkv_buffer import QkvLayout

from .buffer_reader import BEAT_BITS, BufferReader
from .pipeline import axis_port
from .retiler import QkvRetiler
from .slot_buffer import SlotBuffer

__all__ = ["QkvPath"]

_AXIS = ("tdata", "tvalid", "tready", "tlast")


class QkvPath(wiring.Component):
    """Re-tilers, the Q/K/V buffer and the readers, joined (module docstring).

    Ports: per re-tiler ``i``: ``s_axis_rec<i>_*`` (the output PLIO's GRESULT records); per reader ``r``:
    ``s_axis_desc<r>_*`` (its descriptors: header beat, RDESC beat) and ``m_axis_rd<r>_*`` (its stream to the AIE);
    ``slot_full``; ``clk``, ``rst``.

    Args:
        layout: The buffer's layout (``d``, ``slots``, ``max_seq / rows`` powers of two: the re-tiler's).
        rows: Rows of a Q/K/V record.
        cols: Channels of a Q/K/V record.
        bank_beats: Beats of a bank (a power of two).
        write_banks: Per re-tiler, the banks it is wired to.
        read_banks: Per reader, the banks it is wired to.
    """

    def __init__(self, layout: QkvLayout, rows: int, cols: int, bank_beats: int,
                 write_banks: Sequence[Iterable[int]], read_banks: Sequence[Iterable[int]]) -> None:
        n_w, n_r = len(write_banks), len(read_banks)
        self.buffer = SlotBuffer(layout.slots, layout.slot_beats, bank_beats, n_w, n_r, n_r, write_banks, read_banks)
        self.retilers = [QkvRetiler(layout, rows, cols) for _ in range(n_w)]
        self.readers = [BufferReader(self.buffer.addr_bits, layout.slots) for _ in range(n_r)]
        members: dict = {"slot_full": wiring.Out(layout.slots)}
        for i in range(n_w):
            members |= axis_port(f"s_axis_rec{i}", BEAT_BITS, sink=True)
        for r in range(n_r):
            members |= axis_port(f"s_axis_desc{r}", BEAT_BITS, sink=True)
            members |= axis_port(f"m_axis_rd{r}", BEAT_BITS, sink=False)
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.buffer = buf = self.buffer
        m.d.comb += self.slot_full.eq(buf.slot_full)
        for i, rt in enumerate(self.retilers):
            m.submodules[f"retiler{i}"] = rt
            for k in _AXIS:
                a, b = getattr(self, f"s_axis_rec{i}_{k}"), getattr(rt, f"s_axis_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
            for k in (*_AXIS, "tuser"):
                a, b = getattr(rt, f"m_axis_{k}"), getattr(buf, f"s_axis_w{i}_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
        for r, rd in enumerate(self.readers):
            m.submodules[f"reader{r}"] = rd
            for k in _AXIS:
                a, b = getattr(self, f"s_axis_desc{r}_{k}"), getattr(rd, f"s_axis_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
                a, b = getattr(self, f"m_axis_rd{r}_{k}"), getattr(rd, f"m_axis_{k}")
                m.d.comb += (b.eq(a) if k == "tready" else a.eq(b))
            m.d.comb += [getattr(buf, f"rd{r}_addr").eq(rd.rd_addr), getattr(buf, f"rd{r}_req").eq(rd.rd_req),
                         rd.rd_gnt.eq(getattr(buf, f"rd{r}_gnt")), rd.rd_data.eq(getattr(buf, f"rd{r}_data")),
                         rd.slot_full.eq(buf.slot_full), rd.slot_turn.eq(buf.slot_turn),
                         getattr(buf, f"rd{r}_release").eq(rd.release_valid),
                         getattr(buf, f"rd{r}_release_slot").eq(rd.release_slot)]
        return m

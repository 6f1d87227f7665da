"""A test top of the sublayer's PL buffer path: one :class:`~vckattn.hw.pl.slot_buffer.SlotBuffer` with its readers
(:class:`~vckattn.hw.pl.buffer_reader.BufferReader`), for ``sim/tb_slot_buffer.py``; each writer and reader wired to
the banks it is given (all by default).

Ports: the buffer's writers ``s_axis_w<w>_*`` as they are; per reader ``r`` its descriptors ``s_axis_r<r>_*`` and
its output ``m_axis_r<r>_*``; ``slot_full``; ``clk``, ``rst``.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Module
from amaranth.lib import wiring

from vckattn.hw.pl.buffer_path import connect_reader
from vckattn.hw.pl.buffer_reader import BEAT_BITS, BufferReader
from vckattn.hw.pl.pipeline import axis_port
from vckattn.hw.pl.slot_buffer import SlotBuffer

__all__ = ["BufferHarness"]

_AXIS = ("tdata", "tvalid", "tready", "tlast")


class BufferHarness(wiring.Component):
    """The buffer and ``readers_n`` readers wired together (module docstring)."""

    def __init__(self, slots: int, slot_beats: int, bank_beats: int, writers: int, readers_n: int,
                 write_banks: Sequence[Sequence[int]] | None = None,
                 read_banks: Sequence[Sequence[int]] | None = None) -> None:
        self.buffer = SlotBuffer(slots, slot_beats, bank_beats, writers, readers_n, readers_n, write_banks, read_banks)
        self.readers = [BufferReader(self.buffer.addr_bits, slots) for _ in range(readers_n)]
        members: dict = {"slot_full": wiring.Out(slots)}
        for w in range(writers):
            members |= axis_port(f"s_axis_w{w}", BEAT_BITS, sink=True,
                                 user_width=self.buffer.addr_bits + self.buffer.slot_bits + 1)
        for r in range(readers_n):
            members |= axis_port(f"s_axis_r{r}", BEAT_BITS, sink=True)
            members |= axis_port(f"m_axis_r{r}", BEAT_BITS, sink=False)
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.buffer = buf = self.buffer
        m.d.comb += self.slot_full.eq(buf.slot_full)
        for w in range(buf.writers):
            for k in (*_AXIS, "tuser"):
                a, b = getattr(self, f"s_axis_w{w}_{k}"), getattr(buf, f"s_axis_w{w}_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
        for r, rd in enumerate(self.readers):
            m.submodules[f"reader{r}"] = rd
            for k in _AXIS:
                a, b = getattr(self, f"s_axis_r{r}_{k}"), getattr(rd, f"s_axis_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))
                a, b = getattr(self, f"m_axis_r{r}_{k}"), getattr(rd, f"m_axis_{k}")
                m.d.comb += (b.eq(a) if k == "tready" else a.eq(b))
            connect_reader(m, buf, r, rd)
        return m

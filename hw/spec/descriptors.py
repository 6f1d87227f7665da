"""The buffer readers' descriptors as one routed stream: what the descriptor mover sends the descriptor router
(``hw/pl/stream_router.py``; ``hw/ENGINE.md``, "The sublayer's PL side").

A reader's descriptor is 32 bytes: the header beat it sends as it is (TILE, SLICE or XTILE), then the RDESC beat of
its run (:class:`~vckattn.hw.spec.qkv_buffer.Run`). The stream is a packet per (sequence, reader): a ROUTE beat
naming the reader, then the reader's descriptors of that sequence, TLAST on the last; sequence by sequence, every
reader's packet of sequence ``b`` before any of ``b + 1``. Every reader has at least one descriptor of every
sequence (its runs, or a quiet release), so every packet has one.

Why this order: the router holds the stream while a reader's FIFO is full. A reader's descriptors of sequence
``b`` depend only on data of sequences up to ``b`` (its slot filled by ``b``'s writers, freed by ``b - slots``'
readers), whose descriptors have all gone before any packet of ``b + 1``; so a FIFO that holds a reader's largest
sequence (:func:`descriptor_depths`) always drains, and the stream never deadlocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from vckattn.hw.spec import streams
from vckattn.hw.spec.qkv_buffer import Run

__all__ = ["DESCRIPTOR_BEATS", "descriptor", "descriptor_depths", "fifo_depth", "mover_command", "mover_list",
           "routed_descriptors"]

#: beats of one descriptor: the header beat, the RDESC beat
DESCRIPTOR_BEATS = 2


def descriptor(run: Run, header: bytes) -> bytes:
    """The 32 bytes of ``run``'s descriptor: ``header`` (the 16-byte beat the reader sends first), its RDESC."""
    if len(header) != streams.BEAT_BYTES:
        raise ValueError(f"a header beat is {streams.BEAT_BYTES} bytes, not {len(header)}")
    rdesc = streams.encode("rdesc", first=run.first, beats=run.beats, slot=run.slot, release=int(run.release),
                           turn=run.turn, quiet=int(run.quiet))
    return header + rdesc.tobytes()


def _by_sequence(runs: Sequence[Run]) -> dict[int, int]:
    """How many of ``runs`` each sequence has."""
    count: dict[int, int] = {}
    for run in runs:
        count[run.b] = count.get(run.b, 0) + 1
    return count


def routed_descriptors(readers: Sequence[Sequence[tuple[Run, bytes]]]) -> list[bytes]:
    """The descriptor mover's packets, in the order it sends them (module docstring): per sequence, per reader
    ``r`` (its index in ``readers``, the router's output), a ROUTE beat to ``r`` and the reader's descriptors of
    that sequence (:func:`descriptor` of each (run, header beat), in the reader's order). A reader's runs must
    come sequence by sequence (``reader_runs``, ``x_reader_runs``, ``residual_runs`` make them so)."""
    chunks: list[dict[int, list[bytes]]] = []
    for r, runs in enumerate(readers):
        seqs = [run.b for run, _ in runs]
        if seqs != sorted(seqs):
            raise ValueError(f"reader {r}: runs not in sequence order")
        per: dict[int, list[bytes]] = {}
        for run, header in runs:
            per.setdefault(run.b, []).append(descriptor(run, header))
        chunks.append(per)
    packets = []
    for b in sorted({b for per in chunks for b in per}):
        for r, per in enumerate(chunks):
            if b in per:
                route = streams.encode("route", dest=r, op=streams.OP_ROUTE).tobytes()
                packets.append(route + b"".join(per[b]))
    return packets


def descriptor_depths(readers: Sequence[Sequence[Run]], ahead: int = 2) -> list[int]:
    """Per reader, its descriptor FIFO's entries (beats): ``ahead`` × its largest sequence's descriptors (``ahead``
    1: the least that cannot deadlock, module docstring; 2, the default: the next sequence's descriptors in while
    the reader works on one)."""
    return [fifo_depth(_by_sequence(runs).values(), ahead) for runs in readers]


def fifo_depth(per_sequence: Iterable[int], ahead: int = 2) -> int:
    """A reader's descriptor FIFO's entries (beats) for its descriptors in each sequence (``per_sequence``; a
    sequence with none counts one, its quiet release): ``ahead`` × the largest, at least the router's 4."""
    if ahead < 1:
        raise ValueError(f"ahead {ahead}: at least one sequence's descriptors")
    return max(4, ahead * DESCRIPTOR_BEATS * max((max(1, n) for n in per_sequence), default=1))


def mover_command(header: np.ndarray | bytes, offset: int, beats: int, no_header: bool = False,
                  more: bool = False) -> np.ndarray:
    """One list mover command (``hw/hls/mm2s_list.cpp``), 32 uint8: the header beat ``header`` (16 bytes) then its
    MDESC (``offset``: the payload's byte offset into the source, ``beats``: payload beats, ``no_header``: send the
    payload only, ``more``: no TLAST at its end, the next command continues the packet)."""
    desc = streams.encode("mdesc", offset_lo=offset & 0xFFFFFFFF, offset_hi=offset >> 32, beats=beats,
                          no_header=int(no_header), more=int(more))
    return np.concatenate([np.frombuffer(bytes(header), np.uint8).reshape(streams.BEAT_BYTES), desc])


def mover_list(packets: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The descriptor mover's command list ``(n, 32)`` uint8 and source (uint8) for ``packets``
    (:func:`routed_descriptors`), for the list mover (``hw/hls/mm2s_list.cpp``): a command a packet, its header beat
    the packet's ROUTE beat, its payload the packet's descriptors, laid one packet after the other in the source; the
    mover's TLAST on each command's last beat ends each packet."""
    cmds, at = [], 0
    for p in packets:
        beats = len(p) // streams.BEAT_BYTES - 1
        if len(p) % streams.BEAT_BYTES or beats < 1:
            raise ValueError("a packet is a ROUTE beat and at least one descriptor beat")
        cmds.append(mover_command(p[:streams.BEAT_BYTES], at, beats))
        at += beats * streams.BEAT_BYTES
    src = np.frombuffer(b"".join(p[streams.BEAT_BYTES:] for p in packets), np.uint8)
    return np.stack(cmds) if cmds else np.zeros((0, 32), np.uint8), src

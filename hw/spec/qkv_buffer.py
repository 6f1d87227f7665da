"""The sublayer's Q/K/V buffer in the PL (``hw/ENGINE.md``, "The sublayer's PL side"): where every beat of Q, K and
V lives, declared once for the re-tiler that writes them (``hw/pl/retiler.py``) and the readers and tests that read
them.

Addresses are in 16-byte beats. The buffer holds ``slots`` sequences (sequence ``b`` in slot ``b % slots``), laid
out head by head with the slots inside: Q of every query head, then K, then V of every K/V head; each head's block
holds its ``slots`` sequences (``head_beats`` each), so a bank of a few head blocks' size holds one head of a few
slots and is read by the pipelines of that head only (the sequences of other heads, read by other pipelines, are in
other banks). A head block that spans ``interleave`` banks deals its slots to them in turn (slot ``i`` at place
``(i mod interleave) · slots / interleave + i / interleave``), so neighbouring sequences, which a pipeline reads
one after the other (the next one's K and V while it works on the one before), are in different banks. Within a
head block of a sequence:

* Q (``heads``): its ``max_seq / q_rows`` tiles, each ``q_rows × d`` int8 in the A layout of ``mmul<4,16,8>``
  (``golden/engine.py: pack_q``);
* K (``kv_heads``): its ``max_seq / slice_keys`` key slices, each Kᵀ in the B layout of QKᵀ (``pack_k``);
* V (``kv_heads``): its key slices, each in the B layout of P·V (``pack_v``).

So every q tile, K slice and V slice is one contiguous run of beats, in the order the attention kernels take it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vckattn.hw.spec import streams
from vckattn.hw.spec.streams import BEAT_BYTES

__all__ = ["QkvLayout", "Run", "reader_headers", "reader_runs", "with_release"]


@dataclass(frozen=True)
class QkvLayout:
    """The buffer's geometry: head size ``d`` (a multiple of 16), ``heads`` query and ``kv_heads`` K/V heads,
    ``max_seq`` tokens a sequence, ``q_rows`` rows a Q tile (a multiple of 4), ``slice_keys`` keys a slice (a
    multiple of 8), ``slots`` sequences held, dealt to ``interleave`` banks a head block (module docstring; a power
    of two dividing ``slots``)."""

    d: int
    heads: int
    kv_heads: int
    max_seq: int
    q_rows: int
    slice_keys: int
    slots: int
    interleave: int = 1

    def __post_init__(self) -> None:
        if self.d < 16 or self.d % 16:
            raise ValueError(f"d={self.d}: a positive multiple of 16")
        if self.heads < 1 or self.kv_heads < 1 or self.heads % self.kv_heads:
            raise ValueError(f"{self.heads} query heads over {self.kv_heads} K/V heads")
        if self.q_rows % 4 or self.slice_keys % 8 or self.max_seq % self.q_rows or self.max_seq % self.slice_keys:
            raise ValueError(f"max_seq {self.max_seq} in tiles of {self.q_rows} rows (a multiple of 4) and slices of "
                             f"{self.slice_keys} keys (a multiple of 8)")
        if self.slots < 1:
            raise ValueError("at least one slot")
        if self.interleave < 1 or self.interleave & (self.interleave - 1) or self.slots % self.interleave:
            raise ValueError(f"interleave {self.interleave}: a power of two dividing slots {self.slots}")

    @property
    def head_beats(self) -> int:
        """Beats of one head's Q, K or V of a sequence (``max_seq · d / 16``)."""
        return self.max_seq * self.d // BEAT_BYTES

    @property
    def tile_beats(self) -> int:
        """Beats of one Q tile."""
        return self.q_rows * self.d // BEAT_BYTES

    @property
    def slice_beats(self) -> int:
        """Beats of one K or V slice."""
        return self.slice_keys * self.d // BEAT_BYTES

    @property
    def head_stride(self) -> int:
        """Beats of one head's block: its ``slots`` sequences."""
        return self.slots * self.head_beats

    @property
    def k_base(self) -> int:
        """First beat of K."""
        return self.heads * self.head_stride

    @property
    def v_base(self) -> int:
        """First beat of V."""
        return self.k_base + self.kv_heads * self.head_stride

    @property
    def slot_beats(self) -> int:
        """Beats one sequence writes (its Q, K and V)."""
        return (self.heads + 2 * self.kv_heads) * self.head_beats

    @property
    def beats(self) -> int:
        """Beats of the whole buffer."""
        return self.slots * self.slot_beats

    def place(self, slot: int) -> int:
        """Where slot ``slot``'s sequence sits within a head block, in ``head_beats`` (module docstring)."""
        return slot % self.interleave * (self.slots // self.interleave) + slot // self.interleave

    def slot_of(self, addr: int) -> int:
        """The slot a beat's address is in."""
        place = addr // self.head_beats % self.slots
        per = self.slots // self.interleave
        return place % per * self.interleave + place // per

    @property
    def qkv_cols(self) -> int:
        """Channels of the fused Q/K/V projection: Q of every query head, then K, then V of every K/V head."""
        return (self.heads + 2 * self.kv_heads) * self.d

    def q_tile(self, b: int, h: int, t: int) -> int:
        """First beat of Q tile ``t`` of head ``h`` of sequence ``b``."""
        return h * self.head_stride + self.place(b % self.slots) * self.head_beats + t * self.tile_beats

    def k_slice(self, b: int, h: int, s: int) -> int:
        """First beat of K slice ``s`` of K/V head ``h`` of sequence ``b``."""
        return self.k_base + h * self.head_stride + self.place(b % self.slots) * self.head_beats + s * self.slice_beats

    def v_slice(self, b: int, h: int, s: int) -> int:
        """First beat of V slice ``s`` of K/V head ``h`` of sequence ``b``."""
        return self.v_base + h * self.head_stride + self.place(b % self.slots) * self.head_beats + s * self.slice_beats

    def head_block(self, kind: str, b: int, h: int) -> int:
        """First beat of what a pipeline's ``kind`` reader (``"q"``, ``"k"`` or ``"v"``) reads for query head ``h``
        of sequence ``b``: the head's Q, or its K/V head's K or V (``head_beats`` beats)."""
        if kind == "q":
            return self.q_tile(b, h, 0)
        kv = h // (self.heads // self.kv_heads)
        return (self.k_slice if kind == "k" else self.v_slice)(b, kv, 0)


@dataclass(frozen=True)
class Run:
    """One descriptor of a q, k or v reader: the run of ``beats`` beats from ``first`` (Q tile or key slice
    ``index`` of head ``head`` of sequence ``b``), in ``slot`` with ``turn``; ``release``: the reader's last run of
    that sequence; ``quiet``: a release alone (no run: the reader has no group of that sequence); ``group``: a q,
    k or v run's (batch, head) group ``b · heads + h`` (its query head's, for K and V), -1 for the others."""

    kind: str
    b: int
    head: int
    index: int
    first: int
    beats: int
    slot: int
    turn: int
    release: bool
    quiet: bool = False
    group: int = -1


def with_release(runs: list[Run], quiet: Run) -> list[Run]:
    """A reader's runs of one sequence with the sequence's slot released once: on the last run, or by ``quiet`` (a
    release alone) when the reader has none."""
    return [*runs[:-1], replace(runs[-1], release=True)] if runs else [quiet]


def reader_runs(layout: QkvLayout, dealt: list[list[int]], batch: int) -> list[list[Run]]:
    """Every q, k and v reader's runs for a launch of ``batch`` sequences: per attention pipeline (``dealt``: the
    groups ``b · heads + h`` dealt to it, in order) its q, k and v readers, each reading, group by group, every Q tile
    of its head, or every K or V slice of its K/V head; each reader releases every sequence's slot once (its last run
    of the sequence, or a quiet release where it has none), in sequence order."""
    group_kv = layout.heads // layout.kv_heads
    tiles, slices = layout.max_seq // layout.q_rows, layout.max_seq // layout.slice_keys
    out: list[list[Run]] = []
    for groups in dealt:
        for kind in ("q", "k", "v"):
            runs: list[Run] = []
            for b in range(batch):
                slot, turn = b % layout.slots, b // layout.slots % 2
                mine = []
                for g in (g for g in groups if g // layout.heads == b):
                    h = g % layout.heads
                    if kind == "q":
                        mine += [Run("q", b, h, t, layout.q_tile(b, h, t), layout.tile_beats, slot, turn, False,
                                     group=g) for t in range(tiles)]
                    else:
                        at = layout.k_slice if kind == "k" else layout.v_slice
                        mine += [Run(kind, b, h // group_kv, s, at(b, h // group_kv, s), layout.slice_beats, slot,
                                     turn, False, group=g) for s in range(slices)]
                runs += with_release(mine, Run(kind, b, -1, -1, 0, 0, slot, turn, True, True))
            out.append(runs)
    return out


def reader_headers(layout: QkvLayout, runs: list[list[Run]], valid_keys: list[int], *, causal: bool = False,
                   score_shift: int = 0, rq_mult: int = 0, rq_shift: int = 0) -> list[list[bytes]]:
    """The header beat of each of the q, k and v readers' runs (:func:`reader_runs`), in their order (16 bytes each;
    a quiet release's, never sent, is zeros): the attention pipelines' own commands (``hw/spec/streams.py``), as the
    engine's host makes them for the same groups (``host/engine.py``):

    * a q reader's run (Q tile ``t`` of group ``g = b · heads + h``): TILE, ``head`` ``h``, ``rows`` ``q_rows`` (the
      buffer holds ``max_seq`` tokens a sequence: every tile whole; the keys past the sequence are masked instead),
      ``q0 = t · q_rows``, ``tag = g · T + t`` (``T = max_seq / q_rows``), ``valid_keys[b]``, ``causal``,
      ``score_shift``;
    * a k or v reader's run (key slice ``j`` of group ``g``'s K/V head): SLICE, ``packet_id`` ``j`` (K) or
      ``kernels + j`` (V; ``kernels = max_seq / slice_keys``), ``tiles = T``, ``first_tile = g · T``; V carries the
      output requantization (``rq_mult``, a signed 16-bit value, and ``rq_shift``)."""
    if any(not 1 <= v <= layout.max_seq for v in valid_keys):
        raise ValueError(f"valid keys of each sequence 1..{layout.max_seq}: {valid_keys}")
    tiles, k = layout.max_seq // layout.q_rows, layout.max_seq // layout.slice_keys

    def header(r: Run) -> bytes:
        if r.quiet:
            return bytes(streams.BEAT_BYTES)
        if r.kind == "q":
            return streams.encode("tile", op=streams.OP_TILE, causal=int(causal), score_shift=score_shift, head=r.head,
                                  valid_keys=valid_keys[r.b], rows=layout.q_rows, q0=r.index * layout.q_rows,
                                  tag=r.group * tiles + r.index).tobytes()
        v = r.kind == "v"
        return streams.encode("slice", packet_id=r.index + (k if v else 0), op=streams.OP_LOAD_V if v else
                              streams.OP_LOAD_K, slice=r.index, tiles=tiles, first_tile=r.group * tiles,
                              rq_mult=streams.int16_bits(rq_mult) if v else 0, rq_shift=rq_shift if v else 0).tobytes()

    return [[header(r) for r in reader] for reader in runs]

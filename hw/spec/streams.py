"""Stream contract v3 of the scalable engine: the one declaration of its header words (``hw/ENGINE.md``).

Every header is one 128-bit beat of four little-endian uint32 words ``w0..w3``; a field is
``(word, low bit, width)``; no two fields of a header share bits. Headers: ``tile`` (first beat of a q
buffer), ``slice`` (first beat of a k / v buffer; word 0 is the k_in / v_in packet's routing word), ``packet``
(score / P packets), ``result`` (A records and done logs); for the projection GEMM ``xtile`` (first beat of an
x buffer), ``wslice`` (first beat of a w buffer) and ``gresult`` (its output records); for the sublayer's PL side
``rdesc`` (a buffer reader's run), ``mdesc`` (a list mover's run, ``hw/hls/mm2s_list.cpp``) and ``route`` (a
routed packet's first beat, ``hw/pl/stream_router.py``). The AIE kernels
(``hw/aie/engine/engine_kernels.h``, through the generated ``hw/aie/generated/engine_streams.h``), the
movers (``hw/hls/*_engine.cpp``), the PL top (``hw/pl/engine.py``), the C-simulation
(``sim/engine_csim.py``) and the host (``host/engine.py``) all use these fields; nothing else spells
a bit position.

Regenerate the C++ header with ``make regen`` (``make regen CHECK=1``: exit 1 if stale).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BEAT_BYTES = 16

#: opcodes: TILE in the TILE header of a q buffer, LOAD_K / LOAD_V in the SLICE header of a k / v buffer
OP_LOAD_K = 1
OP_TILE = 2
OP_LOAD_V = 3
#: the projection GEMM (``hw/aie/engine/gemm_kernels.h``): X_TILE in the XTILE header of an x buffer, LOAD_W in the
#: WSLICE header of a w buffer
OP_X_TILE = 4
OP_LOAD_W = 5
#: the sublayer's PL top: ROUTE in the first beat of a routed packet (``hw/pl/stream_router.py``)
OP_ROUTE = 6
OPS = {"LOAD_K": OP_LOAD_K, "TILE": OP_TILE, "LOAD_V": OP_LOAD_V, "X_TILE": OP_X_TILE, "LOAD_W": OP_LOAD_W,
       "ROUTE": OP_ROUTE}


@dataclass(frozen=True)
class Field:
    """One header field: ``width`` bits from bit ``lo`` of word ``word`` (unsigned)."""

    name: str
    word: int
    lo: int
    width: int
    doc: str

    @property
    def max(self) -> int:
        return (1 << self.width) - 1

    @property
    def bit(self) -> int:
        """First bit of the field within the 128-bit beat (little-endian words)."""
        return 32 * self.word + self.lo

    def bits_of(self, beat: Any) -> Any:
        """The field's bits of a 128-bit beat value (anything sliced by bit index: an Amaranth value)."""
        return beat[self.bit:self.bit + self.width]


#: first beat of every q buffer (q_in): one tile of Q_ROWS queries
TILE = (
    Field("op", 0, 0, 4, "2 (TILE)"),
    Field("causal", 0, 4, 1, "key j is masked for query row i when j > q0 + i"),
    Field("score_shift", 0, 8, 8, "right shift of the int32 accumulator before rounding to score_bits"),
    Field("head", 1, 8, 8, "the query head h of the tile (selects the normalizer's register set h); the QK^T "
                           "kernels copy it into the score packets"),
    Field("valid_keys", 1, 16, 16, "keys >= valid_keys are masked (padding at the end)"),
    Field("rows", 2, 0, 16, "valid query rows (rows >= rows are masked)"),
    Field("q0", 2, 16, 16, "position of the tile's first query row (for the causal mask)"),
    Field("tag", 3, 0, 32, "the host's tile id"),
)

#: first beat of every k / v buffer (k_in / v_in packets): one key slice of a (batch, head) group
SLICE = (
    Field("packet_id", 0, 0, 5, "word 0 is the packet's routing word: packet id j for K of QK^T kernel j, k + j for "
                                "V of P.V kernel j (pktsplit<k> on k_in, and on v_in output j for id k + j; the "
                                "hardware's other header bits are not interpreted)"),
    Field("op", 1, 0, 4, "1 LOAD_K, 3 LOAD_V"),
    Field("slice", 1, 8, 8, "key slice index j (keys [j*SK, (j+1)*SK) of the group)"),
    Field("tiles", 1, 16, 16, "tiles of the group (>= 1): the kernel releases the slice after that many tiles"),
    Field("first_tile", 2, 0, 32, "tile id of the group's first tile (its tiles are first_tile .. first_tile + "
                                  "tiles - 1)"),
    Field("rq_mult", 3, 0, 16, "LOAD_V: the layer's output requantization multiplier, a signed 16-bit integer (its "
                               "two's complement bits): P.V kernel 0 passes it down the cascade to the requantizer "
                               "(0 in LOAD_K)"),
    Field("rq_shift", 3, 16, 6, "LOAD_V: the output requantization's right shift, 0..62 (0 in LOAD_K)"),
)

#: first beat of every score packet (AIE -> PL) and P packet (PL -> AIE)
PACKET = (
    Field("packet_id", 0, 0, 5, "AIE packet-switching id = the kernel's index within its score channel (the "
                                "hardware's other header bits are not interpreted)"),
    Field("tile_id", 1, 0, 32, "the host's tile id"),
    Field("slice", 2, 0, 8, "key slice index j"),
    Field("elem_bits", 2, 8, 8, "bits per payload element: score_bits on the score stream, 8 on the P stream"),
    Field("rows", 2, 16, 16, "valid query rows of the tile"),
    Field("count", 3, 0, 16, "payload elements: Q_ROWS x SK"),
    Field("head", 3, 16, 8, "the tile's query head (from the TILE header): the PL normalizer uses register set "
                            "head"),
)

#: header of an A record (AIE -> PL -> DDR: the requantizer's int8 payload) and of a done log entry
RESULT = (
    Field("tile_id", 0, 0, 32, "the host's tile id"),
    Field("rows", 1, 0, 16, "valid query rows"),
    Field("pipeline", 2, 0, 16, "done log only: the pipeline that computed the tile (the PL mover's argument; 0 in "
                                "the A record the AIE sends)"),
    Field("d", 3, 0, 16, "head size D of the build"),
)

#: first beat of every x buffer of the projection GEMM: one K-slice of a tile of X rows
XTILE = (
    Field("packet_id", 0, 0, 5, "word 0 is the packet's routing word: packet id j for GEMM kernel j of the cascade"),
    Field("op", 1, 0, 4, "4 (X_TILE)"),
    Field("slice", 1, 8, 8, "K-slice index j (input features [j*KSLICE, j*KSLICE + kslice(j)))"),
    Field("rows", 1, 16, 16, "valid rows of the tile (the kernels compute every row; the rows beyond are padding)"),
    Field("tag", 2, 0, 32, "the host's tile id"),
)

#: first beat of every w buffer of the projection GEMM: the weights of one K-slice of one output-channel block
WSLICE = (
    Field("packet_id", 0, 0, 5, "word 0 is the packet's routing word: packet id c * KERNELS + j for GEMM kernel j of "
                                "the c-th cascade on its w PLIO (c = 0 where a w PLIO serves one cascade); the kernel "
                                "checks it modulo KERNELS"),
    Field("op", 1, 0, 4, "5 (LOAD_W)"),
    Field("slice", 1, 8, 8, "K-slice index j"),
    Field("tiles", 1, 16, 16, "tiles that use these weights (>= 1): the kernel releases the buffer after that many"),
    Field("first_tile", 2, 0, 32, "tile id of the first of them (its tiles are first_tile .. first_tile + tiles - 1)"),
    Field("col_block", 3, 0, 16, "output-channel block: channels [col_block*COLS, (col_block+1)*COLS)"),
)

#: header of a GEMM output record (the last kernel of the cascade -> PL)
GRESULT = (
    Field("tile_id", 0, 0, 32, "the host's tile id"),
    Field("rows", 1, 0, 16, "valid rows"),
    Field("col_block", 2, 0, 16, "output-channel block of the record"),
    Field("elem_bits", 2, 16, 8, "8: requantized int8 (Q/K/V); 32: int32 accumulators + bias (Y of W_O)"),
    Field("cols", 3, 0, 16, "output channels of the record (COLS of the build)"),
)

#: second beat of a PL buffer reader's descriptor (the first is the header beat the reader sends): the run of
#: beats to send after it (``hw/pl/buffer_reader.py``, ``hw/ENGINE.md`` "The sublayer's PL side")
RDESC = (
    Field("first", 0, 0, 32, "address of the run's first beat in the buffer"),
    Field("beats", 1, 0, 16, "beats of the run (>= 1)"),
    Field("slot", 2, 0, 8, "the sequence slot the run reads: the reader waits until it is full"),
    Field("release", 2, 8, 1, "1: the reader's last run of the slot (it releases the slot once the run is sent)"),
    Field("turn", 2, 9, 1, "the sequence's turn in its slot, (b / slots) mod 2: the reader waits until the slot is "
                           "full with that turn's sequence, not with the one before it"),
    Field("quiet", 2, 10, 1, "1: send nothing (no header, no beats; beats must be 0): a release of a slot the reader "
                             "has no run of, once the slot is full in the turn"),
)

#: second beat of a list mover's command (``hw/hls/mm2s_list.cpp``; the first is the header beat it sends): the run of
#: source beats to send after the header. Words 0 and 1 are the payload's byte offset as one little-endian uint64, the
#: same bytes as the offset of the engine movers' descriptors
MDESC = (
    Field("offset_lo", 0, 0, 32, "byte offset of the payload in the source buffer, bits 31..0 (a whole beat: a "
                                 "multiple of 16)"),
    Field("offset_hi", 1, 0, 32, "byte offset of the payload in the source buffer, bits 63..32"),
    Field("beats", 2, 0, 32, "payload beats to send after the header (0: the header alone)"),
    Field("no_header", 3, 0, 1, "1: send the payload only, not the header beat (beats must then be >= 1)"),
    Field("more", 3, 1, 1, "1: no TLAST on the command's last beat: the next command's beats continue the same "
                           "packet (the weight mover's ROUTE beat, then a WSLICE header and its weights)"),
)

#: first beat of a routed packet (``hw/pl/stream_router.py``): the beats after it, up to and including the one
#: with TLAST, go to output ``dest``; the route beat itself goes nowhere
ROUTE = (
    Field("dest", 0, 0, 16, "the router's output the packet goes to"),
    Field("op", 1, 0, 4, "6 (ROUTE): a packet whose first beat is anything else is dropped and flagged"),
)

#: header beat of a site reader's run (``hw/pl/site_unit.py``): which 4 tokens of which sequence the run's beats are
#: of, so that the site unit writes its U rows where they belong
SITE = (
    Field("seq", 0, 0, 32, "sequence b of the launch"),
    Field("token", 1, 0, 16, "the run's first token (a multiple of 4): the run holds tokens token .. token + 3"),
    Field("slice", 1, 16, 8, "K-slice j of the X buffer the run reads (the unit takes the tokens' place from the run "
                             "of slice 0)"),
)

HEADERS = {"tile": TILE, "slice": SLICE, "packet": PACKET, "result": RESULT, "xtile": XTILE, "wslice": WSLICE,
           "gresult": GRESULT, "rdesc": RDESC, "mdesc": MDESC, "route": ROUTE, "site": SITE}


def _fields(kind: str) -> dict[str, Field]:
    return {f.name: f for f in HEADERS[kind]}


def field(kind: str, name: str) -> Field:
    """Field ``name`` of header ``kind`` (a key of :data:`HEADERS`)."""
    return _fields(kind)[name]


def int16_bits(value: int) -> int:
    """A signed 16-bit value as the unsigned 16-bit field that carries it (two's complement; ValueError outside
    int16): ``rq_mult`` of the SLICE header."""
    v = int(value)
    if not -(1 << 15) <= v < (1 << 15):
        raise ValueError(f"{v} does not fit a signed 16-bit field")
    return v & 0xFFFF


def int16_of(bits: int) -> int:
    """Inverse of :func:`int16_bits`."""
    b = int(bits) & 0xFFFF
    return b - (1 << 16) if b >= (1 << 15) else b


def encode(kind: str, **values: int) -> np.ndarray:
    """One header beat as 16 uint8 (little endian). Missing fields are 0; a value that does not fit raises."""
    fields = _fields(kind)
    words = [0, 0, 0, 0]
    for name, value in values.items():
        if name not in fields:
            raise ValueError(f"{kind} header has no field {name!r}")
        f = fields[name]
        v = int(value)
        if not 0 <= v <= f.max:
            raise ValueError(f"{kind} header field {name} = {v} does not fit {f.width} bits")
        words[f.word] |= v << f.lo
    return np.array(words, dtype="<u4").view(np.uint8)


def encode_many(kind: str, n: int, **values: np.ndarray | int) -> np.ndarray:
    """``n`` header beats ``(n, 16)`` uint8 at once (vectorized: arrays of length ``n`` or scalars)."""
    fields = _fields(kind)
    words = np.zeros((n, 4), dtype=np.uint64)
    for name, value in values.items():
        if name not in fields:
            raise ValueError(f"{kind} header has no field {name!r}")
        f = fields[name]
        v = np.broadcast_to(np.asarray(value, dtype=np.int64), (n,))
        if v.size and (int(v.min()) < 0 or int(v.max()) > f.max):
            raise ValueError(f"{kind} header field {name} out of range 0..{f.max}")
        words[:, f.word] |= v.astype(np.uint64) << np.uint64(f.lo)
    return words.astype("<u4").view(np.uint8).reshape(n, BEAT_BYTES)


def patch_many(kind: str, beats: np.ndarray, name: str, values: np.ndarray | int,
               where: np.ndarray | None = None) -> None:
    """Set field ``name`` of header beats in place: ``beats`` ``(n, 16)`` uint8 (a view into a larger array is
    fine as long as each row's 16 bytes are contiguous); ``values`` of length ``n`` or a scalar; ``where``: only
    the rows where this bool ``(n,)`` mask is True."""
    f = _fields(kind)[name]
    v = np.asarray(values, dtype=np.int64)
    if v.size and (int(v.min()) < 0 or int(v.max()) > f.max):
        raise ValueError(f"{kind} header field {name} out of range 0..{f.max}")
    words = beats.view("<u4")
    mask = np.uint32(~(f.max << f.lo) & 0xFFFFFFFF)
    new = (words[:, f.word] & mask) | (v.astype(np.uint32) << np.uint32(f.lo))
    words[:, f.word] = new if where is None else np.where(where, new, words[:, f.word])


def decode(kind: str, beat: np.ndarray) -> dict[str, int]:
    """The fields of one header beat (16 bytes)."""
    words = np.asarray(beat, dtype=np.uint8).reshape(BEAT_BYTES).view("<u4")
    return {f.name: (int(words[f.word]) >> f.lo) & f.max for f in HEADERS[kind]}


def decode_many(kind: str, beats: np.ndarray) -> dict[str, np.ndarray]:
    """Fields of ``(n, 16)`` uint8 header beats, each an int64 array of length ``n``."""
    words = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1, BEAT_BYTES).view("<u4").astype(np.int64)
    return {f.name: (words[:, f.word] >> f.lo) & f.max for f in HEADERS[kind]}


# ------------------------------------------------------------------------------------------- C++ header

GENERATED = Path(__file__).resolve().parents[1] / "aie" / "generated" / "engine_streams.h"
_BANNER = "// GENERATED by `make regen` from hw/spec/streams.py -- do not edit."


def render_header() -> str:
    """The C++ header: per header kind, ``constexpr`` word/shift/mask per field and get/put helpers."""
    lines = [_BANNER, "// Stream contract v3 of the scalable engine (hw/ENGINE.md): header words of one 128-bit beat.",
             "#ifndef VCKATTN_ENGINE_STREAMS_H", "#define VCKATTN_ENGINE_STREAMS_H", "", "#include <cstdint>", "",
             "namespace vckattn_engine {", "", f"constexpr int BEAT_BYTES = {BEAT_BYTES};"]
    for name, code in OPS.items():
        lines.append(f"constexpr uint32_t OP_{name} = {code};")
    lines.append("")
    for kind, fields in HEADERS.items():
        lines.append(f"// {kind} header")
        for f in fields:
            p = f"{kind.upper()}_{f.name.upper()}"
            lines.append(f"constexpr int {p}_WORD = {f.word};  // {f.doc}")
            lines.append(f"constexpr int {p}_LO = {f.lo};")
            lines.append(f"constexpr uint32_t {p}_MASK = 0x{f.max:X}u;")
        lines.append("")
    lines += [
        "// Field value from the four header words.",
        "inline uint32_t get_field(const uint32_t* w, int word, int lo, uint32_t mask) {",
        "    return (w[word] >> lo) & mask;",
        "}",
        "// Sets a field (value must fit its mask).",
        "inline void put_field(uint32_t* w, int word, int lo, uint32_t mask, uint32_t value) {",
        "    w[word] = (w[word] & ~(mask << lo)) | ((value & mask) << lo);",
        "}",
        "#define VCKATTN_GET(w, F) ::vckattn_engine::get_field((w), F##_WORD, F##_LO, F##_MASK)",
        "#define VCKATTN_PUT(w, F, v) ::vckattn_engine::put_field((w), F##_WORD, F##_LO, F##_MASK, (v))",
        "", "}  // namespace vckattn_engine", "", "#endif", ""]
    return "\n".join(lines)

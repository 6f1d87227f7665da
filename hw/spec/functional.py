"""Build parameters, memory and the functional model of the engine (stream contract v3, ``hw/ENGINE.md``).

The full description: ``docs/internals/hw.md``, section ``hw/spec/functional.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vckattn.golden.aie_matmul import exact_int_matmul
from vckattn.golden.engine import (
    MAX_RQ_SHIFT,
    engine_format,
    engine_online_p,
    engine_p,
    engine_scores,
    pack_scores,
    slice_keys,
    tile_keep,
    unpack_k,
    unpack_q,
    unpack_scores,
    unpack_v,
)
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat, OnlineSoftmaxRegisters
from vckattn.golden.requant import RequantRegisters, requantize
from vckattn.golden.swiftmax_int import SwiftMaxFormat, SwiftMaxHeads, SwiftMaxRegisters
from vckattn.hw.spec import streams

MAX_SCORE_SHIFT = 40
#: the kernels compare key indices as int16 lanes (the mask): MAX_KEYS + Q_ROWS must stay below 2^15
MASK_INDEX_LIMIT = (1 << 15) - 1


#: QKᵀ (and P·V) kernels a pipeline can have: its V slices' packet ids k + j have 5 bits
MAX_KERNELS = 16
#: tiles whose score slices the online-softmax channel gathers at once (its two tile buffers)
ONLINE_TILES = 2
#: online-softmax lanes a channel can have (``hw/pl/engine_online.py``: a beat of lanes within an 8-key block row)
ONLINE_LANES = (1, 2, 4, 8)


@dataclass(frozen=True)
class EngineParams:
    """Build parameters of an engine (``hw/ENGINE.md`` "Build parameters"): ``pipelines`` identical pipelines of
    ``kernels`` QKᵀ and ``kernels`` P·V AIE kernels and ``score_plios`` score channels (``m``, divides ``k``);
    tiles of ``q_rows`` query rows (multiple of 4); head size ``d`` the kernels compute (``D``, multiple of 16);
    ``max_keys`` keys of every group (``MAX_KEYS``, multiple of ``16·k``: slices of ``SK = MAX_KEYS / k`` keys);
    ``score_bits``-bit scores; ``lanes`` SwiftMax lanes per score channel (PL only); ``online_lanes`` the lanes of
    each channel's online-softmax unit (PL only; 0: the build normalizes with SwiftMax only, else with either, chosen
    per layer; online softmax needs a tile's whole rows on one channel, ``score_plios = 1``)."""

    pipelines: int
    kernels: int
    score_plios: int = 1
    q_rows: int = 32
    d: int = 64
    max_keys: int = 512
    score_bits: int = 8
    lanes: int = 8
    online_lanes: int = 0

    def __post_init__(self) -> None:
        if self.pipelines < 1:
            raise ValueError(f"pipelines must be >= 1, got {self.pipelines}")
        if not 1 <= self.kernels <= MAX_KERNELS:
            raise ValueError(f"kernels must be 1..{MAX_KERNELS} (the V slices' packet ids k + j have 5 bits), got "
                             f"{self.kernels}")
        if self.score_plios < 1 or self.kernels % self.score_plios:
            raise ValueError(f"score_plios ({self.score_plios}) must divide kernels ({self.kernels})")
        if self.q_rows < 4 or self.q_rows % 4:
            raise ValueError(f"q_rows must be a positive multiple of 4, got {self.q_rows}")
        if self.d < 16 or self.d % 16 or self.d > 0xFFFF:
            raise ValueError(f"d must be a positive multiple of 16, got {self.d}")
        slice_keys(self.max_keys, self.kernels)  # ValueError unless a multiple of 16·k
        if self.max_keys + self.q_rows > MASK_INDEX_LIMIT:
            raise ValueError(f"max_keys + q_rows must stay below {MASK_INDEX_LIMIT + 1} (int16 mask lanes), got "
                             f"{self.max_keys} + {self.q_rows}")
        if self.q_rows * self.slice_keys > 0xFFFF:
            raise ValueError(f"q_rows x SK = {self.q_rows * self.slice_keys} does not fit the packet's 16-bit count")
        if self.score_bits not in (8, 16):
            raise ValueError(f"score_bits must be 8 or 16, got {self.score_bits}")
        if self.lanes not in (1, 2, 4, 8, 16) or self.lanes > 128 // self.score_bits:
            raise ValueError(f"lanes must be 1, 2, 4, 8 or 16 and at most {128 // self.score_bits}, got {self.lanes}")
        if self.online_lanes not in (0, *ONLINE_LANES):
            raise ValueError(f"online_lanes must be 0 or one of {ONLINE_LANES}, got {self.online_lanes}")
        if self.online_lanes and self.score_plios != 1:
            raise ValueError(f"online softmax needs a tile's whole rows on one score channel: score_plios must be 1, "
                             f"got {self.score_plios}")

    @property
    def normalizers(self) -> tuple[str, ...]:
        """The normalizers the build carries (names of :data:`vckattn.golden.engine.ENGINE_NORMALIZERS`)."""
        return ("swiftmax", "online_softmax") if self.online_lanes else ("swiftmax",)

    @property
    def slice_keys(self) -> int:
        """``SK = MAX_KEYS / k``: keys of each kernel's slice."""
        return self.max_keys // self.kernels

    @property
    def per_channel(self) -> int:
        """``k / m``: QKᵀ (and P·V) kernels per score channel."""
        return self.kernels // self.score_plios

    @property
    def channels(self) -> int:
        """Score channels of the engine (``P·m``): one PL SwiftMax instance each."""
        return self.pipelines * self.score_plios

    def channel_of(self, j: int) -> int:
        """The score channel (within its pipeline) of kernel ``j``: ``j / (k/m)``."""
        return j // self.per_channel

    def defines(self) -> tuple[str, ...]:
        """The kernels' build parameters as ``-D`` flags (what a design's ``engine_config.h`` defines)."""
        return tuple(f"-D{k}={v}" for k, v in self.macros().items())

    def macros(self) -> dict[str, int]:
        """``VCKATTN_ENGINE_*`` macro -> value: the AIE kernels' and PL movers' build parameters; a build with both
        normalizers also ``VCKATTN_ENGINE_ONLINE_LANES`` (its online-softmax channel's lanes, a parameter of the PL
        top's Amaranth)."""
        out = {"VCKATTN_ENGINE_KERNELS": self.kernels, "VCKATTN_ENGINE_SCORE_PLIOS": self.score_plios,
               "VCKATTN_ENGINE_Q_ROWS": self.q_rows, "VCKATTN_ENGINE_D": self.d,
               "VCKATTN_ENGINE_MAX_KEYS": self.max_keys, "VCKATTN_ENGINE_SCORE_BITS": self.score_bits}
        if self.online_lanes:
            out["VCKATTN_ENGINE_ONLINE_LANES"] = self.online_lanes
        return out


# ---------------------------------------------------------------------------------------------- memory


def buffer_bytes(p: EngineParams) -> dict[str, int]:
    """Bytes of one half of each kernel buffer (``hw/ENGINE.md``): q ``16 + Q_ROWS·D``; k and v ``16 + SK·D``; s
    ``16 + Q_ROWS·SK·SCORE_BITS/8``; p ``16 + Q_ROWS·SK``; o ``16 + Q_ROWS·D`` (the A record, int8)."""
    sk, h = p.slice_keys, streams.BEAT_BYTES
    return {"q": h + p.q_rows * p.d, "k": h + sk * p.d, "s": h + p.q_rows * sk * p.score_bits // 8,
            "p": h + p.q_rows * sk, "v": h + sk * p.d, "o": h + p.q_rows * p.d}


def _struct_size(fields: list[tuple[int, int]]) -> int:
    """sizeof of a C struct of ``(alignment, bytes)`` members in order (struct alignment = the largest)."""
    off = 0
    for align, size in fields:
        off = -(-off // align) * align + size
    top = max(a for a, _ in fields)
    return -(-off // top) * top


def state_bytes(p: EngineParams) -> dict[str, int]:
    """Bytes of the kernels' persistent state (``hw/aie/engine/engine_kernels.h``): ``qk`` = ``sizeof(QkState)``
    (the mask's per-row-block key limits, 32 int16 each, and the held K slice's tile range), ``pv`` =
    ``sizeof(PvState)`` (one cascade word of int32, the held V slice's tile range and its rq_mult, rq_shift),
    ``rq`` = ``sizeof(RqState)`` (the cascade header word), ``tables`` = ``sizeof(MaskTables)`` (the mask's two
    constant int16 lane patterns)."""
    qk = _struct_size([(32, p.q_rows // 4 * 32 * 2), (4, 4), (4, 4), (4, 4)])
    pv = _struct_size([(32, 8 * 4), (4, 4), (4, 4), (4, 4), (4, 4), (4, 4)])
    return {"qk": qk, "pv": pv, "rq": _struct_size([(32, 8 * 4)]), "tables": _struct_size([(32, 32 * 2), (32, 32 * 2)])}


def kernel_memory(p: EngineParams) -> dict[str, int]:
    """Data memory (bytes) of one kernel of each variant: its buffers ping-pong (2 × :func:`buffer_bytes`) plus its
    state (:func:`state_bytes`). ``qk``: q, k, s; ``pv_first`` / ``pv_mid``: p, v (partial O leaves on the
    cascade); ``rq`` (the requantizer): o. Stack and runtime reserve are not included."""
    b, st = buffer_bytes(p), state_bytes(p)
    pv = 2 * (b["p"] + b["v"]) + st["pv"]
    return {"qk": 2 * (b["q"] + b["k"] + b["s"]) + st["qk"] + st["tables"], "pv_first": pv, "pv_mid": pv,
            "rq": 2 * b["o"] + st["rq"]}


def workspace_bytes(p: EngineParams) -> dict[str, int]:
    """The data memory of a QKᵀ kernel, a P·V kernel and the requantizer of the build (:func:`kernel_memory`):
    ``{"qk_slice": ..., "pv_slice": ..., "o_requant": ...}``."""
    m = kernel_memory(p)
    return {"qk_slice": m["qk"], "pv_slice": m["pv_first"], "o_requant": m["rq"]}


# ---------------------------------------------------------------------------------------------- streams


class EngineStreamError(RuntimeError):
    """A stream the kernels would reject (bad header, payload cut short, misrouted packet or slice)."""


@dataclass
class Packet:
    """One score or P packet: its header fields and its payload ``(Q_ROWS, SK)`` (int64 values, logical order;
    on the stream the payload is in the 4×8 block layout, :func:`vckattn.golden.engine.pack_scores`)."""

    header: dict[str, int]
    values: np.ndarray

    def beats(self, signed: bool) -> np.ndarray:
        """The packet as 128-bit beats ``(n, 16)`` uint8: header beat then the payload, ``elem_bits`` each
        (``signed``: scores, int8/int16; else P, uint8), in the block layout."""
        bits = self.header["elem_bits"]
        dt = ("<i1" if bits == 8 else "<i2") if signed else ("<u1" if bits == 8 else "<u2")
        payload = pack_scores(self.values).astype(dt).view(np.uint8)
        return np.concatenate([streams.encode("packet", **self.header), payload]).reshape(-1, streams.BEAT_BYTES)


def parse_packets(beats: np.ndarray, q_rows: int, signed: bool, where: str) -> list[Packet]:
    """Packets from a stream of 128-bit beats ``(n, 16)`` uint8 (``signed``: int8/int16 elements; else uint8),
    payloads unpacked from the block layout."""
    flat = np.asarray(beats, np.uint8).reshape(-1)
    out, pos = [], 0
    while pos < len(flat):
        if pos + 16 > len(flat):
            raise EngineStreamError(f"{where}: packet header cut short at byte {pos}")
        h = streams.decode("packet", flat[pos:pos + 16])
        pos += 16
        bits = h["elem_bits"]
        if bits not in (8, 16):
            raise EngineStreamError(f"{where}: packet of tile {h['tile_id']}: {bits}-bit elements")
        size = h["count"] * bits // 8
        if pos + size > len(flat) or h["count"] % (8 * q_rows):
            raise EngineStreamError(f"{where}: packet of tile {h['tile_id']}: payload cut short or not whole blocks")
        dt = ("<i1" if bits == 8 else "<i2") if signed else ("<u1" if bits == 8 else "<u2")
        vals = flat[pos:pos + size].view(dt).astype(np.int64)
        out.append(Packet(h, unpack_scores(vals, q_rows, h["count"] // q_rows)))
        pos += size
    return out


def q_tiles(p: EngineParams, q_in: np.ndarray, where: str = "q_in") -> list[tuple[dict[str, int], np.ndarray]]:
    """The tiles of a q_in stream (q buffers back to back): ``(TILE header fields, Q (Q_ROWS, D) int8)``, each
    checked as the QKᵀ kernels check it."""
    buf = np.asarray(q_in, np.uint8).reshape(-1)
    size = buffer_bytes(p)["q"]
    if len(buf) % size:
        raise EngineStreamError(f"{where}: {len(buf)} bytes are not whole q buffers of {size} bytes")
    out = []
    for at in range(0, len(buf), size):
        h = streams.decode("tile", buf[at:at + 16])
        if h["op"] != streams.OP_TILE:
            raise EngineStreamError(f"{where}: q buffer at byte {at}: op {h['op']} is not TILE")
        if h["rows"] > p.q_rows or h["valid_keys"] > p.max_keys or h["score_shift"] > MAX_SCORE_SHIFT:
            raise EngineStreamError(f"{where}: tile {h['tag']}: rows {h['rows']} > {p.q_rows}, valid_keys "
                                    f"{h['valid_keys']} > {p.max_keys} or score_shift {h['score_shift']} > "
                                    f"{MAX_SCORE_SHIFT}")
        out.append((h, unpack_q(buf[at + 16:at + size].view(np.int8), p.q_rows, p.d)))
    return out


def kv_slices(p: EngineParams, kv_in: np.ndarray, where: str = "kv_in") -> list[list[tuple[dict[str, int],
                                                                                           np.ndarray]]]:
    """The ``pktsplit<k>`` of k_in and of v_in, on a kv stream: per packet id (``j``: K of QKᵀ kernel ``j``, ``k + j``:
    V of P·V kernel ``j``) its slices in order, ``(SLICE header fields, K or V (SK, D) int8)``, each checked (a V
    slice's ``rq_shift`` too)."""
    buf = np.asarray(kv_in, np.uint8).reshape(-1)
    size = buffer_bytes(p)["k"]
    k, sk = p.kernels, p.slice_keys
    out: list[list[tuple[dict[str, int], np.ndarray]]] = [[] for _ in range(2 * k)]
    if len(buf) % size:
        raise EngineStreamError(f"{where}: {len(buf)} bytes are not whole k/v buffers of {size} bytes")
    for at in range(0, len(buf), size):
        h = streams.decode("slice", buf[at:at + 16])
        pid = h["packet_id"]
        if pid >= 2 * k:
            raise EngineStreamError(f"{where}: slice at byte {at}: packet id {pid} routes nowhere (2k = {2 * k})")
        want = streams.OP_LOAD_K if pid < k else streams.OP_LOAD_V
        if h["op"] != want or h["slice"] != pid % k or h["tiles"] < 1:
            raise EngineStreamError(f"{where}: slice at byte {at} (packet id {pid}): op {h['op']}, slice "
                                    f"{h['slice']}, tiles {h['tiles']} (the kernel expects op {want}, slice "
                                    f"{pid % k}, tiles >= 1)")
        if pid >= k and h["rq_shift"] > MAX_RQ_SHIFT:
            raise EngineStreamError(f"{where}: V slice at byte {at} (packet id {pid}): rq_shift {h['rq_shift']} > "
                                    f"{MAX_RQ_SHIFT}")
        payload = buf[at + 16:at + size].view(np.int8)
        out[pid].append((h, (unpack_k if pid < k else unpack_v)(payload, sk, p.d)))
    return out


def qk_stage(p: EngineParams, q_in: np.ndarray, kv_in: np.ndarray, where: str = "") -> list[list[Packet]]:
    """The QKᵀ kernels of one pipeline: per kernel ``j`` its score packets in order (one per tile). Kernel ``j``
    holds a K slice for the ``tiles`` tiles its SLICE header announces and checks each tile id against them."""
    tiles = q_tiles(p, q_in, f"{where}q_in")
    slices = kv_slices(p, kv_in, f"{where}kv_in")
    sk = p.slice_keys
    out: list[list[Packet]] = [[] for _ in range(p.kernels)]
    for j in range(p.kernels):
        queue, nxt, left, cur = slices[j], 0, 0, None
        for h, q in tiles:
            if left == 0:
                if nxt >= len(queue):
                    raise EngineStreamError(f"{where}qk{j}: tile {h['tag']} has no K slice (none left)")
                cur, nxt = queue[nxt], nxt + 1
                left = cur[0]["tiles"]
            first = cur[0]["first_tile"]
            if not first <= h["tag"] < first + cur[0]["tiles"]:
                raise EngineStreamError(f"{where}qk{j}: tile {h['tag']} is not one of the K slice's tiles "
                                        f"{first}..{first + cur[0]['tiles'] - 1} (misrouted)")
            acc = exact_int_matmul(q, np.ascontiguousarray(cur[1].T))
            keep = tile_keep(p.q_rows, sk, h["rows"], h["q0"], h["valid_keys"], bool(h["causal"]), key0=j * sk)
            s = engine_scores(acc, keep, h["score_shift"], p.score_bits)
            out[j].append(Packet({"packet_id": j % p.per_channel, "tile_id": h["tag"], "slice": j,
                                  "elem_bits": p.score_bits, "rows": h["rows"], "count": p.q_rows * sk,
                                  "head": h["head"]}, s))
            left -= 1
        if nxt < len(queue):
            raise EngineStreamError(f"{where}qk{j}: {len(queue) - nxt} K slices left over")
    return out


def merge(per_kernel: list[list[Packet]], rng: np.random.Generator | None = None,
          ahead: int | None = None) -> list[Packet]:
    """``pktmerge``: whole packets of the kernels interleaved (each kernel's order kept); ``rng`` None =
    round-robin, else a random interleaving. ``ahead``: a kernel sends its packet ``n`` only once every kernel has
    sent ``n − ahead`` (no kernel more than ``ahead`` tiles ahead of the slowest; None: unbounded)."""
    queues = [list(q) for q in per_kernel]
    pos = [0] * len(queues)
    out: list[Packet] = []
    while True:
        low = min(pos, default=0)
        live = [j for j, q in enumerate(queues) if pos[j] < len(q) and (ahead is None or pos[j] <= low + ahead)]
        if not live:
            return out
        for j in (live if rng is None else [int(rng.choice(live))]):
            out.append(queues[j][pos[j]])
            pos[j] += 1


def channel_packets(p: EngineParams, per_kernel: list[list[Packet]], c: int,
                    rng: np.random.Generator | None = None, ahead: int | None = None) -> list[Packet]:
    """The score packets on score channel ``c`` of a pipeline: its kernels ``c·(k/m) .. (c+1)·(k/m) − 1`` merged
    (:func:`merge`, ``ahead`` as there; with ``k/m = 1`` the kernel's packets as they are)."""
    n = p.per_channel
    return merge(per_kernel[c * n:(c + 1) * n], rng, ahead)


def pl_stage(packets: list[Packet], regs: SwiftMaxRegisters | SwiftMaxHeads, bits: int,
             fmt: SwiftMaxFormat | None = None) -> list[Packet]:
    """The PL SwiftMax on a channel's score packets: P packets, headers kept (``elem_bits`` = 8); each packet's
    scores use the register set of its header's ``head``."""
    f = fmt or engine_format(bits)
    if isinstance(regs, SwiftMaxHeads):
        bad = [pk.header["tile_id"] for pk in packets if pk.header.get("head", 0) >= regs.n_heads]
        if bad:
            raise EngineStreamError(f"packet of tile {bad[0]}: head beyond the layer's {regs.n_heads} register sets")
    return [Packet(pk.header | {"elem_bits": 8}, engine_p(pk.values, regs, bits, f, head=pk.header.get("head", 0)))
            for pk in packets]


def online_stage(p: EngineParams, packets: list[Packet], regs: OnlineSoftmaxRegisters,
                 fmt: OnlineSoftmaxFormat, where: str = "") -> list[Packet]:
    """The PL online softmax on a pipeline's one score channel (``m = 1``): each tile's ``k`` score packets (any
    order, packets of at most :data:`ONLINE_TILES` tiles in flight) gathered into rows of ``MAX_KEYS`` keys,
    :func:`~vckattn.golden.engine.engine_online_p`, then the tile's P packets in slice order ``j = 0 .. k−1`` (each
    with its score packet's header, ``elem_bits`` 8) once its last slice is in. Raises EngineStreamError for a
    packet the unit refuses (slice ``>= k``, a count other than ``Q_ROWS·SK``, a slice twice, a third tile in
    flight) and for tiles left incomplete."""
    if p.score_plios != 1:
        raise EngineStreamError(f"{where}online softmax needs the whole row on one score channel (score_plios 1, "
                                f"the build has {p.score_plios})")
    k, want = p.kernels, p.q_rows * p.slice_keys
    open_tiles: dict[int, dict[int, Packet]] = {}
    out: list[Packet] = []
    for pk in packets:
        h = pk.header
        t, j = h["tile_id"], h["slice"]
        if j >= k or h["count"] != want:
            raise EngineStreamError(f"{where}online softmax: packet of tile {t}: slice {j}, {h['count']} scores "
                                    f"(want slice < {k}, {want} scores)")
        got = open_tiles.setdefault(t, {})
        if len(open_tiles) > ONLINE_TILES:
            raise EngineStreamError(f"{where}online softmax: tile {t} is a third tile in flight (the unit gathers "
                                    f"{ONLINE_TILES})")
        if j in got:
            raise EngineStreamError(f"{where}online softmax: tile {t}: slice {j} twice")
        got[j] = pk
        if len(got) == k:
            del open_tiles[t]
            s = np.stack([got[i].values for i in range(k)])
            pv = engine_online_p(s, regs, p.score_bits, fmt)
            out += [Packet(got[i].header | {"elem_bits": 8}, pv[i]) for i in range(k)]
    if open_tiles:
        t = next(iter(open_tiles))
        raise EngineStreamError(f"{where}online softmax: tile {t} has {len(open_tiles[t])} of {k} slices")
    return out


def split_channel(p: EngineParams, c: int, packets: list[Packet], where: str = "") -> list[list[Packet]]:
    """``pktsplit<k/m>`` of score channel ``c``: the P packets of each of its kernels (index within the channel =
    packet id), in order."""
    out: list[list[Packet]] = [[] for _ in range(p.per_channel)]
    for pk in packets:
        pid = pk.header["packet_id"]
        if pid >= p.per_channel:
            raise EngineStreamError(f"{where}channel {c}: P packet id {pid} routes nowhere ({p.per_channel} kernels)")
        out[pid].append(pk)
    return out


def slice_requant(header: dict[str, int]) -> RequantRegisters:
    """The output requantization a V slice's SLICE header carries: ``rq_mult`` (the int16 of its 16-bit field),
    ``rq_shift``."""
    return RequantRegisters(np.int64(streams.int16_of(header["rq_mult"])), np.int64(header["rq_shift"]))


def pv_stage(p: EngineParams, pipeline: int, kv_in: np.ndarray, p_packets: list[list[Packet]], a: np.ndarray,
             where: str = "") -> np.ndarray:
    """The P·V kernels, the cascade and the output mover of one pipeline. ``p_packets[j]``: the P packets kernel
    ``j`` receives, in order. Per tile, kernel ``j`` takes its next P packet and checks it (slice ``j``, 8-bit,
    ``Q_ROWS·SK`` elements, the tile of the cascade, a tile of its V slice's group); partial O summed along the
    cascade; the requantizer at its end requantizes O with the ``rq_mult`` / ``rq_shift`` of kernel 0's V slice
    (which kernel 0 puts into the cascade's header word; :func:`slice_requant`, golden ``requantize``) into the A
    record, which the mover writes into ``a[tile_id]``. Returns the ``done`` log ``(tiles, 16)``."""
    slices = kv_slices(p, kv_in, f"{where}kv_in")
    k, sk = p.kernels, p.slice_keys
    if len(p_packets) != k:
        raise ValueError(f"need P packets for {k} kernels, got {len(p_packets)}")
    nxt = [0] * k
    held: list[tuple[dict[str, int], np.ndarray] | None] = [None] * k
    nxt_v, left = [0] * k, [0] * k
    done = []
    for _ in range(len(p_packets[0])):
        o = np.zeros((p.q_rows, p.d), np.int64)
        tile = rows = rq = None
        for j in range(k):
            if nxt[j] >= len(p_packets[j]):
                raise EngineStreamError(f"{where}pv{j}: waits for a P packet that never comes (tile {tile})")
            pk = p_packets[j][nxt[j]]
            nxt[j] += 1
            h = pk.header
            if h["slice"] != j:
                raise EngineStreamError(f"{where}pv{j}: got the P packet of slice {h['slice']} (misrouted)")
            if h["elem_bits"] != 8 or h["count"] != p.q_rows * sk:
                raise EngineStreamError(f"{where}pv{j}: P packet of tile {h['tile_id']}: {h['elem_bits']}-bit, "
                                        f"{h['count']} elements (want 8-bit, {p.q_rows * sk})")
            if left[j] == 0:
                queue = slices[k + j]
                if nxt_v[j] >= len(queue):
                    raise EngineStreamError(f"{where}pv{j}: tile {h['tile_id']} has no V slice (none left)")
                held[j], nxt_v[j] = queue[nxt_v[j]], nxt_v[j] + 1
                left[j] = held[j][0]["tiles"]
            vh, v = held[j]
            if tile is not None and (h["tile_id"], h["rows"]) != (tile, rows):
                raise EngineStreamError(f"{where}pv{j}: got the P packet of tile {h['tile_id']} while the cascade "
                                        f"carries tile {tile} (misrouted)")
            if not vh["first_tile"] <= h["tile_id"] < vh["first_tile"] + vh["tiles"]:
                raise EngineStreamError(f"{where}pv{j}: tile {h['tile_id']} is not one of the V slice's tiles "
                                        f"{vh['first_tile']}..{vh['first_tile'] + vh['tiles'] - 1} (misrouted)")
            tile, rows = h["tile_id"], h["rows"]
            if j == 0:
                rq = vh
            o += exact_int_matmul(pk.values, v.astype(np.int64))
            left[j] -= 1
        if tile >= len(a):
            raise EngineStreamError(f"{where}: tile id {tile} outside the A buffer ({len(a)} slots)")
        a[tile] = requantize(o, slice_requant(rq)).astype(np.int8)  # kernel 0's V slice, along the cascade
        done.append(streams.encode("result", tile_id=tile, rows=rows, pipeline=pipeline, d=p.d))
    extra = [len(q) - n for q, n in zip(p_packets, nxt, strict=True)]
    if any(extra):
        raise EngineStreamError(f"{where}P packets left over per kernel: {extra}")
    extra_v = [len(slices[k + j]) - nxt_v[j] for j in range(k)]
    if any(extra_v):
        raise EngineStreamError(f"{where}V slices left over per kernel: {extra_v}")
    return np.array(done, np.uint8).reshape(-1, streams.BEAT_BYTES)


def run_pipeline_model(p: EngineParams, pipeline: int, q_in: np.ndarray, kv_in: np.ndarray, a: np.ndarray,
                       regs: SwiftMaxRegisters | SwiftMaxHeads | OnlineSoftmaxRegisters,
                       fmt: SwiftMaxFormat | OnlineSoftmaxFormat | None = None,
                       rng: np.random.Generator | None = None) -> np.ndarray:
    """One pipeline of a launch (writes its tiles into ``a``); returns its done log. The layer's normalizer is the
    kind of ``regs``: SwiftMax registers (``fmt`` a :class:`SwiftMaxFormat` or None), or online-softmax registers
    (``fmt`` the build's :class:`OnlineSoftmaxFormat`, :func:`~vckattn.golden.engine.engine_online_format`; the
    channel's kernels then run at most one tile apart, as the broadcast Q keeps them)."""
    where = f"pipeline {pipeline} "
    scores = qk_stage(p, q_in, kv_in, where)
    per_kernel: list[list[Packet]] = []
    online = isinstance(regs, OnlineSoftmaxRegisters)
    if online and not isinstance(fmt, OnlineSoftmaxFormat):
        raise ValueError("online-softmax registers need the build's OnlineSoftmaxFormat")
    for c in range(p.score_plios):
        if online:
            pp = online_stage(p, channel_packets(p, scores, c, rng, ahead=ONLINE_TILES - 1), regs, fmt, where)
        else:
            pp = pl_stage(channel_packets(p, scores, c, rng), regs, p.score_bits, fmt)  # type: ignore[arg-type]
        per_kernel += split_channel(p, c, pp, where)
    return pv_stage(p, pipeline, kv_in, per_kernel, a, where)


def run_launch_model(p: EngineParams, q_in: list[np.ndarray], kv_in: list[np.ndarray], n_tiles: int,
                     regs: SwiftMaxRegisters | SwiftMaxHeads | OnlineSoftmaxRegisters,
                     fmt: SwiftMaxFormat | OnlineSoftmaxFormat | None = None,
                     seed: int | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """One launch: the A buffer ``(n_tiles, Q_ROWS, D)`` int8 and each pipeline's done log (module docstring). The
    output requantization comes with the streams (the LOAD_V SLICE headers). The layer's normalizer is the kind of
    ``regs`` (:func:`run_pipeline_model`).
    ``seed``: merge the score packets of a channel in a random order (None: round-robin) — the result must not
    depend on it."""
    if not len(q_in) == len(kv_in) == p.pipelines:
        raise ValueError(f"need {p.pipelines} q_in and kv_in streams, got {len(q_in)}, {len(kv_in)}")
    rng = None if seed is None else np.random.default_rng(seed)
    a = np.zeros((n_tiles, p.q_rows, p.d), np.int8)
    done = [run_pipeline_model(p, i, q_in[i], kv_in[i], a, regs, fmt, rng) for i in range(p.pipelines)]
    return a, done


__all__ = ["EngineParams", "EngineStreamError", "MASK_INDEX_LIMIT", "MAX_SCORE_SHIFT", "ONLINE_LANES", "ONLINE_TILES",
           "Packet",
           "buffer_bytes", "channel_packets", "kernel_memory", "kv_slices", "merge", "online_stage", "parse_packets",
           "pl_stage", "pv_stage",
           "q_tiles", "qk_stage", "run_launch_model", "run_pipeline_model", "slice_requant", "split_channel",
           "state_bytes", "workspace_bytes"]

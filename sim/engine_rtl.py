"""The engine's PL top (:class:`vckattn.hw.pl.engine.EnginePL`) as a host would run it: one Verilator run.

Streams are uint8 beats ``(n, 16)`` (stream contract v3, ``hw/ENGINE.md``): a score channel's stream is
its packets back to back (header beat from :data:`vckattn.hw.spec.streams.PACKET`, then
``ceil(count / (128 / score_bits))`` beats of little-endian signed scores, in whatever order the AIE wrote them:
the PL is element-wise), its P stream the same packets as the PL writes them (header with ``elem_bits = 8``,
``ceil(count / 16)`` beats of uint8 P). The PL top has one channel per score channel of the engine (``P·m``).

* :func:`score_packet` builds one score packet; :func:`split_packets` frames a stream by the headers'
  ``count``; :func:`engine_pl_reference` is the golden P stream (:func:`vckattn.golden.engine.engine_p`
  per packet with the register set of the header's ``head``; padding of a short last beat is 0).
* :func:`run_engine_rtl` writes a job (npz), runs ``vckattn.sim.tb_engine_host`` on the generated
  Verilog (build cached in ``build/sim/<top>/verilator``) and reads the P streams and the cycle count
  back; the ID register is checked against ``ident`` (:class:`EngineRtlError` on a mismatch).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vckattn.golden.engine import engine_format, engine_p
from vckattn.golden.swiftmax_int import SwiftMaxHeads, SwiftMaxRegisters, swiftmax_regmap
from vckattn.hw.spec.streams import BEAT_BYTES, decode, encode, field

__all__ = ["EngineRtlError", "EngineRtlResult", "as_heads", "engine_pl_reference", "engine_reg_writes",
           "engine_top_name", "p_header", "pack_scores", "run_engine_rtl", "score_packet", "split_packets",
           "unpack_scores"]

_ELEM_BITS = field("packet", "elem_bits")


class EngineRtlError(RuntimeError):
    """The RTL run failed, or the design's ID register is not the expected one."""


@dataclass(frozen=True)
class EngineRtlResult:
    """Outcome of :func:`run_engine_rtl`.

    Attributes:
        p: Per channel, its P stream as received: uint8 ``(m, 16)`` beats.
        cycles: PL cycles from the first input beat (any channel) to the last output beat, both counted.
        ident: The ID register as read.
    """

    p: list[np.ndarray]
    cycles: int
    ident: int


def _dtype(score_bits: int) -> str:
    if score_bits not in (8, 16):
        raise ValueError(f"score_bits must be 8 or 16, got {score_bits}")
    return "<i1" if score_bits == 8 else "<i2"


def pack_scores(scores: np.ndarray, score_bits: int, pad: int = 0) -> np.ndarray:
    """Signed ``score_bits``-bit scores -> uint8 beats ``(ceil(n / E), 16)``, ``E = 128 / score_bits``; the
    last beat is filled with ``pad`` (any value; the PL ignores it)."""
    s = np.asarray(scores, dtype=np.int64).reshape(-1)
    lo, hi = -(1 << (score_bits - 1)), (1 << (score_bits - 1)) - 1
    if s.size and (s.min() < lo or s.max() > hi):
        raise ValueError(f"scores outside {score_bits}-bit range")
    per = 8 * BEAT_BYTES // score_bits
    n = -(-s.size // per)
    full = np.full(n * per, pad, dtype=np.int64)
    full[:s.size] = s
    return full.astype(_dtype(score_bits)).view(np.uint8).reshape(n, BEAT_BYTES)


def unpack_scores(beats: np.ndarray, count: int, score_bits: int) -> np.ndarray:
    """Inverse of :func:`pack_scores`: the first ``count`` scores (int64)."""
    flat = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1)
    return flat.view(_dtype(score_bits))[:count].astype(np.int64)


def score_packet(scores: np.ndarray, score_bits: int, *, packet_id: int = 0, tile_id: int = 0, slice: int = 0,
                 rows: int = 0, pad: int = 0, extra_bits: int = 0, head: int = 0) -> np.ndarray:
    """One score packet: header beat (``elem_bits = score_bits``, ``count = len(scores)``, ``head``: the
    register set of its scores) and payload.

    ``extra_bits`` is OR-ed into header word 0 above ``packet_id`` (bits the PL must pass unchanged)."""
    s = np.asarray(scores, dtype=np.int64).reshape(-1)
    hdr = encode("packet", packet_id=packet_id, tile_id=tile_id, slice=slice, elem_bits=score_bits, rows=rows,
                 count=s.size, head=head)
    if extra_bits:
        pid = field("packet", "packet_id")
        w = hdr.view("<u4").copy()
        w[0] |= np.uint32((int(extra_bits) << (pid.lo + pid.width)) & 0xFFFFFFFF)
        hdr = w.view(np.uint8)
    return np.concatenate([hdr.reshape(1, BEAT_BYTES), pack_scores(s, score_bits, pad)])


def split_packets(beats: np.ndarray, score_bits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """A score stream -> ``[(header beat, payload beats)]``, framed by each header's ``count``."""
    beats = np.asarray(beats, dtype=np.uint8).reshape(-1, BEAT_BYTES)
    per = 8 * BEAT_BYTES // score_bits
    out, i = [], 0
    while i < len(beats):
        count = decode("packet", beats[i])["count"]
        n = -(-count // per)
        if i + 1 + n > len(beats):
            raise ValueError(f"packet at beat {i}: count {count} needs {n} payload beats, stream ends after "
                             f"{len(beats) - i - 1}")
        out.append((beats[i], beats[i + 1:i + 1 + n]))
        i += 1 + n
    return out


def p_header(header: np.ndarray) -> np.ndarray:
    """The P packet's header: ``header`` with ``elem_bits`` set to 8, every other bit unchanged."""
    w = np.asarray(header, dtype=np.uint8).reshape(BEAT_BYTES).copy().view("<u4")
    mask = np.uint32(_ELEM_BITS.max << _ELEM_BITS.lo)
    w[_ELEM_BITS.word] = (w[_ELEM_BITS.word] & ~mask) | np.uint32(8 << _ELEM_BITS.lo)
    return w.view(np.uint8)


def as_heads(regs: SwiftMaxRegisters | SwiftMaxHeads) -> SwiftMaxHeads:
    """A layer's per-head constants; a plain register set is one head (``SwiftMaxHeads.broadcast(regs, 1)``:
    what the PL holds when only entry 0 of the memories is that set)."""
    return regs if isinstance(regs, SwiftMaxHeads) else SwiftMaxHeads.broadcast(regs, 1)


def engine_reg_writes(regs: SwiftMaxRegisters | SwiftMaxHeads, score_bits: int) -> list[tuple[int, int]]:
    """``(byte offset, 32-bit word)`` AXI4-Lite writes that program ``regs`` into the engine's PL top: the
    shared registers and every entry of the per-head memories (:meth:`SwiftMaxHeads.register_values`)."""
    fmt = engine_format(score_bits)
    return [(w.offset, w.word) for w in swiftmax_regmap(fmt).writes(as_heads(regs).register_values(fmt))]


def engine_pl_reference(beats: np.ndarray, regs: SwiftMaxRegisters | SwiftMaxHeads, score_bits: int) -> np.ndarray:
    """The golden P stream of a score stream: per packet :func:`p_header` and
    ``engine_p(scores, regs, score_bits, head=<the header's head>)`` as uint8, 16 a beat, the last beat
    zero-padded. ``regs``: the layer's per-head constants (a plain set: :func:`as_heads`)."""
    fmt = engine_format(score_bits)
    heads = as_heads(regs)
    parts = []
    for hdr, payload in split_packets(beats, score_bits):
        fields = decode("packet", hdr)
        count = fields["count"]
        parts.append(p_header(hdr).reshape(1, BEAT_BYTES))
        if count:
            p = engine_p(unpack_scores(payload, count, score_bits), heads, score_bits, fmt,
                         head=fields["head"]).astype(np.uint8)
            pad = np.zeros(-(-count // BEAT_BYTES) * BEAT_BYTES, np.uint8)
            pad[:count] = p
            parts.append(pad.reshape(-1, BEAT_BYTES))
    return np.concatenate(parts) if parts else np.zeros((0, BEAT_BYTES), np.uint8)


def engine_top_name(channels: int, lanes: int, score_bits: int, online: object = None,
                    lut_product: bool | None = None) -> str:
    """Verilog top (and build folder) name of one engine PL instance of ``channels`` score channels (``online``: the
    build's :class:`~vckattn.hw.pl.engine_online.OnlineBuild`, None for SwiftMax only; ``_dsp``: SwiftMax lanes that
    multiply in DSP blocks where the default multiplies in LUTs)."""
    name = f"engine_pl_p{channels}_l{lanes}_b{score_bits}"
    if online is not None:
        o = online
        name += f"_os_q{o.q_rows}_k{o.kernels}_sk{o.slice_keys}_l{o.lanes}"  # type: ignore[attr-defined]
    return name + ("_dsp" if lut_product is False else "")


def run_engine_rtl(channels: int, lanes: int, score_bits: int, packets: list[np.ndarray],
                   reg_writes: list[tuple[int, int]] | SwiftMaxRegisters | SwiftMaxHeads, ident: int,
                   seed: int | None = None,
                   backpressure: bool = True, log: Path | None = None, online: object = None,
                   lut_product: bool | None = None) -> EngineRtlResult:
    """Stream every score channel's packets through :class:`~vckattn.hw.pl.engine.EnginePL` on Verilator.

    Args:
        channels, lanes, score_bits: The build (:class:`~vckattn.hw.pl.engine.EnginePL`).
        packets: ``packets[i]``: channel ``i``'s score stream, uint8 ``(n_beats, 16)``, whole packets back
            to back (may be empty).
        reg_writes: ``(byte offset, 32-bit word)`` AXI4-Lite writes, performed in order before streaming
            (each read back: it must read as written) -- the shared registers and the per-head memory
            entries; or the layer's constants (:class:`SwiftMaxHeads`, or a plain set: :func:`as_heads`),
            encoded by :func:`engine_reg_writes`. The packet headers' ``head`` selects the set.
        ident: Expected value of the ID register (offset 0).
        seed: ``COCOTB_RANDOM_SEED`` (source idles / sink backpressure pattern).
        backpressure: Random source idles and sink stalls (else a source that never idles and a ready sink).
        log: File that receives the simulator's output (default: the console).
        online: The build's online-softmax channels (:class:`~vckattn.hw.pl.engine_online.OnlineBuild`; None: a
            SwiftMax-only build). ``reg_writes`` then include the ``normalizer`` register, which routes the packets.
        lut_product: The SwiftMax lanes' products from LUTs or DSP blocks (``EnginePL``; None: the lane's default).

    Returns:
        :class:`EngineRtlResult` (the P streams as received, the cycle count).

    Raises:
        EngineRtlError: The ID register is not ``ident``, or the simulation failed.
        ValueError: Wrong number of streams or a stream that is not whole packets.
    """
    from vckattn.golden.paths import build_root
    from vckattn.hw.pl.engine import generate_engine_verilog
    from vckattn.sim.runner import SimulationFailed, redirect_output, run_cocotb, sim_build_root

    if len(packets) != channels:
        raise ValueError(f"{channels} channels but {len(packets)} packet streams")
    if isinstance(reg_writes, (SwiftMaxRegisters, SwiftMaxHeads)):
        reg_writes = engine_reg_writes(reg_writes, score_bits)
    streams = [np.asarray(p, dtype=np.uint8).reshape(-1, BEAT_BYTES) for p in packets]
    for i, s in enumerate(streams):
        try:
            split_packets(s, score_bits)
        except ValueError as exc:
            raise ValueError(f"channel {i}: {exc}") from None
    top = engine_top_name(channels, lanes, score_bits, online, lut_product)
    src = generate_engine_verilog(sim_build_root() / top, channels, lanes, score_bits, top,
                                  online, lut_product)  # type: ignore[arg-type]
    work = build_root() / "engine_rtl"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jf, of = Path(tmp) / "job.npz", Path(tmp) / "out.npz"
        offs = np.array([int(o) for o, _ in reg_writes], np.int64)
        words = np.array([int(w) & 0xFFFFFFFF for _, w in reg_writes], np.int64)
        np.savez(jf, channels=np.int64(channels), lanes=np.int64(lanes), score_bits=np.int64(score_bits),
                 reg_offsets=offs, reg_words=words, ident=np.int64(ident), pauses=np.int64(backpressure),
                 **{f"s{i}": s for i, s in enumerate(streams)})
        env = {"VCKATTN_ENGINE_JOB": str(jf), "VCKATTN_ENGINE_OUT": str(of)}
        try:
            with redirect_output(log):
                run_cocotb(top, [src], "vckattn.sim.tb_engine_host", seed=seed, extra_env=env,
                           rerun_with_waves=False)
        except (SimulationFailed, RuntimeError) as exc:
            first = str(exc).splitlines()[0]
            raise EngineRtlError(f"simulation of {top} failed: {first}" + (f" (log: {log})" if log else "")) from None
        if not of.is_file():
            raise EngineRtlError(f"simulation of {top} wrote no result file")
        out = np.load(of)
        got = int(out["ident"])
        if got != int(ident) & 0xFFFFFFFF:
            raise EngineRtlError(f"{top}: ID register reads {got:#010x}, expected {int(ident) & 0xFFFFFFFF:#010x} "
                                 "(the bitstream is not the engine PL top the caller describes)")
        return EngineRtlResult(p=[np.asarray(out[f"p{i}"], np.uint8).reshape(-1, BEAT_BYTES) for i in range(channels)],
                               cycles=int(out["cycles"]), ident=got)

"""cocotb 2.x testbench for :class:`vckattn.hw.pl.engine.EnginePL` (stream contract v3, ``hw/ENGINE.md``): one
packet pipeline per score channel (the channels are called pipelines here).

The full description: ``docs/internals/sim.md``, section ``sim/tb_engine.py``.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout
from cocotbext.axi import AxiStreamFrame

from vckattn.golden.engine import engine_format, engine_p, engine_registers, score_max, sentinel
from vckattn.golden.swiftmax_int import (
    SWIFTMAX_ID,
    SwiftMaxHeads,
    SwiftMaxRegisters,
    swiftmax_head_registers,
    swiftmax_regmap,
)
from vckattn.hw.pl.timing import engine_stream_cycles
from vckattn.hw.spec.streams import BEAT_BYTES, decode
from vckattn.sim.engine_rtl import engine_pl_reference, score_packet, split_packets, unpack_scores
from vckattn.sim.kernel_tb import KernelHarness, start

__all__ = ["EngineHarness", "RunResult", "beats_to_ints", "ints_to_beats"]


def beats_to_ints(beats: np.ndarray) -> list[int]:
    """uint8 ``(n, 16)`` beats -> 128-bit TDATA integers (byte 0 = bits 7..0)."""
    return [int.from_bytes(bytes(r), "little") for r in np.asarray(beats, np.uint8).reshape(-1, BEAT_BYTES)]


def ints_to_beats(words: list[int]) -> np.ndarray:
    """Inverse of :func:`beats_to_ints`."""
    if not words:
        return np.zeros((0, BEAT_BYTES), np.uint8)
    return np.frombuffer(b"".join(int(w).to_bytes(BEAT_BYTES, "little") for w in words), np.uint8).reshape(
        -1, BEAT_BYTES).copy()


@dataclass
class RunResult:
    """One :meth:`EngineHarness.run`: each pipeline's P stream as received and the cycle span."""

    p: list[np.ndarray]
    cycles: int  # first input handshake (any pipeline) to last output handshake, both counted
    in_beats: int
    out_beats: int


class EngineHarness:
    """Drives an :class:`~vckattn.hw.pl.engine.EnginePL`: one :class:`KernelHarness` per pipeline (source
    ``s{i}``, sink ``p{i}``, output stability monitor), AXI4-Lite through pipeline 0's."""

    def __init__(self, dut: SimHandleBase, pipelines: int, score_bits: int) -> None:
        self.dut, self.pipelines, self.score_bits = dut, pipelines, score_bits
        self.h = [KernelHarness(dut, lanes=BEAT_BYTES, in_width=8, out_width=8, in_signed=False, user=False,
                                in_prefix=f"s{i}", out_prefix=f"p{i}", axil_prefix="s_axil" if i == 0 else None)
                  for i in range(pipelines)]
        self.regs = self.h[0]
        self.clk = self.h[0].clk

    def set_random_pauses(self, rng: random.Random, in_prob: float = 0.3, out_prob: float = 0.4) -> None:
        for h in self.h:
            h.set_random_pauses(random.Random(rng.getrandbits(64)), in_prob, out_prob)

    def clear_pauses(self) -> None:
        for h in self.h:
            h.clear_pauses()

    async def run(self, streams: list[np.ndarray], expected: list[np.ndarray] | None = None,
                  max_mismatches: int = 10) -> RunResult:
        """Send every pipeline's score stream (packets back to back) at once, receive one P frame per packet
        on each and compare with ``expected`` (golden P streams) beat for beat and by TLAST; check that no
        extra beat follows. Returns the received streams and the cycle span."""
        assert len(streams) == self.pipelines
        packets = [split_packets(s, self.score_bits) for s in streams]
        mons = [h.monitor for h in self.h]
        i0 = [len(m.in_beats) for m in mons]
        o0 = [len(m.out_beats) for m in mons]
        for h, pk in zip(self.h, packets, strict=True):
            for hdr, payload in pk:
                h.source.send_nowait(AxiStreamFrame(beats_to_ints(np.concatenate([hdr[None], payload]))))

        async def receive(i: int) -> list[list[int]]:
            frames = []
            for k, (hdr, _) in enumerate(packets[i]):
                n = 1 + -(-decode("packet", hdr)["count"] // BEAT_BYTES)
                limit = 4000 + 60 * n
                try:
                    f = await with_timeout(self.h[i].sink.recv(compact=False), limit * 4, "ns")
                except SimTimeoutError:
                    raise AssertionError(f"pipeline {i}: P packet {k} of {len(packets[i])} not complete within "
                                         f"{limit} cycles") from None
                frames.append([int(w) for w in f.tdata])
            return frames

        tasks = [cocotb.start_soon(receive(i)) for i in range(self.pipelines)]
        got_frames = [await t for t in tasks]
        await ClockCycles(self.clk, 12)
        for i, h in enumerate(self.h):
            assert h.sink.empty(), f"pipeline {i}: {h.sink.count()} unexpected extra P frame(s)"

        errors: list[str] = []
        n_err = 0
        got = []
        for i, frames in enumerate(got_frames):
            got.append(ints_to_beats([w for f in frames for w in f]))
            if expected is None:
                continue
            exp_beats = np.asarray(expected[i], np.uint8).reshape(-1, BEAT_BYTES)
            pos = 0
            for k, f in enumerate(frames):
                hdr = packets[i][k][0]
                n_exp = 1 + -(-decode("packet", hdr)["count"] // BEAT_BYTES)
                if len(f) != n_exp:
                    n_err += 1
                    errors.append(f"pipeline {i} packet {k}: {len(f)} beats up to TLAST, expected {n_exp}")
                fb = ints_to_beats(f)
                e = exp_beats[pos:pos + n_exp]
                for b in range(min(len(fb), len(e))):
                    if not np.array_equal(fb[b], e[b]):
                        n_err += 1
                        if len(errors) < max_mismatches:
                            bad = np.nonzero(fb[b] != e[b])[0]
                            errors.append(f"pipeline {i} packet {k} beat {b} ({'header' if b == 0 else 'payload'}): "
                                          f"bytes {bad.tolist()[:8]} expected {e[b][bad].tolist()[:8]} got "
                                          f"{fb[b][bad].tolist()[:8]}")
                pos += n_exp
        if n_err:
            raise AssertionError(f"{n_err} mismatch(es); first {len(errors)}:\n  " + "\n  ".join(errors))

        ins = [m.in_beats[a:] for m, a in zip(mons, i0, strict=True)]
        outs = [m.out_beats[a:] for m, a in zip(mons, o0, strict=True)]
        for i in range(self.pipelines):
            assert len(ins[i]) == len(streams[i]), (i, len(ins[i]), len(streams[i]))
            assert len(outs[i]) == len(got[i]), (i, len(outs[i]), len(got[i]))
        first = min((x[0] for x in ins if x), default=0)
        last = max((x[-1] for x in outs if x), default=-1)
        return RunResult(got, last - first + 1, sum(map(len, ins)), sum(map(len, outs)))


# ------------------------------------------------------------------------------------------ test data


def build_params(dut: SimHandleBase) -> tuple[int, int, int]:
    """(pipelines, lanes, score_bits) from the environment; the pipeline count checked against the ports."""
    pipes = int(os.environ["TB_ENGINE_PIPELINES"])
    lanes = int(os.environ["TB_ENGINE_LANES"])
    bits = int(os.environ["TB_ENGINE_SCORE_BITS"])
    assert hasattr(dut, f"s{pipes - 1}_tdata") and not hasattr(dut, f"s{pipes}_tdata"), "pipeline count"
    return pipes, lanes, bits


def register_sets(rng: np.random.Generator, bits: int) -> list[SwiftMaxHeads]:
    """Layers' per-head sets folded for narrow scores (:func:`engine_registers`; random β/γ per head), then
    raw values at the limits, different per head."""
    fmt = engine_format(bits)
    sets = []
    for s_q, s_k, d, out_frac, shift, n in [
        (0.05, 0.05, 64, 8, 6 if bits == 8 else 0, 10),
        (0.02, 0.03, 32, 8, 9 if bits == 8 else 2, fmt.max_heads),
        (float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.01, 0.2)), int(rng.choice([16, 64])),
         int(rng.integers(4, 9)), int(rng.integers(0, 12)), 5),
    ]:
        base = swiftmax_head_registers(s_q, s_k, d, rng.uniform(-3, 10, n), rng.uniform(0.1, 50, n), out_frac,
                                       fmt=fmt)
        sets.append(engine_registers(base, s_q, s_k, d, shift, fmt))
    lo, hi = -(1 << (fmt.reg_bits - 1)), (1 << (fmt.reg_bits - 1)) - 1
    amax = (1 << (fmt.a_bits - 1)) - 1

    def edge(a_mult: int, a_shift: int, u_lo: int, u_hi: int, bc: list[tuple[int, int]]) -> SwiftMaxHeads:
        return SwiftMaxHeads([SwiftMaxRegisters(a_mult=a_mult, a_shift=a_shift, b_beta=b, u_lo=u_lo, u_hi=u_hi,
                                                c_out=c, out_frac=0) for b, c in bc])

    rand = [(int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))) for _ in range(2)]
    sets.append(edge(amax, min(fmt.max_a_shift, 63), lo, hi, [(hi, lo), (lo, hi), (0, 0), (hi, hi), *rand]))
    sets.append(edge(-amax - 1, 0, lo, hi, [(lo, hi), (hi, lo), (lo, lo), (0, 30000), *rand]))
    sets.append(edge(amax, 20, -40000, 40000, [(0, 30000), (0, -30000), (20000, 0), (-20000, 60000), (5000, 45000),
                                               (-5000, 20000)]))
    return sets


def random_scores(rng: np.random.Generator, count: int, bits: int) -> np.ndarray:
    """Scores: mostly realistic, with the sentinel, the saturation extremes and fully masked packets."""
    top, sent = score_max(bits), sentinel(bits)
    if count and rng.random() < 0.05:
        return np.full(count, sent, np.int64)
    s = np.clip(np.rint(rng.normal(0, top * float(rng.choice([0.05, 0.2, 0.6])), count)), -top, top).astype(np.int64)
    u = rng.random(count)
    s[u < 0.15] = sent
    s[(u >= 0.15) & (u < 0.2)] = top
    s[(u >= 0.2) & (u < 0.25)] = -top
    return s


def random_stream(rng: np.random.Generator, n_packets: int, bits: int, max_count: int = 160,
                  n_heads: int = 1) -> tuple[np.ndarray, int]:
    """``n_packets`` random score packets back to back (each of a random head ``< n_heads``) and the number of
    kept scores in them."""
    parts, kept = [], 0
    for _ in range(n_packets):
        kind = rng.random()
        if kind < 0.05:
            count = 0
        elif kind < 0.7:
            count = 16 * int(rng.integers(1, max_count // 16 + 1))
        else:
            count = int(rng.integers(1, max_count + 1))
        s = random_scores(rng, count, bits)
        kept += int(np.sum(s != sentinel(bits)))
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1))
        parts.append(score_packet(s, bits, packet_id=int(rng.integers(0, 32)), tile_id=int(rng.integers(0, 1 << 32)),
                                  slice=int(rng.integers(0, 256)), rows=int(rng.integers(0, 1 << 16)),
                                  pad=int(rng.integers(lo, hi)), extra_bits=int(rng.integers(0, 1 << 27)),
                                  head=int(rng.integers(0, n_heads))))
    return (np.concatenate(parts) if parts else np.zeros((0, BEAT_BYTES), np.uint8)), kept


async def program(eh: EngineHarness, regs: SwiftMaxHeads, rm: object, fmt: object) -> None:
    await eh.regs.write_regs(rm, regs.register_values(fmt))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ tests


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    pipes, _, bits = build_params(dut)
    await start(dut)
    eh = EngineHarness(dut, pipes, bits)
    fmt = engine_format(bits)
    rm = swiftmax_regmap(fmt, read_ports=pipes)
    assert await eh.regs.read_reg(rm, "ID") == SWIFTMAX_ID
    assert await eh.regs.read_reg(rm, "VERSION") == 2
    for regs in register_sets(np.random.default_rng(cocotb.RANDOM_SEED), bits):
        await program(eh, regs, rm, fmt)
        for name, v in regs.register_values(fmt).items():
            if isinstance(v, list):
                assert await eh.regs.read_mem(rm, name, fmt.max_heads) == v, name
            else:
                assert await eh.regs.read_reg(rm, name) == v, name
    assert await eh.regs.read_reg(rm, "rows") == 0
    assert await eh.regs.read_reg(rm, "elements") == 0


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_random_packets(dut: SimHandleBase) -> None:
    pipes, _, bits = build_params(dut)
    await start(dut)
    eh = EngineHarness(dut, pipes, bits)
    fmt = engine_format(bits)
    rm = swiftmax_regmap(fmt, read_ports=pipes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    eh.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.3, out_prob=0.4)
    n_packets = int(os.environ.get("TB_ENGINE_PACKETS", "12"))
    total_packets = total_kept = n_sat = n_mid = n_switch = 0
    for regs in register_sets(rng, bits):
        await program(eh, regs, rm, fmt)
        streams, exps = [], []
        for _ in range(pipes):
            s, kept = random_stream(rng, n_packets, bits, n_heads=regs.n_heads)
            streams.append(s)
            exps.append(engine_pl_reference(s, regs, bits))
            total_kept += kept
            total_packets += n_packets
        for s in streams:
            heads = [decode("packet", hdr)["head"] for hdr, _ in split_packets(s, bits)]
            n_switch += sum(a != b for a, b in zip(heads[:-1], heads[1:], strict=True))
            for hdr, payload in split_packets(s, bits):
                f = decode("packet", hdr)
                p = engine_p(unpack_scores(payload, f["count"], bits), regs, bits, head=f["head"])
                n_sat += int(np.sum(p == engine_format(bits).out_max))
                n_mid += int(np.sum((p > 0) & (p < engine_format(bits).out_max)))
        res = await eh.run(streams, exps)
        dut._log.info("%d pipelines: %d beats in, %d out, %d cycles", pipes, res.in_beats, res.out_beats, res.cycles)
    assert n_sat > 0 and n_mid > 0, (n_sat, n_mid)
    assert n_switch > 0, "no back-to-back packets of different heads"
    assert await eh.regs.read_reg(rm, "rows") == total_packets
    assert await eh.regs.read_reg(rm, "elements") == total_kept


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_throughput(dut: SimHandleBase) -> None:
    pipes, lanes, bits = build_params(dut)
    await start(dut)
    eh = EngineHarness(dut, pipes, bits)
    fmt = engine_format(bits)
    rm = swiftmax_regmap(fmt, read_ports=pipes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    regs = engine_registers(swiftmax_head_registers(0.05, 0.05, 64, rng.uniform(1, 4, 6), rng.uniform(1, 4, 6), 8,
                                                    fmt=fmt), 0.05, 0.05, 64, 4, fmt)
    await program(eh, regs, rm, fmt)
    eh.clear_pauses()
    await ClockCycles(eh.clk, 2)
    counts = [[int(c) for c in rng.choice([16, 64, 128, 256], 6 + i)] + [int(rng.integers(1, 60)), 0]
              for i in range(pipes)]
    streams, exps = [], []
    for cs in counts:
        s = np.concatenate([score_packet(random_scores(rng, c, bits), bits, tile_id=k, head=int(rng.integers(0, 6)))
                            for k, c in enumerate(cs)])
        streams.append(s)
        exps.append(engine_pl_reference(s, regs, bits))
    res = await eh.run(streams, exps)
    model = engine_stream_cycles(counts, lanes, bits)
    dut._log.info("throughput: %d pipelines x %d lanes, %d-bit scores: %d beats in, %d out in %d cycles "
                  "(model %d)", pipes, lanes, bits, res.in_beats, res.out_beats, res.cycles, model)
    out = os.environ.get("VCKATTN_METRICS_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"pipelines": pipes, "lanes": lanes, "score_bits": bits, "counts": counts,
                       "cycles": res.cycles, "modeled_cycles": model, "in_beats": res.in_beats,
                       "out_beats": res.out_beats}, f)
    assert res.cycles == model, (res.cycles, model)

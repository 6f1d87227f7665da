"""cocotb 2.x testbench for an :class:`vckattn.hw.pl.engine.EnginePL` that carries both normalizers (SwiftMax and
online softmax, ``online=OnlineBuild(...)``): the ``normalizer`` register chooses per layer.

The full description: ``docs/internals/sim.md``, section ``sim/tb_engine_dual.py``.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import replace

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles

from vckattn.golden.engine import (
    engine_format,
    engine_online_format,
    engine_online_registers,
    engine_registers,
    engine_regmap,
    engine_scores,
    sentinel,
    tile_keep,
)
from vckattn.golden.online_softmax_int import OnlineSoftmaxRegisters
from vckattn.golden.swiftmax_int import SWIFTMAX_ID, swiftmax_head_registers
from vckattn.hw.pl.engine_online import channel_cycles, rows_bound
from vckattn.hw.spec.functional import EngineParams, Packet, channel_packets, online_stage
from vckattn.sim.engine_rtl import engine_pl_reference
from vckattn.sim.kernel_tb import start
from vckattn.sim.tb_engine import EngineHarness, random_stream

__all__ = ["online_layer_streams"]


def _build(dut: SimHandleBase) -> tuple[int, int, int, EngineParams]:
    pipes = int(os.environ["TB_ENGINE_PIPELINES"])
    lanes = int(os.environ["TB_ENGINE_LANES"])
    bits = int(os.environ["TB_ENGINE_SCORE_BITS"])
    assert hasattr(dut, f"s{pipes - 1}_tdata") and not hasattr(dut, f"s{pipes}_tdata"), "channel count"
    k, sk = int(os.environ["TB_DUAL_KERNELS"]), int(os.environ["TB_DUAL_SLICE_KEYS"])
    p = EngineParams(pipelines=pipes, kernels=k, score_plios=1, q_rows=int(os.environ["TB_DUAL_Q_ROWS"]), d=64,
                     max_keys=k * sk, score_bits=bits, lanes=lanes)
    return pipes, lanes, int(os.environ["TB_DUAL_LANES"]), p


def online_layer_streams(rng: np.random.Generator, p: EngineParams, regs: OnlineSoftmaxRegisters, o_lanes: int,
                         n_tiles: int, shuffle: bool = True) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Per channel: the score stream of ``n_tiles`` tiles (``k`` packets each, kernels merged at most one tile apart,
    randomly when ``shuffle``), the golden P stream, and the kept scores of all channels."""
    fmt = engine_online_format(o_lanes)
    keys, kept = p.max_keys, 0
    streams, refs = [], []
    for _ in range(p.pipelines):
        per_kernel: list[list[Packet]] = [[] for _ in range(p.kernels)]
        for t in range(n_tiles):
            case = int(rng.integers(0, 5))
            rows = p.q_rows if case < 3 else int(rng.integers(0 if case == 4 else 1, p.q_rows))
            valid = keys if case == 0 else int(rng.integers(1, keys + 1))
            causal, q0 = case == 2, int(rng.integers(0, keys))
            acc = np.rint(rng.normal(0, float(rng.choice([300.0, 3000.0, 30000.0])), (p.q_rows, keys)))
            keep = tile_keep(p.q_rows, keys, rows, q0, valid, causal)
            s = engine_scores(acc.astype(np.int64), keep, 4, p.score_bits)
            kept += int(np.sum(s != sentinel(p.score_bits)))
            tid = int(rng.integers(0, 1 << 32)) if t % 3 else 1000 + t
            for j in range(p.kernels):
                per_kernel[j].append(Packet({"packet_id": j, "tile_id": tid, "slice": j, "elem_bits": p.score_bits,
                                             "rows": rows, "count": p.q_rows * p.slice_keys,
                                             "head": int(rng.integers(0, 32))},
                                            s[:, j * p.slice_keys:(j + 1) * p.slice_keys]))
        sent = channel_packets(p, per_kernel, 0, rng if shuffle else None, ahead=1)
        streams.append(np.concatenate([pk.beats(signed=True) for pk in sent]))
        back = online_stage(p, sent, regs, fmt)
        refs.append(np.concatenate([pk.beats(signed=False) for pk in back]))
    return streams, refs, kept


def _online_regs(rng: np.random.Generator, o_lanes: int) -> list[OnlineSoftmaxRegisters]:
    fmt = engine_online_format(o_lanes)
    return [engine_online_registers(0.05, 0.05, 64, 4, fmt),
            engine_online_registers(float(rng.uniform(0.005, 0.05)), float(rng.uniform(0.005, 0.05)), 32,
                                    int(rng.integers(0, 9)), fmt)]


async def _mode(eh: EngineHarness, rm: object, online: OnlineSoftmaxRegisters | None) -> None:
    vals = {"normalizer": 1 if online else 0, "os_a_mult": online.a_mult if online else 0,
            "os_a_shift": online.a_shift if online else 0}
    for name, v in vals.items():
        await eh.regs.write_word(rm.offset(name), rm.word(name, v))  # type: ignore[attr-defined]


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def test_registers(dut: SimHandleBase) -> None:
    pipes, _, _, p = _build(dut)
    await start(dut)
    eh = EngineHarness(dut, pipes, p.score_bits)
    rm = engine_regmap(engine_format(p.score_bits), ("swiftmax", "online_softmax"), read_ports=pipes)
    assert await eh.regs.read_reg(rm, "ID") == SWIFTMAX_ID
    assert await eh.regs.read_reg(rm, "normalizer") == 0
    top = (1 << 23) - 1
    for vals in [{"normalizer": 1, "os_a_mult": top, "os_a_shift": 63}, {"normalizer": 0, "os_a_mult": -top - 1,
                                                                        "os_a_shift": 0},
                 {"normalizer": 1, "os_a_mult": -12345, "os_a_shift": 17}]:
        for name, v in vals.items():
            await eh.regs.write_word(rm.offset(name), rm.word(name, v))
        for name, v in vals.items():
            assert await eh.regs.read_reg(rm, name) == v, name
    assert await eh.regs.read_reg(rm, "rows") == 0


@cocotb.test(timeout_time=400, timeout_unit="ms")
async def test_layers(dut: SimHandleBase) -> None:
    pipes, _, o_lanes, p = _build(dut)
    bits = p.score_bits
    await start(dut)
    eh = EngineHarness(dut, pipes, bits)
    fmt = engine_format(bits)
    rm = engine_regmap(fmt, ("swiftmax", "online_softmax"), read_ports=pipes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    eh.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.3, out_prob=0.4)
    sm = engine_registers(swiftmax_head_registers(0.05, 0.05, 64, rng.uniform(0, 4, 5), rng.uniform(1, 9, 5), 8,
                                                  fmt=fmt), 0.05, 0.05, 64, 4, fmt)
    osr = _online_regs(rng, o_lanes)
    await eh.regs.write_regs(rm, {**sm.register_values(fmt), "normalizer": 0, "os_a_mult": 0, "os_a_shift": 0})
    packets = kept_total = 0
    for layer, online in enumerate([None, osr[0], osr[1], None, osr[0]]):
        await _mode(eh, rm, online)
        assert await eh.regs.read_reg(rm, "normalizer") == (1 if online else 0)
        if online is None:
            streams, refs = [], []
            for _ in range(pipes):
                s, kept = random_stream(rng, 8, bits, n_heads=sm.n_heads)
                streams.append(s)
                refs.append(engine_pl_reference(s, sm, bits))
                kept_total += kept
                packets += 8
        else:
            n_tiles = 3
            streams, refs, kept = online_layer_streams(rng, p, online, o_lanes, n_tiles)
            kept_total += kept
            packets += pipes * n_tiles * p.kernels
        res = await eh.run(streams, refs)
        dut._log.info("layer %d (%s): %d beats in, %d out, %d cycles", layer, "online" if online else "swiftmax",
                      res.in_beats, res.out_beats, res.cycles)
    assert await eh.regs.read_reg(rm, "rows") == packets
    assert await eh.regs.read_reg(rm, "elements") == kept_total


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def test_online_throughput(dut: SimHandleBase) -> None:
    pipes, _, o_lanes, p = _build(dut)
    await start(dut)
    eh = EngineHarness(dut, pipes, p.score_bits)
    rm = engine_regmap(engine_format(p.score_bits), ("swiftmax", "online_softmax"), read_ports=pipes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    await _mode(eh, rm, _online_regs(rng, o_lanes)[0])
    eh.clear_pauses()
    await ClockCycles(eh.clk, 2)
    n_tiles = 4
    streams, refs, _ = online_layer_streams(rng, p, _online_regs(rng, o_lanes)[0], o_lanes, n_tiles, shuffle=False)
    res = await eh.run(streams, refs)
    assert rows_bound(p.q_rows, p.kernels, p.slice_keys, p.score_bits, o_lanes)
    model = channel_cycles(n_tiles, p.q_rows, p.kernels, p.slice_keys, p.score_bits, o_lanes)
    dut._log.info("online throughput: %d tiles, %d cycles (model %d)", n_tiles, res.cycles, model)
    out = os.environ.get("VCKATTN_METRICS_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"tiles": n_tiles, "cycles": res.cycles, "modeled_cycles": model,
                       "rows_cycles": n_tiles * p.q_rows * p.max_keys // o_lanes}, f)


@cocotb.test(timeout_time=50, timeout_unit="ms")
async def test_online_drops_malformed_packets(dut: SimHandleBase) -> None:
    """In online mode a packet the unit cannot place (a count other than Q_ROWS·SK, a slice not below k) is consumed
    and dropped: only the whole tile that follows comes back, bit-exact, and nothing else."""
    from cocotbext.axi import AxiStreamFrame

    from vckattn.sim.engine_rtl import score_packet
    from vckattn.sim.tb_engine import beats_to_ints, ints_to_beats

    pipes, _, o_lanes, p = _build(dut)
    await start(dut)
    eh = EngineHarness(dut, pipes, p.score_bits)
    rm = engine_regmap(engine_format(p.score_bits), ("swiftmax", "online_softmax"), read_ports=pipes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    regs = _online_regs(rng, o_lanes)[0]
    await _mode(eh, rm, regs)
    streams, refs, _ = online_layer_streams(rng, replace(p, pipelines=1), regs, o_lanes, 1)
    bits = p.score_bits
    bad = [score_packet(rng.integers(-100, 100, 40), bits, slice=0, tile_id=77),
           score_packet(rng.integers(-100, 100, p.q_rows * p.slice_keys), bits, slice=p.kernels, tile_id=78)]
    h = eh.h[0]
    for pk in bad:
        h.source.send_nowait(AxiStreamFrame(beats_to_ints(pk)))
    h.source.send_nowait(AxiStreamFrame(beats_to_ints(streams[0])))
    got = []
    for _ in range(p.kernels):
        f = await h.sink.recv(compact=False)
        got += [int(w) for w in f.tdata]
    await ClockCycles(eh.clk, 50)
    assert h.sink.empty(), "a P packet for a dropped score packet"
    assert np.array_equal(ints_to_beats(got), refs[0])

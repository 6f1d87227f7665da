"""The engine's PL top (hw/pl/engine.py) on Verilator: every output beat bit-exact against the golden P stream
under random source gaps and sink backpressure, register read-back, throughput against the cycle model, and the
host-facing runner (sim/engine_rtl.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vckattn.golden.engine import engine_format, engine_p, engine_registers, sentinel
from vckattn.golden.swiftmax_int import (
    SWIFTMAX_ID,
    SwiftMaxHeads,
    swiftmax_head_registers,
    swiftmax_registers,
    swiftmax_regmap,
)
from vckattn.hw.pl.timing import engine_stream_cycles
from vckattn.hw.spec.streams import BEAT_BYTES, decode, encode
from vckattn.sim.engine_rtl import (
    engine_pl_reference,
    engine_reg_writes,
    p_header,
    pack_scores,
    score_packet,
    split_packets,
    unpack_scores,
)

TB = "vckattn.sim.tb_engine"

# ------------------------------------------------------------------------------------------ pure helpers


@pytest.mark.parametrize("bits", [8, 16])
def test_pack_roundtrip_and_framing(bits: int) -> None:
    rng = np.random.default_rng(1)
    s = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), 37)
    beats = pack_scores(s, bits)
    assert beats.shape == (-(-37 // (128 // bits)), BEAT_BYTES)
    assert np.array_equal(unpack_scores(beats, 37, bits), s)
    stream = np.concatenate([score_packet(s, bits, tile_id=7), score_packet([], bits, tile_id=8),
                             score_packet(s[:16], bits, tile_id=9)])
    parts = split_packets(stream, bits)
    assert [decode("packet", h)["tile_id"] for h, _ in parts] == [7, 8, 9]
    assert [len(p) for _, p in parts] == [len(beats), 0, 16 * bits // 128]
    with pytest.raises(ValueError):
        split_packets(stream[:-1], bits)


def test_reference_stream() -> None:
    """Header rewritten (elem_bits only, foreign bits kept), P = engine_p, sentinel -> 0, padding 0."""
    fmt = engine_format(8)
    regs = engine_registers(swiftmax_registers(0.05, 0.05, 64, 2.5, 2.0, 8, fmt), 0.05, 0.05, 64, 4, fmt)
    s = np.array([5, sentinel(8), 127, -127] * 5)
    pk = score_packet(s, 8, tile_id=3, rows=2, extra_bits=0x5A5A5A)
    ref = engine_pl_reference(pk, regs, 8)
    assert ref.shape == (1 + 2, BEAT_BYTES)
    h_in, h_out = decode("packet", pk[0]), decode("packet", ref[0])
    assert h_out == {**h_in, "elem_bits": 8}
    diff = np.nonzero(pk[0] != ref[0])[0]
    assert set(diff.tolist()) <= {8 + 1}  # only byte 1 of word 2 (elem_bits) changes
    assert np.array_equal(p_header(ref[0]), ref[0])
    p = ref[1:].reshape(-1)
    assert np.all(p[1:20:4] == 0) and np.all(p[20:] == 0) and p[2] > p[0] > p[3]
    assert encode("packet", elem_bits=8)[9] == 8
    # a plain register set is head 0's: the same as its one-head broadcast
    assert np.array_equal(ref, engine_pl_reference(pk, SwiftMaxHeads.broadcast(regs, 1), 8))


def test_reference_stream_per_head() -> None:
    """Each packet's P uses the register set of its header's head; the head passes through to the P header."""
    fmt = engine_format(8)
    heads = engine_registers(swiftmax_head_registers(0.05, 0.05, 64, [0.5, 2.5, 6.0], [1.0, 3.0, 20.0], 8, fmt=fmt),
                             0.05, 0.05, 64, 4, fmt)
    s = np.arange(-60, 60, 3)
    stream = np.concatenate([score_packet(s, 8, head=h, tile_id=h) for h in (2, 0, 1, 1, 2)])
    ref = engine_pl_reference(stream, heads, 8)
    parts = split_packets(ref, 8)  # P stream: 16 uint8 a beat, framed like 8-bit scores
    assert [decode("packet", h)["head"] for h, _ in parts] == [2, 0, 1, 1, 2]
    outs = [unpack_scores(p, s.size, 8).astype(np.uint8) for _, p in parts]
    for (h, _), o in zip(parts, outs, strict=True):
        assert np.array_equal(o, engine_p(s, heads, 8, head=decode("packet", h)["head"]).astype(np.uint8))
    assert not np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[1], outs[2])
    writes = engine_reg_writes(heads, 8)
    rm = swiftmax_regmap(fmt)
    assert (rm.offset("b_beta") + 4 * 2, heads[2].b_beta & 0xFFFFFFFF) in writes
    assert len(writes) == len(rm.writable) + 2 * fmt.max_heads


# ------------------------------------------------------------------------------------------ Verilator


#: (pipelines, lanes, score bits, lut_product): None the lane's default (LUT products for 8-bit scores), False DSP
CONFIGS = [(2, 2, 8, None), pytest.param(2, 4, 16, None, marks=pytest.mark.full), (3, 16, 8, None), (1, 1, 8, None),
           (1, 8, 16, None), (2, 4, 8, False)]


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("pipelines,lanes,score_bits,lut_product", CONFIGS)
def test_engine_pl(pipelines: int, lanes: int, score_bits: int, lut_product: bool | None, tmp_path: Path) -> None:
    from vckattn.hw.pl.engine import generate_engine_verilog
    from vckattn.sim.engine_rtl import engine_top_name
    from vckattn.sim.runner import SIM_BUILD_ROOT, run_cocotb

    top = engine_top_name(pipelines, lanes, score_bits, lut_product=lut_product)
    src = generate_engine_verilog(SIM_BUILD_ROOT / top, pipelines, lanes, score_bits, top, lut_product=lut_product)
    if lut_product is False:  # the DSP build is a different circuit from the default (LUT-product) build
        assert src.read_text() != generate_engine_verilog(tmp_path, pipelines, lanes, score_bits, top).read_text()
    metrics = tmp_path / "metrics.json"
    packets = 10 if lanes == 1 else 40
    res = run_cocotb(top, [src], TB, extra_env={
        "TB_ENGINE_PIPELINES": str(pipelines), "TB_ENGINE_LANES": str(lanes), "TB_ENGINE_SCORE_BITS": str(score_bits),
        "TB_ENGINE_PACKETS": str(packets), "VCKATTN_METRICS_OUT": str(metrics)})
    assert {"test_registers", "test_random_packets", "test_throughput"} <= {t.name for t in res.passed}, res.tests
    m = json.loads(metrics.read_text())
    print(f"engine p{pipelines} l{lanes} b{score_bits}: {m['in_beats']} beats in, {m['out_beats']} out, "
          f"{m['cycles']} cycles (model {m['modeled_cycles']})")
    assert m["cycles"] == m["modeled_cycles"] == engine_stream_cycles(m["counts"], lanes, score_bits)


def _host_job(pipelines: int, score_bits: int, seed: int) -> tuple[list[np.ndarray], list[tuple[int, int]], object]:
    from vckattn.sim.tb_engine import random_stream

    fmt = engine_format(score_bits)
    rng = np.random.default_rng(seed)
    regs = engine_registers(swiftmax_head_registers(0.04, 0.06, 64, rng.uniform(0, 4, 7), rng.uniform(1, 9, 7), 8,
                                                    fmt=fmt), 0.04, 0.06, 64, 3, fmt)
    writes = [(w.offset, w.word) for w in swiftmax_regmap(fmt).writes(regs.register_values(fmt))]
    streams = [random_stream(rng, 5, score_bits, n_heads=regs.n_heads)[0] for _ in range(pipelines)]
    return streams, writes, regs


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("backpressure", [True, False])
def test_run_engine_rtl(backpressure: bool, tmp_path: Path) -> None:
    """The host-facing runner: one simulator run for all pipelines (one of them idle), packets of several heads
    (per-head register sets in the memories), P streams bit-exact against golden; without backpressure the
    cycles are the model's."""
    from vckattn.sim.engine_rtl import run_engine_rtl

    streams, writes, regs = _host_job(3, 8, 11)
    streams[1] = np.zeros((0, BEAT_BYTES), np.uint8)
    assert len({decode("packet", h)["head"] for s in streams for h, _ in split_packets(s, 8)}) > 1
    res = run_engine_rtl(3, 4, 8, streams, writes if backpressure else regs, SWIFTMAX_ID, seed=5,
                         backpressure=backpressure, log=tmp_path / "sim.log")
    assert len(res.p) == 3 and res.ident == SWIFTMAX_ID
    for s, p in zip(streams, res.p, strict=True):
        assert p.dtype == np.uint8 and np.array_equal(p, engine_pl_reference(s, regs, 8))
    counts = [[decode("packet", h)["count"] for h, _ in split_packets(s, 8)] for s in streams]
    model = engine_stream_cycles(counts, 4, 8)
    assert res.cycles == model if not backpressure else res.cycles > model


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_run_engine_rtl_checks_the_id(tmp_path: Path) -> None:
    from vckattn.sim.engine_rtl import EngineRtlError, run_engine_rtl

    streams, writes, _ = _host_job(1, 16, 3)
    with pytest.raises(EngineRtlError, match="ID register reads 0x5f1f7a01, expected 0x12345678"):
        run_engine_rtl(1, 8, 16, streams, writes, 0x12345678, seed=1, log=tmp_path / "sim.log")
    with pytest.raises(ValueError, match="2 channels but 1"):
        run_engine_rtl(2, 8, 16, streams, writes, SWIFTMAX_ID)


# ------------------------------------------------------------------------------------------ both normalizers


DUAL_CONFIGS = [  # (channels, SwiftMax lanes, score bits, q_rows, kernels, slice keys, online lanes)
    (2, 4, 8, 16, 2, 64, 4),
    (1, 8, 16, 8, 4, 16, 2),
]


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("channels,lanes,score_bits,q_rows,kernels,sk,o_lanes", DUAL_CONFIGS)
def test_engine_pl_both_normalizers(channels, lanes, score_bits, q_rows, kernels, sk, o_lanes, tmp_path: Path) -> None:
    """A build with both normalizers: registers read back, layers of either normalizer one after another bit-exact
    with golden (the mode switched between layers), an online layer's cycles against the closed form."""
    from vckattn.hw.pl.engine import generate_engine_verilog
    from vckattn.hw.pl.engine_online import OnlineBuild
    from vckattn.sim.engine_rtl import engine_top_name
    from vckattn.sim.runner import SIM_BUILD_ROOT, run_cocotb

    online = OnlineBuild(q_rows, kernels, sk, o_lanes)
    top = engine_top_name(channels, lanes, score_bits, online)
    src = generate_engine_verilog(SIM_BUILD_ROOT / top, channels, lanes, score_bits, top, online)
    metrics = tmp_path / "metrics.json"
    res = run_cocotb(top, [src], "vckattn.sim.tb_engine_dual", extra_env={
        "TB_ENGINE_PIPELINES": str(channels), "TB_ENGINE_LANES": str(lanes), "TB_ENGINE_SCORE_BITS": str(score_bits),
        "TB_DUAL_Q_ROWS": str(q_rows), "TB_DUAL_KERNELS": str(kernels), "TB_DUAL_SLICE_KEYS": str(sk),
        "TB_DUAL_LANES": str(o_lanes), "VCKATTN_METRICS_OUT": str(metrics)})
    assert {"test_registers", "test_layers", "test_online_throughput", "test_online_drops_malformed_packets"} <= \
        {t.name for t in res.passed}, res.tests
    m = json.loads(metrics.read_text())
    print(f"online channel {online}: {m['tiles']} tiles in {m['cycles']} cycles (model {m['modeled_cycles']}; "
          f"rows alone {m['rows_cycles']})")
    assert m["cycles"] == m["modeled_cycles"]

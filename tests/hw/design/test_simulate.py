"""The graph simulation (hw/design/simulate.py) runs the topology the generator writes (hw/design/graph_topology.py
parses aie/graph.h, engine_config.h and manifest.json): a mutated graph changes what is simulated; it models DMA
and lock hand-offs, buffer descriptors, shared interface streams and DDR turnaround and row conflicts, and it can
disagree with the closed form. All figures MODELED."""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest
import simpy

from vckattn.hw.design import generate as gen
from vckattn.hw.design import graph_topology as gt
from vckattn.hw.design import render, simulate
from vckattn.hw.perf import model

DEV = model.load_device("vck5000")
#: a short workload for engine_small (max_seq 128): 2 heads x 64, S = 128, batch 1
SHORT = model.workload_from_flags(2, 64, 128, batch=1, layers=1)


@pytest.fixture(scope="module")
def small_build(tmp_path_factory) -> Path:
    """engine_small as ``vckattn hw generate`` writes it (design-rule check included)."""
    out = tmp_path_factory.mktemp("gen") / "engine_small"
    d = gen.build_design("engine_small")
    gen.generate(d, "vck5000", out, d.max_seq, name="engine_small", with_pl=False, with_diagram=False)
    return out


def _copy(build: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "mutated"
    shutil.copytree(build, dst)
    return dst


def _edit(folder: Path, rel: str, fn) -> None:
    p = folder / rel
    p.write_text(fn(p.read_text()))


def _sim(folder: Path, operands: str = "on_chip", w=SHORT) -> simulate.SimResult:
    return simulate.simulate(replace(w, operands=operands), gen.build_design("engine_small"), DEV,
                             topo=gt.parse(folder))


def test_topology_is_what_the_generator_wrote(small_build):
    """engine_small: 2 pipelines x (2 qk + 2 pv + rq); per pipeline q_in, k_in, v_in, p_in0, s_out0, o_out, two
    pktsplits on k/v, one pktmerge + pktsplit on the score channel, cascade pv0 -> pv1 -> rq; buffer halves of
    Q_ROWS 16, D 64, SK 128 / 2 = 64 keys, int8 scores: q = o = 16 + 16*64, k = v = 16 + 64*64, s = p = 16 + 16*64."""
    t = gt.parse(small_build)
    assert len(t.kernels) == 10 and len(t.plios) == 12
    assert t.splits == {"p0_k_split": 2, "p0_v_split": 2, "p0_split0": 2, "p1_k_split": 2, "p1_v_split": 2,
                        "p1_split0": 2}
    assert t.merges == {"p0_merge0": 2, "p1_merge0": 2}
    assert sorted((n.src[0], n.dst[0]) for n in t.nets if n.kind == "cascade") == [
        ("p0_pv0", "p0_pv1"), ("p0_pv1", "p0_rq"), ("p1_pv0", "p1_pv1"), ("p1_pv1", "p1_rq")]
    assert t.masters() == sorted([f"mm2s_engine_{s}_{i}" for i in (0, 1) for s in "qkv"]
                                 + ["s2mm_engine_0", "s2mm_engine_1"])
    p0 = gt.pipelines(t)[0]
    assert p0.q_fanout == ["p0_qk0", "p0_qk1"] and p0.channel == ["p0_s_out0"] * 2 and p0.pv == ["p0_pv0", "p0_pv1"]
    assert p0.bytes == {"q": [1040] * 2, "k": [4112] * 2, "s": [1040] * 2, "p": [1040] * 2, "v": [4112] * 2,
                        "o": [1040]}
    assert all(b.halves == 2 and b.pinned for b in t.buffers.values())
    # buffer descriptors per tile: qk 3 ping-pong buffers, pv 2, rq 1
    bds = simulate.tile_bds(t)
    assert bds[t.kernels["p0_qk0"].tile] == 6 and bds[t.kernels["p0_pv1"].tile] == 4
    assert bds[t.kernels["p0_rq"].tile] == 2


def test_a_changed_buffer_size_changes_the_simulation(small_build, tmp_path):
    """Pipeline 0's q window 8x larger (a literal size): the topology carries it and each of the pipeline's 8 tiles
    (one group of 128 / 16 tiles) moves 8320 - 1040 more bytes over q_in at 16 B x 250 MHz."""
    base = _sim(small_build)
    mut = _copy(small_build, tmp_path)
    _edit(mut, "aie/graph.h", lambda s: s.replace(
        "adf::window<vckattn_engine::Q_BUFFER_BYTES>>(p0_q_in", "adf::window<8320>>(p0_q_in"))
    assert gt.pipelines(gt.parse(mut))[0].bytes["q"] == [8320, 8320]
    got = _sim(mut)
    print(f"q_in busy: generated {base.busy['q_in'] * 1e6:.2f} us, 8x window {got.busy['q_in'] * 1e6:.2f} us")
    assert got.busy["q_in"] - base.busy["q_in"] == pytest.approx(8 * (8320 - 1040) / (16 * 250e6), rel=1e-9)
    assert got.seconds > base.seconds


def test_a_moved_pktmerge_input_changes_the_channels(tmp_path):
    """Two score channels of 2 slices each; rewiring slice 1's scores onto channel 1's pktmerge (and its P back
    through channel 1) leaves channel 0 with one slice and channel 1 with three: the channel-bound graph slows by
    the busier channel, 3/2."""
    d = replace(gen.build_design("engine_small"), qk_kernels=4, pv_kernels=4, score_plios=2)
    out = tmp_path / "two"
    gt.write_sources(d, "vck5000", out, 128)
    w = replace(SHORT, operands="on_chip")
    base = simulate.simulate(w, d, DEV, topo=gt.parse(out))

    def rewire(s: str) -> str:
        s = s.replace("p0_qk1.out[0], p0_merge0.in[1]", "p0_qk1.out[0], p0_merge1.in[2]")
        s = s.replace("p0_split0.out[1], p0_pv1.in[0]", "p0_split1.out[2], p0_pv1.in[0]")
        return s.replace("adf::pktmerge<2> p0_merge0, p0_merge1", "adf::pktmerge<3> p0_merge0, p0_merge1")

    _edit(out, "aie/graph.h", rewire)
    t = gt.parse(out)
    assert gt.pipelines(t)[0].channel == ["p0_s_out0", "p0_s_out1", "p0_s_out1", "p0_s_out1"]
    got = simulate.simulate(w, d, DEV, topo=t)
    print(f"channel-bound layer (device): generated {base.device_seconds * 1e6:.1f} us, "
          f"rewired {got.device_seconds * 1e6:.1f} us")
    assert got.busy["pl_channel"] == pytest.approx(1.5 * base.busy["pl_channel"], rel=1e-6)
    assert got.device_seconds > 1.3 * base.device_seconds


def test_a_removed_pktmerge_or_mover_is_refused(small_build, tmp_path):
    mut = _copy(small_build, tmp_path)
    _edit(mut, "aie/graph.h", lambda s: "\n".join(x for x in s.splitlines() if "p0_merge0" not in x))
    with pytest.raises(gt.TopologyError, match="p0_qk0.out\\[0\\] drives 0 nets"):
        _sim(mut)
    mut2 = tmp_path / "nomover"
    shutil.copytree(small_build, mut2)
    m = json.loads((mut2 / "manifest.json").read_text())
    m["connectivity"] = [c for c in m["connectivity"] if c["to"] != "ai_engine_0.p0_q_in"]
    (mut2 / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(gt.TopologyError, match="no mover at p0_q_in"):
        _sim(mut2, operands="ddr")


def test_plios_crowded_on_one_column_share_its_streams(small_build, tmp_path):
    """Pipeline 1's four input PLIOs moved to pipeline 0's column: 8 x 128-bit PLIOs ask 16 of its 8 PL -> AIE
    64-bit streams; each gets half its rate."""
    t0 = gt.parse(small_build)
    col0 = t0.plios["p0_q_in"].column
    mut = _copy(small_build, tmp_path)

    def move(s: str) -> str:
        for name in ("p1_q_in", "p1_k_in", "p1_v_in", "p1_p_in0"):
            s = re.sub(rf"(adf::location<adf::PLIO>\({name}\) = adf::shim\()\d+", rf"\g<1>{col0}", s)
        return s

    _edit(mut, "aie/graph.h", move)
    t1 = gt.parse(mut)
    r0, r1 = simulate.plio_rates(t0, DEV.aie_clock_hz), simulate.plio_rates(t1, DEV.aie_clock_hz)
    assert r0["p0_q_in"] == pytest.approx(16 * 250e6)  # 128 bits at 250 MHz (below the AIE stream's 5 GB/s)
    assert r1["p1_q_in"] == pytest.approx(r0["p1_q_in"] / 2) and r1["p0_o_out"] == r0["p0_o_out"]
    base, got = _sim(small_build), _sim(mut)
    # 8 tiles of 1040 B at half of 16 B x 250 MHz: each tile's transfer takes twice as long
    assert got.busy["q_in"] - base.busy["q_in"] == pytest.approx(8 * 1040 / (16 * 250e6), rel=1e-9)


def test_too_many_buffer_descriptors_on_one_tile_are_refused(small_build, tmp_path):
    """qk0 + qk1 + pv0 + pv1 of pipeline 0 on one tile: 6 + 6 + 4 + 4 = 20 buffer descriptors > 16."""
    t = gt.parse(small_build)
    c, r = t.kernels["p0_qk0"].tile
    mut = _copy(small_build, tmp_path)

    def crowd(s: str) -> str:
        for name in ("p0_qk1", "p0_pv0", "p0_pv1"):
            s = re.sub(rf"(adf::location<adf::kernel>\({name}\) = adf::tile\()\d+, \d+", rf"\g<1>{c}, {r}", s)
        return s

    _edit(mut, "aie/graph.h", crowd)
    with pytest.raises(gt.TopologyError, match="needs 20 buffer descriptors, a tile DMA has 16"):
        _sim(mut)


def test_ddr_turnaround_and_row_conflicts():
    """DDR4-3200AA (JESD79-4): write -> read costs tWTR_L 7.5 ns + CL 22 x 0.625 ns, read -> write 2 x 0.625 ns;
    with one controller's rate (25.6 GB/s) 8 masters keep their rows open (PG313), beyond that a switch of master
    costs (tRP + tRCD = 27.5 ns) x (1 - 8 / n waiting)."""
    env = simpy.Environment()
    bank = simulate.DdrBank(env, 25.6e9)
    seq = [(4096, "r", False), (4096, "w", True), (4096, "r", False), (4096, "r", False)]

    def run():
        for n, m, wr in seq:
            yield env.process(bank.move(n, m, wr))

    env.process(run())
    env.run()
    transfer = 4 * 4096 / 25.6e9
    assert env.now == pytest.approx(transfer + 1.25e-9 + (7.5e-9 + 13.75e-9), rel=1e-9)
    assert bank.turnarounds == 2
    # 16 masters, one read each, all waiting at once
    env = simpy.Environment()
    bank = simulate.DdrBank(env, 25.6e9)
    for i in range(16):
        env.process(bank.move(4096, f"m{i}"))
    env.run()
    want = 16 * 4096 / 25.6e9 + sum(27.5e-9 * (1 - 8 / n) for n in range(9, 16))
    assert env.now == pytest.approx(want, rel=1e-9)


def test_headline_is_the_slower():
    assert simulate.headline(1.0e-4, 1.3e-4) == (1.3e-4, "simulation")
    assert simulate.headline(1.0e-4, 0.9e-4) == (1.0e-4, "closed form")
    with pytest.raises(ValueError):
        simulate.headline(0.0, 1.0)


def test_simulation_disagrees_where_ddr_couples_and_agrees_where_nothing_does():
    """The committed vck5000_engine on BERT-base S = 512 batch 8 (the committed design point, its graph written
    without the design-rule check): with operands in DDR its 64 movers interleave reads and writes on the bank
    (turnarounds, row conflicts past the controllers' open pages), which the closed form's one FIFO link leaves
    out: the simulation is more than 10% slower. With operands on chip nothing couples the pipelines but the
    hand-offs: within 3%. Runtime of the DDR case printed (a budget of 60 s on one core)."""
    d = gen.build_design("vck5000_engine")
    w = render.bert_workload()
    rows = {}
    for operands in ("ddr", "on_chip"):
        wo = replace(w, operands=operands)
        t0 = time.process_time()
        sim = simulate.simulate(wo, d, DEV, drc=False)
        cpu = time.process_time() - t0
        closed = model.evaluate(wo, d, DEV).seconds_per_layer
        rows[operands] = (closed, sim.seconds)
        print(f"vck5000_engine, BERT-base S=512 b8, operands {operands}: closed form {closed * 1e6:.1f} us, "
              f"simulated {sim.seconds * 1e6:.1f} us ({sim.seconds / closed - 1:+.1%}), headline "
              f"{simulate.headline(closed, sim.seconds)[0] * 1e6:.1f} us; {sim.events} events, {cpu:.1f} s CPU; "
              f"DDR turnarounds {sim.graph['ddr_turnarounds']} ({sim.graph['ddr_turnaround_seconds'] * 1e6:.1f} us), "
              f"row conflicts {sim.graph['ddr_row_conflict_seconds'] * 1e6:.1f} us, "
              f"up to {sim.graph['ddr_max_masters_waiting']} masters waiting")
    closed, simulated = rows["ddr"]
    assert simulated > 1.10 * closed
    assert simulate.headline(closed, simulated) == (simulated, "simulation")
    closed, simulated = rows["on_chip"]
    assert abs(simulated / closed - 1) < 0.03

"""The engine's performance model (hw/perf/engine.py), its discrete-event simulation (hw/design/simulate.py) and the
explorer's honest rules: the host's dealing, every resource's headroom, the PLIO counts. All MODELED figures."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vckattn.hw.design import explore, simulate
from vckattn.hw.perf import engine, model

DEV = model.load_device("vck5000")
BERT = model.workload_from_flags(12, 64, 512, batch=8, layers=12)
ENGINE = model.Design(pipelines=16, qk_kernels=8, pv_kernels=8, q_rows=16, score_bits=8, score_plios=2, in_plios=3,
                      out_plios=1, lanes_swiftmax=16, lanes_online_softmax=0, kv_resident=True, o_bits=8)


def test_plio_counts_per_width():
    """A 128-bit PLIO takes two 64-bit interface ports; a 32- or 64-bit PLIO one (not two 32-bit PLIOs a port)."""
    assert DEV.plio_available(128) == {"in": 156, "out": 117}
    ports = {k: v["value"] for k, v in model.device_data()["devices"]["vck5000"].items() if k == "plio_64bit_ports"}
    assert DEV.plio_available(64) == ports["plio_64bit_ports"] == DEV.plio_available(32)


@pytest.mark.parametrize(("batch", "heads", "seq", "pipelines"), [(8, 12, 512, 16), (1, 12, 40, 5), (3, 7, 100, 41)])
def test_the_model_deals_tiles_as_the_host_does(batch, heads, seq, pipelines):
    """The host's command lists for a launch and the model's busiest pipeline count the same tiles per pipeline."""
    from vckattn.host import engine as host_engine
    from vckattn.hw.spec.functional import EngineParams

    p = EngineParams(pipelines=pipelines, kernels=2, q_rows=16, d=64, max_keys=-(-seq // 32) * 32)
    geom = host_engine.Geometry(batch, heads, heads, seq, 64, (seq,) * batch, False, 0, 0, 0)
    cmds = host_engine.commands(p, geom)
    host_tiles = [len(t) for t in cmds.tiles]
    w = model.workload_from_flags(heads, 64, seq, batch=batch)
    g = engine.geometry(w, replace(ENGINE, pipelines=pipelines, qk_kernels=2, pv_kernels=2, score_plios=1,
                                   max_seq=p.max_keys), DEV, "swiftmax")
    model_tiles = [len(x) * g.tiles_per_group for x in engine.deal(g.groups, g.pipelines)]
    assert host_tiles == model_tiles


def test_masked_tiles_follow_the_contract():
    """A tile runs its masked loop in slice j exactly when some element of the slice is masked (golden tile_keep)."""
    from vckattn.golden.engine import tile_keep

    for seq, causal in ((512, False), (300, False), (200, True), (512, True)):
        w = replace(model.workload_from_flags(2, 64, seq), causal=causal)
        g = engine.geometry(w, replace(ENGINE, qk_kernels=4, pv_kernels=4, score_plios=1, max_seq=512), DEV,
                            "swiftmax")
        for r in range(g.tiles_per_group):
            keep = tile_keep(g.q_rows, g.keys, g.rows_of(r), r * g.q_rows, seq, causal)
            for j in range(g.k):
                assert g.masked(r, j) == (not keep[:, j * g.sk:(j + 1) * g.sk].all()), (seq, causal, r, j)


def test_explorer_keeps_headroom_on_every_resource():
    for operands in ("ddr", "on_chip"):
        w = replace(BERT, operands=operands)
        best = explore.search(w, DEV)
        p = model.evaluate(w, best.design, DEV)
        for key in explore.BUDGET_KEYS:
            assert p.used[key] <= 0.8 * p.available[key] * (1 + 1e-9), (operands, key)
        assert p.used["aie_kernel_memory_bytes"] <= DEV.tile_memory_bytes


def test_dsp_lanes_lift_the_on_chip_design():
    """With its operands on chip the best SwiftMax design is bound by its score channels' LUTs; lanes that multiply
    in DSP blocks (372 LUT + 1 DSP against 543 LUT) fit more channels: the search takes them, and the design is
    faster on the card than the best with LUT lanes alone. (The model's on-chip ceiling, not a reported design:
    the generator emits no operand feeder.)"""
    w = replace(BERT, operands="on_chip")
    best = explore.search(w, DEV)
    assert best.design.swiftmax_products == "dsp"
    on_card = model.evaluate(w, best.design, DEV).device_seconds_per_layer

    def lut_only(*args: object, **kw: object):
        for d in original(*args, **kw):
            if d.swiftmax_products == "auto":
                yield d

    original = explore.candidates
    try:
        explore.candidates = lut_only
        lut = explore.search(w, DEV)
    finally:
        explore.candidates = original
    assert lut.design.swiftmax_products == "auto" and lut.seconds > best.seconds
    assert model.evaluate(w, lut.design, DEV).device_seconds_per_layer > on_card


def test_movers_and_axi_masters_are_counted():
    p = model.evaluate(BERT, ENGINE, DEV)
    infra = engine.infrastructure()
    per = engine.infrastructure_per_pipeline()
    assert per["lut"] > 0 and per["dsp"] == infra["parts"]["s2mm_engine"]["dsp"]["value"]
    assert p.used["axi_masters"] == ENGINE.pipelines * infra["ports_per_pipeline"]["value"]["axi_master"]
    lanes = ENGINE.pipelines * ENGINE.score_plios * np.array(model.kernel_fit("swiftmax", 16, 8))
    assert p.used["lut"] == pytest.approx(lanes[0] + ENGINE.pipelines * per["lut"])
    assert p.used["dsp"] == pytest.approx(lanes[2] + ENGINE.pipelines * per["dsp"])
    for part in infra["parts"].values():
        for key in engine.RESOURCE_KEYS:
            assert part[key]["source"], part


@pytest.mark.parametrize("operands", ["ddr", "on_chip"])
def test_simulation_and_closed_form_agree(operands):
    """The SimPy graph and the closed form on a BERT-base-sized layer (batch 2 keeps the test short): within 10% on
    chip; with DDR the simulation is the slower, and the headline."""
    w = replace(BERT, batch=2, operands=operands)
    closed = model.evaluate(w, ENGINE, DEV).seconds_per_layer
    sim = simulate.simulate(w, ENGINE, DEV)
    assert sim.tiles == 2 * 12 * 32
    if operands == "on_chip":  # no DDR: nothing the closed form leaves out couples the stages
        assert abs(sim.seconds / closed - 1) < 0.10, (sim.seconds, closed)
    else:  # DDR turnaround and many masters on the bank: what the closed form leaves out only adds time
        assert sim.seconds >= closed * 0.99, (sim.seconds, closed)
        assert simulate.headline(closed, sim.seconds) == (sim.seconds, "simulation")
    # the simulation can only be slower than each part's own work
    for part, busy in sim.busy.items():
        assert sim.device_seconds >= busy * (1 - 1e-9), part


def test_simulated_pl_cycles_are_the_pl_tops():
    """With every packet ready, the simulation's PL cycles are the PL top's closed form (equal to Verilator:
    tests/host/backends/test_engine_devices.py)."""
    for seq, pipes in ((40, 2), (128, 3)):
        w = model.workload_from_flags(12, 32, seq)
        d = replace(ENGINE, pipelines=pipes, qk_kernels=2, pv_kernels=2, score_plios=1, lanes_swiftmax=2, max_seq=128)
        assert simulate.simulate_pl(w, d, DEV) == model.engine_pl_cycles(w, d)

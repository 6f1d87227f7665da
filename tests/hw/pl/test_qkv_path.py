"""The Q/K/V path of the sublayer's PL top (hw/pl/buffer_path.py: qkv_path) on Verilator through cocotb
(sim/tb_qkv_path.py), on a split of the performance model: the Q/K/V stage's records, as its cascades make them,
through the re-tilers, the Q/K/V buffer wired as the model wires it (each stream to its banks only) and the
pipelines' readers, whose streams must be golden's packed Q tiles and key slices of the runs the host's schedule
names; more sequences than slots."""

from __future__ import annotations

import dataclasses
import json

import pytest

from vckattn.hw.design.pl_top import qkv_records
from vckattn.hw.perf import engine, sublayer
from vckattn.hw.perf.sublayer import SublayerShape, SublayerSplit
from vckattn.hw.pl.buffer_path import BufferPath, qkv_path
from vckattn.hw.spec.descriptors import descriptor_depths
from vckattn.hw.spec.qkv_buffer import reader_runs
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_qkv_path"
#: 5 sequences of 32 tokens, 4 query heads over 2 K/V heads of 16 features; 8 Q/K/V cascades of 8 x 16 tiles (one
#: block each; six, then two, to an output PLIO), 5 attention pipelines of 2 + 2 kernels (some with no group of some
#: sequence: quiet releases), 8-row Q tiles; banks of 64 beats (the full size's 4,096 would make it one bank)
SHAPE = SublayerShape(batch=5, seq=32, heads=4, head_dim=16, kv_heads=2, family="decoder")
SPLIT = SublayerSplit(8, 2, 5, 2, q_rows=8, qkv_tile=(8, 16, 32), o_tile=(8, 16, 32), score_channels=1)
BANK_BEATS = 64


def plan(s: SublayerShape, sp: SublayerSplit, bank_beats: int, routed: bool = False) -> tuple[BufferPath, dict]:
    """The Q/K/V path of ``sp`` and its testbench's plan; ``routed``: the readers' descriptors through one descriptor
    router whose FIFOs are the least that cannot deadlock (a reader's largest sequence)."""
    lay = sublayer.qkv_layout(s, sp, bank_beats)
    wiring = sublayer.qkv_buffer(s, sp, bank_beats)
    rows, cols = sp.qkv_tile[:2]
    writers = qkv_records(s, sp)
    g = sublayer.attention_geometry(s, sp)
    runs = reader_runs(lay, engine.deal(g.groups, sp.n_att), s.batch)
    top = qkv_path(lay, rows, cols, bank_beats, [sorted(w) for w in wiring.writers],
                   [sorted(r) for r in wiring.readers], descriptor_depths(runs, ahead=1) if routed else None)
    return top, {**dataclasses.asdict(lay), "rows": rows, "cols": cols, "batch": s.batch, "writers": writers,
                 "routed": routed,
                 "runs": [[dataclasses.asdict(r) for r in rr] for rr in runs]}


def test_the_plan_is_the_models_wiring():
    """Each stream wired to some banks only (not a full crossbar), every reader's runs inside its banks, every
    record's columns inside its re-tiler's."""
    top, p = plan(SHAPE, SPLIT, BANK_BEATS)
    buf = top.buffer
    assert buf.banks > 8 and len(buf.write_banks) == len(p["writers"]) >= 2 and len(buf.read_banks) == 3 * 5
    assert buf.read_pairs < len(buf.read_banks) * buf.banks and buf.write_pairs < len(buf.write_banks) * buf.banks
    for banks, runs in zip(buf.read_banks, p["runs"], strict=True):
        for r in runs:
            if not r["quiet"]:
                assert {a // BANK_BEATS for a in range(r["first"], r["first"] + r["beats"])} <= set(banks)
    assert sum(r["quiet"] for rr in p["runs"] for r in rr) > 0  # some reader has no group of some sequence
    assert p["interleave"] == 2  # a head block spans two banks: neighbouring slots in different ones


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("routed", [False, True], ids=["descriptors_a_reader", "descriptors_routed"])
def test_records_to_the_pipelines_streams(routed):
    """``descriptors_routed``: every reader's descriptors from one stream, sequence by sequence, through the
    descriptor router at its least FIFO depths."""
    top, p = plan(SHAPE, SPLIT, BANK_BEATS, routed)
    name = "qkv_path_small_routed" if routed else "qkv_path_small"
    res = run_cocotb(name, [generate_verilog(top, name)], TB, testcase="test_records_to_the_pipelines_streams",
                     extra_env={"VCKATTN_TB_QKV_PATH": json.dumps(p)})
    assert [t.name for t in res.passed] == ["test_records_to_the_pipelines_streams"], res.tests

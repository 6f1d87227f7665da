"""The sublayer PL top's paths through the buffers held per K-slice (hw/pl/buffer_path.py: a_path, x_path) on
Verilator through cocotb (sim/tb_slice_path.py), each on a split of the performance model: the attention pipelines'
A records through their A writers (hw/pl/a_writer.py), or the X mover's stream through the X writer
(hw/pl/x_writer.py), into the buffer wired as the model wires it, and out of the projection stage's x readers, whose
streams must be golden's packed X blocks (pack_x) for the runs the host's schedule names; more sequences than slots.
And the layout (hw/spec/slice_buffer.py) against pack_x, and the A writer's exact division."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from vckattn.golden.gemm_proj import pack_x
from vckattn.hw.perf import engine, sublayer
from vckattn.hw.perf.sublayer import SublayerShape, SublayerSplit
from vckattn.hw.pl.a_writer import reciprocal
from vckattn.hw.pl.buffer_path import BufferPath, a_path, x_path
from vckattn.hw.spec.descriptors import descriptor_depths
from vckattn.hw.spec.slice_buffer import SliceLayout, residual_runs, x_reader_runs
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_slice_path"
#: 5 sequences of 32 tokens, 4 heads of 16 features; 4 pipelines (pipeline p: head p of every sequence, so each A
#: writer reaches only its head's K-slice), 4 W_O cascades of 8 x 32 tiles in two broadcast groups, one running
#: sequences 0-1, the other 2-4 (quiet releases for the others); banks of 64 beats
SHAPE = SublayerShape(batch=5, seq=32, heads=4, head_dim=16, kv_heads=2, family="decoder")
SPLIT = SublayerSplit(8, 4, 4, 2, q_rows=8, qkv_tile=(8, 16, 32), o_tile=(8, 32, 32), score_channels=1)
BANK_BEATS = 64


def plan(s: SublayerShape, sp: SublayerSplit, bank_beats: int) -> tuple[BufferPath, dict]:
    lay = sublayer.a_layout(s, sp, bank_beats)
    wiring = sublayer.a_buffer(s, sp, bank_beats)
    g = sublayer.attention_geometry(s, sp)
    dealt = engine.deal(g.groups, sp.n_att)
    o_units = sublayer.deal_projection(s.d_model // sp.o_tile[1], s.batch, sp.n_o)
    groups = sublayer.broadcast_groups(o_units)
    runs = x_reader_runs(lay, [o_units[grp[0]] for grp in groups], s.batch)
    top = a_path(lay, s.heads, s.head_dim, sp.q_rows, s.batch * s.heads, [sorted(w) for w in wiring.writers],
                 [sorted(r) for r in wiring.readers])
    return top, {**dataclasses.asdict(lay), "kind": "a", "heads": s.heads, "d": s.head_dim, "q_rows": sp.q_rows,
                 "batch": s.batch, "writers": dealt, "runs": [[dataclasses.asdict(r) for r in rr] for rr in runs]}


#: the X path: 6 sequences in 4 slots (X not all on chip), the Q/K/V stage's 8 cascades of 8 x 16 tiles over
#: K-slices of 48 and 16 features, an x reader a K-slice and broadcast group; banks of 64 beats
X_SPLIT = SublayerSplit(8, 4, 4, 2, q_rows=8, qkv_tile=(8, 16, 32), o_tile=(8, 32, 32), score_channels=1,
                        x_on_chip=False)
X_SHAPE = SublayerShape(batch=6, seq=32, heads=4, head_dim=16, kv_heads=2, family="encoder")


def x_plan(s: SublayerShape, sp: SublayerSplit, bank_beats: int, lanes: int = 4,
           routed: bool = False) -> tuple[BufferPath, dict]:
    """The X path of ``sp``: its x readers and, with X kept on chip, a residual reader a W_O cascade (rows of
    ``lanes`` int8), in the model's reader order; ``routed``: the readers' descriptors through one descriptor router
    whose FIFOs are the least that cannot deadlock (a reader's largest sequence)."""
    lay = sublayer.x_layout(s, sp, bank_beats)
    wiring = sublayer.x_buffers(s, sp, bank_beats)["x"]
    units = sublayer.deal_projection(s.qkv_cols // sp.qkv_tile[1], s.batch, sp.n_qkv)
    runs = x_reader_runs(lay, [units[grp[0]] for grp in sublayer.broadcast_groups(units)], s.batch)
    rows, cols = sp.o_tile[:2]
    o_units = [u for u in sublayer.deal_projection(s.d_model // cols, s.batch, sp.n_o) if u] if sp.x_on_chip else []
    res = residual_runs(lay, o_units, s.batch, rows, cols)
    readers = [sorted(r) for r in wiring.readers]
    assert len(readers) == len(runs) + len(res)  # the model's x readers, then one a W_O cascade (X kept on chip)
    depths = descriptor_depths([*runs, *res], ahead=1) if routed else None
    top = x_path(lay, [sorted(w) for w in wiring.writers], readers[:len(runs)], readers[len(runs):], cols // 16,
                 lanes, depths)
    return top, {**dataclasses.asdict(lay), "kind": "x", "heads": s.heads, "d": s.head_dim, "q_rows": sp.q_rows,
                 "batch": s.batch, "writers": [list(range(s.batch))], "routed": routed,
                 "runs": [[dataclasses.asdict(r) for r in rr] for rr in (*runs, *res)],
                 **({"residual": {"units": o_units, "cols": cols, "lanes": lanes}} if res else {})}


#: X kept on chip (6 sequences, 6 slots) with the residual paths: 4 W_O cascades of 8 x 32 tiles, one residual reader
#: each; the second block's channels (32-63) reach both K-slices (48 and 16 features)
R_SPLIT = dataclasses.replace(X_SPLIT, x_on_chip=True)


def _runs_inside_their_banks(buf: object, runs: list[list[dict]]) -> None:
    """Every run of every reader lies inside the banks its read port is wired to."""
    for banks, rr in zip(buf.read_banks, runs, strict=True):  # type: ignore[attr-defined]
        for r in rr:
            assert {a // BANK_BEATS for a in range(r["first"], r["first"] + r["beats"])} <= set(banks)


def test_residual_runs_are_a_records_rows_block_by_block():
    """A residual reader's runs, beat after beat, are every record's 16-feature blocks in order, the 4 rows inside,
    each run inside one K-slice's region; the record's channels may reach two K-slices."""
    lay = SliceLayout((48, 16, 32), 8, 32, 3, 16)
    units = [[(0, 0), (1, 0), (2, 1)], [(1, 2)]]  # 3 blocks of 32 channels: block 1 spans slices 0 and 1
    runs = residual_runs(lay, units, 4, 8, 32)
    for cascade, rr in zip(units, runs, strict=True):
        beats = [a for r in rr if not r.quiet for a in range(r.first, r.first + r.beats)]
        want = [lay.beat(b, tok + i, blk * 32 + 16 * f) for blk, b in cascade for tok in range(0, 32, 4)
                for f in range(2) for i in range(4)]
        assert beats == want
        for r in rr:
            if not r.quiet:
                j = {lay.slice_of(f) for f in range(r.head * 32, r.head * 32 + 32)}
                assert {a // 16 for a in range(r.first, r.first + r.beats)} <= {
                    k for jj in j for k in lay.region_banks(jj)}
        assert [r.b for r in rr if r.release] == [0, 1, 2, 3]  # one release a sequence, quiet where none
    assert [r.beats for r in runs[0] if r.head == 1 and r.index == 0] == [4, 4]  # 4 rows of slice 0, then of 1
    with pytest.raises(ValueError, match="rows a multiple of 4"):
        residual_runs(lay, units, 4, 6, 32)


def test_the_residual_plan_is_the_models_wiring():
    top, p = x_plan(X_SHAPE, R_SPLIT, BANK_BEATS)
    buf = top.buffer
    res = p["runs"][-len(p["residual"]["units"]):]
    assert buf.slots == X_SHAPE.batch and len(res) == 4
    # the second block's first 4 rows of a sequence: two runs, one a K-slice
    assert any(len([r for r in rr if (r["b"], r["head"], r["index"]) == (5, 1, 0)]) == 2 for rr in res)
    _runs_inside_their_banks(buf, p["runs"])


def test_the_layout_holds_pack_x_blocks():
    """Every beat SliceLayout.beat names holds, for every row tile and K-slice, pack_x's beat of that block."""
    lay = SliceLayout((48, 16, 32), 8, 32, 3, 16)
    a = np.random.default_rng(0).integers(-128, 128, size=(5, 32, 96)).astype(np.int8)
    for b in range(5):
        img = {}
        for t in range(32 // 8):
            tok = t * 8
            for f in range(0, 96, 16):
                for i in range(8):
                    img[lay.beat(b, tok + i, f)] = a[b, tok + i, f:f + 16].tobytes()
            for j, k in enumerate(lay.slices):
                lo = sum(lay.slices[:j])
                packed = pack_x(a[b, tok:tok + 8, lo:lo + k]).tobytes()
                for beat in range(lay.block_beats(j)):
                    assert img[lay.block(b, t, j) + beat] == packed[16 * beat:16 * beat + 16], (b, t, j, beat)
    # 3 slots x 32 tokens = 96 rows: 96 x 3 beats = 18 banks of 16, 96 x 1 = 6, 96 x 2 = 12
    assert [lay.region_banks(j) for j in range(3)] == [range(18), range(18, 24), range(24, 36)]


def test_the_sequence_of_a_group_is_an_exact_division():
    for heads in (1, 3, 9, 12, 14):
        m, s = reciprocal(heads, 64 * heads)
        assert all((g * m) >> s == g // heads for g in range(64 * heads))


def test_the_plan_is_the_models_wiring():
    top, p = plan(SHAPE, SPLIT, BANK_BEATS)
    buf = top.buffer
    assert buf.write_pairs < buf.writers * buf.banks and buf.read_pairs < buf.readers_n * buf.banks
    assert sum(r["quiet"] for rr in p["runs"] for r in rr) > 0
    _runs_inside_their_banks(buf, p["runs"])


def test_the_x_plan_is_the_models_wiring():
    top, p = x_plan(X_SHAPE, X_SPLIT, BANK_BEATS)
    buf = top.buffer
    assert buf.slots == 4 < X_SHAPE.batch and buf.readers_n == len(p["runs"]) >= 2
    assert buf.read_pairs < buf.readers_n * buf.banks  # each x reader its K-slice's region
    assert "residual" not in p  # X not kept on chip: no residual readers
    _runs_inside_their_banks(buf, p["runs"])


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("kind", ["a", "x", "x_residual", "x_residual_routed"])
def test_records_to_the_readers_streams(kind):
    """``x_residual_routed``: every reader's descriptors from one stream, sequence by sequence, through the
    descriptor router at its least FIFO depths."""
    top, p = {"a": lambda: plan(SHAPE, SPLIT, BANK_BEATS), "x": lambda: x_plan(X_SHAPE, X_SPLIT, BANK_BEATS),
              "x_residual": lambda: x_plan(X_SHAPE, R_SPLIT, BANK_BEATS),
              "x_residual_routed": lambda: x_plan(X_SHAPE, R_SPLIT, BANK_BEATS, routed=True)}[kind]()
    name = f"{kind}_path_small"
    res = run_cocotb(name, [generate_verilog(top, name)], TB, testcase="test_records_to_the_readers_streams",
                     extra_env={"VCKATTN_TB_SLICE_PATH": json.dumps(p)})
    assert [t.name for t in res.passed] == ["test_records_to_the_readers_streams"], res.tests

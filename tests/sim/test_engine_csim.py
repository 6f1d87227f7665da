"""C-simulation of the scalable engine (stream contract v3, hw/ENGINE.md): the movers mm2s_engine (q and kv command
lists), the AIE kernels qk_tile / pv_tile (hw/aie/engine/engine_kernels.h, scalar and vector paths), per score
channel a randomly interleaving pktmerge, the PL top's channel (Amaranth, Verilated) and pktsplit, the cascade (the
last P.V kernel requantizes O with the 16-bit rq_mult and rq_shift of its LOAD_V header) and the output mover
s2mm_engine, chained per pipeline, against A records computed from golden only (golden.engine numerics,
exact_int_matmul, requantize on the logical matrices), bit for bit.

The card buffers are built here from golden's pack functions and hw.spec.streams.encode (not the host's packer):
per tile a TILE descriptor into the re-tiled Q, per group k LOAD_K then k LOAD_V descriptors into the re-tiled K / V.
The output mover writes A of tile t into slot t of one shared buffer and each pipeline's RESULT headers into its
done log."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from vckattn.golden.aie_matmul import exact_int_matmul
from vckattn.golden.engine import (
    RQ_MULT_BITS,
    engine_format,
    engine_p,
    engine_registers,
    engine_scores,
    pack_k,
    pack_q,
    pack_v,
    score_shift_for,
    tile_keep,
)
from vckattn.golden.requant import RequantRegisters, requant_registers, requantize
from vckattn.golden.swiftmax_int import SwiftMaxHeads, swiftmax_head_registers, swiftmax_registers
from vckattn.hw.spec import streams
from vckattn.sim.engine_csim import EngineParams, run_engine_launch

TOOLS = pytest.mark.tool("g++", "hls4ml", "verilator")

S_Q, S_K = 0.02, 0.02
OK, BAD_ROWS, BAD_SLICE, NOT_IN_SLICE, MISROUTE, BAD_RQ_SHIFT = 0, 2, 5, 7, 9, 10  # engine_kernels.h Status

#: the builds these tests use (each one g++ build per path, cached under build/hls/): the small generated instance's
#: shape, a 2-channel build of 12-row tiles (one row block per register block) and int16 scores, a one-kernel build,
#: and a three-kernel build (a middle P.V kernel) of three channels
BUILDS = {
    "small": dict(kernels=2, score_plios=1, q_rows=16, d=64, max_keys=128, score_bits=8),
    "m2_rows12_int16": dict(kernels=4, score_plios=2, q_rows=12, d=32, max_keys=128, score_bits=16),
    "k1_int16": dict(kernels=1, score_plios=1, q_rows=8, d=48, max_keys=64, score_bits=16),
    "k3_m3": dict(kernels=3, score_plios=3, q_rows=16, d=16, max_keys=96, score_bits=8),
}


@dataclass
class Tile:
    tile_id: int
    rows: int
    q0: int
    causal: bool
    q: np.ndarray  # (q_rows, D) int8, features >= d zero
    head: int = 0  # query head: selects the normalizer's register set (TILE header -> score packet header)


@dataclass
class Group:
    group_id: int  # row of the K / V source buffers
    valid_keys: int
    k: np.ndarray  # (MAX_KEYS, D) int8: keys at and beyond valid_keys hold random values (they must be masked)
    v: np.ndarray
    tiles: list[Tile]


def _i8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-90, 91, size=shape).astype(np.int8)


def make_groups(rng: np.random.Generator, p: EngineParams, d: int, specs: list[tuple[int, list[tuple[int, int, bool]]]],
                first_tile: int, first_group: int) -> list[Group]:
    """Groups from specs ``(valid_keys, [(rows, q0, causal), ...])``; tile ids (A slots) from ``first_tile``."""
    groups, tid = [], first_tile
    for g, (valid, tiles) in enumerate(specs):
        ts = []
        for rows, q0, causal in tiles:
            q = np.zeros((p.q_rows, p.d), np.int8)
            q[:, :d] = _i8(rng, p.q_rows, d)
            ts.append(Tile(tid, rows, q0, causal, q))
            tid += 1
        k = np.zeros((p.max_keys, p.d), np.int8)
        v = np.zeros((p.max_keys, p.d), np.int8)
        k[:, :d], v[:, :d] = _i8(rng, p.max_keys, d), _i8(rng, p.max_keys, d)
        groups.append(Group(first_group + g, valid, k, v, ts))
    return groups


def _desc(header: np.ndarray, offset: int) -> np.ndarray:
    out = np.zeros(32, np.uint8)
    out[:16] = header
    out[16:24] = np.array([offset], "<u8").view(np.uint8)
    return out


def golden_o(p: EngineParams, g: Group, t: Tile, regs, shift: int) -> np.ndarray:
    acc = exact_int_matmul(t.q, g.k.T)
    keep = tile_keep(p.q_rows, p.max_keys, t.rows, t.q0, g.valid_keys, t.causal)
    sc = engine_scores(acc, keep, shift, p.score_bits)
    prob = engine_p(sc, regs, p.score_bits, head=t.head if isinstance(regs, SwiftMaxHeads) else None)
    return np.asarray(exact_int_matmul(prob.astype(np.int64), g.v.astype(np.int64)), dtype=np.int64)


@dataclass
class Launch:
    params: EngineParams
    shift: int
    regs: object
    rq: RequantRegisters
    groups: list[list[Group]]  # per pipeline

    def all_groups(self) -> list[Group]:
        return [g for gs in self.groups for g in gs]

    def n_tiles(self) -> list[int]:
        return [sum(len(g.tiles) for g in gs) for gs in self.groups]

    def buffers(self, mutate=None):
        """q_src (tiles, Q·D), k_src / v_src (groups, k, SK·D) and per pipeline the q and kv command lists."""
        p = self.params
        k, sk = p.kernels, p.slice_keys
        tiles = sorted((t for g in self.all_groups() for t in g.tiles), key=lambda t: t.tile_id)
        q_src = pack_q(np.stack([t.q for t in tiles]))
        gs = sorted(self.all_groups(), key=lambda g: g.group_id)
        k_src = pack_k(np.stack([g.k.reshape(k, sk, p.d) for g in gs]))
        v_src = pack_v(np.stack([g.v.reshape(k, sk, p.d) for g in gs]))
        q_cmds, kv_cmds = [], []
        for pipe in self.groups:
            qc, kc = [], []
            for g in pipe:
                first = g.tiles[0].tile_id
                for j in range(2 * k):
                    rq = {} if j < k else {"rq_mult": streams.int16_bits(self.rq.mult), "rq_shift": int(self.rq.shift)}
                    h = streams.encode("slice", packet_id=j, op=streams.OP_LOAD_K if j < k else streams.OP_LOAD_V,
                                       slice=j % k, tiles=len(g.tiles), first_tile=first, **rq)
                    kc.append(_desc(h, (g.group_id * k + j % k) * sk * p.d))
                for t in g.tiles:
                    h = streams.encode("tile", op=streams.OP_TILE, causal=int(t.causal), score_shift=self.shift,
                                       valid_keys=g.valid_keys, rows=t.rows, q0=t.q0, head=t.head, tag=t.tile_id)
                    qc.append(_desc(h, t.tile_id * p.q_rows * p.d))
            q_cmds.append(np.array(qc, np.uint8).reshape(-1, 32))
            kv_cmds.append(np.array(kc, np.uint8).reshape(-1, 32))
        if mutate:
            mutate(q_cmds, kv_cmds)
        return q_cmds, kv_cmds, q_src, k_src, v_src

    def expected(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The A buffer (tile t in slot t) and each pipeline's done log (command order), from golden."""
        p = self.params
        a = np.zeros((sum(self.n_tiles()), p.q_rows, p.d), np.int8)
        done = []
        for pipe, gs in enumerate(self.groups):
            recs = []
            for g in gs:
                for t in g.tiles:
                    a[t.tile_id] = requantize(golden_o(p, g, t, self.regs, self.shift), self.rq)
                    recs.append(streams.encode("result", tile_id=t.tile_id, rows=t.rows, pipeline=pipe, d=p.d))
            done.append(np.array(recs, np.uint8).reshape(-1, 16))
        return a, done

    def run(self, seed: int = 0, vector: bool = False, corrupt: str | None = None, mutate=None, **kw):
        q_cmds, kv_cmds, q_src, k_src, v_src = self.buffers(mutate)
        return run_engine_launch(self.params, q_cmds, kv_cmds, q_src, k_src, v_src, self.n_tiles(), self.regs,
                                 seed=seed, vector=vector, corrupt=corrupt, **kw)


def specs_for(p: EngineParams) -> list[list[tuple[int, list[tuple[int, int, bool]]]]]:
    """Per pipeline, groups ``(valid_keys, [(rows, q0, causal), ...])``: padding (valid keys below MAX_KEYS, some
    slices fully masked), causal tiles, partial tiles (rows < Q_ROWS), unmasked tiles, several groups, one group of
    one tile."""
    mk, r = p.max_keys, p.q_rows
    return [
        [(mk, [(r, 0, False), (r, r, False)]),
         (mk - 19, [(r, 0, True), (r - 3, r, False)]),
         (mk // 3 + 1, [(r, 2 * r, True), (5, 0, False), (r, mk - r, True)])],
        [(mk, [(r, mk - r, True), (r, 0, False)]),
         (7, [(r, 0, False)])],
    ]


def make_launch(build: str, d: int | None = None, seed: int = 7, n_heads: int | None = None) -> Launch:
    """A launch of :func:`specs_for` on build ``build`` (head size ``d``, default D); ``n_heads``: per-head SwiftMax
    constants (a different β / γ per head) and the tiles' query heads spread over them."""
    p = EngineParams(pipelines=2, **BUILDS[build])
    d = p.d if d is None else d
    rng = np.random.default_rng(seed)
    groups, first_tile, first_group = [], 0, 0
    for spec in specs_for(p):
        gs = make_groups(rng, p, d, spec, first_tile, first_group)
        groups.append(gs)
        first_tile += sum(len(t) for _, t in spec)
        first_group += len(spec)
    if n_heads is not None:
        for g in (g for gs in groups for g in gs):
            for t in g.tiles:
                t.head = (7 * t.tile_id + 3) % n_heads
    absmax = max(int(np.abs(exact_int_matmul(t.q, g.k.T)).max()) for gs in groups for g in gs for t in g.tiles)
    shift = max(0, score_shift_for(absmax, p.score_bits) - 1)  # one bit short: the largest scores saturate
    fmt = engine_format(p.score_bits)
    base = (swiftmax_registers(S_Q, S_K, d, beta=4.0, gamma=24.0, out_frac=8, fmt=fmt) if n_heads is None else
            swiftmax_head_registers(S_Q, S_K, d, np.linspace(2.5, 5.5, n_heads), np.geomspace(8.0, 64.0, n_heads),
                                    8, n_heads, fmt))
    regs = engine_registers(base, S_Q, S_K, d, shift, fmt)
    launch = Launch(p, shift, regs, RequantRegisters(np.int64(1), np.int64(0)), groups)
    o_max = max(int(np.abs(golden_o(p, g, t, regs, shift)).max()) for gs in groups for g in gs for t in g.tiles)
    launch.rq = requant_registers(110.0 / max(o_max, 1), bits=RQ_MULT_BITS)  # the engine's 16-bit multiplier
    return launch


def assert_bit_exact(launch: Launch, res) -> None:
    assert res.failed == {} and res.leftover == {} and res.missing == {}, (res.failed, res.leftover, res.missing)
    want_a, want_done = launch.expected()
    assert res.a.shape == want_a.shape
    bad = np.flatnonzero(res.a != want_a)
    assert bad.size == 0, f"{bad.size} A bytes differ, first at {bad[:8]}"
    for pipe, (got, exp) in enumerate(zip(res.done, want_done, strict=True)):
        assert np.array_equal(got, exp), f"pipeline {pipe}: done log differs"
    assert res.records == launch.n_tiles()
    p = launch.params
    assert res.packets == [[n * p.per_channel] * p.score_plios for n in launch.n_tiles()]  # k packets a tile
    assert np.count_nonzero(want_a) > want_a.size // 4  # the layer produces signal, not all-zero tiles


@TOOLS
@pytest.mark.parametrize("build, d, vector", [("small", 64, False), ("small", 32, True), ("m2_rows12_int16", 32, False),
                                              ("m2_rows12_int16", 16, True), ("k1_int16", 48, False),
                                              ("k3_m3", 16, True)])
def test_engine_csim_is_bit_exact_with_golden(build, d, vector):
    launch = make_launch(build, d)
    assert_bit_exact(launch, launch.run(seed=0, vector=vector))


@TOOLS
@pytest.mark.parametrize("build, n_heads, vector", [("small", 3, False), ("m2_rows12_int16", 32, True),
                                                    ("k1_int16", 5, False), ("small", 6, True)])
def test_engine_csim_per_head_is_bit_exact_with_golden(build, n_heads, vector):
    """Per-head SwiftMax constants (register map v2): each TILE header carries its query head, the QK^T kernels copy it
    into their score packets' headers and the PL top uses b_beta[head] / c_out[head]."""
    launch = make_launch(build, seed=5, n_heads=n_heads)
    heads = {t.head for g in launch.all_groups() for t in g.tiles}
    assert len(heads) > 2 and isinstance(launch.regs, SwiftMaxHeads) and not launch.regs.uniform
    q_cmds = launch.buffers()[0]  # the heads are in the TILE headers of the q command lists
    for gs, qc in zip(launch.groups, q_cmds, strict=True):
        got = [streams.decode("tile", row[:16])["head"] for row in qc]
        assert got == [t.head for g in gs for t in g.tiles]
    assert_bit_exact(launch, launch.run(seed=3, vector=vector))
    # with head 0's constants for every tile the result differs: the per-head selection is exercised
    flat = make_launch(build, seed=5, n_heads=n_heads)
    flat.regs = SwiftMaxHeads.broadcast(launch.regs[0], n_heads)
    assert not np.array_equal(flat.expected()[0], launch.expected()[0])


@TOOLS
def test_engine_csim_one_register_set_is_broadcast():
    """run_engine_launch takes a plain SwiftMaxRegisters as a one-head layer (head 0 in every TILE)."""
    launch = make_launch("small")
    assert not isinstance(launch.regs, SwiftMaxHeads)
    res = launch.run(seed=1)
    assert_bit_exact(launch, res)
    launch.regs = SwiftMaxHeads.broadcast(launch.regs, 1)
    np.testing.assert_array_equal(launch.run(seed=1).a, res.a)


@TOOLS
@pytest.mark.parametrize("vector", [False, True])
def test_engine_csim_extreme_operands_are_bit_exact_with_golden(vector):
    """The int8 corners on every key: Q all -128 against K all -128 or all 127 (|S| at its largest, D products of
    (-128)(-128), and of (-128)(127)), V all 127 or all -128; the score shift set for that |S|: the kernels'
    accumulators, the narrowing and the cascade agree with golden, scalar and vector paths."""
    launch = make_launch("small", seed=17)
    p = launch.params
    for n, g in enumerate(launch.all_groups()):
        g.k[:] = -128 if n % 2 == 0 else 127
        g.v[:] = 127 if n % 2 == 0 else -128
        for t in g.tiles:
            t.q[:] = -128
    accs = [exact_int_matmul(t.q, g.k.T) for g in launch.all_groups() for t in g.tiles]
    assert {int(a.max()) for a in accs} == {128 * 128 * p.d, -128 * 127 * p.d}
    launch.shift = score_shift_for(128 * 128 * p.d, p.score_bits)
    o_max = max(int(np.abs(golden_o(p, g, t, launch.regs, launch.shift)).max()) for g in launch.all_groups()
                for t in g.tiles)
    launch.rq = requant_registers(110.0 / o_max, bits=RQ_MULT_BITS)
    assert_bit_exact(launch, launch.run(seed=4, vector=vector))


@TOOLS
def test_engine_csim_a_wrong_register_is_caught():
    """A perturbed SwiftMax register (b_beta + 700) changes the C-simulated A records: the bit-exact comparison with
    golden is not vacuous (and the perturbed launch is still golden's result for the registers it was given)."""
    launch = make_launch("small")
    want = launch.expected()[0]
    launch.regs = launch.regs.replace(b_beta=launch.regs.b_beta + 700)
    res = launch.run(seed=0)
    assert not np.array_equal(res.a, want)
    assert_bit_exact(launch, res)


@TOOLS
@pytest.mark.parametrize("vector", [False, True])
def test_engine_csim_requantizes_on_the_aie_like_golden(vector):
    """The requantizer at the end of the cascade (rq_mult / rq_shift from P.V kernel 0's LOAD_V header, along the
    cascade; the vector path's int32 x int16
    multiply into acc80 and srs to int8): rounding half up on exact ties of both signs (a power-of-two multiplier makes
    ties frequent: -x.5 goes up, not away from zero) and saturation at both ends of [-128, 127], as golden
    requantize."""
    launch = make_launch("small", seed=13)
    o = np.concatenate([golden_o(launch.params, g, t, launch.regs, launch.shift).ravel()
                        for g in launch.all_groups() for t in g.tiles])
    shift = 14 + int(np.ceil(np.log2(int(np.abs(o).max()) / 200)))  # |A| up to ~200: both ends saturate
    launch.rq = RequantRegisters(np.int64(1 << 14), np.int64(shift))
    ties = ((o * (1 << 14)) % (1 << shift) == 1 << (shift - 1)) & (np.abs(o) < 127 << (shift - 14))  # unsaturated
    assert ties[o < 0].any() and ties[o > 0].any()
    want = launch.expected()[0]
    assert (want == 127).any() and (want == -128).any()
    assert_bit_exact(launch, launch.run(seed=2, vector=vector))
    # the multiplier's sign bit: a negative int16 rq_mult travels as its two's complement
    launch.rq = RequantRegisters(np.int64(-(1 << 14) - 3), np.int64(shift))
    assert_bit_exact(launch, launch.run(seed=2, vector=vector))


@TOOLS
def test_engine_csim_merge_order_does_not_change_the_result():
    launch = make_launch("m2_rows12_int16", seed=11)
    for s in (1, 2):
        assert_bit_exact(launch, launch.run(seed=s))


def _patch(cmds: np.ndarray, row: int, kind: str, **fields) -> None:
    f = streams.decode(kind, cmds[row, :16])
    cmds[row, :16] = streams.encode(kind, **(f | fields))


@TOOLS
def test_engine_csim_refuses_tiles_and_slices_the_kernels_cannot_act_on():
    launch = make_launch("small")
    # pipeline 0's second group's first tile claims a tile id of the first group: outside its K / V slices' range
    res = launch.run(mutate=lambda q, kv: _patch(q[0], 2, "tile", tag=0))
    qk = {k: s for k, s in res.status.items() if k.startswith("p0.qk")}
    assert qk and all(s.code == NOT_IN_SLICE for s in qk.values()), qk
    assert "misrouted tile" in qk["p0.qk0"].text and res.leftover  # the rest stays unread
    assert res.status["p1.qk0"].code == OK and res.records[1] == launch.n_tiles()[1]
    # a TILE with more rows than the build's Q_ROWS
    res = launch.run(mutate=lambda q, kv: _patch(q[1], 0, "tile", rows=launch.params.q_rows + 1))
    assert res.status["p1.qk0"].code == BAD_ROWS and res.status["p1.qk1"].code == BAD_ROWS
    # a K slice with the wrong slice index, a V slice announcing no tiles
    res = launch.run(mutate=lambda q, kv: _patch(kv[0], 1, "slice", slice=0))
    assert res.status["p0.qk1"].code == BAD_SLICE and res.status["p0.qk0"].code == OK
    res = launch.run(mutate=lambda q, kv: _patch(kv[1], 2, "slice", tiles=0))
    assert res.status["p1.pv0"].code == BAD_SLICE and "SLICE header" in res.status["p1.pv0"].text
    # a V slice whose requantization shift is beyond the SRS range (the 6-bit field holds 63)
    res = launch.run(mutate=lambda q, kv: _patch(kv[0], 3, "slice", rq_shift=63))
    assert res.status["p0.pv1"].code == BAD_RQ_SHIFT and "rq_shift" in res.status["p0.pv1"].text
    assert res.status["p0.pv0"].code == OK and res.records[0] == 0
    # a descriptor of the wrong kind stops the mover
    res = launch.run(mutate=lambda q, kv: _patch(q[0], 3, "tile", op=streams.OP_LOAD_K))
    assert res.status["p0.mm2s_q"].code != OK and res.records[0] < launch.n_tiles()[0]


@TOOLS
def test_engine_csim_short_streams_are_reported():
    """A command list one entry short (pipeline 0's kv list without its last V slice; pipeline 1's q list without its
    last tile) is no success: the pipeline's last tiles never reach the output mover and what was sent for them is
    counted as left over, while the other pipeline completes."""
    launch = make_launch("small")
    n = launch.n_tiles()
    res = launch.run(mutate=lambda q, kv: kv.__setitem__(0, kv[0][:-1]))
    assert not res.ok and res.leftover and res.records[0] < n[0] and res.records[1] == n[1]
    res = launch.run(mutate=lambda q, kv: q.__setitem__(1, q[1][:-1]))
    assert not res.ok and res.leftover and res.records[1] < n[1] and res.records[0] == n[0]


@TOOLS
@pytest.mark.parametrize("corrupt, kernel", [("swap_ids", None), ("swap_order", "p0.pv1")])
def test_engine_csim_misrouted_packet_is_refused(corrupt, kernel):
    launch = make_launch("small")
    res = launch.run(corrupt=corrupt)
    pv = {k: s for k, s in res.status.items() if k.startswith("p0.pv")}
    bad = {k: s for k, s in pv.items() if s.code == MISROUTE}
    assert bad, pv
    if kernel:
        assert kernel in bad
    assert "misrouted" in next(iter(bad.values())).text
    assert res.records[0] < launch.n_tiles()[0]
    assert res.status["p1.pv0"].code == OK and res.records[1] == launch.n_tiles()[1]  # only pipeline 0 corrupted


def test_engine_csim_missing_compiler_raises(monkeypatch):
    from vckattn.sim.hls_csim import HlsToolsMissing

    monkeypatch.setenv("CXX", "no-such-compiler-vckattn")
    launch = make_launch("small")
    with pytest.raises(HlsToolsMissing, match="no-such-compiler"):
        launch.run()


def test_engine_params_are_checked():
    with pytest.raises(ValueError, match="score_bits"):
        EngineParams(pipelines=1, kernels=2, score_bits=12)
    with pytest.raises(ValueError, match="max_keys"):
        EngineParams(pipelines=1, kernels=2, max_keys=48)
    with pytest.raises(ValueError, match="score_plios"):
        EngineParams(pipelines=1, kernels=4, score_plios=3)
    with pytest.raises(ValueError, match="q_rows"):
        EngineParams(pipelines=1, kernels=2, q_rows=10)
    with pytest.raises(ValueError, match="kernels must be 1..16"):
        EngineParams(pipelines=1, kernels=17, max_keys=16 * 17)
    with pytest.raises(ValueError, match="int16 mask"):
        EngineParams(pipelines=1, kernels=1, max_keys=32752, q_rows=32)


@TOOLS
@pytest.mark.parametrize("kernels, plios, q_rows, d, max_keys, bits", [
    (4, 1, 32, 64, 512, 8), (4, 2, 16, 64, 512, 16), (2, 2, 12, 32, 256, 8), (8, 4, 16, 128, 1024, 8),
    (1, 1, 4, 16, 16, 16)])
def test_kernel_memory_equals_the_kernels_sizeof(tmp_path, kernels, plios, q_rows, d, max_keys, bits):
    """hw/spec/functional.py: buffer_bytes / state_bytes / kernel_memory (the generator's memory check, the model's
    kernel memory) are the kernels' constants and sizeof, compiled."""
    import subprocess

    from vckattn.hw.spec.functional import buffer_bytes, kernel_memory, state_bytes
    from vckattn.sim.engine_csim import ENGINE_DIR
    from vckattn.sim.hls_csim import REPO_ROOT

    src = tmp_path / "mem.cpp"
    src.write_text('#include <cstdio>\n#include "engine_kernels.h"\nusing namespace vckattn_engine;\n'
                   'int main() { std::printf("%d %d %d %d %d %d %d %d %d %d %d %d %d\\n", '
                   "Q_BUFFER_BYTES, K_BUFFER_BYTES, "
                   "S_BUFFER_BYTES, P_BUFFER_BYTES, V_BUFFER_BYTES, O_BUFFER_BYTES, (int)sizeof(QkState), "
                   "(int)sizeof(PvState), (int)sizeof(RqState), (int)sizeof(MaskTables), QK_DATA_BYTES, PV_DATA_BYTES, "
                   "RQ_DATA_BYTES); "
                   "}\n")
    p = EngineParams(pipelines=1, kernels=kernels, score_plios=plios, q_rows=q_rows, d=d, max_keys=max_keys,
                     score_bits=bits)
    exe = tmp_path / "mem"
    subprocess.run(["g++", "-std=c++14", f"-I{ENGINE_DIR}", f"-I{REPO_ROOT / 'hw' / 'aie'}", *p.defines(), str(src),
                    "-o", str(exe)], check=True, timeout=120)
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    b, st, mem = buffer_bytes(p), state_bytes(p), kernel_memory(p)
    assert got == [b["q"], b["k"], b["s"], b["p"], b["v"], b["o"], st["qk"], st["pv"], st["rq"], st["tables"],
                   mem["qk"], mem["pv_first"], mem["rq"]]
    assert mem["pv_mid"] == mem["pv_first"]

"""C-simulation of the scalable engine (hw/ENGINE.md): the AIE kernels qk_slice / pv_slice
(hw/aie/engine/engine_kernels.h), the PL normalizer swiftmax_engine_hls and the output mover s2mm_engine,
chained per pipeline through a randomly interleaving pktmerge and pktsplit, against A records computed
from golden only (golden.engine, exact_int_matmul, requantize), bit for bit.

The command buffers are packed here with hw.engine.streams.encode (not the host's packer). The output mover
writes A of tile t into slot t of one shared buffer and each pipeline's RESULT headers into its done log."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from vckattn.golden.aie_matmul import exact_int_matmul
from vckattn.golden.engine import (
    engine_format,
    engine_p,
    engine_registers,
    engine_scores,
    score_shift_for,
    slice_blocks,
    tile_keep,
)
from vckattn.golden.requant import RequantRegisters, requant_registers, requantize
from vckattn.golden.swiftmax_int import SwiftMaxHeads, swiftmax_head_registers, swiftmax_registers
from vckattn.hw.engine import streams
from vckattn.sim.engine_csim import EngineParams, run_engine_launch

TOOLS = pytest.mark.tool("g++", "hls4ml")

S_Q, S_K = 0.02, 0.02
OK, TILE_MISMATCH, MISROUTE = 0, 7, 10  # engine_kernels.h Status


@dataclass
class Tile:
    tile_id: int
    rows: int
    q0: int
    causal: bool
    q: np.ndarray  # (q_rows, d) int8
    head: int = 0  # query head: selects the normalizer's register set (TILE header -> score packet header)


@dataclass
class Group:
    group_id: int
    n_kb: int
    valid_keys: int
    k: np.ndarray  # (keys_pad, d) int8
    v: np.ndarray
    tiles: list[Tile]


def _i8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-90, 91, size=shape).astype(np.int8)


def make_groups(rng: np.random.Generator, params: EngineParams, d: int, pipeline: int,
                specs: list[tuple[int, int, list[tuple[int, int, bool]]]], first_id: int = 0) -> list[Group]:
    """Groups from specs ``(n_kb, valid_keys, [(rows, q0, causal), ...])``; tile ids (A slots) from ``first_id``."""
    groups = []
    tid = first_id
    for g, (n_kb, valid, tiles) in enumerate(specs):
        keys = n_kb * params.key_block
        ts = []
        for rows, q0, causal in tiles:
            ts.append(Tile(tid, rows, q0, causal, _i8(rng, params.q_rows, d)))
            tid += 1
        groups.append(Group(100 * pipeline + g, n_kb, valid, _i8(rng, keys, d), _i8(rng, keys, d), ts))
    return groups


def pack(groups: list[Group], d: int, shift: int, *, tile_n_kb_delta: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """qk_in and v_in bytes of one pipeline (LOAD_K, TILEs on qk_in; LOAD_V on v_in)."""
    qk, v = [], []
    for g in groups:
        qk.append(streams.encode("command", op=streams.OP_LOAD_K, n_kb=g.n_kb, d=d, valid_keys=g.valid_keys,
                                 tag=g.group_id))
        qk.append(g.k.view(np.uint8).reshape(-1))
        v.append(streams.encode("command", op=streams.OP_LOAD_V, n_kb=g.n_kb, d=d, valid_keys=g.valid_keys,
                                tiles=len(g.tiles), tag=g.group_id))
        v.append(g.v.view(np.uint8).reshape(-1))
        n = len(g.tiles)
        qk_heads = streams.encode_many(
            "command", n, op=streams.OP_TILE, n_kb=g.n_kb + tile_n_kb_delta, d=d, valid_keys=g.valid_keys,
            rows=[t.rows for t in g.tiles], q0=[t.q0 for t in g.tiles], causal=[int(t.causal) for t in g.tiles],
            score_shift=shift, tag=[t.tile_id for t in g.tiles], head=[t.head for t in g.tiles])
        for h, t in zip(qk_heads, g.tiles, strict=True):
            qk += [h, t.q.view(np.uint8).reshape(-1)]
    return np.concatenate(qk), np.concatenate(v)


def golden_o(params: EngineParams, g: Group, t: Tile, regs, shift: int) -> np.ndarray:
    keys = g.n_kb * params.key_block
    acc = exact_int_matmul(t.q, g.k.T)
    keep = tile_keep(params.q_rows, keys, t.rows, t.q0, g.valid_keys, t.causal)
    p = engine_p(engine_scores(acc, keep, shift, params.score_bits), regs, params.score_bits,
                 head=t.head if isinstance(regs, SwiftMaxHeads) else None)
    return np.asarray(exact_int_matmul(p.astype(np.int64), g.v.astype(np.int64)), dtype=np.int64)


@dataclass
class Launch:
    params: EngineParams
    d: int
    shift: int
    regs: object
    rq: RequantRegisters
    groups: list[list[Group]]  # per pipeline

    def buffers(self, **kw) -> tuple[list[np.ndarray], list[np.ndarray]]:
        packed = [pack(gs, self.d, self.shift, **kw) for gs in self.groups]
        return [q for q, _ in packed], [v for _, v in packed]

    def n_tiles(self) -> list[int]:
        return [sum(len(g.tiles) for g in gs) for gs in self.groups]

    def expected(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The A buffer (tile t in slot t) and each pipeline's done log (command order), from golden."""
        a = np.zeros((sum(self.n_tiles()), self.params.q_rows, self.d), np.int8)
        done = []
        for p, gs in enumerate(self.groups):
            recs = []
            for g in gs:
                for t in g.tiles:
                    a[t.tile_id] = requantize(golden_o(self.params, g, t, self.regs, self.shift), self.rq)
                    recs.append(streams.encode("result", tile_id=t.tile_id, rows=t.rows, pipeline=p, d=self.d))
            done.append(np.array(recs, np.uint8).reshape(-1, 16))
        return a, done

    def run(self, seed: int = 0, vector: bool = False, corrupt: str | None = None, **kw):
        qk, v = self.buffers(**kw)
        return run_engine_launch(self.params, qk, v, self.n_tiles(), self.regs, int(self.rq.mult),
                                 int(self.rq.shift), seed=seed, vector=vector, d=self.d, corrupt=corrupt)


# Per pipeline: groups (n_kb, valid_keys, tiles (rows, q0, causal)). Covers padding (valid < keys), causal
# tiles, partial tiles (rows < q_rows), n_kb below the kernel count (empty slices), several groups.
SPECS = [
    [(3, 90, [(32, 0, False), (20, 32, False)]),
     (1, 25, [(32, 0, True)]),
     (5, 160, [(32, 96, True), (32, 128, True), (7, 0, False)])],
    [(2, 64, [(32, 32, True), (32, 0, False)]),
     (4, 100, [(32, 68, True)])],
]


def make_launch(kernels: int, bits: int, d: int, seed: int = 7, specs=SPECS, n_heads: int | None = None) -> Launch:
    """A launch of ``specs``; ``n_heads``: per-head SwiftMax constants (a different beta / gamma per head) and
    the tiles' query heads spread over them (neighbouring tiles of a group of different heads)."""
    params = EngineParams(pipelines=len(specs), kernels=kernels, max_d=64, max_keys=256, score_bits=bits)
    rng = np.random.default_rng(seed)
    groups, first = [], 0
    for p, s in enumerate(specs):
        groups.append(make_groups(rng, params, d, p, s, first))
        first += sum(len(t) for _, _, t in s)
    if n_heads is not None:
        for gs in groups:
            for g in gs:
                for t in g.tiles:
                    t.head = (7 * t.tile_id + 3) % n_heads
    absmax = max(int(np.abs(exact_int_matmul(t.q, g.k.T)).max()) for gs in groups for g in gs for t in g.tiles)
    shift = max(0, score_shift_for(absmax, bits) - 1)  # one bit short: the largest scores saturate
    fmt = engine_format(bits)
    base = (swiftmax_registers(S_Q, S_K, d, beta=4.0, gamma=24.0, out_frac=8, fmt=fmt) if n_heads is None else
            swiftmax_head_registers(S_Q, S_K, d, np.linspace(2.5, 5.5, n_heads), np.geomspace(8.0, 64.0, n_heads),
                                    8, n_heads, fmt))
    regs = engine_registers(base, S_Q, S_K, d, shift, fmt)
    launch = Launch(params, d, shift, regs, RequantRegisters(np.int64(1), np.int64(0)), groups)
    o_max = max(int(np.abs(golden_o(params, g, t, regs, shift)).max()) for gs in groups for g in gs for t in g.tiles)
    launch.rq = requant_registers(110.0 / max(o_max, 1))
    return launch


def assert_bit_exact(launch: Launch, res) -> None:
    assert res.failed == {} and res.leftover == {} and res.missing == {}, (res.failed, res.leftover, res.missing)
    want_a, want_done = launch.expected()
    assert res.a.shape == want_a.shape
    bad = np.flatnonzero(res.a != want_a)
    assert bad.size == 0, f"{bad.size} A bytes differ, first at {bad[:8]}"
    for p, (got, exp) in enumerate(zip(res.done, want_done, strict=True)):
        assert np.array_equal(got, exp), f"pipeline {p}: done log differs"
    assert res.records == launch.n_tiles()
    k = launch.params.kernels
    assert res.packets == [sum(sum(b0 < b1 for b0, b1 in slice_blocks(g.n_kb, k)) * len(g.tiles) for g in gs)
                           for gs in launch.groups]
    assert np.count_nonzero(want_a) > want_a.size // 4  # the layer produces signal, not all-zero tiles


@TOOLS
@pytest.mark.parametrize("kernels, bits, d", [(1, 16, 32), (2, 8, 32), (4, 16, 64), (4, 8, 64)])
def test_engine_csim_is_bit_exact_with_golden(kernels, bits, d):
    launch = make_launch(kernels, bits, d)
    assert kernels == 1 or any(g.n_kb < kernels for gs in launch.groups for g in gs)  # some slices are empty
    assert_bit_exact(launch, launch.run(seed=0))


@TOOLS
@pytest.mark.parametrize("kernels, bits, d, n_heads, vector", [(2, 8, 32, 3, False), (4, 16, 64, 32, False),
                                                                (1, 16, 32, 5, False), (4, 8, 64, 6, True)])
def test_engine_csim_per_head_is_bit_exact_with_golden(kernels, bits, d, n_heads, vector):
    """Per-head SwiftMax constants (register map v2): each TILE command carries its query head, qk_slice copies it
    into its score packets' headers and swiftmax_engine_hls uses b_beta[head] / c_out[head]."""
    launch = make_launch(kernels, bits, d, seed=5, n_heads=n_heads)
    heads = {t.head for gs in launch.groups for g in gs for t in g.tiles}
    assert len(heads) > 2 and isinstance(launch.regs, SwiftMaxHeads) and not launch.regs.uniform
    # the heads are in the TILE headers of the command streams (walked: LOAD_K + K, then per tile TILE + Q)
    p = launch.params
    for gs, qk in zip(launch.groups, launch.buffers()[0], strict=True):
        beats, i, got = qk.reshape(-1, 16), 0, []
        for g in gs:
            assert streams.decode("command", beats[i])["op"] == streams.OP_LOAD_K
            i += 1 + g.n_kb * p.key_block * d // 16
            for t in g.tiles:
                h = streams.decode("command", beats[i])
                assert h["op"] == streams.OP_TILE and h["tag"] == t.tile_id
                got.append(h["head"])
                i += 1 + p.q_rows * d // 16
        assert i == len(beats) and got == [t.head for g in gs for t in g.tiles]
    assert_bit_exact(launch, launch.run(seed=3, vector=vector))
    # with head 0's constants for every tile the result differs: the per-head selection is exercised
    flat = make_launch(kernels, bits, d, seed=5, n_heads=n_heads)
    flat.regs = SwiftMaxHeads.broadcast(launch.regs[0], n_heads)
    assert not np.array_equal(flat.expected()[0], launch.expected()[0])


@TOOLS
def test_engine_csim_one_register_set_is_broadcast():
    """run_engine_launch takes a plain SwiftMaxRegisters as a one-head layer (head 0 in every TILE)."""
    launch = make_launch(2, 8, 32)
    assert not isinstance(launch.regs, SwiftMaxHeads)
    res = launch.run(seed=1)
    assert_bit_exact(launch, res)
    launch.regs = SwiftMaxHeads.broadcast(launch.regs, 1)
    np.testing.assert_array_equal(launch.run(seed=1).a, res.a)


@TOOLS
def test_engine_csim_merge_order_does_not_change_the_result():
    launch = make_launch(4, 8, 64, seed=11)
    results = [launch.run(seed=s) for s in (1, 2, 3)]
    for res in results:
        assert_bit_exact(launch, res)


@TOOLS
@pytest.mark.parametrize("kernels, bits, d", [(4, 8, 32), (2, 16, 64)])
def test_engine_csim_vector_path_is_bit_exact(kernels, bits, d):
    launch = make_launch(kernels, bits, d, seed=3)
    assert_bit_exact(launch, launch.run(seed=5, vector=True))


@TOOLS
def test_engine_csim_tile_n_kb_mismatch_stops_qk_kernels():
    launch = make_launch(2, 8, 32)
    res = launch.run(tile_n_kb_delta=1)
    qk = {k: s for k, s in res.status.items() if ".qk" in k}
    assert qk and all(s.code == TILE_MISMATCH for s in qk.values()), qk
    assert "LOAD_K" in next(iter(qk.values())).text
    assert res.leftover  # the stream position is lost: the TILE's payload and the rest stay unread


@TOOLS
@pytest.mark.parametrize("corrupt, kernel", [("swap_ids", None), ("swap_order", "p0.pv1")])
def test_engine_csim_misrouted_packet_is_refused(corrupt, kernel):
    launch = make_launch(2, 8, 32)
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
    launch = make_launch(2, 8, 32)
    with pytest.raises(HlsToolsMissing, match="no-such-compiler"):
        launch.run()


def test_engine_params_are_checked():
    with pytest.raises(ValueError, match="score_bits"):
        EngineParams(pipelines=1, kernels=2, score_bits=12)
    with pytest.raises(ValueError, match="max_keys"):
        EngineParams(pipelines=1, kernels=2, max_keys=40)


@TOOLS
@pytest.mark.parametrize("kernels, q_rows, max_keys, bits", [(4, 16, 512, 8), (4, 32, 1024, 8), (2, 16, 512, 16),
                                                             (8, 16, 512, 8), (1, 32, 1024, 16)])
def test_workspace_bytes_equal_the_kernels_sizeof(tmp_path, kernels, q_rows, max_keys, bits):
    """hw/engine/model.py: workspace_bytes (the generator's memory check, the model's kernel memory) is sizeof of
    the kernels' workspace structs, compiled."""
    import subprocess

    from vckattn.hw.engine.model import workspace_bytes
    from vckattn.sim.engine_csim import ENGINE_DIR
    from vckattn.sim.hls_csim import REPO_ROOT, ap_types_include

    src = tmp_path / "ws.cpp"
    src.write_text('#include <cstdio>\n#include "engine_kernels.h"\nint main() { std::printf("%d %d\\n", '
                   "vckattn_engine::QK_WORKSPACE_BYTES, vckattn_engine::PV_WORKSPACE_BYTES); }\n")
    p = EngineParams(pipelines=1, kernels=kernels, q_rows=q_rows, max_keys=max_keys, score_bits=bits)
    exe = tmp_path / "ws"
    subprocess.run(["g++", "-std=c++17", f"-I{ENGINE_DIR}", f"-I{REPO_ROOT / 'hw' / 'aie'}",
                    f"-I{ap_types_include()}", *p.defines(), str(src), "-o", str(exe)], check=True, timeout=120)
    qk, pv = (int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert workspace_bytes(p) == {"qk_slice": qk, "pv_slice": pv}

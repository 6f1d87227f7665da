"""The HLS data movers and ``score_switch`` (``hw/hls/``), C-simulated with g++, against the stream
contract ``hw/STREAMS.md`` and the DDR layout of ``host/tile_buffers.py``.

Every expected stream is built here with numpy from the job's tiles / K / V (not from the C++), and
``s2mm_out`` is checked against golden ``requant.requantize``. Driver: ``sim/hls_movers_csim.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hw_jobs import make_job

from vckattn.golden.requant import RequantRegisters, requant_registers, requantize
from vckattn.host.tile_buffers import (
    OUT_HEADER_BYTES,
    UNWRITTEN,
    blank_out,
    out_record_nbytes,
    pack_kv,
    pack_tiles,
    unpack_out,
)
from vckattn.hw.manifest import SCORE_SWITCH_SELECT, load_manifest
from vckattn.sim import hls_movers_csim as csim
from vckattn.sim.hls_csim import RunError

pytestmark = pytest.mark.tool("g++", "hls4ml")

Q_ROWS = 32
SM, OS = SCORE_SWITCH_SELECT["swiftmax"], SCORE_SWITCH_SELECT["online_softmax"]
# (head_dim, seq_len): keys_pad 32, 96 and 1024; the last tile of every head has rows < 32
GEOMETRIES = [(32, 20), (64, 70), (32, 1000), (64, 1000)]


@pytest.fixture(scope="module")
def manifest():
    return load_manifest("vck5000_attention")


def gqa_job(manifest, head_dim: int, seq: int):
    """Batch 2, 4 query heads sharing 2 kv heads (GQA), causal with the second sequence padded."""
    return make_job(manifest, batch=2, heads=4, kv_heads=2, seq=seq, head_dim=head_dim, seed=head_dim + seq)


def launch_tiles(job, n: int = 7):
    """A launch of up to ``n`` tiles spread over both sequences and all heads, not starting at tile 0,
    with at least one tile of fewer than 32 rows."""
    tiles = job.tiles[1:] if len(job.tiles) > 1 else job.tiles
    pick = list(tiles[:: max(1, len(tiles) // n)][:n])
    if not any(t.rows < Q_ROWS for t in pick):
        pick[-1] = next(t for t in job.tiles if t.rows < Q_ROWS)
    return pick


def u32_beat(*words: int) -> np.ndarray:
    return np.array(words, "<u4").view(np.uint8)


def mask_words(keep: np.ndarray) -> np.ndarray:
    """uint32 words of a ``(rows, keys)`` bool keep: bit ``b`` of word ``w`` = keep of key ``32w + b``."""
    rows, keys = keep.shape
    bits = keep.reshape(rows, keys // 32, 32).astype(np.uint64)
    return (bits << np.arange(32, dtype=np.uint64)).sum(-1).astype(np.uint32).reshape(-1)


def mask_stream(keep: np.ndarray, heads) -> np.ndarray:
    """The ``mask`` stream (hw/STREAMS.md) of tiles ``keep`` ``(n, rows, keys)``: per tile its query head word,
    then its mask words."""
    keep = np.asarray(keep).reshape(len(heads), -1, keep.shape[-1])
    return np.concatenate([np.concatenate([[np.uint32(h)], mask_words(k)]).astype(np.uint32)
                           for h, k in zip(heads, keep, strict=True)])


def beats(a: np.ndarray) -> np.ndarray:
    """The bytes of an array as 16-byte beats."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(-1, 16)


# ------------------------------------------------------------------------------------- mm2s_tiles


@pytest.mark.parametrize(("head_dim", "seq"), GEOMETRIES)
def test_mm2s_tiles(manifest, head_dim, seq):
    job = gqa_job(manifest, head_dim, seq)
    kp = job.keys_pad
    tiles = launch_tiles(job)
    buf = pack_tiles(job, tiles)
    r = csim.mm2s_tiles(buf["desc"], buf["q"], buf["mask"], len(tiles), head_dim, kp)
    want_q = np.concatenate([np.vstack([u32_beat(kp // 32, head_dim, t.rows, t.tile_id), beats(t.q)])
                             for t in tiles])
    assert r["q_out"].shape == (len(tiles) * (1 + Q_ROWS * head_dim // 16), 16)
    np.testing.assert_array_equal(r["q_out"], want_q)
    assert len({t.head for t in tiles}) > 1
    want_mask = np.concatenate([np.concatenate([[t.head], mask_words(t.keep)]).astype(np.uint32) for t in tiles])
    assert r["mask_out"].shape == (len(tiles) * (1 + kp),)  # per tile: the head word, then the mask words
    np.testing.assert_array_equal(r["mask_out"], want_mask)
    np.testing.assert_array_equal(r["mask_out"].reshape(len(tiles), 1 + kp)[:, 0], [t.head for t in tiles])


def test_mm2s_tiles_bad_geometry_moves_nothing(manifest):
    job = gqa_job(manifest, 32, 20)
    buf = pack_tiles(job, job.tiles[:2])
    for hd, kp in ((48, 32), (32, 48), (32, 0), (32, 2048)):
        r = csim.mm2s_tiles(buf["desc"], buf["q"], buf["mask"], 2, hd, kp)
        assert r["q_out"].size == 0 and r["mask_out"].size == 0


# ---------------------------------------------------------------------------------------- mm2s_kv


@pytest.mark.parametrize(("head_dim", "seq"), GEOMETRIES)
def test_mm2s_kv(manifest, head_dim, seq):
    job = gqa_job(manifest, head_dim, seq)
    kp = job.keys_pad
    tiles = launch_tiles(job)
    assert len({(t.batch, t.kv_head) for t in tiles}) > 1
    buf = pack_tiles(job, tiles)
    r = csim.mm2s_kv(buf["desc"], pack_kv(job), len(tiles), 2, head_dim, kp)
    want_k = np.concatenate([beats(job.k[t.batch, t.kv_head]) for t in tiles])
    want_v = np.concatenate([np.vstack([u32_beat(kp // 32, head_dim, 0, 0), beats(job.v[t.batch, t.kv_head])])
                             for t in tiles])
    np.testing.assert_array_equal(r["k_out"], want_k)
    np.testing.assert_array_equal(r["v_out"], want_v)


# --------------------------------------------------------------------------------------- s2mm_out


def o_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """int32 O mixing full-range values, the extremes, small values (rounding ties) and zeros."""
    o = rng.integers(-(2**31), 2**31, shape, dtype=np.int64)
    flat = o.reshape(-1)
    n = flat.size
    flat[: n // 3] = rng.integers(-600, 601, n // 3)
    flat[n // 3: n // 3 + 8] = [-(2**31), 2**31 - 1, -(2**31) + 1, 2**30, -(2**30), 0, 1, -1]
    rng.shuffle(flat)
    return o.astype(np.int32)


# (registers, whether random full-range O saturates both ways)
RQ_CASES = [
    (requant_registers(0.0031), True),      # the usual case: 18-bit mult, shift ~25
    (requant_registers(0.9), True),         # saturates for |o| >~ 142
    (requant_registers(2.0**-30), False),   # large shift: results -2..2
    (RequantRegisters(np.int64(1), np.int64(0)), True),            # shift 0: no rounding, plain saturation
    (RequantRegisters(np.int64(1), np.int64(1)), True),            # ties at .5 everywhere: half up (-1.5 -> -1)
    (RequantRegisters(np.int64(3), np.int64(2)), True),
    (RequantRegisters(np.int64(-77777), np.int64(20)), True),      # negative multiplier
    (RequantRegisters(np.int64(2**31 - 1), np.int64(62)), False),  # widest mult and shift: results -1..1
    (RequantRegisters(np.int64(-(2**31)), np.int64(40)), True),
]


@pytest.mark.parametrize("head_dim", [32, 64])
@pytest.mark.parametrize("case", range(len(RQ_CASES)))
def test_s2mm_out_requantizes_like_golden(manifest, head_dim, case):
    regs, saturates = RQ_CASES[case]
    job = gqa_job(manifest, head_dim, 70)
    tiles = launch_tiles(job, 5)
    n = len(tiles)
    rng = np.random.default_rng(case * 7 + head_dim)
    o = o_values(rng, (n, Q_ROWS, head_dim))
    want = requantize(o, regs).astype(np.int8)
    assert ((want == 127).any() and (want == -128).any()) == saturates
    extra = 2  # slots past the launch must stay UNWRITTEN
    out0 = blank_out(n + extra, Q_ROWS, head_dim)
    desc = pack_tiles(job, tiles)["desc"]
    r = csim.s2mm_out(o.astype("<i4"), desc, out0, n, head_dim, int(regs.mult), int(regs.shift))
    assert r.leftover == {"o_in": 0}
    out = r["out"]
    assert out.size == out0.size
    results = unpack_out(out, n + extra, Q_ROWS, head_dim)
    assert [res.tile_id for res in results] == [t.tile_id for t in tiles]
    for i, res in enumerate(results):
        np.testing.assert_array_equal(res.a, want[i], err_msg=f"tile {i}")
    rec = out_record_nbytes(Q_ROWS, head_dim)
    heads = out.reshape(n + extra, rec)[:, :OUT_HEADER_BYTES].copy().view("<u4")
    np.testing.assert_array_equal(heads[:n], [[t.tile_id, t.rows, 0, 0] for t in tiles])
    np.testing.assert_array_equal(heads[n:], [[UNWRITTEN, 0, UNWRITTEN, 0]] * extra)
    np.testing.assert_array_equal(out[n * rec:], out0[n * rec:])


def test_s2mm_out_saturates_both_ways(manifest):
    regs = requant_registers(0.9)
    o = o_values(np.random.default_rng(5), (1, Q_ROWS, 32))
    want = requantize(o, regs)
    assert (want == 127).any() and (want == -128).any()
    job = gqa_job(manifest, 32, 20)
    desc = pack_tiles(job, job.tiles[:1])["desc"]
    r = csim.s2mm_out(o, desc, blank_out(1, Q_ROWS, 32), 1, 32, int(regs.mult), int(regs.shift))
    np.testing.assert_array_equal(unpack_out(r["out"], 1, Q_ROWS, 32)[0].a, want[0])


# ----------------------------------------------------------------------------------- score_switch


def s_stream(s: np.ndarray) -> np.ndarray:
    """int32 S ``(n, 32, KP)`` in the AIE's block-major stream order."""
    n, rows, kp = s.shape
    return np.ascontiguousarray(s.reshape(n, rows, kp // 32, 32).transpose(0, 2, 1, 3)).reshape(-1)


def want_scores(s: np.ndarray, keep: np.ndarray, heads) -> np.ndarray:
    """:data:`SCORE_BEAT` records of the row-major score rows with the keep bits and the tile's head
    (low HEAD_BITS bits of its head word) on TUSER."""
    n, rows, kp = s.shape
    rec = np.zeros(n * rows * kp // 4, csim.SCORE_BEAT)
    rec["data"] = s.reshape(-1, 4)
    rec["keep"] = 0xFFFF
    keep_bits = (keep.reshape(-1, 4).astype(np.uint16) << np.arange(4, dtype=np.uint16)).sum(-1)
    head = np.repeat(np.asarray(heads, np.uint16) & ((1 << csim.HEAD_BITS) - 1), rows * kp // 4)
    rec["user"] = keep_bits | (head << 4)
    last = np.zeros((n, rows, kp // 4), np.uint8)
    last[..., -1] = 1
    rec["last"] = last.reshape(-1)
    return rec


def p_rows(p: np.ndarray, user: np.ndarray | None = None) -> np.ndarray:
    """uint8 P ``(n, 32, KP)`` as a normalizer sends it: rows of KP/4 beats, TLAST on a row's last."""
    n, rows, kp = p.shape
    last = np.zeros((n, rows, kp // 4), np.uint8)
    last[..., -1] = 1
    return csim.p_beats(p.reshape(-1, 4), last, user)


def want_p_out(p: np.ndarray) -> np.ndarray:
    """uint8 P ``(n, 32, KP)`` block-major as 16-byte beats (per kb: 32 rows x 32 keys row-major)."""
    n, rows, kp = p.shape
    return np.ascontiguousarray(p.reshape(n, rows, kp // 32, 32).transpose(0, 2, 1, 3)).reshape(-1, 16)


def random_tiles(rng: np.random.Generator, n: int, kp: int):
    s = rng.integers(-(2**31), 2**31, (n, Q_ROWS, kp), dtype=np.int64).astype(np.int32)
    keep = rng.random((n, Q_ROWS, kp)) < 0.6
    keep[0, 5:] = False  # a tile with padded rows (fully masked)
    return s, keep


@pytest.mark.parametrize("kp", [32, 96, 1024])
@pytest.mark.parametrize("select", [SM, OS])
def test_route_rows_and_sidebands(kp, select):
    rng = np.random.default_rng(kp + select)
    n = 3 if kp < 1024 else 2
    s, keep = random_tiles(rng, n, kp)
    heads = [31, 0, 17][:n]  # a different head per tile, the largest one included
    r = csim.score_switch_route(s_stream(s), mask_stream(keep, heads), n, kp, select)
    assert r.leftover == {"s_in": 0, "mask_in": 0}
    used, other = ("to_swiftmax", "to_online_softmax") if select == SM else ("to_online_softmax", "to_swiftmax")
    assert r[other].size == 0
    want = want_scores(s, keep, heads)
    got = r[used]
    assert got.shape == want.shape
    for f in ("data", "user", "last", "keep"):
        np.testing.assert_array_equal(got[f], want[f], err_msg=f)


def test_route_with_a_real_job_mask(manifest):
    """The mask stream as mm2s_tiles sends it from a packed launch (causal + padding, the tiles' query heads)
    ends up on TUSER: keep bits and the tile's head."""
    job = gqa_job(manifest, 64, 70)
    tiles = launch_tiles(job, 4)
    kp = job.keys_pad
    buf = pack_tiles(job, tiles)
    mask = csim.mm2s_tiles(buf["desc"], buf["q"], buf["mask"], len(tiles), 64, kp)["mask_out"]
    keep = np.stack([t.keep for t in tiles])
    s = np.random.default_rng(3).integers(-1000, 1000, keep.shape).astype(np.int32)
    for select, name in ((OS, "to_online_softmax"), (SM, "to_swiftmax")):
        r = csim.score_switch_route(s_stream(s), mask, len(tiles), kp, select)
        assert r.leftover == {"s_in": 0, "mask_in": 0}
        np.testing.assert_array_equal(r[name]["user"], want_scores(s, keep, [t.head for t in tiles])["user"])
    assert len({t.head for t in tiles}) > 1


@pytest.mark.parametrize("kp", [32, 96, 1024])
@pytest.mark.parametrize("select", [SM, OS])
def test_return_block_major(kp, select):
    rng = np.random.default_rng(100 + kp + select)
    n = 3 if kp < 1024 else 2
    p = rng.integers(0, 256, (n, Q_ROWS, kp), dtype=np.uint8)
    rows = p_rows(p, rng.integers(0, 16, n * Q_ROWS * kp // 4))
    junk = csim.p_beats(np.full((5, 4), 0xAB), np.ones(5))  # on the unselected input: must stay unread
    sm, os_ = (rows, junk) if select == SM else (junk, rows)
    r = csim.score_switch_return(sm, os_, n, kp, select)
    assert r.framing_errors == 0
    assert r.leftover == ({"from_swiftmax": 0, "from_online_softmax": 5} if select == SM
                          else {"from_swiftmax": 5, "from_online_softmax": 0})
    np.testing.assert_array_equal(r["p_out"], want_p_out(p))


def test_select_other_than_0_means_online_softmax():
    s, keep = random_tiles(np.random.default_rng(9), 1, 64)
    r = csim.score_switch_route(s_stream(s), mask_stream(keep, [3]), 1, 64, 7)
    assert r["to_swiftmax"].size == 0 and r["to_online_softmax"].size == Q_ROWS * 16


@pytest.mark.parametrize("select", [SM, OS])
def test_switch_through_a_normalizer(select):
    """route -> a stand-in normalizer (numpy, on the routed rows) -> return: P arrives block-major.

    The stand-in reads only what the route put on the stream (scores and TUSER), so the ordering of
    route and return is checked together: P[i, j] = keep ? (S[i, j] & 0xFF) : 0.
    """
    kp, n = 96, 3
    rng = np.random.default_rng(11 + select)
    s, keep = random_tiles(rng, n, kp)
    routed = csim.score_switch_route(s_stream(s), mask_stream(keep, [2, 9, 30]), n, kp, select)
    beats_ = routed["to_swiftmax" if select == SM else "to_online_softmax"]
    user_bits = (beats_["user"][:, None] >> np.arange(4)) & 1  # the keep bits (the head above them)
    p_data = np.where(user_bits == 1, beats_["data"] & 0xFF, 0).astype(np.uint8)
    back = csim.p_beats(p_data, beats_["last"])
    sm, os_ = (back, None) if select == SM else (None, back)
    r = csim.score_switch_return(sm, os_, n, kp, select)
    want_p = np.where(keep, s & 0xFF, 0).astype(np.uint8)
    np.testing.assert_array_equal(r["p_out"], want_p_out(want_p))

    # the kernel's top level (route then return in C-simulation) gives the same streams
    top = csim.score_switch(s_stream(s), mask_stream(keep, [2, 9, 30]), sm, os_, n, kp, select)
    np.testing.assert_array_equal(top["p_out"], r["p_out"])
    for name in ("to_swiftmax", "to_online_softmax"):
        np.testing.assert_array_equal(top[name], routed[name])
    assert all(v == 0 for v in top.leftover.values())


def test_switch_bad_geometry_moves_nothing():
    s, keep = random_tiles(np.random.default_rng(2), 1, 64)
    back = p_rows(np.zeros((1, Q_ROWS, 64), np.uint8))
    top = csim.score_switch(s_stream(s), mask_stream(keep, [0]), back, None, 1, 48, SM)
    assert top["p_out"].size == 0 and top["to_swiftmax"].size == 0
    assert top.leftover["s_in"] == s.size // 4 and top.leftover["from_swiftmax"] == len(back)


# ------------------------------------------------------------------------------- framing errors


def test_framing_error_zeroes_that_tile_and_the_rest_of_the_launch():
    """A row with TLAST missing on its last beat (tile 1) or set early (tile 2, a second row of the
    same launch): the rows are counted, tile 0 comes out intact, tiles 1.. as all-zero P, and the
    beat count stays the contract's (nothing left unread, nothing read past the launch)."""
    kp, n = 96, 4
    rng = np.random.default_rng(21)
    p = rng.integers(1, 256, (n, Q_ROWS, kp), dtype=np.uint8)
    rows = p_rows(p)
    rb = kp // 4
    rows["last"][(1 * Q_ROWS + 5) * rb + rb - 1] = 0  # tile 1, row 5: no TLAST
    rows["last"][(2 * Q_ROWS + 0) * rb + 3] = 1       # tile 2, row 0: TLAST on beat 3
    r = csim.score_switch_return(rows, None, n, kp, SM)
    assert r.framing_errors == 2
    assert r.leftover == {"from_swiftmax": 0, "from_online_softmax": 0}
    per_tile = Q_ROWS * kp // 16
    got = r["p_out"]
    assert got.shape == (n * per_tile, 16)
    np.testing.assert_array_equal(got[:per_tile], want_p_out(p[:1]))
    assert not got[per_tile:].any()


def test_framing_errors_count_rows_not_beats():
    kp = 64
    p = np.full((1, Q_ROWS, kp), 9, np.uint8)
    rows = p_rows(p)
    rb = kp // 4
    rows["last"][[0, 1, 2]] = 1               # row 0: three early TLASTs
    rows["last"][rb * 3 + rb - 1] = 0         # row 3: missing TLAST
    rows["last"][rb * 7: rb * 8] = 1          # row 7: TLAST on every beat
    r = csim.score_switch_return(None, rows, 1, kp, OS)
    assert r.framing_errors == 3
    assert not r["p_out"].any() and r["p_out"].shape == (Q_ROWS * kp // 16, 16)


# ------------------------------------------------------------------------------------ the harness


@pytest.mark.tool("asan")
def test_reading_past_a_ddr_buffer_fails_the_run(manifest):
    """The test bench passes DDR buffers of exactly their size: a launch longer than its buffers
    (3 tiles claimed, 2 packed) must fail the run, not read stale memory."""
    job = gqa_job(manifest, 32, 20)
    buf = pack_tiles(job, job.tiles[:2])
    with pytest.raises(RunError, match="AddressSanitizer"):
        csim.mm2s_tiles(buf["desc"], buf["q"], buf["mask"], 3, 32, job.keys_pad)

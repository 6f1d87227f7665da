"""host/tile_buffers.py: the DDR buffer layout (round trips, exact bytes, refusals)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vckattn.host import tile_buffers as tb
from vckattn.host.backends.base import DeviceError
from vckattn.host.tiler import TileResult, plan_tiles
from vckattn.hw.manifest import TileShape

TILE = TileShape(q_rows=32, key_block=32, lanes=4, head_dims=(32, 64))


def _job(rng: np.random.Generator, b: int, h: int, kv: int, s: int, hd: int, tile: TileShape = TILE):
    q = rng.integers(-128, 128, (b, h, s, hd)).astype(np.int8)
    k = rng.integers(-128, 128, (b, kv, s, hd)).astype(np.int8)
    v = rng.integers(-128, 128, (b, kv, s, hd)).astype(np.int8)
    keep = rng.random((b, s, s)) < 0.7
    return plan_tiles(q, k, v, keep, tile)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=st.integers(1, 2), kv=st.integers(1, 2), rep=st.integers(1, 2), s=st.integers(1, 70),
       hd=st.sampled_from([32, 64]), seed=st.integers(0, 2**16), start=st.integers(0, 3), n=st.integers(1, 5))
def test_round_trip(b, kv, rep, s, hd, seed, start, n):
    rng = np.random.default_rng(seed)
    job = _job(rng, b, kv * rep, kv, s, hd)
    tiles = job.tiles[start:start + n] or job.tiles[:1]
    packed = tb.pack_tiles(job, tiles)
    assert packed["desc"].dtype == np.dtype("<u4") and packed["desc"].shape == (len(tiles), 8)
    assert packed["q"].dtype == np.int8 and packed["mask"].shape == (len(tiles), 32, job.keys_pad // 8)
    raw = {k: v.tobytes() for k, v in packed.items()}  # what the mover reads: bytes
    back = tb.unpack_tiles(raw["desc"], raw["q"], raw["mask"], len(tiles), 32, hd)
    for t, u in zip(tiles, back, strict=True):
        assert (t.tile_id, t.batch, t.head, t.kv_head, t.q0, t.rows) == (u.tile_id, u.batch, u.head, u.kv_head,
                                                                         u.q0, u.rows)
        assert np.array_equal(t.q, u.q) and np.array_equal(t.keep, u.keep)
    assert [d["seq_len"] for d in tb.desc_fields(raw["desc"], len(tiles))] == [s] * len(tiles)

    kvbuf = tb.pack_kv(job)
    assert kvbuf.shape == (b * kv, 2, job.keys_pad, hd)
    k, v = tb.unpack_kv(kvbuf.tobytes(), job.keys_pad, hd, kv)
    assert np.array_equal(k, job.k) and np.array_equal(v, job.v)

    records = [(t.tile_id, t.rows, 0, rng.integers(-128, 128, (32, hd)).astype(np.int8)) for t in tiles]
    out = tb.pack_out(records, 32, hd, n_slots=len(tiles) + 2)
    assert out.size == tb.out_nbytes(len(tiles) + 2, 32, hd)
    res = tb.unpack_out(out.tobytes(), len(tiles) + 2, 32, hd)  # the two spare slots are UNWRITTEN
    assert [r.tile_id for r in res] == [t.tile_id for t in tiles]
    assert all(np.array_equal(r.a, rec[3]) and r.a.dtype == np.int8 for r, rec in zip(res, records, strict=True))


def test_exact_bytes():
    rng = np.random.default_rng(1)
    job = _job(rng, 2, 2, 1, 40, 32)  # 2 seq x 2 heads x 2 row tiles; keys_pad 64
    t = job.tiles[5]  # sequence 1, head 0, rows 32..39
    p = tb.pack_tiles(job, [t])
    assert p["desc"].tobytes() == np.array([5, 1, 0, 0, 32, 8, 40, 64], "<u4").tobytes()
    # key j of row i: bit j % 8 of byte j // 8 (little bit order)
    row = p["mask"][0, 0]
    assert all(bool(row[j // 8] >> (j % 8) & 1) == bool(t.keep[0, j]) for j in range(64))
    kv = tb.pack_kv(job)
    assert np.array_equal(kv[1 * 1 + 0, 0], job.k[1, 0]) and np.array_equal(kv[1, 1], job.v[1, 0])  # b*KV + g
    a = np.arange(32 * 32, dtype=np.int64).reshape(32, 32).astype(np.int8)
    out = tb.pack_out([(7, 8, 0, a)], 32, 32)
    assert out[:16].tobytes() == np.array([7, 8, 0, 0], "<u4").tobytes()
    assert out[16:].view(np.int8).tobytes() == a.tobytes()
    blank = tb.blank_out(2, 32, 32)
    assert blank.reshape(2, -1)[:, :16].copy().view("<u4").tolist() == [[tb.UNWRITTEN, 0, tb.UNWRITTEN, 0]] * 2
    assert tb.unpack_out(blank, 2, 32, 32) == []


def test_refusals():
    a = np.zeros((32, 32), np.int8)
    bad = tb.pack_out([(4, 32, 0, a), (9, 32, 3, a)], 32, 32)
    with pytest.raises(DeviceError, match=r"status 0x3 for tile 9 \(out record 1\)"):
        tb.unpack_out(bad, 2, 32, 32)
    rows = tb.pack_out([(4, 33, 0, a)], 32, 32)
    with pytest.raises(DeviceError, match="malformed record for tile 4"):
        tb.unpack_out(rows, 1, 32, 32)
    with pytest.raises(ValueError, match="shorter than"):
        tb.unpack_out(bad[:100], 2, 32, 32)
    odd = TileShape(q_rows=32, key_block=16, lanes=4, head_dims=(32,))
    job = _job(np.random.default_rng(0), 1, 1, 1, 10, 32, odd)  # keys_pad 16
    with pytest.raises(ValueError, match="multiple of 32"):
        tb.pack_tiles(job, job.tiles)
    with pytest.raises(ValueError, match="multiple of 32"):
        tb.pack_kv(job)
    with pytest.raises(ValueError, match="whole number of sequences"):
        tb.unpack_kv(np.zeros(2 * 32 * 32 * 3, np.int8), 32, 32, 2)
    assert isinstance(tb.unpack_out(tb.pack_out([(0, 1, 0, a)], 32, 32), 1, 32, 32)[0], TileResult)

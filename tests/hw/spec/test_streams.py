"""Stream contract v3 (hw/ENGINE.md): the header declaration (hw/spec/streams.py) and its generated C++ header,
and the mmul block layouts (golden/engine.py pack/unpack) against the byte-offset formulas of ENGINE.md, written out
element by element here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vckattn.golden.engine import (
    pack_k,
    pack_q,
    pack_scores,
    pack_v,
    row_limits,
    slice_keys,
    slice_needs_mask,
    tile_keep,
    unpack_k,
    unpack_q,
    unpack_scores,
    unpack_v,
)
from vckattn.hw.spec import streams


def test_generated_header_is_up_to_date():
    assert streams.GENERATED.read_text() == streams.render_header(), "stale: make regen"
    text = streams.GENERATED.read_text()
    assert "Stream contract v3" in text
    for kind, fields in streams.HEADERS.items():
        for f in fields:
            assert f"constexpr int {kind.upper()}_{f.name.upper()}_WORD = {f.word};" in text


@pytest.mark.parametrize("kind", sorted(streams.HEADERS))
def test_header_fields_do_not_overlap_and_round_trip(kind):
    fields = streams.HEADERS[kind]
    for a, b in itertools.combinations(fields, 2):
        assert a.word != b.word or a.lo + a.width <= b.lo or b.lo + b.width <= a.lo, (a.name, b.name)
    assert all(f.lo + f.width <= 32 for f in fields)
    rng = np.random.default_rng(len(kind))
    for _ in range(20):
        values = {f.name: int(rng.integers(0, f.max + 1)) for f in fields}
        beat = streams.encode(kind, **values)
        assert streams.decode(kind, beat) == values
        many = streams.encode_many(kind, 3, **values)
        assert all(np.array_equal(row, beat) for row in many)
    with pytest.raises(ValueError, match="does not fit"):
        streams.encode(kind, **{fields[0].name: fields[0].max + 1})


def test_slice_routing_word_is_word_0_and_tile_has_no_geometry():
    pid = next(f for f in streams.SLICE if f.name == "packet_id")
    assert (pid.word, pid.lo, pid.width) == (0, 0, 5)
    assert all(f.word > 0 for f in streams.SLICE if f.name != "packet_id")  # word 0 is the routing word only
    assert {f.name for f in streams.TILE} == {"op", "causal", "score_shift", "head", "valid_keys", "rows", "q0",
                                               "tag"}


# ------------------------------------------------------------------------------------------ layouts (ENGINE.md)


def _q_offset(i: int, f: int, d: int) -> int:
    return (i // 4 * (d // 16) + f // 16) * 64 + (i % 4) * 16 + f % 16


def _k_offset(key: int, f: int, d: int) -> int:
    return (key // 8 * (d // 16) + f // 16) * 128 + (f % 16) * 8 + key % 8


def _s_offset(i: int, key: int, sk: int, e: int) -> int:
    return (i // 4 * (sk // 8) + key // 8) * 32 * e + ((i % 4) * 8 + key % 8) * e


def _v_offset(key: int, f: int, sk: int) -> int:
    return (f // 8 * (sk // 8) + key // 8) * 64 + (key % 8) * 8 + f % 8


@pytest.mark.parametrize("q_rows, d", [(4, 16), (8, 32), (12, 64), (32, 64)])
def test_q_layout_is_the_contract(q_rows, d):
    q = np.random.default_rng(q_rows + d).integers(-128, 128, (q_rows, d)).astype(np.int8)
    buf = pack_q(q)
    want = np.zeros(q_rows * d, np.int8)
    for i in range(q_rows):
        for f in range(d):
            want[_q_offset(i, f, d)] = q[i, f]
    assert np.array_equal(buf, want)
    assert np.array_equal(unpack_q(buf, q_rows, d), q)


@pytest.mark.parametrize("sk, d", [(16, 16), (32, 48), (64, 64)])
def test_k_and_v_layouts_are_the_contract(sk, d):
    rng = np.random.default_rng(sk * d)
    k = rng.integers(-128, 128, (sk, d)).astype(np.int8)
    v = rng.integers(-128, 128, (sk, d)).astype(np.int8)
    kb, vb = pack_k(k), pack_v(v)
    want_k, want_v = np.zeros(sk * d, np.int8), np.zeros(sk * d, np.int8)
    for key in range(sk):
        for f in range(d):
            want_k[_k_offset(key, f, d)] = k[key, f]
            want_v[_v_offset(key, f, sk)] = v[key, f]
    assert np.array_equal(kb, want_k) and np.array_equal(vb, want_v)
    assert np.array_equal(unpack_k(kb, sk, d), k) and np.array_equal(unpack_v(vb, sk, d), v)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8])
def test_score_layout_is_the_contract_in_bytes(dtype):
    q_rows, sk = 8, 32
    info = np.iinfo(dtype)
    s = np.random.default_rng(3).integers(info.min, info.max + 1, (q_rows, sk)).astype(dtype)
    buf = pack_scores(s)
    e = np.dtype(dtype).itemsize
    raw = buf.astype(np.dtype(dtype).newbyteorder("<")).view(np.uint8)
    want = np.zeros(q_rows * sk * e, np.uint8)
    for i in range(q_rows):
        for key in range(sk):
            off = _s_offset(i, key, sk, e)
            want[off:off + e] = np.array([s[i, key]], np.dtype(dtype).newbyteorder("<")).view(np.uint8)
    assert np.array_equal(raw, want)
    assert np.array_equal(unpack_scores(buf, q_rows, sk), s)


def test_layouts_take_leading_dimensions_and_refuse_ragged_shapes():
    rng = np.random.default_rng(0)
    q = rng.integers(-128, 128, (2, 3, 5, 16, 32)).astype(np.int8)
    buf = pack_q(q)
    assert buf.shape == (2, 3, 5, 16 * 32)
    assert np.array_equal(buf[1, 2, 4], pack_q(q[1, 2, 4]))
    assert np.array_equal(unpack_q(buf, 16, 32), q)
    k = rng.integers(-128, 128, (4, 2, 64, 32)).astype(np.int8)
    assert np.array_equal(unpack_k(pack_k(k), 64, 32), k) and np.array_equal(unpack_v(pack_v(k), 64, 32), k)
    with pytest.raises(ValueError, match="cols of 16"):
        pack_q(np.zeros((4, 24), np.int8))
    with pytest.raises(ValueError, match="cols of 8"):
        pack_scores(np.zeros((4, 12), np.int8))
    with pytest.raises(ValueError, match="not 4 x 16"):
        unpack_q(np.zeros(65, np.int8), 4, 16)


# ------------------------------------------------------------------------------------------ slices and masks


def test_slice_keys_and_masks():
    assert slice_keys(512, 4) == 128 and slice_keys(128, 2) == 64
    for bad in ((100, 2), (16, 2), (0, 1), (64, 0)):
        with pytest.raises(ValueError, match="multiple of 16"):
            slice_keys(*bad)
    lim = row_limits(8, 6, 10, 14, True)
    assert lim.tolist() == [11, 12, 13, 14, 14, 14, 0, 0]
    assert row_limits(4, 4, 0, 9, False).tolist() == [9] * 4
    keep = tile_keep(8, 16, 6, 10, 14, True, key0=2)
    assert np.array_equal(keep, (2 + np.arange(16))[None, :] < lim[:, None])
    # a slice needs the mask unless every row is valid and keeps every key of the slice
    assert not slice_needs_mask(8, 16, 0, 8, 0, 64, False)
    assert slice_needs_mask(8, 16, 3, 8, 0, 63, False)
    assert slice_needs_mask(8, 16, 0, 7, 0, 64, False)
    assert not slice_needs_mask(8, 16, 1, 8, 31, 64, True) and slice_needs_mask(8, 16, 1, 8, 30, 64, True)

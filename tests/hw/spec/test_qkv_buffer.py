"""The Q/K/V buffer's layout (hw/spec/qkv_buffer.py): every beat of every slot has one place, and a head block
spanning banks deals neighbouring slots to different ones."""

from __future__ import annotations

import pytest

from vckattn.hw.spec.qkv_buffer import QkvLayout


@pytest.mark.parametrize("interleave", [1, 2, 4])
def test_every_beat_has_one_place_and_names_its_slot(interleave: int) -> None:
    lo = QkvLayout(16, 4, 2, 32, 8, 8, 4, interleave=interleave)
    seen: dict[int, tuple] = {}
    for b in range(lo.slots):
        for h in range(lo.heads):
            for t in range(lo.max_seq // lo.q_rows):
                for i in range(lo.tile_beats):
                    seen.setdefault(lo.q_tile(b, h, t) + i, []).append(("q", b, h, t))
        for h in range(lo.kv_heads):
            for j in range(lo.max_seq // lo.slice_keys):
                for i in range(lo.slice_beats):
                    seen.setdefault(lo.k_slice(b, h, j) + i, []).append(("k", b, h, j))
                    seen.setdefault(lo.v_slice(b, h, j) + i, []).append(("v", b, h, j))
    assert sorted(seen) == list(range(lo.beats))
    assert all(len(v) == 1 for v in seen.values())
    assert all(lo.slot_of(a) == v[0][1] for a, v in seen.items())


def test_neighbouring_slots_are_in_different_banks() -> None:
    """A head block of 4 slots over 2 banks: slots 0 and 2 in one, 1 and 3 in the other (with no interleave, 0 and 1
    share a bank)."""
    bank = 2 * 32 * 16 // 16  # two sequences of one head
    for interleave, pairs in ((2, [{0, 2}, {1, 3}]), (1, [{0, 1}, {2, 3}])):
        lo = QkvLayout(16, 2, 2, 32, 8, 8, 4, interleave=interleave)
        for h in range(lo.heads):
            banks = {b: lo.q_tile(b, h, 0) // bank for b in range(4)}
            assert [{b for b in banks if banks[b] == k} for k in sorted(set(banks.values()))] == pairs


def test_refuses_an_interleave_that_does_not_divide_the_slots() -> None:
    with pytest.raises(ValueError, match="interleave 3"):
        QkvLayout(16, 2, 2, 32, 8, 8, 4, interleave=3)
    with pytest.raises(ValueError, match="interleave 8"):
        QkvLayout(16, 2, 2, 32, 8, 8, 4, interleave=8)


@pytest.mark.parametrize("causal", [False, True])
def test_the_readers_headers_are_the_engines_own_commands(causal: bool) -> None:
    """The q, k and v readers' header beats (reader_headers, in reader_runs' order) are, pipeline by pipeline, the
    headers of the commands the engine's host makes for the same groups (host/engine.py: commands): each Q tile's TILE,
    each group's K then V SLICEs; the quiet releases' zeros. Three sequences of different lengths, 3 query heads on one
    K/V head, two pipelines."""
    import numpy as np

    from vckattn.host.engine import Geometry, commands
    from vckattn.hw.spec.functional import EngineParams
    from vckattn.hw.spec.qkv_buffer import reader_headers, reader_runs
    from vckattn.hw.spec.schedule import deal_groups

    lo = QkvLayout(d=32, heads=3, kv_heads=1, max_seq=64, q_rows=16, slice_keys=32, slots=2)
    batch, valid = 3, [64, 40, 17]
    dealt = deal_groups(batch * lo.heads, 2)
    params = EngineParams(pipelines=2, kernels=2, q_rows=16, d=32, max_keys=64)
    cmds = commands(params, Geometry(batch, lo.heads, lo.kv_heads, lo.max_seq, 32, tuple(valid), causal, 3, -77, 9))
    runs = reader_runs(lo, dealt, batch)
    heads = reader_headers(lo, runs, valid, causal=causal, score_shift=3, rq_mult=-77, rq_shift=9)
    assert [len(h) for h in heads] == [len(r) for r in runs]
    for p in range(2):
        q, k, v = (heads[3 * p + i] for i in range(3))
        qr, kr, vr = (runs[3 * p + i] for i in range(3))
        assert [h for h, r in zip(q, qr, strict=True) if not r.quiet] == [bytes(c[:16]) for c in cmds.q[p]]
        kv = [bytes(c[:16]) for c in cmds.kv[p]]  # per group: its k K slices, then its k V slices
        k_want = [h for g in range(0, len(kv), 4) for h in kv[g:g + 2]]
        v_want = [h for g in range(0, len(kv), 4) for h in kv[g + 2:g + 4]]
        assert [h for h, r in zip(k, kr, strict=True) if not r.quiet] == k_want
        assert [h for h, r in zip(v, vr, strict=True) if not r.quiet] == v_want
        assert all(h == bytes(16) for h, r in zip(q + k + v, qr + kr + vr, strict=True) if r.quiet)
    assert np.any([bytes(c[:16]) != bytes(16) for c in cmds.q[0]])
    with pytest.raises(ValueError, match="valid keys"):
        reader_headers(lo, runs, [64, 65, 1])

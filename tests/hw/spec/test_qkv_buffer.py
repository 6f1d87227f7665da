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

"""A decoder's BHyT site A unit (hw/pl/site_unit.py) on Verilator through cocotb (sim/tb_site_unit.py): its site
reader's runs of X in under backpressure, golden's U out, each block at its place in the U buffer with its
sequence's slot and turn; and the runs the site readers are given (hw/spec/slice_buffer.py: site_runs)."""

from __future__ import annotations

import json

import pytest

from vckattn.hw.pl.site_unit import SiteUnit
from vckattn.hw.spec.slice_buffer import SliceLayout, site_groups, site_runs
from vckattn.sim.runner import generate_verilog, run_cocotb

TB = "vckattn.sim.tb_site_unit"

#: (layout, site units, the unit built, sequences): the unit 1 of 3 over three K-slices of unequal widths, two
#: slots each taken twice (both turns); one unit of all tokens over three slots (not a power of two), tiles of 4
GEOMETRIES = {
    "s3_u1of3": (SliceLayout((96, 96, 32), 16, 32, 2, 8), 3, 1, 4),
    "slots3_r4": (SliceLayout((48, 16), 4, 16, 3, 4), 1, 0, 3),
}


@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_x_runs_to_addressed_u(name: str) -> None:
    lo, units, unit, batch = GEOMETRIES[name]
    top = f"site_unit_{name}"
    src = [generate_verilog(SiteUnit(lo, max_d=256), top)]
    cfg = {**lo.__dict__, "units": units, "unit": unit, "batch": batch, "max_d": 256}
    res = run_cocotb(top, src, TB, testcase="test_x_runs_to_addressed_u",
                     extra_env={"VCKATTN_TB_SITE": json.dumps(cfg)})
    assert [t.name for t in res.passed] == ["test_x_runs_to_addressed_u"], res.tests


def test_site_runs_cover_every_token_once() -> None:
    """The site readers' runs, together, read every beat of every sequence of the launch once, each run within its
    4 tokens' beats of one K-slice; each reader releases each sequence once, on its last run of it."""
    lo = SliceLayout((96, 96, 32), 16, 32, 2, 8)
    runs = site_runs(lo, 3, 4)
    seen: list[int] = []
    for reader in runs:
        for b in range(4):
            mine = [r for r in reader if r.b == b]
            assert [r.release for r in mine] == [False] * (len(mine) - 1) + [True]
            for r in mine:
                assert r.beats == lo.slices[r.head] // 4 and r.first == lo.beat(b, r.index, sum(lo.slices[:r.head]))
                seen += range(r.first, r.first + r.beats)
    every = sorted(lo.beat(b, t, f) for b in range(2) for t in range(lo.max_seq) for f in range(0, 224, 16))
    assert sorted(seen) == sorted(every * 2)  # four sequences in two slots: each beat read twice
    assert [list(site_groups(lo, 3, u)) for u in range(3)] == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_refuses_what_it_cannot_take() -> None:
    with pytest.raises(ValueError, match="max_d"):
        SiteUnit(SliceLayout((96, 96, 32), 16, 32, 2, 8), max_d=128)
    with pytest.raises(ValueError, match="power of two"):
        SiteUnit(SliceLayout((96,), 12, 36, 2, 8))
    with pytest.raises(ValueError, match="at least one"):
        site_runs(SliceLayout((96,), 16, 32, 2, 8), 0, 2)

"""Resource parsing and the synthesis flow (real Yosys on a small component)."""

from __future__ import annotations

import pytest

from vckattn.hw.pl.stream import SkidBuffer
from vckattn.hw.pl.synth import parse_stat, synthesize
from vckattn.sim.hw_report import KERNELS

STAT = """
=== top ===
     1149 cells
        1   BUFG
       77   CARRY4
        3   DSP48E2
      219   FDRE
        4   FDSE
      127   LUT2
       98   LUT3
      183   LUT6
        2   RAMB18E2
        1   RAMB36E2
        8   RAM64M
"""


def test_parse_stat_counts_cells():
    r = parse_stat(STAT)
    assert (r.lut, r.ff, r.dsp, r.bram, r.lutram, r.carry) == (408, 223, 3, 2.0, 8, 77)


@pytest.mark.sim
def test_synthesize_skid_buffer():
    r = synthesize(SkidBuffer(16), "skid16")
    # 2 x 17 data/last flops + valid/ready state; no arithmetic
    assert 34 <= r.ff <= 40 and r.dsp == 0 and r.bram == 0 and r.lut > 0


def test_kernel_registry_names():
    assert list(KERNELS) == ["swiftmax", "online_softmax", "bhyt_exact", "bhyt_approx", "rmsnorm"]

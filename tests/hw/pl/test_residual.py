"""The PL residual add (hw/pl/residual.py) on Verilator through cocotb (sim/tb_residual.py): registers read back
exactly, random and edge-case tokens, and a real MiniLM layer's W_O output plus its input X, bit-exact with
golden.sublayer.residual_add_int (and so with the golden encoder sublayer's R)."""

from __future__ import annotations

import numpy as np
import pytest
from sublayer_data import minilm_layer

from vckattn.golden.sublayer import residual_add_int, residual_register_values
from vckattn.hw.pl.residual import ResidualKernel
from vckattn.sim.runner import generate_verilog, run_cocotb
from vckattn.sim.sublayer_tb import VECTORS_ENV

TB = "vckattn.sim.tb_residual"
LANES, MAX_D = 4, 1024


def _build(max_d: int = MAX_D) -> tuple[str, list]:
    name = f"residual_l{LANES}" + ("" if max_d == MAX_D else f"_d{max_d}")
    return name, [generate_verilog(ResidualKernel(LANES, max_d), name)]


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_residual_kernel() -> None:
    name, src = _build()
    cases = {"test_registers", "test_random_traffic", "test_record_rows_from_their_first_channel", "test_throughput"}
    res = run_cocotb(name, src, TB, testcase=",".join(sorted(cases)))
    assert {t.name for t in res.passed} == cases, res.tests


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_residual_rows_starting_beyond_the_tables() -> None:
    """A build of 96 channels (TUSER 5 bits: a base up to 31 beats can be sent) counts a row that starts past its
    tables as overlong instead of wrapping round to channel 0."""
    name, src = _build(96)
    res = run_cocotb(name, src, TB, testcase="test_record_rows_from_their_first_channel",
                     extra_env={"VCKATTN_TB_MAX_D": "96"})
    assert [t.name for t in res.passed] == ["test_record_rows_from_their_first_channel"], res.tests


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_residual_kernel_real_minilm(tmp_path) -> None:
    """A MiniLM layer on real sentences: its W_O accumulators Y and input X through the unit give the golden
    encoder sublayer's R, bit for bit (8 tokens of 384 channels, per-channel rq_y)."""
    sub, x, tr = minilm_layer()
    y, xi, r = tr["y"][:2, :4], x[:2, :4], tr["r"][:2, :4]
    assert np.array_equal(residual_add_int(y, xi, sub.residual), r)
    w = residual_register_values(sub.residual, y.shape[-1], MAX_D)
    assert len(set(w["y_shift"])) > 1 or len(set(w["y_mult"])) > 1  # per-channel registers
    np.savez(tmp_path / "v.npz", y=y, x=xi, expected=r, y_mult=np.asarray(w["y_mult"]),
             y_shift=np.asarray(w["y_shift"]), x_mult=w["x_mult"], x_shift=w["x_shift"])
    name, src = _build()
    res = run_cocotb(name, src, TB, testcase="test_real_vectors", extra_env={VECTORS_ENV: str(tmp_path / "v.npz")})
    assert [t.name for t in res.passed] == ["test_real_vectors"], res.tests

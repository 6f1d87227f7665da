"""The PL requantizer (hw/pl/requant.py) on Verilator through cocotb (sim/tb_requant.py): registers read back
exactly, random and edge-case tokens and a real MiniLM layer's Q projection bit-exact with golden.requant."""

from __future__ import annotations

import numpy as np
import pytest
from sublayer_data import minilm_layer as _minilm_layer

from vckattn.golden.requant import requantize
from vckattn.hw.pl.requant import RequantKernel
from vckattn.sim.runner import generate_verilog, run_cocotb
from vckattn.sim.sublayer_tb import VECTORS_ENV

TB = "vckattn.sim.tb_requant"
LANES, MAX_D = 4, 1024


def _build() -> tuple[str, list]:
    name = f"requant_l{LANES}"
    return name, [generate_verilog(RequantKernel(LANES, MAX_D), name)]


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_requant_kernel() -> None:
    name, src = _build()
    res = run_cocotb(name, src, TB, testcase="test_registers,test_random_traffic,test_throughput")
    assert {t.name for t in res.passed} == {"test_registers", "test_random_traffic", "test_throughput"}, res.tests


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_requant_kernel_real_minilm_q(tmp_path) -> None:
    """A MiniLM layer's X·W_Qᵀ + b accumulators (real sentences) requantized per channel: bit-exact with the
    golden sublayer's Q."""
    sub, x, tr = _minilm_layer()
    acc = sub.attn.q_proj.acc(x[:1, :6])  # 6 tokens of one sentence, (1, 6, 384) int64 (fits int32)
    want = requantize(acc, sub.attn.rq_q).astype(np.int8)
    b, s, _ = acc.shape
    assert np.array_equal(want, tr["q"][:1, :, :6].transpose(0, 2, 1, 3).reshape(b, s, -1))  # the sublayer's Q
    np.savez(tmp_path / "v.npz", acc=acc, mult=np.broadcast_to(sub.attn.rq_q.mult, acc.shape[-1:]),
             shift=np.broadcast_to(sub.attn.rq_q.shift, acc.shape[-1:]), expected=want)
    name, src = _build()
    res = run_cocotb(name, src, TB, testcase="test_real_vectors", extra_env={VECTORS_ENV: str(tmp_path / "v.npz")})
    assert [t.name for t in res.passed] == ["test_real_vectors"], res.tests

"""The PL RoPE unit (hw/pl/rope.py) on Verilator through cocotb (sim/tb_rope.py): registers read back exactly,
random and edge-case rows and tables, and the Q and K of a golden decoder sublayer (golden/sublayer.py) before
and after RoPE, bit-exact with golden.rope_int."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vckattn.golden.rope_int import rope_table_banks
from vckattn.hw.pl.rope import RopeKernel
from vckattn.sim.runner import generate_verilog, run_cocotb
from vckattn.sim.sublayer_tb import VECTORS_ENV

TB = "vckattn.sim.tb_rope"
LANES, HEAD_DIM, MAX_POS = 2, 64, 64
ENV = {"VCKATTN_TB_HEAD_DIM": str(HEAD_DIM)}


def _build() -> tuple[str, list]:
    name = f"rope_l{LANES}_d{HEAD_DIM}_p{MAX_POS}"
    return name, [generate_verilog(RopeKernel(LANES, HEAD_DIM, MAX_POS), name)]


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_rope_kernel() -> None:
    name, src = _build()
    res = run_cocotb(name, src, TB, testcase="test_registers,test_random_traffic,test_throughput", extra_env=ENV)
    assert {t.name for t in res.passed} == {"test_registers", "test_random_traffic", "test_throughput"}, res.tests


def _run_trace(tmp_path, tr: dict, c: np.ndarray, s: np.ndarray, rows_each: int) -> None:
    """The trace's q_pre/k_pre rows (every head, the first ``rows_each`` positions of sequence 0) through the
    unit; expected: the trace's q/k (the golden sublayer's RoPE)."""
    xs, pos, want = [], [], []
    for pre, post in (("q_pre", "q"), ("k_pre", "k")):
        x, y = tr[pre][0, :, :rows_each], tr[post][0, :, :rows_each]  # (heads, S, D)
        xs.append(x.reshape(-1, x.shape[-1]))
        want.append(y.reshape(-1, y.shape[-1]))
        pos.append(np.tile(np.arange(rows_each), x.shape[0]))
    c2, s2 = (t.reshape(-1, *t.shape[-2:])[0] for t in (c, s))  # sequence 0's (S, D) tables
    rope_table_banks(c2, s2, LANES, HEAD_DIM, MAX_POS)  # rotate-half tables the unit stores
    np.savez(tmp_path / "v.npz", x=np.concatenate(xs), pos=np.concatenate(pos), expected=np.concatenate(want),
             c=c2, s=s2)
    name, src = _build()
    res = run_cocotb(name, src, TB, testcase="test_real_vectors",
                     extra_env={**ENV, VECTORS_ENV: str(tmp_path / "v.npz")})
    assert [t.name for t in res.passed] == ["test_real_vectors"], res.tests


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_rope_kernel_golden_decoder(tmp_path) -> None:
    """A decoder sublayer (golden/sublayer.py) of a Llama block with GQA (6 query, 2 KV heads of 64), random
    weights, calibrated on random inputs: its Q and K before and after RoPE."""
    from vckattn.golden.attention import rope_cos_sin
    from vckattn.golden.blocks import LlamaBlock
    from vckattn.golden.stages import sublayer_int
    from vckattn.golden.sublayer import calibrate_decoder, quantize_input, rope_tables

    torch.manual_seed(0)
    blk = LlamaBlock(384, 6, 2, 768, "bhyt", seq_len=16).double()
    blk.refresh_c_attn()
    h = torch.randn(1, 12, 384, generator=torch.Generator().manual_seed(1), dtype=torch.float64).numpy()
    rope = rope_cos_sin(torch.arange(12), 64, dtype=torch.float64)
    sub = calibrate_decoder(blk.attn, blk.bhyt, h, None, rope)
    c, s = rope_tables(rope, 1, 12, 64)
    _, tr = sublayer_int(sub, quantize_input(h, sub.s_h), None, (c, s))
    _run_trace(tmp_path, tr, c, s, rows_each=12)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_rope_kernel_real_smollm2(tmp_path) -> None:
    """SmolLM2-135M converted to BHyT, layer 0, on real sentences (golden decoder sublayer): its Q and K before
    and after RoPE with the checkpoint's own RoPE tables (θ = 100000, head_dim 64)."""
    from sublayer_data import smollm2_layer

    tr, c, s = smollm2_layer()
    _run_trace(tmp_path, tr, c, s, rows_each=min(MAX_POS, tr["q"].shape[2]))

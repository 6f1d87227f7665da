"""The sublayer's PL units run from the host on whole tensors (sim/sublayer_rtl.py, sim/tb_sublayer_host.py):
registers and tables programmed by hw/driver over AXI4-Lite in Verilator, read back exactly; real layers' tensors
bit-exact with golden; a wrong ID or a word that reads back differently raises; bad input refused before any
simulation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sublayer_data import minilm_layer

from vckattn.golden.bhyt_int import (
    BHYT_EXACT_ID,
    bhyt_register_values,
    bhyt_site_registers,
    gamma_values,
)
from vckattn.golden.regmap import Reg, RegisterMap
from vckattn.golden.requant import RequantRegisters
from vckattn.golden.rope_int import ROPE_ID, rope_table_banks, rope_tables_int
from vckattn.golden.sublayer import (
    RESIDUAL_ID,
    ResidualRegisters,
    residual_add_int,
    residual_register_values,
    residual_regmap,
)
from vckattn.sim import sublayer_rtl
from vckattn.sim.sublayer_rtl import UnitRtlError, run_bhyt_site_rtl, run_residual_rtl, run_rope_rtl


def _residual_regs(d: int) -> ResidualRegisters:
    mult = np.arange(d, dtype=np.int64) * 997 % (1 << 16) + (1 << 16)
    return ResidualRegisters(RequantRegisters(mult, np.full(d, 20, np.int64)),
                             RequantRegisters(np.int64(70000), np.int64(15)), 1.0)


def _decoder_units(sub, tr: dict, c: np.ndarray, s: np.ndarray, max_pos: int, tmp_path) -> None:  # noqa: ANN001
    """A decoder trace's site A (``h`` -> ``u`` and the statistic) and RoPE (``q_pre``/``k_pre`` of every head and
    token -> ``q``/``k``) through the units, bit-exact with golden's trace; registers and tables read back."""
    d = tr["h"].shape[-1]
    h = tr["h"].reshape(-1, d)
    res = run_bhyt_site_rtl(h, sub.site_a, sub.fmt.norm, log=tmp_path / "bhyt.log")
    assert res.ident == BHYT_EXACT_ID
    assert res.readback == {**bhyt_register_values(sub.site_a, sub.fmt.norm), "gamma": gamma_values(sub.site_a)}
    assert np.array_equal(res.out, tr["u"].reshape(-1, d)), "site A's u differs from golden's"
    assert np.array_equal(res.stat, tr["stat"].reshape(-1)), "the statistic on TUSER differs from golden's"
    assert res.cycles >= h.size // 4
    # RoPE: every (sequence, head, position) row of Q and K; one table for all sequences (positions 0..S-1)
    seq = tr["q"].shape[2]
    ct, st = (t.reshape(-1, seq, t.shape[-1]) for t in (c, s))
    assert all(np.array_equal(ct[0], t) for t in ct) and all(np.array_equal(st[0], t) for t in st)
    rows = np.concatenate([tr["q_pre"].reshape(-1, 64), tr["k_pre"].reshape(-1, 64)])
    want = np.concatenate([tr["q"].reshape(-1, 64), tr["k"].reshape(-1, 64)])
    pos = np.tile(np.arange(seq), rows.shape[0] // seq)  # (B, heads, S, D): the position is the fastest index
    res = run_rope_rtl(rows, pos, ct[0], st[0], max_pos=max_pos, log=tmp_path / "rope.log")
    assert res.ident == ROPE_ID
    assert res.readback == {"pos_base": 0, **rope_table_banks(ct[0], st[0], 4, 64, max_pos)}
    assert np.array_equal(res.out, want), "RoPE's q/k differ from golden's"


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_residual_real_minilm(tmp_path) -> None:
    """A MiniLM layer on 4 real sentences (128 tokens of 384 channels): its W_O accumulators and input through the
    residual unit give the golden encoder sublayer's R bit for bit; the per-channel tables read back exactly."""
    sub, x, tr = minilm_layer()
    d = x.shape[-1]
    y, xi, r = tr["y"].reshape(-1, d), x.reshape(-1, d), tr["r"].reshape(-1, d)
    assert np.array_equal(residual_add_int(y, xi, sub.residual), r)
    res = run_residual_rtl(y, xi, sub.residual, log=tmp_path / "sim.log")
    assert res.ident == RESIDUAL_ID and res.stat is None
    want = residual_register_values(sub.residual, d, 1024)
    assert res.readback == want and len(set(want["y_mult"])) > 1  # per-channel tables, read back exactly
    assert np.array_equal(res.out, r), f"{int(np.sum(res.out != r))} of {r.size} outputs differ from golden's R"
    assert res.cycles >= y.size // 4


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_decoder_units_golden_llama(tmp_path) -> None:
    """A golden decoder sublayer of a Llama block with BHyT (384 wide, 6 query and 2 KV heads of 64), random
    weights, calibrated on random inputs: its site A and RoPE through the units."""
    from vckattn.golden.attention import rope_cos_sin
    from vckattn.golden.blocks import LlamaBlock
    from vckattn.golden.stages import sublayer_int
    from vckattn.golden.sublayer import calibrate_decoder, quantize_input, rope_tables

    torch.manual_seed(0)
    blk = LlamaBlock(384, 6, 2, 768, "bhyt", seq_len=16).double()
    blk.refresh_c_attn()
    h = torch.randn(2, 12, 384, generator=torch.Generator().manual_seed(1), dtype=torch.float64).numpy()
    rope = rope_cos_sin(torch.arange(12), 64, dtype=torch.float64)
    sub = calibrate_decoder(blk.attn, blk.bhyt, h, None, rope)
    c, s = rope_tables(rope, 2, 12, 64)
    _, tr = sublayer_int(sub, quantize_input(h, sub.s_h), None, (c, s))
    _decoder_units(sub, tr, c, s, 256, tmp_path)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.full
@pytest.mark.tool("verilator")
def test_decoder_units_real_smollm2(tmp_path) -> None:
    """SmolLM2-135M converted to BHyT, layer 0, on 3 real sentences (golden decoder sublayer): site A on every
    token (576 channels) with the statistic from TUSER, RoPE on its 9 query and 3 KV heads with the checkpoint's
    own tables, bit-exact with the golden trace."""
    from sublayer_data import smollm2_sublayer

    sub, tr, c, s = smollm2_sublayer()
    _decoder_units(sub, tr, c, s, 256, tmp_path)


@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_wrong_ident_and_readback_mismatch(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ID register is checked (a unit whose ID is not the expected one is refused), and a register that
    reads back differently from the word written is caught: a map that declares ``x_mult`` 32 bits wide where
    the unit keeps 18 (a manifest that disagrees with the RTL) writes a value the unit truncates."""
    rng = np.random.default_rng(0)
    y, x = rng.integers(-(1 << 20), 1 << 20, (2, 8)), rng.integers(-128, 128, (2, 8))
    regs = _residual_regs(8)
    ok = run_residual_rtl(y, x, regs, log=tmp_path / "ok.log")
    assert np.array_equal(ok.out, residual_add_int(y, x, regs))
    with pytest.raises(UnitRtlError, match=r"ID register at 0x0 reads 0x2e5a0001, expected 0x2e5a0002"):
        run_residual_rtl(y, x, regs, ident=RESIDUAL_ID + 1, log=tmp_path / "ident.log")

    def wide_x_mult(lanes: int, max_d: int) -> RegisterMap:
        rm = residual_regmap(lanes, max_d)
        regs_ = [Reg(r.name, 32, True, doc=r.doc) if r.name == "x_mult" else r for r in rm.regs]
        return RegisterMap(regs_, rm.mems, ident=rm.ident, version=rm.version)

    monkeypatch.setattr(sublayer_rtl, "residual_regmap", wide_x_mult)
    big = ResidualRegisters(regs.rq_y, RequantRegisters(np.int64(1 << 20), np.int64(15)), 1.0)
    with pytest.raises(UnitRtlError, match=r"readback mismatch: residual\.x_mult at 0x8: wrote 0x00100000, "
                                           r"read 0x00000000"):
        run_residual_rtl(y, x, big, log=tmp_path / "mismatch.log")


def test_bad_input_refused_before_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrong dtype, shape or range, d > max_d, a position outside the tables or >= max_pos: ValueError, and no
    Verilog generated, no simulation started."""

    def no_sim(*_a: object, **_k: object) -> None:
        raise AssertionError("simulation started")

    monkeypatch.setattr(sublayer_rtl, "_verilog", no_sim)
    monkeypatch.setattr("vckattn.sim.runner.run_cocotb", no_sim)
    rng = np.random.default_rng(0)
    d = 16
    h = rng.integers(-128, 128, (3, d)).astype(np.int8)
    site = bhyt_site_registers(2.0, 10.0, np.linspace(0.5, 1.5, d), d, 0.05, 0.05)
    bad_bhyt = [
        (h.astype(np.float32), "integer array"),
        (h[0], "2-D"),
        (h[:0], "non-empty"),
        (h.astype(np.int16) * 2, "int8 values"),
    ]
    for arr, msg in bad_bhyt:
        with pytest.raises(ValueError, match=msg):
            run_bhyt_site_rtl(arr, site, lanes=4, max_d=64)
    with pytest.raises(ValueError, match="max_d = 8"):
        run_bhyt_site_rtl(h, site, lanes=4, max_d=8)
    with pytest.raises(ValueError, match="gamma must have 12 entries"):
        run_bhyt_site_rtl(h[:, :12], site, lanes=4, max_d=64)

    cos, sin = (torch.cos(torch.arange(8.0))[:, None].repeat(1, 8).double(),
                torch.sin(torch.arange(8.0))[:, None].repeat(1, 8).double())
    c, s = rope_tables_int(cos.numpy(), sin.numpy())  # (8 positions, head_dim 8), rotate-half
    x = rng.integers(-128, 128, (4, 8))
    with pytest.raises(ValueError, match=r"positions must be in \[0, 8\)"):
        run_rope_rtl(x, [0, 1, 2, 8], c, s, lanes=2, head_dim=8, max_pos=8)  # position = max_pos
    with pytest.raises(ValueError, match=r"positions must be in \[0, 4\)"):
        run_rope_rtl(x, [0, 1, 2, 5], c[:4], s[:4], lanes=2, head_dim=8, max_pos=8)  # beyond the tables given
    with pytest.raises(ValueError, match="max_pos = 4"):
        run_rope_rtl(x, [0, 1, 2, 3], c, s, lanes=2, head_dim=8, max_pos=4)  # tables longer than the unit's
    with pytest.raises(ValueError, match="head_dim = 8"):
        run_rope_rtl(x[:, :6], [0, 1, 2, 3], c, s, lanes=2, head_dim=8, max_pos=8)
    with pytest.raises(ValueError, match="4 rows but 3 positions"):
        run_rope_rtl(x, [0, 1, 2], c, s, lanes=2, head_dim=8, max_pos=8)
    with pytest.raises(ValueError, match="integer array"):
        run_rope_rtl(x.astype(float), [0, 1, 2, 3], c, s, lanes=2, head_dim=8, max_pos=8)

    regs = _residual_regs(d)
    y, xr = rng.integers(-1000, 1000, (3, d)), rng.integers(-128, 128, (3, d))
    with pytest.raises(ValueError, match="same shape"):
        run_residual_rtl(y, xr[:, :8], regs, max_d=64)
    with pytest.raises(ValueError, match="int32 values"):
        run_residual_rtl(y * (1 << 30), xr, regs, max_d=64)
    with pytest.raises(ValueError, match="integer array"):
        run_residual_rtl(y.astype(np.float64), xr, regs, max_d=64)
    with pytest.raises(ValueError, match="max_d = 8"):
        run_residual_rtl(y, xr, regs, max_d=8)
    with pytest.raises(ValueError, match="x_mult"):  # a constant that does not fit its register
        run_residual_rtl(y, xr, ResidualRegisters(regs.rq_y, RequantRegisters(np.int64(1 << 20), np.int64(3)), 1.0),
                         max_d=64)

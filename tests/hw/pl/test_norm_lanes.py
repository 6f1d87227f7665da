"""BHyT and RMSNorm lane datapaths (hw/pl/norm_lanes.py) against the golden integer model, with stalls."""

from __future__ import annotations

import numpy as np
from pl_harness import run_pipeline

from vckattn.golden.bhyt_int import C_SHIFT, NormFormat, bhyt_site_int, bhyt_site_registers, sum_of_squares
from vckattn.golden.error_budget import norm_cases
from vckattn.golden.fixedpoint import shift_round
from vckattn.golden.funcunits import rsqrt
from vckattn.golden.rmsnorm_int import rmsnorm_int, rmsnorm_registers
from vckattn.hw.pl.norm_lanes import BHyTLane, BHyTScaleUnit, RMSNormLane, RMSNormScaleUnit

FMT = NormFormat()


def _tokens(n_tokens=48, d=32):
    q = norm_cases(d=d, tokens=n_tokens)
    return q, sum_of_squares(q)[:, 0]


def test_bhyt_scale_unit_and_lane_match_golden():
    q, stat = _tokens()
    d = q.shape[1]
    gamma = np.linspace(-1.5, 1.5, d)
    for regs, stat_in in ((bhyt_site_registers(2.0, 10.0, gamma, d, 0.05, 0.05), stat),
                          (bhyt_site_registers(1.0, 10.0, gamma, d, 0.07, 0.05, c_attn=0.4, lam_attn=2.0), stat)):
        unit = BHyTScaleUnit(FMT)
        scale = run_pipeline(unit, {"stat": stat_in}, ("c", "sh"),
                             {"c_int": regs.c_int, "eps_int": regs.eps_int, "k_mult": regs.k_mult,
                              "k_shift": regs.k_shift})
        r, k = rsqrt(np.maximum(stat_in + regs.c_int + regs.eps_int, 1), FMT.rsqrt)
        assert np.array_equal(scale["c"], shift_round(r * regs.k_mult, C_SHIFT, "half_up"))
        assert np.array_equal(scale["sh"], regs.k_shift + FMT.rsqrt.out_frac - C_SHIFT + k)
        # lanes: every element with its token's scale and its channel's gamma
        c_el = np.repeat(scale["c"], d)
        sh_el = np.repeat(scale["sh"], d)
        g_el = np.tile(regs.gamma, q.shape[0])
        out = run_pipeline(BHyTLane(FMT), {"q": q.ravel(), "c": c_el, "sh": sh_el, "g": g_el}, ("out",),
                           {"g_frac": regs.g_frac}, seed=1)["out"]
        assert np.array_equal(out.reshape(q.shape), bhyt_site_int(q, stat_in[:, None], regs, FMT))


def test_rmsnorm_scale_unit_and_lane_match_golden():
    q, stat = _tokens()
    d = q.shape[1]
    regs = rmsnorm_registers(np.linspace(0.2, 1.8, d), d, 0.05, 0.05)
    scale = run_pipeline(RMSNormScaleUnit(FMT), {"stat": stat}, ("r", "sh"),
                         {"eps_int": regs.eps_int, "g_frac": regs.g_frac})
    out = run_pipeline(RMSNormLane(FMT), {"q": q.ravel(), "r": np.repeat(scale["r"], d),
                                          "sh": np.repeat(scale["sh"], d), "g": np.tile(regs.gamma, q.shape[0])},
                       ("out",), seed=2)["out"]
    assert np.array_equal(out.reshape(q.shape), rmsnorm_int(q, regs, FMT))

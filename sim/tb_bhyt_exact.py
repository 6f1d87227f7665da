"""cocotb 2.x testbench for :class:`vckattn.hw.pl.bhyt_exact.BHyTExactKernel` (BHyT site A).

The full description: ``docs/internals/sim.md``, section ``sim/tb_bhyt_exact.py``.
"""

from __future__ import annotations

import numpy as np

from vckattn.golden.bhyt_int import (
    BHYT_EXACT_ID,
    BHyTSiteRegisters,
    bhyt_exact_regmap,
    bhyt_register_values,
    bhyt_site_int,
    bhyt_site_registers,
    gamma_values,
    sum_of_squares,
)
from vckattn.golden.swiftmax_int import fold_multiplier
from vckattn.hw.pl.bhyt_exact import BHyTExactKernel, buffer_bits
from vckattn.sim.norm_tb import (
    FMT,
    NormConfig,
    NormSpec,
    norm_tests,
)

MAX_SHIFT = 62  # the golden model's shift_round works on int64: k_shift + 7 + k <= 62


def _gamma(rng: np.random.Generator, d: int) -> np.ndarray:
    return rng.uniform(0.25, 1.75, d) * rng.choice([-1.0, 1.0], d)


def typical(rng: np.random.Generator, max_d: int) -> BHyTSiteRegisters:
    """Site A: λ = 2, κ = 10, s_in = s_stat = 0.05, random-sign γ."""
    return bhyt_site_registers(2.0, 10.0, _gamma(rng, max_d), max_d, 0.05, 0.05, fmt=FMT)


def fuzz_registers(rng: np.random.Generator, d: int) -> BHyTSiteRegisters:
    """Random registers: log-uniform ``eps_int``/``c_int`` (up to 40 bits), ``k_mult · 2^-k_shift``
    around the value that puts a typical element (``|q| ~ 30``) at a tanh argument ~ 1 (x 2^±4),
    random int16 γ, ``g_frac`` 0..3; within the golden model's shift range."""
    eps = int(rng.integers(0, 1 << int(rng.integers(1, FMT.stat_bits + 1))))
    c = int(rng.integers(0, 1 << int(rng.integers(1, FMT.stat_bits + 1))))
    k_max = ((d * (1 << 14) + eps + c).bit_length() - 1) >> 1
    v_typ = d * 400 + eps + c
    target = (1 << FMT.arg_frac) * np.sqrt(v_typ) / 30 * 2.0 ** rng.uniform(-4, 4)
    try:
        k_mult, k_shift = fold_multiplier(target, FMT.k_bits)
    except ValueError:  # beyond the register range (huge eps/c): a large multiplier, no shift
        k_mult, k_shift = int(rng.integers(1 << (FMT.k_bits - 2), 1 << FMT.k_bits)), 0
    k_shift = min(k_shift, MAX_SHIFT - 7 - k_max)
    return BHyTSiteRegisters(k_mult=k_mult, k_shift=k_shift, eps_int=eps, c_int=c,
                             gamma=rng.integers(-32768, 32768, d), g_frac=int(rng.integers(0, 4)), s_out=1.0)


def configs(rng: np.random.Generator, d: int) -> list[NormConfig]:
    g = _gamma(rng, d)
    gmax = float(np.max(np.abs(g)))
    site_m = bhyt_site_registers(1.0, 10.0, _gamma(rng, d), d, 0.07, 0.05, c_attn=0.4, lam_attn=2.0, fmt=FMT)
    small_out = bhyt_site_registers(2.0, 10.0, g, d, 0.05, 0.05, s_out=gmax / 30000, fmt=FMT)
    sat = BHyTSiteRegisters(k_mult=(1 << FMT.k_bits) - 1, k_shift=0, eps_int=0, c_int=0,
                            gamma=rng.choice([32767, -32768, -32767], d), g_frac=0, s_out=1.0)
    top = (1 << FMT.stat_bits) - 1
    big = BHyTSiteRegisters(k_mult=(1 << FMT.k_bits) - 1, k_shift=0, eps_int=top, c_int=top,
                            gamma=rng.integers(-32768, 32768, d), g_frac=0, s_out=1.0)
    tiny = bhyt_site_registers(2.0, 10.0, g, d, 1e-9, 1e-9, s_out=gmax * 1.5 * 2.0**31 / 32767, fmt=FMT)
    fuzz = fuzz_registers(rng, d)
    assert site_m.c_int > 0 and small_out.g_frac == 0 and tiny.g_frac == 31 and tiny.eps_int == top
    for r in (site_m, small_out, tiny):
        assert ((d * (1 << 14) + r.eps_int + r.c_int).bit_length() - 1 >> 1) + r.k_shift + 7 <= MAX_SHIFT
    return [
        NormConfig("site A", typical(rng, d), 0.3),
        NormConfig("site-M-like c_int", site_m, 0.2),
        NormConfig("small s_out, g_frac 0", small_out, 0.12),
        NormConfig("k_mult max, k_shift 0, gamma +-max", sat, 0.1),
        NormConfig("eps_int = c_int = 2^40-1", big, 0.1),
        NormConfig("tiny scales, eps saturated, g_frac 31", tiny, 0.05),
        NormConfig("random registers", fuzz, 0.13),
    ]


SPEC = NormSpec(
    name="bhyt_exact",
    regmap=lambda lanes, max_d: bhyt_exact_regmap(lanes, max_d, FMT),
    ident=BHYT_EXACT_ID,
    golden=lambda q, regs: bhyt_site_int(q, sum_of_squares(q), regs, FMT),
    register_values=lambda regs: bhyt_register_values(regs, FMT),
    gamma_values=gamma_values,
    configs=configs,
    typical=typical,
    latency=BHyTExactKernel.LATENCY,
    buffer_bits=buffer_bits,
    stat_tuser=True,
)


#: test_registers, test_random_traffic, test_overlong, test_throughput (sim/norm_tb.py)
globals().update(norm_tests(SPEC))

"""cocotb 2.x testbench for :class:`vckattn.hw.pl.rmsnorm.RMSNormKernel` (the RMSNorm baseline).

The full description: ``docs/internals/sim.md``, section ``sim/tb_rmsnorm.py``.
"""

from __future__ import annotations

import numpy as np

from vckattn.golden.bhyt_int import gamma_values
from vckattn.golden.rmsnorm_int import (
    RMSNORM_ID,
    RMSNormRegisters,
    rmsnorm_int,
    rmsnorm_register_values,
    rmsnorm_registers,
    rmsnorm_regmap,
)
from vckattn.hw.pl.rmsnorm import RMSNormKernel, buffer_bits
from vckattn.sim.norm_tb import (
    FMT,
    NormConfig,
    NormSpec,
    norm_tests,
)

MAX_SHIFT = 62  # the golden model's shift_round works on int64: 15 + k + g_frac <= 62


def _gamma(rng: np.random.Generator, d: int) -> np.ndarray:
    return rng.uniform(0.25, 1.75, d) * rng.choice([-1.0, 1.0], d)


def typical(rng: np.random.Generator, max_d: int) -> RMSNormRegisters:
    """s_x = 0.05, s_out = 8/127 (outputs up to 8 before saturation), random-sign γ."""
    return rmsnorm_registers(_gamma(rng, max_d), max_d, 0.05, 8 / 127, fmt=FMT)


def fuzz_registers(rng: np.random.Generator, d: int) -> RMSNormRegisters:
    """Random registers: log-uniform ``eps_int`` (up to 40 bits), random int16 γ, ``g_frac`` around
    the value that maps a typical element (``|q| ~ 30``) to ``|out| ~ 10`` (x 2^±3), within [0, 31] and the
    golden model's shift range."""
    eps = int(rng.integers(0, 1 << int(rng.integers(1, FMT.stat_bits + 1))))
    k_max = ((d * (1 << 14) + eps).bit_length() - 1) >> 1
    v_typ = d * 400 + eps
    g_frac = int(np.rint(np.log2(16384 * 30 / 10 / np.sqrt(v_typ)) + rng.uniform(-3, 3)))
    g_frac = int(np.clip(g_frac, 0, min(31, MAX_SHIFT - 15 - k_max)))
    return RMSNormRegisters(eps_int=eps, gamma=rng.integers(-32768, 32768, d), g_frac=g_frac, s_out=1.0)


def configs(rng: np.random.Generator, d: int) -> list[NormConfig]:
    g = _gamma(rng, d)
    gmax = float(np.max(np.abs(g))) * np.sqrt(d)
    small_out = rmsnorm_registers(g, d, 0.05, gmax / 30000, fmt=FMT)
    top = (1 << FMT.stat_bits) - 1
    g_ext = rng.integers(-32768, 32768, d)
    pick = rng.random(d) < 0.5
    g_ext[pick] = rng.choice([32767, -32768, -32767], int(pick.sum()))
    big_eps = RMSNormRegisters(eps_int=top, gamma=g_ext, g_frac=0, s_out=1.0)
    tiny = rmsnorm_registers(g, d, 1e-9, 8 / 127, fmt=FMT)
    large_out = rmsnorm_registers(g, d, 0.05, gmax * 1.5 * 2.0**31 / 32767, fmt=FMT)
    fuzz = fuzz_registers(rng, d)
    assert small_out.g_frac == 0 and tiny.eps_int == top and large_out.g_frac == 31
    return [
        NormConfig("typical", typical(rng, d), 0.35),
        NormConfig("small s_out, g_frac 0", small_out, 0.15),
        NormConfig("eps_int = 2^40-1, gamma +-max", big_eps, 0.15),
        NormConfig("tiny s_x, eps saturated", tiny, 0.1),
        NormConfig("large s_out, g_frac 31", large_out, 0.05),
        NormConfig("random registers", fuzz, 0.2),
    ]


SPEC = NormSpec(
    name="rmsnorm",
    regmap=lambda lanes, max_d: rmsnorm_regmap(lanes, max_d, FMT),
    ident=RMSNORM_ID,
    golden=lambda q, regs: rmsnorm_int(q, regs, FMT),
    register_values=lambda regs: rmsnorm_register_values(regs, FMT),
    gamma_values=gamma_values,
    configs=configs,
    typical=typical,
    latency=RMSNormKernel.LATENCY,
    buffer_bits=buffer_bits,
    stat_tuser=False,
)


#: test_registers, test_random_traffic, test_overlong, test_throughput (sim/norm_tb.py)
globals().update(norm_tests(SPEC))

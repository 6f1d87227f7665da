"""Function-unit gateware (hw/pl/funcunits.py) against the golden units, in Amaranth's simulator.

Exhaustive for 2^f (all 4,096 inputs); the mantissa units and tanh over every input of a
reduced but complete range plus random values across their full input width.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from vckattn.golden import funcunits as gf
from vckattn.hw.pl.funcunits import Pow2FracUnit, RecipUnit, RsqrtUnit, TanhUnit


def _run(unit, in_port: str, out_ports: tuple[str, ...], values: np.ndarray) -> list[tuple[int, ...]]:
    """Feed one value per cycle with en=1; return the outputs LATENCY cycles later."""
    got: list[tuple[int, ...]] = []
    lat = unit.LATENCY

    async def bench(ctx):
        ctx.set(unit.en, 1)
        seq = [int(v) for v in values] + [0] * lat
        for i, v in enumerate(seq):
            ctx.set(getattr(unit, in_port), v)
            await ctx.tick()
            if i >= lat - 1 and len(got) < len(values):
                got.append(tuple(ctx.get(getattr(unit, p)) for p in out_ports))

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("lut_product", [False, True])
def test_pow2_exhaustive(lut_product):
    """Both builds of the 2^f unit (DSP interpolation product; ROM of steps and LUT product) on every input."""
    cfg = gf.Pow2Config()
    f = np.arange(1 << cfg.in_frac)
    got = np.array([g[0] for g in _run(Pow2FracUnit(cfg, lut_product), "f", ("m",), f)])
    assert np.array_equal(got, gf.pow2_frac(f, cfg))


@pytest.mark.parametrize("sqrt", [False, True])
def test_mantissa_units(sqrt):
    rng = np.random.default_rng(0)
    width = 40 if sqrt else 34
    x = np.concatenate([np.arange(1, 3000), rng.integers(1, 1 << (width - 1), 2000), 2 ** np.arange(width - 1),
                        2 ** np.arange(1, width - 1) - 1])
    unit = RsqrtUnit(in_width=width) if sqrt else RecipUnit(in_width=width)
    got = np.array(_run(unit, "x", ("mant", "exp"), x))
    mant, e = (gf.rsqrt if sqrt else gf.recip)(x, unit.cfg)
    assert np.array_equal(got[:, 0], mant) and np.array_equal(got[:, 1], e)


def test_tanh_unit():
    cfg = gf.TanhConfig()
    rng = np.random.default_rng(1)
    a = np.concatenate([np.arange(-(1 << 15), 1 << 15, 7), rng.integers(-(1 << 23), 1 << 23, 2000),
                        [-(1 << 23), (1 << 23) - 1, 0, 1, -1, 32767, 32768, -32768, -32769]])
    got = np.array([g[0] for g in _run(TanhUnit(cfg), "a", ("y",), a)])
    assert np.array_equal(got, gf.tanh_unit(a, cfg))

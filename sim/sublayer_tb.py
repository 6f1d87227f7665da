"""Shared pieces of the testbenches of the sublayer's PL units (residual add, requantizer, RoPE): the register
read-back check, test vectors from a file, and the edge values of the requantization arithmetic.

No ``@cocotb.test`` here; :mod:`vckattn.sim.kernel_tb` is the harness.
"""

from __future__ import annotations

import json
import os
import random

import numpy as np
from cocotbext.axi import AxiResp

from vckattn.hw.pl.axil import RegisterMap
from vckattn.sim.kernel_tb import KernelHarness

__all__ = ["VECTORS_ENV", "check_register_readback", "edge_requant", "load_vectors", "write_metrics"]

#: environment variable naming an ``.npz`` of real test vectors (written by the pytest that runs the testbench)
VECTORS_ENV = "VCKATTN_TB_VECTORS"


def load_vectors() -> dict[str, np.ndarray]:
    """The ``.npz`` that :data:`VECTORS_ENV` names (AssertionError if it is not set: the test needs it)."""
    path = os.environ.get(VECTORS_ENV)
    assert path, f"{VECTORS_ENV} must name the test vectors (.npz)"
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def write_metrics(**fields: object) -> None:
    """Write the measured figures as JSON where ``VCKATTN_METRICS_OUT`` says (the PL performance sweep, the hw
    report); nothing when it is not set."""
    path = os.environ.get("VCKATTN_METRICS_OUT")
    if path:
        with open(path, "w") as f:
            json.dump(fields, f)


def _random_value(rng: random.Random, width: int, signed: bool) -> int:
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    return rng.choice([lo, hi, 0, rng.randint(lo, hi), rng.randint(lo, hi)])


async def check_register_readback(h: KernelHarness, rm: RegisterMap, ident: int, rng: random.Random,
                                  entries: int = 24) -> None:
    """ID and VERSION; every register's reset value; every ``rw`` register and ``entries`` random entries of
    every memory (first and last included) written with random values (the extremes of their range among them)
    and read back exactly; writes to ``ro`` registers and constants answer SLVERR and change nothing."""
    assert await h.read_reg(rm, "ID") == ident
    assert await h.read_reg(rm, "VERSION") == rm.version
    for r in rm.regs:
        assert await h.read_reg(rm, r.name) == r.reset, f"reset value of {r.name}"
    model: dict[str, int] = {}
    for _ in range(3):
        for r in rm.writable:
            v = _random_value(rng, r.width, r.signed)
            await h.write_regs(rm, {r.name: v})
            model[r.name] = v
        for name, v in model.items():
            assert await h.read_reg(rm, name) == v, name
    for mem in rm.mems:
        idx = sorted({0, mem.depth - 1, *(rng.randrange(mem.depth) for _ in range(entries))})
        vals = {k: _random_value(rng, mem.width, mem.signed) for k in idx}
        for k, v in vals.items():
            await h.write_mem(rm, mem.name, [v], start=k)
        for k, v in vals.items():
            assert (await h.read_mem(rm, mem.name, 1, start=k))[0] == v, f"{mem.name}[{k}]"
    for r in [*(x for x in rm.regs if x.access == "ro"), "ID", "VERSION"]:
        name = r if isinstance(r, str) else r.name
        before = await h.read_word(rm.offset(name))
        assert await h.write_word(rm.offset(name), 0xDEADBEEF) == AxiResp.SLVERR, name
        assert await h.read_word(rm.offset(name)) == before, name


def edge_requant(rng: np.random.Generator, n: int, mult_bits: int = 18) -> tuple[np.ndarray, np.ndarray]:
    """``n`` per-channel ``(mult, shift)`` pairs that reach the arithmetic's edges: the multiplier extremes
    (``-2^(mult_bits-1)``, ``2^(mult_bits-1) - 1``, 0, ±1), shifts 0, 1 and 62, exact halves (``2^16`` with
    shift 17: every odd accumulator is a tie), and normalized random ones (as :func:`.requant.requant_registers`
    makes them: ``2^(mult_bits-2) <= mult < 2^(mult_bits-1)``)."""
    top = 1 << (mult_bits - 1)
    mult = rng.integers(top // 2, top, size=n)
    shift = rng.integers(8, 40, size=n)
    fixed = [(-top, 20), (top - 1, 20), (0, 5), (1, 0), (-1, 1), (1 << 16, 17), (-(1 << 16), 17), (top - 1, 62),
             (-top, 62), (12345, 0), (-777, 1)]
    for k, (mu, s) in enumerate(fixed[: n]):
        mult[k], shift[k] = mu, s
    perm = rng.permutation(n)
    return mult[perm].astype(np.int64), shift[perm].astype(np.int64)

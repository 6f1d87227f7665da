"""Shared cocotb test bodies of the token-buffered norm kernels (no ``@cocotb.test`` here).

Used by :mod:`vckattn.sim.tb_bhyt_exact` (:class:`~vckattn.hw.pl.bhyt_exact.BHyTExactKernel`)
and :mod:`vckattn.sim.tb_rmsnorm` (:class:`~vckattn.hw.pl.rmsnorm.RMSNormKernel`); each describes
its kernel by a :class:`NormSpec` (register map, golden model, register configurations) and
wraps the coroutines here in ``@cocotb.test`` functions.

``lanes`` comes from the DUT's port width, ``max_d`` from the environment variable
``TB_MAX_D`` (default 1024), the element count of the random-traffic test from
``TB_ELEMENTS`` (default 100,000). Expected outputs come from the golden model of each token
(zero-padded to ``max_d``: padding zeros change neither ``S`` nor the real elements); every
element is compared exactly. For the BHyT kernel the output TUSER (``S``) of every beat is
compared with ``sum_of_squares`` of its token as well.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiResp, AxiStreamFrame

from vckattn.golden.bhyt_int import NormFormat, sum_of_squares
from vckattn.golden.error_budget import norm_cases
from vckattn.hw.pl.axil import RegisterMap
from vckattn.sim.kernel_tb import KernelHarness, pack, start

FMT = NormFormat()

__all__ = ["FMT", "NormConfig", "NormSpec", "TuserRecorder", "edge_tokens", "norm_tests", "random_tokens",
           "run_overlong", "run_random_traffic", "run_registers", "run_throughput"]


@dataclass
class NormConfig:
    """One register configuration of a random-traffic run.

    ``regs``: golden register object; ``weight``: share of the run's elements.
    """

    label: str
    regs: object
    weight: float


@dataclass
class NormSpec:
    """What the shared tests need to know about a norm kernel.

    Attributes:
        name: Kernel name (logs).
        regmap: ``(lanes, max_d) -> RegisterMap``.
        ident: Value of the ID register.
        golden: ``(q (tokens, max_d) int64, regs) -> int8 outputs`` (the golden model).
        register_values: golden regs -> ``{register: value}``.
        gamma_values: golden regs -> ``gamma`` memory contents (``max_d`` entries).
        configs: ``(rng, max_d) -> [NormConfig]`` (register sets of the random-traffic test).
        typical: ``(rng, max_d) -> regs`` (a realistic configuration, throughput/overlong tests).
        latency: ``LATENCY`` (pass-2 stage registers) of the kernel.
        buffer_bits: ``(lanes, max_d) -> int``.
        stat_tuser: The output TUSER carries ``S`` (checked on every beat).
    """

    name: str
    regmap: Callable[[int, int], RegisterMap]
    ident: int
    golden: Callable[[np.ndarray, object], np.ndarray]
    register_values: Callable[[object], dict[str, int]]
    gamma_values: Callable[[object], list[int]]
    configs: Callable[[np.random.Generator, int], list[NormConfig]]
    typical: Callable[[np.random.Generator, int], object]
    latency: int
    buffer_bits: Callable[[int, int], int]
    stat_tuser: bool


def dut_shape(dut: SimHandleBase) -> tuple[int, int]:
    """(lanes, max_d) from the DUT's TDATA width and ``TB_MAX_D``."""
    return len(dut.s_axis_tdata) // 8, int(os.environ.get("TB_MAX_D", "1024"))


def make_harness(dut: SimHandleBase, lanes: int) -> KernelHarness:
    return KernelHarness(dut, lanes=lanes, in_width=8, out_width=8, in_signed=True, out_signed=True, user=False)


def expected_tokens(spec: NormSpec, tokens: Sequence[np.ndarray], regs: object, max_d: int) -> list[np.ndarray]:
    """Golden output of each token (the first ``max_d`` elements of longer ones)."""
    q = np.zeros((len(tokens), max_d), dtype=np.int64)
    for r, t in enumerate(tokens):
        n = min(len(t), max_d)
        q[r, :n] = t[:n]
    out = spec.golden(q, regs)
    return [out[r, : min(len(t), max_d)] for r, t in enumerate(tokens)]


async def load(h: KernelHarness, spec: NormSpec, rm: RegisterMap, regs: object) -> None:
    await h.write_regs(rm, spec.register_values(regs))
    await h.write_mem(rm, "gamma", spec.gamma_values(regs))


class TuserRecorder:
    """Records ``m_axis_tuser`` of every output handshake, grouped into frames by TLAST."""

    def __init__(self, dut: SimHandleBase) -> None:
        self.dut = dut
        self.frames: list[list[int]] = []
        self._cur: list[int] = []
        self._task = cocotb.start_soon(self._run())

    async def _run(self) -> None:
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            await ReadOnly()
            if int(d.m_axis_tvalid.value) and int(d.m_axis_tready.value):
                self._cur.append(int(d.m_axis_tuser.value))
                if int(d.m_axis_tlast.value):
                    self.frames.append(self._cur)
                    self._cur = []

    def stop(self) -> None:
        self._task.cancel()

    def check(self, tokens: Sequence[np.ndarray], lanes: int, max_d: int) -> None:
        assert not self._cur, f"{len(self._cur)} TUSER beats without TLAST"
        assert len(self.frames) == len(tokens), f"{len(self.frames)} TUSER frames for {len(tokens)} tokens"
        for r, (t, got) in enumerate(zip(tokens, self.frames, strict=True)):
            s = int(sum_of_squares(t[:max_d])[0])
            beats = -(-min(len(t), max_d) // lanes)
            assert got == [s] * beats, f"token {r} (d={len(t)}): TUSER {got[:4]}... expected S = {s} on {beats} beats"


# --------------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------------


def edge_tokens(rng: np.random.Generator, max_d: int, lanes: int) -> list[np.ndarray]:
    """All-zero, ±127/−128, one-hot spikes, constants, alternating, every int8 value, and rows of
    :func:`~vckattn.golden.error_budget.norm_cases`, at several lengths (incl. 1 and ``max_d``)."""
    out: list[np.ndarray] = []
    for n in sorted({1, 2, lanes, lanes + 1, max(1, max_d // 2 + 1), max_d - 1, max_d} - {0}):
        out.append(np.zeros(n, dtype=np.int64))
        for v in (127, -128, -127, 1, -1, 64):
            out.append(np.full(n, v, dtype=np.int64))
        for v in (127, -128, 1):
            spike = np.zeros(n, dtype=np.int64)
            spike[int(rng.integers(n))] = v
            out.append(spike)
        alt = np.full(n, 127, dtype=np.int64)
        alt[1::2] = -128
        out.append(alt)
        out.append(np.arange(n, dtype=np.int64) % 256 - 128)
    cases = norm_cases(d=max_d, tokens=8, seed=int(rng.integers(1 << 31)))  # heavy tails + edge rows
    out.extend(np.asarray(r, dtype=np.int64) for r in cases)
    return out


def _token_length(rng: np.random.Generator, max_d: int, lanes: int) -> int:
    if rng.random() < 0.35:
        pool = [1, 2, 3, lanes, lanes + 1, 2 * lanes - 1, max_d, max_d, max_d - 1, max_d - lanes + 1]
        return int(np.clip(rng.choice(pool), 1, max_d))
    return int(rng.integers(1, max_d + 1))


def random_token(rng: np.random.Generator, n: int) -> np.ndarray:
    """One token of length ``n``: mostly heavy-tailed (Student t, 4 dof) at a random scale, else
    uniform, small, constant, spiky or zero."""
    k = rng.random()
    if k < 0.55:
        x = rng.standard_t(4, size=n) * rng.choice([2.0, 8.0, 20.0, 40.0, 200.0])
    elif k < 0.7:
        return rng.integers(-128, 128, size=n)
    elif k < 0.8:
        return rng.integers(-2, 3, size=n)
    elif k < 0.87:
        return np.full(n, int(rng.integers(-128, 128)), dtype=np.int64)
    elif k < 0.95:
        t = np.zeros(n, dtype=np.int64)
        idx = rng.integers(0, n, size=int(rng.integers(1, 4)))
        t[idx] = rng.choice([-128, -127, 127, 100, -50], size=len(idx))
        return t
    else:
        return np.zeros(n, dtype=np.int64)
    return np.clip(np.rint(x), -128, 127).astype(np.int64)


def random_tokens(rng: np.random.Generator, n_elements: int, max_d: int, lanes: int) -> list[np.ndarray]:
    tokens, total = [], 0
    while total < n_elements:
        t = random_token(rng, _token_length(rng, max_d, lanes))
        tokens.append(t)
        total += len(t)
    return tokens


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


async def run_registers(dut: SimHandleBase, spec: NormSpec) -> None:
    """ID/VERSION, reset values, write/readback of every register (limits and random values),
    SLVERR on read-only and unmapped words, ``gamma`` over all ``max_d`` entries, and a realistic
    configuration's values."""
    lanes, max_d = dut_shape(dut)
    rm = spec.regmap(lanes, max_d)
    await start(dut)
    h = make_harness(dut, lanes)
    rng = random.Random(cocotb.RANDOM_SEED)
    assert await h.read_reg(rm, "ID") == spec.ident
    assert await h.read_reg(rm, "VERSION") == 1
    for r in rm.regs:
        assert await h.read_reg(rm, r.name) == r.reset == 0, f"reset value of {r.name}"
    rw = [r for r in rm.regs if r.access == "rw"]
    for r in rw:
        top = (1 << r.width) - 1
        for v in (top, 0, 1, rng.randint(0, top), 1 << (r.width - 1)):
            await h.write_regs(rm, {r.name: v})
            assert await h.read_reg(rm, r.name) == v, (r.name, v)
    values = {r.name: rng.randint(0, (1 << r.width) - 1) for r in rw}
    await h.write_regs(rm, values)
    for name, v in values.items():
        assert await h.read_reg(rm, name) == v, name
    for r in rm.regs:
        if r.access == "ro":
            assert await h.write_word(rm.offset(r.name), 0x1234) == AxiResp.SLVERR, r.name
            assert await h.read_reg(rm, r.name) == 0, r.name
    for name in ("ID", "VERSION"):
        assert await h.write_word(rm.offset(name), 0) == AxiResp.SLVERR
    gamma_end = rm.offset("gamma") + rm.mem("gamma").window_bytes
    for off in (rm.offset(rm.regs[-1].name) + 4, rm.offset("gamma") + 4 * max_d, gamma_end):
        if off >= 1 << rm.addr_width or off == rm.offset("gamma"):
            continue  # outside the aperture (or no gap before gamma)
        assert await h.write_word(off, 1) == AxiResp.SLVERR, hex(off)
        assert await h.read_word(off) == (0, AxiResp.SLVERR), hex(off)
    gamma = [-32768, 32767, -1, 0, 1] + [rng.randint(-32768, 32767) for _ in range(max_d - 5)]
    await h.write_mem(rm, "gamma", gamma[:max_d])
    assert await h.read_mem(rm, "gamma", max_d) == gamma[:max_d]
    raw, resp = await h.read_word(rm.offset("gamma"))
    assert resp == AxiResp.OKAY and raw == 0xFFFF8000, f"gamma[0] = -32768 must read 0xffff8000, got {raw:#x}"
    regs = spec.typical(np.random.default_rng(cocotb.RANDOM_SEED), max_d)
    await load(h, spec, rm, regs)
    for name, v in spec.register_values(regs).items():
        assert await h.read_reg(rm, name) == v, name
    assert await h.read_mem(rm, "gamma", max_d) == spec.gamma_values(regs)


async def run_random_traffic(dut: SimHandleBase, spec: NormSpec) -> None:
    """>= TB_ELEMENTS elements with random source idles and sink backpressure over the spec's
    register configurations, plus edge tokens in every configuration; ``tokens`` counter."""
    lanes, max_d = dut_shape(dut)
    rm = spec.regmap(lanes, max_d)
    await start(dut)
    h = make_harness(dut, lanes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.3, out_prob=0.4)
    total = int(os.environ.get("TB_ELEMENTS", "100000"))
    configs = spec.configs(rng, max_d)
    wsum = sum(c.weight for c in configs)
    n_tokens = n_elems = n_sat = n_nonzero = 0
    for cfg in configs:
        await load(h, spec, rm, cfg.regs)
        tokens = edge_tokens(rng, max_d, lanes)
        tokens += random_tokens(rng, max(0, int(total * cfg.weight / wsum) - sum(map(len, tokens))), max_d, lanes)
        order = rng.permutation(len(tokens))
        tokens = [tokens[i] for i in order]
        expected = expected_tokens(spec, tokens, cfg.regs, max_d)
        rec = TuserRecorder(dut) if spec.stat_tuser else None
        stats = await h.run_rows(tokens, None, expected)
        if rec is not None:
            rec.stop()
            rec.check(tokens, lanes, max_d)
        flat = np.concatenate(expected)
        n_sat += int(np.sum((flat == 127) | (flat == -128)))
        n_nonzero += int(np.sum(flat != 0))
        n_tokens += stats.rows
        n_elems += stats.elements
        dut._log.info(
            "%s [%s]: %d elements in %d tokens, %d cycles (%.3f elem/cycle), input stalled %d cycles, "
            "%d saturated, %d nonzero outputs",
            spec.name, cfg.label, stats.elements, stats.rows, stats.cycles, stats.elements_per_cycle,
            stats.in_ready_low, int(np.sum((flat == 127) | (flat == -128))), int(np.sum(flat != 0)),
        )
        assert stats.in_ready_low > 0, "backpressure never reached s_axis_tready"
    assert n_elems >= total, (n_elems, total)
    assert n_sat > 0 and n_nonzero > n_elems // 4, (n_sat, n_nonzero)
    assert await h.read_reg(rm, "tokens") == n_tokens
    assert await h.read_reg(rm, "overlong") == 0
    dut._log.info("%s: %d elements in %d tokens checked", spec.name, n_elems, n_tokens)


async def run_overlong(dut: SimHandleBase, spec: NormSpec) -> None:
    """A token longer than ``max_d`` is truncated to ``max_d`` (beats beyond are dropped), counted
    in ``overlong``; the tokens before and after it are unaffected."""
    lanes, max_d = dut_shape(dut)
    rm = spec.regmap(lanes, max_d)
    await start(dut)
    h = make_harness(dut, lanes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.2, out_prob=0.3)
    regs = spec.typical(rng, max_d)
    await load(h, spec, rm, regs)
    tokens = [random_token(rng, max_d), random_token(rng, max_d + 2 * lanes + 1), random_token(rng, max_d + lanes),
              random_token(rng, 3), random_token(rng, max_d)]
    tokens[1][:max_d] = rng.integers(-128, 128, size=max_d)
    expected = expected_tokens(spec, tokens, regs, max_d)
    rec = TuserRecorder(dut) if spec.stat_tuser else None
    for t in tokens:
        beats = [pack([int(v) for v in t[b : b + lanes]], 8, lanes, True) for b in range(0, len(t), lanes)]
        h.source.send_nowait(AxiStreamFrame(beats))
    for r, (t, exp) in enumerate(zip(tokens, expected, strict=True)):
        got = await with_timeout(h.sink.recv(compact=False), 40 * max_d, "us")
        n = min(len(t), max_d)
        assert len(got.tdata) == -(-n // lanes), f"token {r}: {len(got.tdata)} beats"
        vals = [v for w in got.tdata for v in _unpack8(int(w), lanes)][:n]
        assert np.array_equal(np.asarray(vals), exp), f"token {r} (d={len(t)}) mismatch"
    await ClockCycles(dut.clk, 8)
    assert h.sink.empty()
    if rec is not None:
        rec.stop()
        rec.check(tokens, lanes, max_d)
    assert await h.read_reg(rm, "overlong") == 2
    assert await h.read_reg(rm, "tokens") == len(tokens)


def _unpack8(word: int, lanes: int) -> list[int]:
    return [((word >> (8 * i)) & 0xFF) - (((word >> (8 * i)) & 0x80) << 1) for i in range(lanes)]


async def run_throughput(dut: SimHandleBase, spec: NormSpec) -> None:
    """No idles/backpressure: ``lanes`` elements per cycle for maximum-length tokens, one beat per
    cycle for short ones (all of one length); latency ``ceil(d/lanes) + LATENCY + 1``. Writes
    ``{"elements_per_cycle", "latency_cycles", "buffer_bits", ...}`` to ``$VCKATTN_METRICS_OUT``."""
    lanes, max_d = dut_shape(dut)
    rm = spec.regmap(lanes, max_d)
    await start(dut)
    h = make_harness(dut, lanes)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    regs = spec.typical(rng, max_d)
    await load(h, spec, rm, regs)
    d = max_d
    tokens = [random_token(rng, d) for _ in range(max(8, 4096 // d))]
    t = await h.measure_throughput(tokens, expected_tokens(spec, tokens, regs, max_d))
    want_latency = -(-d // lanes) + spec.latency + 1
    dut._log.info("%s throughput (d=%d, %d tokens): %.4f elements/cycle, latency %d cycles (expected %d)",
                  spec.name, d, len(tokens), t.elements_per_cycle, t.latency, want_latency)
    assert t.elements_per_cycle == lanes, t
    assert t.latency == want_latency, (t.latency, want_latency)
    # short tokens of one length (1 beat; 3 beats with a padded last beat): still 1 beat/cycle
    for n in (lanes, 2 * lanes + 1):
        short = [random_token(rng, n) for _ in range(48)]
        ts = await h.measure_throughput(short, expected_tokens(spec, short, regs, max_d))
        dut._log.info("%s throughput (d=%d): %.4f beats/cycle, latency %d", spec.name, n, ts.beats_per_cycle,
                      ts.latency)
        assert ts.beats_per_cycle == 1.0, ts
        assert ts.latency == -(-n // lanes) + spec.latency + 1, ts.latency
    path = os.environ.get("VCKATTN_METRICS_OUT", "")
    if path:
        metrics = {"elements_per_cycle": t.elements_per_cycle, "latency_cycles": t.latency,
                   "buffer_bits": spec.buffer_bits(lanes, max_d), "d": d, "lanes": lanes, "max_d": max_d,
                   "pipeline_latency_cycles": spec.latency + 1}
        with open(path, "w") as f:
            json.dump(metrics, f, indent=2)
        dut._log.info("metrics written to %s: %s", path, metrics)


def norm_tests(spec: NormSpec) -> dict[str, object]:
    """The four cocotb tests of a token-norm kernel testbench, bound to ``spec``, by test name. A
    testbench module adds them to its namespace (``globals().update(norm_tests(SPEC))``), where cocotb
    finds them: ``test_registers``, ``test_random_traffic`` (≥ 100k elements under backpressure),
    ``test_overlong`` and ``test_throughput``."""
    timeouts = {"test_registers": 50, "test_random_traffic": 500, "test_overlong": 50, "test_throughput": 50}
    runners = {"test_registers": run_registers, "test_random_traffic": run_random_traffic,
               "test_overlong": run_overlong, "test_throughput": run_throughput}
    tests: dict[str, object] = {}
    for name, run in runners.items():
        async def body(dut: SimHandleBase, run=run) -> None:  # run=run binds this loop iteration's runner
            await run(dut, spec)
        tests[name] = cocotb.test(timeout_time=timeouts[name], timeout_unit="ms", name=name)(body)
    return tests

"""cocotb 2.x testbench for :class:`vckattn.hw.pl.site_unit.SiteUnit` (run by ``tests/hw/pl/test_site_unit.py``;
the U buffer's layout, the site units and which one is built, and the launch from ``VCKATTN_TB_SITE``, JSON).

The BHyT unit's registers and γ table are programmed over AXI4-Lite from a typical site A (λ 2, κ 10, random-sign
γ). Random int8 X (its extremes included) of every sequence of the launch is laid out as the X buffer holds it
(:meth:`SliceLayout.beat`); the unit's site reader's runs (``site_runs``) go in, each its SITE header and its beats
of X, with random pauses on both streams. Every beat out must be, in order, a block of golden's U
(``bhyt_site_int`` of its token with the token's ``Σ x²``), its TUSER the block's address in the U buffer with the
sequence's slot and turn (``write_user``), TLAST on each row's last block; nothing more.
"""

from __future__ import annotations

import json
import logging
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from vckattn.golden.bhyt_int import (
    bhyt_exact_regmap,
    bhyt_register_values,
    bhyt_site_int,
    bhyt_site_registers,
    gamma_values,
    sum_of_squares,
)
from vckattn.hw.pl.slot_buffer import write_user
from vckattn.hw.spec import streams
from vckattn.hw.spec.slice_buffer import SliceLayout, site_runs
from vckattn.sim.kernel_tb import pause_pattern, start


def _beat(row: np.ndarray) -> int:
    return int.from_bytes(row.astype(np.int8).tobytes(), "little")


@cocotb.test(timeout_time=400, timeout_unit="ms")
async def test_x_runs_to_addressed_u(dut: SimHandleBase) -> None:
    cfg = json.loads(os.environ["VCKATTN_TB_SITE"])
    lo = SliceLayout(tuple(cfg["slices"]), cfg["rows"], cfg["max_seq"], cfg["slots"], cfg["bank_beats"])
    batch, units, unit, max_d = cfg["batch"], cfg["units"], cfg["unit"], cfg["max_d"]
    d = lo.features
    await start(dut)
    rnd = random.Random(cocotb.RANDOM_SEED)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_lanes=1)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_lanes=1)
    for x in (src, sink):
        x.log.setLevel(logging.WARNING)
        x.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    for ch in (axil.write_if, axil.read_if):
        ch.log.setLevel(logging.WARNING)

    regs = bhyt_site_registers(2.0, 10.0, rng.uniform(0.25, 1.75, d) * rng.choice([-1.0, 1.0], d), d, 0.05, 0.05)
    rm = bhyt_exact_regmap(16, max_d)
    for name, v in bhyt_register_values(regs).items():
        await axil.write_dword(rm.offset(name), rm.word(name, int(v)))
    for k, v in enumerate(gamma_values(regs)):
        await axil.write_dword(rm.offset("gamma") + 4 * k, rm.word("gamma", int(v)))

    x = rng.integers(-128, 128, size=(batch, lo.max_seq, d))
    x[0, 0, :] = -128  # the largest statistic
    x[0, 1, :] = 127
    image = np.zeros((batch, lo.beats, 16), np.int64)  # each sequence in its slot (the slots are taken twice)
    for b in range(batch):
        for t in range(lo.max_seq):
            for f in range(0, d, 16):
                image[b, lo.beat(b, t, f)] = x[b, t, f:f + 16]
    u = bhyt_site_int(x, sum_of_squares(x), regs)

    addr_bits = max(1, (lo.beats - 1).bit_length())
    slot_bits = max(1, (lo.slots - 1).bit_length())
    want: list[list[tuple[int, int]]] = []
    for run in site_runs(lo, units, batch)[unit]:
        if run.quiet:
            continue
        head = streams.encode("site", seq=run.b, token=run.index, slice=run.head).tobytes()
        body = (_beat(image[run.b, a]) for a in range(run.first, run.first + run.beats))
        beats = [int.from_bytes(head, "little"), *body]
        await src.send(AxiStreamFrame(beats))
        if run.head != len(lo.slices) - 1:
            continue
        for t in range(run.index, run.index + 4):  # the group's 4 rows, once its last K-slice is in
            want.append([(_beat(u[run.b, t, f:f + 16]),
                          write_user(lo.beat(run.b, t, f), run.b % lo.slots, run.b // lo.slots % 2, addr_bits,
                                     slot_bits)) for f in range(0, d, 16)])
    assert want, "the unit has no tokens in this launch"
    for k, row in enumerate(want):
        got = await sink.recv(compact=False)
        assert [int(v) for v in got.tdata] == [w for w, _ in row], f"row {k}: not golden's U"
        assert [int(v) for v in got.tuser] == [a for _, a in row], f"row {k}: not at its U address, slot and turn"
    await ClockCycles(dut.clk, 60)
    assert sink.empty(), "more out than the unit's rows"

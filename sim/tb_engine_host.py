"""cocotb testbench :func:`vckattn.sim.engine_rtl.run_engine_rtl` runs: a host job through the engine's PL top.

The job file (``$VCKATTN_ENGINE_JOB``, npz): ``channels``, ``lanes``, ``score_bits``; ``s{i}`` uint8
``(n, 16)`` — score channel ``i``'s stream (whole packets back to back); ``reg_offsets``/``reg_words`` —
AXI4-Lite writes in order; ``ident`` — the expected ID register; ``pauses`` (0/1: random source idles and
sink backpressure).

The test reads the ID register first; if it is not ``ident`` it writes only ``ident`` to the result and
stops (the runner raises). Otherwise it performs the writes (each read back: it must read as written),
streams every channel at once (one frame per packet) and writes ``$VCKATTN_ENGINE_OUT`` (npz): ``ident``,
``p{i}`` uint8 ``(m, 16)`` as received, ``cycles`` (first input beat to last output beat, both counted).
The caller, not this test, decides whether the P streams are right.
"""

from __future__ import annotations

import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase

from vckattn.sim.kernel_tb import start
from vckattn.sim.tb_engine import EngineHarness


@cocotb.test(timeout_time=120, timeout_unit="sec")
async def engine_host_job(dut: SimHandleBase) -> None:
    job = np.load(os.environ["VCKATTN_ENGINE_JOB"])
    out = os.environ["VCKATTN_ENGINE_OUT"]
    pipes, bits = int(job["channels"]), int(job["score_bits"])
    assert hasattr(dut, f"s{pipes - 1}_tdata") and not hasattr(dut, f"s{pipes}_tdata"), "channel count"
    await start(dut)
    eh = EngineHarness(dut, pipes, bits)
    ident, _ = await eh.regs.read_word(0)
    if ident != int(job["ident"]) & 0xFFFFFFFF:
        np.savez(out, ident=np.int64(ident))
        dut._log.error("ID register reads %#010x, expected %#010x", ident, int(job["ident"]))
        return
    writes = list(zip(job["reg_offsets"], job["reg_words"], strict=True))
    for off, word in writes:
        await eh.regs.write_word(int(off), int(word))
    for off, word in writes:
        raw, _ = await eh.regs.read_word(int(off))
        assert raw == int(word) & 0xFFFFFFFF, f"register at {int(off):#x} reads {raw:#010x}, wrote {int(word):#010x}"
    if int(job["pauses"]):
        eh.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.2, out_prob=0.3)
    res = await eh.run([job[f"s{i}"] for i in range(pipes)], None)
    np.savez(out, ident=np.int64(ident), cycles=np.int64(res.cycles), **{f"p{i}": p for i, p in enumerate(res.p)})
    dut._log.info("%d channels: %d beats in, %d out, %d cycles", pipes, res.in_beats, res.out_beats, res.cycles)

"""cocotb testbench the ``rtl`` host backend runs: one layer's score rows through a PL normalizer.

The host (:mod:`vckattn.host.backends.rtl`) writes a job file (``$VCKATTN_HOST_JOB``, npz):

* ``scores`` int32 ``(rows, keys_pad)`` — the AIE model's QKᵀ rows of every tile, in tile order;
* ``keep`` bool ``(rows, keys_pad)`` — the key masks (padding, causal, padded keys);
* ``heads`` int ``(rows,)`` (optional, default 0) — each row's query head: streamed on the TUSER bits above
  the keep mask when the kernel has them (SwiftMax: selects the per-head register set);
* ``reg_names``, ``reg_offsets``, ``reg_words`` — the runtime constants as the 32-bit words to write
  over AXI4-Lite (:meth:`vckattn.golden.regmap.RegisterMap.writes`: registers and memory entries), at the
  offsets of the *bitstream manifest*;
* ``ident`` — the kernel's ID register value from the manifest; ``lanes``; ``pauses`` (0/1).

This test programs the registers (and reads each back: it must equal the word written), checks the
ID register, streams every row as one AXI4-Stream frame (keep bits on TUSER) and writes
``$VCKATTN_HOST_OUT`` (npz): ``p`` uint8 ``(rows, keys_pad)`` as received, ``cycles`` (first input to
last output handshake), ``row_end_cycle`` (cycle of each row's last output beat, relative to the first input beat).
The host, not this test, decides whether the result is right (it compares with the golden model).
"""

from __future__ import annotations

import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase

from vckattn.sim.kernel_tb import KernelHarness, start


@cocotb.test(timeout_time=60, timeout_unit="sec")
async def host_job(dut: SimHandleBase) -> None:
    job = np.load(os.environ["VCKATTN_HOST_JOB"])
    await start(dut)
    lanes = int(job["lanes"])
    h = KernelHarness(dut, lanes=lanes, in_width=32, out_width=8, in_signed=True, out_signed=False)
    if int(job["pauses"]):
        h.set_random_pauses(random.Random(cocotb.RANDOM_SEED), in_prob=0.2, out_prob=0.3)
    ident, _ = await h.read_word(0)
    assert ident == int(job["ident"]), f"ID register reads {ident:#010x}, manifest says {int(job['ident']):#010x}"
    regs = list(zip(job["reg_names"], job["reg_offsets"], job["reg_words"], strict=True))
    for _name, off, word in regs:
        await h.write_word(int(off), int(word))
    for name, off, word in regs:
        raw, _ = await h.read_word(int(off))
        assert raw == int(word), f"register {name} at {int(off):#x} reads {raw:#010x}, wrote {int(word):#010x}"
    scores, keep = job["scores"], job["keep"]
    head_bits = len(dut.s_axis_tuser) - lanes
    heads = [int(x) for x in job["heads"]] if "heads" in job.files else [0] * len(scores)
    if head_bits:  # (a kernel without head bits, e.g. online softmax, has no per-head state: heads unused)
        assert max(heads, default=0) < 1 << head_bits, f"head {max(heads)} does not fit {head_bits} TUSER bits"
    stats = await h.run_rows(list(scores), list(keep), None, user_hi=heads if head_bits else None)
    beats_per_row = scores.shape[1] // lanes
    ends = np.asarray(stats.out_cycles, np.int64)[beats_per_row - 1::beats_per_row]
    first_in = stats.out_cycles[-1] - stats.cycles + 1
    np.savez(os.environ["VCKATTN_HOST_OUT"], p=np.stack(h.last_output).astype(np.uint8),
             cycles=np.int64(stats.cycles), row_end_cycle=ends - first_in)
    dut._log.info("%d rows x %d keys: %d cycles", scores.shape[0], scores.shape[1], stats.cycles)

"""cocotb testbench :mod:`vckattn.sim.sublayer_rtl` runs: one host job through one PL unit of the sublayer.

The full description: ``docs/internals/sim.md``, section ``sim/tb_sublayer_host.py``.
"""

from __future__ import annotations

import json
import logging
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.task import bridge, resume
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.axi import AxiResp, AxiStreamBus, AxiStreamFrame, AxiStreamSource

from vckattn.golden.regmap import RegisterMap
from vckattn.hw.spec.driver import RegisterError, check_ident, program, verify
from vckattn.sim.kernel_tb import KernelHarness, frames_to_rows, pack, pause_pattern, rows_to_frames, start

#: (input element bits, output element bits) of each unit's main streams
WIDTHS = {"bhyt_exact": (8, 8), "rope": (8, 8), "residual": (32, 8)}


class AxilPort:
    """A blocking :class:`~vckattn.hw.spec.driver.RegisterPort` over the harness's AXI4-Lite master, for code run by
    ``cocotb.task.bridge``; a response other than OKAY is a :class:`~vckattn.hw.spec.driver.RegisterError`."""

    def __init__(self, h: KernelHarness, kernel: str) -> None:
        self.h, self.kernel = h, kernel

    @resume
    async def read32(self, offset: int) -> int:
        word, resp = await self.h.read_word(offset)
        if resp != AxiResp.OKAY:
            raise RegisterError(f"kernel {self.kernel}: read at {offset:#x} answered {resp.name}")
        return word

    @resume
    async def write32(self, offset: int, word: int) -> None:
        resp = await self.h.write_word(offset, word)
        if resp != AxiResp.OKAY:
            raise RegisterError(f"kernel {self.kernel}: write of {word:#010x} at {offset:#x} answered {resp.name}")


def _frames(unit: str, rows: np.ndarray, tuser: np.ndarray | None, lanes: int) -> list[AxiStreamFrame]:
    """One frame a row; RoPE: the row's position on TUSER of each beat."""
    if unit != "rope":
        return rows_to_frames(rows, None, lanes, WIDTHS[unit][0], signed=True, user=False)
    assert tuser is not None
    out = []
    for row, p in zip(rows, tuser, strict=True):
        beats = [pack([int(v) for v in row[b:b + lanes]], 8, lanes) for b in range(0, len(row), lanes)]
        out.append(AxiStreamFrame(beats, tuser=[int(p)] * len(beats)))
    return out


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def unit_host_job(dut: SimHandleBase) -> None:
    job = np.load(os.environ["VCKATTN_UNIT_JOB"])
    out_file = os.environ["VCKATTN_UNIT_OUT"]
    meta = json.loads(str(job["meta"]))
    unit, kernel, lanes = meta["unit"], meta["kernel"], int(meta["lanes"])
    in_w, out_w = WIDTHS[unit]
    await start(dut)
    h = KernelHarness(dut, lanes=lanes, in_width=in_w, out_width=out_w, in_signed=True, out_signed=True, user=False)
    rm = RegisterMap.from_describe(meta["regmap"])
    port = AxilPort(h, kernel)
    seen: dict[str, int] = {}

    @bridge
    def configure() -> tuple[dict[str, int], str]:
        """ID, every write, every read-back, by the host driver; ``({name: word read}, error message or "")``."""
        try:
            seen["ident"] = port.read32(rm.offset("ID"))
            check_ident(port, rm, kernel)
            writes = program(port, rm, meta["values"], kernel)
            return verify(port, writes, kernel), ""
        except RegisterError as exc:
            return {}, str(exc)

    read, error = await configure()
    if error:
        dut._log.error("%s", error)
        np.savez(out_file, ident=np.int64(seen.get("ident", -1)), error=np.array(error))
        return

    rows = job["rows"]
    n, d = rows.shape
    frames = _frames(unit, rows, job["tuser"] if "tuser" in job.files else None, lanes)
    xsrc = None
    if unit == "residual":
        xsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_res"), dut.clk, dut.rst, byte_lanes=1)
        xsrc.log.setLevel(logging.WARNING)
    if int(meta["pauses"]):
        rng = random.Random(cocotb.RANDOM_SEED)
        h.set_random_pauses(rng, in_prob=0.2, out_prob=0.3)
        if xsrc is not None:
            xsrc.set_pause_generator(pause_pattern(random.Random(rng.getrandbits(64)), 0.2, 8))
    if xsrc is not None:
        for f in rows_to_frames(job["res"], None, lanes, 8, signed=True, user=False):
            xsrc.send_nowait(f)
    mon = h.monitor
    i0, o0 = len(mon.in_beats), len(mon.out_beats)
    for f in frames:
        h.source.send_nowait(f)
    received = []
    for r, f in enumerate(frames):
        limit = 4000 + 40 * len(f.tdata)
        try:
            got = await with_timeout(h.sink.recv(compact=False), limit * h.period_ns, "ns")
        except cocotb.triggers.SimTimeoutError:
            raise AssertionError(f"output frame {r} of {n} did not complete within {limit} cycles") from None
        assert len(got.tdata) == len(f.tdata), f"output frame {r}: {len(got.tdata)} beats, sent {len(f.tdata)}"
        received.append(got)
    await ClockCycles(h.clk, 8)
    assert h.sink.empty(), f"{h.sink.count()} output frame(s) more than the {n} sent"
    out, _ = frames_to_rows(received, [d] * n, lanes, out_w, signed=True)
    beats = -(-d // lanes)
    tuser = np.zeros((n, beats), np.int64)
    for r, g in enumerate(received):
        if g.tuser is not None and not (isinstance(g.tuser, list) and not g.tuser):
            tuser[r] = g.tuser if isinstance(g.tuser, list) else [g.tuser] * beats
    ins, outs = mon.in_beats[i0:], mon.out_beats[o0:]
    cycles = outs[-1] - ins[0] + 1
    np.savez(out_file, ident=np.int64(seen["ident"]), read_names=np.array(list(read)),
             read_words=np.array(list(read.values()), np.int64), out=np.stack(out), tuser=tuser,
             cycles=np.int64(cycles))
    dut._log.info("%s: %d rows of %d, %d cycles", kernel, n, d, cycles)

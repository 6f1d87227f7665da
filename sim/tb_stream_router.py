"""cocotb 2.x testbench for :class:`vckattn.hw.pl.stream_router.StreamRouter` (run by
``tests/hw/pl/test_stream_router.py``; the router's outputs from ``VCKATTN_TB_ROUTER_OUTPUTS``).

Random packets (a ROUTE beat, then 1..40 random beats) to random outputs, some empty (a ROUTE beat with TLAST),
and, in the second test, some bad (a first beat that is not a ROUTE beat, or one naming no output), go in with
random pauses while every output takes its beats with random pauses. Every output must receive exactly the
payloads of the good packets sent to it, in order, each ending with TLAST; ``bad_route`` must be set exactly when a
bad packet was sent.
"""

from __future__ import annotations

import logging
import os
import random

import cocotb
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from vckattn.hw.spec import streams
from vckattn.sim.kernel_tb import pause_pattern, start


def _route(dest: int, op: int = streams.OP_ROUTE) -> int:
    return int.from_bytes(streams.encode("route", dest=dest, op=op).tobytes(), "little")


def _ports(dut: SimHandleBase, n: int, rnd: random.Random | None) -> tuple[AxiStreamSource, list[AxiStreamSink]]:
    src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_lanes=1)
    sinks = [AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m_axis_out{r}"), dut.clk, dut.rst, byte_lanes=1)
             for r in range(n)]
    for x in (src, *sinks):
        x.log.setLevel(logging.WARNING)
        if rnd is not None:
            x.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))
    return src, sinks


async def _run(dut: SimHandleBase, bad: bool) -> None:
    n = int(os.environ["VCKATTN_TB_ROUTER_OUTPUTS"])
    await start(dut)
    rnd = random.Random(cocotb.RANDOM_SEED + bad)
    src, sinks = _ports(dut, n, rnd)
    want: list[list[list[int]]] = [[] for _ in range(n)]
    sent_bad = False
    for _ in range(120):
        payload = [rnd.getrandbits(128) for _ in range(rnd.randint(1, 40))]
        kind = rnd.random()
        if bad and kind < 0.1:  # not a ROUTE beat: dropped
            await src.send(AxiStreamFrame([_route(rnd.randrange(n), streams.OP_TILE), *payload]))
            sent_bad = True
        elif bad and kind < 0.2:  # names no output: dropped
            await src.send(AxiStreamFrame([_route(n + rnd.randrange(3)), *payload]))
            sent_bad = True
        elif kind > 0.9:  # empty
            await src.send(AxiStreamFrame([_route(rnd.randrange(n))]))
        else:
            r = rnd.randrange(n)
            await src.send(AxiStreamFrame([_route(r), *payload]))
            want[r].append(payload)
    for r, packets in enumerate(want):
        for k, payload in enumerate(packets):
            got = await sinks[r].recv(compact=False)
            assert [int(x) for x in got.tdata] == payload, f"output {r}, packet {k}: not the payload sent to it"
    await ClockCycles(dut.clk, 50)
    assert all(s.empty() for s in sinks), "an output got more than its packets"
    assert int(dut.bad_route.value) == int(sent_bad), "bad_route is not set exactly when a bad packet was sent"


@cocotb.test()
async def test_packets_to_their_outputs(dut: SimHandleBase) -> None:
    await _run(dut, bad=False)


@cocotb.test()
async def test_bad_packets_dropped_and_flagged(dut: SimHandleBase) -> None:
    await _run(dut, bad=True)


@cocotb.test()
async def test_a_beat_a_cycle(dut: SimHandleBase) -> None:
    """No pauses: 2 packets of 64 beats to two outputs take 2 · (64 + 1) cycles and a few of latency."""
    await start(dut)
    src, sinks = _ports(dut, 2, None)
    frames = [[_route(r), *range(r * 64, r * 64 + 64)] for r in (0, 1)]
    for f in frames:
        await src.send(AxiStreamFrame(f))
    got, cycles = 0, 0
    while got < 128 and cycles < 1000:
        await RisingEdge(dut.clk)
        cycles += 1
        for r in (0, 1):
            if int(getattr(dut, f"m_axis_out{r}_tvalid").value) and int(getattr(dut, f"m_axis_out{r}_tready").value):
                got += 1
    assert got == 128, f"{got} of 128 beats out"
    assert cycles <= 2 * 65 + 6, f"{cycles} cycles for 2 packets of 64 beats: not a beat a cycle"

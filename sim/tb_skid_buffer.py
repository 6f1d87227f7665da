"""cocotb 2.x testbench for :class:`vckattn.hw.pl.stream.SkidBuffer` (AXI4-Stream register slice).

The full description: ``docs/internals/sim.md``, section ``sim/tb_skid_buffer.py``.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import warnings
from collections.abc import Iterator

import cocotb
from cocotb.clock import Clock
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

# cocotbext-axi 0.1.28 still uses APIs that cocotb 2.x deprecates (setimmediatevalue,
# Edge(), Task.kill()); the warnings say nothing about the design under test.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.axi")

CLK_PERIOD_NS = 10


class Stats:
    """Cycle-level counters filled in by :func:`axis_stability_monitor`."""

    def __init__(self) -> None:
        self.cycle = 0  # clock cycles since the monitor started
        self.in_beats: list[int] = []  # cycle index of every s_axis handshake
        self.out_beats: list[int] = []  # cycle index of every m_axis handshake
        self.s_ready_low_cycles = 0  # cycles after reset with s_axis_tready = 0


async def axis_stability_monitor(dut: SimHandleBase, stats: Stats) -> None:
    """Check AXI4-Stream stability on ``m_axis`` and record handshakes on both ports.

    Samples once per cycle in the ReadOnly phase after each rising edge, i.e. the values
    that the next rising edge will see. If ``m_axis`` showed TVALID=1, TREADY=0 in one cycle
    (a stalled beat), the next cycle must still show TVALID=1 with the same TDATA and TLAST.
    Start it *before* releasing reset so it cannot miss the first handshake; cycles with
    ``rst`` high are not counted.
    """
    stalled: tuple[int, int] | None = None
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if int(dut.rst.value):
            assert int(dut.m_axis_tvalid.value) == 0, "m_axis_tvalid high during reset"
            stalled = None
            continue
        m_valid = int(dut.m_axis_tvalid.value)
        m_ready = int(dut.m_axis_tready.value)
        if stalled is not None:
            data, last = stalled
            assert m_valid == 1, f"cycle {stats.cycle}: m_axis_tvalid dropped while the beat was stalled"
            now = (int(dut.m_axis_tdata.value), int(dut.m_axis_tlast.value))
            assert now == stalled, (
                f"cycle {stats.cycle}: stalled beat changed from tdata={data:#x} tlast={last} "
                f"to tdata={now[0]:#x} tlast={now[1]}"
            )
        stalled = None
        if m_valid and not m_ready:
            stalled = (int(dut.m_axis_tdata.value), int(dut.m_axis_tlast.value))
        if m_valid and m_ready:
            stats.out_beats.append(stats.cycle)
        s_ready = int(dut.s_axis_tready.value)
        if int(dut.s_axis_tvalid.value) and s_ready:
            stats.in_beats.append(stats.cycle)
        if not s_ready:
            stats.s_ready_low_cycles += 1
        stats.cycle += 1


async def reset_dut(dut: SimHandleBase, cycles: int = 4) -> None:
    """Hold ``rst`` high for ``cycles`` clock cycles, then release it."""
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def setup(dut: SimHandleBase) -> tuple[AxiStreamSource, AxiStreamSink, int]:
    """Start the clock and build source/sink with one "byte" lane per full TDATA word.

    ``byte_lanes=1`` makes cocotbext-axi treat each beat as one integer of the full TDATA
    width, so a frame's ``tdata`` is simply the list of beat values.
    """
    cocotb.start_soon(Clock(dut.clk, CLK_PERIOD_NS, unit="ns").start())
    dut.rst.value = 1
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_lanes=1)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_lanes=1)
    # cocotbext-axi logs every frame at INFO: thousands of lines per test.
    source.log.setLevel(logging.WARNING)
    sink.log.setLevel(logging.WARNING)
    return source, sink, len(dut.s_axis_tdata)


def random_frames(rng: random.Random, width: int, min_beats: int, max_len: int) -> list[list[int]]:
    """Random frames (lists of beat values) totalling at least ``min_beats`` beats."""
    frames: list[list[int]] = []
    total = 0
    while total < min_beats:
        n = rng.choice([1, 1, 2, 3, rng.randint(1, max_len), rng.randint(1, max_len)])
        frames.append([rng.getrandbits(width) for _ in range(n)])
        total += n
    return frames


def pause_pattern(rng: random.Random, p_pause: float, max_burst: int) -> Iterator[bool]:
    """Endless per-cycle pause flags: runs of pauses/non-pauses with random lengths.

    Each cycle starts a pause burst with probability ``p_pause``; bursts last 1..max_burst
    cycles. Occasionally the pattern toggles every cycle to exercise the skid register.
    """
    for _ in itertools.count():
        mode = rng.random()
        if mode < 0.1:
            for i in range(rng.randint(4, 32)):  # alternating
                yield bool(i & 1)
        elif rng.random() < p_pause:
            for _ in range(rng.randint(1, max_burst)):
                yield True
        else:
            yield False


async def check_frames(sink: AxiStreamSink, expected: list[list[int]]) -> int:
    """Receive ``len(expected)`` frames and compare them beat by beat; return beats seen."""
    beats = 0
    for i, want in enumerate(expected):
        frame = await sink.recv()
        got = list(frame.tdata)
        if got != want:
            # Find the first differing beat for a useful message.
            j = next((k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
            raise AssertionError(
                f"frame {i}: got {len(got)} beats, expected {len(want)}; first difference at beat {j}: "
                f"got {got[j:j + 3]!r}, expected {want[j:j + 3]!r}"
            )
        beats += len(got)
    return beats


@cocotb.test(timeout_time=10, timeout_unit="ms")  # ~0.35 ms of sim time is needed
async def test_random_traffic(dut: SimHandleBase) -> None:
    """>= 10,000 random beats with random source idles and sink backpressure."""
    rng = random.Random(cocotb.RANDOM_SEED)
    source, sink, width = setup(dut)
    stats = Stats()
    cocotb.start_soon(axis_stability_monitor(dut, stats))
    await reset_dut(dut)

    n_beats = int(os.environ.get("TB_SKID_BEATS", "10000"))
    frames = random_frames(rng, width, n_beats, max_len=64)
    source.set_pause_generator(pause_pattern(rng, p_pause=0.3, max_burst=6))
    sink.set_pause_generator(pause_pattern(rng, p_pause=0.4, max_burst=8))
    for f in frames:
        await source.send(AxiStreamFrame(f))
    beats = await check_frames(sink, frames)
    await ClockCycles(dut.clk, 8)

    assert beats == sum(len(f) for f in frames)
    assert sink.empty(), "extra frames arrived after the expected ones"
    assert int(dut.m_axis_tvalid.value) == 0, "m_axis_tvalid still high after the last beat"
    assert len(stats.in_beats) == len(stats.out_beats) == beats, (
        f"handshakes: {len(stats.in_beats)} in, {len(stats.out_beats)} out, {beats} beats expected"
    )
    stalls = stats.s_ready_low_cycles
    dut._log.info(
        "random traffic: %d beats in %d frames over %d cycles (%.3f beats/cycle), s_axis_tready low %d cycles",
        beats, len(frames), stats.cycle, beats / stats.cycle, stalls,
    )
    assert stalls > 0, "backpressure never reached s_axis_tready: the skid path was not exercised"


@cocotb.test(timeout_time=1, timeout_unit="ms")  # ~0.02 ms of sim time is needed
async def test_throughput(dut: SimHandleBase) -> None:
    """Sink always ready, source never idle: m_axis must carry 1 beat per cycle."""
    rng = random.Random(cocotb.RANDOM_SEED)
    source, sink, width = setup(dut)
    stats = Stats()
    cocotb.start_soon(axis_stability_monitor(dut, stats))
    await reset_dut(dut)
    frames = random_frames(rng, width, 2000, max_len=32)
    for f in frames:
        source.send_nowait(AxiStreamFrame(f))
    beats = await check_frames(sink, frames)
    await ClockCycles(dut.clk, 4)

    first_in, first_out, last_out = stats.in_beats[0], stats.out_beats[0], stats.out_beats[-1]
    latency = first_out - first_in
    span = last_out - first_out + 1
    throughput = beats / span
    dut._log.info(
        "throughput: %d beats in %d cycles after a %d-cycle fill latency = %.4f beats/cycle "
        "(%.1f M beats/s at %d ns clock)",
        beats, span, latency, throughput, 1e3 / CLK_PERIOD_NS * throughput, CLK_PERIOD_NS,
    )
    assert latency == 1, f"fill latency {latency} cycles, expected 1"
    assert throughput == 1.0, f"throughput {throughput:.4f} beats/cycle, expected 1.0"
    assert stats.out_beats == list(range(first_out, first_out + beats)), "bubble on m_axis"


if os.environ.get("VCKATTN_TB_SELFTEST_FAIL") == "1":

    @cocotb.test(timeout_time=10, timeout_unit="us")
    async def test_selftest_must_fail(dut: SimHandleBase) -> None:
        """Deliberately failing test: checks that failures reach pytest (runner self-test)."""
        source, sink, _ = setup(dut)
        await reset_dut(dut)
        await source.send(AxiStreamFrame([1, 2, 3]))
        frame = await sink.recv()
        assert list(frame.tdata) == [1, 2, 4], "deliberate failure (VCKATTN_TB_SELFTEST_FAIL=1)"

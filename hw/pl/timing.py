"""The PL kernels' timing, owned by the gateware: each kernel's pipeline constants (:data:`TIMING`, from
its RTL) and the closed-form cycles of a stream through it; the performance model (:mod:`vckattn.hw.perf.pl`)
reads them. Checked against Verilator (``sim/tb_perf_stream.py``, ``tests/hw/pl/test_timing.py``: to the cycle).

The full description: ``docs/internals/hw.md``, section ``hw/pl/timing.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

#: Kernel names, normalizers first.
KERNELS: tuple[str, ...] = ("swiftmax", "online_softmax", "bhyt_approx", "bhyt_exact", "rmsnorm", "residual",
                             "requant", "rope")

@dataclass(frozen=True)
class KernelTiming:
    """Cycle constants of one kernel, from its RTL (pipeline stage registers and buffers).

    Attributes:
        buffered: The whole row/token is needed before its first output (two-pass kernels).
        issue_delay: ``D``, buffered kernels: cycles from a row's last input handshake to the issue
            of its first pass-2 beat (element-wise kernels: 0).
        out_delay: ``O``: cycles from a beat's issue (element-wise: its input handshake) to its
            output handshake (pipeline stage registers + the output skid buffer).
        slots: Rows that may be between the input and the end of their pass 2 (0: no limit).
        source: Where the constants come from (RTL names).
    """

    buffered: bool
    issue_delay: int
    out_delay: int
    slots: int
    source: str


#: From the RTL (tests/hw/pl/test_timing.py checks them against the RTL constants and Verilator).
TIMING: dict[str, KernelTiming] = {
    "swiftmax": KernelTiming(False, 0, 7, 0, "SwiftMaxLane.LATENCY (6) + skid buffer (1)"),
    "bhyt_approx": KernelTiming(False, 0, 11, 0, "BHyTScaleUnit.LATENCY (5) + BHyTLane.LATENCY (5) + skid buffer (1)"),
    "online_softmax": KernelTiming(True, 15, 9, 8, "D = PASS1_LATENCY (13) + descriptor FIFO (2); "
                                   "O = PASS2_LATENCY (8) + skid buffer (1); slots = max_rows (8)"),
    "bhyt_exact": KernelTiming(True, 1, 11, 2, "D = 1 (issue after TLAST); O = LATENCY (5 + 5) + skid buffer (1); "
                               "slots = 2 ping-pong token buffers"),
    "rmsnorm": KernelTiming(True, 1, 7, 2, "D = 1 (issue after TLAST); O = LATENCY (4 + 2) + skid buffer (1); "
                            "slots = 2 ping-pong token buffers"),
    "residual": KernelTiming(False, 0, 6, 0, "ResidualKernel.LATENCY (5) + skid buffer (1)"),
    "requant": KernelTiming(False, 0, 5, 0, "RequantKernel.LATENCY (4) + skid buffer (1)"),
    "rope": KernelTiming(True, 1, 5, 2, "D = 1 (issue after the row's last beat); O = LATENCY (4) + skid buffer "
                         "(1); slots = 2 ping-pong row buffers"),
}


def check_kernel(kernel: str, lanes: int) -> KernelTiming:
    if kernel not in TIMING:
        raise ValueError(f"unknown PL kernel {kernel!r}; known: {', '.join(KERNELS)}")
    if int(lanes) != lanes or lanes < 1:
        raise ValueError(f"lanes must be a positive integer, got {lanes!r}")
    return TIMING[kernel]


def latency_cycles(kernel: str, lanes: int) -> int:
    """Cycles from the first input handshake to the first output handshake for a one-beat row.

    For the element-wise kernels this is the latency of every beat (SwiftMax 7, BHyT approx 11, residual 6,
    requant 5); the row-buffered kernels add ``ceil(row_len/lanes) - 1`` cycles for a longer row (their output
    starts after the row's last input beat): online softmax 24, BHyT exact 12, RMSNorm 8, RoPE 6. Independent of
    ``lanes`` (the lane reductions are single pipeline stages).
    """
    t = check_kernel(kernel, lanes)
    return t.issue_delay + t.out_delay


def elements_per_cycle(kernel: str, lanes: int) -> float:
    """Steady-state elements per cycle with a source that never idles and a ready sink: ``lanes``.

    Every kernel issues one beat per cycle (online softmax for rows of at least 3 beats; shorter rows
    are limited by its descriptor FIFO, which :func:`stream_cycles` models).
    """
    check_kernel(kernel, lanes)
    return float(lanes)


def _rate(in_beats_per_cycle: float) -> Fraction:
    if not in_beats_per_cycle > 0:
        raise ValueError(f"in_beats_per_cycle must be > 0, got {in_beats_per_cycle!r}")
    return min(Fraction(in_beats_per_cycle).limit_denominator(1_000_000), Fraction(1))


def _offer(b: int, r: Fraction) -> int:
    """Cycle at which the source has produced beat ``b`` (``ceil(b / r)``)."""
    return math.ceil(b / r)


def stream_cycles(kernel: str, rows: int, row_len: int, lanes: int, in_beats_per_cycle: float = 1.0) -> int:
    """PL cycles from the first input beat to the last output beat of ``rows`` rows (inclusive count).

    The source produces beat ``b`` of the stream (``lanes`` elements) at cycle ``ceil(b / r)``,
    ``r = in_beats_per_cycle`` (rounded to a fraction with denominator <= 10^6; values above 1 act as 1,
    one AXI4-Stream beat per cycle), and holds it until accepted; the sink is always ready. See the
    module docstring for the derivation.

    Args:
        kernel: One of :data:`KERNELS`.
        rows: Score rows (normalizers) or tokens (norm kernels), >= 1.
        row_len: Elements per row (keys) or per token (hidden size), >= 1.
        lanes: Elements per beat.
        in_beats_per_cycle: Source rate in beats per PL cycle.

    Returns:
        Cycles, first input handshake to last output handshake, both counted.
    """
    t = check_kernel(kernel, lanes)
    if rows < 1 or row_len < 1:
        raise ValueError(f"rows and row_len must be >= 1, got {rows}, {row_len}")
    r = _rate(in_beats_per_cycle)
    n = -(-row_len // lanes)
    total = rows * n
    if not t.buffered:
        return _offer(total - 1, r) + t.out_delay + 1
    if (t.slots - 2) * n >= t.issue_delay - 1:
        return _offer(total - 1, r) + n + t.issue_delay + t.out_delay
    return _row_recurrence(t, rows, n, r)


def _row_recurrence(t: KernelTiming, rows: int, n: int, r: Fraction) -> int:
    """Row-level recurrence of a buffered kernel whose row slots can stall the input (short rows).

    ``A_k`` = first-beat handshake of row k: ``max(T_{kn}, e_{k-1} + 1, pop_{k-slots} + 1)``; its beats
    follow at one per cycle or as produced: ``e_k = max(T_{kn+n-1}, A_k + n - 1)``; pass 2 starts at
    ``s_k = max(e_k + D, s_{k-1} + n)`` and pops at ``pop_k = s_k + n - 1``.
    """
    e_prev, s_prev = -1, -(10**18)
    pops: list[int] = []
    s = 0
    for k in range(rows):
        a = max(_offer(k * n, r), e_prev + 1)
        if k >= t.slots:
            a = max(a, pops[k - t.slots] + 1)
        e = max(_offer(k * n + n - 1, r), a + n - 1)
        s = max(e + t.issue_delay, s_prev + n)
        pops.append(s + n - 1)
        e_prev, s_prev = e, s
    return s + n - 1 + t.out_delay + 1


# ------------------------------------------------------------------------------------------ engine PL top

#: The engine PL top's cycles from a slot's issue to its output handshake (``EnginePipeline.LATENCY``:
#: SwiftMaxLane.LATENCY 6 + the output skid buffer 1); tests/hw/pl/test_timing.py checks it against the RTL.
ENGINE_OUT_DELAY = 7
#: P bytes per output beat of the engine PL top.
ENGINE_P_PER_BEAT = 16


def engine_packet_slots(count: int, lanes: int) -> int:
    """Cycles one packet of ``count`` scores occupies a pipeline of the engine PL top at full rate:
    the header beat plus ``16 / lanes`` lane groups per P beat, ``ceil(count / 16)`` P beats."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return 1 + (ENGINE_P_PER_BEAT // lanes) * -(-count // ENGINE_P_PER_BEAT)


def engine_stream_cycles(packets_elems: list[list[int]], lanes: int, score_bits: int) -> int:
    """PL cycles of the engine's PL top (``hw/pl/engine.py``) from the first input beat to the last output
    beat (both counted), all pipelines starting together, sources that never idle and ready sinks.

    Each pipeline issues one slot per cycle: a packet is :func:`engine_packet_slots` slots (header, then the
    lane groups; an int16 input beat is consumed after ``8 / lanes`` groups, an int8 one after ``16 / lanes``),
    packets back to back without bubbles; the last slot leaves :data:`ENGINE_OUT_DELAY` cycles after its
    issue. So a pipeline takes ``Σ slots + ENGINE_OUT_DELAY`` cycles and the engine the longest pipeline.

    Args:
        packets_elems: Per pipeline, the ``count`` of each of its packets (in scores).
        lanes: SwiftMax lanes per pipeline (1, 2, 4, 8, 16; at most ``128 / score_bits``).
        score_bits: Score width, 8 or 16.

    Returns:
        Cycles; 0 when no pipeline has a packet.
    """
    if score_bits not in (8, 16):
        raise ValueError(f"score_bits must be 8 or 16, got {score_bits}")
    if lanes not in (1, 2, 4, 8, 16) or lanes > 128 // score_bits:
        raise ValueError(f"lanes must be one of 1, 2, 4, 8, 16 and at most {128 // score_bits}, got {lanes}")
    per_pipe = [sum(engine_packet_slots(int(c), lanes) for c in counts) for counts in packets_elems]
    busy = [s for s in per_pipe if s]
    return max(busy) + ENGINE_OUT_DELAY if busy else 0

"""Reusable cocotb 2.x harness for PL stream kernels (no ``@cocotb.test`` here).

The full description: ``docs/internals/sim.md``, section ``sim/kernel_tb.py``.
"""

from __future__ import annotations

import itertools
import logging
import random
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiResp,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamSink,
    AxiStreamSource,
)

from vckattn.hw.pl.axil import RegisterMap

warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.axi")

__all__ = [
    "KernelHarness",
    "RunStats",
    "StreamMonitor",
    "ThroughputStats",
    "frames_to_rows",
    "pack",
    "pause_pattern",
    "rows_to_frames",
    "start",
    "unpack",
]


# --------------------------------------------------------------------------------------------
# Clock / reset
# --------------------------------------------------------------------------------------------


async def start(
    dut: SimHandleBase, period_ns: float = 4, reset_cycles: int = 4, clk: str = "clk", rst: str = "rst"
) -> Clock:
    """Start a clock on ``dut.<clk>`` and pulse the synchronous active-high ``dut.<rst>``.

    ``rst`` is high for ``reset_cycles`` rising edges; the call returns one cycle after it
    falls (at a rising edge). Build the :class:`KernelHarness` afterwards (or before: it
    follows the reset either way). Default 4 ns = 250 MHz.
    """
    clock = Clock(getattr(dut, clk), period_ns, unit="ns")
    clock.start()
    reset = getattr(dut, rst)
    reset.value = 1
    await ClockCycles(getattr(dut, clk), reset_cycles)
    reset.value = 0
    await RisingEdge(getattr(dut, clk))
    return clock


# --------------------------------------------------------------------------------------------
# Packing / framing
# --------------------------------------------------------------------------------------------


def _to_field(v: int, width: int, signed: bool) -> int:
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if not lo <= v <= hi:
        raise ValueError(f"value {v} does not fit a {'signed' if signed else 'unsigned'} {width}-bit field")
    return v & ((1 << width) - 1)


def pack(values: Sequence[int], width: int, lanes: int | None = None, signed: bool = True) -> int:
    """Pack up to ``lanes`` elements into one beat word (element i at bits ``[i*W, (i+1)*W)``).

    Raises ``ValueError`` if a value does not fit the field.
    """
    if lanes is not None and len(values) > lanes:
        raise ValueError(f"{len(values)} values for {lanes} lanes")
    word = 0
    for i, v in enumerate(values):
        word |= _to_field(int(v), width, signed) << (i * width)
    return word


def unpack(word: int, width: int, lanes: int, signed: bool = False) -> list[int]:
    """Split a beat word into ``lanes`` elements (two's complement decoded if ``signed``)."""
    mask = (1 << width) - 1
    out = []
    for i in range(lanes):
        v = (word >> (i * width)) & mask
        if signed and v >> (width - 1):
            v -= 1 << width
        out.append(v)
    return out


def _as_rows(rows: object) -> list[np.ndarray]:
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        return [np.asarray(r, dtype=np.int64) for r in rows]
    out = [np.asarray(r, dtype=np.int64).reshape(-1) for r in rows]  # type: ignore[union-attr]
    return out


def rows_to_frames(
    rows: object,
    masks: object | None,
    lanes: int,
    width: int,
    signed: bool = True,
    user: bool = True,
    user_hi: Sequence[int | Sequence[int]] | None = None,
) -> list[AxiStreamFrame]:
    """Turn rows (2-D array or list of 1-D int arrays) into AXI4-Stream frames (see contract).

    Args:
        rows: Rows of integer elements (each row >= 1 element).
        masks: Keep masks shaped like ``rows`` (nonzero/True = keep), or ``None`` (keep all).
        lanes: Elements per beat.
        width: Element width in bits.
        signed: Elements are signed (range-checked and two's complement packed).
        user: Put keep masks into TUSER (with ``user=False`` masks must be all-keep).
        user_hi: Per row, the value of the TUSER bits above the ``lanes`` keep bits: one int for
            every beat of the row, or one int per beat (``None``: 0).

    Returns:
        One ``AxiStreamFrame`` per row (``tdata`` = beat words, ``tuser`` = per-beat masks).
    """
    rows_l = _as_rows(rows)
    masks_l = [np.ones(len(r), dtype=bool) for r in rows_l] if masks is None else [
        np.asarray(mk).astype(bool).reshape(-1) for mk in _as_rows(masks)
    ]
    if len(masks_l) != len(rows_l):
        raise ValueError(f"{len(rows_l)} rows but {len(masks_l)} masks")
    frames = []
    for r, (row, mk) in enumerate(zip(rows_l, masks_l, strict=True)):
        if len(row) == 0:
            raise ValueError(f"row {r} is empty: every frame needs at least one element")
        if len(mk) != len(row):
            raise ValueError(f"row {r}: {len(row)} elements but {len(mk)} mask bits")
        if not user and not mk.all():
            raise ValueError("masked elements need TUSER (user=True)")
        n_beats = -(-len(row) // lanes)
        hi = [0] * n_beats
        if user_hi is not None:
            if not user:
                raise ValueError("user_hi needs TUSER (user=True)")
            u = user_hi[r]
            hi = [int(u)] * n_beats if isinstance(u, (int, np.integer)) else [int(x) for x in u]  # type: ignore[union-attr]
            if len(hi) != n_beats:
                raise ValueError(f"row {r}: {len(hi)} user_hi values for {n_beats} beats")
        tdata, tuser = [], []
        for b in range(0, len(row), lanes):
            vals = row[b : b + lanes]
            tdata.append(pack([int(v) for v in vals], width, lanes, signed))
            tuser.append(sum(1 << i for i, k in enumerate(mk[b : b + lanes]) if k) | (hi[b // lanes] << lanes))
        frames.append(AxiStreamFrame(tdata, tuser=tuser if user else None))
    return frames


def frames_to_rows(
    frames: Sequence[AxiStreamFrame],
    lengths: Sequence[int],
    lanes: int,
    width: int,
    signed: bool = False,
) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """Inverse of :func:`rows_to_frames`: drop padding lanes beyond each row's length.

    Returns:
        ``(rows, masks)``: int64 arrays of length ``lengths[r]``; masks are bool arrays from
        TUSER, or ``None`` for frames without TUSER.
    """
    rows, masks = [], []
    for frame, n in zip(frames, lengths, strict=True):
        elems: list[int] = []
        for word in frame.tdata:
            elems.extend(unpack(int(word), width, lanes, signed))
        rows.append(np.asarray(elems[:n], dtype=np.int64))
        tuser = frame.tuser
        if tuser is None or (isinstance(tuser, list) and not tuser):
            masks.append(None)
        else:
            words = tuser if isinstance(tuser, list) else [tuser] * len(frame.tdata)
            bits = [(int(w) >> i) & 1 for w in words for i in range(lanes)]
            masks.append(np.asarray(bits[:n], dtype=bool))
    return rows, masks


# --------------------------------------------------------------------------------------------
# Pauses (idle cycles on the source, backpressure on the sink)
# --------------------------------------------------------------------------------------------


def pause_pattern(rng: random.Random, prob: float, max_burst: int = 8) -> Iterator[bool]:
    """Endless per-cycle pause flags with bursty structure (seeded by ``rng``).

    Each step starts a pause burst of 1..``max_burst`` cycles with probability ``prob``,
    otherwise yields one non-paused cycle; 10% of the steps instead toggle every cycle for
    4..32 cycles (hardest case for skid buffers). ``prob = 0`` never pauses.
    """
    if prob <= 0:
        yield from itertools.repeat(False)
        return
    while True:
        if rng.random() < 0.1:
            for i in range(rng.randint(4, 32)):
                yield bool(i & 1)
        elif rng.random() < prob:
            for _ in range(rng.randint(1, max_burst)):
                yield True
        else:
            yield False


# --------------------------------------------------------------------------------------------
# Monitor
# --------------------------------------------------------------------------------------------


def _sig(dut: SimHandleBase, name: str) -> SimHandleBase | None:
    try:
        return getattr(dut, name)
    except AttributeError:
        return None


class StreamMonitor:
    """Per-cycle observer of a kernel's input and output AXI4-Stream ports.

    Samples in the ReadOnly phase after every rising edge (the values the next edge sees):

    * records the cycle index of every handshake on both ports (``in_beats``, ``out_beats``)
      and counts cycles with the input TREADY low (``in_ready_low``);
    * checks the AXI4-Stream stability rule on the *output* port: once TVALID is high with
      TREADY low, the next cycle must still have TVALID high and the same TDATA, TLAST and
      (if present) TUSER/TKEEP; and TVALID must be low while reset is asserted.

    A violation raises ``AssertionError`` in the monitor task, which fails the running test.
    Cycles with reset asserted are not counted.
    """

    def __init__(
        self,
        dut: SimHandleBase,
        in_prefix: str = "s_axis",
        out_prefix: str = "m_axis",
        clk: str = "clk",
        rst: str = "rst",
    ) -> None:
        self.dut = dut
        self.clk = getattr(dut, clk)
        self.rst = _sig(dut, rst)
        self.in_valid = getattr(dut, f"{in_prefix}_tvalid")
        self.in_ready = getattr(dut, f"{in_prefix}_tready")
        self.out_valid = getattr(dut, f"{out_prefix}_tvalid")
        self.out_ready = getattr(dut, f"{out_prefix}_tready")
        self.out_payload = {
            f: s
            for f in ("tdata", "tlast", "tuser", "tkeep")
            if (s := _sig(dut, f"{out_prefix}_{f}")) is not None
        }
        self.out_prefix = out_prefix
        self.cycle = 0
        self.in_beats: list[int] = []
        self.out_beats: list[int] = []
        self.in_ready_low = 0
        self._task = cocotb.start_soon(self._run())

    async def _run(self) -> None:
        stalled: dict[str, int] | None = None
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            if self.rst is not None and int(self.rst.value):
                assert int(self.out_valid.value) == 0, f"{self.out_prefix}_tvalid high during reset"
                stalled = None
                continue
            o_valid = int(self.out_valid.value)
            o_ready = int(self.out_ready.value)
            if stalled is not None:
                assert o_valid, f"cycle {self.cycle}: {self.out_prefix}_tvalid dropped while the beat was stalled"
                now = {f: int(s.value) for f, s in self.out_payload.items()}
                if now != stalled:
                    diff = ", ".join(f"{f} {stalled[f]:#x}->{now[f]:#x}" for f in now if now[f] != stalled[f])
                    raise AssertionError(f"cycle {self.cycle}: stalled {self.out_prefix} beat changed: {diff}")
            stalled = None
            if o_valid:
                if o_ready:
                    self.out_beats.append(self.cycle)
                else:
                    stalled = {f: int(s.value) for f, s in self.out_payload.items()}
            i_ready = int(self.in_ready.value)
            if i_ready and int(self.in_valid.value):
                self.in_beats.append(self.cycle)
            if not i_ready:
                self.in_ready_low += 1
            self.cycle += 1

    def stop(self) -> None:
        self._task.cancel()


# --------------------------------------------------------------------------------------------
# Harness
# --------------------------------------------------------------------------------------------


@dataclass
class RunStats:
    """Outcome of :meth:`KernelHarness.run_rows` (cycle indices from :class:`StreamMonitor`)."""

    rows: int
    elements: int  # real (unpadded) elements
    in_beats: int
    out_beats: int
    cycles: int  # first input handshake .. last output handshake, inclusive
    latency: int  # first input handshake -> first output handshake (cycles)
    in_ready_low: int  # cycles with input TREADY low during the run
    out_cycles: list[int] = field(default_factory=list, repr=False)

    @property
    def elements_per_cycle(self) -> float:
        return self.elements / self.cycles if self.cycles else 0.0


@dataclass
class ThroughputStats:
    """Outcome of :meth:`KernelHarness.measure_throughput`."""

    elements_per_cycle: float  # steady state: elements / output-handshake span
    beats_per_cycle: float  # output beats / output-handshake span
    latency: int  # cycles, first input handshake -> first output handshake
    elements: int
    span_cycles: int  # first .. last output handshake, inclusive
    run: RunStats


class KernelHarness:
    """Drive a kernel's AXI4-Stream ports and AXI4-Lite registers; check against golden rows.

    Build it after (or during) :func:`start`. It creates:

    * ``source``: ``AxiStreamSource`` on ``<in_prefix>_*`` (``byte_lanes=1``),
    * ``sink``: ``AxiStreamSink`` on ``<out_prefix>_*`` (``byte_lanes=1``),
    * ``axil``: ``AxiLiteMaster`` on ``<axil_prefix>_*`` (``None`` if the DUT has no such port
      or ``axil_prefix=None``),
    * ``monitor``: a :class:`StreamMonitor` (handshake cycles, output stability check).

    Args:
        dut: cocotb top-level handle.
        lanes: Elements per beat (same on input and output).
        in_width, out_width: Element widths in bits.
        in_signed, out_signed: Element signedness (packing range checks / decoding).
        user: Whether the ports carry the TUSER keep mask.
        in_prefix, out_prefix, axil_prefix: Port name prefixes.
        period_ns: Clock period (for timeouts; match :func:`start`).
        clk, rst: Clock/reset port names.
    """

    def __init__(
        self,
        dut: SimHandleBase,
        *,
        lanes: int,
        in_width: int,
        out_width: int,
        in_signed: bool = True,
        out_signed: bool = False,
        user: bool = True,
        in_prefix: str = "s_axis",
        out_prefix: str = "m_axis",
        axil_prefix: str | None = "s_axil",
        period_ns: float = 4,
        clk: str = "clk",
        rst: str = "rst",
    ) -> None:
        self.dut = dut
        self.lanes, self.in_width, self.out_width = lanes, in_width, out_width
        self.in_signed, self.out_signed, self.user = in_signed, out_signed, user
        self.period_ns = period_ns
        self.clk = getattr(dut, clk)
        reset = getattr(dut, rst)
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, in_prefix), self.clk, reset, byte_lanes=1)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, out_prefix), self.clk, reset, byte_lanes=1)
        # cocotbext-axi logs every frame / transfer at INFO.
        self.source.log.setLevel(logging.WARNING)
        self.sink.log.setLevel(logging.WARNING)
        in_w, out_w = len(self.source.bus.tdata), len(self.sink.bus.tdata)
        if in_w != lanes * in_width or out_w != lanes * out_width:
            raise ValueError(
                f"TDATA widths {in_w}/{out_w} do not match lanes={lanes} x in_width={in_width}/out_width={out_width}"
            )
        self.axil: AxiLiteMaster | None = None
        if axil_prefix is not None and _sig(dut, f"{axil_prefix}_awaddr") is not None:
            self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, axil_prefix), self.clk, reset)
            self.axil.write_if.log.setLevel(logging.WARNING)
            self.axil.read_if.log.setLevel(logging.WARNING)
        self.monitor = StreamMonitor(dut, in_prefix, out_prefix, clk, rst)
        self.last_output: list[np.ndarray] = []  # rows received by the last run_rows

    # ---------------- pauses ----------------

    def set_random_pauses(
        self, rng: random.Random | None = None, in_prob: float = 0.3, out_prob: float = 0.4, max_burst: int = 8
    ) -> None:
        """Random idle cycles on the input (``in_prob``) and backpressure on the output
        (``out_prob``), see :func:`pause_pattern`. ``rng`` defaults to
        ``random.Random(cocotb.RANDOM_SEED)``; the two ports get independent streams."""
        rng = rng or random.Random(cocotb.RANDOM_SEED)
        self.source.set_pause_generator(pause_pattern(random.Random(rng.getrandbits(64)), in_prob, max_burst))
        self.sink.set_pause_generator(pause_pattern(random.Random(rng.getrandbits(64)), out_prob, max_burst))

    def clear_pauses(self) -> None:
        """Source never idles, sink always ready."""
        self.source.clear_pause_generator()
        self.sink.clear_pause_generator()
        self.source.pause = False
        self.sink.pause = False

    def set_axil_pauses(self, rng: random.Random | None = None, prob: float = 0.3) -> None:
        """Random stalls on all five AXI4-Lite channels (so AW and W reach the slave in any
        order, and BREADY/RREADY are withheld)."""
        assert self.axil is not None, "DUT has no AXI4-Lite port"
        rng = rng or random.Random(cocotb.RANDOM_SEED ^ 0xA11)
        w, r = self.axil.write_if, self.axil.read_if
        for ch in (w.aw_channel, w.w_channel, w.b_channel, r.ar_channel, r.r_channel):
            ch.set_pause_generator(pause_pattern(random.Random(rng.getrandbits(64)), prob, 4))

    # ---------------- AXI4-Lite ----------------

    def _master(self) -> AxiLiteMaster:
        if self.axil is None:
            raise RuntimeError("DUT has no AXI4-Lite port")
        return self.axil

    async def write_word(self, offset: int, value: int) -> AxiResp:
        """Write a full 32-bit word (``value`` taken mod 2**32); return BRESP (no check)."""
        resp = await self._master().write(offset, (value & 0xFFFFFFFF).to_bytes(4, "little"))
        return AxiResp(resp.resp)

    async def write_bytes(self, offset: int, data: bytes) -> AxiResp:
        """Write bytes at a byte offset (partial words use WSTRB); return the worst BRESP."""
        resp = await self._master().write(offset, bytes(data))
        return AxiResp(resp.resp)

    async def read_word(self, offset: int) -> tuple[int, AxiResp]:
        """Read the 32-bit word at ``offset``: ``(RDATA, RRESP)`` (no check)."""
        resp = await self._master().read(offset, 4)
        return int.from_bytes(resp.data, "little"), AxiResp(resp.resp)

    async def write_regs(self, regmap: RegisterMap, values: Mapping[str, int | Sequence[int]]) -> None:
        """Write registers by name, each as the host does (:meth:`RegisterMap.word`: the value's 32-bit
        two's complement, range-checked against the declared width, ``ValueError``); assert OKAY each.
        A value that is a sequence names a memory: its entries are written from entry 0 (:meth:`write_mem`).
        """
        for name, v in values.items():
            if not isinstance(v, (int, np.integer)):
                await self.write_mem(regmap, name, list(v))
                continue
            resp = await self.write_word(regmap.offset(name), regmap.word(name, int(v)))
            assert resp == AxiResp.OKAY, f"write of register {name!r} answered {resp.name}"

    async def read_reg(self, regmap: RegisterMap, name: str) -> int:
        """Read a register (or ID/VERSION) by name; decode two's complement if signed.

        Asserts RRESP OKAY and that bits above the width are the zero/sign extension.
        """
        raw, resp = await self.read_word(regmap.offset(name))
        assert resp == AxiResp.OKAY, f"read of register {name!r} answered {resp.name}"
        return _decode32(raw, regmap.width(name), regmap.is_signed(name), name)

    async def write_mem(self, regmap: RegisterMap, name: str, values: Sequence[int], start: int = 0) -> None:
        """Write memory entries ``start, start+1, ...`` (one AXI write each); assert OKAY."""
        base = regmap.offset(name)
        for k, v in enumerate(values):
            resp = await self.write_word(base + 4 * (start + k), regmap.word(name, int(v)))
            assert resp == AxiResp.OKAY, f"write of {name}[{start + k}] answered {resp.name}"

    async def read_mem(self, regmap: RegisterMap, name: str, count: int, start: int = 0) -> list[int]:
        """Read ``count`` memory entries from ``start`` (decoded, extension checked)."""
        base = regmap.offset(name)
        width, sgn = regmap.width(name), regmap.is_signed(name)
        out = []
        for k in range(count):
            raw, resp = await self.read_word(base + 4 * (start + k))
            assert resp == AxiResp.OKAY, f"read of {name}[{start + k}] answered {resp.name}"
            out.append(_decode32(raw, width, sgn, f"{name}[{start + k}]"))
        return out

    # ---------------- streams ----------------

    def rows_to_frames(self, rows: object, masks: object | None = None,
                       user_hi: Sequence[int | Sequence[int]] | None = None) -> list[AxiStreamFrame]:
        return rows_to_frames(rows, masks, self.lanes, self.in_width, self.in_signed, self.user, user_hi)

    def frames_to_rows(
        self, frames: Sequence[AxiStreamFrame], lengths: Sequence[int]
    ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        return frames_to_rows(frames, lengths, self.lanes, self.out_width, self.out_signed)

    async def run_rows(
        self,
        rows: object,
        masks: object | None = None,
        expected_rows: object | None = None,
        *,
        check_out_mask: bool = True,
        max_mismatches: int = 10,
        timeout_cycles: int | None = None,
        user_hi: Sequence[int | Sequence[int]] | None = None,
        row_user: Sequence[int] | None = None,
    ) -> RunStats:
        """Send every row as a frame, receive as many frames, and check them exactly.

        Checks: output frame count (no extra frame within a few cycles after the last),
        beats per frame (= input beats), every real element equals ``expected_rows``
        (``AssertionError`` listing the first ``max_mismatches`` mismatches with row, element,
        beat, lane, input value, keep bit, expected and got), and -- if ``check_out_mask`` and
        the output has TUSER -- that output TUSER equals the input keep mask on real lanes.
        ``expected_rows=None`` skips the data comparison (frames/beats are still checked).
        ``user_hi``: input TUSER bits above the keep mask, per row (:func:`rows_to_frames`). ``row_user``: for a
        kernel whose TUSER is not a keep mask (``user=False``), per row the TUSER of all its beats.

        Returns:
            :class:`RunStats` (cycle counts from the :class:`StreamMonitor`). The received rows
            (decoded output elements, one array per row) are kept in ``self.last_output``.
        """
        rows_l = _as_rows(rows)
        masks_l = None if masks is None else [np.asarray(mk).astype(bool).reshape(-1) for mk in _as_rows(masks)]
        exp_l = None if expected_rows is None else _as_rows(expected_rows)
        if exp_l is not None and len(exp_l) != len(rows_l):
            raise ValueError(f"{len(rows_l)} rows but {len(exp_l)} expected rows")
        frames = self.rows_to_frames(rows_l, masks_l, user_hi)
        if row_user is not None:
            if self.user or len(row_user) != len(frames):
                raise ValueError("row_user: one TUSER value a row, for a kernel without a keep mask in TUSER")
            for f, u in zip(frames, row_user, strict=True):
                f.tuser = [int(u)] * len(f.tdata)
        lengths = [len(r) for r in rows_l]
        mon = self.monitor
        i0, o0, low0 = len(mon.in_beats), len(mon.out_beats), mon.in_ready_low

        for f in frames:
            self.source.send_nowait(f)
        received: list[AxiStreamFrame] = []
        for r, f in enumerate(frames):
            beats = len(f.tdata)
            limit = timeout_cycles if timeout_cycles is not None else 2000 + 40 * beats
            try:
                got = await with_timeout(self.sink.recv(compact=False), limit * self.period_ns, "ns")
            except cocotb.triggers.SimTimeoutError:
                raise AssertionError(
                    f"timeout: output frame {r} of {len(frames)} did not complete within {limit} cycles "
                    f"({len(mon.in_beats) - i0} input / {len(mon.out_beats) - o0} output beats so far)"
                ) from None
            if len(got.tdata) != beats:
                raise AssertionError(
                    f"output frame {r}: {len(got.tdata)} beats, expected {beats} (row length {lengths[r]})"
                )
            received.append(got)
        await ClockCycles(self.clk, 8)
        assert self.sink.empty(), f"{self.sink.count()} unexpected extra output frame(s) after {len(frames)}"

        out_rows, out_masks = self.frames_to_rows(received, lengths)
        self.last_output = out_rows
        errors: list[str] = []
        n_err = 0
        for r, row in enumerate(rows_l):
            keep = masks_l[r] if masks_l is not None else np.ones(len(row), dtype=bool)
            if exp_l is not None:
                exp = exp_l[r]
                if len(exp) != len(row):
                    raise ValueError(f"expected row {r} has {len(exp)} elements, input row {len(row)}")
                bad = np.nonzero(out_rows[r] != exp)[0]
                n_err += len(bad)
                for j in bad[: max(0, max_mismatches - len(errors))]:
                    errors.append(
                        f"row {r} elem {j} (beat {j // self.lanes}, lane {j % self.lanes}): input {int(row[j])} "
                        f"keep {int(keep[j])}: expected {int(exp[j])}, got {int(out_rows[r][j])}"
                    )
            if check_out_mask and self.user and out_masks[r] is not None:
                badm = np.nonzero(out_masks[r] != keep)[0]
                n_err += len(badm)
                for j in badm[: max(0, max_mismatches - len(errors))]:
                    errors.append(
                        f"row {r} elem {j} (beat {j // self.lanes}, lane {j % self.lanes}): output TUSER keep "
                        f"{int(out_masks[r][j])}, input keep {int(keep[j])}"
                    )
        if n_err:
            raise AssertionError(
                f"{n_err} mismatch(es) in {len(rows_l)} rows; first {len(errors)}:\n  " + "\n  ".join(errors)
            )

        ins, outs = mon.in_beats[i0:], mon.out_beats[o0:]
        n_in = sum(len(f.tdata) for f in frames)
        assert len(ins) == n_in and len(outs) == n_in, (
            f"handshakes seen by the monitor: {len(ins)} in / {len(outs)} out, {n_in} beats expected"
        )
        return RunStats(
            rows=len(rows_l),
            elements=sum(lengths),
            in_beats=len(ins),
            out_beats=len(outs),
            cycles=outs[-1] - ins[0] + 1,
            latency=outs[0] - ins[0],
            in_ready_low=mon.in_ready_low - low0,
            out_cycles=list(outs),
        )

    async def measure_throughput(
        self, rows: object, expected_rows: object | None = None, masks: object | None = None
    ) -> ThroughputStats:
        """Stream ``rows`` with no idles and no backpressure; check them; measure II/latency.

        Use a long stream of rows whose lengths are multiples of ``lanes`` (no padding) so
        ``elements_per_cycle`` is the steady-state rate (ideal: ``lanes``). Pauses set earlier
        are cleared.
        """
        self.clear_pauses()
        await ClockCycles(self.clk, 2)
        run = await self.run_rows(rows, masks, expected_rows)
        span = run.out_cycles[-1] - run.out_cycles[0] + 1
        return ThroughputStats(
            elements_per_cycle=run.elements / span,
            beats_per_cycle=run.out_beats / span,
            latency=run.latency,
            elements=run.elements,
            span_cycles=span,
            run=run,
        )


def _decode32(raw: int, width: int, signed: bool, what: str) -> int:
    """Decode a 32-bit read of a ``width``-bit field; assert the upper bits are its extension."""
    v = raw & ((1 << width) - 1)
    if signed and v >> (width - 1):
        v -= 1 << width
    assert (v & 0xFFFFFFFF) == raw, (
        f"{what}: read {raw:#010x}, but a {'signed' if signed else 'unsigned'} {width}-bit value must read "
        f"{v & 0xFFFFFFFF:#010x} ({'sign' if signed else 'zero'}-extended)"
    )
    return v

"""Discrete-event simulation of the generated engine graph (stream contract v3, ``hw/ENGINE.md``), with SimPy.

MODELED, not measured: the simulation runs the graph ``vckattn hw generate`` writes, one process per part, with
the per-unit costs of :mod:`.engine` (the kernels' instrumented cycles, the PL top's Verilator-exact slots, the
links' rates) -- but it lets the parts interact as the hardware does, which the closed form only bounds:

* **buffers** with their depths: every kernel port is a ping-pong buffer (two halves); a producer waits for a free
  half, a consumer for a full one. The QK^T kernels hold their K slice (and the P.V kernels their V slice) for all
  the tiles of a group, while the next group's slice loads into the other half.
* **the Q broadcast** waits until every QK^T kernel of the pipeline has a free q half (lock-step).
* **packet merge and split**: a score channel serves its kernels' packets first come, first served; a packet holds
  the channel until it has streamed out, through the PL and back, and it cannot start before its P.V kernel has a
  free p half (head-of-line blocking, as ``pktsplit`` stalls).
* **the cascade**: P.V kernel ``j`` starts a tile only after kernel ``j-1`` has started it (one block ahead) and
  cannot finish before ``j-1`` has finished plus one block; the requantizer at its end likewise after the last
  P.V kernel.
* **links** (PLIOs, the tile DMA) at their rates, **the PL lanes** (slots per packet, the PL top's output delay),
  the output mover, and **DDR as one bank** serving every mover's reads and writes in arrival order.
* **the host's dealing** of whole (batch, head) groups to pipelines (:func:`.engine.deal`).

A launch ends when the last A record and done-log entry are in DDR; the host's serial launch overhead is added
as in the closed form. A graph that cannot finish (every part waiting on another) is reported as a deadlock,
naming what each pipeline still waits for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from . import engine, pl
from .engine import Geometry

#: bytes a mover's m_axi adapter keeps in flight (read ahead, or posted writes): num_outstanding 16 x burst 16 beats
#: x 16 B (UG1399 m_axi defaults; hw/perf/data/pl_infrastructure.json)
READ_AHEAD_BYTES = 16 * 16 * 16


def _chunks(n: int) -> list[int]:
    """``n`` bytes in chunks of at most :data:`READ_AHEAD_BYTES`."""
    full, rest = divmod(n, READ_AHEAD_BYTES)
    return [READ_AHEAD_BYTES] * full + ([rest] if rest else [])


class Deadlock(RuntimeError):
    """The simulated graph stopped before every tile was done."""


class PingPong:
    """A buffer port's two halves: ``free`` halves for the producer, ``full`` ones (with their item) for the
    consumer."""

    def __init__(self, env: simpy.Environment, halves: int = engine.BUFFER_HALVES) -> None:
        self.free = simpy.Container(env, capacity=halves, init=halves)
        self.full = simpy.Store(env, capacity=halves)


class Link:
    """A serial resource moving bytes at ``rate`` bytes/s (a PLIO with its DMA, or the DDR bank); counts its busy
    time."""

    def __init__(self, env: simpy.Environment, rate: float, name: str) -> None:
        self.env, self.rate, self.name = env, rate, name
        self.res = simpy.Resource(env, capacity=1)
        self.busy = 0.0

    def move(self, nbytes: float):  # a SimPy process generator
        with self.res.request() as req:
            yield req
            t = nbytes / self.rate
            self.busy += t
            yield self.env.timeout(t)


@dataclass
class SimResult:
    """What one simulated launch gives: seconds (device, and with the host's launch overhead), per-part busy
    seconds (the busiest instance of each kind), tiles done."""

    device_seconds: float
    seconds: float
    busy: dict[str, float]
    tiles: int
    events: int
    design: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"modeled": True, "simulated": True, "device_seconds": self.device_seconds,
                "seconds_per_layer": self.seconds, "busy_seconds": self.busy, "tiles": self.tiles,
                "events": self.events}


class _Pipeline:
    """The processes of one pipeline (module docstring)."""

    def __init__(self, sim: _Sim, index: int, groups: list[int], ready: Callable[[int], Any] | None = None,
                 on_done: Callable[[int], None] | None = None) -> None:
        # ready(group): an event the movers wait for before reading the group's records (None: from the start);
        # on_done(group): called when the group's last A record is written (the sublayer simulation's hand-offs)
        self.sim, self.index, self.groups, self.ready, self.on_done = sim, index, groups, ready, on_done
        self.left = {grp: sim.g.tiles_per_group for grp in groups}
        g, env = sim.g, sim.env
        self.q = [PingPong(env) for _ in range(g.k)]
        self.kbuf = [PingPong(env) for _ in range(g.k)]
        self.vbuf = [PingPong(env) for _ in range(g.k)]
        self.s = [PingPong(env) for _ in range(g.k)]
        self.p = [PingPong(env) for _ in range(g.k)]
        self.o = PingPong(env)
        self.casc = [simpy.Store(env, capacity=1) for _ in range(g.k + 1)]  # into kernel j (j >= 1); k: the rq
        self.q_link = Link(env, g.link_rate, "q_in")
        self.k_link = Link(env, g.link_rate, "k_in")
        self.v_link = Link(env, g.link_rate, "v_in")
        self.o_link = Link(env, min(g.link_rate, engine.PLIO_BEAT_BYTES * engine.S2MM_BEATS_PER_CYCLE * g.f_pl),
                           "o_out")
        self.channels = [simpy.Resource(env, capacity=1) for _ in range(g.m)]
        self.busy = {"aie_qk": [0.0] * g.k, "aie_pv": [0.0] * g.k, "aie_rq": [0.0], "pl_channel": [0.0] * g.m}
        self.tiles = [(grp, r) for grp in groups for r in range(g.tiles_per_group)]
        self.done = 0
        for proc in (self.mover_q(), self.mover_kv(self.kbuf, self.k_link), self.mover_kv(self.vbuf, self.v_link),
                     self.rq(), self.o_out()):
            env.process(proc)
        for j in range(g.k):
            env.process(self.qk(j))
            env.process(self.merge_out(j))
            env.process(self.pv(j))

    # ---- movers (PL): a record streams in chunks of the m_axi adapter's read buffer; reading chunk i from DDR
    # overlaps sending chunk i - 1 over the PLIO (the adapter keeps READ_AHEAD_BYTES in flight)
    def _reader(self, sizes: list[int], fifo: simpy.Store, room: simpy.Container, groups: list[int]):
        """Reads every record (of group ``groups[i]``), chunk by chunk, as soon as the mover's read buffer has room
        for the chunk (and the group is ready)."""
        sim = self.sim
        for n, grp in zip(sizes, groups, strict=True):
            if self.ready is not None:
                yield self.ready(grp)
            for c in _chunks(n):
                yield room.get(c)
                yield sim.env.process(sim.ddr.move(c))
                yield fifo.put(c)

    def _fifo(self, sizes: list[int], groups: list[int]) -> tuple[simpy.Store, simpy.Container]:
        env = self.sim.env
        fifo = simpy.Store(env)
        room = simpy.Container(env, capacity=READ_AHEAD_BYTES, init=READ_AHEAD_BYTES)
        env.process(self._reader(sizes, fifo, room, groups))
        return fifo, room

    def _send(self, fifo: simpy.Store, room: simpy.Container, link: Link, ddr_bytes: int, link_bytes: int):
        """Streams one record read from DDR (``ddr_bytes``) as ``link_bytes`` over ``link``, chunk by chunk."""
        env = self.sim.env
        chunks = _chunks(ddr_bytes)
        for i, c in enumerate(chunks):
            yield fifo.get()
            # the link carries the record's own bytes (header beat included) in step with the chunks read
            share = link_bytes * c / ddr_bytes if i < len(chunks) - 1 else \
                link_bytes - link_bytes * (ddr_bytes - c) / ddr_bytes
            yield env.process(link.move(share))
            yield room.put(c)

    def mover_q(self):
        g, sim = self.sim.g, self.sim
        n = g.q_rows * g.d + engine.DESCRIPTOR_BYTES
        fifo, room = self._fifo([n] * len(self.tiles), [grp for grp, _ in self.tiles])
        for _grp, r in self.tiles:
            for b in self.q:  # the broadcast needs a free half in every QK^T kernel
                yield b.free.get(1)
            yield sim.env.process(self._send(fifo, room, self.q_link, n, g.q_bytes))
            for b in self.q:
                yield b.full.put(r)

    def mover_kv(self, bufs: list[PingPong], link: Link):
        """The k (or v) mover: per group its ``k`` slices over k_in (v_in); it reads every descriptor of the kv list
        (the other mover's too) and its own slices' payloads."""
        g, sim = self.sim.g, self.sim
        n = g.sk * g.d + 2 * engine.DESCRIPTOR_BYTES
        fifo, room = self._fifo([n] * (g.k * len(self.groups)), [grp for grp in self.groups for _ in range(g.k)])
        for grp in self.groups:
            for b in bufs:
                yield b.free.get(1)
                yield sim.env.process(self._send(fifo, room, link, n, g.kv_bytes))
                yield b.full.put(grp)

    # ---- AIE
    def qk(self, j: int):
        g, env = self.sim.g, self.sim.env
        secs = [engine.kernel_seconds(g, "qk", g.masked(r, j)) for r in range(g.tiles_per_group)]
        for _grp, r in self.tiles:
            if r == 0:
                yield self.kbuf[j].full.get()
            yield self.q[j].full.get()
            yield self.s[j].free.get(1)
            yield env.timeout(secs[r])
            self.busy["aie_qk"][j] += secs[r]
            yield self.s[j].full.put(r)
            yield self.q[j].free.put(1)
            if r == g.tiles_per_group - 1:
                yield self.kbuf[j].free.put(1)

    def merge_out(self, j: int):
        """Kernel j's packets through its score channel (pktmerge -> PLIO -> PL -> PLIO -> pktsplit)."""
        g, env = self.sim.g, self.sim.env
        c = j // g.per_channel
        t = self.sim.packet_seconds
        for _ in self.tiles:
            yield self.s[j].full.get()
            with self.channels[c].request() as req:
                yield req
                yield self.p[j].free.get(1)  # pktsplit stalls until the P.V kernel has room
                yield env.timeout(t)
                self.busy["pl_channel"][c] += t
            yield self.s[j].free.put(1)
            env.process(self._deliver(j))

    def _deliver(self, j: int):
        yield self.sim.env.timeout(self.sim.channel_latency)
        yield self.p[j].full.put(1)

    def pv(self, j: int):
        g, env = self.sim.g, self.sim.env
        t = engine.kernel_seconds(g, engine.pv_variant(j, g.k))
        block = t / engine.cascade_blocks(g)  # one output block: how far the cascade runs ahead
        for _grp, r in self.tiles:
            if r == 0:
                yield self.vbuf[j].full.get()
            yield self.p[j].full.get()
            prev_done = None
            if j > 0:
                prev_done = yield self.casc[j].get()
            done = env.event()
            start = env.now
            # the first block's partial sums go down the cascade; a full cascade stalls this kernel
            yield env.timeout(block)
            yield self.casc[j + 1].put(done)
            yield env.timeout(t - block)
            if prev_done is not None:
                if not prev_done.triggered:
                    yield prev_done
                if env.now < prev_done.value + block:
                    yield env.timeout(prev_done.value + block - env.now)
            self.busy["aie_pv"][j] += env.now - start
            done.succeed(env.now)
            yield self.p[j].free.put(1)
            if r == g.tiles_per_group - 1:
                yield self.vbuf[j].free.put(1)

    def rq(self):
        """The requantizer: O block by block from the last P.V kernel's cascade into a free o half."""
        g, env = self.sim.g, self.sim.env
        t = engine.kernel_seconds(g, "rq")
        block = t / engine.cascade_blocks(g)
        for _grp, r in self.tiles:
            prev_done = yield self.casc[g.k].get()
            yield self.o.free.get(1)
            start = env.now
            yield env.timeout(t)
            if not prev_done.triggered:
                yield prev_done
            if env.now < prev_done.value + block:
                yield env.timeout(prev_done.value + block - env.now)
            self.busy["aie_rq"][0] += env.now - start
            yield self.o.full.put(r)

    # ---- O out, the output mover, DDR
    def o_out(self):
        g, sim = self.sim.g, self.sim
        room = simpy.Container(sim.env, capacity=max(READ_AHEAD_BYTES, g.a_bytes),
                               init=max(READ_AHEAD_BYTES, g.a_bytes))
        for grp, _ in self.tiles:
            yield self.o.full.get()
            yield sim.env.process(self.o_link.move(g.o_bytes))
            yield self.o.free.put(1)
            yield room.get(g.a_bytes)  # posted writes, up to the adapter's buffer outstanding
            sim.env.process(self._write(room, grp))

    def _write(self, room: simpy.Container, grp: int):
        g, sim = self.sim.g, self.sim
        yield sim.env.process(sim.ddr.move(g.a_bytes))
        yield room.put(g.a_bytes)
        self.left[grp] -= 1
        if self.on_done is not None and not self.left[grp]:
            self.on_done(grp)
        self.done += 1
        sim.tiles_done += 1
        sim.last = sim.env.now


class _Sim:
    def __init__(self, g: Geometry, ddr_rate: float | None, env: simpy.Environment | None = None) -> None:
        self.g = g
        self.env = env or simpy.Environment()
        self.ddr = Link(self.env, ddr_rate or float("inf"), "ddr")
        self.packet_seconds = engine.packet_seconds(g) if g.normalizer == "swiftmax" else \
            engine.tile_costs(g, 0).channel / g.per_channel
        # from a packet's first beat out of its s buffer to its P's last beat in the p buffer, beyond its occupancy
        self.channel_latency = pl.ENGINE_OUT_DELAY / g.f_pl
        self.tiles_done = 0
        self.last = 0.0
        self.steps = 0


def simulate(w: Any, d: Any, dev: Any, normalizer: str = "swiftmax") -> SimResult:
    """Simulate one layer of workload ``w`` on engine design ``d`` (module docstring). Raises :class:`Deadlock`
    when the graph stops before every tile is done, ValueError for a design the engine cannot run."""
    g = engine.geometry(w, d, dev, normalizer)
    sim = _Sim(g, None if w.operands == "on_chip" else dev.ddr_bytes_per_s)
    pipes = [_Pipeline(sim, p, groups) for p, groups in enumerate(engine.deal(g.groups, g.pipelines))]
    while True:
        try:
            sim.env.step()
        except simpy.core.EmptySchedule:
            break
        sim.steps += 1
    want = g.groups * g.tiles_per_group
    if sim.tiles_done != want:
        stuck = [f"pipeline {p.index}: {p.done} of {len(p.tiles)} tiles" for p in pipes if p.done < len(p.tiles)]
        raise Deadlock(f"the simulated graph deadlocks after {sim.tiles_done} of {want} tiles ({'; '.join(stuck[:4])})")
    busy = {
        "ddr": sim.ddr.busy,
        "q_in": max(p.q_link.busy for p in pipes),
        "kv_in": max(max(p.k_link.busy, p.v_link.busy) for p in pipes),
        "aie_qk": max(max(p.busy["aie_qk"]) for p in pipes),
        "pl_channel": max(max(p.busy["pl_channel"]) for p in pipes),
        "aie_pv": max(max(p.busy["aie_pv"]) for p in pipes),
        "aie_rq": max(p.busy["aie_rq"][0] for p in pipes),
        "o_out": max(p.o_link.busy for p in pipes),
    }
    serial = d.host_launches_per_layer * dev.host_seconds_per_launch
    return SimResult(device_seconds=sim.last, seconds=sim.last + serial, busy=busy, tiles=sim.tiles_done,
                     events=sim.steps, design=d.to_json())


def simulate_pl(w: Any, d: Any, dev: Any) -> int:
    """PL cycles of one layer with every score packet ready at once and every P sink ready (what the ``rtl``
    backend measures on the PL top in Verilator): the channels of the busiest pipeline, each serving its packets
    back to back at the PL top's slots, plus its output delay."""
    g = engine.geometry(w, d, dev, "swiftmax")
    env = simpy.Environment()
    slots = pl.engine_packet_slots(g.q_rows * g.sk, g.lanes)
    finish = []

    def channel(n_packets: int):
        res = simpy.Resource(env, capacity=1)
        for _ in range(n_packets):
            with res.request() as req:
                yield req
                yield env.timeout(slots)
        yield env.timeout(pl.ENGINE_OUT_DELAY)
        finish.append(env.now)

    for groups in engine.deal(g.groups, g.pipelines):
        for _c in range(g.m):
            env.process(channel(len(groups) * g.tiles_per_group * g.per_channel))
    env.run()
    return int(max(finish))


__all__ = ["Deadlock", "Link", "PingPong", "SimResult", "simulate", "simulate_pl"]

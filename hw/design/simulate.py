"""Discrete-event simulation of the engine graph as ``vckattn hw generate`` writes it (SimPy). MODELED.

The full description: ``docs/internals/hw.md``, section ``hw/design/simulate.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from vckattn.hw.design import graph_topology as gt
from vckattn.hw.perf import calibration, engine
from vckattn.hw.perf.engine import Geometry
from vckattn.hw.pl import timing

#: bytes a mover's m_axi adapter keeps in flight (read ahead, or posted writes): num_outstanding 16 x burst 16 beats
#: x 16 B (UG1399 m_axi defaults; hw/perf/data/pl_infrastructure.json)
READ_AHEAD_BYTES = 16 * 16 * 16
#: buffer descriptors of one AIE tile's DMA (AM009, AI Engine Architecture Manual, ch. 'AI Engine Tile
#: Architecture' / 'Memory Module': "16 buffer descriptors" shared by the tile DMA's channels)
BDS_PER_TILE = 16
#: 64-bit streams an AIE array interface tile offers per direction (AM009, 'AI Engine to Programmable Logic
#: Interface': 8 PL -> AIE and 6 AIE -> PL; a 128-bit PLIO takes two)
COLUMN_STREAMS = {"in": 8, "out": 6}
#: DDR4-3200AA (22-22-22) timings, JEDEC JESD79-4 (DDR4 SDRAM standard), speed-bin and timing tables: tCK 0.625 ns,
#: CL 22 and CWL 16 clocks, tWTR_L max(4 nCK, 7.5 ns), tRCD = tRP = 13.75 ns. ASSUMPTION: the card's DDR4 runs
#: at 3200 MT/s with these timings (VCK5000 platform: DDR4 for kernels; the speed bin is not published)
DDR_TCK_S = 0.625e-9
#: write -> read: the read command waits tWTR_L after the last write data, its data come CL later (the data bus
#: idles tWTR_L + CL = 7.5 + 13.75 ns)
DDR_WRITE_TO_READ_S = 7.5e-9 + 22 * DDR_TCK_S
#: read -> write: the write data start RL + BL/2 - WL + 2 nCK after the read command, two clocks after the read
#: data end (the bus idles 2 nCK = 1.25 ns)
DDR_READ_TO_WRITE_S = 2 * DDR_TCK_S
#: a row conflict: precharge then activate, tRP + tRCD (JESD79-4, DDR4-3200AA)
DDR_ROW_MISS_S = 13.75e-9 + 13.75e-9
#: linear masters one DDR4 controller keeps on open pages: PG313 (Versal NoC and Integrated Memory Controller),
#: 'Multi-Thread Linear Read/Write': with each master placed in its own banks, 2 readers + 2 writers reach 88%
#: efficiency, "this approach works well with up to eight devices because each device occupies two banks. With
#: more than eight devices, some performance degradation is expected"
DDR_MASTERS_PER_CONTROLLER = 8
#: peak of one 64-bit DDR4-3200 interface (3200 MT/s x 8 B; UG1366 for the VCK190's); a device DDR rate above it
#: comes from several controllers interleaved over the NoC (their count: the rate over this, rounded up)
DDR4_CHANNEL_BYTES_PER_S = 25.6e9
#: ASSUMPTION (row conflicts): each master streams linearly through its own rows; up to
#: DDR_MASTERS_PER_CONTROLLER masters per controller keep their pages open (no cost); with n more masters waiting
#: than that, a chunk from another master than the last one finds its row closed with probability 1 - limit / n
#: (masters spread evenly over the banks) and pays DDR_ROW_MISS_S times that probability (expected value,
#: deterministic; a chunk spans every interleaved controller, so each of them pays it at once). The device's DDR
#: rate (hw/perf/device.json ddr_gbps) is taken as the streaming rate of one direction.


def ddr_chunks(n: int) -> list[int]:
    """``n`` bytes in chunks of at most :data:`READ_AHEAD_BYTES`."""
    full, rest = divmod(n, READ_AHEAD_BYTES)
    return [READ_AHEAD_BYTES] * full + ([rest] if rest else [])


def headline(closed: float, simulated: float) -> tuple[float, str]:
    """The figure to report for one design: the slower (larger seconds) of the closed form's ``closed`` and the
    simulation's ``simulated`` seconds, and which it is (``"closed form"`` or ``"simulation"``). MODELED."""
    if not (closed > 0 and simulated > 0):
        raise ValueError(f"seconds must be positive, got closed {closed}, simulated {simulated}")
    return (simulated, "simulation") if simulated > closed else (closed, "closed form")


class Deadlock(RuntimeError):
    """The simulated graph stopped before every tile was done."""


class PingPong:
    """A buffer port's two halves: ``free`` halves for the producer, ``full`` ones (with their item) for the
    consumer."""

    def __init__(self, env: simpy.Environment, halves: int = engine.BUFFER_HALVES) -> None:
        self.free = simpy.Container(env, capacity=halves, init=halves)
        self.full = simpy.Store(env, capacity=halves)


class Link:
    """A serial resource moving bytes at ``rate`` bytes/s (a PLIO with its DMA, or a DDR port); counts its busy
    time. ``move(n, handoff)`` holds it ``n / rate + handoff`` seconds (``handoff``: the DMA's lock release and
    buffer-descriptor switch after a buffer)."""

    def __init__(self, env: simpy.Environment, rate: float, name: str) -> None:
        self.env, self.rate, self.name = env, rate, name
        self.res = simpy.Resource(env, capacity=1)
        self.busy = 0.0

    def move(self, nbytes: float, handoff: float = 0.0):  # a SimPy process generator
        with self.res.request() as req:
            yield req
            t = nbytes / self.rate + handoff
            self.busy += t
            yield self.env.timeout(t)


class DdrBank:
    """The card's DDR bank: requests served in arrival order at ``rate`` bytes/s, plus the read/write turnaround on
    each change of direction and the expected row-conflict cost with more masters waiting than the controllers keep
    pages open for (module constants).
    Counts busy seconds (transfers), overhead seconds (turnarounds and row conflicts), turnarounds and the most
    masters seen waiting."""

    def __init__(self, env: simpy.Environment, rate: float) -> None:
        self.env, self.rate = env, rate
        self.open_masters = DDR_MASTERS_PER_CONTROLLER * max(1, -(-int(rate) // int(DDR4_CHANNEL_BYTES_PER_S)))
        self.res = simpy.Resource(env, capacity=1)
        self.busy = 0.0
        self.overhead = 0.0
        self.turnaround_seconds = 0.0
        self.turnarounds = 0
        self.max_masters = 0
        self.waiting: dict[str, int] = {}
        self._dir: bool | None = None
        self._master: str | None = None

    def move(self, nbytes: float, master: str = "", write: bool = False, group: int | None = None,
             plio: str = ""):  # a SimPy process generator (``group``, ``plio``: unused, one bank)
        self.waiting[master] = self.waiting.get(master, 0) + 1
        with self.res.request() as req:
            yield req
            extra = 0.0
            if self._dir is not None and write != self._dir:
                extra += DDR_READ_TO_WRITE_S if write else DDR_WRITE_TO_READ_S
                self.turnaround_seconds += extra
                self.turnarounds += 1
            n = sum(1 for v in self.waiting.values() if v)
            self.max_masters = max(self.max_masters, n)
            if self._master is not None and master != self._master and n > self.open_masters:
                extra += DDR_ROW_MISS_S * (1 - self.open_masters / n)
            t = nbytes / self.rate
            self.busy += t
            self.overhead += extra
            yield self.env.timeout(t + extra)
            self._dir, self._master = write, master
        self.waiting[master] -= 1


class _NoDdr:
    """Operands on chip: no DDR (a move costs nothing)."""

    busy = overhead = turnaround_seconds = 0.0
    turnarounds = max_masters = 0

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env

    def move(self, nbytes: float, master: str = "", write: bool = False, group: int | None = None,
             plio: str = ""):
        yield self.env.timeout(0)  # a SimPy process generator


@dataclass
class SimResult:
    """What one simulated launch gives: seconds (device, and with the host's launch overhead), per-part busy
    seconds (the busiest instance of each kind), tiles done, and what the graph used (``graph``: kernels, PLIOs,
    DDR masters, the most buffer descriptors on one tile, DDR turnarounds and overhead seconds)."""

    device_seconds: float
    seconds: float
    busy: dict[str, float]
    tiles: int
    events: int
    design: dict[str, Any] = field(default_factory=dict)
    graph: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"modeled": True, "simulated": True, "device_seconds": self.device_seconds,
                "seconds_per_layer": self.seconds, "busy_seconds": self.busy, "tiles": self.tiles,
                "events": self.events, "graph": self.graph}


class PipelineSim:
    """The processes of one pipeline of the generated graph (module docstring); slices are numbered by the QK^T
    kernels' slice index (``tp.qk`` order), the P.V kernels run in the graph's cascade order."""

    def __init__(self, sim: GraphSim, index: int, groups: list[int], ready: Callable[[int], Any] | None = None,
                 on_done: Callable[[int], None] | None = None) -> None:
        # ready(group): an event the movers wait for before reading the group's records (None: from the start);
        # on_done(group): called when the group's last A record is written (the sublayer simulation's hand-offs)
        self.sim, self.index, self.groups, self.ready, self.on_done = sim, index, groups, ready, on_done
        tp = self.tp = sim.pipes[index]
        self.left = {grp: sim.g.tiles_per_group for grp in groups}
        g, env = sim.g, sim.env
        k = len(tp.qk)
        if k != g.k:
            raise gt.TopologyError(f"generated graph: pipeline {index} has {k} QK^T kernels, the design {g.k}")
        self.k = k
        self.q = [PingPong(env) for _ in range(k)]
        self.kbuf = [PingPong(env) for _ in range(k)]
        self.vbuf = [PingPong(env) for _ in range(k)]
        self.s = [PingPong(env) for _ in range(k)]
        self.p = [PingPong(env) for _ in range(k)]
        self.o = PingPong(env)
        # the cascade: position -> slice (tp.pv in cascade order); casc[pos]: into the kernel at pos (k: the rq)
        pv_slice = {sim.topo.kernels[name].index: name for name in tp.pv}
        self.order = [tp.pv.index(pv_slice[sim.topo.kernels[q].index]) for q in tp.qk]  # slice -> position
        self.casc = [simpy.Store(env, capacity=1) for _ in range(k + 1)]
        self.links = {name: Link(env, sim.rates[name], name)
                      for name in {tp.q_plio, tp.o_plio, *tp.k_stream, *tp.v_stream, *tp.channel, *tp.p_plio}}
        self.channels = {c: simpy.Resource(env, capacity=1) for c in dict.fromkeys(tp.channel)}
        self.on_channel = {c: [j for j in range(k) if tp.channel[j] == c] for c in self.channels}
        self.busy = {"aie_qk": [0.0] * k, "aie_pv": [0.0] * k, "aie_rq": [0.0],
                     "pl_channel": dict.fromkeys(self.channels, 0.0)}
        self.tiles = [(grp, r) for grp in groups for r in range(g.tiles_per_group)]
        self.done = 0
        self.fanout = [tp.qk.index(name) for name in tp.q_fanout if name in tp.qk]
        procs = [self.mover_q(), self.rq(), self.o_out()]
        for stream, bufs, key in ((tp.k_stream, self.kbuf, "k"), (tp.v_stream, self.vbuf, "v")):
            for plio in dict.fromkeys(stream):
                procs.append(self.mover_kv(plio, [j for j in range(k) if stream[j] == plio], bufs, key))
        for proc in procs:
            env.process(proc)
        for j in range(k):
            env.process(self.qk(j))
            env.process(self.merge_out(j))
            env.process(self.pv(j))

    # ---- movers (PL): a record streams in chunks of the m_axi adapter's read buffer; reading chunk i from DDR
    # overlaps sending chunk i - 1 over the PLIO (the adapter keeps READ_AHEAD_BYTES in flight)
    def _reader(self, sizes: list[int], fifo: simpy.Store, room: simpy.Container, groups: list[int], master: str,
                plio: str):
        """Reads every record (of group ``groups[i]``, for ``plio``), chunk by chunk, as soon as the mover's read
        buffer has room for the chunk (and the group is ready)."""
        sim = self.sim
        for n, grp in zip(sizes, groups, strict=True):
            if self.ready is not None:
                yield self.ready(grp)
            for c in ddr_chunks(n):
                yield room.get(c)
                yield from sim.ddr.move(c, master, group=grp, plio=plio)
                yield fifo.put(c)

    def _fifo(self, sizes: list[int], groups: list[int], master: str,
              plio: str) -> tuple[simpy.Store, simpy.Container]:
        env = self.sim.env
        fifo = simpy.Store(env)
        room = simpy.Container(env, capacity=READ_AHEAD_BYTES, init=READ_AHEAD_BYTES)
        env.process(self._reader(sizes, fifo, room, groups, master, plio))
        return fifo, room

    def _send(self, fifo: simpy.Store, room: simpy.Container, link: Link, ddr_bytes: int, link_bytes: int):
        """Streams one record read from DDR (``ddr_bytes``) as one buffer of ``link_bytes`` over ``link``, chunk by
        chunk; the buffer's DMA hand-off after its last chunk."""
        chunks = ddr_chunks(ddr_bytes)
        for i, c in enumerate(chunks):
            yield fifo.get()
            last = i == len(chunks) - 1
            # the link carries the record's own bytes (header beat included) in step with the chunks read
            share = link_bytes * c / ddr_bytes if not last else link_bytes - link_bytes * (ddr_bytes - c) / ddr_bytes
            yield from link.move(share, self.sim.handoff if last else 0.0)
            yield room.put(c)

    def _master(self, plio: str) -> str:
        return self.sim.master(plio)

    def mover_q(self):
        g, tp = self.sim.g, self.tp
        n = g.q_rows * g.d + engine.DESCRIPTOR_BYTES
        fifo, room = self._fifo([n] * len(self.tiles), [grp for grp, _ in self.tiles], self._master(tp.q_plio),
                                tp.q_plio)
        link = self.links[tp.q_plio]
        nbytes = max(tp.bytes["q"][j] for j in self.fanout)
        for _grp, r in self.tiles:
            for j in self.fanout:  # the broadcast needs a free half in every kernel it feeds
                yield self.q[j].free.get(1)
            yield from self._send(fifo, room, link, n, nbytes)
            for j in self.fanout:
                yield self.q[j].full.put(r)

    def mover_kv(self, plio: str, slices: list[int], bufs: list[PingPong], key: str):
        """The mover of one k (or v) PLIO: per group the slices it carries, in the pktsplit's order; it reads every
        descriptor of the kv list (the other mover's too) and its own slices' payloads."""
        g, tp = self.sim.g, self.tp
        n = g.sk * g.d + 2 * engine.DESCRIPTOR_BYTES
        fifo, room = self._fifo([n] * (len(slices) * len(self.groups)),
                                [grp for grp in self.groups for _ in slices], self._master(plio), plio)
        link = self.links[plio]
        for grp in self.groups:
            for j in slices:
                yield bufs[j].free.get(1)
                yield from self._send(fifo, room, link, n, tp.bytes[key][j])
                yield bufs[j].full.put(grp)

    # ---- AIE
    def qk(self, j: int):
        g, env = self.sim.g, self.sim.env
        if j not in self.fanout:
            raise gt.TopologyError(f"generated graph: {self.tp.qk[j]} gets no q from {self.tp.q_plio}")
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
        """Slice j's packets through its score channel (pktmerge -> s_out PLIO -> PL -> p_in PLIO -> pktsplit)."""
        env, tp = self.sim.env, self.tp
        c = tp.channel[j]
        t = self.sim.packet_seconds(tp, j, len(self.on_channel[c]))
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
        pos = self.order[j]
        t = engine.kernel_seconds(g, engine.pv_variant(pos, self.k))
        block = t / engine.cascade_blocks(g)  # one output block: how far the cascade runs ahead
        for _grp, r in self.tiles:
            if r == 0:
                yield self.vbuf[j].full.get()
            yield self.p[j].full.get()
            prev_done = None
            if pos > 0:
                prev_done = yield self.casc[pos].get()
            done = env.event()
            start = env.now
            # the first block's partial sums go down the cascade; a full cascade stalls this kernel
            yield env.timeout(block)
            yield self.casc[pos + 1].put(done)
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
            prev_done = yield self.casc[self.k].get()
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
        g, sim, tp = self.sim.g, self.sim, self.tp
        room = simpy.Container(sim.env, capacity=max(READ_AHEAD_BYTES, g.a_bytes),
                               init=max(READ_AHEAD_BYTES, g.a_bytes))
        link = self.links[tp.o_plio]
        master = self._master(tp.o_plio)
        for grp, _ in self.tiles:
            yield self.o.full.get()
            yield from link.move(tp.bytes["o"][0], sim.handoff)
            yield self.o.free.put(1)
            yield room.get(g.a_bytes)  # posted writes, up to the adapter's buffer outstanding
            sim.env.process(self._write(room, grp, master))

    def _write(self, room: simpy.Container, grp: int, master: str):
        g, sim = self.sim.g, self.sim
        yield from sim.ddr.move(g.a_bytes, master, write=True)
        yield room.put(g.a_bytes)
        self.left[grp] -= 1
        if self.on_done is not None and not self.left[grp]:
            self.on_done(grp)
        self.done += 1
        sim.tiles_done += 1
        sim.last = sim.env.now


def plio_rates(topo: gt.Topology, f_aie: float) -> dict[str, float]:
    """Bytes/s of every PLIO of ``topo``: its PL side (``bits / 8`` a PL cycle) or the AIE stream it enters
    (:data:`.engine.AIE_STREAM_BYTES` an AIE cycle), the slower; scaled down where the PLIOs of one interface column
    and direction ask for more 64-bit streams than it has (:data:`COLUMN_STREAMS`; they share them evenly)."""
    demand: dict[tuple[int | None, str], int] = {}
    for p in topo.plios.values():
        demand[(p.column, p.direction)] = demand.get((p.column, p.direction), 0) + max(1, p.bits // 64)
    rates = {}
    for name, p in topo.plios.items():
        base = min(p.bits / 8 * p.mhz * 1e6, engine.AIE_STREAM_BYTES * f_aie)
        rates[name] = base * min(1.0, COLUMN_STREAMS[p.direction] / demand[(p.column, p.direction)])
    return rates


def tile_bds(topo: gt.Topology) -> dict[tuple[int, int], int]:
    """Buffer descriptors each AIE tile's DMA needs: one per half of every DMA-served buffer in the tile's memory
    (the kernel's own tile: the graph pins them there)."""
    bds: dict[tuple[int, int], int] = {}
    for b in topo.buffers.values():
        tile = topo.kernels[b.kernel].tile
        if tile is None:
            raise gt.TopologyError(f"generated graph: kernel {b.kernel} has no tile (adf::location<adf::kernel>)")
        bds[tile] = bds.get(tile, 0) + b.halves
    return bds


class GraphSim:
    def __init__(self, g: Geometry, ddr_rate: float | None, env: simpy.Environment | None = None,
                 topo: gt.Topology | None = None) -> None:
        self.g = g
        self.env = env or simpy.Environment()
        self.topo = topo if topo is not None else gt.from_design(geometry_design(g), "vck5000", g.keys, drc=False)
        self.pipes = gt.pipelines(self.topo)
        if len(self.pipes) != g.pipelines:
            raise gt.TopologyError(f"generated graph: {len(self.pipes)} pipelines, the design {g.pipelines}")
        self.bds = tile_bds(self.topo)
        worst = max(self.bds, key=self.bds.get)
        if self.bds[worst] > BDS_PER_TILE:
            raise gt.TopologyError(f"generated graph: tile {worst} needs {self.bds[worst]} buffer descriptors, a "
                                   f"tile DMA has {BDS_PER_TILE} (AM009 'Memory Module')")
        self.rates = plio_rates(self.topo, g.f_aie)
        self.ddr: DdrBank | _NoDdr = DdrBank(self.env, ddr_rate) if ddr_rate else _NoDdr(self.env)
        self.on_ddr = bool(ddr_rate)
        #: one buffer's DMA hand-off on its stream (seconds): lock release + buffer-descriptor switch
        self.handoff = calibration.param("sync_cycles_per_port") / g.f_aie
        # from a packet's first beat out of its s buffer to its P's last beat in the p buffer, beyond its occupancy
        self.channel_latency = timing.ENGINE_OUT_DELAY / g.f_pl
        self.tiles_done = 0
        self.last = 0.0
        self.steps = 0

    def master(self, plio: str) -> str:
        """The DDR master (mover compute unit) at ``plio``'s PL end (manifest connectivity)."""
        m = self.topo.movers.get(plio)
        if m is None and self.on_ddr:
            raise gt.TopologyError(f"generated manifest: no mover at {plio}'s PL end (connectivity)")
        return m or plio

    def packet_seconds(self, tp: gt.Pipeline, j: int, sharing: int) -> float:
        """Seconds slice ``j``'s packet holds its score channel: SwiftMax: the slowest of its s buffer over the
        s_out PLIO, the PL's slots and its P over the p_in PLIO; a row-assembling normalizer: the tile's channel
        time (:func:`.engine.tile_costs`) over the ``sharing`` slices of the channel; plus one DMA hand-off."""
        g = self.g
        if g.normalizer == "swiftmax":
            slots = timing.engine_packet_slots(g.q_rows * g.sk, g.lanes) / g.f_pl
            t = max(tp.bytes["s"][j] / self.rates[tp.channel[j]], slots, tp.bytes["p"][j] / self.rates[tp.p_plio[j]])
        else:
            t = engine.tile_costs(g, 0).channel / sharing
        return t + self.handoff


def geometry_design(g: Geometry) -> Any:
    """The engine design point whose generated graph runs geometry ``g`` (the sublayer's attention pipelines): its
    pipelines, kernels, score channels, tile and keys; the graph is the same whichever normalizer the channels run
    (the channel's cost comes from ``g.normalizer``), so it is written with SwiftMax lanes only."""
    from vckattn.hw.perf.model import Design

    return Design(pipelines=g.pipelines, qk_kernels=g.k, pv_kernels=g.k, q_rows=g.q_rows, score_bits=g.score_bits,
                  score_plios=g.m, lanes_swiftmax=max(1, min(g.lanes, 128 // g.score_bits)), lanes_online_softmax=0,
                  pl_clock_mhz=g.f_pl / 1e6, max_seq=g.keys,
                  head_dim=g.d)


def simulate(w: Any, d: Any, dev: Any, normalizer: str = "swiftmax", topo: gt.Topology | None = None,
             drc: bool = True) -> SimResult:
    """Simulate one layer of workload ``w`` on engine design ``d`` (module docstring): the graph the generator
    writes for ``d`` on ``dev``'s board (``topo``: an already parsed build folder, :func:`.graph_topology.parse`;
    ``drc=False``: the graph of a design the design-rule check refuses, to study it).
    Raises :class:`Deadlock` when the graph stops before every tile is done, ValueError for a workload the design
    cannot run, :class:`vckattn.hw.design.render.GenerateError` (a UserError) for a design the generator refuses,
    :class:`~.graph_topology.TopologyError` (a UserError) for a graph it cannot follow."""
    g = engine.geometry(w, d, dev, normalizer)
    if topo is None:
        topo = gt.from_design(d, dev.board, g.keys, drc)
    sim = GraphSim(g, None if w.operands == "on_chip" else dev.ddr_bytes_per_s, topo=topo)
    pipes = [PipelineSim(sim, p, groups) for p, groups in enumerate(engine.deal(g.groups, g.pipelines))]
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
        "ddr": sim.ddr.busy + sim.ddr.overhead,
        "q_in": max(p.links[p.tp.q_plio].busy for p in pipes),
        "kv_in": max(p.links[x].busy for p in pipes for x in (*p.tp.k_stream, *p.tp.v_stream)),
        "aie_qk": max(max(p.busy["aie_qk"]) for p in pipes),
        "pl_channel": max(max(p.busy["pl_channel"].values()) for p in pipes),
        "aie_pv": max(max(p.busy["aie_pv"]) for p in pipes),
        "aie_rq": max(p.busy["aie_rq"][0] for p in pipes),
        "o_out": max(p.links[p.tp.o_plio].busy for p in pipes),
    }
    graph = {"folder": "generated", "kernels": len(topo.kernels), "plios": len(topo.plios),
             "pktsplits": len(topo.splits), "pktmerges": len(topo.merges),
             "cascades": sum(1 for n in topo.nets if n.kind == "cascade"), "ddr_masters": len(topo.masters()),
             "max_bds_per_tile": max(sim.bds.values()), "handoff_seconds": sim.handoff,
             "ddr_turnarounds": sim.ddr.turnarounds, "ddr_turnaround_seconds": sim.ddr.turnaround_seconds,
             "ddr_row_conflict_seconds": sim.ddr.overhead - sim.ddr.turnaround_seconds,
             "ddr_max_masters_waiting": sim.ddr.max_masters}
    serial = d.host_launches_per_layer * dev.host_seconds_per_launch
    return SimResult(device_seconds=sim.last, seconds=sim.last + serial, busy=busy, tiles=sim.tiles_done,
                     events=sim.steps, design=d.to_json(), graph=graph)


def simulate_pl(w: Any, d: Any, dev: Any) -> int:
    """PL cycles of one layer with every score packet ready at once and every P sink ready (what the ``rtl``
    backend measures on the PL top in Verilator): the channels of the busiest pipeline, each serving its packets
    back to back at the PL top's slots, plus its output delay."""
    g = engine.geometry(w, d, dev, "swiftmax")
    env = simpy.Environment()
    slots = timing.engine_packet_slots(g.q_rows * g.sk, g.lanes)
    finish = []

    def channel(n_packets: int):
        res = simpy.Resource(env, capacity=1)
        for _ in range(n_packets):
            with res.request() as req:
                yield req
                yield env.timeout(slots)
        yield env.timeout(timing.ENGINE_OUT_DELAY)
        finish.append(env.now)

    for groups in engine.deal(g.groups, g.pipelines):
        for _c in range(g.m):
            env.process(channel(len(groups) * g.tiles_per_group * g.per_channel))
    env.run()
    return int(max(finish))


__all__ = ["BDS_PER_TILE", "COLUMN_STREAMS", "DdrBank", "Deadlock", "GraphSim", "Link", "PingPong", "PipelineSim",
           "SimResult", "ddr_chunks", "headline", "plio_rates", "simulate", "simulate_pl", "tile_bds"]

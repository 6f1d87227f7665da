"""Discrete-event simulation of the whole encoder sublayer on the card (SimPy): MODELED, not measured.

The full description: ``docs/internals/hw.md``, section ``hw/design/simulate_sublayer.py``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import simpy

from vckattn.hw.design import graph_topology as gt
from vckattn.hw.design.simulate import (
    DdrBank,
    Deadlock,
    GraphSim,
    Link,
    PingPong,
    PipelineSim,
    ddr_chunks,
    plio_rates,
)
from vckattn.hw.perf import banks, engine, gemm_proj, sublayer
from vckattn.hw.perf.sublayer import BANK_BYTES_PER_S, DEVICE, SEQUENCE_SLOTS, SublayerShape, SublayerSplit
from vckattn.hw.spec.gemm import BEAT_BYTES

__all__ = ["BANK_BYTES_PER_S", "QkvBanks", "SublayerSimResult", "simulate_sublayer", "sublayer_topology"]



@dataclass
class SublayerSimResult:
    """One simulated launch: seconds, when each stage finished each sequence, the busiest instance's busy seconds
    per stage, the DDR bank's busy seconds, events."""

    seconds: float
    sequence_ready: dict[str, list[float]]
    busy: dict[str, float]
    events: int

    def to_json(self) -> dict[str, Any]:
        return {"modeled": True, "simulated": True, "seconds": self.seconds, "sequence_ready": self.sequence_ready,
                "busy_seconds": self.busy, "events": self.events}


#: bytes a reader takes from a bank in one turn of the simulation's round robin (the built arbiter turns every beat;
#: 16 beats keep the events few and a waiting reader's delay short)
BANK_TURN_BYTES = 256


class QkvBanks:
    """The Q/K/V buffer's banks as the attention pipelines' q, k and v readers share them (``hw/perf/sublayer.py:
    qkv_buffer``, :data:`~vckattn.hw.perf.banks.BANK_BEATS` beats a bank): each bank's read port moves one 128-bit
    beat a PL cycle for one reader at a time (its round-robin arbiter, here a chunk at a time: a reader waits while
    another's chunk streams); a reader's chunk of a group's Q tile, K or V slice goes through the bank that holds
    that head of that sequence's slot, and its beats stream out as they are read (a beat's latency, not the
    chunk's). Stands where the engine's movers read DDR (the pipelines' ``ddr``): ``move(nbytes, master, group=...,
    plio=...)``, ``plio`` the reader's PLIO. Busy seconds per bank (``busy_max``: the busiest)."""

    def __init__(self, env: simpy.Environment, s: SublayerShape, sp: SublayerSplit, pipes: list[gt.Pipeline],
                 rate: float) -> None:
        self.env, self.s = env, s
        self.layout = sublayer.qkv_layout(s, sp)
        self.kind = {}
        for tp in pipes:
            self.kind[tp.q_plio] = "q"
            self.kind |= dict.fromkeys(tp.k_stream, "k") | dict.fromkeys(tp.v_stream, "v")
        self.banks: dict[int, Link] = {}
        self.rate = rate

    def bank(self, plio: str, group: int) -> int:
        """The bank a reader at ``plio`` reads group ``group``'s run from."""
        b, h = divmod(group, self.s.heads)
        return self.layout.head_block(self.kind[plio], b, h) // banks.BANK_BEATS

    def move(self, nbytes: float, master: str = "", write: bool = False, group: int | None = None,
             plio: str = ""):
        if write or plio not in self.kind:  # A out: into the A buffer (its banks not modeled)
            yield self.env.timeout(0)
            return
        k = self.bank(plio, group if group is not None else 0)
        if k not in self.banks:
            self.banks[k] = Link(self.env, self.rate, f"qkv_bank{k}")
        bank = self.banks[k]
        # the bank's turns, a burst of BANK_TURN_BYTES at a time (the arbiter's round robin, coarser); the reader's
        # beats stream out as they are read, so it waits for its last burst's turn only, not for the burst itself
        left = nbytes
        while left > 0:
            piece = min(left, BANK_TURN_BYTES)
            req = bank.res.request()
            yield req
            left -= piece
            if left > 0:
                yield from self._hold(bank, req, piece / self.rate)
            else:
                self.env.process(self._hold(bank, req, piece / self.rate))
        yield self.env.timeout(BEAT_BYTES / self.rate)

    def _hold(self, bank: Link, req: Any, seconds: float):
        bank.busy += seconds
        yield self.env.timeout(seconds)
        bank.res.release(req)

    @property
    def busy_max(self) -> float:
        return max((b.busy for b in self.banks.values()), default=0.0)


class _Graph:
    """The processes of one launch (module docstring)."""

    def __init__(self, s: SublayerShape, sp: SublayerSplit, topo: gt.Topology, bank_rate: float) -> None:
        self.s, self.sp, self.topo = s, sp, topo
        self.bank_rate = bank_rate
        self.env = env = simpy.Environment()
        self.ddr = DdrBank(env, DEVICE["ddr_bytes_per_s"])
        self.weight_mover = simpy.Resource(env, capacity=1)
        self.rates = plio_rates(topo, DEVICE["aie_clock_hz"])
        self.links: dict[str, Link] = {}
        parsed = gt.cascades(topo)
        b = s.batch
        self.x_ready = [env.event() for _ in range(b)]
        self.order = (("site",) if s.decoder else ()) + ("qkv", "attention", "o")
        self.done = {k: [env.event() for _ in range(b)] for k in self.order}
        self.ready_at: dict[str, list[float]] = {k: [0.0] * b for k in self.done}
        self.busy: dict[str, float] = dict.fromkeys(self.order, 0.0)
        self.last = 0.0
        self.prefetched = env.event()
        self._w_link_bytes: dict[Link, int] = {}
        env.process(self.x_mover())
        if s.decoder:
            env.process(self.site())
        first: list[tuple[Link, int, _Cascade]] = []
        left_q = self._stage("qkv", [c for c in parsed if c.stage == "qkv"], sp.qkv_tile, s.qkv_cols, 8, first)
        left_o = self._stage("o", [c for c in parsed if c.stage == "o"], sp.o_tile, s.d_model, 32, first)
        self.left = {"qkv": left_q, "o": left_o}
        links = list(dict.fromkeys(link for link, _, _ in first))
        self._prefetching = len(links)
        for link in links:
            env.process(self.prefetch(link, [(n, ev) for w, n, ev in first if w is link]))
        self._attention()

    # ---- helpers
    def _gate(self, stage: str, b: int) -> simpy.Event:
        """When ``stage`` may start sequence ``b``: the stage before has finished it (X for the first stage) and
        the stage after has freed the slot of ``b - SEQUENCE_SLOTS``."""
        i = self.order.index(stage)
        before = (self.x_ready if i == 0 else self.done[self.order[i - 1]])[b]
        after = self.order[i + 1] if i + 1 < len(self.order) else None
        if after is None or b < SEQUENCE_SLOTS:
            return before
        return self.env.all_of([before, self.done[after][b - SEQUENCE_SLOTS]])

    def site(self):
        """The decoder's BHyT site A units: U of each sequence from its X, one sequence after the other, into the U
        slots (:func:`.sublayer.site_seconds` a sequence)."""
        t = sublayer.site_seconds(self.s, self.sp)
        for b in range(self.s.batch):
            yield self._gate("site", b)
            yield self.env.timeout(t)
            self.busy["site"] += t
            self._finish("site", b)

    def _finish(self, stage: str, b: int) -> None:
        self.ready_at[stage][b] = self.env.now
        self.done[stage][b].succeed()

    def _read(self, nbytes: int, master: str, write: bool = False):
        """``nbytes`` through the DDR bank in chunks, for ``master`` (a mover), reads or writes."""
        for c in ddr_chunks(nbytes):
            yield from self.ddr.move(c, master, write)

    # ---- DDR movers
    def x_mover(self):
        """X sequence by sequence; held in :data:`SEQUENCE_SLOTS` slots when not all of it stays on chip (a slot
        is free once the Q/K/V cascades are done with its sequence)."""
        s = self.s
        for b in range(s.batch):
            if not self.sp.x_on_chip and b >= SEQUENCE_SLOTS:
                yield self.done[self.order[0]][b - SEQUENCE_SLOTS]
            yield from self._read(s.seq * s.d_model, "x_mm2s")
            self.x_ready[b].succeed()

    def prefetch(self, link: Link, first: list[tuple[int, _Cascade]]):
        """The next sublayer's first weight block of every cascade a w PLIO serves, once all of this sublayer's X
        is in and the cascade's last block of this one is in (a w half free): each from DDR through the one weight
        mover, then through the w PLIO (``first``: the blocks' DDR bytes and their cascades; the PLIO carries every
        kernel's slice with its header)."""
        yield self.x_ready[-1]
        for nbytes, cascade in first:
            yield cascade.reloaded
            yield cascade.w.free.get(1)
            with self.weight_mover.request() as req:
                yield req
                yield from self._read(nbytes, "w_mm2s")
            yield from link.move(self._w_link_bytes[link])
        self._prefetching -= 1
        if not self._prefetching:
            self.prefetched.succeed(self.env.now)

    # ---- a projection stage
    def _link(self, plio: str) -> Link:
        """The one link of PLIO ``plio`` (shared by every cascade the graph connects to it), at its rate."""
        if plio not in self.links:
            self.links[plio] = Link(self.env, self.rates[plio], plio)
        return self.links[plio]

    def _stage(self, name: str, parsed: list[gt.Cascade], tile: tuple[int, int, int], out_cols: int,
               out_bits: int, first: list[tuple[Link, int, _Cascade]]) -> list[int]:
        """The cascades of stage ``name`` as the graph has them (``parsed``): their x broadcasts, w and out PLIOs
        and buffer sizes; their work dealt as the closed form deals it; their kernels' cycles from the GEMM build
        ``tile`` (rows, cols, kslice: the cascade's length ``d_model / kslice``), each kernel on the K-slice its x
        window in the graph holds."""
        s = self.s
        rows, cols, kslice = tile
        k = s.d_model // kslice
        if not parsed or any(len(c.kernels) != k for c in parsed):
            raise gt.TopologyError(f"generated graph: the {name} stage has {len(parsed)} cascades, not cascades of "
                                   f"{k} kernels")
        slices = [(x - BEAT_BYTES) // rows for x in parsed[0].bytes["x"]]
        if sum(slices) != s.d_model or any(pc.bytes["x"] != parsed[0].bytes["x"] for pc in parsed):
            raise gt.TopologyError(f"generated graph: the {name} stage's x windows ({parsed[0].bytes['x']} bytes) "
                                   f"are not K-slices of {rows} rows over {s.d_model} features alike on every "
                                   "cascade")
        dealt = sublayer.deal_projection(out_cols // cols, s.batch, len(parsed))
        left = [0] * s.batch
        for units in dealt:
            for _, b in units:
                left[b] += 1
        compute = max(gemm_proj.invocation_cycles(gemm_proj.variant(j, k), rows, cols, slices[j], out_bits)["total"]
                      for j in range(k)) / DEVICE["aie_clock_hz"]
        tiles = -(-s.seq // rows)
        cascades = {}
        for pc, units in zip(parsed, dealt, strict=True):
            if not units:
                continue
            w_link = self._link(pc.w_plio)
            self._w_link_bytes[w_link] = sum(pc.bytes["w"])  # a block: every kernel's slice, header and lanes
            cascades[pc.index] = _Cascade(self, name, pc.index, units, rows, cols, kslice, out_bits, compute, tiles,
                                          w_link, self._link(pc.out_plio), pc.bytes["out"][0])
        first += [(c.w_link, cols * s.d_model, c) for c in cascades.values()]
        groups: dict[str, list[_Cascade]] = {}
        for pc in parsed:
            if pc.index in cascades:
                groups.setdefault(pc.x_plios[0], []).append(cascades[pc.index])
        for plio, group in groups.items():
            if any([b for _, b in c.units] != [b for _, b in group[0].units] for c in group):
                raise gt.TopologyError(f"generated graph: {plio} broadcasts X to {name} cascades that the dealing "
                                       "gives different sequences")
            pc = next(pc for pc in parsed if pc.x_plios[0] == plio)
            # the K-slice streams run in parallel: the slowest (its window over its PLIO's rate) stands for them
            j = max(range(k), key=lambda j: pc.bytes["x"][j] / self.rates[pc.x_plios[j]])
            self.env.process(self.x_in(name, group, self._link(pc.x_plios[j]), pc.bytes["x"][j], tiles))
        return left

    def x_in(self, stage: str, group: list[_Cascade], link: Link, nbytes: int, tiles: int):
        """A broadcast group's x streams (one a K-slice, in parallel: the slowest's link stands for them): each tile
        (``nbytes`` with its header) once, into every cascade's x buffer when all of them have a free half."""
        for _, b in group[0].units:
            yield self._gate(stage, b)
            for _ in range(tiles):
                yield self.env.all_of([c.x.free.get(1) for c in group])
                yield from link.move(nbytes)
                for c in group:
                    yield c.x.full.put(1)

    # ---- the attention pipelines
    def _attention(self) -> None:
        s, sp = self.s, self.sp
        g = sublayer.attention_geometry(s, sp)
        on_chip = GraphSim(g, None, env=self.env, topo=self.topo)  # Q/K/V in and A out: the PL's buffers, no DDR
        # the q, k and v readers take turns at the Q/K/V buffer's banks (one beat a PL cycle each)
        self.qkv_banks = on_chip.ddr = QkvBanks(self.env, s, sp, on_chip.pipes, self.bank_rate)
        self._att_sim = on_chip
        left = [s.heads] * s.batch
        gates: dict[int, simpy.Event] = {}

        def ready(grp: int) -> simpy.Event:
            b = grp // s.heads
            if b not in gates:
                gates[b] = self._gate("attention", b)
            return gates[b]

        def on_done(grp: int) -> None:
            b = grp // s.heads
            left[b] -= 1
            if not left[b]:
                self._finish("attention", b)

        self.pipes = [PipelineSim(on_chip, p, groups, ready, on_done)
                      for p, groups in enumerate(engine.deal(g.groups, g.pipelines))]


class _Cascade:
    """One projection cascade's processes: x in, w switches, compute, out (module docstring)."""

    def __init__(self, graph: _Graph, stage: str, index: int, units: list[tuple[int, int]], rows: int, cols: int,
                 kslice: int, out_bits: int, compute: float, tiles: int, w_link: Link, out_link: Link,
                 out_window: int) -> None:
        self.g, self.stage, self.index, self.units = graph, stage, index, units
        env = graph.env
        self.rows, self.cols, self.kslice, self.out_bits = rows, cols, kslice, out_bits
        self.compute_s, self.tiles = compute, tiles
        self.x = PingPong(env)
        self.out = PingPong(env)
        self.w = PingPong(env)
        self.w.free = simpy.Container(env, capacity=engine.BUFFER_HALVES, init=engine.BUFFER_HALVES - 1)
        self.w.full.put(units[0][0])  # the first block: prefetched
        self.w_link, self.out_link = w_link, out_link  # shared with the other cascades of their groups
        self.out_window = out_window  # one output buffer half, header included (the graph's)
        self.busy = 0.0
        self.reloaded = env.event()
        for proc in (self.w_in(), self.run(), self.drain()):
            env.process(proc)

    def w_in(self):
        """The blocks after the first, each when the cascade switches to it: DDR (the weight mover), then the w
        stream into the free half."""
        g = self.g
        switches = [blk for i, (blk, _) in enumerate(self.units) if i and self.units[i - 1][0] != blk]
        for blk in switches:
            yield self.w.free.get(1)
            with g.weight_mover.request() as req:
                yield req
                yield from g._read(self.cols * g.s.d_model, "w_mm2s")
            yield from self.w_link.move(g._w_link_bytes[self.w_link])
            yield self.w.full.put(blk)
        self.reloaded.succeed()

    def run(self):
        env = self.g.env
        held = None
        for blk, _ in self.units:
            if blk != held:
                if held is not None:
                    yield self.w.free.put(1)
                held = yield self.w.full.get()
            for _ in range(self.tiles):
                yield self.x.full.get()
                yield self.out.free.get(1)
                yield env.timeout(self.compute_s)
                self.busy += self.compute_s
                self.g.busy[self.stage] = max(self.g.busy[self.stage], self.busy)
                yield self.x.free.put(1)
                yield self.out.full.put(1)

    def drain(self):
        g, env = self.g, self.g.env
        room = simpy.Container(env, capacity=4096, init=4096)  # the output mover's posted writes in flight
        for _, b in self.units:
            for r in range(self.tiles):
                yield self.out.full.get()
                yield from self.out_link.move(self.out_window)
                yield self.out.free.put(1)
                if self.stage == "o":  # the int8 output rows of this tile (+ the residual, requantized in the PL)
                    nbytes = self.rows * self.cols
                    yield room.get(min(nbytes, room.capacity))
                    env.process(self._write(room, nbytes))
                if r == self.tiles - 1:
                    g.left[self.stage][b] -= 1
                    if not g.left[self.stage][b]:
                        g._finish(self.stage, b)

    def _write(self, room: simpy.Container, nbytes: int):
        g = self.g
        if not g.sp.x_on_chip:  # the residual's X rows, read again
            yield from g._read(nbytes, "residual_mm2s")
        yield from g._read(nbytes, "out_s2mm", write=True)
        yield room.put(min(nbytes, room.capacity))
        g.last = max(g.last, g.env.now)


def sublayer_topology(s: SublayerShape, sp: SublayerSplit) -> gt.Topology:
    """The graph the generator writes for split ``sp`` of ``s`` (:func:`.sublayer_build.graph_build`: the attention
    pipelines and the projection stages), parsed back."""
    from vckattn.hw.design.sublayer_build import graph_build

    b = graph_build("simulated", s, asdict(sp))
    return gt.from_sublayer(json.dumps(b.engine, sort_keys=True), tuple(b.gemm_stages()), "vck5000", b.max_seq)


def simulate_sublayer(s: SublayerShape, sp: SublayerSplit, topo: gt.Topology | None = None,
                      bank_rate: float = BANK_BYTES_PER_S) -> SublayerSimResult:
    """Simulate one launch of the sublayer ``s`` on split ``sp`` (module docstring) on the graph the generator
    writes for it (:func:`sublayer_topology`; ``topo``: that graph already parsed, or one edited; ``bank_rate``: a
    Q/K/V bank's read port, bytes a second, :data:`BANK_BYTES_PER_S`). Raises
    :class:`Deadlock` when the graph stops before every sequence is through, ValueError for a split the model
    refuses, :class:`~.graph_topology.TopologyError` for a graph it cannot follow."""
    sublayer.split_cost(s, sp)  # the same validation as the closed form
    graph = _Graph(s, sp, topo if topo is not None else sublayer_topology(s, sp), bank_rate)
    steps = 0
    while True:
        try:
            graph.env.step()
        except simpy.core.EmptySchedule:
            break
        steps += 1
    stuck = [k for k, evs in graph.done.items() if not all(e.triggered for e in evs)]
    if stuck or not graph.prefetched.triggered:
        raise Deadlock(f"the simulated sublayer stops with stages {', '.join(stuck) or 'none'} unfinished")
    busy = dict(graph.busy)
    busy["attention"] = max(max(max(p.busy["aie_qk"]), max(p.busy["aie_pv"]), max(p.busy["pl_channel"].values()))
                            for p in graph.pipes)
    busy["ddr"] = graph.ddr.busy + graph.ddr.overhead
    busy["qkv_bank"] = graph.qkv_banks.busy_max
    return SublayerSimResult(seconds=max(graph.last, graph.prefetched.value), sequence_ready=graph.ready_at,
                             busy=busy, events=steps)

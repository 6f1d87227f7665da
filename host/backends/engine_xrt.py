"""``xrt`` for engine builds: one launch per layer on a VCK5000 through XRT 2022.2 (pyxrt and the C++ shim).

What runs where (stream contract v3, ``hw/ENGINE.md``; the kernels as ``hw/engine/generate.py`` declares them in the
manifest and ``system.cfg``):

* **pyxrt**: the card, the xclbin (UUID and kernel names checked against the manifest before it is loaded,
  :func:`.xrt.open_card`), one ``pyxrt.kernel`` per mover compute unit (``mm2s_engine:{mm2s_engine_q_<i>}``,
  ``mm2s_engine:{mm2s_engine_kv_<i>}``, ``s2mm_engine:{s2mm_engine_<i>}``; which unit feeds which pipeline is read
  from the manifest's ``connectivity``), the buffers and the movers' runs;
* **the C++ shim** (:mod:`.xrt_graph`): the PL top ``engine_pl``'s AXI4-Lite registers (``xrt::ip``: its ``ID``
  checked at :meth:`EngineXrtDevice.open`; the layer's SwiftMax constants written by :func:`vckattn.hw.driver.program`
  and read back exactly) and the AIE graph (``xrt::graph``: ``run(iterations)``, ``wait(timeout)``).

Buffers (card memory, each allocated in ``kernel.group_id`` of its first user): Q, K, V re-tiled by the host
(:func:`vckattn.host.engine.retile`; the q movers' ``src`` is Q, the kv movers' ``src`` K and ``src_v`` V; a q
mover's unused ``src_v`` is V, a buffer of that argument's memory), per mover its command list, the shared A
buffer (tile ``t`` in slot ``t``) and per pipeline its done log. Buffers are kept between launches and grown when a
launch needs more.

A launch: write the operands and command lists and zero the done logs (to the device), start the ``s2mm_engine``
units (the consumers), run the graph, start the kv movers then the q movers (``mm2s_engine(cmds, n_cmds, src, src_v,
kv, payload_bytes)``; ``s2mm_engine(a_out, done, n_records, n_slots, pipeline)``), wait for every run and the graph
with the device's time-out, sync the A buffer and the done logs back. The done logs are checked against what a
correct launch leaves (:func:`vckattn.host.engine.check_done`: every tile back once, from the pipeline it was sent
to) and the A buffer is the head outputs, decoded as on every engine backend.

Iterations: ``graph.run(n)`` runs every AIE kernel ``n`` times, one tile each, and the graph has one iteration count
for all its pipelines. Whole (batch, head) groups are dealt to pipelines round-robin, so pipelines can get different
tile counts (12 heads on 24 pipelines: one group or none). Every pipeline is therefore given ``n`` = the largest
count: a pipeline short of it also runs groups of pipeline 0 again (:func:`balanced_lists`; the same tiles, so the
same A bytes into the same slots), and their records, after its own in its done log, are checked and dropped.

Not read: the movers' return values (``mm2s_engine``: descriptors sent; ``s2mm_engine``: a status); pyxrt 2022.2
returns no kernel return value. A mover that stops early leaves records missing, which the done-log check names.

Failures: XRT, the shim, ``g++`` or the card missing are :class:`~vckattn.golden.errors.ToolMissing` (exit status 6);
everything the card does wrong (no card at the index, wrong xclbin, an ID or read-back mismatch, a failed or timed-out
run, a wrong done log) is :class:`~vckattn.host.backends.base.DeviceError` (7), one line each.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.host.backends import hwio
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.engine import EngineDevice
from vckattn.host.backends.xrt import PENDING, import_pyxrt, open_card, reason
from vckattn.host.engine import Commands, Launch
from vckattn.hw import driver
from vckattn.hw.driver import IpPort
from vckattn.hw.engine import streams
from vckattn.hw.engine.layout import plio_name
from vckattn.hw.manifest import BITSTREAMS, Manifest

AIE = "ai_engine_0"
MM2S, S2MM = "mm2s_engine", "s2mm_engine"


@dataclass(frozen=True)
class Pipeline:
    """The compute units of one pipeline: its q mover, kv mover and output mover."""

    index: int
    q: str
    kv: str
    out: str


def pipelines_of(manifest: Manifest, pipelines: int) -> list[Pipeline]:
    """Each pipeline's mover compute units, from the manifest's ``connectivity`` (``<cu>.out`` ->
    ``ai_engine_0.p<i>_q_in`` / ``p<i>_kv_in``, ``ai_engine_0.p<i>_o_out`` -> ``<cu>.a_in``); DeviceError naming
    a missing or doubled link."""
    links = [(ln["from"], ln["to"]) for ln in manifest.data.get("connectivity", [])]

    def unit(end: str, into: bool) -> str:
        hits = [(a if into else b).split(".")[0] for a, b in links if (b if into else a) == end]
        if len(hits) != 1:
            raise DeviceError(f"{manifest.file}: connectivity: {'no' if not hits else 'several'} compute unit(s) "
                              f"{'feed' if into else 'read'} {end}")
        return hits[0]

    return [Pipeline(i, unit(f"{AIE}.{plio_name(i, 'q_in')}", True), unit(f"{AIE}.{plio_name(i, 'kv_in')}", True),
                     unit(f"{AIE}.{plio_name(i, 'o_out')}", False)) for i in range(pipelines)]


@dataclass
class Balanced:
    """One pipeline's command lists as sent, with its filler (groups of pipeline 0 run again)."""

    q: np.ndarray  # (n, CMD_BYTES) uint8
    kv: np.ndarray  # (m, CMD_BYTES) uint8
    own: int  # the pipeline's own tiles (its first records)
    filler_done: np.ndarray  # (n - own, 16) uint8: the records its filler tiles must leave


def balanced_lists(cmds: Commands) -> list[Balanced]:
    """Every pipeline's command lists padded to the largest tile count with whole groups of pipeline 0 (module
    docstring), and the done records those filler tiles must leave (pipeline 0's records with this pipeline's index).
    Pipeline 0 has the most groups (round-robin from it)."""
    p = cmds.params
    t, per_group_kv = cmds.t_per, 2 * p.kernels
    n = max(len(x) for x in cmds.tiles)
    g0 = len(cmds.tiles[0]) // t if t else 0
    done0 = cmds.done_expected[int(cmds.done_start[0]):int(cmds.done_start[0]) + len(cmds.tiles[0])]
    out = []
    for i in range(p.pipelines):
        own = len(cmds.tiles[i])
        short = (n - own) // t if t else 0
        groups = [j % g0 for j in range(short)] if g0 else []
        q = [cmds.q[i]] + [cmds.q[0][g * t:(g + 1) * t] for g in groups]
        kv = [cmds.kv[i]] + [cmds.kv[0][g * per_group_kv:(g + 1) * per_group_kv] for g in groups]
        fill = np.concatenate([done0[g * t:(g + 1) * t] for g in groups]) if groups else \
            np.zeros((0, streams.BEAT_BYTES), np.uint8)
        fill = fill.copy()
        if len(fill):
            streams.patch_many("result", fill, "pipeline", i)
        out.append(Balanced(np.concatenate(q), np.concatenate(kv), own, fill))
    return out


class EngineXrtDevice(EngineDevice):
    name = "xrt"
    where = "hardware: VCK5000 through XRT (pyxrt and the graph shim): the engine's movers, PL top and AIE graph"

    def __init__(self, manifest: Manifest, seed: int = 0, xclbin: Path | None = None, device_index: int = 0,
                 timeout_ms: int | None = None, **options: Any) -> None:
        super().__init__(manifest, seed, **options)
        default = BITSTREAMS / str(manifest.data.get("xclbin", {}).get("file", f"{manifest.name}.xclbin"))
        self.xclbin = Path(xclbin) if xclbin is not None else default
        self.device_index = int(device_index)
        self.timeout_ms = int(timeout_ms if timeout_ms is not None else manifest.data.get("timeout_ms", 10_000))
        self.pipes = pipelines_of(manifest, self.params.pipelines)
        self.pl_top = manifest.normalizer_kernel("swiftmax")["name"]
        self.graph_name = str(manifest.data.get("graph", {}).get("name", ""))
        self.uuid: str | None = None
        self.kernels_checked: list[dict[str, Any]] = []
        self.written: list[Any] = []
        self._pyxrt: Any = None
        self._dev: Any = None
        self._units: dict[str, Any] = {}  # compute unit -> pyxrt.kernel
        self._ip: Any = None
        self._graph: Any = None
        self._graph_ran = False
        self._graph_idle = True
        self._bufs: dict[str, tuple[Any, int]] = {}  # name -> (bo, bytes)
        self._runs: dict[str, Any] = {}

    # ------------------------------------------------------------------------------ open / close

    def open(self) -> None:
        """Load the xclbin (checked against the manifest), open every mover unit, ``engine_pl`` (ID checked) and the
        AIE graph; on any failure release what was opened, then re-raise."""
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        m = self.manifest
        pyxrt = self._pyxrt = import_pyxrt()
        self._dev, xuuid, self.uuid = open_card(pyxrt, m, self.xclbin, self.device_index)
        for kname in (MM2S, S2MM):
            for cu in m.kernel(kname).get("compute_units") or [kname]:
                try:
                    self._units[cu] = pyxrt.kernel(self._dev, xuuid, f"{kname}:{{{cu}}}")
                except Exception as exc:
                    raise DeviceError(f"kernel {kname} ({cu}): cannot open it on card {self.device_index}: "
                                      f"{reason(exc)}") from None
                self.kernels_checked.append({"name": cu, "kind": "hls", "kernel": kname})
        missing = [cu for p in self.pipes for cu in (p.q, p.kv, p.out) if cu not in self._units]
        if missing:
            raise DeviceError(f"{m.file}: connectivity names compute unit(s) {', '.join(missing)} that no kernel has")
        from vckattn.host.backends import xrt_graph

        shim = xrt_graph.load_shim()
        raw = uuidlib.UUID(self.uuid).bytes
        self._ip = shim.ip(self.device_index, raw, self.pl_top)
        try:
            got = driver.check_ident(IpPort(self._ip), m.regmap(self.pl_top), self.pl_top, str(m.file))
        except driver.RegisterError as exc:
            raise DeviceError(str(exc)) from None
        self.kernels_checked.append({"name": self.pl_top, "kind": "rtl", "id": f"{got:#010x}"})
        self._graph = shim.graph(self.device_index, raw, self.graph_name)
        self._graph_idle, self._graph_ran = True, False
        self.kernels_checked.append({"name": self.graph_name, "kind": "aie-graph"})

    def close(self) -> None:
        for r in self._runs.values():
            try:
                r.wait(1)
            except Exception:  # releasing
                pass
        self._runs = {}
        if self._graph is not None:
            try:
                if self._graph_ran and self._graph_idle:  # end() blocks until done: never on a hung graph
                    self._graph.end()
            except Exception:
                pass
            try:
                self._graph.close()
            except Exception:
                pass
            self._graph = None
        if self._ip is not None:
            try:
                self._ip.close()
            except Exception:
                pass
            self._ip = None
        self._bufs, self._units, self._dev = {}, {}, None

    # ------------------------------------------------------------------------------ registers

    def _port(self) -> IpPort:
        if self._ip is None:
            raise DeviceError(f"xrt backend: kernel {self.pl_top} is not open (use the device as a context manager)")
        return IpPort(self._ip)

    def configure(self, layer: QuantAttentionLayer) -> None:
        """Check the layer (:meth:`EngineDevice.configure`) and program ``engine_pl``'s SwiftMax registers (every
        writable register and memory entry; values checked before the first write)."""
        super().configure(layer)
        regmap = self.manifest.regmap(self.pl_top)
        try:
            self.written = driver.program(self._port(), regmap, hwio.normalizer_values(layer, regmap), self.pl_top)
        except driver.RegisterError as exc:
            raise DeviceError(f"{self.manifest.file}: {exc} (the golden swiftmax register set and this build's "
                              "register map differ)") from None

    def verify_registers(self) -> dict[str, int]:
        """Read back every register :meth:`configure` wrote, exactly; DeviceError naming every mismatch."""
        if not self.written:
            raise DeviceError("xrt backend: no registers written yet (configure a layer first)")
        try:
            return driver.verify(self._port(), self.written, self.pl_top)
        except driver.RegisterError as exc:
            raise DeviceError(str(exc)) from None

    # ------------------------------------------------------------------------------ buffers

    def _buffer(self, name: str, unit: str, port: str, nbytes: int) -> Any:
        """Buffer ``name`` of at least ``nbytes`` for argument ``port`` of compute unit ``unit`` (kept between
        launches; reallocated when too small)."""
        have = self._bufs.get(name)
        if have is not None and have[1] >= nbytes:
            return have[0]
        kname = MM2S if unit in (self.manifest.kernel(MM2S).get("compute_units") or []) else S2MM
        ports = [p["name"] for p in self.manifest.kernel(kname)["ports"]]
        try:
            group = self._units[unit].group_id(ports.index(port))
            bo = self._pyxrt.bo(self._dev, max(int(nbytes), 64), self._pyxrt.bo.flags.normal, group)
        except Exception as exc:
            raise DeviceError(f"cannot allocate the {name} buffer ({nbytes} bytes) on card {self.device_index}: "
                              f"{reason(exc)}") from None
        self._bufs[name] = (bo, max(int(nbytes), 64))
        return bo

    def _upload(self, bo: Any, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        bo.write(raw, 0)
        bo.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, raw.nbytes, 0)

    def _download(self, bo: Any, nbytes: int) -> np.ndarray:
        bo.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, nbytes, 0)
        return np.asarray(bo.read(nbytes, 0)).view(np.uint8).reshape(-1)[:nbytes].copy()

    # ------------------------------------------------------------------------------ a launch

    def _start(self, unit: str, values: dict[str, Any]) -> None:
        kname = MM2S if unit in (self.manifest.kernel(MM2S).get("compute_units") or []) else S2MM
        args = hwio.kernel_args(self.manifest.kernel(kname), values)
        try:
            self._runs[unit] = self._units[unit](*args)
        except Exception as exc:
            raise DeviceError(f"kernel {kname} ({unit}): cannot start launch {self.launches}: {reason(exc)}") from None

    def _wait(self, unit: str) -> None:
        run = self._runs.pop(unit)
        state = run.wait(self.timeout_ms)
        sname = str(getattr(state, "name", state))
        if sname == "ERT_CMD_STATE_COMPLETED":
            return
        if sname in PENDING:
            raise DeviceError(f"device timeout after {self.timeout_ms} ms in {unit} on launch {self.launches}")
        raise DeviceError(f"device error in {unit} on launch {self.launches}: run state {sname}")

    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        if self._dev is None or self._graph is None:
            raise DeviceError("xrt backend: the device is not open (use it as a context manager)")
        p, c = self.params, launch.cmds
        lists = balanced_lists(c)
        n = len(lists[0].q)
        first = self.pipes[0]
        q = self._buffer("q", first.q, "src", launch.q.nbytes)
        k = self._buffer("k", first.kv, "src", launch.k.nbytes)
        v = self._buffer("v", first.kv, "src_v", launch.v.nbytes)
        a_bytes = c.n_tiles * p.q_rows * p.d
        a = self._buffer("a", first.out, "a_out", a_bytes)
        for bo, arr in ((q, launch.q), (k, launch.k), (v, launch.v)):
            self._upload(bo, arr)
        done_bufs = []
        for pipe, bl in zip(self.pipes, lists, strict=True):
            for unit, rows in ((pipe.q, bl.q), (pipe.kv, bl.kv)):
                self._upload(self._buffer(f"cmds.{unit}", unit, "cmds", rows.nbytes), rows)
            d = self._buffer(f"done.{pipe.out}", pipe.out, "done", n * streams.BEAT_BYTES)
            self._upload(d, np.zeros(n * streams.BEAT_BYTES, np.uint8))  # no stale record can pass
            done_bufs.append(d)
        for pipe, d in zip(self.pipes, done_bufs, strict=True):  # consumers first
            self._start(pipe.out, {"a_out": a, "done": d, "n_records": n, "n_slots": c.n_tiles,
                                   "pipeline": pipe.index})
        self._graph_idle, self._graph_ran = False, True
        self._graph.run(n)
        for role in ("kv", "q"):
            for pipe, bl in zip(self.pipes, lists, strict=True):
                unit = getattr(pipe, role)
                rows = bl.kv if role == "kv" else bl.q
                src, src_v = (k, v) if role == "kv" else (q, v)  # a q mover never reads src_v
                self._start(unit, {"cmds": self._bufs[f"cmds.{unit}"][0], "n_cmds": len(rows), "src": src,
                                   "src_v": src_v, "kv": int(role == "kv"),
                                   "payload_bytes": (p.slice_keys if role == "kv" else p.q_rows) * p.d})
        for pipe in self.pipes:
            for unit in (pipe.out, pipe.kv, pipe.q):
                self._wait(unit)
        if not self._graph.wait(self.timeout_ms):
            raise DeviceError(f"device timeout after {self.timeout_ms} ms in the AIE graph {self.graph_name} on "
                              f"launch {self.launches}")
        self._graph_idle = True
        out = self._download(a, a_bytes).view(np.int8).reshape(c.n_tiles, p.q_rows, p.d)
        done = []
        for pipe, bl, d in zip(self.pipes, lists, done_bufs, strict=True):
            recs = self._download(d, n * streams.BEAT_BYTES).reshape(n, streams.BEAT_BYTES)
            blank = np.flatnonzero(~recs.any(axis=1))  # zeroed before the launch; a RESULT record has d = D > 0
            if blank.size:
                raise DeviceError(f"xrt launch {self.launches}: pipeline {pipe.index}: {pipe.out} wrote {blank[0]} "
                                  f"of {n} done records (record {blank[0]} never written: a mover stopped early or "
                                  "records were lost)")
            if recs[bl.own:].tobytes() != bl.filler_done.tobytes():
                bad = int(np.flatnonzero((recs[bl.own:] != bl.filler_done).any(axis=1))[0]) + bl.own
                raise DeviceError(f"xrt launch {self.launches}: pipeline {pipe.index}: done record {bad} (a repeated "
                                  f"group that balances the pipelines) is {streams.decode('result', recs[bad])}, "
                                  f"expected {streams.decode('result', bl.filler_done[bad - bl.own])}")
            done.append(recs[:bl.own])
        return out, np.concatenate(done)


__all__ = ["Balanced", "EngineXrtDevice", "Pipeline", "balanced_lists", "pipelines_of"]

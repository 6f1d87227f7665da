"""What the engine's hardware backends (``xrt`` on a VCK5000, ``pynq`` on a VCK190) share: the movers' compute units
per pipeline, the command lists as sent, the engine PL top's registers and one launch (stream contract v3,
``hw/ENGINE.md``; the kernels as ``hw/design/generate.py`` declares them in the manifest and ``system.cfg``).

The full description: ``docs/internals/host.md``, section ``host/backends/engine_hw.py``.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.host.backends import hwio
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.engine import EngineDevice, check_online_format
from vckattn.host.engine import Commands, Launch
from vckattn.hw.design.layout import plio_name
from vckattn.hw.design.manifest import BITSTREAMS, Manifest
from vckattn.hw.spec import driver, streams

AIE = "ai_engine_0"
MM2S, S2MM = "mm2s_engine", "s2mm_engine"


@dataclass(frozen=True)
class Pipeline:
    """The compute units of one pipeline: its q, k and v movers and its output mover."""

    index: int
    q: str
    k: str
    v: str
    out: str


def pipelines_of(manifest: Manifest, pipelines: int) -> list[Pipeline]:
    """Each pipeline's mover compute units, from the manifest's ``connectivity`` (``<cu>.out`` ->
    ``ai_engine_0.p<i>_q_in`` / ``p<i>_k_in`` / ``p<i>_v_in``, ``ai_engine_0.p<i>_o_out`` -> ``<cu>.a_in``);
    DeviceError naming
    a missing or doubled link."""
    links = [(ln["from"], ln["to"]) for ln in manifest.data.get("connectivity", [])]

    def unit(end: str, into: bool) -> str:
        hits = [(a if into else b).split(".")[0] for a, b in links if (b if into else a) == end]
        if len(hits) != 1:
            raise DeviceError(f"{manifest.file}: connectivity: {'no' if not hits else 'several'} compute unit(s) "
                              f"{'feed' if into else 'read'} {end}")
        return hits[0]

    return [Pipeline(i, *(unit(f"{AIE}.{plio_name(i, f'{s}_in')}", True) for s in ("q", "k", "v")),
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


def own_lists(cmds: Commands) -> list[Balanced]:
    """Every pipeline's own command lists, no filler (a free-running graph)."""
    empty = np.zeros((0, streams.BEAT_BYTES), np.uint8)
    return [Balanced(q, kv, len(q), empty) for q, kv in zip(cmds.q, cmds.kv, strict=True)]


class EngineCardDevice(EngineDevice):
    """An engine build on a card: the launch (module docstring) over the runtime's buffers, units and registers."""

    #: whether every pipeline must run the same tile count (a graph started for ``n`` iterations)
    balance = False

    def __init__(self, manifest: Manifest, seed: int = 0, xclbin: Path | None = None, timeout_ms: int | None = None,
                 **options: Any) -> None:
        super().__init__(manifest, seed, **options)
        default = BITSTREAMS / str(manifest.data.get("xclbin", {}).get("file", f"{manifest.name}.xclbin"))
        self.xclbin = Path(xclbin) if xclbin is not None else default
        self.timeout_ms = int(timeout_ms if timeout_ms is not None else manifest.data.get("timeout_ms", 10_000))
        self.pipes = pipelines_of(manifest, self.params.pipelines)
        self.pl_top = manifest.normalizer_kernel("swiftmax")["name"]
        self.kernels_checked: list[dict[str, Any]] = []
        self.written: list[Any] = []
        self._bufs: dict[str, tuple[Any, int]] = {}  # name -> (buffer, bytes)

    def open(self) -> None:
        """Load the bitstream, open every mover unit and the PL top (ID checked); on any failure release what was
        opened, then re-raise."""
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    @abstractmethod
    def _open(self) -> None: ...

    def kernel_of(self, unit: str) -> str:
        """The kernel (``mm2s_engine`` or ``s2mm_engine``) of compute unit ``unit``."""
        return MM2S if unit in (self.manifest.kernel(MM2S).get("compute_units") or [MM2S]) else S2MM

    def units(self) -> list[tuple[str, str]]:
        """``(kernel, compute unit)`` of every mover unit in the manifest."""
        return [(k, cu) for k in (MM2S, S2MM) for cu in self.manifest.kernel(k).get("compute_units") or [k]]

    # ------------------------------------------------------------------------------ registers

    @abstractmethod
    def _register_port(self) -> driver.RegisterPort:
        """The PL top's open AXI4-Lite port (DeviceError when it is not open)."""

    def _check_ident(self, port: driver.RegisterPort) -> int:
        try:
            return driver.check_ident(port, self.manifest.regmap(self.pl_top), self.pl_top, str(self.manifest.file))
        except driver.RegisterError as exc:
            raise DeviceError(str(exc)) from None

    def configure(self, layer: QuantAttentionLayer) -> None:
        """Check the layer (:meth:`EngineDevice.configure`) and program the PL top's SwiftMax registers (every
        writable register and memory entry; values checked before the first write)."""
        super().configure(layer)
        check_online_format(self, layer)
        regmap = self.manifest.regmap(self.pl_top)
        try:
            self.written = driver.program(self._register_port(), regmap, hwio.normalizer_values(layer, regmap),
                                          self.pl_top)
        except driver.RegisterError as exc:
            raise DeviceError(f"{self.manifest.file}: {exc} (the golden swiftmax register set and this build's "
                              "register map differ)") from None

    def verify_registers(self) -> dict[str, int]:
        """Read back every register :meth:`configure` wrote, exactly; DeviceError naming every mismatch."""
        if not self.written:
            raise DeviceError(f"{self.name} backend: no registers written yet (configure a layer first)")
        try:
            return driver.verify(self._register_port(), self.written, self.pl_top)
        except driver.RegisterError as exc:
            raise DeviceError(str(exc)) from None

    # ------------------------------------------------------------------------------ the runtime's side

    @abstractmethod
    def _is_open(self) -> bool: ...

    @abstractmethod
    def _alloc(self, name: str, unit: str, port: str, nbytes: int) -> Any:
        """A new device buffer of ``nbytes`` for argument ``port`` of compute unit ``unit``."""

    def _release(self, buf: Any) -> None:
        """Give a buffer back (default: nothing; the runtime frees it with its last reference)."""

    @abstractmethod
    def _upload(self, buf: Any, data: np.ndarray) -> None:
        """Copy ``data``'s bytes to the start of ``buf`` and sync them to the device."""

    @abstractmethod
    def _download(self, buf: Any, nbytes: int) -> np.ndarray:
        """Sync the first ``nbytes`` of ``buf`` from the device; those bytes (uint8)."""

    @abstractmethod
    def _start(self, unit: str, values: dict[str, Any]) -> None:
        """Start compute unit ``unit`` with its arguments by port name."""

    @abstractmethod
    def _wait(self, unit: str) -> None:
        """Wait for ``unit`` to finish (DeviceError on a time-out or a failed run)."""

    def _graph_run(self, iterations: int) -> None:  # noqa: B027 - a free-running graph needs nothing
        """Run the AIE graph for ``iterations`` (one tile each)."""

    def _graph_wait(self) -> None:  # noqa: B027
        """Wait for the graph's iterations (DeviceError on a time-out)."""

    # ------------------------------------------------------------------------------ a launch

    def _buffer(self, name: str, unit: str, port: str, nbytes: int) -> Any:
        """Buffer ``name`` of at least ``nbytes`` (kept between launches; reallocated when too small)."""
        have = self._bufs.get(name)
        if have is not None and have[1] >= nbytes:
            return have[0]
        if have is not None:
            self._release(have[0])
        buf = self._alloc(name, unit, port, max(int(nbytes), 64))
        self._bufs[name] = (buf, max(int(nbytes), 64))
        return buf

    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        if not self._is_open():
            raise DeviceError(f"{self.name} backend: the device is not open (use it as a context manager)")
        p, c = self.params, launch.cmds
        lists = balanced_lists(c) if self.balance else own_lists(c)
        first = self.pipes[0]
        q = self._buffer("q", first.q, "src", launch.q.nbytes)
        k = self._buffer("k", first.k, "src", launch.k.nbytes)
        v = self._buffer("v", first.v, "src_v", launch.v.nbytes)
        a_bytes = c.n_tiles * p.q_rows * p.d
        a = self._buffer("a", first.out, "a_out", a_bytes)
        for buf, arr in ((q, launch.q), (k, launch.k), (v, launch.v)):
            self._upload(buf, arr)
        done_bufs = []
        for pipe, bl in zip(self.pipes, lists, strict=True):
            for unit, rows in ((pipe.q, bl.q), (pipe.k, bl.kv), (pipe.v, bl.kv)):
                self._upload(self._buffer(f"cmds.{unit}", unit, "cmds", rows.nbytes), rows)
            nbytes = len(bl.q) * streams.BEAT_BYTES
            d = self._buffer(f"done.{pipe.out}", pipe.out, "done", nbytes)
            self._upload(d, np.zeros(nbytes, np.uint8))  # no stale record can pass
            done_bufs.append(d)
        for pipe, bl, d in zip(self.pipes, lists, done_bufs, strict=True):  # consumers first
            self._start(pipe.out, {"a_out": a, "done": d, "n_records": len(bl.q), "n_slots": c.n_tiles,
                                   "pipeline": pipe.index})
        self._graph_run(max(len(bl.q) for bl in lists))
        for role, mode in (("k", 1), ("v", 2), ("q", 0)):
            for pipe, bl in zip(self.pipes, lists, strict=True):
                unit = getattr(pipe, role)
                rows = bl.q if role == "q" else bl.kv
                src = q if role == "q" else k
                self._start(unit, {"cmds": self._bufs[f"cmds.{unit}"][0], "n_cmds": len(rows), "src": src,
                                   "src_v": v, "kv": mode,  # each mover reads only its own op's source
                                   "payload_bytes": (p.q_rows if role == "q" else p.slice_keys) * p.d})
        for pipe in self.pipes:
            for unit in (pipe.out, pipe.k, pipe.v, pipe.q):
                self._wait(unit)
        self._graph_wait()
        out = self._download(a, a_bytes).view(np.int8).reshape(c.n_tiles, p.q_rows, p.d)
        done = []
        for pipe, bl, d in zip(self.pipes, lists, done_bufs, strict=True):
            n = len(bl.q)
            recs = self._download(d, n * streams.BEAT_BYTES).reshape(n, streams.BEAT_BYTES)
            blank = np.flatnonzero(~recs.any(axis=1))  # zeroed before the launch; a RESULT record has d = D > 0
            if blank.size:
                raise DeviceError(f"{self.name} launch {self.launches}: pipeline {pipe.index}: {pipe.out} wrote "
                                  f"{blank[0]} of {n} done records (record {blank[0]} never written: a mover stopped "
                                  "early or records were lost)")
            if recs[bl.own:].tobytes() != bl.filler_done.tobytes():
                bad = int(np.flatnonzero((recs[bl.own:] != bl.filler_done).any(axis=1))[0]) + bl.own
                raise DeviceError(f"{self.name} launch {self.launches}: pipeline {pipe.index}: done record {bad} (a "
                                  f"repeated group that balances the pipelines) is "
                                  f"{streams.decode('result', recs[bad])}, expected "
                                  f"{streams.decode('result', bl.filler_done[bad - bl.own])}")
            done.append(recs[:bl.own])
        return out, np.concatenate(done)


__all__ = ["MM2S", "S2MM", "Balanced", "EngineCardDevice", "Pipeline", "balanced_lists", "own_lists", "pipelines_of"]

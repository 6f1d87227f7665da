"""What the two hardware backends (``xrt``, ``pynq``) share: opening, ID-checking and programming the
normalizer kernels through the one driver (:mod:`vckattn.hw.driver`), and the double-buffered launch loop.

Registers: the layer's normalizer kernel (``manifest.normalizer_kernel(layer.normalizer)``) gets every
writable register of the map the manifest records written (:func:`vckattn.hw.driver.program`) from the
golden register values (:meth:`~vckattn.golden.regmap.RegisterValues.registers`; ``out_frac`` is no
register: it is folded into ``c_out``) and read back exactly (:func:`vckattn.hw.driver.verify`).

Launch loop (:class:`BufferedDevice`): the job's tiles are cut into launches of
``tiles_per_launch``; launch ``c`` uses buffer set ``c % 2``. Order of events::

    pack 0, start 0
    pack 1            <- while launch 0 runs
    finish 0, start 1, yield results of 0
    pack 2            <- while launch 1 runs
    finish 1, start 2, yield results of 1
    ...

Launch ``c + 1`` is packed and written before launch ``c`` is waited on; it starts once ``c`` has
finished (the AIE graph and the ``ap_ctrl_hs`` movers run one launch at a time).

Every launch starts the kernels of :data:`LAUNCHED` (consumers first, :data:`START_ORDER`) with the
values of :func:`launch_values`: the launch's buffers and tile count, the job's geometry (``head_dim``,
``keys_pad``, ``n_kv_heads``), the output requantization and ``score_switch``'s ``select``
(:func:`switch_select`: the configured layer's normalizer).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.golden.regmap import RegisterMap, RegisterWrite, fits
from vckattn.host import tile_buffers as tb
from vckattn.host.backends.base import Device, DeviceError
from vckattn.host.tiler import LayerJob, Tile, TileResult
from vckattn.hw import driver
from vckattn.hw.manifest import SCORE_SWITCH_SELECT, Manifest, ManifestError

MOVERS = ("mm2s_tiles", "mm2s_kv", "s2mm_out")
SWITCH = "score_switch"
#: the ``ap_ctrl_hs`` kernels started (and waited on) every launch
LAUNCHED = (*MOVERS, SWITCH)
#: start order: the consumers first, so no stream backs up into a kernel not yet started
START_ORDER = ("s2mm_out", SWITCH, "mm2s_kv", "mm2s_tiles")


def normalizer_values(layer: QuantAttentionLayer, regmap: RegisterMap) -> dict[str, Any]:
    """The layer's normalizer register values for ``regmap`` (the build's map): SwiftMax's per-head
    ``b_beta``/``c_out`` as one entry per register set the build holds (its memories' depth). On an engine built with
    both normalizers (a map with the ``normalizer`` register, :func:`vckattn.golden.engine.engine_regmap`) also the
    mode and the online-softmax registers (:func:`vckattn.golden.engine.engine_mode_values`); an online-softmax
    layer leaves SwiftMax's registers 0."""
    if "normalizer" in {r.name for r in regmap.regs}:
        from vckattn.golden.engine import engine_mode_values

        mode = engine_mode_values(layer.normalizer, layer.online)
        if layer.normalizer != "swiftmax":
            return {**{r.name: 0 for r in regmap.writable if r.name not in mode}, **mode}
        return {**_swiftmax_values(layer, regmap), **mode}
    regs = layer.swiftmax if layer.normalizer == "swiftmax" else layer.online
    if regs is None:
        raise DeviceError(f"the layer uses {layer.normalizer} but carries no {layer.normalizer} registers")
    if layer.normalizer != "swiftmax":
        return regs.registers()
    return _swiftmax_values(layer, regmap)


def _swiftmax_values(layer: QuantAttentionLayer, regmap: RegisterMap) -> dict[str, Any]:
    if layer.swiftmax is None:
        raise DeviceError("the layer uses swiftmax but carries no swiftmax registers")
    if "b_beta" not in {m.name for m in regmap.mems}:  # the bundle does not match the build: status 5
        raise ManifestError("the build's manifest", "kernels.swiftmax", "this build's SwiftMax kernel has one "
                            "register set per layer (register map version 1); per-head constants need a build of "
                            "this version (regenerate the manifest)")
    depth = regmap.mem("b_beta").depth
    if layer.swiftmax.n_heads > depth:
        raise ManifestError("the build's manifest", "kernels.swiftmax", f"the layer has {layer.swiftmax.n_heads} "
                            f"heads; this build's SwiftMax kernel holds {depth} register sets (max_heads)")
    return layer.swiftmax.register_values(replace(layer.sm_fmt, max_heads=depth))


def register_writes(manifest: Manifest, layer: QuantAttentionLayer) -> tuple[dict, list[RegisterWrite]]:
    """The normalizer kernel entry of ``layer`` and the register writes that configure it (not performed).

    Raises :class:`DeviceError` when the manifest's map and the golden register set disagree (a
    register without a value, a value without a register) or a value does not fit its register.
    """
    entry = manifest.normalizer_kernel(layer.normalizer)
    try:
        regmap = manifest.regmap(entry["name"])
        writes = regmap.writes(normalizer_values(layer, regmap))
    except ValueError as exc:
        raise DeviceError(f"{manifest.file}: kernels.{entry['name']}: {exc} (the golden {layer.normalizer} "
                          f"register set and this build's register map differ)") from None
    return entry, writes


def requant_scalars(layer: QuantAttentionLayer) -> tuple[int, int]:
    """``(rq_mult, rq_shift)`` of the output requantization, the scalars of ``s2mm_out``."""
    mult, shift = np.asarray(layer.rq_a.mult), np.asarray(layer.rq_a.shift)
    if mult.size != 1 or shift.size != 1:
        raise DeviceError(f"s2mm_out takes one output requantization (rq_mult, rq_shift); the layer has "
                          f"{mult.size} per-channel values")
    m, s = int(mult.reshape(-1)[0]), int(shift.reshape(-1)[0])
    if not (fits(m, 32, True) and 0 <= s <= 63):
        raise DeviceError(f"output requantization mult {m} / shift {s} out of the s2mm_out scalar range")
    return m, s


def switch_select(manifest: Manifest, layer: QuantAttentionLayer) -> int:
    """``score_switch``'s ``select`` for ``layer``: routes the scores to its normalizer kernel."""
    name = manifest.normalizer_kernel(layer.normalizer)["name"]
    if name not in SCORE_SWITCH_SELECT:
        raise DeviceError(f"{manifest.file}: kernels.{name}: score_switch has no output for this normalizer kernel "
                          f"(select: {SCORE_SWITCH_SELECT})")
    return SCORE_SWITCH_SELECT[name]


def launch_values(job: LayerJob, n_tiles: int, buffers: dict[str, Any], rq: tuple[int, int],
                  select: int) -> dict[str, Any]:
    """Every non-stream argument of the :data:`LAUNCHED` kernels for one launch, by port name.

    ``buffers``: ``desc``, ``q``, ``mask``, ``out`` of the launch's set and the job's ``kv`` (``desc``
    goes to all three movers)."""
    return {**buffers, "n_tiles": int(n_tiles), "head_dim": int(job.k.shape[-1]), "keys_pad": int(job.keys_pad),
            "n_kv_heads": int(job.k.shape[1]), "rq_mult": int(rq[0]), "rq_shift": int(rq[1]), "select": int(select)}


def kernel_args(kernel: dict, values: dict[str, Any]) -> list[Any]:
    """The kernel's call arguments in manifest port order: ``None`` for an AXI4-Stream port (the
    host never sets those; pyxrt skips an argument it cannot convert, like ``nullptr`` in C++),
    else ``values[port name]`` (a buffer or a scalar)."""
    args = []
    for p in kernel["ports"]:
        if p["protocol"] == "axis":
            args.append(None)
        elif p["name"] in values:
            args.append(values[p["name"]])
        else:
            raise DeviceError(f"kernel {kernel['name']}: this host has no value for its {p['protocol']} "
                              f"argument {p['name']!r}")
    return args


# ---------------------------------------------------------------------------------- launch loop


@dataclass
class Launch:
    """One launch: ``index`` in the job, buffer ``slot`` (0 = ping, 1 = pong), its tiles."""

    index: int
    slot: int
    tiles: list[Tile]

    @property
    def n(self) -> int:
        return len(self.tiles)

    def describe(self) -> str:
        return f"launch {self.index} (tiles {self.tiles[0].tile_id}..{self.tiles[-1].tile_id})"


def timeout_error(timeout_ms: int, kernel: str, launch: Launch) -> DeviceError:
    return DeviceError(f"device timeout after {timeout_ms} ms in kernel {kernel} on {launch.describe()}")


class BufferedDevice(Device):
    """A device fed through DDR buffers in double-buffered launches (module docstring)."""

    def __init__(self, manifest: Manifest, tiles_per_launch: int = 16, timeout_ms: int | None = None) -> None:
        super().__init__(manifest)
        if int(tiles_per_launch) < 1:
            raise ValueError("tiles_per_launch must be >= 1")
        self.tiles_per_launch = int(tiles_per_launch)
        self.timeout_ms = int(timeout_ms if timeout_ms is not None else manifest.data.get("timeout_ms", 10_000))
        self.launches = 0  # launches completed, over the device's life
        self._sets: list[dict[str, Any]] = []  # the two buffer sets (ping, pong), by port name
        self._kv: Any = None  # the job's K/V buffer
        self._geom: tuple[int, int, int] | None = None  # (head_dim, keys_pad, capacity) of the buffer sets
        self.written: list[RegisterWrite] = []
        self.written_kernel = ""
        self._rq: tuple[int, int] = (0, 0)
        self._select = 0

    def open(self) -> None:
        """Open the device (:meth:`_open`); on any failure release what was opened, then re-raise."""
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    @abstractmethod
    def _open(self) -> None:
        """Load the bitstream, open every kernel and check the RTL kernels' ID registers."""

    # ------------------------------------------------------------------------------ registers (hw/driver.py)

    @abstractmethod
    def _register_port(self, kernel: str) -> driver.RegisterPort:
        """The open AXI4-Lite port of an RTL kernel (DeviceError when it is not open)."""

    def _check_ident(self, kernel: dict, port: driver.RegisterPort) -> int:
        """The kernel's ID register against the manifest (DeviceError naming both values)."""
        try:
            return driver.check_ident(port, self.manifest.regmap(kernel["name"]), kernel["name"],
                                      str(self.manifest.file))
        except driver.RegisterError as exc:
            raise DeviceError(str(exc)) from None

    def configure(self, layer: QuantAttentionLayer) -> None:
        """Program the layer's normalizer kernel (:func:`vckattn.hw.driver.program`: every writable
        register, checked before the first write) and keep the launch scalars."""
        super().configure(layer)
        entry = self.manifest.normalizer_kernel(layer.normalizer)
        rq, select = requant_scalars(layer), switch_select(self.manifest, layer)
        regmap, port = self.manifest.regmap(entry["name"]), self._register_port(entry["name"])
        try:
            writes = driver.program(port, regmap, normalizer_values(layer, regmap), entry["name"])
        except driver.RegisterError as exc:
            raise DeviceError(f"{self.manifest.file}: {exc} (the golden {layer.normalizer} register set and this "
                              f"build's register map differ)") from None
        self.written, self.written_kernel, self._rq, self._select = writes, entry["name"], rq, select

    def verify_registers(self) -> dict[str, int]:
        """Read back the registers :meth:`configure` wrote, exactly; DeviceError naming every mismatch."""
        if not self.written:
            raise DeviceError(f"{self.name} backend: no registers written yet (configure a layer first)")
        try:
            return driver.verify(self._register_port(self.written_kernel), self.written, self.written_kernel)
        except driver.RegisterError as exc:
            raise DeviceError(str(exc)) from None

    def _check_ready(self) -> QuantAttentionLayer:
        if self.layer is None:
            raise RuntimeError("configure() a layer before run()")
        return self.layer

    def run(self, job: LayerJob) -> Iterator[TileResult]:
        self._check_ready()
        per = self.tiles_per_launch
        launches = [Launch(i, i % 2, job.tiles[s:s + per]) for i, s in enumerate(range(0, len(job.tiles), per))]
        if not launches:
            return
        self._prepare(job)
        in_flight: Launch | None = None
        try:
            self._pack(job, launches[0])
            self._start(job, launches[0])
            in_flight = launches[0]
            for nxt in launches[1:]:
                self._pack(job, nxt)  # while the previous launch runs
                done, in_flight = in_flight, None
                results = self._finish(job, done)
                self.launches += 1
                self._start(job, nxt)
                in_flight = nxt
                yield from results
            done, in_flight = in_flight, None
            results = self._finish(job, done)
            self.launches += 1
            yield from results
        finally:
            if in_flight is not None:  # the consumer stopped early: let the device finish before reuse
                try:
                    self._finish(job, in_flight)
                except Exception:  # best effort; the consumer's error is the one that matters
                    pass

    @abstractmethod
    def _is_open(self) -> bool:
        """Whether the device (card or overlay) is open."""

    @abstractmethod
    def _alloc(self, port: str, nbytes: int) -> Any:
        """A device buffer of at least ``nbytes`` for the ``m_axi`` argument ``port``."""

    def _release(self, buf: Any) -> None:
        """Give a device buffer back (default: nothing; the runtime frees it with its last reference)."""

    def _prepare(self, job: LayerJob) -> None:
        """Allocate (or reuse) both buffer sets for ``job`` and upload its ``kv`` buffer. The sets are
        reallocated only when the head size changes or the job needs more keys or tiles per launch."""
        if not self._is_open():
            raise DeviceError(f"{self.name} backend: the device is not open (use it as a context manager)")
        q_rows, hd, kp = job.tile.q_rows, int(job.k.shape[-1]), job.keys_pad
        cap = min(self.tiles_per_launch, max(1, len(job.tiles)))
        if self._geom is None or self._geom[0] != hd or self._geom[1] < kp or self._geom[2] < cap:
            for old in self._sets:
                for buf in old.values():
                    self._release(buf)
            sizes = {"desc": tb.desc_nbytes(cap), "q": tb.q_nbytes(cap, q_rows, hd),
                     "mask": tb.mask_nbytes(cap, q_rows, kp), "out": tb.out_nbytes(cap, q_rows, hd)}
            self._sets = [{n: self._alloc(n, size) for n, size in sizes.items()} for _ in range(2)]
            self._geom = (hd, kp, cap)
        kv = tb.pack_kv(job)
        if self._kv is not None:
            self._release(self._kv)
        self._kv = self._alloc("kv", kv.nbytes)
        self._write(self._kv, kv)

    @abstractmethod
    def _write(self, buf: Any, data: np.ndarray) -> None:
        """Copy ``data``'s bytes to the start of device buffer ``buf`` and sync it to the device."""

    def _pack(self, job: LayerJob, launch: Launch) -> None:
        """Write ``launch``'s desc/q/mask and a blank out into its buffer set and sync them to the device."""
        s = self._sets[launch.slot]
        for name, arr in tb.pack_tiles(job, launch.tiles).items():
            self._write(s[name], arr)
        self._write(s["out"], tb.blank_out(launch.n, job.tile.q_rows, int(job.k.shape[-1])))

    @abstractmethod
    def _start(self, job: LayerJob, launch: Launch) -> None:
        """Start the movers (and the graph) on ``launch``'s buffer set."""

    @abstractmethod
    def _finish(self, job: LayerJob, launch: Launch) -> list[TileResult]:
        """Wait for ``launch`` (DeviceError on timeout/failure), sync ``out`` back, unpack it."""


__all__ = ["LAUNCHED", "MOVERS", "START_ORDER", "SWITCH", "BufferedDevice", "Launch", "kernel_args",
           "launch_values", "normalizer_values", "register_writes", "requant_scalars", "switch_select", "timeout_error"]

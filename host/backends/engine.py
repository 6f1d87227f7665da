"""Backends of an engine build (a manifest with an ``engine`` section; stream contract v2, ``hw/ENGINE.md``).

One launch per layer: :func:`vckattn.host.engine.plan_launch` builds the command lists and operand buffers,
the backend runs the launch, :func:`vckattn.host.engine.check_done` checks every tile's record and the A
buffer is the head outputs. Backends:

* ``emu`` — the functional model of the engine on the launch's streams (:mod:`vckattn.hw.engine.model`);
* ``csim`` — the engine's own C++ (AIE kernels ``qk_slice``/``pv_slice``, the HLS SwiftMax and output mover)
  in C-simulation, packets merged in a seeded random order (:mod:`vckattn.sim.engine_csim`);
* ``rtl`` — the engine's generated PL top (every pipeline's SwiftMax lanes in one Verilator model, random
  backpressure) with the AIE kernels' arithmetic from golden (:mod:`vckattn.sim.engine_rtl`).

The layer must be a narrow-score layer of the build's width (:func:`vckattn.golden.quant_attention.narrow_layer`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.host.backends.base import Device, DeviceError
from vckattn.host.engine import Launch, check_done, heads_from_a, params_from_manifest, plan_launch, streams_of
from vckattn.host.tiler import LayerJob, TileError
from vckattn.hw.engine.model import EngineStreamError, run_launch_model


class EngineDevice(Device):
    """An engine build behind the Device interface: :meth:`run_heads` runs a whole layer in one launch."""

    name: ClassVar[str] = "engine"
    where: ClassVar[str] = "engine"

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
            raise DeviceError(f"{self.manifest.name}: the engine runs SwiftMax layers only (this layer: "
                              f"{layer.normalizer}); use the reference build vck5000_attention")
        if layer.score_bits != self.params.score_bits:
            raise DeviceError(f"{self.manifest.name}: the engine takes {self.params.score_bits}-bit scores; the "
                              f"layer has {layer.score_bits}-bit scores (narrow_layer(layer, "
                              f"{self.params.score_bits}))")

    def run(self, job: LayerJob) -> Any:  # pragma: no cover - the scheduler calls run_heads on engines
        raise DeviceError("an engine build runs whole layers (run_heads), not tile jobs")

    def run_heads(self, ops: dict[str, np.ndarray]) -> np.ndarray:
        """The layer's int8 head outputs ``(B, H, S, d)`` from its head operands (``head_operands``)."""
        layer = self.layer
        if layer is None:
            raise RuntimeError("configure() a layer before run_heads()")
        try:
            launch = plan_launch(self.params, ops["q"], ops["k"], ops["v"], ops["keep"], layer.causal,
                                 layer.score_shift)
        except ValueError as exc:
            raise DeviceError(f"{self.manifest.name}: {exc}") from None
        self.last_launch = launch
        a, done = self._launch(launch, layer)
        self.launches += 1
        try:
            check_done(launch.cmds, done)
        except TileError as exc:
            raise DeviceError(f"{self.name} launch {self.launches - 1}: {exc}") from None
        return heads_from_a(launch.cmds, a)

    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


class EngineEmuDevice(EngineDevice):
    name = "emu"
    where = "software: the engine's functional model on the launch's command streams (golden numerics)"

    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        qk, vv = streams_of(launch)
        try:
            a, done = run_launch_model(self.params, qk, vv, launch.cmds.n_tiles, layer.swiftmax, layer.rq_a,
                                       layer.sm_fmt)
        except EngineStreamError as exc:
            raise DeviceError(f"engine model: {exc}") from None
        return a, np.concatenate(done)


class EngineCsimDevice(EngineDevice):
    name = "csim"
    where = ("C-simulation (g++ + AMD ap_types): the engine's AIE kernels qk_slice/pv_slice (scalar path), a "
             "random-order pktmerge, the HLS SwiftMax and output mover, per pipeline")

    def open(self) -> None:
        from vckattn.sim.engine_csim import build
        from vckattn.sim.hls_csim import HlsToolsMissing

        try:
            build(self.params)
        except HlsToolsMissing as exc:
            raise DeviceError(f"the csim backend needs g++ and the hls4ml ap_types headers: {exc}") from None

    def _launch(self, launch: Launch, layer: QuantAttentionLayer) -> tuple[np.ndarray, np.ndarray]:
        from vckattn.host.backends.hwio import requant_scalars
        from vckattn.sim.engine_csim import run_engine_launch

        qk, vv = streams_of(launch)
        rq_mult, rq_shift = requant_scalars(layer)
        c = launch.cmds
        res = run_engine_launch(self.params, qk, vv, [len(t) for t in c.tiles], layer.swiftmax, rq_mult, rq_shift,
                                seed=self.seed + self.launches, n_slots=c.n_tiles, d=c.geometry.d)
        if not res.ok:
            what = [f"{k}: {s.text}" for k, s in res.failed.items()] + \
                   [f"{k}: {n} beats left unread" for k, n in res.leftover.items()] + \
                   [f"{k}: {n} beats read past the end" for k, n in res.missing.items()]
            raise DeviceError(f"C-simulation of launch {self.launches}: {'; '.join(what[:4])}")
        return res.a, np.concatenate(res.done)


class _Unavailable(EngineDevice):
    def open(self) -> None:
        raise DeviceError(f"the {self.name} backend has no driver for engine builds ({self.manifest.name}) yet: "
                          "run the engine on emu, csim or rtl, or the reference build vck5000_attention on "
                          f"{self.name}")


class EngineXrtDevice(_Unavailable):
    name = "xrt"
    where = "hardware (not available for engine builds)"


class EnginePynqDevice(_Unavailable):
    name = "pynq"
    where = "hardware (not available for engine builds)"


ENGINE_BACKENDS: dict[str, type[EngineDevice]] = {"emu": EngineEmuDevice, "csim": EngineCsimDevice,
                                                  "xrt": EngineXrtDevice, "pynq": EnginePynqDevice}


__all__ = ["ENGINE_BACKENDS", "EngineDevice", "EngineEmuDevice"]

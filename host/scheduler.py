"""Schedule one attention layer on a device: projections, tiling, streaming, checking, W_O.

Per layer (formats as in :mod:`vckattn.golden.quant_attention`):

1. host: x → int8 (s_x); Q, K, V projections and requantization (and RoPE) with the golden
   integer model (:func:`~vckattn.golden.quant_attention.head_operands`) — this build has no
   projection kernel;
2. host: :func:`~vckattn.host.tiler.plan_tiles` splits Q/K/V into the manifest's tiles;
3. device: every tile through QKᵀ → normalizer → P·V → requant (double-buffered by the backend);
4. host: :func:`~vckattn.host.tiler.collect_results` checks ids and order and assembles the
   int8 head outputs; W_O and dequantization with the golden model.

The result is bit-identical to :func:`~vckattn.golden.quant_attention.attention_int` when the
device is right; :mod:`vckattn.host.run` checks exactly that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer, finish_int, head_operands
from vckattn.host.backends.base import Device
from vckattn.host.tiler import LayerJob, collect_results, plan_tiles


@dataclass
class LayerRun:
    """One layer on a device: ``out`` float (B, S, d) dequantized output (before the residual add),
    ``y`` its int accumulators, ``a`` int8 head outputs (B, H, S, hd), ``x`` the int8 input."""

    out: np.ndarray
    y: np.ndarray
    a: np.ndarray
    x: np.ndarray
    job: LayerJob | None  # None on an engine build (one launch, no tile jobs)
    seconds: dict[str, float]  # wall time of: projections, tiling, stream (device), output_projection
    cycles: int | None  # RTL only
    n_tiles: int | None = None  # tiles of the layer (engine builds; else len(job.tiles))

    @property
    def tiles(self) -> int:
        """Tiles the device computed."""
        return self.n_tiles if self.n_tiles is not None else len(self.job.tiles)  # type: ignore[union-attr]

    @property
    def device_seconds(self) -> float:
        """Wall time of the device stream: first tile in to last result checked and stored."""
        return self.seconds["stream"]

    @property
    def host_seconds(self) -> float:
        """Host work outside the stream: projections (and RoPE), tiling, W_O."""
        return self.seconds["projections"] + self.seconds["tiling"] + self.seconds["output_projection"]


def run_layer(device: Device, layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray | None = None,
              rope: tuple[np.ndarray, np.ndarray] | None = None, index: int = 0,
              progress: object | None = None) -> LayerRun:
    """Run one configured layer on ``device``. ``x`` float (B, S, d) (quantized with ``s_x``);
    ``keep`` (B, S) bool valid tokens; ``rope`` (cos, sin) tables for Llama layers."""
    t0 = time.perf_counter()
    ops = head_operands(layer, x, keep, rope=rope)
    t1 = time.perf_counter()
    if hasattr(device, "run_heads"):  # an engine build: the whole layer in one launch
        device.configure(layer)
        t2 = time.perf_counter()
        a = device.run_heads(ops)
        if progress is not None and hasattr(progress, "update"):
            progress.update(1)  # type: ignore[attr-defined]
        t3 = time.perf_counter()
        out, y = finish_int(layer, a)
        t4 = time.perf_counter()
        seconds = {"projections": t1 - t0, "tiling": 0.0, "stream": t3 - t1, "output_projection": t4 - t3}
        cmds = device.last_launch.cmds  # type: ignore[attr-defined]
        return LayerRun(out, y, a, ops["x"], None, seconds, device.last_cycles, n_tiles=cmds.n_tiles)
    job = plan_tiles(ops["q"], ops["k"], ops["v"], ops["keep"], device.manifest.tile, layer=index)
    if progress is not None and hasattr(progress, "total"):
        progress.total = len(job.tiles)  # type: ignore[attr-defined]
    device.configure(layer)
    t2 = time.perf_counter()
    a = collect_results(job, device.run(job), progress)
    t3 = time.perf_counter()
    out, y = finish_int(layer, a)
    t4 = time.perf_counter()
    seconds = {"projections": t1 - t0, "tiling": t2 - t1, "stream": t3 - t2, "output_projection": t4 - t3}
    return LayerRun(out, y, a, ops["x"], job, seconds, device.last_cycles, n_tiles=len(job.tiles))


__all__ = ["LayerRun", "run_layer"]

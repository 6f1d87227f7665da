"""Schedule one attention layer on a device: projections, one engine launch, W_O.

Per layer (formats as in :mod:`vckattn.golden.quant_attention`):

1. host: x → int8 (s_x); Q, K, V projections and requantization (and RoPE) with the golden
   integer model (:func:`~vckattn.golden.quant_attention.head_operands`) — an attention build has no
   projection kernel (a sublayer build does: :mod:`vckattn.host.backends.sublayer`);
2. device: the whole layer in one launch (:meth:`~vckattn.host.backends.base.Device.run_heads`: the command lists,
   every tile through QKᵀ → normalizer → P·V → requant, each tile's done record checked);
3. host: W_O and dequantization with the golden model.

The result is bit-identical to :func:`~vckattn.golden.stages.attention_int` when the
device is right; :mod:`vckattn.host.run` checks exactly that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer, finish_int, head_operands
from vckattn.host.backends.base import Device


@dataclass
class LayerRun:
    """One layer on a device: ``out`` float (B, S, d) dequantized output (before the residual add),
    ``y`` its int accumulators, ``a`` int8 head outputs (B, H, S, hd), ``x`` the int8 input."""

    out: np.ndarray
    y: np.ndarray
    a: np.ndarray
    x: np.ndarray
    seconds: dict[str, float]  # wall time of: projections, configure, stream (device), output_projection
    cycles: int | None  # RTL only
    tiles: int  # tiles of the layer's launch

    @property
    def device_seconds(self) -> float:
        """Wall time of the device launch: operands in to the last tile's record checked and the outputs stored."""
        return self.seconds["stream"]

    @property
    def host_seconds(self) -> float:
        """Host work outside the launch: projections (and RoPE), configuring the layer, W_O."""
        return self.seconds["projections"] + self.seconds["configure"] + self.seconds["output_projection"]


def run_layer(device: Device, layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray | None = None,
              rope: tuple[np.ndarray, np.ndarray] | None = None, index: int = 0,
              progress: object | None = None) -> LayerRun:
    """Run one configured layer on ``device``. ``x`` float (B, S, d) (quantized with ``s_x``);
    ``keep`` (B, S) bool valid tokens; ``rope`` (cos, sin) tables for Llama layers."""
    t0 = time.perf_counter()
    ops = head_operands(layer, x, keep, rope=rope)
    t1 = time.perf_counter()
    device.configure(layer)
    t2 = time.perf_counter()
    a = device.run_heads(ops)
    if progress is not None and hasattr(progress, "update"):
        progress.update(1)  # type: ignore[attr-defined]
    t3 = time.perf_counter()
    out, y = finish_int(layer, a)
    t4 = time.perf_counter()
    seconds = {"projections": t1 - t0, "configure": t2 - t1, "stream": t3 - t2, "output_projection": t4 - t3}
    cmds = device.last_launch.cmds  # type: ignore[attr-defined]
    return LayerRun(out, y, a, ops["x"], seconds, device.last_cycles, tiles=int(cmds.n_tiles))


__all__ = ["LayerRun", "run_layer"]

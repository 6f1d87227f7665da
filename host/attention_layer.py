"""Schedule one attention layer on a device: projections, one engine launch, W_O.

Per layer, the attention core's stages (:mod:`vckattn.golden.stages`; formats as in
:mod:`vckattn.golden.quant_attention`), the attention on the device:

1. host: x → int8 (s_x); Q, K, V projections and requantization (and RoPE) with the golden
   integer stages — an attention build has no projection kernel (a sublayer build does:
   :mod:`vckattn.host.backends.staged`, which walks the same stage list for every build);
2. device: the whole layer in one launch (:meth:`~vckattn.host.backends.base.Device.run_heads`: the command lists,
   every tile through QKᵀ → normalizer → P·V → requant, each tile's done record checked);
3. host: W_O and dequantization with the golden stage.

The result is bit-identical to :func:`~vckattn.golden.stages.attention_int` when the
device is right; :mod:`vckattn.host.run` checks exactly that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.golden.stages import GOLDEN, StageInputs, sublayer_int
from vckattn.golden.sublayer import quantize_input, rope_tables
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
    """Run one configured layer's attention core on ``device``: its stages (:mod:`vckattn.golden.stages`) with the
    attention on the device and the others on the host by their golden functions. ``x`` float (B, S, d) (quantized
    with ``s_x``); ``keep`` (B, S) bool valid tokens; ``rope`` (cos, sin) float tables for Llama layers."""
    t0 = time.perf_counter()
    xi = quantize_input(x, layer.s_x)
    tables = None if rope is None else tuple(rope_tables(rope, *xi.shape[:2], layer.head_dim))
    seconds = {"projections": 0.0, "configure": 0.0, "stream": 0.0, "output_projection": 0.0}

    def stage(name: str, t: dict[str, np.ndarray], c: StageInputs) -> bool:
        s0 = time.perf_counter()
        if name != "attention":
            GOLDEN[name](t, c)
            seconds["output_projection" if name == "o_proj" else "projections"] += time.perf_counter() - s0
            return True
        device.configure(layer)
        s1 = time.perf_counter()
        t["a"] = device.run_heads({"q": t["q"], "k": t["k"], "v": t["v"], "keep": t["keep"]})
        seconds["configure"] += s1 - s0
        seconds["stream"] += time.perf_counter() - s1
        if progress is not None and hasattr(progress, "update"):
            progress.update(1)  # type: ignore[attr-defined]
        return True

    seconds["projections"] += time.perf_counter() - t0
    y, t = sublayer_int(layer, xi, keep, tables, stage)  # type: ignore[arg-type]
    cmds = device.last_launch.cmds  # type: ignore[attr-defined]
    return LayerRun(y * (layer.s_a * layer.o_proj.s_w), y, t["a"], xi, seconds, device.last_cycles,
                    tiles=int(cmds.n_tiles))


__all__ = ["LayerRun", "run_layer"]

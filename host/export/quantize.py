"""Step 3 of the export: quantization and calibration of a layer's int8 scales and P format.

The full description: ``docs/internals/host.md``, section ``host/export/quantize.py``.
"""

from __future__ import annotations

import math

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer, build_quant_layer

from .capture import Captured
from .common import INT8_MAX, PERCENTILE_SAMPLE
from .reference import float_layer
from .sources import LoadedLayer, LoadedModel

#: the tensors of a layer with an int8 scale (``s_x`` … ``s_a``)
SCALED = ("x", "q", "k", "v", "a")


class Range:
    """Collects ``|values|`` of one tensor over batches; ``scale()`` is the int8 symmetric scale."""

    def __init__(self, method: str, percentile: float, seed: int = 0) -> None:
        self.method, self.percentile = method, percentile
        self.max = 0.0
        self.parts: list[np.ndarray] = []
        self.rng = np.random.default_rng(seed)

    def add(self, v: np.ndarray) -> None:
        v = np.asarray(v)
        if v.size == 0:
            return
        if self.method == "minmax":
            self.max = max(self.max, float(np.max(np.abs(v))))
            return
        a = np.abs(v).reshape(-1)
        if a.size > PERCENTILE_SAMPLE:
            a = self.rng.choice(a, PERCENTILE_SAMPLE, replace=False)
        self.parts.append(a.astype(np.float64))

    def value(self) -> float:
        if self.method == "minmax":
            return self.max
        if not self.parts:
            return 0.0
        return float(np.percentile(np.concatenate(self.parts), self.percentile))

    def scale(self) -> float:
        """``value / 127`` (1 for an all-zero tensor): :func:`requant.symmetric_scale` on the range."""
        m = self.value()
        return m / INT8_MAX if m > 0 else 1.0


class PRange:
    """The P values (unmasked) of a SwiftMax layer: max, or a percentile, over batches."""

    def __init__(self, percentile: float, seed: int = 0) -> None:
        self.percentile = percentile
        self.max = -math.inf
        self.parts: list[np.ndarray] = []
        self.rng = np.random.default_rng(seed)

    def add(self, p: np.ndarray) -> None:
        if p.size == 0:
            return
        if self.percentile >= 100.0:
            self.max = max(self.max, float(np.max(p)))
            return
        a = p.reshape(-1)
        if a.size > PERCENTILE_SAMPLE:
            a = self.rng.choice(a, PERCENTILE_SAMPLE, replace=False)
        self.parts.append(a)

    def value(self) -> float:
        if self.percentile >= 100.0:
            return self.max if math.isfinite(self.max) else 1.0
        return float(np.percentile(np.concatenate(self.parts), self.percentile)) if self.parts else 1.0


def activation_scales(m: LoadedModel, i: int, cap: Captured, normalizer: str, method: str, percentile: float,
                      beta: float | np.ndarray, gamma: float | np.ndarray,
                      p_max: float | None = None) -> tuple[dict[str, float], float]:
    """Layer ``i``'s int8 scales ``{"s_x", "s_q", "s_k", "s_v", "s_a"}`` (``s_a`` over real query rows only: a
    padded row's output is dropped, and with SwiftMax it can be far larger than any real one) and the P value its
    format must hold (max, or the percentile with ``method="percentile"``, over the kept keys of real query rows;
    SwiftMax layers only, else 1), from the float golden attention with ``normalizer`` (β, γ for SwiftMax) on the
    captured inputs. A SwiftMax layer tuned for its P format (``p_max``: its saturation) runs saturating, and its
    format is that one: the P value returned is ``p_max``."""
    ly = m.layers[i]
    rng = {n: Range(method, percentile, seed=j) for j, n in enumerate(SCALED)}
    p_rng = PRange(percentile if method == "percentile" else 100.0)
    for x, rope, b in zip(cap.x[i], cap.rope[i], cap.batches, strict=True):
        x64 = x.astype(np.float64)
        f = float_layer(m, ly, x64, b.keep, rope, normalizer, beta, gamma, p_max)
        rng["x"].add(x64)
        for n in ("q", "k", "v"):
            rng[n].add(f[n])
        rng["a"].add(f["a"][np.asarray(b.keep, bool)])  # real query rows: a padded row's output is dropped
        if "q_pre" in f:  # Llama: the projection output (pre-RoPE) must fit the same int8 scale
            rng["q"].add(f["q_pre"])
            rng["k"].add(f["k_pre"])
        if normalizer == "swiftmax":  # kept keys of real query rows (padded rows' P is computed, then dropped)
            p = f["p"]
            rows = np.asarray(b.keep, bool)[:, None, :, None]
            p_rng.add(p[np.broadcast_to(f["keep4"].numpy(), p.shape) & np.broadcast_to(rows, p.shape)])
    return {f"s_{n}": rng[n].scale() for n in SCALED}, (p_rng.value() if p_max is None else p_max)


def build_layer(ly: LoadedLayer, scales: dict[str, float], normalizer: str, beta: float | np.ndarray,
                gamma: float | np.ndarray,
                p_max: float) -> QuantAttentionLayer:
    """The integer layer from its float scales (golden ``build_quant_layer``, the tail of ``calibrate_attention``)."""
    return build_quant_layer(ly.mha, scales, normalizer, beta, gamma, p_max)


__all__ = ["SCALED", "PRange", "Range", "activation_scales", "build_layer"]

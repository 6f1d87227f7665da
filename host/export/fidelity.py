"""The export check: does the integer layer follow its float layer? (the exporter never writes a bundle it can
tell is unusable).

For each exported layer, on the calibration data, the bit-exact integer layer as the committed designs compute it
(golden :func:`~vckattn.golden.stages.attention_int` with the default design's 8-bit scores,
:func:`.model_check.engine_layer`) is compared with the float64 layer of the same model,
normalizer and constants (:func:`.reference.float_layer`): for the layer, the mean per-token cosine of the
attention output (after W_O, real tokens); for each query head ``h``, the same cosine with only that head's
output taken from the integer layer (``y_float + (a_int,h − a_float,h)·W_O,hᵀ``): the head's share of the
layer's error, in the units of the layer's output (a head's own output before W_O is int8 at the layer's
scale, too coarse for a small head to be judged alone). This measures only what quantization loses — not
what replacing softmax by untuned SwiftMax costs the model (``vckattn eval`` measures that). A layer or head
below ``threshold`` fails the export unless the user allows it (``vckattn export --allow-low-fidelity``), in
which case the bundle records the warning.
"""

from __future__ import annotations

import numpy as np
import torch

from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.golden.stages import attention_int

from .capture import Captured
from .reference import float_layer
from .sources import LoadedModel

#: the tuning flag that fits SwiftMax to the kernel's P format (8-bit P at 2^-8: its float model saturates at
#: 255/256, where the kernel does; ``vckattn calibrate swiftmax --p-frac``)
P_FORMAT_FLAG = "--p-frac 8"

#: the default threshold on both the layer's and every head's mean cosine (``--min-fidelity``). It separates a
#: broken layer from a lossy one: the untuned mean-init SwiftMax MiniLM scores 0.002-0.84 (four of six layers below
#: 0.52: P outside its 8-bit format), while every layer of the online-softmax baseline passes, down to SmolLM2's
#: layer 20 at 0.862 (UQ0.8 P on long rows; README "Export")
DEFAULT_MIN_FIDELITY = 0.8


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of ``(N, F)`` arrays (rows where both are zero count as 1)."""
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    dot = (a * b).sum(-1)
    both_zero = (na == 0) & (nb == 0)
    return np.where(both_zero, 1.0, dot / np.maximum(na * nb, 1e-300))


@torch.no_grad()
def layer_fidelity(m: LoadedModel, i: int, cap: Captured, layer: QuantAttentionLayer, normalizer: str,
                   beta: float | np.ndarray, gamma: float | np.ndarray, threshold: float = DEFAULT_MIN_FIDELITY,
                   p_max: float | None = None) -> dict:
    """``{"cosine", "head_cosine", "threshold"}`` of layer ``i`` (module docstring), as the manifest records it
    (``p_max``: the saturation of a SwiftMax layer tuned for its P format, part of its float layer)."""
    ly = m.layers[i]
    h, d = layer.n_heads, layer.head_dim
    w_o = ly.mha.o_proj.weight.detach().double().numpy().reshape(-1, h, d)  # (out, H, D)
    cos_y, cos_h = [], []
    for x, rope, b in zip(cap.x[i], cap.rope[i], cap.batches, strict=True):
        x64 = x.astype(np.float64)
        f = float_layer(m, ly, x64, b.keep, rope, normalizer, beta, gamma, p_max)
        y_f = ly.mha.o_proj(torch.from_numpy(f["a"])).numpy()
        y_i, tr = attention_int(layer, x64, b.keep, rope=rope)
        real = np.asarray(b.keep, bool)
        yf = y_f[real]
        cos_y.append(_cos(y_i[real], yf))
        da = (tr["a"].astype(np.float64) * layer.s_a - f["a"])[real].reshape(-1, h, d)  # (tokens, H, D)
        delta = np.einsum("thd,ohd->tho", da, w_o)  # each head's error after W_O
        cos_h.append(np.stack([_cos(yf + delta[:, j], yf) for j in range(h)], axis=1))
    return {"cosine": float(np.concatenate(cos_y).mean()),
            "head_cosine": [float(c) for c in np.concatenate(cos_h).mean(axis=0)], "threshold": float(threshold)}


def fix_for(normalizer: str, from_checkpoint: bool | None, tune_command: str | None = None,
            init: str | None = None, method: str | None = None, percentile: float | None = None,
            saturating: bool | None = None) -> str:
    """The fix a layer below the threshold names, never a setting already in use (``init``, ``method``,
    ``percentile``: the export's; None: not known). For the online-softmax baseline: more calibration text or
    percentile scales; for tuned SwiftMax constants (``from_checkpoint``) not tuned for the kernel's P format
    (``saturating`` False): tuning for that format (``--p-frac``: without saturation, tuned β/γ let some rows' P grow
    far past what 8 bits hold, e.g. P ≈ 10^7 in the one-hot head of a MiniLM classifier's layer 0, and no scale
    choice recovers the layer); for tuned ones tuned for it, or not known (``saturating`` True or None): percentile
    scales (rare outliers of P and of the head outputs set the int8 scales), never another initialisation; for
    calibration-initialised constants: the `max` initialisation (only when another one is in use) or tuning
    (``tune_command``: the exact commands); ``from_checkpoint`` None (not recorded: a bundle of an older vckattn):
    both."""
    percentile_in_use = method == "percentile" and percentile is not None and percentile <= 99.9
    scales = None if percentile_in_use else (
        "export with --calib-method percentile --percentile 99.9 (rare outliers of P and of the head outputs set "
        "the int8 scales)")
    more_text = "calibrate on more text like the model's inputs (--calib FILE)"
    if normalizer != "swiftmax":
        return f"{more_text}, or {scales}" if scales else more_text
    tune = f"`{tune_command}`" if tune_command else "`vckattn calibrate swiftmax` and export the tuned model"
    if from_checkpoint and saturating is False:
        how = (f"`{tune_command}`" if tune_command and P_FORMAT_FLAG in tune_command else
               f"`vckattn calibrate swiftmax … {P_FORMAT_FLAG}` and export the tuned model")
        return ("the tuned β/γ let P outgrow the kernel's 8-bit P format: tune the softmax model again for that "
                f"format (its SwiftMax then saturates where the kernel does): {how}")
    if from_checkpoint:
        return scales or more_text
    if from_checkpoint is None:
        return f"for tuned β/γ {scales or more_text}; for untuned ones tune them: {tune}"
    if init is None or init == "max":  # max is in use (the default), or not known (a bundle does not say)
        return f"tune β/γ: {tune}"
    return f"export with --swiftmax-init max (per-head statistics), or tune β/γ: {tune}"


def fidelity_problem(i: int, fid: dict, normalizer: str, from_checkpoint: bool | None = False,
                     tune_command: str | None = None, init: str | None = None, method: str | None = None,
                     percentile: float | None = None, saturating: bool | None = None) -> str | None:
    """One line naming the first failing figure of layer ``i`` (the layer, else its worst head) and the fix
    (:func:`fix_for`, given the export's settings and whether tuned β/γ were tuned for the P format), or None
    when the layer and every head reach the threshold."""
    t = fid["threshold"]
    heads = np.asarray(fid["head_cosine"])
    worst = int(np.argmin(heads))
    if fid["cosine"] >= t and heads[worst] >= t:
        return None
    what = (f"layer {i} output cosine {fid['cosine']:.3f} (worst head {worst}: {heads[worst]:.3f} alone)"
            if fid["cosine"] < t else f"layer {i} head {worst} output cosine {heads[worst]:.3f}")
    fix = fix_for(normalizer, from_checkpoint, tune_command, init, method, percentile, saturating)
    return f"{what} against the float layer is below {t:g}: {fix}"


__all__ = ["DEFAULT_MIN_FIDELITY", "fidelity_problem", "fix_for", "layer_fidelity"]

"""The float reference of a loaded layer: the float64 golden attention the calibration measures.

BERT/ViT layers run golden's :func:`float_attention` (what :func:`calibrate_attention` uses); Llama layers
(RoPE, grouped-query attention, causal mask) the golden float attention with RoPE applied, returning the
pre-RoPE projections too. ``vckattn run`` uses the same function as its float reference.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from vckattn.golden.attention import apply_rope, attention, attention_scores, causal_keep
from vckattn.golden.normalizers import Softmax
from vckattn.golden.quant_attention import float_attention, float_swiftmax

from .sources import LoadedLayer, LoadedModel


def keep4(keep: np.ndarray, causal: bool) -> Tensor:
    """``(B, S)`` valid tokens -> the ``(B, 1, S|1, S)`` keep mask of the attention (with the causal mask)."""
    k = torch.from_numpy(np.asarray(keep, bool))[:, None, None, :]
    if causal:
        s = keep.shape[1]
        k = k & causal_keep(s, s)[None, None]
    return k


@torch.no_grad()
def float_layer(m: LoadedModel, ly: LoadedLayer, x: np.ndarray, keep: np.ndarray,
                rope: tuple[np.ndarray, np.ndarray] | None, normalizer: str, beta: float | np.ndarray,
                gamma: float | np.ndarray, p_max: float | None = None) -> dict[str, np.ndarray]:
    """Float64 golden attention of one layer on one batch: q, k, v (+ pre-RoPE q/k), p, a, scores z, keep4.
    SwiftMax ``beta``/``gamma``: per layer (floats) or one value per query head; ``p_max``: its saturation (a layer
    tuned for its P format) or None."""
    if m.family != "llama":  # BERT / ViT: exactly golden's float_attention (what calibrate_attention uses)
        f = float_attention(ly.mha, x, keep, normalizer, beta, gamma, p_max=p_max)
        b, s, _ = x.shape
        qh = torch.from_numpy(f["q"]).view(b, s, ly.mha.n_heads, -1).transpose(1, 2)
        kh = torch.from_numpy(f["k"]).view(b, s, ly.mha.n_kv_heads, -1).transpose(1, 2)
        f["z"] = attention_scores(qh, kh)
        f["keep4"] = keep4(keep, False)
        return f
    mha = ly.mha
    norm = Softmax() if normalizer == "softmax" else float_swiftmax(beta, gamma, p_max)
    xt = torch.from_numpy(np.asarray(x, np.float64))
    b, s, _ = x.shape
    q = mha.q_proj(xt).view(b, s, mha.n_heads, mha.head_dim).transpose(1, 2)
    k = mha.k_proj(xt).view(b, s, mha.n_kv_heads, mha.head_dim).transpose(1, 2)
    v = mha.v_proj(xt).view(b, s, mha.n_kv_heads, mha.head_dim).transpose(1, 2)
    q_pre, k_pre = q, k
    if rope is not None:
        cos, sin = (torch.from_numpy(t) for t in rope)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    k4 = keep4(keep, True)
    a, p = attention(q, k, v, norm, keep=k4)
    a_flat = a.transpose(1, 2).reshape(b, s, -1)
    return {"q_pre": q_pre.numpy(), "k_pre": k_pre.numpy(), "q": q.numpy(), "k": k.numpy(), "v": v.numpy(),
            "p": p.numpy(), "a": a_flat.numpy(), "z": attention_scores(q, k), "keep4": k4}


@torch.no_grad()
def layer_output(m: LoadedModel, i: int, x: np.ndarray, keep: np.ndarray,
                 rope: tuple[np.ndarray, np.ndarray] | None, normalizer: str, beta: float | np.ndarray,
                 gamma: float | np.ndarray, p_max: float | None = None) -> np.ndarray:
    """Layer ``i``'s float64 attention output after W_O (before the residual add) on ``x`` ``(B, S, d)``
    (SwiftMax saturating at ``p_max`` when given)."""
    ly = m.layers[i]
    f = float_layer(m, ly, x, keep, rope, normalizer, beta, gamma, p_max)
    return ly.mha.o_proj(torch.from_numpy(f["a"])).numpy()


__all__ = ["float_layer", "keep4", "layer_output"]

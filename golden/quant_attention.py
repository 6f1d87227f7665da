"""A quantized self-attention layer end to end, bit-exact (the emulator of the attention block).

Dataflow (int = raw integers; scales in brackets)::

    x int8 [s_x] ──W_Q,W_K,W_V int8 [s_w per out-channel] + int32 bias──> acc int32
        ──requant (per channel)──> Q [s_q], K [s_k], V [s_v] int8
    per head: S = Q·Kᵀ int32 (AIE tile matmul)
        ──normalizer──> P uint8 [2^-p_frac]   (SwiftMax kernel, or the online-softmax baseline)
    O = P·V int32 [s_v·2^-p_frac] (AIE) ──requant──> A int8 [s_a]
    Y = A·W_Oᵀ + bias, int32 [s_a·s_wo per channel]  ──dequantize──> float (before the residual add)

:func:`calibrate_attention` picks every scale from float activations (max-abs,
symmetric) and computes all register values with the golden constant functions;
:func:`attention_int` runs the integer pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from .aie_matmul import UINT8, exact_int_matmul, tile_matmul
from .attention import MultiHeadAttention
from .normalizers import Softmax, SwiftMax
from .online_softmax_int import (
    OnlineSoftmaxFormat,
    OnlineSoftmaxRegisters,
    online_softmax_int,
    online_softmax_registers,
)
from .requant import RequantRegisters, quantize_symmetric, requant_registers, requantize, symmetric_scale
from .swiftmax_int import (
    SwiftMaxFormat,
    SwiftMaxRegisters,
    choose_out_frac,
    swiftmax_int_tabulated,
    swiftmax_registers,
)

Normalizer = Literal["softmax", "swiftmax"]


@dataclass
class QuantLinear:
    """int8 weights ``w`` (out, in) with per-output-channel scales ``s_w`` and an int32 bias at
    scale ``s_in · s_w`` (rounded half-even)."""

    w: np.ndarray
    s_w: np.ndarray
    b: np.ndarray | None

    @classmethod
    def from_float(cls, weight: np.ndarray, bias: np.ndarray | None, s_in: float) -> QuantLinear:
        s_w = np.asarray(symmetric_scale(weight, axis=1), dtype=np.float64)
        w = quantize_symmetric(weight, s_w[:, None]).astype(np.int8)
        b = None if bias is None else np.rint(np.asarray(bias, np.float64) / (s_in * s_w)).astype(np.int64)
        return cls(w, s_w, b)

    def acc(self, x: np.ndarray) -> np.ndarray:
        """``x @ wᵀ + b`` exactly (int32/int64)."""
        if getattr(self, "_wt", None) is None:  # contiguous int8 wᵀ, made once
            self._wt = np.ascontiguousarray(self.w.T, dtype=np.int8)
        y = exact_int_matmul(x, self._wt)
        return y if self.b is None else y + self.b


@dataclass
class QuantAttentionLayer:
    """Everything the integer attention layer needs (what the export bundle carries per layer)."""

    n_heads: int
    head_dim: int
    s_x: float
    s_q: float
    s_k: float
    s_v: float
    s_a: float
    q_proj: QuantLinear
    k_proj: QuantLinear
    v_proj: QuantLinear
    o_proj: QuantLinear
    rq_q: RequantRegisters
    rq_k: RequantRegisters
    rq_v: RequantRegisters
    rq_a: RequantRegisters
    normalizer: Normalizer
    p_frac: int
    swiftmax: SwiftMaxRegisters | None = None
    online: OnlineSoftmaxRegisters | None = None
    sm_fmt: SwiftMaxFormat = field(default_factory=SwiftMaxFormat)
    os_fmt: OnlineSoftmaxFormat = field(default_factory=OnlineSoftmaxFormat)


def _np(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().to(torch.float64).cpu().numpy()


def _heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    b, s, _ = x.shape
    return x.reshape(b, s, n_heads, -1).transpose(0, 2, 1, 3)


@torch.no_grad()
def float_attention(mha: MultiHeadAttention, x: np.ndarray, keep: np.ndarray | None,
                    normalizer: Normalizer, beta: float = 0.0, gamma: float = 1.0) -> dict[str, np.ndarray]:
    """Float64 golden of the same layer: returns q, k, v, weights p, head outputs a, output y."""
    norm = Softmax() if normalizer == "softmax" else SwiftMax(beta, gamma).double()
    xt = torch.from_numpy(np.asarray(x, np.float64))
    m = mha.double()
    q, k, v = (_np(lin(xt)) for lin in (m.q_proj, m.k_proj, m.v_proj))
    qh, kh, vh = (torch.from_numpy(_heads(t, m.n_heads)) for t in (q, k, v))
    kt = None if keep is None else torch.from_numpy(np.asarray(keep))[:, None, None, :]
    from .attention import attention

    a, p = attention(qh, kh, vh, norm, keep=kt)
    a_flat = a.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
    y = m.o_proj(a_flat)
    return {"q": q, "k": k, "v": v, "p": p.numpy(), "a": a_flat.numpy(), "y": y.numpy()}


def calibrate_attention(mha: MultiHeadAttention, x: np.ndarray, keep: np.ndarray | None,
                        normalizer: Normalizer = "softmax", beta: float = 0.0, gamma: float = 1.0,
                        p_percentile: float = 100.0) -> QuantAttentionLayer:
    """Choose scales from calibration activations ``x`` ``(B, S, d)`` and build the integer layer.

    ``p_percentile`` (SwiftMax only): the percentile of unmasked P values that must fit the
    uint8 output (100 = the maximum; lower values saturate the largest weights).
    """
    f = float_attention(mha, x, keep, normalizer, beta, gamma)
    scales = {"s_x": float(symmetric_scale(x))}
    scales |= {f"s_{n}": float(symmetric_scale(f[n])) for n in ("q", "k", "v", "a")}
    p_max = 1.0
    if normalizer == "swiftmax":
        p = f["p"]
        if keep is not None:
            p = p[np.broadcast_to(np.asarray(keep)[:, None, None, :], p.shape)]
        p_max = float(np.percentile(p, p_percentile)) if p.size else 1.0
    return build_quant_layer(mha, scales, normalizer, beta, gamma, p_max)


def build_quant_layer(mha: MultiHeadAttention, scales: dict[str, float], normalizer: Normalizer,
                      beta: float = 0.0, gamma: float = 1.0, p_max: float = 1.0) -> QuantAttentionLayer:
    """The integer layer from its float scales (``s_x, s_q, s_k, s_v, s_a``) and, for SwiftMax, the
    largest P that must fit the output: int8 weights, requantization and normalizer registers, all
    from the golden constant functions."""
    s_x, s_q, s_k, s_v, s_a = (scales[k] for k in ("s_x", "s_q", "s_k", "s_v", "s_a"))
    qp, kp, vp = (QuantLinear.from_float(_np(lin.weight), _np(lin.bias), s_x)
                  for lin in (mha.q_proj, mha.k_proj, mha.v_proj))
    sm_fmt, os_fmt = SwiftMaxFormat(), OnlineSoftmaxFormat()
    sm_regs = os_regs = None
    if normalizer == "swiftmax":
        p_frac = choose_out_frac(max(p_max, 1e-30), sm_fmt)
        sm_regs = swiftmax_registers(s_q, s_k, mha.head_dim, beta, gamma, p_frac, sm_fmt)
    else:
        p_frac = os_fmt.out_frac
        os_regs = online_softmax_registers(s_q, s_k, mha.head_dim, os_fmt)
    op = QuantLinear.from_float(_np(mha.o_proj.weight), _np(mha.o_proj.bias), s_a)
    return QuantAttentionLayer(
        n_heads=mha.n_heads, head_dim=mha.head_dim, s_x=s_x, s_q=s_q, s_k=s_k, s_v=s_v, s_a=s_a,
        q_proj=qp, k_proj=kp, v_proj=vp, o_proj=op,
        rq_q=requant_registers(s_x * qp.s_w / s_q), rq_k=requant_registers(s_x * kp.s_w / s_k),
        rq_v=requant_registers(s_x * vp.s_w / s_v), rq_a=requant_registers(s_v * 2.0**-p_frac / s_a),
        normalizer=normalizer, p_frac=p_frac, swiftmax=sm_regs, online=os_regs, sm_fmt=sm_fmt, os_fmt=os_fmt,
    )


def attention_int(layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray | None = None,
                  x_is_int: bool = False) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Run the integer layer on ``x`` ``(B, S, d)`` (float, quantized with ``s_x``; or raw int8 with
    ``x_is_int``). ``keep`` ``(B, S)`` bool masks padded keys. Returns the dequantized output
    ``(B, S, d)`` and the integer intermediates (``x, q, k, v, s, p, o, a, y``)."""
    if x_is_int:
        xi = np.asarray(x)
        if xi.dtype.kind not in "iu" or (xi.size and (int(xi.min()) < -128 or int(xi.max()) > 127)):
            raise ValueError("x_is_int: the input must hold raw int8 values")
    else:
        xi = quantize_symmetric(x, layer.s_x)
    xi = xi.astype(np.int8)  # raw int8 from here on (saturated by quantize/requantize)
    q = requantize(layer.q_proj.acc(xi), layer.rq_q).astype(np.int8)
    k = requantize(layer.k_proj.acc(xi), layer.rq_k).astype(np.int8)
    v = requantize(layer.v_proj.acc(xi), layer.rq_v).astype(np.int8)
    qh, kh, vh = (_heads(t, layer.n_heads) for t in (q, k, v))
    s = tile_matmul(qh, np.ascontiguousarray(kh.transpose(0, 1, 3, 2)))
    kb = None if keep is None else np.asarray(keep, bool)[:, None, None, :]
    if layer.normalizer == "swiftmax":
        p = swiftmax_int_tabulated(s, layer.swiftmax, kb, layer.sm_fmt)
    else:
        p = online_softmax_int(s, layer.online, kb, layer.os_fmt)
    o = tile_matmul(p, vh, a_fmt=UINT8)
    a = requantize(o, layer.rq_a).astype(np.int8)
    a_flat = a.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[1], -1)
    y = layer.o_proj.acc(a_flat)
    out = y * (layer.s_a * layer.o_proj.s_w)
    return out, {"x": xi, "q": q, "k": k, "v": v, "s": s, "p": p, "o": o, "a": a_flat, "y": y}


def compare(out: np.ndarray, ref: np.ndarray, valid: np.ndarray | None = None) -> dict[str, float]:
    """Relative error ‖out − ref‖/‖ref‖, max abs error and mean per-token cosine over valid tokens."""
    if valid is not None:
        out, ref = out[valid], ref[valid]
    out = out.reshape(-1, out.shape[-1])
    ref = ref.reshape(-1, ref.shape[-1])
    cos = (out * ref).sum(-1) / (np.linalg.norm(out, axis=-1) * np.linalg.norm(ref, axis=-1) + 1e-300)
    return {"rel_error": float(np.linalg.norm(out - ref) / np.linalg.norm(ref)),
            "max_abs_error": float(np.abs(out - ref).max()), "cosine": float(cos.mean()),
            "min_cosine": float(cos.min())}


__all__ = ["QuantLinear", "QuantAttentionLayer", "calibrate_attention", "build_quant_layer", "attention_int",
           "float_attention",
           "compare"]

"""Multi-head attention with a pluggable normalizer; masks, GQA and RoPE.

Shapes (nanoGPT-style, batch first):

* ``q``: ``(B, H, Sq, D)``; ``k``, ``v``: ``(B, Hkv, Sk, D)`` with ``H % Hkv == 0``
  (grouped-query attention: each K/V head serves ``H // Hkv`` query heads).
* ``keep``: bool, broadcastable to ``(B, H, Sq, Sk)``; ``True`` = attend.
* scores ``z = q·k / sqrt(D)`` (or ``scale`` given), natural-log units.

The normalizer (:mod:`.normalizers`) is the only thing that differs between
softmax attention and SwiftMax attention: ``out = normalizer(z, keep) @ v``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .normalizers import Normalizer, Softmax


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """``(B, Hkv, S, D) -> (B, Hkv*n_rep, S, D)``; head ``h`` uses K/V head ``h // n_rep``."""
    if n_rep == 1:
        return x
    b, hkv, s, d = x.shape
    return x[:, :, None].expand(b, hkv, n_rep, s, d).reshape(b, hkv * n_rep, s, d)


def causal_keep(sq: int, sk: int, device: torch.device | None = None) -> Tensor:
    """``(Sq, Sk)`` bool: query i (the last Sq of Sk positions) sees keys ``j <= i + Sk - Sq``."""
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    return j <= i + (sk - sq)


def padding_keep(attention_mask: Tensor) -> Tensor:
    """HF-style ``(B, Sk)`` 1/0 padding mask -> bool keep mask ``(B, 1, 1, Sk)``."""
    return attention_mask.to(torch.bool)[:, None, None, :]


def combine_keep(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of the given keep masks (``None`` entries ignored)."""
    out: Tensor | None = None
    for m in masks:
        if m is not None:
            out = m if out is None else (out & m)
    return out


def attention_scores(q: Tensor, k: Tensor, scale: float | None = None) -> Tensor:
    """``z = scale * q @ k^T`` with GQA expansion; ``scale`` defaults to ``1/sqrt(D)``."""
    if q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"query heads {q.shape[1]} not a multiple of key/value heads {k.shape[1]}")
    k = repeat_kv(k, q.shape[1] // k.shape[1])
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return torch.matmul(q, k.transpose(-1, -2)) * s


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    normalizer: Normalizer | None = None,
    keep: Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention with a pluggable normalizer.

    Returns ``(out, weights)``: ``out`` is ``(B, H, Sq, D)``, ``weights`` ``(B, H, Sq, Sk)``.
    """
    norm = normalizer if normalizer is not None else Softmax()
    z = attention_scores(q, k, scale)
    if causal:
        keep = combine_keep(keep, causal_keep(z.shape[-2], z.shape[-1], z.device))
    w = norm(z, keep)
    out = torch.matmul(w, repeat_kv(v, q.shape[1] // v.shape[1]))
    return out, w


def blockwise_softmax_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    keep: Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    block: int = 16,
) -> Tensor:
    """Flash-style online-softmax attention: one pass over key blocks, rescaling
    the partial output ``acc`` and sum ``l`` whenever the running max ``m`` grows.
    Never materializes a full score row; equals softmax attention up to rounding.
    """
    z_all = attention_scores(q, k, scale)
    if causal:
        keep = combine_keep(keep, causal_keep(z_all.shape[-2], z_all.shape[-1], z_all.device))
    if keep is not None:
        z_all = z_all.masked_fill(~keep.expand_as(z_all), float("-inf"))
    v = repeat_kv(v, q.shape[1] // v.shape[1])
    shape = (*z_all.shape[:-1], 1)
    m = torch.full(shape, float("-inf"), dtype=q.dtype, device=q.device)
    l = torch.zeros(shape, dtype=q.dtype, device=q.device)
    acc = torch.zeros_like(q[..., : v.shape[-1]])
    for start in range(0, z_all.shape[-1], block):
        zb = z_all[..., start : start + block]
        m_new = torch.maximum(m, zb.amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.exp(m - m_safe)
        pb = torch.exp(zb - m_safe)
        l = l * alpha + pb.sum(dim=-1, keepdim=True)
        acc = acc * alpha + torch.matmul(pb, v[..., start : start + block, :])
        m = m_new
    return acc / torch.where(l > 0, l, torch.ones_like(l))


# ----------------------------------------------------------------------------- RoPE


def rope_cos_sin(
    positions: Tensor, head_dim: int, theta: float = 10000.0, dtype: torch.dtype = torch.float32
) -> tuple[Tensor, Tensor]:
    """Rotary embedding tables for integer ``positions`` ``(..., S)`` -> cos, sin ``(..., S, head_dim)``.

    Llama convention (rotate-half): frequency ``theta^(-2i/head_dim)`` for ``i < head_dim/2``,
    the two halves of the head dimension are rotated as a pair.
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = positions.to(torch.float64)[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` over the last dim."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x`` ``(B, H, S, D)`` by tables ``(S, D)`` or ``(B, S, D)``."""
    if cos.dim() == 3:
        cos, sin = cos[:, None], sin[:, None]
    return x * cos + rotate_half(x) * sin


# ----------------------------------------------------------------------------- module


class MultiHeadAttention(nn.Module):
    """Projections + attention core + output projection.

    Args:
        d_model: hidden size.
        n_heads: query heads H.
        n_kv_heads: key/value heads (GQA); defaults to ``n_heads``.
        head_dim: per-head size D; defaults to ``d_model // n_heads``.
        bias: biases on the four projections (BERT/ViT: True; Llama: False).
        normalizer: the attention normalizer (default softmax).

    ``forward(x, keep=None, causal=False, rope=None) -> (B, S, d_model)`` with
    ``rope = (cos, sin)`` tables when rotary embeddings are used. The last
    attention weights are kept in ``self.last_weights`` only when
    ``self.record_weights`` is set (for statistics collection).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        bias: bool = True,
        normalizer: Normalizer | None = None,
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={n_heads} must be a multiple of n_kv_heads={self.n_kv_heads}")
        self.head_dim = head_dim or d_model // n_heads
        self.q_proj = nn.Linear(d_model, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, d_model, bias=bias)
        self.normalizer = normalizer if normalizer is not None else Softmax()
        self.record_weights = False
        self.last_weights: Tensor | None = None

    def forward(
        self,
        x: Tensor,
        keep: Tensor | None = None,
        causal: bool = False,
        rope: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        out, w = attention(q, k, v, self.normalizer, keep=keep, causal=causal)
        self.last_weights = w.detach() if self.record_weights else None
        return self.o_proj(out.transpose(1, 2).reshape(b, s, self.n_heads * self.head_dim))

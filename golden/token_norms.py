"""Normalization layers over the hidden dimension (last axis), per token.

* :class:`LayerNorm` — ``(x - mean) / sqrt(var + eps) * weight + bias`` (biased variance).
* :class:`RMSNorm` — ``x / sqrt(mean(x^2) + eps) * weight``.
* :class:`DyT` — Dynamic Tanh (Zhu et al. 2025): ``weight * tanh(alpha * x) + bias``,
  ``alpha`` a learnable scalar (init 0.5; the LLaMA variant has no bias).
* :class:`LNS` — LayerNorm Scaling (Sun et al. 2025): the wrapped norm's output of
  layer ``l`` (1-based) times ``1/sqrt(l)``.
* :class:`PeriLN` — Peri-LN (Kim et al. 2025): ``x + norm_out(F(norm_in(x)))``.

BHyT lives in :mod:`.bhyt`. Reductions are computed in the input dtype (tests use
float64); ``eps`` is added to the variance (not to the standard deviation).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn


def layer_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last dim (biased variance, ``eps`` inside the sqrt)."""
    mu = x.mean(dim=-1, keepdim=True)
    var = (x - mu).pow(2).mean(dim=-1, keepdim=True)
    y = (x - mu) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x: Tensor, weight: Tensor | None, eps: float = 1e-6) -> Tensor:
    """RMSNorm over the last dim: ``x * rsqrt(mean(x^2) + eps) * weight``."""
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return y * weight if weight is not None else y


def dyt(x: Tensor, alpha: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """Dynamic Tanh: ``weight * tanh(alpha * x) + bias``. No reduction."""
    y = torch.tanh(alpha * x)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


class LayerNorm(nn.Module):
    """LayerNorm with learnable ``weight`` (init 1) and ``bias`` (init 0)."""

    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """RMSNorm with learnable ``weight`` (init 1)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps)


class DyT(nn.Module):
    """Dynamic Tanh ``weight * tanh(alpha * x) + bias``.

    Args:
        dim: hidden size.
        alpha_init: initial scalar alpha (0.5 for ViT-style models; the LLaMA recipe
            uses per-site values, e.g. 7B: attention 0.8, FFN 0.2, final 0.2).
        bias: whether to learn a bias (the LLaMA variant has none).
    """

    def __init__(self, dim: int, alpha_init: float = 0.5, bias: bool = True) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return dyt(x, self.alpha, self.weight, self.bias)


class LNS(nn.Module):
    """LayerNorm Scaling: ``norm(x) / sqrt(layer)`` for a 1-based layer index."""

    def __init__(self, norm: nn.Module, layer: int) -> None:
        super().__init__()
        if layer < 1:
            raise ValueError(f"LNS layer index is 1-based, got {layer}")
        self.norm = norm
        self.layer = layer
        self.scale = 1.0 / math.sqrt(layer)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x) * self.scale

    def extra_repr(self) -> str:
        return f"layer={self.layer}"


class PeriLN(nn.Module):
    """Peri-LN residual sublayer ``x + norm_out(fn(norm_in(x), ...))``."""

    def __init__(self, norm_in: nn.Module, fn: nn.Module | Callable[..., Tensor], norm_out: nn.Module) -> None:
        super().__init__()
        self.norm_in = norm_in
        self.fn = fn
        self.norm_out = norm_out

    def forward(self, x: Tensor, *args: object, **kwargs: object) -> Tensor:
        return x + self.norm_out(self.fn(self.norm_in(x), *args, **kwargs))


def make_norm(kind: str, dim: int, eps: float = 1e-6, layer: int = 1, alpha_init: float = 0.5) -> nn.Module:
    """Build a standalone norm by name: ``layernorm``, ``rmsnorm``, ``dyt``, ``lns`` (LNS over RMSNorm)."""
    if kind == "layernorm":
        return LayerNorm(dim, eps)
    if kind == "rmsnorm":
        return RMSNorm(dim, eps)
    if kind == "dyt":
        return DyT(dim, alpha_init)
    if kind == "lns":
        return LNS(RMSNorm(dim, eps), layer)
    raise ValueError(f"unknown norm {kind!r}; choose layernorm, rmsnorm, dyt or lns")

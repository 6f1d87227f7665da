"""BHyT — Bounded Hyperbolic Tangent normalization (docs/methods.md §3).

The full description: ``docs/internals/golden.md``, section ``golden/bhyt.py``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

BHYT_EPS = 1e-6
DEFAULT_KAPPA = 10.0
DEFAULT_LAM_ATTN = 2.0
DEFAULT_LAM_MLP = 1.0


def mean_square(x: Tensor) -> Tensor:
    """``s² = mean(x²)`` over the last dim, keepdim (the one reduction of a BHyT block)."""
    return x.pow(2).mean(dim=-1, keepdim=True)


def bhyt_from_stat(
    x: Tensor, s2: Tensor, weight: Tensor | None, lam: Tensor | float, kappa: float, eps: float = BHYT_EPS
) -> Tensor:
    """``γ ⊙ tanh(λ · x / (κ · sqrt(s2 + eps)))`` for a given per-token statistic ``s2``."""
    y = torch.tanh(lam * x * torch.rsqrt(s2 + eps) / kappa)
    return y * weight if weight is not None else y


def bhyt(x: Tensor, weight: Tensor | None, lam: Tensor | float, kappa: float = DEFAULT_KAPPA,
         eps: float = BHYT_EPS) -> Tensor:
    """BHyT with its own exact zero-mean statistic ``s² = mean(x²)``."""
    return bhyt_from_stat(x, mean_square(x), weight, lam, kappa, eps)


def bhyt_star_exact(x: Tensor, weight: Tensor | None, lam: Tensor | float, kappa: float = DEFAULT_KAPPA,
                    eps: float = BHYT_EPS) -> Tensor:
    """Exact BHyT*: ``γ ⊙ tanh(α x)``, ``α = λ / (κ sqrt(var_x + eps) + |mean_x|)``.

    By Chebyshev, ``P(|x - μ| < κσ) ≥ 1 - 1/κ²`` so ``|α x| ≤ λ`` for at least
    99% of the entries when κ = 10.
    """
    mu = x.mean(dim=-1, keepdim=True)
    sd = torch.sqrt((x - mu).pow(2).mean(dim=-1, keepdim=True) + eps)
    y = torch.tanh(lam * x / (kappa * sd + mu.abs()))
    return y * weight if weight is not None else y


def approx_variance(s2: Tensor, c_attn: Tensor | float, lam_attn: Tensor | float, kappa: float) -> Tensor:
    """``ŝ² = s² + c_attn · λ_A² / κ²``; ``λ_A`` is detached (no gradient through the constant)."""
    lam = lam_attn.detach() if isinstance(lam_attn, Tensor) else lam_attn
    return s2 + c_attn * lam * lam / (kappa * kappa)


def expand_gqa_value_weight(w_v: Tensor, n_heads: int, n_kv_heads: int) -> Tensor:
    """Expand a ``(n_kv_heads*hd, d)`` value projection to ``(n_heads*hd, d)``.

    Query head ``h`` reads value head ``h // (n_heads // n_kv_heads)`` (the
    ``repeat_kv`` convention of Llama/HF).
    """
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must be a multiple of n_kv_heads={n_kv_heads}")
    rows, d = w_v.shape
    hd = rows // n_kv_heads
    if hd * n_kv_heads != rows:
        raise ValueError(f"value weight rows {rows} not divisible by n_kv_heads={n_kv_heads}")
    return w_v.reshape(n_kv_heads, hd, d).repeat_interleave(n_heads // n_kv_heads, dim=0).reshape(-1, d)


def c_attn_from_weights(w_v: Tensor, w_o: Tensor, n_heads: int, n_kv_heads: int, seq_len: int) -> Tensor:
    """Theorem 3.4 constant ``c_attn = ‖W_V W_O‖_F² / (T · d)`` (float64 scalar).

    Args:
        w_v: value projection weight in ``nn.Linear`` layout ``(n_kv_heads*hd, d)``.
        w_o: output projection weight in ``nn.Linear`` layout ``(d, n_heads*hd)``.
        n_heads, n_kv_heads: query and key/value head counts (GQA when different).
        seq_len: T, the fixed (maximum/cutoff) sequence length.

    In the math layout ``W_V = w_v_expanded.T`` (d × H·hd) and ``W_O = w_o.T``.
    """
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    wv = expand_gqa_value_weight(w_v.detach().to(torch.float64), n_heads, n_kv_heads)
    wo = w_o.detach().to(torch.float64)
    d = wv.shape[1]
    w_vo = wv.T @ wo.T  # (d, d)
    return (w_vo.pow(2).sum() / (seq_len * d)).detach()


def c_attn_refresh_interval(total_steps: int) -> int:
    """Steps between ``c_attn`` refreshes during training: ``max(1, min(1000, steps // 50))``."""
    return max(1, min(1000, total_steps // 50))


class BHyTNorm(nn.Module):
    """A standalone BHyT site with its own exact statistic.

    ``form="zero_mean"`` (default; the official code's ``BHyT_Star``) uses
    ``s² = mean(x²)``; ``form="mean_std"`` is the exact Chebyshev form
    :func:`bhyt_star_exact`.
    """

    def __init__(self, dim: int, lam_init: float = DEFAULT_LAM_ATTN, kappa: float = DEFAULT_KAPPA,
                 eps: float = BHYT_EPS, form: str = "zero_mean") -> None:
        super().__init__()
        if form not in ("zero_mean", "mean_std"):
            raise ValueError(f"form must be 'zero_mean' or 'mean_std', got {form!r}")
        self.lam = nn.Parameter(torch.tensor(float(lam_init)))
        self.weight = nn.Parameter(torch.ones(dim))
        self.kappa = kappa
        self.eps = eps
        self.form = form

    def forward(self, x: Tensor) -> Tensor:
        lam = self.lam.to(x.dtype)
        if self.form == "zero_mean":
            return bhyt(x, self.weight, lam, self.kappa, self.eps)
        return bhyt_star_exact(x, self.weight, lam, self.kappa, self.eps)

    def extra_repr(self) -> str:
        return f"kappa={self.kappa}, form={self.form}"


class BHyTBlockNorms(nn.Module):
    """The two BHyT sites of one pre-norm transformer block.

    Usage inside a block with residual input ``h``::

        u, s2 = norms.attn_site(h)           # the only reduction: s2 = mean(h^2)
        h = h + attn(u)
        v = norms.mlp_site(h, s2)             # ŝ² = s2 + c_attn λ_A²/κ², no reduction
        h = h + mlp(v)

    ``c_attn`` is a non-trainable buffer (saved with the model) that
    :meth:`refresh_c_attn` recomputes from the block's W_V and W_O.
    """

    def __init__(
        self,
        dim: int,
        lam_attn: float = DEFAULT_LAM_ATTN,
        lam_mlp: float = DEFAULT_LAM_MLP,
        kappa: float = DEFAULT_KAPPA,
        seq_len: int = 1024,
        eps: float = BHYT_EPS,
        exact_second_stat: bool = False,
    ) -> None:
        super().__init__()
        self.lam_attn = nn.Parameter(torch.tensor(float(lam_attn)))
        self.lam_mlp = nn.Parameter(torch.tensor(float(lam_mlp)))
        self.weight_attn = nn.Parameter(torch.ones(dim))
        self.weight_mlp = nn.Parameter(torch.ones(dim))
        self.register_buffer("c_attn", torch.tensor(0.0))
        self.kappa = kappa
        self.seq_len = seq_len
        self.eps = eps
        self.exact_second_stat = exact_second_stat

    def attn_site(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """First site: returns ``(u, s2)``, the attention input and the block statistic."""
        s2 = mean_square(h)
        return bhyt_from_stat(h, s2, self.weight_attn, self.lam_attn.to(h.dtype), self.kappa, self.eps), s2

    def second_stat(self, h_mid: Tensor, s2: Tensor) -> Tensor:
        """The second site's statistic: ŝ² (approximate) or mean(h'²) when ``exact_second_stat``."""
        if self.exact_second_stat:
            return mean_square(h_mid)
        return approx_variance(s2, self.c_attn.to(s2.dtype), self.lam_attn.to(s2.dtype), self.kappa)

    def mlp_site(self, h_mid: Tensor, s2: Tensor) -> Tensor:
        """Second site on ``h' = h + Attn(u)`` using the block statistic ``s2`` of ``h``."""
        return bhyt_from_stat(h_mid, self.second_stat(h_mid, s2), self.weight_mlp,
                              self.lam_mlp.to(h_mid.dtype), self.kappa, self.eps)

    @torch.no_grad()
    def refresh_c_attn(self, w_v: Tensor, w_o: Tensor, n_heads: int, n_kv_heads: int) -> float:
        """Recompute ``c_attn`` from the block's value/output projection weights; returns it."""
        c = c_attn_from_weights(w_v, w_o, n_heads, n_kv_heads, self.seq_len)
        self.c_attn.copy_(c.to(self.c_attn.dtype))
        return float(c)

    def extra_repr(self) -> str:
        return f"kappa={self.kappa}, seq_len={self.seq_len}, exact_second_stat={self.exact_second_stat}"

"""Transformer blocks with a pluggable attention normalizer and norm.

* :class:`BertLayer` — post-LN encoder layer (BERT/MiniLM): padding masks, GELU MLP.
* :class:`LlamaBlock` — pre-norm decoder block: causal, RoPE, GQA, SwiGLU MLP;
  norm one of ``rmsnorm``, ``layernorm``, ``dyt``, ``lns``, ``periln``, ``bhyt``
  (BHyT block form, approximate second statistic) or ``bhytstar`` (exact statistic
  at both sites).
* :class:`ViTBlock` — pre-LN encoder block (no mask).

Each block can copy the weights of the matching Hugging Face layer with
``load_hf(layer)`` (no import of transformers here: only parameter names).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention, rope_cos_sin
from .bhyt import DEFAULT_KAPPA, DEFAULT_LAM_ATTN, DEFAULT_LAM_MLP, BHyTBlockNorms
from .normalizers import Normalizer
from .token_norms import LNS, DyT, LayerNorm, RMSNorm


def _copy_named(dst: nn.Module, src: nn.Module, names: dict[str, str]) -> None:
    """Copy ``src``'s tensors into ``dst`` by a ``{dst_name: src_name}`` map, strictly."""
    src_state = src.state_dict()
    dst_state = dst.state_dict()
    for d_name, s_name in names.items():
        if s_name not in src_state:
            raise KeyError(f"source layer has no tensor {s_name!r} (needed for {d_name!r})")
        if d_name not in dst_state:
            raise KeyError(f"golden block has no tensor {d_name!r}")
        if src_state[s_name].shape != dst_state[d_name].shape:
            raise ValueError(
                f"shape mismatch {s_name} {tuple(src_state[s_name].shape)} -> {d_name} {tuple(dst_state[d_name].shape)}"
            )
        dst_state[d_name] = src_state[s_name].detach().clone().to(dst_state[d_name].dtype)
    dst.load_state_dict(dst_state)


def _linear_names(dst_prefix: str, src_prefix: str, bias: bool) -> dict[str, str]:
    out = {f"{dst_prefix}.weight": f"{src_prefix}.weight"}
    if bias:
        out[f"{dst_prefix}.bias"] = f"{src_prefix}.bias"
    return out


class BertLayer(nn.Module):
    """BERT encoder layer (post-LN): ``h = LN(x + Attn(x)); out = LN(h + W2 gelu(W1 h))``.

    Args:
        d_model, n_heads, d_ff: sizes (MiniLM-L6: 384, 12, 1536).
        eps: LayerNorm epsilon (BERT: 1e-12).
        normalizer: attention normalizer (default softmax).
        norm: ``"layernorm"`` (default) or ``"dyt"`` (DyT in place of both LayerNorms).

    ``forward(x, keep)``: ``x`` is ``(B, S, d_model)``, ``keep`` a bool padding mask
    broadcastable to ``(B, H, S, S)`` (see :func:`.attention.padding_keep`).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, eps: float = 1e-12,
                 normalizer: Normalizer | None = None, norm: str = "layernorm") -> None:
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads, bias=True, normalizer=normalizer)
        self.norm1 = _make_simple_norm(norm, d_model, eps)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.norm2 = _make_simple_norm(norm, d_model, eps)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        h = self.norm1(x + self.attn(x, keep=keep))
        return self.norm2(h + self.fc2(F.gelu(self.fc1(h))))

    def load_hf(self, layer: nn.Module) -> BertLayer:
        """Copy the weights of a Hugging Face ``BertLayer``."""
        names: dict[str, str] = {}
        for g, h in (("q_proj", "query"), ("k_proj", "key"), ("v_proj", "value")):
            names |= _linear_names(f"attn.{g}", f"attention.self.{h}", True)
        names |= _linear_names("attn.o_proj", "attention.output.dense", True)
        names |= {"norm1.weight": "attention.output.LayerNorm.weight", "norm1.bias": "attention.output.LayerNorm.bias"}
        names |= _linear_names("fc1", "intermediate.dense", True)
        names |= _linear_names("fc2", "output.dense", True)
        names |= {"norm2.weight": "output.LayerNorm.weight", "norm2.bias": "output.LayerNorm.bias"}
        _copy_named(self, layer, names)
        return self


class ViTBlock(nn.Module):
    """ViT encoder block (pre-LN): ``h = x + Attn(LN(x)); out = h + W2 gelu(W1 LN(h))``."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, eps: float = 1e-12,
                 normalizer: Normalizer | None = None, norm: str = "layernorm") -> None:
        super().__init__()
        self.norm1 = _make_simple_norm(norm, d_model, eps)
        self.attn = MultiHeadAttention(d_model, n_heads, bias=True, normalizer=normalizer)
        self.norm2 = _make_simple_norm(norm, d_model, eps)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        h = x + self.attn(self.norm1(x), keep=keep)
        return h + self.fc2(F.gelu(self.fc1(self.norm2(h))))

    def load_hf(self, layer: nn.Module) -> ViTBlock:
        """Copy the weights of a Hugging Face ``ViTLayer`` (transformers 5 layout)."""
        names: dict[str, str] = {}
        for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
            names |= _linear_names(f"attn.{p}", f"attention.{p}", True)
        names |= {"norm1.weight": "layernorm_before.weight", "norm1.bias": "layernorm_before.bias",
                  "norm2.weight": "layernorm_after.weight", "norm2.bias": "layernorm_after.bias"}
        names |= _linear_names("fc1", "mlp.fc1", True)
        names |= _linear_names("fc2", "mlp.fc2", True)
        _copy_named(self, layer, names)
        return self


LLAMA_NORMS = ("rmsnorm", "layernorm", "dyt", "lns", "periln", "bhyt", "bhytstar")


class LlamaBlock(nn.Module):
    """Llama decoder block (pre-norm, causal, RoPE, GQA, SwiGLU MLP).

    Args:
        d_model, n_heads, n_kv_heads, d_ff: sizes (SmolLM2-135M: 576, 9, 3, 1536).
        norm: one of :data:`LLAMA_NORMS`:
            ``rmsnorm`` / ``layernorm`` / ``dyt`` — both sites use that norm;
            ``lns`` — RMSNorm scaled by ``1/sqrt(layer)`` (``layer`` is 1-based);
            ``periln`` — Peri-LN: RMSNorm before and after each sublayer, inside the residual;
            ``bhyt`` — BHyT block form (one reduction; second site uses ŝ² = s² + c_attn λ_A²/κ²);
            ``bhytstar`` — BHyT with the exact statistic at both sites.
        eps: RMSNorm epsilon. rope_theta: RoPE base.
        normalizer: attention normalizer (default softmax).
        lam_attn, lam_mlp, kappa, seq_len: BHyT parameters (seq_len is T of c_attn).
        dyt_alpha: (attention, MLP) initial alphas for ``dyt`` (LLaMA-7B recipe 0.8, 0.2).

    ``forward(x, keep=None, positions=None)``: ``x`` ``(B, S, d_model)``; the causal
    mask is always applied, ``keep`` may add padding; ``positions`` ``(S,)`` or
    ``(B, S)`` defaults to ``0..S-1``; ``rope = (cos, sin)`` supplies the rotary
    tables directly (e.g. Hugging Face's, which it computes in float32).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        d_ff: int | None = None,
        norm: str = "rmsnorm",
        eps: float = 1e-6,
        rope_theta: float = 10000.0,
        normalizer: Normalizer | None = None,
        layer: int = 1,
        lam_attn: float = DEFAULT_LAM_ATTN,
        lam_mlp: float = DEFAULT_LAM_MLP,
        kappa: float = DEFAULT_KAPPA,
        seq_len: int = 1024,
        dyt_alpha: tuple[float, float] = (0.8, 0.2),
    ) -> None:
        super().__init__()
        if norm not in LLAMA_NORMS:
            raise ValueError(f"unknown norm {norm!r}; choose one of {LLAMA_NORMS}")
        self.norm_kind = norm
        self.rope_theta = rope_theta
        d_ff = d_ff or 4 * d_model
        self.attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=False, normalizer=normalizer)
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)
        if norm in ("bhyt", "bhytstar"):
            self.bhyt = BHyTBlockNorms(d_model, lam_attn, lam_mlp, kappa, seq_len,
                                       exact_second_stat=(norm == "bhytstar"))
        elif norm == "dyt":
            self.norm1, self.norm2 = DyT(d_model, dyt_alpha[0], bias=False), DyT(d_model, dyt_alpha[1], bias=False)
        elif norm == "lns":
            self.norm1, self.norm2 = LNS(RMSNorm(d_model, eps), layer), LNS(RMSNorm(d_model, eps), layer)
        elif norm == "layernorm":
            self.norm1, self.norm2 = LayerNorm(d_model, eps, bias=False), LayerNorm(d_model, eps, bias=False)
        else:  # rmsnorm, periln
            self.norm1, self.norm2 = RMSNorm(d_model, eps), RMSNorm(d_model, eps)
        if norm == "periln":
            self.norm1_out, self.norm2_out = RMSNorm(d_model, eps), RMSNorm(d_model, eps)

    def mlp(self, x: Tensor) -> Tensor:
        """SwiGLU: ``down(silu(gate(x)) * up(x))``."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def forward(self, x: Tensor, keep: Tensor | None = None, positions: Tensor | None = None,
                rope: tuple[Tensor, Tensor] | None = None) -> Tensor:
        if rope is None:
            if positions is None:
                positions = torch.arange(x.shape[1], device=x.device)
            rope = rope_cos_sin(positions, self.attn.head_dim, self.rope_theta, x.dtype)

        def attn(u: Tensor) -> Tensor:
            return self.attn(u, keep=keep, causal=True, rope=rope)

        if self.norm_kind in ("bhyt", "bhytstar"):
            u, s2 = self.bhyt.attn_site(x)
            h = x + attn(u)
            return h + self.mlp(self.bhyt.mlp_site(h, s2))
        if self.norm_kind == "periln":
            h = x + self.norm1_out(attn(self.norm1(x)))
            return h + self.norm2_out(self.mlp(self.norm2(h)))
        h = x + attn(self.norm1(x))
        return h + self.mlp(self.norm2(h))

    @torch.no_grad()
    def refresh_c_attn(self) -> float:
        """Recompute the BHyT ``c_attn`` constant from this block's W_V, W_O."""
        if self.norm_kind not in ("bhyt", "bhytstar"):
            raise ValueError(f"refresh_c_attn needs a BHyT block, this one uses {self.norm_kind}")
        a = self.attn
        return self.bhyt.refresh_c_attn(a.v_proj.weight, a.o_proj.weight, a.n_heads, a.n_kv_heads)

    def load_hf(self, layer: nn.Module) -> LlamaBlock:
        """Copy the weights of a Hugging Face ``LlamaDecoderLayer`` (norm weights too when RMSNorm)."""
        names: dict[str, str] = {}
        for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
            names |= _linear_names(f"attn.{p}", f"self_attn.{p}", False)
        for p in ("gate_proj", "up_proj", "down_proj"):
            names |= _linear_names(p, f"mlp.{p}", False)
        if self.norm_kind == "rmsnorm":
            names |= {"norm1.weight": "input_layernorm.weight", "norm2.weight": "post_attention_layernorm.weight"}
        _copy_named(self, layer, names)
        return self


def _make_simple_norm(kind: str, dim: int, eps: float) -> nn.Module:
    if kind == "layernorm":
        return LayerNorm(dim, eps)
    if kind == "dyt":
        return DyT(dim, 0.5, bias=True)
    raise ValueError(f"unknown norm {kind!r} for an encoder block; choose layernorm or dyt")

"""Training helpers for BHyT models (docs/methods.md §3).

The full description: ``docs/internals/golden.md``, section ``golden/bhyt_train.py``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .bhyt import c_attn_refresh_interval
from .blocks import LlamaBlock
from .token_norms import DyT, RMSNorm

BHYT_KINDS = ("bhyt", "bhytstar")


def bhyt_blocks(model: nn.Module) -> list[LlamaBlock]:
    """The golden BHyT ``LlamaBlock`` s of ``model`` (in module order)."""
    return [m for m in model.modules() if isinstance(m, LlamaBlock) and m.norm_kind in BHYT_KINDS]


@torch.no_grad()
def refresh_all_c_attn(model: nn.Module) -> dict[int, float]:
    """Recompute ``c_attn`` of every BHyT block of a golden or converted HF Llama model.

    Returns ``{block index: c_attn}`` (index among the BHyT blocks for golden models,
    the decoder-layer index for Hugging Face models). ValueError if there is none.
    """
    blocks = bhyt_blocks(model)
    if blocks:
        return {i: blk.refresh_c_attn() for i, blk in enumerate(blocks)}
    if getattr(getattr(model, "config", None), "model_type", None) == "llama":
        from .convert import refresh_bhyt_c_attn

        out = refresh_bhyt_c_attn(model)
        if out:
            return out
    raise ValueError("the model has no BHyT blocks (golden LlamaBlock(norm='bhyt') or a converted HF Llama)")


class CAttnRefresh:
    """Recompute BHyT ``c_attn`` from the current W_V·W_O every ``interval`` optimizer steps.

    Args:
        model: a golden model with BHyT blocks or a converted HF Llama.
        total_steps: planned optimizer steps; ``interval`` defaults to
            ``c_attn_refresh_interval(total_steps)``.
        interval: override the refresh period (steps).

    Call :meth:`on_step` with the number of optimizer steps completed so far
    (1-based, after ``optimizer.step()``); it refreshes when ``step % interval == 0``.
    ``history`` holds ``(step, {block: c_attn})`` of every refresh, step 0 being
    the refresh at construction (``c_attn`` buffers start at 0).
    """

    def __init__(self, model: nn.Module, total_steps: int, interval: int | None = None) -> None:
        if interval is not None and interval < 1:
            raise ValueError(f"interval must be >= 1, got {interval}")
        self.model = model
        self.interval = int(interval) if interval is not None else c_attn_refresh_interval(total_steps)
        self.history: list[tuple[int, dict[int, float]]] = []
        self.refresh(0)

    def refresh(self, step: int) -> dict[int, float]:
        """Recompute now (under no_grad) and record ``step``; returns ``{block: c_attn}``."""
        values = refresh_all_c_attn(self.model)
        self.history.append((int(step), values))
        return values

    def on_step(self, step: int) -> dict[int, float] | None:
        """After optimizer step ``step`` (1-based): refresh if it is a multiple of ``interval``."""
        if step > 0 and step % self.interval == 0:
            return self.refresh(step)
        return None

    @property
    def refresh_steps(self) -> list[int]:
        """Steps at which ``c_attn`` was recomputed (0 = construction)."""
        return [s for s, _ in self.history]


def hf_trainer_callback(model: nn.Module, interval: int | None = None):
    """A ``transformers.TrainerCallback`` running :class:`CAttnRefresh` on ``state.global_step``.

    The interval defaults to ``c_attn_refresh_interval(state.max_steps)`` at ``on_train_begin``.
    """
    from transformers import TrainerCallback

    class _CAttnRefreshCallback(TrainerCallback):
        def __init__(self) -> None:
            self.refresher: CAttnRefresh | None = None

        def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
            self.refresher = CAttnRefresh(model, int(state.max_steps), interval)

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            if self.refresher is not None:
                self.refresher.on_step(int(state.global_step))

    return _CAttnRefreshCallback()


# ----------------------------------------------------------------------------- a small decoder


class TinyDecoder(nn.Module):
    """GPT-style decoder: embedding -> ``n_layers`` golden ``LlamaBlock`` s -> final norm -> tied head.

    Args:
        vocab_size: tokens (256 for UTF-8 bytes).
        n_layers, d_model, n_heads, d_ff: sizes (d_ff defaults to 2·d_model, SwiGLU).
        norm: ``rmsnorm`` | ``dyt`` | ``bhyt`` (any of ``blocks.LLAMA_NORMS``); the final norm is
            RMSNorm, except DyT (α 0.2) for ``dyt`` models (the DyT recipe replaces every norm).
        seq_len: training context length, also T of BHyT's ``c_attn``.
        init_std: std of the normal init of all weights; the residual output projections
            (``o_proj``, ``down_proj``) use ``init_std / sqrt(2 n_layers)`` (GPT-2).

    ``forward(idx)`` with int64 ``idx`` ``(B, S)`` returns logits ``(B, S, vocab_size)``.
    """

    def __init__(self, vocab_size: int = 256, n_layers: int = 12, d_model: int = 256, n_heads: int = 4,
                 d_ff: int | None = None, norm: str = "rmsnorm", seq_len: int = 128, init_std: float = 0.02,
                 **block_kwargs: object) -> None:
        super().__init__()
        self.block_kwargs = {"d_model": d_model, "n_heads": n_heads, "n_kv_heads": n_heads,
                             "d_ff": d_ff or 2 * d_model, "norm": norm, "seq_len": seq_len, **block_kwargs}
        self.vocab_size, self.seq_len = vocab_size, seq_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(LlamaBlock(**self.block_kwargs) for _ in range(n_layers))
        self.final_norm = DyT(d_model, 0.2, bias=False) if norm == "dyt" else RMSNorm(d_model)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = init_std / math.sqrt(2 * n_layers) if name.endswith(("o_proj.weight", "down_proj.weight")) \
                    else init_std
                nn.init.normal_(p, 0.0, std)
        for blk in self.layers:  # c_attn buffers start at 0: make them match the initial weights
            if blk.norm_kind in BHYT_KINDS:
                blk.refresh_c_attn()

    def hidden(self, idx: Tensor) -> list[Tensor]:
        """Residual stream ``[embedding, after block 1, …, after block L]``, each ``(B, S, d)``."""
        hs = [self.embed(idx)]
        for blk in self.layers:
            hs.append(blk(hs[-1]))
        return hs

    def forward(self, idx: Tensor) -> Tensor:
        h = self.embed(idx)
        for blk in self.layers:
            h = blk(h)
        return self.final_norm(h) @ self.embed.weight.T

    def golden_checkpoint(self) -> tuple[dict, dict[str, Tensor]]:
        """``(config, state_dict)`` of the embedding + blocks as a ``GoldenStack`` (no final norm/head)."""
        config = {"family": "llama", "num_layers": len(self.layers), "vocab_size": self.vocab_size,
                  "max_seq_len": self.seq_len, "block": dict(self.block_kwargs)}
        state = {k: v for k, v in self.state_dict().items() if k.startswith(("embed.", "layers."))}
        return config, state

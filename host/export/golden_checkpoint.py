"""Golden checkpoints: the project's own float blocks as a ``.pt`` the exporter reads.

Format (written by :func:`save_golden_checkpoint`): a ``torch.save`` dict::

    {"vckattn_golden": 1,
     "config": {"family": "llama" | "bert" | "vit", "num_layers": N,
                "block": {keyword arguments of LlamaBlock / BertLayer / ViTBlock: d_model, n_heads, …},
                "vocab_size": V or None, "max_seq_len": T (optional)},
     "state_dict": the state dict of :class:`GoldenStack` (``layers.{i}.…``, optional ``embed.weight``)}

A golden stack with an embedding (``vocab_size`` ≥ 256) is calibrated on the UTF-8 bytes of the
calibration sentences (token id = byte value); without one, on seeded N(0, 1) hidden states
(:mod:`.capture`). SwiftMax layers are ``layers.N.attn.normalizer.beta/gamma``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor, nn

from vckattn.golden.blocks import BertLayer, LlamaBlock, ViTBlock
from vckattn.golden.normalizers import SwiftMax

from .common import ExportError, first_line

GOLDEN_KEY = "vckattn_golden"
GOLDEN_VERSION = 1

_GOLDEN_BLOCKS: dict[str, type[nn.Module]] = {"llama": LlamaBlock, "bert": BertLayer, "vit": ViTBlock}


class GoldenStack(nn.Module):
    """``num_layers`` golden blocks of one family (+ an optional token embedding).

    ``forward(x, keep)``: ``x`` float ``(B, S, d)`` hidden states or int64 ``(B, S)`` token ids
    (needs the embedding), ``keep`` ``(B, S)`` bool padding mask (None: all valid).
    """

    def __init__(self, config: dict) -> None:
        super().__init__()
        check_golden_config(config)
        self.family = config["family"]
        block = dict(config["block"])
        cls = _GOLDEN_BLOCKS[self.family]
        layers = []
        for i in range(int(config["num_layers"])):
            kw = dict(block)
            if self.family == "llama" and block.get("norm") == "lns":
                kw["layer"] = i + 1
            layers.append(cls(**kw))
        self.layers = nn.ModuleList(layers)
        vocab = config.get("vocab_size")
        self.embed = nn.Embedding(int(vocab), int(block["d_model"])) if vocab else None

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        if x.dtype in (torch.int32, torch.int64):
            if self.embed is None:
                raise ValueError("this golden stack has no embedding: pass hidden states")
            x = self.embed(x)
        k4 = None if keep is None else keep.to(torch.bool)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, keep=k4)
        return x


def check_golden_config(config: object) -> None:
    """ExportError unless ``config`` is a usable golden-checkpoint ``config`` (family, num_layers, block)."""
    if not isinstance(config, dict):
        raise ExportError("golden checkpoint: `config` must be a dict")
    fam = config.get("family")
    if fam not in _GOLDEN_BLOCKS:
        raise ExportError(f"golden checkpoint: unsupported family {fam!r}; choose one of {sorted(_GOLDEN_BLOCKS)}")
    n = config.get("num_layers")
    if not isinstance(n, int) or n < 1:
        raise ExportError(f"golden checkpoint: num_layers must be a positive integer, got {n!r}")
    block = config.get("block")
    if not isinstance(block, dict) or not {"d_model", "n_heads"} <= set(block):
        raise ExportError("golden checkpoint: `block` must be a dict with at least d_model and n_heads")


def save_golden_checkpoint(path: Path | str, blocks_config: dict, state_dict: dict[str, Tensor]) -> Path:
    """Write a golden checkpoint (format in the module docstring) that ``export_checkpoint`` reads.

    ``blocks_config``: ``{"family", "num_layers", "block": {…block kwargs…}, "vocab_size"?, "max_seq_len"?}``;
    ``state_dict``: of a :class:`GoldenStack` built from that config (checked by loading it).
    """
    check_golden_config(blocks_config)
    config = json.loads(json.dumps(blocks_config))  # plain JSON types only
    sd = {k: v.detach().cpu().clone() for k, v in state_dict.items()}
    build_golden_stack(config, sd)  # fails here, not at export time, if they do not match
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({GOLDEN_KEY: GOLDEN_VERSION, "config": config, "state_dict": sd}, path)
    return path


def build_golden_stack(config: dict, state_dict: dict[str, Tensor]) -> GoldenStack:
    """The :class:`GoldenStack` of ``config`` with ``state_dict`` loaded (SwiftMax layers where it has β/γ), eval."""
    stack = GoldenStack(config)
    for i, layer in enumerate(stack.layers):
        beta = state_dict.get(f"layers.{i}.attn.normalizer.beta")
        gamma = state_dict.get(f"layers.{i}.attn.normalizer.gamma")
        if beta is not None and gamma is not None:
            heads = None if beta.dim() == 0 else int(beta.shape[0])
            layer.attn.normalizer = SwiftMax(1.0, 1.0, heads)
    try:
        stack.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        raise ExportError(f"golden checkpoint: state dict does not match its config ({first_line(exc)})") from None
    return stack.eval()


__all__ = ["GOLDEN_KEY", "GOLDEN_VERSION", "GoldenStack", "build_golden_stack", "check_golden_config",
           "save_golden_checkpoint"]

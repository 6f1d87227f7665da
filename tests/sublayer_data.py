"""Real sublayer data for the PL units' tests: one MiniLM encoder sublayer (golden/sublayer.py) calibrated and run
on real sentences, and one decoder sublayer of the BHyT-converted SmolLM2 (slow), each with its integer trace."""

from __future__ import annotations

import functools

import numpy as np
import torch
from conftest import require_module


@functools.cache
def minilm_layer(index: int = 2) -> tuple[object, np.ndarray, dict[str, np.ndarray]]:
    """``(sub, x, trace)``: MiniLM layer ``index`` as an :class:`~vckattn.golden.sublayer.EncoderSublayer`
    calibrated on 8 real sentences, its int8 input ``x`` ``(B, S, 384)`` on 4 other sentences and the trace of
    :func:`~vckattn.golden.sublayer.encoder_sublayer_int` (``r``: the residual output, added)."""
    require_module("transformers")
    from vckattn.golden.blocks import BertLayer
    from vckattn.golden.models import load_minilm
    from vckattn.golden.sublayer import calibrate_encoder, encoder_sublayer_int, quantize_input
    from vckattn.host.textdata import real_sentences

    tok, model = load_minilm(torch.float64)

    def hidden(sents: list[str]) -> tuple[np.ndarray, np.ndarray]:
        enc = tok(sents, padding=True, truncation=True, max_length=32, return_tensors="pt")
        with torch.no_grad():
            out = model(**enc, output_hidden_states=True)
        return out.hidden_states[index].numpy(), enc["attention_mask"].numpy().astype(bool)

    hc, kc = hidden(real_sentences(8))
    he, ke = hidden(real_sentences(4, start_topic=60))
    blk = BertLayer(384, 12, 1536).double().load_hf(model.encoder.layer[index])
    sub = calibrate_encoder(blk.attn, blk.norm1, hc, kc)
    x = quantize_input(he, sub.attn.s_x)
    r, tr = encoder_sublayer_int(sub, x, ke)
    return sub, x, {**tr, "r": r}

"""Real sublayer data for the PL units' tests: one MiniLM encoder sublayer (golden/sublayer.py) calibrated and run
on real sentences, and one decoder sublayer of the BHyT-converted SmolLM2 (slow), each with its integer trace."""

from __future__ import annotations

import functools

import numpy as np
import torch
from conftest import require_module


@functools.cache
def minilm_source(index: int = 2) -> tuple[object, object]:
    """``(blk, hidden)``: MiniLM's layer ``index`` as a float64 golden :class:`~vckattn.golden.blocks.BertLayer`, and
    ``hidden(sentences) -> (h (B, S, 384), keep (B, S))``, the hidden states entering that layer (padded, at most 32
    tokens)."""
    require_module("transformers")
    from vckattn.golden.blocks import BertLayer
    from vckattn.golden.pretrained import load_minilm

    tok, model = load_minilm(torch.float64)

    def hidden(sents: list[str]) -> tuple[np.ndarray, np.ndarray]:
        enc = tok(sents, padding=True, truncation=True, max_length=32, return_tensors="pt")
        with torch.no_grad():
            out = model(**enc, output_hidden_states=True)
        return out.hidden_states[index].numpy(), enc["attention_mask"].numpy().astype(bool)

    return BertLayer(384, 12, 1536).double().load_hf(model.encoder.layer[index]), hidden


@functools.cache
def minilm_layer(index: int = 2) -> tuple[object, np.ndarray, dict[str, np.ndarray]]:
    """``(sub, x, trace)``: MiniLM layer ``index`` as an :class:`~vckattn.golden.sublayer.EncoderSublayer`
    calibrated on 8 real sentences, its int8 input ``x`` ``(B, S, 384)`` on 4 other sentences and the trace of
    :func:`~vckattn.golden.stages.sublayer_int` (``r``: the residual output, added)."""
    from vckattn.golden.stages import sublayer_int
    from vckattn.golden.sublayer import calibrate_encoder, quantize_input
    from vckattn.host.textdata import real_sentences

    blk, hidden = minilm_source(index)
    hc, kc = hidden(real_sentences(8))
    he, ke = hidden(real_sentences(4, start_topic=60))
    sub = calibrate_encoder(blk.attn, blk.norm1, hc, kc)
    x = quantize_input(he, sub.attn.s_x)
    r, tr = sublayer_int(sub, x, ke)
    return sub, x, {**tr, "r": r}


def smollm2_layer(index: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """``(trace, c, s)`` of :func:`smollm2_sublayer`. Slow (loads and converts the checkpoint)."""
    return smollm2_sublayer(index)[1:]


@functools.cache
def smollm2_source(index: int = 0) -> tuple[object, object]:
    """``(blk, capture)``: layer ``index`` of SmolLM2-135M converted to BHyT as a float64 golden
    :class:`~vckattn.golden.blocks.LlamaBlock` with its BHyT norms, and ``capture(sentences) -> (seen, keep)``: the
    block input ``seen["h"]`` ``(B, S, 576)`` and ``seen["rope"]`` (the position embeddings the layer receives) on
    those sentences (padded, at most 32 tokens). Slow (loads and converts the checkpoint)."""
    require_module("transformers")
    require_module("gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vckattn.golden import convert
    from vckattn.golden.blocks import LlamaBlock
    from vckattn.host.checkpoints import gguf_folder
    from vckattn.host.export.sources import resolve_checkpoint

    src = resolve_checkpoint("smollm2")
    folder = gguf_folder(src)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).model
    convert.convert_llama_norms_to_bhyt(model, seq_len=64)

    def capture(sents: list[str]) -> tuple[dict, np.ndarray]:
        seen: dict = {}

        def pre(_m, args, kwargs):  # noqa: ANN001, ANN202 - a torch forward pre-hook
            seen["h"] = (args[0] if args else kwargs["hidden_states"]).double().numpy().copy()
            seen["rope"] = kwargs["position_embeddings"]

        hook = model.layers[index].register_forward_pre_hook(pre, with_kwargs=True)
        enc = tok(sents, padding=True, truncation=True, max_length=32, return_tensors="pt")
        with torch.no_grad():
            model(**enc, use_cache=False)
        hook.remove()
        return seen, enc["attention_mask"].numpy().astype(bool)

    blk = LlamaBlock(576, 9, 3, 1536, "bhyt", seq_len=64).double().load_hf(model.layers[index])
    blk.bhyt.load_state_dict(model.layers[index].bhyt.state_dict())
    return blk, capture


@functools.cache
def smollm2_sublayer(index: int = 0) -> tuple[object, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """``(sub, trace, c, s)``: layer ``index`` of SmolLM2-135M converted to BHyT as a
    :class:`~vckattn.golden.sublayer.DecoderSublayer` ``sub`` calibrated on 6 real sentences, the trace of
    :func:`~vckattn.golden.stages.sublayer_int` on 3 other sentences and its int16 RoPE tables (the
    checkpoint's own rotary embedding). Slow (loads and converts the checkpoint)."""
    from vckattn.golden.stages import sublayer_int
    from vckattn.golden.sublayer import calibrate_decoder, quantize_input, rope_tables
    from vckattn.host.textdata import real_sentences

    blk, capture = smollm2_source(index)
    (cc, kc), (ce, ke) = capture(real_sentences(6)), capture(real_sentences(3, start_topic=60))
    sub = calibrate_decoder(blk.attn, blk.bhyt, cc["h"], kc, cc["rope"])
    hi = quantize_input(ce["h"], sub.s_h)
    c, s = rope_tables(ce["rope"], *hi.shape[:2], 64)
    _, tr = sublayer_int(sub, hi, ke, (c, s))
    return sub, tr, c, s

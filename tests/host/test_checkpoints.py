"""The checkpoint loader: a GGUF read once into a kept Hugging Face folder, kept only when it loads back to what
transformers read from the file."""

from __future__ import annotations

import pytest
import torch
from conftest import require_module

from vckattn.host.checkpoints import Source, _check_same_model, gguf_folder


def test_gguf_folder_takes_only_a_gguf(tmp_path):
    with pytest.raises(ValueError, match="not a GGUF checkpoint"):
        gguf_folder(Source(tmp_path, "hf-folder", []))


def test_a_kept_folder_must_load_back_to_the_model_read(tmp_path):
    """The check :func:`gguf_folder` runs before it keeps a folder: it passes on a faithful save and names what
    differs when one weight differs by one float32 step or the configuration differs."""
    require_module("transformers")
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from vckattn.golden.pretrained import minilm_dir

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    model = LlamaForCausalLM(cfg).eval()
    tok = AutoTokenizer.from_pretrained(minilm_dir())
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    _check_same_model(model, tok, tmp_path)
    w = model.model.layers[0].self_attn.q_proj.weight
    with torch.no_grad():
        w[0, 0] = torch.nextafter(w[0, 0], torch.tensor(1.0))
    with pytest.raises(RuntimeError, match=r"weights \['model.layers.0.self_attn.q_proj.weight'\]"):
        _check_same_model(model, tok, tmp_path)
    model.save_pretrained(tmp_path)
    _check_same_model(model, tok, tmp_path)
    model.config.rms_norm_eps = 1e-3
    with pytest.raises(RuntimeError, match=r"configuration \['rms_norm_eps'\]"):
        _check_same_model(model, tok, tmp_path)

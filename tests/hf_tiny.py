"""Tiny randomly initialised Hugging Face models (float64) shared by the tests."""

from __future__ import annotations

import torch

F64 = torch.float64


def tiny_bert(seed: int = 0):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    return BertModel(cfg).to(F64).eval()


def tiny_vit(seed: int = 0):
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(seed)
    cfg = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    image_size=16, patch_size=4, num_channels=1)
    return ViTModel(cfg, add_pooling_layer=False).to(F64).eval()


def tiny_llama(seed: int = 0, layers: int = 2):
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=100, hidden_size=48, intermediate_size=96, num_hidden_layers=layers,
                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaModel(cfg).to(F64).eval()
    with torch.no_grad():  # non-trivial norm weights so that copying them is tested
        for layer in model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
    return model


def right_padding(lengths: list[int], seq: int) -> torch.Tensor:
    m = torch.zeros(len(lengths), seq, dtype=torch.long)
    for i, n in enumerate(lengths):
        m[i, :n] = 1
    return m

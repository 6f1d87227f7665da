"""Fixtures shared by the host tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory) -> Path:
    """A 2-layer BERT-style sentiment classifier (random weights, no dropout) with MiniLM's tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from vckattn.host.checkpoints import resolve_checkpoint

    path = tmp_path_factory.mktemp("tiny") / "bert"
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, classifier_dropout=0.0, num_labels=2)
    BertForSequenceClassification(cfg).save_pretrained(path)
    AutoTokenizer.from_pretrained(resolve_checkpoint("minilm").path, local_files_only=True).save_pretrained(path)
    return path

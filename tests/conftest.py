"""Shared pytest setup: offline Hugging Face, float64 helpers, seeded RNG."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def gen() -> torch.Generator:
    """A seeded CPU generator (each test gets the same stream)."""
    return torch.Generator().manual_seed(1234)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative error ‖a - b‖ / ‖b‖ (Frobenius)."""
    return float((a - b).norm() / b.norm())

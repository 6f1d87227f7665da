"""The Device interface every backend implements.

A device runs one attention layer at a time on an engine build: :meth:`Device.configure` takes the layer's runtime
constants (the normalizer's registers and the output requantization), :meth:`Device.run_heads` runs the whole layer
in one launch and returns its int8 head outputs (:mod:`vckattn.host.backends.engine`).

Formats: Q, K, V int8 (scales s_q, s_k, s_v); scores of the build's width; P uint8 in UQ0.p_frac (SwiftMax) or UQ0.8
(online softmax); A int8 at s_a.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from vckattn.golden.errors import EXIT_DEVICE, UserError
from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.hw.design.manifest import Manifest, check_bundle


class DeviceError(UserError):
    """The device cannot be used or failed: no card, interface mismatch, timeout, a failed simulation (a missing
    runtime or tool is :class:`~vckattn.golden.errors.ToolMissing`)."""

    exit_code = EXIT_DEVICE


class Device(ABC):
    """One backend. Use as a context manager (``open`` / ``close``)."""

    name: ClassVar[str]
    #: What actually computes, for reports and the README ("software", "RTL simulation", "hardware").
    where: ClassVar[str]

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.layer: QuantAttentionLayer | None = None
        self.last_cycles: int | None = None  # RTL only: PL cycles of the last run

    def open(self) -> None:  # noqa: B027 - optional hook: the emu backend has nothing to acquire
        """Acquire the device (load the xclbin, build the simulator, ...)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the device."""

    def __enter__(self) -> Device:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_bundle(self, bundle: Any, layers: list[int] | None = None, seq_len: int | None = None) -> None:
        """Refuse a bundle this device's build cannot run (see :func:`vckattn.hw.design.manifest.check_bundle`)."""
        check_bundle(self.manifest, bundle, layers, seq_len)

    def configure(self, layer: QuantAttentionLayer) -> None:
        """Load one layer's runtime constants (normalizer registers, output requantization)."""
        if layer.normalizer not in self.manifest.data["normalizers"]:
            raise DeviceError(f"{self.manifest.file}: normalizers: this build has no {layer.normalizer} kernel")
        self.layer = layer

    @abstractmethod
    def run_heads(self, ops: dict[str, np.ndarray]) -> np.ndarray:
        """The configured layer's int8 head outputs ``(B, H, S, d)`` from its head operands
        (:func:`vckattn.golden.quant_attention.head_operands`), in one launch."""


__all__ = ["Device", "DeviceError"]

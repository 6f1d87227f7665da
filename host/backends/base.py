"""The Device interface every backend implements, and the per-tile arithmetic they share.

A device runs one layer at a time: :meth:`Device.configure` writes the layer's runtime constants
(the normalizer's registers and the output requantization), :meth:`Device.run` streams a
:class:`~vckattn.host.tiler.LayerJob`'s tiles through QKᵀ → normalizer → P·V → requant and yields a
:class:`~vckattn.host.tiler.TileResult` per tile as it completes (the scheduler checks ids and order).

Formats: Q, K, V int8 (scales s_q, s_k, s_v); S int32 accumulators; P uint8 in UQ0.p_frac (SwiftMax) or
UQ0.8 (online softmax); O int32 at s_v·2^-p_frac; A int8 at s_a.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from vckattn.golden.aie_matmul import UINT8, TileShape, tile_matmul
from vckattn.golden.errors import EXIT_DEVICE, UserError
from vckattn.golden.quant_attention import QuantAttentionLayer, normalizer_int
from vckattn.golden.requant import requantize
from vckattn.host.tiler import LayerJob, Tile, TileResult
from vckattn.hw.manifest import Manifest, check_bundle


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
        """Refuse a bundle this device's build cannot run (see :func:`vckattn.hw.manifest.check_bundle`)."""
        check_bundle(self.manifest, bundle, layers, seq_len)

    def configure(self, layer: QuantAttentionLayer) -> None:
        """Load one layer's runtime constants (normalizer registers, output requantization)."""
        if layer.normalizer not in self.manifest.data["normalizers"]:
            raise DeviceError(f"{self.manifest.file}: normalizers: this build has no {layer.normalizer} kernel")
        self.layer = layer

    @abstractmethod
    def run(self, job: LayerJob) -> Iterator[TileResult]:
        """Stream the job's tiles through the device; yield each result as it completes."""


# ------------------------------------------------------------------------------- per-tile arithmetic


def _aie_tile(job: LayerJob) -> TileShape:
    return TileShape(job.tile.q_rows, job.tile.key_block, job.tile.key_block)


def tile_scores(job: LayerJob, tile: Tile) -> np.ndarray:
    """``S = Q·Kᵀ`` of one tile as the AIE computes it: int32 ``(q_rows, keys_pad)``."""
    k = job.k[tile.batch, tile.kv_head]
    return tile_matmul(tile.q, np.ascontiguousarray(k.T), _aie_tile(job)).astype(np.int32)


def tile_normalize(layer: QuantAttentionLayer, s: np.ndarray, keep: np.ndarray, head: int = 0) -> np.ndarray:
    """The PL normalizer on a tile's scores, row by row, with query head ``head``'s register set: uint8 P
    ``(q_rows, keys_pad)``."""
    return np.asarray(normalizer_int(layer, s, keep, head=head)).astype(np.uint8)


def tile_output(layer: QuantAttentionLayer, job: LayerJob, tile: Tile, p: np.ndarray) -> np.ndarray:
    """``A = requant(P·V)`` of one tile: the AIE's P·V and the output mover's requantization, int8."""
    v = job.v[tile.batch, tile.kv_head]
    o = tile_matmul(p, v, _aie_tile(job), a_fmt=UINT8)
    return requantize(o, layer.rq_a).astype(np.int8)


def compute_tile(layer: QuantAttentionLayer, job: LayerJob, tile: Tile) -> np.ndarray:
    """The whole tile in the bit-exact model: int8 ``A`` ``(q_rows, head_dim)``."""
    return tile_output(layer, job, tile, tile_normalize(layer, tile_scores(job, tile), tile.keep, tile.head))


__all__ = ["Device", "DeviceError", "compute_tile", "tile_normalize", "tile_output", "tile_scores"]

"""The projection GEMM cascade's build parameters and its kernels' data memory (``hw/aie/engine/gemm_kernels.h``,
``hw/ENGINE.md`` "The projection GEMM"). Byte counts; int8 operands, per-channel int32 requantization lanes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vckattn.golden.gemm_proj import (
    GROUP,  # output channels of one column block (one requantization group)
    pack_lanes,
    pack_w,
)
from vckattn.hw.spec.streams import BEAT_BYTES  # header beat of every buffer (stream contract v3)

#: bytes of a kernel's state between invocations (gemm_kernels.h GemmState: 8 int32 cascade words and 4 uint32,
#: 32-byte aligned)
STATE_BYTES = 64
#: the kernel variants of a cascade: the first (bias), middle, last (requantization or int32 out) and a lone kernel
KERNELS: tuple[str, ...] = ("first", "mid", "last", "only")


def variant(j: int, kernels: int) -> str:
    """The kernel variant of kernel ``j`` of a ``kernels``-long cascade."""
    if not 0 <= j < kernels:
        raise ValueError(f"j={j} outside 0..{kernels - 1}")
    return "only" if kernels == 1 else "first" if j == 0 else "last" if j == kernels - 1 else "mid"


def lanes_bytes(cols: int) -> int:
    """Bytes of one set of per-channel int32 lanes (bias, or the requantization multipliers): 32 lanes of 4 bytes
    per requantization group of ``GROUP`` channels."""
    return cols // GROUP * 32 * 4


def shift_bytes(cols: int) -> int:
    """Bytes of the requantization shifts: 4 per group, padded to whole 16-byte beats."""
    return -(-cols // GROUP * 4 // 16) * 16


def buffer_bytes(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> dict[str, int]:
    """Bytes of one half of each buffer of a ``kernel`` variant (gemm_kernels.h ``x_buffer_bytes``,
    ``w_buffer_bytes``, ``out_buffer_bytes``): ``x`` header + ``rows·kslice``; ``w`` header + ``kslice·cols``
    weights + the bias lanes for ``first`` / ``only`` + the multipliers and shifts for an int8 ``last`` / ``only``;
    ``out`` (``last`` / ``only``, else 0) header + ``rows·cols`` elements of ``out_bits``."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    has_bias, has_out = kernel in ("first", "only"), kernel in ("last", "only")
    w = (BEAT_BYTES + kslice * cols + (lanes_bytes(cols) if has_bias else 0)
         + (lanes_bytes(cols) + shift_bytes(cols) if has_out and out_bits == 8 else 0))
    return {"x": BEAT_BYTES + rows * kslice, "w": w,
            "out": BEAT_BYTES + rows * cols * out_bits // 8 if has_out else 0}


def kernel_memory(kernel: str, rows: int, cols: int, kslice: int, out_bits: int = 8) -> int:
    """Bytes of one kernel's data memory (gemm_kernels.h ``gemm_data_bytes``; a C-simulation test compares): its
    buffers (:func:`buffer_bytes`), each ping-pong, and the state. Stack and heap are not included (the device's
    ``tile_memory_reserve_bytes``, ``hw/perf/device.json``)."""
    return 2 * sum(buffer_bytes(kernel, rows, cols, kslice, out_bits).values()) + STATE_BYTES


@dataclass(frozen=True)
class GemmParams:
    """A projection GEMM build: ``kernels`` (cascade length k), ``rows`` (X rows per call, multiple of 4), ``cols``
    (output channels per kernel, multiple of 16), ``kslice`` (input features of every kernel but the last, multiple
    of 16), ``out_bits`` (8: requantized int8; 32: int32 Y), ``kslice_last`` (the last kernel's input features,
    multiple of 16; None: ``kslice``). K = (k - 1)·kslice + kslice_last. The last kernel drains the tile (the
    requantization or the int32 stores), so a shorter K-slice there lets it finish with the others
    (:func:`vckattn.hw.perf.gemm_proj.balanced`)."""

    kernels: int
    rows: int
    cols: int
    kslice: int
    out_bits: int = 8
    kslice_last: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.kernels <= 32:
            raise ValueError(f"kernels={self.kernels}: must be 1..32")
        if self.rows < 4 or self.rows % 4:
            raise ValueError(f"rows={self.rows}: must be a positive multiple of 4")
        if self.cols < 16 or self.cols % 16:
            raise ValueError(f"cols={self.cols}: must be a positive multiple of 16")
        if self.kslice < 16 or self.kslice % 16:
            raise ValueError(f"kslice={self.kslice}: must be a positive multiple of 16")
        if self.out_bits not in (8, 32):
            raise ValueError(f"out_bits={self.out_bits}: must be 8 or 32")
        if self.kslice_last is not None and (self.kslice_last < 16 or self.kslice_last % 16):
            raise ValueError(f"kslice_last={self.kslice_last}: must be a positive multiple of 16")

    @property
    def slices(self) -> tuple[int, ...]:
        """Input features of each kernel, first to last."""
        last = self.kslice if self.kslice_last is None else self.kslice_last
        return (self.kslice,) * (self.kernels - 1) + (last,)

    def slices_text(self) -> str:
        """The K-slices in words: ``"192"`` (all alike) or ``"208, 208, 208, 144"``."""
        return str(self.kslice) if len(set(self.slices)) == 1 else ", ".join(map(str, self.slices))

    def kslice_of(self, j: int) -> int:
        """Input features of kernel ``j`` (features ``j·kslice`` onwards)."""
        return self.slices[j]

    @property
    def k(self) -> int:
        """Input features K of the cascade."""
        return sum(self.slices)

    def to_json(self) -> dict[str, int]:
        """The build as manifests and build files record it (``kslice_last`` explicit)."""
        return {"kernels": self.kernels, "rows": self.rows, "cols": self.cols, "kslice": self.kslice,
                "kslice_last": self.slices[-1], "out_bits": self.out_bits}

    def defines(self) -> list[str]:
        return [f"-DVCKATTN_GEMM_KERNELS={self.kernels}", f"-DVCKATTN_GEMM_ROWS={self.rows}",
                f"-DVCKATTN_GEMM_COLS={self.cols}", f"-DVCKATTN_GEMM_KSLICE={self.kslice}",
                f"-DVCKATTN_GEMM_KSLICE_LAST={self.slices[-1]}", f"-DVCKATTN_GEMM_OUT_BITS={self.out_bits}"]

    def buffers(self, j: int) -> dict[str, int]:
        """Kernel ``j``'s buffer bytes (:func:`buffer_bytes` of its variant and K-slice)."""
        return buffer_bytes(variant(j, self.kernels), self.rows, self.cols, self.kslice_of(j), self.out_bits)

    def x_buffer_bytes(self, j: int = 0) -> int:
        """Bytes of kernel ``j``'s x buffer."""
        return self.buffers(j)["x"]

    def shift_bytes(self) -> int:
        return shift_bytes(self.cols)

    def w_buffer_bytes(self, j: int) -> int:
        """Bytes of kernel ``j``'s w buffer (gemm_kernels.h ``w_buffer_bytes``)."""
        return self.buffers(j)["w"]

    def w_payload(self, j: int, w: np.ndarray, bias: np.ndarray, mult: np.ndarray | None = None,
                  shift: np.ndarray | None = None) -> bytes:
        """Kernel ``j``'s w buffer after its WSLICE header for one output block: golden's packed weights ``w``
        ``(cols, kslice_of(j))`` int8 (:func:`~vckattn.golden.gemm_proj.pack_w`); kernel 0 also the block's
        ``bias`` ``(cols,)`` int32 (:func:`~vckattn.golden.gemm_proj.pack_lanes`); the last kernel of a requantizing
        cascade (``out_bits`` 8) also the requantization multipliers ``mult`` ``(cols,)`` and the shifts ``shift``
        ``(cols / GROUP,)`` of the block (:func:`~vckattn.golden.gemm_proj.fold_requant`), the shifts padded to
        :meth:`shift_bytes`. ``w_buffer_bytes(j) - 16`` bytes."""
        w = np.asarray(w)
        if w.shape != (self.cols, self.kslice_of(j)):
            raise ValueError(f"kernel {j}'s weights are ({self.cols}, {self.kslice_of(j)}), got {w.shape}")
        out = [pack_w(w).astype(np.int8).tobytes()]
        if j == 0:
            out.append(pack_lanes(np.asarray(bias, np.int64).reshape(-1)).tobytes())
        if j == self.kernels - 1 and self.out_bits == 8:
            if mult is None or shift is None:
                raise ValueError("a requantizing cascade's last kernel takes the multipliers and shifts")
            sh = np.zeros(self.shift_bytes() // 4, np.int32)
            sh[:self.cols // GROUP] = shift
            out += [pack_lanes(np.asarray(mult)).tobytes(), sh.tobytes()]
        payload = b"".join(out)
        assert len(payload) == self.w_buffer_bytes(j) - BEAT_BYTES
        return payload

    def out_buffer_bytes(self) -> int:
        """Bytes of the last kernel's out buffer."""
        return self.buffers(self.kernels - 1)["out"]

    def data_bytes(self) -> int:
        """The largest data memory of the cascade's kernels (:func:`kernel_memory`)."""
        return max(kernel_memory(variant(j, self.kernels), self.rows, self.cols, self.kslice_of(j), self.out_bits)
                   for j in range(self.kernels))


__all__ = ["BEAT_BYTES", "GROUP", "KERNELS", "STATE_BYTES", "GemmParams", "buffer_bytes", "kernel_memory",
           "lanes_bytes", "shift_bytes", "variant"]

"""AIE-style int8 tile matmul (QKᵀ and P·V) with shift-round-saturate output.

The AIE1 array multiplies 8-bit operands with wide accumulators (acc48 lanes);
a kernel processes one ``(m, k, n)`` tile per call (e.g. 32×32×32 or 64×64×64,
built from ``aie::mmul<4, 8, 8, int8, int8>`` blocks), accumulating over the K
tiles, and writes its result either as 32-bit accumulators or through ``srs``
(shift-round-saturate) as 8/16-bit values.

Bit-exactness: integer sums do not depend on the order of accumulation, so the
tiled result equals the plain product as long as no accumulator overflows
(checked against ``acc_bits``). For speed the products are computed with float
BLAS (torch.matmul) when every partial sum is provably an integer that float32 (``|sum| < 2**24``)
or float64 (< 2**53) represents exactly; otherwise with int64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .fixedpoint import QFormat, Rounding, saturate, shift_round

INT8 = QFormat(8, 0)
UINT8 = QFormat(8, 0, signed=False)


@dataclass(frozen=True)
class TileShape:
    """One AIE kernel call: ``(m × k) @ (k × n)``."""

    m: int = 32
    k: int = 32
    n: int = 32

    def __post_init__(self) -> None:
        if min(self.m, self.k, self.n) < 1:
            raise ValueError(f"tile dimensions must be positive, got {self}")


def exact_int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact ``a @ b`` of integer arrays (batched over leading dims), as int32 when every result
    provably fits, else int64.

    Uses torch's int8 GEMM when both operands are int8 values (the AIE's int8 × int8 → int32),
    else float32 BLAS when ``max|a| * max|b| * K < 2**24``, float64 when ``< 2**53`` (every
    partial sum is then an exactly representable integer), int64 otherwise.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
        raise TypeError("exact_int_matmul needs integer arrays")
    k = a.shape[-1]
    if _INT_MM and k < (1 << 17) and _is_int8(a) and _is_int8(b):
        return _int8_matmul(a, b)
    bound = _absmax(a) * _absmax(b) * k
    if bound < (1 << 24):
        dtype = torch.float32
    elif bound < (1 << 53):
        dtype = torch.float64
    else:
        return np.matmul(a.astype(np.int64), b.astype(np.int64))
    # torch's BLAS matmul (multi-threaded); exact because every partial sum is a representable integer.
    # Results below 2^31 come back as int32 (half the memory traffic of int64).
    out = torch.matmul(torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype))
    return out.to(torch.int32 if bound < (1 << 31) else torch.int64).numpy()


_INT_MM = hasattr(torch, "_int_mm")


def _int8_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int8 × int8 -> int32 with torch's integer GEMM (VNNI on x86): exact by construction.

    int8 operands and ``K < 2^17`` keep every int32 partial sum in range (``|sum| <= 2^14·K``). Batched
    operands are multiplied per batch element (``b`` may be a shared 2-D matrix)."""
    out_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    at = torch.from_numpy(np.asarray(a, dtype=np.int8))
    bt = torch.from_numpy(np.asarray(b, dtype=np.int8))
    if bt.dim() == 2:
        flat = torch._int_mm(at.reshape(-1, at.shape[-1]).contiguous(), bt.contiguous())
        return flat.reshape(out_shape).numpy()
    at = at.expand(*out_shape[:-2], *a.shape[-2:]).reshape(-1, *a.shape[-2:])
    bt = bt.expand(*out_shape[:-2], *b.shape[-2:]).reshape(-1, *b.shape[-2:])
    out = torch.empty((at.shape[0], a.shape[-2], b.shape[-1]), dtype=torch.int32)
    for i in range(at.shape[0]):
        out[i] = torch._int_mm(at[i].contiguous(), bt[i].contiguous())
    return out.reshape(out_shape).numpy()


def _is_int8(x: np.ndarray) -> bool:
    return x.dtype == np.int8 or (x.size > 0 and int(x.min()) >= -128 and int(x.max()) <= 127)


def _absmax(x: np.ndarray) -> int:
    if x.size == 0:
        return 0
    return max(abs(int(x.min())), abs(int(x.max())))


def srs(acc: np.ndarray, shift: int, out: QFormat = INT8, rounding: Rounding = "half_up") -> np.ndarray:
    """AIE shift-round-saturate: ``saturate(round(acc * 2**-shift))`` into ``out``."""
    return saturate(shift_round(acc, shift, rounding), out)


def tile_matmul(a: np.ndarray, b: np.ndarray, tile: TileShape = TileShape(), acc_bits: int = 48,
                a_fmt: QFormat = INT8, b_fmt: QFormat = INT8) -> np.ndarray:
    """``a @ b`` as the AIE array computes it: tiles of ``tile``, 8-bit operands, exact accumulators.

    Args:
        a: ``(..., M, K)`` integers in ``a_fmt`` (int8, or uint8 for P in P·V).
        b: ``(..., K, N)`` integers in ``b_fmt``.
        tile: the kernel's tile shape; M, K, N need not be multiples (edge tiles are
            zero-padded, as the host pads the engine's Q tiles and K / V slices).
        acc_bits: accumulator width; an accumulator that would overflow raises.

    Returns the accumulators ``(..., M, N)`` (int32 when they provably fit, else int64).
    """
    a = np.asarray(a)
    b = np.asarray(b)
    for name, arr, fmt in (("a", a, a_fmt), ("b", b, b_fmt)):
        if arr.size and (int(arr.min()) < fmt.min_int or int(arr.max()) > fmt.max_int):
            raise ValueError(f"operand {name} has values outside {fmt.name} (raw integers expected)")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")
    k = a.shape[-1]
    k_pad = -(-k // tile.k) * tile.k
    # Worst-case accumulator magnitude over the padded K: every partial sum stays below it.
    worst = max(abs(a_fmt.min_int), a_fmt.max_int) * max(abs(b_fmt.min_int), b_fmt.max_int) * k_pad
    if worst >= (1 << (acc_bits - 1)):
        raise ValueError(f"K={k} may overflow the {acc_bits}-bit accumulator (worst case {worst})")
    return exact_int_matmul(a, b)


def tile_grid(rows: int, cols: int, tile_rows: int, tile_cols: int) -> list[tuple[int, int]]:
    """Row-major list of tile origins ``(r0, c0)`` covering a ``rows × cols`` matrix."""
    return [(r, c) for r in range(0, rows, tile_rows) for c in range(0, cols, tile_cols)]

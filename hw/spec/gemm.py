"""The projection GEMM cascade's build parameters and its kernels' data memory (``hw/aie/engine/gemm_kernels.h``,
``hw/ENGINE.md`` "The projection GEMM"). Byte counts; int8 operands, per-channel int32 requantization lanes."""

from __future__ import annotations

from dataclasses import dataclass

#: AIE kernel data memory a GEMM kernel's buffers (both ping-pong halves) may use: 32 KB less the runtime's
#: reserve, as the engine kernels (:func:`.generate._check_memory`)
GEMM_MEMORY_BYTES = 32 * 1024 - 4 * 1024
#: header beat of every buffer (stream contract v3)
_BEAT = 16


@dataclass(frozen=True)
class GemmBuild:
    """One projection cascade: ``kernels`` AIE kernels of ``kslice`` input features each, ``rows`` X rows and
    ``cols`` output channels a call, ``out_bits`` 8 (requantized int8) or 32 (int32 accumulators)."""

    kernels: int
    rows: int
    cols: int
    kslice: int
    out_bits: int

    def buffer_bytes(self) -> int:
        """The largest kernel's buffers, both ping-pong halves (x, w with its per-channel lanes, out): the sizes of
        ``gemm_kernels.h`` (``vckattn.sim.gemm_csim.GemmParams`` computes the same from the kernel's code)."""
        lanes = self.cols // 8 * 32 * 4
        shift = -(-self.cols // 8 * 4 // 16) * 16
        x = _BEAT + self.rows * self.kslice
        w = _BEAT + self.kslice * self.cols + lanes + ((lanes + shift) if self.out_bits == 8 else 0)
        out = _BEAT + self.rows * self.cols * self.out_bits // 8
        return 2 * (x + w + out)


__all__ = ["GEMM_MEMORY_BYTES", "GemmBuild"]

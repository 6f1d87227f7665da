"""INTERIM stand-in for the engine kernels' costing (replaced by the kernels' instrumented closed form).

Same public functions as the real module: cycles of one invocation (one tile) of each engine kernel.
"""

from __future__ import annotations

KERNELS = ("qk", "pv_first", "pv_mid", "pv_last", "pv_only")
OVERHEAD_CYCLES = 64


def invocation_macs(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8) -> int:
    return q_rows * sk * d


def invocation_cycles(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8,
                      masked: bool = False) -> dict[str, float]:
    blocks = (q_rows // 4) * (sk // 8)
    if kernel == "qk":
        vec = blocks * (d // 16) * 4 + (blocks * 3 if masked else 0)
        body = max(vec, blocks * (d // 16) * 6 / 2)
    else:
        vec = (q_rows // 4) * (d // 8) * (sk // 8) * 2
        body = max(vec, (q_rows // 4) * (d // 8) * (sk // 8) * 3 / 2)
    return {"compute": float(body), "overhead": float(OVERHEAD_CYCLES), "total": float(body + OVERHEAD_CYCLES)}


def efficiency(kernel: str, q_rows: int, sk: int, d: int, score_bits: int = 8, masked: bool = False) -> float:
    return invocation_macs(kernel, q_rows, sk, d, score_bits) / (
        invocation_cycles(kernel, q_rows, sk, d, score_bits, masked)["total"] * 128)

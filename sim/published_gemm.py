"""Instrumented operation counts of the published GEMM kernels (MaxEVA, CHARM, ARIES) for the validation of the
performance model against published designs.

Runs the renderings of ``hw/aie/published/gemm_kernels.h`` on g++ over the counting emulations
(``hw/aie/aie_api_emu.h``, ``hw/aie/aie1_intrinsics_emu.h``) through the test bench
``sim/cpp/published_gemm_tb.cpp``: each case is one kernel call on pseudo-random data, checked exactly
against a reference inside the test bench (a mismatch fails the run), and its operation counts come
back. :mod:`vckattn.hw.perf.gemm_kernels` costs the counts; its closed form must equal them::

    from vckattn.sim.published_gemm import measure
    counts = measure([("maxeva_int8", (32, 128, 32)), ("charm_fp32", (32, 32, 32))])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from vckattn.hw.perf.gemm_kernels import check_dims
from vckattn.sim.hls_csim import REPO_ROOT, compile_cpp, run_binary

__all__ = ["AIE_DIR", "HEADERS", "TB_CPP", "build", "measure"]

AIE_DIR: Path = REPO_ROOT / "hw" / "aie"
TB_CPP: Path = REPO_ROOT / "sim" / "cpp" / "published_gemm_tb.cpp"
HEADERS: tuple[Path, ...] = (AIE_DIR / "aie_api_emu.h", AIE_DIR / "aie1_intrinsics_emu.h",
                             AIE_DIR / "published" / "gemm_kernels.h")


def build() -> Path:
    """Compile the test bench (cached under ``build/hls/published_gemm_tb/``) and return the executable."""
    flags = ["-std=c++17", "-O1", "-Wall", "-Wextra", f"-I{AIE_DIR}"]
    return compile_cpp([TB_CPP], "published_gemm_tb", extra_flags=flags, depends=HEADERS)


def measure(cases: Sequence[tuple[str, tuple[int, ...]]]) -> list[dict[str, int]]:
    """Instrumented counts of one call per ``(kernel, dims)`` case (kernels and dims as
    :func:`vckattn.hw.perf.gemm_kernels.op_counts`), all in one run of the test bench. Each call's
    output is checked exactly against the test bench's reference
    (:class:`vckattn.sim.hls_csim.RunError` otherwise)."""
    args = []
    for kernel, dims in cases:
        d = check_dims(kernel, tuple(dims))
        args.append(f"{kernel}:{'x'.join(str(x) for x in d)}")
    out = run_binary(build(), args=args, timeout=120.0).decode()
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    if len(records) != len(cases):
        raise RuntimeError(f"published_gemm_tb: {len(records)} count records for {len(cases)} cases")
    result = []
    for rec, (kernel, dims) in zip(records, cases, strict=True):
        if rec["kernel"] != kernel or tuple(rec["dims"]) != tuple(dims):
            raise RuntimeError(f"published_gemm_tb: record {rec['case']!r} for case {kernel} {tuple(dims)}")
        result.append(dict(rec["counts"]))
    return result

"""Instrumented operation counts of the projection GEMM's AIE kernels, for their cost model
(:mod:`vckattn.hw.perf.gemm_proj`), as :mod:`vckattn.sim.engine_aie_perf` does for the attention kernels.

Runs the GEMM C-simulation (``sim/gemm_csim.py``) with the kernels on their vector path over the counting
``hw/aie/aie_api_emu.h``, checks its output bit for bit against golden's projection (counting must not change
results), and collects every invocation's counts. ``python -m vckattn.sim.gemm_proj_perf`` regenerates
``hw/perf/data/gemm_proj.json``: the cost table entries the kernels use, per build of :data:`MEASURED` the counts of
each kernel variant, whether the closed form equals them, the modeled cycles and efficiency; and, for the shapes of
:data:`SHAPES` (BERT-base's K = 768 in K-slices), every variant's modeled efficiency and data memory.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.quant_attention import QuantLinear
from vckattn.golden.requant import requant_registers, requantize
from vckattn.hw.perf import aie, calibration, gemm_proj
from vckattn.hw.spec.gemm import GemmParams
from vckattn.sim.gemm_csim import run_gemm
from vckattn.sim.hls_csim import REPO_ROOT

__all__ = ["COMMAND", "MEASURED", "SHAPES", "data_file", "measure_build"]

COMMAND = "python -m vckattn.sim.gemm_proj_perf --out hw/perf/data/gemm_proj.json"
SEED = 20261126

#: builds measured (kernels, rows, cols, kslice, out_bits): the chosen shapes (Q/K/V: 16 rows x 48 channels over
#: 192-feature K-slices, int8; W_O: 8 rows, int32) with three kernels (first, mid, last), the 16 x 64 x 128 shape,
#: a small one with one row block a register block and a one-kernel build
MEASURED: tuple[tuple[int, int, int, int, int], ...] = (
    (3, 16, 48, 192, 8), (3, 8, 48, 192, 32), (3, 16, 64, 128, 8), (2, 12, 32, 32, 8), (1, 8, 16, 16, 32))

#: shapes reported (rows, cols, kslice): the chosen ones and their neighbours
SHAPES: tuple[tuple[int, int, int], ...] = ((16, 48, 192), (8, 48, 192), (16, 64, 128), (32, 64, 128),
                                            (16, 32, 256), (32, 48, 128), (16, 64, 256))


def measure_build(build: Sequence[int], seed: int = SEED) -> dict[str, dict[str, int]]:
    """The instrumented counts of each kernel variant of ``build`` (a :data:`MEASURED` entry) over a projection of
    two column blocks and a partial last tile; AssertionError if the output differs from golden or two invocations
    of one variant count differently."""
    p = GemmParams(*build)
    rng = np.random.default_rng([seed, *build])
    n_rows, n_out = 2 * p.rows + 3, 2 * p.cols
    x = rng.integers(-128, 128, (n_rows, p.k)).astype(np.int8)
    lin = QuantLinear(rng.integers(-128, 128, (n_out, p.k)).astype(np.int8), np.ones(n_out),
                      rng.integers(-(1 << 20), 1 << 20, n_out))
    rq = requant_registers(rng.uniform(1e-5, 1e-4, n_out)) if p.out_bits == 8 else None
    res = run_gemm(p, x, lin.w, lin.b, rq, vector=True, op_counts=True)
    want = lin.acc(x) if rq is None else requantize(lin.acc(x), rq)
    assert res.ok and np.array_equal(res.out.astype(np.int64), want), "the instrumented vector path differs from golden"
    out: dict[str, dict[str, int]] = {}
    for inv in res.op_counts:
        if inv["kernel"] in out:
            assert out[inv["kernel"]] == inv["counts"], f"{inv['kernel']}: invocations count differently"
        out[inv["kernel"]] = inv["counts"]
    return out


def data_file(measured: Sequence[Sequence[int]] = MEASURED) -> dict[str, Any]:
    """The content of ``hw/perf/data/gemm_proj.json`` (module docstring; JSON-ready)."""
    builds, used = [], set()
    for build in measured:
        _, rows, cols, kslice, out_bits = build
        rows_out = []
        for kernel, counts in sorted(measure_build(build).items()):
            args = (kernel, rows, cols, kslice, out_bits)
            used |= set(counts)
            rep = gemm_proj.invocation_report(*args)
            rows_out.append({"kernel": kernel, "counts": dict(sorted(counts.items())),
                             "closed_form_equal": gemm_proj.op_counts(*args) == counts,
                             "macs": rep["macs"], "cycles": rep["cycles"], "efficiency": rep["efficiency"]})
        builds.append({"build": list(build), "invocations": rows_out})
    shapes = []
    for rows, cols, kslice in SHAPES:
        for out_bits in (8, 32):
            for kernel in gemm_proj.KERNELS:
                args = (kernel, rows, cols, kslice, out_bits)
                shapes.append({"kernel": kernel, "rows": rows, "cols": cols, "kslice": kslice, "out_bits": out_bits,
                               "cycles": gemm_proj.invocation_cycles(*args)["total"],
                               "efficiency": gemm_proj.efficiency(*args),
                               "data_bytes": gemm_proj.kernel_memory(*args)})
    return {
        "about": ("AIE1 core cycles of one invocation of each projection GEMM kernel: MODELED (hw/perf/gemm_proj.py), "
                  "from the operation counts of the kernels' vector path run on g++ over the counting AIE API "
                  "emulation (hw/aie/aie_api_emu.h), and a cost table with sources. Not measured on a board."),
        "generated_by": COMMAND,
        "counts_from": "sim/cpp/gemm_proj_tb.cpp built with -DVCKATTN_AIE_VECTOR_EMU, run with OPCOUNTS",
        "peak_macs_per_cycle": aie.PEAK_MACS_PER_CYCLE,
        "loop_fill_cycles": aie.loop_fill_cycles(),
        "sync_cycles_per_port": calibration.param("sync_cycles_per_port"),
        "sync_ports": {kernel: gemm_proj.sync_ports(kernel) for kernel in gemm_proj.KERNELS},
        "cost_table": {k: aie.COST_TABLE[k] for k in sorted(used)},
        "builds": builds,
        "shapes": shapes,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vckattn.sim.gemm_proj_perf", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(gemm_proj.DATA_PATH.relative_to(REPO_ROOT)),
                        help="JSON file to write (default: %(default)s, relative to the repository root)")
    args = parser.parse_args(argv)
    data = data_file()
    out = Path(args.out)
    if not out.is_absolute():
        out = REPO_ROOT / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    rows = [r for b in data["builds"] for r in b["invocations"]]
    bad = [r["kernel"] for r in rows if not r["closed_form_equal"]]
    print(f"{out}: {len(rows)} kernel variants in {len(data['builds'])} builds, closed form equal to the instrumented "
          f"counts: {len(rows) - len(bad)}/{len(rows)}")
    print("modeled per invocation (MACs / (cycles x 128)), data memory per kernel:")
    for r in data["shapes"]:
        print(f"  {r['kernel']:5s} rows {r['rows']:2d} cols {r['cols']:3d} kslice {r['kslice']:3d} "
              f"out int{r['out_bits']:<2d}: {r['cycles']:6.0f} cycles, efficiency {r['efficiency']:.1%}, "
              f"{r['data_bytes']:6d} B")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

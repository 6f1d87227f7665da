"""Instrumented operation counts of the AIE matmul kernels' vector path, for the AIE performance model.

Runs the vector path of ``hw/aie/attention_kernels.h`` on g++ over the operation-counting
``hw/aie/aie_api_emu.h`` (test bench ``sim/cpp/aie_kernels_tb.cpp --op-counts``), one tile per
geometry, checks each output against the golden ``tile_matmul`` (counting must not change results)
and returns the tile's API operation and stream-beat counts. :mod:`vckattn.hw.perf.aie` turns counts
into modeled cycles; its closed form must equal these counts.

``python -m vckattn.sim.aie_perf --out hw/perf/data/aie_tiles.json`` regenerates the committed data:
the cost table, the instrumented counts of :data:`MEASURED` (the committed build's shape, and other
tile shapes the templates allow), whether the closed form equals them, and the modeled cycles and
efficiency of each tile.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.aie_matmul import UINT8, tile_matmul
from vckattn.hw.perf import aie
from vckattn.sim.aie_csim import (
    DEFAULT_SHAPE,
    KernelShape,
    build,
    pack_k_stream,
    pack_p_stream,
    pack_q_stream,
    pack_v_stream,
    tb_input,
    unpack_o_stream,
    unpack_s_stream,
)
from vckattn.sim.hls_csim import REPO_ROOT, run_binary

__all__ = ["COMMAND", "MEASURED", "data_file", "measure", "measure_shape", "shape_for"]

COMMAND = "python -m vckattn.sim.aie_perf --out hw/perf/data/aie_tiles.json"
SEED = 20260715

#: (tile shape, [(keys, d), ...]) measured for the data file: the committed build (Q_ROWS 32,
#: KEY_BLOCK 32, MAX_D 64, MAX_KB 32) at keys 32..1024 and d 16/32/64, and two other shapes the
#: templates allow.
MEASURED: tuple[tuple[KernelShape, tuple[tuple[int, int], ...]], ...] = (
    (DEFAULT_SHAPE, tuple((keys, d) for keys in (32, 64, 128, 256, 512, 1024) for d in (16, 32, 64))),
    (KernelShape(q_rows=8, key_block=16, max_d=32, max_kb=4), ((16, 16), (64, 32))),
    (KernelShape(q_rows=16, key_block=64, max_d=128, max_kb=8), ((64, 128), (512, 64))),
)

KERNEL_MODES = {"qk_matmul": "qk", "pv_matmul": "pv"}


def shape_for(q_rows: int, keys: int, d: int, key_block: int = DEFAULT_SHAPE.key_block) -> KernelShape:
    """The committed build's shape when it can run the tile, else the smallest build that can."""
    if (q_rows, key_block) == (DEFAULT_SHAPE.q_rows, DEFAULT_SHAPE.key_block) and d <= DEFAULT_SHAPE.max_d \
            and keys <= DEFAULT_SHAPE.key_block * DEFAULT_SHAPE.max_kb:
        return DEFAULT_SHAPE
    return KernelShape(q_rows=q_rows, key_block=key_block, max_d=max(d, 16), max_kb=max(keys // key_block, 1))


def measure_shape(kernel: str, shape: KernelShape, geometry: Sequence[tuple[int, int]],
                  seed: int = SEED) -> list[dict[str, int]]:
    """Instrumented counts of one ``kernel`` tile per ``(keys, d)`` of ``geometry``, all in one run of
    the vector-path test bench built for ``shape``. Each tile's output is checked bit for bit
    against the golden model (``AssertionError`` otherwise)."""
    if kernel not in KERNEL_MODES:
        raise ValueError(f"kernel must be one of {tuple(KERNEL_MODES)}, got {kernel!r}")
    rng = np.random.default_rng([seed, shape.q_rows, shape.key_block])
    r, kb = shape.q_rows, shape.key_block
    a_tiles = [rng.integers(-128, 128, (r, d) if kernel == "qk_matmul" else (keys, d), dtype=np.int8)
               for keys, d in geometry]
    if kernel == "qk_matmul":
        b_tiles = [rng.integers(-128, 128, (keys, d), dtype=np.int8) for keys, d in geometry]
        a = pack_q_stream(a_tiles, [keys // kb for keys, _ in geometry])
        b = pack_k_stream(b_tiles, kb)
    else:
        b_tiles = [rng.integers(0, 256, (r, keys), dtype=np.uint8) for keys, _ in geometry]
        a = pack_v_stream(a_tiles, kb)
        b = pack_p_stream(b_tiles, kb)
    exe = build(vector_emu=True, shape=shape)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "counts.jsonl"
        out = run_binary(exe, tb_input(KERNEL_MODES[kernel], a, b), args=["--op-counts", str(path)])
        records = [json.loads(line) for line in path.read_text().splitlines()]
    if kernel == "qk_matmul":
        got = unpack_s_stream(out, [keys // kb for keys, _ in geometry], r, kb)
        want = [tile_matmul(q, k.T) for q, k in zip(a_tiles, b_tiles, strict=True)]
    else:
        got = unpack_o_stream(out, [d for _, d in geometry], r)
        want = [tile_matmul(p, v, a_fmt=UINT8) for p, v in zip(b_tiles, a_tiles, strict=True)]
    for t, (g, w) in enumerate(zip(got, want, strict=True)):
        assert np.array_equal(g, w), f"{kernel} tile {t}: the instrumented vector path differs from the golden model"
    assert len(records) == len(geometry), f"{len(records)} count records for {len(geometry)} tiles"
    for rec, (keys, d) in zip(records, geometry, strict=True):
        assert (rec["n_kb"], rec["d"], rec["q_rows"], rec["key_block"]) == (keys // kb, d, r, kb), rec
    return [dict(rec["counts"]) for rec in records]


def measure(kernel: str, q_rows: int, keys: int, d: int, key_block: int = DEFAULT_SHAPE.key_block) -> dict[str, int]:
    """Instrumented counts of one tile (built for :func:`shape_for` the geometry)."""
    return measure_shape(kernel, shape_for(q_rows, keys, d, key_block), [(keys, d)])[0]


def data_file(measured: Sequence[tuple[KernelShape, Sequence[tuple[int, int]]]] = MEASURED) -> dict[str, Any]:
    """The content of ``hw/perf/data/aie_tiles.json``: model constants, cost table, and per tile the
    instrumented counts, the closed-form check and the modeled cycles (JSON-ready)."""
    tiles = []
    for shape, geometry in measured:
        for kernel in aie.KERNELS:
            for counts, (keys, d) in zip(measure_shape(kernel, shape, geometry), geometry, strict=True):
                closed = aie.op_counts(kernel, shape.q_rows, keys, d, key_block=shape.key_block)
                report = aie.tile_report(kernel, shape.q_rows, keys, d, key_block=shape.key_block)
                tiles.append({
                    "kernel": kernel, "q_rows": shape.q_rows, "key_block": shape.key_block, "keys": keys, "d": d,
                    "build": {"q_rows": shape.q_rows, "key_block": shape.key_block, "max_d": shape.max_d,
                              "max_kb": shape.max_kb},
                    "counts": dict(sorted(counts.items())),
                    "closed_form_equal": closed == dict(sorted(counts.items())),
                    "macs": report["macs"],
                    "cycles": report["cycles"],
                    "breakdown": report["breakdown"],
                    "bottleneck": report["bottleneck"],
                    "efficiency": report["efficiency"],
                    "compute_efficiency": report["compute_efficiency"],
                })
    return {
        "about": ("AIE1 core cycles of one qk_matmul / pv_matmul tile: MODELED (hw/perf/aie.py), from operation "
                  "counts of the kernels' vector path run on g++ over the counting AIE API emulation "
                  "(hw/aie/aie_api_emu.h) and a cost table with sources. Not measured on a board."),
        "generated_by": COMMAND,
        "counts_from": "sim/cpp/aie_kernels_tb.cpp built with -DVCKATTN_AIE_VECTOR_EMU, run with --op-counts",
        "peak_macs_per_cycle": aie.PEAK_MACS_PER_CYCLE,
        "loop_fill_cycles": aie.LOOP_FILL_CYCLES,
        "combination": "cycles = stream_in + compute + stream_out (the kernel code runs them in sequence)",
        "slots": aie.SLOTS,
        "cost_table": aie.COST_TABLE,
        "not_instrumented": sorted(aie.NOT_INSTRUMENTED),
        "tiles": tiles,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vckattn.sim.aie_perf", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(aie.DATA_PATH.relative_to(REPO_ROOT)),
                        help="JSON file to write (default: %(default)s, relative to the repository root)")
    args = parser.parse_args(argv)
    data = data_file()
    out = Path(args.out)
    if not out.is_absolute():
        out = REPO_ROOT / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    bad = [t for t in data["tiles"] if not t["closed_form_equal"]]
    print(f"{out}: {len(data['tiles'])} tiles, closed form equal to the instrumented counts: "
          f"{len(data['tiles']) - len(bad)}/{len(data['tiles'])}")
    for t in data["tiles"]:
        if t["q_rows"] == 32 and t["d"] == 64 and t["keys"] in (128, 512):
            print(f"  {t['kernel']} ({t['q_rows']}, {t['keys']}, {t['d']}): {t['cycles']:.0f} cycles, "
                  f"efficiency {t['efficiency']:.1%} (compute only {t['compute_efficiency']:.1%})")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

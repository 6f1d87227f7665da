"""Instrumented operation counts of the engine's AIE kernels (stream contract v3), for the engine's AIE cost model.

Runs whole one-pipeline launches of the engine C-simulation with the AIE kernels on their vector path over the
operation-counting ``hw/aie/aie_api_emu.h`` (``sim/engine_csim.py`` ``op_counts``): every QKᵀ and P·V kernel
invocation's AIE API counts come back, tagged with the kernel variant and, for QKᵀ, whether the tile took the masked
loop body. The launch's A buffer is checked against the functional model (counting must not change results).
:mod:`vckattn.hw.perf.engine_aie` turns counts into modeled cycles; its closed form must equal these counts.

``python -m vckattn.sim.engine_aie_perf`` regenerates ``hw/perf/data/engine_kernels.json``: the cost table entries
the kernels use, per build of :data:`MEASURED` the instrumented counts of each distinct invocation, whether the closed
form equals them, and the modeled cycles and efficiency; and the efficiencies of the BERT-base shapes
(:data:`BERT_SHAPES`) from the closed form.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.engine import (
    RQ_MULT_BITS,
    engine_format,
    engine_registers,
    pack_k,
    pack_q,
    pack_v,
    slice_needs_mask,
)
from vckattn.golden.requant import requant_registers
from vckattn.golden.swiftmax_int import swiftmax_registers
from vckattn.hw.perf import aie, calibration, engine_aie
from vckattn.hw.spec import streams
from vckattn.hw.spec.functional import EngineParams, run_launch_model
from vckattn.sim.engine_csim import run_engine_launch
from vckattn.sim.hls_csim import REPO_ROOT

__all__ = ["BERT_SHAPES", "COMMAND", "MEASURED", "data_file", "invocations", "measure_build", "variant_key"]

COMMAND = "python -m vckattn.sim.engine_aie_perf --out hw/perf/data/engine_kernels.json"
SEED = 20260801


def rq_for(p: EngineParams) -> Any:
    """The launch's O requantization: a scale of 1 / (32 · MAX_KEYS) (1/4096 at 128 keys), so that A spans a range of
    int8 values at every build size (O grows with the keys summed)."""
    return requant_registers(1 / (32 * p.max_keys), bits=RQ_MULT_BITS)


#: builds measured for the data file: BERT-base's shape (k = 4 slices of 128 keys, D 64, Q_ROWS 32 and 16), a
#: three-kernel build (a middle P.V kernel), int16 scores, a one-kernel build with Q_ROWS 4 (one row block a register
#: block)
MEASURED: tuple[dict[str, int], ...] = (
    dict(kernels=4, score_plios=1, q_rows=32, d=64, max_keys=512, score_bits=8),
    dict(kernels=4, score_plios=2, q_rows=16, d=64, max_keys=512, score_bits=8),
    dict(kernels=3, score_plios=3, q_rows=16, d=16, max_keys=96, score_bits=8),
    dict(kernels=2, score_plios=1, q_rows=8, d=48, max_keys=64, score_bits=16),
    dict(kernels=1, score_plios=1, q_rows=4, d=16, max_keys=16, score_bits=8),
)

#: BERT-base attention's per-invocation shapes (head size 64, int8 scores): (q_rows, sk)
BERT_SHAPES: tuple[tuple[int, int], ...] = ((64, 128), (64, 64), (32, 128), (32, 64), (32, 32), (16, 128), (16, 64),
                                            (16, 32))


def variant_key(kernel: str, masked: bool) -> str:
    """``qk``, ``qk_masked`` or a P·V variant's name."""
    return f"{kernel}_masked" if masked else kernel


def _launch(p: EngineParams, rng: np.random.Generator) -> dict[str, Any]:
    """One pipeline's launch covering masked and unmasked tiles: groups of every key valid (unmasked tiles), with
    padding (slices fully or partly masked), causal, and a partial last tile; the LOAD_V headers carry
    :func:`rq_for`."""
    r, mk = p.q_rows, p.max_keys
    specs = [(mk, [(r, 0, False), (r, r, False)]), (mk - 3, [(r, 0, True), (r - 1, r, False)]),
             (max(1, mk // 2 - 5), [(r, 0, False)])]
    k, sk = p.kernels, p.slice_keys
    qs, ks, vs, q_cmds, kv_cmds, q_in, kv_in = [], [], [], [], [], [], []
    tid = 0
    for g, (valid, tiles) in enumerate(specs):
        kk = rng.integers(-100, 101, (k, sk, p.d)).astype(np.int8)
        vv = rng.integers(-100, 101, (k, sk, p.d)).astype(np.int8)
        ks.append(pack_k(kk))
        vs.append(pack_v(vv))
        for j in range(2 * k):
            h = streams.encode("slice", packet_id=j, op=streams.OP_LOAD_K if j < k else streams.OP_LOAD_V,
                               slice=j % k, tiles=len(tiles), first_tile=tid,
                               rq_mult=0 if j < k else streams.int16_bits(rq_for(p).mult),
                               rq_shift=0 if j < k else int(rq_for(p).shift))
            payload = (ks if j < k else vs)[g][j % k]
            kv_cmds.append(np.concatenate([h, np.array([(g * k + j % k) * sk * p.d], "<u8").view(np.uint8),
                                           np.zeros(8, np.uint8)]))
            kv_in.append(np.concatenate([h, payload.view(np.uint8)]))
        for rows, q0, causal in tiles:
            q = pack_q(rng.integers(-100, 101, (r, p.d)).astype(np.int8))
            qs.append(q)
            h = streams.encode("tile", op=streams.OP_TILE, causal=int(causal), score_shift=9, valid_keys=valid,
                               rows=rows, q0=q0, head=0, tag=tid)
            q_cmds.append(np.concatenate([h, np.array([tid * r * p.d], "<u8").view(np.uint8), np.zeros(8, np.uint8)]))
            q_in.append(np.concatenate([h, q.view(np.uint8)]))
            tid += 1
    return {"q_cmds": np.array(q_cmds), "kv_cmds": np.array(kv_cmds), "q_src": np.stack(qs), "k_src": np.stack(ks),
            "v_src": np.stack(vs), "q_in": np.concatenate(q_in), "kv_in": np.concatenate(kv_in), "n_tiles": tid,
            "specs": specs}


def invocations(params: dict[str, int], seed: int = SEED) -> tuple[EngineParams, list[dict[str, Any]]]:
    """Every AIE kernel invocation of one launch of a one-pipeline build ``params`` (:data:`MEASURED` entries'
    form) with its instrumented counts (``kernel``, ``j``, ``tile``, ``masked``, ``counts``). The launch's A buffer
    and done log are checked bit for bit against the functional model (``AssertionError`` otherwise), and each
    QKᵀ invocation's masked flag against golden's ``slice_needs_mask``."""
    p = EngineParams(pipelines=1, lanes=1, **params)
    rng = np.random.default_rng([seed, p.kernels, p.q_rows, p.d, p.max_keys])
    la = _launch(p, rng)
    fmt = engine_format(p.score_bits)
    regs = engine_registers(swiftmax_registers(0.03, 0.03, p.d, beta=4.0, gamma=24.0, out_frac=8, fmt=fmt), 0.03, 0.03,
                            p.d, 9, fmt)
    res = run_engine_launch(p, [la["q_cmds"]], [la["kv_cmds"]], la["q_src"], la["k_src"], la["v_src"],
                            [la["n_tiles"]], regs, vector=True, op_counts=True)
    assert res.ok, (res.failed, res.leftover, res.missing)
    a, done = run_launch_model(p, [la["q_in"]], [la["kv_in"]], la["n_tiles"], regs, fmt)
    assert len(np.unique(a)) > 16, "the launch's A records are degenerate (the requantization saw no range)"
    assert np.array_equal(res.a, a) and np.array_equal(res.done[0], done[0]), \
        "the instrumented vector path differs from the functional model"
    tiles = {}
    tid = 0
    for valid, ts in la["specs"]:
        for rows, q0, causal in ts:
            tiles[tid] = (rows, q0, valid, causal)
            tid += 1
    for inv in res.op_counts:
        if inv["kernel"] == "qk":
            rows, q0, valid, causal = tiles[inv["tile"]]
            want = slice_needs_mask(p.q_rows, p.slice_keys, inv["j"], rows, q0, valid, causal)
            assert bool(inv["masked"]) == want, inv
    return p, res.op_counts


def measure_build(params: dict[str, int], seed: int = SEED) -> dict[str, dict[str, int]]:
    """The instrumented counts of each distinct invocation variant of a build (:func:`variant_key` -> counts);
    ``AssertionError`` when two invocations of one variant count differently."""
    _, inv = invocations(params, seed)
    out: dict[str, dict[str, int]] = {}
    for x in inv:
        key = variant_key(x["kernel"], bool(x["masked"]))
        if key in out:
            assert out[key] == x["counts"], f"{key}: invocations of one variant count differently"
        out[key] = x["counts"]
    return out


def data_file(measured: Sequence[dict[str, int]] = MEASURED) -> dict[str, Any]:
    """The content of ``hw/perf/data/engine_kernels.json`` (module docstring; JSON-ready)."""
    builds, used = [], set()
    for params in measured:
        p = EngineParams(pipelines=1, lanes=1, **params)
        rows = []
        for key, counts in sorted(measure_build(params).items()):
            kernel, masked = key.removesuffix("_masked"), key.endswith("_masked")
            args = (kernel, p.q_rows, p.slice_keys, p.d, p.score_bits, masked)
            used |= set(counts)
            rows.append({"variant": key, "counts": dict(sorted(counts.items())),
                         "closed_form_equal": engine_aie.op_counts(*args) == counts,
                         **{k: v for k, v in engine_aie.invocation_report(*args).items()
                            if k in ("macs", "cycles", "efficiency")}})
        builds.append({"build": params, "slice_keys": p.slice_keys, "invocations": rows})
    bert = [engine_aie.invocation_report(kernel, q, sk, 64, 8, masked)
            for q, sk in BERT_SHAPES for kernel in engine_aie.KERNELS for masked in ((False, True) if kernel == "qk"
                                                                                       else (False,))]
    return {
        "about": ("AIE1 core cycles of one invocation of each engine kernel (stream contract v3): MODELED "
                  "(hw/perf/engine_aie.py), from the operation counts of the kernels' vector path run on g++ over the "
                  "counting AIE API emulation (hw/aie/aie_api_emu.h) in whole launches, and a cost table with sources. "
                  "Not measured on a board."),
        "generated_by": COMMAND,
        "counts_from": "sim/cpp/engine_csim_tb.cpp built with -DVCKATTN_AIE_VECTOR_EMU, run with OPCOUNTS",
        "peak_macs_per_cycle": aie.PEAK_MACS_PER_CYCLE,
        "loop_fill_cycles": aie.loop_fill_cycles(),
        "sync_cycles_per_port": calibration.param("sync_cycles_per_port"),
        "sync_ports": {kernel: engine_aie.sync_ports(kernel) for kernel in engine_aie.KERNELS},
        "slots": aie.SLOTS,
        "cost_table": {k: aie.COST_TABLE[k] for k in sorted(used)},
        "builds": builds,
        "bert_base": bert,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vckattn.sim.engine_aie_perf", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(engine_aie.DATA_PATH.relative_to(REPO_ROOT)),
                        help="JSON file to write (default: %(default)s, relative to the repository root)")
    args = parser.parse_args(argv)
    data = data_file()
    out = Path(args.out)
    if not out.is_absolute():
        out = REPO_ROOT / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    rows = [r for b in data["builds"] for r in b["invocations"]]
    bad = [r["variant"] for r in rows if not r["closed_form_equal"]]
    print(f"{out}: {len(rows)} kernel variants in {len(data['builds'])} builds, closed form equal to the instrumented "
          f"counts: {len(rows) - len(bad)}/{len(rows)}")
    print("BERT-base (D 64, int8 scores), modeled per invocation (MACs / (cycles x 128)):")
    for r in data["bert_base"]:
        print(f"  {variant_key(r['kernel'], r['masked']):10s} Q_ROWS {r['q_rows']:2d} SK {r['sk']:3d}: "
              f"{r['cycles']['total']:6.0f} cycles, {r['macs']:6d} MACs, efficiency {r['efficiency']:.1%}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmarks: measured side by side in one run, ratios printed, JSON written.

``vckattn bench host``: the host's own time per launch of an engine build against the modeled device time of that
launch (:func:`bench_host`).

``vckattn bench emulator``: the bit-exact integer emulation of one attention layer
(projections, QKᵀ, SwiftMax or online-softmax normalizer, P·V, W_O) against torch
fp32 attention of the same size (nn.Linear projections + scaled_dot_product_attention),
both on this machine's CPU threads. The two are run alternately, ``repeats`` times
each, and the medians are compared, so background load hits both alike.
"""

from __future__ import annotations

import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.quant_attention import calibrate_attention
from vckattn.golden.stages import attention_int
from vckattn.host.output import write_json


def _float_attention(mha: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    b, s, d = x.shape
    h, hd = mha.n_heads, mha.head_dim
    q = mha.q_proj(x).view(b, s, h, hd).transpose(1, 2)
    k = mha.k_proj(x).view(b, s, h, hd).transpose(1, 2)
    v = mha.v_proj(x).view(b, s, h, hd).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v)
    return mha.o_proj(o.transpose(1, 2).reshape(b, s, d))


def bench_emulator(seq: int = 512, heads: int = 12, d_head: int = 64, repeats: int = 15, seed: int = 0,
                   normalizers: tuple[str, ...] = ("swiftmax", "softmax")) -> dict:
    """Time the integer emulator against torch fp32 attention; returns the JSON report."""
    torch.manual_seed(seed)
    d = heads * d_head
    mha = MultiHeadAttention(d, heads, bias=True)
    x = torch.randn(1, seq, d, generator=torch.Generator().manual_seed(seed))
    x64 = x.double().numpy()
    layers = {n: calibrate_attention(mha, x64, None, n, beta=3.0, gamma=float(seq) / 8) for n in normalizers}
    mha = mha.float()
    times: dict[str, list[float]] = {"torch_fp32": [], **{f"emulator_{n}": [] for n in normalizers}}
    with torch.no_grad():
        _float_attention(mha, x)  # warm-up
        for layer in layers.values():
            attention_int(layer, x64)
        for _ in range(repeats):
            t = time.perf_counter()
            _float_attention(mha, x)
            times["torch_fp32"].append(time.perf_counter() - t)
            for n, layer in layers.items():
                t = time.perf_counter()
                attention_int(layer, x64)
                times[f"emulator_{n}"].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "benchmark": "emulator",
        "shape": {"seq": seq, "heads": heads, "d_head": d_head, "d_model": d, "batch": 1},
        "repeats": repeats,
        "median_seconds": med,
        "all_seconds": times,
        "speed_ratio_vs_torch_fp32": {k: med["torch_fp32"] / v for k, v in med.items() if k != "torch_fp32"},
        # each emulator run is timed right after a torch run: the median of those pairwise ratios
        # is less sensitive to load drifting during the benchmark than the ratio of medians
        "median_pairwise_ratio": {k: statistics.median(f / e for f, e in zip(times["torch_fp32"], v, strict=True))
                                  for k, v in times.items() if k != "torch_fp32"},
        "torch_threads": torch.get_num_threads(),
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                    "processor": platform.processor() or platform.machine()},
        "note": "ratio = torch fp32 time / emulator time (1.0 = as fast as float; goal >= 0.5)",
    }


def run(json_out: Path | None, **kwargs: object) -> dict:
    """Run :func:`bench_emulator`, print a table, write JSON."""
    from rich.table import Table

    from vckattn.host.cli.common import make_console

    report = bench_emulator(**kwargs)  # type: ignore[arg-type]
    sh = report["shape"]
    table = Table(title=f"attention layer S={sh['seq']}, {sh['heads']} heads × {sh['d_head']} "
                        f"(median of {report['repeats']}, {report['torch_threads']} threads)")
    table.add_column("implementation")
    table.add_column("median ms", justify="right")
    table.add_column("speed vs torch fp32 (ratio of medians)", justify="right")
    table.add_column("median of pairwise ratios", justify="right")
    for k, v in report["median_seconds"].items():
        ratio = report["speed_ratio_vs_torch_fp32"].get(k, 1.0)
        pair = report["median_pairwise_ratio"].get(k, 1.0)
        table.add_row(k, f"{v * 1e3:.1f}", f"{ratio:.2f}×", f"{pair:.2f}×")
    make_console().print(table)
    if json_out is not None:
        write_json(json_out, report)
        make_console().print(f"wrote {json_out}")
    return report


# ------------------------------------------------------------------------------------ host time per launch


def bench_host(manifest_name: str = "vck5000_engine", seq: int = 512, heads: int = 12, d_head: int = 64,
                      batch: int = 8, repeats: int = 21, seed: int = 0) -> dict:
    """Host time per launch of an engine build (one launch per layer) against the modeled device time of that
    launch (:mod:`vckattn.hw.perf.model` on the build's design point, BERT-style workload from the flags).

    Measured per launch, medians of ``repeats``:

    * ``host_launch`` — what the host does for every launch, launches back to back:
      :func:`~vckattn.host.engine.launch_commands` (the command lists from the per-geometry cache, the key-mask
      check) plus :func:`~vckattn.host.engine.check_done` on the done buffer a correct launch leaves and the A buffer
      as head outputs. This is the figure held against the device time (goal: < 5%).
    * ``host_launch_after_copy`` — the same right after the layer's operand copy (CPU caches cold, as when the host
      computes the projections between launches).
    * ``host_launch_new_mask`` — a launch whose padding or score shift the cache has not seen (a new batch, a new
      layer): the command lists are patched from the shape's template.
    * ``host_launch_new_shape`` — the first launch of a shape (batch, heads, S, d): the template is built once.
    * ``operand_copy`` — placing Q, K, V from the projections' (B, S, H·d) layout into the card's buffers, re-tiled
      into the AIE kernels' block layouts (:func:`~vckattn.host.engine.retile`: one strided copy each): the host side
      of the operand transfer, which the model counts as its own stage (PCIe / DDR).

    The device itself is not run (nothing here can); the launch's done buffer is the expected one.
    """
    from vckattn.golden.engine import RQ_MULT_BITS
    from vckattn.golden.requant import requant_registers
    from vckattn.host.engine import (
        _template,
        check_done,
        commands,
        heads_from_a,
        launch_commands,
        params_from_manifest,
        plan_launch,
        retile,
    )
    from vckattn.hw.design.manifest import load_manifest
    from vckattn.hw.perf.model import design_from_json, evaluate, load_device, workload_from_flags

    manifest = load_manifest(manifest_name)
    params = params_from_manifest(manifest)
    eng = manifest.data["engine"]
    design = design_from_json(eng["design"])
    dev = load_device(manifest.data["board"])
    perf = evaluate(workload_from_flags(heads, d_head, seq, batch), design, dev)
    launch_s = design.host_launches_per_layer * dev.host_seconds_per_launch
    device_s = perf.seconds_per_layer - launch_s  # the block's pipelined stages, without the assumed XRT launch
    rng = np.random.default_rng(seed)
    flat = {n: rng.integers(-128, 128, (batch, seq, heads * d_head), dtype=np.int8) for n in "qkv"}
    heads_view = {n: a.reshape(batch, seq, heads, d_head).transpose(0, 2, 1, 3) for n, a in flat.items()}
    keep = np.ones((batch, 1, seq), bool)
    keep[-1, 0, seq - seq // 8:] = False  # one padded sequence
    shift = 7
    rq = requant_registers(1 / 3000, bits=RQ_MULT_BITS)  # an engine layer's output requantization
    rows: dict[str, list[float]] = {"host_launch": [], "host_launch_after_copy": [], "host_launch_new_mask": [],
                                    "host_launch_new_shape": [], "operand_copy": []}
    launch = plan_launch(params, heads_view["q"], heads_view["k"], heads_view["v"], keep, False, shift, rq)  # warm
    a_buf = np.zeros((launch.cmds.n_tiles, params.q_rows, params.d), np.int8)
    # the operand buffers are allocated once (on a card: the launch's buffer objects, mapped), as is the done buffer
    placed = (np.empty_like(launch.q), np.empty_like(launch.k), np.empty_like(launch.v))
    done = launch.cmds.done_expected.copy()  # what the output movers leave (a correct launch)
    keep_alive = []

    def one_launch() -> float:
        t0 = time.perf_counter()
        cmds = launch_commands(params, heads_view["q"].shape, heads, keep, False, shift, rq)
        check_done(cmds, done)
        heads_from_a(cmds, a_buf)
        t1 = time.perf_counter()
        keep_alive.append(cmds)  # freeing is not part of a launch
        return t1 - t0

    for _ in range(repeats):  # launches back to back: the host's own work with warm caches
        rows["host_launch"].append(one_launch())
    for _ in range(repeats):  # each launch after the operand copy of its layer: caches cold, as in a model run
        t = time.perf_counter()
        retile(params, heads_view["q"], heads_view["k"], heads_view["v"], out=placed)
        rows["operand_copy"].append(time.perf_counter() - t)
        rows["host_launch_after_copy"].append(one_launch())
    for _ in range(max(3, repeats // 4)):  # a new batch's padding / a new layer's shift: lists patched
        commands.cache_clear()
        rows["host_launch_new_mask"].append(one_launch())
    for _ in range(3):  # the first launch of a shape: the template command lists are built
        commands.cache_clear()
        _template.cache_clear()
        rows["host_launch_new_shape"].append(one_launch())
    med = {k: statistics.median(v) for k, v in rows.items()}
    return {
        "benchmark": "engine_host",
        "manifest": manifest.name,
        "engine": {"pipelines": params.pipelines, "kernels_per_pipeline": params.kernels,
                   "score_plios": params.score_plios, "q_rows": params.q_rows, "d": params.d,
                   "max_keys": params.max_keys, "score_bits": params.score_bits, "lanes": params.lanes},
        "shape": {"batch": batch, "seq": seq, "heads": heads, "d_head": d_head, "tiles": int(launch.cmds.n_tiles),
                  "commands": int(sum(len(c) for c in launch.cmds.q) + sum(len(c) for c in launch.cmds.kv))},
        "repeats": repeats,
        "median_seconds": med,
        "all_seconds": rows,
        "modeled_device_seconds": device_s,
        "modeled_device_note": (f"MODELED (hw/perf/model.py, {dev.board}, design of {manifest.name}): one layer's "
                                "pipelined stages, without the assumed per-launch XRT start/wait "
                                f"({launch_s * 1e6:.0f} µs, an assumption in device.json)"),
        "host_over_device": med["host_launch"] / device_s,
        "host_over_device_after_copy": med["host_launch_after_copy"] / device_s,
        "host_over_device_new_mask": med["host_launch_new_mask"] / device_s,
        "operand_copy_over_device": med["operand_copy"] / device_s,
        "goal": "host_over_device < 0.05",
        "machine": {"python": platform.python_version(), "numpy": np.__version__,
                    "processor": platform.processor() or platform.machine()},
    }


def run_host(json_out: Path | None, **kwargs: object) -> dict:
    """Run :func:`bench_host`, print a table, write JSON."""
    from rich.table import Table

    from vckattn.host.cli.common import make_console

    r = bench_host(**kwargs)  # type: ignore[arg-type]
    sh, e = r["shape"], r["engine"]
    t = Table(title=f"host time per launch, {r['manifest']} ({e['pipelines']} pipelines × {e['kernels_per_pipeline']} "
                    f"kernels): batch {sh['batch']} × {sh['heads']} heads × S={sh['seq']}, {sh['tiles']} tiles, "
                    f"{sh['commands']} commands (median of {r['repeats']})")
    t.add_column("quantity")
    t.add_column("µs per launch", justify="right")
    t.add_column("/ modeled device time", justify="right")
    dev = r["modeled_device_seconds"]
    for k, label in (("host_launch", "host per launch (commands cached), back to back"),
                     ("host_launch_after_copy", "host per launch right after the operand copy"),
                     ("host_launch_new_mask", "host per launch, new padding or shift (lists patched)"),
                     ("host_launch_new_shape", "first launch of a shape (lists built, once)"),
                     ("operand_copy", "operand copy into the Q/K/V buffers (transfer stage)")):
        t.add_row(label, f"{r['median_seconds'][k] * 1e6:.1f}", f"{r['median_seconds'][k] / dev:.1%}")
    t.add_row("modeled device time of the launch (MODELED)", f"{dev * 1e6:.1f}", "100%")
    make_console().print(t)
    make_console().print(f"host / device = {r['host_over_device']:.1%} (goal < 5%)")
    if json_out is not None:
        write_json(json_out, r)
        make_console().print(f"wrote {json_out}")
    return r

"""``vckattn eval``: a whole model with its attention layers on a backend, scored end to end.

The full description: ``docs/internals/host.md``, section ``host/eval.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vckattn.golden.errors import UserError
from vckattn.host.run_common import BACKEND_CHOICES, load_inputs, precheck, reference_model, report_head
from vckattn.host.scoring import (
    DEFAULT_SENTENCES,
    DEFAULT_START_TOPIC,
    DEFAULT_TASK_SAMPLES,
    IMAGE_TASKS,
    TASKS,
    Runner,
    embeddings,
    end_to_end,
    held_out,
    set_swiftmax,
    stages_on,
    swiftmax_constants,
    swiftmax_saturations,
    task_data,
)

if TYPE_CHECKING:
    from vckattn.golden.stages import Constants


def device_runner(device: Any, bundle: Any, consts: dict[int, Constants], keep: np.ndarray,
                  stats: dict[int, dict]) -> Runner:
    """A runner (:data:`~vckattn.host.scoring.Runner`) that runs each layer's stage list on ``device`` (a
    :class:`~vckattn.host.backends.staged.StagedDevice`) with the constants ``consts`` on the tokens ``keep``;
    per layer ``stats[i]`` gets ``{"tiles", "device_seconds"}``."""
    from vckattn.host.run import run_on_device

    def run(i: int, x: np.ndarray, rope: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        _, _, r, out = run_on_device(device, bundle, i, consts[i], x, keep, rope)
        stats[i] = {"tiles": int(device.engine.last_launch.cmds.n_tiles), "device_seconds": r.device_seconds}
        return out
    return run


def evaluate(bundle_path: Path, backend: str = "emu", *, layers: list[int] | None = None,
             manifest_path: Path | str | None = None, checkpoint: Path | None = None,
             n_sentences: int = DEFAULT_SENTENCES, start_topic: int = DEFAULT_START_TOPIC,
             max_tokens: int | None = None, device_options: dict | None = None,
             progress: bool = True, task: str | None = None, reference: Path | str | None = None,
             n_samples: int = DEFAULT_TASK_SAMPLES) -> dict:
    """Score the model with the bundle's layers on ``backend``, through the build's stage list (a sublayer build:
    whole sublayers; an attention build: the attention core); the JSON report of the module docstring."""
    from vckattn.host.backends.staged import StagedDevice
    from vckattn.host.run import check_layers, float_reference, staged_layers
    from vckattn.host.run_common import errors
    from vckattn.hw.design.manifest import default_manifest, load_manifest

    t0 = time.perf_counter()
    if backend not in BACKEND_CHOICES:
        raise UserError(f"unknown backend {backend!r}; choose one of {', '.join(BACKEND_CHOICES)}")
    if task is not None and task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    manifest = load_manifest(manifest_path or default_manifest(backend))
    max_tokens = precheck(bundle_path, layers, manifest, n_sentences if task is None else None, max_tokens, task,
                          backend)
    device = StagedDevice(manifest, backend, **(device_options or {}))
    bundle, chosen, m = load_inputs(bundle_path, layers, checkpoint, progress, classifier=task is not None)
    scope, family, consts = staged_layers(bundle, bundle_path, manifest, device, chosen)
    data = held_out(m, n_sentences, start_topic, max_tokens) if task is None else task_data(m, task, n_samples,
                                                                                           max_tokens)
    keep = data.keep
    check_layers(device, bundle, consts, int(keep.shape[1]))  # refused before the model runs
    if reference is None:  # a checkpoint tuned by `vckattn calibrate swiftmax`: compare with the model it came from
        from vckattn.host.export.pipeline import tuned_base
        from vckattn.host.run_common import source_checkpoint

        reference = tuned_base(source_checkpoint(bundle, checkpoint))
    ref_m = reference_model(m, reference, progress, task is not None)

    ref_rec: dict[int, dict] = {}
    with stages_on(ref_m, family, chosen, None, ref_rec):
        ref = embeddings(ref_m, data)

    stats: dict[int, dict] = {}
    dev_rec: dict[int, dict] = {}
    with device, stages_on(m, family, chosen, device_runner(device, bundle, consts, keep, stats), dev_rec):
        dev = embeddings(m, data)

    sm = swiftmax_constants(bundle, chosen)
    sat = swiftmax_saturations(bundle, chosen)
    sm_rec: dict[int, dict] = {}
    set_swiftmax(m, sm, sat)
    with stages_on(m, family, chosen, None, sm_rec):
        swift = embeddings(m, data)

    per_layer = []
    for i in chosen:
        beta, gamma = sm.get(i, (None, None))
        entry = next(e for e in bundle.manifest["layers"] if int(e["index"]) == i)
        f = float_reference(m, i, entry, consts[i], family, dev_rec[i]["x"], keep, dev_rec[i]["rope"])
        per_layer.append({"layer": i, "normalizer": "swiftmax" if i in sm else "softmax", "beta": beta,
                          "gamma": gamma, "p_max": sat.get(i),
                          "backend_vs_float_layer": errors(dev_rec[i]["out"], f, keep),
                          "backend_vs_softmax_model": errors(dev_rec[i]["out"], ref_rec[i]["out"], keep),
                          "float_swiftmax_vs_softmax_model": errors(sm_rec[i]["out"], ref_rec[i]["out"], keep),
                          **stats[i]})
    return {**report_head(bundle_path, backend, device, manifest, bundle, checkpoint, reference, task, chosen, data,
                          start_topic, max_tokens),
            "scope": scope, "family": family, "end_to_end": end_to_end(task, data, ref, swift, dev),
            "per_layer": per_layer, "device_seconds": float(sum(s["device_seconds"] for s in stats.values())),
            "seconds": time.perf_counter() - t0}


def print_report(report: dict) -> None:
    """The per-layer and end-to-end tables (rich)."""
    from rich.table import Table

    from vckattn.host.cli.common import make_console

    b = report["backend"]
    what = "sublayer" if report.get("scope") == "sublayer" else "attention"
    t = Table(title=f"vckattn eval — {what} output per layer, backend {b} ({report['device']})")
    for col in ("layer", "normalizer", f"{b} cos vs float layer", f"{b} max rel err", f"{b} cos vs softmax model",
                "float SwiftMax cos vs softmax model", "tiles"):
        t.add_column(col, justify="right")
    for r in report["per_layer"]:
        t.add_row(str(r["layer"]), r["normalizer"], f"{r['backend_vs_float_layer']['cosine']:.6f}",
                  f"{r['backend_vs_float_layer']['max_rel_error']:.3g}",
                  f"{r['backend_vs_softmax_model']['cosine']:.6f}",
                  f"{r['float_swiftmax_vs_softmax_model']['cosine']:.6f}", str(r.get("tiles", "—")))
    s = report["sentences"]
    task = report.get("task")
    what = ("held-out sentences" if task is None else f"{task} test images" if task in IMAGE_TASKS
            else f"{task} test snippets")
    e = Table(title=f"end to end: {report['metric']}; {s['count']} {what}, {s['tokens']} tokens")
    cols = ("model", "mean cosine", "min cosine") if task is None else ("model", "accuracy", "agreement with softmax")
    for col in cols:
        e.add_column(col, justify="left" if col == "model" else "right")
    names = {"float_softmax": f"float softmax ({report['reference']})",
             "float_swiftmax": "float SwiftMax (bundle's β/γ)", "backend": f"bundle on {b}"}
    for k, label in names.items():
        v = report["end_to_end"][k]
        if task is None:
            e.add_row(label, f"{v['mean_cosine']:.6f}", f"{v['min_cosine']:.6f}")
        else:
            e.add_row(label, f"{v['accuracy']:.4f}", f"{v['agreement']:.4f}")
    c = make_console()
    c.print(t)
    c.print(e)


def write_plots(report: dict, out_dir: Path) -> list[Path]:
    """``layers.png`` (per-layer 1 − cosine of the attention output) and ``end_to_end.png`` (the metric)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    b = report["backend"]
    rows = report["per_layer"]
    ly = [r["layer"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for key, label, style in (("backend_vs_float_layer", f"{b} vs float layer (same input)", "o-"),
                              ("backend_vs_softmax_model", f"{b} vs softmax model", "s-"),
                              ("float_swiftmax_vs_softmax_model", "float SwiftMax vs softmax model", "^--")):
        ax.plot(ly, [max(1.0 - r[key]["cosine"], 1e-12) for r in rows], style, label=label)
    ax.set_yscale("log")
    ax.set_xticks(ly)
    ax.set_xlabel("layer")
    ax.set_ylabel(f"1 − cosine of the {'sublayer' if report.get('scope') == 'sublayer' else 'attention'} output")
    ax.legend(fontsize=8)
    fig.tight_layout()
    p1 = out_dir / "layers.png"
    fig.savefig(p1, dpi=120)
    plt.close(fig)

    e2e = report["end_to_end"]
    keys = ("float_softmax", "float_swiftmax", "backend")
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    main, low, label = (("mean_cosine", "min_cosine", "sentence-embedding cosine to softmax")
                        if report.get("task") is None else ("accuracy", "agreement", f"{report['task']} accuracy"))
    ax.bar(["float softmax", "float SwiftMax", f"bundle on {b}"], [e2e[k][main] for k in keys],
           color=["tab:gray", "tab:blue", "tab:orange"], label=main.replace("_", " "))
    ax.plot(range(3), [e2e[k][low] for k in keys], "k_", ms=20, label=low.replace("_", " "))
    lo = min(min(e2e[k][low], e2e[k][main]) for k in keys)
    ax.set_ylim(max(0.0, lo - 0.1 * (1 - lo) - 1e-4), 1.0 + 1e-4)
    ax.set_ylabel(label)
    ax.legend(fontsize=8)
    fig.tight_layout()
    p2 = out_dir / "end_to_end.png"
    fig.savefig(p2, dpi=120)
    plt.close(fig)
    return [p1, p2]


__all__ = ["device_runner", "evaluate", "print_report", "write_plots"]

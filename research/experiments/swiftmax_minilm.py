"""Experiment (a): SwiftMax on the real all-MiniLM-L6-v2, all 6 layers replaced, distillation objective.

Keeps the softmax model's sentence embeddings (mean-pooled last hidden states) on calibration text from
CPython's reference manual; reports the mean cosine similarity to the softmax embeddings on held-out text
for: fixed statistical β/γ without tuning, one-shot replacement of all layers with tuning (same number of
epochs in total), and layer-wise replace-and-tune (Algorithm 1) — per layer (the SwiftMax paper, the
granularity the kernel's registers have) and per head (ConSmax's granularity).

    python -m research.experiments.swiftmax_minilm [--train 256] [--eval 128] [--epochs 2] [--out DIR]

Each variant runs through ``vckattn calibrate swiftmax`` (:func:`vckattn.host.calibrate.run_swiftmax`);
results (JSON, PNG) go to ``results/experiments/minilm`` by default.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from vckattn.host.calibrate import TuneConfig, run_swiftmax

VARIANTS = {  # name -> (per_head, one_shot, main_lr)
    "layer-wise per-layer": (False, False, 0.0),
    "one-shot per-layer": (False, True, 0.0),
    "layer-wise per-head": (True, False, 0.0),
    "one-shot per-head": (True, True, 0.0),
    "layer-wise per-layer main-lr": (False, False, 2e-5),  # the paper's "or tiny lr" for the main weights
}
DEFAULT_VARIANTS = list(VARIANTS)[:4]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", type=int, default=256, help="calibration/training sentences")
    ap.add_argument("--eval", type=int, default=128, help="held-out sentences")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per stage (E)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help=f"comma-separated subset of: {', '.join(VARIANTS)}")
    ap.add_argument("--out", type=Path, default=Path("results/experiments/minilm"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    t_all = time.perf_counter()
    for name in [v.strip() for v in args.variants.split(",") if v.strip()]:
        per_head, one_shot, main_lr = VARIANTS[name]
        cfg = TuneConfig("minilm", "pydoc", "distill", args.train, args.eval, args.batch_size, args.max_length,
                         args.seed, "mean", per_head, one_shot, None)
        folder = args.out / name.replace(" ", "_").replace("-", "")
        rep = run_swiftmax(cfg, folder, args.epochs, 1, args.lr, progress=sys.stderr.isatty(), main_lr=main_lr)
        rows.append({"variant": name, "untuned_statistical": rep["untuned_statistical"], "tuned": rep["final"],
                     "per_stage": [s["metrics"][-1] for s in rep["stages"]], "tune_seconds": rep["tune_seconds"],
                     "folder": str(folder)})
        print(f"{name:24s} untuned {rep['untuned_statistical']:.4f}  tuned {rep['final']:.4f}  "
              f"({rep['tune_seconds']:.0f} s)", flush=True)
    report = {"experiment": "SwiftMax on all-MiniLM-L6-v2, distillation of sentence embeddings",
              "command": "python -m research.experiments.swiftmax_minilm " + " ".join(argv or sys.argv[1:]),
              "metric": "mean cosine similarity to the softmax model's embeddings, held-out pydoc sentences",
              "train_sentences": args.train, "eval_sentences": args.eval, "epochs_per_stage": args.epochs,
              "lr": args.lr, "seed": args.seed, "threads": args.threads, "rows": _merge(args.out, rows),
              "seconds": time.perf_counter() - t_all}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "minilm.json").write_text(json.dumps(report, indent=1))
    _plot(report["rows"], args.out / "minilm.png")
    print(f"wrote {args.out / 'minilm.json'} and {args.out / 'minilm.png'}")
    return 0


def _merge(out: Path, rows: list[dict]) -> list[dict]:
    """Rows of earlier runs into the same folder (other variants) followed by this run's."""
    old = out / "minilm.json"
    mine = {r["variant"] for r in rows}
    prev = json.loads(old.read_text())["rows"] if old.is_file() else []
    return [r for r in prev if r["variant"] not in mine] + rows


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for r in rows:
        xs = list(range(1, len(r["per_stage"]) + 1))
        if len(xs) == 1:  # one-shot: a single stage covering all layers
            ax.axhline(r["tuned"], ls="--", lw=1, label=f"{r['variant']} (all layers)")
        else:
            ax.plot(xs, r["per_stage"], marker="o", label=r["variant"])
    ax.set_xlabel("layers replaced (stage)")
    ax.set_ylabel("held-out cosine to softmax")
    ax.set_title("MiniLM: SwiftMax replace-and-tune (distillation)", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())

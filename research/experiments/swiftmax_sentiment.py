"""SwiftMax on a real labeled task: MiniLM sentiment classification of rotten-tomatoes snippets.

The paper's protocol (docs/methods.md §1), on CPU:

1. fine-tune all-MiniLM-L6-v2 (``BertForSequenceClassification``: the shipped BertModel + its pooler + a new
   linear head) on the fresh/rotten train split with ordinary softmax; softmax test accuracy, wall-clock;
2. collect the per-layer z_max / S statistics of the fine-tuned model on the validation split;
3. fixed statistical β/γ (``mean`` and ``max`` inits) in all layers without tuning: test accuracy;
4. Algorithm 1, layer-wise replace-and-tune, shallow→deep, one layer per stage, E epochs per stage on a train
   subset with the task's cross-entropy (main weights frozen, only β_l and log γ_l trained), validation
   accuracy after each epoch; SwiftMax test accuracy and wall-clock.

Outputs in ``--out`` (default ``results/experiments/sentiment``): ``softmax_model/`` (the fine-tuned model,
a Hugging Face folder with tokenizer), ``calib.txt`` (256 training snippets, one a line: calibration text for
``vckattn export``), ``swiftmax_model/`` (the same weights plus the tuned
``…vckattn_normalizer.beta/gamma`` tensors, which ``vckattn export`` reads), ``swiftmax_beta_gamma.json``,
``stages/`` (one checkpoint per stage), ``results.json`` and ``accuracy_per_stage.png``.
Export: ``vckattn export <out>/swiftmax_model --out <bundle>``. ``--softmax-only`` stops after step 1 (the
fine-tuned model and ``calib.txt``, e.g. for ``vckattn calibrate swiftmax <out>/softmax_model --data
rotten-tomatoes --objective task …``).

The generic part of the protocol (:func:`swiftmax_protocol`, :func:`plot_stages`) is shared with
:mod:`.swiftmax_vit`.

    python -m research.experiments.swiftmax_sentiment [--train N] [--epochs E] [--out DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from vckattn.golden import calibrate, convert
from vckattn.golden.calibrate import StageLog

Batch = dict[str, Tensor]
#: training snippets written to ``calib.txt`` (the export's calibration text)
CALIB_SNIPPETS = 256


# ----------------------------------------------------------------------------- shared protocol helpers


def seed_all(seed: int) -> None:
    """Seed Python-visible RNGs used here (torch, numpy)."""
    torch.manual_seed(seed)
    np.random.seed(seed)


@torch.no_grad()
def accuracy(model: nn.Module, batches: Iterable[Batch]) -> float:
    """Fraction of correct argmax predictions of ``model(**batch).logits`` against ``batch["labels"]``."""
    model.eval()
    right = total = 0
    for b in batches:
        inputs = {k: v for k, v in b.items() if k != "labels"}
        pred = model(**inputs).logits.argmax(-1)
        right += int((pred == b["labels"]).sum())
        total += len(pred)
    return right / max(total, 1)


def task_loss(model: nn.Module, batch: Batch) -> Tensor:
    """The task's cross-entropy (the model computes it from ``batch["labels"]``)."""
    return model(**batch).loss


def train_classifier(model: nn.Module, epoch_batches: Callable[[int], list[Batch]], epochs: int, lr: float,
                     weight_decay: float = 0.01, warmup: float = 0.1, log: Callable[[str], None] = print,
                     log_every: int = 1) -> dict:
    """AdamW (gradient norm clipped at 1) with linear warmup over a ``warmup`` fraction of the steps and linear
    decay to 0, over ``epochs`` passes of ``epoch_batches(epoch)``; logs every ``log_every`` epochs.
    Returns ``{"seconds", "losses", "steps"}`` (wall-clock seconds, mean training loss per epoch)."""
    steps = sum(len(epoch_batches(e)) for e in range(epochs))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay)
    n_warm = max(1, int(warmup * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / n_warm, max(0.0, (steps - s) / max(1, steps - n_warm))))
    t0 = time.perf_counter()
    losses = []
    for e in range(epochs):
        model.train()
        total = 0.0
        batches = epoch_batches(e)
        for b in batches:
            opt.zero_grad(set_to_none=True)
            loss = model(**b).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total += loss.item()
        losses.append(total / max(len(batches), 1))
        if (e + 1) % log_every == 0 or e + 1 == epochs:
            log(f"  train epoch {e + 1}/{epochs}: loss {losses[-1]:.4f} ({time.perf_counter() - t0:.0f} s)")
    return {"seconds": time.perf_counter() - t0, "losses": losses, "steps": steps}


def swiftmax_protocol(model: nn.Module, *, stats_batches: list[Batch], tune_batches: Callable[[], list[Batch]],
                      val_batches: list[Batch], test_batches: list[Batch], layers: Sequence[int] | None,
                      epochs_per_stage: int, lr: float, init_mode: str, ckpt_dir: Path, config: dict,
                      main_lr: float = 0.0, log: Callable[[str], None] = print) -> dict:
    """Steps 2–4 of the SwiftMax protocol on a fine-tuned softmax classifier, in place on ``model``.

    Returns a JSON-ready dict: per-layer statistics, the initial β/γ, untuned-statistical test accuracies
    (``mean`` and ``max`` inits, all selected layers at once), the stage logs of replace-and-tune, the final
    SwiftMax validation/test accuracies, the tuned β/γ and the wall-clocks (seconds). ``model`` ends with
    SwiftMax in the selected layers. ``main_lr`` > 0 also trains the main weights (the paper's "tiny lr" option;
    0 = frozen, Algorithm 1 as specified).
    """
    out: dict = {}
    t0 = time.perf_counter()
    stats = calibrate.collect_stats(model, stats_batches)
    out["stats_seconds"] = time.perf_counter() - t0
    out["stats"] = [s.summary() for s in stats]
    for s in out["stats"]:
        s.pop("per_head", None)
    n_layers = len(stats)
    chosen = list(range(n_layers)) if layers is None else sorted(set(layers))
    inits = {m: calibrate.propose_init(stats, m) for m in ("mean", "max")}
    out["init"] = {m: {"betas": b, "gammas": g} for m, (b, g) in inits.items()}
    out["init_mode"] = init_mode
    log(f"stats on {sum(len(b['labels']) for b in stats_batches)} samples ({out['stats_seconds']:.1f} s); "
        f"beta(mean) {[round(b, 2) for b in inits['mean'][0]]} gamma(mean) {[round(g, 2) for g in inits['mean'][1]]}")

    # fixed statistical constants, no tuning (the paper reports this fails for some models)
    out["untuned"] = {}
    for mode, (b, g) in inits.items():
        m2 = copy.deepcopy(model)
        calibrate.apply_swiftmax(m2, {i: b[i] for i in chosen}, {i: g[i] for i in chosen})
        t1 = time.perf_counter()
        acc = accuracy(m2, test_batches)
        out["untuned"][mode] = {"test_accuracy": acc, "eval_seconds": time.perf_counter() - t1}
        log(f"untuned statistical SwiftMax ({mode}) in layers {chosen}: test accuracy {acc:.4f}")
        del m2

    # Algorithm 1: layer-wise replace-and-tune
    if ckpt_dir.exists():  # a fresh run: the fine-tuned weights above are not those of older checkpoints
        shutil.rmtree(ckpt_dir)
    ckpt_dir.mkdir(parents=True)  # replace_and_tune(main_lr > 0) saves main_stageNN.pt before creating it

    def on_epoch(stage: int, epoch: int, loss: float, metric: float) -> None:
        log(f"  stage {stage} epoch {epoch + 1}/{epochs_per_stage}: loss {loss:.4f}, val accuracy {metric:.4f} "
            f"({time.perf_counter() - t_rt:.0f} s)")

    t_rt = time.perf_counter()
    logs: list[StageLog] = calibrate.replace_and_tune(
        model, tune_batches, task_loss, lambda m: accuracy(m, val_batches), inits[init_mode], layers=chosen,
        layers_per_stage=1, epochs_per_stage=epochs_per_stage, lr=lr, main_lr=main_lr, ckpt_dir=ckpt_dir,
        config=config, on_epoch=on_epoch)
    out["replace_and_tune_seconds"] = time.perf_counter() - t_rt
    out["replace_and_tune_stage_seconds"] = sum(s.seconds for s in logs)
    out["stages"] = [asdict(s) for s in logs]
    sm = calibrate.swiftmax_layers(model)
    out["betas"] = {i: float(n.beta) for i, n in sm.items()}
    out["gammas"] = {i: float(n.gamma) for i, n in sm.items()}
    t1 = time.perf_counter()
    out["swiftmax_test_accuracy"] = accuracy(model, test_batches)
    out["swiftmax_test_eval_seconds"] = time.perf_counter() - t1
    out["swiftmax_val_accuracy"] = logs[-1].metrics[-1] if logs else math.nan
    log(f"SwiftMax after replace-and-tune: test accuracy {out['swiftmax_test_accuracy']:.4f} "
        f"(replace-and-tune {out['replace_and_tune_seconds']:.0f} s)")
    return out


def save_beta_gamma(path: Path, betas: dict[int, float], gammas: dict[int, float], extra: dict | None = None) -> None:
    """Write the per-layer SwiftMax constants as JSON: ``{"betas": {layer: β}, "gammas": {layer: γ}, "base": "e"}``
    (β in natural-log score units, γ dimensionless)."""
    data = {"base": "e", "betas": {str(k): v for k, v in sorted(betas.items())},
            "gammas": {str(k): v for k, v in sorted(gammas.items())}} | (extra or {})
    path.write_text(json.dumps(data, indent=1))


def plot_stages(path: Path, stages: list[dict], baseline_val: float, title: str,
                untuned: dict[str, float] | None = None) -> None:
    """PNG: validation accuracy after every epoch of every stage (x = stage + epoch fraction), the softmax
    baseline (dashed) and the untuned statistical SwiftMax test accuracies (dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    xs, ys = [0.0], [baseline_val]
    for s in stages:
        e = len(s["metrics"])
        for k, m in enumerate(s["metrics"]):
            xs.append(s["stage"] + (k + 1) / e)
            ys.append(m)
    ax.plot(xs, ys, "o-", label="SwiftMax val accuracy (per epoch)")
    ends = [(s["stage"] + 1, s["metrics"][-1]) for s in stages if s["metrics"]]
    if ends:
        ax.plot(*zip(*ends, strict=True), "s", color="C3", label="end of stage")
    ax.axhline(baseline_val, ls="--", color="gray", label=f"softmax val {baseline_val:.3f}")
    for k, (mode, acc) in enumerate((untuned or {}).items()):
        ax.axhline(acc, ls=":", color=f"C{4 + k}", label=f"untuned {mode} (test) {acc:.3f}")
    ax.set_xticks(range(len(stages) + 1))
    ax.set_xticklabels(["softmax"] + [f"+L{','.join(map(str, s['layers']))}" for s in stages])
    ax.set_xlabel("stage (layers replaced so far)")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def environment() -> dict:
    """Where the run happened (for the wall-clocks)."""
    return {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
            "processor": platform.processor(), "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count()}


def parse_layers(text: str | None) -> list[int] | None:
    """``"0,1"`` -> ``[0, 1]``; ``None`` -> all layers."""
    return None if text is None else [int(t) for t in text.split(",") if t.strip()]


# ----------------------------------------------------------------------------- sentiment task


def text_batches(tok: object, texts: Sequence[str], labels: np.ndarray, batch_size: int, max_len: int,
                 order: np.ndarray | None = None) -> list[Batch]:
    """Tokenized batches (padded per batch to its longest text, at most ``max_len`` tokens) with labels."""
    idx = np.arange(len(texts)) if order is None else order
    out = []
    for s in range(0, len(idx), batch_size):
        j = idx[s:s + batch_size]
        enc = tok([texts[i] for i in j], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        out.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                    "token_type_ids": enc["token_type_ids"], "labels": torch.as_tensor(labels[j])})
    return out


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m research.experiments.swiftmax_sentiment",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--train", type=int, default=2000, metavar="N", help="fine-tuning samples (default %(default)s)")
    p.add_argument("--ft-epochs", type=int, default=2, help="fine-tuning epochs (default %(default)s)")
    p.add_argument("--ft-lr", type=float, default=5e-5, help="fine-tuning AdamW lr (default %(default)s)")
    p.add_argument("--epochs", type=int, default=2, metavar="E",
                   help="replace-and-tune epochs per stage (paper: 2 for BERT; default %(default)s)")
    p.add_argument("--tune-n", type=int, default=256, help="train samples per replace-and-tune epoch")
    p.add_argument("--lr", type=float, default=0.05, help="Adam lr of beta and log gamma (default %(default)s)")
    p.add_argument("--init", choices=("mean", "max"), default="mean", help="beta/gamma init (default %(default)s)")
    p.add_argument("--main-lr", type=float, default=0.0,
                   help="lr of the main weights during replace-and-tune (default 0: frozen)")
    p.add_argument("--layers", default=None, help="layers to replace, e.g. 0,1 (default: all)")
    p.add_argument("--stats-n", type=int, default=512, help="validation samples for the statistics")
    p.add_argument("--eval-n", type=int, default=512, help="validation samples evaluated after each epoch")
    p.add_argument("--test-n", type=int, default=None, help="test samples (default: the whole test split)")
    p.add_argument("--max-len", type=int, default=64, help="max tokens per snippet (default %(default)s)")
    p.add_argument("--batch", type=int, default=32, help="batch size (default %(default)s)")
    p.add_argument("--softmax-model", type=Path, default=None, metavar="DIR",
                   help="start from this fine-tuned softmax folder (an earlier run's softmax_model/) and skip "
                        "fine-tuning; the same --seed/--train keep the data subsets identical")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s)")
    p.add_argument("--out", type=Path, default=Path("results/experiments/sentiment"))
    p.add_argument("--softmax-only", action="store_true",
                   help="stop after fine-tuning (write softmax_model/ and calib.txt only)")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    log = (lambda _s: None) if a.quiet else (lambda s: print(s, flush=True))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(a.threads)
    seed_all(a.seed)
    from transformers import AutoTokenizer, BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    from vckattn.golden.pretrained import minilm_dir
    from vckattn.host.datasets import rotten_tomatoes

    hf_logging.set_verbosity_error()
    t_start = time.perf_counter()
    data = rotten_tomatoes(seed=a.seed)
    rng = np.random.default_rng(a.seed)
    tr_idx = rng.permutation(len(data.train))
    ft_idx, tune_idx = tr_idx[:a.train], tr_idx[a.train:a.train + a.tune_n]  # disjoint subsets of train
    if len(tune_idx) < a.tune_n:  # small train split: reuse the fine-tuning samples
        tune_idx = tr_idx[:a.tune_n]
    src = minilm_dir()
    tok = AutoTokenizer.from_pretrained(src)
    init_dir = a.softmax_model or src
    model = BertForSequenceClassification.from_pretrained(init_dir, num_labels=2, dtype=torch.float32)
    model.config.id2label, model.config.label2id = {0: "rotten", 1: "fresh"}, {"rotten": 0, "fresh": 1}
    tx, ty = data.train.x, data.train.y

    def ft_batches(epoch: int) -> list[Batch]:
        order = np.random.default_rng(a.seed + 1 + epoch).permutation(ft_idx)
        return text_batches(tok, tx, ty, a.batch, a.max_len, order)

    vx, vy = data.validation.x, data.validation.y
    val = text_batches(tok, vx, vy, 64, a.max_len, np.arange(min(a.eval_n, len(vy))))
    stats_b = text_batches(tok, vx, vy, 64, a.max_len, np.arange(len(vy) - min(a.stats_n, len(vy)), len(vy)))
    n_test = len(data.test) if a.test_n is None else min(a.test_n, len(data.test))
    test = text_batches(tok, data.test.x, data.test.y, 64, a.max_len, np.arange(n_test))
    tune_epoch = [0]

    def tune_batches() -> list[Batch]:  # a fresh shuffle of the same subset per epoch
        tune_epoch[0] += 1
        return text_batches(tok, tx, ty, a.batch, a.max_len,
                            np.random.default_rng(a.seed + 1000 + tune_epoch[0]).permutation(tune_idx))

    log(f"rotten tomatoes {data.sizes()}; fine-tune on {len(ft_idx)} for {a.ft_epochs} epoch(s), "
        f"replace-and-tune on {len(tune_idx)}, {a.threads} thread(s)")
    if a.softmax_model is None:
        ft = train_classifier(model, ft_batches, a.ft_epochs, a.ft_lr, log=log)
    else:  # fine-tuned by an earlier run: its wall-clock is in that run's results.json
        ft = {"seconds": None, "losses": [], "steps": 0, "loaded_from": str(a.softmax_model)}
    t1 = time.perf_counter()
    base_test = accuracy(model, test)
    base_test_s = time.perf_counter() - t1
    base_val = accuracy(model, val)
    log(f"softmax baseline ({model.config._attn_implementation}): test accuracy {base_test:.4f}, "
        f"val {base_val:.4f}; fine-tune {ft['seconds'] or 0:.0f} s")
    a.out.mkdir(parents=True, exist_ok=True)
    if a.softmax_model is None or a.softmax_model.resolve() != (a.out / "softmax_model").resolve():
        model.save_pretrained(a.out / "softmax_model")
        tok.save_pretrained(a.out / "softmax_model")
    calib = [tx[i] for i in tr_idx[:CALIB_SNIPPETS]]  # training snippets (the test split stays unseen)
    (a.out / "calib.txt").write_text("\n".join(calib) + "\n", encoding="utf-8")
    if a.softmax_only:
        results = {"experiment": "swiftmax_sentiment", "softmax_only": True, "seed": a.seed, "fine_tune": ft,
                   "softmax_test_accuracy": base_test, "softmax_val_accuracy": base_val,
                   "artifacts": {"softmax_model": str(a.out / "softmax_model"), "calib": str(a.out / "calib.txt")},
                   "total_seconds": time.perf_counter() - t_start, "environment": environment()}
        (a.out / "results.json").write_text(json.dumps(results, indent=1))
        log(f"wrote {a.out / 'softmax_model'} and {a.out / 'calib.txt'}")
        return results
    # the same softmax through the golden attention (what the SwiftMax layers replace)
    convert.register_attention()
    model.set_attn_implementation(convert.ATTN_IMPL)
    golden_softmax_test = accuracy(model, test)
    config = {"experiment": "swiftmax_sentiment", "model": "all-MiniLM-L6-v2", "seed": a.seed, "train": a.train,
              "ft_epochs": a.ft_epochs, "tune_n": len(tune_idx), "init": a.init, "max_len": a.max_len}
    proto = swiftmax_protocol(model, stats_batches=stats_b, tune_batches=tune_batches, val_batches=val,
                              test_batches=test, layers=parse_layers(a.layers), epochs_per_stage=a.epochs, lr=a.lr,
                              init_mode=a.init, ckpt_dir=a.out / "stages", config=config, main_lr=a.main_lr,
                              log=log)
    model.save_pretrained(a.out / "swiftmax_model")
    tok.save_pretrained(a.out / "swiftmax_model")
    save_beta_gamma(a.out / "swiftmax_beta_gamma.json", proto["betas"], proto["gammas"],
                    {"model": str(a.out / "swiftmax_model"), "init": a.init})
    results = {
        "experiment": "swiftmax_sentiment",
        "command": " ".join(["python -m research.experiments.swiftmax_sentiment", *(argv or sys.argv[1:])]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "seed": a.seed, "data": {"name": data.name, "sizes": data.sizes(), "fine_tune_samples": len(ft_idx),
                                 "tune_samples": len(tune_idx), "val_eval_samples": sum(len(b["labels"]) for b in val),
                                 "stats_samples": sum(len(b["labels"]) for b in stats_b), "test_samples": n_test},
        "model": {"source": str(src), "class": "BertForSequenceClassification",
                  "layers": model.config.num_hidden_layers},
        "fine_tune": ft, "softmax_test_accuracy": base_test, "softmax_val_accuracy": base_val,
        "softmax_golden_test_accuracy": golden_softmax_test, "softmax_test_eval_seconds": base_test_s,
        **proto,
        "artifacts": {"softmax_model": str(a.out / "softmax_model"), "swiftmax_model": str(a.out / "swiftmax_model"),
                      "beta_gamma": str(a.out / "swiftmax_beta_gamma.json"),
                      "export_command": f"vckattn export {a.out / 'swiftmax_model'} --out {a.out / 'bundle'}"},
        "total_seconds": time.perf_counter() - t_start, "environment": environment(),
    }
    (a.out / "results.json").write_text(json.dumps(results, indent=1))
    plot_stages(a.out / "accuracy_per_stage.png", results["stages"], base_val,
                "MiniLM rotten-tomatoes: layer-wise replace-and-tune",
                {m: v["test_accuracy"] for m, v in proto["untuned"].items()})
    log(f"wrote {a.out / 'results.json'}")
    return results


if __name__ == "__main__":
    main()

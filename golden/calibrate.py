"""SwiftMax calibration: softmax statistics and Algorithm 1, layer-wise replace-and-tune (docs/methods.md §1).

The full description: ``docs/internals/golden.md``, section ``golden/calibrate.py``.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from .attention import repeat_kv
from .convert import ATTN_IMPL, attention_modules, recording, register_attention, swap_attention_normalizer
from .engine import score_shift_for
from .normalizers import HCCS, QuantizedSoftmax, SwiftMax, hccs_check, hccs_int, softmax

CHECKPOINT_NAME = "swiftmax_stage{stage:02d}.json"


# ----------------------------------------------------------------------------- statistics


@dataclass
class LayerStats:
    """Softmax statistics of one layer: per-row ``z_max`` and ``S`` (1-D float64 arrays of the
    unmasked rows, all heads) and the head index of each row."""

    z_max: np.ndarray
    sum_exp: np.ndarray
    head: np.ndarray

    def summary(self) -> dict:
        """Means/stds/quantiles for the whole layer and per head (JSON-ready)."""
        def desc(x: np.ndarray) -> dict:
            q = np.quantile(x, [0.01, 0.5, 0.99]) if x.size else [math.nan] * 3
            return {"mean": float(x.mean()) if x.size else math.nan, "std": float(x.std()) if x.size else math.nan,
                    "min": float(x.min()) if x.size else math.nan, "max": float(x.max()) if x.size else math.nan,
                    "p01": float(q[0]), "p50": float(q[1]), "p99": float(q[2])}
        heads = sorted(int(h) for h in np.unique(self.head))
        return {"rows": int(self.z_max.size), "z_max": desc(self.z_max), "sum_exp": desc(self.sum_exp),
                "per_head": [{"head": h, "z_max_mean": float(self.z_max[self.head == h].mean()),
                              "sum_exp_mean": float(self.sum_exp[self.head == h].mean())} for h in heads]}


@torch.no_grad()
def collect_stats(model: nn.Module, batches: Iterable[dict[str, Tensor]],
                  progress: Callable[[int], None] | None = None) -> list[LayerStats]:
    """Run ``model(**batch)`` for every batch (softmax attention as loaded) and return each layer's
    :class:`LayerStats`. Statistics are of the scores, which do not depend on the layer's normalizer;
    rows that are entirely masked (padded queries are not masked) are dropped."""
    register_attention()
    model.set_attn_implementation(ATTN_IMPL)
    model.eval()
    with recording(model) as records:
        for n, batch in enumerate(batches, 1):
            model(**batch)
            if progress is not None:
                progress(n)
    out = []
    for recs in records:
        if not recs:
            raise ValueError("a layer recorded no attention call: is the model's attention implementation vckattn?")
        out.append(LayerStats(np.concatenate([r.z_max.cpu().numpy() for r in recs]),  # .cpu(): GPU runs
                              np.concatenate([r.sum_exp.cpu().numpy() for r in recs]),
                              np.concatenate([r.head.cpu().numpy() for r in recs])))
    return out


Init = tuple[list[float | list[float]], list[float | list[float]]]

#: The β/γ initialisations from softmax statistics (:func:`init_beta_gamma`), with their descriptions.
INIT_MODES: dict[str, str] = {"mean": "beta = mean z_max, gamma = mean sum exp(z - z_max)",
                              "max": "beta = max z_max, gamma = mean sum exp(z - z_max)"}


@dataclass(frozen=True)
class RowSummary:
    """What a β/γ initialisation needs of a set of softmax rows (a layer, or one head of it): the mean and
    the largest row maximum ``z_max`` and the mean ``S = Σ_j exp(z_j − z_max)``."""

    z_max_mean: float
    z_max_max: float
    sum_exp_mean: float

    @classmethod
    def of(cls, z_max: np.ndarray | Tensor | Sequence[float], sum_exp: np.ndarray | Tensor | Sequence[float]
           ) -> RowSummary:
        """The summary of per-row statistics (numpy arrays or torch tensors, each reduced in its own library;
        no rows: NaN)."""
        z = z_max if isinstance(z_max, Tensor | np.ndarray) else np.asarray(z_max, np.float64)
        s = sum_exp if isinstance(sum_exp, Tensor | np.ndarray) else np.asarray(sum_exp, np.float64)
        if (z.numel() if isinstance(z, Tensor) else z.size) == 0:
            return cls(math.nan, math.nan, math.nan)
        return cls(float(z.mean()), float(z.max()), float(s.mean()))


def init_beta_gamma(rows: RowSummary, mode: str = "mean") -> tuple[float, float]:
    """SwiftMax ``(β, γ)`` from softmax statistics (docs/methods.md §1): the project's only β/γ initialisation.

    ``mean`` is the paper's: β = mean ``z_max``, γ = mean ``S``. ``max`` takes the largest row maximum
    instead, β = max ``z_max``, with the same γ = mean ``S``: then ``P = exp(z − β)/γ ≤ 1/γ ≤ 1`` on the
    calibration data (``S ≥ 1``), so P's fixed-point format needs no integer bits and keeps its fraction
    bits (the conservative, usable-untuned choice; rows below the largest maximum are scaled down by
    ``exp(z_max − β)``, which tuning then corrects).
    """
    if mode not in INIT_MODES:
        raise ValueError(f"mode must be 'mean' or 'max', got {mode!r}")
    return (rows.z_max_mean if mode == "mean" else rows.z_max_max), rows.sum_exp_mean


def propose_init(stats: Sequence[LayerStats], mode: str = "mean", per_head: bool = False) -> Init:
    """Initial ``(betas, gammas)``, one per layer (floats) or, with ``per_head``, one list per layer with a
    value per head (ConSmax's granularity), by :func:`init_beta_gamma` (``mode`` ``mean`` or ``max``)."""
    if mode not in INIT_MODES:
        raise ValueError(f"mode must be 'mean' or 'max', got {mode!r}")

    def one(zmax: np.ndarray, s: np.ndarray) -> tuple[float, float]:
        return init_beta_gamma(RowSummary.of(zmax, s), mode)

    betas: list = []
    gammas: list = []
    for st in stats:
        if per_head:
            pairs = [one(st.z_max[st.head == h], st.sum_exp[st.head == h]) for h in range(int(st.head.max()) + 1)]
            betas.append([b for b, _ in pairs])
            gammas.append([g for _, g in pairs])
        else:
            b, g = one(st.z_max, st.sum_exp)
            betas.append(b)
            gammas.append(g)
    return betas, gammas


#: ConSmax's initial β and γ (Liu et al., ICCAD 2024; their code, per head): not statistics of the model
CONSMAX_INIT = (2.5, 100.0)


def consmax_init(stats: Sequence[LayerStats], per_head: bool = False) -> Init:
    """ConSmax's fixed initial ``(betas, gammas)`` (:data:`CONSMAX_INIT`) for the layers of ``stats`` (one per
    layer, or with ``per_head`` a list per layer with one per head, as :func:`propose_init` gives them)."""
    beta, gamma = CONSMAX_INIT
    heads = [int(st.head.max()) + 1 for st in stats]
    if per_head:
        return [[beta] * h for h in heads], [[gamma] * h for h in heads]
    return [beta] * len(stats), [gamma] * len(stats)


def _value(t: Tensor) -> float | list[float]:
    return float(t) if t.dim() == 0 else [float(v) for v in t.detach().flatten()]


# ----------------------------------------------------------------------------- the deployed numerics


@dataclass(frozen=True)
class Deployed:
    """The deployed numerics a SwiftMax layer is tuned on, in float (:meth:`SwiftMax.set_deployed`): its scores
    narrowed to ``score_bits`` bits with LSB ``score_steps[layer]`` (z units; 32 bits or no step: not narrowed)
    and, with ``p_round``, P rounded to its format's grid (needs the layers' ``p_max``)."""

    score_bits: int = 8
    score_steps: tuple[float, ...] = ()
    p_round: bool = False

    def step(self, layer: int) -> float | None:
        """Layer ``layer``'s score LSB (None: scores not narrowed)."""
        if self.score_bits >= 32 or layer >= len(self.score_steps):
            return None
        return self.score_steps[layer]

    def identity(self) -> dict:
        """What a checkpoint records of it."""
        return {"score_bits": self.score_bits, "score_steps": [float(v) for v in self.score_steps],
                "p_round": self.p_round}


def _sample_abs(x: Tensor, n: int, gen: torch.Generator) -> Tensor:
    a = x.detach().abs().flatten().float().cpu()
    if a.numel() > n:
        a = a[torch.randint(a.numel(), (n,), generator=gen)]
    return a


def _quantile(parts: list[Tensor], q: float) -> float:
    a = torch.cat(parts)
    if a.numel() == 0:
        return 0.0
    if q >= 100.0:
        return float(a.max())
    if a.numel() > 1 << 22:  # torch.quantile's input limit
        a = a[torch.randperm(a.numel(), generator=torch.Generator().manual_seed(0))[: 1 << 22]]
    return float(torch.quantile(a.double(), q / 100.0))


@torch.no_grad()
def score_steps(model: nn.Module, batches: Sequence[dict[str, Tensor]], bits: int = 8, percentile: float = 99.9,
                sample: int = 1 << 16, seed: int = 0) -> list[float]:
    """Per layer the LSB (z units) of the engine's ``bits``-bit scores, chosen as the export chooses it: the int8
    scales ``s_q``, ``s_k`` of the QKᵀ operands (the ``percentile``-th percentile of ``|q|``, ``|k|`` over the
    batches, / 127; 100: max-abs, the export's ``minmax``), the score shift the smallest that keeps the largest
    ``|round(q/s_q)·round(k/s_k)|`` of an unmasked element unsaturated
    (:func:`vckattn.golden.engine.score_shift_for`), the LSB ``s_q·s_k·2^shift·scaling`` (``scaling`` the
    attention's, 1/√d). Two passes over ``batches`` with the model as it is (its normalizers do not change q, k);
    ``sample`` ``|values|`` per tensor and call are kept for the percentile. 32 bits: every step 0 (not narrowed)."""
    register_attention()
    model.set_attn_implementation(ATTN_IMPL)
    model.eval()
    attns = attention_modules(model)
    if bits >= 32:
        return [0.0] * len(attns)
    gen = torch.Generator().manual_seed(seed)
    parts: list[dict[str, list[Tensor]]] = [{"q": [], "k": []} for _ in attns]
    scales: list[tuple[float, float]] = []
    absmax = [0] * len(attns)
    scaling = [0.0] * len(attns)

    def pass1(i: int) -> Callable:
        def rec(q: Tensor, k: Tensor, keep: Tensor | None, scale: float | None) -> None:
            parts[i]["q"].append(_sample_abs(q, sample, gen))
            parts[i]["k"].append(_sample_abs(k, sample, gen))
            scaling[i] = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        return rec

    def pass2(i: int) -> Callable:
        def rec(q: Tensor, k: Tensor, keep: Tensor | None, scale: float | None) -> None:
            s_q, s_k = scales[i]
            qi = torch.clamp(torch.floor(q.double() / s_q + 0.5), -127, 127)
            ki = repeat_kv(torch.clamp(torch.floor(k.double() / s_k + 0.5), -127, 127), q.shape[1] // k.shape[1])
            acc = torch.matmul(qi, ki.transpose(-1, -2)).abs()
            if keep is not None:
                acc = torch.where(keep.expand_as(acc), acc, torch.zeros_like(acc))
            absmax[i] = max(absmax[i], int(acc.max()))
        return rec

    for make in (pass1, pass2):
        for i, a in enumerate(attns):
            a.vckattn_qk_record = make(i)
        try:
            for b in batches:
                model(**b)
        finally:
            for a in attns:
                a.vckattn_qk_record = None
        if make is pass1:
            for p in parts:
                vq, vk = _quantile(p["q"], percentile), _quantile(p["k"], percentile)
                scales.append((vq / 127.0 if vq > 0 else 1.0, vk / 127.0 if vk > 0 else 1.0))
    return [s_q * s_k * 2.0 ** score_shift_for(m, bits) * sc
            for (s_q, s_k), m, sc in zip(scales, absmax, scaling, strict=True)]


# ----------------------------------------------------------------------------- replace and tune


@dataclass
class StageLog:
    """One stage of Algorithm 1: the layers replaced in it, the metric after each epoch (higher is
    better), the mean training loss per epoch, the β/γ of every SwiftMax layer after the stage and the
    stage's wall-clock seconds."""

    stage: int
    layers: list[int]
    metrics: list[float]
    losses: list[float]
    betas: dict[int, float | list[float]]
    gammas: dict[int, float | list[float]]
    seconds: float
    extra: dict = field(default_factory=dict)


def swiftmax_layers(model: nn.Module) -> dict[int, SwiftMax]:
    """The SwiftMax normalizers of ``model`` by layer index."""
    return {i: a.vckattn_normalizer for i, a in enumerate(attention_modules(model))
            if isinstance(getattr(a, "vckattn_normalizer", None), SwiftMax)}


def _stages(n_layers: int, layers: Sequence[int] | None, per_stage: int) -> list[list[int]]:
    chosen = list(range(n_layers)) if layers is None else sorted(set(int(i) for i in layers))
    if per_stage < 1:
        raise ValueError("layers_per_stage must be >= 1")
    return [chosen[i:i + per_stage] for i in range(0, len(chosen), per_stage)]


def _save_stage(ckpt_dir: Path, log: StageLog, config: dict) -> Path:
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    path = ckpt_dir / CHECKPOINT_NAME.format(stage=log.stage)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"config": config, "log": asdict(log)}, indent=1))
    tmp.replace(path)  # atomic: an interrupted write never leaves a half checkpoint
    return path


def load_checkpoints(ckpt_dir: Path, config: dict) -> list[StageLog]:
    """The completed stages in ``ckpt_dir`` (in order), refusing ones written with another config."""
    logs = []
    for p in sorted(Path(ckpt_dir).glob("swiftmax_stage*.json")):
        data = json.loads(p.read_text())
        if data["config"] != config:
            diff = sorted(k for k in set(data["config"]) | set(config) if data["config"].get(k) != config.get(k))
            raise ValueError(f"{p}: written by a run with a different configuration (differs in {diff}); "
                             f"use another --out folder or delete it")
        log = data["log"]
        log["betas"] = {int(k): v for k, v in log["betas"].items()}
        log["gammas"] = {int(k): v for k, v in log["gammas"].items()}
        logs.append(StageLog(**log))
    for i, log in enumerate(logs):
        if log.stage != i:
            raise ValueError(f"{ckpt_dir}: stage checkpoints are not consecutive (missing stage {i})")
    return logs


def apply_swiftmax(model: nn.Module, betas: dict[int, float | list[float]], gammas: dict[int, float | list[float]],
                   base: str = "e", p_max: float | dict[int, float | None] | None = None,
                   deployed: Deployed | None = None) -> dict[int, SwiftMax]:
    """Replace the softmax of the layers in ``betas`` by SwiftMax with these β/γ (floats per layer, or lists
    per head), e.g. from a checkpoint; ``p_max``: the saturation of every layer (a float), or per layer (a dict;
    missing layers: none), or none; ``deployed``: the layers compute the deployed numerics in float (narrow
    scores, P rounded to its format; :class:`Deployed`). Returns the new normalizers."""
    layers = sorted(betas)
    per_head = any(isinstance(betas[i], list) for i in layers)
    out = swap_attention_normalizer(model, "swiftmax", layers, [1.0] * len(layers), [1.0] * len(layers),
                                    per_head=per_head, base=base)
    with torch.no_grad():
        for i in layers:
            n = out[i]
            n.beta.copy_(torch.as_tensor(betas[i], dtype=n.beta.dtype).expand_as(n.beta))
            n.gamma.copy_(torch.as_tensor(gammas[i], dtype=n.gamma.dtype).expand_as(n.gamma))
            n.check()
            n.set_p_max(p_max.get(i) if isinstance(p_max, dict) else p_max)  # type: ignore[union-attr]
            if deployed is not None:
                n.set_deployed(deployed.step(i), deployed.score_bits, deployed.p_round and n.p_max is not None)
    return out  # type: ignore[return-value]


@dataclass
class TrainHooks:
    """How :func:`replace_and_tune` runs its steps, for data-parallel or mixed-precision training driven from
    outside the numerics layer (``vckattn.host.calibrate`` builds these from an ``accelerate.Accelerator``).
    The defaults are one process in full precision.

    * ``autocast``: a context manager entered around each forward pass and loss (mixed precision).
    * ``reduce_loss``: the batch loss averaged over all processes (for the log and the finiteness check,
      so that every process raises together); not differentiated through.
    * ``backward``: ``loss.backward()`` (or a loss-scaled one).
    * ``sync_grads``: average the gradients of the trainable parameters over all processes, in place
      (data parallel: each process's loss is its shard's, weighted so that the mean is the global batch's).
    * ``step``: ``opt.step()`` (or a loss scaler's step and update).
    * ``is_main``: only the main process writes checkpoints.
    """

    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    reduce_loss: Callable[[Tensor], Tensor] = lambda loss: loss  # noqa: E731
    backward: Callable[[Tensor], None] = lambda loss: loss.backward()  # noqa: E731
    sync_grads: Callable[[list[Tensor]], None] = lambda params: None  # noqa: E731
    step: Callable[[torch.optim.Optimizer], None] = lambda opt: opt.step()  # noqa: E731
    is_main: bool = True


def replace_and_tune(
    model: nn.Module,
    train_batches: Callable[[], Iterable[dict[str, Tensor]]],
    loss_fn: Callable[[nn.Module, dict[str, Tensor]], Tensor],
    eval_fn: Callable[[nn.Module], float],
    init: Init,
    *,
    layers: Sequence[int] | None = None,
    layers_per_stage: int = 1,
    epochs_per_stage: int = 2,
    lr: float = 0.05,
    main_lr: float = 0.0,
    ckpt_dir: Path | None = None,
    config: dict | None = None,
    base: str = "e",
    seed: int = 0,
    on_epoch: Callable[[int, int, float, float], None] | None = None,
    on_step: Callable[[], None] | None = None,
    hooks: TrainHooks | None = None,
    p_max: float | None = None,
    deployed: Deployed | None = None,
) -> list[StageLog]:
    """Algorithm 1 (layer-wise replace-and-tune), in place on ``model``.

    Args:
        train_batches: returns a fresh iterable of training batches (one epoch) each call.
        loss_fn: the objective on a batch (distillation or the task loss); minimized.
        eval_fn: quality on held-out data (higher is better: cosine, accuracy), called after each epoch.
        init: initial ``(betas, gammas)`` for all layers (from :func:`propose_init`; per head when its
            entries are lists).
        layers: the layers to replace (default: all), processed shallow to deep.
        layers_per_stage, epochs_per_stage: L and E of Algorithm 1.
        lr: Adam learning rate of β and of log γ (γ is trained in the log domain internally so that it stays
            positive; the SwiftMax module's γ is updated from it).
        main_lr: learning rate of the main weights (0 = frozen, the default).
        ckpt_dir: write a checkpoint after each stage and resume from the completed ones found there.
        config: what identifies the run (model, data, hyperparameters) — a resume refuses checkpoints
            written with a different one.
        on_epoch: ``(stage, epoch, loss, metric)`` after each epoch (progress display).
        on_step: after each optimizer step (progress bars).
        seed: torch's RNG (dropout) is seeded with ``seed + stage`` at the start of each stage, so a resumed
            run computes exactly what an uninterrupted one does.
        hooks: mixed precision and data parallelism (:class:`TrainHooks`); default one process, float32.
            Every process reads the checkpoints (resume); only ``hooks.is_main`` writes them.
        p_max: the replaced layers' SwiftMax saturates there (``min(p, p_max)``, the top of the kernel's P format,
            :func:`~vckattn.golden.swiftmax_int.saturation`): the layers are tuned as the hardware computes them
            (None: no saturation, the paper's operator).
        deployed: the replaced layers compute the deployed numerics in float (:class:`Deployed`: narrow scores,
            P rounded to its format; straight-through gradients), so that β/γ are tuned for what the design
            computes (None: float scores and P).

    Returns the stage logs, including those loaded from checkpoints.
    """
    hooks = hooks or TrainHooks()
    attns = attention_modules(model)
    stages = _stages(len(attns), layers, layers_per_stage)
    betas0, gammas0 = (list(init[0]), list(init[1]))
    if len(betas0) != len(attns) or len(gammas0) != len(attns):
        raise ValueError(f"init needs one beta and gamma per layer ({len(attns)})")
    config = dict(config or {}) | {"layers_per_stage": layers_per_stage, "epochs_per_stage": epochs_per_stage,
                                   "lr": lr, "main_lr": main_lr, "stages": stages, "base": base, "seed": seed}
    if p_max is not None:  # (absent otherwise: checkpoints of runs without saturation stay resumable)
        config["p_max"] = p_max
    if deployed is not None:
        config["deployed"] = deployed.identity()
    done: list[StageLog] = load_checkpoints(ckpt_dir, config) if ckpt_dir is not None else []
    if done:  # resume: the model as it was after the last completed stage
        apply_swiftmax(model, done[-1].betas, done[-1].gammas, base, p_max, deployed)
        if main_lr > 0 and ckpt_dir is not None:
            state = ckpt_dir / f"main_stage{done[-1].stage:02d}.pt"
            model.load_state_dict(torch.load(state, weights_only=True, map_location="cpu"))
    logs = list(done)
    for si in range(len(done), len(stages)):
        t0 = time.perf_counter()
        stage = stages[si]
        torch.manual_seed(seed + si)
        apply_swiftmax(model, {i: betas0[i] for i in stage}, {i: gammas0[i] for i in stage}, base, p_max, deployed)
        sm = swiftmax_layers(model)
        log_gamma = {i: nn.Parameter(torch.log(n.gamma.detach().clone().double()).float()) for i, n in sm.items()}
        for p in model.parameters():
            p.requires_grad_(main_lr > 0)
        params = [{"params": [n.beta for n in sm.values()] + list(log_gamma.values()), "lr": lr}]
        for n in sm.values():
            n.beta.requires_grad_(True)
            n.gamma.requires_grad_(False)
        if main_lr > 0:
            sm_ids = {id(n.beta) for n in sm.values()} | {id(n.gamma) for n in sm.values()}
            params.append({"params": [p for p in model.parameters() if id(p) not in sm_ids], "lr": main_lr})
        opt = torch.optim.Adam(params)
        trainable = [p for g in params for p in g["params"]]
        metrics, losses = [], []
        for epoch in range(epochs_per_stage):
            model.train()
            total, count = 0.0, 0
            for batch in train_batches():
                for i, n in sm.items():  # γ = exp(log γ) > 0, differentiable
                    n.gamma.data = torch.exp(log_gamma[i].detach()).to(n.gamma.dtype)
                opt.zero_grad(set_to_none=True)
                gammas = {i: torch.exp(log_gamma[i]) for i in sm}
                with _gamma_override(sm, gammas), hooks.autocast():
                    loss = loss_fn(model, batch)
                mean_loss = hooks.reduce_loss(loss.detach().float())
                if not torch.isfinite(mean_loss):
                    raise FloatingPointError(f"stage {si} (layers {stage}): loss became {float(mean_loss)}; "
                                             f"lower --lr or use --init max")
                hooks.backward(loss)
                hooks.sync_grads(trainable)
                hooks.step(opt)
                total += float(mean_loss)
                count += 1
                if on_step is not None:
                    on_step()
            for i, n in sm.items():
                n.gamma.data = torch.exp(log_gamma[i].detach()).to(n.gamma.dtype)
            model.eval()
            with torch.no_grad(), hooks.autocast():
                metric = float(eval_fn(model))
            metrics.append(metric)
            losses.append(total / max(count, 1))
            if on_epoch is not None:
                on_epoch(si, epoch, losses[-1], metric)
        for p in model.parameters():
            p.requires_grad_(False)
        log = StageLog(si, stage, metrics, losses, {i: _value(n.beta) for i, n in sm.items()},
                       {i: _value(n.gamma) for i, n in sm.items()}, time.perf_counter() - t0)
        logs.append(log)
        if ckpt_dir is not None and hooks.is_main:
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            if main_lr > 0:
                torch.save(model.state_dict(), ckpt_dir / f"main_stage{si:02d}.pt")
            _save_stage(ckpt_dir, log, config)
    return logs


# ----------------------------------------------------------------------------- peers: HCCS, softmax on int8 scores


def hccs_candidates(cols: int) -> Tensor:
    """``(C, 3)`` integer ``(B, S, Dmax)`` the HCCS search tries for rows of ``cols`` columns: every pair of S (a
    geometric grid) and Dmax (1–16, then a coarser grid to 127) whose scores fit
    (:func:`~vckattn.golden.normalizers.hccs_check`), each with 10 floors ``B - S·Dmax`` geometric from the least
    the reciprocal allows to the most the row sum allows."""
    b_max, low_min = 32767 // cols, -(-256 // cols)
    s_grid = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 127)
    d_grid = (*range(1, 17), 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 127)
    out = set()
    for s in s_grid:
        for d in d_grid:
            top = b_max - s * d
            if top < low_min:
                continue
            for low in np.unique(np.round(np.geomspace(low_min, top, 10)).astype(int)):
                out.add((s * d + int(low), s, d))
    return torch.tensor(sorted(out), dtype=torch.int64)


@torch.no_grad()
def calibrate_hccs(model: nn.Module, batches: Sequence[dict[str, Tensor]], steps: Sequence[float], cols: int,
                   rows: int = 128, seed: int = 0) -> dict[str, list]:
    """HCCS constants per layer and head, calibrated offline on ``batches`` (the model with softmax, as it is):
    of :func:`hccs_candidates` the ``(B, S, Dmax)`` whose integer weights (:func:`~vckattn.golden.normalizers.
    hccs_int` on the scores' int8 codes, LSB ``steps[layer]``) are nearest the float softmax of the same rows in
    mean L1 over up to ``rows`` attention rows of real query tokens (drawn with ``seed``). Returns per layer
    lists ``B``, ``S``, ``Dmax`` (per head) and ``l1`` (the distance reached per head)."""
    register_attention()
    model.set_attn_implementation(ATTN_IMPL)
    model.eval()
    attns = attention_modules(model)
    got: list[list[tuple[Tensor, Tensor]]] = [[] for _ in attns]
    query_keep: list[Tensor | None] = [None]

    def rec(i: int) -> Callable:
        def f(q: Tensor, k: Tensor, keep: Tensor | None, scale: float | None) -> None:
            sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
            z = torch.matmul(q.float(), repeat_kv(k, q.shape[1] // k.shape[1]).float().transpose(-1, -2)) * sc
            kb = torch.ones_like(z, dtype=torch.bool) if keep is None else keep.expand_as(z)
            pad = cols - z.shape[-1]
            if pad < 0:
                raise ValueError(f"rows of {z.shape[-1]} keys are longer than cols {cols}")
            z = nn.functional.pad(z, (0, pad))
            kb = nn.functional.pad(kb, (0, pad), value=False)
            real = query_keep[0]  # (B, Sq): the rows of real query tokens
            sel = real.bool() if real is not None else torch.ones(z.shape[0], z.shape[2], dtype=torch.bool)
            zb, kb = z.permute(0, 2, 1, 3)[sel], kb.permute(0, 2, 1, 3)[sel]  # (rows, H, cols)
            got[i].append((zb.cpu(), kb[:, 0].cpu()))
        return f

    for i, a in enumerate(attns):
        a.vckattn_qk_record = rec(i)
    try:
        for b in batches:
            query_keep[0] = b.get("attention_mask")
            model(**b)
    finally:
        for a in attns:
            a.vckattn_qk_record = None
    cand = hccs_candidates(cols)
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list] = {"B": [], "S": [], "Dmax": [], "l1": []}
    for i, parts in enumerate(got):
        z = torch.cat([p[0] for p in parts])
        kb = torch.cat([p[1] for p in parts])
        pick = torch.randperm(z.shape[0], generator=gen)[:rows]
        z, kb = z[pick].transpose(0, 1), kb[pick]  # (H, R, cols), (R, cols)
        target = softmax(z, kb)
        codes = torch.clamp(torch.floor(z / steps[i] + 0.5), -127, 127)
        best: list[tuple[float, int]] = []
        for h in range(z.shape[0]):
            errs = []
            for c in torch.split(cand, 128):
                w = hccs_int(codes[h].expand(len(c), -1, -1), c[:, 0], c[:, 1], c[:, 2], kb).double() / 256.0
                errs.append((w - target[h].double()).abs().sum(-1).mean(-1))
            e = torch.cat(errs)
            j = int(torch.argmin(e))
            best.append((float(e[j]), j))
        for name, col in (("B", 0), ("S", 1), ("Dmax", 2)):
            out[name].append([int(cand[j, col]) for _, j in best])
        out["l1"].append([v for v, _ in best])
        hccs_check(torch.tensor(out["B"][-1]), torch.tensor(out["S"][-1]), torch.tensor(out["Dmax"][-1]), cols)
    return out


def apply_hccs(model: nn.Module, params: dict[str, list], steps: Sequence[float], exact: bool = True) -> dict:
    """Every layer's softmax replaced by :class:`~vckattn.golden.normalizers.HCCS` with ``params`` (per layer
    and head, :func:`calibrate_hccs`) on the int8 scores of LSB ``steps[layer]``. Returns the new normalizers."""
    register_attention()
    out = {}
    for i, a in enumerate(attention_modules(model)):
        ref = next(a.parameters())
        a.vckattn_normalizer = HCCS(params["B"][i], params["S"][i], params["Dmax"][i], steps[i], exact).to(ref.device)
        out[i] = a.vckattn_normalizer
    model.set_attn_implementation(ATTN_IMPL)
    return out


def apply_quantized_softmax(model: nn.Module, steps: Sequence[float], p_frac: int = 8) -> dict:
    """Every layer's softmax computed on the int8 scores of LSB ``steps[layer]`` with P on the ``2^-p_frac`` grid
    (:class:`~vckattn.golden.normalizers.QuantizedSoftmax`). Returns the new normalizers."""
    register_attention()
    out = {}
    for i, a in enumerate(attention_modules(model)):
        a.vckattn_normalizer = QuantizedSoftmax(steps[i], p_frac)
        out[i] = a.vckattn_normalizer
    model.set_attn_implementation(ATTN_IMPL)
    return out


class _gamma_override:
    """Within the block, each SwiftMax layer's forward divides by a given (differentiable) γ tensor."""

    def __init__(self, sm: dict[int, SwiftMax], gammas: dict[int, Tensor]) -> None:
        self.sm, self.gammas, self.saved = sm, gammas, {}

    def __enter__(self) -> None:
        for i, n in self.sm.items():
            self.saved[i] = n.gamma
            del n._parameters["gamma"]
            n.gamma = self.gammas[i].to(self.saved[i].dtype)  # plain tensor attribute while training

    def __exit__(self, *exc: object) -> None:
        for i, n in self.sm.items():
            del n.gamma
            n._parameters["gamma"] = self.saved[i]


# ----------------------------------------------------------------------------- objectives


def mean_pool(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """Sentence embedding: mean of the token states over the unmasked tokens (sentence-transformers)."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)


def embedding_distillation_loss(student: Tensor, teacher: Tensor) -> Tensor:
    """``1 − cos(student, teacher)`` averaged over the batch (the distillation objective of run (a))."""
    return (1.0 - torch.nn.functional.cosine_similarity(student, teacher, dim=-1)).mean()


def collect_softmax_stats(model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> list[dict[str, float]]:
    """Per layer, from :func:`collect_stats`: the proposed β and γ (:func:`init_beta_gamma`, ``mean``: mean
    ``z_max``, mean ``S``), the standard deviations of ``z_max`` and ``S`` (sample, n - 1) and the row count."""
    out = []
    for s in collect_stats(model, batches):
        beta, gamma = init_beta_gamma(RowSummary.of(s.z_max, s.sum_exp), "mean")
        out.append({"beta": beta, "gamma": gamma, "z_max_std": float(np.std(s.z_max, ddof=1)),
                    "sum_exp_std": float(np.std(s.sum_exp, ddof=1)), "rows": int(s.z_max.size)})
    return out


__all__ = ["CHECKPOINT_NAME", "CONSMAX_INIT", "Deployed", "INIT_MODES", "Init", "LayerStats", "RowSummary",
           "StageLog", "TrainHooks", "apply_hccs", "apply_quantized_softmax", "apply_swiftmax", "calibrate_hccs",
           "collect_softmax_stats", "collect_stats", "consmax_init", "embedding_distillation_loss", "hccs_candidates",
           "init_beta_gamma", "load_checkpoints", "mean_pool", "propose_init", "replace_and_tune", "score_steps",
           "swiftmax_layers"]

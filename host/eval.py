"""``vckattn eval``: a whole model with its attention layers on a backend, scored end to end.

The source checkpoint of a bundle runs in float (float32, as exported); for every evaluated layer the
attention sublayer — Q/K/V projections, scores, normalizer, P·V and W_O — is replaced by the bundle's
integer layer on a device (:func:`vckattn.host.scheduler.run_layer`, the same call ``vckattn run``
makes, with :func:`~vckattn.golden.quant_attention.narrow_layer` on engine builds). The replacement is
two hooks per layer (:func:`attention_on`): one records the float hidden states entering the attention,
the other replaces the output of the attention's output projection W_O (before the residual add) by the
device's dequantized output. Residuals, norms and MLPs stay float; so do layers that are not evaluated.

Two metrics. Without ``task``, the one a sentence-embedding model (MiniLM) is used for: the **mean-pooled
sentence embedding** (:func:`vckattn.golden.calibrate.mean_pool` of the last hidden state) of held-out sentences
(:func:`vckattn.host.textdata.real_sentences` from ``start_topic`` 60, disjoint from the export's
calibration sentences), compared by cosine with the **float softmax model**. With ``task="rotten-tomatoes"``
(a checkpoint with a sequence-classification head, e.g. the sentiment classifier of
``host/experiments/swiftmax_sentiment.py``): the **accuracy** on the data set's test split
(:func:`vckattn.host.datasets.rotten_tomatoes`, seed 0; disjoint from the train split that tuning uses and
the validation split it evaluates on) and the agreement of each model's predictions with the softmax
model's — the analogue of the SwiftMax paper's "SST-2 93.5 → 92.6".

The softmax model is ``reference`` (a checkpoint: the original model when the bundle's source was tuned with
``vckattn calibrate swiftmax`` — its SwiftMax layers, and with ``--main-lr`` its weights, are not the original's)
or, by default, the bundle's source checkpoint with every SwiftMax normalizer put back to softmax. Three models
are scored:

* ``float_softmax`` — the softmax model (cosine 1.0 by definition: a check of the harness);
* ``float_swiftmax`` — the checkpoint with the bundle's SwiftMax β/γ in float on the evaluated layers
  (:func:`vckattn.golden.calibrate.apply_swiftmax`; saturating at the layer's ``p_max`` for a layer tuned for its
  P format);
* ``backend`` — the bundle's integer layers on the backend.

JSON report::

    {"report": "eval", "bundle", "backend", "device", "manifest", "checkpoint", "layers",
     "sentences": {"count", "start_topic", "tokens", "max_tokens"},
     "metric": "...",
     "task": null | "rotten-tomatoes", "reference": "...",
     "end_to_end": {"float_softmax" | "float_swiftmax" | "backend": {"mean_cosine", "min_cosine"}
                    (task: {"accuracy", "agreement"})},
     "per_layer": [{"layer", "normalizer", "beta", "gamma", "p_max",
                    "backend_vs_float_layer": {"max_abs_error", "max_rel_error", "cosine"},
                    "backend_vs_softmax_model": {...}, "float_swiftmax_vs_softmax_model": {...},
                    "tiles", "device_seconds"}],
     "device_seconds", "seconds"}

``backend_vs_float_layer``: the device's attention output against the float golden of the same layer
(the bundle's normalizer, float64) on the same input — the layer's own integer error;
``*_vs_softmax_model``: the attention output against the float softmax model's at that layer — the error
accumulated up to and including the layer. Errors as in :func:`vckattn.host.run.errors` (cosine = mean
per-token cosine over valid tokens).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from vckattn.golden.errors import UserError
from vckattn.host.textdata import EVAL_START_TOPIC

if TYPE_CHECKING:
    from vckattn.golden.quant_attention import QuantAttentionLayer
    from vckattn.host.export import LoadedModel

#: ``runner(i, layer, x, keep, rope) -> out``: layer ``i``'s attention output (B, S, d) float64 after W_O
#: for the float input ``x`` (B, S, d) float64 and valid tokens ``keep`` (B, S).
Runner = Callable[[int, "QuantAttentionLayer", np.ndarray, np.ndarray, "tuple[np.ndarray, np.ndarray] | None"],
                  np.ndarray]

BACKEND_CHOICES = ("emu", "rtl", "csim", "xrt", "pynq")
DEFAULT_SENTENCES = 32
DEFAULT_START_TOPIC = EVAL_START_TOPIC
DEFAULT_MAX_TOKENS = 128
METRIC = "mean-pooled sentence-embedding cosine to the float softmax model (mean and min over sentences)"
#: labeled test sets: text (a sequence classifier) and images (a ViT image classifier)
TEXT_TASKS = ("rotten-tomatoes",)
IMAGE_TASKS = ("digits", "mnist5k")
TASKS = TEXT_TASKS + IMAGE_TASKS
TASK_METRIC = "accuracy on the test split (and agreement with the softmax model's predictions)"
DEFAULT_TASK_SAMPLES = 256


@dataclass
class EvalData:
    """Held-out sentences as one padded batch: the model's keyword arguments and ``keep`` (B, S) bool."""

    sentences: list[str]
    inputs: dict[str, torch.Tensor]
    keep: np.ndarray
    labels: np.ndarray | None = None  # a task's labels (int64), None for the embedding metric


def held_out(m: LoadedModel, n: int = DEFAULT_SENTENCES, start_topic: int = DEFAULT_START_TOPIC,
             max_tokens: int = DEFAULT_MAX_TOKENS) -> EvalData:
    """``n`` sentences of :func:`~vckattn.host.textdata.real_sentences` from ``start_topic``, tokenized (the
    default topic: the evaluation set, :func:`~vckattn.host.textdata.eval_sentences`, which no tuning pool
    contains)."""
    from vckattn.host.textdata import EVAL_MAX_SENTENCES, real_sentences

    if m.tokenizer is None:
        how = f"images: --task {' or --task '.join(IMAGE_TASKS)}" if m.family == "vit" else "its own inputs"
        raise UserError(f"this checkpoint ({m.family}{' golden stack' if m.golden else ''}) has no tokenizer: "
                        f"score it on {how}")
    if start_topic == EVAL_START_TOPIC and n > EVAL_MAX_SENTENCES:
        raise UserError(f"--sentences {n}: the evaluation set has {EVAL_MAX_SENTENCES} sentences (more would overlap "
                        "the tuning pool of `vckattn calibrate --data pydoc`)")
    sentences = real_sentences(n, start_topic=start_topic)
    if not sentences:
        raise UserError(f"no held-out sentences from topic {start_topic}")
    enc = m.tokenizer(sentences, padding=True, truncation=True, return_tensors="pt",
                      max_length=min(max_tokens, int(m.info["max_seq_len"])))
    inputs = dict(enc) | ({"use_cache": False} if m.family == "llama" else {})
    return EvalData(sentences, inputs, enc["attention_mask"].numpy().astype(bool))


def pixel_values(m: LoadedModel, images: np.ndarray) -> torch.Tensor:
    """Images ``(N, H, W)`` in [0, 1] as a ViT's ``pixel_values`` ``(N, C, H, W)`` in [−1, 1] (``(x − 0.5) / 0.5``,
    as ``ViTImageProcessor`` with mean = std = 0.5, ``vckattn calibrate`` and the export do); InputError when the
    images are not the model's size."""
    from vckattn.golden.errors import InputError

    cfg = m.model.config
    side = int(cfg.image_size)
    if images.ndim != 3 or images.shape[1:] != (side, side):
        raise InputError(f"the images are {'×'.join(map(str, images.shape[1:]))}; this ViT takes {side}×{side} "
                         f"({cfg.num_channels} channel(s))")
    x = torch.from_numpy((np.asarray(images, np.float32) - 0.5) / 0.5)
    return x[:, None].expand(-1, int(cfg.num_channels), -1, -1).contiguous()


def vit_tokens(m: LoadedModel) -> int:
    """A ViT's sequence length: its patches and [CLS]."""
    cfg = m.model.config
    return (int(cfg.image_size) // int(cfg.patch_size)) ** 2 + 1


def image_data(m: LoadedModel, task: str, n: int = DEFAULT_TASK_SAMPLES, split: str = "test") -> EvalData:
    """The first ``n`` images of ``task``'s ``split`` (:mod:`vckattn.host.datasets`, seed 0) with their labels, as
    a ViT's inputs (every token valid)."""
    from vckattn.host import datasets

    if m.family != "vit" or m.golden:
        raise UserError(f"--task {task} scores a Hugging Face ViT image classifier; this checkpoint is a "
                        f"{m.family} {'golden stack' if m.golden else 'model'}")
    part = getattr(getattr(datasets, task)(0), split)
    x, y = np.asarray(part.x[:n], np.float32), np.asarray(part.y[:n], np.int64)
    px = pixel_values(m, x)
    return EvalData([f"{task} {split} image {i}" for i in range(len(y))], {"pixel_values": px},
                    np.ones((len(y), vit_tokens(m)), bool), y)


def synthetic_images(m: LoadedModel, n: int, seed: int) -> EvalData:
    """``n`` seeded uniform[−1, 1] pixel tensors (what the export calibrates a ViT on when it is given no image
    set): a held-out set with another seed."""
    cfg = m.model.config
    gen = torch.Generator().manual_seed(seed)
    px = torch.rand((n, int(cfg.num_channels), int(cfg.image_size), int(cfg.image_size)), generator=gen) * 2 - 1
    return EvalData([f"uniform[-1, 1] image {i} (seed {seed})" for i in range(n)], {"pixel_values": px},
                    np.ones((n, vit_tokens(m)), bool))


def golden_data(m: LoadedModel, sentences: list[str], seq_len: int, seed: int) -> EvalData:
    """Held-out inputs of a golden stack: the UTF-8 bytes of ``sentences`` (with an embedding) or seeded N(0, 1)
    hidden states ``(len(sentences), seq_len, d)`` (without one)."""
    stack = m.model
    if stack.embed is not None:  # type: ignore[union-attr]
        ids = [list(s.encode("utf-8"))[:seq_len] or [0] for s in sentences]
        width = max(len(t) for t in ids)
        x = torch.zeros((len(ids), width), dtype=torch.long)
        keep = np.zeros((len(ids), width), bool)
        for b, t in enumerate(ids):
            x[b, :len(t)] = torch.tensor(t) % stack.embed.num_embeddings  # type: ignore[union-attr]
            keep[b, :len(t)] = True
        return EvalData(list(sentences), {"x": x, "keep": torch.from_numpy(keep)}, keep)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((len(sentences), seq_len, int(m.info["hidden_size"])), generator=gen)
    keep = np.ones((len(sentences), seq_len), bool)
    return EvalData([f"N(0, 1) hidden states {i} (seed {seed})" for i in range(len(sentences))],
                    {"x": x, "keep": torch.from_numpy(keep)}, keep)


def task_data(m: LoadedModel, task: str, n: int = DEFAULT_TASK_SAMPLES, max_tokens: int = DEFAULT_MAX_TOKENS
              ) -> EvalData:
    """The first ``n`` samples of ``task``'s test split with their labels: snippets, tokenized (a text
    classifier), or images (a ViT image classifier)."""
    from vckattn.host import datasets

    if task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if task in IMAGE_TASKS:
        if m.classifier is None:
            raise UserError(f"--task {task} scores an image classifier; this checkpoint has no image-classification "
                            "head (config.json architectures: ViTForImageClassification)")
        return image_data(m, task, n)
    if m.family == "vit":
        raise UserError(f"--task {task} is text; a ViT takes images: --task {' or --task '.join(IMAGE_TASKS)}")
    if m.tokenizer is None or m.classifier is None:
        raise UserError(f"--task {task} scores a text classifier; this checkpoint has no sequence-classification "
                        "head (config.json architectures)")
    test = datasets.rotten_tomatoes(0).test
    texts, labels = list(test.x)[:n], np.asarray(test.y[:n], np.int64)
    enc = m.tokenizer(texts, padding=True, truncation=True, return_tensors="pt",
                      max_length=min(max_tokens, int(m.info["max_seq_len"])))
    return EvalData(texts, dict(enc), enc["attention_mask"].numpy().astype(bool), labels)


def output_projection(m: LoadedModel, i: int) -> nn.Module:
    """Layer ``i``'s module whose output is the attention output after W_O, before the residual add: W_O itself
    in a Hugging Face BERT, ViT or Llama model; the whole attention module of a golden stack (it ends with W_O)."""
    ly = m.layers[i]
    if m.golden:
        return ly.attn_module
    if m.family == "bert":
        return ly.block_module.attention.output.dense
    return ly.attn_module.o_proj  # llama, vit


@contextlib.contextmanager
def attention_on(m: LoadedModel, layers: dict[int, QuantAttentionLayer], keep: np.ndarray,
                 runner: Runner | None, record: dict[int, dict[str, np.ndarray]]) -> Iterator[None]:
    """Within the block, the attention output of each layer in ``layers`` is ``runner``'s (cast to the model's
    dtype); ``record[i]`` gets ``{"x", "out"}`` (float64 attention input and output). With ``runner`` None the
    model runs unchanged and is only recorded."""
    handles = []

    def pre(i: int) -> Callable[..., None]:
        def hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
            x = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
            rope = kwargs.get("position_embeddings", kwargs.get("rope"))
            record[i] = {"x": x.detach().double().cpu().numpy(),
                         "rope": None if rope is None else tuple(_table(r) for r in rope)}
        return hook

    def post(i: int) -> Callable[..., torch.Tensor | None]:
        def hook(_mod: nn.Module, _args: tuple, out: torch.Tensor) -> torch.Tensor | None:
            rec = record[i]
            if runner is None:
                rec["out"] = out.detach().double().cpu().numpy()
                return None
            rec["out"] = runner(i, layers[i], rec["x"], keep, rec["rope"])
            return torch.from_numpy(rec["out"]).to(dtype=out.dtype, device=out.device)
        return hook

    try:
        for i in layers:
            handles.append(m.layers[i].attn_module.register_forward_pre_hook(pre(i), with_kwargs=True))
            handles.append(output_projection(m, i).register_forward_hook(post(i)))
        yield
    finally:
        for h in handles:
            h.remove()


def _table(r: Any) -> np.ndarray:
    """One RoPE table as (S, D) float64 (Hugging Face passes (B, S, D), the golden stack (S, D))."""
    a = r.detach().double().cpu().numpy() if isinstance(r, torch.Tensor) else np.asarray(r, np.float64)
    return a[0] if a.ndim == 3 else a


@torch.no_grad()
def embeddings(m: LoadedModel, data: EvalData, logits: bool | None = None) -> np.ndarray:
    """The model's outputs as it is now (hooks included): the classifier's logits (B, classes) when ``logits``
    (default: for a task, ``data.labels`` set), else the mean-pooled last hidden states (B, d) over valid tokens;
    float64."""
    from vckattn.golden.calibrate import mean_pool

    if logits is None:
        logits = data.labels is not None
    if logits:
        assert m.classifier is not None
        return m.classifier(**data.inputs).logits.double().numpy()
    out = m.model(**data.inputs)
    hidden = out if isinstance(out, torch.Tensor) else out.last_hidden_state
    return mean_pool(hidden.double(), torch.from_numpy(data.keep)).numpy()


@torch.no_grad()
def token_states(m: LoadedModel, data: EvalData) -> np.ndarray:
    """The model's last hidden states (B, S, d) float64 as it is now (hooks included)."""
    out = m.model(**data.inputs)
    hidden = out if isinstance(out, torch.Tensor) else out.last_hidden_state
    return hidden.double().numpy()


def token_cosine(out: np.ndarray, ref: np.ndarray, keep: np.ndarray) -> dict[str, float]:
    """Per-token cosine of hidden states (B, S, d) over valid tokens: ``mean_cosine`` (over tokens) and
    ``min_cosine`` (the worst input's mean)."""
    cos = (out * ref).sum(-1) / (np.linalg.norm(out, axis=-1) * np.linalg.norm(ref, axis=-1) + 1e-300)
    per_input = [float(c[k].mean()) for c, k in zip(cos, keep, strict=True) if k.any()]
    return {"mean_cosine": float(cos[keep].mean()), "min_cosine": float(min(per_input))}


def accuracy(logits: np.ndarray, labels: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Accuracy of ``logits``' predictions and their agreement with the reference logits' predictions."""
    pred = logits.argmax(-1)
    return {"accuracy": float((pred == labels).mean()), "agreement": float((pred == ref.argmax(-1)).mean())}


def softmax_everywhere(m: LoadedModel) -> LoadedModel:
    """``m`` with every SwiftMax attention normalizer put back to softmax (the golden softmax; a checkpoint tuned
    by ``vckattn calibrate swiftmax`` loads with its SwiftMax layers)."""
    from vckattn.golden import convert
    from vckattn.golden.normalizers import Softmax, SwiftMax

    if m.golden:
        for ly in m.layers:
            if isinstance(getattr(ly.attn_module, "normalizer", None), SwiftMax):
                ly.attn_module.normalizer = Softmax()
        return m
    attns = convert.attention_modules(m.model)
    idx = [i for i, a in enumerate(attns) if isinstance(getattr(a, "vckattn_normalizer", None), SwiftMax)]
    if idx:
        convert.swap_attention_normalizer(m.model, "softmax", idx)
    return m


def cosine_to(emb: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Per-sentence cosine of ``emb`` to ``ref``: mean and min."""
    cos = (emb * ref).sum(-1) / (np.linalg.norm(emb, axis=-1) * np.linalg.norm(ref, axis=-1) + 1e-300)
    return {"mean_cosine": float(cos.mean()), "min_cosine": float(cos.min())}


def golden_runner() -> Runner:
    """The bit-exact integer golden model as the runner (:func:`~vckattn.golden.quant_attention.attention_int`)."""
    from vckattn.golden.quant_attention import attention_int

    def run(_i: int, layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray,
            rope: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        return attention_int(layer, x, keep, rope=rope)[0]
    return run


def device_runner(device: Any, stats: dict[int, dict], progress: bool = False) -> Runner:
    """A runner that calls :func:`~vckattn.host.scheduler.run_layer` on ``device``; per layer ``stats[i]`` gets
    ``{"tiles", "device_seconds"}``."""
    from tqdm import tqdm

    from vckattn.host.progress import bar_disable
    from vckattn.host.scheduler import run_layer

    def run(i: int, layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray,
            rope: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        bar = tqdm(total=None, desc=f"layer {i}", unit="tile", disable=bar_disable(progress), file=sys.stderr,
                   leave=False)
        try:
            lr = run_layer(device, layer, x, keep, rope, index=i, progress=bar)
        finally:
            bar.close()
        stats[i] = {"tiles": lr.tiles, "device_seconds": lr.device_seconds}
        return lr.out
    return run


def quant_layers(bundle: Any, bundle_path: Path, layers: list[int], manifest: Any) -> dict[int, QuantAttentionLayer]:
    """The bundle's integer layers (narrowed to the engine's score width on an engine manifest, as
    ``vckattn run`` does)."""
    from vckattn.golden.quant_attention import narrow_layer
    from vckattn.host.export import to_quant_layer

    out = {}
    for i in layers:
        ql = to_quant_layer(bundle, i)
        if manifest is not None and manifest.data.get("engine"):
            try:
                ql = narrow_layer(ql, int(manifest.data["engine"]["score_bits"]))
            except ValueError as exc:
                raise UserError(f"{bundle_path}: layer {i}: {exc}") from None
        out[i] = ql
    return out


def swiftmax_saturations(bundle: Any, layers: list[int]) -> dict[int, float]:
    """The ``p_max`` of the evaluated SwiftMax layers tuned for their P format (their float SwiftMax saturates)."""
    return {int(e["index"]): float(e["swiftmax"]["p_max"]) for e in bundle.manifest["layers"]
            if int(e["index"]) in layers and e.get("swiftmax") and e["swiftmax"].get("p_max") is not None}


def swiftmax_constants(bundle: Any, layers: list[int]) -> dict[int, tuple[float | list[float], float | list[float]]]:
    """β, γ of the evaluated SwiftMax layers of the bundle: floats (schema 1) or one value per head."""
    out: dict[int, tuple[float | list[float], float | list[float]]] = {}
    for e in bundle.manifest["layers"]:
        i = int(e["index"])
        if i in layers and e.get("swiftmax"):
            b, g = e["swiftmax"]["beta"], e["swiftmax"]["gamma"]
            out[i] = ([float(v) for v in b], [float(v) for v in g]) if isinstance(b, list) else (float(b), float(g))
    return out


def set_swiftmax(m: LoadedModel, constants: dict[int, tuple[float | list[float], float | list[float]]],
                 p_max: dict[int, float] | None = None) -> None:
    """Put SwiftMax with these β, γ (per layer: floats, or one per head) into ``m``'s float layers, saturating at
    ``p_max`` (per layer; absent: no saturation) for a layer tuned for its P format."""
    if not constants:
        return
    if not m.golden:
        from vckattn.golden.calibrate import apply_swiftmax

        apply_swiftmax(m.model, {i: b for i, (b, _) in constants.items()}, {i: g for i, (_, g) in constants.items()},
                       p_max=p_max or None)
        return
    from vckattn.golden.normalizers import SwiftMax

    for i, (b, g) in constants.items():
        attn = m.layers[i].attn_module
        per_head = isinstance(b, list)
        sm = SwiftMax(num_heads=attn.n_heads if per_head else None,
                      p_max=(p_max or {}).get(i)).to(next(attn.parameters()).dtype)
        with torch.no_grad():
            sm.beta.copy_(torch.as_tensor(b, dtype=sm.beta.dtype).expand_as(sm.beta))
            sm.gamma.copy_(torch.as_tensor(g, dtype=sm.gamma.dtype).expand_as(sm.gamma))
        attn.normalizer = sm


def precheck(bundle_path: Path, layers: list[int] | None, manifest: Any, n_sentences: int | None,
             max_tokens: int | None, task: str | None = None, backend: str = "emu") -> int:
    """Everything that can be refused before the model is loaded: the bundle (BundleError), ``layers`` in it, the
    bundle against the build (ManifestError), the backend against the bundle's normalizers, the task against the
    model family, ``n_sentences`` within the held-out set, ``max_tokens`` within the model's positions
    (InputError). Returns ``max_tokens`` (None: :data:`DEFAULT_MAX_TOKENS`, or the model's positions when it has
    fewer)."""
    from vckattn.host.backends import check_backend
    from vckattn.host.bundle import load_bundle
    from vckattn.host.cli.common import fit_length
    from vckattn.host.textdata import EVAL_MAX_SENTENCES
    from vckattn.hw.manifest import check_bundle

    bundle = load_bundle(bundle_path)
    present = [int(e["index"]) for e in bundle.manifest["layers"]]
    bad = [i for i in (layers or []) if i not in present]
    if bad:
        raise UserError(f"{bundle_path}: --layers: no layer(s) {bad} in the bundle "
                        f"(it has {present[0]}..{present[-1]})")
    chosen = sorted(set(layers)) if layers else present
    check_bundle(manifest, bundle, chosen)
    check_backend(backend, manifest, bundle, chosen)
    family = bundle.manifest["model"]["family"]
    if family == "vit" and task not in IMAGE_TASKS:
        raise UserError(f"{bundle_path} is a ViT bundle: a ViT takes images; score it with --task "
                        f"{' or --task '.join(IMAGE_TASKS)} (an image classifier's test accuracy)")
    if family != "vit" and task in IMAGE_TASKS:
        raise UserError(f"--task {task} is an image set; {bundle_path} is a {family} bundle (text)")
    if n_sentences is not None and not 1 <= n_sentences <= EVAL_MAX_SENTENCES:
        raise UserError(f"--sentences {n_sentences}: the held-out set has {EVAL_MAX_SENTENCES} sentences "
                        f"(give 1..{EVAL_MAX_SENTENCES})")
    limit = int(bundle.manifest["model"]["max_seq_len"])
    if family == "vit":
        return limit
    return fit_length(max_tokens, DEFAULT_MAX_TOKENS, limit, "--max-tokens")


def load_inputs(bundle_path: Path, layers: list[int] | None, checkpoint: Path | None,
                progress: bool, classifier: bool = False) -> tuple[Any, list[int], LoadedModel]:
    """The bundle, the layers to evaluate (default: all of the bundle's; UserError for others) and the source
    model (with its classification head when ``classifier``)."""
    from vckattn.host.bundle import load_bundle
    from vckattn.host.run import _source_model

    bundle = load_bundle(bundle_path)
    present = [int(e["index"]) for e in bundle.manifest["layers"]]
    chosen = present if layers is None else sorted(set(layers))
    bad = [i for i in chosen if i not in present]
    if bad:
        raise UserError(f"{bundle_path}: --layers: no layer(s) {bad} in the bundle "
                        f"(it has {present[0]}..{present[-1]})")
    return bundle, chosen, _source_model(bundle, checkpoint, progress, classifier)


def reference_model(m: LoadedModel, reference: Path | str | None, progress: bool, classifier: bool) -> LoadedModel:
    """The softmax model the scores compare with: ``reference`` loaded (softmax everywhere), or a second copy of
    the bundle's source model with softmax everywhere (``m`` keeps its normalizers)."""
    from vckattn.host import export

    if reference is None:
        import copy

        return softmax_everywhere(copy.deepcopy(m))
    from vckattn.golden.errors import InputError

    try:
        ref = export.load_model(export.resolve_checkpoint(reference), progress, classifier)
    except export.ExportError as exc:
        raise InputError(f"--reference: {exc}") from None
    # a reference that is not the source's kind of model: a bad input, as a --checkpoint that is not the source
    if ref.family != m.family or len(ref.layers) != len(m.layers) or ref.info["hidden_size"] != m.info["hidden_size"]:
        raise InputError(f"--reference {reference}: a {ref.family} model of {len(ref.layers)} layers, hidden "
                         f"{ref.info['hidden_size']}; the bundle's source is a {m.family} model of {len(m.layers)} "
                         f"layers, hidden {m.info['hidden_size']}")
    if classifier and ref.classifier is None:
        raise InputError(f"--reference {reference}: no classification head")
    return softmax_everywhere(ref)


def evaluate(bundle_path: Path, backend: str = "emu", *, layers: list[int] | None = None,
             manifest_path: Path | str | None = None, checkpoint: Path | None = None,
             n_sentences: int = DEFAULT_SENTENCES, start_topic: int = DEFAULT_START_TOPIC,
             max_tokens: int | None = None, device_options: dict | None = None,
             progress: bool = True, task: str | None = None, reference: Path | str | None = None,
             n_samples: int = DEFAULT_TASK_SAMPLES) -> dict:
    """Score the model with the bundle's layers on ``backend``; the JSON report of the module docstring."""
    from vckattn.host.export import layer_output
    from vckattn.host.run import errors, open_device
    from vckattn.hw.manifest import default_manifest, load_manifest

    t0 = time.perf_counter()
    if backend not in BACKEND_CHOICES:
        raise UserError(f"unknown backend {backend!r}; choose one of {', '.join(BACKEND_CHOICES)}")
    if task is not None and task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    manifest = load_manifest(manifest_path or default_manifest(backend))
    if "sublayer" in manifest.data:  # whole sublayers on the device: X in, Y out
        from vckattn.host.eval_sublayer import evaluate_sublayers

        return evaluate_sublayers(bundle_path, backend, manifest, layers=layers, checkpoint=checkpoint,
                                  n_sentences=n_sentences, start_topic=start_topic, max_tokens=max_tokens,
                                  device_options=device_options, progress=progress, task=task, reference=reference,
                                  n_samples=n_samples)
    max_tokens = precheck(bundle_path, layers, manifest, n_sentences if task is None else None, max_tokens, task,
                          backend)
    bundle, chosen, m = load_inputs(bundle_path, layers, checkpoint, progress, classifier=task is not None)
    qls = quant_layers(bundle, bundle_path, chosen, manifest)
    data = held_out(m, n_sentences, start_topic, max_tokens) if task is None else task_data(m, task, n_samples,
                                                                                           max_tokens)
    keep = data.keep
    if reference is None:  # a checkpoint tuned by `vckattn calibrate swiftmax`: compare with the model it came from
        from vckattn.host.export.pipeline import tuned_base
        from vckattn.host.run import source_checkpoint

        reference = tuned_base(source_checkpoint(bundle, checkpoint))
    ref_m = reference_model(m, reference, progress, task is not None)

    ref_rec: dict[int, dict] = {}
    with attention_on(ref_m, qls, keep, None, ref_rec):
        ref = embeddings(ref_m, data)

    device = open_device(backend, manifest, **(device_options or {}))
    device.check_bundle(bundle, chosen, int(keep.shape[1]))
    stats: dict[int, dict] = {}
    dev_rec: dict[int, dict] = {}
    with device, attention_on(m, qls, keep, device_runner(device, stats, progress), dev_rec):
        dev = embeddings(m, data)

    sm = swiftmax_constants(bundle, chosen)
    sat = swiftmax_saturations(bundle, chosen)
    sm_rec: dict[int, dict] = {}
    set_swiftmax(m, sm, sat)
    with attention_on(m, qls, keep, None, sm_rec):
        swift = embeddings(m, data)

    per_layer = []
    for i in chosen:
        beta, gamma = sm.get(i, (None, None))
        norm = "swiftmax" if i in sm else "softmax"
        x = dev_rec[i]["x"]
        f = layer_output(m, i, x, keep, dev_rec[i]["rope"], norm, np.asarray(beta) if beta is not None else 0.0,
                         np.asarray(gamma) if gamma is not None else 1.0, sat.get(i))
        per_layer.append({"layer": i, "normalizer": norm, "beta": beta, "gamma": gamma, "p_max": sat.get(i),
                          "backend_vs_float_layer": errors(dev_rec[i]["out"], f, keep),
                          "backend_vs_softmax_model": errors(dev_rec[i]["out"], ref_rec[i]["out"], keep),
                          "float_swiftmax_vs_softmax_model": errors(sm_rec[i]["out"], ref_rec[i]["out"], keep),
                          **stats[i]})
    return {**report_head(bundle_path, backend, device, manifest, bundle, checkpoint, reference, task, chosen, data,
                          start_topic, max_tokens),
            "end_to_end": end_to_end(task, data, ref, swift, dev),
            "per_layer": per_layer, "device_seconds": float(sum(s["device_seconds"] for s in stats.values())),
            "seconds": time.perf_counter() - t0}


def end_to_end(task: str | None, data: EvalData, ref: np.ndarray, swift: np.ndarray, dev: np.ndarray) -> dict:
    """The three models' end-to-end scores against the softmax model's outputs ``ref``: the embedding cosine
    (:func:`cosine_to`) or, with a task, the accuracy and agreement (:func:`accuracy`)."""
    if task is None:
        return {"float_softmax": cosine_to(ref, ref), "float_swiftmax": cosine_to(swift, ref),
                "backend": cosine_to(dev, ref)}
    assert data.labels is not None
    return {"float_softmax": accuracy(ref, data.labels, ref), "float_swiftmax": accuracy(swift, data.labels, ref),
            "backend": accuracy(dev, data.labels, ref)}


def report_head(bundle_path: Path, backend: str, device: Any, manifest: Any, bundle: Any, checkpoint: Path | None,
                reference: Path | str | None, task: str | None, chosen: list[int], data: EvalData, start_topic: int,
                max_tokens: int | None) -> dict:
    """The report's fields that say what was scored and on what (the module docstring's JSON, up to
    ``end_to_end``)."""
    return {"report": "eval", "bundle": str(bundle_path), "backend": backend, "device": device.where,
            "manifest": manifest.name, "checkpoint": str(bundle.manifest["source"]["path"] if checkpoint is None
                                                         else checkpoint),
            "reference": str(reference) if reference is not None else "the source checkpoint with softmax",
            "task": task, "layers": chosen,
            "sentences": {"count": len(data.sentences), "start_topic": start_topic if task is None else None,
                          "tokens": int(data.keep.sum()), "max_tokens": max_tokens},
            "metric": METRIC if task is None else f"{task}: {TASK_METRIC}"}


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


def write_json(report: dict, path: Path) -> None:
    """Write the report (folders created; atomically: never half-written)."""
    from vckattn.host.cli.common import write_text_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(report, indent=2) + "\n")


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


__all__ = ["BACKEND_CHOICES", "TASKS", "EvalData", "Runner", "accuracy", "attention_on", "cosine_to", "device_runner",
           "embeddings", "end_to_end", "evaluate", "golden_runner", "held_out", "load_inputs", "output_projection",
           "print_report", "quant_layers", "reference_model", "report_head", "softmax_everywhere", "swiftmax_constants",
           "swiftmax_saturations", "task_data", "write_json", "write_plots"]

"""Running a model with some of its attention layers replaced, and scoring it against a reference: the
primitives ``vckattn eval`` and the export's whole-model check share (inputs held out from calibration, images,
embeddings, token states, cosines, accuracy). Activations float64; cosines of mean-pooled embeddings."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from vckattn.golden.errors import UserError
from vckattn.host.textdata import EVAL_START_TOPIC

if TYPE_CHECKING:
    from vckattn.golden.quant_attention import QuantAttentionLayer
    from vckattn.host.export.sources import LoadedModel

#: ``runner(i, layer, x, keep, rope) -> out``: layer ``i``'s attention output (B, S, d) float64 after W_O
#: for the float input ``x`` (B, S, d) float64 and valid tokens ``keep`` (B, S).


#: ``runner(i, x, rope) -> out``: the output (B, S, d) float64 of layer ``i``'s stage list (:func:`stages_on`: the
#: attention core's after W_O, or the sublayer's) for its float input ``x`` (B, S, d) float64 and the float RoPE
#: tables (None without RoPE)
Runner = Callable[[int, np.ndarray, "tuple[np.ndarray, np.ndarray] | None"], np.ndarray]


DEFAULT_SENTENCES = 32


DEFAULT_START_TOPIC = EVAL_START_TOPIC


DEFAULT_MAX_TOKENS = 128


#: labeled test sets: text (a sequence classifier) and images (a ViT image classifier)
TEXT_TASKS = ("rotten-tomatoes",)


IMAGE_TASKS = ("digits", "mnist5k")


TASKS = TEXT_TASKS + IMAGE_TASKS


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
def stages_on(m: LoadedModel, family: str, layers: list[int], runner: Runner | None,
              record: dict[int, dict[str, Any]]) -> Iterator[None]:
    """Within the block, each layer of ``layers`` has the output of its stage list (golden/stages.py) from
    ``runner(i, x, rope)`` (cast to the model's dtype); ``record[i]`` gets ``{"x", "rope", "out"}`` (the stages'
    float64 input, the RoPE tables, the output). With ``runner`` None the model runs unchanged and is only recorded.

    Where the family's stages sit in the float model: the attention core from the attention module's input to W_O's
    output (``family`` ``attention``); the post-LN encoder's sublayer from its attention module's input to its output
    (``LN(X + Attn(X))``, ``encoder``); the BHyT decoder's from the block's input H to ``H + Attn(BHyT_A(H))``
    (``decoder``: the block adds the residual itself, so the hook returns the runner's output minus H)."""
    if family != "attention" and m.golden:
        raise UserError("a sublayer build scores Hugging Face checkpoints (a BERT/MiniLM encoder or a Llama converted "
                        "to BHyT); this bundle's source is a golden stack")
    handles = []

    def pre(i: int) -> Callable[..., None]:
        def hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
            x = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
            rope = kwargs.get("position_embeddings", kwargs.get("rope"))
            record[i] = {"x": x.detach().double().cpu().numpy(),
                         "rope": None if rope is None else tuple(_table(r) for r in rope)}
        return hook

    def post(i: int) -> Callable[..., Any]:
        def hook(_mod: nn.Module, _args: tuple, out: Any) -> Any:
            rec = record[i]
            first = out[0] if isinstance(out, tuple) else out
            if runner is None:
                val = first.detach().double().cpu().numpy()
                rec["out"] = rec["x"] + val if family == "decoder" else val
                return None
            rec["out"] = runner(i, rec["x"], rec["rope"])
            new = rec["out"] - rec["x"] if family == "decoder" else rec["out"]
            t = torch.from_numpy(new).to(dtype=first.dtype, device=first.device)
            return (t, *out[1:]) if isinstance(out, tuple) else t
        return hook

    try:
        for i in layers:
            ly = m.layers[i]
            start, end = {"attention": (ly.attn_module, output_projection(m, i)),
                          "encoder": (getattr(ly.block_module, "attention", None),) * 2,
                          "decoder": (ly.block_module, ly.attn_module)}[family]
            handles.append(start.register_forward_pre_hook(pre(i), with_kwargs=True))
            handles.append(end.register_forward_hook(post(i)))
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


def golden_runner(layers: dict[int, QuantAttentionLayer], keep: np.ndarray) -> Runner:
    """The bit-exact integer golden attention core as the runner (:func:`~vckattn.golden.stages.attention_int`) of
    ``layers`` on tokens ``keep``."""
    from vckattn.golden.stages import attention_int

    def run(i: int, x: np.ndarray, rope: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        return attention_int(layers[i], x, keep, rope=rope)[0]
    return run


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


def end_to_end(task: str | None, data: EvalData, ref: np.ndarray, swift: np.ndarray, dev: np.ndarray) -> dict:
    """The three models' end-to-end scores against the softmax model's outputs ``ref``: the embedding cosine
    (:func:`cosine_to`) or, with a task, the accuracy and agreement (:func:`accuracy`)."""
    if task is None:
        return {"float_softmax": cosine_to(ref, ref), "float_swiftmax": cosine_to(swift, ref),
                "backend": cosine_to(dev, ref)}
    assert data.labels is not None
    return {"float_softmax": accuracy(ref, data.labels, ref), "float_swiftmax": accuracy(swift, data.labels, ref),
            "backend": accuracy(dev, data.labels, ref)}


METRIC = "mean-pooled sentence-embedding cosine to the float softmax model (mean and min over sentences)"


TASK_METRIC = "accuracy on the test split (and agreement with the softmax model's predictions)"


__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_SENTENCES", "DEFAULT_START_TOPIC", "DEFAULT_TASK_SAMPLES", "EvalData",
           "IMAGE_TASKS", "METRIC", "Runner", "TASKS", "TASK_METRIC", "TEXT_TASKS", "accuracy", "stages_on",
           "cosine_to", "embeddings", "end_to_end", "golden_data", "golden_runner", "held_out", "image_data",
           "output_projection", "pixel_values", "set_swiftmax", "softmax_everywhere", "swiftmax_constants",
           "swiftmax_saturations", "synthetic_images", "task_data", "token_cosine", "token_states", "vit_tokens"]

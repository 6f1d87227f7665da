"""What ``vckattn run`` and ``vckattn eval`` share: the bundle's source model, the inputs (an ``.npz``; text goes
through :mod:`vckattn.host.run`), the checks made before the model loads, and the error measures (float64
activations; cosine = mean per-token cosine over valid tokens)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from vckattn.golden.errors import InputError, UserError
from vckattn.host.scoring import (
    DEFAULT_MAX_TOKENS,
    IMAGE_TASKS,
    METRIC,
    TASK_METRIC,
    EvalData,
    softmax_everywhere,
)

if TYPE_CHECKING:
    from vckattn.host.export.sources import LoadedModel


BACKEND_CHOICES = ("emu", "rtl", "csim", "xrt", "pynq")


@dataclass
class RunInputs:
    """Per layer: float input (1, S, d), RoPE tables or None; and the (1, S) keep mask."""

    x: dict[int, np.ndarray]
    rope: dict[int, tuple[np.ndarray, np.ndarray] | None]
    keep: np.ndarray


def source_model(bundle: Any, checkpoint: str | Path | None, progress: bool, classifier: bool = False) -> LoadedModel:
    """The bundle's source model (:func:`source_checkpoint`), loaded."""
    from vckattn.host import export

    return export.load_model(source_checkpoint(bundle, checkpoint), progress, classifier)


def source_checkpoint(bundle: Any, checkpoint: str | Path | None) -> Any:
    """The bundle's source checkpoint (``checkpoint`` when given: it moved) as a resolved
    :class:`~vckattn.host.export.Source`, after proving it is the one exported: the sha256 of its weight files
    must be the one the bundle recorded. InputError (status 4) otherwise, before the model is loaded."""
    from vckattn.host import export

    src = bundle.manifest["source"]
    path = checkpoint if checkpoint is not None else src["path"]
    try:
        source = export.resolve_checkpoint(path)
    except InputError as exc:
        raise InputError(f"the float reference needs the bundle's source checkpoint: {exc} "
                         "(pass --checkpoint PATH if it moved)") from None
    digest = source.sha256()
    if digest != src["sha256"]:
        if checkpoint is None:
            raise InputError(f"{path}: the checkpoint changed since the bundle was exported (its weights' sha256 "
                             f"{digest[:12]}… is not the recorded {src['sha256'][:12]}…); re-export, or pass "
                             "--checkpoint with the original")
        raise InputError(f"--checkpoint {checkpoint} is not the bundle's source: its weights' sha256 {digest[:12]}… "
                         f"differs from the {src['sha256'][:12]}… recorded at export (of {src['path']}); pass the "
                         "checkpoint the bundle was exported from")
    return source


def npz_inputs(m: LoadedModel, path: Path, layers: list[int]) -> RunInputs:
    try:
        data = np.load(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the input npz: {exc}") from None
    d = int(m.info["hidden_size"])
    x, s = {}, None
    for i in layers:
        name = f"layer{i}_input"
        if name not in data.files:
            raise InputError(f"{path}: no array {name!r} (has {', '.join(data.files) or 'nothing'})")
        a = np.asarray(data[name], np.float64)
        if a.ndim != 2 or a.shape[1] != d:
            raise InputError(f"{path}: {name} has shape {a.shape}, expected (tokens, {d})")
        if not np.isfinite(a).all():
            raise InputError(f"{path}: {name} holds NaN or Inf")
        if s is not None and a.shape[0] != s:
            raise InputError(f"{path}: {name} has {a.shape[0]} tokens, other layers {s}")
        s = a.shape[0]
        x[i] = a[None]
    keep = np.ones((1, s), bool)
    if "keep" in data.files:
        k = np.asarray(data["keep"])
        if k.shape != (s,):
            raise InputError(f"{path}: keep has shape {k.shape}, expected ({s},)")
        keep = k.astype(bool)[None]
    rope: dict[int, tuple[np.ndarray, np.ndarray] | None] = dict.fromkeys(layers)
    if m.family == "llama":
        rot = getattr(getattr(m.model, "model", None), "rotary_emb", None)
        if rot is None:
            raise UserError("--input on a Llama model needs a Hugging Face source (for its RoPE tables)")
        with torch.no_grad():
            cos, sin = rot(torch.zeros(1, s, d), torch.arange(s)[None])
        tables = (cos[0].double().numpy(), sin[0].double().numpy())
        rope = dict.fromkeys(layers, tables)
    return RunInputs(x, rope, keep)


def errors(out: np.ndarray, ref: np.ndarray, keep: np.ndarray) -> dict[str, float]:
    """Float-vs-float comparison over valid tokens (see the module docstring)."""
    o, r = out[keep], ref[keep]
    diff = np.abs(o - r)
    cos = (o * r).sum(-1) / (np.linalg.norm(o, axis=-1) * np.linalg.norm(r, axis=-1) + 1e-300)
    return {"max_abs_error": float(diff.max()), "max_rel_error": float(diff.max() / max(np.abs(r).max(), 1e-300)),
            "cosine": float(cos.mean())}


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
    from vckattn.hw.design.manifest import check_bundle

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

    bundle = load_bundle(bundle_path)
    present = [int(e["index"]) for e in bundle.manifest["layers"]]
    chosen = present if layers is None else sorted(set(layers))
    bad = [i for i in chosen if i not in present]
    if bad:
        raise UserError(f"{bundle_path}: --layers: no layer(s) {bad} in the bundle "
                        f"(it has {present[0]}..{present[-1]})")
    return bundle, chosen, source_model(bundle, checkpoint, progress, classifier)


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
    except InputError as exc:
        raise InputError(f"--reference: {exc}") from None
    # a reference that is not the source's kind of model: a bad input, as a --checkpoint that is not the source
    if ref.family != m.family or len(ref.layers) != len(m.layers) or ref.info["hidden_size"] != m.info["hidden_size"]:
        raise InputError(f"--reference {reference}: a {ref.family} model of {len(ref.layers)} layers, hidden "
                         f"{ref.info['hidden_size']}; the bundle's source is a {m.family} model of {len(m.layers)} "
                         f"layers, hidden {m.info['hidden_size']}")
    if classifier and ref.classifier is None:
        raise InputError(f"--reference {reference}: no classification head")
    return softmax_everywhere(ref)


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


__all__ = ["BACKEND_CHOICES", "RunInputs", "errors", "load_inputs", "npz_inputs", "precheck", "reference_model",
           "report_head", "source_checkpoint", "source_model"]

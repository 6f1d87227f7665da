"""The whole-model export check: is the bundle's model still the model?

The full description: ``docs/internals/host.md``, section ``host/export/model_check.py``.
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.host import scoring

from .fidelity import P_FORMAT_FLAG
from .sources import LoadedModel

#: the default threshold of the whole-model score (``vckattn export --min-model-fidelity``; README "Export"). It
#: separates tuned from untuned SwiftMax on MiniLM (embedding cosine on the 32 held-out sentences): untuned
#: constants keep 0.467-0.592 (the integer layers follow their float layers; the float SwiftMax model itself is not
#: the model), tuned per head with the main weights (README "Quick start") 0.9546, the online-softmax baseline
#: 0.9979
DEFAULT_MIN_MODEL_FIDELITY = 0.9
#: held-out inputs of the check
DEFAULT_CHECK_SAMPLES = 32
#: the seed of held-out synthetic inputs (the calibration's is 0)
HELD_OUT_SEED = 1
#: held-out data sets by kind
TEXT_CHECK_DATA = ("pydoc", "rotten-tomatoes")
IMAGE_CHECK_DATA = ("digits", "mnist5k", "synthetic")
#: short names of the metrics, for one-line messages and tables
METRIC_NAMES = {"accuracy": "accuracy kept", "agreement": "prediction agreement",
                "embedding_cosine": "embedding cosine", "token_cosine": "hidden-state cosine"}
METRICS = {"accuracy": "1 - the accuracy points lost against the softmax model on labeled inputs (1: as accurate)",
           "agreement": "agreement of the predicted class with the softmax model's",
           "embedding_cosine": "cosine of the mean-pooled last hidden states to the softmax model's",
           "token_cosine": "per-token cosine of the last hidden states to the softmax model's"}
#: the tuning recipe the refusal names (README "Quick start": per head, the paper's mean initialisation, main
#: weights at a tiny learning rate, tuned for the kernel's P format; `calibrate swiftmax` tunes on the committed
#: design's 8-bit scores by default) and the export that follows it (percentile scales for tuned constants)
TUNE_FLAGS = f"--per-head --init mean --epochs-per-stage 3 --main-lr 2e-5 {P_FORMAT_FLAG}"
EXPORT_TUNED_FLAGS = "--calib-method percentile --percentile 99.9"
#: the recipe for a classifier with labeled data (docs/accuracy.md, the sentiment classifier): the task objective,
#: per head, tuned for the kernel's P format, main weights at a tiny learning rate, 1,024 snippets, 3 epochs a stage
TASK_TUNE_FLAGS = (f"--objective task --per-head --init mean --epochs-per-stage 3 --main-lr 2e-5 {P_FORMAT_FLAG} "
                   "--train-samples 1024")


@dataclass
class CheckData:
    """Held-out inputs: the eval harness's :class:`~vckattn.host.eval.EvalData` and their description."""

    data: Any
    what: str
    task: str | None = None  # the labeled data set (``rotten-tomatoes``, ``digits``, ``mnist5k``); None: unlabeled


def metric_of(m: LoadedModel, data: Any = None) -> str:
    """The check's metric for this model and held-out ``data`` (module docstring)."""
    if m.classifier is not None:
        return "accuracy" if data is not None and getattr(data, "labels", None) is not None else "agreement"
    if m.family == "llama" or m.golden:
        return "token_cosine"
    return "embedding_cosine"


def check_data(m: LoadedModel, spec: str | None, calib_sentences: list[str], seq_len: int,
               n: int = DEFAULT_CHECK_SAMPLES) -> CheckData:
    """The held-out inputs of the check (module docstring). ``spec``: ``pydoc`` / ``rotten-tomatoes`` / a text file
    for text models, ``digits`` / ``mnist5k`` / ``synthetic`` for a ViT, None for the default; ``n`` inputs at
    most, text cut to ``seq_len`` tokens."""
    from vckattn.golden.errors import InputError, UserError
    from vckattn.host.textdata import EVAL_MAX_SENTENCES, eval_sentences

    if m.golden:
        sentences = eval_sentences(n)
        data = scoring.golden_data(m, sentences, seq_len, HELD_OUT_SEED)
        what = (f"{len(sentences)} held-out sentences as UTF-8 bytes" if m.model.embed is not None  # type: ignore
                else f"{len(sentences)} x {seq_len} N(0, 1) hidden states (seed {HELD_OUT_SEED})")
        return CheckData(data, what)
    if m.family == "vit":
        spec = spec or "synthetic"
        if spec not in IMAGE_CHECK_DATA:
            raise UserError(f"--check-data {spec}: a ViT is checked on images: {', '.join(IMAGE_CHECK_DATA)}")
        if spec == "synthetic":
            return CheckData(scoring.synthetic_images(m, n, HELD_OUT_SEED),
                             f"{n} uniform[-1, 1] images (seed {HELD_OUT_SEED})")
        data = scoring.image_data(m, spec, n, split="test")
        return CheckData(data, f"{len(data.labels)} {spec} test images", spec)  # type: ignore[arg-type]
    spec = spec or "pydoc"
    if spec in IMAGE_CHECK_DATA:
        raise UserError(f"--check-data {spec}: a text model is checked on text: pydoc, rotten-tomatoes or a file")
    calib = set(calib_sentences)
    pool_labels: list[int] | None = None
    if spec == "pydoc":
        pool, source = eval_sentences(EVAL_MAX_SENTENCES), "held-out reference-manual sentences"
    elif spec == "rotten-tomatoes":
        from vckattn.host import datasets

        test = datasets.rotten_tomatoes(0).test
        pool, source, pool_labels = list(test.x), "rotten-tomatoes test snippets", [int(y) for y in test.y]
    else:
        from vckattn.host.cli.common import read_sentences

        pool, source = read_sentences(Path(spec), "--check-data"), f"sentences of {spec}"
    kept = [j for j, s in enumerate(pool) if s not in calib][:n]
    sentences = [pool[j] for j in kept]
    if not sentences:
        raise InputError(f"--check-data {spec}: every sentence is also a calibration sentence; the check needs "
                         "held-out text")
    enc = m.tokenizer(sentences, padding=True, truncation=True, return_tensors="pt",
                      max_length=min(seq_len, int(m.info["max_seq_len"])))
    inputs = dict(enc) | ({"use_cache": False} if m.family == "llama" else {})
    labels = None if pool_labels is None else np.asarray([pool_labels[j] for j in kept], np.int64)
    data = scoring.EvalData(sentences, inputs, enc["attention_mask"].numpy().astype(bool), labels)
    return CheckData(data, f"{len(sentences)} {source}", spec if labels is not None else None)


def _outputs(m: LoadedModel, data: Any, metric: str) -> np.ndarray:

    if metric in ("agreement", "accuracy"):
        return scoring.embeddings(m, data, logits=True)
    if metric == "token_cosine":
        return scoring.token_states(m, data)
    return scoring.embeddings(m, data, logits=False)


def _score(out: np.ndarray, ref: np.ndarray, keep: np.ndarray, metric: str,
           labels: np.ndarray | None = None) -> tuple[float, float | None]:
    """(score, worst input's score or None) of ``out`` against the softmax model's ``ref`` (``labels``: the
    held-out inputs' classes, for the accuracy kept)."""

    if metric == "accuracy":
        assert labels is not None
        lost = float((ref.argmax(-1) == labels).mean()) - float((out.argmax(-1) == labels).mean())
        return 1.0 - max(0.0, lost), None
    if metric == "agreement":
        return float((out.argmax(-1) == ref.argmax(-1)).mean()), None
    if metric == "token_cosine":
        c = scoring.token_cosine(out, ref, keep)
    else:
        c = scoring.cosine_to(out, ref)
    return c["mean_cosine"], c["min_cosine"]


def engine_layer(layer: QuantAttentionLayer) -> QuantAttentionLayer:
    """``layer`` with the score width of the committed best design (:func:`vckattn.hw.design.manifest.default_manifest`;
    every committed design takes 8-bit scores): :func:`vckattn.golden.quant_attention.narrow_layer`, as ``run`` and
    ``eval`` make it; a layer without a calibration score maximum stays as it is."""
    from vckattn.golden.quant_attention import narrow_layer
    from vckattn.hw.design.manifest import default_manifest, load_manifest

    if layer.score_absmax is None:
        return layer
    return narrow_layer(layer, int(load_manifest(default_manifest()).data["engine"]["score_bits"]))


def model_fidelity(m: LoadedModel, layers: dict[int, QuantAttentionLayer],
                   swiftmax: dict[int, tuple[Any, Any]], check: CheckData, threshold: float,
                   reference: LoadedModel | None = None, reference_name: str | None = None,
                   p_max: dict[int, float] | None = None) -> dict:
    """The manifest's ``model_fidelity`` record: the whole model with ``layers`` integer (the golden integer
    attention) against the softmax model (``reference``, default a copy of ``m`` with softmax everywhere) on
    ``check``'s held-out inputs; ``swiftmax`` (layer -> β, γ) gives the float SwiftMax model's score too, saturating
    at ``p_max`` (layer -> the top of its P format) in the layers tuned for their P format. ``m`` is left with those
    SwiftMax constants in its float layers."""

    data = check.data
    metric = metric_of(m, data)
    labels = data.labels if metric == "accuracy" else None
    ref_m = reference if reference is not None else scoring.softmax_everywhere(copy.deepcopy(m))
    ref = _outputs(ref_m, data, metric)
    with scoring.stages_on(m, "attention", list(layers), scoring.golden_runner(layers, data.keep), {}):
        out = _outputs(m, data, metric)
    score, worst = _score(out, ref, data.keep, metric, labels)
    float_sm = float_out = None
    if swiftmax:
        scoring.set_swiftmax(m, swiftmax, p_max)
        float_out = _outputs(m, data, metric)
        float_sm = _score(float_out, ref, data.keep, metric, labels)[0]
    rec = {"metric": metric, "score": score, "min": worst, "float_swiftmax": float_sm, "threshold": float(threshold),
           "samples": int(data.keep.shape[0]), "data": check.what, "layers": sorted(int(i) for i in layers),
           "reference": reference_name or "the source checkpoint with softmax in every layer"}
    if labels is not None:
        def acc(o: np.ndarray) -> float:
            return float((o.argmax(-1) == labels).mean())

        rec["accuracy"] = {"softmax": acc(ref), "bundle": acc(out),
                           "float_swiftmax": None if float_out is None else acc(float_out),
                           "agreement": float((out.argmax(-1) == ref.argmax(-1)).mean())}
    return rec


def _cmd(*parts: str) -> str:
    return " ".join(shlex.quote(str(p)) if not str(p).startswith("--") else str(p) for p in parts)


def fix_command(checkpoint: str, out: str, data: str, tuned: bool, float_low: bool, has_swiftmax: bool,
                percentile_used: bool, base: str | None = None, unsaturated: bool = False,
                task: str | None = None) -> str:
    """The exact command(s) that fix a low whole-model score: tune β/γ (the float SwiftMax model is not the model;
    or ``unsaturated``: tuned β/γ not tuned for the kernel's P format, whose float model the integer path cannot
    follow), or percentile activation scales (the integer path loses it). ``checkpoint``, ``out``, ``data``: the
    user's checkpoint, --out and calibration data (for `calibrate --data`); ``base``: the original of a tuned
    checkpoint; ``unsaturated`` names the P format as the reason (every recipe tunes for it,
    :data:`~.fidelity.P_FORMAT_FLAG`); ``task``: a
    classifier checked on this labeled data set is tuned on it with the task objective (:data:`TASK_TUNE_FLAGS`)."""
    export_tuned = "{tune}/model"
    if has_swiftmax and (float_low or (tuned and unsaturated)):
        src = base if (tuned and base) else checkpoint
        tune = f"{out}.tune"
        flags = TASK_TUNE_FLAGS if task else TUNE_FLAGS  # both tune for the P format
        first = _cmd("vckattn", "calibrate", "swiftmax", src, "--data", task or data, "--out", tune) + f" {flags}"
        then = _cmd("vckattn", "export", export_tuned.format(tune=tune), "--out", out, "--overwrite") + \
            f" {EXPORT_TUNED_FLAGS}"
        why = ("the float SwiftMax model already loses it: tune β/γ" if not tuned else
               "the tuned float SwiftMax model still loses it: tune again with the main weights" if float_low else
               "the integer path loses it: the tuned β/γ were not tuned for the kernel's 8-bit P format (rows' P "
               "outgrow it): tune again for that format")
        return f"{why}: `{first}` then `{then}`"
    if not percentile_used:
        return ("the integer path loses it: export with percentile activation scales: `"
                + _cmd("vckattn", "export", checkpoint, "--out", out, "--overwrite") + f" {EXPORT_TUNED_FLAGS}`")
    return ("the integer path loses it even with percentile scales: calibrate on more text like the model's inputs "
            "(--calib FILE)")


def model_problem(fid: dict, fix: str) -> str | None:
    """One line saying the whole-model score is below its threshold, with ``fix``; None when it passes."""
    if fid["score"] >= fid["threshold"]:
        return None
    n = len(fid["layers"])
    layers = f"the whole model with its {n} integer attention layer{'s' if n != 1 else ''}"
    a = fid.get("accuracy")
    if a is not None:
        sm = "" if a["float_swiftmax"] is None else f", the float SwiftMax model {a['float_swiftmax']:.3f}"
        return (f"{layers} has accuracy {a['bundle']:.3f} on {fid['data']} against the softmax model's "
                f"{a['softmax']:.3f}{sm}: accuracy kept {fid['score']:.3f}, below {fid['threshold']:g}: {fix}")
    sm = "" if fid["float_swiftmax"] is None else f"; the float SwiftMax model scores {fid['float_swiftmax']:.3f}"
    return (f"{layers} scores {fid['score']:.3f} against the softmax model ({METRIC_NAMES[fid['metric']]}) on "
            f"{fid['data']}{sm}; below {fid['threshold']:g}: {fix}")


__all__ = ["DEFAULT_CHECK_SAMPLES", "DEFAULT_MIN_MODEL_FIDELITY", "IMAGE_CHECK_DATA", "METRICS", "METRIC_NAMES",
           "TASK_TUNE_FLAGS", "TEXT_CHECK_DATA", "CheckData", "check_data", "engine_layer", "fix_command", "metric_of",
           "model_fidelity", "model_problem"]

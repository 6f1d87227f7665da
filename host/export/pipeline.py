"""The export pipeline: sources -> capture -> (per layer) constants + quantize -> writer."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.errors import InputError
from vckattn.golden.quant_attention import score_absmax
from vckattn.host.progress import bars_on
from vckattn.host.textdata import check_tokenizer

from .capture import Captured, capture_activations
from .common import (
    DEFAULT_BATCH,
    DEFAULT_CALIB_SENTENCES,
    DEFAULT_MAX_SENTENCES,
    DEFAULT_PERCENTILE,
    DEFAULT_SEQ_LEN,
    DEFAULT_SWIFTMAX_INIT,
    ExportError,
    LowFidelityError,
)
from .constants import SWIFTMAX_INITS, bhyt_registers, bhyt_scales, swiftmax_beta_gamma
from .fidelity import DEFAULT_MIN_FIDELITY, fidelity_problem, layer_fidelity
from .model_check import (
    DEFAULT_CHECK_SAMPLES,
    DEFAULT_MIN_MODEL_FIDELITY,
    CheckData,
    engine_layer,
    fix_command,
    model_fidelity,
    model_problem,
)
from .model_check import check_data as check_data_of
from .quantize import activation_scales, build_layer
from .sources import LoadedModel, Source, load_model, resolve_checkpoint
from .sublayer import rope_contents, sublayer_contents
from .writer import ExportedLayer, build_manifest, layer_contents, text_sha256, write


def calibrate_layer(m: LoadedModel, i: int, cap: Captured, normalizer: str, method: str,
                    percentile: float, swiftmax_init: str = DEFAULT_SWIFTMAX_INIT, per_head: bool = True,
                    min_fidelity: float = DEFAULT_MIN_FIDELITY) -> ExportedLayer:
    """Layer ``i`` through the per-layer steps: SwiftMax β/γ per head (checkpoint or calibration), int8 scales
    and P format (a checkpoint layer tuned for its P format keeps that format: its ``p_max``), the integer layer,
    BHyT site constants for BHyT layers, the rest of the sublayer (:mod:`.sublayer`), and the fidelity check of the
    integer layer against its float layer (:mod:`.fidelity`)."""
    ly = m.layers[i]
    beta = gamma = None
    source = None
    if normalizer == "swiftmax":
        beta, gamma, source = swiftmax_beta_gamma(m, i, cap, swiftmax_init, per_head)
    b_, g_ = (0.0, 1.0) if beta is None else (beta, gamma)
    sat = ly.swiftmax_p_max if normalizer == "swiftmax" and source == "checkpoint" else None
    scales, p_max = activation_scales(m, i, cap, normalizer, method, percentile, b_, g_, sat)
    layer = build_layer(ly, scales, normalizer, b_, g_, p_max)
    layer.causal = m.family == "llama"  # as the bundle's reader builds it (writer.to_quant_layer)
    layer.score_absmax = max((score_absmax(layer, x.astype(np.float64), b.keep, rope)
                              for x, rope, b in zip(cap.x[i], cap.rope[i], cap.batches, strict=True)), default=0)
    b_scales = None if ly.bhyt is None else bhyt_scales(m, i, cap, method, percentile)
    bhyt, bhyt_gamma = (None, None) if ly.bhyt is None else bhyt_registers(m, i, cap, scales["s_x"], method,
                                                                           percentile, b_scales)
    sub, sub_tensors, _ = sublayer_contents(m, i, cap, layer, normalizer, b_, g_, sat, method, percentile, b_scales)
    # checked as the committed designs compute it: 8-bit scores (engine_layer), as the whole-model check and `run`
    fid = layer_fidelity(m, i, cap, engine_layer(layer), normalizer, b_, g_, min_fidelity, sat)
    return ExportedLayer(layer, beta, gamma, source, bhyt, bhyt_gamma, fid, sat, sub, sub_tensors)


def bundle_contents(m: LoadedModel, source: Source, sentences: list[str], normalizer: str, chosen: set[int],
                    n_export: int, method: str, percentile: float, seq_len: int, batch_size: int, progress: bool,
                    data: str, calib_sha256: str | None, swiftmax_init: str = DEFAULT_SWIFTMAX_INIT,
                    per_head: bool = True, min_fidelity: float = DEFAULT_MIN_FIDELITY,
                    allow_low_fidelity: bool = False, check: ModelCheck | None = None,
                    images: np.ndarray | None = None) -> tuple[dict, dict[str, np.ndarray], dict[str, dict]]:
    """Capture, calibrate every exported layer, check the whole model (``check``, :mod:`.model_check`) and build
    the manifest, tensors and tensor metadata of the bundle. A layer that fails the per-layer check, or a whole
    model below its threshold, stops the export (:class:`LowFidelityError`, one line) unless
    ``allow_low_fidelity``; then the manifest's ``warnings`` record it. ``calib_sha256``: the calibration data's
    hash (None for a ViT or a golden stack without an embedding, which read no text); ``images``: a ViT's
    calibration images (N, H, W) in [0, 1] (None: seeded uniform pixel tensors)."""
    from tqdm import tqdm

    from vckattn.host.progress import bar_disable

    cap = capture_activations(m, sentences, seq_len, batch_size, data, progress, n_export, images)
    entries, tensors, meta = [], {}, {}
    sources: dict[str, list[int]] = {"checkpoint": [], "calibration": []}
    warnings: list[str] = []
    exported: dict[int, ExportedLayer] = {}
    for i in tqdm(range(n_export), desc="export layers", unit="layer", disable=bar_disable(progress),
                  file=sys.stderr):
        norm_i = normalizer if i in chosen else "softmax"
        try:
            ex = calibrate_layer(m, i, cap, norm_i, method, percentile, swiftmax_init, per_head, min_fidelity)
        except ValueError as exc:
            if isinstance(exc, ExportError):
                raise
            raise ExportError(f"layer {i}: {exc}") from None
        assert ex.fidelity is not None
        problem = fidelity_problem(i, ex.fidelity, norm_i, ex.beta_source == "checkpoint",
                                   None if check is None else check.tune_command, swiftmax_init, method,
                                   percentile if method == "percentile" else None, ex.p_max is not None)
        if problem is not None:
            if not allow_low_fidelity:
                raise LowFidelityError(f"refusing to write the bundle: {problem} (or pass --allow-low-fidelity to "
                                       "write it anyway, with the warning recorded)")
            warnings.append(problem)
        if ex.beta_source:
            sources[ex.beta_source].append(i)
        exported[i] = ex
        entry, t, mt = layer_contents(i, ex)
        entries.append(entry)
        tensors |= t
        meta |= mt
    if any((e.get("sublayer") or {}).get("kind") == "decoder" for e in entries):  # one RoPE table pair per model
        t, mt = rope_contents(m)
        tensors |= t
        meta |= mt
    model_fid = None
    if check is not None:
        model_fid, problem = check.run(m, exported, method == "percentile" and percentile <= 99.9)
        if problem is not None:
            if not allow_low_fidelity:
                raise LowFidelityError(f"refusing to write the bundle: {problem} (or pass --allow-low-fidelity to "
                                       "write it anyway, with the warning recorded)")
            warnings.append(problem)
    data = cap.data
    if sources["checkpoint"] or sources["calibration"]:
        data += "; SwiftMax beta/gamma: " + ", ".join(
            f"{what} for layers {idx}" for what, idx in (
                ("from the checkpoint", sources["checkpoint"]),
                (f"initialised from calibration ({SWIFTMAX_INITS[swiftmax_init]}, "
                 f"{'per head' if per_head else 'per layer'})", sources["calibration"]))
            if idx)
    calibration = {"method": method, "percentile": percentile if method == "percentile" else None,
                   "samples": cap.samples, "tokens": cap.tokens, "data": data, "data_sha256": calib_sha256}
    manifest = build_manifest(m, source, entries, n_export, normalizer, calibration)
    if model_fid is not None:
        manifest["model_fidelity"] = model_fid
    if warnings:
        manifest["warnings"] = warnings
    return manifest, tensors, meta


@dataclass
class ModelCheck:
    """The whole-model check of an export (:mod:`.model_check`): held-out data, threshold, the softmax model to
    compare with, and what the refusal's fix names (the user's checkpoint, --out and calibration data)."""

    data: CheckData
    threshold: float
    checkpoint: str
    out: str
    calib_data: str
    reference: LoadedModel | None = None
    reference_name: str | None = None
    base: str | None = None  # the original of a tuned checkpoint

    @property
    def tune_command(self) -> str:
        """The tuning fix, for the per-layer check's advice to calibration-initialised SwiftMax layers."""
        task = self.data.task if getattr(self.data.data, "labels", None) is not None else None
        return fix_command(self.checkpoint, self.out, self.calib_data, False, True, True, False, self.base,
                           task=task)

    def run(self, m: LoadedModel, layers: dict[int, ExportedLayer], percentile_used: bool) -> tuple[dict,
                                                                                                     str | None]:
        """The ``model_fidelity`` record and the problem line (None: it passes)."""
        swiftmax = {i: ([float(b) for b in np.atleast_1d(ex.beta)], [float(g) for g in np.atleast_1d(ex.gamma)])
                    for i, ex in layers.items() if ex.beta is not None}
        p_max = {i: float(ex.p_max) for i, ex in layers.items() if ex.p_max is not None}
        fid = model_fidelity(m, {i: engine_layer(ex.layer) for i, ex in layers.items()}, swiftmax, self.data,
                             self.threshold, self.reference, self.reference_name, p_max)
        tuned = any(ex.beta_source == "checkpoint" for ex in layers.values())
        unsaturated = any(ex.beta_source == "checkpoint" and ex.p_max is None for ex in layers.values())
        low = fid["float_swiftmax"] is not None and fid["float_swiftmax"] < self.threshold
        fix = fix_command(self.checkpoint, self.out, self.calib_data, tuned, low, bool(swiftmax), percentile_used,
                          self.base, unsaturated, self.data.task if fid["metric"] == "accuracy" else None)
        if fid["metric"] == "agreement":  # a classifier on unlabeled inputs: its task's labels may say otherwise
            labeled = "digits (or mnist5k)" if m.family == "vit" else "rotten-tomatoes"
            fix += (f"; a classifier of a labeled task is better checked by the accuracy it keeps on that task's test "
                    f"inputs: --check-data {labeled}")
        return fid, model_problem(fid, fix)


def check_layers(layers: list[int] | None, n: int) -> None:
    """A usage error (status 2, as `run --layers` gives it) unless ``layers`` (None: all) are indices of a model
    with ``n`` layers."""
    from vckattn.golden.errors import UserError

    if layers is None:
        return
    if not layers:
        raise UserError("no layers selected (empty layer list)")
    bad = sorted({int(i) for i in layers if not 0 <= int(i) < n})
    if bad:
        raise UserError(f"--layers: layer indices {bad} out of range: the model has {n} layers (0..{n - 1})")


def export_checkpoint(
    checkpoint: Path | str,
    out: Path | str,
    calib_sentences: list[str] | None = None,
    normalizer: str = "swiftmax",
    layers: list[int] | None = None,
    method: str = "minmax",
    percentile: float = DEFAULT_PERCENTILE,
    seq_len: int = DEFAULT_SEQ_LEN,
    progress: bool = True,
    overwrite: bool = False,
    *,
    max_layers: int | None = None,
    calib_name: str | None = None,
    calib_sha256: str | None = None,
    swiftmax_init: str = DEFAULT_SWIFTMAX_INIT,
    batch_size: int = DEFAULT_BATCH,
    max_sentences: int = DEFAULT_MAX_SENTENCES,
    swiftmax_per_head: bool = True,
    min_fidelity: float = DEFAULT_MIN_FIDELITY,
    allow_low_fidelity: bool = False,
    min_model_fidelity: float = DEFAULT_MIN_MODEL_FIDELITY,
    check_data: str | None = None,
    check_samples: int = DEFAULT_CHECK_SAMPLES,
    reference: Path | str | None = None,
    calib_images: str | None = None,
    calib_path: str | None = None,
    builds: list[str] | None = None,
    check_hardware: bool = True,
) -> Path:
    """Export ``checkpoint`` to the bundle ``out``; returns the bundle's path.

    Args:
        checkpoint: model folder, .safetensors, .gguf, golden .pt, or ``minilm`` / ``smollm2``.
        calib_sentences: calibration text (default: 32 real sentences from CPython's documentation).
        normalizer: ``swiftmax`` or ``softmax`` for the selected ``layers`` (default: all); the other
            layers get the online-softmax baseline.
        method: ``minmax`` (max-abs) or ``percentile`` (``percentile`` of ``|v|``) activation scales.
        seq_len: calibration sentences are truncated to this many tokens.
        max_layers: export only the first N layers (all by default); the manifest's model.num_layers is then N.
        swiftmax_init: β, γ of SwiftMax layers without them in the checkpoint: ``mean`` (the SwiftMax recipe:
            β = mean z_max, γ = mean Σexp(z − z_max); meant to be tuned afterwards) or ``max`` (β = the largest
            z_max seen, γ = mean Σexp: P ≤ 1/γ on the calibration data; usable without tuning), from each
            head's rows (``swiftmax_per_head``, the default) or the layer's.
        min_fidelity: the per-layer check's threshold (:mod:`.fidelity`): every layer's and head's mean cosine
            against its float layer.
        min_model_fidelity: the whole-model check's threshold (:mod:`.model_check`): the bundle's model (every
            exported attention layer integer) against the softmax model on held-out inputs (``check_data``:
            ``pydoc`` / ``rotten-tomatoes`` / a text file; ``digits`` / ``mnist5k`` / ``synthetic`` for a ViT;
            ``check_samples`` of them), compared with ``reference`` (the original checkpoint of a tuned one; by
            default the one named by a tuned folder's ``vckattn_tuning.json``, else the source with softmax).
            Below either threshold the export fails (:class:`LowFidelityError`, naming the fix as exact commands
            with ``checkpoint``, ``out`` and ``calib_path``) unless ``allow_low_fidelity``, which writes the bundle
            with the warnings recorded.
        calib_name, calib_sha256: description and hash of the calibration source (e.g. the --calib file);
            default: a description of the sentences and the sha256 of their newline-joined UTF-8 text.
        calib_images: a ViT's calibration images: ``digits`` or ``mnist5k`` (their train split); default seeded
            uniform[−1, 1] pixel tensors. A ViT reads no calibration text.
        builds: the hardware builds (bitstream manifest files or names) the bundle must run on, one at least
            (default: the committed ones, ``bitstreams/*.json``); a model whose attention shape none of them runs is
            refused (ExportError) before it is loaded. ``check_hardware`` False skips that check: for bundles of
            the golden integer model only (tiny test models), which no backend takes.
        batch_size, max_sentences: calibration batching; at most ``max_sentences`` sentences are used.
    """
    from vckattn.golden.errors import UserError

    t0 = time.perf_counter()
    if normalizer not in ("swiftmax", "softmax"):
        raise ExportError(f"normalizer must be swiftmax or softmax, got {normalizer!r}")
    if swiftmax_init not in SWIFTMAX_INITS:
        raise ExportError(f"swiftmax_init must be one of {', '.join(SWIFTMAX_INITS)}, got {swiftmax_init!r}")
    if method not in ("minmax", "percentile"):
        raise ExportError(f"calibration method must be minmax or percentile, got {method!r}")
    if method == "percentile" and not 50.0 < percentile <= 100.0:
        raise ExportError(f"percentile must be in (50, 100], got {percentile}")
    if seq_len < 1 or batch_size < 1 or max_sentences < 1 or check_samples < 1:
        raise ExportError("seq_len, batch_size, max_sentences and check_samples must be >= 1")
    if calib_images is not None and calib_images not in IMAGE_SETS:
        raise ExportError(f"calibration images must be one of {', '.join(IMAGE_SETS)}, got {calib_images!r}")
    out = Path(out)
    if not overwrite and (out.is_file() or (out.is_dir() and any(out.iterdir()))):
        raise ExportError(f"{out} exists; pass --overwrite to replace a bundle there")
    text_given = calib_sentences is not None
    if calib_sentences is None:
        from vckattn.host.textdata import real_sentences

        calib_sentences = real_sentences(DEFAULT_CALIB_SENTENCES)
        calib_name = calib_name or (f"real_sentences({len(calib_sentences)}) (CPython reference manual, "
                                    "vckattn.host.textdata)")
    sentences = [s for s in (t.strip() for t in calib_sentences) if s]
    if not sentences:
        raise ExportError("no calibration sentences (empty calibration text)")
    total_sentences = len(sentences)
    sentences = sentences[:max_sentences]
    if max_layers is not None and max_layers < 1:
        raise ExportError(f"max_layers must be >= 1, got {max_layers}")
    source = resolve_checkpoint(checkpoint)
    if source.num_layers is not None:  # fail before the (slow) model load when config.json says enough
        check_layers(layers, source.num_layers)
    manifests = _manifests(builds)
    early = source_shape(source)
    if early is not None and check_hardware:
        check_runs(early, normalizer, layers, source.num_layers, seq_len, manifests)
    if early is not None and early["family"] == "vit" and text_given and calib_path is not None:
        raise UserError("--calib: a ViT calibrates on images, not text: give --calib digits or mnist5k (their "
                        "train split), or no --calib (seeded uniform pixel tensors)")
    if calib_images is not None and early is not None and early["family"] != "vit":
        raise UserError(f"--calib {calib_images}: images calibrate a ViT; this is a {early['family']} model (give "
                        "a text file)")
    ref_model, ref_name, base = _reference(source, reference, progress)
    m = load_model(source, bars_on(progress), classifier=True)
    n_model = len(m.layers)
    check_layers(layers, n_model)
    chosen = set(range(n_model)) if layers is None else {int(i) for i in layers}
    if check_hardware:
        check_runs(m.info, normalizer, layers, n_model, seq_len, manifests)
    if m.tokenizer is not None:
        check_tokenizer(m.tokenizer, calib_name or "the calibration text", sentences)
    n_export = n_model if max_layers is None else min(max_layers, n_model)
    data = calib_name or f"{total_sentences} calibration sentences"
    if len(sentences) < total_sentences:
        data += f" (first {len(sentences)} of {total_sentences})"
    images = None
    reads_text = True
    if m.family == "vit" and not m.golden:
        reads_text = False
        if calib_images is not None:
            images = _train_images(calib_images, len(sentences))
            data = f"{len(images)} {calib_images} train images; ViT takes no text"
        else:
            data = f"synthetic images: {len(sentences)} uniform[-1, 1] pixel tensors (seed 0); ViT takes no text"
    elif m.golden and (m.model.embed is None):  # type: ignore[union-attr]
        reads_text = False
        data = f"synthetic hidden states: {len(sentences)} x {seq_len} N(0, 1) (seed 0); golden stack without embedding"
    elif m.golden:
        data += " as UTF-8 bytes (golden stack byte embedding)"
    digest = (calib_sha256 or text_sha256(sentences)) if reads_text else None
    if ref_model is not None:
        _check_reference(ref_model, m, str(reference or base))
    check_spec = check_data if check_data is not None else (calib_images if images is not None else None)
    model_check = ModelCheck(check_data_of(m, check_spec, sentences, seq_len, check_samples), min_model_fidelity,
                             str(checkpoint), str(out), _advice_data(m, calib_path, calib_images), ref_model,
                             ref_name, base)
    t_load = time.perf_counter()
    manifest, tensors, meta = bundle_contents(m, source, sentences, normalizer, chosen, n_export, method, percentile,
                                              seq_len, batch_size, progress, data, digest, swiftmax_init,
                                              swiftmax_per_head, min_fidelity, allow_low_fidelity, model_check,
                                              images)
    path = write(out, manifest, tensors, meta, overwrite=overwrite)
    if progress:
        entries, cal, fid = manifest["layers"], manifest["calibration"], manifest["model_fidelity"]
        sm_layers = [e["index"] for e in entries if e["swiftmax"] is not None]
        shown = str(checkpoint) if str(checkpoint) in ("minilm", "smollm2") else source.path.name
        print(f"exported {len(entries)} of {n_model} layers of {shown} ({m.family}, norm {m.norm}) "
              f"-> {path}: SwiftMax layers {sm_layers or 'none'}; calibration {cal['samples']} samples, "
              f"{cal['tokens']} tokens, {method}; whole model {fid['metric'].replace('_', ' ')} {fid['score']:.4f} "
              f"(threshold {fid['threshold']:g}) on {fid['data']}; load {t_load - t0:.1f} s, calibrate + check + "
              f"write {time.perf_counter() - t_load:.1f} s", file=sys.stderr)
    return path


#: named image sets a ViT export calibrates on (their train split) and is checked on (their test split)
IMAGE_SETS = ("digits", "mnist5k")
#: a tuned model folder written by ``vckattn calibrate swiftmax`` names the model it was tuned from here
TUNING_FILE = "vckattn_tuning.json"


def source_shape(source: Source) -> dict | None:
    """The attention shape from config.json (``family``, ``head_dim``, ``num_heads``, ``max_seq_len`` of a ViT) before
    the model is loaded, or None when there is no config.json to read (GGUF, golden checkpoints)."""
    from .sources import read_config_json

    if source.kind not in ("hf-folder", "safetensors"):
        return None
    cfg = read_config_json(source.path if source.kind == "hf-folder" else source.path.parent)
    try:
        heads = int(cfg["num_attention_heads"])
        head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
        seq = ((int(cfg["image_size"]) // int(cfg["patch_size"])) ** 2 + 1) if cfg.get("model_type") == "vit" \
            else None
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None  # the model load reports what is wrong with config.json
    return {"family": cfg.get("model_type"), "head_dim": head_dim, "num_heads": heads, "max_seq_len": seq}


def _manifests(builds: list[str] | None) -> list[Any] | None:
    """The builds an export must run on: ``builds`` loaded (ManifestError for a bad one), else None (the committed
    ones)."""
    from vckattn.hw.design.manifest import load_manifest

    return [load_manifest(b) for b in builds] if builds else None


def check_runs(info: dict, normalizer: str, layers: list[int] | None, n_layers: int | None, seq_len: int,
               manifests: list[Any] | None = None) -> None:
    """ExportError unless one of ``manifests`` (default: the committed hardware builds, ``bitstreams/*.json``) runs
    this model's attention layers: head size, heads, the normalizers the export gives them, and the sequence length
    (a ViT's patches + [CLS], else the calibration's ``seq_len``)."""
    from vckattn.hw.design.manifest import runnable_problem

    norms = {normalizer}
    if layers is not None and n_layers is not None and len(set(layers)) < n_layers:
        norms.add("softmax")
    seq = int(info["max_seq_len"]) if info.get("family") == "vit" and info.get("max_seq_len") else seq_len
    problem = runnable_problem(int(info["head_dim"]), int(info["num_heads"]), norms, seq, manifests)
    if problem is not None:
        raise ExportError(f"refusing to export: {problem}")


def _train_images(name: str, n: int) -> np.ndarray:
    from vckattn.host import datasets

    return np.asarray(getattr(datasets, name)(0).train.x[:n], np.float32)


def _reference(source: Source, reference: Path | str | None, progress: bool
               ) -> tuple[LoadedModel | None, str | None, str | None]:
    """The softmax model of the whole-model check: ``reference`` loaded, else the model a tuned folder was tuned from
    (its ``vckattn_tuning.json``, or the ``swiftmax.json`` of ``vckattn calibrate swiftmax`` beside it), else None
    (the source with softmax everywhere). Returns (model, description, the base checkpoint for the advice)."""
    from vckattn.host import scoring

    base = tuned_base(source) if reference is None else None
    name = reference if reference is not None else base
    if name is None:
        return None, None, None
    try:
        ref = load_model(resolve_checkpoint(name), bars_on(progress), classifier=True)
    except InputError as exc:
        what = "--reference" if reference is not None else f"the model {source.path} was tuned from"
        raise ExportError(f"{what}: {exc}") from None
    desc = f"{name} with softmax in every layer" + ("" if reference is not None else
                                                     f" (the model {source.path.name} was tuned from)")
    return scoring.softmax_everywhere(ref), desc, str(name)


def tuned_base(source: Source) -> str | None:
    """The model a Hugging Face folder was tuned from by ``vckattn calibrate swiftmax`` (its ``vckattn_tuning.json``,
    or the run's ``swiftmax.json`` beside it for folders tuned before that file existed), or None."""
    import json

    if source.kind != "hf-folder":
        return None
    for f, keys in ((source.path / TUNING_FILE, ("base",)),
                    (source.path.parent / "swiftmax.json", ("config", "model"))):
        try:
            d = json.loads(f.read_text(encoding="utf-8"))
            for k in keys:
                d = d[k]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(d, str) and d:
            return d
    return None


def _check_reference(ref: LoadedModel, m: LoadedModel, name: str) -> None:
    if ref.family != m.family or len(ref.layers) != len(m.layers) or ref.info["hidden_size"] != m.info["hidden_size"]:
        raise ExportError(f"reference {name}: a {ref.family} model of {len(ref.layers)} layers, hidden "
                          f"{ref.info['hidden_size']}; the checkpoint is a {m.family} model of {len(m.layers)} layers, "
                          f"hidden {m.info['hidden_size']}")
    if (m.classifier is None) != (ref.classifier is None):
        raise ExportError(f"reference {name}: {'no' if ref.classifier is None else 'a'} classification head, unlike "
                          "the checkpoint")


def _advice_data(m: LoadedModel, calib_path: str | None, calib_images: str | None) -> str:
    """The ``--data`` of the tuning command a refusal names: the user's calibration file or image set, else pydoc
    (text) or digits (images)."""
    if m.family == "vit":
        return calib_images or "digits"
    return calib_path or "pydoc"


__all__ = ["IMAGE_SETS", "TUNING_FILE", "LowFidelityError", "ModelCheck", "bundle_contents", "calibrate_layer",
           "check_layers", "check_runs", "export_checkpoint", "source_shape", "tuned_base"]

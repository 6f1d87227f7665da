"""The export pipeline: sources -> capture -> (per layer) constants + quantize -> writer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from vckattn.golden.quant_attention import score_absmax

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
from .constants import SWIFTMAX_INITS, bhyt_registers, swiftmax_beta_gamma
from .fidelity import DEFAULT_MIN_FIDELITY, fidelity_problem, layer_fidelity
from .quantize import activation_scales, build_layer
from .sources import LoadedModel, Source, load_model, resolve_checkpoint
from .writer import ExportedLayer, build_manifest, layer_contents, text_sha256, write


def calibrate_layer(m: LoadedModel, i: int, cap: Captured, normalizer: str, method: str,
                    percentile: float, swiftmax_init: str = DEFAULT_SWIFTMAX_INIT, per_head: bool = True,
                    min_fidelity: float = DEFAULT_MIN_FIDELITY) -> ExportedLayer:
    """Layer ``i`` through the per-layer steps: SwiftMax β/γ per head (checkpoint or calibration), int8 scales
    and P format (a checkpoint layer tuned for its P format keeps that format: its ``p_max``), the integer layer,
    BHyT site constants for BHyT layers, and the fidelity check of the integer layer against its float layer
    (:mod:`.fidelity`)."""
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
    bhyt, bhyt_gamma = (None, None) if ly.bhyt is None else bhyt_registers(m, i, cap, scales["s_x"], method,
                                                                           percentile)
    fid = layer_fidelity(m, i, cap, layer, normalizer, b_, g_, min_fidelity, sat)
    return ExportedLayer(layer, beta, gamma, source, bhyt, bhyt_gamma, fid, sat)


def bundle_contents(m: LoadedModel, source: Source, sentences: list[str], normalizer: str, chosen: set[int],
                    n_export: int, method: str, percentile: float, seq_len: int, batch_size: int, progress: bool,
                    data: str, calib_sha256: str | None, swiftmax_init: str = DEFAULT_SWIFTMAX_INIT,
                    per_head: bool = True, min_fidelity: float = DEFAULT_MIN_FIDELITY,
                    allow_low_fidelity: bool = False) -> tuple[dict, dict[str, np.ndarray], dict[str, dict]]:
    """Capture, calibrate every exported layer and build the manifest, tensors and tensor metadata of the bundle.
    A layer that fails the fidelity check stops the export (ExportError, one line) unless ``allow_low_fidelity``;
    then the manifest's ``warnings`` record it."""
    from tqdm import tqdm

    cap = capture_activations(m, sentences, seq_len, batch_size, data, progress, n_export)
    entries, tensors, meta = [], {}, {}
    sources: dict[str, list[int]] = {"checkpoint": [], "calibration": []}
    warnings: list[str] = []
    for i in tqdm(range(n_export), desc="export layers", unit="layer", disable=not progress, file=sys.stderr):
        norm_i = normalizer if i in chosen else "softmax"
        try:
            ex = calibrate_layer(m, i, cap, norm_i, method, percentile, swiftmax_init, per_head, min_fidelity)
        except ValueError as exc:
            if isinstance(exc, ExportError):
                raise
            raise ExportError(f"layer {i}: {exc}") from None
        assert ex.fidelity is not None
        problem = fidelity_problem(i, ex.fidelity, norm_i, ex.beta_source == "checkpoint", ex.p_max is not None)
        if problem is not None:
            if not allow_low_fidelity:
                raise LowFidelityError(f"refusing to write the bundle: {problem} (or pass --allow-low-fidelity to "
                                       "write it anyway, with the warning recorded)")
            warnings.append(problem)
        if ex.beta_source:
            sources[ex.beta_source].append(i)
        entry, t, mt = layer_contents(i, ex)
        entries.append(entry)
        tensors |= t
        meta |= mt
    data = cap.data
    if sources["checkpoint"] or sources["calibration"]:
        data += "; SwiftMax beta/gamma: " + ", ".join(
            f"{what} for layers {idx}" for what, idx in (
                ("from the checkpoint", sources["checkpoint"]),
                (f"initialised from calibration ({SWIFTMAX_INITS[swiftmax_init]}, "
                 f"{'per head' if per_head else 'per layer'})", sources["calibration"]))
            if idx)
    calibration = {"method": method, "percentile": percentile if method == "percentile" else None,
                   "samples": cap.samples, "tokens": cap.tokens, "data": data,
                   "data_sha256": calib_sha256 or text_sha256(sentences)}
    manifest = build_manifest(m, source, entries, n_export, normalizer, calibration)
    if warnings:
        manifest["warnings"] = warnings
    return manifest, tensors, meta


def check_layers(layers: list[int] | None, n: int) -> None:
    """ExportError unless ``layers`` (None: all) are indices of a model with ``n`` layers."""
    if layers is None:
        return
    if not layers:
        raise ExportError("no layers selected (empty layer list)")
    bad = sorted({int(i) for i in layers if not 0 <= int(i) < n})
    if bad:
        raise ExportError(f"layer indices {bad} out of range: the model has {n} layers (0..{n - 1})")


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
) -> Path:
    """Export ``checkpoint`` to the bundle ``out``; returns the bundle's path.

    Args:
        checkpoint: model folder, .safetensors, .gguf, golden .pt, or ``minilm`` / ``smollm2``.
        calib_sentences: calibration text (default: 32 real sentences from CPython's documentation).
        normalizer: ``swiftmax`` or ``softmax`` for the selected ``layers`` (default: all); the other
            layers get the online-softmax baseline.
        method: ``minmax`` (max-abs) or ``percentile`` (``percentile`` of |v|) activation scales.
        seq_len: calibration sentences are truncated to this many tokens.
        max_layers: export only the first N layers (all by default); the manifest's model.num_layers is then N.
        swiftmax_init: β, γ of SwiftMax layers without them in the checkpoint: ``mean`` (the SwiftMax recipe:
            β = mean z_max, γ = mean Σexp(z − z_max); meant to be tuned afterwards) or ``max`` (β = the largest
            z_max seen, γ = mean Σexp: P ≤ 1/γ on the calibration data; usable without tuning), from each
            head's rows (``swiftmax_per_head``, the default) or the layer's.
        min_fidelity: the fidelity check's threshold (:mod:`.fidelity`): every layer's and head's mean cosine
            against its float layer; below it the export fails (:class:`LowFidelityError`) unless
            ``allow_low_fidelity``, which writes the bundle with the warnings recorded.
        calib_name, calib_sha256: description and hash of the calibration source (e.g. the --calib file);
            default: a description of the sentences and the sha256 of their newline-joined UTF-8 text.
        batch_size, max_sentences: calibration batching; at most ``max_sentences`` sentences are used.
    """
    t0 = time.perf_counter()
    if normalizer not in ("swiftmax", "softmax"):
        raise ExportError(f"normalizer must be swiftmax or softmax, got {normalizer!r}")
    if swiftmax_init not in SWIFTMAX_INITS:
        raise ExportError(f"swiftmax_init must be one of {', '.join(SWIFTMAX_INITS)}, got {swiftmax_init!r}")
    if method not in ("minmax", "percentile"):
        raise ExportError(f"calibration method must be minmax or percentile, got {method!r}")
    if method == "percentile" and not 50.0 < percentile <= 100.0:
        raise ExportError(f"percentile must be in (50, 100], got {percentile}")
    if seq_len < 1 or batch_size < 1 or max_sentences < 1:
        raise ExportError("seq_len, batch_size and max_sentences must be >= 1")
    out = Path(out)
    if not overwrite and (out.is_file() or (out.is_dir() and any(out.iterdir()))):
        raise ExportError(f"{out} exists; pass --overwrite to replace a bundle there")
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
    m = load_model(source, progress)
    n_model = len(m.layers)
    check_layers(layers, n_model)
    n_export = n_model if max_layers is None else min(max_layers, n_model)
    chosen = set(range(n_model)) if layers is None else {int(i) for i in layers}
    data = calib_name or f"{total_sentences} calibration sentences"
    if len(sentences) < total_sentences:
        data += f" (first {len(sentences)} of {total_sentences})"
    if m.family == "vit" and not m.golden:
        data = f"synthetic images: {len(sentences)} uniform[-1, 1] pixel tensors (seed 0); ViT takes no text"
    elif m.golden and (m.model.embed is None):  # type: ignore[union-attr]
        data = f"synthetic hidden states: {len(sentences)} x {seq_len} N(0, 1) (seed 0); golden stack without embedding"
    elif m.golden:
        data += " as UTF-8 bytes (golden stack byte embedding)"
    t_load = time.perf_counter()
    manifest, tensors, meta = bundle_contents(m, source, sentences, normalizer, chosen, n_export, method, percentile,
                                              seq_len, batch_size, progress, data, calib_sha256, swiftmax_init,
                                              swiftmax_per_head, min_fidelity, allow_low_fidelity)
    path = write(out, manifest, tensors, meta, overwrite=overwrite)
    if progress:
        entries, cal = manifest["layers"], manifest["calibration"]
        sm_layers = [e["index"] for e in entries if e["swiftmax"] is not None]
        shown = str(checkpoint) if str(checkpoint) in ("minilm", "smollm2") else source.path.name
        print(f"exported {len(entries)} of {n_model} layers of {shown} ({m.family}, norm {m.norm}) "
              f"-> {path}: SwiftMax layers {sm_layers or 'none'}; calibration {cal['samples']} samples, "
              f"{cal['tokens']} tokens, {method}; load {t_load - t0:.1f} s, calibrate + write "
              f"{time.perf_counter() - t_load:.1f} s", file=sys.stderr)
    return path


__all__ = ["LowFidelityError", "bundle_contents", "calibrate_layer", "check_layers", "export_checkpoint"]

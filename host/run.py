"""``vckattn run``: real inputs through the attention block on a backend, checked two ways.

The full description: ``docs/internals/host.md``, section ``host/run.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vckattn.golden.errors import InputError, UserError
from vckattn.host.run_common import BACKEND_CHOICES, _npz_inputs, _source_model, _text_inputs, errors, open_device

if TYPE_CHECKING:
    from vckattn.host.export.sources import LoadedModel













def _float_reference(m: LoadedModel, i: int, entry: dict, x: np.ndarray, keep: np.ndarray,
                     rope: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    from vckattn.host.export import layer_output

    sm = entry.get("swiftmax")
    norm, beta, gamma = ("swiftmax", sm["beta"], sm["gamma"]) if sm else ("softmax", 0.0, 1.0)
    return layer_output(m, i, x, keep, rope, norm, beta, gamma, sm.get("p_max") if sm else None)






def run(bundle_path: Path, backend: str, *, text: str | None = None, input_npz: Path | None = None,
        layers: list[int] | None = None, manifest_path: Path | str | None = None, checkpoint: Path | None = None,
        save: Path | None = None, device_options: dict | None = None, progress: bool = True,
        arrays: dict | None = None, truncate: bool = False) -> dict:
    """Run the bundle's attention layers on ``backend`` and return the JSON report (module docstring).

    ``arrays``: if given, filled per layer index with ``{"out", "ref", "keep"}`` (device output, float
    golden, valid tokens) for plots."""
    from tqdm import tqdm

    from vckattn.host.attention_layer import run_layer
    from vckattn.host.backends import check_backend
    from vckattn.host.bundle import load_bundle
    from vckattn.host.export import to_quant_layer
    from vckattn.host.progress import bar_disable
    from vckattn.hw.design.manifest import check_bundle, default_manifest, load_manifest

    if backend not in BACKEND_CHOICES:
        raise UserError(f"unknown backend {backend!r}; choose one of {', '.join(BACKEND_CHOICES)}")
    if (text is None) == (input_npz is None):
        raise UserError("give exactly one of --text and --input")
    bundle = load_bundle(bundle_path)
    present = [int(e["index"]) for e in bundle.manifest["layers"]]
    layers = present if layers is None else layers
    bad = [i for i in layers if i not in present]
    if bad:
        raise UserError(f"{bundle_path}: no layer(s) {bad} in the bundle (it has {present[0]}..{present[-1]})")
    manifest = load_manifest(manifest_path or default_manifest(backend))
    check_bundle(manifest, bundle, layers)  # head size, formats, normalizers: before any model is loaded
    check_backend(backend, manifest, bundle, layers)
    if text is not None:
        if bundle.manifest["model"]["family"] == "vit":
            raise UserError(f"{bundle_path} is a ViT bundle: a ViT takes images, not --text; give --input X.npz "
                            "(layer{i}_input arrays, the format --save writes), or score it on images with "
                            "`vckattn eval --task digits` (or mnist5k)")
        check_text_length(bundle, checkpoint, text, truncate)
    if "sublayer" in manifest.data:  # a sublayer build: whole sublayers, X in, Y out
        from vckattn.host.run_sublayer import run_sublayers

        return run_sublayers(bundle_path, backend, bundle, manifest, layers, text=text, input_npz=input_npz,
                             checkpoint=checkpoint, save=save, device_options=device_options, progress=progress,
                             arrays=arrays)

    m = _source_model(bundle, checkpoint, progress)
    inputs = _text_inputs(m, text, layers, progress) if text is not None else _npz_inputs(m, input_npz, layers)
    seq = int(inputs.keep.shape[1])
    device = open_device(backend, manifest, **(device_options or {}))
    device.check_bundle(bundle, layers, seq)
    report: dict[str, Any] = {"backend": backend, "device": device.where, "manifest": manifest.name,
                              "bundle": str(bundle_path), "tokens": int(inputs.keep.sum()), "tiles": 0, "layers": [],
                              "model_fidelity": bundle.manifest.get("model_fidelity"),
                              "calibration": {k: bundle.manifest["calibration"][k] for k in ("method", "percentile")}}
    saved: dict[str, np.ndarray] = {}
    keep = inputs.keep
    device_s, elements = 0.0, 0
    from vckattn.golden.quant_attention import narrow_layer
    from vckattn.golden.stages import attention_int

    with device:
        for i in layers:
            ql = to_quant_layer(bundle, i)
            if manifest.data.get("engine"):  # the engine's narrow scores: golden's layer of the same width
                try:
                    ql = narrow_layer(ql, int(manifest.data["engine"]["score_bits"]))
                except ValueError as exc:
                    raise UserError(f"{bundle_path}: layer {i}: {exc}") from None
            entry = next(e for e in bundle.manifest["layers"] if int(e["index"]) == i)
            x = inputs.x[i]
            bar = tqdm(total=None, desc=f"layer {i} on {backend}", unit="tile", disable=bar_disable(progress),
                       file=sys.stderr, leave=False)
            try:
                lr = run_layer(device, ql, x, keep, inputs.rope[i], index=i, progress=bar)
            finally:
                bar.close()
            _, ints = attention_int(ql, x, keep, rope=inputs.rope[i])
            ref = _float_reference(m, i, entry, x, keep, inputs.rope[i])
            row = {"layer": i, "bit_exact": bool(np.array_equal(lr.y, ints["y"]) and np.array_equal(lr.a, _heads_of(
                ints["a"], ql))), **errors(lr.out, ref, keep),
                   "normalizer": "swiftmax" if entry.get("swiftmax") else "softmax",
                   "beta_source": (entry.get("swiftmax") or {}).get("source"),
                   "threshold": (entry.get("fidelity") or {}).get("threshold")}
            if backend == "rtl":
                row["cycles"] = lr.cycles
            row |= {"tiles": lr.tiles, "device_seconds": lr.device_seconds, "host_seconds": lr.host_seconds}
            report["layers"].append(row)
            report["tiles"] += lr.tiles
            device_s += lr.device_seconds
            elements += ql.n_heads * int(keep.sum(axis=1) @ keep.sum(axis=1))
            if arrays is not None:
                arrays[i] = {"out": lr.out, "ref": ref, "keep": keep}
            if save is not None:
                saved[f"layer{i}_input"] = (lr.x[keep] * ql.s_x).astype(np.float32)
                saved[f"layer{i}_output"] = lr.out[keep].astype(np.float32)
    report["elements_per_second"] = elements / device_s if device_s > 0 else None
    if save is not None:
        from vckattn.host.output import atomic_path

        save.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(save) as tmp, tmp.open("wb") as fh:
            np.savez(fh, **saved)
    return report


def early_tokenizer(bundle: Any, checkpoint: str | Path | None) -> Any:
    """The source checkpoint's tokenizer without loading the model (a Hugging Face folder or a safetensors file with
    its folder), or None when it cannot be had cheaply (the length is then checked after loading)."""
    from vckattn.host import export

    try:
        source = export.resolve_checkpoint(checkpoint if checkpoint is not None else bundle.manifest["source"]["path"])
    except InputError:
        return None
    folder = source.path if source.kind == "hf-folder" else source.path.parent if source.kind == "safetensors" \
        else None
    if folder is None:
        return None
    try:
        from vckattn.host.checkpoints import load_tokenizer

        return load_tokenizer(folder)
    except Exception:  # noqa: BLE001 - no cheap tokenizer: the model load reports the problem
        return None


def check_text_length(bundle: Any, checkpoint: str | Path | None, text: str, truncate: bool) -> None:
    """Refuse a text longer than the model's positions (``max_seq_len``) unless ``truncate`` (then say so on
    stderr), before the model is loaded."""

    limit = int(bundle.manifest["model"]["max_seq_len"])
    tok = early_tokenizer(bundle, checkpoint)
    if tok is None:
        return
    n = len(tok(text, truncation=False)["input_ids"])
    if n <= limit:
        return
    if not truncate:
        raise InputError(f"--text is {n} tokens, longer than the model's {limit} positions; shorten it or pass "
                         f"--truncate to use its first {limit} tokens")
    print(f"vckattn: note: --text is {n} tokens; --truncate keeps the first {limit}", file=sys.stderr)


def _heads_of(a_flat: np.ndarray, layer: Any) -> np.ndarray:
    """(B, S, H·hd) → (B, H, S, hd)."""
    b, s, _ = a_flat.shape
    return a_flat.reshape(b, s, layer.n_heads, -1).transpose(0, 2, 1, 3)


def print_report(report: dict) -> None:
    if report.get("scope") == "sublayer":
        from vckattn.host.run_sublayer import print_sublayer_report

        print_sublayer_report(report)
        from vckattn.host.cli.common import make_console

        make_console().print(model_fidelity_line(report.get("model_fidelity")))
        return
    from rich.table import Table

    from vckattn.host.cli.common import make_console

    t = Table(title=f"vckattn run — backend {report['backend']} ({report['device']})")
    for col in ("layer", "bit-exact vs integer golden", "max |err| vs float", "max rel err", "cosine", "tiles"):
        t.add_column(col, justify="right")
    has_cycles = any("cycles" in r for r in report["layers"])
    if has_cycles:
        t.add_column("cycles", justify="right")
    for r in report["layers"]:
        cells = [str(r["layer"]), "[green]yes[/]" if r["bit_exact"] else "[red]NO[/]", f"{r['max_abs_error']:.4g}",
                 f"{r['max_rel_error']:.3g}", f"{r['cosine']:.5f}", str(r["tiles"])]
        if has_cycles:
            cells.append(str(r.get("cycles")))
        t.add_row(*cells)
    c = make_console()
    c.print(t)
    eps = report["elements_per_second"]
    c.print(f"{report['tokens']} tokens, {report['tiles']} tiles; "
            f"{'n/a' if eps is None else f'{eps:.3g}'} score elements/s of device time")
    c.print(model_fidelity_line(report.get("model_fidelity")))


def model_fidelity_line(fid: dict | None) -> str:
    """One line on the bundle's whole-model export check (what ``run`` and ``inspect`` print)."""
    from rich.markup import escape

    from vckattn.host.export.model_check import METRIC_NAMES

    if fid is None:
        return "whole model: not recorded (a bundle exported before the whole-model check; re-export to measure it)"
    ok = fid["score"] >= fid["threshold"]
    sm = "" if fid["float_swiftmax"] is None else f"; float SwiftMax {fid['float_swiftmax']:.4f}"
    a = fid.get("accuracy")
    if a is not None:  # a classifier checked on labeled inputs: the accuracies behind the score
        sm += f" (accuracy {a['bundle']:.4f}, softmax model {a['softmax']:.4f})"
    verdict = "passes" if ok else "[red]BELOW[/] (written with --allow-low-fidelity)"
    return (f"whole model (export check): {METRIC_NAMES[fid['metric']]} {fid['score']:.4f} to the softmax model "
            f"on {escape(fid['data'])}{sm}; threshold {fid['threshold']:g}: {verdict}")


__all__ = ["check_text_length", "early_tokenizer", "model_fidelity_line", "print_report", "run"]

"""``vckattn run``: real inputs through the attention block on a backend, checked two ways.

The full description: ``docs/internals/host.md``, section ``host/run.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vckattn.golden.errors import InputError, UserError
from vckattn.host.run_common import BACKEND_CHOICES, errors, npz_inputs, source_model

if TYPE_CHECKING:
    from vckattn.host.export.sources import LoadedModel


def bundle_family(bundle: Any) -> str:
    """The sublayer family of a bundle's layers: ``encoder`` (post-LN BERT/MiniLM) or ``decoder`` (a Llama converted
    to BHyT). UserError for any other model (a sublayer build cannot run it; an attention build runs its core)."""
    model = bundle.manifest["model"]
    if model["family"] == "bert":
        return "encoder"
    if model["family"] == "llama" and bundle.manifest.get("norm") == "bhyt":
        return "decoder"
    raise UserError(f"a sublayer build runs post-LN encoder (BERT/MiniLM) or BHyT decoder (Llama converted to BHyT) "
                    f"layers; this bundle is a {model['family']} model with {bundle.manifest.get('norm')} norms")


def _inputs(m: LoadedModel, family: str, text: str | None, input_npz: Path | None, layers: list[int],
            progress: bool) -> tuple[dict[int, np.ndarray], np.ndarray, dict[int, Any]]:
    """Per layer the stage list's float input ``(1, S, d)`` (the decoder's block input H; otherwise the attention
    input X), the keep mask ``(1, S)`` and the float RoPE tables (None without RoPE)."""
    from vckattn.host import export

    if text is not None:
        seq_len = int(m.info["max_seq_len"])
        cap = export.capture_activations(m, [text], seq_len, 1, "--text", progress, max(layers) + 1)
        src = cap.h if family == "decoder" else cap.x
        return ({i: src[i][0].astype(np.float64) for i in layers}, cap.batches[0].keep,
                {i: cap.rope[i][0] for i in layers})
    inp = npz_inputs(m, input_npz, layers)  # type: ignore[arg-type]
    return inp.x, inp.keep, inp.rope


def float_reference(m: LoadedModel, i: int, entry: dict, consts: Any, family: str, x: np.ndarray,
                    keep: np.ndarray, rope: Any) -> np.ndarray:
    """The checkpoint's float64 result of the family's stages on ``x`` (SwiftMax with the bundle's β/γ where the layer
    uses it): the attention core's output after W_O; the encoder's ``LN(X + Attn(X))``; the decoder's ``H +
    Attn(BHyT_A(H))``."""
    import copy

    import torch

    from vckattn.golden.sublayer import host_layernorm
    from vckattn.host.export import layer_output

    sm = entry.get("swiftmax")
    norm, beta, gamma = ("swiftmax", sm["beta"], sm["gamma"]) if sm else ("softmax", 0.0, 1.0)
    p_max = sm.get("p_max") if sm else None
    if family == "attention":
        return layer_output(m, i, x, keep, rope, norm, beta, gamma, p_max)
    if family == "encoder":
        y = layer_output(m, i, x, keep, rope, norm, beta, gamma, p_max)
        return host_layernorm(x + y, 1.0, consts.ln_weight, consts.ln_bias, consts.ln_eps)
    bhyt = getattr(m.layers[i].block_module, "bhyt", None)
    if bhyt is None:
        raise UserError(f"layer {i} of the source model has no BHyT norms (convert it to BHyT first)")
    with torch.no_grad():
        u, _ = copy.deepcopy(bhyt).double().attn_site(torch.from_numpy(x))
    return x + layer_output(m, i, u.numpy(), keep, rope, norm, beta, gamma, p_max)


def first_difference(device_trace: dict[str, np.ndarray], out: np.ndarray, golden_trace: dict[str, np.ndarray],
                     ref: np.ndarray) -> str | None:
    """The first stage tensor (in golden's order) the device produced differently from golden, ``out`` for the
    output, None when every one is equal."""
    for name, want in golden_trace.items():
        if name in device_trace and not np.array_equal(device_trace[name], want):
            return name
    return None if np.array_equal(out, ref) else "out"


def _constants(bundle: Any, bundle_path: Path, i: int, family: str, device: Any) -> Any:
    """Layer ``i``'s constants as the build runs them (its attention narrowed to the build's score width)."""
    from vckattn.golden.stages import attention_of
    from vckattn.host.backends.staged import sublayer_of
    from vckattn.host.export import to_quant_layer, to_sublayer

    consts = to_quant_layer(bundle, i) if family == "attention" else to_sublayer(bundle, i)
    try:
        return sublayer_of(consts, device.attention_layer(attention_of(consts)))
    except UserError as exc:
        raise UserError(f"{bundle_path}: layer {i}: {exc}") from None


def _device_tables(bundle: Any, i: int, family: str, rope: Any, seq: int, head_dim: int
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """The int16 RoPE tables ``(S, head_dim)`` the stages read: the decoder's from the bundle, a RoPE model's
    attention core's from its float tables (one sequence), None without RoPE."""
    from vckattn.golden.sublayer import rope_tables
    from vckattn.host.export import sublayer_rope

    if family == "decoder":
        return sublayer_rope(bundle, i, seq)
    if family == "encoder" or rope is None:
        return None
    c, s = rope_tables(rope, 1, seq, head_dim)
    return np.asarray(c).reshape(seq, head_dim), np.asarray(s).reshape(seq, head_dim)


def staged_layers(bundle: Any, bundle_path: Path, manifest: Any, device: Any, layers: list[int]
                  ) -> tuple[str, str, dict[int, Any]]:
    """The scope (``sublayer`` for a sublayer build, else ``attention``), the family of the stages run and each
    layer's constants as the build runs them. UserError for a model the sublayer build does not serve."""
    scope = "sublayer" if "sublayer" in manifest.data else "attention"
    family = bundle_family(bundle) if scope == "sublayer" else "attention"
    if scope == "sublayer" and family != device.family:
        raise UserError(f"{manifest.name} is a {device.family} sublayer build; {bundle_path} holds {family} layers "
                        f"(choose sublayer_small_{family})")
    return scope, family, {i: _constants(bundle, bundle_path, i, family, device) for i in layers}


def check_layers(device: Any, bundle: Any, consts: dict[int, Any], seq: int) -> None:
    """Refuse, before any layer runs, what the build cannot run: the engine's checks of the bundle, then each layer's
    stages at ``seq`` tokens."""
    device.engine.check_bundle(bundle, list(consts), seq)
    for c in consts.values():
        device.check(c, seq)


def run_on_device(device: Any, bundle: Any, i: int, consts: Any, x: np.ndarray, keep: np.ndarray, rope: Any
                  ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None, Any, np.ndarray]:
    """Layer ``i``'s stages on ``device`` from the float input ``x`` ``(B, S, d)`` and the float RoPE tables ``rope``:
    the quantized input, the int16 RoPE tables the stages read, the device's run and its output as float64."""
    from vckattn.golden.stages import attention_of, family_of, input_scale
    from vckattn.golden.sublayer import quantize_input

    family = family_of(consts)
    xi = quantize_input(x, input_scale(consts))
    tables = _device_tables(bundle, i, family, rope, x.shape[1], attention_of(consts).head_dim)
    r = device.run(consts, xi, keep, tables)
    return xi, tables, r, _output(consts, family, r.out)


def _output(consts: Any, family: str, out: np.ndarray) -> np.ndarray:
    """The family's integer output as float64: the attention core's ``y·s_a·s_wo``, the encoder's LayerNorm on the
    host after the residual, the decoder's ``H'·s_mid``."""
    from vckattn.golden.sublayer import host_layernorm

    if family == "attention":
        return out * (consts.s_a * consts.o_proj.s_w)
    if family == "encoder":
        return host_layernorm(out, consts.residual.s_out, consts.ln_weight, consts.ln_bias, consts.ln_eps)
    return out.astype(np.float64) * consts.residual.s_out


def run(bundle_path: Path, backend: str, *, text: str | None = None, input_npz: Path | None = None,
        layers: list[int] | None = None, manifest_path: Path | str | None = None, checkpoint: Path | None = None,
        save: Path | None = None, device_options: dict | None = None, progress: bool = True,
        arrays: dict | None = None, truncate: bool = False) -> dict:
    """Run the bundle's layers on ``backend`` through the build's stage list and return the JSON report (module
    docstring): a sublayer build runs whole sublayers of its family, an attention build the attention core, its
    stages beside the attention on the host.

    ``arrays``: if given, filled per layer index with ``{"out", "ref", "keep"}`` (device output, float
    golden, valid tokens) for plots."""
    from tqdm import tqdm

    from vckattn.golden.stages import attention_of, input_scale, sublayer_int
    from vckattn.host.backends import check_backend
    from vckattn.host.backends.staged import StagedDevice
    from vckattn.host.bundle import load_bundle
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
    device = StagedDevice(manifest, backend, **(device_options or {}))
    scope, family, consts = staged_layers(bundle, bundle_path, manifest, device, layers)
    m = source_model(bundle, checkpoint, progress)
    x_in, keep, rope_f = _inputs(m, family, text, input_npz, layers, progress)
    seq = int(keep.shape[1])
    check_layers(device, bundle, consts, seq)  # everything this build cannot run, before the first layer runs
    report: dict[str, Any] = {"backend": backend, "device": device.where, "manifest": manifest.name,
                              "bundle": str(bundle_path), "scope": scope, "family": family,
                              "tokens": int(keep.sum()), "tiles": 0, "layers": [],
                              "model_fidelity": bundle.manifest.get("model_fidelity"),
                              "calibration": {k: bundle.manifest["calibration"][k] for k in ("method", "percentile")}}
    saved: dict[str, np.ndarray] = {}
    attention_s, elements = 0.0, 0
    bar = tqdm(total=len(layers), desc=f"layers on {backend}", unit="layer", disable=bar_disable(progress),
               file=sys.stderr, leave=False)
    try:
        with device:
            for i in layers:
                c = consts[i]
                layer = attention_of(c)
                entry = next(e for e in bundle.manifest["layers"] if int(e["index"]) == i)
                x = x_in[i]
                xi, tables, r, out = run_on_device(device, bundle, i, c, x, keep, rope_f[i])
                ref, trace = sublayer_int(c, xi, keep, None if tables is None else
                                          (tables[0][None, None], tables[1][None, None]))
                diff = first_difference(r.trace, r.out, trace, ref)
                fref = float_reference(m, i, entry, c, family, x, keep, rope_f[i])
                tiles = int(device.engine.last_launch.cmds.n_tiles)
                row = {"layer": i, "bit_exact": diff is None, "first_difference": diff, **errors(out, fref, keep),
                       "normalizer": "swiftmax" if entry.get("swiftmax") else "softmax",
                       "beta_source": (entry.get("swiftmax") or {}).get("source"),
                       "threshold": (entry.get("fidelity") or {}).get("threshold"), "tiles": tiles,
                       "device_seconds": r.device_seconds, "host_seconds": r.host_total_seconds}
                if scope == "sublayer":
                    row |= {"registers": {u: {"words": sum(len(v) if isinstance(v, list) else 1 for v in vals.values()),
                                              "read_back": "exact"} for u, vals in r.registers.items()},
                            "stage_seconds": {k: round(v, 6) for k, v in r.seconds.items()},
                            "host_stage_seconds": {k: round(v, 6) for k, v in r.host_seconds.items()}}
                    if r.cycles:
                        row["cycles"] = r.cycles
                elif backend == "rtl":
                    row["cycles"] = r.cycles.get("attention")
                report["layers"].append(row)
                report["tiles"] += tiles
                attention_s += r.seconds.get("attention", 0.0)
                elements += layer.n_heads * int(keep.sum(axis=1) @ keep.sum(axis=1))
                if arrays is not None:
                    arrays[i] = {"out": out, "ref": fref, "keep": keep}
                if save is not None:
                    saved[f"layer{i}_input"] = (xi[keep] * input_scale(c)).astype(np.float32)
                    saved[f"layer{i}_output"] = out[keep].astype(np.float32)
                bar.update(1)
    finally:
        bar.close()
    report["elements_per_second"] = elements / attention_s if attention_s > 0 else None
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


def print_report(report: dict) -> None:
    from rich.table import Table

    from vckattn.host.cli.common import make_console

    what = "the attention core" if report["scope"] == "attention" else f"{report['family']} sublayers"
    t = Table(title=f"vckattn run — {what} on {report['backend']} ({report['manifest']})")
    for col in ("layer", "bit-exact vs integer golden", "max |err| vs float", "max rel err", "cosine", "tiles"):
        t.add_column(col, justify="right")
    has_cycles = any("cycles" in r for r in report["layers"])
    has_regs = any(r.get("registers") for r in report["layers"])
    if has_cycles:
        t.add_column("cycles", justify="right")
    if has_regs:
        t.add_column("registers read back", justify="right")
    for r in report["layers"]:
        exact = "[green]yes[/]" if r["bit_exact"] else f"[red]NO[/] (from {r['first_difference']})"
        cells = [str(r["layer"]), exact, f"{r['max_abs_error']:.4g}", f"{r['max_rel_error']:.3g}",
                 f"{r['cosine']:.5f}", str(r["tiles"])]
        if has_cycles:
            cyc = r.get("cycles")
            cells.append(", ".join(f"{k} {v}" for k, v in cyc.items()) if isinstance(cyc, dict) else str(cyc))
        if has_regs:
            cells.append(", ".join(f"{u} {v['words']}" for u, v in r["registers"].items()) + ": exact")
        t.add_row(*cells)
    c = make_console()
    c.print(t)
    eps = report["elements_per_second"]
    c.print(f"{report['tokens']} tokens, {report['tiles']} tiles; "
            f"{'n/a' if eps is None else f'{eps:.3g}'} score elements/s of the attention stage's device time; "
            f"device: {report['device']}")
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


__all__ = ["bundle_family", "check_layers", "check_text_length", "early_tokenizer", "first_difference",
           "float_reference", "model_fidelity_line", "print_report", "run", "run_on_device", "staged_layers"]

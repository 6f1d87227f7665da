"""``vckattn run`` on a sublayer build: whole attention sublayers of a bundle on a backend, X in, Y out.

The full description: ``docs/internals/host.md``, section ``host/run_sublayer.py``.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vckattn.golden.errors import UserError


def _family(bundle: Any) -> str:
    model = bundle.manifest["model"]
    if model["family"] == "bert":
        return "encoder"
    if model["family"] == "llama" and bundle.manifest.get("norm") == "bhyt":
        return "decoder"
    raise UserError(f"a sublayer build runs post-LN encoder (BERT/MiniLM) or BHyT decoder (Llama converted to BHyT) "
                    f"layers; this bundle is a {model['family']} model with {bundle.manifest.get('norm')} norms")


def _inputs(m: Any, family: str, text: str | None, input_npz: Path | None, layers: list[int], progress: bool
            ) -> tuple[dict[int, np.ndarray], np.ndarray, dict[int, Any]]:
    """Per layer the sublayer's float input ``(1, S, d)``, the keep mask ``(1, S)`` and the float RoPE tables."""
    from vckattn.host import export
    from vckattn.host.run_common import _npz_inputs

    if text is not None:
        seq_len = int(m.info["max_seq_len"])
        cap = export.capture_activations(m, [text], seq_len, 1, "--text", progress, max(layers) + 1)
        src = cap.h if family == "decoder" else cap.x
        return ({i: src[i][0].astype(np.float64) for i in layers}, cap.batches[0].keep,
                {i: cap.rope[i][0] for i in layers})
    inp = _npz_inputs(m, input_npz, layers)
    return inp.x, inp.keep, inp.rope


def _float_reference(m: Any, i: int, entry: dict, sub: Any, family: str, x: np.ndarray, keep: np.ndarray,
                     rope: Any) -> np.ndarray:
    """The checkpoint's float64 sublayer on ``x`` (module docstring)."""
    from vckattn.golden.sublayer import host_layernorm
    from vckattn.host.export import layer_output

    sm = entry.get("swiftmax")
    norm, beta, gamma = ("swiftmax", sm["beta"], sm["gamma"]) if sm else ("softmax", 0.0, 1.0)
    p_max = sm.get("p_max") if sm else None
    if family == "encoder":
        y = layer_output(m, i, x, keep, rope, norm, beta, gamma, p_max)
        return host_layernorm(x + y, 1.0, sub.ln_weight, sub.ln_bias, sub.ln_eps)
    bhyt = getattr(m.layers[i].block_module, "bhyt", None)
    if bhyt is None:
        raise UserError(f"layer {i} of the source model has no BHyT norms (convert it to BHyT first)")
    with torch.no_grad():
        u, _ = copy.deepcopy(bhyt).double().attn_site(torch.from_numpy(x))
    return x + layer_output(m, i, u.numpy(), keep, rope, norm, beta, gamma, p_max)


def _first_difference(run: Any, ref: np.ndarray, trace: dict[str, np.ndarray], family: str) -> str | None:
    stages = ("stat", "u", "q", "k", "v", "a", "y") if family == "decoder" else ("q", "k", "v", "a", "y")
    for name in stages:
        if not np.array_equal(run.trace[name], trace[name]):
            return name
    return None if np.array_equal(run.out, ref) else "out"


def run_sublayers(bundle_path: Path, backend: str, bundle: Any, manifest: Any, layers: list[int], *,
                  text: str | None, input_npz: Path | None, checkpoint: Path | None, save: Path | None,
                  device_options: dict | None, progress: bool, arrays: dict | None) -> dict:
    """The sublayer path of :func:`vckattn.host.run.run` (module docstring); ``bundle`` loaded, ``layers`` checked
    to be in it."""
    from tqdm import tqdm

    from vckattn.golden.stages import sublayer_int
    from vckattn.golden.sublayer import host_layernorm, quantize_input
    from vckattn.host.backends.sublayer import SublayerDevice, sublayer_of
    from vckattn.host.export import sublayer_rope, to_sublayer
    from vckattn.host.progress import bar_disable
    from vckattn.host.run_common import _source_model, errors

    family = _family(bundle)
    device = SublayerDevice(manifest, backend, **(device_options or {}))
    if family != device.family:
        raise UserError(f"{manifest.name} is a {device.family} sublayer build; {bundle_path} holds {family} layers "
                        f"(choose sublayer_small_{family})")
    subs = {i: to_sublayer(bundle, i) for i in layers}
    m = _source_model(bundle, checkpoint, progress)
    x_in, keep, rope_f = _inputs(m, family, text, input_npz, layers, progress)
    seq = int(keep.shape[1])
    for i in layers:  # everything this build cannot run is refused before the first layer runs
        subs[i] = sublayer_of(subs[i], device.attention_layer(subs[i].attn))
        device.check(subs[i], seq)
    report: dict[str, Any] = {"backend": backend, "device": device.where, "manifest": manifest.name,
                              "bundle": str(bundle_path), "scope": "sublayer", "family": family,
                              "tokens": int(keep.sum()), "layers": [],
                              "model_fidelity": bundle.manifest.get("model_fidelity"),
                              "calibration": {k: bundle.manifest["calibration"][k] for k in ("method", "percentile")}}
    saved: dict[str, np.ndarray] = {}
    bar = tqdm(total=len(layers), desc=f"sublayers on {backend}", unit="layer", disable=bar_disable(progress),
               file=sys.stderr, leave=False)
    try:
        with device:
            for i in layers:
                sub = subs[i]
                entry = next(e for e in bundle.manifest["layers"] if int(e["index"]) == i)
                x = x_in[i]
                if family == "encoder":
                    xi = quantize_input(x, sub.attn.s_x)
                    ref, trace = sublayer_int(sub, xi, keep)
                    rope = None
                else:
                    xi = quantize_input(x, sub.s_h)
                    c, s = sublayer_rope(bundle, i, seq)
                    ref, trace = sublayer_int(sub, xi, keep, (c[None, None], s[None, None]))
                    rope = (c, s)
                run = device.run(sub, xi, keep, rope)
                diff = _first_difference(run, ref, trace, family)
                if family == "encoder":
                    out = host_layernorm(run.out, sub.residual.s_out, sub.ln_weight, sub.ln_bias, sub.ln_eps)
                else:
                    out = run.out.astype(np.float64) * sub.residual.s_out
                fref = _float_reference(m, i, entry, sub, family, x, keep, rope_f[i])
                row = {"layer": i, "bit_exact": diff is None, "first_difference": diff, **errors(out, fref, keep),
                       "normalizer": "swiftmax" if entry.get("swiftmax") else "softmax",
                       "beta_source": (entry.get("swiftmax") or {}).get("source"),
                       "registers": {u: {"words": sum(len(v) if isinstance(v, list) else 1 for v in vals.values()),
                                         "read_back": "exact"} for u, vals in run.registers.items()},
                       "stage_seconds": {k: round(v, 6) for k, v in run.seconds.items()},
                       "device_seconds": float(sum(run.seconds.values())),
                       "host_stage_seconds": {k: round(v, 6) for k, v in run.host_seconds.items()}}
                if run.cycles:
                    row["cycles"] = run.cycles
                report["layers"].append(row)
                if arrays is not None:
                    arrays[i] = {"out": out, "ref": fref, "keep": keep}
                if save is not None:
                    saved[f"layer{i}_input"] = x[keep].astype(np.float32)
                    saved[f"layer{i}_output"] = out[keep].astype(np.float32)
                bar.update(1)
    finally:
        bar.close()
    if save is not None:
        from vckattn.host.output import atomic_path

        save.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(save) as tmp, tmp.open("wb") as fh:
            np.savez(fh, **saved)
    return report


def print_sublayer_report(report: dict) -> None:
    from rich.table import Table

    from vckattn.host.cli.common import make_console

    t = Table(title=f"vckattn run — {report['family']} sublayers on {report['backend']} ({report['manifest']})")
    for col in ("layer", "bit-exact vs integer golden", "max |err| vs float", "max rel err", "cosine",
                "registers read back"):
        t.add_column(col, justify="right")
    for r in report["layers"]:
        regs = ", ".join(f"{u} {v['words']}" for u, v in r["registers"].items())
        exact = "[green]yes[/]" if r["bit_exact"] else f"[red]NO[/] (from {r['first_difference']})"
        t.add_row(str(r["layer"]), exact, f"{r['max_abs_error']:.4g}", f"{r['max_rel_error']:.3g}",
                  f"{r['cosine']:.5f}", f"{regs}: exact")
    c = make_console()
    c.print(t)
    c.print(f"{report['tokens']} tokens; device: {report['device']}")


__all__ = ["print_sublayer_report", "run_sublayers"]

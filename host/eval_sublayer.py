"""``vckattn eval`` on a sublayer build: a whole model with its attention SUBLAYERS on a backend, scored end to end.

The full description: ``docs/internals/host.md``, section ``host/eval_sublayer.py``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from vckattn.golden.errors import UserError

#: ``runner(i, x, keep, rope) -> out``: layer ``i``'s sublayer output (float64, ``(B, S, d)``) for its float input
SublayerRunner = Callable[[int, np.ndarray, np.ndarray, Any], np.ndarray]


def _table(r: Any) -> np.ndarray:
    return r.detach().double().cpu().numpy()


@contextlib.contextmanager
def sublayer_on(m: Any, family: str, layers: list[int], runner: SublayerRunner | None,
                record: dict[int, dict]) -> Iterator[None]:
    """Within the block, each layer of ``layers`` has its sublayer output from ``runner`` (module docstring);
    ``record[i]`` gets ``{"x", "rope", "out"}`` (the sublayer's float64 input, RoPE tables, output). With
    ``runner`` None the model runs unchanged and is only recorded."""
    if m.golden:
        raise UserError("vckattn eval on a sublayer build scores Hugging Face checkpoints (a BERT/MiniLM encoder or "
                        "a Llama converted to BHyT); this bundle's source is a golden stack")
    handles = []

    def pre(i: int) -> Callable[..., None]:
        def hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
            x = args[0] if args else kwargs["hidden_states"]
            rope = kwargs.get("position_embeddings")
            record[i] = {"x": x.detach().double().cpu().numpy(),
                         "rope": None if rope is None else tuple(_table(r) for r in rope)}
        return hook

    def post(i: int) -> Callable[..., Any]:
        def hook(_mod: nn.Module, _args: tuple, out: Any) -> Any:
            rec = record[i]
            first = out[0] if isinstance(out, tuple) else out
            if runner is None:
                val = first.detach().double().cpu().numpy()
                rec["out"] = val if family == "encoder" else rec["x"] + val
                return None
            rec["out"] = runner(i, rec["x"], rec.get("keep"), rec["rope"])
            new = rec["out"] if family == "encoder" else rec["out"] - rec["x"]
            t = torch.from_numpy(new).to(dtype=first.dtype, device=first.device)
            return (t, *out[1:]) if isinstance(out, tuple) else t
        return hook

    try:
        for i in layers:
            ly = m.layers[i]
            if family == "encoder":
                mod = ly.block_module.attention
                handles.append(mod.register_forward_pre_hook(pre(i), with_kwargs=True))
                handles.append(mod.register_forward_hook(post(i)))
            else:
                handles.append(ly.block_module.register_forward_pre_hook(pre(i), with_kwargs=True))
                handles.append(ly.attn_module.register_forward_hook(post(i)))
        yield
    finally:
        for h in handles:
            h.remove()


def evaluate_sublayers(bundle_path: Path, backend: str, manifest: Any, *, layers: list[int] | None,
                       checkpoint: Path | None, n_sentences: int, start_topic: int, max_tokens: int | None,
                       device_options: dict | None, progress: bool, task: str | None, reference: Path | str | None,
                       n_samples: int) -> dict:
    """The sublayer path of :func:`vckattn.host.eval.evaluate` (module docstring)."""
    from vckattn.golden.sublayer import host_layernorm, quantize_input
    from vckattn.host.backends.sublayer import SublayerDevice, sublayer_of
    from vckattn.host.export import sublayer_rope, to_sublayer
    from vckattn.host.run_common import errors, load_inputs, precheck, reference_model, report_head
    from vckattn.host.run_sublayer import _family, _float_reference
    from vckattn.host.scoring import (
        embeddings,
        end_to_end,
        held_out,
        set_swiftmax,
        swiftmax_constants,
        swiftmax_saturations,
        task_data,
    )

    t0 = time.perf_counter()
    max_tokens = precheck(bundle_path, layers, manifest, n_sentences if task is None else None, max_tokens, task,
                          backend)
    device = SublayerDevice(manifest, backend, **(device_options or {}))
    bundle, chosen, m = load_inputs(bundle_path, layers, checkpoint, progress, classifier=task is not None)
    family = _family(bundle)
    if family != device.family:
        raise UserError(f"{manifest.name} is a {device.family} sublayer build; {bundle_path} holds {family} layers "
                        f"(choose sublayer_small_{family})")
    data = held_out(m, n_sentences, start_topic, max_tokens) if task is None else task_data(m, task, n_samples,
                                                                                           max_tokens)
    keep = data.keep
    seq = int(keep.shape[1])
    subs = {}
    for i in chosen:  # refused before the model runs
        s = to_sublayer(bundle, i)
        subs[i] = sublayer_of(s, device.attention_layer(s.attn))
        device.check(subs[i], seq)
    if reference is None:
        from vckattn.host.export.pipeline import tuned_base
        from vckattn.host.run_common import source_checkpoint

        reference = tuned_base(source_checkpoint(bundle, checkpoint))
    ref_m = reference_model(m, reference, progress, task is not None)
    ref_rec: dict[int, dict] = {}
    with sublayer_on(ref_m, family, chosen, None, ref_rec):
        ref = embeddings(ref_m, data)

    stats: dict[int, dict] = {}

    def runner(i: int, x: np.ndarray, _keep: Any, _rope: Any) -> np.ndarray:
        sub = subs[i]
        if family == "encoder":
            run = device.run(sub, quantize_input(x, sub.attn.s_x), keep)
            out = host_layernorm(run.out, sub.residual.s_out, sub.ln_weight, sub.ln_bias, sub.ln_eps)
        else:
            run = device.run(sub, quantize_input(x, sub.s_h), keep, sublayer_rope(bundle, i, x.shape[1]))
            out = run.out.astype(np.float64) * sub.residual.s_out
        stats[i] = {"device_seconds": float(sum(run.seconds.values()))}
        return out

    dev_rec: dict[int, dict] = {}
    with device, sublayer_on(m, family, chosen, runner, dev_rec):
        dev = embeddings(m, data)
    sm = swiftmax_constants(bundle, chosen)
    sat = swiftmax_saturations(bundle, chosen)
    set_swiftmax(m, sm, sat)
    sm_rec: dict[int, dict] = {}
    with sublayer_on(m, family, chosen, None, sm_rec):
        swift = embeddings(m, data)

    per_layer = []
    for i in chosen:
        entry = next(e for e in bundle.manifest["layers"] if int(e["index"]) == i)
        rope = dev_rec[i]["rope"]
        f = _float_reference(m, i, entry, subs[i], family, dev_rec[i]["x"], keep,
                             None if rope is None else (rope[0], rope[1]))
        per_layer.append({"layer": i, "normalizer": "swiftmax" if i in sm else "softmax",
                          "backend_vs_float_layer": errors(dev_rec[i]["out"], f, keep),
                          "backend_vs_softmax_model": errors(dev_rec[i]["out"], ref_rec[i]["out"], keep),
                          "float_swiftmax_vs_softmax_model": errors(sm_rec[i]["out"], ref_rec[i]["out"], keep),
                          **stats[i]})
    return {**report_head(bundle_path, backend, device, manifest, bundle, checkpoint, reference, task, chosen, data,
                          start_topic, max_tokens),
            "scope": "sublayer", "family": family, "end_to_end": end_to_end(task, data, ref, swift, dev),
            "per_layer": per_layer, "device_seconds": float(sum(s["device_seconds"] for s in stats.values())),
            "seconds": time.perf_counter() - t0}


__all__ = ["evaluate_sublayers", "sublayer_on"]

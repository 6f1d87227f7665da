"""Step 4b of the export: the rest of each layer's attention sublayer, and golden's sublayer back from a bundle.

The full description: ``docs/internals/host.md``, section ``host/export/sublayer.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from vckattn.golden.bhyt_int import BHyTSiteRegisters
from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.golden.requant import RequantRegisters
from vckattn.golden.rope_int import rope_tables_int
from vckattn.golden.sublayer import (
    SUBLAYER_FORMAT,
    DecoderSublayer,
    EncoderSublayer,
    ResidualRegisters,
    check_formats,
    residual_registers,
)
from vckattn.host.bundle import MANIFEST_FILE, BundleError, rope_format, sublayer_kind

from .capture import Captured
from .common import ExportError
from .quantize import Range
from .reference import float_layer
from .sources import LoadedModel
from .writer import tensor_name, to_quant_layer

#: the model's RoPE tables in the bundle (one pair for every layer)
ROPE_TENSORS = ("rope.cos", "rope.sin")


def stored_scales(s_w: np.ndarray) -> np.ndarray:
    """Per-channel weight scales as the bundle stores them (float32), back in float64: what the residual's ``rq_y``
    is derived from."""
    return np.asarray(s_w, np.float32).astype(np.float64)


@torch.no_grad()
def encoder_residual_scale(m: LoadedModel, i: int, cap: Captured, normalizer: str, beta: float | np.ndarray,
                           gamma: float | np.ndarray, p_max: float | None, method: str, percentile: float) -> float:
    """``s_out`` of encoder layer ``i``: the int8 scale of ``x + Attn(x)`` over the valid calibration tokens
    (``Attn``: the float golden attention with the layer's normalizer, β/γ and saturation ``p_max``). Padded positions
    are left out, as golden's calibrate_encoder leaves them: a padded query row of an unnormalized SwiftMax holds
    values no real token does (MiniLM layer 0, untuned SwiftMax: max ``|x + Attn(x)|`` 83 at a padded position, 6.4 over
    the real tokens)."""
    ly = m.layers[i]
    r = Range(method, percentile, seed=20)
    for x, rope, b in zip(cap.x[i], cap.rope[i], cap.batches, strict=True):
        x64 = x.astype(np.float64)
        res = x64 + float_layer(m, ly, x64, b.keep, rope, normalizer, beta, gamma, p_max)["y"]
        r.add(res[np.asarray(b.keep, bool)])
    return r.scale()


def _post_ln(block: torch.nn.Module) -> torch.nn.Module:
    """The LayerNorm after the attention's residual add of a BERT block (Hugging Face's or golden's)."""
    hf = getattr(getattr(getattr(block, "attention", None), "output", None), "LayerNorm", None)
    ln = hf if hf is not None else getattr(block, "norm1", None)
    if ln is None or getattr(ln, "weight", None) is None:
        raise ExportError("a BERT block without the LayerNorm after its attention (post-LN) cannot be exported as a "
                          "sublayer")
    return ln


def sublayer_contents(m: LoadedModel, i: int, cap: Captured, layer: QuantAttentionLayer, normalizer: str,
                      beta: float | np.ndarray, gamma: float | np.ndarray, p_max: float | None, method: str,
                      percentile: float, bhyt_scales: tuple[float, float, float] | None = None
                      ) -> tuple[dict | None, dict[str, np.ndarray], dict[str, dict]]:
    """Layer ``i``'s ``sublayer`` manifest entry, tensors and tensor metadata (None and nothing for a model golden
    declares no sublayer for: a ViT, a Llama without BHyT). ``layer``: its integer attention layer; ``bhyt_scales``:
    a BHyT layer's ``(s_h, s_mid, s_mlp)`` (:func:`.constants.bhyt_scales`). ValueError if a constant does not fit
    its format."""
    kind = sublayer_kind(m.family, m.norm)
    if kind is None:
        return None, {}, {}
    fmt = SUBLAYER_FORMAT
    s_y = layer.s_a * stored_scales(layer.o_proj.s_w)
    tensors: dict[str, np.ndarray] = {}
    meta: dict[str, dict] = {}
    if kind == "encoder":
        s_res = layer.s_x
        s_out = encoder_residual_scale(m, i, cap, normalizer, beta, gamma, p_max, method, percentile)
    else:
        assert bhyt_scales is not None and m.layers[i].bhyt is not None
        s_res, s_out = bhyt_scales[0], bhyt_scales[1]
    res = residual_registers(s_y, s_res, s_out, fmt)
    check_formats(layer, res, fmt)
    rq_y = {}
    for part in ("mult", "shift"):
        name = tensor_name(i, f"residual.rq_y.{part}")
        tensors[name] = np.asarray(getattr(res.rq_y, part), np.int32)
        rq_y[part] = name
    entry: dict[str, Any] = {"kind": kind, "residual": {
        "s_out": float(s_out), "rq_x": {"mult": int(res.rq_x.mult), "shift": int(res.rq_x.shift)}, "rq_y": rq_y}}
    if kind == "encoder":
        ln = _post_ln(m.layers[i].block_module)
        w = ln.weight.detach().to(torch.float32).numpy()
        b = ln.bias.detach().to(torch.float32).numpy() if getattr(ln, "bias", None) is not None else np.zeros_like(w)
        entry["layernorm"] = {"weight": tensor_name(i, "layernorm.weight"), "bias": tensor_name(i, "layernorm.bias"),
                              "eps": float(ln.eps)}
        tensors[entry["layernorm"]["weight"]], tensors[entry["layernorm"]["bias"]] = w.copy(), b.copy()
    else:
        entry |= {"s_h": float(s_res), "bhyt_eps": float(m.layers[i].bhyt.eps),  # type: ignore[union-attr]
                  "rope": dict(zip(("cos", "sin"), ROPE_TENSORS, strict=True))}
    return entry, tensors, meta


@torch.no_grad()
def rope_float_tables(m: LoadedModel, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Float ``(cos, sin)`` ``(n, head_dim)`` of positions ``0..n-1`` from the model's own rotary embedding, in the
    float32 the calibration ran in (Hugging Face's ``rotary_emb``; a golden block's ``rope_cos_sin`` with its
    ``rope_theta``): the tables the calibration's attention inputs were rotated with."""
    from vckattn.golden.attention import rope_cos_sin

    pos = torch.arange(n)
    if m.golden:
        blocks = list(m.model.layers)  # type: ignore[union-attr]
        thetas = {float(b.rope_theta) for b in blocks}
        if len(thetas) != 1:
            raise ExportError(f"the golden blocks' RoPE bases differ ({sorted(thetas)}): one table pair per model")
        cos, sin = rope_cos_sin(pos, blocks[0].attn.head_dim, thetas.pop(), torch.float32)
    else:
        rotary = getattr(m.model, "rotary_emb", None)
        if rotary is None:
            raise ExportError("a Llama model without its rotary embedding module (rotary_emb): no RoPE tables")
        cos, sin = rotary(torch.zeros(1, n, 1, dtype=torch.float32), pos[None])
        cos, sin = cos[0], sin[0]
    return cos.double().numpy(), sin.double().numpy()


def rope_contents(m: LoadedModel) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """The model's int16 RoPE tables (Q1.14, round half-even) of positions ``0..max_seq_len-1`` and their metadata."""
    frac = SUBLAYER_FORMAT.rope_frac
    c, s = rope_tables_int(*rope_float_tables(m, int(m.info["max_seq_len"])), frac=frac)
    tensors = dict(zip(ROPE_TENSORS, (c, s), strict=True))
    return tensors, {n: {"format": rope_format(frac)} for n in ROPE_TENSORS}


# ------------------------------------------------------------------------------------------------ the way back


def _sublayer_entry(bundle: Any, i: int) -> dict:
    man = bundle.manifest
    where = f"{getattr(bundle, 'path', 'bundle')}/{MANIFEST_FILE}"
    entries = [e for e in man["layers"] if int(e["index"]) == int(i)]
    if not entries:
        raise KeyError(f"bundle has no layer {i} (layers: {[e['index'] for e in man['layers']]})")
    sub = entries[0].get("sublayer")
    if sub is None:
        family, norm = man["model"]["family"], man["norm"]
        if sublayer_kind(family, norm) is None:
            raise BundleError(where, f"layers[{i}].sublayer",
                              f'absent: the toolkit declares no sublayer for a {family} model with norm "{norm}" (it '
                              "runs whole sublayers of post-LN BERT encoders and BHyT Llama decoders)")
        raise BundleError(where, f"layers[{i}].sublayer",
                          f"absent: this bundle (schema_version {man['schema_version']}) carries the attention "
                          "constants only; re-export it with this vckattn (vckattn export) for the whole sublayer")
    return sub


def to_sublayer(bundle: Any, i: int) -> EncoderSublayer | DecoderSublayer:
    """Golden's integer sublayer of layer ``i`` of a loaded bundle: an :class:`EncoderSublayer` (post-LN BERT) or a
    :class:`DecoderSublayer` (BHyT Llama), its attention layer :func:`to_quant_layer`'s.

    ``sublayer_int(to_sublayer(b, i), quantize_input(x, s_x), keep)`` (:mod:`vckattn.golden.stages`) is the
    bundle's encoder sublayer (x the float attention input, ``s_x`` its ``attn.s_x``); ``sublayer_int(sub,
    quantize_input(h, sub.s_h), keep, sublayer_rope(b, i, S))`` the decoder's. BundleError (one line) if the layer
    has no sublayer constants: a model without a sublayer declaration, or a bundle written before they were
    exported (re-export it)."""
    sub = _sublayer_entry(bundle, i)
    ten = bundle.tensors
    attn = to_quant_layer(bundle, i)
    res = sub["residual"]
    residual = ResidualRegisters(
        RequantRegisters(np.asarray(ten[res["rq_y"]["mult"]], np.int64), np.asarray(ten[res["rq_y"]["shift"]],
                                                                                     np.int64)),
        RequantRegisters(np.int64(res["rq_x"]["mult"]), np.int64(res["rq_x"]["shift"])), float(res["s_out"]))
    if sub["kind"] == "encoder":
        ln = sub["layernorm"]
        return EncoderSublayer(attn, residual, np.asarray(ten[ln["weight"]], np.float64),
                               np.asarray(ten[ln["bias"]], np.float64), float(ln["eps"]))
    sa = bundle.manifest["layers"][int(i)]["bhyt"]["site_a"]
    site_a = BHyTSiteRegisters(int(sa["k_mult"]), int(sa["k_shift"]), int(sa["eps_int"]), int(sa["c_int"]),
                               np.asarray(ten[tensor_name(i, "bhyt.gamma_attn")], np.int64), int(sa["g_frac"]),
                               float(sa["s_out"]))
    return DecoderSublayer(float(sub["s_h"]), site_a, attn, residual)


def sublayer_rope(bundle: Any, i: int, seq: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The int16 RoPE tables ``(c, s)`` (Q1.14) of decoder layer ``i`` for positions ``start..start+seq-1``, each
    ``(seq, head_dim)``: what :func:`~vckattn.golden.sublayer.rope_tables` gives for those positions (broadcasts
    against ``(B, H, S, D)``) and the host writes into the device's RoPE unit. BundleError if the layer has no RoPE
    tables or the positions reach past ``model.max_seq_len``."""
    sub = _sublayer_entry(bundle, i)
    where = f"{getattr(bundle, 'path', 'bundle')}/{MANIFEST_FILE}"
    if sub["kind"] != "decoder":
        raise BundleError(where, f"layers[{i}].sublayer.rope", "absent: an encoder sublayer has no RoPE")
    c, s = bundle.tensors[sub["rope"]["cos"]], bundle.tensors[sub["rope"]["sin"]]
    n = c.shape[0]
    if seq < 1 or start < 0 or start + seq > n:
        raise BundleError(where, "model.max_seq_len", f"= {n}: positions {start}..{start + seq - 1} are outside the "
                                                      f"bundle's RoPE tables (positions 0..{n - 1})")
    return c[start:start + seq].copy(), s[start:start + seq].copy()


__all__ = ["ROPE_TENSORS", "encoder_residual_scale", "rope_contents", "rope_float_tables", "stored_scales",
           "sublayer_contents", "sublayer_rope", "to_sublayer"]

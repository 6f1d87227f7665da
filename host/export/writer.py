"""Step 5 of the export: the bundle's contents, written with :func:`vckattn.host.bundle.write_bundle`.

Per layer (:func:`layer_contents`): the int8 weights ``layers.{i}.{q,k,v,o}_proj.weight`` with their float32
per-channel ``weight_scale``, int32 biases, the requantization registers (per-channel tensors for q/k/v,
scalars for the attention output), the SwiftMax (β, γ, registers) or online-softmax registers, the BHyT
site constants and integer γ vectors of BHyT layers, and the rest of the sublayer (:mod:`.sublayer`).
:func:`build_manifest` adds the source, the model, the calibration provenance and the fixed-point formats.
:func:`to_quant_layer` is the way back: golden's :class:`QuantAttentionLayer` from a loaded bundle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.bhyt_int import NormFormat
from vckattn.golden.funcunits import Pow2Config, RecipConfig, TanhConfig
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat, OnlineSoftmaxRegisters
from vckattn.golden.quant_attention import QuantAttentionLayer, QuantLinear
from vckattn.golden.requant import RequantRegisters
from vckattn.golden.swiftmax_int import SwiftMaxFormat, SwiftMaxHeads
from vckattn.host.bundle import sublayer_formats

from .common import ExportError
from .sources import LoadedModel, Source


@dataclass
class ExportedLayer:
    """One calibrated layer, as the writer needs it."""

    layer: QuantAttentionLayer
    beta: np.ndarray | None  # one value per query head (SwiftMax layers)
    gamma: np.ndarray | None
    beta_source: str | None  # "checkpoint" | "calibration" for SwiftMax layers
    bhyt: dict | None  # the manifest's bhyt entry
    bhyt_gamma: tuple[np.ndarray, np.ndarray] | None  # integer γ of sites A and M
    fidelity: dict | None = None  # the export check: the integer layer against its float layer (export.fidelity)
    p_max: float | None = None  # a SwiftMax layer tuned for its P format: the saturation of its float layer
    sublayer: dict | None = None  # the manifest's sublayer entry (export.sublayer); None: no sublayer declaration
    sublayer_tensors: dict[str, np.ndarray] = field(default_factory=dict)  # its tensors (the RoPE tables: per model)


def tensor_name(i: int, what: str) -> str:
    """The bundle's name of layer ``i``'s tensor ``what`` (``layers.{i}.{what}``)."""
    return f"layers.{i}.{what}"


def layer_contents(i: int, ex: ExportedLayer) -> tuple[dict, dict[str, np.ndarray], dict[str, dict]]:
    """Layer ``i``'s manifest entry, tensors and tensor metadata (format, scale tensor)."""
    L = ex.layer
    tensors: dict[str, np.ndarray] = {}
    meta: dict[str, dict] = {}
    for p, ql in (("q_proj", L.q_proj), ("k_proj", L.k_proj), ("v_proj", L.v_proj), ("o_proj", L.o_proj)):
        wn, sn = tensor_name(i, f"{p}.weight"), tensor_name(i, f"{p}.weight_scale")
        tensors[wn] = np.ascontiguousarray(ql.w, dtype=np.int8)
        meta[wn] = {"format": "Q8.0", "scale": sn}
        tensors[sn] = np.asarray(ql.s_w, dtype=np.float32)
        if ql.b is not None:
            b = np.asarray(ql.b, dtype=np.int64)
            if b.size and (int(b.min()) < -(1 << 31) or int(b.max()) >= 1 << 31):
                raise ExportError(f"layer {i} {p}: bias does not fit int32 at scale s_in·s_w")
            bn = tensor_name(i, f"{p}.bias")
            tensors[bn] = b.astype(np.int32)
            meta[bn] = {"format": "Q32.0"}
    requant: dict[str, Any] = {}
    for n, rq in (("q", L.rq_q), ("k", L.rq_k), ("v", L.rq_v)):
        mn, sn = tensor_name(i, f"requant.{n}.mult"), tensor_name(i, f"requant.{n}.shift")
        tensors[mn] = np.asarray(rq.mult, dtype=np.int32)
        tensors[sn] = np.asarray(rq.shift, dtype=np.int32)
        requant[n] = {"mult": mn, "shift": sn}
    requant["a"] = {"mult": int(L.rq_a.mult), "shift": int(L.rq_a.shift)}
    bhyt = None
    if ex.bhyt is not None:
        bhyt = ex.bhyt
        assert ex.bhyt_gamma is not None
        fmt = NormFormat()
        for site, g, key in (("gamma_attn", ex.bhyt_gamma[0], "site_a"), ("gamma_mlp", ex.bhyt_gamma[1], "site_m")):
            gn = tensor_name(i, f"bhyt.{site}")
            tensors[gn] = np.asarray(g, dtype=np.int16)
            meta[gn] = {"format": f"Q{fmt.g_bits - bhyt[key]['g_frac']}.{bhyt[key]['g_frac']}"}
    tensors |= ex.sublayer_tensors
    entry = {
        "index": i,
        "scales": {"s_x": L.s_x, "s_q": L.s_q, "s_k": L.s_k, "s_v": L.s_v, "s_a": L.s_a},
        "p_frac": int(L.p_frac),
        "score_absmax": None if L.score_absmax is None else int(L.score_absmax),
        "swiftmax": None if L.swiftmax is None else {
            "beta": [float(b) for b in np.atleast_1d(ex.beta)], "gamma": [float(g) for g in np.atleast_1d(ex.gamma)],
            **({"source": ex.beta_source} if ex.beta_source else {}), "registers": L.swiftmax.as_dict()}
            | ({} if ex.p_max is None else {"p_max": float(ex.p_max)}),
        "online_softmax": None if L.online is None else {"registers": L.online.as_dict()},
        "requant": requant,
        "bhyt": bhyt,
        "tensors": list(tensors),
    }
    if ex.sublayer is not None:
        entry["sublayer"] = ex.sublayer
    if ex.fidelity is not None:
        entry["fidelity"] = ex.fidelity
    return entry, tensors, meta


def text_sha256(sentences: Sequence[str]) -> str:
    """sha256 of the newline-joined UTF-8 calibration text (the manifest's default ``data_sha256``)."""
    return hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()


def build_manifest(m: LoadedModel, source: Source, entries: list[dict], n_export: int, normalizer: str,
                   calibration: dict) -> dict:
    """The bundle's manifest (less what :func:`write_bundle` adds: schema, tool, tensor table, seal).

    ``calibration``: ``{"method", "percentile", "samples", "tokens", "data", "data_sha256"}``.
    """
    info = dict(m.info, num_layers=n_export)  # the bundle's layers (all, unless max_layers cut them)
    return {
        "source": {"path": str(source.files[0] if source.kind in ("gguf", "safetensors", "state-dict")
                               else source.path),
                   "kind": source.kind, "sha256": source.sha256(), "model_type": m.family},
        "model": info,
        "normalizer": normalizer,
        "norm": m.norm,
        "calibration": calibration,
        "formats": numeric_formats() | ({"sublayer": sublayer_formats()} if any("sublayer" in e for e in entries)
                                        else {}),
        "layers": entries,
    }


def numeric_formats() -> dict[str, dict]:
    """The kernels' numeric formats a bundle records (and must match): SwiftMax's without ``max_heads`` (how
    many register sets a build holds is the bitstream manifest's business; the bundle has ``num_heads``)."""
    sm = asdict(SwiftMaxFormat())
    sm.pop("max_heads")
    return {"swiftmax": sm, "online_softmax": asdict(OnlineSoftmaxFormat()), "norm": asdict(NormFormat())}


def write(out: Path, manifest: dict, tensors: dict[str, np.ndarray], meta: dict[str, dict],
          overwrite: bool = False) -> Path:
    """Write the bundle folder ``out`` (:func:`vckattn.host.bundle.write_bundle`); ExportError if refused."""
    from vckattn.host.bundle import BundleError, write_bundle

    try:
        return write_bundle(out, manifest, tensors, meta, overwrite=overwrite)
    except BundleError as exc:
        raise ExportError(f"bundle: {exc}") from None


def _parse_format(cls: type, d: dict) -> Any:
    nested = {"pow2": Pow2Config, "recip": RecipConfig, "rsqrt": RecipConfig, "tanh": TanhConfig}
    return cls(**{k: (nested[k](**v) if k in nested and isinstance(v, dict) else v) for k, v in d.items()})


def to_quant_layer(bundle: Any, i: int) -> QuantAttentionLayer:
    """Golden's :class:`QuantAttentionLayer` of layer ``i`` (its ``index``) of a loaded bundle.

    ``attention_int(to_quant_layer(bundle, i), x, keep)`` is the bundle's integer attention (for a
    Llama bundle add ``rope=(cos, sin)``, the float tables of the positions). The layer's
    ``n_kv_heads`` is the model's ``num_kv_heads`` (grouped-query attention) and it is causal for the
    Llama family. The per-channel weight scales are float32 in the bundle (they only dequantize the
    output; every register is exact), so the dequantized output may differ from the exporter's in the
    last bits.
    """
    man, ten = bundle.manifest, bundle.tensors
    entries = [e for e in man["layers"] if int(e["index"]) == int(i)]
    if not entries:
        raise KeyError(f"bundle has no layer {i} (layers: {[e['index'] for e in man['layers']]})")
    e = entries[0]
    fmts = man["formats"]
    sm_fmt = _parse_format(SwiftMaxFormat, fmts["swiftmax"])
    os_fmt = _parse_format(OnlineSoftmaxFormat, fmts["online_softmax"])

    def lin(p: str) -> QuantLinear:
        b = ten.get(tensor_name(i, f"{p}.bias"))
        return QuantLinear(np.asarray(ten[tensor_name(i, f"{p}.weight")], dtype=np.int8),
                           np.asarray(ten[tensor_name(i, f"{p}.weight_scale")], dtype=np.float64),
                           None if b is None else np.asarray(b, dtype=np.int64))

    def rq(n: str) -> RequantRegisters:
        r = e["requant"][n]
        if isinstance(r["mult"], str):
            return RequantRegisters(np.asarray(ten[r["mult"]], dtype=np.int64), np.asarray(ten[r["shift"]],
                                                                                          dtype=np.int64))
        return RequantRegisters(np.int64(r["mult"]), np.int64(r["shift"]))

    model = man["model"]
    sc = e["scales"]
    sm = e.get("swiftmax")
    on = e.get("online_softmax")
    return QuantAttentionLayer(
        n_heads=int(model["num_heads"]), head_dim=int(model["head_dim"]),
        s_x=float(sc["s_x"]), s_q=float(sc["s_q"]), s_k=float(sc["s_k"]), s_v=float(sc["s_v"]),
        s_a=float(sc["s_a"]),
        q_proj=lin("q_proj"), k_proj=lin("k_proj"), v_proj=lin("v_proj"), o_proj=lin("o_proj"),
        rq_q=rq("q"), rq_k=rq("k"), rq_v=rq("v"), rq_a=rq("a"),
        normalizer="swiftmax" if sm is not None else "softmax", p_frac=int(e["p_frac"]),
        swiftmax=None if sm is None else SwiftMaxHeads.from_dict(sm["registers"], int(man["model"]["num_heads"])),
        online=None if on is None else OnlineSoftmaxRegisters(**{k: int(v) for k, v in on["registers"].items()}),
        sm_fmt=sm_fmt, os_fmt=os_fmt,
        n_kv_heads=int(model["num_kv_heads"]), causal=model["family"] == "llama",
        score_absmax=None if e.get("score_absmax") is None else int(e["score_absmax"]),
    )


__all__ = ["ExportedLayer", "build_manifest", "layer_contents", "tensor_name", "text_sha256", "to_quant_layer",
           "write"]

"""Shared builders for the hardware-backend tests: a small quantized layer, a manifest with a (made-up) built-xclbin
UUID, a bundle the engine builds accept."""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.bhyt_int import NormFormat
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat, online_softmax_registers
from vckattn.golden.quant_attention import QuantAttentionLayer, build_quant_layer
from vckattn.golden.requant import requant_registers
from vckattn.golden.swiftmax_int import SwiftMaxFormat, choose_out_frac, swiftmax_head_registers
from vckattn.hw.design.manifest import Manifest, load_manifest

UUID = "3f2a9c1e-5b7d-4e21-9a0c-1d2e3f405162"
OTHER_UUID = "00112233-4455-6677-8899-aabbccddeeff"
SCALES = {"s_x": 0.02, "s_q": 0.05, "s_k": 0.045, "s_v": 0.03, "s_a": 0.012}


def manifest_with_uuid(name: str = "engine_small", uuid: str | None = UUID) -> Manifest:
    """The committed manifest ``name`` with ``xclbin.uuid`` patched (in a copy)."""
    m = load_manifest(name)
    data = copy.deepcopy(m.data)
    data["xclbin"]["uuid"] = uuid
    return Manifest(data, m.file)


def manifest_edit(m: Manifest, edit) -> Manifest:  # type: ignore[no-untyped-def]
    data = copy.deepcopy(m.data)
    edit(data)
    return Manifest(data, m.file)


def make_layer(normalizer: str = "swiftmax", heads: int = 2, kv_heads: int = 1, head_dim: int = 32,
               seed: int = 0, per_head: bool = False) -> QuantAttentionLayer:
    """A small quantized layer; ``per_head``: SwiftMax with a different beta / gamma per head (register map
    v2: the b_beta / c_out memories hold one entry per head), else beta 0.5, gamma 2 for every head."""
    torch.manual_seed(seed)
    mha = MultiHeadAttention(heads * head_dim, heads, kv_heads, head_dim).double()
    beta, gamma = ((np.linspace(-1.0, 2.5, heads), np.geomspace(0.5, 8.0, heads)[::-1]) if per_head
                   else (0.5, 2.0))
    return build_quant_layer(mha, SCALES, normalizer, beta=beta, gamma=gamma, p_max=1.0)  # type: ignore[arg-type]


def write_xclbin(path: Path) -> Path:
    path.write_bytes(b"xclbin2\0" + bytes(248))  # a file is all the fakes need
    return path


def bundle_parts(normalizer: str = "swiftmax", head_dim: int = 32, heads: int = 2,
                 seed: int = 0) -> tuple[dict, dict[str, np.ndarray], dict[str, dict]]:
    """(manifest without tensors, tensors, tensor meta) of a one-layer LayerNorm-model bundle."""
    rng = np.random.default_rng(seed)
    d = heads * head_dim
    tensors: dict[str, np.ndarray] = {}
    meta: dict[str, dict] = {}
    pre = "layers.0."
    s_x, s_q, s_k, s_v, s_a = (SCALES[k] for k in ("s_x", "s_q", "s_k", "s_v", "s_a"))
    s_w = {}
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        s_w[proj] = rng.uniform(0.001, 0.01, d).astype(np.float32)
        tensors[pre + proj + ".weight"] = rng.integers(-127, 128, (d, d)).astype(np.int8)
        tensors[pre + proj + ".weight_scale"] = s_w[proj]
        meta[pre + proj + ".weight"] = {"format": "Q8.0", "scale": pre + proj + ".weight_scale"}
    requant = {}
    for which, s_out in (("q", s_q), ("k", s_k), ("v", s_v)):
        r = requant_registers(s_x * s_w[which + "_proj"].astype(np.float64) / s_out)
        tensors[pre + f"requant.{which}.mult"] = r.mult.astype(np.int32)
        tensors[pre + f"requant.{which}.shift"] = r.shift.astype(np.int8)
        meta[pre + f"requant.{which}.mult"] = {"format": "Q18.0"}
        requant[which] = {"mult": pre + f"requant.{which}.mult", "shift": pre + f"requant.{which}.shift"}
    if normalizer == "swiftmax":
        beta, gamma = [0.5 + 0.25 * h for h in range(heads)], [2.0 + h for h in range(heads)]  # per head (schema 2)
        p_frac = choose_out_frac(1.0)
        sm = {"beta": beta, "gamma": gamma,
              "registers": swiftmax_head_registers(s_q, s_k, head_dim, beta, gamma, p_frac, heads).as_dict()}
        osm = None
    else:
        p_frac = OnlineSoftmaxFormat().out_frac
        sm, osm = None, {"registers": online_softmax_registers(s_q, s_k, head_dim).as_dict()}
    rq_a = requant_registers(s_v * 2.0**-p_frac / s_a)
    requant["a"] = {"mult": rq_a.mult, "shift": rq_a.shift}
    layer = {"index": 0, "scales": {"s_x": s_x, "s_q": s_q, "s_k": s_k, "s_v": s_v, "s_a": s_a}, "p_frac": p_frac,
             "swiftmax": sm, "online_softmax": osm, "requant": requant, "bhyt": None,
             "tensors": sorted(n for n in tensors if n.startswith(pre))}
    manifest = {
        "source": {"path": "/models/tiny-bert", "kind": "hf-folder", "sha256": "ab" * 32, "model_type": "bert"},
        "model": {"family": "bert", "hidden_size": d, "num_layers": 1, "num_heads": heads, "num_kv_heads": heads,
                  "head_dim": head_dim, "intermediate_size": 2 * d, "max_seq_len": 64, "vocab_size": 32},
        "normalizer": normalizer, "norm": "layernorm",
        "calibration": {"method": "minmax", "percentile": None, "samples": 4, "tokens": 64,
                        "data": "builtin:test", "data_sha256": "cd" * 32},
        "formats": {"swiftmax": {k: v for k, v in asdict(SwiftMaxFormat()).items() if k != "max_heads"},
                    "online_softmax": asdict(OnlineSoftmaxFormat()),
                    "norm": asdict(NormFormat())},
        "layers": [layer],
    }
    return json.loads(json.dumps(manifest, default=int)), tensors, meta

"""Step 1 of the export: a checkpoint, from any source, as a float model the later steps can run.

The full description: ``docs/internals/host.md``, section ``host/export/sources.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.bhyt import DEFAULT_KAPPA, BHyTBlockNorms
from vckattn.golden.blocks import BertLayer, ViTBlock
from vckattn.golden.errors import UserError
from vckattn.host.checkpoints import (
    Source,
    check_finite,
    check_model_type,
    gguf_folder,
    hf_weight_files,
    load_hf_folder,
    load_tokenizer,
    quiet_transformers,
    read_config_json,
    resolve_checkpoint,
)

from .common import DEFAULT_BHYT_SEQ_LEN, DEFAULT_SEQ_LEN, ExportError, first_line
from .golden_checkpoint import GOLDEN_KEY, GOLDEN_VERSION, build_golden_stack, check_golden_config

# ============================================================================ loaded models


@dataclass
class LoadedLayer:
    """What the exporter needs of one float layer."""

    mha: MultiHeadAttention  # float64 golden copy of the attention weights
    attn_module: nn.Module  # hooked for the attention input (and output)
    block_module: nn.Module  # hooked for the block input (BHyT)
    bhyt: BHyTBlockNorms | None = None  # float64 copy
    swiftmax: tuple[float | list[float], float | list[float]] | None = None  # checkpoint β, γ (per head: lists)
    #: the checkpoint's SwiftMax saturation (a layer tuned for its P format: the top of that format), or None
    swiftmax_p_max: float | None = None


@dataclass
class LoadedModel:
    """A loaded checkpoint: the float model, its layers and the manifest's ``model`` entry (``info``)."""

    family: str
    model: nn.Module
    layers: list[LoadedLayer]
    info: dict  # the manifest's "model" entry
    tokenizer: Any = None
    golden: bool = False
    norm: str = "layernorm"
    kappa: float = DEFAULT_KAPPA
    bhyt_seq_len: int = DEFAULT_BHYT_SEQ_LEN
    notes: list[str] = field(default_factory=list)
    #: the whole classifier (base model + head) when loaded with ``classifier=True`` and the checkpoint has a
    #: sequence-classification head; ``model`` is its base model (the same modules)
    classifier: nn.Module | None = None


def load_model(source: Source, progress: bool, classifier: bool = False) -> LoadedModel:
    """Load a resolved checkpoint (transformers' own progress bars only with ``progress`` on a terminal); ExportError
    if unusable. ``classifier``: a Hugging Face folder whose ``config.json`` names a ``*ForSequenceClassification`` or
    ``*ForImageClassification`` architecture is loaded with its head (``LoadedModel.classifier``)."""
    from vckattn.host.progress import bars_on

    progress = bars_on(progress)
    if source.kind == "state-dict":
        m = _load_golden(source.path)
        check_finite(m.model, source.path)
        return m
    quiet_transformers()
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        m = _load_hf(source, classifier)
    finally:
        if bars and not progress:
            hf_logging.enable_progress_bar()
    check_finite(m.classifier if m.classifier is not None else m.model, source.path)
    return m


def _load_hf(source: Source, classifier: bool = False) -> LoadedModel:
    from transformers import AutoConfig, AutoModel
    from transformers.utils import logging as hf_logging

    raw: dict[str, Tensor] = {}
    cfg_json: dict = {}
    clf: nn.Module | None = None
    try:
        if source.kind == "gguf":  # read once into a kept Hugging Face folder
            tok, model = load_hf_folder(gguf_folder(source), progress=hf_logging.is_progress_bar_enabled())
        elif source.kind == "hf-folder":
            cfg_json = read_config_json(source.path)
            tok, model = load_hf_folder(source.path, classifier, progress=hf_logging.is_progress_bar_enabled())
            if model.base_model is not model:  # loaded with its classification head
                clf, model = model, model.base_model
            raw = vckattn_tensors(source.files)
        else:  # bare safetensors + config.json
            folder = source.path.parent
            cfg_json = read_config_json(folder)
            family = check_model_type(cfg_json.get("model_type"), folder / "config.json")
            tok = None if family == "vit" else load_tokenizer(folder)
            model = AutoModel.from_config(AutoConfig.from_pretrained(folder), dtype=torch.float32)
            _load_bare_safetensors(model, source.path)
            raw = vckattn_tensors(source.files)
    except UserError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ExportError(f"cannot load {source.path}: {first_line(exc)}") from None
    model = model.eval()
    lm = _wrap_hf(model, tok, raw, cfg_json.get("vckattn_bhyt") or {})
    lm.classifier = clf
    return lm


def _load_bare_safetensors(model: nn.Module, file: Path) -> None:
    from safetensors.torch import load_file

    state = load_file(str(file))
    own = model.state_dict()
    prefix = getattr(model, "base_model_prefix", "")
    fixed: dict[str, Tensor] = {}
    for k, v in state.items():
        if k not in own and prefix and k.startswith(prefix + "."):
            k = k[len(prefix) + 1:]
        if k in own:
            fixed[k] = v
    missing = [k for k in own if k not in fixed and re.search(r"(query|key|value|q_proj|k_proj|v_proj|o_proj)", k)]
    if missing:
        raise ExportError(f"{file}: attention weights missing for this config (e.g. {missing[0]!r})")
    model.load_state_dict(fixed, strict=False)


_SWIFTMAX_KEY = re.compile(r"(?:^|\.)layers?\.(\d+)\.(?:.*\.)?(?:vckattn_normalizer|normalizer)\.(beta|gamma|p_max)$")
_BHYT_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.bhyt\.(lam_attn|lam_mlp|weight_attn|weight_mlp|c_attn)$")


def vckattn_tensors(files: list[Path]) -> dict[str, Tensor]:
    """The SwiftMax and BHyT tensors of a converted checkpoint (which transformers does not load)."""
    out: dict[str, Tensor] = {}
    for f in files:
        if f.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(f), framework="pt") as fh:
                for k in fh.keys():  # noqa: SIM118 - safe_open has no __iter__
                    if _SWIFTMAX_KEY.search(k) or _BHYT_KEY.search(k):
                        out[k] = fh.get_tensor(k)
        else:
            state = torch.load(f, map_location="cpu", weights_only=True)
            out |= {k: v for k, v in state.items() if _SWIFTMAX_KEY.search(k) or _BHYT_KEY.search(k)}
    return out


def swiftmax_from_state(state: dict[str, Tensor], n_layers: int
                        ) -> dict[int, tuple[float | list[float], float | list[float]]]:
    """Per layer index below ``n_layers``: the (β, γ) of its SwiftMax module in ``state``: floats (per layer) or
    lists with one value per head (per-head constants, ConSmax's granularity; the kernel holds a register set
    per head)."""
    found: dict[int, dict[str, Tensor]] = {}
    for k, v in state.items():
        m = _SWIFTMAX_KEY.search(k)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = v
    out: dict[int, tuple[float | list[float], float | list[float]]] = {}
    for i, d in sorted(found.items()):
        if i >= n_layers or not {"beta", "gamma"} <= set(d):
            continue
        b, g = d["beta"].detach().double(), d["gamma"].detach().double()
        if b.dim() > 1 or g.dim() > 1 or b.shape != g.shape:
            raise ExportError(f"layer {i}: SwiftMax β {tuple(b.shape)} / γ {tuple(g.shape)} must be scalars or one "
                              "value per head each")
        if not (torch.isfinite(b).all() and torch.isfinite(g).all() and (g > 0).all()):
            raise ExportError(f"layer {i}: SwiftMax β={b.tolist()}, γ={g.tolist()} from the checkpoint are not usable "
                              "(finite, γ > 0)")
        out[i] = (float(b), float(g)) if b.dim() == 0 else (b.tolist(), g.tolist())
    return out


def swiftmax_saturation_from_state(state: dict[str, Tensor], n_layers: int) -> dict[int, float]:
    """Per layer index below ``n_layers`` whose SwiftMax module in ``state`` saturates (a model tuned for its P
    format, ``vckattn calibrate swiftmax --p-frac``): its ``p_max``, the top of that P format. ExportError for a
    value that is not the top of an 8-bit P format (``(2^8 − 1)·2^-p_frac``)."""
    from vckattn.golden.swiftmax_int import out_frac_of_saturation

    out: dict[int, float] = {}
    for k, v in state.items():
        m = _SWIFTMAX_KEY.search(k)
        if not (m and m.group(2) == "p_max" and int(m.group(1)) < n_layers):
            continue
        i, t = int(m.group(1)), v.detach().double()
        if t.dim() != 0 or not torch.isfinite(t) or not float(t) > 0:
            raise ExportError(f"layer {i}: SwiftMax p_max {t.tolist()} from the checkpoint must be one finite "
                              "value > 0")
        try:
            out_frac_of_saturation(float(t))
        except ValueError as exc:
            raise ExportError(f"layer {i}: SwiftMax {exc}") from None
        out[i] = float(t)
    return out


def _wrap_hf(model: nn.Module, tok: Any, raw: dict[str, Tensor], bhyt_cfg: dict) -> LoadedModel:
    from vckattn.golden import convert

    try:
        family = convert.model_family(model)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    cfg = model.config
    blocks = list(convert.decoder_layers(model))
    attns = convert.attention_modules(model)
    n = len(blocks)
    sm = swiftmax_from_state(raw, n)
    sat = {i: v for i, v in swiftmax_saturation_from_state(raw, n).items() if i in sm}
    if sm:  # the float model runs with the checkpoint's normalizers during calibration
        from vckattn.golden.calibrate import apply_swiftmax

        for ph in (False, True):
            idx = [i for i in sorted(sm) if isinstance(sm[i][0], list) == ph]
            if idx:
                apply_swiftmax(model, {i: sm[i][0] for i in idx}, {i: sm[i][1] for i in idx}, p_max=sat)
    kappa = float(bhyt_cfg.get("kappa", DEFAULT_KAPPA))
    t_len = int(bhyt_cfg.get("seq_len", DEFAULT_BHYT_SEQ_LEN))
    bhyt_state: dict[int, dict[str, Tensor]] = {}
    for k, v in raw.items():
        m = _BHYT_KEY.search(k)
        if m and int(m.group(1)) < n:
            bhyt_state.setdefault(int(m.group(1)), {})[m.group(2)] = v
    norms: dict[int, BHyTBlockNorms] = {}
    if bhyt_state:
        if family != "llama":
            raise ExportError("BHyT norms found in a non-Llama checkpoint")
        norms = convert.convert_llama_norms_to_bhyt(model, kappa=kappa, seq_len=t_len, layers=sorted(bhyt_state))
        with torch.no_grad():
            for i, st in bhyt_state.items():
                for name, v in st.items():
                    getattr(norms[i], name).copy_(v.to(getattr(norms[i], name).dtype))
    d = int(cfg.hidden_size)
    heads = int(cfg.num_attention_heads)
    kv = int(getattr(cfg, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(cfg, "head_dim", None) or d // heads)
    layers = []
    for i, (blk, attn) in enumerate(zip(blocks, attns, strict=True)):
        if family == "bert":
            mha = BertLayer(d, heads, int(cfg.intermediate_size)).double().load_hf(blk).attn
        elif family == "vit":
            mha = ViTBlock(d, heads, int(cfg.intermediate_size)).double().load_hf(blk).attn
        else:
            mha = _llama_mha(attn, d, heads, kv, head_dim)
        bn = _bhyt_copy(norms[i]) if i in norms else None
        layers.append(LoadedLayer(mha.eval(), attn, blk, bn, sm.get(i), sat.get(i)))
    if family == "vit":
        n_patch = (int(cfg.image_size) // int(cfg.patch_size)) ** 2 + 1
        max_seq, vocab = n_patch, None
    else:
        max_seq, vocab = int(cfg.max_position_embeddings), int(cfg.vocab_size)
    info = {"family": family, "hidden_size": d, "num_layers": n, "num_heads": heads, "num_kv_heads": kv,
            "head_dim": head_dim, "intermediate_size": int(cfg.intermediate_size), "max_seq_len": max_seq,
            "vocab_size": vocab}
    norm = "bhyt" if norms else ("rmsnorm" if family == "llama" else "layernorm")
    if tok is not None and getattr(tok, "pad_token", None) is None and getattr(tok, "eos_token", None) is not None:
        tok.pad_token = tok.eos_token
    return LoadedModel(family, model, layers, info, tok, False, norm, kappa, t_len)


def _llama_mha(attn: nn.Module, d: int, heads: int, kv: int, head_dim: int) -> MultiHeadAttention:
    bias = attn.q_proj.bias is not None
    mha = MultiHeadAttention(d, heads, kv, head_dim, bias=bias).double()
    with torch.no_grad():
        for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
            src, dst = getattr(attn, p), getattr(mha, p)
            dst.weight.copy_(src.weight.double())
            if bias:
                dst.bias.copy_(src.bias.double())
    return mha


def _bhyt_copy(norms: BHyTBlockNorms) -> BHyTBlockNorms:
    out = BHyTBlockNorms(norms.weight_attn.shape[0], 1.0, 1.0, norms.kappa, norms.seq_len, norms.eps,
                         norms.exact_second_stat).double()
    out.load_state_dict({k: v.double() for k, v in norms.state_dict().items()})
    if out.exact_second_stat:
        raise ExportError("BHyT with the exact second statistic (bhytstar) is not exported; the bundle's BHyT "
                          "layers use the approximate statistic (norm 'bhyt')")
    return out.eval()


def _torch_load_problem(path: Path, exc: BaseException) -> str:
    """Why ``torch.load`` failed, in the user's terms (torch's own message talks about ``weights_only`` and
    unpickling internals, which the user did not choose and cannot act on)."""
    import zipfile

    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as err:
        return err.strerror or str(err)
    if size == 0:
        return "the file is empty"
    if head.startswith(b"PK"):
        if not zipfile.is_zipfile(path):
            return "a truncated or corrupt zip archive"
        text = first_line(exc)
        if "weights_only" in text or "Unpickler" in text or "GLOBAL" in text:
            return "it holds Python objects other than tensors and plain containers; re-save it with torch.save of " \
                   "a dict of tensors"
        return "a corrupt PyTorch archive"
    if head[:1] == b"\x80":
        return "a legacy pickle that cannot be read safely or is truncated"
    return "not a PyTorch file (no zip archive or pickle inside)"


def _load_golden(path: Path) -> LoadedModel:
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling problem is a user-input problem here
        raise ExportError(f"{path}: cannot read as a PyTorch checkpoint ({_torch_load_problem(path, exc)})") from None
    if not isinstance(ck, dict) or ck.get(GOLDEN_KEY) is None:
        raise ExportError(f"{path}: not a vckattn golden checkpoint (no {GOLDEN_KEY!r} key; see save_golden_checkpoint)"
                          "; for Hugging Face models pass the model folder")
    if ck[GOLDEN_KEY] != GOLDEN_VERSION:
        raise ExportError(f"{path}: golden checkpoint version {ck[GOLDEN_KEY]!r} not supported (expected 1)")
    config, state = ck.get("config"), ck.get("state_dict")
    check_golden_config(config)
    if not isinstance(state, dict):
        raise ExportError(f"{path}: golden checkpoint has no state_dict")
    stack = build_golden_stack(config, state)
    family, block = config["family"], config["block"]
    norm_kind = block.get("norm", "layernorm" if family != "llama" else "rmsnorm")
    if family == "llama" and norm_kind not in ("rmsnorm", "layernorm", "bhyt"):
        raise ExportError(f"golden checkpoint: norm {norm_kind!r} has no hardware kernel; export supports rmsnorm, "
                          "layernorm and bhyt")
    if family != "llama" and norm_kind != "layernorm":
        raise ExportError(f"golden checkpoint: norm {norm_kind!r} has no hardware kernel for {family}")
    sm = swiftmax_from_state(state, len(stack.layers))
    sat = {i: v for i, v in swiftmax_saturation_from_state(state, len(stack.layers)).items() if i in sm}
    layers = []
    for i, blk in enumerate(stack.layers):
        mha = _golden_mha_copy(blk.attn)
        bn = _bhyt_copy(blk.bhyt) if norm_kind == "bhyt" else None
        layers.append(LoadedLayer(mha, blk.attn, blk, bn, sm.get(i), sat.get(i)))
    a0 = stack.layers[0].attn
    d = int(block["d_model"])
    info = {"family": family, "hidden_size": d, "num_layers": len(stack.layers), "num_heads": a0.n_heads,
            "num_kv_heads": a0.n_kv_heads, "head_dim": a0.head_dim,
            "intermediate_size": int(stack.layers[0].gate_proj.out_features if family == "llama"
                                     else stack.layers[0].fc1.out_features),
            "max_seq_len": int(config.get("max_seq_len") or block.get("seq_len") or DEFAULT_SEQ_LEN),
            "vocab_size": int(config["vocab_size"]) if config.get("vocab_size") else None}
    kappa = float(stack.layers[0].bhyt.kappa) if norm_kind == "bhyt" else DEFAULT_KAPPA
    t_len = int(stack.layers[0].bhyt.seq_len) if norm_kind == "bhyt" else DEFAULT_BHYT_SEQ_LEN
    return LoadedModel(family, stack, layers, info, None, True, norm_kind, kappa, t_len)


def _golden_mha_copy(attn: MultiHeadAttention) -> MultiHeadAttention:
    bias = attn.q_proj.bias is not None
    mha = MultiHeadAttention(attn.q_proj.in_features, attn.n_heads, attn.n_kv_heads, attn.head_dim, bias=bias)
    state = {k: v for k, v in attn.state_dict().items() if not k.startswith("normalizer.")}
    mha.load_state_dict(state, strict=False)
    return mha.double().eval()


__all__ = ["LoadedLayer", "LoadedModel", "Source", "check_finite", "check_model_type",
           "hf_weight_files", "load_model", "quiet_transformers", "read_config_json", "resolve_checkpoint",
           "swiftmax_from_state", "swiftmax_saturation_from_state", "vckattn_tensors"]

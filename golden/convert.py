"""In-place conversion of Hugging Face models to the golden normalizers and norms.

The full description: ``docs/internals/golden.md``, section ``golden/convert.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import attention, attention_scores, repeat_kv
from .bhyt import DEFAULT_KAPPA, DEFAULT_LAM_ATTN, DEFAULT_LAM_MLP, BHyTBlockNorms
from .normalizers import Normalizer, Softmax, SwiftMax, make_normalizer

ATTN_IMPL = "vckattn"

#: model_type -> (path of the layer list in the base model, path of the attention module in a layer)
FAMILIES: dict[str, tuple[str, str]] = {
    "bert": ("encoder.layer", "attention.self"),
    "vit": ("layers", "attention"),
    "llama": ("layers", "self_attn"),
}

_SOFTMAX = Softmax()


# ----------------------------------------------------------------------------- attention function


def mask_to_keep(attention_mask: Tensor | None, key_len: int) -> Tensor | None:
    """transformers' 4-D attention mask -> bool keep mask (True = attend).

    Accepts the boolean masks of the ``sdpa`` mask interface and the additive
    float masks of ``eager`` (0 = attend, a very negative number = masked).
    """
    if attention_mask is None:
        return None
    m = attention_mask[..., :key_len]
    if m.dtype == torch.bool:
        return m
    return m > torch.finfo(m.dtype).min / 2


def vckattn_attention_forward(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: object,
) -> tuple[Tensor, Tensor]:
    """The ``"vckattn"`` attention function (transformers' AttentionInterface signature).

    ``query`` ``(B, H, Sq, D)``, ``key``/``value`` ``(B, Hkv, Sk, D)``; returns the
    output ``(B, Sq, H, D)`` and the weights ``(B, H, Sq, Sk)``.
    """
    normalizer: Normalizer = getattr(module, "vckattn_normalizer", None) or _SOFTMAX
    keep = mask_to_keep(attention_mask, key.shape[-2])
    record = getattr(module, "vckattn_record", None)
    if record is not None:
        record.append(row_stats(attention_scores(query, key, scaling).detach(), keep))
    record_qk = getattr(module, "vckattn_qk_record", None)
    if record_qk is not None:  # the QKᵀ operands (calibrate.score_steps: the engine's score format)
        record_qk(query.detach(), key.detach(), keep, scaling)
    if dropout > 0.0 and module.training:
        z = attention_scores(query, key, scaling)
        w = F.dropout(normalizer(z, keep), p=dropout, training=True)
        out = torch.matmul(w, repeat_kv(value, query.shape[1] // value.shape[1]))
    else:
        out, w = attention(query, key, value, normalizer, keep=keep, scale=scaling)
    return out.transpose(1, 2).contiguous(), w


def _vckattn_mask(*args: object, **kwargs: object) -> Tensor | None:
    """Mask interface for ``"vckattn"``: boolean masks, causal masks always materialized."""
    from transformers.masking_utils import sdpa_mask

    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


def register_attention() -> None:
    """Register ``"vckattn"`` with transformers' attention and mask interfaces (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTN_IMPL, vckattn_attention_forward)
    AttentionMaskInterface.register(ATTN_IMPL, _vckattn_mask)


# ----------------------------------------------------------------------------- model structure


def model_family(model: nn.Module) -> str:
    """``bert``, ``vit`` or ``llama`` from ``model.config.model_type``; ValueError otherwise."""
    config = getattr(model, "config", None)
    mt = getattr(config, "model_type", None)
    if mt not in FAMILIES:
        raise ValueError(
            f"unsupported model type {mt!r}: vckattn converts {sorted(FAMILIES)} "
            "(Hugging Face BertModel, ViTModel, LlamaModel and models wrapping them)"
        )
    return mt


def _get(module: nn.Module, path: str) -> nn.Module:
    for part in path.split("."):
        module = getattr(module, part)
    return module


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The list of transformer layers of a supported model (base model found automatically)."""
    family = model_family(model)
    base = getattr(model, "base_model", model)
    return _get(base, FAMILIES[family][0])  # type: ignore[return-value]


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention module of every layer, in order."""
    family = model_family(model)
    return [_get(layer, FAMILIES[family][1]) for layer in decoder_layers(model)]


def _select(n: int, layers: Iterable[int] | None) -> list[int]:
    if layers is None:
        return list(range(n))
    chosen = sorted(set(int(i) for i in layers))
    bad = [i for i in chosen if not 0 <= i < n]
    if bad:
        raise ValueError(f"layer indices {bad} out of range: the model has {n} layers (0..{n - 1})")
    return chosen


def _heads(attn: nn.Module, model: nn.Module) -> int:
    for name in ("num_attention_heads", "num_heads"):
        if hasattr(attn, name):
            return int(getattr(attn, name))
    return int(model.config.num_attention_heads)


# ----------------------------------------------------------------------------- conversions


def swap_attention_normalizer(
    model: nn.Module,
    kind: str = "swiftmax",
    layers: Iterable[int] | None = None,
    beta: float | Sequence[float] = 2.5,
    gamma: float | Sequence[float] = 100.0,
    per_head: bool = False,
    base: str = "e",
) -> dict[int, Normalizer]:
    """Replace the attention softmax of the selected layers in place.

    Args:
        model: a Hugging Face Bert/ViT/Llama model (base or with a head).
        kind: ``swiftmax`` | ``softmax`` | ``online_softmax`` | ``softermax``.
        layers: 0-based layer indices (default: all).
        beta, gamma: SwiftMax initial values, one float for all layers or one per
            selected layer (e.g. from :func:`vckattn.golden.calibrate.collect_softmax_stats`).
        per_head: SwiftMax β/γ per head instead of per layer.
        base: SwiftMax exponent base, ``"e"`` or ``"2"``.

    Returns the new normalizer of each converted layer. The model's attention
    implementation becomes ``"vckattn"``; other layers run the golden softmax.
    """
    register_attention()
    attns = attention_modules(model)
    chosen = _select(len(attns), layers)
    betas = _per_layer(beta, len(chosen), "beta")
    gammas = _per_layer(gamma, len(chosen), "gamma")
    out: dict[int, Normalizer] = {}
    for j, i in enumerate(chosen):
        attn = attns[i]
        ref = next(attn.parameters())
        if kind == "swiftmax":
            norm: Normalizer = SwiftMax(betas[j], gammas[j], _heads(attn, model) if per_head else None, base)
        else:
            norm = make_normalizer(kind)
        attn.vckattn_normalizer = norm.to(device=ref.device, dtype=ref.dtype)
        out[i] = attn.vckattn_normalizer
    model.set_attn_implementation(ATTN_IMPL)
    return out


def _per_layer(value: float | Sequence[float], n: int, name: str) -> list[float]:
    if isinstance(value, (int, float)):
        return [float(value)] * n
    vals = [float(v) for v in value]
    if len(vals) != n:
        raise ValueError(f"{name}: got {len(vals)} values for {n} selected layers")
    return vals


class _BHyTAttnSite(nn.Module):
    """Stands in for ``input_layernorm``: BHyT site A, stashes s² for site M."""

    def __init__(self, norms: BHyTBlockNorms) -> None:
        super().__init__()
        object.__setattr__(self, "norms", norms)  # owned by the layer (``layer.bhyt``), not registered twice

    def forward(self, h: Tensor) -> Tensor:
        u, s2 = self.norms.attn_site(h)
        self.norms.stashed_s2 = s2
        return u


class _BHyTMlpSite(nn.Module):
    """Stands in for ``post_attention_layernorm``: BHyT site M on ŝ² (no reduction)."""

    def __init__(self, norms: BHyTBlockNorms) -> None:
        super().__init__()
        object.__setattr__(self, "norms", norms)

    def forward(self, h_mid: Tensor) -> Tensor:
        s2 = getattr(self.norms, "stashed_s2", None)
        if s2 is None:
            raise RuntimeError("BHyT second site ran before the first site of the same layer")
        self.norms.stashed_s2 = None
        return self.norms.mlp_site(h_mid, s2)


def convert_llama_norms_to_bhyt(
    model: nn.Module,
    lam_attn: float = DEFAULT_LAM_ATTN,
    lam_mlp: float = DEFAULT_LAM_MLP,
    kappa: float = DEFAULT_KAPPA,
    seq_len: int = 1024,
    layers: Iterable[int] | None = None,
    exact_second_stat: bool = False,
    keep_gamma: bool = True,
) -> dict[int, BHyTBlockNorms]:
    """Replace the RMSNorms of the selected Llama decoder layers by the BHyT block form.

    Args:
        lam_attn, lam_mlp: initial λ of the two sites; kappa: κ.
        seq_len: T of ``c_attn = ‖W_V W_O‖²_F / (T·d)`` (the training cutoff length).
        exact_second_stat: the "bhytstar" ablation (exact statistic at both sites).
        keep_gamma: initialise γ from the replaced RMSNorm weights (else ones).

    ``c_attn`` of each converted layer is computed from its real W_V, W_O
    (:func:`refresh_bhyt_c_attn` recomputes it later). The final norm stays RMSNorm.
    """
    if model_family(model) != "llama":
        raise ValueError("BHyT conversion applies to Llama-style decoders (model_type 'llama')")
    all_layers = decoder_layers(model)
    out: dict[int, BHyTBlockNorms] = {}
    for i in _select(len(all_layers), layers):
        layer = all_layers[i]
        ref = layer.input_layernorm.weight
        norms = BHyTBlockNorms(ref.shape[0], lam_attn, lam_mlp, kappa, seq_len,
                               exact_second_stat=exact_second_stat).to(device=ref.device, dtype=ref.dtype)
        if keep_gamma:
            with torch.no_grad():
                norms.weight_attn.copy_(layer.input_layernorm.weight)
                norms.weight_mlp.copy_(layer.post_attention_layernorm.weight)
        layer.bhyt = norms
        layer.input_layernorm = _BHyTAttnSite(norms)
        layer.post_attention_layernorm = _BHyTMlpSite(norms)
        out[i] = norms
    refresh_bhyt_c_attn(model)
    return out


@torch.no_grad()
def refresh_bhyt_c_attn(model: nn.Module) -> dict[int, float]:
    """Recompute ``c_attn`` of every BHyT layer of a converted Llama model from its W_V, W_O."""
    cfg = model.config
    n_heads = int(cfg.num_attention_heads)
    n_kv = int(getattr(cfg, "num_key_value_heads", None) or n_heads)
    out: dict[int, float] = {}
    for i, layer in enumerate(decoder_layers(model)):
        norms = getattr(layer, "bhyt", None)
        if isinstance(norms, BHyTBlockNorms):
            out[i] = norms.refresh_c_attn(layer.self_attn.v_proj.weight, layer.self_attn.o_proj.weight, n_heads, n_kv)
    return out


# ----------------------------------------------------------------------------- statistics


@dataclass
class RowStats:
    """Per-row softmax statistics of one attention call (rows of real query tokens with a key only).

    ``z_max``: row maxima of the scores (natural-log units); ``sum_exp``:
    ``S = Σ_j exp(z_j - z_max)`` over unmasked keys (1 ≤ S ≤ number of keys).
    """

    z_max: Tensor
    sum_exp: Tensor
    head: Tensor  # head index of each row (int64)


def row_stats(z: Tensor, keep: Tensor | None) -> RowStats:
    """Statistics of scores ``z`` ``(B, H, Sq, Sk)`` (keep broadcastable to it). Rows of padded queries are
    left out: in self-attention (``Sq == Sk``) a query is a real token iff it may attend to itself, so rows
    whose diagonal key is masked (padding) do not bias the statistics."""
    real = None
    if keep is not None:
        keep = keep.expand_as(z)
        z = z.masked_fill(~keep, float("-inf"))
        if z.shape[-1] == z.shape[-2]:
            real = keep.diagonal(dim1=-2, dim2=-1)
    m = z.amax(dim=-1)
    valid = torch.isfinite(m) if real is None else torch.isfinite(m) & real
    s = torch.exp(z - torch.where(valid, m, torch.zeros_like(m))[..., None]).sum(dim=-1)
    head = torch.arange(z.shape[1], device=z.device).view(1, -1, 1).expand_as(m)
    return RowStats(m[valid].flatten().double(), s[valid].flatten().double(), head[valid].flatten())


@contextlib.contextmanager
def recording(model: nn.Module) -> Iterator[list[list[RowStats]]]:
    """Within the block, every attention call of ``model`` appends its :class:`RowStats`
    to ``records[layer]``. The model must use the ``"vckattn"`` implementation."""
    attns = attention_modules(model)
    records: list[list[RowStats]] = [[] for _ in attns]
    for a, r in zip(attns, records, strict=True):
        a.vckattn_record = r
    try:
        yield records
    finally:
        for a in attns:
            a.vckattn_record = None

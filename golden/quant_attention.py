"""A quantized self-attention layer end to end, bit-exact (the emulator of the attention block).

The full description: ``docs/internals/golden.md``, section ``golden/quant_attention.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from .aie_matmul import exact_int_matmul
from .attention import MultiHeadAttention, apply_rope, attention
from .engine import (
    engine_format,
    engine_online_registers,
    engine_registers,
    engine_requant,
    narrow_scores,
    score_shift_for,
)
from .normalizers import Softmax, SwiftMax
from .online_softmax_int import (
    OnlineSoftmaxFormat,
    OnlineSoftmaxRegisters,
    online_softmax_int,
    online_softmax_registers,
)
from .requant import RequantRegisters, quantize_symmetric, requant_registers, requantize, symmetric_scale
from .rope_int import ROPE_FRAC, rope_int, rope_tables_int
from .swiftmax_int import (
    SwiftMaxFormat,
    SwiftMaxHeads,
    choose_out_frac,
    swiftmax_head_registers,
    swiftmax_int_tabulated,
)

Normalizer = Literal["softmax", "swiftmax"]


@dataclass
class QuantLinear:
    """int8 weights ``w`` (out, in) with per-output-channel scales ``s_w`` and an int32 bias at
    scale ``s_in · s_w`` (rounded half-even)."""

    w: np.ndarray
    s_w: np.ndarray
    b: np.ndarray | None

    @classmethod
    def from_float(cls, weight: np.ndarray, bias: np.ndarray | None, s_in: float) -> QuantLinear:
        s_w = np.asarray(symmetric_scale(weight, axis=1), dtype=np.float64)
        w = quantize_symmetric(weight, s_w[:, None]).astype(np.int8)
        b = None if bias is None else np.rint(np.asarray(bias, np.float64) / (s_in * s_w)).astype(np.int64)
        return cls(w, s_w, b)

    def acc(self, x: np.ndarray) -> np.ndarray:
        """``x @ wᵀ + b`` exactly (int32/int64)."""
        if getattr(self, "_wt", None) is None:  # contiguous int8 wᵀ, made once
            self._wt = np.ascontiguousarray(self.w.T, dtype=np.int8)
        y = exact_int_matmul(x, self._wt)
        return y if self.b is None else y + self.b


@dataclass
class QuantAttentionLayer:
    """Everything the integer attention layer needs (what the export bundle carries per layer).

    ``n_kv_heads``: K/V heads (grouped-query attention; ``None`` = ``n_heads``, resolved on
    construction). ``causal``: keys after the query position are masked (decoder layers).
    RoPE tables are not part of the layer (they depend on the positions): pass them to
    :func:`~vckattn.golden.stages.attention_int`.
    """

    n_heads: int
    head_dim: int
    s_x: float
    s_q: float
    s_k: float
    s_v: float
    s_a: float
    q_proj: QuantLinear
    k_proj: QuantLinear
    v_proj: QuantLinear
    o_proj: QuantLinear
    rq_q: RequantRegisters
    rq_k: RequantRegisters
    rq_v: RequantRegisters
    rq_a: RequantRegisters
    normalizer: Normalizer
    p_frac: int
    #: SwiftMax constants, one register set per query head (per-layer constants: equal heads)
    swiftmax: SwiftMaxHeads | None = None
    online: OnlineSoftmaxRegisters | None = None
    sm_fmt: SwiftMaxFormat = field(default_factory=SwiftMaxFormat)
    os_fmt: OnlineSoftmaxFormat = field(default_factory=OnlineSoftmaxFormat)
    n_kv_heads: int | None = None
    causal: bool = False
    #: width of the scores the normalizer sees: 32 = the int32 accumulators (contract v1); 8 / 16 = the
    #: engine's narrow scores ``narrow_scores(acc, score_shift, score_bits)`` (``golden/engine.py``), with the
    #: normalizer registers folded for the scale ``s_q·s_k·2^score_shift`` and ``rq_a`` with the engine's 16-bit
    #: multiplier (:func:`narrow_layer`)
    score_bits: int = 32
    score_shift: int = 0
    #: the largest ``|Q·Kᵀ|`` accumulator over the calibration data (kept elements): what chooses
    #: ``score_shift`` for narrow scores (None: not measured, e.g. an older bundle)
    score_absmax: int | None = None

    def __post_init__(self) -> None:
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads}")
        if self.swiftmax is not None and self.swiftmax.n_heads != self.n_heads:
            raise ValueError(f"SwiftMax constants for {self.swiftmax.n_heads} heads in a layer of {self.n_heads}")

    @property
    def n_rep(self) -> int:
        """Query heads per K/V head (1 without GQA)."""
        return self.n_heads // int(self.n_kv_heads)


def _np(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().to(torch.float64).cpu().numpy()


def _heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    b, s, _ = x.shape
    return x.reshape(b, s, n_heads, -1).transpose(0, 2, 1, 3)


def _merge_heads(t: np.ndarray) -> np.ndarray:
    """``(B, H, S, D) -> (B, S, H·D)`` (the inverse of :func:`_heads`)."""
    b, h, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, h * d)


RopeTables = tuple[np.ndarray | torch.Tensor, np.ndarray | torch.Tensor]


def _rope_tables(rope: RopeTables, batch: int, seq: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 ``(cos, sin)`` shaped to broadcast against ``(B, H, S, D)``: ``(S, D)`` stays; ``(B, S, D)``
    or ``(1, S, D)`` (Hugging Face's LlamaRotaryEmbedding output) gets a head axis."""
    if len(rope) != 2:
        raise ValueError("rope must be a (cos, sin) pair of tables")
    out = []
    for name, t in zip(("cos", "sin"), rope, strict=True):
        if hasattr(t, "detach"):
            t = t.detach().to("cpu").double().numpy()
        t = np.asarray(t, dtype=np.float64)
        if t.ndim == 3 and t.shape[0] in (1, batch):
            t = t[:, None]
        elif t.ndim != 2:
            raise ValueError(f"rope {name} table must be (S, D), (1, S, D) or (B, S, D); got {t.shape}")
        if t.shape[-2:] != (seq, head_dim):
            raise ValueError(f"rope {name} table {t.shape} does not match S={seq}, head_dim={head_dim}")
        out.append(t)
    return out[0], out[1]


def key_mask(keep: np.ndarray | None, batch: int, seq: int, causal: bool) -> np.ndarray:
    """The keys each query row may attend: ``(B, 1, S)`` bool without ``causal`` (the padding mask
    ``keep`` ``(B, S)``, all True when ``None``), ``(B, S, S)`` with it (key ``j <= i`` for query ``i``,
    combined with the padding). Broadcasts against scores ``(B, H, S, S)`` after ``[:, None]``."""
    if keep is None:
        m = np.ones((batch, 1, seq), dtype=bool)
    else:
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (batch, seq):
            raise ValueError(f"keep must be (B, S) = {(batch, seq)}, got {keep.shape}")
        m = keep[:, None, :]
    if causal:
        m = m & np.tril(np.ones((seq, seq), dtype=bool))[None]
    return m


def float_swiftmax(beta: float | np.ndarray, gamma: float | np.ndarray, p_max: float | None = None) -> SwiftMax:
    """The float SwiftMax of per-layer (scalars) or per-head (one value per head) constants, float64; saturating at
    ``p_max`` when given (a layer tuned for its P format)."""
    b, g = np.atleast_1d(np.asarray(beta, np.float64)), np.atleast_1d(np.asarray(gamma, np.float64))
    if b.size == 1 and g.size == 1 and np.ndim(beta) == 0 and np.ndim(gamma) == 0:
        return SwiftMax(float(b[0]), float(g[0]), p_max=p_max).double()
    n = max(b.size, g.size)
    norm = SwiftMax(1.0, 1.0, num_heads=n, p_max=p_max).double()
    with torch.no_grad():
        norm.beta.copy_(torch.from_numpy(np.broadcast_to(b, (n,)).copy()))
        norm.gamma.copy_(torch.from_numpy(np.broadcast_to(g, (n,)).copy()))
    return norm


@torch.no_grad()
def float_attention(mha: MultiHeadAttention, x: np.ndarray, keep: np.ndarray | None,
                    normalizer: Normalizer, beta: float | np.ndarray = 0.0, gamma: float | np.ndarray = 1.0,
                    rope: RopeTables | None = None, causal: bool = False,
                    p_max: float | None = None) -> dict[str, np.ndarray]:
    """Float64 golden of the same layer: returns q, k, v ``(B, S, heads·D)``, weights p ``(B, H, S, S)``,
    head outputs a ``(B, S, H·D)``, output y. K/V have ``mha.n_kv_heads`` heads (GQA). With ``rope``
    (float ``(cos, sin)`` tables as :func:`~vckattn.golden.stages.attention_int` takes) q and k are the rotated
    values and ``q_pre``/``k_pre`` the projection outputs; ``causal`` masks keys after each query. ``p_max``: the
    SwiftMax saturation (:func:`float_swiftmax`)."""
    norm = Softmax() if normalizer == "softmax" else float_swiftmax(beta, gamma, p_max)
    xt = torch.from_numpy(np.asarray(x, np.float64))
    m = mha.double()
    q, k, v = (_np(lin(xt)) for lin in (m.q_proj, m.k_proj, m.v_proj))
    qh = torch.from_numpy(_heads(q, m.n_heads))
    kh, vh = (torch.from_numpy(_heads(t, m.n_kv_heads)) for t in (k, v))
    kt = None if keep is None else torch.from_numpy(np.asarray(keep))[:, None, None, :]
    extra = {}
    if rope is not None:
        cos, sin = (torch.from_numpy(t) for t in _rope_tables(rope, x.shape[0], x.shape[1], m.head_dim))
        qh, kh = apply_rope(qh, cos, sin), apply_rope(kh, cos, sin)
        extra = {"q_pre": q, "k_pre": k}
        q, k = _merge_heads(qh.numpy()), _merge_heads(kh.numpy())
    a, p = attention(qh, kh, vh, norm, keep=kt, causal=causal)
    a_flat = a.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
    y = m.o_proj(a_flat)
    return {"q": q, "k": k, "v": v, "p": p.numpy(), "a": a_flat.numpy(), "y": y.numpy()} | extra


def calibrate_attention(mha: MultiHeadAttention, x: np.ndarray, keep: np.ndarray | None,
                        normalizer: Normalizer = "softmax", beta: float | np.ndarray = 0.0,
                        gamma: float | np.ndarray = 1.0,
                        p_percentile: float = 100.0, rope: RopeTables | None = None,
                        causal: bool = False) -> QuantAttentionLayer:
    """Choose scales from calibration activations ``x`` ``(B, S, d)`` and build the integer layer.

    ``beta``/``gamma``: SwiftMax constants per layer (scalars) or per head (one value per head).

    ``p_percentile`` (SwiftMax only): the percentile of unmasked P values that must fit the
    uint8 output (100 = the maximum; lower values saturate the largest weights).
    ``rope``: float ``(cos, sin)`` tables of the calibration positions (Llama); ``s_q``/``s_k`` then
    cover both the projection outputs and the rotated values (the int8 Q/K keep one scale through
    the integer RoPE). ``causal``: the layer masks future keys (also excluded from P's range). ``s_a`` is taken over
    the real query rows only (``keep``): a padded row's output is dropped, and with SwiftMax it can be far larger than
    any real one (it would leave every real A at 0).
    """
    f = float_attention(mha, x, keep, normalizer, beta, gamma, rope=rope, causal=causal)
    scales = {"s_x": float(symmetric_scale(x))}
    for n in ("q", "k", "v", "a"):
        vals = f[n] if f"{n}_pre" not in f else np.concatenate((f[n].ravel(), f[f"{n}_pre"].ravel()))
        if n == "a" and keep is not None:  # real query rows: a padded row's output is dropped
            vals = vals[np.asarray(keep, bool)]
        scales[f"s_{n}"] = float(symmetric_scale(vals))
    p_max = 1.0
    if normalizer == "swiftmax":
        p = f["p"]
        if keep is not None or causal:  # kept keys of real query rows (padded query rows are dropped)
            mask = key_mask(keep, x.shape[0], x.shape[1], causal)[:, None]
            if keep is not None:
                mask = mask & np.asarray(keep, bool)[:, None, :, None]
            p = p[np.broadcast_to(mask, p.shape)]
        p_max = float(np.percentile(p, p_percentile)) if p.size else 1.0
    layer = build_quant_layer(mha, scales, normalizer, beta, gamma, p_max, causal=causal)
    layer.score_absmax = score_absmax(layer, x, keep, rope)
    return layer


def build_quant_layer(mha: MultiHeadAttention, scales: dict[str, float], normalizer: Normalizer,
                      beta: float | np.ndarray = 0.0, gamma: float | np.ndarray = 1.0, p_max: float = 1.0,
                      causal: bool = False) -> QuantAttentionLayer:
    """The integer layer from its float scales (``s_x, s_q, s_k, s_v, s_a``) and, for SwiftMax, the
    largest P that must fit the output: int8 weights, requantization and normalizer registers, all
    from the golden constant functions. ``n_kv_heads`` comes from ``mha``; ``causal`` is the caller's."""
    s_x, s_q, s_k, s_v, s_a = (scales[k] for k in ("s_x", "s_q", "s_k", "s_v", "s_a"))
    qp, kp, vp = (QuantLinear.from_float(_np(lin.weight), _np(lin.bias), s_x)
                  for lin in (mha.q_proj, mha.k_proj, mha.v_proj))
    sm_fmt, os_fmt = SwiftMaxFormat(), OnlineSoftmaxFormat()
    sm_regs = os_regs = None
    if normalizer == "swiftmax":
        p_frac = choose_out_frac(max(p_max, 1e-30), sm_fmt)
        sm_regs = swiftmax_head_registers(s_q, s_k, mha.head_dim, beta, gamma, p_frac, mha.n_heads, sm_fmt)
    else:
        p_frac = os_fmt.out_frac
        os_regs = online_softmax_registers(s_q, s_k, mha.head_dim, os_fmt)
    op = QuantLinear.from_float(_np(mha.o_proj.weight), _np(mha.o_proj.bias), s_a)
    return QuantAttentionLayer(
        n_heads=mha.n_heads, head_dim=mha.head_dim, s_x=s_x, s_q=s_q, s_k=s_k, s_v=s_v, s_a=s_a,
        q_proj=qp, k_proj=kp, v_proj=vp, o_proj=op,
        rq_q=requant_registers(s_x * qp.s_w / s_q), rq_k=requant_registers(s_x * kp.s_w / s_k),
        rq_v=requant_registers(s_x * vp.s_w / s_v), rq_a=requant_registers(s_v * 2.0**-p_frac / s_a),
        normalizer=normalizer, p_frac=p_frac, swiftmax=sm_regs, online=os_regs, sm_fmt=sm_fmt, os_fmt=os_fmt,
        n_kv_heads=mha.n_kv_heads, causal=causal,
    )


def _input_int8(layer: QuantAttentionLayer, x: np.ndarray, x_is_int: bool) -> np.ndarray:
    if x_is_int:
        xi = np.asarray(x)
        if xi.dtype.kind not in "iu" or (xi.size and (int(xi.min()) < -128 or int(xi.max()) > 127)):
            raise ValueError("x_is_int: the input must hold raw int8 values")
    else:
        xi = quantize_symmetric(x, layer.s_x)
    if xi.ndim != 3:
        raise ValueError(f"x must be (B, S, d), got shape {xi.shape}")
    return xi.astype(np.int8)  # raw int8 from here on (saturated by quantize/requantize)


def head_operands(layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray | None = None, x_is_int: bool = False,
                  rope: RopeTables | None = None, rope_frac: int = ROPE_FRAC) -> dict[str, np.ndarray]:
    """The int8 per-head operands the AIE array sees, from the layer input ``x`` ``(B, S, d)``.

    ``x`` is float (quantized with ``s_x``, round half-even, saturating) or raw int8 with ``x_is_int``.
    ``keep`` ``(B, S)`` bool masks padded keys. ``rope = (cos, sin)``: float tables ``(S, D)`` (as
    :func:`.attention.rope_cos_sin` gives, one table for the batch), or ``(1, S, D)`` / ``(B, S, D)`` as
    Hugging Face's ``LlamaRotaryEmbedding`` returns them; quantized to int16 with ``rope_frac``
    fractional bits (:func:`.rope_int.rope_tables_int`) and applied to Q and K after their
    requantization (:func:`.rope_int.rope_int`).

    Returns a dict of:

    * ``x`` ``(B, S, d)`` int8 at ``s_x``;
    * ``q`` ``(B, H, S, D)`` int8 at ``s_q`` (rotated when ``rope`` is given);
    * ``k`` ``(B, KV, S, D)`` int8 at ``s_k`` (rotated); ``v`` ``(B, KV, S, D)`` int8 at ``s_v`` —
      query head ``h`` pairs with K/V head ``h // layer.n_rep``;
    * ``keep`` ``(B, 1, S)`` (``(B, S, S)`` when ``layer.causal``) bool: the keys each query row may
      attend (padding, and ``j <= i`` when causal); see :func:`key_mask`;
    * with ``rope`` only: ``q_pre`` ``(B, H, S, D)``, ``k_pre`` ``(B, KV, S, D)``, the int8 projections
      before the rotation.

    ``q``/``k``/``v`` may be non-contiguous views.
    """
    return _head_operands(layer, x, keep, x_is_int, rope, rope_frac)[0]


def _head_operands(layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray | None, x_is_int: bool,
                   rope: RopeTables | None, rope_frac: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """:func:`head_operands` plus the flat ``(B, S, heads·D)`` q, k, v (q_pre, k_pre) for the trace."""
    xi = _input_int8(layer, x, x_is_int)
    b, s, _ = xi.shape
    q = requantize(layer.q_proj.acc(xi), layer.rq_q).astype(np.int8)
    k = requantize(layer.k_proj.acc(xi), layer.rq_k).astype(np.int8)
    v = requantize(layer.v_proj.acc(xi), layer.rq_v).astype(np.int8)
    kv = int(layer.n_kv_heads)
    for name, t, heads in (("q", q, layer.n_heads), ("k", k, kv), ("v", v, kv)):
        if t.shape[-1] != heads * layer.head_dim:
            raise ValueError(f"{name} projection gives {t.shape[-1]} features, expected {heads}·{layer.head_dim}")
    ops = {"x": xi, "q": _heads(q, layer.n_heads), "k": _heads(k, kv), "v": _heads(v, kv)}
    flat = {"q": q, "k": k, "v": v}
    if rope is not None:
        c, sn = rope_tables_int(*_rope_tables(rope, b, s, layer.head_dim), frac=rope_frac)
        ops["q_pre"], ops["k_pre"] = ops["q"], ops["k"]
        ops["q"] = rope_int(ops["q_pre"], c, sn, rope_frac)
        ops["k"] = rope_int(ops["k_pre"], c, sn, rope_frac)
        flat |= {"q_pre": q, "k_pre": k, "q": _merge_heads(ops["q"]), "k": _merge_heads(ops["k"])}
    ops["keep"] = key_mask(keep, b, s, layer.causal)
    return ops, flat


def normalizer_int(layer: QuantAttentionLayer, scores: np.ndarray, keep: np.ndarray | None = None,
                   head: np.ndarray | int | None = None) -> np.ndarray:
    """The layer's PL normalizer on the score accumulators ``scores`` ``(..., Sq, Sk)`` (int32 Q·Kᵀ):
    P as unsigned ``out_bits`` integers at scale ``2^-p_frac``, exactly 0 where ``keep`` (broadcastable
    to ``scores``; ``None`` = every key) is False. A narrow-score layer (``score_bits`` 8/16) first
    shift-rounds-saturates the accumulators as the engine's AIE kernel does.

    ``head``: the query head of the scores (an int, or an int array broadcastable to ``scores``), which
    selects the SwiftMax register set; ``None`` = ``scores`` are ``(B, H, Sq, Sk)`` with the layer's heads
    on axis -3 (or the layer's constants are the same for every head)."""
    bits = getattr(layer, "score_bits", 32)  # duck-typed layers (the backends' fakes) have int32 scores
    if bits != 32:
        scores = narrow_scores(scores, layer.score_shift, bits)
    if layer.normalizer == "swiftmax":
        regs = layer.swiftmax
        if head is None and isinstance(regs, SwiftMaxHeads) and not regs.uniform:
            if np.ndim(scores) < 3 or np.shape(scores)[-3] != regs.n_heads:
                raise ValueError(f"per-head SwiftMax: scores {np.shape(scores)} have no head axis of "
                                 f"{regs.n_heads} at -3; pass head=")
            head = np.arange(regs.n_heads)[:, None, None]
        return swiftmax_int_tabulated(scores, regs, keep, layer.sm_fmt, head=head)
    return online_softmax_int(scores, layer.online, keep, layer.os_fmt)


def finish_int(layer: QuantAttentionLayer, a_heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """W_O on the int8 head outputs ``a_heads`` ``(B, H, S, D)`` at ``s_a``: returns the dequantized
    output ``(B, S, d)`` (float64, ``y · s_a · s_wo``) and the accumulators ``y`` ``(B, S, d)``
    (``A·W_Oᵀ + bias``, int32 at ``s_a·s_wo`` per output channel)."""
    a = np.asarray(a_heads)
    if a.ndim != 4 or a.shape[1] != layer.n_heads or a.shape[3] != layer.head_dim:
        raise ValueError(f"head outputs must be (B, {layer.n_heads}, S, {layer.head_dim}), got {a.shape}")
    if a.dtype.kind not in "iu" or (a.size and (int(a.min()) < -128 or int(a.max()) > 127)):
        raise ValueError("head outputs must hold raw int8 values")
    y = layer.o_proj.acc(_merge_heads(a.astype(np.int8, copy=False)))
    return y * (layer.s_a * layer.o_proj.s_w), y


def score_absmax(layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray | None = None,
                 rope: RopeTables | None = None) -> int:
    """The largest ``|Q·Kᵀ|`` int32 accumulator of ``layer`` on input ``x`` ``(B, S, d)`` over the kept
    elements (padding and, for causal layers, the causal mask): what :func:`narrow_layer` needs."""
    ops = head_operands(layer, x, keep, rope=rope)
    kh = np.repeat(ops["k"], layer.n_rep, axis=1) if layer.n_rep > 1 else ops["k"]
    s = exact_int_matmul(ops["q"], np.ascontiguousarray(kh.transpose(0, 1, 3, 2)))
    kb = np.broadcast_to(ops["keep"][:, None], s.shape)
    a = np.abs(s[kb])
    return int(a.max()) if a.size else 0


def narrow_layer(layer: QuantAttentionLayer, score_bits: int, absmax: int | None = None) -> QuantAttentionLayer:
    """The engine's layer: ``layer`` with ``score_bits``-bit scores (the engine's AIE shift-round-saturate):
    ``score_shift`` is the smallest shift that keeps ``absmax`` (default ``layer.score_absmax``) unsaturated, the
    normalizer's registers are refolded for the score scale ``s_q·s_k·2^score_shift``, and the output
    requantization ``rq_a`` is refolded to the engine's signed 16-bit multiplier (the ratio ``s_v·2^-p_frac/s_a``,
    :func:`~vckattn.golden.engine.engine_requant`: the requantizer kernel at the end of the P·V cascade requantizes O
    on the AI Engine). 32 returns the int32 reference layer (its 18-bit ``rq_a``). Raises ValueError when the layer
    has no measured ``score_absmax``."""
    from dataclasses import replace

    if score_bits == layer.score_bits and absmax is None:
        return layer
    if score_bits == 32:
        shift = 0
        rq_a = layer.rq_a if layer.score_bits == 32 else requant_registers(layer.s_v * 2.0**-layer.p_frac / layer.s_a)
    else:
        m = layer.score_absmax if absmax is None else absmax
        if m is None:
            raise ValueError("narrow scores need the layer's calibration |Q·Kᵀ| maximum (score_absmax); "
                             "re-export the bundle with this version")
        shift = score_shift_for(int(m), score_bits)
        rq_a = engine_requant(layer.s_v, layer.p_frac, layer.s_a)
    if layer.normalizer == "swiftmax":
        fmt = engine_format(score_bits, replace(layer.sm_fmt, acc_bits=SwiftMaxFormat().acc_bits))
        regs = engine_registers(layer.swiftmax, layer.s_q, layer.s_k, layer.head_dim, shift, fmt)
        return replace(layer, score_bits=score_bits, score_shift=shift, swiftmax=regs, sm_fmt=fmt, rq_a=rq_a)
    regs = engine_online_registers(layer.s_q, layer.s_k, layer.head_dim, shift, layer.os_fmt)
    return replace(layer, score_bits=score_bits, score_shift=shift, online=regs, rq_a=rq_a)


def compare(out: np.ndarray, ref: np.ndarray, valid: np.ndarray | None = None) -> dict[str, float]:
    """Relative error ‖out − ref‖/‖ref‖, max abs error and mean per-token cosine over valid tokens."""
    if valid is not None:
        out, ref = out[valid], ref[valid]
    out = out.reshape(-1, out.shape[-1])
    ref = ref.reshape(-1, ref.shape[-1])
    cos = (out * ref).sum(-1) / (np.linalg.norm(out, axis=-1) * np.linalg.norm(ref, axis=-1) + 1e-300)
    return {"rel_error": float(np.linalg.norm(out - ref) / np.linalg.norm(ref)),
            "max_abs_error": float(np.abs(out - ref).max()), "cosine": float(cos.mean()),
            "min_cosine": float(cos.min())}


__all__ = ["QuantLinear", "QuantAttentionLayer", "calibrate_attention", "build_quant_layer",
           "head_operands", "normalizer_int", "finish_int", "key_mask", "float_attention", "float_swiftmax", "compare",
           "narrow_layer",
           "score_absmax"]

"""The integer attention sublayer, bit-exact: X in, Y out, for the two families the toolkit exports.

The full description: ``docs/internals/golden.md``, section ``golden/sublayer.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .attention import MultiHeadAttention, attention_scores, repeat_kv
from .bhyt_int import (
    BHyTSiteRegisters,
    NormFormat,
    bhyt_register_values,
    bhyt_site_registers,
)
from .calibrate import RowSummary, init_beta_gamma
from .convert import row_stats
from .fixedpoint import QFormat, saturate, shift_round
from .quant_attention import (
    Normalizer,
    QuantAttentionLayer,
    RopeTables,
    _rope_tables,
    calibrate_attention,
    float_attention,
    key_mask,
)
from .regmap import Mem, Reg, RegisterMap
from .requant import (
    SHIFT_BITS,
    RequantRegisters,
    quantize_symmetric,
    requant_registers,
    requantize,
    symmetric_scale,
)
from .rope_int import ROPE_FRAC, rope_tables_int


@dataclass(frozen=True)
class SublayerFormat:
    """Every width and rounding of the integer sublayer (one declaration; the kernels derive from it).

    act_bits: X, Q, K, V, A, the residual output (signed). weight_bits: W_QKV, W_O (signed, symmetric, one scale
    per output channel, max-abs). bias_bits: the biases, at ``s_in·s_w`` (round half-even when exported).
    mult_bits: the requantization multipliers (signed; 18 = one DSP58 port). res_frac, res_bits: the residual
    add's extra fractional bits and its aligned addends' width (signed, saturating). rope_frac: fractional bits of
    the int16 RoPE tables (Q1.14). norm: the BHyT site's formats (:class:`.bhyt_int.NormFormat`). Rounding: every
    requantization, the residual add and RoPE round half up; tables and weights are quantized half-even.
    """

    act_bits: int = 8
    weight_bits: int = 8
    bias_bits: int = 32
    mult_bits: int = 18
    res_frac: int = 8
    res_bits: int = 24
    rope_frac: int = ROPE_FRAC
    norm: NormFormat = field(default_factory=NormFormat)

    @property
    def act(self) -> QFormat:
        return QFormat(self.act_bits, 0)

    @property
    def res(self) -> QFormat:
        return QFormat(self.res_bits, 0)

    @property
    def bias(self) -> QFormat:
        return QFormat(self.bias_bits, 0)


#: The sublayer's formats: the one declaration every part derives from.
SUBLAYER_FORMAT = SublayerFormat()


@dataclass(frozen=True)
class ResidualRegisters:
    """The residual add's constants. ``rq_y``: per output channel, ``≈ s_y[c] / s_out · 2^res_frac`` (``s_y`` the
    W_O accumulator's scale ``s_a·s_wo[c]``); ``rq_x``: scalar, ``≈ s_res / s_out · 2^res_frac`` (``s_res`` the
    residual input's scale). ``s_out``: the int8 output's scale (informational: the host dequantizes with it)."""

    rq_y: RequantRegisters
    rq_x: RequantRegisters
    s_out: float


def residual_registers(s_y: np.ndarray | float, s_res: float, s_out: float,
                       fmt: SublayerFormat = SUBLAYER_FORMAT) -> ResidualRegisters:
    """Registers aligning ``Y`` (scale ``s_y``, per channel or scalar) and the residual input (``s_res``) to
    ``s_out`` with ``fmt.res_frac`` extra fractional bits. ValueError if a ratio is not finite and > 0, or
    too large for a ``mult_bits`` multiplier with a right shift (``s/s_out ≥ 2^(mult_bits-2-res_frac)``)."""
    if not (np.isfinite(s_out) and s_out > 0 and np.isfinite(s_res) and s_res > 0):
        raise ValueError(f"residual scales must be finite and > 0 (s_res={s_res}, s_out={s_out})")
    k = float(1 << fmt.res_frac)
    return ResidualRegisters(requant_registers(np.asarray(s_y, np.float64) / s_out * k, fmt.mult_bits),
                             requant_registers(s_res / s_out * k, fmt.mult_bits), float(s_out))


def residual_add_int(y: np.ndarray, x: np.ndarray, regs: ResidualRegisters,
                     fmt: SublayerFormat = SUBLAYER_FORMAT) -> np.ndarray:
    """``saturate8(round_half_up((y' + x') · 2^-res_frac))`` with ``y'``, ``x'`` the two addends aligned to the
    output scale (module doc). ``y``: the W_O accumulators ``(..., d)`` (int32, channels last); ``x``: the
    residual input ``(..., d)`` int8. Returns int8 at ``regs.s_out``."""
    ya = requantize(np.asarray(y), regs.rq_y, fmt.res)
    xa = requantize(np.asarray(x), regs.rq_x, fmt.res)
    return saturate(shift_round(ya + xa, fmt.res_frac, "half_up"), fmt.act).astype(np.int8)


#: ``ID`` of the PL residual-add unit's register block
RESIDUAL_ID = 0x2E5A0001


def residual_regmap(lanes: int = 4, max_d: int = 1024, fmt: SublayerFormat = SUBLAYER_FORMAT) -> RegisterMap:
    """The PL residual-add unit's register map (:class:`vckattn.hw.pl.residual.ResidualKernel`): the residual
    input's scalar ``rq_x`` (``x_mult``, ``x_shift``), the per-output-channel ``rq_y`` tables (``y_mult``,
    ``y_shift``, ``max_d`` entries, one kernel read port per lane) and status counters. Widths from ``fmt``:
    multipliers signed ``mult_bits``, shifts 0..62."""
    return RegisterMap(
        [Reg("x_mult", fmt.mult_bits, signed=True, doc=f"rq_x multiplier (signed {fmt.mult_bits}-bit): "
             "s_res/s_out·2^res_frac"),
         Reg("x_shift", SHIFT_BITS, doc="rq_x right shift (0..62, round half up)"),
         Reg("tokens", 32, access="ro", doc="tokens (Y input TLAST handshakes) since reset"),
         Reg("overlong", 32, access="ro",
             doc="tokens longer than max_d or starting beyond it (their extra channels reuse entry max_d-1)")],
        [Mem("y_mult", fmt.mult_bits, max_d, signed=True, read_ports=lanes,
             doc=f"rq_y multiplier of channel j (signed {fmt.mult_bits}-bit): s_y[j]/s_out·2^res_frac"),
         Mem("y_shift", SHIFT_BITS, max_d, read_ports=lanes, doc="rq_y right shift of channel j (0..62)")],
        ident=RESIDUAL_ID,
        version=1,
    )


#: ``ID`` of the sublayer PL top's status registers
SUBLAYER_TOP_ID = 0x5B7A0001


def sublayer_top_regmap(residual_paths: int, buffers: Sequence[tuple[str, int]]) -> RegisterMap:
    """The sublayer PL top's status registers (``hw/pl/sublayer_top.py``, window 0 of its AXI4-Lite port; its units'
    maps are the windows after it: each residual path's unit, :func:`residual_regmap`, then a decoder's RoPE units
    and site units): the sticky error flags of its routers and residual paths, read by the host after a launch,
    and the full slots of its buffers (``buffers``: each its name and slots, in the order of ``slots_full``: a bit
    a slot)."""
    slots = [n for _, n in buffers]
    if not 1 <= residual_paths <= 32:
        raise ValueError(f"{residual_paths} residual paths: 1..32 (a bit each in bad_record)")
    if not slots or sum(slots) > 32 or min(slots) < 1:
        raise ValueError(f"buffer slots {slots}: at least 1 each, 32 in all (a bit each in slots_full)")
    order = ", then ".join(f"the {name} buffer's {n}" for name, n in buffers)
    return RegisterMap(
        [Reg("bad_route", 2, access="ro", doc="sticky: bit 0, the descriptor router dropped a packet (no ROUTE "
             "beat, or a reader it does not have); bit 1, the w router did"),
         Reg("bad_record", residual_paths, access="ro", doc="sticky, a bit a residual path: it dropped a W_O "
             "record it cannot read (cols or elem_bits not the build's)"),
         Reg("residual_paths", 8, access="ro", doc="residual paths, each a residual unit in windows 1.. of the "
             "top's register space"),
         Reg("slots_full", sum(slots), access="ro", doc=f"a bit a full slot: {order} (all 0 after a launch: every "
             "reader released every slot)")],
        [],
        ident=SUBLAYER_TOP_ID,
        version=1,
    )


def residual_register_values(regs: ResidualRegisters, d: int, max_d: int = 1024) -> dict[str, int | list[int]]:
    """Golden residual registers -> the unit's register and table writes for ``d`` output channels (a scalar
    ``rq_y`` is written to every channel). ValueError if ``d > max_d`` or a shift is outside 0..62 (a multiplier
    that does not fit its register is refused by the map's :meth:`~.regmap.RegisterMap.writes`)."""
    if not 1 <= d <= max_d:
        raise ValueError(f"{d} channels outside 1..{max_d} (the residual unit's table depth)")
    my = np.broadcast_to(np.asarray(regs.rq_y.mult, np.int64), (d,))
    sy = np.broadcast_to(np.asarray(regs.rq_y.shift, np.int64), (d,))
    sx = int(regs.rq_x.shift)
    if np.any(sy < 0) or np.any(sy > 62) or not 0 <= sx <= 62:
        raise ValueError("residual shifts must be in 0..62")
    return {"x_mult": int(regs.rq_x.mult), "x_shift": sx, "y_mult": [int(v) for v in my],
            "y_shift": [int(v) for v in sy]}


# ------------------------------------------------------------------------------------------------ constants


@dataclass
class EncoderSublayer:
    """Constants of one post-LN encoder sublayer. ``attn``: the integer attention layer (input scale
    ``attn.s_x``, weights, biases, requantization and normalizer registers); ``residual``: R = X + Y at
    ``residual.s_out`` (``s_r``); ``ln_weight``, ``ln_bias``, ``ln_eps``: the float LayerNorm after the
    residual, run on the host (:func:`host_layernorm`)."""

    attn: QuantAttentionLayer
    residual: ResidualRegisters
    ln_weight: np.ndarray
    ln_bias: np.ndarray
    ln_eps: float
    fmt: SublayerFormat = SUBLAYER_FORMAT

    def __post_init__(self) -> None:
        check_formats(self.attn, self.residual, self.fmt)


@dataclass
class DecoderSublayer:
    """Constants of one pre-norm (BHyT) decoder sublayer. ``s_h``: the block input's scale; ``site_a``: BHyT
    site A (input and statistic at ``s_h``, output at ``attn.s_x``); ``attn``: the causal GQA attention layer;
    ``residual``: H' = H + Y at ``residual.s_out`` (``s_mid``, what BHyT site M reads)."""

    s_h: float
    site_a: BHyTSiteRegisters
    attn: QuantAttentionLayer
    residual: ResidualRegisters
    fmt: SublayerFormat = SUBLAYER_FORMAT

    def __post_init__(self) -> None:
        if not self.attn.causal:
            raise ValueError("a decoder sublayer's attention must be causal")
        bhyt_register_values(self.site_a, self.fmt.norm)  # every site-A constant fits its register
        check_formats(self.attn, self.residual, self.fmt)


def check_formats(attn: QuantAttentionLayer, residual: ResidualRegisters,
                  fmt: SublayerFormat = SUBLAYER_FORMAT) -> None:
    """ValueError unless every constant of a sublayer fits its declared format: the weights ``weight_bits``, the
    biases ``bias_bits``, every requantization multiplier ``mult_bits`` (signed) with a shift in [0, 62]."""
    w_fmt, m_fmt = QFormat(fmt.weight_bits, 0), QFormat(fmt.mult_bits, 0)
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        lin = getattr(attn, name)
        if not np.all(w_fmt.fits(lin.w)):
            raise ValueError(f"{name} weights do not fit {fmt.weight_bits} bits")
        if lin.b is not None and np.size(lin.b) and not np.all(fmt.bias.fits(lin.b)):
            raise ValueError(f"{name} bias does not fit {fmt.bias_bits} bits at s_in·s_w")
    regs = {"rq_q": attn.rq_q, "rq_k": attn.rq_k, "rq_v": attn.rq_v, "rq_a": attn.rq_a,
            "residual rq_y": residual.rq_y, "residual rq_x": residual.rq_x}
    for name, rq in regs.items():
        if not np.all(m_fmt.fits(rq.mult)):
            raise ValueError(f"{name} multiplier does not fit {fmt.mult_bits} signed bits")
        if np.any(np.asarray(rq.shift) < 0) or np.any(np.asarray(rq.shift) > 62):
            raise ValueError(f"{name} shift outside [0, 62]")


def _residual_for(layer: QuantAttentionLayer, s_res: float, s_out: float, fmt: SublayerFormat) -> ResidualRegisters:
    return residual_registers(layer.s_a * layer.o_proj.s_w, s_res, s_out, fmt)


def calibrate_encoder(mha: MultiHeadAttention, ln: torch.nn.Module, x: np.ndarray, keep: np.ndarray | None,
                      normalizer: Normalizer = "softmax", beta: float | np.ndarray = 0.0,
                      gamma: float | np.ndarray = 1.0, fmt: SublayerFormat = SUBLAYER_FORMAT) -> EncoderSublayer:
    """Constants of an encoder sublayer from float calibration inputs ``x`` ``(B, S, d)``: the attention layer by
    :func:`.quant_attention.calibrate_attention` (max-abs scales), ``s_r`` the max-abs scale of ``x + Attn(x)``
    over the valid tokens. ``ln``: the LayerNorm after the residual (``weight``, ``bias``, ``eps``)."""
    layer = calibrate_attention(mha, x, keep, normalizer, beta, gamma)
    f = float_attention(mha, x, keep, normalizer, beta, gamma)
    r = np.asarray(x, np.float64) + f["y"]
    s_r = float(symmetric_scale(r if keep is None else r[np.asarray(keep, bool)]))
    w = ln.weight.detach().double().numpy()
    b = ln.bias.detach().double().numpy() if getattr(ln, "bias", None) is not None else np.zeros_like(w)
    return EncoderSublayer(layer, _residual_for(layer, layer.s_x, s_r, fmt), w, b, float(ln.eps), fmt)


def calibrate_decoder(mha: MultiHeadAttention, bhyt: torch.nn.Module, h: np.ndarray, keep: np.ndarray | None,
                      rope: RopeTables, normalizer: Normalizer = "softmax", beta: float | np.ndarray = 0.0,
                      gamma: float | np.ndarray = 1.0, fmt: SublayerFormat = SUBLAYER_FORMAT) -> DecoderSublayer:
    """Constants of a decoder sublayer from float block inputs ``h`` ``(B, S, d)``: ``s_h`` max-abs of ``h``; the
    float site A (``bhyt``: a :class:`.bhyt.BHyTBlockNorms`) gives the attention input ``u``, from which
    :func:`.quant_attention.calibrate_attention` (causal, with ``rope``) builds the attention layer; site A's
    registers write ``u`` at that layer's ``s_x`` (as the exporter's BHyT constants); ``s_mid`` is the max-abs
    scale of ``h + Attn(u)``."""
    f = decoder_sublayer_float(mha, bhyt, h, keep, rope, normalizer, beta, gamma)
    layer = calibrate_attention(mha, f["u"], keep, normalizer, beta, gamma, rope=rope, causal=True)
    d = h.shape[-1]
    valid = (lambda t: t) if keep is None else (lambda t: t[np.asarray(keep, bool)])
    s_h = float(symmetric_scale(valid(np.asarray(h, np.float64))))
    s_mid = float(symmetric_scale(valid(f["h_mid"])))
    gamma_a = bhyt.weight_attn.detach().double().numpy()
    site_a = bhyt_site_registers(float(bhyt.lam_attn.detach()), float(bhyt.kappa), gamma_a, d,
                                 s_in=s_h, s_stat=s_h, s_out=layer.s_x, eps=float(bhyt.eps), fmt=fmt.norm)
    return DecoderSublayer(s_h, site_a, layer, _residual_for(layer, s_h, s_mid, fmt), fmt)


@torch.no_grad()
def swiftmax_constants(mha: MultiHeadAttention, x: np.ndarray, keep: np.ndarray | None, rope: RopeTables | None = None,
                       causal: bool = False, mode: str = "max") -> tuple[float, float]:
    """Per-layer SwiftMax ``(β, γ)`` of an untuned layer from its float calibration scores (the exporter's
    initialisation, :func:`.calibrate.init_beta_gamma`; ``max``: β = the largest row maximum, γ = the mean
    ``Σ exp(z − z_max)``, so P ≤ 1 on the calibration data). ``x``: the attention input ``(B, S, d)``."""
    f = float_attention(mha, x, keep, "softmax", rope=rope, causal=causal)
    qh = torch.from_numpy(f["q"]).reshape(*x.shape[:2], mha.n_heads, -1).transpose(1, 2)
    kh = torch.from_numpy(f["k"]).reshape(*x.shape[:2], mha.n_kv_heads, -1).transpose(1, 2)
    kh = repeat_kv(kh, mha.n_heads // mha.n_kv_heads)
    z = attention_scores(qh, kh)
    kb = torch.from_numpy(key_mask(keep, x.shape[0], x.shape[1], causal))[:, None]
    st = row_stats(z, kb)
    return init_beta_gamma(RowSummary.of(st.z_max, st.sum_exp), mode)


def rope_tables(rope: RopeTables, batch: int, seq: int, head_dim: int,
                fmt: SublayerFormat = SUBLAYER_FORMAT) -> tuple[np.ndarray, np.ndarray]:
    """The device's RoPE tables from float ``(cos, sin)`` (``(S, D)``, ``(1, S, D)`` or ``(B, S, D)``, numpy or
    torch): int16, ``rope_frac`` fractional bits (Q1.14), round half-even, saturating
    (:func:`.rope_int.rope_tables_int`); shaped to broadcast against ``(B, H, S, D)``."""
    return rope_tables_int(*_rope_tables(rope, batch, seq, head_dim), frac=fmt.rope_frac)


# ------------------------------------------------------------------------------------------------ the fused Q/K/V GEMM


@dataclass(frozen=True)
class FusedQKV:
    """The Q, K and V projections as ONE GEMM, as the device runs them: ``w`` ``(n_out, d)`` int8 = W_Q, W_K, W_V
    stacked by output channel (``n_out = (H + 2·KV)·D``); ``b`` ``(n_out,)`` int64 (zeros where a projection has no
    bias); ``rq`` the per-output-channel requantization (``rq_q`` on the first ``H·D`` channels, then ``rq_k``,
    ``rq_v``; scalars broadcast); ``split`` the channel counts ``(H·D, KV·D, KV·D)``."""

    w: np.ndarray
    b: np.ndarray
    rq: RequantRegisters
    split: tuple[int, int, int]

    def unfuse(self, out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The GEMM's output ``(..., n_out)`` -> ``(q, k, v)`` ``(..., H·D)``, ``(..., KV·D)``, ``(..., KV·D)``."""
        a, b = self.split[0], self.split[0] + self.split[1]
        return out[..., :a], out[..., a:b], out[..., b:]


def fused_qkv(layer: QuantAttentionLayer) -> FusedQKV:
    """The layer's Q/K/V projections as one GEMM (:class:`FusedQKV`): ``requantize(x·wᵀ + b, rq)`` then
    :meth:`FusedQKV.unfuse` equals the three projections of :func:`.quant_attention.head_operands` exactly (the
    same integers, per channel)."""
    lins = (layer.q_proj, layer.k_proj, layer.v_proj)
    regs = (layer.rq_q, layer.rq_k, layer.rq_v)
    n = tuple(int(lin.w.shape[0]) for lin in lins)
    w = np.concatenate([np.asarray(lin.w, np.int8) for lin in lins], axis=0)
    b = np.concatenate([np.zeros(c, np.int64) if lin.b is None else np.broadcast_to(np.asarray(lin.b, np.int64), (c,))
                        for lin, c in zip(lins, n, strict=True)])
    mult = np.concatenate([np.broadcast_to(np.asarray(r.mult, np.int64), (c,)) for r, c in zip(regs, n, strict=True)])
    shift = np.concatenate([np.broadcast_to(np.asarray(r.shift, np.int64), (c,))
                            for r, c in zip(regs, n, strict=True)])
    return FusedQKV(w, b, RequantRegisters(mult, shift), n)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ host-side helpers


def host_layernorm(r: np.ndarray, s_r: float, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """The post-LN LayerNorm after the encoder's residual, on the host in float64: ``LN(r · s_r)`` over the last
    axis (biased variance, as BERT). ``r``: the int8 residual output; returns float64."""
    z = np.asarray(r, np.float64) * s_r
    mu = z.mean(-1, keepdims=True)
    var = ((z - mu) ** 2).mean(-1, keepdims=True)
    return (z - mu) / np.sqrt(var + eps) * weight + bias


def quantize_input(x: np.ndarray, scale: float) -> np.ndarray:
    """Float ``x`` -> raw int8 at ``scale`` (round half-even, saturating): how the host feeds X (or H)."""
    return quantize_symmetric(x, scale).astype(np.int8)


# ------------------------------------------------------------------------------------------------ float references


def encoder_sublayer_float(mha: MultiHeadAttention, ln: torch.nn.Module, x: np.ndarray, keep: np.ndarray | None,
                           normalizer: Normalizer = "softmax", beta: float | np.ndarray = 0.0,
                           gamma: float | np.ndarray = 1.0) -> dict[str, np.ndarray]:
    """Float64 reference: ``y = Attn(x)``, ``r = x + y``, ``out = LN(r)`` (each ``(B, S, d)``). Converts ``mha``
    to float64 in place (as :func:`.quant_attention.float_attention` does)."""
    f = float_attention(mha, x, keep, normalizer, beta, gamma)
    r = np.asarray(x, np.float64) + f["y"]
    w = ln.weight.detach().double().numpy()
    b = ln.bias.detach().double().numpy() if getattr(ln, "bias", None) is not None else np.zeros_like(w)
    return {"y": f["y"], "r": r, "out": host_layernorm(r, 1.0, w, b, float(ln.eps))}


@torch.no_grad()
def decoder_sublayer_float(mha: MultiHeadAttention, bhyt: torch.nn.Module, h: np.ndarray, keep: np.ndarray | None,
                           rope: RopeTables, normalizer: Normalizer = "softmax", beta: float | np.ndarray = 0.0,
                           gamma: float | np.ndarray = 1.0) -> dict[str, np.ndarray]:
    """Float64 reference: ``u, s2 = BHyT_A(h)``, ``y = Attn(u)`` (causal, RoPE), ``h_mid = h + y``. Converts
    ``mha`` and ``bhyt`` to float64 in place (as :func:`.quant_attention.float_attention` does)."""
    ht = torch.from_numpy(np.asarray(h, np.float64))
    u, s2 = bhyt.double().attn_site(ht)
    f = float_attention(mha, u.numpy(), keep, normalizer, beta, gamma, rope=rope, causal=True)
    return {"u": u.numpy(), "s2": s2.numpy(), "y": f["y"], "h_mid": ht.numpy() + f["y"]}


__all__ = ["SUBLAYER_FORMAT", "SublayerFormat", "ResidualRegisters", "residual_registers", "residual_add_int",
           "RESIDUAL_ID", "residual_regmap", "SUBLAYER_TOP_ID", "sublayer_top_regmap", "residual_register_values",
           "EncoderSublayer", "DecoderSublayer", "check_formats", "FusedQKV", "fused_qkv", "calibrate_encoder",
           "calibrate_decoder",
           "swiftmax_constants", "rope_tables", "host_layernorm",
           "quantize_input", "encoder_sublayer_float", "decoder_sublayer_float"]

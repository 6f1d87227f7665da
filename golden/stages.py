"""The stage list: one declaration of what a design computes, in order, and the one integer forward that runs it.

The full description: ``docs/internals/golden.md``, section ``golden/stages.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .aie_matmul import UINT8, tile_matmul
from .bhyt_int import bhyt_site_int, sum_of_squares
from .quant_attention import (
    QuantAttentionLayer,
    RopeTables,
    _input_int8,
    _merge_heads,
    finish_int,
    head_operands,
    normalizer_int,
)
from .requant import requantize
from .rope_int import ROPE_FRAC, rope_int
from .sublayer import DecoderSublayer, EncoderSublayer, residual_add_int, rope_tables

#: where a stage may run: an AIE cascade or pipeline, a PL unit, or the host
PLACES = ("aie", "pl", "host")


@dataclass(frozen=True)
class StageDecl:
    """One stage: the tensors it ``reads`` and ``writes`` (trace names), where it may run (``places``), and
    ``doc``. Every integer tensor is a raw integer at a scale the constants name (docs/internals/golden.md)."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    places: tuple[str, ...]
    doc: str


#: every stage any design runs, in the order a sublayer runs them
STAGES: dict[str, StageDecl] = {s.name: s for s in (
    StageDecl("site_a", ("h",), ("stat", "u"), ("pl", "host"),
              "BHyT site A: the statistic S = Σ h² (int64) and U = γ ⊙ tanh(λ h / (κ √(S/d + ε))), int8 at the "
              "attention input's scale"),
    StageDecl("qkv", ("in",), ("q", "k", "v"), ("aie", "host"),
              "the Q, K and V projections (one fused GEMM on the device), requantized per output channel to int8"),
    StageDecl("rope", ("q", "k"), ("q_pre", "k_pre", "q", "k"), ("pl", "host"),
              "RoPE on every Q and K head row at its position (int16 Q1.14 tables, round half up)"),
    StageDecl("attention", ("q", "k", "v"), ("s", "p", "o", "a"), ("aie",),
              "S = Q·Kᵀ, the normalizer (SwiftMax or online softmax, in the PL), O = P·V, A = requantize(O) int8"),
    StageDecl("o_proj", ("a",), ("y",), ("aie", "host"), "Y = A·W_Oᵀ + b, int32 at s_a·s_wo per output channel"),
    StageDecl("residual", ("y", "res"), ("out",), ("pl", "host"),
              "R = Y + the block input, aligned to the output scale per channel, int8"),
)}

#: the attention-sublayer families and their stages (the block input is ``x`` for the encoder, ``h`` for the
#: decoder): a post-LN encoder (BERT, MiniLM: its LayerNorm after the residual is float, on the host) and a
#: pre-norm decoder converted to BHyT (Llama-style: site A, causal grouped-query attention with RoPE)
FAMILY_STAGES: dict[str, tuple[str, ...]] = {
    "encoder": ("qkv", "attention", "o_proj", "residual"),
    "decoder": ("site_a", "qkv", "rope", "attention", "o_proj", "residual"),
    #: the attention core alone, for any model (its residual and norms outside): RoPE only where the model has it
    "attention": ("qkv", "rope", "attention", "o_proj"),
}

#: each family's block input: the trace name of X (encoder, attention core) or H (decoder)
FAMILY_INPUT = {"encoder": "x", "decoder": "h", "attention": "x"}

#: each family's output: the residual add's int8 ``out``, or the attention core's int32 ``y``
FAMILY_OUTPUT = {"encoder": "out", "decoder": "out", "attention": "y"}

Sublayer = EncoderSublayer | DecoderSublayer
#: the constants a stage list runs on: a sublayer's, or the attention core's (a :class:`QuantAttentionLayer`)
Constants = EncoderSublayer | DecoderSublayer | QuantAttentionLayer


def family_of(consts: Constants) -> str:
    """``"encoder"``, ``"decoder"`` or ``"attention"`` (a :class:`QuantAttentionLayer`: the attention core)."""
    if isinstance(consts, QuantAttentionLayer):
        return "attention"
    return "decoder" if isinstance(consts, DecoderSublayer) else "encoder"


def attention_of(consts: Constants) -> QuantAttentionLayer:
    """The attention layer of ``consts``."""
    return consts if isinstance(consts, QuantAttentionLayer) else consts.attn


def stages_of(consts: Constants, rope: bool) -> tuple[str, ...]:
    """The stages ``consts`` run (:data:`FAMILY_STAGES`); the attention core's ``rope`` only when the model has
    RoPE tables (``rope``). ValueError for a decoder without its tables."""
    fam = family_of(consts)
    if fam == "decoder" and not rope:
        raise ValueError("a decoder sublayer needs its int16 RoPE tables")
    return tuple(s for s in FAMILY_STAGES[fam] if s != "rope" or rope)


# ------------------------------------------------------------------------------------------------ the golden stages


def _as_int8(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError(f"{name} must be (B, S, d), got shape {x.shape}")
    if x.dtype.kind not in "iu" or (x.size and (int(x.min()) < -128 or int(x.max()) > 127)):
        raise ValueError(f"{name} must hold raw int8 values")
    return x.astype(np.int8)


@dataclass
class StageInputs:
    """What the stages read besides the trace: the constants ``sub`` (a sublayer, or None for the attention
    core alone), the attention layer ``layer``, the padding ``keep`` ``(B, S)`` (None: every token), and the
    int16 RoPE tables ``rope`` (broadcastable to ``(B, H, S, D)``; None without RoPE)."""

    sub: Sublayer | None
    layer: QuantAttentionLayer
    keep: np.ndarray | None
    rope: tuple[np.ndarray, np.ndarray] | None


def _site_a(t: dict[str, np.ndarray], c: StageInputs) -> None:
    assert isinstance(c.sub, DecoderSublayer)
    t["stat"] = sum_of_squares(t["h"])
    t["u"] = bhyt_site_int(t["h"], t["stat"], c.sub.site_a, c.sub.fmt.norm).astype(np.int8)


def _qkv(t: dict[str, np.ndarray], c: StageInputs) -> None:
    ops = head_operands(c.layer, t["in"], c.keep, x_is_int=True)
    t["q"], t["k"], t["v"], t["keep"] = ops["q"], ops["k"], ops["v"], ops["keep"]


def _rope(t: dict[str, np.ndarray], c: StageInputs) -> None:
    if c.rope is None:
        raise ValueError("the rope stage needs RoPE tables")
    frac = c.sub.fmt.rope_frac if c.sub is not None else ROPE_FRAC
    t["q_pre"], t["k_pre"] = t["q"], t["k"]
    t["q"] = rope_int(t["q_pre"], c.rope[0], c.rope[1], frac)
    t["k"] = rope_int(t["k_pre"], c.rope[0], c.rope[1], frac)


def _attention(t: dict[str, np.ndarray], c: StageInputs) -> None:
    layer = c.layer
    k, v = t["k"], t["v"]
    if layer.n_rep > 1:  # GQA: query head h reads K/V head h // n_rep
        k, v = np.repeat(k, layer.n_rep, axis=1), np.repeat(v, layer.n_rep, axis=1)
    t["s"] = tile_matmul(t["q"], np.ascontiguousarray(k.transpose(0, 1, 3, 2)))
    kb = None if c.keep is None and not layer.causal else t["keep"][:, None]
    t["p"] = normalizer_int(layer, t["s"], kb)
    t["o"] = tile_matmul(t["p"], v, a_fmt=UINT8)
    t["a"] = requantize(t["o"], layer.rq_a).astype(np.int8)


def _o_proj(t: dict[str, np.ndarray], c: StageInputs) -> None:
    t["y"] = finish_int(c.layer, t["a"])[1]


def _residual(t: dict[str, np.ndarray], c: StageInputs) -> None:
    assert c.sub is not None
    t["out"] = residual_add_int(t["y"], t["res"], c.sub.residual, c.sub.fmt)


#: the golden integer function of every stage: reads and writes the trace in place
GOLDEN: dict[str, Callable[[dict[str, np.ndarray], StageInputs], None]] = {
    "site_a": _site_a, "qkv": _qkv, "rope": _rope, "attention": _attention, "o_proj": _o_proj,
    "residual": _residual,
}


#: a caller's stage runner: ``run(stage, trace, inputs)`` runs the stage on the trace and returns True, or returns
#: False to leave it to golden
StageRunner = Callable[[str, dict[str, np.ndarray], StageInputs], bool]


def run_stages(stages: tuple[str, ...], trace: dict[str, np.ndarray], c: StageInputs,
               run: StageRunner | None = None) -> dict[str, np.ndarray]:
    """Run ``stages`` in order on ``trace`` (holding the block input under ``in`` and ``res``, and ``h`` for
    site A), each by ``run(stage, trace, c)`` when given and it returns True (a device's stage), else by its golden
    function (:data:`GOLDEN`). The attention input ``in`` becomes site A's ``u`` after site A. Returns ``trace``."""
    for name in stages:
        if name not in GOLDEN:
            raise ValueError(f"unknown stage {name!r}")
        if run is None or not run(name, trace, c):
            GOLDEN[name](trace, c)
        if name == "site_a":
            trace["in"] = trace["u"]
    return trace


def input_scale(consts: Constants) -> float:
    """The scale of the stage list's int8 input: H's ``s_h`` for the decoder, X's ``s_x`` otherwise."""
    return consts.s_h if isinstance(consts, DecoderSublayer) else attention_of(consts).s_x


def sublayer_int(consts: Constants, x: np.ndarray, keep: np.ndarray | None = None,
                 rope: tuple[np.ndarray, np.ndarray] | None = None,
                 run: StageRunner | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A sublayer (or the attention core alone, ``consts`` a :class:`QuantAttentionLayer`) on its raw int8 block
    input ``x`` ``(B, S, d)`` (at :func:`input_scale`), every stage of its family (:func:`stages_of`) by its golden
    function, or by ``run`` where that takes it (:func:`run_stages`: a device's stages). ``keep`` ``(B, S)`` bool masks
    padded keys (the decoder is causal too); ``rope`` the int16 tables ``(cos, sin)`` (:func:`.sublayer.rope_tables`,
    broadcastable to ``(B, H, S, D)``): the decoder's, or a RoPE model's attention core's.

    Returns the output (:data:`FAMILY_OUTPUT`: the residual output ``(B, S, d)`` int8 at ``residual.s_out``; the
    attention core's ``y``) and the trace: the block input (``x`` or ``h``); decoder: ``stat`` ``(B, S, 1)`` int64
    (what site M reads), ``u`` int8 at ``attn.s_x``; with RoPE ``q_pre``, ``k_pre`` before it; ``q`` ``(B, H, S,
    D)``, ``k``, ``v`` ``(B, KV, S, D)`` int8; ``s``, ``p``, ``o``; ``a`` ``(B, H, S, D)`` int8; ``y`` ``(B, S, d)``
    int32."""
    fam = family_of(consts)
    xi = _as_int8(x, FAMILY_INPUT[fam])
    sub = None if fam == "attention" else consts
    t = run_stages(stages_of(consts, rope is not None), {FAMILY_INPUT[fam]: xi, "in": xi, "res": xi},
                   StageInputs(sub, attention_of(consts), keep, rope), run)  # type: ignore[arg-type]
    out = t.pop("out") if FAMILY_OUTPUT[fam] == "out" else t["y"]
    for scratch in ("in", "res", "keep"):
        t.pop(scratch)
    return out, t


def attention_int(layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray | None = None,
                  x_is_int: bool = False, rope: RopeTables | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The attention core alone (stages ``qkv``, ``rope`` when given, ``attention``, ``o_proj``: what an
    attention-only design computes, its residual and norms outside) on ``x`` ``(B, S, d)``: float, quantized with
    ``s_x`` (round half-even, saturating), or raw int8 with ``x_is_int``. ``keep`` ``(B, S)`` bool masks padded
    keys; ``layer.causal`` adds the causal mask. ``rope``: float ``(cos, sin)`` tables ``(S, D)``, ``(1, S, D)``
    or ``(B, S, D)`` (:func:`.quant_attention.head_operands`), quantized to int16 Q1.14 and applied to the int8
    Q/K.

    Returns the dequantized output ``(B, S, d)`` (float64, ``y · s_a · s_wo``) and the integers: ``x`` ``(B, S,
    d)``; ``q`` ``(B, S, H·D)``, ``k``, ``v`` ``(B, S, KV·D)`` (rotated with ``rope``; then also ``q_pre``,
    ``k_pre`` before it, in the same layout); ``s`` scores ``(B, H, S, S)``; ``p``; ``o`` P·V ``(B, H, S, D)``;
    ``a`` ``(B, S, H·D)``; ``y`` ``(B, S, d)`` int32."""
    xi = _input_int8(layer, x, x_is_int)
    b, s, _ = xi.shape
    tables = None if rope is None else tuple(rope_tables(rope, b, s, layer.head_dim))
    _, t = sublayer_int(layer, xi, keep, tables)  # type: ignore[arg-type]
    trace: dict[str, Any] = {"x": xi, "s": t["s"], "p": t["p"], "o": t["o"], "y": t["y"]}
    for name in ("q", "k", "v", "a", "q_pre", "k_pre"):
        if name in t:
            trace[name] = _merge_heads(t[name])
    return t["y"] * (layer.s_a * layer.o_proj.s_w), trace


__all__ = ["FAMILY_INPUT", "FAMILY_OUTPUT", "FAMILY_STAGES", "GOLDEN", "PLACES", "STAGES", "Constants", "StageDecl",
           "StageInputs", "StageRunner", "Sublayer", "attention_int", "attention_of", "family_of", "input_scale",
           "run_stages",
           "stages_of", "sublayer_int"]

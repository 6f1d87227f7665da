"""Attention-row normalizers: softmax and its hardware-motivated replacements.

The full description: ``docs/internals/golden.md``, section ``golden/normalizers.py``.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

#: Clamp range of the SwiftMax exponent ``z - beta`` (official operator; keeps
#: ``base^t`` finite in fp16/bf16 under AMP).
SWIFTMAX_CLAMP = (-10.0, 40.0)
#: the largest code of the kernel's uint8 P: P's grid is ``p_max / P_LEVELS`` (``p_max = 255·2^-p_frac``)
P_LEVELS = 255


def _keep_like(scores: Tensor, keep: Tensor | None) -> Tensor:
    """Boolean keep mask broadcast to ``scores``' shape (all ``True`` when None)."""
    if keep is None:
        return torch.ones_like(scores, dtype=torch.bool)
    if keep.dtype != torch.bool:
        raise TypeError(f"keep mask must be bool (True = attend), got {keep.dtype}")
    return keep.expand_as(scores)


def softmax(scores: Tensor, keep: Tensor | None = None) -> Tensor:
    """Softmax over the last dim with exact zeros at masked positions.

    Args:
        scores: ``(..., Sq, Sk)`` scores z (natural-log units).
        keep: optional bool mask broadcastable to ``scores``; ``False`` = masked.

    Returns:
        Weights of ``scores``' shape; each unmasked row sums to 1, fully masked rows are 0.
    """
    keep_b = _keep_like(scores, keep)
    z = scores.masked_fill(~keep_b, float("-inf"))
    m = z.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # fully masked rows
    e = torch.exp(z - m)  # exp(-inf) = 0 at masked positions
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def online_softmax(scores: Tensor, keep: Tensor | None = None, block: int = 16) -> Tensor:
    """Online (one-pass statistics) softmax over key blocks of ``block`` columns.

    Pass 1 walks the key blocks left to right keeping the running max ``m`` and the
    running sum ``l`` rescaled to the current max; pass 2 (the hardware "second
    pass") computes ``exp(z - m) / l``. This is the row-buffered baseline that
    SwiftMax removes.
    """
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    keep_b = _keep_like(scores, keep)
    z = scores.masked_fill(~keep_b, float("-inf"))
    shape = (*z.shape[:-1], 1)
    m = torch.full(shape, float("-inf"), dtype=z.dtype, device=z.device)
    l = torch.zeros(shape, dtype=z.dtype, device=z.device)
    for start in range(0, z.shape[-1], block):
        zb = z[..., start : start + block]
        m_new = torch.maximum(m, zb.amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        # exp(m - m_new): 0 when m = -inf (nothing seen yet); l is 0 then anyway.
        l = l * torch.exp(m - m_safe) + torch.exp(zb - m_safe).sum(dim=-1, keepdim=True)
        m = m_new
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return torch.exp(z - m_safe) / torch.where(l > 0, l, torch.ones_like(l))


def softermax(scores: Tensor, keep: Tensor | None = None, block: int = 16) -> Tensor:
    """Softermax: base-2 online softmax with an integer running max.

    ``m`` is kept as ``ceil`` of the running maximum, so the rescale factor
    ``2^(m_old - m_new)`` is an exact power of two (a shift). The result is
    ``2^z / sum 2^z`` per row, i.e. ``softmax(z * ln 2)``.
    """
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    keep_b = _keep_like(scores, keep)
    z = scores.masked_fill(~keep_b, float("-inf"))
    shape = (*z.shape[:-1], 1)
    m = torch.full(shape, float("-inf"), dtype=z.dtype, device=z.device)
    l = torch.zeros(shape, dtype=z.dtype, device=z.device)
    for start in range(0, z.shape[-1], block):
        zb = z[..., start : start + block]
        m_new = torch.maximum(m, torch.ceil(zb.amax(dim=-1, keepdim=True)))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        shift = torch.where(torch.isfinite(m), m - m_safe, torch.full_like(m, float("-inf")))
        l = l * torch.exp2(shift) + torch.exp2(zb - m_safe).sum(dim=-1, keepdim=True)
        m = m_new
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return torch.exp2(z - m_safe) / torch.where(l > 0, l, torch.ones_like(l))


def round_ste(x: Tensor) -> Tensor:
    """``floor(x + 0.5)`` (round half up, the kernels' rounding) with the identity as its gradient (straight-through
    estimator: a rounding has no useful gradient)."""
    return x + (torch.floor(x + 0.5) - x).detach()


def narrow_scores_ste(scores: Tensor, step: float | Tensor, bits: int = 8) -> Tensor:
    """Scores ``z`` on the engine's narrow-score grid, in z units: ``clamp(round_half_up(z/step), −(2^(b−1)−1),
    2^(b−1)−1)·step`` (the float image of :func:`vckattn.golden.engine.narrow_scores`, ``step`` the score LSB in z
    units ``s_q·s_k·2^score_shift/√d``). Straight-through inside the range (:func:`round_ste`); no gradient where
    it saturates (the hardware clamps there too)."""
    if not 2 <= bits <= 31:
        raise ValueError(f"bits must be 2..31, got {bits}")
    top = float((1 << (bits - 1)) - 1)
    return torch.clamp(round_ste(scores / step), -top, top) * step


def swiftmax(
    scores: Tensor,
    beta: Tensor,
    gamma: Tensor,
    keep: Tensor | None = None,
    base: Literal["e", "2"] = "e",
    clamp: tuple[float, float] = SWIFTMAX_CLAMP,
    p_max: float | Tensor | None = None,
) -> Tensor:
    """SwiftMax / ConSmax weights ``base^clamp(z - beta, lo, hi) / gamma``; masked → exactly 0.

    Args:
        scores: ``(B, H, Sq, Sk)`` (or any ``(..., Sq, Sk)``) scores z.
        beta: scalar (per layer) or ``(H,)`` (per head) shift, in the units of z.
        gamma: scalar or ``(H,)`` positive divisor.
        keep: optional bool keep mask.
        base: ``"e"`` (paper default) or ``"2"`` (hardware-friendly; a distribution shift).
        clamp: range of the exponent ``z - beta`` (in z units, before the base is applied).
        p_max: saturation of the weights (``min(p, p_max)``; no gradient above it), a scalar; None: none.

    No reduction over the row: rows do not sum to 1 in general.
    """
    beta_b = _per_head(beta, scores)
    gamma_b = _per_head(gamma, scores)
    t = torch.clamp(scores - beta_b, clamp[0], clamp[1])
    e = torch.exp(t) if base == "e" else torch.exp2(t)
    p = e / gamma_b
    if p_max is not None:
        p = torch.clamp(p, max=p_max)
    if keep is None:
        return p
    return torch.where(_keep_like(scores, keep), p, torch.zeros_like(p))


def _per_head(param: Tensor, scores: Tensor) -> Tensor:
    """Broadcast a scalar or per-head ``(H,)`` parameter against ``(B, H, Sq, Sk)`` scores."""
    if param.dim() == 0:
        return param
    if param.dim() == 1 and scores.dim() >= 3 and param.shape[0] == scores.shape[-3]:
        return param.view(-1, 1, 1)
    raise ValueError(
        f"SwiftMax parameter of shape {tuple(param.shape)} does not match scores {tuple(scores.shape)}: "
        "expected a scalar (per layer) or (H,) with H = scores.shape[-3] (per head)"
    )


class Normalizer(nn.Module):
    """Base class: ``forward(scores, keep) -> weights`` (see module docstring)."""

    #: True when the weights of a row sum to 1 (softmax family).
    normalizes_rows: bool = True

    def forward(self, scores: Tensor, keep: Tensor | None = None) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class Softmax(Normalizer):
    """Reference softmax (:func:`softmax`)."""

    def forward(self, scores: Tensor, keep: Tensor | None = None) -> Tensor:
        return softmax(scores, keep)


class OnlineSoftmax(Normalizer):
    """Online softmax over key blocks (:func:`online_softmax`)."""

    def __init__(self, block: int = 16) -> None:
        super().__init__()
        self.block = block

    def forward(self, scores: Tensor, keep: Tensor | None = None) -> Tensor:
        return online_softmax(scores, keep, self.block)

    def extra_repr(self) -> str:
        return f"block={self.block}"


class Softermax(Normalizer):
    """Base-2 online softmax with integer running max (:func:`softermax`).

    Note: it normalizes ``2^z``, so it is a different distribution from softmax
    of the same scores unless the model was trained with it (or z is pre-scaled
    by ``log2(e)``, which is what ``prescale=True`` does).
    """

    def __init__(self, block: int = 16, prescale: bool = False) -> None:
        super().__init__()
        self.block = block
        self.prescale = prescale

    def forward(self, scores: Tensor, keep: Tensor | None = None) -> Tensor:
        z = scores * (1.0 / math.log(2.0)) if self.prescale else scores
        return softermax(z, keep, self.block)

    def extra_repr(self) -> str:
        return f"block={self.block}, prescale={self.prescale}"


class SwiftMax(Normalizer):
    """Learnable reduction-free normalizer ``base^clamp(z - beta, -10, 40) / gamma``.

    ``beta`` and ``gamma`` are per layer (scalars, the SwiftMax paper) or per head
    (``num_heads`` given; the ConSmax paper). Initial values: the SwiftMax recipe
    takes ``beta`` = mean row max of z and ``gamma`` = mean of
    ``sum_j exp(z_j - z_max)`` from calibration data; ConSmax's defaults are
    ``beta = 2.5``, ``gamma = 100``.

    ``gamma`` must stay positive; it is a plain parameter (as in the papers), and
    :meth:`check` reports a non-positive or non-finite value.

    ``p_max`` (optional, one value for the layer): the weights saturate there (:func:`swiftmax`). It is a buffer,
    saved with the model (``…vckattn_normalizer.p_max``, only when set), not trained: the top of the P format
    the layer is tuned for, where the integer kernel saturates too
    (:func:`vckattn.golden.swiftmax_int.saturation`).
    """

    normalizes_rows = False

    def __init__(
        self,
        beta: float = 2.5,
        gamma: float = 100.0,
        num_heads: int | None = None,
        base: Literal["e", "2"] = "e",
        p_max: float | None = None,
    ) -> None:
        super().__init__()
        if base not in ("e", "2"):
            raise ValueError(f"base must be 'e' or '2', got {base!r}")
        if not gamma > 0:
            raise ValueError(f"gamma must be > 0, got {gamma}")
        shape = () if num_heads is None else (num_heads,)
        self.beta = nn.Parameter(torch.full(shape, float(beta)))
        self.gamma = nn.Parameter(torch.full(shape, float(gamma)))
        self.base = base
        self.register_buffer("p_max", None)
        self.set_p_max(p_max)
        # the deployed numerics in float (set_deployed); not saved with the model (the export measures its own)
        self.register_buffer("score_step", None, persistent=False)
        self.score_bits = 32
        self.p_round = False

    def set_p_max(self, p_max: float | None) -> None:
        """Saturate the weights at ``p_max`` (> 0, finite), or not at all (None)."""
        if p_max is not None and not (math.isfinite(p_max) and p_max > 0):
            raise ValueError(f"p_max must be finite and > 0, got {p_max}")
        self.p_max = None if p_max is None else torch.tensor(float(p_max), device=self.beta.device)

    def set_deployed(self, score_step: float | None = None, score_bits: int = 8, p_round: bool = False) -> None:
        """Model the deployed numerics in float: scores narrowed to ``score_bits`` bits with LSB ``score_step``
        (z units, > 0; None: scores unchanged) and, with ``p_round`` (needs ``p_max``, the top of the P format
        ``(2^8 − 1)·2^-p_frac``), P rounded half up to its grid ``p_max/255``. Straight-through gradients."""
        if score_step is not None and not (math.isfinite(score_step) and score_step > 0):
            raise ValueError(f"score_step must be finite and > 0, got {score_step}")
        if p_round and self.p_max is None:
            raise ValueError("rounding P to its format needs p_max (the format's top)")
        self.score_step = None if score_step is None else torch.tensor(float(score_step), device=self.beta.device)
        self.score_bits = int(score_bits)
        self.p_round = bool(p_round)

    def forward(self, scores: Tensor, keep: Tensor | None = None) -> Tensor:
        if self.score_step is not None:
            scores = narrow_scores_ste(scores, self.score_step.to(scores.dtype), self.score_bits)
        p_max = None if self.p_max is None else self.p_max.to(scores.dtype)
        p = swiftmax(scores, self.beta.to(scores.dtype), self.gamma.to(scores.dtype), keep, self.base,
                     p_max=p_max)
        if self.p_round and p_max is not None:
            lsb = p_max / P_LEVELS
            p = round_ste(p / lsb) * lsb
        return p

    def check(self) -> None:
        """Raise ValueError if beta/gamma are non-finite or gamma <= 0."""
        if not torch.isfinite(self.beta).all():
            raise ValueError(f"SwiftMax beta is not finite: {self.beta.detach().tolist()}")
        if not (torch.isfinite(self.gamma).all() and (self.gamma > 0).all()):
            raise ValueError(f"SwiftMax gamma must be finite and > 0: {self.gamma.detach().tolist()}")

    def extra_repr(self) -> str:
        per = "layer" if self.beta.dim() == 0 else f"head (H={self.beta.shape[0]})"
        sat = "" if self.p_max is None else f", p_max={float(self.p_max):g}"
        dep = "" if self.score_step is None else f", int{self.score_bits} scores step={float(self.score_step):g}"
        return f"per={per}, base={self.base}{sat}{dep}{', P rounded' if self.p_round else ''}"



# ----------------------------------------------------------------------------- peers on their integer paths

#: HCCS (Head-Calibrated Clipped-Linear Softmax; Danopoulos, Lupi, Kagan, Pierini, arXiv:2604.02292) as aie4ml's
#: int8 kernel computes it (github.com/dimdano/aie4ml, ``src/aie4ml/templates/nnet_utils/softmax/softmax.cpp``,
#: ``softmax_i8::softmax_row``; its parameter checks in ``src/aie4ml/op_impls/families/softmax/common.py``): the
#: shift of the reciprocal (its ``DEFAULT_INV_SHIFT``) and the largest B, S, Dmax its registers hold.
HCCS_INV_SHIFT = 15
HCCS_B_MAX, HCCS_S_MAX, HCCS_DMAX_MAX = 32767, 127, 127


def hccs_check(b: Tensor, s: Tensor, dmax: Tensor, cols: int) -> None:
    """aie4ml's checks of HCCS constants for rows of ``cols`` columns (ValueError): ``0 <= B <= 32767``,
    ``0 <= S, Dmax <= 127``, ``B - S·Dmax >= 0`` (no negative score), ``cols·(B - S·Dmax) >= 256`` (the
    reciprocal's range), ``cols·B <= 32767`` (the row sum fits int16)."""
    b, s, dmax = (torch.as_tensor(v, dtype=torch.int64) for v in (b, s, dmax))
    if cols < 1:
        raise ValueError(f"cols must be >= 1, got {cols}")
    for name, v, hi in (("B", b, HCCS_B_MAX), ("S", s, HCCS_S_MAX), ("Dmax", dmax, HCCS_DMAX_MAX)):
        if bool(((v < 0) | (v > hi)).any()):
            raise ValueError(f"HCCS {name} must be in [0, {hi}], got {v.tolist()}")
    low = b - s * dmax
    if bool((low < 0).any()):
        raise ValueError(f"HCCS needs B - S*Dmax >= 0, got {low.tolist()}")
    if bool((low * cols < 256).any()):
        raise ValueError(f"HCCS needs cols*(B - S*Dmax) >= 256 (cols {cols}), got {(low * cols).tolist()}")
    if bool((b * cols > 32767).any()):
        raise ValueError(f"HCCS needs cols*B <= 32767 (cols {cols}), got {(b * cols).tolist()}")


def _row_max(x: Tensor, keep_b: Tensor) -> Tensor:
    m = x.masked_fill(~keep_b, float("-inf")).amax(dim=-1, keepdim=True)
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # fully masked rows


def hccs_int(codes: Tensor, b: Tensor, s: Tensor, dmax: Tensor, keep: Tensor | None = None,
             inv_shift: int = HCCS_INV_SHIFT) -> Tensor:
    """HCCS on int8 score codes ``(..., H, Sq, Sk)``, bit-exact to aie4ml's linear uint8 kernel (reciprocal by
    division, floor rounding, saturation): ``m`` = the row's max code, ``d = min(m - x, Dmax)``, score
    ``e = B - S·d``, ``inv = floor((255·2^inv_shift) / Σ e)``, ``P = min(floor(e·inv / 2^inv_shift), 255)``
    (uint8 codes; the probability is ``P·2^-8``). ``B``, ``S``, ``Dmax``: scalars or per head ``(H,)``.
    Masked columns (``keep`` False) are left out of the max and the sum and give exactly 0 (the kernel has no
    mask: its rows are whole); a fully masked row is 0. Returns int64 codes."""
    keep_b = _keep_like(codes, keep)
    x = codes.to(torch.int64)
    b_, s_, d_ = (_per_head(torch.as_tensor(v, dtype=torch.int64, device=x.device), x) for v in (b, s, dmax))
    m = x.masked_fill(~keep_b, -(1 << 40)).amax(dim=-1, keepdim=True)
    e = b_ - s_ * torch.minimum(m - x, d_)
    e = torch.where(keep_b, e, torch.zeros_like(e))
    total = e.sum(dim=-1, keepdim=True)
    inv = torch.where(total > 0, (255 << inv_shift) // torch.clamp(total, min=1), torch.zeros_like(total))
    return torch.clamp((e * inv) >> inv_shift, max=255)


def hccs(scores: Tensor, b: Tensor, s: Tensor, dmax: Tensor, step: float | Tensor, keep: Tensor | None = None,
         exact: bool = True) -> Tensor:
    """HCCS weights of float scores ``z`` whose int8 codes are ``clamp(round(z/step), ±127)`` (``step``: the
    score LSB in z units), for quantization-aware training: the forward value is :func:`hccs_int`'s ``P·2^-8``
    (``exact``; else the unrounded ``(255/256)·e/Σe``), the gradient that of ``(255/256)·e/Σe`` with the codes'
    rounding passed straight through (:func:`narrow_scores_ste`). Masked → exactly 0."""
    keep_b = _keep_like(scores, keep)
    x = narrow_scores_ste(scores, step, 8) / step  # codes, straight-through
    b_, s_, d_ = (_per_head(torch.as_tensor(v, dtype=x.dtype, device=x.device), x) for v in (b, s, dmax))
    e = b_ - s_ * torch.minimum(_row_max(x, keep_b) - x, d_)
    e = torch.where(keep_b, e, torch.zeros_like(e))
    total = e.sum(dim=-1, keepdim=True)
    p = e * (255.0 / 256.0) / torch.where(total > 0, total, torch.ones_like(total))
    if not exact:
        return p
    with torch.no_grad():
        q = hccs_int(torch.round(x.detach()), b, s, dmax, keep).to(p.dtype) / 256.0
    return p + (q - p).detach()


class HCCS(Normalizer):
    """HCCS (:func:`hccs`): a clipped-linear softmax surrogate on int8 scores with per-head integer constants
    ``B``, ``S``, ``Dmax`` (buffers, not trained; calibrated by :func:`vckattn.golden.calibrate.calibrate_hccs`)
    and the layer's score LSB ``step``. It keeps the row maximum and the row sum (a reduction and a division
    per row), as softmax does."""

    def __init__(self, b: Tensor | float, s: Tensor | float, dmax: Tensor | float, step: float,
                 exact: bool = True) -> None:
        super().__init__()
        if not (math.isfinite(step) and step > 0):
            raise ValueError(f"step must be finite and > 0, got {step}")
        for name, v in (("b", b), ("s", s), ("dmax", dmax)):
            self.register_buffer(name, torch.as_tensor(v, dtype=torch.int64).clone(), persistent=False)
        self.step = float(step)
        self.exact = exact

    def forward(self, scores: Tensor, keep: Tensor | None = None) -> Tensor:
        return hccs(scores, self.b, self.s, self.dmax, self.step, keep, self.exact)

    def extra_repr(self) -> str:
        return f"B={self.b.tolist()}, S={self.s.tolist()}, Dmax={self.dmax.tolist()}, step={self.step:g}"


class QuantizedSoftmax(Normalizer):
    """Softmax as an integer kernel computes it, in float: scores on the 8-bit grid of LSB ``step``
    (:func:`narrow_scores_ste`), P rounded half up to ``2^-p_frac`` and saturated at ``255·2^-p_frac`` (the online
    softmax kernel's UQ0.8 P with ``p_frac`` 8). Not bit-exact: the kernel's exp is a table."""

    def __init__(self, step: float, p_frac: int = 8) -> None:
        super().__init__()
        if not (math.isfinite(step) and step > 0):
            raise ValueError(f"step must be finite and > 0, got {step}")
        self.step = float(step)
        self.p_frac = int(p_frac)

    def forward(self, scores: Tensor, keep: Tensor | None = None) -> Tensor:
        p = softmax(narrow_scores_ste(scores, self.step, 8), keep)
        lsb = 2.0 ** -self.p_frac
        return torch.clamp(round_ste(p / lsb), max=P_LEVELS) * lsb

    def extra_repr(self) -> str:
        return f"step={self.step:g}, p_frac={self.p_frac}"


def make_normalizer(kind: str, **kwargs: object) -> Normalizer:
    """Build a normalizer by name: ``softmax``, ``online_softmax``, ``softermax``, ``swiftmax``."""
    table: dict[str, type[Normalizer]] = {
        "softmax": Softmax,
        "online_softmax": OnlineSoftmax,
        "softermax": Softermax,
        "swiftmax": SwiftMax,
    }
    if kind not in table:
        raise ValueError(f"unknown normalizer {kind!r}; choose one of {sorted(table)}")
    return table[kind](**kwargs)  # type: ignore[arg-type]

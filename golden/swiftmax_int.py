"""SwiftMax normalizer, bit-exact integer model (what the PL kernel computes).

The full description: ``docs/internals/golden.md``, section ``golden/swiftmax_int.py``.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .fixedpoint import QFormat, quantize, saturate, shift_round
from .funcunits import LOG2E, Pow2Config, pow2
from .regmap import Mem, Reg, RegisterMap, RegisterValues

CLAMP_LO, CLAMP_HI = -10.0, 40.0  # range of z - β (natural-log units), as the float operator


@dataclass(frozen=True)
class SwiftMaxFormat:
    """Build-time parameters of the SwiftMax kernel (fixed in a bitstream)."""

    acc_bits: int = 24  # score accumulator input width (signed, saturated)
    a_bits: int = 24  # width of the a_mult register (signed)
    t_frac: int = 12  # fractional bits of the log2-domain exponent
    reg_bits: int = 24  # width of b_beta, u_lo, u_hi, c_out (signed)
    out_bits: int = 8  # unsigned P output width
    max_heads: int = 32  # register sets (b_beta, c_out) the kernel holds: one per head (a power of two)
    pow2: Pow2Config = field(default_factory=lambda: Pow2Config(in_frac=12, lut_bits=6, out_frac=15))

    def __post_init__(self) -> None:
        if self.pow2.in_frac != self.t_frac:
            raise ValueError("pow2.in_frac must equal t_frac")
        if self.max_heads < 1 or self.max_heads & (self.max_heads - 1):
            raise ValueError(f"max_heads must be a power of two >= 1, got {self.max_heads}")

    @property
    def head_bits(self) -> int:
        """Bits of the head index that selects a register set (``log2 max_heads``; 0 for one set)."""
        return (self.max_heads - 1).bit_length()

    @property
    def out_max(self) -> int:
        return (1 << self.out_bits) - 1

    @property
    def max_a_shift(self) -> int:
        """Largest valid ``a_shift``: the product ``acc·a_mult`` is ``acc_bits + a_bits`` wide."""
        return self.acc_bits + self.a_bits - 1


#: Value of the kernel's read-only ID register.
SWIFTMAX_ID = 0x5F1F7A01


def swiftmax_regmap(fmt: SwiftMaxFormat = SwiftMaxFormat(), read_ports: int = 1) -> RegisterMap:
    """The SwiftMax kernel's AXI4-Lite register map: the one declaration of its registers.

    Version 2 (per-head constants): the score scale and the clamps are one register each (they depend on
    the layer's Q/K scales only); β and γ are per head, so ``b_beta`` and ``c_out`` are memories of
    ``fmt.max_heads`` entries, entry ``h`` used for the scores of head ``h`` (the head index rides with the
    scores: TUSER on the v1 stream, the packet header on the engine's). Per-layer constants are the
    special case of equal entries. ``read_ports``: the kernel's read ports of each memory (one per
    independent score stream: 1 for the v1 kernel, one per pipeline for the engine's PL top).

    The Amaranth kernel (``hw/pl/swiftmax.py``), the engine's PL top, the manifests, the bundle schema,
    the testbenches and the host backends all derive from it.
    """
    rb = fmt.reg_bits
    return RegisterMap(
        [
            Reg("a_mult", fmt.a_bits, signed=True, doc="A·2^t_frac ≈ a_mult·2^-a_shift"),
            Reg("a_shift", 6, doc="right shift of acc·a_mult (round half up)"),
            Reg("u_lo", rb, signed=True, doc="clamp low of (z - beta)·log2(e), Q.t_frac"),
            Reg("u_hi", rb, signed=True, doc="clamp high of (z - beta)·log2(e), Q.t_frac"),
            Reg("elements", 32, access="ro", doc="kept elements processed since reset"),
            Reg("rows", 32, access="ro", doc="rows (TLAST beats) processed since reset"),
        ],
        [
            Mem("b_beta", rb, fmt.max_heads, signed=True, read_ports=read_ports,
                doc="per head h: -beta_h·log2(e), Q.t_frac"),
            Mem("c_out", rb, fmt.max_heads, signed=True, read_ports=read_ports,
                doc="per head h: out_frac - log2(gamma_h), Q.t_frac"),
        ],
        ident=SWIFTMAX_ID,
        version=2,
    )


#: the register values shared by every head of a layer, and the per-head ones (memories of the map)
SHARED_FIELDS = ("a_mult", "a_shift", "u_lo", "u_hi", "out_frac")
HEAD_FIELDS = ("b_beta", "c_out")


class SwiftMaxRegisters(RegisterValues):
    """Runtime constants of one head (or of every head of a per-layer layer): ``a_mult, a_shift, b_beta,
    u_lo, u_hi, c_out`` (their meanings are the ``doc`` strings of :func:`swiftmax_regmap`; ``b_beta`` and
    ``c_out`` are this head's entries of its memories), plus ``out_frac``: P's scale is ``2^-out_frac``
    (informational for the host; already folded into ``c_out``, so no register). A layer's constants are
    :class:`SwiftMaxHeads`."""

    regmap = swiftmax_regmap()
    extra = ("out_frac",)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return ("a_mult", "a_shift", "b_beta", "u_lo", "u_hi", "c_out", *cls.extra)


class SwiftMaxHeads:
    """The SwiftMax constants of one layer: one :class:`SwiftMaxRegisters` per head, equal in
    :data:`SHARED_FIELDS` (the score scale, the clamps and P's scale are the layer's), free in
    :data:`HEAD_FIELDS` (β and γ). Per-layer constants are the case of equal heads (:meth:`broadcast`).

    Reads as a sequence of heads (``heads[h]``, ``len``, iteration); the shared fields read as
    attributes (``heads.a_mult``, ``heads.out_frac``). Frozen and hashable.
    """

    def __init__(self, heads: Sequence[SwiftMaxRegisters]) -> None:
        heads = tuple(heads)
        if not heads:
            raise ValueError("SwiftMaxHeads needs at least one head")
        for h, r in enumerate(heads):
            if not isinstance(r, SwiftMaxRegisters):
                raise TypeError(f"head {h}: expected SwiftMaxRegisters, got {type(r).__name__}")
            for name in SHARED_FIELDS:
                if r[name] != heads[0][name]:
                    raise ValueError(f"head {h}: {name} = {r[name]} differs from head 0's {heads[0][name]}; it is "
                                     "one register for every head of a layer")
        object.__setattr__(self, "_heads", heads)

    @classmethod
    def broadcast(cls, regs: SwiftMaxRegisters, n_heads: int) -> SwiftMaxHeads:
        """The same constants for ``n_heads`` heads (a per-layer layer)."""
        return cls([regs] * int(n_heads))

    @property
    def heads(self) -> tuple[SwiftMaxRegisters, ...]:
        return self._heads  # type: ignore[attr-defined,no-any-return]

    @property
    def n_heads(self) -> int:
        return len(self.heads)

    @property
    def uniform(self) -> bool:
        """Every head has the same constants (a per-layer register set)."""
        return all(r == self.heads[0] for r in self.heads)

    def __getitem__(self, h: int) -> SwiftMaxRegisters:
        return self.heads[h]

    def __len__(self) -> int:
        return len(self.heads)

    def __iter__(self) -> Iterator[SwiftMaxRegisters]:
        return iter(self.heads)

    def __getattr__(self, name: str) -> int:
        if name in SHARED_FIELDS:
            return int(self.heads[0][name])
        if name in HEAD_FIELDS:
            raise AttributeError(f"{name} is per head: use heads[h].{name} or head_values({name!r})")
        raise AttributeError(name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("SwiftMaxHeads is frozen")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SwiftMaxHeads) and other.heads == self.heads

    def __hash__(self) -> int:
        return hash(("SwiftMaxHeads", self.heads))

    def __repr__(self) -> str:
        if self.uniform:
            return f"SwiftMaxHeads.broadcast({self.heads[0]!r}, {self.n_heads})"
        return f"SwiftMaxHeads({list(self.heads)!r})"

    def head_values(self, name: str) -> np.ndarray:
        """One field for every head, ``(n_heads,)`` int64."""
        return np.array([r[name] for r in self.heads], dtype=np.int64)

    def map(self, fn: Callable[[SwiftMaxRegisters], SwiftMaxRegisters]) -> SwiftMaxHeads:
        """``fn`` applied to every head (e.g. a refold of the shared score scale)."""
        return SwiftMaxHeads([fn(r) for r in self.heads])

    def register_values(self, fmt: SwiftMaxFormat = SwiftMaxFormat()) -> dict[str, int | list[int]]:
        """What the host writes: the shared registers, and ``b_beta``/``c_out`` as ``fmt.max_heads`` memory
        entries (entry ``h`` = head ``h``; entries past the layer's heads are written 0, so no entry keeps
        a previous layer's value). ValueError when the layer has more heads than the kernel holds."""
        if self.n_heads > fmt.max_heads:
            raise ValueError(f"{self.n_heads} heads but the SwiftMax kernel holds {fmt.max_heads} register sets "
                             "(build parameter max_heads)")
        pad = [0] * (fmt.max_heads - self.n_heads)
        out: dict[str, int | list[int]] = {n: int(self.heads[0][n]) for n in ("a_mult", "a_shift", "u_lo", "u_hi")}
        for n in HEAD_FIELDS:
            out[n] = [int(v) for v in self.head_values(n)] + pad
        return out

    def as_dict(self) -> dict[str, int | list[int]]:
        """JSON form (the bundle's ``registers``): shared fields as ints, per-head fields as lists."""
        d: dict[str, int | list[int]] = {n: int(self.heads[0][n]) for n in SHARED_FIELDS}
        for n in HEAD_FIELDS:
            d[n] = [int(v) for v in self.head_values(n)]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, object], n_heads: int) -> SwiftMaxHeads:
        """Inverse of :meth:`as_dict`; a per-head field given as one int (a schema-1 bundle) means every head."""
        vals = {}
        for n in HEAD_FIELDS:
            v = d[n]
            vals[n] = [int(x) for x in v] if isinstance(v, (list, tuple, np.ndarray)) else [int(v)] * n_heads  # type: ignore[arg-type]
            if len(vals[n]) != n_heads:
                raise ValueError(f"{n} has {len(vals[n])} entries for {n_heads} heads")
        shared = {n: int(d[n]) for n in SHARED_FIELDS}  # type: ignore[call-overload]
        return cls([SwiftMaxRegisters(**shared, b_beta=vals["b_beta"][h], c_out=vals["c_out"][h])
                    for h in range(n_heads)])


def fold_multiplier(value: float, bits: int, max_shift: int = 62) -> tuple[int, int]:
    """``value ≈ mult · 2^-shift`` with ``mult`` a signed ``bits``-bit integer using its full
    precision (``2^(bits-2) <= |mult| < 2^(bits-1)``); shift in ``[0, max_shift]``."""
    if not math.isfinite(value) or value == 0.0:
        raise ValueError(f"cannot fold multiplier {value!r}")
    exp = math.floor(math.log2(abs(value)))
    shift = bits - 2 - exp
    if shift < 0:
        raise ValueError(f"multiplier {value:g} too large for a {bits}-bit register with a right shift")
    shift = min(shift, max_shift)
    mult = int(round(value * 2.0**shift))
    if abs(mult) >= 1 << (bits - 1):  # rounding reached the next power of two
        shift -= 1
        mult = int(round(value * 2.0**shift))
    return mult, shift


def swiftmax_registers(s_q: float, s_k: float, d: int, beta: float, gamma: float, out_frac: int = 8,
                       fmt: SwiftMaxFormat = SwiftMaxFormat()) -> SwiftMaxRegisters:
    """Float parameters -> the exact register values of one layer.

    Args:
        s_q, s_k: scales of the int8 Q and K (real = int · scale).
        d: head dimension (scores are divided by sqrt(d)).
        beta, gamma: the layer's SwiftMax constants (γ > 0).
        out_frac: P's output scale ``2^-out_frac`` (choose it so that the largest
            expected P fits ``out_bits``; see :func:`choose_out_frac`).
    """
    for name, v in (("s_q", s_q), ("s_k", s_k), ("beta", beta), ("gamma", gamma)):
        if not math.isfinite(v):
            raise ValueError(f"{name} is not finite: {v}")
    if s_q <= 0 or s_k <= 0 or gamma <= 0 or d < 1:
        raise ValueError(f"need s_q, s_k, gamma > 0 and d >= 1 (got {s_q}, {s_k}, {gamma}, {d})")
    one = 1 << fmt.t_frac
    a = s_q * s_k * LOG2E / math.sqrt(d)
    a_mult, a_shift = fold_multiplier(a * one, fmt.a_bits, fmt.max_a_shift)
    if a_mult == 0:
        raise ValueError(f"score scale s_q·s_k/sqrt(d) = {s_q * s_k / math.sqrt(d):g} is too small for the multiplier")
    reg = QFormat(fmt.reg_bits, 0)

    def q(x: float) -> int:
        v = int(quantize(x * one, QFormat(62, 0), "half_even")[()])
        if not reg.fits(v):
            raise ValueError(f"SwiftMax register value {x:g} does not fit {fmt.reg_bits} bits at t_frac={fmt.t_frac}")
        return v

    return SwiftMaxRegisters(
        a_mult=a_mult, a_shift=a_shift,
        b_beta=q(-beta * LOG2E), u_lo=q(CLAMP_LO * LOG2E), u_hi=q(CLAMP_HI * LOG2E),
        c_out=q(out_frac - math.log2(gamma)), out_frac=out_frac,
    )


def swiftmax_head_registers(s_q: float, s_k: float, d: int, beta: float | Sequence[float],
                            gamma: float | Sequence[float], out_frac: int = 8, n_heads: int | None = None,
                            fmt: SwiftMaxFormat = SwiftMaxFormat()) -> SwiftMaxHeads:
    """A layer's constants: :func:`swiftmax_registers` per head. ``beta``/``gamma`` are scalars (the same for
    every one of ``n_heads`` heads) or one value per head; ``out_frac`` is the layer's."""
    b = np.atleast_1d(np.asarray(beta, dtype=np.float64))
    g = np.atleast_1d(np.asarray(gamma, dtype=np.float64))
    n = int(n_heads) if n_heads is not None else max(b.size, g.size)
    for name, v in (("beta", b), ("gamma", g)):
        if v.ndim != 1 or v.size not in (1, n):
            raise ValueError(f"{name} must be a scalar or one value per head ({n}), got shape {v.shape}")
    b, g = np.broadcast_to(b, (n,)), np.broadcast_to(g, (n,))
    return SwiftMaxHeads([swiftmax_registers(s_q, s_k, d, float(b[h]), float(g[h]), out_frac, fmt)
                          for h in range(n)])


def check_registers(regs: SwiftMaxRegisters | SwiftMaxHeads, fmt: SwiftMaxFormat = SwiftMaxFormat()) -> None:
    """ValueError unless every register value is representable in the kernel's register widths
    (and ``a_shift`` is at most :attr:`SwiftMaxFormat.max_a_shift`; a layer has at most ``max_heads``
    heads)."""
    if isinstance(regs, SwiftMaxHeads):
        if regs.n_heads > fmt.max_heads:
            raise ValueError(f"{regs.n_heads} heads but the kernel holds {fmt.max_heads} register sets")
        for h, r in enumerate(regs):
            try:
                check_registers(r, fmt)
            except ValueError as exc:
                raise ValueError(f"head {h}: {exc}") from None
        return
    if not 0 <= regs.a_shift <= fmt.max_a_shift:
        raise ValueError(f"a_shift {regs.a_shift} outside 0..{fmt.max_a_shift}")
    regmap = swiftmax_regmap(fmt)
    for name, value in regs.registers().items():
        regmap.word(name, value)


def saturation(out_frac: int, fmt: SwiftMaxFormat = SwiftMaxFormat()) -> float:
    """The largest P the kernel outputs at scale ``2^-out_frac``: ``(2^out_bits − 1)·2^-out_frac`` (it saturates
    there). A layer tuned with this ``p_max`` (a saturating float SwiftMax) is exported with this ``out_frac``
    (:func:`out_frac_of_saturation`)."""
    return float(fmt.out_max * 2.0**-out_frac)


def out_frac_of_saturation(p_max: float, fmt: SwiftMaxFormat = SwiftMaxFormat()) -> int:
    """The ``out_frac`` whose :func:`saturation` is ``p_max`` exactly; ValueError for any other value."""
    f = choose_out_frac(p_max, fmt)
    if saturation(f, fmt) != p_max:
        raise ValueError(f"p_max {p_max!r} is not the top of a P format ((2^{fmt.out_bits} − 1)·2^-out_frac; "
                         f"nearest: {saturation(f, fmt)!r} at out_frac {f})")
    return f


def choose_out_frac(p_max: float, fmt: SwiftMaxFormat = SwiftMaxFormat()) -> int:
    """Largest ``out_frac`` such that ``p_max · 2^out_frac`` fits the unsigned output."""
    if not p_max > 0:
        raise ValueError("p_max must be > 0")
    return int(math.floor(math.log2(fmt.out_max / p_max)))


def _head_index(regs: SwiftMaxHeads, head: np.ndarray | int | None, shape: tuple[int, ...]) -> np.ndarray:
    if head is None:
        if regs.uniform:
            return np.zeros((), dtype=np.int64)
        raise ValueError("per-head SwiftMax constants need the head index of every score (head=...)")
    idx = np.asarray(head, dtype=np.int64)
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= regs.n_heads):
        raise ValueError(f"head index outside 0..{regs.n_heads - 1}")
    np.broadcast_shapes(idx.shape, shape)
    return idx


def swiftmax_int(acc: np.ndarray, regs: SwiftMaxRegisters | SwiftMaxHeads, keep: np.ndarray | None = None,
                 fmt: SwiftMaxFormat = SwiftMaxFormat(), table: np.ndarray | None = None,
                 head: np.ndarray | int | None = None) -> np.ndarray:
    """The SwiftMax kernel on integer scores ``acc`` (any shape); returns P as int64 in
    ``[0, 2^out_bits - 1]``, exactly 0 where ``keep`` is False.

    ``regs``: one register set for every score, or a layer's :class:`SwiftMaxHeads` with ``head``, the
    head index of every score (an int array broadcastable to ``acc``, as the stream carries it): score
    ``i`` uses entry ``head[i]`` of the ``b_beta``/``c_out`` memories."""
    check_registers(regs, fmt)
    acc = saturate(np.asarray(acc, dtype=np.int64), QFormat(fmt.acc_bits, 0))
    if isinstance(regs, SwiftMaxHeads):
        idx = _head_index(regs, head, acc.shape)
        b_beta, c_out = regs.head_values("b_beta")[idx], regs.head_values("c_out")[idx]
        shared = regs[0]
    else:
        b_beta, c_out, shared = regs.b_beta, regs.c_out, regs
    u = shift_round(acc * shared.a_mult, shared.a_shift, "half_up") + b_beta
    u = np.clip(u, shared.u_lo, shared.u_hi)
    t = u + c_out
    p = pow2(t, fmt.t_frac, 0, fmt.out_max, fmt.pow2, "half_up", table)
    if keep is not None:
        p = np.where(np.broadcast_to(keep, p.shape), p, 0)
    return p


def swiftmax_int_tabulated(acc: np.ndarray, regs: SwiftMaxRegisters | SwiftMaxHeads, keep: np.ndarray | None = None,
                           fmt: SwiftMaxFormat = SwiftMaxFormat(), max_span: int = 1 << 22,
                           head: np.ndarray | int | None = None) -> np.ndarray:
    """Same result as :func:`swiftmax_int`, computed faster for large tensors.

    The kernel is element-wise, so its output is a function of the (saturated) score
    alone: evaluate :func:`swiftmax_int` once on every integer in ``[acc.min(), acc.max()]``
    and gather. Falls back to the direct computation when that span exceeds ``max_span``
    or is larger than the tensor itself. Tables are cached per register set (they are the
    layer's kernel function, like its weights). Per-head constants: one table per head present.
    Returns uint8 (int32 when out_bits > 8).
    """
    acc = np.asarray(acc)
    if isinstance(regs, SwiftMaxHeads):
        idx = _head_index(regs, head, acc.shape)
        if idx.ndim == 0:
            return swiftmax_int_tabulated(acc, regs[int(idx)], keep, fmt, max_span)
        idx = np.broadcast_to(idx, acc.shape)
        out = np.zeros(acc.shape, dtype=np.uint8 if fmt.out_bits <= 8 else np.int32)
        for h in np.unique(idx):
            sel = idx == h
            out[sel] = swiftmax_int_tabulated(acc[sel], regs[int(h)], None, fmt, max_span)
        if keep is not None:
            out = np.where(np.broadcast_to(keep, out.shape), out, 0).astype(out.dtype)
        return out
    if acc.size == 0:
        return np.zeros(acc.shape, dtype=np.int64)
    lim = QFormat(fmt.acc_bits, 0)
    a_min, a_max = int(acc.min()), int(acc.max())
    lo, hi = max(a_min, lim.min_int), min(a_max, lim.max_int)
    if hi < lo or hi - lo + 1 > min(max_span, acc.size):
        return swiftmax_int(acc, regs, keep, fmt)
    t_lo, table = _swiftmax_table(regs, fmt, lo - (lo % _TABLE_CHUNK), hi - (hi % _TABLE_CHUNK) + _TABLE_CHUNK - 1)
    src = acc if (lo, hi) == (a_min, a_max) else np.clip(acc, lo, hi)  # clip = the input saturation
    p = _gather(table, src, t_lo)
    if keep is not None:
        p = np.where(np.broadcast_to(keep, p.shape), p, 0)
    return p


_TABLE_CHUNK = 1 << 12


@functools.lru_cache(maxsize=64)
def _swiftmax_table(regs: SwiftMaxRegisters, fmt: SwiftMaxFormat, lo: int, hi: int) -> tuple[int, np.ndarray]:
    """The kernel's output for every score in ``[lo, hi]`` (cached per layer's registers)."""
    table = swiftmax_int(np.arange(lo, hi + 1, dtype=np.int64), regs, None, fmt)
    table = table.astype(np.uint8 if fmt.out_bits <= 8 else np.int32)
    table.setflags(write=False)
    return lo, table


_POOL: ThreadPoolExecutor | None = None


def _gather(table: np.ndarray, acc: np.ndarray, offset: int) -> np.ndarray:
    """``table[acc - offset]``, split over threads for large tensors (numpy releases the GIL)."""
    flat = np.ascontiguousarray(acc).reshape(-1)
    out = np.empty(flat.shape, dtype=table.dtype)
    workers = min(os.cpu_count() or 1, 8)
    if flat.size < (1 << 20) or workers == 1:
        np.take(table, flat - offset, out=out)
        return out.reshape(acc.shape)
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(workers, thread_name_prefix="vckattn-gather")
    bounds = np.linspace(0, flat.size, workers + 1).astype(int)

    def part(i: int) -> None:
        sl = slice(bounds[i], bounds[i + 1])
        np.take(table, flat[sl] - offset, out=out[sl])

    list(_POOL.map(part, range(workers)))
    return out.reshape(acc.shape)


def swiftmax_reference(acc: np.ndarray, s_q: float, s_k: float, d: int, beta: float, gamma: float,
                       out_frac: int) -> np.ndarray:
    """Float64 value the kernel approximates: ``exp(clamp(z - β, -10, 40)) / γ · 2^out_frac``."""
    z = np.asarray(acc, dtype=np.float64) * (s_q * s_k / math.sqrt(d))
    return np.exp(np.clip(z - beta, CLAMP_LO, CLAMP_HI)) / gamma * 2.0**out_frac


def swiftmax_error_budget(acc: np.ndarray, regs: SwiftMaxRegisters, s_q: float, s_k: float, d: int,
                          beta: float, gamma: float, fmt: SwiftMaxFormat = SwiftMaxFormat()) -> np.ndarray:
    """Per-element bound on ``|p_int - min(p_ref, out_max)|`` in output LSBs (the documented budget).

    Sources: the folded multiplier ``a_mult·2^-a_shift`` vs ``A·2^F`` (grows with
    ``|acc|``); the half-LSB roundings of u, b_beta and c_out (``1.5·2^-F`` in log2
    units); the 2^f table with interpolation (its exhaustively measured max relative
    error ``e_tab``); the final half-LSB rounding of p::

        |Δt|  <= |acc|·|a_mult·2^-a_shift - A·2^F|·2^-F + 1.5·2^-F
        bound  = 0.5 + min(p_ref, out_max + 1)·((2^|Δt| - 1) + e_tab·2^|Δt|)
    """
    one = 1 << fmt.t_frac
    a = s_q * s_k * LOG2E / math.sqrt(d) * one
    da = abs(regs.a_mult * 2.0**-regs.a_shift - a) / one
    dt = np.abs(np.asarray(acc, dtype=np.float64)) * da + 1.5 / one
    e_tab = pow2_table_rel_error(fmt.pow2)
    p_ref = np.minimum(swiftmax_reference(acc, s_q, s_k, d, beta, gamma, regs.out_frac), fmt.out_max + 1.0)
    return 0.5 + p_ref * ((np.exp2(dt) - 1.0) + e_tab * np.exp2(dt))


def pow2_table_rel_error(cfg: Pow2Config) -> float:
    """Max relative error of :func:`funcunits.pow2_frac` over all of its inputs (exhaustive)."""
    from .funcunits import pow2_frac

    f = np.arange(1 << cfg.in_frac, dtype=np.int64)
    exact = np.exp2(f / float(1 << cfg.in_frac))
    got = pow2_frac(f, cfg).astype(np.float64) * 2.0**-cfg.out_frac
    return float(np.max(np.abs(got - exact) / exact))

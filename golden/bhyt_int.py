"""BHyT units, bit-exact integer model (the PL kernels' numerics).

The full description: ``docs/internals/golden.md``, section ``golden/bhyt_int.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .fixedpoint import QFormat, quantize, saturate, shift_round
from .funcunits import RecipConfig, TanhConfig, rsqrt, rsqrt_octave_table, tanh_unit
from .regmap import Mem, Reg, RegisterMap, wide_regs, wide_values
from .swiftmax_int import fold_multiplier

INT8 = QFormat(8, 0)
C_SHIFT = 8  # per-token scale c = r·k_mult >> 8 keeps c within 24 bits


@dataclass(frozen=True)
class NormFormat:
    """Build-time parameters of the BHyT / RMSNorm kernels."""

    stat_bits: int = 40  # width of S (+ constants)
    k_bits: int = 18  # k_mult register width (signed, positive values)
    arg_frac: int = 12  # fractional bits of the tanh argument
    g_bits: int = 16  # per-channel γ register width (signed)
    out_bits: int = 8
    rsqrt: RecipConfig = field(default_factory=lambda: RecipConfig(mant_bits=14, lut_bits=6, out_frac=15))
    tanh: TanhConfig = field(default_factory=lambda: TanhConfig(in_frac=12, range_log2=3, lut_bits=8, out_frac=15))

    @property
    def out_fmt(self) -> QFormat:
        return QFormat(self.out_bits, 0)


@dataclass(frozen=True)
class BHyTSiteRegisters:
    """Runtime constants of one BHyT site.

    k_mult, k_shift: ``λ √d (s_in/s_stat) / κ · 2^arg_frac ≈ k_mult · 2^-k_shift``.
    eps_int: ``ε d / s_stat²`` rounded.  c_int: the site-M constant (0 at site A).
    gamma: per-channel ``γ_i / s_out · 2^g_frac`` (on-chip memory, int16).  g_frac: its fraction bits.
    s_out: the output scale (informational: the host dequantizes with it).
    """

    k_mult: int
    k_shift: int
    eps_int: int
    c_int: int
    gamma: np.ndarray
    g_frac: int
    s_out: float

    def scalars(self) -> dict[str, int]:
        return {"k_mult": self.k_mult, "k_shift": self.k_shift, "eps_int": self.eps_int, "c_int": self.c_int,
                "g_frac": self.g_frac}


def sum_of_squares(q: np.ndarray) -> np.ndarray:
    """``S = Σ_i q_i²`` over the last axis (exact int64), keepdims."""
    q = np.asarray(q, dtype=np.int64)
    return (q * q).sum(axis=-1, keepdims=True)


def _gamma_register(gamma_over_s_out: np.ndarray, bits: int) -> tuple[np.ndarray, int]:
    g = np.asarray(gamma_over_s_out, dtype=np.float64)
    if not np.all(np.isfinite(g)):
        raise ValueError("gamma / s_out has non-finite values")
    gmax = float(np.max(np.abs(g))) if g.size else 0.0
    g_frac = bits - 1 if gmax == 0.0 else int(math.floor(math.log2((2 ** (bits - 1) - 1) / gmax)))
    return quantize(g, QFormat(bits, g_frac), "half_even", "saturate"), g_frac


def bhyt_site_registers(lam: float, kappa: float, gamma: np.ndarray, d: int, s_in: float, s_stat: float,
                        s_out: float | None = None, c_attn: float = 0.0, lam_attn: float = 0.0,
                        eps: float = 1e-6, fmt: NormFormat = NormFormat()) -> BHyTSiteRegisters:
    """Float parameters of one BHyT site -> its register values.

    Args:
        lam, kappa: the site's λ and κ.  gamma: the γ vector (length d).
        d: hidden size.  s_in: scale of the site's int8 input.  s_stat: scale of the tensor
            whose ``S`` the site uses (site A: its own input, so ``s_stat = s_in``).
        s_out: output scale; default ``max|γ| / 127`` (the output is bounded by ``|γ|``).
        c_attn, lam_attn: for site M, the block's ``c_attn`` and λ_A (``ŝ² = s² + c_attn λ_A²/κ²``).
        eps: ε of the float operator.
    """
    gamma = np.asarray(gamma, dtype=np.float64)
    vals = {"lam": lam, "kappa": kappa, "s_in": s_in, "s_stat": s_stat, "c_attn": c_attn, "lam_attn": lam_attn}
    for name, v in vals.items():
        if not math.isfinite(v):
            raise ValueError(f"BHyT {name} is not finite: {v}")
    if not (lam > 0 and kappa > 0 and s_in > 0 and s_stat > 0 and d >= 1 and c_attn >= 0):
        raise ValueError(f"BHyT needs lam, kappa, scales > 0, c_attn >= 0 (got {vals})")
    if gamma.shape != (d,):
        raise ValueError(f"gamma must have shape ({d},), got {gamma.shape}")
    if s_out is None:
        s_out = float(np.max(np.abs(gamma))) / INT8.max_int or 1.0
    k_mult, k_shift = fold_multiplier(lam * math.sqrt(d) * (s_in / s_stat) / kappa * (1 << fmt.arg_frac), fmt.k_bits)
    stat = QFormat(fmt.stat_bits, 0, signed=False)
    eps_int = int(saturate(quantize(eps * d / s_stat**2, QFormat(62, 0), "half_even"), stat)[()])
    c_real = c_attn * lam_attn**2 / kappa**2 * d / s_stat**2
    c_int = int(quantize(c_real, QFormat(62, 0), "half_even")[()])
    if not stat.fits(c_int):
        raise ValueError(f"BHyT constant c_int = {c_real:g} does not fit {fmt.stat_bits} bits")
    g, g_frac = _gamma_register(gamma / s_out, fmt.g_bits)
    return BHyTSiteRegisters(k_mult, k_shift, eps_int, c_int, g, g_frac, float(s_out))


def bhyt_site_int(q: np.ndarray, stat: np.ndarray, regs: BHyTSiteRegisters, fmt: NormFormat = NormFormat(),
                  rsqrt_rom: np.ndarray | None = None, tanh_rom: np.ndarray | None = None) -> np.ndarray:
    """One BHyT site on int8 tokens ``q`` ``(..., d)`` given the statistic ``stat`` ``(..., 1)``
    (site A: :func:`sum_of_squares` of ``q`` itself; site M: site A's). Returns int8 ``(..., d)``."""
    q = np.asarray(q, dtype=np.int64)
    if not np.all(INT8.fits(q)):
        raise ValueError("BHyT input must be int8 raw values")
    v = np.maximum(np.asarray(stat, dtype=np.int64) + regs.c_int + regs.eps_int, 1)
    r, k = rsqrt(v, fmt.rsqrt, rsqrt_octave_table(fmt.rsqrt) if rsqrt_rom is None else rsqrt_rom)
    c = shift_round(r * regs.k_mult, C_SHIFT, "half_up")
    a = shift_round(q * c, regs.k_shift + fmt.rsqrt.out_frac - C_SHIFT + k, "half_up")
    y = tanh_unit(a, fmt.tanh, tanh_rom)
    out = shift_round(y * regs.gamma, fmt.tanh.out_frac + regs.g_frac, "half_up")
    return saturate(out, fmt.out_fmt)


def bhyt_block_int(q: np.ndarray, q_mid: np.ndarray, site_a: BHyTSiteRegisters, site_m: BHyTSiteRegisters,
                   fmt: NormFormat = NormFormat()) -> tuple[np.ndarray, np.ndarray]:
    """Both sites of a block: ``u`` from the block input ``q`` and ``v`` from ``q_mid = h + Attn(u)``
    (quantized); the statistic of ``q`` is the only reduction."""
    s = sum_of_squares(q)
    return bhyt_site_int(q, s, site_a, fmt), bhyt_site_int(q_mid, s, site_m, fmt)


def bhyt_reference(x: np.ndarray, lam: float, kappa: float, gamma: np.ndarray, s2: np.ndarray,
                   eps: float = 1e-6) -> np.ndarray:
    """Float64 ``γ ⊙ tanh(λ x / (κ sqrt(s2 + ε)))`` for a given statistic ``s2`` (keepdims)."""
    return np.asarray(gamma) * np.tanh(lam * x / (kappa * np.sqrt(s2 + eps)))


# ------------------------------------------------------------------------------------------------
# Register maps of the BHyT kernels (the one declaration; hw/pl/bhyt_exact.py and bhyt_approx.py
# and their testbenches derive from it) and of the token-engine kernels they share with RMSNorm.
# ------------------------------------------------------------------------------------------------

#: ID register values of the two BHyT kernels.
BHYT_EXACT_ID = 0xB47E0001
BHYT_APPROX_ID = 0xB47A0001


def check_token_geometry(lanes: int, max_d: int) -> None:
    """ValueError unless ``lanes, max_d >= 1`` and ``max_d`` is a multiple of ``lanes``."""
    if lanes < 1 or max_d < 1:
        raise ValueError(f"lanes and max_d must be >= 1 (got {lanes}, {max_d})")
    if max_d % lanes:
        raise ValueError(f"max_d ({max_d}) must be a multiple of lanes ({lanes})")


def gamma_mem(lanes: int, max_d: int, fmt: NormFormat, doc: str) -> Mem:
    """The per-channel ``gamma`` memory: ``max_d`` × ``g_bits`` signed, one kernel read port per lane."""
    return Mem("gamma", fmt.g_bits, max_d, signed=True, read_ports=lanes, doc=doc)


def token_engine_regmap(own_regs: list[Reg], lanes: int, max_d: int, fmt: NormFormat, ident: int,
                        version: int = 1) -> RegisterMap:
    """Register map of a token-buffer kernel (BHyT exact, RMSNorm): its own registers, then ``tokens``
    and ``overlong`` (ro), then the ``gamma`` memory."""
    check_token_geometry(lanes, max_d)
    return RegisterMap(
        [
            *own_regs,
            Reg("tokens", 32, access="ro", doc="input tokens (TLAST handshakes) accepted since reset"),
            Reg("overlong", 32, access="ro", doc="input tokens longer than max_d (truncated) since reset"),
        ],
        [gamma_mem(lanes, max_d, fmt, "per-element gamma register, int16")],
        ident=ident,
        version=version,
    )


def _site_regs(fmt: NormFormat, c_doc: str) -> list[Reg]:
    """The writable registers of a BHyT site (:class:`BHyTSiteRegisters` without γ and s_out)."""
    sb = fmt.stat_bits
    return [
        Reg("k_mult", fmt.k_bits, doc="lambda*sqrt(d)*(s_in/s_stat)/kappa*2^arg_frac ~ k_mult*2^-k_shift"),
        Reg("k_shift", 6, doc="right shift of q*c (round half up), plus 7 + rsqrt exponent"),
        *wide_regs("eps_int", sb, "eps*d/s_stat^2 (saturated)"),
        *wide_regs("c_int", sb, c_doc),
        Reg("g_frac", 5, doc="fraction bits of the gamma entries"),
    ]


def bhyt_exact_regmap(lanes: int = 4, max_d: int = 1024, fmt: NormFormat = NormFormat()) -> RegisterMap:
    """The BHyT exact kernel's AXI4-Lite register map (site A or M with its own statistic)."""
    return token_engine_regmap(
        _site_regs(fmt, "constant added to S (0 at site A; site-M style c_attn*lambda_A^2/kappa^2*d/s^2)"),
        lanes, max_d, fmt, BHYT_EXACT_ID)


def bhyt_approx_regmap(lanes: int = 4, max_d: int = 1024, fmt: NormFormat = NormFormat()) -> RegisterMap:
    """The BHyT approximate-variance unit's register map (site M from the forwarded statistic; no token
    buffer, so no ``overlong`` counter)."""
    check_token_geometry(lanes, max_d)
    return RegisterMap(
        [*_site_regs(fmt, "site-M constant c_attn*lambda_A^2/kappa^2*d/s_stat^2"),
         Reg("tokens", 32, access="ro", doc="tokens (input TLAST handshakes) since reset")],
        [gamma_mem(lanes, max_d, fmt, "gamma_j/s_out*2^g_frac, int16")],
        ident=BHYT_APPROX_ID,
        version=1,
    )


def check_g_frac(g_frac: int) -> int:
    """The kernels' ``g_frac`` register is unsigned 5-bit: the golden register must be in [0, 31]."""
    if not 0 <= int(g_frac) <= 31:
        raise ValueError(f"g_frac = {g_frac} outside the 5-bit register range [0, 31] "
                         "(choose s_out so that max|gamma/s_out| is in [2^-16, 2^15))")
    return int(g_frac)


def bhyt_register_values(regs: BHyTSiteRegisters, fmt: NormFormat = NormFormat()) -> dict[str, int]:
    """Golden site registers -> ``{register name: value}`` of either BHyT kernel (40-bit values split
    into words).

    Raises ``ValueError`` if a value does not fit its register (``g_frac`` outside [0, 31],
    ``k_mult`` not in [0, 2^k_bits), ``k_shift`` not in [0, 63], ``eps_int``/``c_int`` beyond
    ``stat_bits``)."""
    if not 0 <= regs.k_mult < 1 << fmt.k_bits:
        raise ValueError(f"k_mult = {regs.k_mult} does not fit {fmt.k_bits} unsigned bits")
    if not 0 <= regs.k_shift < 64:
        raise ValueError(f"k_shift = {regs.k_shift} does not fit 6 bits")
    out = {"k_mult": int(regs.k_mult), "k_shift": int(regs.k_shift), "g_frac": check_g_frac(regs.g_frac)}
    out.update(wide_values("eps_int", regs.eps_int, fmt.stat_bits))
    out.update(wide_values("c_int", regs.c_int, fmt.stat_bits))
    return out


def gamma_values(regs: BHyTSiteRegisters) -> list[int]:
    """The ``gamma`` memory contents (entry ``j`` = ``regs.gamma[j]``, int16)."""
    return [int(v) for v in regs.gamma]

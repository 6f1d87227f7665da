"""C-simulation drivers of the HLS normalizers (``hw/hls/swiftmax_hls.cpp``, ``hw/hls/bhyt_hls.cpp``).

The full description: ``docs/internals/sim.md``, section ``sim/hls_norm_csim.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vckattn.golden.bhyt_int import BHyTSiteRegisters, NormFormat
from vckattn.golden.swiftmax_int import SwiftMaxFormat, SwiftMaxHeads, SwiftMaxRegisters, check_registers

from .hls_csim import REPO_ROOT, compile_cpp, run_binary

__all__ = [
    "BHYT_ARG_BITS", "BHYT_LANES", "BHYT_MAX_D", "BHyTBlockOut", "HLS_DIR", "SCORE_LANES", "SwiftMaxStreamOut",
    "bhyt_block", "bhyt_tb", "norm_units", "pow2_frac_unit", "pow2_unit", "score_beats", "swiftmax_heads",
    "swiftmax_register_words", "swiftmax_stream", "swiftmax_tb",
]

HLS_DIR: Path = REPO_ROOT / "hw" / "hls"
CPP_DIR: Path = REPO_ROOT / "sim" / "cpp"

SCORE_LANES = 4  # scores per SwiftMax beat (hw/hls/swiftmax_hls.h "Streams")
BHYT_LANES = 8  # int8 elements per BHyT beat (hw/hls/bhyt_hls.h)
BHYT_MAX_D = 2048  # longest BHyT token (hw/hls/bhyt_hls.h)
BHYT_ARG_BITS = 37  # width of the tanh argument inside bhyt_elem (hw/hls/bhyt_hls.h)
SM_FMT = SwiftMaxFormat()  # the formats the C++ is built for (hw/hls/generated/formats.h)
NORM_FMT = NormFormat()
RSQRT_IN_BITS = NORM_FMT.stat_bits + 2  # rsqrt_unit<42> in bhyt_token_scale
POW2_T_BITS = SM_FMT.reg_bits + 1  # the exponent t of swiftmax_elem (s25)
_TIMEOUT = 120.0


def _headers(top: str) -> list[Path]:
    """Headers a test bench build depends on (for the build cache): the kernel's, the shared ones, the ROMs."""
    own = [HLS_DIR / name for name in ("axis_types.h", "funcunits_hls.h", top)]
    return own + sorted((HLS_DIR / "generated").glob("*.h"))


def swiftmax_tb() -> Path:
    """Build (or reuse) ``build/hls/swiftmax_hls_tb/swiftmax_hls_tb``."""
    return compile_cpp([CPP_DIR / "swiftmax_hls_tb.cpp", HLS_DIR / "swiftmax_hls.cpp"], "swiftmax_hls_tb",
                       depends=_headers("swiftmax_hls.h"))


def bhyt_tb() -> Path:
    """Build (or reuse) ``build/hls/bhyt_hls_tb/bhyt_hls_tb``."""
    return compile_cpp([CPP_DIR / "bhyt_hls_tb.cpp", HLS_DIR / "bhyt_hls.cpp"], "bhyt_hls_tb",
                       depends=_headers("bhyt_hls.h"))


def _job(*parts: object) -> bytes:
    flat = [np.asarray(p, dtype=np.int64).reshape(-1) for p in parts]
    return np.concatenate(flat).astype("<i8").tobytes()


def _take(buf: np.ndarray, pos: int, n: int) -> tuple[np.ndarray, int]:
    if pos + n > buf.size:
        raise RuntimeError(f"test bench output too short ({buf.size} values, needed {pos + n})")
    return buf[pos:pos + n], pos + n


# ----------------------------------------------------------------------------------------- SwiftMax


@dataclass(frozen=True)
class SwiftMaxStreamOut:
    """``m_axis`` of ``swiftmax_hls``: ``p`` ``(n_beats, 4)`` uint8 lanes, ``user`` (keep bits), ``last``."""

    p: np.ndarray
    user: np.ndarray
    last: np.ndarray


def swiftmax_heads(regs: SwiftMaxRegisters | SwiftMaxHeads) -> SwiftMaxHeads:
    """``regs`` as a layer's per-head constants (one register set: every head uses it, as head 0)."""
    return regs if isinstance(regs, SwiftMaxHeads) else SwiftMaxHeads.broadcast(regs, 1)


def swiftmax_register_words(regs: SwiftMaxRegisters | SwiftMaxHeads, fmt: SwiftMaxFormat = SM_FMT) -> list[int]:
    """The SwiftMax register values as the C++ test benches read them (after ``check_registers``): the
    writable registers in declaration order (``VCKATTN_SWIFTMAX_REGS``), then every memory
    (``VCKATTN_SWIFTMAX_MEMS``: ``b_beta``, ``c_out``) as its ``max_heads`` entries, entry ``h`` = head ``h``
    (entries past the layer's heads 0, as the host writes them: ``SwiftMaxHeads.register_values``)."""
    heads = swiftmax_heads(regs)
    check_registers(heads, fmt)
    words: list[int] = []
    for v in heads.register_values(fmt).values():
        words.extend(v if isinstance(v, list) else [v])
    return words


def _user_head(head: np.ndarray | int | None, n: int) -> np.ndarray:
    """Per-beat head index (``n`` beats) checked to fit HEAD_BITS, shifted to its TUSER position."""
    h = np.broadcast_to(np.asarray(0 if head is None else head, dtype=np.int64), (n,))
    if h.size and (h.min() < 0 or h.max() >= SM_FMT.max_heads):
        raise ValueError(f"head index outside 0..{SM_FMT.max_heads - 1}")
    return h << SCORE_LANES


def score_beats(acc: np.ndarray, keep: np.ndarray | None = None,
                head: np.ndarray | int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score rows ``(rows, kp)`` (``kp`` a multiple of 4), a keep mask and the rows' query heads (``(rows,)``
    or one int; default 0) -> beats per hw/hls/swiftmax_hls.h "Streams": ``data`` ``(rows·kp/4, 4)``, ``user``
    (keep of lane l at bit l, the row's head at bits [4, 4 + head_bits)), ``last`` (1 on a row's last beat)."""
    acc = np.asarray(acc, dtype=np.int64)
    if acc.ndim != 2 or acc.shape[1] % SCORE_LANES:
        raise ValueError(f"scores must be (rows, kp) with kp a multiple of {SCORE_LANES}, got {acc.shape}")
    keep = np.ones(acc.shape, dtype=bool) if keep is None else np.broadcast_to(np.asarray(keep, dtype=bool), acc.shape)
    data = acc.reshape(-1, SCORE_LANES)
    user = (keep.reshape(-1, SCORE_LANES) * (1 << np.arange(SCORE_LANES))).sum(axis=1)
    per_row = acc.shape[1] // SCORE_LANES
    row_head = np.broadcast_to(np.asarray(0 if head is None else head, dtype=np.int64), (acc.shape[0],))
    user = user + _user_head(np.repeat(row_head, per_row), user.size)
    last = np.zeros((acc.shape[0], per_row), dtype=np.int64)
    last[:, -1] = 1
    return data, user, last.reshape(-1)


def swiftmax_stream(data: np.ndarray, user: np.ndarray, last: np.ndarray, regs: SwiftMaxRegisters | SwiftMaxHeads,
                    head: np.ndarray | int | None = None) -> SwiftMaxStreamOut:
    """Run ``swiftmax_hls`` on ``n`` beats: ``data`` ``(n, 4)`` int32 scores, ``user`` ``(n,)`` TUSER (4 keep
    bits, and the beat's head at bits [4, 4 + head_bits)), ``last`` ``(n,)`` TLAST flags; ``head`` (``(n,)``
    or one int), when given, is added to ``user``'s head field (which must then be 0). ``regs``: one
    register set (written as head 0) or a layer's :class:`SwiftMaxHeads`. Returns its ``n`` output beats."""
    words = swiftmax_register_words(regs)
    data = np.asarray(data, dtype=np.int64).reshape(-1, SCORE_LANES)
    n = data.shape[0]
    user, last = np.asarray(user, dtype=np.int64).reshape(n), np.asarray(last, dtype=np.int64).reshape(n)
    if data.min(initial=0) < -(1 << 31) or data.max(initial=0) >= 1 << 31:
        raise ValueError("scores must be int32")
    user_bits = SCORE_LANES + SM_FMT.head_bits
    if user.min(initial=0) < 0 or user.max(initial=0) >= 1 << user_bits or not np.isin(last, (0, 1)).all():
        raise ValueError(f"user must be {user_bits}-bit (keep, head) and last 0/1")
    if head is not None:
        if (user >> SCORE_LANES).any():
            raise ValueError("head given twice: in user and as head=")
        user = user + _user_head(head, n)
    beats = np.concatenate([data, user[:, None], last[:, None]], axis=1)
    job = _job(0, words, n, beats)
    out = np.frombuffer(run_binary(swiftmax_tb(), job, timeout=_TIMEOUT), dtype="<i8")
    if out.size != 6 * n:
        raise RuntimeError(f"swiftmax_hls_tb returned {out.size} values, expected {6 * n}")
    out = out.reshape(n, 6)
    return SwiftMaxStreamOut(p=out[:, :SCORE_LANES].copy(), user=out[:, 4].copy(), last=out[:, 5].copy())


def pow2_unit(t: np.ndarray) -> np.ndarray:
    """``pow2_unit<0, 8, 25>`` on Q.12 exponents ``t`` (signed 25-bit): P in [0, 255] (golden ``pow2``)."""
    t = np.asarray(t, dtype=np.int64).reshape(-1)
    lim = 1 << (POW2_T_BITS - 1)
    if t.size and (t.min() < -lim or t.max() >= lim):
        raise ValueError(f"t must fit {POW2_T_BITS} signed bits")
    out = np.frombuffer(run_binary(swiftmax_tb(), _job(1, t.size, t), timeout=_TIMEOUT), dtype="<i8")
    if out.size != t.size:
        raise RuntimeError(f"swiftmax_hls_tb returned {out.size} values, expected {t.size}")
    return out.copy()


def pow2_frac_unit(f: np.ndarray) -> np.ndarray:
    """``pow2_frac`` on ``f`` in ``[0, 2^12)``: ``2^(f/2^12)`` as UQ1.15 (golden ``pow2_frac``)."""
    f = np.asarray(f, dtype=np.int64).reshape(-1)
    if f.size and (f.min() < 0 or f.max() >= 1 << SM_FMT.t_frac):
        raise ValueError("f must be in [0, 2^t_frac)")
    out = np.frombuffer(run_binary(swiftmax_tb(), _job(2, f.size, f), timeout=_TIMEOUT), dtype="<i8")
    if out.size != f.size:
        raise RuntimeError(f"swiftmax_hls_tb returned {out.size} values, expected {f.size}")
    return out.copy()


# ----------------------------------------------------------------------------------------- BHyT


@dataclass(frozen=True)
class BHyTBlockOut:
    """Outputs of :func:`bhyt_block` for ``n`` tokens of ``d`` channels (``nb = ceil(d/8)`` beats each).

    Stream outputs keep the padding lanes: ``u``, ``v_chain``, ``v_ext`` are ``(n, nb·8)`` int8;
    ``a_user`` (site A's TUSER = S), ``a_last``, ``m_last`` are ``(n, nb)``. ``v_site``, ``u_site``
    ``(n, d)`` come from the memory-based ``bhyt_site``; ``s_sum`` ``(n, 1)`` from ``bhyt_sum_of_squares``.
    """

    u: np.ndarray
    a_user: np.ndarray
    a_last: np.ndarray
    v_chain: np.ndarray
    m_last: np.ndarray
    v_ext: np.ndarray
    v_site: np.ndarray
    u_site: np.ndarray
    s_sum: np.ndarray


def _site_words(regs: BHyTSiteRegisters, d: int) -> list[np.ndarray]:
    """The five scalar registers and the γ entries, checked against the kernel's register widths."""
    stat_max = (1 << NORM_FMT.stat_bits) - 1
    checks = {
        "k_mult": 0 <= regs.k_mult < 1 << NORM_FMT.k_bits, "k_shift": 0 <= regs.k_shift < 64,
        "eps_int": 0 <= regs.eps_int <= stat_max, "c_int": 0 <= regs.c_int <= stat_max,
        "g_frac": 0 <= regs.g_frac <= 31,
    }
    bad = [k for k, ok in checks.items() if not ok]
    if bad:
        raise ValueError(f"BHyT registers out of the kernel's range: {bad}")
    g = np.asarray(regs.gamma, dtype=np.int64)
    lim = 1 << (NORM_FMT.g_bits - 1)
    if g.shape != (d,) or g.min() < -lim or g.max() >= lim:
        raise ValueError(f"gamma must be {d} int{NORM_FMT.g_bits} entries")
    return [np.array([regs.k_mult, regs.k_shift, regs.eps_int, regs.c_int, regs.g_frac]), g]


def bhyt_block(q: np.ndarray, q_mid: np.ndarray, site_a: BHyTSiteRegisters, site_m: BHyTSiteRegisters,
               s_ext: np.ndarray | None = None, pad: int = 0) -> BHyTBlockOut:
    """Run the BHyT test bench on int8 tokens ``q`` and ``q_mid`` ``(n, d)``.

    ``s_ext`` ``(n,)`` or ``(n, 1)``: the statistic site M gets in its second run and ``bhyt_site``
    (default: ``Σ q²``); ``pad``: int8 value written into the input padding lanes (must be ignored).
    """
    q = np.asarray(q, dtype=np.int64)
    q_mid = np.asarray(q_mid, dtype=np.int64)
    if q.ndim != 2 or q.shape != q_mid.shape:
        raise ValueError("q and q_mid must be (n_tokens, d) of the same shape")
    n, d = q.shape
    if not 1 <= d <= BHYT_MAX_D or n < 1:
        raise ValueError(f"need n >= 1 and 1 <= d <= {BHYT_MAX_D}")
    for name, x in (("q", q), ("q_mid", q_mid)):
        if x.min() < -128 or x.max() > 127:
            raise ValueError(f"{name} must be int8")
    s = (q * q).sum(axis=1) if s_ext is None else np.asarray(s_ext, dtype=np.int64).reshape(n)
    if s.min() < 0 or s.max() >= 1 << NORM_FMT.stat_bits:
        raise ValueError(f"s_ext must be unsigned {NORM_FMT.stat_bits}-bit")
    if not -128 <= pad <= 127:
        raise ValueError("pad must be int8")
    job = _job(0, n, d, pad, *_site_words(site_a, d), *_site_words(site_m, d), q, q_mid, s)
    out = np.frombuffer(run_binary(bhyt_tb(), job, timeout=_TIMEOUT), dtype="<i8")
    nb = -(-d // BHYT_LANES)
    w = nb * BHYT_LANES
    pos = 0
    parts = {}
    for name, shape in (("u", (n, w)), ("a_user", (n, nb)), ("a_last", (n, nb)), ("v_chain", (n, w)),
                        ("m_last", (n, nb)), ("v_ext", (n, w)), ("v_site", (n, d)), ("u_site", (n, d)),
                        ("s_sum", (n, 1))):
        vals, pos = _take(out, pos, int(np.prod(shape)))
        parts[name] = vals.reshape(shape).copy()
    if pos != out.size:
        raise RuntimeError(f"bhyt_hls_tb returned {out.size} values, expected {pos}")
    return BHyTBlockOut(**parts)


def norm_units(x: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rsqrt_unit<42>`` on ``x`` (1 .. 2^42 - 1) -> ``(mant, k)``; ``tanh_unit<37>`` on ``a`` -> ``y``."""
    x = np.asarray(x, dtype=np.int64).reshape(-1)
    a = np.asarray(a, dtype=np.int64).reshape(-1)
    if x.size and (x.min() < 1 or x.max() >= 1 << RSQRT_IN_BITS):
        raise ValueError(f"x must be in [1, 2^{RSQRT_IN_BITS})")
    lim = 1 << (BHYT_ARG_BITS - 1)
    if a.size and (a.min() < -lim or a.max() >= lim):
        raise ValueError(f"a must fit {BHYT_ARG_BITS} signed bits")
    out = np.frombuffer(run_binary(bhyt_tb(), _job(1, x.size, x, a.size, a), timeout=_TIMEOUT), dtype="<i8")
    if out.size != 2 * x.size + a.size:
        raise RuntimeError(f"bhyt_hls_tb returned {out.size} values, expected {2 * x.size + a.size}")
    return out[:x.size].copy(), out[x.size:2 * x.size].copy(), out[2 * x.size:].copy()

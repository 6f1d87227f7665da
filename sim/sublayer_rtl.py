"""The sublayer's PL units as a host runs them: whole tensors through one unit on Verilator, one run a call.

The full description: ``docs/internals/sim.md``, section ``sim/sublayer_rtl.py``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.bhyt_int import (
    BHyTSiteRegisters,
    NormFormat,
    bhyt_exact_regmap,
    bhyt_register_values,
    check_token_geometry,
    gamma_values,
)
from vckattn.golden.regmap import RegisterMap, RegisterWrite
from vckattn.golden.rope_int import check_rope_geometry, rope_regmap, rope_table_banks
from vckattn.golden.sublayer import ResidualRegisters, residual_register_values, residual_regmap
from vckattn.hw.spec.driver import RegisterError, verify

#: the BHyT unit's default number formats
DEFAULT_NORM_FORMAT = NormFormat()

__all__ = ["UnitRtlError", "UnitRtlResult", "run_bhyt_site_rtl", "run_residual_rtl", "run_rope_rtl"]

TB = "vckattn.sim.tb_sublayer_host"


class UnitRtlError(RuntimeError):
    """The unit's ID register is not the expected one, a register or table word read back differs from the word
    written, or the simulation failed."""


@dataclass(frozen=True)
class UnitRtlResult:
    """Outcome of one ``run_*_rtl`` call.

    Attributes:
        out: The unit's output, shaped like its (first) input, int8 values (int64 array).
        stat: BHyT site: the per-token statistic ``S`` from the output TUSER, ``(n,)`` int64; else None.
        cycles: Clock cycles from the first input beat to the last output beat, both counted.
        ident: The ID register as read.
        readback: Every written register (decoded: its declared width and signedness) and every written table
            (a list of its entries, from entry 0), as read back over AXI4-Lite, by name.
    """

    out: np.ndarray
    stat: np.ndarray | None
    cycles: int
    ident: int
    readback: dict[str, int | list[int]]


def _int_array(a: np.ndarray, name: str, ndim: int, bits: int) -> np.ndarray:
    """``a`` as int64 if it is an integer array of ``ndim`` dimensions, non-empty, with ``bits``-bit signed values."""
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array, got dtype {a.dtype}")
    if a.ndim != ndim or 0 in a.shape:
        raise ValueError(f"{name} must be a non-empty {ndim}-D array, got shape {a.shape}")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if int(a.min()) < lo or int(a.max()) > hi:
        raise ValueError(f"{name} must hold int{bits} values ([{lo}, {hi}]), got [{int(a.min())}, {int(a.max())}]")
    return a.astype(np.int64)


def _readback(regmap: RegisterMap, read: dict[str, int]) -> dict[str, int | list[int]]:
    """``verify``'s words by write name -> decoded values; ``mem[i]`` entries gathered into lists."""
    out: dict[str, Any] = {}
    for name, word in read.items():
        if "[" in name:
            mem, idx = name[:-1].split("[")
            entries = out.setdefault(mem, [])
            assert int(idx) == len(entries), f"{name} read out of order"
            entries.append(regmap.value(mem, word))
        else:
            out[name] = regmap.value(name, word)
    return out


class _Replay:
    """A read-only :class:`~vckattn.hw.spec.driver.RegisterPort` answering with the words the simulation read."""

    def __init__(self, words: dict[int, int]) -> None:
        self.words = words

    def read32(self, offset: int) -> int:
        return self.words[offset]

    def write32(self, offset: int, word: int) -> None:
        raise AssertionError("the replayed port is read-only")


def _verilog(top: str, unit: str, params: tuple) -> Path:
    """The unit's Verilog, generated once a process and build folder (the file is rewritten only when its text
    changes, so the Verilator build stays cached)."""
    from vckattn.hw.pl.verilog import hw_build_root

    path = _generate(top, unit, params, str(hw_build_root()))
    if not path.is_file():  # removed since: generate it again
        _generate.cache_clear()
        path = _generate(top, unit, params, str(hw_build_root()))
    return path


@functools.cache
def _generate(top: str, unit: str, params: tuple, root: str) -> Path:
    from vckattn.hw.pl.verilog import generate_verilog

    if unit == "bhyt_exact":
        from vckattn.hw.pl.bhyt_exact import BHyTExactKernel

        component: object = BHyTExactKernel(*params)
    elif unit == "rope":
        from vckattn.hw.pl.rope import RopeKernel

        component = RopeKernel(*params)
    else:
        from vckattn.hw.pl.residual import ResidualKernel

        component = ResidualKernel(*params)
    return generate_verilog(component, top, Path(root) / top)


def _run(unit: str, kernel: str, top: str, params: tuple, regmap: RegisterMap, values: dict[str, Any],
         ident: int | None, lanes: int, arrays: dict[str, np.ndarray], pauses: bool, seed: int,
         log: Path | None) -> tuple[dict[str, np.ndarray], dict[str, int | list[int]], int]:
    """Program and stream one job; returns the result arrays, the decoded read-back and the ID read."""
    from vckattn.golden.paths import build_root
    from vckattn.sim.runner import SimulationFailed, redirect_output, run_cocotb

    try:
        writes: list[RegisterWrite] = regmap.writes(values)  # the driver's encoding: refuses a value that does not fit
    except ValueError as exc:
        raise ValueError(f"{kernel}: {exc}") from None
    desc = regmap.describe()
    if ident is not None:
        for e in desc:
            if e["name"] == "ID":
                e["value"] = int(ident)
    expected = RegisterMap.from_describe(desc).ident
    src = _verilog(top, unit, params)
    work = build_root() / "sublayer_rtl"
    work.mkdir(parents=True, exist_ok=True)
    meta = {"unit": unit, "kernel": kernel, "lanes": lanes, "regmap": desc, "pauses": int(pauses),
            "values": {k: (int(v) if isinstance(v, (int, np.integer)) else [int(e) for e in v])
                       for k, v in values.items()}}
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jf, of = Path(tmp) / "job.npz", Path(tmp) / "out.npz"
        np.savez(jf, meta=np.array(json.dumps(meta)), **arrays)
        env = {"VCKATTN_UNIT_JOB": str(jf), "VCKATTN_UNIT_OUT": str(of)}
        try:
            with redirect_output(log):
                run_cocotb(top, [src], TB, seed=seed, extra_env=env, rerun_with_waves=False)
        except (SimulationFailed, RuntimeError) as exc:
            first = str(exc).splitlines()[0]
            raise UnitRtlError(f"simulation of {top} failed: {first}" + (f" (log: {log})" if log else "")) from None
        if not of.is_file():
            raise UnitRtlError(f"simulation of {top} wrote no result file")
        with np.load(of) as f:
            res = {k: f[k] for k in f.files}
    got = int(res["ident"])
    if "error" in res:
        raise UnitRtlError(f"{top}: {res['error']}")
    if got != expected:  # (the bench's check_ident already refused it: a second look, on the host)
        raise UnitRtlError(f"{top}: ID register reads {got:#010x}, expected {expected:#010x}")
    read = {str(n): int(w) for n, w in zip(res["read_names"], res["read_words"], strict=True)}
    if set(read) != {w.name for w in writes}:
        raise UnitRtlError(f"{top}: the simulation read back {len(read)} words for {len(writes)} writes")
    try:  # the driver's comparison once more on the host, from the words the simulation read
        verify(_Replay({w.offset: read[w.name] for w in writes}), writes, kernel)
    except RegisterError as exc:
        raise UnitRtlError(f"{top}: {exc}") from None
    return res, _readback(regmap, read), got


def _top(unit: str, *parts: object) -> str:
    return "sublayer_" + unit + "".join(f"_{p}" for p in parts)


def run_bhyt_site_rtl(h: np.ndarray, regs: BHyTSiteRegisters, fmt: NormFormat = DEFAULT_NORM_FORMAT, *, lanes: int = 4,
                      max_d: int = 1024, pauses: bool = True, seed: int = 0, ident: int | None = None,
                      log: Path | None = None) -> UnitRtlResult:
    """BHyT site A (:class:`~vckattn.hw.pl.bhyt_exact.BHyTExactKernel`) on ``n`` tokens.

    The unit computes each token's statistic ``S = Σ h²`` itself and returns ``u = bhyt_site_int(h, S, regs, fmt)``
    (the golden model, :mod:`vckattn.golden.bhyt_int`) with ``S`` on TUSER of every output beat.

    Args:
        h: Tokens ``(n, d)``, raw int8 values at ``s_in`` (any integer dtype), ``1 <= d <= max_d``.
        regs: The site's constants (``gamma`` of length ``d``): programmed as ``bhyt_register_values(regs, fmt)``
            plus the ``gamma`` table (:func:`~vckattn.golden.bhyt_int.gamma_values`, entries ``0..d-1``).
        fmt: The build's number formats.
        lanes, max_d: The build (elements a beat, the token buffer's length).
        pauses: Random source idles and sink backpressure (else back-to-back beats).
        seed: ``COCOTB_RANDOM_SEED`` (the pause pattern).
        ident: Expected ID register (default: the declared ``BHYT_EXACT_ID``).
        log: File that receives the simulator's output (default: the console).

    Returns:
        :class:`UnitRtlResult`: ``out`` ``(n, d)`` the int8 ``u`` (at ``regs.s_out``), ``stat`` ``(n,)`` the
        statistic from TUSER (int64, unsigned ``fmt.stat_bits``), ``readback`` the registers (``k_mult``,
        ``k_shift``, ``eps_int_lo/hi``, ``c_int_lo/hi``, ``g_frac``) and ``gamma`` (``d`` entries).
    """
    check_token_geometry(lanes, max_d)
    q = _int_array(h, "h", 2, 8)
    n, d = q.shape
    if d > max_d:
        raise ValueError(f"tokens of {d} elements do not fit the unit's token buffer (max_d = {max_d})")
    gamma = np.asarray(regs.gamma)
    if gamma.shape != (d,):
        raise ValueError(f"gamma must have {d} entries (one per channel), got shape {gamma.shape}")
    values: dict[str, Any] = {**bhyt_register_values(regs, fmt), "gamma": gamma_values(regs)}
    top = _top("bhyt_exact", f"l{lanes}", f"d{max_d}")
    if fmt != DEFAULT_NORM_FORMAT:
        top += "_f" + hashlib.sha1(repr(fmt).encode()).hexdigest()[:8]
    rm = bhyt_exact_regmap(lanes, max_d, fmt)
    res, readback, got = _run("bhyt_exact", "bhyt_exact", top, (lanes, max_d, fmt), rm, values, ident, lanes,
                              {"rows": q}, pauses, seed, log)
    tu = res["tuser"]
    bad = np.nonzero(np.any(tu != tu[:, :1], axis=1))[0]
    if bad.size:
        raise UnitRtlError(f"{top}: token {int(bad[0])} carries different statistics on its beats: "
                           f"{[int(v) for v in tu[bad[0]][:4]]}...")
    return UnitRtlResult(out=res["out"], stat=tu[:, 0].copy(), cycles=int(res["cycles"]), ident=got,
                         readback=readback)


def run_rope_rtl(x: np.ndarray, positions: np.ndarray, cos: np.ndarray, sin: np.ndarray, *, lanes: int = 4,
                 head_dim: int = 64, max_pos: int = 256, pauses: bool = True, seed: int = 0,
                 ident: int | None = None, log: Path | None = None) -> UnitRtlResult:
    """RoPE (:class:`~vckattn.hw.pl.rope.RopeKernel`) on ``n`` rows of one head each.

    Output row ``r`` = ``rope_int(x[r], cos[p], sin[p])`` at ``p = positions[r]`` (the golden model,
    :mod:`vckattn.golden.rope_int`).

    Args:
        x: Rows ``(n, head_dim)``, raw int8 values (any integer dtype): a head of Q or K of one token each.
        positions: ``(n,)`` the rows' positions, ``0 <= p < P`` (streamed on TUSER; ``pos_base`` is 0).
        cos, sin: int16 Q1.14 tables ``(P, head_dim)`` (:func:`~vckattn.golden.rope_int.rope_tables_int`),
            rotate-half (each frequency in both halves), ``1 <= P <= max_pos``: positions ``0..P-1`` are written
            into the unit's table banks (:func:`~vckattn.golden.rope_int.rope_table_banks`).
        lanes, head_dim, max_pos: The build.
        pauses, seed, ident, log: As :func:`run_bhyt_site_rtl` (``ident`` default: ``ROPE_ID``).

    Returns:
        :class:`UnitRtlResult`: ``out`` ``(n, head_dim)`` int8 at the scale of ``x``; ``stat`` None;
        ``readback`` ``pos_base`` and the banks ``table0..table<lanes-1>`` (``sin << 16 | cos`` words).
    """
    check_rope_geometry(lanes, head_dim, max_pos)
    rows = _int_array(x, "x", 2, 8)
    if rows.shape[1] != head_dim:
        raise ValueError(f"rows must have head_dim = {head_dim} elements, got shape {rows.shape}")
    pos = _int_array(np.asarray(positions).reshape(-1) if np.ndim(positions) == 1 else positions, "positions", 1, 64)
    if pos.shape != (rows.shape[0],):
        raise ValueError(f"{rows.shape[0]} rows but {pos.shape[0]} positions")
    c, s = np.asarray(cos), np.asarray(sin)
    if c.ndim != 2 or c.shape != s.shape or c.shape[1] != head_dim:
        raise ValueError(f"tables must be (P, {head_dim}), got {c.shape} and {s.shape}")
    if c.shape[0] > max_pos:
        raise ValueError(f"tables of {c.shape[0]} positions do not fit the unit's max_pos = {max_pos}")
    if int(pos.min()) < 0 or int(pos.max()) >= c.shape[0]:
        raise ValueError(f"positions must be in [0, {c.shape[0]}) (the tables' rows; max_pos = {max_pos}), got "
                         f"[{int(pos.min())}, {int(pos.max())}]")
    values: dict[str, Any] = {"pos_base": 0, **rope_table_banks(c, s, lanes, head_dim, max_pos)}
    top = _top("rope", f"l{lanes}", f"d{head_dim}", f"p{max_pos}")
    res, readback, got = _run("rope", "rope", top, (lanes, head_dim, max_pos), rope_regmap(lanes, head_dim, max_pos),
                              values, ident, lanes, {"rows": rows, "tuser": pos}, pauses, seed, log)
    return UnitRtlResult(out=res["out"], stat=None, cycles=int(res["cycles"]), ident=got, readback=readback)


def run_residual_rtl(y: np.ndarray, x: np.ndarray, regs: ResidualRegisters, *, lanes: int = 4, max_d: int = 1024,
                     pauses: bool = True, seed: int = 0, ident: int | None = None,
                     log: Path | None = None) -> UnitRtlResult:
    """The residual add (:class:`~vckattn.hw.pl.residual.ResidualKernel`) on ``n`` tokens.

    Output = ``residual_add_int(y, x, regs)`` (the golden model, :mod:`vckattn.golden.sublayer`).

    Args:
        y: The W_O accumulators ``(n, d)``, raw int32 values (any integer dtype), ``1 <= d <= max_d``.
        x: The residual input ``(n, d)``, raw int8 values.
        regs: The constants: ``rq_x`` (two registers) and the per-channel ``rq_y`` (``d`` entries or a scalar) in
            the ``y_mult``/``y_shift`` tables (:func:`~vckattn.golden.sublayer.residual_register_values`).
        lanes, max_d: The build.
        pauses, seed, ident, log: As :func:`run_bhyt_site_rtl` (``ident`` default: ``RESIDUAL_ID``).

    Returns:
        :class:`UnitRtlResult`: ``out`` ``(n, d)`` int8 at ``regs.s_out``; ``stat`` None; ``readback``
        ``x_mult``, ``x_shift``, ``y_mult``, ``y_shift`` (``d`` entries each).
    """
    check_token_geometry(lanes, max_d)
    ya = _int_array(y, "y", 2, 32)
    xa = _int_array(x, "x", 2, 8)
    if ya.shape != xa.shape:
        raise ValueError(f"y {ya.shape} and x {xa.shape} must have the same shape")
    d = ya.shape[1]
    if d > max_d:
        raise ValueError(f"tokens of {d} channels do not fit the unit's tables (max_d = {max_d})")
    values: dict[str, Any] = dict(residual_register_values(regs, d, max_d))
    top = _top("residual", f"l{lanes}", f"d{max_d}")
    res, readback, got = _run("residual", "residual", top, (lanes, max_d), residual_regmap(lanes, max_d), values,
                              ident, lanes, {"rows": ya, "res": xa}, pauses, seed, log)
    return UnitRtlResult(out=res["out"], stat=None, cycles=int(res["cycles"]), ident=got, readback=readback)

"""A build's stage list on a backend: the stages the manifest places on the device run there, the others on the host.

The full description: ``docs/internals/host.md``, section ``host/backends/staged.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from vckattn.golden.bhyt_int import BHyTSiteRegisters, bhyt_register_values, bhyt_site_int, gamma_values
from vckattn.golden.errors import UserError
from vckattn.golden.quant_attention import QuantAttentionLayer, key_mask, narrow_layer
from vckattn.golden.regmap import RegisterMap, from_word, to_word, wide_names
from vckattn.golden.requant import RequantRegisters, requantize
from vckattn.golden.rope_int import rope_int, rope_table_banks
from vckattn.golden.stages import (
    GOLDEN,
    Constants,
    StageInputs,
    Sublayer,
    attention_of,
    family_of,
    sublayer_int,
)
from vckattn.golden.sublayer import (
    DecoderSublayer,
    EncoderSublayer,
    ResidualRegisters,
    fused_qkv,
    residual_add_int,
    residual_register_values,
)
from vckattn.host.backends.base import DeviceError

SUBLAYER_BACKENDS = ("emu", "csim", "rtl")



class StageError(UserError):
    """A layer this build cannot run (family, width, heads, sequence): refused before any work."""

    exit_code = 5


# ------------------------------------------------------------------------------------------------ registers


class RegisterFileModel:
    """A PL unit's register file in software (the ``emu`` and ``csim`` backends): the ID register reads the map's
    constant; a word written to a register or table entry is held in that entry's width (sign-extended when it is
    signed) and read back so, as the unit's AXI4-Lite register file does; a write to no writable entry is an
    error."""

    def __init__(self, regmap: RegisterMap) -> None:
        self.regmap = regmap
        self.words: dict[int, int] = {regmap.offset("ID"): regmap.ident}
        self.fields: dict[int, tuple[int, bool]] = {regmap.offset(r.name): (r.width, r.signed)
                                                    for r in regmap.writable}
        self.mems = [(regmap.offset(m.name), m.depth, m.width, m.signed) for m in regmap.mems]

    def _field(self, offset: int) -> tuple[int, bool]:
        if offset in self.fields:
            return self.fields[offset]
        for base, depth, width, signed in self.mems:
            if base <= offset < base + 4 * depth and not (offset - base) % 4:
                return width, signed
        raise DeviceError(f"register file model: write to {offset:#x}, no writable register or table entry")

    def write32(self, offset: int, word: int) -> None:
        width, signed = self._field(offset)
        self.words[offset] = to_word(from_word(int(word) & ((1 << width) - 1), width, signed))

    def read32(self, offset: int) -> int:
        return self.words.get(offset, 0)


def program_unit(port: Any, regmap: RegisterMap, values: dict[str, Any], unit: str) -> dict[str, Any]:
    """Program a unit through ``port``: its ID checked, every value of ``values`` written and read back exactly
    (:mod:`vckattn.hw.spec.driver`). Returns the values AS READ BACK, decoded by ``regmap`` (tables as lists)."""
    from vckattn.hw.spec.driver import RegisterError, check_ident, program, verify

    try:
        check_ident(port, regmap, unit)
        writes = program(port, regmap, values, unit)
        words = verify(port, writes, unit)
    except RegisterError as exc:
        raise DeviceError(str(exc)) from None
    out: dict[str, Any] = {}
    for w in writes:
        name, _, idx = w.name.partition("[")
        v = from_word(to_word(words[w.name]), w.width, w.signed)
        if idx:
            out.setdefault(name, []).append(v)
        else:
            out[name] = v
    return out


def residual_from_values(v: dict[str, Any], d: int, s_out: float) -> ResidualRegisters:
    """The residual add's registers from its register values (:func:`residual_register_values`' inverse)."""
    return ResidualRegisters(RequantRegisters(np.asarray(v["y_mult"][:d], np.int64), np.asarray(v["y_shift"][:d],
                                                                                                  np.int64)),
                             RequantRegisters(np.int64(v["x_mult"]), np.int64(v["x_shift"])), s_out)


def _wide(v: dict[str, Any], name: str, bits: int) -> int:
    names = wide_names(name, bits)
    return sum(int(v[n]) << (32 * i) for i, n in enumerate(names))


def bhyt_from_values(v: dict[str, Any], d: int, s_out: float, fmt: Any) -> BHyTSiteRegisters:
    """A BHyT site's registers from its register values (:func:`bhyt_register_values` plus ``gamma``, inverted)."""
    return BHyTSiteRegisters(int(v["k_mult"]), int(v["k_shift"]), _wide(v, "eps_int", fmt.stat_bits),
                             _wide(v, "c_int", fmt.stat_bits), np.asarray(v["gamma"][:d], np.int64), int(v["g_frac"]),
                             s_out)


def rope_from_values(v: dict[str, Any], lanes: int, head_dim: int, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """The int16 tables ``(positions, head_dim)`` from the RoPE unit's banks (:func:`rope_table_banks` inverted)."""
    hpl = head_dim // (2 * lanes)
    words = np.zeros((positions, head_dim // 2), np.int64)
    for k in range(lanes):
        bank = np.asarray(v[f"table{k}"][:positions * hpl], np.int64) & 0xFFFFFFFF
        words[:, k::lanes] = bank.reshape(positions, hpl)
    half_c = ((words & 0xFFFF) ^ 0x8000) - 0x8000
    half_s = (((words >> 16) & 0xFFFF) ^ 0x8000) - 0x8000
    return (np.concatenate([half_c, half_c], axis=1).astype(np.int16),
            np.concatenate([half_s, half_s], axis=1).astype(np.int16))


# ------------------------------------------------------------------------------------------------ the device


@dataclass
class StagedRun:
    """One sublayer on the device: ``out`` the residual output ``(B, S, d)`` int8 at ``residual.s_out``; ``trace``
    the stages' integers as the device produced them (``u``, ``stat`` decoder; ``q``, ``k``, ``v`` heads; ``a``
    heads; ``y`` int32); ``registers`` per unit the words programmed and read back; ``seconds`` per device stage
    (and ``program``); ``host_seconds`` per stage the host ran."""

    out: np.ndarray
    trace: dict[str, np.ndarray]
    registers: dict[str, dict]
    seconds: dict[str, float] = field(default_factory=dict)
    cycles: dict[str, int] = field(default_factory=dict)
    host_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def device_seconds(self) -> float:
        """Wall time of the device's stages (programming the units not counted)."""
        return float(sum(v for k, v in self.seconds.items() if k != "program"))

    @property
    def host_total_seconds(self) -> float:
        """Wall time of the host's stages and of programming the units."""
        return float(sum(self.host_seconds.values()) + self.seconds.get("program", 0.0))


class StagedDevice:
    """A build's stage list on ``backend`` (module docstring). Use as a context manager around :meth:`run`."""

    name: ClassVar[str] = "staged"

    def __init__(self, manifest: Any, backend: str, seed: int = 0, **options: Any) -> None:
        from vckattn.host.backends import device_class

        #: the stages this build runs (golden/stages.py); the family's others run on the host (an attention engine
        #: build: every stage but the attention)
        self.device_stages = {st["stage"]: st for st in manifest.data["stages"]}
        if backend not in SUBLAYER_BACKENDS and set(self.device_stages) != {"attention"}:
            raise UserError(f"{manifest.name}: a sublayer build runs on {', '.join(SUBLAYER_BACKENDS)}; its GEMM "
                            f"stages have no xclbin flow yet, so --backend {backend} cannot run it")
        self.manifest, self.backend, self.seed = manifest, backend, seed
        self.section = manifest.data.get("sublayer", {"gemm": {}, "units": {}})
        self.vector = bool(options.get("vector", False))
        self.pauses = bool(options.get("pauses", True))
        self.engine = device_class(backend)(manifest, seed=seed, **options)
        self.quiet = bool(options.get("quiet", True))
        self._logs: Any = None
        self.where = (f"{self.engine.where}; sublayer stages: {_WHERE[backend]}" if "sublayer" in manifest.data
                      else f"{self.engine.where}; every stage but the attention on the host by its golden model")

    def __enter__(self) -> StagedDevice:
        self.engine.open()
        if self.backend == "rtl" and self.quiet:  # the units' simulator output goes to logs, not the terminal
            import tempfile

            self._logs = tempfile.TemporaryDirectory(prefix="vckattn_sublayer_")
        return self

    def __exit__(self, *exc: object) -> None:
        self.engine.close()
        if self._logs is not None:
            self._logs.cleanup()
            self._logs = None

    def _log(self, unit: str) -> Any:
        from pathlib import Path

        return None if self._logs is None else Path(self._logs.name) / f"{unit}.log"

    @property
    def family(self) -> str | None:
        """The family the build's units serve (None: an attention engine build, any family)."""
        return self.section.get("family")

    # ---------------------------------------------------------------- checks

    def check(self, sub: Constants, seq: int) -> None:
        """StageError naming what this build cannot run: the family, the width, the sequence length, the
        heads (the engine's head size), the Q/K/V channels (a multiple of the cascade's ``cols``)."""
        fam = family_of(sub)
        name = self.manifest.name
        if self.family is not None and fam != self.family:
            raise StageError(f"{name} is a {self.family} sublayer build; this layer is a {fam} sublayer "
                             f"(choose sublayer_small_{fam})")
        d = int(attention_of(sub).q_proj.w.shape[1])
        if "d_model" in self.section and d != int(self.section["d_model"]):
            raise StageError(f"{name} serves d_model {self.section['d_model']} (its GEMM cascades' K); this "
                             f"layer has d_model {d}")
        if seq > self.manifest.max_seq_len:
            raise StageError(f"{name} takes up to {self.manifest.max_seq_len} tokens, got {seq}")
        layer = attention_of(sub)
        if layer.head_dim > self.manifest.engine.d:
            raise StageError(f"{name}: head size {layer.head_dim} exceeds the engine's {self.manifest.engine.d}")
        n_out = (layer.n_heads + 2 * int(layer.n_kv_heads)) * layer.head_dim
        for g, n in (("qkv", n_out), ("o", d)):
            if g not in self.section["gemm"]:
                continue
            cols = int(self.section["gemm"][g]["cols"])
            if n % cols:
                raise StageError(f"{name}: the {g} cascade makes {cols} channels a block; this layer has {n}")
        rope = self.section["units"].get("rope")
        if fam == "decoder" and rope is not None and layer.head_dim != rope["head_dim"]:
            raise StageError(f"{name}: its RoPE unit rotates rows of {rope['head_dim']}; this layer's heads "
                             f"have {layer.head_dim}")

    def attention_layer(self, layer: QuantAttentionLayer) -> QuantAttentionLayer:
        """The layer as the engine runs it: its scores narrowed to the build's width (:func:`narrow_layer`)."""
        try:
            return narrow_layer(layer, int(self.manifest.engine.score_bits))
        except ValueError as exc:
            raise StageError(f"{self.manifest.name}: {exc}") from None

    # ---------------------------------------------------------------- stages

    def _gemm(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, rq: RequantRegisters | None,
              which: str) -> np.ndarray:
        """``x`` ``(n, K)`` int8 through cascade ``which`` (``qkv``: requantized int8; ``o``: int32)."""
        g = self.section["gemm"][which]
        if self.backend == "csim":
            from vckattn.hw.spec.gemm import GemmParams
            from vckattn.sim.gemm_csim import run_gemm

            p = GemmParams(**g)
            try:
                res = run_gemm(p, x, w, b, rq, vector=self.vector)
            except ValueError as exc:
                raise DeviceError(f"{which} GEMM: {exc}") from None
            if not res.ok or res.out is None:
                bad = [f"{k}: {t}" for k, (c, t) in res.status.items() if c] + \
                      [f"{k}: {n} left" for k, n in res.leftover.items()] + \
                      [f"{k}: {n} missing" for k, n in res.missing.items()]
                raise DeviceError(f"C-simulation of the {which} GEMM: {'; '.join(bad[:4]) or 'no output'}")
            return res.out
        from vckattn.golden.gemm_proj import check_accumulator_range, fold_requant

        try:  # the constants the cascade can hold, as the C++ refuses them
            check_accumulator_range(np.zeros(w.shape[0], np.int64) if b is None else b, w.shape[1], w.shape[0])
            if rq is not None:
                fold_requant(rq, w.shape[0])
        except ValueError as exc:
            raise DeviceError(f"{which} GEMM: {exc}") from None
        acc = x.astype(np.int64) @ w.astype(np.int64).T + (0 if b is None else np.asarray(b, np.int64))
        return acc.astype(np.int32) if rq is None else requantize(acc, rq).astype(np.int8)

    def _unit_values(self, sub: Constants, rope: tuple[np.ndarray, np.ndarray] | None) -> dict[str, dict]:
        """The register values of the build's PL units (the units of the stages it runs)."""
        d = int(attention_of(sub).q_proj.w.shape[1])
        u = self.section["units"]
        vals = {}
        if isinstance(sub, EncoderSublayer | DecoderSublayer) and "residual" in u:
            vals["residual"] = residual_register_values(sub.residual, d, int(u["residual"]["max_d"]))
        if isinstance(sub, DecoderSublayer) and "bhyt_site" in u:
            vals["bhyt_site"] = {**bhyt_register_values(sub.site_a, sub.fmt.norm), "gamma": gamma_values(sub.site_a)}
        if isinstance(sub, DecoderSublayer) and "rope" in u:
            c, s = rope  # type: ignore[misc]
            r = u["rope"]
            vals["rope"] = {"pos_base": 0, **rope_table_banks(c, s, r["lanes"], r["head_dim"], r["max_pos"])}
        return vals

    def _program_models(self, vals: dict[str, dict]) -> dict[str, dict]:
        from vckattn.hw.design.sublayer_build import unit_regmap

        return {unit: program_unit(RegisterFileModel(unit_regmap(self.manifest, unit)), unit_regmap(self.manifest,
                                                                                                    unit), v, unit)
                for unit, v in vals.items()}

    def run(self, sub: Constants, x: np.ndarray, keep: np.ndarray | None = None,
            rope: tuple[np.ndarray, np.ndarray] | None = None) -> StagedRun:
        """The sublayer (or the attention core alone: ``sub`` a :class:`QuantAttentionLayer`) on raw int8 ``x``
        ``(B, S, d)`` (X at ``s_x`` for the encoder and the attention core, H at ``s_h`` for the decoder); ``keep``
        ``(B, S)`` valid tokens; ``rope`` the int16 tables ``(S, head_dim)`` (the decoder's; a RoPE model's attention
        core's). ``sub`` must already be the engine's layer of the build's width (:meth:`attention_layer`).
        ``out`` is the family's output (:data:`~vckattn.golden.stages.FAMILY_OUTPUT`).

        The family's stages run in order (:func:`vckattn.golden.stages.run_stages`): each stage the manifest
        places on the device by this backend's model of its part, every other stage on the host by its golden
        function."""
        x = np.asarray(x)
        if x.ndim != 3 or x.dtype != np.int8:
            raise ValueError(f"x must be (B, S, d) int8, got {x.shape} {x.dtype}")
        b, s, d = x.shape
        self.check(sub, s)
        layer = attention_of(sub)
        if (family_of(sub) == "decoder" or rope is not None) and \
                (rope is None or np.shape(rope[0]) != (s, layer.head_dim)):
            raise ValueError(f"RoPE needs int16 tables ({s}, {layer.head_dim})")
        t: dict[str, float] = {}
        host: dict[str, float] = {}
        cycles: dict[str, int] = {}
        t0 = time.perf_counter()
        vals = self._unit_values(sub, rope)
        read = {} if self.backend == "rtl" else self._program_models(vals)
        t["program"] = time.perf_counter() - t0
        state = {"vals": vals, "read": read, "cycles": cycles}

        def stage(name: str, trace: dict[str, np.ndarray], c: StageInputs) -> bool:
            """Every stage, timed: the device's by this backend, the others by golden on the host."""
            t0 = time.perf_counter()
            if name not in self.device_stages:
                GOLDEN[name](trace, c)
                host[name] = time.perf_counter() - t0
                return True
            getattr(self, f"_stage_{name}")(sub, trace, keep, state)
            t[name] = time.perf_counter() - t0
            return True

        tables = None if rope is None else (rope[0][None, None], rope[1][None, None])
        out, trace = sublayer_int(sub, x, keep, tables, stage)
        return StagedRun(out, trace, read, t, cycles, host)

    # the device's stages: each reads and writes the trace as its golden function does (golden/stages.py)

    def _stage_site_a(self, sub: Sublayer, tr: dict, keep: np.ndarray | None, st: dict) -> None:
        b, s, d = tr["h"].shape
        u_rows, stat, read_b, cyc = self._bhyt(sub, tr["h"].reshape(b * s, d), st["read"])  # type: ignore[arg-type]
        st["read"].setdefault("bhyt_site", read_b)
        if cyc is not None:
            st["cycles"]["bhyt_site"] = cyc
        tr["stat"], tr["u"] = stat.reshape(b, s, 1), u_rows.reshape(b, s, d)

    def _stage_qkv(self, sub: Constants, tr: dict, keep: np.ndarray | None, st: dict) -> None:
        layer = attention_of(sub)
        b, s, d = tr["in"].shape
        fq = fused_qkv(layer)
        qkv = self._gemm(tr["in"].reshape(b * s, d), fq.w, fq.b, fq.rq, "qkv")
        tr["q"], tr["k"], tr["v"] = (_heads(a.reshape(b, s, -1), n) for a, n in zip(
            fq.unfuse(qkv), (layer.n_heads, layer.n_kv_heads, layer.n_kv_heads), strict=True))
        tr["keep"] = key_mask(keep, b, s, layer.causal)

    def _stage_rope(self, sub: Sublayer, tr: dict, keep: np.ndarray | None, st: dict) -> None:
        tr["q_pre"], tr["k_pre"] = tr["q"], tr["k"]
        tr["q"], tr["k"], read_r, cyc = self._rope(tr["q"], tr["k"], st["vals"]["rope"], st["read"])
        st["read"].setdefault("rope", read_r)
        if cyc is not None:
            st["cycles"]["rope"] = cyc

    def _stage_attention(self, sub: Constants, tr: dict, keep: np.ndarray | None, st: dict) -> None:
        self.engine.configure(attention_of(sub))
        tr["a"] = self.engine.run_heads({"q": tr["q"], "k": tr["k"], "v": tr["v"], "keep": tr["keep"]})
        if self.engine.last_cycles:
            st["cycles"]["attention"] = int(self.engine.last_cycles)

    def _stage_o_proj(self, sub: Constants, tr: dict, keep: np.ndarray | None, st: dict) -> None:
        a = tr["a"]
        b, _, s, _ = a.shape
        a_flat = np.ascontiguousarray(a.transpose(0, 2, 1, 3)).reshape(b * s, -1)
        o = attention_of(sub).o_proj
        tr["y"] = self._gemm(a_flat, o.w, o.b, None, "o").reshape(b, s, -1)

    def _stage_residual(self, sub: Sublayer, tr: dict, keep: np.ndarray | None, st: dict) -> None:
        b, s, d = tr["res"].shape
        out, read_res, cyc = self._residual(sub, tr["y"].reshape(b * s, d), tr["res"].reshape(b * s, d),
                                            st["vals"]["residual"], st["read"])
        st["read"].setdefault("residual", read_res)
        if cyc is not None:
            st["cycles"]["residual"] = cyc
        tr["out"] = out.reshape(b, s, d)

    # each PL stage: run from the registers as read back (emu; csim for the residual add and RoPE), or in Verilator
    # (rtl, and csim's BHyT site, which read them back)

    def _bhyt(self, sub: DecoderSublayer, h: np.ndarray, read: dict) -> tuple[np.ndarray, np.ndarray, dict, int | None]:
        d = h.shape[1]
        unit = self.section["units"]["bhyt_site"]
        if self.backend in ("rtl", "csim"):
            from vckattn.sim.sublayer_rtl import run_bhyt_site_rtl

            r = _rtl(run_bhyt_site_rtl, h, sub.site_a, sub.fmt.norm, lanes=unit["lanes"], max_d=unit["max_d"],
                                  pauses=self.pauses, seed=self.seed, ident=unit["id"], log=self._log("bhyt_site"))
            regs = bhyt_from_values(r.readback, d, sub.site_a.s_out, sub.fmt.norm)
            _same(regs, sub.site_a, "bhyt_site")
            return np.asarray(r.out, np.int8), np.asarray(r.stat, np.int64), r.readback, r.cycles
        regs = bhyt_from_values(read["bhyt_site"], d, sub.site_a.s_out, sub.fmt.norm)
        stat = (h.astype(np.int64) ** 2).sum(axis=1, keepdims=True)
        return bhyt_site_int(h, stat, regs, sub.fmt.norm).astype(np.int8), stat[:, 0], read["bhyt_site"], None

    def _rope(self, q: np.ndarray, k: np.ndarray, values: dict, read: dict
              ) -> tuple[np.ndarray, np.ndarray, dict, int | None]:
        unit = self.section["units"]["rope"]
        s, hd = q.shape[2], q.shape[3]
        if self.backend == "rtl":
            from vckattn.sim.sublayer_rtl import run_rope_rtl

            c, sn = rope_from_values(values, unit["lanes"], hd, s)
            rows = np.concatenate([q.reshape(-1, hd), k.reshape(-1, hd)])
            pos = np.concatenate([np.tile(np.arange(s), q.shape[0] * q.shape[1]),
                                  np.tile(np.arange(s), k.shape[0] * k.shape[1])])
            r = _rtl(run_rope_rtl, rows, pos, c, sn, lanes=unit["lanes"], head_dim=hd, max_pos=unit["max_pos"],
                             pauses=self.pauses, seed=self.seed, ident=unit["id"], log=self._log("rope"))
            got = rope_from_values(r.readback, unit["lanes"], hd, s)
            if not (np.array_equal(got[0], c) and np.array_equal(got[1], sn)):
                raise DeviceError("rope: the tables read back differ from the tables programmed")
            out = np.asarray(r.out, np.int8)
            nq = q.size // hd
            return out[:nq].reshape(q.shape), out[nq:].reshape(k.shape), r.readback, r.cycles
        c, sn = rope_from_values(read["rope"], unit["lanes"], hd, s)
        return (rope_int(q, c[None, None], sn[None, None]).astype(np.int8),
                rope_int(k, c[None, None], sn[None, None]).astype(np.int8), read["rope"], None)

    def _residual(self, sub: Sublayer, y: np.ndarray, x: np.ndarray, values: dict, read: dict
                  ) -> tuple[np.ndarray, dict, int | None]:
        d = x.shape[1]
        unit = self.section["units"]["residual"]
        if self.backend == "rtl":
            from vckattn.sim.sublayer_rtl import run_residual_rtl

            r = _rtl(run_residual_rtl, y, x, sub.residual, lanes=unit["lanes"], max_d=unit["max_d"], pauses=self.pauses,
                                 seed=self.seed, ident=unit["id"], log=self._log("residual"))
            regs = residual_from_values(r.readback, d, sub.residual.s_out)
            _same(regs, sub.residual, "residual")
            return np.asarray(r.out, np.int8), r.readback, r.cycles
        regs = residual_from_values(read["residual"], d, sub.residual.s_out)
        return residual_add_int(y, x, regs, sub.fmt), read["residual"], None


_WHERE = {
    "emu": "GEMM cascades and PL units by their golden models, registers in a software register file",
    "csim": "GEMM cascades in their C++ (C-simulation), BHyT site A in Verilator (its Amaranth unit, registers over "
            "AXI4-Lite), the residual add and RoPE by their golden models, their registers in a software register "
            "file",
    "rtl": "every PL unit (BHyT site A, RoPE, residual add) in Verilator with its registers over AXI4-Lite; the GEMM "
           "cascades by the AIE's bit-exact model",
}


def _rtl(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A PL unit's Verilator run; its failures (wrong ID, a register that reads back differently, a run that
    breaks) as DeviceError."""
    from vckattn.sim.sublayer_rtl import UnitRtlError

    try:
        return fn(*args, **kwargs)
    except UnitRtlError as exc:
        raise DeviceError(f"rtl: {exc}") from None


def _heads(t: np.ndarray, heads: int) -> np.ndarray:
    b, s, n = t.shape
    return np.ascontiguousarray(t.reshape(b, s, heads, n // heads).transpose(0, 2, 1, 3))


def _same(got: Any, want: Any, unit: str) -> None:
    """DeviceError unless the registers decoded from the read-back words equal the ones programmed."""
    def flat(r: Any) -> list:
        if isinstance(r, ResidualRegisters):
            return [np.asarray(r.rq_y.mult).tolist(), np.asarray(r.rq_y.shift).tolist(), int(r.rq_x.mult),
                    int(r.rq_x.shift)]
        return [r.k_mult, r.k_shift, r.eps_int, r.c_int, r.g_frac, np.asarray(r.gamma).tolist()]

    g, w = flat(got), flat(want)
    if isinstance(got, ResidualRegisters):  # a scalar rq_y is written to every channel
        w[0] = np.broadcast_to(np.asarray(want.rq_y.mult), np.shape(got.rq_y.mult)).tolist()
        w[1] = np.broadcast_to(np.asarray(want.rq_y.shift), np.shape(got.rq_y.shift)).tolist()
    if g != w:
        raise DeviceError(f"{unit}: the registers read back differ from the constants programmed")


def sublayer_of(sub: Constants, layer: QuantAttentionLayer) -> Constants:
    """``sub`` with its attention layer replaced (the engine's narrowed layer); the attention core: ``layer``."""
    return layer if isinstance(sub, QuantAttentionLayer) else replace(sub, attn=layer)


__all__ = ["SUBLAYER_BACKENDS", "RegisterFileModel", "StagedDevice", "StageError", "StagedRun",
           "bhyt_from_values", "program_unit", "residual_from_values", "rope_from_values", "sublayer_of"]

"""The committed HLS ROM headers (``hw/hls/generated/``) are exactly what the golden models generate.

``vckattn.hw.hls.tables`` renders the golden tables as C++ integer literals; these tests fail when a
committed header is stale (golden table or format changed without ``make regen``)
and read the literals back to check them against the golden arrays independently of the renderer.
No compiler needed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from vckattn.golden.bhyt_int import C_SHIFT, NormFormat
from vckattn.golden.funcunits import recip_table, rsqrt_octave_table
from vckattn.golden.online_softmax_int import NEG_SENTINEL, OnlineSoftmaxFormat
from vckattn.golden.swiftmax_int import SwiftMaxFormat
from vckattn.hw.hls import tables

SM, NF, OS = SwiftMaxFormat(), NormFormat(), OnlineSoftmaxFormat()
GOLDEN = {
    "pow2": SM.pow2.table(),
    "rsqrt": rsqrt_octave_table(NF.rsqrt),
    "tanh": NF.tanh.table(),
    "recip": recip_table(OS.recip),
}


def test_committed_headers_equal_generated() -> None:
    assert tables.check() == [], "run `make regen` and commit hw/hls/generated/"
    names = {p.name for p in tables.GENERATED_DIR.glob("*.h")}
    assert names == {s.name for s in tables.headers()}, "unexpected or missing files in hw/hls/generated/"


def test_check_and_generate(tmp_path: Path) -> None:
    assert tables.check() == []
    assert tables.check(tmp_path) == [s.name for s in tables.headers()]  # empty folder: everything stale
    assert tables.generate(tmp_path) == [tmp_path / s.name for s in tables.headers()]
    for spec in tables.headers():
        assert (tmp_path / spec.name).read_text() == (tables.GENERATED_DIR / spec.name).read_text()
    (tmp_path / "tanh_table.h").write_text((tmp_path / "tanh_table.h").read_text().replace("32768", "32767", 1))
    assert tables.check(tmp_path) == ["tanh_table.h"]


def _constants(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"constexpr int (\w+) = (-?\d+);", text)}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_table_literals_equal_golden(name: str) -> None:
    text = (tables.GENERATED_DIR / f"{name}_table.h").read_text()
    body = re.search(rf"#define VCKATTN_{name.upper()}_ROM_INIT \{{(.*?)\n\}}", text, re.S)
    assert body is not None
    literals = re.sub(r"/\*.*?\*/|\\", " ", body.group(1))
    values = np.array([int(v) for v in literals.replace(",", " ").split()], dtype=np.int64)
    np.testing.assert_array_equal(values, GOLDEN[name])
    consts = _constants(text)
    assert consts["ENTRIES"] == GOLDEN[name].size
    width = int(GOLDEN[name].max()).bit_length()
    assert GOLDEN[name].min() >= 0 and consts["ENTRY_BITS"] == width
    assert f"typedef ap_uint<{width}> entry_t;" in text


def test_table_configs_equal_golden() -> None:
    p, r, t, rc = SM.pow2, NF.rsqrt, NF.tanh, OS.recip
    want = {
        "recip": {"MANT_BITS": rc.mant_bits, "LUT_BITS": rc.lut_bits, "OUT_FRAC": rc.out_frac,
                  "INTERP": int(rc.interp)},
        "pow2": {"IN_FRAC": p.in_frac, "LUT_BITS": p.lut_bits, "OUT_FRAC": p.out_frac, "INTERP": int(p.interp)},
        "rsqrt": {"MANT_BITS": r.mant_bits, "LUT_BITS": r.lut_bits, "OUT_FRAC": r.out_frac, "INTERP": int(r.interp),
                  "OCTAVE_ENTRIES": (1 << r.lut_bits) + 1},
        "tanh": {"IN_FRAC": t.in_frac, "RANGE_LOG2": t.range_log2, "LUT_BITS": t.lut_bits, "OUT_FRAC": t.out_frac,
                 "INTERP": int(t.interp)},
    }
    for name, config in want.items():
        read = _constants((tables.GENERATED_DIR / f"{name}_table.h").read_text())
        assert {k: read[k] for k in config} == config, name


def test_formats_header_equals_golden() -> None:
    text = (tables.GENERATED_DIR / "formats.h").read_text()
    sm_part, rest = text.split("namespace norm_fmt {", 1)
    nf_part, os_part = rest.split("namespace online_softmax_fmt {", 1)
    sm, nf, osf = _constants(sm_part), _constants(nf_part), _constants(os_part)
    assert sm == {"ACC_BITS": SM.acc_bits, "A_BITS": SM.a_bits, "T_FRAC": SM.t_frac, "REG_BITS": SM.reg_bits,
                  "OUT_BITS": SM.out_bits, "MAX_A_SHIFT": SM.max_a_shift}
    assert nf == {"STAT_BITS": NF.stat_bits, "K_BITS": NF.k_bits, "ARG_FRAC": NF.arg_frac, "G_BITS": NF.g_bits,
                  "OUT_BITS": NF.out_bits, "C_SHIFT": C_SHIFT}
    assert osf == {"ACC_BITS": OS.acc_bits, "A_BITS": OS.a_bits, "T_FRAC": OS.t_frac, "SUM_FRAC": OS.sum_frac,
                   "SUM_BITS": OS.sum_bits, "OUT_BITS": OS.out_bits, "OUT_FRAC": OS.out_frac,
                   "NEG_SENTINEL_LOG2": 47, "P_CUMULATIVE": 1}
    assert -(1 << osf["NEG_SENTINEL_LOG2"]) == NEG_SENTINEL and OS.p_rounding == "cumulative"


def test_online_softmax_shares_swiftmax_pow2_unit() -> None:
    """The online-softmax unit's 2^f unit is SwiftMax's (one pow2_table.h); a format whose differs is refused."""
    from dataclasses import replace

    from vckattn.golden.funcunits import Pow2Config

    assert OS.pow2 == SM.pow2
    with pytest.raises(ValueError, match="share"):
        tables.headers(osf=replace(OS, pow2=Pow2Config(in_frac=12, lut_bits=5, out_frac=15)))


def test_engine_regs_header_equals_regmap() -> None:
    """engine_regs.h lists exactly the registers a dual engine build adds to SwiftMax's, at the engine map's
    offsets, in its order."""
    from vckattn.golden.engine import ENGINE_NORMALIZERS, engine_regmap
    from vckattn.golden.swiftmax_int import swiftmax_regmap

    full, base = engine_regmap(SM, ENGINE_NORMALIZERS), {r.name for r in swiftmax_regmap(SM).regs}
    text = (tables.GENERATED_DIR / "engine_regs.h").read_text()
    regs = re.findall(r"X\((\w+), (\d+), ([01]), 0x([0-9A-F]+)\) \\", text)
    want = [(r.name, r.width, r.signed, full.offset(r.name)) for r in full.writable if r.name not in base]
    assert [(n, int(w), bool(int(s)), int(o, 16)) for n, w, s, o in regs] == want
    assert [n for n, *_ in want] == ["normalizer", "os_a_mult", "os_a_shift"]
    assert f"#define VCKATTN_ENGINE_ONLINE_WORDS {len(want)} " in text


def test_swiftmax_regs_header_equals_regmap() -> None:
    """The register header lists the v2 map: the shared registers, then the per-head memories b_beta / c_out
    (depth max_heads, at the map's offsets), with MAX_HEADS / HEAD_BITS."""
    from vckattn.golden.swiftmax_int import swiftmax_regmap

    rm = swiftmax_regmap(SM)
    text = (tables.GENERATED_DIR / "swiftmax_regs.h").read_text()
    regs = re.findall(r"X\((\w+), (\d+), ([01]), 0x([0-9A-F]+)\) \\", text)
    assert [(n, int(w), bool(int(s)), int(o, 16)) for n, w, s, o in regs] == [
        (r.name, r.width, r.signed, rm.offset(r.name)) for r in rm.writable]
    mems = re.findall(r"X\((\w+), (\d+), ([01]), 0x([0-9A-F]+), (\d+)\) \\", text)
    assert [(n, int(w), bool(int(s)), int(o, 16), int(d)) for n, w, s, o, d in mems] == [
        (m.name, m.width, m.signed, rm.offset(m.name), m.depth) for m in rm.mems]
    assert [m.name for m in rm.mems] == ["b_beta", "c_out"] and all(m.depth == SM.max_heads for m in rm.mems)
    assert f"#define VCKATTN_SWIFTMAX_VERSION {rm.version}" in text and rm.version == 2
    assert f"#define VCKATTN_SWIFTMAX_MAX_HEADS {SM.max_heads} " in text
    assert f"#define VCKATTN_SWIFTMAX_HEAD_BITS {SM.head_bits} " in text
    for m in rm.mems:
        assert f"    ap_int<{m.width}> {m.name}[{m.depth}];" in text

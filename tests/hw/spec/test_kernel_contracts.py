"""The kernel contract: every kernel is one registry entry whose parts exist, by one name, and
whose register list is declared exactly once (golden/kernels.py, hw/pl/kernels.py, golden/regmap.py)."""

from __future__ import annotations

import gc
import importlib
import inspect
import re
import warnings
from pathlib import Path

import pytest

from vckattn.golden.kernels import KERNELS, KernelContract
from vckattn.hw.pl.kernels import PL_KERNELS
from vckattn.hw.spec.driver import program

ROOT = Path(__file__).resolve().parents[3]
LAYERS = ("golden", "hw", "sim", "host", "tests")


@pytest.mark.parametrize("name", list(KERNELS))
def test_contract_parts_exist(name: str) -> None:
    c = KERNELS[name]
    assert c.name == name
    assert callable(c.golden) and inspect.getmodule(c.golden).__name__.startswith("vckattn.golden.")  # type: ignore[union-attr]
    assert callable(program)
    importlib.import_module(c.testbench)
    if c.regmap is not None:
        assert c.regmap().writable
    if name in PL_KERNELS:
        assert isinstance(PL_KERNELS[name].component, type)


def test_every_kernel_with_registers_has_gateware() -> None:
    """The PL registry names exactly the registry's kernels that have AXI4-Lite registers."""
    assert set(PL_KERNELS) == {n for n, c in KERNELS.items() if c.regmap is not None}


@pytest.mark.parametrize("name", list(PL_KERNELS))
def test_same_name_in_every_layer(name: str) -> None:
    """hw/pl/<name>.py, sim/tb_<name>.py: a reader finds a kernel by its name."""
    c, k = KERNELS[name], PL_KERNELS[name]
    assert k.path.startswith(f"vckattn.hw.pl.{name}:"), k.path
    assert c.testbench == f"vckattn.sim.tb_{name}"
    assert (ROOT / "hw" / "pl" / f"{name}.py").is_file() and (ROOT / "sim" / f"tb_{name}.py").is_file()
    assert c.regmap is not None
    assert c.regmap.__name__ == f"{name}_regmap" or name.startswith("bhyt"), c.regmap.__name__


@pytest.mark.parametrize("name", list(PL_KERNELS))
def test_component_register_file_is_the_declaration(name: str) -> None:
    """The Amaranth component's register file is built from the golden declaration (same map)."""
    c, k = KERNELS[name], PL_KERNELS[name]
    assert c.regmap is not None
    with warnings.catch_warnings():  # the components are discarded unelaborated: no UnusedElaboratable
        warnings.simplefilter("ignore")
        for lanes in (1, 4):
            comp = k.component(lanes, **k.build)  # type: ignore[call-arg]
            regmap_fn = c.regmap
            params = inspect.signature(regmap_fn).parameters
            build = {"lanes": lanes, **k.build}
            declared = regmap_fn(**{k: v for k, v in build.items() if k in params})  # type: ignore[call-arg]
            assert comp.regmap.describe() == declared.describe()
            del comp
        gc.collect()


# ------------------------------------------------------------------ the register list, declared once

_SEP = r"""(?:[\s,'"`()\[\]]|ap_u?int<\d+>|\bint\b|\blong\b|\bconst\b)*"""  # what stands between listed items
_TYPE = r"(?:(?:const\s+)?(?:ap_u?int<\w+>|u?int\d*_t|int|long|sm_\w+)\s+)?"


def register_lists(text: str, names: list[str]) -> list[tuple[int, str]]:
    """Places in ``text`` that enumerate three or more of ``names`` by hand: on one line, separated
    only by commas, spaces, quotes, brackets or C types (a tuple, a signature, a usage string), or as
    three or more consecutive lines that each begin with one of them (struct or dataclass fields,
    ``Reg(...)`` rows, an X-macro, a documentation table, pragmas, member assignments)."""
    alt = "|".join(map(re.escape, names))
    inline = re.compile(rf"\b(?:{alt})\b(?:{_SEP}\b(?:{alt})\b){{2,}}")
    row = re.compile(rf"""^\s*(?://+|#+|\*)?\s*(?:0x[0-9A-Fa-f]+\s+(?:r[ow]\S*\s+(?:[su]\d+\S*\s+)?)?)?"""
                     rf"""(?:\#pragma[^=]*port=|\w+\.|X\(|Reg\(|["'`]*)?{_TYPE}["'`]*\b({alt})\b""")
    found, run = [], []
    for i, line in enumerate(text.splitlines(), 1):
        if inline.search(line):
            found.append((i, line.strip()))
        m = row.match(line)
        if m:
            run.append((i, m[1]))
            if len({n for _, n in run}) == 3:
                found.append((run[0][0], "rows: " + ", ".join(n for _, n in run)))
        elif line.strip():
            run = []
    return found


def _declaration_file(c: KernelContract) -> Path:
    assert c.regmap is not None
    return Path(inspect.getsourcefile(c.regmap) or "").resolve()


LISTED = [n for n, c in KERNELS.items() if c.regmap is not None and len(c.regmap().writable) >= 3]


def test_swiftmax_is_checked() -> None:
    assert "swiftmax" in LISTED


@pytest.mark.parametrize("name", LISTED)
def test_register_list_declared_once(name: str) -> None:
    """No .py/.cpp/.h/.cc file outside the declaration lists the kernel's
    writable registers by hand."""
    c = KERNELS[name]
    assert c.regmap is not None
    names = [r.name for r in c.regmap().writable]
    allowed = {_declaration_file(c)}
    offenders = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*")):
            if path.suffix not in (".py", ".cpp", ".h", ".cc") or path in allowed or not path.is_file():
                continue
            offenders += [f"{path.relative_to(ROOT)}:{i}: {what[:100]}"
                          for i, what in register_lists(path.read_text(errors="replace"), names)]
    assert not offenders, "hand-written register lists outside the declaration:\n" + "\n".join(offenders)


#: stand-in register names for the check's own tests
NAMES = ["x_mult", "x_shift", "x_beta", "x_lo", "x_hi", "x_out"]


@pytest.mark.parametrize("text", [
    'REG_NAMES = ("x_mult", "x_shift", "x_beta", "x_lo", "x_hi", "x_out")',
    "void top(int n, ap_int<24> x_mult, int x_shift, ap_int<24> x_beta, ap_int<24> x_lo);",
    "struct r {\n    ap_int<24> x_mult;\n    ap_uint<6> x_shift;\n    ap_int<24> x_beta;\n};",
    "class R:\n    x_mult: int\n    x_shift: int\n    x_lo: int\n",
    "x_mult     s24     scale\nx_shift    u6      shift\nx_beta     s24     beta\n",
    "0x08        x_mult      rw s24   scale\n0x0C        x_shift     rw u6    shift\n0x10  rw s24  ``x_beta``: β\n",
    "#pragma HLS INTERFACE s_axilite port=x_mult\n#pragma HLS INTERFACE s_axilite port=x_shift\n"
    "#pragma HLS INTERFACE s_axilite port=x_hi\n",
    "    regs.x_mult = x_mult;\n    regs.x_shift = x_shift;\n    regs.x_out = x_out;\n",
    '//   usage: tb DIR x_mult x_shift x_beta x_lo x_hi x_out',
])
def test_register_list_check_catches(text: str) -> None:
    assert register_lists(text, NAMES)


@pytest.mark.parametrize("text", [
    "u = clip(shift_round(acc * r.x_mult, r.x_shift) + r.x_beta, r.x_lo, r.x_hi) + r.x_out",
    "for r in regmap.writable:\n    lane[r.name].eq(regs[r.name])",
    "SwiftMaxRegisters(x_mult=amax, x_shift=0, x_beta=lo, x_lo=lo, x_hi=hi, x_out=hi, out_frac=0)",
])
def test_register_list_check_passes_uses(text: str) -> None:
    """Computations and keyword values name registers; they do not declare a list of them."""
    assert register_lists(text, NAMES) == []

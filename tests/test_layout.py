"""Repository rules that keep the data flow one way."""

from __future__ import annotations

import ast
from pathlib import Path

import vckattn

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            names.append("." * node.level + mod)
    return names


def test_golden_imports_nothing_from_host_hw_sim():
    offenders = []
    for path in sorted((ROOT / "golden").rglob("*.py")):
        for name in _imports(path):
            if name.startswith(("vckattn.host", "vckattn.hw", "vckattn.sim", "..host", "..hw", "..sim")):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_package_maps_to_repository_folders():
    import vckattn.golden
    import vckattn.host
    import vckattn.hw
    import vckattn.sim

    assert Path(vckattn.__file__).resolve().parent == ROOT
    for mod, folder in ((vckattn.golden, "golden"), (vckattn.host, "host"), (vckattn.hw, "hw"), (vckattn.sim, "sim")):
        assert Path(mod.__file__).resolve().parent == ROOT / folder


def test_top_level_layout():
    expected = {"pyproject.toml", "Makefile", "README.md", "golden", "hw", "host", "sim", "tests", "bitstreams"}
    present = {p.name for p in ROOT.iterdir()}
    assert expected <= present, f"missing: {sorted(expected - present)}"
    assert vckattn.__version__

"""Repository rules that keep the data flow one way."""

from __future__ import annotations

import ast
from pathlib import Path

import vckattn

ROOT = Path(__file__).resolve().parents[1]


#: The data flow, one way: each layer may import itself and the layers listed here, nothing else.
ALLOWED: dict[str, frozenset[str]] = {
    "golden": frozenset(),
    "hw": frozenset({"golden"}),
    "sim": frozenset({"golden", "hw"}),
    "host": frozenset({"golden", "hw", "sim"}),
}


def _package(path: Path) -> list[str]:
    """``["vckattn", layer, ...]``: the package that ``path`` (a .py file in the repository) belongs to."""
    return ["vckattn", *path.relative_to(ROOT).parent.parts]


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports (absolute name; relative imports resolved), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package(path)[: len(_package(path)) - node.level + 1]
                mod = ".".join([*base, *([node.module] if node.module else [])])
                # ``from . import x`` imports submodules: check each name as a module too
                out += [(node.lineno, f"{mod}.{a.name}") for a in node.names] if not node.module else []
                out.append((node.lineno, mod))
            else:
                out.append((node.lineno, node.module or ""))
    return out


def _layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "vckattn" and len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    if parts[0] in ALLOWED:  # ``import golden`` (not the package name) would also cross a layer
        return parts[0]
    return None


def layering_violations() -> list[str]:
    """``file:line layer -> module`` for every import against the data flow, in every layer's folder."""
    bad = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            for line, module in _imported_modules(path):
                target = _layer_of(module)
                if target is not None and target != layer and target not in allowed:
                    bad.append(f"{path.relative_to(ROOT)}:{line} {layer} -> {module}")
    return bad


def test_imports_follow_the_data_flow():
    """golden -> nothing; hw -> golden; sim -> golden, hw; host -> golden, hw, sim. No exceptions."""
    offenders = layering_violations()
    assert not offenders, "imports against the data flow:\n" + "\n".join(offenders)


def test_layering_check_catches_a_violation(tmp_path, monkeypatch):
    """The check itself can fail: a golden module importing hw (absolute or relative) is named."""
    fake = tmp_path / "repo"
    for layer in ALLOWED:
        (fake / layer).mkdir(parents=True)
    (fake / "golden" / "bad.py").write_text("from vckattn.hw import manifest\nfrom ..sim import runner\n")
    (fake / "hw" / "ok.py").write_text("from vckattn.golden import fixedpoint\nfrom . import verilog\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", fake)
    found = layering_violations()
    assert found == ["golden/bad.py:1 golden -> vckattn.hw", "golden/bad.py:2 golden -> vckattn.sim"], found


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

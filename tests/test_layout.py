"""Repository rules that keep the data flow one way."""

from __future__ import annotations

import ast
import re
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



def test_one_conftest_for_the_tests():
    """Test modules import the shared helpers by name (``from conftest import require_tools``); pytest imports each
    conftest.py as a module named ``conftest``, so a second one below tests/ would shadow the root one for every
    module collected after it."""
    tests = ROOT / "tests"
    extra = sorted(str(p.relative_to(ROOT)) for p in tests.rglob("conftest.py") if p.parent != tests)
    assert not extra, f"fixtures belong in tests/conftest.py, not in {extra}"

#: hw's sub-packages, one way: what the hardware computes (spec) <- the gateware (pl) <- the cost model (perf, which
#: reads the gateware's own timing) <- the build part (design: generator, catalog, layout, check, explorer, graph
#: simulation) <- the Vitis flow (vitis). hls (HLS C++ and its generated tables) imports golden only.
HW_ALLOWED: dict[str, frozenset[str]] = {
    "spec": frozenset(),
    "hls": frozenset(),
    "pl": frozenset({"spec"}),
    "perf": frozenset({"spec", "pl"}),
    "design": frozenset({"spec", "pl", "perf"}),
    "vitis": frozenset({"spec", "pl", "perf", "design"}),
}


def hw_violations() -> list[str]:
    """``file:line hw.<sub> -> module`` for every import inside hw against :data:`HW_ALLOWED` (a module directly in
    hw/ other than its ``__init__`` is refused too: every hw module belongs to one sub-package)."""
    bad = []
    for path in sorted((ROOT / "hw").rglob("*.py")):
        rel = path.relative_to(ROOT / "hw")
        if len(rel.parts) == 1:
            if rel.name != "__init__.py":
                bad.append(f"hw/{rel}: a module outside hw's sub-packages")
            continue
        sub = rel.parts[0]
        if sub not in HW_ALLOWED:
            bad.append(f"hw/{rel}: hw.{sub} is not a declared sub-package")
            continue
        for line, module in _imported_modules(path):
            parts = module.split(".")
            if parts[:2] != ["vckattn", "hw"] or len(parts) < 3:
                continue
            target = parts[2]
            if target != sub and target not in HW_ALLOWED[sub]:
                bad.append(f"hw/{rel}:{line} hw.{sub} -> {module}")
    return bad


def test_hw_sub_packages_follow_one_direction():
    """spec <- pl <- perf <- design <- vitis (hls: golden only); no module loose in hw/."""
    offenders = hw_violations()
    assert not offenders, "hw imports against its sub-package order:\n" + "\n".join(offenders)


def test_hw_check_catches_a_violation(tmp_path, monkeypatch):
    """The check itself can fail: gateware importing the cost model, and a module loose in hw/, are named."""
    fake = tmp_path / "repo"
    (fake / "hw" / "pl").mkdir(parents=True)
    (fake / "hw" / "spec").mkdir(parents=True)
    (fake / "hw" / "pl" / "bad.py").write_text("from vckattn.hw.perf import pl\nfrom ..spec import streams\n")
    (fake / "hw" / "spec" / "ok.py").write_text("from vckattn.golden import fixedpoint\n")
    (fake / "hw" / "loose.py").write_text("")
    monkeypatch.setattr(__import__(__name__), "ROOT", fake)
    assert hw_violations() == ["hw/loose.py: a module outside hw's sub-packages",
                               "hw/pl/bad.py:1 hw.pl -> vckattn.hw.perf"]


#: the repository's Python code outside the package, checked for import cycles with it
OTHER_CODE = ("research", "tools", "examples")


def _module_graph(root: Path) -> dict[str, set[str]]:
    """Every module of the package (``golden.x``, ``hw.spec.y`` ...) and of the repository's other code
    (:data:`OTHER_CODE`: ``research.experiments.z``, ``tools.regen`` ...) -> the modules of those it imports, at any
    level (function-level and ``TYPE_CHECKING`` imports included). ``from pkg import name`` imports ``pkg.name``
    when that is a module, else ``pkg``."""
    files = {}
    for layer in (*ALLOWED, *OTHER_CODE):
        for path in (root / layer).rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            files[name] = path
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = (node.module or "").removeprefix("vckattn.")
                subs = [f"{source}.{a.name}" for a in node.names]
                targets = [s for s in subs if s in files] or [source]
                if any(s not in files for s in subs):
                    targets.append(source)
            else:
                continue
            graph[mod] |= {t.removeprefix("vckattn.") for t in targets} & set(files) - {mod}
    return graph


def import_cycles(root: Path | None = None) -> list[list[str]]:
    """The import cycles of the package and the repository's other code: every strongly connected component of more
    than one module (Tarjan)."""
    graph = _module_graph(root or ROOT)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_cycle_anywhere():
    """No module reaches itself through imports, at any level: golden, hw, sim, host, and the research experiments,
    the repository tools and the example outside the package."""
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_cycle_check_catches_a_cycle(tmp_path):
    """The check itself can fail: a cycle through a function-level import and a relative one is found."""
    for layer in ALLOWED:
        (tmp_path / layer).mkdir()
    (tmp_path / "host" / "a.py").write_text("def f():\n    from vckattn.host import b\n")
    (tmp_path / "host" / "b.py").write_text("from . import c\n")
    (tmp_path / "host" / "c.py").write_text("from .a import f\n")
    (tmp_path / "host" / "d.py").write_text("from vckattn.host import a\n")  # into the cycle, not part of it
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "x.py").write_text("from tools import y\nfrom vckattn.host import d\n")
    (tmp_path / "tools" / "y.py").write_text("def g():\n    import tools.x\n")
    assert import_cycles(tmp_path) == [["host.a", "host.b", "host.c"], ["tools.x", "tools.y"]]


def _table_rows(heading: str) -> dict[str, str]:
    """``first cell -> last cell`` of the Markdown table under ``heading`` in ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].strip(): cells[-1].strip() for cells in rows[1:]}


def _named(cell: str, names: set[str]) -> frozenset[str]:
    return frozenset(n for n in names if re.search(rf"\b{n}\b", cell))


def test_architecture_documents_the_layers_the_test_enforces():
    """ARCHITECTURE.md's layer table and hw sub-package table say what ALLOWED and HW_ALLOWED enforce."""
    layers = _table_rows("## The layers")
    assert {k: _named(v, set(ALLOWED)) for k, v in layers.items()} == ALLOWED
    subs = {k.strip("`").removeprefix("hw/").rstrip("/"): v for k, v in _table_rows("### hw, one direction").items()}
    assert {k: _named(v, set(HW_ALLOWED)) for k, v in subs.items()} == HW_ALLOWED


def test_architecture_maps_every_folder():
    """Every tracked folder of the repository at the top and every package sub-package is named in ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    top = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith((".", "__")) and
           any(p.rglob("*.py")) | any(p.rglob("*.md")) | any(p.rglob("*.json"))} - {"build", "results"}
    top -= {p.name for p in ROOT.iterdir() if p.name.endswith(".egg-info")}
    subs = {str(p.parent.relative_to(ROOT)) for layer in ALLOWED for p in (ROOT / layer).rglob("__init__.py")}
    missing = sorted(f for f in top | subs if f"`{f}/" not in text)
    assert not missing, f"ARCHITECTURE.md does not name: {missing}"

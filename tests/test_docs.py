"""The README and docs/ hold together: every relative link points at a file of the repository and every
``#anchor`` at a heading of its file; the README's first screen holds the commands a newcomer needs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # no headings in code blocks
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def test_slug_is_githubs():
    assert slug("Versal build (`hw/aie/`, `make xclbin`)") == "versal-build-hwaie-make-xclbin"
    assert slug("Tuning β/γ: measured results") == "tuning-βγ-measured-results"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(doc: Path):
    bad = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # an external address
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            bad.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            bad.append(f"{target}: no such heading")
    assert bad == []


def test_every_doc_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{p.name})" not in readme] == []


def test_readme_first_screen_holds_the_commands():
    """The first 40 lines: what the toolkit is, the main job, the tests, the checkpoint-to-bundle path."""
    first = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40])
    for needed in ("make demo", "make test", "make sim", "PYTEST_ARGS=", "vckattn export", "vckattn inspect",
                   "vckattn run", "vckattn eval", "vckattn calibrate"):
        assert needed in first, needed


@pytest.mark.slow
def test_documentation_site_builds_without_a_warning(tmp_path):
    """`make docs`: Sphinx builds the docs/ pages and the API reference from the docstrings; a warning fails."""
    import subprocess
    import sys

    # one process: the other test workers keep the cores busy, and Sphinx's parallel build costs ~15% more CPU
    r = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going",
                        str(ROOT / "docs"), str(tmp_path / "html")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert (tmp_path / "html" / "api" / "index.html").is_file()

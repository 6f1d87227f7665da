"""What a user reads speaks of the toolkit and the user's work, never of how it was developed.

Scanned: the documents (README.md, ARCHITECTURE.md, docs/, every .md under the package folders), every
``vckattn ... --help`` text, every string literal of the package's Python (help texts, plot titles and
labels, table titles, printed messages, JSON notes and docstrings, which several ``--help`` texts are) and
the data and build files whose text reaches outputs (JSON, Makefiles). Forbidden there: issue numbers,
"round 1", "session", "today('s)", "the lead", the issue's goals, and a methods file that is not in the
repository. Issue numbers are also forbidden in code comments, the tests' included.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_FOLDERS = ("golden", "hw", "sim", "host")

#: issue references: the word issue followed by a number (with or without a hash), or a bare hash and number
ISSUE = re.compile(r"\bissues?\s*#?\s*\d+|(?<![\w&/])#\d+\b", re.I)
#: development-process words (issue references included)
PROCESS = [
    ISSUE,
    re.compile(r"\bround[- ]\d+\b|\b(?:this|last|next|previous|first|second) round\b", re.I),
    re.compile(r"\bsessions?\b", re.I),
    re.compile(r"\btoday(?:'s)?\b", re.I),
    re.compile(r"\bthe lead\b", re.I),
    re.compile(r"\bissue's\b|\b(?:goals?|minimum) of the issue\b|\bissue notes\b", re.I),
    re.compile(r"\bMETHODS\.md\b"),  # the methods are docs/methods.md
]


def process_words(text: str) -> list[str]:
    """Each forbidden phrase in ``text``, with a little context."""
    found = []
    for pat in PROCESS:
        for m in pat.finditer(text):
            found.append(" ".join(text[max(0, m.start() - 40):m.end() + 30].split()))
    return found


def _py_files(folders: tuple[str, ...]) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py") if "__pycache__" not in p.parts)


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """Every string literal of a module (docstrings and the constant parts of f-strings included)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def _comments(path: Path) -> Iterator[tuple[int, str]]:
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def _documents() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    docs += sorted(p for f in (*PACKAGE_FOLDERS, "bitstreams") for p in (ROOT / f).rglob("*.md"))
    return docs


def _help_texts() -> dict[str, str]:
    """``vckattn [COMMAND [SUBCOMMAND]] --help`` of every parser, as the parser formats it."""
    from vckattn.host.cli import build_parser

    texts: dict[str, str] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        texts[name] = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")

    walk(build_parser(), "vckattn")
    return texts


def _output_files() -> list[Path]:
    """Data and build files whose text reaches a user (JSON read into reports, Makefile messages)."""
    files = [ROOT / "Makefile", ROOT / "hw" / "vitis" / "Makefile"]
    files += sorted(p for f in (*PACKAGE_FOLDERS, "bitstreams") for p in (ROOT / f).rglob("*.json")
                    if "__pycache__" not in p.parts)
    return files


# ----------------------------------------------------------------------------------------- the checker


@pytest.mark.parametrize("text", [
    "the scalable engine of issue #16", "see #15", "issues 12 and 13", "round 1's commit", "in the last round",
    "this session's machine", "Today's committed build", "today", "ask the lead", "Goals of the issue",
    "the issue's goal (>= 65%)", "details in the issue notes", "METHODS.md §1",
])
def test_the_checker_finds_process_words(text):
    assert process_words(text), text


@pytest.mark.parametrize("text", [
    "round half up", "rounds to 0", "rounding", "one beat is issued per cycle", "the issue of its first beat",
    "color #1f77b4", "&#8212;", "docs/methods.md §1", "Fig. 5", "16 heads", "the committed build",
])
def test_the_checker_leaves_ordinary_words(text):
    assert process_words(text) == [], text


# ------------------------------------------------------------------------------------------ the scans


def test_documents_speak_of_the_toolkit():
    docs = _documents()
    assert len(docs) >= 10 and (ROOT / "docs" / "methods.md") in docs
    bad = [f"{p.relative_to(ROOT)}:{i}: {w}" for p in docs
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) for w in process_words(line)]
    assert bad == []


def test_every_help_text_speaks_of_the_toolkit():
    texts = _help_texts()
    assert len(texts) >= 20 and "vckattn perf explore" in texts
    bad = [f"{name} --help: {w}" for name, text in texts.items() for w in process_words(text)]
    assert bad == []


def test_every_string_of_the_package_speaks_of_the_toolkit():
    """Help texts, plot titles and labels, messages, JSON notes and docstrings are string literals."""
    files = _py_files(PACKAGE_FOLDERS)
    scanned = {s for p in files for _, s in _strings(p)}
    # the scan reaches the plot titles and the help texts it is meant to cover
    assert any(s.startswith("Stage times (modeled, not measured)") for s in scanned)
    assert any("layer-wise replace-and-tune" in s for s in scanned)
    bad = [f"{p.relative_to(ROOT)}:{line}: {w}" for p in files for line, s in _strings(p) for w in process_words(s)]
    assert bad == []


def test_data_and_build_files_speak_of_the_toolkit():
    files = _output_files()
    assert (ROOT / "hw" / "perf" / "device.json") in files
    bad = [f"{p.relative_to(ROOT)}:{i}: {w}" for p in files
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) for w in process_words(line)]
    assert bad == []


def test_no_issue_numbers_in_code_comments():
    """Comments may explain the design; they do not cite issue numbers (nor do the tests' docstrings)."""
    files = _py_files((*PACKAGE_FOLDERS, "tests"))
    bad = [f"{p.relative_to(ROOT)}:{line}: {text.strip()}" for p in files for line, text in _comments(p)
           if ISSUE.search(text)]
    bad += [f"{p.relative_to(ROOT)}:{line}: {s[:80]}" for p in _py_files(("tests",)) for line, s in _strings(p)
            if ISSUE.search(s) and p.name != Path(__file__).name]
    cpp = sorted(p for f in PACKAGE_FOLDERS for ext in ("*.cpp", "*.cc", "*.h", "*.tcl")
                 for p in (ROOT / f).rglob(ext))
    bad += [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in cpp
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if ISSUE.search(line)]
    assert bad == []

"""``make figures``: the README's generated blocks are what the code says at this commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from vckattn.golden.errors import EXIT_CODES
from vckattn.host import figures

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("name", [n for n, (_, fast) in figures.BLOCKS.items() if fast])
def test_readme_block_is_current(name):
    """Regenerate with `make figures` when this fails."""
    assert figures.current_block(README.read_text(encoding="utf-8"), name) == figures.BLOCKS[name][0](), \
        f"README's {name} block is stale: run `make figures`"


def test_every_exit_status_is_documented_and_every_block_exists():
    text = README.read_text(encoding="utf-8")
    block = figures.current_block(text, "exit-codes")
    assert block is not None and all(f"| {code} |" in block for code in EXIT_CODES)
    for name in figures.BLOCKS:
        assert figures.current_block(text, name) is not None, name


def test_check_flags_a_stale_block(tmp_path):
    """The check itself can fail: an edited block is reported and exits 1."""
    stale = tmp_path / "README.md"
    stale.write_text(README.read_text(encoding="utf-8").replace("| 0 | success |", "| 0 | fine |"), encoding="utf-8")
    assert figures.main(["--check", str(stale)]) == 1
    assert figures.main(["--check", str(README)]) == 0

"""``make figures``: the generated blocks of the README and docs/ are what the code says at this commit."""

from __future__ import annotations

import shutil

import pytest

from vckattn.golden.errors import EXIT_CODES
from vckattn.host import figures


def _text(name: str) -> str:
    return (figures.ROOT / figures.BLOCKS[name].file).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", [n for n, b in figures.BLOCKS.items() if b.fast])
def test_block_is_current(name):
    """Regenerate with `make figures` when this fails."""
    assert figures.current_block(_text(name), name) == figures.BLOCKS[name].generate(), \
        f"{figures.BLOCKS[name].file}'s {name} block is stale: run `make figures`"


def test_every_exit_status_is_documented_and_every_block_exists():
    block = figures.current_block(_text("exit-codes"), "exit-codes")
    assert block is not None and all(f"| {code} |" in block for code in EXIT_CODES)
    for name, b in figures.BLOCKS.items():
        assert figures.current_block(_text(name), name) is not None, f"{b.file} has no {name} block"


def test_check_flags_a_stale_block(tmp_path):
    """The check itself can fail: an edited block is reported and exits 1."""
    for b in figures.BLOCKS.values():
        (tmp_path / b.file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(figures.ROOT / b.file, tmp_path / b.file)
    assert figures.main(["--check", str(tmp_path)]) == 0
    cli_md = tmp_path / figures.BLOCKS["exit-codes"].file
    cli_md.write_text(cli_md.read_text(encoding="utf-8").replace("| 0 | success |", "| 0 | fine |"), encoding="utf-8")
    assert figures.main(["--check", str(tmp_path)]) == 1
    assert figures.main(["--check", str(figures.ROOT)]) == 0


def test_write_replaces_a_stale_block_in_its_file(tmp_path):
    for b in figures.BLOCKS.values():
        (tmp_path / b.file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(figures.ROOT / b.file, tmp_path / b.file)
    cli_md = tmp_path / figures.BLOCKS["cli"].file
    stale = cli_md.read_text(encoding="utf-8").replace("vckattn doctor ", "vckattn dr     ")
    cli_md.write_text(stale, encoding="utf-8")
    assert figures.main(["--check", str(tmp_path)]) == 1
    assert figures.main(["--write", str(tmp_path)]) == 0
    assert figures.main(["--check", str(tmp_path)]) == 0
    assert cli_md.read_text(encoding="utf-8") == (figures.ROOT / figures.BLOCKS["cli"].file).read_text(encoding="utf-8")

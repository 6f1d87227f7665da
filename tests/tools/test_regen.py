"""``make regen``: every committed generated file is what its generator writes at this commit
(``tools/regen.py``, with the README/docs blocks of ``tools/figures.py``), and the check itself can fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools import figures, regen  # tools/ runs from the checkout (tests/conftest.py puts it on the path)
from vckattn.golden.errors import EXIT_CODES

#: the targets `make test` checks (bitstreams: test_engine_generate diffs them, without the minutes-long search)
FAST = ("streams", "calibration", "performance", "figures")


def _text(name: str) -> str:
    return (figures.ROOT / figures.BLOCKS[name].file).read_text(encoding="utf-8")


@pytest.mark.parametrize("target", FAST)
def test_committed_files_are_current(target, capsys):
    """Regenerate with `make regen` when this fails."""
    assert regen.main(["--check", "--only", target]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("name", [n for n, b in figures.BLOCKS.items() if b.fast])
def test_block_is_current(name):
    assert figures.current_block(_text(name), name) == figures.BLOCKS[name].generate(), \
        f"{figures.BLOCKS[name].file}'s {name} block is stale: run `make regen`"


def test_every_exit_status_is_documented_and_every_block_exists():
    block = figures.current_block(_text("exit-codes"), "exit-codes")
    assert block is not None and all(f"| {code} |" in block for code in EXIT_CODES)
    for name, b in figures.BLOCKS.items():
        assert figures.current_block(_text(name), name) is not None, f"{b.file} has no {name} block"


def _copy_docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for b in figures.BLOCKS.values():
        (tmp_path / b.file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(figures.ROOT / b.file, tmp_path / b.file)
    monkeypatch.setattr(regen, "ROOT", tmp_path)


def test_check_flags_a_stale_block(tmp_path, monkeypatch, capsys):
    """The check itself can fail: an edited block is named and the check exits 1; nothing is written."""
    _copy_docs(tmp_path, monkeypatch)
    assert regen.main(["--check", "--only", "figures"]) == 0
    cli_md = tmp_path / figures.BLOCKS["exit-codes"].file
    edited = cli_md.read_text(encoding="utf-8").replace("| 0 | success |", "| 0 | fine |")
    cli_md.write_text(edited, encoding="utf-8")
    assert regen.main(["--check", "--only", "figures"]) == 1
    assert "stale: docs/cli.md (target figures" in capsys.readouterr().err
    assert cli_md.read_text(encoding="utf-8") == edited


def test_write_replaces_a_stale_block_in_its_file(tmp_path, monkeypatch):
    _copy_docs(tmp_path, monkeypatch)
    cli_md = tmp_path / figures.BLOCKS["cli"].file
    cli_md.write_text(cli_md.read_text(encoding="utf-8").replace("vckattn doctor ", "vckattn dr     "),
                      encoding="utf-8")
    assert regen.main(["--check", "--only", "figures"]) == 1
    assert regen.main(["--only", "figures"]) == 0
    assert regen.main(["--check", "--only", "figures"]) == 0
    assert cli_md.read_text(encoding="utf-8") == (figures.ROOT / figures.BLOCKS["cli"].file).read_text(encoding="utf-8")


def test_stale_generated_file_is_named_and_rewritten(tmp_path, monkeypatch, capsys):
    """A target's file that differs from its generator is named by the check and rewritten by regen."""
    monkeypatch.setattr(regen, "ROOT", tmp_path)
    path = tmp_path / "hw" / "generated.h"
    monkeypatch.setattr(regen, "targets", lambda search=False, slow=False: {"t": lambda: {path: "new\n"}})
    assert regen.main(["--check"]) == 1 and "stale: hw/generated.h (target t" in capsys.readouterr().err
    assert not path.exists()
    assert regen.main([]) == 0 and path.read_text() == "new\n"
    assert regen.main(["--check"]) == 0


def test_unknown_target_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        regen.main(["--only", "nope"])
    assert e.value.code == 2 and "unknown target(s) nope" in capsys.readouterr().err

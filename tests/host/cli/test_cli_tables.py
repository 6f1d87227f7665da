"""Tables printed to a pipe (not a terminal) render in full: no cell cut with "…" or folded."""

from __future__ import annotations

import pytest

from vckattn.host.cli import main
from vckattn.host.cli.common import make_console

LONG = "detail-" + "x" * 300 + "-end"


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def test_make_console_full_width_when_piped(capsys):
    from rich.table import Table

    t = Table(title="wide")
    for i in range(8):
        t.add_column(f"column {i}")
    t.add_row(*([LONG] * 8))
    make_console().print(t)
    make_console(stderr=True).print(t)
    out, err = capsys.readouterr()
    for text in (out, err):
        assert "…" not in text and text.count(LONG) == 8
        assert "\x1b[" not in text  # no colour codes in a pipe


def test_doctor_table_not_cut_when_piped(capsys):
    from vckattn.host import doctor

    results = {"core": [doctor.Check("python", True, "3.11", detail=LONG)],
               "hls": [doctor.Check("vitis_hls", False, None, detail=LONG, how_to_get="install " + LONG)]}
    doctor.render(results, doctor.summarize(results))
    out = capsys.readouterr().out
    assert "…" not in out
    assert LONG in out and "install " + LONG in out


@pytest.mark.parametrize("argv", [("perf", "validate"), ("perf", "--design-from-manifest", "vck5000_engine")])
def test_command_tables_not_cut_when_piped(capsys, argv):
    assert main(list(argv)) == 0
    out = capsys.readouterr().out
    assert out.strip() and "…" not in out

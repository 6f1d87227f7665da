"""The CLI's error contract: one line on stderr, the exit status of the error's kind, a trace file for bugs,
``--debug`` for the traceback (host/cli/__init__.py, golden/errors.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vckattn.golden import errors as E
from vckattn.host import cli


def _failing(monkeypatch, exc: BaseException) -> None:
    """`vckattn doctor` raising ``exc``."""
    import vckattn.host.cli.doctor as doctor

    def boom(_args):
        raise exc
    monkeypatch.setattr(doctor, "run_doctor", boom)


@pytest.mark.parametrize(("exc", "status"), [
    (E.UserError("bad flag"), 2), (E.InputError("bad file"), 4), (E.ToolMissing("no verilator"), 6),
])
def test_user_errors_exit_with_their_kind(monkeypatch, capsys, exc, status):
    _failing(monkeypatch, exc)
    assert cli.main(["doctor"]) == status
    err = capsys.readouterr().err
    assert err == f"vckattn: error: {exc}\n"


def test_bundle_manifest_device_and_fidelity_kinds():
    from vckattn.host.backends.base import DeviceError
    from vckattn.host.bundle import BundleError
    from vckattn.host.export import ExportError, LowFidelityError
    from vckattn.hw.design.manifest import ManifestError

    assert BundleError("f", "x", "y").exit_code == ManifestError("f", "x", "y").exit_code == E.EXIT_BUNDLE
    assert DeviceError("x").exit_code == E.EXIT_DEVICE and ExportError("x").exit_code == E.EXIT_INPUT
    assert LowFidelityError("x").exit_code == E.EXIT_FIDELITY
    assert len(set(E.EXIT_CODES)) == len(E.EXIT_CODES) and all(E.EXIT_CODES.values())


def test_a_bug_is_one_line_with_the_trace_in_a_file(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("VCKATTN_BUILD_DIR", str(tmp_path / "b"))
    monkeypatch.delenv("VCKATTN_DEBUG", raising=False)
    _failing(monkeypatch, ZeroDivisionError("division by zero\nsecond line"))
    assert cli.main(["doctor"]) == E.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ZeroDivisionError: division by zero" in err
    assert "this is a bug" in err and "Traceback" not in err
    trace = Path(err.split("written to ")[1].split(" (or rerun")[0])
    assert trace.is_file() and trace.parent.parent == tmp_path / "b"
    text = trace.read_text()
    assert "Traceback" in text and "ZeroDivisionError" in text and "command: vckattn doctor" in text


def test_debug_shows_the_traceback(monkeypatch):
    _failing(monkeypatch, ZeroDivisionError("x"))
    with pytest.raises(ZeroDivisionError):
        cli.main(["doctor", "--debug"])
    _failing(monkeypatch, E.UserError("y"))
    monkeypatch.setenv("VCKATTN_DEBUG", "1")
    with pytest.raises(E.UserError):
        cli.main(["doctor"])


def test_a_missing_extra_names_it(monkeypatch, capsys):
    exc = ModuleNotFoundError("No module named 'transformers'", name="transformers")
    _failing(monkeypatch, exc)
    assert cli.main(["doctor"]) == E.EXIT_TOOL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'vckattn[hf]'" in err and "`vckattn doctor`" in err

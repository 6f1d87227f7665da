"""Every command and sub-command of ``vckattn`` documents itself: a description, an epilog with an example
command line that parses, and a ``--help`` that exits 0 without a traceback."""

from __future__ import annotations

import argparse
import shlex

import pytest

from vckattn.host.cli import build_parser, main


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


COMMANDS = [path for path, _ in _walk(build_parser()) if path]


def _parser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    return dict(_walk(build_parser()))[path]


def _example_commands(epilog: str) -> list[list[str]]:
    """The ``vckattn ...`` command lines of an epilog (indented lines; ``&&`` / ``|`` split off; leading environment
    assignments such as ``VCKATTN_EMULATION=csim`` dropped)."""
    out = []
    for line in epilog.replace("\\\n", " ").splitlines():  # shell line continuations
        if not line.startswith("  "):
            continue
        for part in line.replace("&&", "|").split("|"):
            words = shlex.split(part)
            while words and "=" in words[0] and words[0].split("=")[0].isidentifier():  # VAR=value vckattn ...
                words = words[1:]
            if words[:1] == ["vckattn"]:
                out.append(words[1:])
    return out


def test_walk_finds_nested_commands():
    assert {("doctor",), ("calibrate", "stats"), ("hw", "report"), ("perf", "explore")} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_description_and_example(path):
    p = _parser(path)
    assert p.description and len(p.description.strip()) > 20, f"vckattn {' '.join(path)}: no description"
    assert p.epilog and "example" in p.epilog.lower(), f"vckattn {' '.join(path)}: no example in the epilog"
    cmds = _example_commands(p.epilog)
    assert cmds, f"vckattn {' '.join(path)}: no indented `vckattn ...` example line"
    parser = build_parser()
    for argv in cmds:  # every example parses (it names real options and choices)
        parser.parse_args(argv)


@pytest.mark.parametrize("path", [(), *COMMANDS], ids=lambda p: " ".join(p) or "vckattn")
def test_help_exits_0(path, capsys):
    assert main([*path, "--help"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert out.startswith("usage: vckattn")
    if path:
        assert "example" in out.lower()

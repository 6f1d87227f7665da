"""``make regen``: regenerate the generated blocks of README.md and docs/, so documents and commands agree.

The documents hold blocks between ``<!-- figures:NAME:begin -->`` and ``<!-- figures:NAME:end -->``; this
module writes each from the code or command that owns the figure, into the file :data:`BLOCKS` names:

* ``exit-codes`` (``docs/cli.md``) — the CLI's exit statuses (:data:`vckattn.golden.errors.EXIT_CODES`);
* ``cli`` (``docs/cli.md``) — every command and subcommand with its one-line help, from the parser itself;
* ``export-eval`` (``docs/accuracy.md``; slow, ``--slow``: ~5 minutes on 2 cores) — the export-check and
  ``vckattn eval`` figures of MiniLM for the untuned initialisations, from the commands shown in the block;
* ``demo`` (``README.md``; slow) — ``make demo``'s figures, from a run of the demo;
* ``tuned-minilm`` (``docs/accuracy.md``; slow, ~10 minutes on 2 cores) — the tuned per-head MiniLM flow (the
  recipe the export's refusal names, :data:`vckattn.host.export.model_check.TUNE_FLAGS`): tuning on the deployed
  numerics, export, and ``vckattn eval`` on ``emu`` with the committed default design's 8-bit scores;
* the performance-model tables (their own block in ``docs/performance.md``, :mod:`vckattn.hw.design.report`).

``python tools/regen.py --only figures`` prints the blocks; ``--write [ROOT]`` replaces them in place in the
repository folder ROOT (default: this checkout); ``--check [ROOT]`` exits 1 when a fast block is stale
(``tests/test_figures.py`` runs it). Figures that need minutes or a tuned model (hardware resources, the
sentiment classifier, the peers) are produced by the commands the documents name beside them and are not
regenerated here.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

__all__ = ["BLOCKS", "ROOT", "Block", "cli_block", "demo_block", "exit_codes_block", "export_eval_block",
           "replace_block", "tuned_minilm_block"]


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- figures:{name}:begin -->", f"<!-- figures:{name}:end -->"


def _wrap(name: str, body: str) -> str:
    begin, end = _markers(name)
    return f"{begin}\n{body.rstrip()}\n{end}"


def exit_codes_block() -> str:
    """The exit-status table."""
    from vckattn.golden.errors import EXIT_CODES

    rows = "\n".join(f"| {code} | {text} |" for code, text in EXIT_CODES.items())
    return _wrap("exit-codes", f"| status | meaning |\n|---|---|\n{rows}")


def cli_block() -> str:
    """Every command (and subcommand) with its one-line help, as the parser has it."""
    from vckattn.host.cli import build_parser

    lines: list[str] = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            helps = {a.dest: (a.help or "") for a in action._choices_actions}
            for name, sub in action.choices.items():
                cmd = f"{prefix} {name}"
                lines.append(f"{cmd:<34} # {helps.get(name, '')}")
                walk(sub, cmd)

    walk(build_parser(), "vckattn")
    return _wrap("cli", "```\n" + "\n".join(lines) + "\n```")


def _run(argv: list[str]) -> None:
    """``vckattn ARGV`` in a subprocess (its own model state), quiet; raise on failure."""
    r = subprocess.run([sys.executable, "-m", "vckattn", *argv], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"vckattn {' '.join(argv)} exited {r.returncode}: {r.stderr.strip()[-500:]}")


def export_eval_block() -> str:
    """The export check and ``vckattn eval`` on MiniLM for each untuned initialisation (runs the commands)."""
    low = "--allow-low-fidelity"  # untuned SwiftMax fails the whole-model check: written to be measured
    cases = [("(default: `max`, per head)", [low]), ("`--swiftmax-per-layer` (`max` per layer)",
                                                     ["--swiftmax-per-layer", low]),
             ("`--swiftmax-init mean` (per head)", ["--swiftmax-init", "mean", low]),
             ("`--normalizer softmax` (the online-softmax baseline)", ["--normalizer", "softmax"])]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, extra) in enumerate(cases):
            b, js = Path(tmp) / f"b{i}", Path(tmp) / f"e{i}.json"
            _run(["export", "minilm", "--out", str(b), "--quiet", *extra])
            man = json.loads((b / "manifest.json").read_text())
            fid = [e["fidelity"] for e in man["layers"]]
            lo, hi = min(f["cosine"] for f in fid), max(f["cosine"] for f in fid)
            head = min(min(f["head_cosine"]) for f in fid)
            whole = man["model_fidelity"]["score"]
            verdict = "passes" if whole >= man["model_fidelity"]["threshold"] else "**refused** (exit 3)"
            layers_ok = all(min(f["cosine"], *f["head_cosine"]) >= f["threshold"] for f in fid)
            dual = ["--manifest", "engine_small_dual"] if "softmax" in extra else []  # a build with online softmax
            _run(["eval", "--bundle", str(b), "--backend", "emu", *dual, "--quiet", "--json", str(js)])
            e = json.loads(js.read_text())["end_to_end"]
            sm = f"{e['float_swiftmax']['mean_cosine']:.4f} / {e['float_swiftmax']['min_cosine']:.4f}"
            rows.append(f"| {label} | {lo:.3f}–{hi:.3f} ({head:.3f}){'' if layers_ok else ' **refused**'} | "
                        f"{whole:.4f}: {verdict} | {sm} | "
                        f"{e['backend']['mean_cosine']:.4f} / {e['backend']['min_cosine']:.4f} |")
    body = ("Generated by `make regen SLOW=1` (`vckattn export minilm --out B … [--allow-low-fidelity]`, "
            "`vckattn eval --bundle B --backend emu`, on the committed best design; the online-softmax baseline on "
            "`engine_small_dual`, the committed build that carries it):\n\n"
            "| `vckattn export minilm --out B` + | per-layer check: layer cosine (worst head) "
            "| whole-model check (embedding cosine, threshold 0.9) "
            "| float SwiftMax (mean / min) | bundle on emu (mean / min) |\n|---|---|---|---|---|\n" + "\n".join(rows))
    return _wrap("export-eval", body)


def _timed(argv: list[str]) -> float:
    """:func:`_run` and its wall-clock seconds."""
    import time

    t0 = time.perf_counter()
    _run(argv)
    return time.perf_counter() - t0


def tuned_minilm_block() -> str:
    """MiniLM tuned per head on the deployed numerics (8-bit scores, P format), exported and evaluated on ``emu``
    (runs the commands; ~10 minutes on 2 cores)."""
    from vckattn.host.export.model_check import EXPORT_TUNED_FLAGS, TUNE_FLAGS

    with tempfile.TemporaryDirectory() as tmp:
        t, b, js = Path(tmp) / "T", Path(tmp) / "B", Path(tmp) / "e.json"
        tune = ["calibrate", "swiftmax", "minilm", "--data", "pydoc", "--out", str(t), *TUNE_FLAGS.split(),
                "--device", "cpu", "--quiet"]
        exp = ["export", str(t / "model"), "--out", str(b), *EXPORT_TUNED_FLAGS.split(), "--quiet"]
        ev = ["eval", "--bundle", str(b), "--backend", "emu", "--reference", "minilm", "--quiet", "--json", str(js)]
        secs = [_timed(tune), _timed(exp), _timed(ev)]
        rep = json.loads((t / "swiftmax.json").read_text())
        man = json.loads((b / "manifest.json").read_text())
        e = json.loads(js.read_text())["end_to_end"]
    fid = [x["fidelity"]["cosine"] for x in man["layers"]]
    dep = rep["deployed"] or {}
    mf = man["model_fidelity"]
    rows = [
        (f"`vckattn calibrate swiftmax minilm --data pydoc --out T {TUNE_FLAGS} --device cpu`",
         f"held-out cosine {rep['final']:.4f} on int{dep.get('score_bits', 32)} scores"
         f"{', P rounded to its format' if dep.get('p_round') else ''} (untuned {rep['untuned_statistical']:.4f})",
         secs[0]),
        (f"`vckattn export T/model --out B {EXPORT_TUNED_FLAGS}`",
         f"per-layer check {min(fid):.3f}–{max(fid):.3f}; whole model {mf['score']:.4f} (threshold "
         f"{mf['threshold']:g})", secs[1]),
        ("`vckattn eval --bundle B --backend emu --reference minilm`",
         f"embedding cosine **{e['backend']['mean_cosine']:.4f}** (min {e['backend']['min_cosine']:.4f})", secs[2]),
    ]
    body = ("Generated by `make regen SLOW=1` (the commands in the table, in order, on the CPU; `eval` on the "
            "committed default design's numerics: 8-bit scores):\n\n| command | result | s |\n|---|---|---|\n"
            + "\n".join(f"| {a} | {r} | {s:.0f} |" for a, r, s in rows))
    return _wrap("tuned-minilm", body)


def demo_block() -> str:
    """``make demo``'s figures, from a run of the demo (``python examples/demo.py``, ~30 s)."""
    import time

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py"), "--out", tmp], capture_output=True,
                           text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"the demo exited {r.returncode}: {r.stderr.strip()[-500:]}")
        rep = json.loads((Path(tmp) / "report.json").read_text())
    rtl, emu = rep["rtl"]["layers"][0], rep["emu"]["layers"]
    cos = [x["cosine"] for x in emu]
    rel = [x["max_rel_error"] for x in emu]
    ok = "**bit-exact**" if all(x["bit_exact"] for x in emu) else "**NOT bit-exact**"
    rows = [
        ("golden softmax attention vs Hugging Face",
         f"max relative error {rep['golden_softmax_vs_hf_max_rel_error']:.3g} (bound 1e-5)"),
        (f"layer 0 on `rtl`, `{rep['rtl']['manifest']}` ({rtl['tiles']} tiles, {rep['rtl']['tokens']} tokens)",
         f"{'**bit-exact**' if rtl['bit_exact'] else '**NOT bit-exact**'}; {rtl['cycles']:,} PL cycles; "
         f"cosine vs float {rtl['cosine']:.5f}, max rel. error {rtl['max_rel_error']:.2g}"),
        (f"all layers on `emu`, `{rep['emu']['manifest']}` ({rep['emu']['tiles']} tiles)",
         f"{ok} in every layer; cosine vs float {min(cos):.5f}–{max(cos):.5f}, max rel. error "
         f"{min(rel):.2g}–{max(rel):.2g}"),
        ("whole demo", f"{rep['seconds']:.0f} s inside the demo, {wall:.0f} s with Python start-up"),
    ]
    body = ("Generated by `make regen SLOW=1` from a run of `python examples/demo.py` (what `make demo` "
            "runs):\n\n| step | result |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows))
    return _wrap("demo", body)


#: the repository folder of this checkout (the documents live there, not in an installed wheel)
ROOT = Path(__file__).resolve().parents[1]


class Block(NamedTuple):
    """A generated block: its generator, whether it is fast (seconds), and its file relative to the repository."""

    generate: Callable[[], str]
    fast: bool
    file: str


#: block name -> where it comes from and where it lives
BLOCKS: dict[str, Block] = {
    "exit-codes": Block(exit_codes_block, True, "docs/cli.md"),
    "cli": Block(cli_block, True, "docs/cli.md"),
    "export-eval": Block(export_eval_block, False, "docs/accuracy.md"),
    "demo": Block(demo_block, False, "README.md"),
    "tuned-minilm": Block(tuned_minilm_block, False, "docs/accuracy.md"),
}


def replace_block(text: str, name: str, block: str) -> str:
    """``text`` with block ``name`` replaced by ``block`` (ValueError if it has none)."""
    begin, end = _markers(name)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"no {begin} ... {end} block")
    return pattern.sub(lambda _m: block, text, count=1)


def current_block(text: str, name: str) -> str | None:
    begin, end = _markers(name)
    m = re.search(re.escape(begin) + r".*?" + re.escape(end), text, re.S)
    return None if m is None else m.group(0)

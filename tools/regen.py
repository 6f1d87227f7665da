"""Regenerate every committed generated file of the repository, or check that each is current.

``make regen`` (``python tools/regen.py``) rewrites them; ``make regen CHECK=1`` (``--check``) writes nothing and
exits 1 naming every stale file. A target is the code that owns a set of files:

==============  ======================================================================================
``streams``     ``hw/aie/generated/engine_streams.h``: the stream headers' declaration
``bitstreams``  ``bitstreams/*.json`` and ``bitstreams/engine_designs/``: the committed builds' manifests
                (``SEARCH=1``: the best designs searched again, minutes; default: the committed design points)
``calibration`` ``hw/perf/data/calibration.json``: the fit on one published design
``performance`` ``docs/performance.md``: the performance model's tables
``figures``     the generated blocks of README.md and docs/ (``tools/figures.py``; ``SLOW=1``: also the blocks
                that run exports and evals, minutes)
==============  ======================================================================================

Measurements (``python -m vckattn.sim.pl_perf``, ``engine_aie_perf``, ``gemm_proj_perf``,
``python -m vckattn.hw.perf.host_cost --measure``) are runs, not regenerations: they are not part of this.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools/ is not installed: its figures module is imported from the checkout


def streams() -> dict[Path, str]:
    from vckattn.hw.spec.streams import GENERATED, render_header

    return {GENERATED: render_header()}


def bitstreams(search: bool = False) -> dict[Path, str]:
    from vckattn.hw.design.generate import committed_bitstreams

    return committed_bitstreams(search=search)


def calibration() -> dict[Path, str]:
    from vckattn.hw.perf.calibration import STORE_PATH
    from vckattn.hw.perf.calibration_fit import fit

    return {STORE_PATH: json.dumps(fit(), indent=2, sort_keys=True) + "\n"}


def performance() -> dict[Path, str]:
    from vckattn.hw.design.report import SUB_BEGIN, SUB_END, readme_block, replace_block, sublayer_block

    path = ROOT / "docs" / "performance.md"
    text = replace_block(path.read_text(encoding="utf-8"), readme_block())
    return {path: replace_block(text, sublayer_block(), SUB_BEGIN, SUB_END)}


def figures(slow: bool = False) -> dict[Path, str]:
    from tools.figures import BLOCKS, replace_block

    out: dict[Path, str] = {}
    for name, block in BLOCKS.items():
        if block.fast or slow:
            path = ROOT / block.file
            text = out.get(path) or path.read_text(encoding="utf-8")
            out[path] = replace_block(text, name, block.generate())
    return out


def targets(search: bool = False, slow: bool = False) -> dict[str, Callable[[], dict[Path, str]]]:
    """Target name -> the function giving each of its files' current text."""
    return {"streams": streams, "bitstreams": lambda: bitstreams(search), "calibration": calibration,
            "performance": performance, "figures": lambda: figures(slow)}


def stale(files: dict[Path, str]) -> list[Path]:
    """The files whose committed text differs from ``files`` (or that are missing)."""
    return [p for p, t in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != t]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/regen.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 naming every stale file")
    ap.add_argument("--only", action="append", metavar="TARGET", help="only this target (repeatable)")
    ap.add_argument("--search", action="store_true", help="bitstreams: search the best designs again (minutes)")
    ap.add_argument("--slow", action="store_true", help="figures: also the blocks that run exports and evals")
    args = ap.parse_args(argv)
    table = targets(args.search, args.slow)
    unknown = sorted(set(args.only or ()) - set(table))
    if unknown:
        ap.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(table)}")
    bad: list[Path] = []
    for name, files_of in table.items():
        if args.only and name not in args.only:
            continue
        files = files_of()
        old = stale(files)
        if args.check:
            bad += old
            for p in old:
                print(f"stale: {p.relative_to(ROOT)} (target {name}: make regen)", file=sys.stderr)
            continue
        for p in old:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(files[p], encoding="utf-8")
            print(f"wrote {p.relative_to(ROOT)}")
        print(f"{name}: {len(files)} file(s), {len(old)} rewritten", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

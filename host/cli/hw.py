"""``vckattn hw report|generate|check``: hardware figures of the PL kernels, the scalable engine's build sources
from a design point, and the design-rule check of a design."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from vckattn.golden.errors import InputError, UserError

from .common import Subparsers, examples, missing_subcommand


def add_hw(sub: Subparsers) -> None:
    p = sub.add_parser(
        "hw",
        help="hardware figures of the PL kernels (synthesis and simulation)",
        description="Hardware figures. `report`: for each PL kernel (SwiftMax, online softmax, BHyT exact, "
        "BHyT approximate variance, RMSNorm) and lane count, LUT/FF/DSP/BRAM from real Yosys synthesis "
        "(synth_xilinx -family xcup: UltraScale+ as the proxy for the Versal PL), throughput in elements/cycle "
        "and latency in cycles measured on Verilator (the kernel's throughput test, checked against the golden "
        "model), and row/token buffer bits. Takes a few minutes per kernel. `generate`: a design's build sources "
        "from a design point (the ADF graph, system.cfg, the PL top as a Vitis RTL kernel, the manifest).",
        epilog=examples("vckattn hw report --kernels swiftmax --lanes 4 --json results/hw.json",
                        "vckattn hw generate best --out build/engine"),
    )
    hsub = p.add_subparsers(title="hardware", dest="hw", metavar="ACTION", parser_class=type(p))
    r = hsub.add_parser(
        "report", help="synthesize and simulate every kernel; print a table, write JSON",
        description="For each PL kernel (swiftmax, online_softmax, bhyt_exact, bhyt_approx, rmsnorm) and lane "
        "count: LUT/FF/DSP/BRAM from Yosys synth_xilinx -family xcup (UltraScale+ as the proxy for the Versal PL), "
        "throughput (elements/cycle) and latency (cycles) measured in Verilator by the kernel's cocotb throughput "
        "test (checked against the golden model), and the row/token buffer bits. Then the two normalizers side "
        "by side at each score width of --score-bits: SwiftMax and online softmax LUT/FF/DSP at each lane count "
        "and per lane (from the fewest to the most lanes), their ratio at equal throughput (equal lanes), beside "
        "the SwiftMax paper's Table 2 (LUT 33%, FF 58%). Takes a few minutes per kernel and width. "
        "The simulator's output goes to a log file under the build folder (its path is printed); -v shows it.",
        epilog=examples("vckattn hw report --kernels swiftmax --lanes 4",
                        "vckattn hw report --kernels swiftmax,online_softmax --lanes 4,1 --score-bits 8",
                        "vckattn hw report --lanes 4,8 --json results/hw_report.json"),
    )
    r.add_argument("--lanes", type=lanes_list, default=[4], metavar="N[,N...]",
                   help="lane counts; the first is the primary one in the JSON `kernels` (default: 4)")
    r.add_argument("--kernels", type=lambda t: [k.strip() for k in t.split(",") if k.strip()], default=None,
                   metavar="K[,K...]", help="subset of: swiftmax, online_softmax, bhyt_exact, bhyt_approx, rmsnorm")
    r.add_argument("--score-bits", type=bits_list, default=None, metavar="B[,B...]",
                   help="score widths at which the normalizers are compared (2..32; 32 is the kernels' own build, "
                        "others are built with that input width; default: 32,8)")
    r.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    r.add_argument("-v", "--verbose", action="store_true",
                   help="show the synthesis and simulator output (Yosys, Verilator, cocotb) instead of writing it to "
                        "<build>/logs/hw_report.log")
    r.set_defaults(func=run_hw_report)
    g = hsub.add_parser(
        "generate",
        help="write the scalable engine's build sources (AIE graph, system.cfg, PL top, manifest) from a design point; "
             "a sublayer build's",
        description="Turn a design point of the performance model into the engine's build sources (stream contract "
        "v3, hw/ENGINE.md): OUT/aie/engine_config.h, graph.h, graph.cpp (the ADF graph: per pipeline k qk_slice and k "
        "pv_slice kernels fed from ping-pong buffers, the kv packet split, per score channel pktmerge/pktsplit, the "
        "P.V cascade, kernel and buffer placement), OUT/system.cfg (Vitis link "
        "configuration), OUT/pl/ (the PL top engine_pl.v, kernel.xml, package_kernel.tcl), OUT/manifest.json (the "
        "bitstream manifest), OUT/design.json, OUT/modeled.json (the model on BERT-base, S = 512, batch 8) and "
        "OUT/diagram.png. DESIGN is a design JSON (a Design object, `perf --json` or `perf explore --json` output) "
        "or `best`: the committed best buildable SwiftMax design for BERT-base S = 512 batch 8 on the board "
        "(bitstreams/engine_designs/<board>_engine.design.json: of the model's near-fastest designs, the fastest in "
        "the graph simulation). A sublayer build's name writes OUT/aie/ (the graph with the attention pipelines and "
        "the Q/K/V and W_O GEMM cascades, engine_config.h, graph.cpp, gemm_<stage>.cc), OUT/build.json and "
        "OUT/diagram.png, after the AIE rules of the design-rule check pass, and OUT/manifest.json, OUT/system.cfg, "
        "OUT/pl/ (the normalizer channels) and OUT/pl_sublayer/ (the sublayer's PL top: its buffers, residual paths "
        "and routers, a decoder's BHyT site A and RoPE units, Verilog with its Vitis wrapper, kernel.xml, "
        "package_kernel.tcl). Needs "
        "no AMD tools; `make xclbin DESIGN=...` builds an engine result where they are installed.",
        epilog=examples("vckattn hw generate best --out build/engine --board vck5000",
                        "vckattn hw generate bitstreams/engine_designs/engine_small.design.json "
                        "--out build/engine_small",
                        "vckattn hw generate vck5000_sublayer --out build/sublayer"),
    )
    g.add_argument("design", metavar="DESIGN", help="design JSON file, `best`, or a sublayer build (vck5000_sublayer, "
                   "vck5000_sublayer_decoder, sublayer_small_encoder, sublayer_small_decoder)")
    g.add_argument("--out", type=Path, required=True, metavar="DIR", help="build folder to write")
    g.add_argument("--board", choices=("vck5000", "vck190"), default="vck5000", help="board (default vck5000)")
    g.add_argument("--max-seq", type=int, default=None, metavar="N", help="longest sequence the build accepts: "
                   "every group's keys (a multiple of 16 x the design's kernels per pipeline; default: the design's "
                   "max_seq, else 512)")
    g.add_argument("--name", default=None, help="manifest name (default <board>_engine)")
    g.set_defaults(func=run_hw_generate)
    c = hsub.add_parser(
        "check", help="design-rule check of an engine or sublayer design: every AIE array and PL rule, PASS/FAIL "
                      "with its source",
        description="Check an engine design against the rules that decide whether aiecompiler and v++ accept it "
        "(docs/hardware.md \"Design-rule check\"): data and program memory a tile, buffers in memories the kernel "
        "reaches, ping-pong banks, DMA buffer descriptors, locks and channels, stream-switch ports and routes, "
        "packet switching, cascades, PL interface columns and their streams, 128-bit PLIO pairing, AXI masters and "
        "the PL resources with every mover's m_axi port counted. The check runs on the ADF graph the generator "
        "writes for the design (a build folder's own aie/graph.h). DESIGN is a committed engine build "
        "(vck5000_engine, vck190_engine, engine_small, engine_small_dual), a sublayer build (vck5000_sublayer: "
        "BERT-base, vck5000_sublayer_decoder: SmolLM2-135M with BHyT, each at the model's best split; "
        "sublayer_small_encoder, sublayer_small_decoder), a design JSON (as "
        "for `hw generate`) or a build folder written by `hw generate` (an engine's, or a sublayer's: its own "
        "aie/graph.h and build.json). A sublayer build is checked on its whole "
        "AIE graph (the attention pipelines and the Q/K/V and W_O GEMM cascades); its PL rules are listed NOT "
        "CHECKED while its PL top and movers are not generated. Exit status 0 when every checked rule passes, 4 "
        "when one fails (a design no build runs). Needs no AMD tools.",
        epilog=examples("vckattn hw check vck5000_engine",
                        "vckattn hw check vck5000_sublayer",
                        "vckattn hw check build/engine --json results/drc.json",
                        "vckattn hw check my_design.json --board vck190"),
    )
    c.add_argument("design", metavar="DESIGN", help="committed engine build name, design JSON or build folder")
    c.add_argument("--board", choices=("vck5000", "vck190"), default=None,
                   help="board (default: the build's, else vck5000)")
    c.add_argument("--max-seq", type=int, default=None, metavar="N",
                   help="longest sequence the build accepts (default: the design's max_seq, else 512)")
    c.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the result as JSON")
    c.set_defaults(func=run_hw_check)
    p.set_defaults(func=lambda args: missing_subcommand(p))


def lanes_list(text: str) -> list[int]:
    """argparse type: comma-separated lane counts, each >= 1."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"lane counts must be >= 1: {text!r}")
    return values


def bits_list(text: str) -> list[int]:
    """argparse type: comma-separated score widths, each 2..32 bits."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or any(not 2 <= v <= 32 for v in values):
        raise argparse.ArgumentTypeError(f"score widths must be 2..32 bits: {text!r}")
    return list(dict.fromkeys(values))


def _log_file(name: str) -> Path:
    """``<build>/logs/NAME`` (:func:`vckattn.golden.paths.build_root`), its folder created."""
    from vckattn.golden.paths import build_root

    folder = build_root() / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{folder}: cannot create the log folder ({exc.strerror or exc}); use -v or --build-dir") \
            from None
    return folder / name


@contextlib.contextmanager
def _tool_output(log: Path | None) -> Iterator[TextIO]:
    """While inside: stdout/stderr (this process's and its children's) go to ``log`` (``None``: unchanged).
    Yields a stream on the original stderr for progress bars. A failure inside names the log on stderr."""
    from vckattn.sim.runner import redirect_output

    if log is None:
        yield sys.stderr
        return
    sys.stderr.flush()
    try:
        fd = os.dup(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # no real stderr (captured): the bar is off anyway
        fd = None
    bar_file = os.fdopen(fd, "w", buffering=1) if fd is not None else sys.stderr
    try:
        with redirect_output(log):
            yield bar_file
    except UserError as exc:  # the one error line names the log (a second line would break the contract)
        if exc.args and type(exc).__str__ is Exception.__str__:
            exc.args = (f"{exc.args[0]} (simulator and synthesis output: {log})", *exc.args[1:])
        raise
    except BaseException:
        print(f"(simulator and synthesis output: {log})", file=sys.stderr)
        raise
    finally:
        if fd is not None:
            bar_file.close()


def run_hw_report(args: argparse.Namespace) -> int:

    from rich.table import Table

    from vckattn.host.cli.common import make_console
    from vckattn.host.progress import announced_steps
    from vckattn.sim import hw_report as report

    from .common import output_file

    output_file(args.json_out, what="--json")
    kernels = args.kernels or list(report.KERNELS)
    unknown = [k for k in kernels if k not in report.KERNELS]
    if unknown:
        raise UserError(f"unknown kernels {unknown}; choose from {', '.join(report.KERNELS)}")
    score_bits = args.score_bits or list(report.SCORE_BITS)
    console = make_console()
    log = None if args.verbose else _log_file("hw_report.log")
    # one step per measurement; hw_report announces each before measuring it. The tools' output goes to
    # the log (redirect_output: this process's and the simulators' stdout/stderr); the bar to the real stderr.
    with _tool_output(log) as bar_file, \
            announced_steps(report.steps(kernels, args.lanes, score_bits), "synthesis + simulation", "kernel",
                            file=bar_file) as announce:
        rep = report.hw_report(kernels, args.lanes, progress=announce, score_bits=score_bits)
    if log is not None:
        print(f"simulator and synthesis log: {log} (-v shows it)", file=sys.stderr)
    table = Table(title="PL kernels: Yosys synth_xilinx -family xcup (UltraScale+ proxy) + Verilator")
    for col in ("kernel", "lanes", "LUT", "FF", "DSP", "BRAM36", "LUTRAM", "elements/cycle", "latency", "buffer bits"):
        table.add_column(col, justify="left" if col == "kernel" else "right")
    for n, kern in rep["by_lanes"].items():
        for name, k in kern.items():
            table.add_row(name, n, str(k["lut"]), str(k["ff"]), str(k["dsp"]), f"{k['bram']:g}", str(k["lutram"]),
                          f"{k['elements_per_cycle']:.3f}", str(k["latency_cycles"]), f"{k['buffer_bits']:,}")
    console.print(table)
    if rep.get("normalizers"):
        console.print(normalizer_table(rep["normalizers"]))
    if args.json_out is not None:
        from vckattn.host.output import write_json

        write_json(args.json_out, rep)
        console.print(f"wrote {args.json_out}")
    return 0


def _pct(r: float | None) -> str:
    return "—" if r is None else f"{r:.1%}"


def normalizer_table(comp: dict) -> object:
    """The rich table of :func:`vckattn.sim.hw_report.normalizer_comparison`'s result."""
    from rich.table import Table

    table = Table(title="Normalizers at equal throughput (SwiftMax / online softmax), beside the SwiftMax paper's "
                        "Table 2")
    cols = ("scores", "lanes", "SwiftMax LUT", "FF", "DSP", "online softmax LUT", "FF", "DSP", "LUT ratio",
            "FF ratio", "DSP ratio")
    for col in cols:
        table.add_column(col, justify="left" if col == "scores" else "right")

    def cells(r: dict, fmt: str) -> list[str]:
        return [format(r[k], fmt) for k in ("lut", "ff", "dsp")]

    for bits, w in comp["widths"].items():
        for n, row in sorted(w["by_lanes"].items(), key=lambda kv: int(kv[0])):
            lanes = n if row["equal_throughput"] else f"{n} (unequal throughput)"
            table.add_row(f"int{bits}", lanes, *cells(row["swiftmax"], ","), *cells(row["online_softmax"], ","),
                          *(_pct(row["ratio"][k]) for k in ("lut", "ff", "dsp")))
        pl = w["per_lane"]
        if pl:
            table.add_row(f"int{bits}", f"per lane ({pl['from_lanes']}→{pl['to_lanes']})",
                          *cells(pl["swiftmax"], ",.1f"), *cells(pl["online_softmax"], ",.1f"),
                          *(_pct(pl["ratio"][k]) for k in ("lut", "ff", "dsp")))
    ref = comp["reference"]
    table.add_row("paper", "attention block", f"{ref['swiftmax']['lut']:,}", f"{ref['swiftmax']['ff']:,}", "—",
                  f"{ref['online_softmax']['lut']:,}", f"{ref['online_softmax']['ff']:,}", "—",
                  _pct(ref["ratio"]["lut"]), _pct(ref["ratio"]["ff"]), "—")
    return table


def run_hw_generate(args: argparse.Namespace) -> int:
    import re

    from vckattn.hw.design import generate as gen
    from vckattn.hw.design import render

    from .common import output_dir

    if args.name is not None and not re.fullmatch(r"[a-z0-9_]+", args.name):
        raise UserError(f"--name {args.name!r}: use lower-case letters, digits and _")
    if args.max_seq is not None and args.max_seq < 1:
        raise UserError(f"--max-seq must be >= 1, got {args.max_seq}")
    output_dir(args.out, what="--out")
    sublayer = _named_sublayer(args.design)
    if sublayer is not None:
        if args.max_seq is not None or args.name is not None:
            raise UserError(f"--max-seq / --name: a sublayer build's are its own ({sublayer.name}, max_seq "
                            f"{sublayer.max_seq})")
        from vckattn.hw.design.sublayer_build import top_generated

        if sys.stderr.isatty() and top_generated(sublayer):  # progress on a terminal only
            print(f"writing {sublayer.name}: its PL top's Verilog takes minutes", file=sys.stderr)
        written = gen.generate_sublayer(sublayer, args.board, args.out)
        print(f"{sublayer.family} sublayer {sublayer.name}: {sublayer.qkv_cascades} Q/K/V + {sublayer.o_cascades} W_O "
              f"GEMM cascades of {sublayer.qkv.kernels} kernels beside {sublayer.engine['pipelines']} attention "
              f"pipelines, board {args.board}; the AIE graph passes every AIE rule")
        for f in written:
            print(f"wrote {f}")
        if not any(f.name == "manifest.json" for f in written):
            print(f"not written: {gen.SUBLAYER_NOT_GENERATED}")
        return 0
    if args.design == "best":
        design = gen.build_design(f"{args.board}_engine")  # the committed best design for the board
        if args.max_seq is not None:  # the best design's kernels, built for the sequences asked for
            design = replace(design, max_seq=None)
    else:
        path = Path(args.design)
        if not path.is_file():
            raise InputError(f"{path}: no such design file (give a design JSON or `best`)")
        try:
            design = render.design_from_file(path)
        except (render.GenerateError, ValueError, TypeError, KeyError) as exc:  # a bad design file: status 4
            text = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise InputError(text if text.startswith(str(path)) else f"{path}: not a usable design ({text})") \
                from None
    max_seq = args.max_seq if args.max_seq is not None else (design.max_seq or render.BERT_SEQ)
    written = gen.generate(design, args.board, args.out, max_seq=max_seq, name=args.name)
    print(f"engine: {design.pipelines} pipelines x ({design.qk_kernels} QK^T + {design.pv_kernels} P.V kernels, "
          f"{design.score_plios} score channel(s)), q_rows {design.q_rows}, slices of {max_seq // design.qk_kernels} "
          f"keys, int{design.score_bits} scores, {design.lanes_swiftmax} lanes a channel"
          f"{' (products in DSPs)' if design.swiftmax_products == 'dsp' else ''}, max_seq {max_seq}, board "
          f"{args.board}")
    for f in written:
        print(f"wrote {f}")
    return 0


def _sublayer_builds() -> dict:
    from vckattn.hw.design.sublayer_build import FULL_SIZE_BUILDS, SUBLAYER_BUILDS

    return {**SUBLAYER_BUILDS, **FULL_SIZE_BUILDS}


def _named_sublayer(design: str) -> object | None:
    """The sublayer build DESIGN names (a path of that name wins), else None."""
    return None if Path(design).exists() else _sublayer_builds().get(design)


def _sublayer_folder(path: Path) -> tuple[object, str, object]:
    """(build, board, parsed graph) of a sublayer build folder written by ``hw generate``."""
    import json

    from vckattn.hw.design import check
    from vckattn.hw.design.sublayer_build import SublayerBuild

    try:
        doc = json.loads((path / "build.json").read_text(encoding="utf-8"))
        build = SublayerBuild.from_json(doc["sublayer"])
        board = str(doc["board"])
    except (OSError, ValueError, TypeError, KeyError) as exc:
        why = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InputError(f"{path / 'build.json'}: not a sublayer build written by `vckattn hw generate` ({why})") \
            from None
    graph_h = path / "aie" / "graph.h"
    if not graph_h.is_file():
        raise InputError(f"{path}: no aie/graph.h (write the folder with `vckattn hw generate`)")
    return build, board, check.parse_graph(graph_h.read_text(encoding="utf-8"))


def _check_target(args: argparse.Namespace) -> tuple[object, str, int | None, str | None]:
    """(design, board, max_seq, graph.h text or None) of ``hw check``'s DESIGN."""
    import json

    from vckattn.hw.design import generate as gen
    name, board, graph = args.design, args.board, None
    path = Path(name)
    if name in gen.ENGINE_BUILDS and not path.exists():
        design = gen.build_design(name)
        board = board or gen.ENGINE_BUILDS[name][0]
    elif path.is_dir():
        if not (path / "design.json").is_file():
            raise InputError(f"{path}: not a build folder (no design.json; write one with `vckattn hw generate`)")
        design = _design_file(path / "design.json")
        try:
            manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
            board = board or str(manifest["board"])
        except (OSError, ValueError, KeyError, TypeError):
            board = board or "vck5000"
        graph_h = path / "aie" / "graph.h"
        if graph_h.is_file():
            graph = graph_h.read_text(encoding="utf-8")
    elif path.is_file():
        design = _design_file(path)
    else:
        names = ", ".join([*gen.ENGINE_BUILDS, *_sublayer_builds()])
        raise InputError(f"{name}: no such design (give a committed build name: {names}; a design JSON; or a build "
                         "folder)")
    return design, board or "vck5000", args.max_seq, graph


def _design_file(path: Path) -> object:

    from vckattn.hw.design import render
    try:
        return render.design_from_file(path)
    except (render.GenerateError, ValueError, TypeError, KeyError) as exc:
        text = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InputError(text if text.startswith(str(path)) else f"{path}: not a usable design ({text})") from None


def run_hw_check(args: argparse.Namespace) -> int:

    from rich.table import Table

    from vckattn.host.cli.common import make_console
    from vckattn.host.output import write_json
    from vckattn.hw.design import check, render

    from .common import output_file

    output_file(args.json_out, what="--json")
    if args.max_seq is not None and args.max_seq < 1:
        raise UserError(f"--max-seq must be >= 1, got {args.max_seq}")
    sublayer = _named_sublayer(args.design)
    folder_graph = None
    if sublayer is None and (Path(args.design) / "build.json").is_file():
        sublayer, folder_board, folder_graph = _sublayer_folder(Path(args.design))
        args.board = args.board or folder_board
    try:
        if sublayer is not None:
            if args.max_seq is not None:
                raise UserError(f"--max-seq: a sublayer build's longest sequence is its own ({sublayer.max_seq})")
            board = args.board or "vck5000"
            ctx = check.sublayer_context(sublayer, board, folder_graph)
            design = ctx.design
            what = (f"the {sublayer.family} sublayer {sublayer.name}: {sublayer.qkv_cascades} Q/K/V + "
                    f"{sublayer.o_cascades} W_O GEMM cascades of {sublayer.qkv.kernels} kernels, ")
        else:
            design, board, max_seq, graph_text = _check_target(args)
            graph = check.parse_graph(graph_text) if graph_text is not None else None
            ctx = check.context(design, board, max_seq, graph=graph)
            what = ""
    except render.GenerateError as exc:
        raise render.DesignRuleError(str(exc)) from None
    results = check.run_rules(ctx)
    console = make_console()
    table = Table(title=f"Design-rule check: {what}{design.pipelines} attention pipelines x ({design.qk_kernels} "
                        f"QK^T + {design.pv_kernels} P.V kernels), {design.score_plios} score channel(s) on the "
                        f"{board} (MODELED resources; no AMD tool run)")
    for col in ("rule", "result", "limit", "found", "source"):
        table.add_column(col, overflow="fold")
    for r, vs in results:
        found = "; ".join(v.message for v in vs[:3]) + (f" (+{len(vs) - 3} more)" if len(vs) > 3 else "")
        table.add_row(r.id, "FAIL" if vs else "PASS", r.limit, found or "-", r.source)
    for r in check.RULES:
        if r.id in ctx.unchecked:
            table.add_row(r.id, "NOT CHECKED", r.limit, ctx.unchecked[r.id], r.source)
    console.print(table)
    failed = [v for _, vs in results for v in vs]
    if args.json_out is not None:
        doc = {"design": design.to_json(), "board": board, "modeled": True, "passed": not failed,
               "complete": not ctx.unchecked, "unchecked": dict(ctx.unchecked),
               "rules": [{"rule": r.id, "statement": r.statement, "limit": r.limit, "source": r.source,
                          "passed": not vs, "violations": [v.to_json() for v in vs]} for r, vs in results]}
        write_json(args.json_out, doc)
        console.print(f"wrote {args.json_out}")
    if failed:
        rules = sorted({v.rule for v in failed})
        raise render.DesignRuleError(f"{len(failed)} violation(s) of rule(s) {', '.join(rules)}: {failed[0].message} "
                                  f"(limit {failed[0].limit:g}; {failed[0].source})")
    if ctx.unchecked:
        console.print(f"all {len(results)} checked rules pass; {len(ctx.unchecked)} not checked "
                      f"({', '.join(ctx.unchecked)}): {next(iter(ctx.unchecked.values()))}")
    else:
        console.print(f"all {len(results)} rules pass")
    return 0

"""The performance-model tables of ``docs/performance.md``, generated from the model.

``python -m vckattn.hw.perf.report`` prints them.

``docs/performance.md`` holds the block between ``<!-- perf-tables:begin -->`` and ``<!-- perf-tables:end -->``
exactly as :func:`readme_block` writes it (``tests/test_perf_model.py`` checks it), so the tables
always are what the model and its sub-models say at this commit. ``--write docs/performance.md`` replaces the
block. Only deterministic figures are in it: the CPU timings of Fig. 5 and the search time are
measured and printed by ``vckattn perf explore``.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import replace
from pathlib import Path

from . import explore, gemm_kernels, pl, published
from .model import STAGES, Design, Device, Perf, Workload, design_from_manifest, evaluate, load_device

BEGIN, END = "<!-- perf-tables:begin -->", "<!-- perf-tables:end -->"
BERT_S512_B8 = Workload(heads=12, d_head=64, seq=512, batch=8, layers=("swiftmax",) * 12, name="BERT-base")
#: batches and sequence lengths over which "the normalizer is never the bottleneck" is checked
GOAL_BATCHES = (8, 16, 32, 64)


def _manifest_design() -> Design:
    from vckattn.hw.manifest import load_manifest

    return design_from_manifest(load_manifest("vck5000_attention").data)


def _design_text(d: Design) -> str:
    lanes = d.lanes_swiftmax or d.lanes_online_softmax
    return (f"{d.pipelines} x ({d.qk_kernels}+{d.pv_kernels} kernels), {d.q_rows}x{d.key_block} tiles, "
            f"int{d.score_bits}, {d.score_plios} score PLIO x {lanes} lanes, {d.in_plios} in PLIO, "
            f"K/V {'resident' if d.kv_resident else 're-streamed'}")


def _us(s: float) -> str:
    return f"{s * 1e6:,.1f}"


def _row(label: str, p: Perf) -> str:
    u, a = p.used, p.available
    fits = "yes" if p.fits else "NO: " + ", ".join(p.over)
    return (f"| {label} | {_design_text(p.design)} | {_us(p.seconds_per_layer)} | {p.tops:.2f} | "
            f"{p.fraction_of_peak:.1%} | {STAGES[p.bottleneck]} | {p.tops_on_chip:.2f} | "
            f"{u['aie_tiles']:.0f} | {u['plio_in']:.0f}/{u['plio_out']:.0f} | "
            f"{u['lut']:,.0f} ({u['lut'] / a['lut']:.0%}) | {u['dsp']:,.0f} ({u['dsp'] / a['dsp']:.0%}) | "
            f"{u['uram']:.0f} | {fits} |")


HEADER = ("| design | structure | µs/layer | TOPS | % of 128 | bottleneck | on-chip TOPS | AIE tiles | PLIO in/out | "
          "LUT (of 880K) | DSP | URAM | fits |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _goal_checks(ex: explore.Exploration, dev: Device) -> tuple[bool, list[str]]:
    """Is the best SwiftMax design's normalizer never the bottleneck (batches >= 8, its S)?"""
    bad = []
    for b in GOAL_BATCHES:
        p = evaluate(replace(ex.swiftmax.workload, batch=b), ex.swiftmax.design, dev)
        if p.bottleneck == "pl_normalizer":
            bad.append(f"batch {b}")
    return not bad, bad


def readme_block(dev: Device | None = None) -> str:
    """The markdown of the performance tables in ``docs/performance.md`` (deterministic)."""
    dev = dev or load_device()
    lines = [BEGIN, ""]
    built = _manifest_design()
    lines += ["The committed tile-by-tile build, vck5000_attention (`vckattn perf --design-from-manifest "
              "vck5000_attention`, BERT-base "
              "attention, S = 512, batch 8, 12 layers, SwiftMax), stage by stage:", "",
              "| stage | busy per layer (µs) | bound by |", "|---|---|---|"]
    pt = evaluate(BERT_S512_B8, built, dev)
    for s in pt.stages:
        mark = " **(bottleneck)**" if s.name == pt.bottleneck else ""
        lines.append(f"| {STAGES[s.name]}{mark} | {_us(s.seconds)} | {s.bound_by} |")
    no_host = evaluate(BERT_S512_B8, replace(built, host_seconds_per_tile=0.0), dev)
    lines += ["", f"{_us(pt.seconds_per_layer)} µs per layer = **{pt.tops:.3f} TOPS ({pt.fraction_of_peak:.2%} of "
              f"128)**. Without the host's per-tile path the bound is {STAGES[no_host.bottleneck]} "
              f"({no_host.stage(no_host.bottleneck).bound_by}): {no_host.tops:.3f} TOPS "
              f"({no_host.fraction_of_peak:.2%}).", ""]
    exs = {}
    for operands in ("ddr", "on_chip"):
        w = replace(BERT_S512_B8, operands=operands)
        ex = explore.explore(w, dev)
        exs[operands] = ex
        title = ("operands in card DDR (the block as the card sees it)" if operands == "ddr" else
                 "operands on chip (Q/K/V from a fused projection engine: the attention engine's ceiling)")
        lines += [f"Best designs, BERT-base S = 512, batch 8, {title} — `vckattn perf explore --operands "
                  f"{operands}`:", "", HEADER]
        lines.append(_row("vck5000_attention build", evaluate(w, built, dev)))
        lines.append(_row("best SwiftMax", ex.swiftmax))
        lines.append(_row("best online softmax", ex.online_softmax))
        if ex.online_equal_resources is not None:
            lines.append(_row("online softmax at SwiftMax's resources", ex.online_equal_resources))
        if ex.swiftmax_equal_throughput is not None and ex.online_equal_throughput is not None:
            lines.append(_row("SwiftMax, fewest LUTs at equal throughput", ex.swiftmax_equal_throughput))
            lines.append(_row("online softmax, fewest LUTs at equal throughput", ex.online_equal_throughput))
        sp, lr = ex.speedup_equal_resources, ex.lut_ratio_equal_throughput
        lines += ["", f"SwiftMax vs online softmax: speedup at equal resources **{sp:.2f}x**; normalizer LUTs at "
                  f"equal throughput **{lr:.0%}** of online softmax's (whole design "
                  f"{ex.lut_ratio_equal_throughput_design:.0%}).", ""]
    ddr, chip = exs["ddr"], exs["on_chip"]
    never_ddr, bad_ddr = _goal_checks(ddr, dev)
    never_chip, bad_chip = _goal_checks(chip, dev)
    bh, rms = pl.resources("bhyt_approx", 4), pl.resources("rmsnorm", 4)

    def ok(flag: bool) -> str:
        return "met" if flag else "**not met**"

    f_ddr, f_chip = ddr.swiftmax.fraction_of_peak, chip.swiftmax.fraction_of_peak
    lr_ddr = ddr.lut_ratio_equal_throughput
    lines += ["The design goals against the model:", "",
              "| goal | operands in DDR | operands on chip |", "|---|---|---|",
              f"| best SwiftMax design >= 65% of 128 int8 TOPS (minimum >= 25%) | {f_ddr:.1%}: "
              f"{ok(f_ddr >= 0.65)} (minimum {ok(f_ddr >= 0.25)}) | {f_chip:.1%}: {ok(f_chip >= 0.65)} "
              f"(minimum {ok(f_chip >= 0.25)}) |",
              f"| normalizer never the bottleneck (batch {', '.join(map(str, GOAL_BATCHES))}) | {ok(never_ddr)}"
              f"{' (' + ', '.join(bad_ddr) + ')' if bad_ddr else ''} | {ok(never_chip)}"
              f"{' (' + ', '.join(bad_chip) + ')' if bad_chip else ''} |",
              f"| fits the VC1902 with >= 20% LUT headroom | {ddr.swiftmax.lut_headroom:.0%} free: "
              f"{ok(ddr.swiftmax.fits and ddr.swiftmax.lut_headroom >= 0.2)} | {chip.swiftmax.lut_headroom:.0%} free: "
              f"{ok(chip.swiftmax.fits and chip.swiftmax.lut_headroom >= 0.2)} |",
              f"| SwiftMax normalizer LUTs <= 25% of online softmax's at equal throughput | {lr_ddr:.0%}: "
              f"{ok(lr_ddr <= 0.25)} | {chip.lut_ratio_equal_throughput:.0%}: "
              f"{ok(chip.lut_ratio_equal_throughput <= 0.25)} |",
              f"| BHyT approximate-variance unit no larger than RMSNorm (4 lanes, LUT) | {bh['lut']:,.0f} vs "
              f"{rms['lut']:,.0f}: {ok(bh['lut'] <= rms['lut'])} | same |", ""]
    lines += ["Published AIE designs, modeled with the same cost path, each matmul kernel costed from its own code "
              "(`vckattn perf validate`; what this covers and what not: docs/validation.md):", "",
              "| design | board | published | modeled | error | modeled bound | kernel (modeled efficiency) "
              "| parameters taken from |",
              "|---|---|---|---|---|---|---|---|"]
    for r in published.validate():
        unit = 1e12
        dims = "x".join(str(x) for x in r["kernel_dims"])
        lines.append(f"| {r['name']} ({r['citation']}) | {r['board']} | {r['published'] / unit:.2f} "
                     f"{'TOPS' if r['dtype'] == 'int8' else 'TFLOPS'} | {r['modeled'] / unit:.2f} | "
                     f"{r['error']:+.1%} | {r['bound_by']} | {r['kernel']} {dims} ({r['kernel_efficiency']:.1%}) | "
                     f"{r['parameters_from']} |")
    for kernel, (dims, eff, source) in gemm_kernels.PUBLISHED_EFFICIENCY.items():
        modeled = gemm_kernels.kernel_efficiency(kernel, dims)
        lines += ["", f"Single kernel: {kernel} {'x'.join(map(str, dims))} published {eff:.1%}, modeled "
                      f"{modeled:.1%} ({modeled / eff - 1:+.1%}); {source}."]
    lines += ["", END]
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """``text`` with its perf-tables block replaced by ``block`` (ValueError if it has none)."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"no {BEGIN} ... {END} block")
    return pattern.sub(lambda _m: block, text, count=1)


def current_block(text: str) -> str | None:
    m = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, re.S)
    return None if m is None else m.group(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vckattn.hw.perf.report", description=__doc__)
    ap.add_argument("--write", type=Path, metavar="docs/performance.md", help="replace the block in this file")
    args = ap.parse_args(argv)
    block = readme_block()
    if args.write is None:
        print(block)
        return 0
    args.write.write_text(replace_block(args.write.read_text(encoding="utf-8"), block), encoding="utf-8")
    print(f"wrote the perf tables into {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The performance-model tables of ``docs/performance.md``, generated from the model.

``make regen`` writes them (``tools/regen.py``).

``docs/performance.md`` holds the block between ``<!-- perf-tables:begin -->`` and ``<!-- perf-tables:end -->``
exactly as :func:`readme_block` writes it (``tests/hw/perf/test_model.py`` checks it), and the whole sublayer's block
between ``<!-- perf-sublayer:begin -->`` and ``<!-- perf-sublayer:end -->`` as :func:`sublayer_block` writes it
(``tests/hw/design/test_simulate_sublayer.py``), so the tables always are what the model and its sub-models say at this
commit. ``--write docs/performance.md`` replaces both blocks. Only deterministic figures are in them: the CPU
timings of Fig. 5 and the search time are measured and printed by ``vckattn perf explore``.
"""

from __future__ import annotations

import re
from dataclasses import replace

from vckattn.hw.design import explore, simulate
from vckattn.hw.perf import gemm_kernels, published
from vckattn.hw.perf.model import STAGES, Design, Device, Perf, Workload, design_from_manifest, evaluate, load_device

BEGIN, END = "<!-- perf-tables:begin -->", "<!-- perf-tables:end -->"
SUB_BEGIN, SUB_END = "<!-- perf-sublayer:begin -->", "<!-- perf-sublayer:end -->"
BERT_S512_B8 = Workload(heads=12, d_head=64, seq=512, batch=8, layers=("swiftmax",) * 12, name="BERT-base")


def _committed(name: str) -> Design:
    from vckattn.hw.design.manifest import load_manifest

    return design_from_manifest(load_manifest(name).data)


def _design_text(d: Design) -> str:
    lanes = f"{d.lanes_swiftmax} SwiftMax lanes"
    if d.lanes_online_softmax:
        lanes += f" + {d.lanes_online_softmax} online-softmax lanes"
    return (f"{d.pipelines} x ({d.qk_kernels}+{d.pv_kernels} kernels, {d.score_plios} score channel(s) x "
            f"{lanes}{', DSP products' if d.swiftmax_products == 'dsp' else ''}), Q_ROWS {d.q_rows}, "
            f"int{d.score_bits}, O int{d.o_bits}")


def _us(s: float) -> str:
    return f"{s * 1e6:,.1f}"


def _max_use(p: Perf) -> tuple[str, float]:
    keys = [k for k in explore.BUDGET_KEYS if p.available.get(k)]
    k = max(keys, key=lambda k: p.used[k] / p.available[k])
    return k, p.used[k] / p.available[k]


def _row(label: str, p: Perf) -> str:
    u, a = p.used, p.available
    fits = "yes" if p.fits else "NO: " + ", ".join(p.over)
    k, use = _max_use(p)
    return (f"| {label} | {_design_text(p.design)} | {_us(p.seconds_per_layer)} | {_us(p.device_seconds_per_layer)} | "
            f"{p.tops:.2f} | {p.fraction_of_peak:.1%} | {STAGES[p.bottleneck]} | "
            f"{u['aie_tiles']:.0f} | {u['plio_in']:.0f}/{u['plio_out']:.0f} | "
            f"{u['lut']:,.0f} ({u['lut'] / a['lut']:.0%}) | {u['dsp']:,.0f} ({u['dsp'] / a['dsp']:.0%}) | "
            f"{k} {use:.0%} | {fits} |")


HEADER = ("| design | structure | µs/layer | µs on the card | TOPS | % of 128 | bottleneck | AIE tiles | PLIO in/out | "
          "LUT (of 880K) | DSP | fullest resource | fits |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")

#: committed designs and the workloads the closed form and the simulation are compared on
AGREEMENT_CASES = (
    ("vck5000_engine", "vck5000", BERT_S512_B8),
    ("vck190_engine", "vck190", BERT_S512_B8),
    ("engine_small", "vck5000", Workload(heads=12, d_head=32, seq=128, batch=2, layers=("swiftmax",), name="MiniLM")),
)


def agreement() -> list[dict]:
    """The closed form against the simulated graph on :data:`AGREEMENT_CASES` (both MODELED)."""
    rows = []
    for name, board, w in AGREEMENT_CASES:
        dev = load_device(board)
        d = _committed(name)
        closed = evaluate(w, d, dev)
        sim = simulate.simulate(w, d, dev)
        rows.append({"design": name, "board": board, "workload": w, "closed": closed.seconds_per_layer,
                     "simulated": sim.seconds, "difference": sim.seconds / closed.seconds_per_layer - 1,
                     "perf": closed, "sim": sim})
    return rows


def _eff(e: float | None) -> str:
    return "—" if e is None else f"{e:.1%}"


def _goals(dev: Device, committed: Perf, agree: list[dict]) -> list[str]:
    def ok(flag: bool) -> str:
        return "met" if flag else "**not met**"

    kern = {k["kernel"]: k["efficiency"] for k in committed.kernels}
    qk = kern["qk"]
    pv = min(v for k, v in kern.items() if k.startswith("pv") and v is not None)
    sim_ddr = next(a for a in agree if a["design"] == "vck5000_engine" and a["workload"].operands == "ddr")["sim"]
    roof = committed.ddr_roof_seconds
    f_model, f_sim = roof / committed.device_seconds_per_layer, roof / sim_ddr.device_seconds
    k, use = _max_use(committed)
    rows = [r for r in published.validate() if r["role"] == "validation"]
    within = sum(abs(r["error"]) <= published.TOLERANCE for r in rows)
    goal = sum(abs(r["error"]) <= published.GOAL for r in rows)
    return ["The design goals against the model (BERT-base attention, 12 x 64, S = 512, batch 8, int8; MODELED):", "",
            "| goal | minimum / goal | modeled | |", "|---|---|---|---|",
            f"| QKᵀ efficiency per tile (the committed design's shape, no masked key) | 65% / 90% | {qk:.1%} | "
            f"{ok(qk >= 0.65)} / {ok(qk >= 0.9)} |",
            f"| P·V efficiency per tile (the slowest P·V kernel) | 80% / 90% | {pv:.1%} | {ok(pv >= 0.8)} / "
            f"{ok(pv >= 0.9)} |",
            f"| the committed design, operands in DDR, against the DDR roof (on the card; the slower of closed form "
            f"and simulation) | 90% | closed form {f_model:.1%}, simulated {f_sim:.1%} | "
            f"{ok(min(f_model, f_sim) >= 0.9)} |",
            f"| every resource of the committed design, every mover's m_axi ports counted | <= 80% | fullest: {k} "
            f"{use:.0%} | {ok(use <= 0.8)} |",
            f"| published designs other than the fitting one, without refitting | ±20% / ±15% | {within} / {goal} of "
            f"{len(rows)} | {ok(within == len(rows))} / {ok(goal == len(rows))} |", ""]


def readme_block(dev: Device | None = None) -> str:
    """The markdown of the documented performance tables (deterministic)."""
    dev = dev or load_device()
    lines = [BEGIN, ""]
    committed = _committed("vck5000_engine")
    pc = evaluate(BERT_S512_B8, committed, dev)
    agree = agreement()
    lines += [f"The committed engine (`vckattn perf`: `bitstreams/vck5000_engine.json`, {_design_text(committed)}, "
              f"PL {committed.pl_clock_mhz:g} MHz), BERT-base attention, S = 512, batch 8, 12 SwiftMax layers, "
              "operands in card DDR. Its AIE kernels, one tile each (MACs / (cycles x 128), from their instrumented "
              "operations):",
              "", "| kernel | tile (rows x keys x D) | MACs | cycles | efficiency |", "|---|---|---|---|---|"]
    for k in pc.kernels:
        lines.append(f"| {k['kernel']} | {k['q_rows']} x {k['slice_keys']} x {k['d']} | {k['macs']:,} | "
                     f"{k['cycles']:,.0f} | {_eff(k['efficiency'])} |")
    lines += ["", "Stage by stage (busy per layer on the busiest instance; the layer takes the longest head + busy + "
              "tail):", "", "| stage | busy per layer (µs) | bound by |", "|---|---|---|"]
    for s in pc.stages:
        mark = " **(bottleneck)**" if s.name == pc.bottleneck else ""
        lines.append(f"| {STAGES[s.name]}{mark} | {_us(s.seconds)} | {s.bound_by} |")
    lines += ["", f"{_us(pc.seconds_per_layer)} µs per layer ({_us(pc.device_seconds_per_layer)} µs on the card + "
              f"{_us(pc.host_serial_seconds)} µs host launch, assumed; `vckattn perf` prints the end-to-end time "
              "beside it, the host's calls counted from its launch code) = "
              f"**{pc.tops:.2f} TOPS "
              f"({pc.fraction_of_peak:.1%} of 128)**; the DDR roof (Q, K, V and A once at "
              f"{dev.ddr_bytes_per_s / 1e9:g} GB/s) is "
              f"{_us(pc.ddr_roof_seconds)} µs: {pc.ddr_roof_seconds / pc.device_seconds_per_layer:.1%} of it on the "
              "card.", "",
              "The closed form against the discrete-event simulation of the graph the generator writes (`vckattn perf "
              "--simulate`, `hw/design/simulate.py`, MODELED: the parsed `aie/graph.h` and manifest; ping-pong buffers "
              "with their DMA and lock hand-offs, buffer descriptors per tile, the Q broadcast, packet merge and split "
              "with back-pressure, shared interface streams, the cascade, one DDR bank with read/write turnaround "
              "(JESD79-4 DDR4-3200 timings) and row conflicts past the masters a controller keeps pages open for "
              "(PG313, an assumption beyond its eight)). The figure to quote is the slower of the two:", "",
              "| design | workload | closed form (µs) | simulated (µs) | difference | headline (slower) (µs) |",
              "|---|---|---|---|---|---|"]
    for a in agree:
        w = a["workload"]
        head, which = simulate.headline(a["closed"], a["simulated"])
        lines.append(f"| {a['design']} ({a['board']}) | {w.heads} x {w.d_head}, S = {w.seq}, batch {w.batch}, "
                     f"operands {w.operands} | {_us(a['closed'])} | {_us(a['simulated'])} | {a['difference']:+.1%} | "
                     f"{_us(head)} ({which}) |")
    lines += ["", "The committed builds (`bitstreams/<name>.json`, `make regen SEARCH=1`), each on the workload above, "
              "operands in card DDR:", "",
              "| build | design | µs/layer (closed form / simulated) | TOPS (% of 128) | bottleneck | AIE tiles | "
              "PLIO in/out | LUT | DSP | largest kernel's memory (of 32 KiB, with the reserve) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for a in agree:
        if a["workload"].operands != "ddr":
            continue
        p, u = a["perf"], a["perf"].used
        lines.append(f"| {a['design']} ({a['board']}) | {_design_text(p.design)}, {p.design.pl_clock_mhz:g} MHz | "
                     f"{_us(a['closed'])} / {_us(a['simulated'])} | {p.tops:.2f} ({p.fraction_of_peak:.1%}) | "
                     f"{STAGES[p.bottleneck]} | {u['aie_tiles']:.0f} | {u['plio_in']:.0f} / {u['plio_out']:.0f} | "
                     f"{u['lut']:,.0f} | {u['dsp']:,.0f} | {u['aie_kernel_memory_bytes']:,.0f} B |")
    lines.append("")
    for operands in ("ddr",):  # on-chip operands need a feeder the generator does not emit: not reported
        w = replace(BERT_S512_B8, operands=operands)
        ex = explore.explore(w, dev)
        title = "operands in card DDR, every design one `vckattn hw generate` builds and `vckattn hw check` passes"
        lines += [f"Best designs, BERT-base S = 512, batch 8, {title}, {explore.HEADROOM:.0%} of every resource kept "
                  f"free — `vckattn perf explore --operands {operands}`:", "", HEADER]
        lines.append(_row("the committed engine", evaluate(w, committed, dev)))
        lines.append(_row("best SwiftMax (closed form; the committed engine: the simulation's pick of its near-ties)",
                          ex.swiftmax))
        lines.append(_row("best online softmax", ex.online_softmax))
        if ex.online_equal_resources is not None:
            lines.append(_row("online softmax at SwiftMax's resources", ex.online_equal_resources))
        if ex.swiftmax_equal_throughput is not None and ex.online_equal_throughput is not None:
            lines.append(_row("SwiftMax, fewest LUTs at equal throughput", ex.swiftmax_equal_throughput))
            lines.append(_row("online softmax, fewest LUTs at equal throughput", ex.online_equal_throughput))
        sp, lr = ex.speedup_equal_resources, ex.lut_ratio_equal_throughput
        speed = f"speedup at equal resources **{sp:.2f}x**" if sp is not None else \
            (f"no online-softmax design fits the SwiftMax design's resources (its {ex.swiftmax.used['dsp']:g} DSPs, "
             f"{ex.swiftmax.used['lut']:,.0f} LUTs)")
        luts = f"normalizer LUTs at equal throughput **{lr:.0%}** of online softmax's (whole design " \
            f"{ex.lut_ratio_equal_throughput_design:.0%})" if lr is not None else \
            "no pair of designs reaches equal throughput"
        lines += ["", f"SwiftMax vs online softmax: {speed}; {luts}.", ""]
    lines += _goals(dev, pc, agree)
    lines += ["Published AIE designs, modeled with the same cost path, each matmul kernel costed from its own code; "
              "the costs no code shows fitted on one of them (role `fit`), the others modeled without refitting "
              "(`vckattn perf validate`; the fit, the leave-one-out table and what this covers and what not: "
              "[validation.md](validation.md)):", "",
              "| design | role | board | published | modeled | error | modeled bound | kernel (modeled efficiency) "
              "| parameters taken from |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in published.validate():
        unit = 1e12
        dims = "x".join(str(x) for x in r["kernel_dims"])
        lines.append(f"| {r['name']} ({r['citation']}) | {r['role']} | {r['board']} | {r['published'] / unit:.2f} "
                     f"{'TOPS' if r['dtype'] == 'int8' else 'TFLOPS'} | {r['modeled'] / unit:.2f} | "
                     f"{r['error']:+.1%} | {r['bound_by']} | {r['kernel']} {dims} ({r['kernel_efficiency']:.1%}) | "
                     f"{r['parameters_from']} |")
    for kernel, (dims, eff, source) in gemm_kernels.PUBLISHED_EFFICIENCY.items():
        modeled = gemm_kernels.kernel_efficiency(kernel, dims)
        lines += ["", f"Single kernel: {kernel} {'x'.join(map(str, dims))} published {eff:.1%}, modeled "
                      f"{modeled:.1%} ({modeled / eff - 1:+.1%}); {source}."]
    lines += ["", END]
    return "\n".join(lines)


def replace_block(text: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    """``text`` with its ``begin`` ... ``end`` block replaced by ``block`` (ValueError if it has none)."""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"no {begin} ... {end} block")
    return pattern.sub(lambda _m: block, text, count=1)


def current_block(text: str, begin: str = BEGIN, end: str = END) -> str | None:
    m = re.search(re.escape(begin) + r".*?" + re.escape(end), text, re.S)
    return None if m is None else m.group(0)


# ------------------------------------------------------------------------------------------ the sublayer

#: the sublayer shapes the documentation states (BERT-base at S = 512 and 128, batch 8) and a small one on which
#: the closed form and the simulation are also compared
SUBLAYER_GOALS = ((512, 0.35, 0.60), (128, 0.25, 0.50))
SMALL_SUBLAYER = (2, 128, 6)


def _split_text(c: dict) -> str:
    sp = c["split"]
    norm = "SwiftMax" if sp["normalizer"] == "swiftmax" else "online softmax"
    products = " (products in DSPs)" if sp["normalizer"] == "swiftmax" and sp["swiftmax_products"] == "dsp" else ""
    return (f"{sp['n_qkv']} Q/K/V + {sp['n_o']} W_O cascades, {sp['n_att']} x ({sp['kq']}+{sp['kq']}+1) attention "
            f"kernels, {sp['score_channels']} {norm} channel(s){products} a pipeline, a w PLIO for "
            f"{sp['w_share']} cascade(s)")


#: the sublayer's resources as its tables name them (hw/perf/sublayer.py RESOURCES)
_RESOURCE_NAMES = {"aie_tiles": "AIE tiles", "plio_in": "PLIO in", "plio_out": "PLIO out", "lut": "LUT",
                   "ff": "FF", "dsp": "DSP", "bram": "BRAM36", "uram": "URAM"}


def _fullest(c: dict) -> str:
    r = c["resources"]
    return f"{_RESOURCE_NAMES[r['fullest']]} {r['fraction'][r['fullest']]:.1%}"


def sublayer_agreement() -> list[dict]:
    """The closed form against the simulated sublayer graph on the best SwiftMax split of each documented shape that
    places and passes the AIE rules (:func:`.explore_sublayer.best_placeable`)."""
    from vckattn.hw.design.explore_sublayer import best_placeable
    from vckattn.hw.design.simulate_sublayer import simulate_sublayer
    from vckattn.hw.perf import sublayer

    rows = []
    shapes = [sublayer.SublayerShape(8, seq) for seq, _, _ in SUBLAYER_GOALS]
    b, seq, heads = SMALL_SUBLAYER
    shapes.append(sublayer.SublayerShape(b, seq, heads=heads))
    for s in shapes:
        c = best_placeable(s)
        sim = simulate_sublayer(s, sublayer.SublayerSplit.from_json(c["split"]))
        rows.append({"shape": s, "closed": c, "sim": sim, "difference": sim.seconds / c["seconds"] - 1})
    return rows


def sublayer_block() -> str:
    """The whole sublayer's documented block: what `perf --scope sublayer` reports (an encoder's split whose PL top
    the generator builds) and where the full-size decoder is."""
    return "\n".join([SUB_BEGIN, "", "`vckattn perf --scope sublayer` reports the whole encoder sublayer (MODELED) "
                      "on the fastest split whose AIE graph places and passes the AIE rules and whose PL top the "
                      "generator builds (`hw/design/pl_top.py: top_problem`); the committed full-size encoder, "
                      "`vck5000_sublayer`, is that split for BERT-base, S = 512, batch 8, generated whole by `vckattn "
                      "hw generate vck5000_sublayer`. The committed full-size decoder, `vck5000_sublayer_decoder` "
                      "(SmolLM2-135M with BHyT: its site A units from the X buffer to the U buffer, RoPE units on the "
                      "Q/K/V records), is the model's best split for its shape, generated whole by `vckattn hw "
                      "generate vck5000_sublayer_decoder` and checked by `vckattn hw check`; the command takes an "
                      "encoder's flags only.", "", SUB_END])

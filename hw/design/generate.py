"""The engine's build sources from a design point (``hw/ENGINE.md``; ``vckattn hw generate``).

The full description: ``docs/internals/hw.md``, section ``hw/design/generate.py``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from vckattn.hw.design import layout as lay
from vckattn.hw.design.check import refuse_violations
from vckattn.hw.design.layout import Layout, pv_name, rq_name
from vckattn.hw.design.render import (
    BERT_BATCH,
    BERT_SEQ,
    HEAD_DIMS,
    PL_TOP,
    SMALL_DESIGN,
    SMALL_DUAL_DESIGN,
    GenerateError,
    bert_workload,
    check_design,
    design_from_file,
    engine_manifest,
    render_config,
    render_graph_cpp,
    render_graph_h,
)

BITSTREAMS = Path(__file__).resolve().parents[2] / "bitstreams"


#: the committed design points, beside the manifests but out of ``bitstreams/*.json`` (read as manifests)
DESIGNS_DIR = "engine_designs"


#: committed engine manifests: name -> (board, design: "best" = the explorer's best buildable SwiftMax design)
ENGINE_BUILDS: dict[str, tuple[str, str | dict]] = {
    "vck5000_engine": ("vck5000", "best"),
    "vck190_engine": ("vck190", "best"),
    "engine_small": ("vck5000", SMALL_DESIGN),
    "engine_small_dual": ("vck5000", SMALL_DUAL_DESIGN),
}


@functools.cache
def best_design(board: str) -> Any:
    """The best SwiftMax design for :func:`bert_workload` on ``board`` among the designs this generator builds
    (:func:`buildable`), with the explorer's headroom on every resource: the closed form's near-ties (within
    :data:`vckattn.hw.design.explore.TIE` of the fastest) are each run through the graph simulation
    (:mod:`vckattn.hw.design.simulate`) and the fastest simulated wins (ties: the fewest LUTs). Designs at the DDR
    roof tie in the closed form, which takes the busiest stage; the simulation sees how they share the one bank
    (a few seconds a design, MODELED)."""
    from vckattn.hw.design import explore, simulate
    from vckattn.hw.perf import model

    dev = model.load_device(board)
    w = bert_workload()
    clock = float(dev.pl_clock_mhz["model_default"])
    budget = explore.default_budget(dev, explore.HEADROOM, clock)
    found = []
    for cand in explore.candidates(w, dev, clock):
        if not explore.design_builds(cand, dev):  # buildable(cand, board), cached
            continue
        c = explore.best_for(w, cand, dev, budget)  # lowered to a pipeline count that builds and passes the check
        if c is not None:
            found.append(c)
    if not found:
        raise GenerateError(f"no buildable SwiftMax design fits the {board}")
    fastest = min(c.seconds for c in found)
    near = [c for c in found if c.seconds <= fastest * (1 + explore.TIE)]
    best = min(near, key=lambda c: (simulate.simulate(w, c.design, dev).seconds, c.lut)).design
    return replace(best, name=f"best SwiftMax engine on the {board} for BERT-base S={BERT_SEQ} batch {BERT_BATCH}")


def modeled(design: Any, board: str) -> dict:
    """:func:`~vckattn.hw.perf.model.evaluate` of ``design`` on :func:`bert_workload` (JSON; resources included)."""
    from vckattn.hw.perf import model

    seq = min(BERT_SEQ, design.max_seq or BERT_SEQ)  # a build for shorter sequences: modeled at its longest
    try:
        perf = model.evaluate(bert_workload(seq), design, model.load_device(board))
    except ValueError as exc:
        raise GenerateError(f"design: the model refuses it ({exc})") from None
    return {"modeled": True, "workload": f"BERT-base attention, S = {seq}, batch {BERT_BATCH}, 12 SwiftMax layers",
            **perf.to_json()}


def write_diagram(design: Any, placed: Layout, perf: dict, path: Path) -> None:
    """One picture of the design point: kernels on the 50 x 8 array, PLIOs per interface column, lanes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n, k = design.pipelines, design.qk_kernels
    grid = np.full((lay.ARRAY_ROWS, lay.ARRAY_COLUMNS), np.nan)
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(14, 6.5), gridspec_kw={"height_ratios": [3, 1.2]})
    for name, (c, r) in placed.tiles.items():
        grid[r, c] = int(name[1:name.index("_")])
    ax.imshow(grid, origin="lower", cmap="tab20", vmin=0, vmax=max(19, n - 1), aspect="auto",
              extent=(-0.5, lay.ARRAY_COLUMNS - 0.5, -0.5, lay.ARRAY_ROWS - 0.5))
    for name, (c, r) in placed.tiles.items():
        label = "R" if name.endswith("_rq") else ("Q" if "_qk" in name else "P") + name.rsplit("k" if "_qk" in name
                                                                                           else "v", 1)[1]
        ax.text(c, r, label, ha="center", va="center", fontsize=5)
    for i in range(n):
        row = [placed.tiles[pv_name(i, j)] for j in range(k)] + [placed.tiles[rq_name(i)]]
        xs = [c for c, _ in row]
        ax.annotate("", xy=(xs[-1], row[0][1] - 0.3), xytext=(xs[0], row[0][1] - 0.3),
                    arrowprops={"arrowstyle": "->", "lw": 0.6})
    ax.set_xticks(range(0, lay.ARRAY_COLUMNS, 5))
    ax.set_yticks(range(lay.ARRAY_ROWS))
    ax.set_xlabel("AIE column")
    ax.set_ylabel("AIE row")
    tops = perf.get("tops")
    sk = (design.max_seq or BERT_SEQ) // k
    ax.set_title(f"{n} pipelines x ({k} QK^T 'Q' + {k} P.V 'P' kernels + requantizer 'R', cascade ->, "
                 f"{design.score_plios} score "
                 f"channel(s)), Q_ROWS {design.q_rows}, {sk}-key slices, int{design.score_bits} scores, "
                 f"{design.lanes_swiftmax} SwiftMax lanes/channel"
                 f"{' (DSP products)' if design.swiftmax_products == 'dsp' else ''}, PL {design.pl_clock_mhz:g} MHz"
                 + (f"; modeled {tops:.1f} TOPS" if tops else ""), fontsize=9)
    ins = np.zeros(lay.ARRAY_COLUMNS)
    outs = np.zeros(lay.ARRAY_COLUMNS)
    for name, d in placed.plios():
        (ins if d == "in" else outs)[placed.plio_columns[name]] += 1
    _plio_panel(fig, bx, ins, outs, "PL->AIE PLIOs (q_in, k_in, v_in, p_in)", "AIE->PL PLIOs (s_out, o_out)", path)


def _plio_panel(fig: Any, bx: Any, ins: Any, outs: Any, in_label: str, out_label: str, path: Path) -> None:
    """The PLIOs-per-interface-column panel of a diagram (``ins`` / ``outs`` a column), then the figure saved."""
    import matplotlib.pyplot as plt
    import numpy as np

    cols = np.arange(lay.ARRAY_COLUMNS)
    bx.bar(cols - 0.2, ins, 0.4, label=in_label)
    bx.bar(cols + 0.2, outs, 0.4, label=out_label)
    bx.set_xlim(-0.5, lay.ARRAY_COLUMNS - 0.5)
    bx.set_xlabel("interface column (128-bit PLIOs)")
    bx.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _write(path: Path, text: str, written: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    written.append(path)


def generate(design: Any, board: str, out: Path, max_seq: int = 512, head_dims: tuple[int, ...] = HEAD_DIMS, *,
             name: str | None = None, with_pl: bool = True, with_diagram: bool = True) -> list[Path]:
    """Write the engine's build sources for ``design`` on ``board`` into ``out`` (see the module docstring);
    returns the files written. ``name``: the manifest's name (default ``<board>_engine``); ``with_pl=False``
    leaves out the PL top (``pl/``), ``with_diagram=False`` the picture.

    Raises:
        GenerateError: a design contract v3 cannot build, one that does not fit the array, an unwritable
            ``out``, or the PL generator (``vckattn.hw.pl.engine``) missing.
    """
    from vckattn.hw.design.manifest import validate_manifest
    from vckattn.hw.design.system_cfg import system_cfg

    head_dims = tuple(int(h) for h in head_dims)
    name = name or f"{board}_engine"
    check_design(design, max_seq, head_dims)
    try:
        placed = lay.layout(design.pipelines, design.qk_kernels, design.score_plios)
    except lay.LayoutError as exc:
        raise GenerateError(f"design: {exc}") from None
    refuse_violations(design, board, max_seq, head_dims)  # the design-rule check, before anything is written
    manifest = engine_manifest(design, board, name, max_seq, head_dims)
    validate_manifest(manifest, f"{name} (generated)")
    perf = modeled(replace(design, max_seq=max_seq), board)
    out = Path(out)
    written: list[Path] = []
    try:
        _write(out / "aie" / "engine_config.h", render_config(design, max_seq, head_dims), written)
        _write(out / "aie" / "graph.h", render_graph_h(design, placed), written)
        _write(out / "aie" / "graph.cpp", render_graph_cpp(design), written)
        cfg = system_cfg(manifest, f"{out.name}/manifest.json", "vckattn hw generate (this folder's design.json)")
        _write(out / "system.cfg", cfg, written)
        _write(out / "manifest.json", json.dumps(manifest, indent=2) + "\n", written)
        _write(out / "design.json", json.dumps(replace(design, max_seq=max_seq).to_json(), indent=2) + "\n", written)
        _write(out / "modeled.json", json.dumps(perf, indent=2) + "\n", written)
        if with_diagram:
            write_diagram(design, placed, perf, out / "diagram.png")
            written.append(out / "diagram.png")
        if with_pl:
            written += _write_pl(manifest, design, out / "pl")
    except OSError as exc:
        raise GenerateError(f"{out}: cannot write ({exc.strerror or exc})") from None
    return written


#: what a sublayer build folder does not hold yet (``vckattn hw generate`` says it): a build whose PL top is not
#: generated (the small builds')
SUBLAYER_NOT_GENERATED = ("its PL top (the units, the buffers between the stages and their access control), its X, Y "
                          "and weight movers, system.cfg and the manifest are not generated yet, so no xclbin can be "
                          "built from this folder")
#: the folder of a generated sublayer's PL top (the engine's normalizer channels stay in ``pl/``)
SUBLAYER_PL_DIR = "pl_sublayer"


def generate_sublayer(build: Any, board: str, out: Path) -> list[Path]:
    """Write sublayer build ``build``'s sources into ``out``: ``aie/engine_config.h``, ``aie/graph.h`` (the attention
    pipelines and the projection cascades, :mod:`.gemm_graph`), ``aie/graph.cpp``, ``aie/gemm_<stage>.cc`` (each
    stage's kernels with its build parameters), ``build.json`` (the build, read by ``vckattn hw check OUT``) and
    ``diagram.png`` (:func:`write_sublayer_diagram`); for a build whose PL top is generated
    (:func:`.sublayer_pl.device_sections`) also ``manifest.json``, ``system.cfg``, ``pl/`` (the normalizer channels,
    as an engine's) and ``pl_sublayer/`` (the PL top's Verilog, ``kernel.xml``, ``package_kernel.tcl``). Returns the
    files written. The design-rule check runs first and a build that breaks a rule is refused before anything is
    written (:data:`SUBLAYER_NOT_GENERATED`: what the other builds' folders lack).

    Raises:
        GenerateError: a build that does not place, breaks an AIE rule (DesignRuleError) or an unwritable ``out``.
    """
    from vckattn.hw.design import check, gemm_graph
    from vckattn.hw.design.render import _BANNER, DesignRuleError

    design, placed, gp = build.place()
    graph_h = render_graph_h(design, placed, gp)
    ctx = check.sublayer_context(build, board, check.parse_graph(graph_h))  # the graph about to be written
    bad = [v for _, vs in check.run_rules(ctx) for v in vs]
    if bad:
        raise DesignRuleError(f"{build.name}: fails the design-rule check: {bad[0].rule}: {bad[0].message} (limit "
                              f"{bad[0].limit:g}; {bad[0].source})")
    from vckattn.hw.design.sublayer_build import sublayer_manifest, top_generated
    from vckattn.hw.design.system_cfg import system_cfg

    manifest = sublayer_manifest(build, board) if top_generated(build) else None
    out = Path(out)
    written: list[Path] = []
    try:
        _write(out / "aie" / "engine_config.h", render_config(design, build.max_seq, HEAD_DIMS), written)
        _write(out / "aie" / "graph.h", graph_h, written)
        _write(out / "aie" / "graph.cpp", render_graph_cpp(design), written)
        for st in gp.stages:
            banner = _BANNER.format(what=f"the {st.name} stage's GEMM kernels")
            _write(out / "aie" / st.source, gemm_graph.render_source(st, banner), written)
        _write(out / "build.json", json.dumps({"board": board, "sublayer": build.to_json()}, indent=2) + "\n",
               written)
        write_sublayer_diagram(build, placed, gp, out / "diagram.png")
        written.append(out / "diagram.png")
        if manifest is not None:
            _write(out / "manifest.json", json.dumps(manifest, indent=2) + "\n", written)
            _write(out / "system.cfg", system_cfg(manifest, f"{build.name}/manifest.json",
                                                  f"vckattn hw generate {build.name} --out <folder>"), written)
            written += _write_pl(manifest, design, out / "pl")
            written += _write_sublayer_pl(manifest, build, out / SUBLAYER_PL_DIR)
    except OSError as exc:
        raise GenerateError(f"{out}: cannot write ({exc.strerror or exc})") from None
    return written


def _write_sublayer_pl(manifest: dict, build: Any, folder: Path) -> list[Path]:
    """The sublayer PL top's Verilog (core and Vitis wrapper), ``kernel.xml`` and ``package_kernel.tcl``."""
    from vckattn.hw.design.sublayer_build import build_top_plan
    from vckattn.hw.design.sublayer_pl import SUBLAYER_PL
    from vckattn.hw.pl import vitis_kernel
    from vckattn.hw.pl.verilog import generate_verilog

    folder.mkdir(parents=True, exist_ok=True)
    core_name = f"{SUBLAYER_PL}_core"
    top = build_top_plan(build).top()
    ports = vitis_kernel.wrapper_ports(manifest, SUBLAYER_PL, top)
    core = Path(generate_verilog(top, core_name, folder))
    wrapper = folder / f"{SUBLAYER_PL}.v"
    wrapper.write_text(vitis_kernel.wrapper_verilog(SUBLAYER_PL, core_name, ports, "vckattn hw generate"),
                       encoding="utf-8")
    xml = folder / "kernel.xml"
    xml.write_text(vitis_kernel.kernel_xml(manifest, SUBLAYER_PL), encoding="utf-8")
    tcl = folder / "package_kernel.tcl"
    tcl.write_text(vitis_kernel.package_tcl(manifest, SUBLAYER_PL, [wrapper.name, core.name],
                                            f"{manifest['name']} (sublayer PL top)"), encoding="utf-8")
    return [wrapper, core, xml, tcl]


def write_sublayer_diagram(build: Any, placed: Layout, gemm: Any, path: Path) -> None:
    """One picture of a sublayer build's AIE graph: every kernel on the 50 x 8 array by its part (the Q/K/V and W_O
    cascades, the attention pipelines), and the PLIOs each interface column carries in and out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap

    parts = {"attention pipeline": 0, "Q/K/V cascade": 1, "W_O cascade": 2}
    grid = np.full((lay.ARRAY_ROWS, lay.ARRAY_COLUMNS), np.nan)
    for (c, r) in placed.tiles.values():
        grid[r, c] = parts["attention pipeline"]
    for name, (c, r) in gemm.tiles.items():
        grid[r, c] = parts["Q/K/V cascade" if name.startswith("qkv") else "W_O cascade"]
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(14, 6.5), gridspec_kw={"height_ratios": [3, 1.2]})
    cmap = ListedColormap(["#4c72b0", "#dd8452", "#55a868"])
    ax.imshow(grid, origin="lower", cmap=cmap, vmin=-0.5, vmax=2.5, aspect="auto",
              extent=(-0.5, lay.ARRAY_COLUMNS - 0.5, -0.5, lay.ARRAY_ROWS - 0.5))
    for label, v in parts.items():
        ax.plot([], [], "s", color=cmap(v), label=label)
    ax.legend(fontsize=7, loc="upper right", ncol=3)
    ax.set_xticks(range(0, lay.ARRAY_COLUMNS, 5))
    ax.set_yticks(range(lay.ARRAY_ROWS))
    ax.set_xlabel("AIE column")
    ax.set_ylabel("AIE row")
    e = build.engine
    ax.set_title(f"{build.name}: {build.family} sublayer, d_model {build.d_model}, S <= {build.max_seq}; "
                 f"{build.qkv_cascades} Q/K/V + {build.o_cascades} W_O GEMM cascades of {build.qkv.kernels} kernels, "
                 f"{e['pipelines']} attention pipelines of {e['qk_kernels']} + {e['pv_kernels']} kernels "
                 f"(+ requantizer); {len(placed.tiles) + len(gemm.tiles)} of 400 tiles", fontsize=9)
    ins, outs = np.zeros(lay.ARRAY_COLUMNS), np.zeros(lay.ARRAY_COLUMNS)
    for name, d in placed.plios():
        (ins if d == "in" else outs)[placed.plio_columns[name]] += 1
    for st in gemm.stages:
        for name, d, _, _ in st.plios():
            (ins if d == "in" else outs)[gemm.columns[name]] += 1
    _plio_panel(fig, bx, ins, outs, f"PL->AIE PLIOs ({int(ins.sum())}; 4 a column at most)",
                f"AIE->PL PLIOs ({int(outs.sum())}; 3 a column at most)", path)


def _write_pl(manifest: dict, design: Any, folder: Path) -> list[Path]:
    """The PL top's Verilog (``vckattn.hw.pl.engine``), ``kernel.xml`` and ``package_kernel.tcl``."""
    try:
        from vckattn.hw.pl.engine import generate_engine_verilog
    except ImportError as exc:
        raise GenerateError(f"cannot write the PL top: vckattn.hw.pl.engine.generate_engine_verilog is not "
                            f"available ({exc})") from None
    from vckattn.hw.pl import vitis_kernel
    from vckattn.hw.pl.engine import EnginePL, lut_product_of
    from vckattn.hw.pl.engine_online import OnlineBuild

    folder.mkdir(parents=True, exist_ok=True)
    core_name = f"{PL_TOP}_core"
    channels = design.pipelines * design.score_plios
    eng = manifest["engine"]
    online = OnlineBuild(design.q_rows, design.qk_kernels, eng["slice_keys"], design.lanes_online_softmax) \
        if design.lanes_online_softmax else None
    lut = lut_product_of(design.swiftmax_products)
    core = generate_engine_verilog(folder, channels, design.lanes_swiftmax, design.score_bits, name=core_name,
                                   online=online, lut_product=lut)
    ports = vitis_kernel.wrapper_ports(manifest, PL_TOP, EnginePL(channels, design.lanes_swiftmax, design.score_bits,
                                                                  online, lut))
    top = folder / f"{PL_TOP}.v"
    top.write_text(vitis_kernel.wrapper_verilog(PL_TOP, core_name, ports, "vckattn hw generate"), encoding="utf-8")
    files = [top, Path(core)]
    verilog = [p.name for p in files]
    xml = folder / "kernel.xml"
    xml.write_text(vitis_kernel.kernel_xml(manifest, PL_TOP), encoding="utf-8")
    tcl = folder / "package_kernel.tcl"
    tcl.write_text(vitis_kernel.package_tcl(manifest, PL_TOP, verilog, f"{manifest['name']} (engine)"),
                   encoding="utf-8")
    return [*files, xml, tcl]


def build_design(name: str, search: bool = False) -> Any:
    """The design point of committed engine build ``name`` (:data:`ENGINE_BUILDS`). A ``best`` build is its
    committed design file (``bitstreams/engine_designs/<name>.design.json``), or with ``search`` the result of
    :func:`best_design` (the search and its simulations: minutes)."""
    from vckattn.hw.perf.model import design_from_json

    board, spec = ENGINE_BUILDS[name]
    if spec != "best":
        return design_from_json(dict(spec))
    return best_design(board) if search else design_from_file(BITSTREAMS / DESIGNS_DIR / f"{name}.design.json")


def committed_bitstreams(folder: Path = BITSTREAMS, search: bool = False,
                         names: tuple[str, ...] | None = None) -> dict[Path, str]:
    """Every committed engine file (or those of ``names``): ``<name>.json`` (manifest) and
    ``engine_designs/<name>.design.json``, and the sublayer builds' manifests (:mod:`.sublayer_build`: the small
    builds and the full-size builds whose PL top is generated) -> its text
    (``search``: the best designs searched again,
    :func:`build_design`)."""
    out: dict[Path, str] = {}
    for name, (board, _) in ENGINE_BUILDS.items():
        if names is not None and name not in names:
            continue
        d = build_design(name, search)
        max_seq = d.max_seq or BERT_SEQ
        m = engine_manifest(d, board, name, max_seq)
        out[folder / f"{name}.json"] = json.dumps(m, indent=2) + "\n"
        out[folder / DESIGNS_DIR / f"{name}.design.json"] = json.dumps(replace(d, max_seq=max_seq).to_json(),
                                                                       indent=2) + "\n"
    from vckattn.hw.design.sublayer_build import FULL_SIZE_BUILDS, SUBLAYER_BUILDS, sublayer_manifest, top_generated

    for name, build in SUBLAYER_BUILDS.items():
        if names is None or name in names:
            out[folder / f"{name}.json"] = json.dumps(sublayer_manifest(build), indent=2) + "\n"
    for name, build in FULL_SIZE_BUILDS.items():  # those whose PL top is generated
        if (names is None or name in names) and top_generated(build):
            out[folder / f"{name}.json"] = json.dumps(sublayer_manifest(build), indent=2) + "\n"
    return out


def write_bitstreams(folder: Path = BITSTREAMS, names: tuple[str, ...] | None = None) -> list[Path]:
    """(Re)write the committed engine manifests and design points (or those of ``names``); returns the files
    written."""
    written = []
    for path, text in committed_bitstreams(folder, search=True, names=names).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


__all__ = ["BITSTREAMS", "DESIGNS_DIR", "ENGINE_BUILDS", "SUBLAYER_NOT_GENERATED", "best_design", "build_design",
           "committed_bitstreams", "generate", "generate_sublayer", "modeled", "write_bitstreams", "write_diagram",
           "write_sublayer_diagram"]

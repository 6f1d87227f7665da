"""The engine's build sources from a design point (``hw/ENGINE.md``; ``vckattn hw generate``).

:func:`generate` turns a :class:`~vckattn.hw.perf.model.Design` (the explorer's pipelines, kernels per
pipeline, tile shape, score width, lanes, PL clock) into a build folder:

========================  =========================================================================
``aie/engine_config.h``   ``VCKATTN_ENGINE_*`` build parameters of the kernels (``hw/aie/engine/``)
``aie/graph.h``, ``.cpp``  the ADF graph: per pipeline ``k`` ``qk_slice<j>`` (qk_in broadcast, scores
                          through ``pktmerge<k>`` to s_out), ``k`` P·V kernels (v_in broadcast, P from
                          p_in through ``pktsplit<k>``, partial O along the cascade, O to o_out), with
                          placement constraints (:mod:`.layout`)
``system.cfg``            the Vitis link configuration (``nk=``, ``sc=``, ``[clock]``)
``pl/engine_pl.v``        the PL top (``vckattn.hw.pl.engine.generate_engine_verilog``), its
                          ``kernel.xml`` and ``package_kernel.tcl``
``manifest.json``         the bitstream manifest with its ``engine`` section
``design.json``           the design point (``max_seq`` set to the build's)
``modeled.json``          :func:`~vckattn.hw.perf.model.evaluate` on BERT-base, S = 512, batch 8
``diagram.png``           the design point: kernels on the array, PLIOs per column
========================  =========================================================================

The generated graph names two constants of ``hw/aie/engine/engine_kernels.h``:
``vckattn_engine::QK_WORKSPACE_BYTES`` and ``vckattn_engine::PV_WORKSPACE_BYTES`` (the kernels'
per-instance workspaces, which the compiler places on the heap). Nothing here is compiled (no AMD
tools); ``tests/test_engine_generate.py`` checks the sources' structure.

The committed engine manifests (``bitstreams/<name>.json`` and ``bitstreams/engine_designs/<name>.design.json`` for
:data:`ENGINE_BUILDS`) are regenerated with ``python -m vckattn.hw.engine.generate --write-bitstreams``
(``--check``: exit 1 when stale).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from vckattn.golden.errors import UserError

from . import layout as lay
from .layout import Layout, plio_name, pv_name, qk_name

BITSTREAMS = Path(__file__).resolve().parents[2] / "bitstreams"
#: the committed design points, beside the manifests but out of ``bitstreams/*.json`` (read as manifests)
DESIGNS_DIR = "engine_designs"
#: the graph instance's name (the host opens it by this name)
GRAPH_NAME = "engine_graph"
PL_TOP = "engine_pl"
#: head sizes a build serves by default; MAX_D is their maximum (at most :data:`MAX_D`)
HEAD_DIMS = (32, 64)
MAX_D = 64
#: the workload the committed engines are chosen for and modeled on: BERT-base attention, S = 512, batch 8
BERT_SEQ, BERT_BATCH = 512, 8
#: heap bytes on top of a kernel's workspace (its stack and the runtime's own)
HEAP_SLACK_BYTES = 1024
#: runtime ratio of every kernel (above 0.5: one core each)
RUNTIME_RATIO = 0.9

#: the small engine the simulation tests run
SMALL_DESIGN = {"pipelines": 2, "qk_kernels": 2, "pv_kernels": 2, "q_rows": 16, "key_block": 32, "score_bits": 8,
                "plio_bits": 128, "score_plios": 1, "in_plios": 2, "out_plios": 1, "lanes_swiftmax": 2,
                "lanes_online_softmax": 0, "pl_clock_mhz": 250.0, "kv_resident": True, "score_switch": False,
                "o_bits": 32, "host_seconds_per_tile": 0.0, "max_seq": 512, "name": "engine_small"}
#: committed engine manifests: name -> (board, design: "best" = the explorer's best buildable SwiftMax design)
ENGINE_BUILDS: dict[str, tuple[str, str | dict]] = {
    "vck5000_engine": ("vck5000", "best"),
    "vck190_engine": ("vck190", "best"),
    "engine_small": ("vck5000", SMALL_DESIGN),
}


class GenerateError(UserError):
    """A design the engine cannot be built from, or a build folder that cannot be written (one line)."""


# ---------------------------------------------------------------------------------------------- design


def platform_of(board: str) -> str:
    """The Vitis platform of ``board`` (the v1 builds' platform for that board)."""
    from vckattn.hw.manifest import BUILDS

    for b, platform in BUILDS.values():
        if b == board:
            return platform
    raise GenerateError(f"unknown board {board!r}; choose from vck5000, vck190")


def check_design(design: Any, max_seq: int = 512, head_dims: tuple[int, ...] = HEAD_DIMS) -> None:
    """Raise :class:`GenerateError` naming the first field of ``design`` that stream contract v2 cannot build."""
    d = design
    rules = [
        (d.qk_kernels == d.pv_kernels, f"qk_kernels ({d.qk_kernels}) must equal pv_kernels ({d.pv_kernels}): "
                                       "P.V kernel j owns QK^T kernel j's key slice"),
        (d.qk_kernels <= 32, f"qk_kernels {d.qk_kernels} > 32: the packet id (slice) has 5 bits"),
        (d.in_plios == 2, f"in_plios must be 2 (qk_in and v_in), not {d.in_plios}"),
        (d.score_plios == 1, f"score_plios must be 1 (one s_out / p_in pair per pipeline), not {d.score_plios}"),
        (d.out_plios == 1, f"out_plios must be 1 (o_out), not {d.out_plios}"),
        (d.plio_bits == 128, f"plio_bits must be 128, not {d.plio_bits}"),
        (d.score_bits in (8, 16), f"score_bits must be 8 or 16, not {d.score_bits}"),
        (d.o_bits == 32, f"o_bits must be 32 (int32 O records), not {d.o_bits}"),
        (d.kv_resident, "kv_resident must be true (the kernels keep their K/V slices)"),
        (not d.score_switch, "score_switch must be false (the engine has no score switch)"),
        (d.lanes_swiftmax >= 1, "lanes_swiftmax must be >= 1 (the engine normalizes with SwiftMax)"),
        (d.lanes_online_softmax == 0, "lanes_online_softmax must be 0 (the engine builds SwiftMax only)"),
        (d.q_rows % d.lanes_swiftmax == 0 and d.key_block % d.lanes_swiftmax == 0,
         f"q_rows ({d.q_rows}) and key_block ({d.key_block}) must be multiples of lanes_swiftmax "
         f"({d.lanes_swiftmax})"),
        (d.lanes_swiftmax <= 128 // d.score_bits,
         f"lanes_swiftmax {d.lanes_swiftmax} > {128 // d.score_bits} scores a 128-bit beat"),
        (max_seq >= d.key_block and max_seq % d.key_block == 0,
         f"max_seq {max_seq} must be a positive multiple of key_block ({d.key_block})"),
        (d.max_seq is None or d.max_seq == max_seq, f"the design's max_seq {d.max_seq} differs from {max_seq}"),
        (bool(head_dims) and all(16 <= h <= MAX_D and h % 16 == 0 for h in head_dims),
         f"head_dims {list(head_dims)} must be multiples of 16 up to {MAX_D}"),
    ]
    for ok, message in rules:
        if not ok:
            raise GenerateError(f"design: {message}")
    _check_memory(d, max_seq, head_dims)


def _check_memory(d: Any, max_seq: int, head_dims: tuple[int, ...]) -> None:
    """The kernels' workspaces (hw/engine/model.py: workspace_bytes, = sizeof in engine_kernels.h) plus the
    heap slack and the runtime's reserve must fit an AIE tile's data memory."""
    from vckattn.hw.engine.model import EngineParams, workspace_bytes
    from vckattn.hw.perf.model import load_device

    dev = load_device("vck5000")
    p = EngineParams(pipelines=1, kernels=d.qk_kernels, q_rows=d.q_rows, key_block=d.key_block,
                     max_d=max(head_dims), max_keys=max_seq, score_bits=d.score_bits)
    for kernel, size in workspace_bytes(p).items():
        need = size + HEAP_SLACK_BYTES + dev.tile_memory_reserve_bytes
        if need > dev.tile_memory_bytes:
            raise GenerateError(f"design: {kernel}'s workspace ({size} B) + heap slack ({HEAP_SLACK_BYTES} B) + "
                                f"runtime reserve ({dev.tile_memory_reserve_bytes} B) = {need} B does not fit the "
                                f"{dev.tile_memory_bytes} B of an AIE tile at max_seq {max_seq}: use more kernels per "
                                "pipeline or a shorter max_seq")


def design_from_file(path: Path) -> Any:
    """A design point from a JSON file: a ``Design`` object or a JSON holding one under ``design`` (as
    ``perf --json``), or ``best.swiftmax.design`` (as ``perf explore --json``)."""
    from vckattn.hw.perf.model import design_from_json

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise GenerateError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise GenerateError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("best"), dict):
        data = data["best"].get("swiftmax", {}).get("design", data)
    elif isinstance(data, dict) and isinstance(data.get("design"), dict):
        data = data["design"]
    if not isinstance(data, dict):
        raise GenerateError(f"{path}: not a design point (a JSON object of hw/perf/model.py: Design fields)")
    try:
        return design_from_json(data)
    except (TypeError, ValueError) as exc:
        raise GenerateError(f"{path}: {exc}") from None


def bert_workload(seq: int = BERT_SEQ) -> Any:
    """BERT-base attention (12 heads x 64, 12 SwiftMax layers), S = 512 (or ``seq``), batch 8: the engines'
    workload."""
    from vckattn.hw.perf.model import BERT_BASE, workload_from_flags

    return workload_from_flags(heads=BERT_BASE["heads"], d_head=BERT_BASE["d_head"], seq=seq, batch=BERT_BATCH,
                               layers=BERT_BASE["layers"], normalizer="swiftmax", name="bert-base")


def buildable(design: Any) -> bool:
    """Whether stream contract v2 builds ``design`` (:func:`check_design` with the defaults passes)."""
    try:
        check_design(replace(design, max_seq=None))
    except GenerateError:
        return False
    return lay.max_pipelines(design.qk_kernels) >= design.pipelines


def best_design(board: str) -> Any:
    """The explorer's best SwiftMax design for :func:`bert_workload` on ``board`` among the designs this
    generator builds (:func:`buildable`): :func:`vckattn.hw.perf.explore.search`'s rule (fastest; within
    its ``TIE`` the fewest LUTs) over its candidates. Where the explorer's overall best is buildable (the
    VCK5000's is) the two are the same design."""
    from vckattn.hw.perf import explore, model

    dev = model.load_device(board)
    w = bert_workload()
    clock = float(dev.pl_clock_mhz["model_default"])
    probe = model.Design(pl_clock_mhz=clock)
    budget = {k: v for k, v in model.resources_available(probe, dev).items() if k != "aie_kernel_memory_bytes"}
    budget["lut"] *= 1 - explore.LUT_HEADROOM
    found = []
    for cand in explore.candidates(w, dev, clock):
        if not buildable(cand):
            continue
        c = explore._best_for(w, cand, dev, budget)
        if c is not None and buildable(c.design):
            found.append(c)
    if not found:
        raise GenerateError(f"no buildable SwiftMax design fits the {board}")
    fastest = min(c.seconds for c in found)
    near = [c for c in found if c.seconds <= fastest * (1 + explore.TIE)]
    best = min(near, key=lambda c: (c.lut, c.seconds)).design
    return replace(best, name=f"best SwiftMax engine on the {board} for BERT-base S={BERT_SEQ} batch {BERT_BATCH}")


# ---------------------------------------------------------------------------------------------- AIE sources


_BANNER = "// GENERATED by vckattn.hw.engine.generate ({what}) -- do not edit; regenerate with `vckattn hw generate`."


def render_config(design: Any, max_seq: int, head_dims: tuple[int, ...]) -> str:
    """``engine_config.h``: the kernels' build parameters (``hw/aie/engine/engine_kernels.h`` reads them)."""
    values = {"KERNELS": design.qk_kernels, "Q_ROWS": design.q_rows, "KEY_BLOCK": design.key_block,
              "MAX_D": max(head_dims), "MAX_KEYS": max_seq, "SCORE_BITS": design.score_bits}
    lines = [_BANNER.format(what="engine build parameters"), "// Stream contract v2 (hw/ENGINE.md).",
             "#ifndef VCKATTN_ENGINE_CONFIG_H", "#define VCKATTN_ENGINE_CONFIG_H", ""]
    lines += [f"#define VCKATTN_ENGINE_{k} {v}" for k, v in values.items()]
    lines += ["", f"// {design.pipelines} pipelines (the graph's, not the kernels' parameter)",
              f"#define VCKATTN_ENGINE_PIPELINES {design.pipelines}", "", "#endif", ""]
    return "\n".join(lines)


def _pv_function(j: int, k: int) -> str:
    if k == 1:
        return "pv_slice_only"
    if j == 0:
        return "pv_slice_first<0>"
    return f"pv_slice_last<{j}>" if j == k - 1 else f"pv_slice_mid<{j}>"


def render_graph_h(design: Any, placed: Layout) -> str:
    """``graph.h``: the ADF graph of ``design``'s pipelines with ``placed``'s locations."""
    k, n = design.qk_kernels, design.pipelines
    mhz = f"{design.pl_clock_mhz:g}"
    out = [
        _BANNER.format(what="ADF graph of the engine"),
        f"// Design: {n} pipelines x ({k} qk_slice + {k} pv_slice kernels), Q_ROWS {design.q_rows}, "
        f"KEY_BLOCK {design.key_block}, int{design.score_bits} scores; PLIOs 128 bit at {mhz} MHz.",
        "// Per pipeline i (hw/ENGINE.md):",
        "//   p<i>_qk_in --broadcast--> qk_slice<0..k-1> --pktmerge<k>--> p<i>_s_out   (scores to the PL)",
        "//   p<i>_p_in  --pktsplit<k>--> pv j (P packets by slice)  <--broadcast-- p<i>_v_in",
        "//   pv 0 --cascade--> ... --> pv k-1 --> p<i>_o_out                          (O records to the PL)",
        "// Placement (hw/engine/layout.py): a pipeline's P.V chain on consecutive tiles of one row in the",
        "// row's cascade direction, its QK^T kernels on the row above; PLIOs on nearby PL interface columns.",
        "#ifndef VCKATTN_ENGINE_GRAPH_H",
        "#define VCKATTN_ENGINE_GRAPH_H",
        "",
        "#include <adf.h>",
        "",
        '#include "engine_config.h"',
        '#include "kernels.h"         // hw/aie/engine/kernels.h: the kernel signatures',
        '#include "engine_kernels.h"  // vckattn_engine::QK_WORKSPACE_BYTES, PV_WORKSPACE_BYTES',
        "",
        "class EngineGraph : public adf::graph {",
        "public:",
    ]
    for i in range(n):
        out.append(f"    // pipeline {i}")
        out.append("    adf::kernel " + ", ".join([qk_name(i, j) for j in range(k)] + [pv_name(i, j) for j in range(k)])
                   + ";")
        out.append(f"    adf::pktmerge<{k}> p{i}_merge;")
        out.append(f"    adf::pktsplit<{k}> p{i}_split;")
        out.append(f"    adf::input_plio {plio_name(i, 'qk_in')}, {plio_name(i, 'v_in')}, {plio_name(i, 'p_in')};")
        out.append(f"    adf::output_plio {plio_name(i, 's_out')}, {plio_name(i, 'o_out')};")
    out += ["", "    EngineGraph() {"]
    heap_qk = f"vckattn_engine::QK_WORKSPACE_BYTES + {HEAP_SLACK_BYTES}"
    heap_pv = f"vckattn_engine::PV_WORKSPACE_BYTES + {HEAP_SLACK_BYTES}"
    for i in range(n):
        b = []
        b.append(f"        // ---- pipeline {i}")
        for suffix, direction in lay.PIPELINE_PLIOS:
            name = plio_name(i, suffix)
            kind = "input_plio" if direction == "in" else "output_plio"
            b.append(f'        {name} = adf::{kind}::create("{name}", adf::plio_128_bits, "data/{name}.txt", {mhz});')
            b.append(f"        adf::location<adf::PLIO>({name}) = adf::shim({placed.plio_columns[name]});")
        b.append(f"        p{i}_merge = adf::pktmerge<{k}>::create();")
        b.append(f"        p{i}_split = adf::pktsplit<{k}>::create();")
        for j in range(k):
            q = qk_name(i, j)
            c, r = placed.tiles[q]
            b.append(f"        {q} = adf::kernel::create(qk_slice<{j}>);")
            b.append(f'        adf::source({q}) = "qk_slice.cc";')
            b.append(f"        adf::runtime<adf::ratio>({q}) = {RUNTIME_RATIO};")
            b.append(f"        adf::heap_size({q}) = {heap_qk};")
            b.append(f"        adf::location<adf::kernel>({q}) = adf::tile({c}, {r});")
            b.append(f"        adf::connect<adf::stream>({plio_name(i, 'qk_in')}.out[0], {q}.in[0]);")
            b.append(f"        adf::connect<>({q}.out[0], p{i}_merge.in[{j}]);")
        b.append(f"        adf::connect<adf::pktstream>(p{i}_merge.out[0], {plio_name(i, 's_out')}.in[0]);")
        b.append(f"        adf::connect<adf::pktstream>({plio_name(i, 'p_in')}.out[0], p{i}_split.in[0]);")
        for j in range(k):
            p = pv_name(i, j)
            c, r = placed.tiles[p]
            b.append(f"        {p} = adf::kernel::create({_pv_function(j, k)});")
            b.append(f'        adf::source({p}) = "pv_slice.cc";')
            b.append(f"        adf::runtime<adf::ratio>({p}) = {RUNTIME_RATIO};")
            b.append(f"        adf::heap_size({p}) = {heap_pv};")
            b.append(f"        adf::location<adf::kernel>({p}) = adf::tile({c}, {r});")
            b.append(f"        adf::connect<adf::stream>({plio_name(i, 'v_in')}.out[0], {p}.in[0]);")
            b.append(f"        adf::connect<>(p{i}_split.out[{j}], {p}.in[1]);")
            if j > 0:
                b.append(f"        adf::connect<adf::cascade>({pv_name(i, j - 1)}.out[0], {p}.in[2]);")
        b.append(f"        adf::connect<adf::stream>({pv_name(i, k - 1)}.out[0], {plio_name(i, 'o_out')}.in[0]);")
        out += b
    out += ["    }", "};", "", "#endif", ""]
    return "\n".join(out)


def render_graph_cpp(design: Any) -> str:
    """``graph.cpp``: the graph instance (:data:`GRAPH_NAME`) and the simulators' driver."""
    return "\n".join([
        _BANNER.format(what="the engine graph's aiecompiler entry point"),
        "//   aiecompiler --target=hw --platform=<xpfm> --include=<this folder> --include=hw/aie/engine",
        "//               --include=hw/aie --include=hw/aie/generated <this folder>/graph.cpp",
        '#include "graph.h"',
        "",
        f"EngineGraph {GRAPH_NAME};",
        "",
        "#if defined(__AIESIM__) || defined(__X86SIM__)",
        "// Simulation driver: every kernel runs VCKATTN_AIESIM_CALLS calls (one command or step each) on",
        "// the data files data/p<i>_<plio>.txt.",
        "#ifndef VCKATTN_AIESIM_CALLS",
        "#define VCKATTN_AIESIM_CALLS 4",
        "#endif",
        "",
        "int main(int argc, char** argv) {",
        "    (void)argc;",
        "    (void)argv;",
        f"    {GRAPH_NAME}.init();",
        f"    {GRAPH_NAME}.run(VCKATTN_AIESIM_CALLS);",
        f"    {GRAPH_NAME}.end();",
        "    return 0;",
        "}",
        "#endif",
        "",
    ])


# ---------------------------------------------------------------------------------------------- manifest


def _port(name: str, protocol: str, direction: str | None = None, bits: int | None = None) -> dict:
    p: dict[str, Any] = {"name": name, "protocol": protocol}
    if direction:
        p["direction"] = direction
    if bits:
        p["tdata_bits"] = bits
    return p


def engine_manifest(design: Any, board: str, name: str, max_seq: int = 512,
                    head_dims: tuple[int, ...] = HEAD_DIMS) -> dict:
    """The bitstream manifest of the engine built from ``design`` on ``board`` (validated by
    :func:`vckattn.hw.manifest.validate_manifest`)."""
    from vckattn.golden.engine import engine_format
    from vckattn.golden.swiftmax_int import SWIFTMAX_ID, swiftmax_regmap
    from vckattn.hw import manifest as mf

    check_design(design, max_seq, head_dims)
    n, k, bits, lanes = design.pipelines, design.qk_kernels, design.score_bits, design.lanes_swiftmax
    placed = lay.layout(n, k)
    fmt = engine_format(bits)
    cus = {"mm2s_engine": [f"mm2s_engine_{s}_{i}" for i in range(n) for s in ("qk", "v")],
           "s2mm_engine": [f"s2mm_engine_{i}" for i in range(n)]}
    kernels = [
        {"name": "mm2s_engine", "kind": "hls", "compute_units": cus["mm2s_engine"],
         "doc": "two per pipeline (qk, v): a command list from DDR to the AIE, each header beat followed by its "
                "payload gathered from Q (TILE) or K/V (LOAD_*) at the descriptor's offset (hw/hls/mm2s_engine.cpp, "
                "hw/ENGINE.md)",
         "ports": [_port("cmds", "m_axi"), _port("n_cmds", "scalar"), _port("tile_src", "m_axi"),
                   _port("load_src", "m_axi"), _port("q_rows", "scalar"), _port("key_block", "scalar"),
                   _port("out", "axis", "out", 128)],
         "registers": []},
        {"name": PL_TOP, "kind": "rtl", "normalizer": "swiftmax", "id": SWIFTMAX_ID,
         "doc": f"SwiftMax on the score packets of every pipeline ({lanes} lanes each, int{bits} scores, the mask "
                "sentinel in-band): s<i> from p<i>_s_out, P packets on p<i> to p<i>_p_in; one register file shared by "
                "the pipelines, b_beta/c_out per head (the packet header's head) with a read port per pipeline "
                "(s_axil, s_axi_control in the Vitis wrapper)",
         "ports": [p for i in range(n) for p in (_port(f"s{i}", "axis", "in", 128),
                                                 _port(f"p{i}", "axis", "out", 128))]
         + [_port("s_axil", "axi4lite", "in")],
         "registers": mf._regs(swiftmax_regmap(fmt, read_ports=n))},
        {"name": "s2mm_engine", "kind": "hls", "compute_units": cus["s2mm_engine"],
         "doc": "per pipeline: O records from p<i>_o_out -> requantize (rq_mult, rq_shift) -> A of tile t into slot t "
                "of the shared A buffer, the RESULT header (with the pipeline index) into the pipeline's done log "
                "(hw/hls/s2mm_engine.cpp)",
         "ports": [_port("o_in", "axis", "in", 128), _port("a_out", "m_axi"), _port("done", "m_axi"),
                   _port("n_records", "scalar"), _port("n_slots", "scalar"), _port("pipeline", "scalar"),
                   _port("rq_mult", "scalar"), _port("rq_shift", "scalar")],
         "registers": []},
    ]
    links = []
    for i in range(n):
        links += [(f"mm2s_engine_qk_{i}.out", f"ai_engine_0.{plio_name(i, 'qk_in')}"),
                  (f"mm2s_engine_v_{i}.out", f"ai_engine_0.{plio_name(i, 'v_in')}"),
                  (f"ai_engine_0.{plio_name(i, 's_out')}", f"{PL_TOP}.s{i}"),
                  (f"{PL_TOP}.p{i}", f"ai_engine_0.{plio_name(i, 'p_in')}"),
                  (f"ai_engine_0.{plio_name(i, 'o_out')}", f"s2mm_engine_{i}.o_in")]
    streams = {"doc": "hw/ENGINE.md", "version": 2}
    dj = replace(design, max_seq=max_seq).to_json()
    return {
        "schema": mf.SCHEMA_NAME,
        "schema_version": mf.SCHEMA_VERSION,
        "name": name,
        "board": board,
        "platform": platform_of(board),
        "tools": {"vitis": "2022.2", "vitis_hls": "2022.2", "vivado": "2022.2", "aiecompiler": "2022.2",
                  "xrt": "2022.2"},
        "xclbin": {"file": f"{name}.xclbin", "uuid": None},
        "tile": {"q_rows": design.q_rows, "key_block": design.key_block, "lanes": lanes,
                 "head_dims": list(head_dims)},
        "max_seq_len": max_seq,
        "normalizers": ["swiftmax"],
        "formats": {"swiftmax": asdict(fmt)},
        "kernels": kernels,
        "graph": {"name": GRAPH_NAME,
                  "kernels": [f(i, j) for i in range(n) for f in (qk_name, pv_name) for j in range(k)],
                  "aie_tile": {"m": design.q_rows, "k": max(head_dims), "n": design.key_block},
                  "plios": [{"name": p, "direction": d, "bits": 128} for p, d in placed.plios()]},
        "clocks_mhz": {"pl": design.pl_clock_mhz, "aie": mf.AIE_CLOCK_MHZ},
        "streams": streams,
        "connectivity": [{"from": a, "to": b} for a, b in links],
        "timeout_ms": 10_000,
        "engine": {"pipelines": n, "kernels_per_pipeline": k, "score_bits": bits, "lanes": lanes, "design": dj,
                   "streams": dict(streams), "pl_top": PL_TOP},
    }


# ---------------------------------------------------------------------------------------------- model, diagram


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
        kind = "Q" if "_qk" in name else "P"
        ax.text(c, r, f"{kind}{name[name.rindex('k' if kind == 'Q' else 'v') + 1:]}", ha="center", va="center",
                fontsize=5)
    for i in range(n):
        row = [placed.tiles[pv_name(i, j)] for j in range(k)]
        xs = [c for c, _ in row]
        ax.annotate("", xy=(xs[-1], row[0][1] - 0.3), xytext=(xs[0], row[0][1] - 0.3),
                    arrowprops={"arrowstyle": "->", "lw": 0.6})
    ax.set_xticks(range(0, lay.ARRAY_COLUMNS, 5))
    ax.set_yticks(range(lay.ARRAY_ROWS))
    ax.set_xlabel("AIE column")
    ax.set_ylabel("AIE row")
    tops = perf.get("tops")
    ax.set_title(f"{n} pipelines x ({k} QK^T 'Q' + {k} P.V 'P' kernels, cascade ->), Q_ROWS {design.q_rows}, "
                 f"KEY_BLOCK {design.key_block}, int{design.score_bits} scores, {design.lanes_swiftmax} SwiftMax "
                 f"lanes/pipeline, PL {design.pl_clock_mhz:g} MHz" + (f"; modeled {tops:.1f} TOPS" if tops else ""),
                 fontsize=9)
    cols = np.arange(lay.ARRAY_COLUMNS)
    ins = np.zeros(lay.ARRAY_COLUMNS)
    outs = np.zeros(lay.ARRAY_COLUMNS)
    for name, d in placed.plios():
        (ins if d == "in" else outs)[placed.plio_columns[name]] += 1
    bx.bar(cols - 0.2, ins, 0.4, label="PL->AIE PLIOs (qk_in, v_in, p_in)")
    bx.bar(cols + 0.2, outs, 0.4, label="AIE->PL PLIOs (s_out, o_out)")
    bx.set_xlim(-0.5, lay.ARRAY_COLUMNS - 0.5)
    bx.set_xlabel("interface column (128-bit PLIOs)")
    bx.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- generate


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
        GenerateError: a design contract v2 cannot build, one that does not fit the array, an unwritable
            ``out``, or the PL generator (``vckattn.hw.pl.engine``) missing.
    """
    from vckattn.hw.manifest import validate_manifest
    from vckattn.hw.vitis.system_cfg import system_cfg

    head_dims = tuple(int(h) for h in head_dims)
    name = name or f"{board}_engine"
    check_design(design, max_seq, head_dims)
    try:
        placed = lay.layout(design.pipelines, design.qk_kernels)
    except lay.LayoutError as exc:
        raise GenerateError(f"design: {exc}") from None
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


def _write_pl(manifest: dict, design: Any, folder: Path) -> list[Path]:
    """The PL top's Verilog (``vckattn.hw.pl.engine``), ``kernel.xml`` and ``package_kernel.tcl``."""
    try:
        from vckattn.hw.pl.engine import generate_engine_verilog
    except ImportError as exc:
        raise GenerateError(f"cannot write the PL top: vckattn.hw.pl.engine.generate_engine_verilog is not "
                            f"available ({exc})") from None
    from vckattn.hw.pl import vitis_kernel
    from vckattn.hw.pl.engine import EnginePL

    folder.mkdir(parents=True, exist_ok=True)
    core_name = f"{PL_TOP}_core"
    core = generate_engine_verilog(folder, design.pipelines, design.lanes_swiftmax, design.score_bits, name=core_name)
    ports = vitis_kernel.wrapper_ports(manifest, PL_TOP,
                                       EnginePL(design.pipelines, design.lanes_swiftmax, design.score_bits))
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


# ---------------------------------------------------------------------------------------------- committed


def build_design(name: str) -> Any:
    """The design point of committed engine build ``name`` (:data:`ENGINE_BUILDS`)."""
    from vckattn.hw.perf.model import design_from_json

    board, spec = ENGINE_BUILDS[name]
    return best_design(board) if spec == "best" else design_from_json(dict(spec))


def committed_bitstreams(folder: Path = BITSTREAMS) -> dict[Path, str]:
    """Every committed engine file: ``<name>.json`` (manifest) and ``engine_designs/<name>.design.json`` -> its
    text."""
    out: dict[Path, str] = {}
    for name, (board, _) in ENGINE_BUILDS.items():
        d = build_design(name)
        max_seq = d.max_seq or BERT_SEQ
        m = engine_manifest(d, board, name, max_seq)
        out[folder / f"{name}.json"] = json.dumps(m, indent=2) + "\n"
        out[folder / DESIGNS_DIR / f"{name}.design.json"] = json.dumps(replace(d, max_seq=max_seq).to_json(),
                                                                       indent=2) + "\n"
    return out


def write_bitstreams(folder: Path = BITSTREAMS) -> list[Path]:
    """(Re)write the committed engine manifests and design points; returns the files written."""
    written = []
    for path, text in committed_bitstreams(folder).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m vckattn.hw.engine.generate --write-bitstreams | --check``."""
    ap = argparse.ArgumentParser(prog="python -m vckattn.hw.engine.generate",
                                 description="Regenerate the committed engine manifests (bitstreams/*engine*).")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write-bitstreams", action="store_true", help="write bitstreams/<engine>.json and its design")
    g.add_argument("--check", action="store_true", help="exit 1 if a committed file is stale")
    args = ap.parse_args(argv)
    if args.check:
        stale = [p for p, t in committed_bitstreams().items() if not p.is_file() or p.read_text() != t]
        for p in stale:
            print(f"stale: {p} (python -m vckattn.hw.engine.generate --write-bitstreams)", file=sys.stderr)
        return 1 if stale else 0
    for p in write_bitstreams():
        print(f"wrote {p}")
    return 0


__all__ = ["BITSTREAMS", "ENGINE_BUILDS", "GRAPH_NAME", "GenerateError", "HEAD_DIMS", "PL_TOP", "SMALL_DESIGN",
           "best_design", "bert_workload", "build_design", "buildable", "check_design", "committed_bitstreams",
           "design_from_file", "engine_manifest", "generate", "modeled", "render_config", "render_graph_cpp",
           "render_graph_h", "write_bitstreams", "write_diagram"]

if __name__ == "__main__":
    sys.exit(main())

"""A design's build sources, rendered as text (``hw/ENGINE.md``): the kernels' build parameters
(``engine_config.h``), the ADF graph (``graph.h``, ``graph.cpp``) and the bitstream manifest, with the checks stream
contract v3 makes of a design. :mod:`.generate` writes them to a build folder; :mod:`.check` and the graph
simulation read them back.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from vckattn.golden.errors import EXIT_INPUT, UserError
from vckattn.hw.design import layout as lay
from vckattn.hw.design.layout import Layout, plio_name, pv_name, qk_name, rq_name

#: the graph instance's name (the host opens it by this name)
GRAPH_NAME = "engine_graph"


PL_TOP = "engine_pl"


#: the stream contract the generated engines follow (hw/ENGINE.md)
STREAMS_VERSION = 3


#: head sizes a build serves by default; MAX_D is their maximum (at most :data:`MAX_D`)
HEAD_DIMS = (32, 64)


MAX_D = 64


#: the workload the committed engines are chosen for and modeled on: BERT-base attention, S = 512, batch 8
BERT_SEQ, BERT_BATCH = 512, 8


#: runtime ratio of every kernel (above 0.5: one core each)
RUNTIME_RATIO = 0.9


#: the small engine the simulation tests run (2 pipelines x 2 + 2 kernels, one score channel each, 16-row tiles,
#: head size 64, 128 keys a group: slices of 64 keys, 2 SwiftMax lanes, int8 scores)
SMALL_DESIGN = {"pipelines": 2, "qk_kernels": 2, "pv_kernels": 2, "q_rows": 16, "key_block": 32, "score_bits": 8,
                "plio_bits": 128, "score_plios": 1, "in_plios": 3, "out_plios": 1, "lanes_swiftmax": 2,
                "lanes_online_softmax": 0, "pl_clock_mhz": 250.0, "kv_resident": True, "o_bits": 8,
                "max_seq": 128, "name": "engine_small"}


#: the small engine with both normalizers (``engine_small`` with a 4-lane online-softmax unit beside each channel's
#: SwiftMax lanes; the ``normalizer`` register chooses per layer)
SMALL_DUAL_DESIGN = {**SMALL_DESIGN, "lanes_online_softmax": 4, "name": "engine_small_dual"}


class GenerateError(UserError):
    """A design the engine cannot be built from, or a build folder that cannot be written (one line)."""


class DesignRuleError(GenerateError):
    """A design that breaks a rule of the design-rule check (:mod:`.check`): status 4, a design no build runs."""

    exit_code = EXIT_INPUT


def platform_of(board: str) -> str:
    """The Vitis platform of ``board`` (the v1 builds' platform for that board)."""
    from vckattn.hw.design.manifest import BUILDS

    for b, platform in BUILDS.values():
        if b == board:
            return platform
    raise GenerateError(f"unknown board {board!r}; choose from vck5000, vck190")


def engine_params(design: Any, max_seq: int, head_dims: tuple[int, ...] = HEAD_DIMS) -> Any:
    """The kernels' build parameters (:class:`~vckattn.hw.spec.functional.EngineParams`) of ``design``: ``D`` the
    largest head size, ``MAX_KEYS = max_seq`` (GenerateError naming the rule when stream contract v3 refuses
    them)."""
    from vckattn.hw.spec.functional import EngineParams

    try:
        return EngineParams(pipelines=design.pipelines, kernels=design.qk_kernels, score_plios=design.score_plios,
                            q_rows=design.q_rows, d=max(head_dims), max_keys=max_seq, score_bits=design.score_bits,
                            lanes=design.lanes_swiftmax, online_lanes=design.lanes_online_softmax)
    except ValueError as exc:
        raise GenerateError(f"design: {exc}") from None


def check_design(design: Any, max_seq: int = 512, head_dims: tuple[int, ...] = HEAD_DIMS) -> None:
    """Raise :class:`GenerateError` naming the first field of ``design`` that stream contract v3 cannot build."""
    d = design
    k = d.qk_kernels
    rules = [
        (d.qk_kernels == d.pv_kernels, f"qk_kernels ({d.qk_kernels}) must equal pv_kernels ({d.pv_kernels}): "
                                       "P.V kernel j owns QK^T kernel j's key slice"),
        (k <= 16, f"qk_kernels {k} > 16: the V slices' packet ids k + j have 5 bits"),
        (k % d.score_plios == 0, f"score_plios ({d.score_plios}) must divide qk_kernels ({k}): each score channel "
                                 "serves k/m kernels"),
        (d.in_plios == 3, f"in_plios must be 3 (q_in, k_in and v_in), not {d.in_plios}"),
        (d.out_plios == 1, f"out_plios must be 1 (o_out), not {d.out_plios}"),
        (d.plio_bits == 128, f"plio_bits must be 128, not {d.plio_bits}"),
        (d.score_bits in (8, 16), f"score_bits must be 8 or 16, not {d.score_bits}"),
        (d.o_bits == 8, "o_bits must be 8 (the requantizer at the end of the cascade: int8 A records leave the "
                        f"array), not {d.o_bits}"),
        (d.kv_resident, "kv_resident must be true (the kernels hold their K/V slices)"),
        (d.lanes_swiftmax >= 1, "lanes_swiftmax must be >= 1 (the engine normalizes with SwiftMax)"),
        (d.lanes_online_softmax in (0, 1, 2, 4, 8), f"lanes_online_softmax must be 0 (SwiftMax only) or 1, 2, 4, 8 "
                                                    f"(both normalizers), not {d.lanes_online_softmax}"),
        (d.lanes_online_softmax == 0 or d.score_plios == 1,
         f"score_plios must be 1 with online softmax (lanes_online_softmax {d.lanes_online_softmax}): a tile's whole "
         f"rows meet on one score channel, not {d.score_plios}"),
        (d.lanes_swiftmax <= 128 // d.score_bits,
         f"lanes_swiftmax {d.lanes_swiftmax} > {128 // d.score_bits} scores a 128-bit beat"),
        (d.q_rows % 4 == 0, f"q_rows ({d.q_rows}) must be a multiple of 4 (the mmul row block)"),
        (max_seq >= 16 * k and max_seq % (16 * k) == 0,
         f"max_seq {max_seq} must be a positive multiple of 16 x qk_kernels ({16 * k}): slices of SK = max_seq / k "
         "keys, SK a multiple of 16"),
        (d.max_seq is None or d.max_seq == max_seq, f"the design's max_seq {d.max_seq} differs from {max_seq}"),
        (bool(head_dims) and all(16 <= h <= MAX_D and h % 16 == 0 for h in head_dims),
         f"head_dims {list(head_dims)} must be multiples of 16 up to {MAX_D}"),
    ]
    for ok, message in rules:
        if not ok:
            raise GenerateError(f"design: {message}")
    _check_memory(engine_params(d, max_seq, head_dims), max_seq)


def _check_memory(p: Any, max_seq: int) -> None:
    """Every kernel's buffers (ping-pong) and state (hw/spec/functional.py: kernel_memory, = the kernels' sizes and
    sizeof) plus the runtime's reserve must fit its own AIE tile's data memory (the generated graph pins the
    buffers there; no neighbour memory is assumed)."""
    from vckattn.hw.perf.model import load_device
    from vckattn.hw.spec.functional import kernel_memory

    dev = load_device("vck5000")
    mem = kernel_memory(p)
    for kernel in ("qk", "pv_first", "rq"):
        need = mem[kernel] + dev.tile_memory_reserve_bytes
        if need > dev.tile_memory_bytes:
            raise GenerateError(f"design: {kernel}'s buffers and state ({mem[kernel]} B) + runtime reserve "
                                f"({dev.tile_memory_reserve_bytes} B) = {need} B do not fit the "
                                f"{dev.tile_memory_bytes} B of an AIE tile at max_seq {max_seq} (slices of "
                                f"{p.slice_keys} keys, Q_ROWS {p.q_rows}): use more kernels per pipeline, fewer query "
                                "rows or a shorter max_seq")


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


_BANNER = "// GENERATED by vckattn.hw.design.generate ({what}) -- do not edit; regenerate with `vckattn hw generate`."


def render_config(design: Any, max_seq: int, head_dims: tuple[int, ...]) -> str:
    """``engine_config.h``: the kernels' and PL movers' build parameters (``hw/aie/engine/engine_kernels.h``,
    ``hw/hls/s2mm_engine.h`` read them): :meth:`EngineParams.macros`."""
    macros = engine_params(design, max_seq, head_dims).macros()
    lines = [_BANNER.format(what="engine build parameters"), "// Stream contract v3 (hw/ENGINE.md).",
             "#ifndef VCKATTN_ENGINE_CONFIG_H", "#define VCKATTN_ENGINE_CONFIG_H", ""]
    lines += [f"#define {k} {v}" for k, v in macros.items()]
    lines += ["", f"// {design.pipelines} pipelines (the graph's, not the kernels' parameter)",
              f"#define VCKATTN_ENGINE_PIPELINES {design.pipelines}", "", "#endif", ""]
    return "\n".join(lines)


def _pv_function(j: int) -> str:
    return "pv_slice_first<0>" if j == 0 else f"pv_slice_mid<{j}>"


def _slice_link(i: int, stream: str, j: int, k: int, kernel: str, size: str) -> str:
    """The link of pipeline ``i``'s K (``stream`` "k") or V ("v") slice ``j`` into ``kernel``'s in[1]: through the
    stream's ``pktsplit<k>``, or straight from the PLIO in a one-kernel pipeline."""
    if k == 1:
        return f"        adf::connect<{_win(size)}>({plio_name(i, f'{stream}_in')}.out[0], {kernel}.in[1]);"
    return f"        adf::connect<adf::pktstream, {_win(size)}>(p{i}_{stream}_split.out[{j}], {kernel}.in[1]);"


def _win(size: str) -> str:
    return f"adf::window<vckattn_engine::{size}>"


def render_graph_h(design: Any, placed: Layout, gemm: Any = None) -> str:
    """``graph.h``: the ADF graph of ``design``'s pipelines with ``placed``'s locations (UNVERIFIED: written against
    the ADF graph API of Vitis 2022.2; no aiecompiler here); with ``gemm`` (a sublayer's projection stages and
    their placement: :class:`~.gemm_graph.GemmPlacement`) their cascades too."""
    k, n, m = design.qk_kernels, design.pipelines, design.score_plios
    per = k // m
    mhz = f"{design.pl_clock_mhz:g}"
    out = [
        _BANNER.format(what="ADF graph of the engine"),
        f"// Design: {n} pipelines x ({k} qk_slice + {k} pv_slice kernels + o_requant, {m} score channel(s)), Q_ROWS "
        f"{design.q_rows}, int{design.score_bits} scores; PLIOs 128 bit at {mhz} MHz.",
        "// Per pipeline i (hw/ENGINE.md, stream contract v3):",
        "//   p<i>_q_in  --broadcast--> qk j: q window (ping-pong)                          j = 0 .. k-1",
        "//   p<i>_k_in --pktsplit<k>--> qk j: k window (async)                           packet id j",
        "//   p<i>_v_in --pktsplit<k>--> pv j: v window (async)                           packet id k+j",
        "//   qk j: s window --pktmerge<k/m> of channel c = j/(k/m) (or straight)--> p<i>_s_out<c> (scores to the PL)",
        "//   p<i>_p_in<c> --pktsplit<k/m> (or straight)--> pv j: p window",
        "//   pv 0 --cascade--> ... --> pv k-1 --cascade--> rq: o window --> p<i>_o_out  (A records, int8, to the PL)",
        "// Placement (hw/design/layout.py): a pipeline's P.V chain and requantizer on consecutive tiles of one",
        "// row in the row's cascade direction, its QK^T kernels on the row above; every buffer in its kernel's tile;",
        "// PLIOs on nearby PL interface columns.",
        "#ifndef VCKATTN_ENGINE_GRAPH_H",
        "#define VCKATTN_ENGINE_GRAPH_H",
        "",
        "#include <adf.h>",
        "",
        '#include "engine_config.h"',
        '#include "kernels.h"         // hw/aie/engine/kernels.h: the kernel signatures',
        '#include "engine_kernels.h"  // vckattn_engine::*_BUFFER_BYTES: the window sizes',
        "",
        "class EngineGraph : public adf::graph {",
        "public:",
    ]
    for i in range(n):
        out.append(f"    // pipeline {i}")
        out.append("    adf::kernel " + ", ".join([qk_name(i, j) for j in range(k)] + [pv_name(i, j) for j in range(k)]
                                         + [rq_name(i)]) + ";")
        if k > 1:
            out.append(f"    adf::pktsplit<{k}> p{i}_k_split, p{i}_v_split;")
        if per > 1:
            out.append("    adf::pktmerge<" + f"{per}> " + ", ".join(f"p{i}_merge{c}" for c in range(m)) + ";")
            out.append("    adf::pktsplit<" + f"{per}> " + ", ".join(f"p{i}_split{c}" for c in range(m)) + ";")
        ins = [plio_name(i, s_) for s_, d_ in lay.pipeline_plios(m) if d_ == "in"]
        outs = [plio_name(i, s_) for s_, d_ in lay.pipeline_plios(m) if d_ == "out"]
        out.append("    adf::input_plio " + ", ".join(ins) + ";")
        out.append("    adf::output_plio " + ", ".join(outs) + ";")
    if gemm is not None:
        out += gemm.declarations()
    out += ["", "    EngineGraph() {"]
    for i in range(n):
        b = [f"        // ---- pipeline {i}"]
        for suffix, direction in lay.pipeline_plios(m):
            name = plio_name(i, suffix)
            kind = "input_plio" if direction == "in" else "output_plio"
            b.append(f'        {name} = adf::{kind}::create("{name}", adf::plio_128_bits, "data/{name}.txt", {mhz});')
            b.append(f"        adf::location<adf::PLIO>({name}) = adf::shim({placed.plio_columns[name]});")
        if k > 1:
            for s_ in ("k", "v"):
                b.append(f"        p{i}_{s_}_split = adf::pktsplit<{k}>::create();")
                plio = plio_name(i, f"{s_}_in")
                b.append(f"        adf::connect<adf::pktstream>({plio}.out[0], p{i}_{s_}_split.in[0]);")
        for c in range(m):
            if per > 1:
                b.append(f"        p{i}_merge{c} = adf::pktmerge<{per}>::create();")
                b.append(f"        p{i}_split{c} = adf::pktsplit<{per}>::create();")
                s_out, p_in = plio_name(i, f"s_out{c}"), plio_name(i, f"p_in{c}")
                b.append(f"        adf::connect<adf::pktstream>(p{i}_merge{c}.out[0], {s_out}.in[0]);")
                b.append(f"        adf::connect<adf::pktstream>({p_in}.out[0], p{i}_split{c}.in[0]);")
        for j in range(k):
            q = qk_name(i, j)
            c, r = placed.tiles[q]
            ch = j // per
            b.append(f"        {q} = adf::kernel::create(qk_slice<{j}>);")
            b.append(f'        adf::source({q}) = "qk_slice.cc";')
            b.append(f"        adf::runtime<adf::ratio>({q}) = {RUNTIME_RATIO};")
            b.append(f"        adf::location<adf::kernel>({q}) = adf::tile({c}, {r});")
            b.append(f"        adf::connect<{_win('Q_BUFFER_BYTES')}>({plio_name(i, 'q_in')}.out[0], {q}.in[0]);")
            b.append(_slice_link(i, "k", j, k, q, "K_BUFFER_BYTES"))
            b.append(f"        adf::async({q}.in[1]);")
            if per > 1:
                b.append(f"        adf::connect<{_win('S_BUFFER_BYTES')}, adf::pktstream>({q}.out[0], "
                         f"p{i}_merge{ch}.in[{j % per}]);")
            else:
                s_out = plio_name(i, f"s_out{ch}")
                b.append(f"        adf::connect<{_win('S_BUFFER_BYTES')}>({q}.out[0], {s_out}.in[0]);")
            for port in ("in[0]", "in[1]", "out[0]"):
                b.append(f"        adf::location<adf::buffer>({q}.{port}) = adf::location<adf::kernel>({q});")
        for j in range(k):
            pv = pv_name(i, j)
            c, r = placed.tiles[pv]
            ch = j // per
            b.append(f"        {pv} = adf::kernel::create({_pv_function(j)});")
            b.append(f'        adf::source({pv}) = "pv_slice.cc";')
            b.append(f"        adf::runtime<adf::ratio>({pv}) = {RUNTIME_RATIO};")
            b.append(f"        adf::location<adf::kernel>({pv}) = adf::tile({c}, {r});")
            if per > 1:
                b.append(f"        adf::connect<adf::pktstream, {_win('P_BUFFER_BYTES')}>("
                         f"p{i}_split{ch}.out[{j % per}], {pv}.in[0]);")
            else:
                p_in = plio_name(i, f"p_in{ch}")
                b.append(f"        adf::connect<{_win('P_BUFFER_BYTES')}>({p_in}.out[0], {pv}.in[0]);")
            b.append(_slice_link(i, "v", j, k, pv, "V_BUFFER_BYTES"))
            b.append(f"        adf::async({pv}.in[1]);")
            if j > 0:
                b.append(f"        adf::connect<adf::cascade>({pv_name(i, j - 1)}.out[0], {pv}.in[2]);")
            for port in ("in[0]", "in[1]"):
                b.append(f"        adf::location<adf::buffer>({pv}.{port}) = adf::location<adf::kernel>({pv});")
        rq = rq_name(i)
        c, r = placed.tiles[rq]
        b.append(f"        {rq} = adf::kernel::create(o_requant);")
        b.append(f'        adf::source({rq}) = "pv_slice.cc";')
        b.append(f"        adf::runtime<adf::ratio>({rq}) = {RUNTIME_RATIO};")
        b.append(f"        adf::location<adf::kernel>({rq}) = adf::tile({c}, {r});")
        b.append(f"        adf::connect<adf::cascade>({pv_name(i, k - 1)}.out[0], {rq}.in[0]);")
        b.append(f"        adf::connect<{_win('O_BUFFER_BYTES')}>({rq}.out[0], {plio_name(i, 'o_out')}.in[0]);")
        b.append(f"        adf::location<adf::buffer>({rq}.out[0]) = adf::location<adf::kernel>({rq});")
        out += b
    if gemm is not None:
        out += gemm.body(mhz, RUNTIME_RATIO)
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
        "// Simulation driver: every kernel runs VCKATTN_AIESIM_CALLS calls (one tile each) on",
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
    :func:`vckattn.hw.design.manifest.validate_manifest`)."""
    from vckattn.golden.engine import engine_format, engine_online_format, engine_regmap
    from vckattn.golden.swiftmax_int import SWIFTMAX_ID
    from vckattn.hw.design import manifest as mf

    check_design(design, max_seq, head_dims)
    p = engine_params(design, max_seq, head_dims)
    n, k, m, bits, lanes = p.pipelines, p.kernels, p.score_plios, p.score_bits, p.lanes
    placed = lay.layout(n, k, m)
    fmt = engine_format(bits)
    dual = p.online_lanes > 0
    normalizers = ["swiftmax", "softmax"] if dual else ["swiftmax"]
    formats = {"swiftmax": asdict(fmt)}
    if dual:
        formats["online_softmax"] = asdict(engine_online_format(p.online_lanes))
    online_doc = (f"; beside the lanes, per channel an online-softmax unit ({p.online_lanes} lanes) that gathers a "
                  f"tile's {k} slices into rows of {p.max_keys} keys and sends the tile's P packets in slice order; "
                  "the register normalizer (0 SwiftMax, 1 online softmax) chooses per layer (hw/pl/engine_online.py)"
                  if dual else "")
    cus = {"mm2s_engine": [f"mm2s_engine_{s}_{i}" for i in range(n) for s in ("q", "k", "v")],
           "s2mm_engine": [f"s2mm_engine_{i}" for i in range(n)]}
    kernels = [
        {"name": "mm2s_engine", "kind": "hls", "compute_units": cus["mm2s_engine"],
         "doc": "three per pipeline: the q mover (kv = 0: TILE descriptors, each header beat followed by its q tile "
                "gathered from the re-tiled Q), the k mover (kv = 1: the LOAD_K entries of the pipeline's kv list, K "
                "slices from the re-tiled K, to k_in) and the v mover (kv = 2: its LOAD_V entries, V slices from the "
                "re-tiled V, to v_in), at the descriptors' offsets (hw/hls/mm2s_engine.cpp, hw/ENGINE.md)",
         "ports": [_port("cmds", "m_axi"), _port("n_cmds", "scalar"), _port("src", "m_axi"), _port("src_v", "m_axi"),
                   _port("kv", "scalar"), _port("payload_bytes", "scalar"), _port("out", "axis", "out", 128)],
         "registers": []},
        {"name": PL_TOP, "kind": "rtl", "normalizer": "swiftmax", **({"normalizers": normalizers} if dual else {}),
         "id": SWIFTMAX_ID,
         "doc": f"SwiftMax on the score packets of every score channel ({m} per pipeline, {lanes} lanes each, "
                f"int{bits} scores, the mask sentinel in-band): channel i*{m}+c takes s<i*{m}+c> from p<i>_s_out<c> "
                f"and sends its P packets on p<i*{m}+c> to p<i>_p_in<c>; one register file shared by the channels, "
                "b_beta/c_out per head (the packet header's head) with a read port per channel (s_axil, "
                f"s_axi_control in the Vitis wrapper){online_doc}",
         "ports": [x for ch in range(n * m) for x in (_port(f"s{ch}", "axis", "in", 128),
                                                      _port(f"p{ch}", "axis", "out", 128))]
         + [_port("s_axil", "axi4lite", "in")],
         "registers": mf.describe_registers(engine_regmap(fmt, p.normalizers, read_ports=n * m))},
        {"name": "s2mm_engine", "kind": "hls", "compute_units": cus["s2mm_engine"],
         "doc": "per pipeline: A records (requantized by the requantizer kernel) from p<i>_o_out -> A of tile t into "
                "slot t of the shared A buffer, the RESULT header (with the pipeline index) into the pipeline's done "
                "log; a plain writer, one beat a cycle (hw/hls/s2mm_engine.cpp)",
         "ports": [_port("a_in", "axis", "in", 128), _port("a_out", "m_axi"), _port("done", "m_axi"),
                   _port("n_records", "scalar"), _port("n_slots", "scalar"), _port("pipeline", "scalar")],
         "registers": []},
    ]
    links = []
    for i in range(n):
        links += [(f"mm2s_engine_q_{i}.out", f"ai_engine_0.{plio_name(i, 'q_in')}"),
                  (f"mm2s_engine_k_{i}.out", f"ai_engine_0.{plio_name(i, 'k_in')}"),
                  (f"mm2s_engine_v_{i}.out", f"ai_engine_0.{plio_name(i, 'v_in')}")]
        for c in range(m):
            links += [(f"ai_engine_0.{plio_name(i, f's_out{c}')}", f"{PL_TOP}.s{i * m + c}"),
                      (f"{PL_TOP}.p{i * m + c}", f"ai_engine_0.{plio_name(i, f'p_in{c}')}")]
        links.append((f"ai_engine_0.{plio_name(i, 'o_out')}", f"s2mm_engine_{i}.a_in"))
    streams = {"doc": "hw/ENGINE.md", "version": STREAMS_VERSION}
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
        "normalizers": normalizers,
        "formats": formats,
        "kernels": kernels,
        "graph": {"name": GRAPH_NAME,
                  "kernels": [name for i in range(n)
                              for name in [*(qk_name(i, j) for j in range(k)), *(pv_name(i, j) for j in range(k)),
                                           rq_name(i)]],
                  "aie_tile": {"m": p.q_rows, "k": p.d, "n": p.slice_keys},
                  "plios": [{"name": x, "direction": d, "bits": 128} for x, d in placed.plios()]},
        "clocks_mhz": {"pl": design.pl_clock_mhz, "aie": mf.AIE_CLOCK_MHZ},
        "streams": streams,
        "connectivity": [{"from": a, "to": b} for a, b in links],
        "stages": [{"stage": "attention", "where": "aie", "by": "graph"}],
        "timeout_ms": 10_000,
        "engine": {"pipelines": n, "kernels_per_pipeline": k, "score_plios": m, "d": p.d, "max_keys": p.max_keys,
                   "slice_keys": p.slice_keys, "score_bits": bits, "lanes": lanes,
                   **({"lanes_online_softmax": p.online_lanes} if dual else {}), "design": dj,
                   "streams": dict(streams), "pl_top": PL_TOP},
    }


__all__ = ["BERT_BATCH", "BERT_SEQ", "DesignRuleError", "GRAPH_NAME", "GenerateError", "HEAD_DIMS", "MAX_D", "PL_TOP",
           "RUNTIME_RATIO", "SMALL_DESIGN", "SMALL_DUAL_DESIGN", "STREAMS_VERSION", "bert_workload", "check_design",
           "design_from_file", "engine_manifest", "engine_params", "platform_of", "render_config", "render_graph_cpp",
           "render_graph_h"]

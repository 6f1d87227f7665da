"""Design-rule check of an engine design (``vckattn hw check``): the AIE1 array's and the PL's limits that decide
whether aiecompiler and v++ accept a build, each checked on the graph the generator writes.

:func:`check_design` renders the design's ADF graph (:func:`.render.render_graph_h` with the placement of
:mod:`.layout`), parses it back (:func:`parse_graph`: kernels and their tiles, buffers and their tiles, every
``adf::connect``, PLIOs and their interface columns, packet splits and merges) and runs every rule of :data:`RULES`
on it, on the kernels' build parameters and on the modeled PL resources. Each rule is a small function with its id,
a one-line statement, its numeric limit and its public source; a failing rule gives one :class:`Violation` per
offending object (rule id, message naming it, limit, found value, source).

No AMD tool runs here: the rules are the documented limits, checked as necessary conditions (for example the
stream-switch rule counts the streams that must cross each column boundary against the switches' ports; it does not
route). Limits not stated by a public document are labeled ASSUMPTION with their reasoning.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from vckattn.hw.design import layout as lay
from vckattn.hw.design import render
from vckattn.hw.design.graph_h import Connect, read_graph_h
from vckattn.hw.design.render import DesignRuleError, GenerateError

HW = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------------------------- limits (AIE1)

#: data memory of a tile: 32 KB in 8 banks of 4 KB (AM009, "AI Engine Tile Architecture" / "Memory Module")
DATA_MEMORY_BYTES = 32 * 1024
MEMORY_BANKS = 8
BANK_BYTES = 4 * 1024
#: program memory of a tile: 16 KB (AM009, "AI Engine Tile Architecture" / "Program Memory")
PROGRAM_MEMORY_BYTES = 16 * 1024
#: the widest AIE1 VLIW instruction, 128 bits (AM009, "AI Engine Architecture": instruction format)
INSTRUCTION_BYTES = 16
#: ASSUMPTION: the ADF runtime's per-kernel code (main loop, lock acquire/release, window pointer updates) added to
#: each kernel's own code; no aiecompiler here to measure it
RUNTIME_CODE_BYTES = 2048
#: tile DMA: 2 S2MM + 2 MM2S channels, 16 buffer descriptors, 16 locks (AM009, "Memory Module": DMA, locks)
DMA_S2MM, DMA_MM2S, DMA_BDS, DMA_LOCKS = 2, 2, 16, 16
#: stream switch ports of an AIE1 tile (masters; AM009 "AXI4-Stream Tile Interconnect"; Xilinx/mlir-aie
#: lib/Dialect/AIE/IR/AIETargetModel.cpp getNumDestSwitchboxConnections): 6 north, 4 south, 4 east, 4 west; an
#: interface tile drives 6 streams north into row 0 and row 0 drives 4 south into it
NORTH_PORTS, SOUTH_PORTS, EAST_WEST_PORTS = 6, 4, 4
#: packet switching: six arbiters a stream switch (AM009 "AXI4-Stream Interconnect"), 5-bit packet IDs (AM009
#: "Packet switching": packet header)
ARBITERS, PACKET_IDS = 6, 32
#: PL interface tile: 8 PL->AIE and 6 AIE->PL 64-bit streams (AM009 "AI Engine to Programmable Logic Interface";
#: UG1079 "AI Engine to PL Interface Performance")
PL_STREAMS = {"in": 8, "out": 6}
PLIO_WIDTHS = {32: 1, 64: 1, 128: 2}  # 64-bit PL streams a PLIO takes (128 bits: two paired streams, AM009)
#: kernel AXI masters one platform memory port (SP tag) takes: 15 (UG1393 "Mapping Kernel Ports to Memory": "up
#: to 15 kernel interfaces can be connected to a single global memory bank"; UG1702 platforminfo "Max Masters: 15")
MASTERS_PER_MEMORY_PORT = 15
#: ASSUMPTION: DDR memory ports of the platform's NoC for kernels, as AMD's example Versal extensible platform
#: (Vitis-Tutorials Platform Creation, XD101 "Versal Extensible Platform Example": axi_noc_ddr4 S00_AXI..S13_AXI,
#: SP tag DDR); the VCK5000/VCK190 platforms' own counts are not stated in a public document reached here
MEMORY_PORTS = 14
#: PL resources a design may use (fraction of the device's): the explorer's headroom; placement and timing closure
#: degrade near full utilization (UG949 "UltraFast Design Methodology", "Utilization" guidelines)
PL_FRACTION = 0.80
PL_KEYS = ("lut", "ff", "dsp", "bram", "uram")


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``rule`` id, ``message`` naming the offending object, its ``limit`` and ``found`` value,
    and the ``source`` of the limit."""

    rule: str
    message: str
    limit: float
    found: float
    source: str

    def to_json(self) -> dict:
        return {"rule": self.rule, "message": self.message, "limit": self.limit, "found": self.found,
                "source": self.source}


# ---------------------------------------------------------------------------------------------- the graph


@dataclass
class Graph:
    """The generated graph as parsed: kernel -> (function, tile); buffer ``kernel.port`` -> tile; PLIO -> (direction,
    bits, column); packet split/merge -> ways; connections."""

    kernels: dict[str, tuple[str, tuple[int, int]]] = field(default_factory=dict)
    buffers: dict[str, tuple[int, int]] = field(default_factory=dict)
    plios: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    packet: dict[str, tuple[str, int]] = field(default_factory=dict)
    connections: list[Connect] = field(default_factory=list)


def parse_graph(text: str) -> Graph:
    """The objects, locations and connections of a generated ``graph.h`` (read by :func:`.graph_h.read_graph_h`)."""
    h = read_graph_h(text)
    g = Graph(connections=list(h.connects), packet=dict(h.packets))
    g.kernels = {k: (fn if idx is None else f"{fn}<{idx}>", h.tiles.get(k, (-1, -1)))
                 for k, (fn, idx) in h.kernels.items()}
    g.plios = {name: (d, bits, h.columns.get(name, -1)) for name, (d, bits, _) in h.plios.items()}
    g.buffers = {buf: h.tiles.get(at, (-1, -1)) if isinstance(at, str) else at for buf, at in h.buffers.items()}
    return g


# ---------------------------------------------------------------------------------------------- context


@dataclass
class Context:
    """What the rules read: the design, its board and build parameters, the parsed graph, the modeled resources
    (``used``, ``available``) and the movers' m_axi bundles (:func:`mover_bundles`) with their compute units;
    ``gemm``: the GEMM build (:class:`~vckattn.hw.spec.gemm.GemmParams`) of each projection kernel of a sublayer
    graph (:mod:`.gemm_graph`); ``unchecked``: rule id -> why the rule cannot be checked on this design."""

    design: Any
    board: str
    params: Any
    graph: Graph
    used: dict[str, float]
    available: dict[str, float]
    reserve_bytes: int
    bundles: dict[str, int]
    compute_units: dict[str, int]
    gemm: dict[str, Any] = field(default_factory=dict)
    unchecked: dict[str, str] = field(default_factory=dict)


def mover_bundles(hls_dir: Path | None = None, movers: tuple[str, ...] = ("mm2s_engine", "s2mm_engine")
                  ) -> dict[str, int]:
    """m_axi bundles of each mover, counted from its ``#pragma HLS INTERFACE m_axi ... bundle=`` lines
    (``hw/hls/<mover>.cpp``: the engine's ``mm2s_engine`` and ``s2mm_engine`` by default; a sublayer's
    ``mm2s_list`` and ``s2mm_records``): distinct bundle names per file."""
    folder = hls_dir or HW / "hls"
    out = {}
    for mover in movers:
        text = (folder / f"{mover}.cpp").read_text(encoding="utf-8")
        names = re.findall(r"#pragma\s+HLS\s+INTERFACE\b[^\n]*\bm_axi\b[^\n]*\bbundle=(\w+)", text)
        out[mover] = len(set(names))
    return out


@cache
def _kernel_code_bytes(source: str) -> int:
    """Program-memory estimate of a kernel (bytes): one :data:`INSTRUCTION_BYTES` instruction per C++ statement of
    its translation unit (the kernel's ``.cc``, its kernels' header (``engine_kernels.h`` or ``gemm_kernels.h``),
    ``aie_common.h``, ``async_buffer.h`` and the generated stream header; no loop in them is unrolled or flattened by
    a pragma) plus :data:`RUNTIME_CODE_BYTES`. An upper-side estimate: every function of the headers is counted
    although a kernel calls only its own."""
    header = "gemm_kernels.h" if source == "gemm_proj.cc" else "engine_kernels.h"
    files = [HW / "aie" / "engine" / source, HW / "aie" / "engine" / header,
             HW / "aie" / "engine" / "aie_common.h", HW / "aie" / "engine" / "async_buffer.h",
             HW / "aie" / "generated" / "engine_streams.h"]
    return INSTRUCTION_BYTES * sum(_statements(f) for f in files) + RUNTIME_CODE_BYTES


@cache
def _statements(path: Path) -> int:
    text = re.sub(r"/\*.*?\*/", "", path.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return text.count(";")


def context(design: Any, board: str = "vck5000", max_seq: int | None = None,
            head_dims: tuple[int, ...] | None = None, graph: Graph | None = None) -> Context:
    """The rules' input for ``design`` on ``board`` (``graph``: the parsed generated graph, default rendered here).
    Raises :class:`.render.GenerateError` for a design the generator cannot build at all (a field it refuses,
    a design that does not fit the array)."""
    from vckattn.hw.perf import model

    head_dims = head_dims or render.HEAD_DIMS
    seq = max_seq or design.max_seq or render.BERT_SEQ
    params = render.engine_params(design, seq, head_dims)
    if graph is None:
        try:
            placed = lay.layout(design.pipelines, design.qk_kernels, design.score_plios)
        except lay.LayoutError as exc:
            raise render.GenerateError(f"design: {exc}") from None
        graph = parse_graph(render.render_graph_h(design, placed))
    dev = model.load_device(board)
    d = replace(design, max_seq=seq)
    try:
        used = model.resources_used(render.bert_workload(min(seq, render.BERT_SEQ)), d, dev)
    except ValueError as exc:
        raise render.GenerateError(f"design: the model refuses it ({exc})") from None
    n = design.pipelines
    return Context(design, board, params, graph, used, model.resources_available(d, dev),
                   dev.tile_memory_reserve_bytes, mover_bundles(), {"mm2s_engine": 3 * n, "s2mm_engine": n})


#: the PL-side rules a sublayer build whose PL top is not generated (the small builds') cannot be
#: checked against, and why
SUBLAYER_PL_UNCHECKED = ("the sublayer's PL top (its units and the activation buffers between the stages) and its "
                         "X, Y and weight movers are not generated for this build yet: there is no code to count")
#: a generated sublayer's HLS movers (hw/hls/<name>.cpp)
SUBLAYER_MOVERS = ("mm2s_list", "s2mm_records")


def sublayer_context(build: Any, board: str = "vck5000", graph: Graph | None = None) -> Context:
    """The rules' input for sublayer build ``build`` (:class:`.sublayer_build.SublayerBuild`): the graph the
    generator writes for it (the attention pipelines and the projection cascades, :mod:`.gemm_graph`; ``graph``:
    a build folder's own, parsed). For a build whose PL top is generated (:func:`.sublayer_pl.device_sections`),
    the PL-side rules read the manifest's movers and their code's m_axi bundles and the model's resources of the
    build's split (:func:`vckattn.hw.perf.sublayer.resources`); for the others they are left unchecked
    (:data:`SUBLAYER_PL_UNCHECKED`)."""
    from vckattn.hw.perf import model

    if graph is None:
        design, placed, gp = build.place()
        graph = parse_graph(render.render_graph_h(design, placed, gp))
    else:
        design = model.design_from_json({**build.engine, "name": build.name})
    params = render.engine_params(design, build.max_seq, render.HEAD_DIMS)
    gemm = {k: st.params for st in build.gemm_stages() for k in st.kernels()}
    dev = model.load_device(board)
    pl = _sublayer_pl(build, board)
    if pl is None:
        return Context(design, board, params, graph, {}, {}, dev.tile_memory_reserve_bytes, {}, {}, gemm,
                       {rid: SUBLAYER_PL_UNCHECKED for rid in ("PL-RES", "AXI-MASTERS", "PL-MAXI")})
    used, available, units = pl
    return Context(design, board, params, graph, used, available, dev.tile_memory_reserve_bytes,
                   mover_bundles(movers=SUBLAYER_MOVERS), units, gemm)


def _sublayer_pl(build: Any, board: str) -> tuple[dict[str, float], dict[str, float], dict[str, int]] | None:
    """(the model's PL resources with its m_axi ports, the device's, each mover's compute units in the manifest)
    of a sublayer build whose PL top is generated, else None."""
    from vckattn.hw.design.sublayer_build import build_shape, split_of, sublayer_manifest, top_generated
    from vckattn.hw.perf import sublayer as sl

    if not top_generated(build):
        return None
    manifest = sublayer_manifest(build, board)
    s, sp = build_shape(build), sl.SublayerSplit(**split_of(build))
    res = sl.resources(s, sp)
    used = {k: float(res["used"][k]) for k in PL_KEYS}
    used["axi_masters"] = float(sl.movers(s, sp)["axi_master"])
    units = {k["name"]: len(k.get("compute_units") or [k["name"]]) for k in manifest["kernels"]
             if k["name"] in SUBLAYER_MOVERS}
    return used, {k: float(res["available"][k]) for k in PL_KEYS}, units


# ---------------------------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """A design rule: ``id``, one-line ``statement``, numeric ``limit`` (text), ``source`` and the check."""

    id: str
    statement: str
    limit: str
    source: str
    check: Callable[[Context], list[Violation]]


RULES: list[Rule] = []


def rule(rid: str, statement: str, limit: str, source: str) -> Callable:
    def add(fn: Callable[[Context], list[tuple[str, float, float]]]) -> Callable:
        def run(ctx: Context) -> list[Violation]:
            return [Violation(rid, msg, lim, found, source) for msg, lim, found in fn(ctx)]

        RULES.append(Rule(rid, statement, limit, source, run))
        return fn

    return add


def _variant(func: str) -> str:
    return "qk" if func.startswith("qk_slice") else "rq" if func.startswith("o_requant") else "pv_first"


def _source(func: str) -> str:
    return ("qk_slice.cc" if func.startswith("qk_slice") else "gemm_proj.cc" if func.startswith("gemm_proj")
            else "pv_slice.cc")


def _gemm_variant(func: str) -> str:
    """The GEMM kernel variant (:data:`vckattn.hw.spec.gemm.KERNELS`) of ADF kernel function ``func``."""
    return func.removeprefix("gemm_proj_").split("<")[0].split("_")[0]


def _halves(ctx: Context, kernel: str, func: str) -> list[int]:
    """Bytes of one half of each ping-pong buffer of a kernel (:func:`vckattn.hw.spec.functional.buffer_bytes`;
    a GEMM kernel's: :func:`vckattn.hw.spec.gemm.buffer_bytes`)."""
    from vckattn.hw.spec import gemm
    from vckattn.hw.spec.functional import buffer_bytes

    if kernel in ctx.gemm:
        g = ctx.gemm[kernel]
        return [x for x in gemm.buffer_bytes(_gemm_variant(func), g.rows, g.cols, g.kslice, g.out_bits).values() if x]
    b = buffer_bytes(ctx.params)
    v = _variant(func)
    return [b["q"], b["k"], b["s"]] if v == "qk" else [b["o"]] if v == "rq" else [b["p"], b["v"]]


def _memory(ctx: Context, kernel: str, func: str) -> int:
    """Bytes of a kernel's buffers (both halves) and state (:func:`vckattn.hw.spec.functional.kernel_memory`; a
    GEMM kernel's: :func:`vckattn.hw.spec.gemm.kernel_memory`)."""
    from vckattn.hw.spec import gemm
    from vckattn.hw.spec.functional import kernel_memory

    if kernel in ctx.gemm:
        g = ctx.gemm[kernel]
        return gemm.kernel_memory(_gemm_variant(func), g.rows, g.cols, g.kslice, g.out_bits)
    return kernel_memory(ctx.params)[_variant(func)]


@rule("AIE-DM", "a kernel's buffers (both ping-pong halves), its state and the runtime's stack and heap fit its "
      "tile's data memory", f"{DATA_MEMORY_BYTES} bytes a tile",
      "AM009 (AI Engine Architecture Manual), 'Memory Module': 32 KB data memory a tile; the stack/heap reserve: "
      "hw/perf/device.json tile_memory_reserve_bytes")
def data_memory(ctx: Context) -> list[tuple[str, float, float]]:
    per_tile: dict[tuple[int, int], int] = defaultdict(int)
    names: dict[tuple[int, int], list[str]] = defaultdict(list)
    for k, (func, tile) in ctx.graph.kernels.items():
        per_tile[tile] += _memory(ctx, k, func) + ctx.reserve_bytes
        names[tile].append(k)
    return [(f"tile {t} ({', '.join(names[t])}): {b} B of buffers, state, stack and heap", DATA_MEMORY_BYTES, b)
            for t, b in per_tile.items() if b > DATA_MEMORY_BYTES]


@rule("AIE-PM", "a kernel's code fits its tile's program memory (estimate: one 128-bit instruction per C++ "
      "statement of its translation unit + the ADF runtime's code)", f"{PROGRAM_MEMORY_BYTES} bytes a tile",
      "AM009, 'AI Engine Tile Architecture': 16 KB program memory, instructions up to 128 bits; runtime share: "
      f"ASSUMPTION {RUNTIME_CODE_BYTES} B")
def program_memory(ctx: Context) -> list[tuple[str, float, float]]:
    out = []
    for k, (func, _) in ctx.graph.kernels.items():
        b = _kernel_code_bytes(_source(func))
        if b > PROGRAM_MEMORY_BYTES:
            out.append((f"kernel {k} ({func}): ~{b} B of code", PROGRAM_MEMORY_BYTES, b))
    return out


def reachable(tile: tuple[int, int]) -> set[tuple[int, int]]:
    """Memory modules an AIE1 core at ``tile`` reaches: its own, north, south, and east on even rows / west on odd
    rows (AM009 'AI Engine Tile Architecture'; Xilinx/mlir-aie AIETargetModel.cpp isLegalMemAffinity)."""
    c, r = tile
    side = c + 1 if r % 2 == 0 else c - 1
    return {(c, r), (c, r + 1), (c, r - 1), (side, r)}


@rule("AIE-REACH", "every buffer of a kernel sits in a memory module its core reaches (its own, north, south, and "
      "east on even rows / west on odd rows)", "0 unreachable buffers",
      "AM009, 'AI Engine Tile Architecture' / 'Memory Module' (a core accesses its own and three neighbouring "
      "memory modules); Xilinx/mlir-aie lib/Dialect/AIE/IR/AIETargetModel.cpp isLegalMemAffinity")
def buffer_reach(ctx: Context) -> list[tuple[str, float, float]]:
    out = []
    for buf, tile in ctx.graph.buffers.items():
        k = buf.split(".")[0]
        home = ctx.graph.kernels.get(k, ("", (-9, -9)))[1]
        if tile not in reachable(home):
            out.append((f"buffer {buf} at tile {tile}: kernel {k} at {home} cannot reach it", 0, 1))
    return out


@rule("AIE-BANKS", "a kernel's ping-pong halves split over the 8 banks (ping halves in banks 0-3, pong halves in "
      "banks 4-7) so that the DMA writing one half and the core reading the other never share a bank",
      f"{MEMORY_BANKS // 2 * BANK_BYTES} bytes of halves a kernel",
      "AM009, 'Memory Module': 8 banks of 4 KB, one access a bank a cycle; UG1079 (AI Engine Kernel and Graph "
      "Programming Guide), 'Buffer' ping-pong buffers")
def pingpong_banks(ctx: Context) -> list[tuple[str, float, float]]:
    lim = MEMORY_BANKS // 2 * BANK_BYTES
    out = []
    for k, (func, _) in ctx.graph.kernels.items():
        b = sum(_halves(ctx, k, func))
        if b > lim:
            out.append((f"kernel {k} ({func}): {b} B of buffer halves for 4 banks", lim, b))
    return out


def _dma_buffers(ctx: Context) -> dict[str, dict[str, int]]:
    """Per kernel the ping-pong buffers its tile's DMA serves: stream-fed input windows (S2MM) and stream-drained
    output windows (MM2S)."""
    out: dict[str, dict[str, int]] = {k: {"s2mm": 0, "mm2s": 0} for k in ctx.graph.kernels}
    for c in ctx.graph.connections:
        if "window" not in c.kinds:
            continue
        if c.dst_obj in out and c.src_obj not in ctx.graph.kernels:
            out[c.dst_obj]["s2mm"] += 1
        if c.src_obj in out and c.dst_obj not in ctx.graph.kernels:
            out[c.src_obj]["mm2s"] += 1
    return out


@rule("AIE-DMA-BD", "a tile DMA's buffer descriptors and locks: two of each per ping-pong buffer it serves",
      f"{DMA_BDS} BDs and {DMA_LOCKS} locks a tile",
      "AM009, 'Memory Module' / 'DMA': 16 buffer descriptors and 16 locks a memory module")
def dma_bds(ctx: Context) -> list[tuple[str, float, float]]:
    out = []
    for k, ch in _dma_buffers(ctx).items():
        n = 2 * (ch["s2mm"] + ch["mm2s"])
        if n > min(DMA_BDS, DMA_LOCKS):
            out.append((f"kernel {k}'s tile DMA: {n} BDs and locks", min(DMA_BDS, DMA_LOCKS), n))
    return out


@rule("AIE-DMA-CH", "a tile DMA's channels: one S2MM per stream-fed input buffer, one MM2S per stream-drained "
      "output buffer", f"{DMA_S2MM} S2MM + {DMA_MM2S} MM2S a tile",
      "AM009, 'Memory Module' / 'DMA': two S2MM and two MM2S channels a tile")
def dma_channels(ctx: Context) -> list[tuple[str, float, float]]:
    out = []
    for k, ch in _dma_buffers(ctx).items():
        if ch["s2mm"] > DMA_S2MM:
            out.append((f"kernel {k}: {ch['s2mm']} S2MM channels", DMA_S2MM, ch["s2mm"]))
        if ch["mm2s"] > DMA_MM2S:
            out.append((f"kernel {k}: {ch['mm2s']} MM2S channels", DMA_MM2S, ch["mm2s"]))
    return out


def _nets(ctx: Context) -> list[tuple[str, int, list[tuple[int, int]], str]]:
    """Every stream net of the graph: (PLIO, its column, the tiles it reaches or comes from, direction). A net
    follows packet splits and merges to the kernels; cascades use no stream switch."""
    g = ctx.graph
    fwd: dict[str, list[str]] = defaultdict(list)
    back: dict[str, list[str]] = defaultdict(list)
    for c in g.connections:
        if "cascade" in c.kinds:
            continue
        fwd[c.src_obj].append(c.dst_obj)
        back[c.dst_obj].append(c.src_obj)

    def ends(obj: str, edges: dict[str, list[str]]) -> list[tuple[int, int]]:
        seen, todo, tiles = set(), [obj], []
        while todo:
            o = todo.pop()
            for n in edges.get(o, []):
                if n in seen:
                    continue
                seen.add(n)
                if n in g.kernels:
                    tiles.append(g.kernels[n][1])
                elif n in g.packet:
                    todo.append(n)
        return tiles

    return [(p, col, ends(p, fwd if d == "in" else back), d) for p, (d, _, col) in g.plios.items()]


@rule("AIE-ROUTE", "streams entering a column from its interface tile, leaving it into the interface tile, and "
      "crossing each column boundary fit the stream switches' ports (a cut count: necessary, not a router)",
      f"{NORTH_PORTS} north / {SOUTH_PORTS} south a column; {EAST_WEST_PORTS} x {lay.ARRAY_ROWS + 1} rows each "
      "way a column boundary",
      "AM009, 'AXI4-Stream Tile Interconnect' and 'Array Interface AXI4-Stream Interconnect'; Xilinx/mlir-aie "
      "AIETargetModel.cpp getNumDestSwitchboxConnections (AIE1: 6 north, 4 south, 4 east, 4 west)")
def stream_routes(ctx: Context) -> list[tuple[str, float, float]]:
    up: dict[int, int] = defaultdict(int)
    down: dict[int, int] = defaultdict(int)
    east: dict[int, int] = defaultdict(int)
    west: dict[int, int] = defaultdict(int)
    for _, col, tiles, d in _nets(ctx):
        (up if d == "in" else down)[col] += 1
        cols = [c for c, _ in tiles] + [col]
        lo, hi = min(cols), max(cols)
        for b in range(lo, hi):  # boundary b: between column b and b + 1
            going_east = (b >= col) == (d == "in")
            (east if going_east else west)[b] += 1
    cap = EAST_WEST_PORTS * (lay.ARRAY_ROWS + 1)
    out = [(f"column {c}: {n} streams north from the interface tile", NORTH_PORTS, n)
           for c, n in sorted(up.items()) if n > NORTH_PORTS]
    out += [(f"column {c}: {n} streams south into the interface tile", SOUTH_PORTS, n)
            for c, n in sorted(down.items()) if n > SOUTH_PORTS]
    out += [(f"column boundary {b}|{b + 1}: {n} streams {name}", cap, n)
            for name, side in (("east", east), ("west", west)) for b, n in sorted(side.items()) if n > cap]
    return out


@rule("AIE-PKT", "packet-switched nets: at most 32 packet IDs a stream (5-bit ID) and at most six packet-switched "
      "nets ending or starting in one tile's switch (its arbiters)", f"{PACKET_IDS} IDs a stream; {ARBITERS} "
      "arbiters a switch", "AM009, 'AXI4-Stream Interconnect': six programmable arbiters a switch for packet "
      "switching, 5-bit packet ID in the packet header")
def packet_switching(ctx: Context) -> list[tuple[str, float, float]]:
    g, out = ctx.graph, []
    per_tile: dict[tuple[int, int], int] = defaultdict(int)
    for name, (_, ways) in g.packet.items():
        # the engine's V packets carry ids k + j on the v split (hw/ENGINE.md): its highest id is 2k - 1
        top = 2 * ctx.params.kernels if name.endswith("_v_split") else ways
        if top > PACKET_IDS:
            out.append((f"{name}: packet ids up to {top - 1}", PACKET_IDS, top))
    for c in g.connections:
        if "pktstream" in c.kinds:
            for o in (c.src_obj, c.dst_obj):
                if o in g.kernels:
                    per_tile[g.kernels[o][1]] += 1
    out += [(f"tile {t}: {n} packet-switched nets", ARBITERS, n) for t, n in sorted(per_tile.items())
            if n > ARBITERS]
    return out


@rule("AIE-CASCADE", "a cascade goes from a kernel to its neighbour in the row's direction (east on even rows, "
      "west on odd rows; at a row's end to the tile above), one in and one out a kernel, no cycle",
      "1 in + 1 out a kernel", "AM009, 'AI Engine Tile Architecture': 384-bit cascade stream, horizontal, "
      "direction alternating by row (wrapping to the next row); UG1079 'Cascade Stream'")
def cascade(ctx: Context) -> list[tuple[str, float, float]]:
    g, out = ctx.graph, []
    ins: dict[str, int] = defaultdict(int)
    outs: dict[str, int] = defaultdict(int)
    nxt: dict[str, str] = {}
    for c in g.connections:
        if "cascade" not in c.kinds:
            continue
        a, b = c.src_obj, c.dst_obj
        outs[a] += 1
        ins[b] += 1
        nxt[a] = b
        (ca, ra), (cb, rb) = g.kernels[a][1], g.kernels[b][1]
        step = lay.cascade_step(ra)
        at_end = ca + step < 0 or ca + step >= lay.ARRAY_COLUMNS
        if not ((rb == ra and cb == ca + step) or (at_end and rb == ra + 1 and cb == ca)):
            out.append((f"cascade {a} {(ca, ra)} -> {b} {(cb, rb)}: not the next tile in the row's direction", 1, 0))
    out += [(f"kernel {k}: {n} cascade inputs", 1, n) for k, n in ins.items() if n > 1]
    out += [(f"kernel {k}: {n} cascade outputs", 1, n) for k, n in outs.items() if n > 1]
    for start in nxt:
        seen, k = {start}, nxt[start]
        while k in nxt:
            k = nxt[k]
            if k in seen:
                out.append((f"cascade chain through {start} is a cycle", 0, 1))
                break
            seen.add(k)
    return out


def pl_columns_note() -> str:
    return lay.PL_COLUMNS_SOURCE


@rule("SHIM-PL", "every PLIO sits on an interface column with a PL interface and each column's PL streams fit "
      "its 8 PL->AIE and 6 AIE->PL 64-bit streams", f"columns {lay.PL_COLUMNS[0]}-{lay.PL_COLUMNS[-1]}; 8 in / 6 "
      "out 64-bit streams a column", "AM009, 'AI Engine to Programmable Logic Interface' (39 of 50 interface "
      "tiles reach the PL on the VC1902; 8 + 6 64-bit streams each); UG1079 'Shim Constraint' (columns 0-5 "
      "cannot hold a PLIO on the xcvc1902)")
def shim_columns(ctx: Context) -> list[tuple[str, float, float]]:
    out = []
    used: dict[tuple[int, str], int] = defaultdict(int)
    for name, (d, bits, col) in ctx.graph.plios.items():
        if col not in lay.PL_COLUMNS:
            out.append((f"PLIO {name} on column {col}: no PL interface there", 0, 1))
        used[(col, d)] += PLIO_WIDTHS.get(bits, 2)
    out += [(f"column {c}: {n} {d}put 64-bit PL streams", PL_STREAMS[d], n) for (c, d), n in sorted(used.items())
            if n > PL_STREAMS[d]]
    return out


@rule("PLIO-128", "a 128-bit PLIO takes a pair of 64-bit PL streams: at most 4 input and 3 output 128-bit PLIOs "
      "a column; widths 32, 64 or 128 bits", "4 in / 3 out 128-bit PLIOs a column",
      "AM009, 'AI Engine to Programmable Logic Interface': two physical 64-bit streams operate as one 128-bit "
      "stream; UG1079 'PLIO and GMIO Location Constraints' (PLIO channels 0-7 in, 0-5 out)")
def plio_pairs(ctx: Context) -> list[tuple[str, float, float]]:
    out = []
    wide: dict[tuple[int, str], int] = defaultdict(int)
    for name, (d, bits, col) in ctx.graph.plios.items():
        if bits not in PLIO_WIDTHS:
            out.append((f"PLIO {name}: {bits}-bit width", 128, bits))
        if bits == 128:
            wide[(col, d)] += 1
    out += [(f"column {c}: {n} 128-bit {d}put PLIOs", PL_STREAMS[d] // 2, n) for (c, d), n in sorted(wide.items())
            if n > PL_STREAMS[d] // 2]
    return out


@rule("AXI-MASTERS", "the movers' AXI4 masters (every m_axi bundle of every compute unit) fit the platform's "
      "memory ports", f"{MASTERS_PER_MEMORY_PORT} x {MEMORY_PORTS} = {MASTERS_PER_MEMORY_PORT * MEMORY_PORTS}",
      "UG1393 (Vitis Application Acceleration), 'Mapping Kernel Ports to Memory': up to 15 kernel interfaces a "
      "memory bank; memory ports: ASSUMPTION, the 14 DDR ports (S00_AXI..S13_AXI) of AMD's Versal extensible "
      "platform example (Vitis-Tutorials Platform Creation, XD101)")
def axi_masters(ctx: Context) -> list[tuple[str, float, float]]:
    n = sum(ctx.bundles[m] * ctx.compute_units[m] for m in ctx.bundles)
    lim = MASTERS_PER_MEMORY_PORT * MEMORY_PORTS
    return [(f"{n} AXI4 masters ({ctx.compute_units} compute units x {ctx.bundles} m_axi bundles)", lim, n)] \
        if n > lim else []


@rule("PL-MAXI", "the PL resource model costs every m_axi bundle of the movers' code", "model = code",
      "hw/hls/mm2s_engine.cpp and s2mm_engine.cpp (a sublayer's: mm2s_list.cpp and s2mm_records.cpp) '#pragma HLS "
      "INTERFACE m_axi ... bundle=' (UG1399 'm_axi Interfaces'); hw/perf/data/pl_infrastructure.json "
      "ports_per_pipeline (a sublayer's: hw/perf/sublayer.py movers)")
def maxi_costed(ctx: Context) -> list[tuple[str, float, float]]:
    code = sum(ctx.bundles[m] * ctx.compute_units[m] for m in ctx.bundles)
    model = ctx.used.get("axi_masters", 0.0)
    return [(f"the model costs {model:g} m_axi ports, the movers' code declares {code}", code, model)] \
        if model != code else []


@rule("PL-RES", "every PL resource (LUT, FF, DSP, BRAM, URAM) with the normalizers, the movers and every m_axi "
      "port counted stays within 80% of the device's", "80% of each",
      "the explorer's headroom; UG949 (UltraFast Design Methodology), 'Utilization' (placement and timing "
      "closure degrade near full utilization); resources: hw/perf/engine.py resources, "
      "hw/perf/data/pl_infrastructure.json")
def pl_resources(ctx: Context) -> list[tuple[str, float, float]]:
    out = []
    for k in PL_KEYS:
        avail = ctx.available.get(k, 0.0)
        if avail <= 0:
            continue
        frac = ctx.used[k] / avail
        if frac > PL_FRACTION + 1e-12:
            out.append((f"{k.upper()}: {ctx.used[k]:,.0f} of {avail:,.0f} ({frac:.1%})", PL_FRACTION, round(frac, 4)))
    return out


# ---------------------------------------------------------------------------------------------- entry points


def run_rules(ctx: Context) -> list[tuple[Rule, list[Violation]]]:
    """Every rule of :data:`RULES` on ``ctx`` but those it leaves unchecked (``ctx.unchecked``): (rule, its
    violations)."""
    return [(r, r.check(ctx)) for r in RULES if r.id not in ctx.unchecked]


def check_design(design: Any, board: str = "vck5000", max_seq: int | None = None,
                 head_dims: tuple[int, ...] | None = None) -> list[Violation]:
    """Every violation of ``design`` on ``board`` (empty: the design passes). Raises
    :class:`.render.GenerateError` for a design the generator refuses before any rule applies."""
    return [v for _, vs in run_rules(context(design, board, max_seq, head_dims)) for v in vs]


def passes(design: Any, board: str = "vck5000", max_seq: int | None = None) -> bool:
    """Whether the generator builds ``design`` and every rule passes."""
    try:
        return not check_design(design, board, max_seq)
    except (GenerateError, ValueError):
        return False


def rules_table() -> str:
    """The rules as a Markdown table (docs/hardware.md "Design-rule check")."""
    rows = ["| rule | statement | limit | source |", "|---|---|---|---|"]
    rows += [f"| {r.id} | {r.statement} | {r.limit} | {r.source} |" for r in RULES]
    return "\n".join(rows)




def refuse_violations(design: Any, board: str, max_seq: int | None = None,
                      head_dims: tuple[int, ...] | None = None) -> None:
    """Raise :class:`DesignRuleError` naming the first broken rules of the design-rule check."""
    bad = check_design(design, board, max_seq, head_dims)
    if bad:
        first = "; ".join(f"{v.rule}: {v.message} (limit {v.limit:g}; {v.source})" for v in bad[:2])
        more = f" (+{len(bad) - 2} more: vckattn hw check)" if len(bad) > 2 else ""
        raise DesignRuleError(f"design fails the design-rule check: {first}{more}")


def buildable(design: Any, board: str = "vck5000") -> bool:
    """Whether stream contract v3 builds ``design`` (:func:`.render.check_design` with the defaults passes) and it
    passes the design-rule check on ``board``."""
    try:
        render.check_design(replace(design, max_seq=None))
        lay.layout(design.pipelines, design.qk_kernels, design.score_plios)
    except (GenerateError, lay.LayoutError):
        return False
    return passes(design, board)

__all__ = ["Context", "Graph", "RULES", "Rule", "SUBLAYER_MOVERS", "SUBLAYER_PL_UNCHECKED", "Violation", "buildable",
           "check_design", "context", "mover_bundles", "parse_graph", "passes", "reachable", "refuse_violations",
           "rules_table", "run_rules", "sublayer_context"]

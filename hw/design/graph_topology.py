"""The engine's topology as ``vckattn hw generate`` wrote it: parsed from the generated ADF graph
(``aie/graph.h``), the kernels' build parameters (``aie/engine_config.h``) and the manifest (``manifest.json``).

The graph simulation (:mod:`.simulate`) runs what this module reads, not a rebuild from the design point: every
kernel (function, slice index, tile), every buffer (window size in bytes, ping-pong, async or not, the memory it
is pinned to), every PLIO (direction, width, clock, interface column), every ``pktsplit`` / ``pktmerge`` (fan-out,
fan-in, port order), every broadcast (one PLIO port feeding several kernels' windows), every cascade, and which PL
mover or PL-top channel sits at each PLIO's other end (the manifest's ``connectivity``).

Window sizes written as ``vckattn_engine::<X>_BUFFER_BYTES`` are resolved with
:func:`vckattn.hw.spec.functional.buffer_bytes` of the ``VCKATTN_ENGINE_*`` macros the folder's ``engine_config.h``
defines (the sizes ``hw/aie/engine/engine_kernels.h`` computes; a C-simulation test compiles them); a literal
``adf::window<N>`` is taken as N bytes. A graph this module cannot follow (a kernel port left unconnected, a P path
that does not return to its slice's P.V kernel, an unknown window size) raises :class:`TopologyError` naming it.
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vckattn.golden.errors import UserError
from vckattn.hw.design.graph_h import read_graph_h

__all__ = ["Buffer", "Cascade", "GEMM_FUNCTION", "Kernel", "Net", "Pipeline", "Plio", "Topology", "TopologyError",
           "cascades", "from_design", "from_sublayer", "parse", "pipelines", "write_sources"]


class TopologyError(UserError):
    """A generated graph the simulation cannot follow (one line naming the part)."""


@dataclass(frozen=True)
class Plio:
    """One PLIO: ``direction`` seen from the AIE array (``in``: PL -> AIE), ``bits`` wide, PL side at ``mhz``, on
    interface column ``column``; ``peer``: the PL end (``mm2s_engine_q_0``, ``engine_pl.s3``...) from the
    manifest."""

    name: str
    direction: str
    bits: int
    mhz: float
    column: int | None
    peer: str | None = None


@dataclass(frozen=True)
class Kernel:
    """One AIE kernel: its ``function`` (``qk_slice``, ``pv_slice_first``, ``pv_slice_mid``, ``o_requant``), its
    template argument ``index`` (the slice; None without one) and ``tile`` (column, row)."""

    name: str
    function: str
    index: int | None
    tile: tuple[int, int] | None


@dataclass(frozen=True)
class Net:
    """One ``adf::connect``: ``src`` and ``dst`` as ``(node, port)`` (port ``"out[0]"``...), ``kind`` ``window``,
    ``stream`` or ``cascade``, ``window_bytes`` the buffer size of a window end (one half), ``packet`` whether
    it runs through the packet-switched stream (``adf::pktstream``)."""

    src: tuple[str, str]
    dst: tuple[str, str]
    kind: str
    window_bytes: int | None
    packet: bool


@dataclass(frozen=True)
class Buffer:
    """One kernel buffer port: ``bytes`` per half, ``halves`` (2: ping-pong), ``async_`` (the kernel acquires it
    itself, adf::async), ``pinned`` (adf::location<adf::buffer> = its kernel's tile)."""

    kernel: str
    port: str
    bytes: int
    halves: int
    async_: bool
    pinned: bool


@dataclass
class Topology:
    """Everything parsed from one generated build folder."""

    folder: str
    kernels: dict[str, Kernel]
    plios: dict[str, Plio]
    splits: dict[str, int]  # pktsplit name -> fan-out
    merges: dict[str, int]  # pktmerge name -> fan-in
    nets: list[Net]
    buffers: dict[tuple[str, str], Buffer]
    macros: dict[str, int]
    engine: dict[str, Any]
    movers: dict[str, str] = field(default_factory=dict)  # PLIO -> mover compute unit (DDR master)

    def into(self, node: str, port: str) -> Net:
        """The net that drives ``node.port``."""
        for n in self.nets:
            if n.dst == (node, port):
                return n
        raise TopologyError(f"generated graph: {node}.{port} is not connected")

    def out_of(self, node: str, port: str = "out[0]") -> list[Net]:
        """The nets ``node.port`` drives (several: a broadcast)."""
        return [n for n in self.nets if n.src == (node, port)]

    def masters(self) -> list[str]:
        """The DDR masters (the movers' compute units at the PLIOs' PL ends), sorted."""
        return sorted(set(self.movers.values()))


# ------------------------------------------------------------------------------------------------- parsing

_MACRO = re.compile(r"^#define\s+(VCKATTN_ENGINE_\w+)\s+(-?\d+)\s*$", re.M)
_WINDOW = re.compile(r"adf::window<\s*(?:vckattn_engine::(\w+)|(\d+))\s*>")
#: the kernels' buffer size names -> the key of vckattn.hw.spec.functional.buffer_bytes
_SIZE_NAMES = {"Q_BUFFER_BYTES": "q", "K_BUFFER_BYTES": "k", "S_BUFFER_BYTES": "s", "P_BUFFER_BYTES": "p",
               "V_BUFFER_BYTES": "v", "O_BUFFER_BYTES": "o"}


_ENDPOINT = re.compile(r"(\w+)\.((?:in|out)\[\d+\])")


def _port(endpoint: str) -> tuple[str, str] | None:
    """``(node, port)`` of an endpoint ``node.in[i]`` / ``node.out[i]`` (None for any other)."""
    m = _ENDPOINT.fullmatch(endpoint)
    return (m[1], m[2]) if m else None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _sizes(macros: dict[str, int]) -> dict[str, int]:
    from vckattn.hw.spec.functional import EngineParams, buffer_bytes

    try:
        p = EngineParams(pipelines=macros.get("VCKATTN_ENGINE_PIPELINES", 1),
                         kernels=macros["VCKATTN_ENGINE_KERNELS"],
                         score_plios=macros["VCKATTN_ENGINE_SCORE_PLIOS"], q_rows=macros["VCKATTN_ENGINE_Q_ROWS"],
                         d=macros["VCKATTN_ENGINE_D"], max_keys=macros["VCKATTN_ENGINE_MAX_KEYS"],
                         score_bits=macros["VCKATTN_ENGINE_SCORE_BITS"])
    except KeyError as exc:
        raise TopologyError(f"engine_config.h: no {exc.args[0]} defined") from None
    except ValueError as exc:
        raise TopologyError(f"engine_config.h: {exc}") from None
    b = buffer_bytes(p)
    return {name: b[key] for name, key in _SIZE_NAMES.items()}


def parse(folder: Path | str) -> Topology:
    """The topology of the build folder ``folder`` (``aie/graph.h``, ``aie/engine_config.h``, ``manifest.json``,
    as :func:`vckattn.hw.design.generate.generate` writes them)."""
    folder = Path(folder)
    graph = _read(folder / "aie" / "graph.h")
    macros = {k: int(v) for k, v in _MACRO.findall(_read(folder / "aie" / "engine_config.h"))}
    try:
        manifest = json.loads(_read(folder / "manifest.json"))
    except ValueError as exc:
        raise TopologyError(f"{folder / 'manifest.json'}: not valid JSON ({exc})") from None
    sizes = _sizes(macros)
    peers: dict[str, str] = {}
    movers: dict[str, str] = {}
    for link in manifest.get("connectivity", []):
        a, b = link["from"], link["to"]
        for here, there in ((a, b), (b, a)):
            if here.startswith("ai_engine_0."):
                plio = here.split(".", 1)[1]
                peers[plio] = there
                if there.startswith(("mm2s_", "s2mm_")):
                    movers[plio] = there.split(".", 1)[0]
    h = read_graph_h(graph)
    plios = {name: Plio(name, direction, bits, mhz, h.columns.get(name), peers.get(name))
             for name, (direction, bits, mhz) in h.plios.items() if mhz is not None}
    kernels = {name: Kernel(name, fn, idx, h.tiles.get(name)) for name, (fn, idx) in h.kernels.items()}
    splits = {name: n for name, (kind, n) in h.packets.items() if kind == "pktsplit"}
    merges = {name: n for name, (kind, n) in h.packets.items() if kind == "pktmerge"}
    nets = []
    for c in h.connects:
        src, dst = _port(c.src), _port(c.dst)
        if src is None or dst is None:
            continue
        win = _WINDOW.search(c.template)
        nbytes = None
        if win:
            if win.group(1):
                if win.group(1) not in sizes:
                    raise TopologyError(f"generated graph: unknown window size vckattn_engine::{win.group(1)} "
                                        f"({c.src} -> {c.dst})")
                nbytes = sizes[win.group(1)]
            else:
                nbytes = int(win.group(2))
        kind = "cascade" if "adf::cascade" in c.template else ("window" if win else "stream")
        nets.append(Net(src, dst, kind, nbytes, "adf::pktstream" in c.template))
    asyncs = h.asyncs
    pinned = {tuple(buf.split(".", 1)) for buf, owner in h.buffers.items() if owner == buf.split(".", 1)[0]}
    buffers = {}
    for n in nets:
        if n.kind != "window":
            continue
        for node, port in (n.src, n.dst):
            if node in kernels:
                buffers[(node, port)] = Buffer(node, port, int(n.window_bytes or 0), 2, (node, port) in asyncs,
                                               (node, port) in pinned)
    known = set(kernels) | set(plios) | set(splits) | set(merges)
    for n in nets:
        for node, _ in (n.src, n.dst):
            if node not in known:
                raise TopologyError(f"generated graph: {node} is connected but never created")
    for name, p in plios.items():
        if p.column is None:
            raise TopologyError(f"generated graph: PLIO {name} has no interface column (adf::shim)")
    return Topology(str(folder), kernels, plios, splits, merges, nets, buffers, macros,
                    dict(manifest.get("engine", {})), movers)


def write_sources(design: Any, board: str, out: Path, max_seq: int, gemm: tuple[Any, ...] = ()) -> None:
    """Write the graph sources the simulation reads (``aie/engine_config.h``, ``aie/graph.h``, ``manifest.json``)
    with the generator's own renderers (:mod:`vckattn.hw.design.render`; with ``gemm``, a sublayer's projection
    stages, :mod:`vckattn.hw.design.gemm_graph`) but without its design-rule check: for studying a design the check
    refuses (GenerateError where stream contract v3 or the layout cannot build it)."""
    from vckattn.hw.design import gemm_graph, render
    from vckattn.hw.design import layout as lay

    render.check_design(design, max_seq)
    try:
        placed = lay.layout(design.pipelines, design.qk_kernels, design.score_plios)
        cascades = gemm_graph.placed_stages(list(gemm), placed) if gemm else None
    except lay.LayoutError as exc:
        raise render.GenerateError(f"design: {exc}") from None
    (out / "aie").mkdir(parents=True, exist_ok=True)
    (out / "aie" / "engine_config.h").write_text(render.render_config(design, max_seq, render.HEAD_DIMS),
                                                 encoding="utf-8")
    (out / "aie" / "graph.h").write_text(render.render_graph_h(design, placed, cascades), encoding="utf-8")
    manifest = render.engine_manifest(design, board, f"{board}_engine", max_seq)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


@functools.lru_cache(maxsize=16)
def _generated(design_json: str, board: str, max_seq: int, drc: bool) -> Topology:
    from vckattn.hw.design.check import refuse_violations
    from vckattn.hw.perf.model import design_from_json

    d = design_from_json(json.loads(design_json))
    with tempfile.TemporaryDirectory(prefix="vckattn-graph-") as tmp:
        out = Path(tmp) / "build"
        if drc:  # as ``vckattn hw generate``: the design-rule check before anything is written
            refuse_violations(d, board, max_seq)
        write_sources(d, board, out, max_seq)
        return parse(out)


@functools.lru_cache(maxsize=16)
def from_sublayer(design_json: str, gemm: tuple[Any, ...], board: str, max_seq: int) -> Topology:
    """The parsed graph of a sublayer: the attention pipelines of ``design_json`` (a design's JSON text) with the
    projection stages ``gemm`` (:class:`vckattn.hw.design.gemm_graph.GemmStage`), written by the generator's
    renderers into a temporary folder and read back (cached per arguments)."""
    from vckattn.hw.perf.model import design_from_json

    d = design_from_json(json.loads(design_json))
    with tempfile.TemporaryDirectory(prefix="vckattn-graph-") as tmp:
        out = Path(tmp) / "build"
        write_sources(d, board, out, max_seq, gemm)
        return parse(out)


def from_design(design: Any, board: str, max_seq: int, drc: bool = True) -> Topology:
    """Generate ``design``'s build for ``board`` and ``max_seq`` keys into a temporary folder and parse it (cached
    per design): ``vckattn hw generate``'s sources (:func:`vckattn.hw.design.generate.generate`, without the PL top
    and picture; it refuses a design that fails the design-rule check), or with ``drc=False`` the same graph
    sources without the check (:func:`write_sources`)."""
    d = replace(design, max_seq=max_seq)
    return _generated(json.dumps(d.to_json(), sort_keys=True), board, max_seq, drc)


# ------------------------------------------------------------------------------------------------- pipelines


@dataclass
class Pipeline:
    """One pipeline of the parsed graph, as the simulation runs it.

    ``qk``: its QK^T kernels by slice; ``pv``: its P.V kernels in cascade order; ``rq``: the kernel at the
    cascade's end. ``q_plio`` broadcasts to ``q_fanout`` kernels; ``k_stream`` / ``v_stream``: per slice the PLIO
    that carries its K (V) slice (several slices on one PLIO: through a pktsplit, in its port order);
    ``channel``: per slice the s_out PLIO its score packets leave on (several slices on one: a pktmerge),
    ``p_plio``: per slice the p_in PLIO its P comes back on; ``o_plio``: the requantizer's output PLIO.
    ``bytes``: one half of each buffer (``q``, ``k``, ``s``, ``p``, ``v``, ``o``) per slice (``o``: one)."""

    index: int
    qk: list[str]
    pv: list[str]
    rq: str
    q_plio: str
    q_fanout: list[str]
    k_stream: list[str]
    v_stream: list[str]
    channel: list[str]
    p_plio: list[str]
    o_plio: str
    bytes: dict[str, list[int]]


def _source_plio(t: Topology, node: str, port: str) -> tuple[str, int]:
    """The PLIO a kernel input is fed from (through at most one pktsplit) and the split's port index."""
    n = t.into(node, port)
    src, sport = n.src
    if src in t.plios:
        return src, 0
    if src in t.splits:
        up = t.into(src, "in[0]")
        if up.src[0] not in t.plios:
            raise TopologyError(f"generated graph: {src} is not fed from a PLIO")
        return up.src[0], int(sport[4:-1])
    raise TopologyError(f"generated graph: {node}.{port} is fed from {src}, not a PLIO or pktsplit")


def _sink_plio(t: Topology, node: str) -> str:
    """The output PLIO a kernel's out[0] window reaches (through at most one pktmerge)."""
    outs = t.out_of(node)
    if len(outs) != 1:
        raise TopologyError(f"generated graph: {node}.out[0] drives {len(outs)} nets, not 1")
    dst = outs[0].dst[0]
    if dst in t.plios:
        return dst
    if dst in t.merges:
        down = t.out_of(dst)
        if len(down) != 1 or down[0].dst[0] not in t.plios:
            raise TopologyError(f"generated graph: {dst} does not reach an output PLIO")
        return down[0].dst[0]
    raise TopologyError(f"generated graph: {node}.out[0] goes to {dst}, not a PLIO or pktmerge")


def _pl_return(t: Topology, s_out: str) -> str | None:
    """The p_in PLIO the PL top's channel fed by ``s_out`` answers on (manifest: ``s<c>`` -> ``p<c>``)."""
    peer = t.plios[s_out].peer or ""
    m = re.fullmatch(r"(\w+)\.s(\d+)", peer)
    if not m:
        return None
    want = f"{m.group(1)}.p{m.group(2)}"
    for name, p in t.plios.items():
        if p.peer == want:
            return name
    return None


#: the ADF kernel functions of the projection GEMM cascades (:mod:`vckattn.hw.design.gemm_graph`)
GEMM_FUNCTION = "gemm_proj_"


@dataclass
class Cascade:
    """One projection GEMM cascade of the parsed graph: its ``stage`` (``qkv``, ``o``) and ``index`` (from the
    kernel names ``<stage><c>_k<j>``), its ``kernels`` in cascade order and their ``functions``, the PLIO each
    kernel's x window comes from (``x_plios``), the PLIO its weights come from (``w_plio``, through a pktsplit or
    straight), the PLIO its last kernel's output reaches (``out_plio``, through a pktmerge or straight) and one
    half of each buffer: ``x`` and ``w`` a kernel, ``out`` the last's."""

    stage: str
    index: int
    kernels: list[str]
    functions: list[str]
    x_plios: list[str]
    w_plio: str
    out_plio: str
    bytes: dict[str, list[int]]


def cascades(t: Topology) -> list[Cascade]:
    """The projection cascades of ``t`` by stage and index (TopologyError where one is not a chain from a first
    kernel through its middle ones to a last one, or a window has no size)."""
    nxt = {n.src[0]: n.dst[0] for n in t.nets if n.kind == "cascade"}
    found: dict[tuple[str, int], list[Kernel]] = {}
    for k in t.kernels.values():
        if not k.function.startswith(GEMM_FUNCTION):
            continue
        m = re.fullmatch(r"([a-z]+)(\d+)_k(\d+)", k.name)
        if not m:
            raise TopologyError(f"generated graph: GEMM kernel {k.name} is not named <stage><cascade>_k<j>")
        found.setdefault((m.group(1), int(m.group(2))), []).append(k)
    out = []
    for (stage, c), ks in sorted(found.items()):
        names = {k.name for k in ks}
        heads = [k for k in ks if k.function in ("gemm_proj_first", "gemm_proj_only_rq", "gemm_proj_only_y")]
        if len(heads) != 1:
            raise TopologyError(f"generated graph: cascade {stage}{c} has {len(heads)} first kernels")
        chain = [heads[0].name]
        while nxt.get(chain[-1]) in names:
            chain.append(nxt[chain[-1]])
        if len(chain) != len(ks):
            raise TopologyError(f"generated graph: cascade {stage}{c} chains {len(chain)} of its {len(ks)} kernels")

        def size(node: str, port: str) -> int:
            b = t.buffers.get((node, port))
            if b is None or b.bytes <= 0:
                raise TopologyError(f"generated graph: {node}.{port} has no window size")
            return b.bytes

        w = {_source_plio(t, k, "in[1]")[0] for k in chain}
        if len(w) != 1:
            raise TopologyError(f"generated graph: cascade {stage}{c} takes weights from {sorted(w)}")
        out.append(Cascade(stage, c, chain, [t.kernels[k].function for k in chain],
                           [_source_plio(t, k, "in[0]")[0] for k in chain], w.pop(), _sink_plio(t, chain[-1]),
                           {"x": [size(k, "in[0]") for k in chain], "w": [size(k, "in[1]") for k in chain],
                            "out": [size(chain[-1], "out[0]")]}))
    return out


def pipelines(t: Topology) -> list[Pipeline]:
    """The pipelines of ``t`` (TopologyError where the graph does not follow the engine's structure); a sublayer's
    GEMM cascades (:func:`cascades`) are not pipelines."""
    groups: dict[int, list[Kernel]] = {}
    for k in t.kernels.values():
        if k.function.startswith(GEMM_FUNCTION):
            continue
        m = re.match(r"p(\d+)_", k.name)
        if not m:
            raise TopologyError(f"generated graph: kernel {k.name} belongs to no pipeline (p<i>_...)")
        groups.setdefault(int(m.group(1)), []).append(k)
    out = []
    for i in sorted(groups):
        ks = groups[i]
        qk = sorted((k for k in ks if k.function == "qk_slice"), key=lambda k: k.index or 0)
        pvs = [k for k in ks if k.function.startswith("pv_slice")]
        rqs = [k for k in ks if k.function == "o_requant"]
        if not qk or len(pvs) != len(qk) or len(rqs) != 1:
            raise TopologyError(f"generated graph: pipeline {i} has {len(qk)} qk_slice, {len(pvs)} pv_slice and "
                                f"{len(rqs)} o_requant kernels")
        # the cascade: from the P.V kernel with no cascade in, along cascade nets, to the requantizer
        casc = {n.src[0]: n.dst[0] for n in t.nets if n.kind == "cascade"}
        fed = set(casc.values())
        heads = [k.name for k in pvs if k.name not in fed]
        if len(heads) != 1:
            raise TopologyError(f"generated graph: pipeline {i}'s P.V cascade has {len(heads)} starts")
        chain = [heads[0]]
        while casc.get(chain[-1]) in {k.name for k in pvs}:
            chain.append(casc[chain[-1]])
        if len(chain) != len(pvs) or casc.get(chain[-1]) != rqs[0].name:
            raise TopologyError(f"generated graph: pipeline {i}'s cascade {' -> '.join(chain)} does not run through "
                                f"all {len(pvs)} P.V kernels to {rqs[0].name}")
        q_srcs = {_source_plio(t, k.name, "in[0]")[0] for k in qk}
        if len(q_srcs) != 1:
            raise TopologyError(f"generated graph: pipeline {i}'s QK^T kernels take q from {sorted(q_srcs)}")
        q_plio = q_srcs.pop()
        fanout = [n.dst[0] for n in t.out_of(q_plio)]
        k_stream = [_source_plio(t, k.name, "in[1]")[0] for k in qk]
        channel = [_sink_plio(t, k.name) for k in qk]
        p_plio, v_stream = [], []
        for j, k in enumerate(qk):
            pv = next((x for x in pvs if x.index == k.index), None)
            if pv is None:
                raise TopologyError(f"generated graph: no P.V kernel of slice {k.index} in pipeline {i}")
            src = _source_plio(t, pv.name, "in[0]")[0]
            ret = _pl_return(t, channel[j])
            if ret != src:
                raise TopologyError(f"generated graph: {pv.name} takes P from {src}, but {k.name}'s scores "
                                    f"({channel[j]}) come back on {ret}")
            p_plio.append(src)
            v_stream.append(_source_plio(t, pv.name, "in[1]")[0])
        order = {x.index: x.name for x in pvs}
        o_plio = _sink_plio(t, rqs[0].name)

        def size(node: str, port: str) -> int:
            b = t.buffers.get((node, port))
            if b is None or b.bytes <= 0:
                raise TopologyError(f"generated graph: {node}.{port} has no window size")
            return b.bytes

        sizes = {"q": [size(k.name, "in[0]") for k in qk], "k": [size(k.name, "in[1]") for k in qk],
                 "s": [size(k.name, "out[0]") for k in qk], "p": [size(order[k.index], "in[0]") for k in qk],
                 "v": [size(order[k.index], "in[1]") for k in qk], "o": [size(rqs[0].name, "out[0]")]}
        out.append(Pipeline(i, [k.name for k in qk], chain, rqs[0].name, q_plio, fanout, k_stream, v_stream,
                            channel, p_plio, o_plio, sizes))
    return out

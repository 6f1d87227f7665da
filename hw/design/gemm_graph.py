"""The projection stages of a sublayer on the AIE array: the Q/K/V and W_O GEMM cascades, their x, w and out PLIOs,
where they go and the lines of ``graph.h`` that build them.

A stage runs ``cascades`` cascades of one GEMM build (:class:`~vckattn.hw.spec.gemm.GemmParams`: ``kernels``
kernels of ``kslice`` input features, ``rows`` × ``cols`` output tiles). The work is dealt as the closed-form model
deals it (:func:`vckattn.hw.perf.sublayer.deal_projection`), and the PLIOs are those it costs
(:func:`vckattn.hw.perf.sublayer.plios`):

- ``x``: one PLIO a K-slice a broadcast group (cascades that take the same X tiles in lock-step,
  :func:`~vckattn.hw.perf.sublayer.broadcast_groups`); the stream switch broadcasts it to the group's kernels of
  that K-slice (ADF: one output port connected to several kernels);
- ``w``: one PLIO a ``w_share`` cascades, packet-split to their kernels (packet id ``cascade·k + j`` in the group);
- ``out``: one PLIO a :func:`~vckattn.hw.perf.sublayer.out_share` cascades, their last kernels' output buffers
  packet-merged.

Placement: a cascade's kernels on consecutive tiles of one row in the row's cascade direction (east on even rows,
west on odd rows: AM009 "AI Engine Tile Architecture", cascade stream), in the tiles the attention pipelines leave
free (:func:`vckattn.hw.design.layout.layout`), rows from the bottom; each buffer in its kernel's tile; each PLIO on
the nearest PL interface column with a free slot of its direction (:data:`~vckattn.hw.design.layout.PL_COLUMNS`,
:data:`~vckattn.hw.design.layout.PLIOS_PER_COLUMN`).

The kernels of a stage name one source (``gemm_<stage>.cc``, :func:`render_source`: the stage's build parameters,
then ``hw/aie/engine/gemm_proj.cc``). Every tile's program is
compiled on its own (aiecompiler), so the two stages' kernels may share their names; the x86 simulator links every
kernel into one program and would need them apart (UNVERIFIED, like the rest of the graph: no aiecompiler here).
"""

from __future__ import annotations

from dataclasses import dataclass

from vckattn.hw.design import layout as lay
from vckattn.hw.spec.gemm import GemmParams, variant

__all__ = ["GemmPlacement", "GemmStage", "cascade_kernel", "place", "placed_stages", "render_body",
           "render_declarations", "render_source", "stages_of_split"]


@dataclass(frozen=True)
class GemmStage:
    """One projection stage: ``name`` (``qkv`` or ``o``), its GEMM build ``params``, ``cascades`` cascades, the
    cascades of each x broadcast group, of each w PLIO and of each out PLIO."""

    name: str
    params: GemmParams
    cascades: int
    x_groups: tuple[tuple[int, ...], ...]
    w_groups: tuple[tuple[int, ...], ...]
    out_groups: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        for what, groups in (("x", self.x_groups), ("w", self.w_groups), ("out", self.out_groups)):
            if sorted(c for g in groups for c in g) != list(range(self.cascades)):
                raise ValueError(f"{self.name}: the {what} groups do not cover cascades 0..{self.cascades - 1} once")

    @property
    def source(self) -> str:
        """The generated source its kernels compile from."""
        return f"gemm_{self.name}.cc"

    def kernels(self) -> list[str]:
        return [cascade_kernel(self.name, c, j) for c in range(self.cascades) for j in range(self.params.kernels)]

    def plios(self) -> list[tuple[str, str, str, int]]:
        """Every PLIO of the stage: (name, direction seen from the array, ``x`` / ``w`` / ``out``, its group)."""
        k = self.params.kernels
        return ([(f"{self.name}_x{g}_{j}", "in", "x", g) for g in range(len(self.x_groups)) for j in range(k)]
                + [(f"{self.name}_w{i}", "in", "w", i) for i in range(len(self.w_groups))]
                + [(f"{self.name}_out{i}", "out", "out", i) for i in range(len(self.out_groups))])

    def functions(self) -> dict[str, str]:
        """Kernel -> the ADF kernel function it runs (``gemm_proj_first<j>``, ... :mod:`~vckattn.hw.spec.gemm`)."""
        k, last = self.params.kernels, "rq" if self.params.out_bits == 8 else "y"
        names = {"first": "gemm_proj_first<{j}>", "mid": "gemm_proj_mid<{j}>", "last": f"gemm_proj_last_{last}<{{j}}>",
                 "only": f"gemm_proj_only_{last}"}
        return {cascade_kernel(self.name, c, j): names[variant(j, k)].format(j=j)
                for c in range(self.cascades) for j in range(k)}


def cascade_kernel(stage: str, c: int, j: int) -> str:
    """The graph's name of kernel ``j`` of cascade ``c`` of ``stage``."""
    return f"{stage}{c}_k{j}"


def stages_of_split(d_model: int, batch: int, qkv: GemmParams, o: GemmParams, n_qkv: int, n_o: int,
                    w_share: int, qkv_cols: int | None = None) -> list[GemmStage]:
    """The Q/K/V and W_O stages of a sublayer split (:class:`vckattn.hw.perf.sublayer.SublayerSplit`): its cascade
    counts, GEMM builds and w PLIO sharing, dealt and grouped as the model deals them for ``batch`` sequences
    (``qkv_cols``: the fused Q/K/V projection's outputs, default ``3·d_model``; fewer with grouped-query
    attention). Cascades that the dealing leaves without work are not built."""
    from vckattn.hw.perf import sublayer as sl

    out = []
    for name, p, n, out_cols in (("qkv", qkv, n_qkv, qkv_cols or 3 * d_model), ("o", o, n_o, d_model)):
        if p.k != d_model:
            raise ValueError(f"{name}: {p.kernels} kernels of {p.slices_text()} features is not d_model {d_model}")
        dealt = [u for u in sl.deal_projection(out_cols // p.cols, batch, n) if u]
        n = len(dealt)
        merge = sl.out_share(p)
        out.append(GemmStage(name, p, n, tuple(tuple(g) for g in sl.broadcast_groups(dealt)),
                             tuple(tuple(g) for g in sl.share_groups(n, w_share)),
                             tuple(tuple(g) for g in sl.share_groups(n, merge))))
    return out


def place(stages: list[GemmStage], placed: lay.Layout) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """Tiles of the stages' kernels and columns of their PLIOs, around the attention pipelines of ``placed``
    (module docstring). Raises :class:`~vckattn.hw.design.layout.LayoutError` when a cascade finds no run of free
    tiles or a PLIO no free column."""
    taken = set(placed.tiles.values())
    tiles: dict[str, tuple[int, int]] = {}
    centres: dict[tuple[str, int], float] = {}
    for st in stages:
        k = st.params.kernels
        for c in range(st.cascades):
            spot = _free_run(taken, k)
            if spot is None:
                raise lay.LayoutError(f"{st.name} cascade {c}: no {k} free tiles in a row of the "
                                      f"{lay.ARRAY_COLUMNS}x{lay.ARRAY_ROWS} array beside the attention pipelines")
            c0, row = spot
            for j in range(k):
                col = c0 + j if lay.cascade_step(row) > 0 else c0 + k - 1 - j
                tiles[cascade_kernel(st.name, c, j)] = (col, row)
                taken.add((col, row))
            centres[(st.name, c)] = c0 + (k - 1) / 2
    free = {c: dict(lay.PLIOS_PER_COLUMN) for c in lay.PL_COLUMNS}
    for name, d in placed.plios():
        free[placed.plio_columns[name]][d] -= 1
    columns: dict[str, int] = {}
    for st in stages:
        groups = {"x": st.x_groups, "w": st.w_groups, "out": st.out_groups}
        for name, d, kind, gi in st.plios():
            near = sum(centres[(st.name, c)] for c in groups[kind][gi]) / len(groups[kind][gi])
            options = [c for c in lay.PL_COLUMNS if free[c][d] > 0]
            if not options:
                raise lay.LayoutError(f"no PL interface column has a free {d}put PLIO for {name}")
            col = min(options, key=lambda c: (abs(c - near), c))
            free[col][d] -= 1
            columns[name] = col
    return tiles, columns


@dataclass(frozen=True)
class GemmPlacement:
    """A sublayer's projection stages with their kernels' tiles and their PLIOs' columns (:func:`place`)."""

    stages: tuple[GemmStage, ...]
    tiles: dict[str, tuple[int, int]]
    columns: dict[str, int]

    def declarations(self) -> list[str]:
        return [line for st in self.stages for line in render_declarations(st)]

    def body(self, mhz: str, runtime_ratio: float) -> list[str]:
        return [line for st in self.stages for line in render_body(st, self.tiles, self.columns, mhz, runtime_ratio)]


def placed_stages(stages: list[GemmStage], placed: lay.Layout) -> GemmPlacement:
    """:func:`place` as a :class:`GemmPlacement`."""
    tiles, columns = place(stages, placed)
    return GemmPlacement(tuple(stages), tiles, columns)


def _free_run(taken: set[tuple[int, int]], k: int) -> tuple[int, int] | None:
    """The first ``k`` consecutive free tiles of a row (rows from the bottom, columns from the left): (first column,
    row)."""
    for row in range(lay.ARRAY_ROWS):
        run = 0
        for col in range(lay.ARRAY_COLUMNS):
            run = run + 1 if (col, row) not in taken else 0
            if run == k:
                return col - k + 1, row
    return None


def render_declarations(st: GemmStage) -> list[str]:
    """The stage's members of the graph class: kernels, packet splits and merges, PLIOs."""
    k = st.params.kernels
    out = [f"    // {st.name}: {st.cascades} GEMM cascades of {k} kernels"]
    out.append("    adf::kernel " + ", ".join(st.kernels()) + ";")
    for i, g in enumerate(st.w_groups):
        if len(g) * k > 1:
            out.append(f"    adf::pktsplit<{len(g) * k}> {st.name}_w{i}_split;")
    for i, g in enumerate(st.out_groups):
        if len(g) > 1:
            out.append(f"    adf::pktmerge<{len(g)}> {st.name}_out{i}_merge;")
    ins = [n for n, d, _, _ in st.plios() if d == "in"]
    outs = [n for n, d, _, _ in st.plios() if d == "out"]
    out.append("    adf::input_plio " + ", ".join(ins) + ";")
    out.append("    adf::output_plio " + ", ".join(outs) + ";")
    return out


def render_body(st: GemmStage, tiles: dict[str, tuple[int, int]], columns: dict[str, int], mhz: str,
                runtime_ratio: float) -> list[str]:
    """The constructor lines that create, place and connect the stage (module docstring)."""
    p, k = st.params, st.params.kernels
    b = [f"        // ---- {st.name}: {st.cascades} cascades of {k} kernels of {p.slices_text()} features, "
         f"{p.rows} x {p.cols} int{p.out_bits} output tiles"]
    for name, d, _, _ in st.plios():
        kind = "input_plio" if d == "in" else "output_plio"
        b.append(f'        {name} = adf::{kind}::create("{name}", adf::plio_128_bits, "data/{name}.txt", {mhz});')
        b.append(f"        adf::location<adf::PLIO>({name}) = adf::shim({columns[name]});")
    w_of = {c: (i, g.index(c), len(g)) for i, g in enumerate(st.w_groups) for c in g}
    x_of = {c: gi for gi, g in enumerate(st.x_groups) for c in g}
    out_of = {c: (i, g.index(c), len(g)) for i, g in enumerate(st.out_groups) for c in g}
    for i, g in enumerate(st.w_groups):
        if len(g) * k > 1:
            b.append(f"        {st.name}_w{i}_split = adf::pktsplit<{len(g) * k}>::create();")
            b.append(f"        adf::connect<adf::pktstream>({st.name}_w{i}.out[0], {st.name}_w{i}_split.in[0]);")
    for i, g in enumerate(st.out_groups):
        if len(g) > 1:
            b.append(f"        {st.name}_out{i}_merge = adf::pktmerge<{len(g)}>::create();")
            b.append(f"        adf::connect<adf::pktstream>({st.name}_out{i}_merge.out[0], {st.name}_out{i}.in[0]);")
    funcs = st.functions()
    for c in range(st.cascades):
        wi, wpos, wn = w_of[c]
        for j in range(k):
            kern = cascade_kernel(st.name, c, j)
            col, row = tiles[kern]
            buf = p.buffers(j)
            b.append(f"        {kern} = adf::kernel::create({funcs[kern]});")
            b.append(f'        adf::source({kern}) = "{st.source}";')
            b.append(f"        adf::runtime<adf::ratio>({kern}) = {runtime_ratio};")
            b.append(f"        adf::location<adf::kernel>({kern}) = adf::tile({col}, {row});")
            b.append(f"        adf::connect<adf::window<{buf['x']}>>({st.name}_x{x_of[c]}_{j}.out[0], {kern}.in[0]);")
            if wn * k > 1:
                b.append(f"        adf::connect<adf::pktstream, adf::window<{buf['w']}>>({st.name}_w{wi}_split."
                         f"out[{wpos * k + j}], {kern}.in[1]);")
            else:
                b.append(f"        adf::connect<adf::window<{buf['w']}>>({st.name}_w{wi}.out[0], {kern}.in[1]);")
            b.append(f"        adf::async({kern}.in[1]);")
            if j > 0:
                b.append(f"        adf::connect<adf::cascade>({cascade_kernel(st.name, c, j - 1)}.out[0], "
                         f"{kern}.in[2]);")
            ports = ["in[0]", "in[1]"]
            if j == k - 1:
                oi, opos, on = out_of[c]
                if on > 1:
                    b.append(f"        adf::connect<adf::window<{buf['out']}>, adf::pktstream>({kern}.out[0], "
                             f"{st.name}_out{oi}_merge.in[{opos}]);")
                else:
                    b.append(f"        adf::connect<adf::window<{buf['out']}>>({kern}.out[0], "
                             f"{st.name}_out{oi}.in[0]);")
                ports.append("out[0]")
            for port in ports:
                b.append(f"        adf::location<adf::buffer>({kern}.{port}) = adf::location<adf::kernel>({kern});")
    return b


def render_source(st: GemmStage, banner: str) -> str:
    """``gemm_<stage>.cc`` (:attr:`GemmStage.source`): the stage's build parameters, then the kernels
    (``hw/aie/engine/gemm_proj.cc``, which reads them: ``gemm_kernels.h``)."""
    p = st.params
    return "\n".join([banner, f"// The {st.name} stage's GEMM kernels: {p.kernels} kernels of {p.slices_text()} "
                      f"features, {p.rows} x {p.cols} output tiles, int{p.out_bits} out.",
                      *(f"#define {d[2:].replace('=', ' ')}" for d in p.defines()),
                      '#include "gemm_proj.cc"  // hw/aie/engine', ""])

"""The sublayer's PL top (``hw/ENGINE.md``, "The sublayer's PL side"): every buffer path, the residual paths,
the descriptor and w routers and the register space, joined between the movers and the AIE graph's PLIOs; a
decoder's BHyT site A units between its X and U buffers and its RoPE units on the Q/K/V records.

Streams in from the movers: ``s_axis_x`` (the X mover: X of each sequence, as :mod:`.x_writer` takes it),
``s_axis_desc`` (the descriptor mover: every buffer reader's descriptors, routed, sequence by sequence:
:func:`vckattn.hw.spec.descriptors.routed_descriptors`), ``s_axis_w`` (the weight mover: ROUTE packets, each one
w stream's weight buffer). Out to the R writers: ``m_axis_r<i>``, one a W_O output PLIO.

Streams to and from the AIE graph:

* ``m_axis_xr<r>``: the X buffer's x readers (a decoder's: the U buffer's), one a Q/K/V x PLIO;
* ``s_axis_qkv<i>``: the Q/K/V cascades' output PLIOs, each into a re-tiler of the Q/K/V buffer (a decoder's
  through a RoPE unit first, :mod:`.rope_records`: its Q and K channels rotated);
* ``m_axis_qkv<r>``: the Q/K/V buffer's readers, the q, k and v streams of every attention pipeline in turn;
* ``s_axis_a<p>``: every attention pipeline's A records, each into an A writer of the A buffer;
* ``m_axis_ax<r>``: the A buffer's readers, one a W_O x PLIO;
* ``s_axis_y<i>``: the W_O output PLIOs, each into a residual path with the X rows of its records from the X
  buffer's residual reader ``i`` (:mod:`.residual_path`);
* ``m_axis_w<i>``: the w router's outputs, one a w PLIO.

A decoder's X buffer is read by its site readers, each into a site unit (:mod:`.site_unit`: BHyT site A on X's
token rows) that writes U into the U buffer; the U buffer's x readers feed the Q/K/V x PLIOs. The residual paths
read X itself.

The descriptor router's outputs, in order (its ``dest``; :attr:`TopParams.readers`): an encoder's X buffer's x
readers, then its residual readers; a decoder's X buffer's site readers, then its residual readers, then the U
buffer's x readers; then the Q/K/V buffer's readers, the A buffer's readers. One AXI4-Lite port ``s_axil``
(:mod:`.axil_decoder`), a window a register file (:func:`top_regmaps`): window 0 the status registers
(:func:`vckattn.golden.sublayer.sublayer_top_regmap`, the buffers' full slots too), then residual path ``i``'s unit
(:func:`vckattn.golden.sublayer.residual_regmap`), then a decoder's RoPE units, then its site units.

The parameters come from the performance model's split (``hw/design/pl_top.py``), so the top is wired as the model
costs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import wiring

from vckattn.golden.bhyt_int import bhyt_exact_regmap
from vckattn.golden.regmap import RegisterMap
from vckattn.golden.rope_int import rope_regmap
from vckattn.golden.sublayer import residual_regmap, sublayer_top_regmap
from vckattn.hw.spec.qkv_buffer import QkvLayout
from vckattn.hw.spec.slice_buffer import SliceLayout

from .axil import RegisterFile, axil_members
from .axil_decoder import AxilDecoder
from .buffer_path import BEAT_BITS, a_path, qkv_path, u_path, x_path
from .pipeline import axis_port
from .residual_path import ResidualPath
from .rope_records import RopeRecords
from .site_unit import LANES as SITE_LANES
from .stream_router import StreamRouter

__all__ = ["SublayerTop", "TopParams", "top_regmaps", "top_streams"]

_AXIS = ("tdata", "tvalid", "tready", "tlast")


@dataclass(frozen=True)
class TopParams:
    """What the top is made of (each as its path's function takes it, :mod:`.buffer_path`).

    Attributes:
        x_layout, x_write_banks, x_read_banks, residual_banks: The X path: its layout, the X writer's banks, each
            x reader's and each residual reader's.
        qkv_layout, qkv_write_banks, qkv_read_banks: The Q/K/V path.
        qkv_rows, qkv_cols: The Q/K/V cascades' record tiles.
        a_layout, a_write_banks, a_read_banks: The A path.
        heads, head_dim, q_rows, max_groups: The A writers' geometry.
        o_rows, o_cols: The W_O cascades' record tiles (a residual path's records).
        desc_depths: The descriptor router's FIFO entries, one a reader in the router's order (module docstring).
        w_streams: The w router's outputs.
        w_depth: Entries of each w router FIFO.
        lanes: int8 a beat of the residual readers' rows (the residual unit's lanes).
        max_d: Channels of the residual units' tables (and a decoder's site units' token buffers).
        site_banks: A decoder's site readers of the X buffer, each its banks (none: an encoder).
        u_layout, u_write_banks: A decoder's U buffer and each site unit's banks of it (its x readers:
            ``x_read_banks``).
        rope_rotated: A decoder's rotated channels of the Q/K/V output (its Q and K heads'); 0: no RoPE units.
        rope_lanes, rope_max_seq: Its RoPE units' lanes and table positions.
    """

    x_layout: SliceLayout
    x_write_banks: tuple[tuple[int, ...], ...]
    x_read_banks: tuple[tuple[int, ...], ...]
    residual_banks: tuple[tuple[int, ...], ...]
    qkv_layout: QkvLayout
    qkv_write_banks: tuple[tuple[int, ...], ...]
    qkv_read_banks: tuple[tuple[int, ...], ...]
    qkv_rows: int
    qkv_cols: int
    qkv_bank_beats: int
    a_layout: SliceLayout
    a_write_banks: tuple[tuple[int, ...], ...]
    a_read_banks: tuple[tuple[int, ...], ...]
    heads: int
    head_dim: int
    q_rows: int
    max_groups: int
    o_rows: int
    o_cols: int
    desc_depths: tuple[int, ...]
    w_streams: int
    w_depth: int = 4
    lanes: int = 4
    max_d: int = 1024
    site_banks: tuple[tuple[int, ...], ...] = ()
    u_layout: SliceLayout | None = None
    u_write_banks: tuple[tuple[int, ...], ...] = ()
    rope_rotated: int = 0
    rope_lanes: int = 16
    rope_max_seq: int = 512

    @property
    def decoder(self) -> bool:
        """Whether the top is a decoder's: site units between an X and a U buffer."""
        return self.u_layout is not None

    @property
    def readers(self) -> dict[str, int]:
        """Readers of each kind, in the descriptor router's order (module docstring)."""
        if self.decoder:
            return {"site": len(self.site_banks), "residual": len(self.residual_banks), "x": len(self.x_read_banks),
                    "qkv": len(self.qkv_read_banks), "a": len(self.a_read_banks)}
        return {"x": len(self.x_read_banks), "residual": len(self.residual_banks),
                "qkv": len(self.qkv_read_banks), "a": len(self.a_read_banks)}

    @property
    def rope_units(self) -> int:
        """RoPE units: one a Q/K/V output PLIO where channels are rotated."""
        return len(self.qkv_write_banks) if self.rope_rotated else 0

    @property
    def buffers(self) -> tuple[tuple[str, int], ...]:
        """Each buffer's name and slots, in the status register ``slots_full``'s order."""
        u = (("U", self.u_layout.slots),) if self.u_layout is not None else ()
        return (("X", self.x_layout.slots), *u, ("Q/K/V", self.qkv_layout.slots), ("A", self.a_layout.slots))


def top_regmaps(p: TopParams) -> tuple[list[tuple[str, RegisterMap]], int]:
    """The top's register windows without building it: each window's name (``status``, ``r<i>`` a residual unit,
    ``rope<i>`` a RoPE unit, ``site<i>`` a site unit) and register map, in window order, and the address bits of a
    window."""
    wins = [("status", sublayer_top_regmap(len(p.residual_banks), p.buffers))]
    wins += [(f"r{i}", residual_regmap(ResidualPath.LANES, p.max_d)) for i in range(len(p.residual_banks))]
    wins += [(f"rope{i}", rope_regmap(p.rope_lanes, p.head_dim, p.rope_max_seq)) for i in range(p.rope_units)]
    wins += [(f"site{i}", bhyt_exact_regmap(SITE_LANES, p.max_d)) for i in range(len(p.site_banks))]
    return wins, max(rm.addr_width for _, rm in wins)


def top_streams(p: TopParams) -> list[tuple[str, str]]:
    """The top's AXI4-Stream ports without building it, in its signature's order: (name, ``in`` or ``out``)."""
    n = p.readers
    out = [("s_axis_x", "in"), ("s_axis_desc", "in"), ("s_axis_w", "in")]
    out += [(f"m_axis_xr{r}", "out") for r in range(n["x"])]
    out += [(f"s_axis_qkv{i}", "in") for i in range(len(p.qkv_write_banks))]
    out += [(f"m_axis_qkv{r}", "out") for r in range(n["qkv"])]
    out += [(f"s_axis_a{i}", "in") for i in range(len(p.a_write_banks))]
    out += [(f"m_axis_ax{r}", "out") for r in range(n["a"])]
    for i in range(n["residual"]):
        out += [(f"s_axis_y{i}", "in"), (f"m_axis_r{i}", "out")]
    return out + [(f"m_axis_w{i}", "out") for i in range(p.w_streams)]


class SublayerTop(wiring.Component):
    """The encoder sublayer's PL top (module docstring); ports named there, plus ``clk``, ``rst``."""

    def __init__(self, p: TopParams) -> None:
        n = p.readers
        if sum(n.values()) != len(p.desc_depths):
            raise ValueError(f"{len(p.desc_depths)} descriptor FIFOs for {sum(n.values())} readers")
        if not p.residual_banks:
            raise ValueError("the top keeps X on chip: it needs a residual reader a W_O output PLIO")
        if not p.w_streams:
            raise ValueError("no w stream")
        self.p = p
        # a decoder's X is read by the site units and the residual paths, its U by the x readers
        self.x = x_path(p.x_layout, p.x_write_banks, p.site_banks if p.decoder else p.x_read_banks, p.residual_banks,
                        p.o_cols // 16, p.lanes)
        self.u = u_path(p.u_layout, p.u_write_banks, p.x_read_banks, p.max_d) if p.decoder else None
        self.qkv = qkv_path(p.qkv_layout, p.qkv_rows, p.qkv_cols, p.qkv_bank_beats, p.qkv_write_banks,
                            p.qkv_read_banks)
        self.a = a_path(p.a_layout, p.heads, p.head_dim, p.q_rows, p.max_groups, p.a_write_banks, p.a_read_banks)
        self.residual = [ResidualPath(p.o_rows, p.o_cols, p.max_d) for _ in p.residual_banks]
        self.rope = [RopeRecords(p.qkv_rows, p.qkv_cols, p.head_dim, p.rope_rotated, p.rope_max_seq, p.rope_lanes)
                     for _ in range(p.rope_units)]
        self.sites = list(self.u.units) if self.u is not None else []
        self.paths = [self.x, *([self.u] if self.u is not None else []), self.qkv, self.a]  # slots_full's order
        self.slots = tuple(path.buffer.slots for path in self.paths)
        self.desc_router = StreamRouter(p.desc_depths)
        self.w_router = StreamRouter([p.w_depth] * p.w_streams)
        wins, sub = top_regmaps(p)
        assert self.slots == tuple(n for _, n in p.buffers)
        units = [*self.residual, *self.rope, *self.sites]
        assert [u.regmap.describe() for u in units] == [rm.describe() for _, rm in wins[1:]]
        self.status = RegisterFile(wins[0][1])
        self.windows = [self.status, *units]
        self.decoder = AxilDecoder(sub, len(wins))
        members: dict = {}
        for name, d in top_streams(p):
            members |= axis_port(name, BEAT_BITS, sink=d == "in")
        members |= axil_members("s_axil", self.decoder.addr_width)
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        p, n = self.p, self.p.readers
        for name in ("x", "u", "qkv", "a", "desc_router", "w_router", "status", "decoder"):
            if getattr(self, name) is not None:
                m.submodules[name] = getattr(self, name)
        for i, rp in enumerate(self.residual):
            m.submodules[f"residual{i}"] = rp
        for i, rope in enumerate(self.rope):
            m.submodules[f"rope{i}"] = rope

        def stream(src: object, s: str, dst: object, d: str) -> None:
            """``src``'s stream ``s`` into ``dst``'s ``d`` (the top's own ports as either end)."""
            for k in _AXIS:
                a, b = getattr(src, f"{s}_{k}"), getattr(dst, f"{d}_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))

        stream(self, "s_axis_x", self.x, "s_axis_in0")
        stream(self, "s_axis_desc", self.desc_router, "s_axis")
        stream(self, "s_axis_w", self.w_router, "s_axis")
        # the descriptor router's outputs, a path's readers in turn (TopParams.readers)
        x_reads = self.u if self.u is not None else self.x  # the path of the x readers
        order = [(self.x, n["site"] + n["residual"]), (self.u, n["x"])] if p.decoder else \
            [(self.x, n["x"] + n["residual"])]
        dest = 0
        for path, readers in (*order, (self.qkv, n["qkv"]), (self.a, n["a"])):
            for r in range(readers):
                stream(self.desc_router, f"m_axis_out{dest}", path, f"s_axis_desc{r}")
                dest += 1
        for r in range(n["x"]):
            stream(x_reads, f"m_axis_rd{r}", self, f"m_axis_xr{r}")
        for i in range(len(self.sites)):  # a decoder's site readers into its site units, U's writers
            stream(self.x, f"m_axis_rd{i}", self.u, f"s_axis_in{i}")
        for i in range(len(p.qkv_write_banks)):
            if self.rope:
                stream(self, f"s_axis_qkv{i}", self.rope[i], "s_axis")
                stream(self.rope[i], "m_axis", self.qkv, f"s_axis_in{i}")
            else:
                stream(self, f"s_axis_qkv{i}", self.qkv, f"s_axis_in{i}")
        for r in range(n["qkv"]):
            stream(self.qkv, f"m_axis_rd{r}", self, f"m_axis_qkv{r}")
        for i in range(len(p.a_write_banks)):
            stream(self, f"s_axis_a{i}", self.a, f"s_axis_in{i}")
        for r in range(n["a"]):
            stream(self.a, f"m_axis_rd{r}", self, f"m_axis_ax{r}")
        first_res = n["site"] if p.decoder else n["x"]  # the X path's residual readers after its others
        for i, rp in enumerate(self.residual):
            stream(self.x, f"m_axis_rd{first_res + i}", rp, "s_axis_x")
            stream(self, f"s_axis_y{i}", rp, "s_axis_y")
            stream(rp, "m_axis_r", self, f"m_axis_r{i}")
        for i in range(p.w_streams):
            stream(self.w_router, f"m_axis_out{i}", self, f"m_axis_w{i}")

        # registers: a window a register file (top_regmaps)
        dec = self.decoder
        for k, member in dec.signature.members.items():
            if k.startswith("s_axil_"):
                a, b = getattr(self, k), getattr(dec, k)
                m.d.comb += (a.eq(b) if member.flow == wiring.Out else b.eq(a))
        for w, target in enumerate(self.windows):
            for k, member in target.signature.members.items():
                if not k.startswith("s_axil_"):
                    continue
                mine, theirs = getattr(target, k), dec.port(w, k[len("s_axil_"):])
                if member.flow == wiring.In:
                    m.d.comb += mine.eq(theirs if k[7:] not in ("awaddr", "araddr") else theirs[:len(mine)])
                else:
                    m.d.comb += theirs.eq(mine)
        regs = self.status.reg
        m.d.comb += [regs["bad_route"].eq(Cat(self.desc_router.bad_route, self.w_router.bad_route)),
                     regs["bad_record"].eq(Cat(*(rp.bad_record for rp in self.residual))),
                     regs["residual_paths"].eq(Const(len(self.residual), 8)),
                     regs["slots_full"].eq(Cat(*(path.slot_full for path in self.paths)))]
        return m

"""The encoder sublayer's PL top (``hw/ENGINE.md``, "The sublayer's PL side"): every buffer path, the residual paths,
the descriptor and w routers and the register space, joined between the movers and the AIE graph's PLIOs.

Streams in from the movers: ``s_axis_x`` (the X mover: X of each sequence, as :mod:`.x_writer` takes it),
``s_axis_desc`` (the descriptor mover: every buffer reader's descriptors, routed, sequence by sequence:
:func:`vckattn.hw.spec.descriptors.routed_descriptors`), ``s_axis_w`` (the weight mover: ROUTE packets, each one
w stream's weight buffer). Out to the R writers: ``m_axis_r<i>``, one a W_O output PLIO.

Streams to and from the AIE graph:

* ``m_axis_xr<r>``: the X buffer's x readers, one a Q/K/V x PLIO;
* ``s_axis_qkv<i>``: the Q/K/V cascades' output PLIOs, each into a re-tiler of the Q/K/V buffer;
* ``m_axis_qkv<r>``: the Q/K/V buffer's readers, the q, k and v streams of every attention pipeline in turn;
* ``s_axis_a<p>``: every attention pipeline's A records, each into an A writer of the A buffer;
* ``m_axis_ax<r>``: the A buffer's readers, one a W_O x PLIO;
* ``s_axis_y<i>``: the W_O output PLIOs, each into a residual path with the X rows of its records from the X
  buffer's residual reader ``i`` (:mod:`.residual_path`);
* ``m_axis_w<i>``: the w router's outputs, one a w PLIO.

The descriptor router's outputs, in order: the X buffer's x readers, then its residual readers, the Q/K/V buffer's
readers, the A buffer's readers (its ``dest``). One AXI4-Lite port ``s_axil`` (:mod:`.axil_decoder`): window 0 the
status registers (:func:`vckattn.golden.sublayer.sublayer_top_regmap`), window ``1 + i`` residual path ``i``'s unit
(:func:`vckattn.golden.sublayer.residual_regmap`). The status registers hold the buffers' full slots too.

The parameters come from the performance model's split (``hw/design/pl_top.py``), so the top is wired as the model
costs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import wiring

from vckattn.golden.regmap import RegisterMap
from vckattn.golden.sublayer import residual_regmap, sublayer_top_regmap
from vckattn.hw.spec.qkv_buffer import QkvLayout
from vckattn.hw.spec.slice_buffer import SliceLayout

from .axil import RegisterFile, axil_members
from .axil_decoder import AxilDecoder
from .buffer_path import BEAT_BITS, a_path, qkv_path, x_path
from .pipeline import axis_port
from .residual_path import ResidualPath
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
        max_d: Channels of the residual units' tables.
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

    @property
    def readers(self) -> dict[str, int]:
        """Readers of each buffer, in the descriptor router's order."""
        return {"x": len(self.x_read_banks), "residual": len(self.residual_banks),
                "qkv": len(self.qkv_read_banks), "a": len(self.a_read_banks)}


def top_regmaps(p: TopParams) -> tuple[RegisterMap, RegisterMap, int]:
    """The top's register windows without building it: (the status window's map, each residual unit's map, the
    address bits of a window)."""
    status = sublayer_top_regmap(len(p.residual_banks), (p.x_layout.slots, p.qkv_layout.slots, p.a_layout.slots))
    unit = residual_regmap(ResidualPath.LANES, p.max_d)
    return status, unit, max(status.addr_width, unit.addr_width)


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
        self.x = x_path(p.x_layout, p.x_write_banks, p.x_read_banks, p.residual_banks, p.o_cols // 16, p.lanes)
        self.qkv = qkv_path(p.qkv_layout, p.qkv_rows, p.qkv_cols, p.qkv_bank_beats, p.qkv_write_banks,
                            p.qkv_read_banks)
        self.a = a_path(p.a_layout, p.heads, p.head_dim, p.q_rows, p.max_groups, p.a_write_banks, p.a_read_banks)
        self.residual = [ResidualPath(p.o_rows, p.o_cols, p.max_d) for _ in p.residual_banks]
        self.slots = (self.x.buffer.slots, self.qkv.buffer.slots, self.a.buffer.slots)
        self.desc_router = StreamRouter(p.desc_depths)
        self.w_router = StreamRouter([p.w_depth] * p.w_streams)
        status, unit, sub = top_regmaps(p)
        assert self.slots == (p.x_layout.slots, p.qkv_layout.slots, p.a_layout.slots)
        assert all(r.unit.regmap.describe() == unit.describe() for r in self.residual)
        self.status = RegisterFile(status)
        self.decoder = AxilDecoder(sub, 1 + len(self.residual))
        members: dict = {}
        for name, d in top_streams(p):
            members |= axis_port(name, BEAT_BITS, sink=d == "in")
        members |= axil_members("s_axil", self.decoder.addr_width)
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        p, n = self.p, self.p.readers
        for name in ("x", "qkv", "a", "desc_router", "w_router", "status", "decoder"):
            m.submodules[name] = getattr(self, name)
        for i, rp in enumerate(self.residual):
            m.submodules[f"residual{i}"] = rp

        def stream(src: object, s: str, dst: object, d: str) -> None:
            """``src``'s stream ``s`` into ``dst``'s ``d`` (the top's own ports as either end)."""
            for k in _AXIS:
                a, b = getattr(src, f"{s}_{k}"), getattr(dst, f"{d}_{k}")
                m.d.comb += (a.eq(b) if k == "tready" else b.eq(a))

        stream(self, "s_axis_x", self.x, "s_axis_in0")
        stream(self, "s_axis_desc", self.desc_router, "s_axis")
        stream(self, "s_axis_w", self.w_router, "s_axis")
        # the descriptor router's outputs: x readers, residual readers, Q/K/V readers, A readers
        dest = 0
        for path, readers in ((self.x, n["x"] + n["residual"]), (self.qkv, n["qkv"]), (self.a, n["a"])):
            for r in range(readers):
                stream(self.desc_router, f"m_axis_out{dest}", path, f"s_axis_desc{r}")
                dest += 1
        for r in range(n["x"]):
            stream(self.x, f"m_axis_rd{r}", self, f"m_axis_xr{r}")
        for i in range(len(p.qkv_write_banks)):
            stream(self, f"s_axis_qkv{i}", self.qkv, f"s_axis_in{i}")
        for r in range(n["qkv"]):
            stream(self.qkv, f"m_axis_rd{r}", self, f"m_axis_qkv{r}")
        for i in range(len(p.a_write_banks)):
            stream(self, f"s_axis_a{i}", self.a, f"s_axis_in{i}")
        for r in range(n["a"]):
            stream(self.a, f"m_axis_rd{r}", self, f"m_axis_ax{r}")
        for i, rp in enumerate(self.residual):
            stream(self.x, f"m_axis_rd{n['x'] + i}", rp, "s_axis_x")
            stream(self, f"s_axis_y{i}", rp, "s_axis_y")
            stream(rp, "m_axis_r", self, f"m_axis_r{i}")
        for i in range(p.w_streams):
            stream(self.w_router, f"m_axis_out{i}", self, f"m_axis_w{i}")

        # registers: the decoder's window 0 the status, 1 + i residual path i's unit
        dec = self.decoder
        for k, member in dec.signature.members.items():
            if k.startswith("s_axil_"):
                a, b = getattr(self, k), getattr(dec, k)
                m.d.comb += (a.eq(b) if member.flow == wiring.Out else b.eq(a))
        for w, target in enumerate([self.status, *self.residual]):
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
                     regs["slots_full"].eq(Cat(self.x.slot_full, self.qkv.slot_full, self.a.slot_full))]
        return m

"""An AXI4-Lite address decoder: one slave port in, ``n`` register files behind it, each a window of the address space.

Slave ``i`` answers addresses ``[i · 2^sub_width, (i + 1) · 2^sub_width)``, seeing the address's low ``sub_width``
bits. One transaction at a time: a write is taken once both its address and its data are valid (AXI allows a slave
to wait for both: AMBA AXI and ACE Protocol Specification, IHI 0022, A3.3.1), passed to its slave, and its response
returned; a read likewise. An address past the last slave is answered SLVERR at once, its data dropped: nothing is
written, a read returns 0.

The sublayer's PL top (:mod:`.sublayer_top`) puts its status registers and every residual unit behind one.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring

from .axil import AXIL_DATA_WIDTH, RESP_SLVERR, axil_members

__all__ = ["AxilDecoder"]

_FIELDS = ("awaddr", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp", "bvalid", "bready",
           "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid", "rready")


class AxilDecoder(wiring.Component):
    """One AXI4-Lite slave port, ``n`` master ports (module docstring).

    Ports: ``s_axil_*`` (``addr_width`` = ``sub_width`` + the bits that number the slaves) and, per slave ``i``,
    the master side ``m<i>_axil_*`` (``sub_width`` address bits); ``clk``, ``rst``.

    Args:
        sub_width: Address bits of each slave's window (its register map's ``addr_width`` or more).
        n: Slaves (>= 1).
    """

    def __init__(self, sub_width: int, n: int) -> None:
        if n < 1 or sub_width < 2:
            raise ValueError(f"{n} slaves of {sub_width} address bits: at least one slave, at least 2 bits")
        self.sub_width, self.n = sub_width, n
        self.addr_width = sub_width + max(1, (n - 1).bit_length())
        members = dict(axil_members("s_axil", self.addr_width))
        for i in range(n):
            members |= {k: v.flip() for k, v in axil_members(f"m{i}_axil", sub_width).items()}
        super().__init__(members)

    def port(self, i: int, name: str) -> Signal:
        """Field ``name`` (``awaddr``, ``rdata``, ...) of master port ``i``."""
        return getattr(self, f"m{i}_axil_{name}")

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sel = Signal(range(max(2, self.n)))
        addr = Signal(self.sub_width)
        data = Signal(AXIL_DATA_WIDTH)
        strb = Signal(AXIL_DATA_WIDTH // 8)
        resp = Signal(2)
        aw_left, w_left = Signal(), Signal()
        m.d.comb += [self.port(i, "awaddr").eq(addr) for i in range(self.n)]
        m.d.comb += [self.port(i, "araddr").eq(addr) for i in range(self.n)]
        m.d.comb += [self.port(i, "wdata").eq(data) for i in range(self.n)]
        m.d.comb += [self.port(i, "wstrb").eq(strb) for i in range(self.n)]
        m.d.comb += [self.s_axil_bresp.eq(resp), self.s_axil_rresp.eq(resp), self.s_axil_rdata.eq(data)]
        index_bits = slice(self.sub_width, self.addr_width)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.s_axil_awvalid & self.s_axil_wvalid):
                    index = self.s_axil_awaddr[index_bits]
                    m.d.comb += [self.s_axil_awready.eq(1), self.s_axil_wready.eq(1)]
                    m.d.sync += [sel.eq(index), addr.eq(self.s_axil_awaddr[:self.sub_width]),
                                 data.eq(self.s_axil_wdata), strb.eq(self.s_axil_wstrb), aw_left.eq(1),
                                 w_left.eq(1), resp.eq(RESP_SLVERR)]
                    m.next = "WRITE"
                    with m.If(index >= self.n):
                        m.next = "B"
                with m.Elif(self.s_axil_arvalid):
                    index = self.s_axil_araddr[index_bits]
                    m.d.comb += self.s_axil_arready.eq(1)
                    m.d.sync += [sel.eq(index), addr.eq(self.s_axil_araddr[:self.sub_width]), data.eq(0),
                                 resp.eq(RESP_SLVERR)]
                    m.next = "READ"
                    with m.If(index >= self.n):
                        m.next = "R"
            with m.State("WRITE"):  # address and data to the slave, each once
                for i in range(self.n):
                    with m.If(sel == i):
                        m.d.comb += [self.port(i, "awvalid").eq(aw_left), self.port(i, "wvalid").eq(w_left)]
                        aw_done = ~aw_left | self.port(i, "awready")
                        w_done = ~w_left | self.port(i, "wready")
                        with m.If(self.port(i, "awready")):
                            m.d.sync += aw_left.eq(0)
                        with m.If(self.port(i, "wready")):
                            m.d.sync += w_left.eq(0)
                        with m.If(aw_done & w_done):
                            m.next = "WRITE_RESP"
            with m.State("WRITE_RESP"):
                for i in range(self.n):
                    with m.If(sel == i):
                        m.d.comb += self.port(i, "bready").eq(1)
                        with m.If(self.port(i, "bvalid")):
                            m.d.sync += resp.eq(self.port(i, "bresp"))
                            m.next = "B"
            with m.State("B"):
                m.d.comb += self.s_axil_bvalid.eq(1)
                with m.If(self.s_axil_bready):
                    m.next = "IDLE"
            with m.State("READ"):
                for i in range(self.n):
                    with m.If(sel == i):
                        m.d.comb += self.port(i, "arvalid").eq(1)
                        with m.If(self.port(i, "arready")):
                            m.next = "READ_DATA"
            with m.State("READ_DATA"):
                for i in range(self.n):
                    with m.If(sel == i):
                        m.d.comb += self.port(i, "rready").eq(1)
                        with m.If(self.port(i, "rvalid")):
                            m.d.sync += [data.eq(self.port(i, "rdata")), resp.eq(self.port(i, "rresp"))]
                            m.next = "R"
            with m.State("R"):
                m.d.comb += self.s_axil_rvalid.eq(1)
                with m.If(self.s_axil_rready):
                    m.next = "IDLE"
        return m

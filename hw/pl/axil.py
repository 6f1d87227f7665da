"""AXI4-Lite register block for PL kernels: runtime constants and host-writable memories.

The full description: ``docs/internals/hw.md``, section ``hw/pl/axil.py``.
"""

from __future__ import annotations

from amaranth.hdl import Module, ResetSignal, Shape, Signal, signed, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

# The declaration types live in golden/ (the register map is declared once, beside the golden model).
from vckattn.golden.regmap import _MIN_ADDR_WIDTH, AXIL_DATA_WIDTH, Mem, Reg, RegisterMap, _Entry

__all__ = [
    "AXIL_DATA_WIDTH",
    "RESP_OKAY",
    "RESP_SLVERR",
    "Mem",
    "Reg",
    "RegisterFile",
    "RegisterMap",
    "axil_members",
    "shape_of",
]

RESP_OKAY = 0
RESP_SLVERR = 2


def shape_of(spec: Reg | Mem) -> Shape:
    """The Amaranth shape of a declared register or memory entry."""
    return signed(spec.width) if spec.signed else unsigned(spec.width)


def axil_members(prefix: str = "s_axil", addr_width: int = _MIN_ADDR_WIDTH) -> dict[str, wiring.Member]:
    """Signature members of a flat AXI4-Lite *slave* port (32-bit data).

    Verilog port names are ``<prefix>_awaddr, _awvalid, _awready, _wdata, _wstrb, _wvalid,
    _wready, _bresp, _bvalid, _bready, _araddr, _arvalid, _arready, _rdata, _rresp, _rvalid,
    _rready`` -- the names cocotbext-axi's ``AxiLiteBus.from_prefix(dut, prefix)`` binds
    (``awprot``/``arprot`` are optional there and not generated here).
    """
    p = prefix
    return {
        f"{p}_awaddr": In(addr_width),
        f"{p}_awvalid": In(1),
        f"{p}_awready": Out(1),
        f"{p}_wdata": In(AXIL_DATA_WIDTH),
        f"{p}_wstrb": In(AXIL_DATA_WIDTH // 8),
        f"{p}_wvalid": In(1),
        f"{p}_wready": Out(1),
        f"{p}_bresp": Out(2),
        f"{p}_bvalid": Out(1),
        f"{p}_bready": In(1),
        f"{p}_araddr": In(addr_width),
        f"{p}_arvalid": In(1),
        f"{p}_arready": Out(1),
        f"{p}_rdata": Out(AXIL_DATA_WIDTH),
        f"{p}_rresp": Out(2),
        f"{p}_rvalid": Out(1),
        f"{p}_rready": In(1),
    }


_AXIL_FIELDS = tuple(k.removeprefix("s_axil_") for k in axil_members("s_axil"))


class RegisterFile(wiring.Component):
    """AXI4-Lite slave implementing a :class:`RegisterMap` (semantics: module docstring).

    Ports: the flat ``s_axil_*`` members of :func:`axil_members` (``regmap.addr_width``), in
    the ``sync`` domain (``clk``/``rst``; all state resets synchronously, memory contents do
    not).

    Kernel-side attributes:

    * ``reg[name]``: a ``Signal`` of each :class:`Reg`'s shape (signed if declared). ``rw``
      registers are driven here; ``ro`` registers must be driven by the kernel (an undriven
      one reads as its ``reset`` value).
    * ``mem_ports[name]``: list of the memory's ``read_ports`` kernel read ports
      (``amaranth.lib.memory.ReadPort``: ``addr``, ``en``, ``data``; 1-cycle latency).
    * ``memories[name]``: the ``amaranth.lib.memory.Memory`` itself.

    Args:
        regmap: The register map.
    """

    def __init__(self, regmap: RegisterMap) -> None:
        self.regmap = regmap
        self.reg: dict[str, Signal] = {
            r.name: Signal(shape_of(r), init=r.reset, name=f"reg_{r.name}") for r in regmap.regs
        }
        self.memories: dict[str, memory.Memory] = {}
        self.mem_ports: dict[str, list[memory.ReadPort]] = {}
        self._axi_wr: dict[str, memory.WritePort] = {}
        self._axi_rd: dict[str, memory.ReadPort] = {}
        for spec in regmap.mems:
            mem = memory.Memory(shape=shape_of(spec), depth=spec.depth, init=list(spec.init))
            self.memories[spec.name] = mem
            self._axi_wr[spec.name] = mem.write_port()
            if spec.readback:
                self._axi_rd[spec.name] = mem.read_port()
            self.mem_ports[spec.name] = [mem.read_port() for _ in range(spec.read_ports)]
        super().__init__(axil_members("s_axil", regmap.addr_width))
        # Bus state, named here for the formal proofs' invariants (vckattn.hw.pl.formal.AxilLedger):
        # the held AW (word address) and W, the pending B, the read in progress and the pending R.
        wa = regmap.addr_width - 2
        self.aw_full = Signal(name="aw_full")
        self.aw_word = Signal(wa, name="aw_word")
        self.w_full = Signal(name="w_full")
        self.w_data = Signal(AXIL_DATA_WIDTH, name="w_data")
        self.w_strb = Signal(AXIL_DATA_WIDTH // 8, name="w_strb")
        self.b_valid = Signal(name="b_valid")
        self.ar_busy = Signal(name="ar_busy")
        self.r_valid = Signal(name="r_valid")

    def mem_read_port(self, name: str, index: int = 0) -> memory.ReadPort:
        """Kernel read port ``index`` of memory ``name`` (synchronous, 1-cycle latency)."""
        ports = self.mem_ports[name]
        if not 0 <= index < len(ports):
            raise IndexError(f"memory {name!r} has {len(ports)} kernel read port(s); asked for {index}")
        return ports[index]

    def connect_axil(self, m: Module, outer: object, prefix: str = "s_axil") -> None:
        """Wire ``outer``'s flat AXI4-Lite ports ``<prefix>_*`` to this register file.

        ``outer`` is the kernel component whose signature includes
        ``axil_members(prefix, regmap.addr_width)``.
        """
        for f in _AXIL_FIELDS:
            mine = getattr(self, f"s_axil_{f}")
            theirs = getattr(outer, f"{prefix}_{f}")
            if self.signature.members[f"s_axil_{f}"].flow == wiring.In:
                m.d.comb += mine.eq(theirs)
            else:
                m.d.comb += theirs.eq(mine)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        rm = self.regmap
        wa = rm.addr_width - 2  # word-address bits
        for name, mem in self.memories.items():
            m.submodules[f"mem_{name}"] = mem

        def word_pattern(entry: _Entry) -> str | int:
            """Switch pattern for the entry's word(s): exact word or a memory window."""
            word = entry.offset >> 2
            if entry.kind != "mem":
                return word
            k = entry.spec.index_bits if isinstance(entry.spec, Mem) else 0
            if k == 0:
                return word
            return format(word >> k, f"0{wa - k}b") + "-" * k

        # ---------------- write path ----------------
        aw_full, aw_addr, w_full = self.aw_full, self.aw_word, self.w_full
        w_data, w_strb, b_valid = self.w_data, self.w_strb, self.b_valid
        b_resp = Signal(2)
        do_write = Signal()
        m.d.comb += [
            self.s_axil_awready.eq(~aw_full),
            self.s_axil_wready.eq(~w_full),
            self.s_axil_bvalid.eq(b_valid),
            self.s_axil_bresp.eq(b_resp),
            # not in a reset cycle: a memory write would land while the reset drops its response
            do_write.eq(aw_full & w_full & ~b_valid & ~ResetSignal()),
        ]
        with m.If(self.s_axil_awvalid & ~aw_full):
            m.d.sync += [aw_full.eq(1), aw_addr.eq(self.s_axil_awaddr[2:])]
        with m.If(self.s_axil_wvalid & ~w_full):
            m.d.sync += [w_full.eq(1), w_data.eq(self.s_axil_wdata), w_strb.eq(self.s_axil_wstrb)]
        with m.If(b_valid & self.s_axil_bready):
            m.d.sync += b_valid.eq(0)
        for name, wp in self._axi_wr.items():
            spec = rm.mem(name)
            m.d.comb += [wp.addr.eq(aw_addr[: spec.index_bits]), wp.data.eq(w_data[: spec.width])]

        with m.If(do_write):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), b_valid.eq(1), b_resp.eq(RESP_SLVERR)]
            with m.Switch(aw_addr):
                for e in rm.entries():
                    if e.access == "ro":
                        continue
                    with m.Case(word_pattern(e)):
                        if e.kind == "reg":
                            sig = self.reg[e.name]
                            for b in range((e.width + 7) // 8):
                                lo, hi = 8 * b, min(8 * b + 8, e.width)
                                with m.If(w_strb[b]):
                                    m.d.sync += sig[lo:hi].eq(w_data[lo:hi])
                            m.d.sync += b_resp.eq(RESP_OKAY)
                        else:
                            spec = rm.mem(e.name)
                            with m.If(aw_addr[: spec.index_bits] < spec.depth):
                                m.d.comb += self._axi_wr[e.name].en.eq(1)
                                m.d.sync += b_resp.eq(RESP_OKAY)

        # ---------------- read path ----------------
        ar_busy = self.ar_busy  # AR accepted last cycle; memory read data is valid now
        ar_addr = Signal(wa)
        r_valid = self.r_valid
        r_data = Signal(AXIL_DATA_WIDTH)
        r_resp = Signal(2)
        ar_fire = Signal()
        m.d.comb += [
            self.s_axil_arready.eq(~ar_busy & ~r_valid),
            ar_fire.eq(self.s_axil_arvalid & ~ar_busy & ~r_valid),
            self.s_axil_rvalid.eq(r_valid),
            self.s_axil_rdata.eq(r_data),
            self.s_axil_rresp.eq(r_resp),
        ]
        for name, rp in self._axi_rd.items():
            spec = rm.mem(name)
            m.d.comb += [rp.addr.eq(self.s_axil_araddr[2 : 2 + spec.index_bits]), rp.en.eq(ar_fire)]
        with m.If(ar_fire):
            m.d.sync += [ar_busy.eq(1), ar_addr.eq(self.s_axil_araddr[2:])]
        with m.If(r_valid & self.s_axil_rready):
            m.d.sync += r_valid.eq(0)
        with m.If(ar_busy):
            m.d.sync += [ar_busy.eq(0), r_valid.eq(1), r_data.eq(0), r_resp.eq(RESP_SLVERR)]
            with m.Switch(ar_addr):
                for e in rm.entries():
                    if e.access == "wo":
                        continue
                    with m.Case(word_pattern(e)):
                        if e.kind == "const":
                            m.d.sync += [r_data.eq(e.value), r_resp.eq(RESP_OKAY)]
                        elif e.kind == "reg":
                            # .eq() sign-extends a signed source to the 32-bit r_data.
                            m.d.sync += [r_data.eq(self.reg[e.name]), r_resp.eq(RESP_OKAY)]
                        else:
                            spec = rm.mem(e.name)
                            with m.If(ar_addr[: spec.index_bits] < spec.depth):
                                m.d.sync += [r_data.eq(self._axi_rd[e.name].data), r_resp.eq(RESP_OKAY)]
        return m

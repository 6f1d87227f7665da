"""Register maps: the one declaration of every hardware kernel's AXI4-Lite interface.

The full description: ``docs/internals/golden.md``, section ``golden/regmap.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

__all__ = ["AXIL_DATA_WIDTH", "Mem", "Reg", "RegisterMap", "RegisterValues", "RegisterWrite", "from_word", "fits",
           "to_word", "wide_names", "wide_regs", "wide_values"]

#: AXI4-Lite data width used by every register block (bits).
AXIL_DATA_WIDTH = 32
_MIN_ADDR_WIDTH = 12  # 4 KiB: the smallest aperture Vivado's address editor assigns


def fits(value: int, width: int, signed: bool) -> bool:
    """Whether ``value`` is representable in ``width`` bits (two's complement when ``signed``)."""
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    return lo <= value <= hi


def to_word(value: int) -> int:
    """``value`` as a 32-bit two's-complement word."""
    return int(value) & 0xFFFFFFFF


def from_word(word: int, width: int = 32, signed: bool = False) -> int:
    """The low ``width`` bits of ``word``, sign-extended when ``signed``."""
    v = int(word) & ((1 << width) - 1)
    return v - (1 << width) if signed and v >> (width - 1) else v


def wide_regs(name: str, bits: int, doc: str) -> list[Reg]:
    """An unsigned ``bits``-wide value as one register (<= 32 bits) or two words, ``<name>_lo`` (bits
    [31:0]) and ``<name>_hi`` (the rest); :func:`wide_values` splits a value the same way."""
    if bits <= AXIL_DATA_WIDTH:
        return [Reg(name, bits, doc=doc)]
    if bits > 2 * AXIL_DATA_WIDTH:
        raise ValueError(f"{name}: {bits} bits do not fit two 32-bit registers")
    return [Reg(f"{name}_lo", AXIL_DATA_WIDTH, doc=f"{doc}, bits [31:0]"),
            Reg(f"{name}_hi", bits - AXIL_DATA_WIDTH, doc=f"{doc}, bits [{bits - 1}:32]")]


def wide_names(name: str, bits: int) -> list[str]:
    """The register names that hold an unsigned ``bits``-wide value, low word first (:func:`wide_regs`)."""
    return [r.name for r in wide_regs(name, bits, "")]


def wide_values(name: str, value: int, bits: int) -> dict[str, int]:
    """``{register name: value}`` of an unsigned ``bits``-wide value, split as :func:`wide_regs` declares it."""
    value = int(value)
    if not 0 <= value < 1 << bits:
        raise ValueError(f"{name} = {value} does not fit {bits} unsigned bits")
    if bits <= AXIL_DATA_WIDTH:
        return {name: value}
    return {f"{name}_lo": value & 0xFFFFFFFF, f"{name}_hi": value >> AXIL_DATA_WIDTH}


@dataclass(frozen=True)
class RegisterWrite:
    """One register write: the register's ``name``, byte ``offset``, ``value`` and the 32-bit ``word``."""

    name: str
    offset: int
    width: int
    signed: bool
    value: int

    @property
    def word(self) -> int:
        return to_word(self.value)


@dataclass(frozen=True)
class Reg:
    """A scalar register of 1..32 bits.

    Args:
        name: Register name (unique in the map; ``ID``/``VERSION`` are reserved).
        width: Width in bits, 1..32.
        signed: Two's-complement value; reads sign-extend it to 32 bits.
        reset: Value after reset (in range for ``width``/``signed``).
        doc: One-line description (goes into the manifest).
        access: ``"rw"`` (host-written, read by the kernel) or ``"ro"`` (driven by the kernel,
            e.g. a status counter; host writes answer SLVERR).
    """

    name: str
    width: int
    signed: bool = False
    reset: int = 0
    doc: str = ""
    access: str = "rw"

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not 1 <= self.width <= AXIL_DATA_WIDTH:
            raise ValueError(f"register {self.name}: width must be 1..32, got {self.width}")
        if self.access not in ("rw", "ro"):
            raise ValueError(f"register {self.name}: access must be 'rw' or 'ro', got {self.access!r}")
        _check_range(self.name, self.reset, self.width, self.signed)


@dataclass(frozen=True)
class Mem:
    """A host-writable on-chip memory (one 32-bit AXI word per entry).

    Args:
        name: Memory name (unique in the map).
        width: Entry width in bits, 1..32.
        depth: Number of entries (>= 1).
        signed: Entries are two's complement; reads sign-extend them.
        doc: One-line description.
        read_ports: Number of kernel read ports (e.g. one per lane), >= 0.
        init: Initial contents (after configuration, not re-applied by reset); missing
            entries are 0.
        readback: Whether the host can read entries back (costs one more read port).
    """

    name: str
    width: int
    depth: int
    signed: bool = False
    doc: str = ""
    read_ports: int = 1
    init: tuple[int, ...] = field(default=())
    readback: bool = True

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not 1 <= self.width <= AXIL_DATA_WIDTH:
            raise ValueError(f"memory {self.name}: width must be 1..32, got {self.width}")
        if self.depth < 1:
            raise ValueError(f"memory {self.name}: depth must be >= 1, got {self.depth}")
        if self.read_ports < 0:
            raise ValueError(f"memory {self.name}: read_ports must be >= 0")
        if len(self.init) > self.depth:
            raise ValueError(f"memory {self.name}: {len(self.init)} init values for depth {self.depth}")
        object.__setattr__(self, "init", tuple(int(v) for v in self.init))
        for v in self.init:
            _check_range(self.name, v, self.width, self.signed)

    @property
    def index_bits(self) -> int:
        """Bits of the entry index (``ceil(log2(depth))``, 0 for depth 1)."""
        return (self.depth - 1).bit_length()

    @property
    def window_bytes(self) -> int:
        """Size of the memory's address window: ``4 * 2**index_bits`` bytes."""
        return 4 << self.index_bits


def _check_name(name: str) -> None:
    if not name.isidentifier():
        raise ValueError(f"register/memory name must be an identifier, got {name!r}")


def _check_range(name: str, value: int, width: int, is_signed: bool) -> None:
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if is_signed else (0, (1 << width) - 1)
    if not lo <= value <= hi:
        raise ValueError(f"{name}: value {value} out of range [{lo}, {hi}] for {width}-bit")


@dataclass(frozen=True)
class _Entry:
    name: str
    kind: str  # "const", "reg", "mem"
    offset: int
    width: int
    signed: bool
    access: str
    doc: str
    spec: Reg | Mem | None = None
    value: int | None = None  # constants only


class RegisterMap:
    """Deterministic byte-offset assignment for a kernel's registers and memories.

    See the module docstring for the layout. ``offset()`` values are relative to the register
    block (what the slave decodes); ``base`` is only added in ``address()`` and in the
    manifest (the system address of the block; must be aligned to ``2**addr_width``).

    Args:
        regs: Registers, placed at ``0x08``, ``0x0C``, ... in this order.
        mems: Memories, each in its own power-of-two aligned window after the registers.
        base: System base address of the block (documentation/manifest only).
        ident: Value of the read-only ``ID`` register at ``0x00`` (a 32-bit magic).
        version: Value of the read-only ``VERSION`` register at ``0x04``.
        addr_width: AXI4-Lite address width; default the larger of 12 (4 KiB) and what the
            map needs.
    """

    def __init__(
        self,
        regs: Sequence[Reg],
        mems: Sequence[Mem] = (),
        base: int = 0,
        *,
        ident: int = 0,
        version: int = 1,
        addr_width: int | None = None,
    ) -> None:
        self.regs: tuple[Reg, ...] = tuple(regs)
        self.mems: tuple[Mem, ...] = tuple(mems)
        for name, v in (("ID", ident), ("VERSION", version)):
            if not 0 <= v < 1 << 32:
                raise ValueError(f"{name} must be a 32-bit unsigned constant, got {v:#x}")
        self.ident = ident
        self.version = version
        entries = [
            _Entry("ID", "const", 0x00, 32, False, "ro", "kernel identification constant", value=ident),
            _Entry("VERSION", "const", 0x04, 32, False, "ro", "register map / kernel version", value=version),
        ]
        offset = 0x08
        for r in self.regs:
            entries.append(_Entry(r.name, "reg", offset, r.width, r.signed, r.access, r.doc, spec=r))
            offset += 4
        for mem in self.mems:
            size = mem.window_bytes
            offset = (offset + size - 1) // size * size
            access = "rw" if mem.readback else "wo"
            entries.append(_Entry(mem.name, "mem", offset, mem.width, mem.signed, access, mem.doc, spec=mem))
            offset += size
        self.size = offset  # bytes spanned by the map
        names = [e.name for e in entries]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate register/memory names: {sorted(dup)}")
        self._entries = {e.name: e for e in entries}
        need = max((self.size - 1).bit_length(), 2)
        if addr_width is None:
            addr_width = max(need, _MIN_ADDR_WIDTH)
        elif addr_width < need:
            raise ValueError(f"addr_width {addr_width} too small: the map spans {self.size:#x} bytes")
        self.addr_width = addr_width
        if base % (1 << addr_width):
            raise ValueError(f"base {base:#x} must be aligned to the {1 << addr_width:#x}-byte aperture")
        self.base = base

    def offset(self, name: str) -> int:
        """Byte offset of a register or of entry 0 of a memory, relative to the block."""
        return self._entry(name).offset

    def address(self, name: str) -> int:
        """System address: ``base + offset(name)``."""
        return self.base + self.offset(name)

    def reg(self, name: str) -> Reg:
        e = self._entry(name)
        if e.kind != "reg":
            raise KeyError(f"{name!r} is not a Reg")
        assert isinstance(e.spec, Reg)
        return e.spec

    def mem(self, name: str) -> Mem:
        e = self._entry(name)
        if e.kind != "mem":
            raise KeyError(f"{name!r} is not a Mem")
        assert isinstance(e.spec, Mem)
        return e.spec

    def is_signed(self, name: str) -> bool:
        return self._entry(name).signed

    def width(self, name: str) -> int:
        return self._entry(name).width

    def _entry(self, name: str) -> _Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"no register or memory named {name!r}; have {list(self._entries)}") from None

    def entries(self) -> Iterable[_Entry]:
        return self._entries.values()

    def describe(self) -> list[dict[str, object]]:
        """Manifest of the map: one dict per ID/VERSION/register/memory, in address order.

        Keys: ``name, kind ("const"|"reg"|"mem"), offset, address, width, signed, access
        ("ro"|"rw"|"wo"), doc``; plus ``value`` (constants), ``reset`` (registers),
        ``depth, window_bytes, read_ports`` (memories).
        """
        out: list[dict[str, object]] = []
        for e in self._entries.values():
            d: dict[str, object] = {
                "name": e.name,
                "kind": e.kind,
                "offset": e.offset,
                "address": self.base + e.offset,
                "width": e.width,
                "signed": e.signed,
                "access": e.access,
                "doc": e.doc,
            }
            if e.kind == "const":
                d["value"] = e.value
            elif isinstance(e.spec, Reg):
                d["reset"] = e.spec.reset
            elif isinstance(e.spec, Mem):
                d.update(depth=e.spec.depth, window_bytes=e.spec.window_bytes, read_ports=e.spec.read_ports)
            out.append(d)
        return out


    # ------------------------------------------------------------------ values -> words (the one encoding)

    @property
    def writable(self) -> tuple[Reg, ...]:
        """The ``rw`` registers in declaration order: what the host writes per layer."""
        return tuple(r for r in self.regs if r.access == "rw")

    def word(self, name: str, value: int) -> int:
        """The 32-bit word that sets register ``name`` to ``value`` (ValueError if it does not fit)."""
        e = self._entry(name)
        if not fits(int(value), e.width, e.signed):
            raise ValueError(f"{name} {value} does not fit {e.width} {'signed' if e.signed else 'unsigned'} bits")
        return to_word(value)

    def value(self, name: str, word: int) -> int:
        """The value a read of register ``name`` returning ``word`` stands for."""
        e = self._entry(name)
        return from_word(word, e.width, e.signed)

    def writes(self, values: Mapping[str, int | Sequence[int]]) -> list[RegisterWrite]:
        """The writes that program every ``rw`` register, in declaration (address) order, then the
        memories ``values`` names (a sequence of entries each, written from entry 0 at its window's
        offset; the write of entry ``i`` is named ``<mem>[i]``).

        ``values`` must name exactly the writable registers plus any memories: a missing or unknown name,
        a memory with more entries than its depth, or a value that does not fit is a ValueError naming it.
        """
        names = [r.name for r in self.writable]
        mems = [m.name for m in self.mems]
        extra = sorted(set(values) - set(names) - set(mems))
        if extra:
            raise ValueError(f"no writable register for {', '.join(extra)} (the map has {', '.join(names + mems)})")
        missing = [n for n in names if n not in values]
        if missing:
            raise ValueError(f"no value for register(s) {', '.join(missing)}")
        out = []
        for r in self.writable:
            v = values[r.name]
            if not isinstance(v, (int, np.integer)):
                raise ValueError(f"register {r.name} takes one value, got {type(v).__name__}")
            v = int(v)
            self.word(r.name, v)
            out.append(RegisterWrite(r.name, self.offset(r.name), r.width, r.signed, v))
        for m in self.mems:
            if m.name not in values:
                continue
            entries = values[m.name]
            if isinstance(entries, (int, np.integer)):
                raise ValueError(f"memory {m.name} takes a sequence of entries, got one value")
            entries = [int(e) for e in entries]
            if len(entries) > m.depth:
                raise ValueError(f"memory {m.name}: {len(entries)} entries for depth {m.depth}")
            for i, v in enumerate(entries):
                if not fits(v, m.width, m.signed):
                    raise ValueError(f"{m.name}[{i}] {v} does not fit {m.width} {'signed' if m.signed else 'unsigned'} "
                                     "bits")
                out.append(RegisterWrite(f"{m.name}[{i}]", self.offset(m.name) + 4 * i, m.width, m.signed, v))
        return out

    @classmethod
    def from_describe(cls, entries: Sequence[Mapping[str, Any]]) -> RegisterMap:
        """The map a manifest records (:meth:`describe`'s list), rebuilt. The recorded offsets are kept
        as they are: a manifest describes what was built, and the host writes where it says."""
        regs, mems, ident, version = [], [], 0, 1
        for e in entries:
            if e["kind"] == "const":
                ident, version = (int(e["value"]), version) if e["name"] == "ID" else (ident, int(e["value"]))
            elif e["kind"] == "reg":
                regs.append(Reg(e["name"], int(e["width"]), bool(e["signed"]), int(e.get("reset", 0)),
                                str(e.get("doc", "")), str(e["access"])))
            else:
                mems.append(Mem(e["name"], int(e["width"]), int(e.get("depth", 1)), bool(e["signed"]),
                                str(e.get("doc", "")), int(e.get("read_ports", 1)), readback=e["access"] != "wo"))
        rm = cls(regs, mems, ident=ident, version=version)
        recorded = {e["name"]: int(e["offset"]) for e in entries}
        rm._entries = {n: replace(x, offset=recorded.get(n, x.offset)) for n, x in rm._entries.items()}
        return rm


class RegisterValues(Mapping[str, int]):
    """The runtime register values of one kernel for one layer, checked against its declaration.

    A subclass names its kernel's map (``regmap``, a :class:`RegisterMap` of the default build) and any
    host-side fields that are not registers (``extra``, e.g. SwiftMax's ``out_frac``). Values are given
    by keyword (or positionally, in declaration order) and read as attributes or as a mapping::

        regs = SwiftMaxRegisters(a_mult=..., ..., out_frac=8)
        regs.a_mult, regs["a_mult"], regs.as_dict(), regs.registers()

    Frozen and hashable (caches key on it). Range checks against a particular build's widths are the
    kernel's own ``check_registers``; here every name must be present exactly once.
    """

    regmap: RegisterMap
    extra: tuple[str, ...] = ()

    def __init__(self, *args: int, **kwargs: int) -> None:
        names = self.names()
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} values, got {len(args)}")
        given = dict(zip(names, args, strict=False))
        dup = sorted(set(given) & set(kwargs))
        if dup:
            raise TypeError(f"{type(self).__name__}: {', '.join(dup)} given twice")
        given.update(kwargs)
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(unknown)} (fields: {', '.join(names)})")
        missing = [n for n in names if n not in given]
        if missing:
            raise TypeError(f"{type(self).__name__} needs {', '.join(missing)}")
        object.__setattr__(self, "_values", tuple((n, int(given[n])) for n in names))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Field names: the writable registers in declaration order, then ``extra``."""
        return (*(r.name for r in cls.regmap.writable), *cls.extra)

    def __getattr__(self, name: str) -> int:
        if name.startswith("_"):
            raise AttributeError(name)
        for k, v in object.__getattribute__(self, "_values"):
            if k == name:
                return v
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __getitem__(self, name: str) -> int:
        return dict(self._values)[name]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return (k for k, _ in self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values == self._values  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in self._values)})"

    def as_dict(self) -> dict[str, int]:
        """Every field (registers, then ``extra``) by name."""
        return dict(self._values)

    def registers(self) -> dict[str, int]:
        """Only the register values (what :meth:`RegisterMap.writes` takes)."""
        return {k: v for k, v in self._values if k not in self.extra}

    def replace(self, **changes: int) -> RegisterValues:
        """A copy with ``changes`` applied."""
        return type(self)(**{**self.as_dict(), **changes})

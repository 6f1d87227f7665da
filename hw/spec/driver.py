"""The one host driver of every register-programmed kernel: ``program(port, regmap, values)``.

The full description: ``docs/internals/hw.md``, section ``hw/spec/driver.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from vckattn.golden.errors import EXIT_DEVICE, UserError
from vckattn.golden.regmap import RegisterMap, RegisterWrite, to_word

__all__ = ["IpPort", "RegisterError", "RegisterPort", "check_ident", "program", "verify"]


class RegisterError(UserError):
    """A kernel's registers cannot be programmed as declared (wrong kernel, bad value, read-back mismatch)."""

    exit_code = EXIT_DEVICE


class RegisterPort(Protocol):
    """32-bit access to one kernel's AXI4-Lite block; offsets in bytes relative to the block."""

    def read32(self, offset: int) -> int: ...

    def write32(self, offset: int, word: int) -> None: ...


class IpPort:
    """A :class:`RegisterPort` over an object with ``read(offset)`` / ``write(offset, word)``: pyxrt's
    ``xrt::ip`` (through the graph shim), PYNQ's ``DefaultIP``, and the fakes of both."""

    def __init__(self, ip: Any) -> None:
        self.ip = ip

    def read32(self, offset: int) -> int:
        return int(self.ip.read(int(offset))) & 0xFFFFFFFF

    def write32(self, offset: int, word: int) -> None:
        self.ip.write(int(offset), int(word) & 0xFFFFFFFF)


def check_ident(port: RegisterPort, regmap: RegisterMap, kernel: str, where: str = "") -> int:
    """Read the ID register; RegisterError unless it equals the declared constant. Returns the ID read."""
    off = regmap.offset("ID")
    got = port.read32(off)
    if got != regmap.ident:
        raise RegisterError(f"kernel {kernel}: ID register at {off:#x} reads {got:#010x}, expected "
                            f"{regmap.ident:#010x}{f' ({where})' if where else ''}: the bitstream holds a different "
                            f"kernel")
    return got


def program(port: RegisterPort, regmap: RegisterMap, values: Mapping[str, int], kernel: str) -> list[RegisterWrite]:
    """Write every writable register of ``regmap`` from ``values`` (exactly its writable names); returns
    the writes performed. A missing, unknown or out-of-range value is a RegisterError before any write."""
    try:
        writes = regmap.writes(values)
    except ValueError as exc:
        raise RegisterError(f"kernel {kernel}: {exc}") from None
    for w in writes:
        port.write32(w.offset, w.word)
    return writes


def verify(port: RegisterPort, writes: list[RegisterWrite], kernel: str) -> dict[str, int]:
    """Read back every register of ``writes``; RegisterError naming each whose word differs from the
    word written (bit-exact: no tolerance). Returns the words read, by register name."""
    read = {w.name: port.read32(w.offset) for w in writes}
    bad = [f"{kernel}.{w.name} at {w.offset:#x}: wrote {w.word:#010x}, read {to_word(read[w.name]):#010x}"
           for w in writes if to_word(read[w.name]) != w.word]
    if bad:
        raise RegisterError(f"register readback mismatch: {'; '.join(bad)}")
    return read

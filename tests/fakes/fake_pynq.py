"""FAKE: a stand-in for PYNQ 4.0 (``pynq`` on a VCK190) that records calls; not hardware.

Only the documented surface the ``pynq`` backend uses: ``Overlay(path, download=...)`` with
``ip_dict`` (per IP ``phys_addr``, ``addr_range``, ``type`` and, for the HLS movers, ``registers``
named the way Vitis HLS exports them: ``CTRL`` at 0x00, a 64-bit pointer ``x`` as ``x_1``/``x_2``
from 0x10 on) and attribute access to IP drivers (hierarchies included); drivers with ``read(offset)``
/ ``write(offset, value)``; ``allocate(shape, dtype)`` buffers (ndarrays with ``device_address``,
``sync_to_device``, ``sync_from_device``, ``freebuffer``). Everything is routed to a
:class:`~fakes.engine_card.FakeEngineCard` and logged in ``card.log``.

Model: the HLS movers are ``ap_ctrl_hs``: writing bit 0 of ``CTRL`` starts them with the arguments in their
registers (addresses resolved to the buffers allocated here; an address that is no buffer is an error); ``CTRL``
reads ``ap_idle`` (0x4) before a start, 0 while running, ``ap_done|ap_idle`` (0x6) once done, then 0x4 (``ap_done``
is clear-on-read). The AIE graph is free-running (no graph control); a launch completes once every mover compute
unit has started. The PL top sits in a hierarchy ``normalizers/<name>``; each mover compute unit is one IP named as
the unit (a kernel without compute units would be ``<name>_1``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .engine_card import FakeEngineCard

AP_START, AP_DONE, AP_IDLE = 0x1, 0x2, 0x4
_addresses = itertools.count(0x8_0000_0000, 0x10_0000)  # above 4 GiB: the high address word matters


def hls_registers(entry: dict) -> dict[str, dict[str, Any]]:
    regs: dict[str, dict[str, Any]] = {"CTRL": {"address_offset": 0, "size": 32, "access": "read-write"}}
    off = 0x10
    for p in entry["ports"]:
        if p["protocol"] == "axis":
            continue
        if p["protocol"] == "m_axi":
            regs[f"{p['name']}_1"] = {"address_offset": off, "size": 32, "access": "write-only"}
            regs[f"{p['name']}_2"] = {"address_offset": off + 4, "size": 32, "access": "write-only"}
            off += 12
        else:
            regs[p["name"]] = {"address_offset": off, "size": 32, "access": "write-only"}
            off += 8
    return regs


class _DevMem:
    """A buffer's device-side bytes, as the card sees them."""

    def __init__(self, tag: str, nbytes: int) -> None:
        self.tag = tag
        self.dev = np.full(nbytes, 0xA5, np.uint8)

    def device_bytes(self) -> np.ndarray:
        return self.dev


def module_for(card: FakeEngineCard, ip_keys: dict[str, str] | None = None) -> ModuleType:
    """A ``pynq`` module object bound to ``card``."""
    card.needs_graph = False
    m = ModuleType("pynq")
    m.__doc__ = "FAKE pynq (tests/fakes/fake_pynq.py): records calls; not hardware"
    memory: dict[int, _DevMem] = {}
    units = {u: k for k in card.manifest.data["kernels"] if k["name"] in card.kernels
             for u in k.get("compute_units") or [k["name"]]}  # IP name (a kernel, or one of its compute units)
    keys = {u: (f"normalizers/{u}" if k["kind"] == "rtl" else u if k.get("compute_units") else f"{u}_1")
            for u, k in units.items()} | (ip_keys or {})
    hls = {u: k for u, k in units.items() if k["kind"] == "hls"}
    regfiles: dict[str, dict[int, int]] = {name: {} for name in hls}

    class PynqBuffer(np.ndarray):
        def sync_to_device(self) -> None:
            memory[self.device_address].dev[:] = self.view(np.uint8).reshape(-1)
            card.record("sync_to_device", buf=memory[self.device_address].tag)

        def sync_from_device(self) -> None:
            self.view(np.uint8).reshape(-1)[:] = memory[self.device_address].dev
            card.record("sync_from_device", buf=memory[self.device_address].tag)

        def freebuffer(self) -> None:
            card.record("freebuffer", buf=memory[self.device_address].tag)

    def allocate(shape: Any, dtype: Any = "u4", target: Any = None, **kwargs: Any) -> PynqBuffer:
        arr = np.zeros(shape, dtype).view(PynqBuffer)
        addr = next(_addresses)
        arr.device_address = arr.physical_address = addr
        memory[addr] = _DevMem(f"buf{len(memory)}", arr.nbytes)
        card.record("allocate", buf=memory[addr].tag, nbytes=int(arr.nbytes))
        return arr

    def _mover_ctrl(name: str) -> int:
        run = card.runs.get(name)
        if run is None:
            return AP_IDLE
        card.progress()
        if run.state == "ERT_CMD_STATE_RUNNING":
            return 0
        if not run.done_read:
            run.done_read = True
            return AP_DONE | AP_IDLE
        return AP_IDLE

    def _start_mover(name: str) -> None:
        entry, regs = hls[name], hls_registers(hls[name])
        words = regfiles[name]
        args: dict[str, Any] = {}
        for p in entry["ports"]:
            if p["protocol"] == "axis":
                continue
            if p["protocol"] == "m_axi":
                addr = words.get(regs[f"{p['name']}_1"]["address_offset"], 0) | \
                    words.get(regs[f"{p['name']}_2"]["address_offset"], 0) << 32
                if addr not in memory:
                    raise RuntimeError(f"FAKE: {name}.{p['name']} = {addr:#x} is not an allocated buffer")
                args[p["name"]] = memory[addr]
            else:
                w = words.get(regs[p["name"]]["address_offset"], 0)
                args[p["name"]] = w - (1 << 32) if w >> 31 else w
        card.start(name, args)

    class DefaultIP:
        def __init__(self, name: str) -> None:
            self.name = name

        def read(self, offset: int = 0) -> int:
            if self.name in hls:
                card.record("mmio.read", kernel=self.name, offset=int(offset))
                return _mover_ctrl(self.name) if int(offset) == 0 else regfiles[self.name].get(int(offset), 0)
            return card.reg_read(self.name, offset)

        def write(self, offset: int, value: int) -> None:
            if not isinstance(value, int | np.integer) or not 0 <= int(value) <= 0xFFFFFFFF:
                raise ValueError(f"FAKE: MMIO write of {value!r}: expected a uint32")
            if self.name in hls:
                card.record("mmio.write", kernel=self.name, offset=int(offset), value=int(value))
                regfiles[self.name][int(offset)] = int(value)
                if int(offset) == 0 and int(value) & AP_START:
                    _start_mover(self.name)
                return
            card.reg_write(self.name, offset, value)

    class _Hierarchy:
        def __init__(self, prefix: str) -> None:
            self._prefix = prefix

        def __getattr__(self, attr: str) -> Any:
            return _lookup(f"{self._prefix}/{attr}")

    by_key = {v: k for k, v in keys.items()}

    def _lookup(key: str) -> Any:
        if key in by_key:
            return DefaultIP(by_key[key])
        if any(k.startswith(key + "/") for k in by_key):
            return _Hierarchy(key)
        raise AttributeError(f"Could not find IP or hierarchy {key} in overlay")

    class Overlay:
        def __init__(self, bitfile_name: str, download: bool = True, **kwargs: Any) -> None:
            card.record("overlay", path=str(bitfile_name), download=bool(download))
            if not Path(bitfile_name).is_file():
                raise OSError(f"{bitfile_name} does not exist")
            card.loaded = True
            self.ip_dict = {}
            for i, (name, key) in enumerate(keys.items()):
                entry = units[name]
                d = {"phys_addr": 0xA400_0000 + i * 0x10000, "addr_range": 0x10000, "fullpath": key,
                     "type": f"xilinx.com:{entry['kind']}:{entry['name']}:1.0"}
                if entry["kind"] == "hls":
                    d["registers"] = hls_registers(entry)
                self.ip_dict[key] = d

        def __getattr__(self, attr: str) -> Any:
            return _lookup(attr)

    m.Overlay, m.DefaultIP, m.allocate, m.PynqBuffer = Overlay, DefaultIP, allocate, PynqBuffer
    return m

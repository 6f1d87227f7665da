"""``pynq``: an engine build, one launch per layer, on a VCK190 through PYNQ 4.0 (run on the board's Arm cores).

The full description: ``docs/internals/host.md``, section ``host/backends/pynq.py``.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.errors import ToolMissing
from vckattn.golden.regmap import to_word
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.engine_hw import EngineCardDevice
from vckattn.hw.design.manifest import Manifest
from vckattn.hw.spec.driver import IpPort

PYNQ_MISSING = ("PYNQ not found: cannot import pynq (the pynq backend runs on the VCK190's Arm cores "
                "with PYNQ 4.0 installed)")
AP_START, AP_DONE, AP_IDLE = 0x1, 0x2, 0x4


def import_pynq() -> Any:
    try:
        import pynq  # type: ignore[import-not-found]
    except ImportError:
        raise ToolMissing(PYNQ_MISSING) from None
    if pynq is None:
        raise ToolMissing(PYNQ_MISSING)
    return pynq


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def find_ip(ip_dict: dict, kernel: str) -> str | None:
    """The ip_dict key of manifest kernel ``kernel`` (see the module docstring), or None."""
    for key in ip_dict:
        leaf = key.rsplit("/", 1)[-1]
        if key == kernel or leaf == kernel or leaf == f"{kernel}_1":
            return key
    return None


def arg_offsets(registers: dict, port: str, pointer: bool) -> list[int]:
    """Register offsets of argument ``port``: ``[low, high]`` for a 64-bit pointer, ``[offset]`` else."""
    for name in (port, f"{port}_r"):
        if name in registers:
            r = registers[name]
            off = int(r["address_offset"])
            return [off, off + 4] if pointer and int(r.get("size", 64)) >= 64 else [off]
        if f"{name}_1" in registers and f"{name}_2" in registers:
            return [int(registers[f"{name}_1"]["address_offset"]), int(registers[f"{name}_2"]["address_offset"])]
    raise KeyError(port)


def arg_words(kernel: str, port: dict, value: Any, n: int) -> list[int]:
    """The register words of argument ``port`` (a manifest port) set to ``value``: a scalar's 32-bit word, or a
    buffer's device address as ``n`` words (low, high); DeviceError when the address does not fit."""
    if port["protocol"] != "m_axi":
        return [to_word(value)]
    addr = int(getattr(value, "device_address", None) or value.physical_address)
    if n == 1 and addr >> 32:
        raise DeviceError(f"kernel {kernel}: buffer {port['name']} at {addr:#x} does not fit its 32-bit "
                          f"address register")
    return [addr & 0xFFFFFFFF, addr >> 32][:n]


def poll_done(ip: Any, ctrl: int, timeout_ms: int, poll_s: float) -> bool:
    """Poll an ``ap_ctrl_hs`` kernel's ``CTRL`` register until ``ap_start`` is clear and ``ap_done`` or ``ap_idle``
    is set: True, or False after ``timeout_ms``."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        v = int(ip.read(ctrl))
        if not v & AP_START and v & (AP_DONE | AP_IDLE):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)


def open_overlay(pynq: Any, path: Path, download: bool) -> tuple[Any, dict]:
    """``(overlay, ip_dict)`` of the bitstream at ``path``; DeviceError naming what failed."""
    if not path.exists():
        raise DeviceError(f"{path}: bitstream file not found")
    try:
        overlay = pynq.Overlay(str(path), download=download)
        return overlay, dict(overlay.ip_dict)
    except Exception as exc:  # PYNQ raises RuntimeError, OSError, ...
        raise DeviceError(f"{path}: cannot load the overlay: {_reason(exc)}") from None


def ip_driver(overlay: Any, key: str) -> Any:
    """The overlay's driver of ip_dict key ``key`` (hierarchies walked)."""
    return functools.reduce(getattr, key.split("/"), overlay)


class PynqDevice(EngineCardDevice):
    name = "pynq"
    where = "hardware: VCK190 through PYNQ 4.0: the engine's movers and PL top, a free-running AIE graph"

    def __init__(self, manifest: Manifest, seed: int = 0, xclbin: Path | None = None, timeout_ms: int | None = None,
                 download: bool = True, poll_s: float = 0.0002, **options: Any) -> None:
        """``xclbin``: the overlay file PYNQ loads (``.xclbin``, or ``.pdi``/``.bit`` beside its ``.hwh``)."""
        super().__init__(manifest, seed, xclbin, timeout_ms, **options)
        self.download, self.poll_s = bool(download), float(poll_s)
        self._pynq: Any = None
        self._overlay: Any = None
        self._ips: dict[str, Any] = {}  # compute unit or PL top -> driver
        self._args: dict[str, dict[str, list[int]]] = {}  # unit -> port -> register offsets
        self._ctrl: dict[str, int] = {}

    def _open(self) -> None:
        m = self.manifest
        pynq = self._pynq = import_pynq()
        self._overlay, ip_dict = open_overlay(pynq, self.xclbin, self.download)
        names = [cu for _, cu in self.units()] + [self.pl_top]
        keys = {n: find_ip(ip_dict, n) for n in names}
        missing = [n for n, key in keys.items() if key is None]
        if missing:
            raise DeviceError(f"{self.xclbin}: the overlay lacks {', '.join(missing)} listed in {m.file} "
                              f"(its IP: {', '.join(sorted(ip_dict)) or 'none'})")
        for kname, cu in self.units():
            key = keys[cu]
            assert key is not None
            self._ips[cu] = ip_driver(self._overlay, key)
            regs = ip_dict[key].get("registers") or {}
            self._ctrl[cu] = int(regs.get("CTRL", {}).get("address_offset", 0))
            offs = {}
            for p in m.kernel(kname)["ports"]:
                if p["protocol"] == "axis":
                    continue
                try:
                    offs[p["name"]] = arg_offsets(regs, p["name"], p["protocol"] == "m_axi")
                except KeyError:
                    raise DeviceError(f"kernel {kname} ({key}): the overlay's register map has no argument "
                                      f"{p['name']!r} (has {', '.join(sorted(regs)) or 'no registers'})") from None
            self._args[cu] = offs
            self.kernels_checked.append({"name": cu, "kind": "hls", "kernel": kname, "ip": key})
        key = keys[self.pl_top]
        assert key is not None
        self._ips[self.pl_top] = ip_driver(self._overlay, key)
        got = self._check_ident(IpPort(self._ips[self.pl_top]))
        self.kernels_checked.append({"name": self.pl_top, "kind": "rtl", "ip": key, "id": f"{got:#010x}"})

    def close(self) -> None:
        for buf, _ in self._bufs.values():
            try:
                buf.freebuffer()
            except Exception:  # releasing
                pass
        self._bufs, self._ips, self._args, self._ctrl = {}, {}, {}, {}
        self._overlay = None

    def _is_open(self) -> bool:
        return self._overlay is not None

    def _register_port(self) -> IpPort:
        if self.pl_top not in self._ips:
            raise DeviceError(f"pynq backend: kernel {self.pl_top} is not open (use the device as a context manager)")
        return IpPort(self._ips[self.pl_top])

    def _alloc(self, name: str, unit: str, port: str, nbytes: int) -> Any:
        try:
            return self._pynq.allocate(shape=(int(nbytes),), dtype=np.uint8)
        except Exception as exc:
            raise DeviceError(f"cannot allocate the {name} buffer ({nbytes} bytes): {exc}") from None

    def _release(self, buf: Any) -> None:
        buf.freebuffer()

    def _upload(self, buf: Any, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        buf[: raw.size] = raw
        buf.sync_to_device()

    def _download(self, buf: Any, nbytes: int) -> np.ndarray:
        buf.sync_from_device()
        return np.asarray(buf[:nbytes]).view(np.uint8).copy()

    def _start(self, unit: str, values: dict[str, Any]) -> None:
        kname = self.kernel_of(unit)
        ip, offs = self._ips[unit], self._args[unit]
        for p in self.manifest.kernel(kname)["ports"]:
            if p["protocol"] == "axis":
                continue
            for off, word in zip(offs[p["name"]], arg_words(unit, p, values[p["name"]], len(offs[p["name"]])),
                                 strict=True):
                ip.write(off, word)
        ip.write(self._ctrl[unit], AP_START)

    def _wait(self, unit: str) -> None:
        if not poll_done(self._ips[unit], self._ctrl[unit], self.timeout_ms, self.poll_s):
            raise DeviceError(f"device timeout after {self.timeout_ms} ms in {unit} on launch {self.launches}")


__all__ = ["PynqDevice", "arg_offsets", "arg_words", "find_ip", "import_pynq", "poll_done"]

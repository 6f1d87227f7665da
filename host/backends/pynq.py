"""``pynq``: the attention build on a VCK190 board through PYNQ 4.0 (run on the board's Arm cores).

PYNQ 4.0 supports Versal on the VCK190 only (no VCK5000). Its embedded flow programs the PL
through the Linux FPGA manager and talks to IP over ``/dev/mem``; this backend uses only the
documented surface:

* ``pynq.Overlay(path, download=...)`` with a ``.pdi``/``.bit`` (plus its sibling ``.hwh``) or an
  ``.xclbin``; ``overlay.ip_dict`` names the IP. A manifest kernel ``k`` matches the ip_dict key
  ``k``, a hierarchical key ending in ``/k``, or ``k_1`` (Vitis' default compute-unit name); a
  kernel without a match is refused, naming it.
* drivers (``DefaultIP``) from the overlay: ``.read(offset)`` / ``.write(offset, value)`` for
  every register access.
* ``pynq.allocate(shape, dtype)`` buffers: ``.device_address``, ``.sync_to_device()``,
  ``.sync_from_device()``, ``.freebuffer()``.

HLS kernels (the movers and ``score_switch``, ``ap_ctrl_hs``; arguments as for ``xrt``,
:func:`.hwio.launch_values`, the ``desc`` buffer's address going to all three movers): started
through their ``s_axi_control`` registers, not ``DefaultIP.call``/``.start``: PYNQ's embedded
devices (Zynq, Versal) report the ``CALLABLE`` capability as False, so ``call``/``start`` have no
signature there. The host writes each argument at its offset from ``ip_dict[...]["registers"]``
(64-bit addresses as low/high words: either one 64-bit register ``arg`` or the pair
``arg_1``/``arg_2`` Vitis HLS exports; an argument named like a C keyword may carry HLS' ``_r``
suffix), sets ``ap_start`` (bit 0 of ``CTRL`` at 0x00) and polls ``CTRL`` until ``ap_start`` is
clear and ``ap_done`` (bit 1) or ``ap_idle`` (bit 2) is set, up to ``timeout_ms``.

AIE graph: PYNQ has no AIE graph API. The build for this backend is packaged *without*
``v++ --package.defer_aie_run``, so the graph starts when the device image loads and runs forever
(the documented "run forever" deployment); its kernels block on their input streams, so the PL
movers pace it. The host never starts or waits on the graph; a stalled AIE shows up as a timeout in
``s2mm_out``, the last mover. ``PynqDevice`` does not check the xclbin UUID (a ``.pdi``/``.hwh``
overlay has none); it checks the kernel names and the normalizers' ``ID`` registers.

Normalizer registers, buffer layout and the launch loop are shared with ``xrt``
(:mod:`.hwio`, :mod:`vckattn.host.tile_buffers`).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.errors import ToolMissing
from vckattn.golden.regmap import to_word
from vckattn.host import tile_buffers as tb
from vckattn.host.backends import hwio
from vckattn.host.backends.base import DeviceError
from vckattn.host.tiler import LayerJob, TileResult
from vckattn.hw.driver import IpPort
from vckattn.hw.manifest import BITSTREAMS, Manifest

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


class PynqDevice(hwio.BufferedDevice):
    name = "pynq"
    where = "hardware: VCK190 through PYNQ 4.0"

    def __init__(self, manifest: Manifest, xclbin: Path | None = None, tiles_per_launch: int = tb.TILES_PER_LAUNCH,
                 timeout_ms: int | None = None, download: bool = True, poll_s: float = 0.0002) -> None:
        """``xclbin``: the overlay file PYNQ loads (``.xclbin``, or ``.pdi``/``.bit`` beside its ``.hwh``);
        default: the manifest's ``xclbin.file`` in ``bitstreams/``."""
        super().__init__(manifest, tiles_per_launch, timeout_ms)
        self.bitstream = Path(xclbin) if xclbin is not None else BITSTREAMS / manifest.data["xclbin"]["file"]
        self.download, self.poll_s = download, float(poll_s)
        self.kernels_checked: list[dict[str, Any]] = []
        self._pynq: Any = None
        self._overlay: Any = None
        self._ips: dict[str, Any] = {}
        self._args: dict[str, dict[str, list[int]]] = {}  # kernel -> port -> register offsets
        self._ctrl: dict[str, int] = {}

    # ------------------------------------------------------------------------------ open / close

    def _open(self) -> None:
        m = self.manifest
        pynq = self._pynq = import_pynq()
        path = self.bitstream
        self._overlay, ip_dict = open_overlay(pynq, path, self.download)
        keys = {k["name"]: find_ip(ip_dict, k["name"]) for k in m.data["kernels"]}
        missing = [k for k, v in keys.items() if v is None]
        if missing:
            raise DeviceError(f"{path}: the overlay lacks kernel(s) {', '.join(missing)} listed in {m.file} "
                              f"(its IP: {', '.join(sorted(ip_dict)) or 'none'})")
        for k in m.data["kernels"]:
            key = keys[k["name"]]
            assert key is not None
            ip = self._ips[k["name"]] = ip_driver(self._overlay, key)
            if k["kind"] == "rtl":
                got = self._check_ident(k, IpPort(ip))
                self.kernels_checked.append({"name": k["name"], "kind": "rtl", "ip": key, "id": f"{got:#010x}"})
                continue
            regs = ip_dict[key].get("registers") or {}
            self._ctrl[k["name"]] = int(regs.get("CTRL", {}).get("address_offset", 0))
            offs = {}
            for p in k["ports"]:
                if p["protocol"] == "axis":
                    continue
                try:
                    offs[p["name"]] = arg_offsets(regs, p["name"], p["protocol"] == "m_axi")
                except KeyError:
                    raise DeviceError(f"kernel {k['name']} ({key}): the overlay's register map has no argument "
                                      f"{p['name']!r} (has {', '.join(sorted(regs)) or 'no registers'})") from None
            self._args[k["name"]] = offs
            self.kernels_checked.append({"name": k["name"], "kind": "hls", "ip": key})

    def close(self) -> None:
        for s in [*self._sets, {"kv": self._kv}]:
            for buf in s.values():
                free = getattr(buf, "freebuffer", None)
                if free is not None:
                    try:
                        free()
                    except Exception:  # releasing
                        pass
        self._sets, self._kv, self._geom = [], None, None
        self._ips, self._args, self._ctrl = {}, {}, {}
        self._overlay = None

    # ------------------------------------------------------------------------------ configure

    def _register_port(self, kernel: str) -> IpPort:
        if kernel not in self._ips:
            raise DeviceError(f"pynq backend: kernel {kernel} is not open (call open() first)")
        return IpPort(self._ips[kernel])

    # ------------------------------------------------------------------------------ buffers / runs

    def _is_open(self) -> bool:
        return self._overlay is not None

    def _alloc(self, port: str, nbytes: int) -> Any:
        return self._pynq.allocate(shape=(max(int(nbytes), 64),), dtype=np.uint8)

    def _release(self, buf: Any) -> None:
        buf.freebuffer()

    @staticmethod
    def _write(buf: Any, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        buf[: raw.size] = raw
        buf.sync_to_device()

    def _start(self, job: LayerJob, launch: hwio.Launch) -> None:
        values = hwio.launch_values(job, launch.n, {**self._sets[launch.slot], "kv": self._kv}, self._rq, self._select)
        for name in hwio.START_ORDER:
            k = self.manifest.kernel(name)
            ip, offs = self._ips[name], self._args[name]
            for p, value in zip(k["ports"], hwio.kernel_args(k, values), strict=True):
                if p["protocol"] == "axis":
                    continue
                words = self._words(name, p, value, len(offs[p["name"]]))
                for off, word in zip(offs[p["name"]], words, strict=True):
                    ip.write(off, word)
            ip.write(self._ctrl[name], AP_START)

    @staticmethod
    def _words(kernel: str, port: dict, value: Any, n: int) -> list[int]:
        return arg_words(kernel, port, value, n)

    def _wait(self, name: str, launch: hwio.Launch) -> None:
        if not poll_done(self._ips[name], self._ctrl[name], self.timeout_ms, self.poll_s):
            raise hwio.timeout_error(self.timeout_ms, name, launch)

    def _finish(self, job: LayerJob, launch: hwio.Launch) -> list[TileResult]:
        for name in hwio.LAUNCHED:
            self._wait(name, launch)
        q_rows, hd = job.tile.q_rows, int(job.k.shape[-1])
        out = self._sets[launch.slot]["out"]
        out.sync_from_device()
        return tb.unpack_out(np.asarray(out[: tb.out_nbytes(launch.n, q_rows, hd)]), launch.n, q_rows, hd)


__all__ = ["AP_DONE", "AP_IDLE", "AP_START", "PYNQ_MISSING", "PynqDevice", "arg_offsets", "arg_words", "find_ip",
           "import_pynq", "ip_driver", "open_overlay", "poll_done"]

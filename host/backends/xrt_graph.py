"""The C++ shim the ``xrt`` backend needs next to pyxrt (XRT 2022.2): AIE graph control and
register access to the user-managed RTL kernels.

The full description: ``docs/internals/host.md``, section ``host/backends/xrt_graph.py``.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from vckattn.golden.errors import ToolMissing
from vckattn.host.backends.base import DeviceError

SOURCE = Path(__file__).with_name("xrt_graph_shim.cpp")
CXXFLAGS = ("-shared", "-fPIC", "-std=c++17", "-O2")
ABI_VERSION = 1
SETUP_HINT = "install XRT 2022.2 and `source /opt/xilinx/xrt/setup.sh`"
#: header alternatives (XRT 2022.2 layout first)
GRAPH_HEADERS = ("experimental/xrt_graph.h", "xrt/xrt_graph.h")
IP_HEADERS = ("experimental/xrt_ip.h", "xrt/experimental/xrt_ip.h")
CORE_HEADERS = ("xrt/xrt_device.h", "xrt/xrt_uuid.h")


def shim_dir() -> Path:
    env = os.environ.get("VCKATTN_SHIM_DIR")
    if env:
        return Path(env)
    from vckattn.golden.paths import build_root

    return build_root() / "xrt_shim"


#: where XRT installs itself when ``$XILINX_XRT`` is not set
XRT_DEFAULT_ROOT = Path("/opt/xilinx/xrt")


def find_xrt_root(default: Path | None = None) -> Path | None:
    """The XRT folder: ``$XILINX_XRT`` when it is a folder, else ``default`` (:data:`XRT_DEFAULT_ROOT`) when it
    exists; ``None`` otherwise."""
    env = os.environ.get("XILINX_XRT")
    if env and Path(env).is_dir():
        return Path(env)
    default = XRT_DEFAULT_ROOT if default is None else default
    return default if default.is_dir() else None


def shim_needs_missing(root: Path) -> list[str]:
    """What the shim needs that the XRT folder ``root`` lacks (C++ headers, ``libxrt_coreutil``): empty if none."""
    inc = root / "include"
    missing = [f"{inc / h}" for h in CORE_HEADERS if not (inc / h).is_file()]
    for alts in (GRAPH_HEADERS, IP_HEADERS):
        if not any((inc / h).is_file() for h in alts):
            missing.append(" or ".join(str(inc / h) for h in alts))
    lib = root / "lib" / "libxrt_coreutil.so"
    if not lib.exists():
        missing.append(str(lib))
    return missing


def xrt_root() -> Path:
    """The XRT folder (:func:`find_xrt_root`), checked for what the shim needs (:func:`shim_needs_missing`)."""
    root = find_xrt_root()
    if root is None:
        env = os.environ.get("XILINX_XRT")
        where = f"XILINX_XRT={env} is not a folder" if env else "XILINX_XRT is not set"
        raise ToolMissing(f"XRT graph shim: {where} ({SETUP_HINT}); the xrt backend needs "
                          f"XRT's C++ headers and libxrt_coreutil for AIE graph control")
    missing = shim_needs_missing(root)
    if missing:
        raise ToolMissing(f"XRT graph shim: XILINX_XRT={root} lacks {'; '.join(missing)} ({SETUP_HINT})")
    return root


def compile_command(root: Path, out: Path, source: Path = SOURCE) -> list[str]:
    """The g++ command line that builds the shim against the XRT at ``root``."""
    return ["g++", *CXXFLAGS, f"-I{root / 'include'}", str(source), "-o", str(out), f"-L{root / 'lib'}",
            f"-Wl,-rpath,{root / 'lib'}", "-lxrt_coreutil", "-pthread"]


def shim_path(root: Path) -> Path:
    key = hashlib.sha256(SOURCE.read_bytes() + repr((CXXFLAGS, str(root))).encode()).hexdigest()[:16]
    return shim_dir() / f"libvckattn_xrt_shim-{key}.so"


def build_shim(root: Path | None = None, force: bool = False) -> Path:
    """Compile the shim unless a build of this source for this XRT exists; returns the library path."""
    root = xrt_root() if root is None else root
    out = shim_path(root)
    if out.exists() and not force:
        return out
    if shutil.which("g++") is None:
        raise ToolMissing(f"XRT graph shim: g++ not found (needed once to build {SOURCE.name})")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    proc = subprocess.run(compile_command(root, tmp), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:300])
        raise DeviceError(f"XRT graph shim: g++ failed building {SOURCE.name}: {first}")
    os.replace(tmp, out)
    return out


def _check_int(value: int, what: str) -> None:
    """DeviceError unless ``value`` fits the shim's C ``int`` argument (0 .. 2^31 - 1): ctypes would wrap it."""
    if not 0 <= int(value) < 1 << 31:
        raise DeviceError(f"{what} {value} is outside 0..{(1 << 31) - 1}")


class Graph:
    """An open AIE graph (``xrt::graph``)."""

    def __init__(self, shim: Shim, handle: int, name: str) -> None:
        self._shim, self._h, self.name = shim, handle, name

    def run(self, iterations: int) -> None:
        _check_int(iterations, f"AIE graph {self.name}: run iterations")
        if self._shim.lib.vckattn_graph_run(self._h, int(iterations)) != 0:
            raise DeviceError(f"AIE graph {self.name}: run({iterations}) failed: {self._shim.last_error()}")

    def wait(self, timeout_ms: int) -> bool:
        """True when the graph finished its iterations, False on timeout (``timeout_ms`` in milliseconds)."""
        _check_int(timeout_ms, f"AIE graph {self.name}: wait timeout (ms)")
        rc = self._shim.lib.vckattn_graph_wait(self._h, int(timeout_ms))
        if rc < 0:
            raise DeviceError(f"AIE graph {self.name}: wait failed: {self._shim.last_error()}")
        return rc == 0

    def end(self) -> None:
        if self._shim.lib.vckattn_graph_end(self._h) != 0:
            raise DeviceError(f"AIE graph {self.name}: end failed: {self._shim.last_error()}")

    def close(self) -> None:
        if self._h:
            self._shim.lib.vckattn_graph_close(self._h)
            self._h = 0


class Ip:
    """A user-managed kernel's AXI4-Lite register space (``xrt::ip``, exclusive access)."""

    def __init__(self, shim: Shim, handle: int, name: str) -> None:
        self._shim, self._h, self.name = shim, handle, name

    def _offset(self, offset: int) -> int:
        if not 0 <= int(offset) <= 0xFFFFFFFF:
            raise DeviceError(f"kernel {self.name}: register offset {offset} is outside the 32-bit address space")
        return int(offset)

    def read(self, offset: int) -> int:
        """The 32-bit word at byte ``offset`` of the kernel's register space."""
        offset = self._offset(offset)
        v = ctypes.c_uint32()
        if self._shim.lib.vckattn_ip_read(self._h, int(offset), ctypes.byref(v)) != 0:
            raise DeviceError(f"kernel {self.name}: register read at {offset:#x} failed: {self._shim.last_error()}")
        return int(v.value)

    def write(self, offset: int, value: int) -> None:
        """Write the low 32 bits of ``value`` (a negative value as its two's complement) at byte ``offset``."""
        offset = self._offset(offset)
        if self._shim.lib.vckattn_ip_write(self._h, int(offset), int(value) & 0xFFFFFFFF) != 0:
            raise DeviceError(f"kernel {self.name}: register write at {offset:#x} failed: {self._shim.last_error()}")

    def close(self) -> None:
        if self._h:
            self._shim.lib.vckattn_ip_close(self._h)
            self._h = 0


class Shim:
    """The loaded shim library."""

    def __init__(self, path: Path) -> None:
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as exc:
            raise DeviceError(f"XRT graph shim: cannot load {path}: {exc}") from None
        u8p, vp = ctypes.c_char_p, ctypes.c_void_p
        sig = {
            "vckattn_shim_abi_version": ([], ctypes.c_int),
            "vckattn_shim_last_error": ([], ctypes.c_char_p),
            "vckattn_graph_open": ([ctypes.c_uint, u8p, ctypes.c_char_p], vp),
            "vckattn_graph_run": ([vp, ctypes.c_int], ctypes.c_int),
            "vckattn_graph_wait": ([vp, ctypes.c_int], ctypes.c_int),
            "vckattn_graph_end": ([vp], ctypes.c_int),
            "vckattn_graph_close": ([vp], None),
            "vckattn_ip_open": ([ctypes.c_uint, u8p, ctypes.c_char_p], vp),
            "vckattn_ip_read": ([vp, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32)], ctypes.c_int),
            "vckattn_ip_write": ([vp, ctypes.c_uint32, ctypes.c_uint32], ctypes.c_int),
            "vckattn_ip_close": ([vp], None),
        }
        missing = [name for name in sig if not hasattr(lib, name)]
        if missing:
            raise DeviceError(f"XRT graph shim: {path} lacks {', '.join(missing)} (a build of another shim version; "
                              f"delete it to rebuild)")
        for name, (args, res) in sig.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        abi = lib.vckattn_shim_abi_version()
        if abi != ABI_VERSION:
            raise DeviceError(f"XRT graph shim: {path} has ABI {abi}, expected {ABI_VERSION}")
        self.lib, self.path = lib, path

    def last_error(self) -> str:
        msg = self.lib.vckattn_shim_last_error()
        return " ".join((msg or b"").decode(errors="replace").split()) or "no message"

    @staticmethod
    def _uuid(uuid: bytes) -> bytes:
        if len(uuid) != 16:
            raise ValueError("an xclbin UUID is 16 bytes")
        return bytes(uuid)

    def graph(self, device_index: int, uuid: bytes, name: str) -> Graph:
        h = self.lib.vckattn_graph_open(int(device_index), self._uuid(uuid), name.encode())
        if not h:
            raise DeviceError(f"cannot open AIE graph {name!r}: {self.last_error()}")
        return Graph(self, h, name)

    def ip(self, device_index: int, uuid: bytes, name: str) -> Ip:
        h = self.lib.vckattn_ip_open(int(device_index), self._uuid(uuid), name.encode())
        if not h:
            raise DeviceError(f"cannot open kernel {name!r} for register access: {self.last_error()}")
        return Ip(self, h, name)


@functools.cache
def _load(path: Path) -> Shim:
    return Shim(path)


def load_shim() -> Shim:
    """Build (once) and load the shim for ``$XILINX_XRT``."""
    return _load(build_shim())


__all__ = ["Graph", "Ip", "SOURCE", "Shim", "build_shim", "compile_command", "load_shim", "shim_dir", "xrt_root"]

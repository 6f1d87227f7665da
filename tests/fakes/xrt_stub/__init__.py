"""STUB XRT library for the tests: a stand-in for XRT 2022.2's ``libxrt_coreutil`` (absent here) that the project's
real C++ shim (``host/backends/xrt_graph_shim.cpp``) compiles and links against, so the real ctypes layer
(``host/backends/xrt_graph.py``: argtypes, masking, return codes, the ABI check) runs. It fakes only the layer under
our code; nothing here is hardware.

* ``include/``: headers laid out like XRT 2022.2 (``xrt/xrt_device.h``, ``xrt/xrt_uuid.h``,
  ``experimental/xrt_graph.h``, ``experimental/xrt_ip.h``), the documented API the shim uses;
* ``xrt_stub.cpp``: the library; it records every call and can be told to fail any of them (its header comment);
* :func:`build_stub` lays out an ``$XILINX_XRT`` folder (``include/``, ``lib/libxrt_coreutil.so``);
* :class:`StubXrt`: the library's test hooks through ctypes (:meth:`StubXrt.calls`, :meth:`StubXrt.fail`, ...);
* :func:`card_handler`: answers the stub's calls from a :class:`~fakes.engine_card.FakeEngineCard` (or any card with
  the same register / graph methods), the card ``fake_pyxrt`` talks to, so both layers see one card.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SOURCE = HERE / "xrt_stub.cpp"
INCLUDE = HERE / "include"

HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32,
                           ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p, ctypes.c_size_t)


class StubTimeout(Exception):
    """Raised by a card handler: the call timed out (the stub throws ``std::system_error(ETIME)``)."""


def build_stub(root: Path) -> Path:
    """An ``$XILINX_XRT`` tree at ``root``: the stub headers and the stub ``lib/libxrt_coreutil.so`` (g++)."""
    shutil.copytree(INCLUDE, root / "include", dirs_exist_ok=True)
    (root / "lib").mkdir(parents=True, exist_ok=True)
    lib = root / "lib" / "libxrt_coreutil.so"
    cmd = ["g++", "-shared", "-fPIC", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{root / 'include'}",
           str(SOURCE), "-Wl,-soname,libxrt_coreutil.so", "-o", str(lib)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"building the XRT stub failed:\n{proc.stderr}")
    return root


class StubXrt:
    """The stub library's hooks (``xrt_stub_*``). Load it after (or before) the shim: the dynamic loader shares one
    instance of ``libxrt_coreutil.so`` between them."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        lib = self.lib = ctypes.CDLL(str(self.root / "lib" / "libxrt_coreutil.so"))
        lib.xrt_stub_log.restype = ctypes.c_char_p
        lib.xrt_stub_set_handler.argtypes = [HANDLER]
        lib.xrt_stub_fail.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.xrt_stub_set_devices.argtypes = [ctypes.c_uint]
        lib.xrt_stub_load.argtypes = [ctypes.c_char_p]
        lib.xrt_stub_register.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32)]
        self._handler: Any = None  # keeps the ctypes callback alive

    def reset(self) -> None:
        """Forget every call, failure, register, handler; one device, any UUID opens."""
        self.lib.xrt_stub_reset()
        self._handler = None

    def calls(self, op: str | None = None) -> list[tuple[str, str, int, int]]:
        """Every call so far, ``(op, name, a, b)`` (the stub's header comment), optionally only those of ``op``."""
        out = []
        for line in (self.lib.xrt_stub_log() or b"").decode().splitlines():
            o, name, a, b = line.split("\t")
            if op is None or o == op:
                out.append((o, name, int(a), int(b)))
        return out

    def ops(self) -> list[str]:
        return [c[0] for c in self.calls()]

    def fail(self, op: str, message: str = "injected failure", kind: str = "runtime", code: int = 0,
             count: int = -1) -> None:
        """Make the next ``count`` calls of ``op`` (< 0: all) throw (``kind``: runtime, system with ``code``, other)."""
        self.lib.xrt_stub_fail(op.encode(), kind.encode(), int(code), message.encode(), int(count))

    def set_devices(self, n: int) -> None:
        self.lib.xrt_stub_set_devices(int(n))

    def load(self, uuid: str) -> None:
        """Only this xclbin UUID opens graphs and IPs (built-in mode)."""
        self.lib.xrt_stub_load(uuid.encode())

    def register(self, ip: str, offset: int) -> int | None:
        """The built-in register file's word at ``offset`` of ``ip`` (None: never written)."""
        v = ctypes.c_uint32()
        return int(v.value) if self.lib.xrt_stub_register(ip.encode(), int(offset), ctypes.byref(v)) else None

    def set_handler(self, handle: Callable[[str, str, str, int, int], int | None]) -> None:
        """Answer every call with ``handle(op, name, uuid, a, b)``: its int return is the value (``ip.read``);
        :class:`StubTimeout` a time-out; any other exception a failure with its message."""

        def bridge(op: bytes, name: bytes, uuid: bytes, a: int, b: int, value: Any, err: int, errlen: int) -> int:
            try:
                v = handle(op.decode(), name.decode(), uuid.decode(), int(a), int(b))
                value[0] = int(v or 0) & 0xFFFFFFFF
                return 0
            except StubTimeout as exc:
                msg, rc = str(exc) or "timed out", 1
            except Exception as exc:  # the handler's refusal, as XRT's exception text
                msg, rc = " ".join(str(exc).split()) or type(exc).__name__, -1
            raw = msg.encode()[: int(errlen)]
            ctypes.memmove(err, raw, len(raw))
            return rc

        self._handler = HANDLER(bridge)
        self.lib.xrt_stub_set_handler(self._handler)


def card_handler(card: Any) -> Callable[[str, str, str, int, int], int | None]:
    """The stub's calls answered by a fake card (``tests/fakes/engine_card.py``): devices ``< card.n_cards``; graphs
    and IPs open only with the UUID the fake pyxrt loaded and a name the xclbin has; registers through
    ``card.reg_read`` / ``reg_write``; the graph through ``card.graph_run`` / ``graph_done``. Records what the card's
    log expects."""

    def loaded(uuid: str, index: int) -> None:
        if not card.loaded or uuidlib.UUID(uuid) != uuidlib.UUID(card.xclbin_uuid):
            raise RuntimeError(f"no xclbin with that UUID is loaded on card {index}")

    def handle(op: str, name: str, uuid: str, a: int, b: int) -> int | None:
        if op == "device.open":
            if not 0 <= a < card.n_cards:
                raise RuntimeError(f"Could not open device with index '{a}'")
        elif op == "graph.open":
            card.record("graph.open", name=name)
            loaded(uuid, a)
            if name != card.graph_name:
                raise RuntimeError("no such graph in the xclbin")
        elif op == "ip.open":
            card.record("ip.open", kernel=name)
            loaded(uuid, a)
            if name not in card.regs or name not in card.kernels:
                raise RuntimeError("no such IP")
        elif op == "graph.run":
            card.record("graph.run", iterations=a)
            card.graph_run(a)
        elif op == "graph.wait":
            card.record("graph.wait", timeout_ms=a)
            if not card.graph_done():
                raise StubTimeout("graph wait timed out")
        elif op in ("graph.end", "graph.close"):
            card.record(op)
        elif op == "ip.read":
            return card.reg_read(name, a)
        elif op == "ip.write":
            card.reg_write(name, a, b)
        elif op == "ip.close":
            card.record("ip.close", kernel=name)
        else:
            raise RuntimeError(f"FAKE card: the stub call {op} is not modeled")
        return None

    return handle


__all__ = ["INCLUDE", "SOURCE", "StubTimeout", "StubXrt", "build_stub", "card_handler"]

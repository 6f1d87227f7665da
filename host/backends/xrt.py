"""``xrt``: an engine build, one launch per layer, on a VCK5000 through XRT 2022.2 (pyxrt and the C++ shim).

The full description: ``docs/internals/host.md``, section ``host/backends/xrt.py``.
"""

from __future__ import annotations

import uuid as uuidlib
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.errors import ToolMissing, UserError
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.engine_hw import EngineCardDevice
from vckattn.hw.design.manifest import Manifest
from vckattn.hw.spec.driver import IpPort

XRT_MISSING = "XRT not found: cannot import pyxrt (install XRT 2022.2 and `source /opt/xilinx/xrt/setup.sh`)"
#: run states that mean "still going" after a wait: reported as a timeout
PENDING = {"ERT_CMD_STATE_TIMEOUT", "ERT_CMD_STATE_NEW", "ERT_CMD_STATE_QUEUED", "ERT_CMD_STATE_RUNNING",
            "ERT_CMD_STATE_SUBMITTED"}


def import_pyxrt(manifest: Manifest | None = None) -> Any:
    """The ``pyxrt`` module; with ``VCKATTN_EMULATION=csim`` a software device running the engine build of
    ``manifest`` (:mod:`.emulation`; UserError for a build it cannot emulate)."""
    from vckattn.host.backends.emulation import EMULATION_ENV, emulation_mode, pyxrt_module

    mode = emulation_mode()
    if mode is not None:
        if manifest is None:
            raise UserError(f"{EMULATION_ENV}={mode}: the emulated card runs engine builds through `vckattn run "
                            f"--backend xrt`; unset {EMULATION_ENV} for this command")
        return pyxrt_module(manifest, mode)
    try:
        import pyxrt  # type: ignore[import-not-found]
    except ImportError:
        raise ToolMissing(XRT_MISSING) from None
    if pyxrt is None:  # a sys.modules entry set to None blocks the import the same way
        raise ToolMissing(XRT_MISSING)
    return pyxrt


def reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def check_file(path: Path, what: str = "xclbin") -> Path:
    path = Path(path)
    if not path.exists():
        raise DeviceError(f"{path}: {what} file not found")
    if not path.is_file():
        raise DeviceError(f"{path}: not a regular file (expected the {what})")
    try:
        with path.open("rb") as f:
            f.read(1)
    except OSError as exc:
        raise DeviceError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    return path


def read_xclbin(pyxrt: Any, path: Path) -> tuple[Any, str, set[str]]:
    """``(xclbin object, UUID string, kernel names)`` of an xclbin file."""
    try:
        xb = pyxrt.xclbin(str(path))
        got = str(xb.get_uuid().to_string()).lower()
    except Exception as exc:  # pyxrt raises RuntimeError and friends
        raise DeviceError(f"{path}: cannot read the xclbin: {reason(exc)}") from None
    return xb, got, xclbin_kernel_names(xb)


def xclbin_kernel_names(xb: Any) -> set[str]:
    names: set[str] = set()
    if hasattr(xb, "get_kernels"):
        names |= {str(k.get_name()) for k in xb.get_kernels()}
    if hasattr(xb, "get_ips"):  # compute units are "kernel:instance"
        names |= {str(ip.get_name()).split(":")[0] for ip in xb.get_ips()}
    return names


def open_card(pyxrt: Any, m: Manifest, xclbin: Path, device_index: int) -> tuple[Any, Any, str]:
    """Open card ``device_index`` and load ``xclbin`` on it after checking the file against manifest ``m`` (the
    manifest records a UUID, the file's UUID is that one, it has every kernel the manifest lists); returns
    ``(device, the loaded xclbin's uuid object, its UUID string)``. DeviceError naming what is wrong."""
    emulated = getattr(pyxrt, "vckattn_emulation", None)
    path = Path(xclbin) if emulated else check_file(xclbin)  # the emulated card's design is the manifest's
    want = m.uuid
    if want is None and emulated:
        from vckattn.host.backends.emulation import emulated_uuid

        want = emulated_uuid(m)
    if want is None:
        raise DeviceError(f"{m.file}: xclbin.uuid: the manifest records no built xclbin (UUID null); "
                          f"build it with Vitis and record the xclbin's UUID")
    try:
        dev = pyxrt.device(device_index)
    except Exception as exc:
        raise DeviceError(f"no card at index {device_index}: {reason(exc)}") from None
    xb, got, names = read_xclbin(pyxrt, path)
    if got != want.lower():
        raise DeviceError(f"{path}: xclbin UUID {got} does not match {m.file} ({want}): "
                          f"this xclbin is not the {m.name} build")
    missing = [k for k in m.kernel_names if k not in names]
    if missing:
        raise DeviceError(f"{path}: the xclbin lacks kernel(s) {', '.join(missing)} listed in {m.file} "
                          f"(it has {', '.join(sorted(names)) or 'none'})")
    try:
        xuuid = dev.load_xclbin(xb)
    except Exception as exc:
        raise DeviceError(f"{path}: cannot load the xclbin on card {device_index}: {reason(exc)}") from None
    return dev, xuuid, got


def _state_name(state: Any) -> str:
    return str(getattr(state, "name", state))


def release_graph(graph: Any, ran: bool, idle: bool) -> None:
    """End (only after a run that finished: ``end()`` blocks on a hung graph) and close an AIE graph handle of the
    shim; errors are ignored (this releases, it does not report)."""
    try:
        if ran and idle:
            graph.end()
    except Exception:
        pass
    try:
        graph.close()
    except Exception:
        pass


class XrtDevice(EngineCardDevice):
    name = "xrt"
    where = "hardware: VCK5000 through XRT (pyxrt and the graph shim): the engine's movers, PL top and AIE graph"
    balance = True

    def __init__(self, manifest: Manifest, seed: int = 0, xclbin: Path | None = None, device_index: int = 0,
                 timeout_ms: int | None = None, **options: Any) -> None:
        super().__init__(manifest, seed, xclbin, timeout_ms, **options)
        self.device_index = int(device_index)
        from vckattn.host.backends.emulation import EMULATION_ENV, emulation_mode

        mode = emulation_mode()
        if mode is not None:
            norm = "the PL top Verilated: SwiftMax and online softmax" if self.params.online_lanes \
                else "the PL top Verilated: SwiftMax"
            self.where = (f"emulation ({EMULATION_ENV}={mode}): the xrt backend's host code on a software card whose "
                          f"kernels are the engine's C-simulation (HLS movers, AIE kernels' scalar path, {norm})")
            self.online_softmax = True  # the emulated card's C-simulation carries the online-softmax channel
        self.graph_name = str(manifest.data.get("graph", {}).get("name", ""))
        self.uuid: str | None = None
        self._pyxrt: Any = None
        self._dev: Any = None
        self._units: dict[str, Any] = {}  # compute unit -> pyxrt.kernel
        self._ip: Any = None
        self._graph: Any = None
        self._graph_ran = False
        self._graph_idle = True
        self._runs: dict[str, Any] = {}

    # ------------------------------------------------------------------------------ open / close

    def _open(self) -> None:
        m = self.manifest
        pyxrt = self._pyxrt = import_pyxrt(m)
        self._dev, xuuid, self.uuid = open_card(pyxrt, m, self.xclbin, self.device_index)
        for kname, cu in self.units():
            try:
                self._units[cu] = pyxrt.kernel(self._dev, xuuid, f"{kname}:{{{cu}}}")
            except Exception as exc:
                raise DeviceError(f"kernel {kname} ({cu}): cannot open it on card {self.device_index}: "
                                  f"{reason(exc)}") from None
            self.kernels_checked.append({"name": cu, "kind": "hls", "kernel": kname})
        missing = [cu for p in self.pipes for cu in (p.q, p.k, p.v, p.out) if cu not in self._units]
        if missing:
            raise DeviceError(f"{m.file}: connectivity names compute unit(s) {', '.join(missing)} that no kernel has")
        shim = getattr(pyxrt, "vckattn_emulated_shim", None)  # VCKATTN_EMULATION: the shim on the same card
        if shim is None:
            from vckattn.host.backends import xrt_graph

            shim = xrt_graph.load_shim()
        raw = uuidlib.UUID(self.uuid).bytes
        self._ip = shim.ip(self.device_index, raw, self.pl_top)
        got = self._check_ident(IpPort(self._ip))
        self.kernels_checked.append({"name": self.pl_top, "kind": "rtl", "id": f"{got:#010x}"})
        self._graph = shim.graph(self.device_index, raw, self.graph_name)
        self._graph_idle, self._graph_ran = True, False
        self.kernels_checked.append({"name": self.graph_name, "kind": "aie-graph"})

    def close(self) -> None:
        for r in self._runs.values():
            try:
                r.wait(1)
            except Exception:  # releasing
                pass
        self._runs = {}
        if self._graph is not None:
            release_graph(self._graph, self._graph_ran, self._graph_idle)
            self._graph = None
        if self._ip is not None:
            try:
                self._ip.close()
            except Exception:
                pass
            self._ip = None
        self._bufs, self._units, self._dev = {}, {}, None

    def _is_open(self) -> bool:
        return self._dev is not None and self._graph is not None

    def _register_port(self) -> IpPort:
        if self._ip is None:
            raise DeviceError(f"xrt backend: kernel {self.pl_top} is not open (use the device as a context manager)")
        return IpPort(self._ip)

    # ------------------------------------------------------------------------------ buffers, units, graph

    def _alloc(self, name: str, unit: str, port: str, nbytes: int) -> Any:
        ports = [p["name"] for p in self.manifest.kernel(self.kernel_of(unit))["ports"]]
        try:
            group = self._units[unit].group_id(ports.index(port))
            return self._pyxrt.bo(self._dev, int(nbytes), self._pyxrt.bo.flags.normal, group)
        except Exception as exc:
            raise DeviceError(f"cannot allocate the {name} buffer ({nbytes} bytes) on card {self.device_index}: "
                              f"{reason(exc)}") from None

    def _upload(self, buf: Any, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        buf.write(raw, 0)
        buf.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, raw.nbytes, 0)

    def _download(self, buf: Any, nbytes: int) -> np.ndarray:
        buf.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, nbytes, 0)
        return np.asarray(buf.read(nbytes, 0)).view(np.uint8).reshape(-1)[:nbytes].copy()

    def _start(self, unit: str, values: dict[str, Any]) -> None:
        from vckattn.host.backends import hwio

        kname = self.kernel_of(unit)
        args = hwio.kernel_args(self.manifest.kernel(kname), values)
        try:
            self._runs[unit] = self._units[unit](*args)
        except Exception as exc:
            raise DeviceError(f"kernel {kname} ({unit}): cannot start launch {self.launches}: {reason(exc)}") from None

    def _wait(self, unit: str) -> None:
        run = self._runs.pop(unit)
        state = run.wait(self.timeout_ms)
        sname = str(getattr(state, "name", state))
        if sname == "ERT_CMD_STATE_COMPLETED":
            return
        if sname in PENDING:
            raise DeviceError(f"device timeout after {self.timeout_ms} ms in {unit} on launch {self.launches}")
        raise DeviceError(f"device error in {unit} on launch {self.launches}: run state {sname}")

    def _graph_run(self, iterations: int) -> None:
        self._graph_idle, self._graph_ran = False, True
        self._graph.run(iterations)

    def _graph_wait(self) -> None:
        if not self._graph.wait(self.timeout_ms):
            raise DeviceError(f"device timeout after {self.timeout_ms} ms in the AIE graph {self.graph_name} on "
                              f"launch {self.launches}")
        self._graph_idle = True


__all__ = ["PENDING", "XRT_MISSING", "XrtDevice", "import_pyxrt", "open_card", "read_xclbin", "release_graph"]

"""``xrt`` for engine builds: one launch per layer on a VCK5000 through XRT 2022.2 (pyxrt and the C++ shim).

What runs where (the launch, buffers and checks: :mod:`.engine_hw`):

* **pyxrt**: the card, the xclbin (UUID and kernel names checked against the manifest before it is loaded,
  :func:`.xrt.open_card`), one ``pyxrt.kernel`` per mover compute unit (``mm2s_engine:{mm2s_engine_q_<i>}``,
  ``mm2s_engine:{mm2s_engine_k_<i>}``, ``mm2s_engine:{mm2s_engine_v_<i>}``, ``s2mm_engine:{s2mm_engine_<i>}``), each
  buffer allocated in ``kernel.group_id`` of its first user, the units' runs (waited with ``run.wait(timeout_ms)``);
* **the C++ shim** (:mod:`.xrt_graph`): the PL top ``engine_pl``'s AXI4-Lite registers (``xrt::ip``: its ``ID``
  checked at :meth:`~.engine_hw.EngineCardDevice.open`; the layer's SwiftMax constants written by
  :func:`vckattn.hw.driver.program` and read back exactly) and the AIE graph (``xrt::graph``: ``run(n)`` with every
  pipeline balanced to ``n`` tiles, ``wait(timeout)``, ``end`` at close).

Not read: the movers' return values; pyxrt 2022.2 gives no kernel return value.

With ``VCKATTN_EMULATION=csim`` the same code runs on an emulated card (:mod:`.emulation`): pyxrt and the shim are
replaced by a software device whose kernels are the engine's C-simulation; no xclbin is read.
"""

from __future__ import annotations

import uuid as uuidlib
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.engine_hw import EngineCardDevice
from vckattn.host.backends.xrt import PENDING, import_pyxrt, open_card, reason, release_graph
from vckattn.hw.driver import IpPort
from vckattn.hw.manifest import Manifest


class EngineXrtDevice(EngineCardDevice):
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
            norm = "HLS SwiftMax and online-softmax channel" if self.params.online_lanes else "HLS SwiftMax"
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


__all__ = ["EngineXrtDevice"]

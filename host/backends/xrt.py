"""``xrt``: the attention build on a VCK5000 through XRT 2022.2's Python binding (pyxrt).

What runs where:

* **pyxrt** (as documented for XRT 2022.2): ``device(index)``, ``xclbin(path)`` (UUID and kernel
  names checked against the manifest before anything is loaded), ``device.load_xclbin``,
  ``kernel(device, uuid, name)`` for the HLS kernels (three data movers, ``score_switch``), ``bo(device, nbytes,
  bo.flags.normal, kernel.group_id(arg))`` buffers with ``write``/``read``/``sync``, runs started by
  calling the kernel with its arguments and waited with ``run.wait(timeout_ms)``.
* **the C++ shim** (:mod:`.xrt_graph`): the AIE graph (``xrt::graph``: ``run(n_tiles)``,
  ``wait(timeout)``) and the normalizer kernels' AXI4-Lite registers (``xrt::ip``), neither of
  which pyxrt 2022.2 binds. The normalizers are user-managed RTL kernels (AXI4-Stream in/out plus
  registers, no ``ap_ctrl``), for which XRT documents ``xrt::ip``; their ``ID`` register is read
  back at :meth:`XrtDevice.open` and compared with the manifest.

Kernel arguments follow the manifest's port order (AXI4-Stream ports get a ``None`` placeholder):
``mm2s_tiles(desc, q, mask, n_tiles, head_dim, keys_pad)``, ``mm2s_kv(desc, kv, n_tiles, n_kv_heads,
head_dim, keys_pad)``, ``s2mm_out(desc, out, n_tiles, head_dim, rq_mult, rq_shift)``,
``score_switch(n_tiles, select)`` (:func:`.hwio.launch_values`). Buffers and the double-buffered
launch loop: :mod:`vckattn.host.tile_buffers` and :mod:`.hwio`.

Buffer memory groups: each buffer is allocated once, in ``kernel.group_id(arg)`` of the *first*
kernel in manifest order with an ``m_axi`` port of that name (``desc``: ``mm2s_tiles``, although
``mm2s_kv`` and ``s2mm_out`` read it too). On the VCK5000 build every ``m_axi`` port is connected to
the same DDR, so the group ids of all users of a shared buffer agree; a build that spread the ports
over several memory banks would need the shared ones connected to a common bank.

``graph_factory`` / ``ip_factory`` (callables ``(device_index, uuid_bytes, name)`` returning
objects with the :class:`.xrt_graph.Graph` / :class:`.xrt_graph.Ip` methods) replace the shim,
for tests.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.errors import ToolMissing, UserError
from vckattn.host import tile_buffers as tb
from vckattn.host.backends import hwio
from vckattn.host.backends.base import DeviceError
from vckattn.host.tiler import LayerJob, TileResult
from vckattn.hw.driver import IpPort
from vckattn.hw.manifest import BITSTREAMS, Manifest

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


class XrtDevice(hwio.BufferedDevice):
    name = "xrt"
    where = "hardware: VCK5000 through XRT (pyxrt)"

    def __init__(self, manifest: Manifest, xclbin: Path | None = None, device_index: int = 0,
                 tiles_per_launch: int = tb.TILES_PER_LAUNCH, timeout_ms: int | None = None,
                 graph_factory: Callable[[int, bytes, str], Any] | None = None,
                 ip_factory: Callable[[int, bytes, str], Any] | None = None) -> None:
        super().__init__(manifest, tiles_per_launch, timeout_ms)
        self.xclbin = Path(xclbin) if xclbin is not None else BITSTREAMS / manifest.data["xclbin"]["file"]
        self.device_index = int(device_index)
        self.graph_factory, self.ip_factory = graph_factory, ip_factory
        self.uuid: str | None = None
        self.kernels_checked: list[dict[str, Any]] = []
        self._pyxrt: Any = None
        self._dev: Any = None
        self._kernels: dict[str, Any] = {}
        self._ips: dict[str, Any] = {}
        self._graph: Any = None
        self._graph_idle = True
        self._graph_ran = False
        self._runs: dict[int, dict[str, Any]] = {}

    # ------------------------------------------------------------------------------ open / close

    def _open(self) -> None:
        m = self.manifest
        pyxrt = self._pyxrt = import_pyxrt(m)
        self._dev, xuuid, got = open_card(pyxrt, m, self.xclbin, self.device_index)
        self.uuid = got
        raw_uuid = uuidlib.UUID(got).bytes
        for k in m.data["kernels"]:
            if k["kind"] != "hls":
                continue
            try:
                self._kernels[k["name"]] = pyxrt.kernel(self._dev, xuuid, k["name"])
            except Exception as exc:
                raise DeviceError(f"kernel {k['name']}: cannot open it on card {self.device_index}: {reason(exc)}") \
                    from None
            self.kernels_checked.append({"name": k["name"], "kind": "hls"})
        ip_factory, graph_factory = self.ip_factory, self.graph_factory
        if ip_factory is None or graph_factory is None:
            from vckattn.host.backends import xrt_graph

            shim = xrt_graph.load_shim()
            ip_factory = ip_factory or shim.ip
            graph_factory = graph_factory or shim.graph
        for k in m.data["kernels"]:
            if k["kind"] != "rtl":
                continue
            ip = self._ips[k["name"]] = ip_factory(self.device_index, raw_uuid, k["name"])
            got_id = self._check_ident(k, IpPort(ip))
            self.kernels_checked.append({"name": k["name"], "kind": "rtl", "id": f"{got_id:#010x}"})
        gname = m.data["graph"]["name"]
        self._graph = graph_factory(self.device_index, raw_uuid, gname)
        self._graph_idle = True
        self.kernels_checked.append({"name": gname, "kind": "aie-graph"})

    def close(self) -> None:
        for runs in self._runs.values():
            for r in runs.values():
                try:
                    r.wait(1)
                except Exception:  # releasing
                    pass
        self._runs = {}
        if self._graph is not None:
            release_graph(self._graph, self._graph_ran, self._graph_idle)
            self._graph = None
        for ip in self._ips.values():
            try:
                ip.close()
            except Exception:
                pass
        self._ips = {}
        self._sets, self._kv, self._geom = [], None, None
        self._kernels = {}
        self._dev = None

    # ------------------------------------------------------------------------------ configure

    def _ip(self, name: str) -> Any:
        if name not in self._ips:
            raise DeviceError(f"xrt backend: kernel {name} is not open (call open() first)")
        return self._ips[name]

    def _register_port(self, kernel: str) -> IpPort:
        return IpPort(self._ip(kernel))

    def read_registers(self, kernel: str) -> dict[str, int]:
        """Every register of ``kernel`` in the manifest, read from the card (32-bit words)."""
        port = self._register_port(kernel)
        return {r["name"]: port.read32(int(r["offset"])) for r in self.manifest.kernel(kernel)["registers"]}

    # ------------------------------------------------------------------------------ buffers / runs

    def _alloc(self, port: str, nbytes: int) -> Any:
        """A buffer for ``m_axi`` argument ``port``, in the memory group of its first user (module docstring)."""
        pyxrt = self._pyxrt
        for k in self.manifest.data["kernels"]:
            names = [p["name"] for p in k["ports"] if p["protocol"] == "m_axi"]
            if k["kind"] == "hls" and port in names:
                idx = [p["name"] for p in k["ports"]].index(port)
                group = self._kernels[k["name"]].group_id(idx)
                return pyxrt.bo(self._dev, max(int(nbytes), 64), pyxrt.bo.flags.normal, group)
        raise DeviceError(f"{self.manifest.file}: no kernel has a buffer argument {port!r}")

    def _is_open(self) -> bool:
        return self._dev is not None

    def _write(self, bo: Any, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        bo.write(raw, 0)
        bo.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, raw.nbytes, 0)

    def _start(self, job: LayerJob, launch: hwio.Launch) -> None:
        values = hwio.launch_values(job, launch.n, {**self._sets[launch.slot], "kv": self._kv}, self._rq, self._select)
        self._graph_idle, self._graph_ran = False, True
        self._graph.run(launch.n)
        runs = {}
        for name in hwio.START_ORDER:
            args = hwio.kernel_args(self.manifest.kernel(name), values)
            try:
                runs[name] = self._kernels[name](*args)
            except Exception as exc:
                raise DeviceError(f"kernel {name}: cannot start {launch.describe()}: {reason(exc)}") from None
        self._runs[launch.index] = runs

    def _finish(self, job: LayerJob, launch: hwio.Launch) -> list[TileResult]:
        runs = self._runs.pop(launch.index)
        for name in hwio.LAUNCHED:
            state = runs[name].wait(self.timeout_ms)
            sname = _state_name(state)
            if sname == "ERT_CMD_STATE_COMPLETED":
                continue
            if sname in PENDING:
                raise hwio.timeout_error(self.timeout_ms, name, launch)
            raise DeviceError(f"device error in kernel {name} on {launch.describe()}: run state {sname}")
        if not self._graph.wait(self.timeout_ms):
            raise hwio.timeout_error(self.timeout_ms, self.manifest.data["graph"]["name"], launch)
        self._graph_idle = True
        q_rows, hd = job.tile.q_rows, int(job.k.shape[-1])
        n = tb.out_nbytes(launch.n, q_rows, hd)
        out = self._sets[launch.slot]["out"]
        out.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, n, 0)
        raw = np.asarray(out.read(n, 0)).view(np.uint8)
        return tb.unpack_out(raw, launch.n, q_rows, hd)


__all__ = ["PENDING", "XRT_MISSING", "XrtDevice", "check_file", "import_pyxrt", "open_card", "read_xclbin", "reason",
           "release_graph", "xclbin_kernel_names"]

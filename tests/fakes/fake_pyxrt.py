"""FAKE: a stand-in for XRT 2022.2's ``pyxrt`` module that records calls; not hardware. (The AIE graph and the
RTL kernels' registers go through the project's real C++ shim, built against the stub XRT library in
``xrt_stub/``; :func:`fakes.xrt_stub.card_handler` routes those calls to the same card.)

Only the documented surface the ``xrt`` backend uses: ``device(index)`` with ``load_xclbin``; ``xclbin(path)``
with ``get_uuid().to_string()``, ``get_kernels()``, ``get_ips()``; ``kernel(device, uuid, name)`` (``name`` a
kernel, or ``kernel:{cu}`` one of its compute units) with ``group_id(i)`` and ``__call__(*args) -> run``;
``run.wait(timeout_ms)`` / ``run.state()``; ``bo(device, nbytes, bo.flags.normal, group)`` with ``write``,
``read``, ``sync``, ``size``, ``map``; ``xclBOSyncDirection``, ``ert_cmd_state``, ``uuid``. Everything is
routed to a :class:`~fakes.engine_card.FakeEngineCard` and logged in
``card.log``.

Checks a real card would only show as garbage, made loud here: a kernel argument of the wrong kind
(a buffer where the manifest has a scalar, ...), a buffer allocated in another argument's memory
group (``group_id`` returns a distinct tag per kernel argument, standing for the memory bank that
argument is connected to; a buffer several kernels share, such as ``desc``, is accepted in the group
of any of its users, i.e. any kernel's ``m_axi`` argument of that name: the VCK5000 build connects
all of them to the same DDR), reading a buffer the host never synced back (the device side starts
as 0xA5 bytes).

``module_for(card)`` returns a module object to install with
``monkeypatch.setitem(sys.modules, "pyxrt", module_for(card))``.
"""

from __future__ import annotations

import enum
import itertools
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .engine_card import FakeEngineCard

ert_cmd_state = enum.IntEnum("ert_cmd_state", {
    "ERT_CMD_STATE_NEW": 1, "ERT_CMD_STATE_QUEUED": 2, "ERT_CMD_STATE_RUNNING": 3, "ERT_CMD_STATE_COMPLETED": 4,
    "ERT_CMD_STATE_ERROR": 5, "ERT_CMD_STATE_ABORT": 6, "ERT_CMD_STATE_SUBMITTED": 7, "ERT_CMD_STATE_TIMEOUT": 8,
    "ERT_CMD_STATE_NORESPONSE": 9, "ERT_CMD_STATE_SKERROR": 10, "ERT_CMD_STATE_SKCRASHED": 11})
xclBOSyncDirection = enum.IntEnum("xclBOSyncDirection", {
    "XCL_BO_SYNC_BO_TO_DEVICE": 0, "XCL_BO_SYNC_BO_FROM_DEVICE": 1, "XCL_BO_SYNC_BO_GMIO_TO_AIE": 2,
    "XCL_BO_SYNC_BO_AIE_TO_GMIO": 3}, start=0)
_ids = itertools.count()


def module_for(card: FakeEngineCard) -> ModuleType:
    """A ``pyxrt`` module object bound to ``card``."""
    m = ModuleType("pyxrt")
    m.__doc__ = "FAKE pyxrt (tests/fakes/fake_pyxrt.py): records calls; not hardware"
    m.XCL_BO_FLAGS_NONE = 0
    m.ert_cmd_state = ert_cmd_state
    m.xclBOSyncDirection = xclBOSyncDirection

    class uuid:  # noqa: N801 - pyxrt's names
        def __init__(self, s: str) -> None:
            self._s = str(s).lower()

        def to_string(self) -> str:
            return self._s

    class xclbinkernel:  # noqa: N801
        def __init__(self, name: str) -> None:
            self._name = name

        def get_name(self) -> str:
            return self._name

    class xclbin:  # noqa: N801
        def __init__(self, path: str) -> None:
            card.record("xclbin", path=str(path))
            if not Path(path).is_file():
                raise RuntimeError(f"Failed to open xclbin file '{path}'")
            if card.unreadable_xclbin:
                raise RuntimeError("Invalid xclbin: bad magic")
            self.path = str(path)

        def get_uuid(self) -> uuid:
            return uuid(card.xclbin_uuid)

        def get_kernels(self) -> list[xclbinkernel]:
            return [xclbinkernel(k) for k in card.kernels]

        def get_ips(self) -> list[xclbinkernel]:  # compute units: the manifest's, else one "<kernel>_1"
            return [xclbinkernel(f"{k}:{cu}") for k in card.kernels
                    for cu in card.manifest.kernel(k).get("compute_units") or [f"{k}_1"]]

    class device:  # noqa: N801
        def __init__(self, index: int = 0) -> None:
            card.record("device", index=int(index))
            if not 0 <= int(index) < card.n_cards:
                raise RuntimeError(f"Could not open device with index '{index}'")
            self.index = int(index)

        def load_xclbin(self, xb: xclbin) -> uuid:
            card.record("load_xclbin", path=xb.path)
            card.loaded = True
            return uuid(card.xclbin_uuid)

    class bo:  # noqa: N801
        class flags(enum.IntEnum):  # noqa: N801
            normal = 0
            cacheable = 1
            device_only = 2
            host_only = 3
            p2p = 4
            svm = 5

        normal = flags.normal

        def __init__(self, dev: device, nbytes: int, flags: Any, group: int) -> None:
            if not isinstance(dev, device) or flags != bo.flags.normal:
                raise TypeError("FAKE pyxrt.bo(device, nbytes, bo.flags.normal, group)")
            self.tag = f"bo{next(_ids)}"
            self.group = int(group)
            self.host = np.zeros(int(nbytes), np.uint8)
            self.device = np.full(int(nbytes), 0xA5, np.uint8)
            card.record("bo", bo=self.tag, nbytes=int(nbytes), group=self.group)

        def size(self) -> int:
            return int(self.host.size)

        def write(self, data: Any, seek: int) -> None:
            raw = np.frombuffer(memoryview(data).cast("B"), np.uint8)
            self.host[seek:seek + raw.size] = raw
            card.record("bo.write", bo=self.tag, nbytes=int(raw.size), seek=int(seek))

        def read(self, size: int, skip: int) -> np.ndarray:
            card.record("bo.read", bo=self.tag, nbytes=int(size), skip=int(skip))
            return self.host[skip:skip + size].view(np.int8).copy()

        def map(self) -> memoryview:
            return memoryview(self.host)

        def sync(self, direction: Any, size: int | None = None, offset: int = 0) -> None:
            size = self.host.size if size is None else int(size)
            sl = slice(offset, offset + size)
            if direction == xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE:
                self.device[sl] = self.host[sl]
                card.record("bo.sync", bo=self.tag, dir="to_device", nbytes=size)
            elif direction == xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE:
                self.host[sl] = self.device[sl]
                card.record("bo.sync", bo=self.tag, dir="from_device", nbytes=size)
            else:
                raise ValueError(f"FAKE: unsupported sync direction {direction!r}")

        # card side
        def device_bytes(self) -> np.ndarray:
            return self.device

    class run:  # noqa: N801
        def __init__(self, fake: Any) -> None:
            self._fake = fake

        def wait(self, timeout_ms: int = 0) -> ert_cmd_state:
            card.record("wait", kernel=self._fake.kernel, timeout_ms=int(timeout_ms))
            card.progress()
            state = self._fake.state
            if state == "ERT_CMD_STATE_RUNNING":
                state = "ERT_CMD_STATE_TIMEOUT"  # the wait ran out
            return ert_cmd_state[state]

        def state(self) -> ert_cmd_state:
            return ert_cmd_state[self._fake.state]

    kernel_names = [k["name"] for k in card.manifest.data["kernels"]]

    class kernel:  # noqa: N801
        def __init__(self, dev: device, xuuid: uuid, name: str, *mode: Any) -> None:
            card.record("kernel", name=name)
            if not card.loaded or xuuid.to_string() != card.xclbin_uuid:
                raise RuntimeError(f"No xclbin with that UUID is loaded (kernel '{name}')")
            kname, _, cus = name.partition(":")  # "kernel:{cu}" selects one compute unit, as XRT's names do
            if kname not in card.kernels:
                raise RuntimeError(f"No such kernel '{kname}'")
            self.name = kname
            self.entry = card.manifest.kernel(kname)
            self.cu = kname
            if cus:
                cu = cus.strip("{}")
                if not (cus.startswith("{") and cus.endswith("}")) or cu not in self.entry.get("compute_units", []):
                    raise RuntimeError(f"No compute unit matching '{name}'")
                self.cu = cu

        def _group(self, index: int) -> int:
            return 1000 * kernel_names.index(self.name) + int(index)

        def _user_groups(self, index: int) -> dict[int, str]:
            """The groups a buffer for argument ``index`` may come from: this argument's and those of
            the other kernels' ``m_axi`` arguments of the same name (the buffer's other users)."""
            port = self.entry["ports"][index]["name"]
            out = {}
            for name in kernel_names:
                for i, p in enumerate(card.manifest.kernel(name)["ports"]):
                    if p["name"] == port and p["protocol"] == "m_axi":
                        out[1000 * kernel_names.index(name) + i] = f"{name}.{port}"
            return out

        def group_id(self, index: int) -> int:
            card.record("group_id", kernel=self.name, index=int(index))
            return self._group(index)

        def __call__(self, *args: Any) -> run:
            ports = self.entry["ports"]
            if len(args) != len(ports):
                raise TypeError(f"FAKE: {self.name} takes {len(ports)} arguments (manifest ports), got {len(args)}")
            named = {}
            for i, (p, a) in enumerate(zip(ports, args, strict=True)):
                if p["protocol"] == "axis":
                    if a is not None:
                        raise TypeError(f"FAKE: {self.name} argument {p['name']} is a stream: pass None")
                elif p["protocol"] == "m_axi":
                    if not isinstance(a, bo):
                        raise TypeError(f"FAKE: {self.name} argument {p['name']} must be a bo, got {type(a)}")
                    users = self._user_groups(i)
                    if a.group not in users:
                        raise ValueError(f"FAKE: bo for {self.name}.{p['name']} was allocated in group {a.group}, "
                                         f"kernel.group_id({i}) is {self._group(i)} (the groups of its users "
                                         f"{', '.join(users.values())}: {sorted(users)})")
                    named[p["name"]] = a
                else:
                    if not isinstance(a, int | np.integer) or isinstance(a, bool):
                        raise TypeError(f"FAKE: {self.name} argument {p['name']} must be an int, got {type(a)}")
                    named[p["name"]] = int(a)
            return run(card.start(self.cu, named))

    for cls in (uuid, xclbin, device, bo, run, kernel):
        setattr(m, cls.__name__, cls)
    return m

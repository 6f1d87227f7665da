"""An emulated card behind the ``xrt`` backend's own API, in the spirit of XRT's ``XCL_EMULATION_MODE``.

The full description: ``docs/internals/host.md``, section ``host/backends/emulation.py``.
"""

from __future__ import annotations

import enum
import os
import uuid as uuidlib
from types import ModuleType
from typing import Any

import numpy as np

from vckattn.golden.engine import ENGINE_NORMALIZERS, ONLINE_PREFIX
from vckattn.golden.errors import ToolMissing, UserError
from vckattn.golden.online_softmax_int import OnlineSoftmaxRegisters
from vckattn.golden.regmap import from_word
from vckattn.golden.swiftmax_int import HEAD_FIELDS, SwiftMaxHeads, SwiftMaxRegisters
from vckattn.host.backends.base import DeviceError
from vckattn.hw.design.manifest import Manifest
from vckattn.hw.spec import streams

#: Environment variable selecting the emulated card (unset: a real card)
EMULATION_ENV = "VCKATTN_EMULATION"
MODES = ("csim",)
CMD_BYTES = 32

ert_cmd_state = enum.IntEnum("ert_cmd_state", {
    "ERT_CMD_STATE_NEW": 1, "ERT_CMD_STATE_QUEUED": 2, "ERT_CMD_STATE_RUNNING": 3, "ERT_CMD_STATE_COMPLETED": 4,
    "ERT_CMD_STATE_ERROR": 5, "ERT_CMD_STATE_ABORT": 6, "ERT_CMD_STATE_SUBMITTED": 7, "ERT_CMD_STATE_TIMEOUT": 8})
xclBOSyncDirection = enum.IntEnum("xclBOSyncDirection", {  # noqa: N816 - pyxrt's name
    "XCL_BO_SYNC_BO_TO_DEVICE": 0, "XCL_BO_SYNC_BO_FROM_DEVICE": 1}, start=0)


def emulation_mode() -> str | None:
    """``$VCKATTN_EMULATION`` (``csim``), or None when unset; UserError for a mode that does not exist."""
    mode = os.environ.get(EMULATION_ENV, "").strip()
    if not mode:
        return None
    if mode not in MODES:
        raise UserError(f"{EMULATION_ENV}={mode}: the emulated card runs {', '.join(MODES)} (unset it to use a card)")
    return mode


def emulated_uuid(manifest: Manifest) -> str:
    """The UUID of the emulated design: the manifest's ``xclbin.uuid``, else one derived from its name."""
    return (manifest.uuid or str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"vckattn-emulation:{manifest.name}"))).lower()


class RegisterFile:
    """An AXI4-Lite register file as the manifest's map declares it (module docstring)."""

    def __init__(self, entries: list[dict]) -> None:
        self.entries = entries
        self.words: dict[int, int] = {}
        for r in entries:
            if r["kind"] == "mem":
                self.words.update({int(r["offset"]) + 4 * i: 0 for i in range(int(r.get("depth", 1)))})
            elif r["kind"] == "reg":
                self.words[int(r["offset"])] = int(r.get("reset", 0)) & ((1 << int(r["width"])) - 1)

    def _entry(self, offset: int) -> dict | None:
        for r in self.entries:
            base = int(r["offset"])
            if offset == base or (r["kind"] == "mem" and offset % 4 == 0 and
                                  0 <= offset - base < 4 * int(r.get("depth", 1))):
                return r
        return None

    def write(self, offset: int, word: int) -> None:
        r = self._entry(offset)
        if r is None or r["kind"] == "const" or r["access"] not in ("rw", "wo"):
            return  # SLVERR: nothing changes (the host's read-back names it)
        self.words[offset] = int(word) & ((1 << int(r["width"])) - 1)

    def read(self, offset: int) -> int:
        r = self._entry(offset)
        if r is None or (r["kind"] == "mem" and r["access"] == "wo"):
            return 0
        if r["kind"] == "const":
            return int(r["value"]) & 0xFFFFFFFF
        return from_word(self.words[offset], int(r["width"]), bool(r.get("signed"))) & 0xFFFFFFFF

    def value(self, name: str, entry: int = 0) -> int:
        r = next(r for r in self.entries if r["name"] == name)
        return from_word(self.words[int(r["offset"]) + 4 * entry], int(r["width"]), bool(r.get("signed")))

    def swiftmax(self) -> SwiftMaxHeads:
        """The SwiftMax constants the written words stand for: one register set per memory entry."""
        depth = min(int(r.get("depth", 1)) for r in self.entries if r["name"] in HEAD_FIELDS)
        shared = {r.name: self.value(r.name) for r in SwiftMaxRegisters.regmap.writable}
        return SwiftMaxHeads([SwiftMaxRegisters(**shared, **{n: self.value(n, h) for n in HEAD_FIELDS}, out_frac=0)
                              for h in range(depth)])

    def online(self) -> OnlineSoftmaxRegisters | None:
        """The online-softmax constants when the map has the ``normalizer`` register (a design with both
        normalizers) and it says online softmax; None otherwise (SwiftMax)."""
        if not any(r["name"] == "normalizer" for r in self.entries):
            return None
        if ENGINE_NORMALIZERS[self.value("normalizer")] != "online_softmax":
            return None
        return OnlineSoftmaxRegisters(**{r.name: self.value(f"{ONLINE_PREFIX}{r.name}")
                                         for r in OnlineSoftmaxRegisters.regmap.writable})


class Buffer:
    """A buffer object: ``host`` and ``device`` bytes (pyxrt's ``bo``)."""

    def __init__(self, nbytes: int) -> None:
        self.host = np.zeros(int(nbytes), np.uint8)
        self.device = np.zeros(int(nbytes), np.uint8)

    def size(self) -> int:
        return int(self.host.size)

    def write(self, data: Any, seek: int) -> None:
        raw = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        self.host[seek:seek + raw.size] = raw

    def read(self, size: int, skip: int) -> np.ndarray:
        return self.host[skip:skip + size].view(np.int8).copy()

    def sync(self, direction: Any, size: int | None = None, offset: int = 0) -> None:
        sl = slice(offset, offset + (self.host.size if size is None else int(size)))
        if int(direction) == xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE:
            self.device[sl] = self.host[sl]
        else:
            self.host[sl] = self.device[sl]


class Run:
    """A started compute unit: its arguments by port name and its state."""

    def __init__(self, card: EmulatedCard, unit: str, args: dict[str, Any]) -> None:
        self.card, self.unit, self.args = card, unit, args
        self.state = "ERT_CMD_STATE_RUNNING"

    def wait(self, timeout_ms: int = 0) -> Any:
        self.card.progress()
        state = "ERT_CMD_STATE_TIMEOUT" if self.state == "ERT_CMD_STATE_RUNNING" else self.state
        return ert_cmd_state[state]

    def get_state(self) -> Any:
        return ert_cmd_state[self.state]


class EmulatedCard:
    """One emulated engine card (module docstring)."""

    def __init__(self, manifest: Manifest, mode: str = "csim") -> None:
        from vckattn.host.backends.engine_hw import pipelines_of
        from vckattn.host.engine import params_from_manifest

        self.manifest, self.mode = manifest, mode
        self.params = params_from_manifest(manifest)
        self.uuid = emulated_uuid(manifest)
        self.pipes = pipelines_of(manifest, self.params.pipelines)
        self.pl_top = manifest.normalizer_kernel("swiftmax")["name"]
        self.registers = RegisterFile(list(manifest.kernel(self.pl_top)["registers"]))
        self.graph_name = str(manifest.data["graph"]["name"])
        self.loaded = False
        self.runs: dict[str, Run] = {}
        self.graph_iterations: int | None = None
        self.graph_done = True
        self.graph_error = ""
        self.launches = 0

    def start(self, unit: str, args: dict[str, Any]) -> Run:
        old = self.runs.get(unit)
        if old is not None and old.state == "ERT_CMD_STATE_RUNNING":
            raise RuntimeError(f"compute unit {unit} started while its previous run is still running")
        run = self.runs[unit] = Run(self, unit, args)
        return run

    def graph_run(self, iterations: int) -> None:
        if not self.graph_done:
            raise RuntimeError(f"graph {self.graph_name}: run() while it is running")
        self.graph_iterations, self.graph_done, self.graph_error = int(iterations), False, ""

    def progress(self) -> None:
        """Run the launch (module docstring) once every unit is running and the graph has been run."""
        units = [u for p in self.pipes for u in (p.q, p.k, p.v, p.out)]
        runs = [self.runs.get(u) for u in units]
        if self.graph_iterations is None or any(r is None or r.state != "ERT_CMD_STATE_RUNNING" for r in runs):
            return
        from vckattn.sim.engine_csim import run_engine_launch
        from vckattn.sim.hls_csim import HlsToolsMissing

        p, n = self.params, self.graph_iterations
        self.graph_iterations = None
        q_cmds, kv_cmds, tiles = [], [], []
        q_src = k_src = v_src = None
        for pipe in self.pipes:
            qa, ka, va = self.runs[pipe.q].args, self.runs[pipe.k].args, self.runs[pipe.v].args
            q_cmds.append(qa["cmds"].device[:int(qa["n_cmds"]) * CMD_BYTES].reshape(-1, CMD_BYTES))
            kv = ka["cmds"].device[:int(ka["n_cmds"]) * CMD_BYTES].reshape(-1, CMD_BYTES)
            if not np.array_equal(kv, va["cmds"].device[:int(va["n_cmds"]) * CMD_BYTES].reshape(-1, CMD_BYTES)):
                raise RuntimeError(f"emulated card: pipeline {pipe.index}'s k and v movers were given different kv "
                                   "lists; the C-simulation runs both on one")
            kv_cmds.append(kv)
            tiles.append(int(qa["n_cmds"]))
            srcs = (qa["src"], ka["src"], va["src_v"])
            if q_src is None:
                q_src, k_src, v_src = srcs
            elif srcs != (q_src, k_src, v_src):
                raise RuntimeError("emulated card: the movers of different pipelines read different operand buffers; "
                                   "the C-simulation takes one Q, K and V")
            if int(qa["payload_bytes"]) != p.q_rows * p.d or \
                    {int(ka["payload_bytes"]), int(va["payload_bytes"])} != {p.slice_keys * p.d} or \
                    (int(qa["kv"]), int(ka["kv"]), int(va["kv"])) != (0, 1, 2):
                raise RuntimeError(f"emulated card: pipeline {pipe.index}'s movers have payload_bytes / kv "
                                   f"arguments of another build")
        out0 = self.runs[self.pipes[0].out].args
        n_slots = int(out0["n_slots"])
        online = self.registers.online()
        try:
            res = run_engine_launch(p, q_cmds, kv_cmds, q_src.device, k_src.device, v_src.device, tiles,  # type: ignore
                                    None if online is not None else self.registers.swiftmax(), seed=self.launches,
                                    n_slots=n_slots, online=online)
        except HlsToolsMissing as exc:
            raise ToolMissing(f"the emulated card ({EMULATION_ENV}=csim) needs g++, the hls4ml ap_types "
                              f"headers and Verilator: {exc}") from None
        self.launches += 1
        slot = p.q_rows * p.d
        graph_ok = True
        for pipe, t, done in zip(self.pipes, tiles, res.done, strict=True):
            out = self.runs[pipe.out].args
            want = int(out["n_records"])
            delivered = min(t, n)
            written = min(want, delivered, len(done))
            graph_ok &= t == n == written
            recs = done[:written]
            out["done"].device[:recs.size] = recs.reshape(-1)
            a_dev = out["a_out"].device
            for tile in streams.decode_many("result", recs)["tile_id"] if written else []:
                a_dev[int(tile) * slot:(int(tile) + 1) * slot] = res.a[int(tile)].reshape(-1).view(np.uint8)
            for u, role in ((pipe.q, "mm2s_q"), (pipe.k, "mm2s_k"), (pipe.v, "mm2s_v"), (pipe.out, "s2mm")):
                if u == pipe.out and want > written:
                    continue  # waits for records that never come
                status = res.status.get(f"p{pipe.index}.{role}")
                failed = status is not None and status.code != 0
                self.runs[u].state = "ERT_CMD_STATE_ERROR" if failed else "ERT_CMD_STATE_COMPLETED"
        movers = {"mm2s_q", "mm2s_k", "mm2s_v", "s2mm"}
        failed = [f"{k}: {s.text}" for k, s in res.failed.items() if k.split(".")[-1] not in movers]
        failed += [f"{k}: {v} left unread" for k, v in res.leftover.items()]
        failed += [f"{k}: {v} read past the end" for k, v in res.missing.items()]
        self.graph_error = "; ".join(failed[:4])
        self.graph_done = graph_ok and not self.graph_error


class EmulatedIp:
    """The shim's ``Ip`` on the emulated card's PL top."""

    def __init__(self, card: EmulatedCard, name: str) -> None:
        self.card, self.name = card, name

    def read(self, offset: int) -> int:
        return self.card.registers.read(int(offset))

    def write(self, offset: int, value: int) -> None:
        self.card.registers.write(int(offset), int(value) & 0xFFFFFFFF)

    def close(self) -> None:
        pass


class EmulatedGraph:
    """The shim's ``Graph`` on the emulated card."""

    def __init__(self, card: EmulatedCard, name: str) -> None:
        self.card, self.name = card, name

    def run(self, iterations: int) -> None:
        try:
            self.card.graph_run(iterations)
        except RuntimeError as exc:
            raise DeviceError(f"AIE graph {self.name}: run({iterations}) failed: {exc}") from None

    def wait(self, timeout_ms: int) -> bool:
        self.card.progress()
        if self.card.graph_error:
            raise DeviceError(f"AIE graph {self.name}: wait failed: C-simulation: {self.card.graph_error}")
        return self.card.graph_done

    def end(self) -> None:
        pass

    def close(self) -> None:
        pass


class EmulatedShim:
    """The shim (:class:`vckattn.host.backends.xrt_graph.Shim`'s ``ip`` / ``graph``) on the emulated card."""

    def __init__(self, card: EmulatedCard) -> None:
        self.card = card

    def _check(self, device_index: int, uuid: bytes, what: str) -> None:
        if device_index != 0 or not self.card.loaded or uuidlib.UUID(bytes=bytes(uuid)) != uuidlib.UUID(self.card.uuid):
            raise DeviceError(f"cannot open {what}: no emulated design with that UUID is loaded on card {device_index}")

    def ip(self, device_index: int, uuid: bytes, name: str) -> EmulatedIp:
        self._check(device_index, uuid, f"kernel {name!r} for register access")
        if name != self.card.pl_top:
            raise DeviceError(f"cannot open kernel {name!r} for register access: the emulated design's is "
                              f"{self.card.pl_top}")
        return EmulatedIp(self.card, name)

    def graph(self, device_index: int, uuid: bytes, name: str) -> EmulatedGraph:
        self._check(device_index, uuid, f"AIE graph {name!r}")
        if name != self.card.graph_name:
            raise DeviceError(f"cannot open AIE graph {name!r}: the emulated design's is {self.card.graph_name}")
        return EmulatedGraph(self.card, name)


def pyxrt_module(manifest: Manifest, mode: str = "csim") -> ModuleType:
    """A ``pyxrt`` module whose one device is an emulated card of ``manifest``'s engine design; its
    ``vckattn_emulated_shim`` attribute is the shim on the same card."""
    if not manifest.data.get("engine"):
        raise UserError(f"{EMULATION_ENV}={mode}: the emulated card runs engine builds; {manifest.name} is not one "
                        f"(unset {EMULATION_ENV}, or choose an engine manifest such as engine_small)")
    card = EmulatedCard(manifest, mode)
    m = ModuleType("pyxrt")
    m.__doc__ = f"emulated pyxrt ({EMULATION_ENV}={mode}): a software device, not a card"
    m.ert_cmd_state, m.xclBOSyncDirection = ert_cmd_state, xclBOSyncDirection
    m.vckattn_emulation, m.vckattn_emulated_shim, m.vckattn_emulated_card = mode, EmulatedShim(card), card

    class uuid:  # noqa: N801 - pyxrt's names
        def __init__(self, s: str) -> None:
            self._s = str(s).lower()

        def to_string(self) -> str:
            return self._s

    class _Named:
        def __init__(self, name: str) -> None:
            self._name = name

        def get_name(self) -> str:
            return self._name

    class xclbin:  # noqa: N801
        def __init__(self, path: str) -> None:
            self.path = str(path)  # not read: the manifest names the design

        def get_uuid(self) -> uuid:
            return uuid(card.uuid)

        def get_kernels(self) -> list[_Named]:
            return [_Named(k) for k in manifest.kernel_names]

        def get_ips(self) -> list[_Named]:
            return [_Named(f"{k['name']}:{cu}") for k in manifest.data["kernels"]
                    for cu in k.get("compute_units") or [k["name"]]]

    class device:  # noqa: N801
        def __init__(self, index: int = 0) -> None:
            if int(index) != 0:
                raise RuntimeError(f"Could not open device with index '{index}' (the emulation has one card, 0)")

        def load_xclbin(self, xb: xclbin) -> uuid:
            card.loaded = True
            return uuid(card.uuid)

    class bo(Buffer):  # noqa: N801
        class flags(enum.IntEnum):  # noqa: N801
            normal = 0

        def __init__(self, dev: device, nbytes: int, flags: Any, group: int) -> None:
            super().__init__(nbytes)

    class kernel:  # noqa: N801
        def __init__(self, dev: device, xuuid: uuid, name: str, *mode: Any) -> None:
            if not card.loaded or xuuid.to_string() != card.uuid:
                raise RuntimeError(f"No xclbin with that UUID is loaded (kernel '{name}')")
            kname, _, cus = name.partition(":")
            entry = manifest.kernel(kname)
            self.unit = cus.strip("{}") or kname
            if self.unit not in (entry.get("compute_units") or [kname]):
                raise RuntimeError(f"No compute unit matching '{name}'")
            self.ports = entry["ports"]

        def group_id(self, index: int) -> int:
            return 0

        def __call__(self, *args: Any) -> Run:
            if len(args) != len(self.ports):
                raise TypeError(f"{self.unit} takes {len(self.ports)} arguments, got {len(args)}")
            named = {p["name"]: a for p, a in zip(self.ports, args, strict=True) if p["protocol"] != "axis"}
            return card.start(self.unit, named)

    for cls in (uuid, xclbin, device, bo, kernel):
        setattr(m, cls.__name__, cls)
    return m


__all__ = ["EMULATION_ENV", "MODES", "EmulatedCard", "EmulatedShim", "RegisterFile", "emulated_uuid", "emulation_mode",
           "pyxrt_module"]

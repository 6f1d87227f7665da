"""FAKE: a stand-in for the attention build on a VCK5000/VCK190 card (data movers, normalizer
kernels, AIE graph) that records calls; not hardware.

:class:`FakeAttentionCard` is what ``fake_pyxrt``, ``fake_pynq`` and the stub XRT library (``xrt_stub``) talk to.
It models only what the host can observe:

* the normalizers' AXI4-Lite register files, from the manifest's register maps: ``ID``/``VERSION``
  constants, ``rw`` registers keep the low ``width`` bits of a write and read back sign/zero-extended,
  ``ro`` registers and unmapped offsets ignore writes (SLVERR) and unmapped reads return 0; memories
  (SwiftMax v2: ``b_beta``/``c_out``) hold one such word per entry, entry ``i`` at ``offset + 4 i``;
* a launch: once ``mm2s_tiles``, ``mm2s_kv``, ``s2mm_out`` and ``score_switch`` have been started
  (and, on the XRT card, the graph run for at least ``n_tiles`` iterations) the card decodes the
  *device-side* bytes of the input buffers with :mod:`vckattn.host.tile_buffers`, each mover with its
  own arguments: ``mm2s_tiles`` the Q tiles and masks (its ``head_dim``, ``keys_pad``), ``mm2s_kv``
  each tile's K/V slab ``batch * n_kv_heads + kv_head`` from *its* ``desc`` (its ``n_kv_heads``,
  ``head_dim``, ``keys_pad``), ``s2mm_out`` the records' tile id and rows from *its* ``desc`` (its
  ``head_dim``). Movers that disagree on ``n_tiles``, ``head_dim`` or ``keys_pad`` are an error. The
  normalizer is the one ``score_switch``'s ``select`` routes to (``SCORE_SWITCH_SELECT``), its
  constants rebuilt from the register writes that kernel received at the manifest offsets (so a
  write at a wrong offset, or a wrong ``select``, gives wrong results); per-head SwiftMax constants: a
  tile uses the memory entries of its descriptor's ``head``. Every tile is computed with
  :func:`vckattn.host.backends.base.compute_tile` and the device-side ``out`` buffer written (the
  host sees it only after syncing it back).

Knobs: ``xclbin_uuid`` (what the xclbin file claims), ``missing_kernels`` (absent from the xclbin /
overlay), ``ids`` (ID register values), ``hang`` (a mover or the graph never completes), ``fail``
(``{kernel: run state name}``), ``out_fault`` ("drop", "duplicate", "reorder" on launch
``fault_launch``), ``status_tile`` (that tile's header gets a nonzero status), ``stuck`` (``{(kernel,
offset): word}`` returned by register reads), ``n_cards``, ``unreadable_xclbin``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from vckattn.golden.funcunits import Pow2Config, RecipConfig
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat, OnlineSoftmaxRegisters
from vckattn.golden.requant import RequantRegisters
from vckattn.golden.swiftmax_int import HEAD_FIELDS, SwiftMaxFormat, SwiftMaxHeads, SwiftMaxRegisters
from vckattn.host import tile_buffers as tb
from vckattn.host.backends.base import compute_tile
from vckattn.host.tiler import LayerJob, Tile
from vckattn.hw.manifest import SCORE_SWITCH_SELECT, Manifest

MOVERS = ("mm2s_tiles", "mm2s_kv", "s2mm_out")
SWITCH = "score_switch"
LAUNCHED = (*MOVERS, SWITCH)
BAD_STATUS = 0x5


def _fmt(cls: type, d: dict) -> Any:
    nested = {"pow2": Pow2Config, "recip": RecipConfig}
    return cls(**{k: nested[k](**v) if k in nested else v for k, v in d.items()})


class FakeRun:
    """One started mover: ``args`` maps port name -> buffer handle or scalar."""

    def __init__(self, card: FakeAttentionCard, kernel: str, args: dict[str, Any]) -> None:
        self.card, self.kernel, self.args = card, kernel, args
        self.state = "ERT_CMD_STATE_RUNNING"
        self.done_read = False  # ap_done is clear-on-read (PYNQ register view)


class FakeAttentionCard:
    def __init__(self, manifest: Manifest, *, xclbin_uuid: str | None = None,
                 missing_kernels: tuple[str, ...] = (), ids: dict[str, int] | None = None, hang: str | None = None,
                 fail: dict[str, str] | None = None, out_fault: str | None = None, fault_launch: int = 0,
                 status_tile: int | None = None, stuck: dict[tuple[str, int], int] | None = None,
                 n_cards: int = 1, unreadable_xclbin: bool = False) -> None:
        self.manifest = manifest
        self.xclbin_uuid = (xclbin_uuid or manifest.uuid or "00000000-0000-0000-0000-000000000000").lower()
        self.kernels = [k for k in manifest.kernel_names if k not in missing_kernels]
        self.ids = {k["name"]: int(k["id"]) for k in manifest.data["kernels"] if "id" in k} | (ids or {})
        self.hang, self.fail = hang, dict(fail or {})
        self.out_fault, self.fault_launch, self.status_tile = out_fault, fault_launch, status_tile
        self.stuck = dict(stuck or {})
        self.n_cards, self.unreadable_xclbin = n_cards, unreadable_xclbin
        self.graph_name = manifest.data["graph"]["name"]
        self.log: list[dict[str, Any]] = []
        self.loaded = False
        self.launches = 0
        self.graph_pending = 0
        self.graph_idle = True
        self.runs: dict[str, FakeRun] = {}
        self.regs: dict[str, dict[int, int]] = {}
        for k in manifest.data["kernels"]:
            if k["kind"] == "rtl":
                self.regs[k["name"]] = {int(r["offset"]): int(r.get("value", r.get("reset", 0))) & 0xFFFFFFFF
                                        for r in k["registers"] if r["kind"] != "mem"}
                for r in k["registers"]:  # memories: one word per entry, entry i at offset + 4 i, 0 initially
                    if r["kind"] == "mem":
                        base, depth = int(r["offset"]), int(r.get("depth", 1))
                        self.regs[k["name"]].update({base + 4 * i: 0 for i in range(depth)})

    # ---------------------------------------------------------------------------- bookkeeping

    def record(self, op: str, **kw: Any) -> None:
        self.log.append({"op": op, **kw})

    def ops(self, op: str) -> list[dict[str, Any]]:
        return [e for e in self.log if e["op"] == op]

    # ---------------------------------------------------------------------------- registers

    def _reg(self, kernel: str, offset: int) -> dict | None:
        """The register at ``offset``, or the memory one of whose entries it is."""
        for r in self.manifest.kernel(kernel)["registers"]:
            if int(r["offset"]) == offset:
                return r
            if r["kind"] == "mem" and 0 <= offset - int(r["offset"]) < 4 * int(r.get("depth", 1)) and offset % 4 == 0:
                return r
        return None

    def reg_write(self, kernel: str, offset: int, word: int) -> None:
        self.record("reg.write", kernel=kernel, offset=int(offset), value=int(word))
        r = self._reg(kernel, int(offset))
        if r is None or r["kind"] == "const" or r["access"] not in (("rw",) if r["kind"] == "reg" else ("rw", "wo")):
            return  # SLVERR: nothing changes
        self.regs[kernel][int(offset)] = int(word) & ((1 << int(r["width"])) - 1)

    def reg_read(self, kernel: str, offset: int) -> int:
        self.record("reg.read", kernel=kernel, offset=int(offset))
        if (kernel, int(offset)) in self.stuck:
            return self.stuck[(kernel, int(offset))]
        r = self._reg(kernel, int(offset))
        if r is None:
            return 0
        if r["name"] == "ID":
            return self.ids[kernel] & 0xFFFFFFFF
        if r["kind"] == "mem" and r["access"] == "wo":
            return 0  # no read-back port
        v, w = self.regs[kernel][int(offset)], int(r["width"])
        if r.get("signed") and v >> (w - 1):
            v -= 1 << w
        return v & 0xFFFFFFFF

    def _value(self, kernel: str, name: str, entry: int = 0) -> int:
        """Register ``name`` (or entry ``entry`` of memory ``name``) as the kernel reads it."""
        off = self.manifest.register_offset(kernel, name) + 4 * entry
        r = self._reg(kernel, off)
        assert r is not None
        v, w = self.regs[kernel][off], int(r["width"])
        return v - (1 << w) if r["signed"] and v >> (w - 1) else v

    def _swiftmax(self, kernel: str) -> SwiftMaxRegisters | SwiftMaxHeads:
        """The SwiftMax constants as written: register map v2 (``b_beta``/``c_out`` memories) gives one set per
        memory entry (:class:`SwiftMaxHeads` of ``depth`` heads; a tile of head ``h`` uses set ``h``), a v1 map
        (all scalar registers) one set."""
        entries = {r["name"]: r for r in self.manifest.kernel(kernel)["registers"]}
        shared = {r.name: self._value(kernel, r.name) for r in SwiftMaxRegisters.regmap.writable}
        if all(entries.get(n, {}).get("kind") == "mem" for n in HEAD_FIELDS):
            depth = min(int(entries[n].get("depth", 1)) for n in HEAD_FIELDS)
            return SwiftMaxHeads([SwiftMaxRegisters(**shared, **{n: self._value(kernel, n, h) for n in HEAD_FIELDS},
                                                    out_frac=0) for h in range(depth)])
        vals = {n: self._value(kernel, n) for n in HEAD_FIELDS}
        return SwiftMaxRegisters(**shared, **vals, out_frac=0)  # out_frac is folded into c_out; no register

    def layer_from_registers(self, select: int, rq_mult: int, rq_shift: int) -> SimpleNamespace:
        """The layer constants as the hardware sees them: the normalizer ``score_switch``'s ``select``
        routes to, its registers as written, formats of the build."""
        kernel = next((k for k, v in SCORE_SWITCH_SELECT.items() if v == select), None)
        if kernel is None or kernel not in self.regs:
            raise RuntimeError(f"FAKE: score_switch select {select} routes to no normalizer "
                               f"(select: {SCORE_SWITCH_SELECT})")
        norm = self.manifest.kernel(kernel)["normalizer"]
        fmts = self.manifest.data["formats"]
        sm = on = None
        if norm == "swiftmax":
            sm = self._swiftmax(kernel)
        else:
            on = OnlineSoftmaxRegisters(**{r.name: self._value(kernel, r.name)
                                           for r in OnlineSoftmaxRegisters.regmap.writable})
        return SimpleNamespace(normalizer=norm, swiftmax=sm, online=on,
                               sm_fmt=_fmt(SwiftMaxFormat, fmts["swiftmax"]),
                               os_fmt=_fmt(OnlineSoftmaxFormat, fmts["online_softmax"]),
                               rq_a=RequantRegisters(np.int64(rq_mult), np.int64(rq_shift)))

    # ---------------------------------------------------------------------------- launches

    @staticmethod
    def _tile_layer(layer: SimpleNamespace, tile: Tile) -> SimpleNamespace:
        """``layer`` with the SwiftMax register set of the tile's query head (its descriptor's ``head``, which
        the hardware carries to the normalizer: mask stream -> score TUSER)."""
        if not isinstance(layer.swiftmax, SwiftMaxHeads):
            return layer
        if not 0 <= tile.head < layer.swiftmax.n_heads:
            raise ValueError(f"tile {tile.tile_id}: head {tile.head} outside the {layer.swiftmax.n_heads} "
                             "register sets")
        return SimpleNamespace(**{**vars(layer), "swiftmax": layer.swiftmax[tile.head]})

    def start(self, kernel: str, args: dict[str, Any]) -> FakeRun:
        run = FakeRun(self, kernel, args)
        if kernel in self.runs and self.runs[kernel].state == "ERT_CMD_STATE_RUNNING":
            raise RuntimeError(f"FAKE: {kernel} started while its previous run is still running")
        self.runs[kernel] = run
        self.record("start", kernel=kernel, args={k: getattr(v, "tag", v) for k, v in args.items()})
        return run

    def graph_run(self, iterations: int) -> None:
        if not self.graph_idle:
            raise RuntimeError("FAKE: graph run while it is running")
        self.graph_pending += int(iterations)
        self.graph_idle = False

    def graph_done(self) -> bool:
        self.progress()
        return self.graph_idle and self.hang != self.graph_name

    def progress(self) -> None:
        """Complete the pending launch if everything it needs has been started."""
        runs = [self.runs.get(k) for k in LAUNCHED]
        if any(r is None or r.state != "ERT_CMD_STATE_RUNNING" for r in runs):
            return
        n = int(runs[0].args["n_tiles"])
        if self.needs_graph and self.graph_pending < n:
            return  # the AIE graph has not been run: no data reaches s2mm_out
        if any(int(r.args["n_tiles"]) != n for r in runs):
            raise RuntimeError(f"FAKE: movers started with different n_tiles {[r.args['n_tiles'] for r in runs]}")
        for arg in ("head_dim", "keys_pad"):
            got = {r.kernel: int(r.args[arg]) for r in runs if arg in r.args}
            if len(set(got.values())) != 1:
                raise RuntimeError(f"FAKE: movers started with different {arg}: {got}")
        self._compute(*runs)
        for r in runs:
            if r.kernel == self.hang:
                continue
            r.state = self.fail.get(r.kernel, "ERT_CMD_STATE_COMPLETED")
        if self.needs_graph:
            self.graph_pending -= n
            self.graph_idle = self.graph_pending == 0

    needs_graph = True  # the PYNQ card's graph is free-running

    def _compute(self, tiles_run: FakeRun, kv_run: FakeRun, out_run: FakeRun, switch_run: FakeRun) -> None:
        a = tiles_run.args
        n = int(a["n_tiles"])
        q_rows, hd, kp = self.manifest.tile.q_rows, int(a["head_dim"]), int(a["keys_pad"])
        tiles = tb.unpack_tiles(a["desc"].device_bytes(), a["q"].device_bytes(), a["mask"].device_bytes(), n,
                                q_rows, hd)
        d = tb.desc_fields(a["desc"].device_bytes(), n)
        if d and d[0]["keys_pad"] != kp:
            raise RuntimeError(f"FAKE: mm2s_tiles keys_pad {kp} but the descriptors say {d[0]['keys_pad']}")
        seq = d[0]["seq_len"] if d else 0
        # mm2s_kv: each tile's K/V slab from its own desc and scalars
        ka = kv_run.args
        k, v = tb.unpack_kv(ka["kv"].device_bytes(), int(ka["keys_pad"]), int(ka["head_dim"]), int(ka["n_kv_heads"]))
        kv_desc = tb.desc_fields(ka["desc"].device_bytes(), n)
        tiles = [Tile(t.tile_id, kd["batch"], t.head, kd["kv_head"], t.q0, t.rows, t.q, t.keep)
                 for t, kd in zip(tiles, kv_desc, strict=True)]
        if any(not (0 <= t.batch < k.shape[0] and 0 <= t.kv_head < k.shape[1]) for t in tiles):
            raise RuntimeError("FAKE: mm2s_kv read a K/V slab outside its kv buffer")
        job = LayerJob(0, k, v, tiles, seq, kp, self.manifest.tile)
        layer = self.layer_from_registers(int(switch_run.args["select"]), int(out_run.args["rq_mult"]),
                                          int(out_run.args["rq_shift"]))
        # s2mm_out: the header's tile id and rows from its own desc
        out_desc = tb.desc_fields(out_run.args["desc"].device_bytes(), n)
        try:
            records = [(od["tile_id"], od["rows"], BAD_STATUS if od["tile_id"] == self.status_tile else tb.STATUS_OK,
                        compute_tile(self._tile_layer(layer, t), job, t))  # type: ignore[arg-type]
                       for t, od in zip(tiles, out_desc, strict=True)]
        except ValueError as exc:
            raise RuntimeError(f"FAKE: the card's registers hold values the golden model refuses: {exc}") from exc
        if self.out_fault and self.launches == self.fault_launch and len(records) > 1:
            if self.out_fault == "drop":
                del records[1]
            elif self.out_fault == "duplicate":
                records[1] = records[0]
            elif self.out_fault == "reorder":
                records[0], records[1] = records[1], records[0]
            else:
                raise ValueError(f"FAKE: unknown out_fault {self.out_fault!r}")
        out = out_run.args["out"]
        dev = out.device_bytes()
        # the s2mm mover writes only the records it produced; the rest keeps what the host wrote
        produced = tb.pack_out(records, q_rows, int(out_run.args["head_dim"]))
        dev[: produced.size] = produced
        self.launches += 1
        self.record("computed", launch=self.launches - 1, n_tiles=n, normalizer=layer.normalizer,
                    geometry={"head_dim": hd, "keys_pad": kp, "n_kv_heads": int(ka["n_kv_heads"])})

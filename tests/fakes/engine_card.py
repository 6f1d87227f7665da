"""FAKE: a stand-in for an engine build on a card (stream contract v3, ``hw/ENGINE.md``: the HLS movers
``mm2s_engine`` / ``s2mm_engine`` per pipeline, the PL top ``engine_pl``, the AIE graph) that records calls; not
hardware.

It is what ``fake_pyxrt`` (buffers, kernel runs) and the stub XRT library (the graph, ``engine_pl``'s registers,
through :func:`fakes.xrt_stub.card_handler`) talk to, and models only what the host can observe:

* ``engine_pl``'s AXI4-Lite register file, from the manifest's map: ``ID``/``VERSION`` constants, ``rw`` registers keep
  the low ``width`` bits of a write and read back sign/zero-extended, ``ro`` registers and unmapped offsets ignore
  writes (SLVERR) and unmapped reads return 0; memories (``b_beta`` / ``c_out``) hold one such word per entry, entry
  ``i`` at ``offset + 4 i``;
* the movers, from the *device-side* bytes of their buffers and their own arguments, as ``hw/hls/mm2s_engine.cpp``
  reads them: each of ``n_cmds`` 32-byte descriptors is a header beat sent as is and the uint64 byte offset of its
  ``payload_bytes`` payload, from ``src`` (TILE, LOAD_K) or ``src_v`` (LOAD_V); the k mover (``kv = 1``) sends the
  LOAD_K entries of its kv list and skips the LOAD_V ones, the v mover (``kv = 2``) the other way round; a descriptor
  of the wrong kind stops the mover. Which mover feeds which pipeline comes from the manifest's ``connectivity``
  (``<cu>.out`` -> ``ai_engine_0.p<i>_q_in`` / ``p<i>_k_in`` / ``p<i>_v_in``; ``p<i>_o_out`` -> ``<cu>.a_in``);
* the AIE graph and ``engine_pl`` as the engine's bit-exact functional model
  (:func:`vckattn.hw.spec.functional.run_pipeline_model`) on each pipeline's streams, with the SwiftMax constants
  rebuilt from the register words ``engine_pl`` received (a write at a wrong offset gives wrong results) and the
  build's format;
* ``graph.run(n)``: every AIE kernel runs ``n`` iterations, one tile each, so a pipeline whose movers send more
  tiles than ``n`` never delivers its last records (its ``s2mm_engine`` hangs) and one that sends fewer never lets
  the graph finish (``graph.wait`` times out); behind ``fake_pynq`` (``needs_graph`` False) the graph runs free;
* ``s2mm_engine``: the pipeline's first ``n_records`` A records into slot ``tile_id`` of ``a_out`` (an A buffer of
  ``n_slots`` slots) and their RESULT headers, with its ``pipeline`` argument, into ``done`` (a device-side write:
  the host sees it after syncing back).

Knobs: ``xclbin_uuid`` (what the xclbin file claims), ``missing_kernels`` (absent from the xclbin / overlay), ``ids``
(ID register values), ``stuck`` (``{(kernel, offset): word}`` returned by register reads), ``n_cards``,
``unreadable_xclbin``; ``hang``
(a compute unit or the graph never completes), ``fail`` (``{compute unit: run state name}``), ``done_fault``
(``"duplicate"``: pipeline 0's last record is a copy of the one before; ``"misroute"``: pipeline 1's records carry
pipeline 0; ``"stale"``: pipeline 0 completes without writing a record).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vckattn.golden.funcunits import Pow2Config, RecipConfig
from vckattn.golden.swiftmax_int import HEAD_FIELDS, SwiftMaxFormat, SwiftMaxHeads, SwiftMaxRegisters
from vckattn.hw.design.manifest import Manifest
from vckattn.hw.spec import streams
from vckattn.hw.spec.functional import EngineParams, run_pipeline_model

CMD_BYTES = 32


def _fmt(cls: type, d: dict) -> Any:
    nested = {"pow2": Pow2Config, "recip": RecipConfig}
    return cls(**{k: nested[k](**v) if k in nested else v for k, v in d.items()})


class FakeRun:
    """One started compute unit: ``args`` maps port name -> buffer handle or scalar."""

    def __init__(self, card: FakeEngineCard, kernel: str, args: dict[str, Any]) -> None:
        self.card, self.kernel, self.args = card, kernel, args
        self.state = "ERT_CMD_STATE_RUNNING"
        self.done_read = False  # ap_done is clear-on-read (PYNQ register view)


def _params(manifest: Manifest) -> EngineParams:
    e, t = manifest.data["engine"], manifest.data["tile"]
    return EngineParams(pipelines=int(e["pipelines"]), kernels=int(e["kernels_per_pipeline"]),
                        score_plios=int(e["score_plios"]), q_rows=int(t["q_rows"]), d=int(e["d"]),
                        max_keys=int(e["max_keys"]), score_bits=int(e["score_bits"]), lanes=int(t["lanes"]))


class FakeEngineCard:
    needs_graph = True  # fake_pynq sets it False: PYNQ's graph is free-running

    def __init__(self, manifest: Manifest, *, done_fault: str | None = None, xclbin_uuid: str | None = None,
                 missing_kernels: tuple[str, ...] = (), ids: dict[str, int] | None = None, hang: str | None = None,
                 fail: dict[str, str] | None = None, stuck: dict[tuple[str, int], int] | None = None,
                 n_cards: int = 1, unreadable_xclbin: bool = False) -> None:
        self.manifest = manifest
        self.xclbin_uuid = (xclbin_uuid or manifest.uuid or "00000000-0000-0000-0000-000000000000").lower()
        self.kernels = [k for k in manifest.kernel_names if k not in missing_kernels]
        self.ids = {k["name"]: int(k["id"]) for k in manifest.data["kernels"] if "id" in k} | (ids or {})
        self.hang, self.fail = hang, dict(fail or {})
        self.stuck = dict(stuck or {})
        self.n_cards, self.unreadable_xclbin = n_cards, unreadable_xclbin
        self.graph_name = manifest.data["graph"]["name"]
        self.log: list[dict[str, Any]] = []
        self.loaded = False
        self.launches = 0
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
        self.params = _params(manifest)
        self.fmt = _fmt(SwiftMaxFormat, manifest.data["formats"]["swiftmax"])
        self.done_fault = done_fault
        self.pl_top = next(k["name"] for k in manifest.data["kernels"] if k["kind"] == "rtl")
        links = {(ln["from"], ln["to"]) for ln in manifest.data["connectivity"]}

        def cu(end: str, side: int) -> str:
            (hit,) = [pair[side].split(".")[0] for pair in links if pair[1 - side] == end]
            return hit

        self.pipes = [{"q": cu(f"ai_engine_0.p{i}_q_in", 0), "k": cu(f"ai_engine_0.p{i}_k_in", 0),
                       "v": cu(f"ai_engine_0.p{i}_v_in", 0), "out": cu(f"ai_engine_0.p{i}_o_out", 1)}
                      for i in range(self.params.pipelines)]
        self.graph_iterations = 0
        self.graph_finished = True

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

    # ---------------------------------------------------------------------------- the graph

    def graph_run(self, iterations: int) -> None:
        if not self.graph_idle:
            raise RuntimeError("FAKE: graph run while it is running")
        self.graph_iterations, self.graph_idle, self.graph_finished = int(iterations), False, False
        self.progress()

    def graph_done(self) -> bool:
        self.progress()
        return self.graph_finished and self.hang != self.graph_name

    # ---------------------------------------------------------------------------- the movers

    def start(self, kernel: str, args: dict[str, Any]) -> FakeRun:
        run = FakeRun(self, kernel, args)
        if kernel in self.runs and self.runs[kernel].state == "ERT_CMD_STATE_RUNNING":
            raise RuntimeError(f"FAKE: {kernel} started while its previous run is still running")
        self.runs[kernel] = run
        self.record("start", kernel=kernel, args={k: getattr(v, "tag", v) for k, v in args.items()})
        self.progress()
        return run


    def _stream(self, run: FakeRun) -> tuple[np.ndarray, int]:
        """What ``mm2s_engine`` sends: ``(beats as uint8, descriptors sent)``."""
        a = run.args
        cmds = a["cmds"].device_bytes()
        size, kv = int(a["payload_bytes"]), int(a["kv"])
        out = []
        for i in range(int(a["n_cmds"])):
            d = cmds[i * CMD_BYTES:(i + 1) * CMD_BYTES]
            head = d[:16]
            offset = int(d[16:24].copy().view("<u8")[0])
            if kv == 0:
                if streams.decode("tile", head)["op"] != streams.OP_TILE:
                    return np.concatenate(out or [np.zeros(0, np.uint8)]), i
                src = a["src"]
            else:
                op = streams.decode("slice", head)["op"]
                if op not in (streams.OP_LOAD_K, streams.OP_LOAD_V):
                    return np.concatenate(out or [np.zeros(0, np.uint8)]), i
                src = a["src"] if op == streams.OP_LOAD_K else a["src_v"]
            if offset % 16 or size % 16:
                return np.concatenate(out or [np.zeros(0, np.uint8)]), i
            if kv and (streams.decode("slice", head)["op"] == streams.OP_LOAD_K) != (kv == 1):
                continue  # the other mover's slice
            payload = src.device_bytes()[offset:offset + size]
            if len(payload) != size:
                raise RuntimeError(f"FAKE: {run.kernel} read past the end of its source buffer")
            out += [head, payload]
        return np.concatenate(out or [np.zeros(0, np.uint8)]), int(a["n_cmds"])

    def progress(self) -> None:
        """Run the launch once every mover has been started and the graph run."""
        names = [cu for pipe in self.pipes for cu in pipe.values()]
        runs = {cu: self.runs.get(cu) for cu in names}
        if any(r is None or r.state != "ERT_CMD_STATE_RUNNING" for r in runs.values()) or \
                (self.needs_graph and self.graph_idle):
            return
        p = self.params
        regs = self._swiftmax(self.pl_top)
        graph_ok = True
        for i, pipe in enumerate(self.pipes):
            q_in, _ = self._stream(runs[pipe["q"]])
            # the K and V packets of the kv list (the model routes them by packet id; the order within each kind holds)
            kv_in = np.concatenate([self._stream(runs[pipe["k"]])[0], self._stream(runs[pipe["v"]])[0]])
            out = runs[pipe["out"]].args
            n_slots = int(out["n_slots"])
            a = np.zeros((n_slots, p.q_rows, p.d), np.int8)
            done = run_pipeline_model(p, i, q_in, kv_in, a, regs, self.fmt)  # the array and engine_pl
            tiles = len(done)
            n = self.graph_iterations if self.needs_graph else tiles  # a free-running graph (PYNQ) runs on
            delivered = min(tiles, n)  # the graph runs n iterations: no more records leave the array
            want = int(out["n_records"])
            if want > delivered:
                runs[pipe["out"]].hung = True  # s2mm_engine waits for records that never come
            written = min(want, delivered)
            graph_ok &= tiles == n == written  # records left in the array, or kernels still waiting: no finish
            recs = done[:written].copy()
            streams.patch_many("result", recs, "pipeline", int(out["pipeline"]))  # s2mm_engine's own index
            if self.done_fault == "duplicate" and i == 0 and written > 1:
                recs[-1] = recs[-2]
            if self.done_fault == "misroute" and i == 1:
                streams.patch_many("result", recs, "pipeline", 0)
            if self.done_fault == "stale" and i == 0:
                recs = recs[:0]
            slot = p.q_rows * p.d
            abuf, dbuf = out["a_out"].device_bytes(), out["done"].device_bytes()  # written in place
            for r, t in enumerate(streams.decode_many("result", recs)["tile_id"] if len(recs) else []):
                abuf[int(t) * slot:(int(t) + 1) * slot] = a[int(t)].reshape(-1).view(np.uint8)
                dbuf[r * 16:(r + 1) * 16] = recs[r]
            self.record("computed", pipeline=i, tiles=tiles, records=len(recs))
        for cu, r in runs.items():
            if cu == self.hang or getattr(r, "hung", False):
                continue
            r.state = self.fail.get(cu, "ERT_CMD_STATE_COMPLETED")
        self.graph_finished = self.graph_idle = graph_ok
        self.launches += 1


__all__ = ["FakeEngineCard"]

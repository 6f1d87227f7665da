"""FAKE: a stand-in for an engine build on a card (stream contract v3, ``hw/ENGINE.md``: the HLS movers
``mm2s_engine`` / ``s2mm_engine`` per pipeline, the PL top ``engine_pl``, the AIE graph) that records calls; not
hardware.

It is what ``fake_pyxrt`` (buffers, kernel runs) and the stub XRT library (the graph, ``engine_pl``'s registers,
through :func:`fakes.xrt_stub.card_handler`) talk to, and models only what the host can observe:

* ``engine_pl``'s AXI4-Lite register file, as :class:`~fakes.card.FakeAttentionCard` does (from the manifest's map;
  ``b_beta`` / ``c_out`` memories one word an entry);
* the movers, from the *device-side* bytes of their buffers and their own arguments, as ``hw/hls/mm2s_engine.cpp``
  reads them: each of ``n_cmds`` 32-byte descriptors is a header beat sent as is and the uint64 byte offset of its
  ``payload_bytes`` payload, from ``src`` (TILE, LOAD_K) or ``src_v`` (LOAD_V); the k mover (``kv = 1``) sends the
  LOAD_K entries of its kv list and skips the LOAD_V ones, the v mover (``kv = 2``) the other way round; a descriptor
  of the wrong kind stops the mover. Which mover feeds which pipeline comes from the manifest's ``connectivity``
  (``<cu>.out`` -> ``ai_engine_0.p<i>_q_in`` / ``p<i>_k_in`` / ``p<i>_v_in``; ``p<i>_o_out`` -> ``<cu>.a_in``);
* the AIE graph and ``engine_pl`` as the engine's bit-exact functional model
  (:func:`vckattn.hw.engine.model.run_pipeline_model`) on each pipeline's streams, with the SwiftMax constants
  rebuilt from the register words ``engine_pl`` received (a write at a wrong offset gives wrong results) and the
  build's format;
* ``graph.run(n)``: every AIE kernel runs ``n`` iterations, one tile each, so a pipeline whose movers send more
  tiles than ``n`` never delivers its last records (its ``s2mm_engine`` hangs) and one that sends fewer never lets
  the graph finish (``graph.wait`` times out); behind ``fake_pynq`` (``needs_graph`` False) the graph runs free;
* ``s2mm_engine``: the pipeline's first ``n_records`` A records into slot ``tile_id`` of ``a_out`` (an A buffer of
  ``n_slots`` slots) and their RESULT headers, with its ``pipeline`` argument, into ``done`` (a device-side write:
  the host sees it after syncing back).

Knobs: ``xclbin_uuid``, ``missing_kernels``, ``ids``, ``stuck`` and ``n_cards`` as on the attention card; ``hang``
(a compute unit or the graph never completes), ``fail`` (``{compute unit: run state name}``), ``done_fault``
(``"duplicate"``: pipeline 0's last record is a copy of the one before; ``"misroute"``: pipeline 1's records carry
pipeline 0; ``"stale"``: pipeline 0 completes without writing a record).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vckattn.golden.swiftmax_int import SwiftMaxFormat
from vckattn.hw.engine import streams
from vckattn.hw.engine.model import EngineParams, run_pipeline_model
from vckattn.hw.manifest import Manifest

from .card import FakeAttentionCard, FakeRun, _fmt

CMD_BYTES = 32


def _params(manifest: Manifest) -> EngineParams:
    e, t = manifest.data["engine"], manifest.data["tile"]
    return EngineParams(pipelines=int(e["pipelines"]), kernels=int(e["kernels_per_pipeline"]),
                        score_plios=int(e["score_plios"]), q_rows=int(t["q_rows"]), d=int(e["d"]),
                        max_keys=int(e["max_keys"]), score_bits=int(e["score_bits"]), lanes=int(t["lanes"]))


class FakeEngineCard(FakeAttentionCard):
    def __init__(self, manifest: Manifest, *, done_fault: str | None = None, **knobs: Any) -> None:
        super().__init__(manifest, **knobs)
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
        run = super().start(kernel, args)
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

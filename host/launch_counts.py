"""The host's calls of one attention layer on the card, counted from the host's own launch code (no card, no XRT).

:func:`count_launch` runs :meth:`vckattn.host.backends.engine_hw.EngineCardDevice._launch` (the code the ``xrt``
backend runs on a VCK5000) on a runtime that records every buffer sync (with its bytes), compute-unit start and
wait, and graph run and wait, for a design's pipelines and a workload's shape. :mod:`vckattn.hw.perf.host_cost`
prices the counts; :func:`with_end_to_end` puts the priced host side beside the modeled device time.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import numpy as np

from vckattn.hw.perf.host_cost import Counts, layer_host_cost


def _recording_device(params: Any) -> Any:
    """An :class:`EngineCardDevice` of ``params`` over a runtime that records every call (no card, no XRT)."""
    from vckattn.host.backends.engine_hw import MM2S, S2MM, EngineCardDevice, Pipeline
    from vckattn.hw.spec import streams

    class Recorder(EngineCardDevice):
        name = "count"
        where = "software: a recording runtime (counts the host's calls; computes nothing)"
        balance = True  # the xrt backend's graph.run(n)

        def __init__(self) -> None:  # noqa: D107 - no manifest: the design's parameters only
            self.params = params
            self.pipes = [Pipeline(i, f"{MM2S}_q{i}", f"{MM2S}_k{i}", f"{MM2S}_v{i}", f"{S2MM}_{i}")
                          for i in range(params.pipelines)]
            self._bufs = {}
            self.launches = 0
            self.counts = Counts()
            self._lists: list[Any] = []

        def _open(self) -> None:
            pass

        def _is_open(self) -> bool:
            return True

        def _register_port(self) -> Any:  # configure's register writes are priced apart, never by this runtime
            raise RuntimeError("the recording runtime counts a launch's calls only: it has no register port")

        def _alloc(self, name: str, unit: str, port: str, nbytes: int) -> Any:
            return {"name": name, "bytes": nbytes}

        def _upload(self, buf: Any, data: np.ndarray) -> None:
            self.counts.syncs_to_device += 1
            self.counts.bytes_to_device += int(data.nbytes)

        def _download(self, buf: Any, nbytes: int) -> np.ndarray:
            self.counts.syncs_from_device += 1
            self.counts.bytes_from_device += int(nbytes)
            out = np.zeros(nbytes, np.uint8)
            if buf["name"].startswith("done."):  # records that pass the launch's own check: own ones set, filler
                i = next(p.index for p in self.pipes if buf["name"] == f"done.{p.out}")
                bl = self._lists[i]
                recs = out.reshape(-1, streams.BEAT_BYTES)
                recs[:bl.own] = 1
                recs[bl.own:] = bl.filler_done
            return out

        def _start(self, unit: str, values: dict[str, Any]) -> None:
            self.counts.cu_starts += 1

        def _wait(self, unit: str) -> None:
            self.counts.cu_waits += 1

        def _graph_run(self, iterations: int) -> None:
            self.counts.graph_runs += 1

        def _graph_wait(self) -> None:
            self.counts.graph_waits += 1

    return Recorder()


@functools.lru_cache(maxsize=256)
def count_launch(pipelines: int, kernels: int, score_plios: int, q_rows: int, d: int, max_keys: int,
                 batch: int, heads: int, kv_heads: int, seq: int, head_dim: int | None = None) -> Counts:
    """The host's calls for one layer of ``batch`` x ``heads`` (``kv_heads``) x ``seq`` x ``head_dim`` (default
    ``d``, the build's) on an engine build of these parameters: the host's launch run on a recording runtime
    (module docstring). ValueError when the build cannot run the shape (the host's own refusal)."""
    from vckattn.golden.requant import RequantRegisters
    from vckattn.host.backends.engine_hw import balanced_lists
    from vckattn.host.engine import plan_launch
    from vckattn.hw.spec.functional import EngineParams

    params = EngineParams(pipelines=pipelines, kernels=kernels, score_plios=score_plios, q_rows=q_rows, d=d,
                          max_keys=max_keys)
    hd = head_dim or d
    q = np.ones((batch, heads, seq, hd), np.int8)
    kv = np.ones((batch, kv_heads, seq, hd), np.int8)
    keep = np.ones((batch, 1, seq), bool)
    rq = RequantRegisters(np.array([1 << 14]), np.array([15]))
    try:
        launch = plan_launch(params, q, kv, kv, keep, False, 0, rq)
    except Exception as exc:  # the host's refusal of a shape the build cannot run
        raise ValueError(f"the host cannot launch this layer on the design: {exc}") from None
    dev = _recording_device(params)
    dev._lists = balanced_lists(launch.cmds)
    dev._launch(launch, None)
    return dev.counts


def with_end_to_end(perf: Any) -> Any:
    """``perf`` (a :class:`vckattn.hw.perf.model.Perf`) with its end-to-end host side: the host's calls for the
    layer counted (:func:`count_launch`) and priced (:func:`vckattn.hw.perf.host_cost.layer_host_cost`); a layer
    the host cannot launch on the design keeps ``end_to_end`` None with the reason."""
    w, d, dev = perf.workload, perf.design, perf.device
    try:
        counts = count_launch(d.pipelines, d.qk_kernels, d.score_plios, d.q_rows, d.head_dim or w.d_head,
                              d.max_seq or w.seq, w.batch, w.heads, w.n_kv_heads, w.seq, w.d_head)
        return replace(perf, end_to_end=layer_host_cost(w, d, dev, counts), end_to_end_refused="")
    except ValueError as exc:
        return replace(perf, end_to_end=None, end_to_end_refused=str(exc))


__all__ = ["count_launch", "with_end_to_end"]

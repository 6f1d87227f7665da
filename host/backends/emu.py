"""``emu``: the golden fixed-point model as a device (software; bit-exact by construction).

Double-buffered like the hardware: a worker thread computes tile ``t+1`` while the host checks and
stores tile ``t`` (a bounded queue of two results). ``compute_seconds`` accumulates the time spent in
the tile arithmetic itself, so the benchmark can separate it from host overhead.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

from vckattn.host.backends.base import Device, compute_tile
from vckattn.host.tiler import LayerJob, TileResult

_DONE = object()


class EmuDevice(Device):
    name = "emu"
    where = "software: the bit-exact golden fixed-point model"

    def __init__(self, manifest, depth: int = 2) -> None:  # type: ignore[no-untyped-def]
        super().__init__(manifest)
        self.depth = depth
        self.compute_seconds = 0.0

    def run(self, job: LayerJob) -> Iterator[TileResult]:
        layer = self.layer
        if layer is None:
            raise RuntimeError("configure() a layer before run()")
        q: queue.Queue = queue.Queue(maxsize=self.depth)
        stop = threading.Event()

        def worker() -> None:
            try:
                for t in job.tiles:
                    if stop.is_set():
                        return
                    t0 = time.perf_counter()
                    a = compute_tile(layer, job, t)
                    self.compute_seconds += time.perf_counter() - t0
                    q.put(TileResult(t.tile_id, a))
                q.put(_DONE)
            except BaseException as exc:  # re-raised in the consumer
                q.put(exc)

        th = threading.Thread(target=worker, name="vckattn-emu", daemon=True)
        th.start()
        try:
            while True:
                item = q.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while th.is_alive():  # unblock a worker waiting on a full queue
                try:
                    q.get_nowait()
                except queue.Empty:
                    th.join(0.01)


__all__ = ["EmuDevice"]

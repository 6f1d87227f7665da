"""``csim``: the Versal build's own C++ in C-simulation — HLS data movers, ``score_switch`` and the HLS
SwiftMax normalizer (g++ against AMD's ap_types headers), the AIE matmul kernels through their scalar
reference path — chained launch by launch through the DDR buffers the ``xrt`` backend would fill
(:mod:`vckattn.sim.system_csim`).

It exercises exactly the buffer packing and unpacking of the hardware backends
(:mod:`vckattn.host.tile_buffers`), so a layout or stream-format disagreement between host, movers,
AIE kernels and normalizer shows up here as a non-bit-exact layer. Only SwiftMax layers: the online
softmax normalizer exists only as RTL (use ``--backend rtl`` for it). The SwiftMax constants are per head
(register map v2): every launch programs the shared registers and all ``max_heads`` entries of the
``b_beta`` / ``c_out`` memories from ``layer.swiftmax`` (a :class:`~vckattn.golden.swiftmax_int.SwiftMaxHeads`),
and each tile's query head (its descriptor's ``head``) selects its entry.
"""

from __future__ import annotations

from collections.abc import Iterator

from vckattn.golden.errors import ToolMissing
from vckattn.host.backends.base import Device, DeviceError
from vckattn.host.backends.hwio import requant_scalars
from vckattn.host.tile_buffers import TILES_PER_LAUNCH, blank_out, pack_kv, pack_tiles, unpack_out
from vckattn.host.tiler import LayerJob, TileResult


class CsimDevice(Device):
    name = "csim"
    where = ("C-simulation (g++ + AMD ap_types): HLS movers, score_switch, HLS SwiftMax; AIE matmul kernels' "
             "scalar reference path")

    def __init__(self, manifest, tiles_per_launch: int = TILES_PER_LAUNCH) -> None:  # type: ignore[no-untyped-def]
        super().__init__(manifest)
        self.tiles_per_launch = tiles_per_launch
        self.launches = 0

    def open(self) -> None:
        from vckattn.sim.hls_csim import HlsToolsMissing
        from vckattn.sim.system_csim import build

        try:
            build()
        except HlsToolsMissing as exc:
            raise ToolMissing(f"the csim backend needs g++ and the hls4ml ap_types headers: {exc}") from None

    def configure(self, layer) -> None:  # type: ignore[no-untyped-def]
        super().configure(layer)
        if layer.normalizer != "swiftmax":
            raise DeviceError(f"the csim backend has only the HLS SwiftMax normalizer; this layer uses "
                              f"{layer.normalizer} (its kernel exists as RTL: use --backend rtl)")

    def run(self, job: LayerJob) -> Iterator[TileResult]:
        from vckattn.sim.system_csim import run_launch

        layer = self.layer
        if layer is None:
            raise RuntimeError("configure() a layer before run()")
        rq = requant_scalars(layer)
        kv = pack_kv(job)
        q_rows, hd = job.tile.q_rows, int(job.k.shape[-1])
        n_kv = int(job.k.shape[1])
        for start in range(0, len(job.tiles), self.tiles_per_launch):
            tiles = job.tiles[start:start + self.tiles_per_launch]
            res = run_launch(pack_tiles(job, tiles), kv, blank_out(len(tiles), q_rows, hd), len(tiles), hd,
                             job.keys_pad, n_kv, rq, layer.swiftmax)
            self.launches += 1
            if res.leftover or res.framing_errors:
                raise DeviceError(f"C-simulation of launch {self.launches - 1}: streams not consumed exactly "
                                  f"{res.leftover}, framing errors {res.framing_errors}")
            yield from unpack_out(res.out, len(tiles), q_rows, hd)


__all__ = ["CsimDevice"]

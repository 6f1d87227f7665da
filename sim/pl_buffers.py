"""Synthesis sweep behind the performance model's cost of the sublayer's PL buffer parts
(``hw/perf/data/pl_buffers.json``): the slot buffer's arbiters and multiplexers, the buffer reader and the Q/K/V
re-tiler, each synthesized with Yosys (UltraScale+ cells as a proxy for the Versal PL) and fitted.

* ``slot_buffer``: least squares ``lut (ff) = base + Σ per_<term> · <term>`` over the wiring terms of
  ``hw/perf/banks.py: wiring_features`` ((stream, bank) wires, each bank's multiplexer trees of ``n · log2 n`` for
  its ``n`` writers and read ports, banks), over buffers of 4 slots and banks of 16 beats (their memory maps to
  LUTRAM, reported apart: the model costs the banks' memory blocks itself), some with every stream wired to every
  bank and some wired to a few. The terms are the candidate set with the smallest leave-one-out error on these
  points alone (``candidates``: each set's mean and largest); then checked on points it was not fitted on: every
  buffer of the full-size sublayer builds, with the wiring the model gives them (``hw/perf/sublayer.py:
  banked_buffers``), synthesized with banks of 16 beats;
* ``buffer_reader``: one reader (its address width changes it little: the largest of the points);
* ``retiler``: least squares ``lut (ff) = base + per_col · cols`` over the re-tilers of the full-size builds'
  geometries and a small one;
* ``x_rows``: least squares ``lut (ff) = base + per_row_beat · row_beats`` over the residual paths' row units
  (``hw/pl/x_rows.py``, 4 lanes) of records 16 to 192 channels wide (its two halves' memory maps to LUTRAM,
  RAM32M16 cells of 8 LUTs each, counted in its LUTs: ``lut_total``);
* ``stream_router``: least squares ``lut (ff) = base + Σ per_<term> · <term>`` over the terms of
  ``hw/perf/banks.py: router_features`` (outputs, LUTRAM FIFO blocks, block-RAM FIFOs) for the descriptor and w
  routers (``hw/pl/stream_router.py``), LUTRAM counted in the LUTs as for the row units; each point's BRAM must be
  the model's rule (``router_bram``: a FIFO of 128 entries or more, two RAMB36 a 512 entries), or the sweep stops;
* ``rope_records``: least squares ``lut (ff, dsp, bram) = base + per_lane · lanes + per_position · max_pos`` over a
  decoder's RoPE unit as built (``hw/pl/rope_records.py``: the records' wrapper around the RoPE kernel, its table of
  ``max_pos`` positions of 64 features), records of 16 × 64, LUTRAM counted in the LUTs.

Run: ``python -m vckattn.sim.pl_buffers --out hw/perf/data/pl_buffers.json`` (about 20 min on 2 cores; each
synthesis is cached by its Verilog, so a rerun of unchanged parts takes seconds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vckattn.hw.perf.banks import FEATURES, ROUTER_FEATURES, logic, router_bram, router_features, wiring_features
from vckattn.hw.pl.buffer_reader import BufferReader
from vckattn.hw.pl.retiler import QkvRetiler
from vckattn.hw.pl.rope_records import RopeRecords
from vckattn.hw.pl.slot_buffer import SlotBuffer
from vckattn.hw.pl.stream_router import StreamRouter
from vckattn.hw.pl.synth import synthesize
from vckattn.hw.pl.x_rows import XRows
from vckattn.hw.spec.qkv_buffer import QkvLayout

__all__ = ["CANDIDATES", "READERS", "RETILERS", "ROPE_RECORDS", "ROUTERS", "SLOT_BUFFERS", "X_ROWS",
           "fit", "loo_error", "main", "run_sweep"]

#: slot buffers: (banks, writers, read ports, banks a writer reaches, banks a read port reaches; None = all),
#: 4 slots of banks of 16 beats
SLOT_BUFFERS: tuple[tuple[int, int, int, int | None, int | None], ...] = (
    (8, 2, 4, None, None), (8, 2, 8, None, None), (16, 4, 8, None, None), (16, 4, 8, 4, 2),
    (32, 2, 16, None, 2), (32, 6, 16, 8, 4), (24, 3, 12, 8, 3), (64, 8, 32, 16, 4), (48, 1, 24, None, 12),
    (72, 6, 36, 12, 4), (16, 12, 4, None, 4), (24, 8, 4, 12, 6), (20, 14, 6, None, None), (72, 6, 36, 12, 2),
    (48, 4, 24, 12, 2), (24, 3, 6, None, 4), (12, 2, 8, None, 2))
SLOTS, BANK_BEATS = 4, 16
#: buffer readers: (address bits, slots)
READERS: tuple[tuple[int, int], ...] = ((12, 4), (19, 4))
#: re-tilers: (name, layout, rows, cols): the full-size encoder's and decoder's Q/K/V records (their layouts: 4
#: slots of 512 tokens, Q tiles of 32 rows, slices of 32 keys) and the encoder's buffer with narrower and wider records
_ENCODER, _DECODER = QkvLayout(64, 12, 12, 512, 32, 32, 4), QkvLayout(64, 9, 3, 512, 32, 32, 4)
RETILERS: tuple[tuple[str, QkvLayout, int, int], ...] = (
    ("encoder_c16", _ENCODER, 16, 16), ("encoder", _ENCODER, 16, 48), ("decoder", _DECODER, 16, 64),
    ("encoder_c96", _ENCODER, 16, 96))
#: residual row units: 16-feature blocks a record's row (the full-size W_O records are 48 channels: 3)
X_ROWS: tuple[int, ...] = (1, 3, 4, 12)
#: stream routers (the descriptor router, the w router): (outputs, FIFO entries of each), shallow (LUTRAM) and deep
#: (block RAM) FIFOs, up to the full-size builds' 70-odd readers
ROUTERS: tuple[tuple[int, int], ...] = ((8, 4), (8, 64), (8, 128), (8, 512), (4, 1024), (16, 32), (32, 16), (64, 8),
                                        (16, 256), (48, 64))
KEYS = ("lut", "ff")
#: RoPE units on the Q/K/V records: (lanes, max_pos), records of 16 x 64 (a head row a record row), Q and K rotated
ROPE_RECORDS: tuple[tuple[int, int], ...] = ((8, 256), (16, 256), (8, 512), (16, 512), (4, 128))


def _wiring(n: int, banks: int, reach: int | None, offset: int) -> list[list[int]] | None:
    """``n`` streams each reaching ``reach`` consecutive banks (stream ``i`` from bank ``i·offset``), or all."""
    if reach is None:
        return None
    return [[(i * offset + k) % banks for k in range(reach)] for i in range(n)]


def slot_buffer(banks: int, writers: int, readers: int, w_reach: int | None, r_reach: int | None) -> SlotBuffer:
    """The sweep's slot buffer of ``banks`` banks (every bank reached by a writer)."""
    return SlotBuffer(SLOTS, banks * BANK_BEATS // SLOTS, BANK_BEATS, writers, readers, readers,
                      _wiring(writers, banks, w_reach, max(1, banks // writers)),
                      _wiring(readers, banks, r_reach, max(1, banks // readers)))


def full_size_buffers() -> list[tuple[str, object]]:
    """Every buffer of the full-size sublayer builds with the model's wiring (``banked_buffers``)."""
    from vckattn.hw.design.sublayer_build import FULL_SIZE_BUILDS, FULL_SIZE_SHAPES, split_of
    from vckattn.hw.perf import sublayer as sl

    out = []
    for name, b in FULL_SIZE_BUILDS.items():
        s = sl.SublayerShape(**FULL_SIZE_SHAPES[name])
        for buf in sl.banked_buffers(s, sl.SublayerSplit(**split_of(b))).values():
            out.append((name, buf))
    return out


def _point(component: object, name: str) -> dict:
    t0 = time.perf_counter()
    r = synthesize(component, name, timeout=3600.0)
    return {"lut": r.lut, "ff": r.ff, "lutram": r.lutram, "dsp": r.dsp, "bram": r.bram,
            "synth_seconds": round(time.perf_counter() - t0, 1)}


def fit(features: Sequence[Sequence[float]], values: Sequence[float], names: Sequence[str]) -> dict[str, float]:
    """Least squares ``value = Σ coefficient · feature`` (``names[0]`` the constant term); with the largest
    relative and absolute residuals over the points."""
    a = np.asarray(features, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    res = np.abs(a @ coef - y)
    return {**{n: round(float(c), 4) for n, c in zip(names, coef, strict=True)},
            "max_rel_residual": round(float(np.max(res / np.maximum(y, 1.0))), 4),
            "max_abs_residual": round(float(res.max()), 1)}


#: the slot buffer fit's candidate term sets (:func:`~vckattn.hw.perf.banks.wiring_features`); the fit takes the
#: one with the smallest mean leave-one-out error over the sweep's points (``FEATURES``)
CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("write_pairs", "read_pairs", "banks"), ("write_mux", "read_mux", "banks"),
    ("write_pairs", "read_pairs", "write_mux", "read_mux", "banks"))


def loo_error(features: Sequence[Sequence[float]], values: Sequence[float]) -> dict[str, float]:
    """Leave-one-out relative error of the least squares fit: each point predicted by the fit over the others
    (mean and largest)."""
    a = np.asarray(features, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    errs = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        coef, *_ = np.linalg.lstsq(a[keep], y[keep], rcond=None)
        errs.append(abs(a[i] @ coef / y[i] - 1))
    return {"mean": round(float(np.mean(errs)), 4), "max": round(float(np.max(errs)), 4)}


def _say(msg: str) -> None:
    if sys.stderr.isatty():
        print(msg, file=sys.stderr, flush=True)


def run_sweep() -> dict:
    """Every point of :data:`SLOT_BUFFERS`, :data:`READERS` and :data:`RETILERS`, synthesized, and the fits."""
    t0 = time.perf_counter()
    sb_points = []
    for i, (banks, w, r, wr, rr) in enumerate(SLOT_BUFFERS):
        _say(f"slot buffer {i + 1}/{len(SLOT_BUFFERS)}: {banks} banks, {w} writers, {r} read ports")
        buf = slot_buffer(banks, w, r, wr, rr)
        p = _point(buf, f"pb_slot_buffer_{banks}_{w}_{r}_{wr}_{rr}")
        sb_points.append({"banks": banks, "writers": w, "read_ports": r,
                          **wiring_features(banks, buf.write_banks, buf.read_banks), **p})
    candidates = {" + ".join(c): loo_error([[1, *(p[n] for n in c)] for p in sb_points],
                                           [p["lut"] for p in sb_points]) for c in CANDIDATES}
    chosen = min(CANDIDATES, key=lambda c: candidates[" + ".join(c)]["mean"])
    if chosen != FEATURES:
        raise SystemExit(f"the sweep's best terms are {chosen}, not the model's {FEATURES} (hw/perf/banks.py)")
    names = ("base", *(f"per_{n}" for n in FEATURES))
    feats = [(1, *(p[n] for n in FEATURES)) for p in sb_points]
    fits = {k: fit(feats, [p[k] for p in sb_points], names) for k in KEYS}
    held_out = []
    for build, buf in full_size_buffers():
        _say(f"held out: {build} {buf.name}: {buf.banks} banks")
        sb = SlotBuffer(SLOTS, buf.banks * BANK_BEATS // SLOTS, BANK_BEATS, len(buf.writers), len(buf.readers),
                        len(buf.readers), [sorted(w) for w in buf.writers], [sorted(r) for r in buf.readers])
        p = _point(sb, f"pb_held_{build}_{buf.name}")
        model = logic(buf.features(), fits)
        held_out.append({"build": build, "buffer": buf.name, **buf.features(), **p,
                         "fit": {k: round(v, 1) for k, v in model.items()},
                         "rel_error": {k: round((model[k] - p[k]) / p[k], 4) for k in KEYS}})
    rd_points = []
    for bits, slots in READERS:
        _say(f"buffer reader: {bits} address bits")
        rd_points.append({"addr_bits": bits, "slots": slots,
                          **_point(BufferReader(bits, slots), f"pb_buffer_reader_{bits}_{slots}")})
    rt_points = []
    for name, layout, rows, cols in RETILERS:
        _say(f"re-tiler: {name} ({rows} x {cols})")
        rt_points.append({"name": name, "rows": rows, "cols": cols, "layout": vars(layout),
                          **_point(QkvRetiler(layout, rows, cols), f"pb_retiler_{name}")})
    xr_points = []
    for row_beats in X_ROWS:
        _say(f"residual row unit: {row_beats} blocks a row")
        pt = _point(XRows(row_beats, 4), f"pb_x_rows_{row_beats}")
        xr_points.append({"row_beats": row_beats, "lanes": 4, **pt, "lut_total": pt["lut"] + 8 * pt["lutram"]})
    ro_points = []
    for outputs, depth in ROUTERS:
        _say(f"stream router: {outputs} outputs, FIFOs of {depth}")
        depths = [depth] * outputs
        pt = _point(StreamRouter(depths), f"pb_router_{outputs}_{depth}")
        if pt["bram"] != router_bram(depths):
            raise SystemExit(f"router {outputs} x {depth}: {pt['bram']} BRAM36, not the model's {router_bram(depths)} "
                             "(hw/perf/banks.py: router_bram)")
        ro_points.append({"outputs": outputs, "depth": depth, **router_features(depths), **pt,
                          "lut_total": pt["lut"] + 8 * pt["lutram"]})
    rr_points = []
    for lanes, positions in ROPE_RECORDS:
        _say(f"RoPE unit on the records: {lanes} lanes, {positions} positions")
        pt = _point(RopeRecords(16, 64, 64, 768, positions, lanes), f"pb_rope_records_{lanes}_{positions}")
        rr_points.append({"lanes": lanes, "max_pos": positions, **pt, "lut_total": pt["lut"] + 8 * pt["lutram"]})
    return {
        "description": ("Modeled PL resources of the sublayer's buffer parts (hw/pl/slot_buffer.py, buffer_reader.py, "
                        "retiler.py, x_rows.py, stream_router.py): Yosys synth_xilinx -family xcup (UltraScale+ cells "
                        "as a proxy for the Versal PL), logic only (the banks' memory is costed by the model as "
                        "URAM/BRAM blocks). Not board measurements."),
        "command": "python -m vckattn.sim.pl_buffers --out hw/perf/data/pl_buffers.json",
        "slot_buffer": {"slots": SLOTS, "bank_beats": BANK_BEATS, "points": sb_points, "candidates": candidates,
                        "fit": fits, "held_out": held_out},
        "buffer_reader": {"points": rd_points,
                          "cost": {k: max(p[k] for p in rd_points) for k in KEYS}},
        "retiler": {"points": rt_points,
                    "fit": {k: fit([(1, p["cols"]) for p in rt_points], [p[k] for p in rt_points],
                                   ("base", "per_col")) for k in KEYS}},
        "x_rows": {"points": xr_points,
                   "fit": {k: fit([(1, p["row_beats"]) for p in xr_points],
                                  [p["lut_total" if k == "lut" else k] for p in xr_points], ("base", "per_row_beat"))
                           for k in KEYS}},
        "stream_router": {"points": ro_points,
                          "fit": {k: fit([(1, *(p[n] for n in ROUTER_FEATURES)) for p in ro_points],
                                         [p["lut_total" if k == "lut" else k] for p in ro_points],
                                         ("base", *(f"per_{n}" for n in ROUTER_FEATURES))) for k in KEYS}},
        "rope_records": {"points": rr_points,
                         "fit": {k: fit([(1, p["lanes"], p["max_pos"]) for p in rr_points],
                                        [p["lut_total" if k == "lut" else k] for p in rr_points],
                                        ("base", "per_lane", "per_position")) for k in (*KEYS, "dsp", "bram")}},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m vckattn.sim.pl_buffers --out hw/perf/data/pl_buffers.json``."""
    ap = argparse.ArgumentParser(prog="python -m vckattn.sim.pl_buffers", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    doc = run_sweep()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out} ({doc['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``vckattn board selftest``: prove that a card runs an engine build right, in four checks.

The full description: ``docs/internals/host.md``, section ``host/selftest.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vckattn.golden.errors import EXIT_DEVICE, EXIT_NOT_BIT_EXACT, EXIT_OK, EXIT_TOOL, ToolMissing, UserError
from vckattn.hw.design.manifest import Manifest

#: the known layer's shape (module docstring)
KNOWN = {"batch": 2, "heads": 4, "seq": 45, "valid_last": 30, "seed": 0, "beta": 3.0, "gamma": 5.0}
CHECKS = ("xclbin", "registers", "tiles", "timing")
BACKENDS = ("xrt", "pynq")


@dataclass
class Check:
    """One check's outcome: ``status`` PASS, FAIL or SKIP; ``exit_code`` the status a FAIL maps to."""

    name: str
    status: str = "SKIP"
    detail: str = "not run (an earlier check failed)"
    exit_code: int = EXIT_OK
    data: dict[str, Any] = field(default_factory=dict)

    def passed(self, detail: str, **data: Any) -> None:
        self.status, self.detail, self.data = "PASS", detail, data

    def failed(self, detail: str, exit_code: int, **data: Any) -> None:
        self.status, self.detail, self.exit_code, self.data = "FAIL", detail, int(exit_code), data

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "exit_code": self.exit_code,
                **self.data}


class _Stop(Exception):
    """The checks after a failed ``xclbin`` check do not run."""


def known_layer(manifest: Manifest) -> tuple[Any, np.ndarray, np.ndarray]:
    """The known layer of the selftest for ``manifest``'s build: ``(layer, x (B, S, hidden) float, keep (B, S))``
    (module docstring)."""
    import torch

    from vckattn.golden.attention import MultiHeadAttention
    from vckattn.golden.quant_attention import calibrate_attention, narrow_layer

    head_dim = min(manifest.tile.head_dims)
    heads, batch = KNOWN["heads"], KNOWN["batch"]
    seq = min(int(KNOWN["seq"]), int(manifest.data["max_seq_len"]))
    torch.manual_seed(int(KNOWN["seed"]))
    mha = MultiHeadAttention(head_dim * heads, heads).double()
    x = np.random.default_rng(int(KNOWN["seed"])).normal(size=(batch, seq, head_dim * heads))
    keep = np.ones((batch, seq), bool)
    keep[-1, min(int(KNOWN["valid_last"]), seq):] = False
    layer = calibrate_attention(mha, x, keep, "swiftmax", beta=float(KNOWN["beta"]), gamma=float(KNOWN["gamma"]))
    return narrow_layer(layer, int(manifest.data["engine"]["score_bits"])), x, keep


def predicted(manifest: Manifest, batch: int, heads: int, seq: int, head_dim: int) -> dict[str, Any]:
    """The performance model's time per layer for the known workload on ``manifest``'s design (modeled; operands
    sent from the host each layer, as the selftest does)."""
    from vckattn.hw.perf import model

    w = model.Workload(heads=heads, d_head=head_dim, seq=seq, batch=batch, layers=("swiftmax",), operands="host",
                       name="selftest")
    perf = model.evaluate(w, model.design_from_manifest(manifest.data),
                          model.load_device(str(manifest.data.get("board", "vck5000"))))
    return {"seconds_per_layer": perf.seconds_per_layer, "device_seconds_per_layer": perf.device_seconds_per_layer,
            "bottleneck": perf.bottleneck, "modeled": True,
            "assumptions": "hw/perf model.evaluate, operands from the host over PCIe (docs/performance.md)"}


def _merged(a: np.ndarray) -> np.ndarray:
    """Head outputs ``(B, H, S, D)`` as golden's trace holds them, ``(B, S, H·D)``."""
    b, h, s, d = a.shape
    return np.asarray(a).transpose(0, 2, 1, 3).reshape(b, s, h * d)


def _mismatch(got: np.ndarray, want: np.ndarray) -> str:
    if got.shape != want.shape:
        return f"shape {got.shape}, golden {want.shape}"
    bad = np.argwhere(got != want)
    first = tuple(int(i) for i in bad[0])
    return f"{len(bad)} of {want.size} values differ (first at {first}: {got[first]} vs golden {want[first]})"


def selftest(manifest: Manifest, backend: str = "xrt", xclbin: Path | None = None, device_index: int = 0,
             device_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the four checks (module docstring) of the engine build ``manifest`` on ``backend`` (``xrt``: card
    ``device_index``, or the emulated card; ``pynq``); returns the JSON-able report with every check and the exit
    status (``exit_code``: 0 when all pass, else the first failed check's)."""
    from vckattn.golden.stages import attention_int
    from vckattn.host.attention_layer import run_layer
    from vckattn.host.backends import device_class
    from vckattn.host.backends.base import DeviceError
    from vckattn.host.backends.emulation import EMULATION_ENV, emulated_uuid, emulation_mode

    if not manifest.data.get("engine"):
        raise UserError(f"{manifest.name}: board selftest runs engine builds (such as vck5000_engine or "
                        "engine_small); this manifest has no engine section")
    if "sublayer" in manifest.data:
        raise UserError(f"{manifest.name} is a sublayer build: its GEMM stages have no xclbin flow, so no card runs "
                        "it; "
                        "board selftest runs attention engine builds (such as vck5000_engine or engine_small)")
    if backend not in BACKENDS:
        raise UserError(f"board selftest: backend {backend!r}; choose {', '.join(BACKENDS)}")
    mode = emulation_mode()
    if mode is not None and backend != "xrt":
        raise UserError(f"{EMULATION_ENV}={mode} emulates the xrt backend's card; unset it for --backend {backend}")
    options = dict(device_options or {})
    if xclbin is not None:
        options["xclbin"] = xclbin
    if backend == "xrt":
        options["device_index"] = device_index
    checks = {name: Check(name) for name in CHECKS}
    layer, x, keep = known_layer(manifest)
    want_out, trace = attention_int(layer, x, keep)
    batch, seq, _ = x.shape
    head_dim, heads = min(manifest.tile.head_dims), int(KNOWN["heads"])
    dev = device_class(backend)(manifest, **options)
    report: dict[str, Any] = {
        "manifest": manifest.name, "manifest_file": str(manifest.file), "backend": backend, "device": dev.where,
        "emulated": mode is not None,
        "workload": {"batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
                     "valid_last": int(keep[-1].sum()), "normalizer": "swiftmax",
                     "score_bits": int(layer.score_bits), "seed": int(KNOWN["seed"])},
    }

    def fail(check: Check, exc: BaseException) -> None:
        code = EXIT_TOOL if isinstance(exc, ToolMissing) else EXIT_DEVICE
        check.failed(" ".join(str(exc).split()), code)

    try:
        dev.open()
    except (DeviceError, ToolMissing) as exc:
        fail(checks["xclbin"], exc)
    else:
        try:
            uuid = str(dev.uuid).lower() if getattr(dev, "uuid", None) else None
            want_uuid = emulated_uuid(manifest) if mode is not None else (manifest.uuid or "").lower() or None
            c = checks["xclbin"]
            units = sum(k.get("kind") == "hls" for k in dev.kernels_checked)
            opened = f"{units} mover compute units, the PL top {dev.pl_top} (ID register checked) and the AIE graph"
            if backend == "xrt" and uuid != want_uuid:
                c.failed(f"the loaded design's UUID {uuid} is not {manifest.name}'s ({want_uuid})", EXIT_DEVICE,
                         uuid=uuid, manifest_uuid=want_uuid)
            elif mode is not None:
                whose = "the manifest's" if manifest.uuid else "derived from the manifest's name: it records none"
                c.passed(f"emulated card ({EMULATION_ENV}={mode}): design {manifest.name}, UUID {uuid} ({whose}; "
                         f"no xclbin read); {opened} opened", uuid=uuid, manifest_uuid=want_uuid,
                         kernels_checked=dev.kernels_checked)
            else:
                where = f"card {device_index}" if backend == "xrt" else "the board (PYNQ)"
                said = f"UUID {uuid} is {manifest.name}'s" if uuid else "PYNQ reads no UUID"
                c.passed(f"{dev.xclbin} loaded on {where}, {said}; {opened} opened", uuid=uuid, manifest_uuid=want_uuid,
                         xclbin=str(dev.xclbin), kernels_checked=dev.kernels_checked)
            if c.status == "FAIL":
                raise _Stop
            c = checks["registers"]
            try:
                dev.configure(layer)
                read = dev.verify_registers()
            except (DeviceError, ToolMissing) as exc:
                fail(c, exc)
            else:
                c.passed(f"{len(dev.written)} register words of {dev.pl_top} written and read back exactly",
                         registers=[{"register": w.name, "offset": w.offset, "word": f"{w.word:#010x}",
                                     "readback": f"{read[w.name] & 0xFFFFFFFF:#010x}"} for w in dev.written])
            c = checks["tiles"]
            runs = []
            try:
                for _ in range(2):  # the first run allocates buffers (and builds the emulator's C-simulation)
                    runs.append(run_layer(dev, layer, x, keep))
            except (DeviceError, ToolMissing) as exc:
                fail(c, exc)
            else:
                bad = [(i, what, got, want) for i, r in enumerate(runs)
                       for what, got, want in (("int8 head outputs", _merged(r.a), trace["a"]),
                                               ("int32 output accumulators", r.y, trace["y"]),
                                               ("dequantized output", r.out, want_out))
                       if not np.array_equal(got, want)]
                tiles = runs[0].tiles
                if bad:
                    i, what, got, want = bad[0]
                    c.failed(f"run {i + 1}: {what} not bit-exact vs the integer golden model: {_mismatch(got, want)}",
                             EXIT_NOT_BIT_EXACT, tiles=tiles, bit_exact=False)
                else:
                    c.passed(f"{tiles} tiles ({batch}x{heads} heads, {seq} tokens, head size {head_dim}), run twice: "
                             f"bit-exact vs the integer golden model", tiles=tiles, bit_exact=True)
                    timing(checks["timing"], runs[1], manifest, mode, batch, heads, seq, head_dim)
        except _Stop:
            pass
        finally:
            dev.close()
    failed = [c for c in checks.values() if c.status == "FAIL"]
    report["checks"] = [c.to_json() for c in checks.values()]
    report["passed"] = not failed
    report["exit_code"] = failed[0].exit_code if failed else EXIT_OK
    return report


def timing(check: Check, run: Any, manifest: Manifest, mode: str | None, batch: int, heads: int, seq: int,
           head_dim: int) -> None:
    """The ``timing`` check: the run's measured launch time beside the model's prediction (module docstring)."""
    launch = float(run.seconds["stream"])
    layer_s = float(sum(run.seconds.values()))
    try:
        model = predicted(manifest, batch, heads, seq, head_dim)
    except ValueError as exc:
        check.failed(f"the performance model cannot cost this workload on {manifest.name}: {exc}", EXIT_DEVICE)
        return
    where = ("the emulator's wall time on this machine, not a board time" if mode is not None
             else "measured on this device")
    check.passed(f"{launch * 1e3:.3f} ms per layer launch ({where}); model predicts "
                 f"{model['seconds_per_layer'] * 1e6:.1f} us per layer on {manifest.data.get('board', 'vck5000')} "
                 f"(modeled)",
                 measured={"launch_seconds": launch, "layer_seconds": layer_s, "seconds": dict(run.seconds),
                           "what": where}, predicted=model)


def print_report(report: dict[str, Any]) -> None:
    """One line per check, then the verdict."""
    print(f"board selftest: {report['manifest']} on {report['device']}")
    w = report["workload"]
    print(f"known layer: batch {w['batch']}, {w['heads']} heads of {w['head_dim']}, {w['seq']} tokens "
          f"(last sequence {w['valid_last']} valid), SwiftMax, int{w['score_bits']} scores, seed {w['seed']}")
    for c in report["checks"]:
        print(f"{c['status']:4}  {c['name']:9}  {c['detail']}")
    n = len(report["checks"])
    ok = sum(c["status"] == "PASS" for c in report["checks"])
    print(f"selftest: {'PASS' if report['passed'] else 'FAIL'} ({ok} of {n} checks passed)")


__all__ = ["BACKENDS", "CHECKS", "KNOWN", "Check", "known_layer", "predicted", "print_report", "selftest"]

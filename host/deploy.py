"""``vckattn deploy``: bring a bundle up on a VCK5000 and prove the card is the build it expects.

The full description: ``docs/internals/host.md``, section ``host/deploy.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vckattn.host.backends.base import DeviceError
from vckattn.hw.design.manifest import BITSTREAMS, Manifest, ManifestError, check_bundle, load_manifest


def find_manifest(uuid: str, folder: Path | None = None, xclbin: Path | None = None) -> Manifest:
    """The manifest in ``folder`` (default ``bitstreams/``) whose ``xclbin.uuid`` is ``uuid``
    (ManifestError when none is)."""
    folder = BITSTREAMS if folder is None else folder
    built = []
    for f in sorted(folder.glob("*.json")):
        if f.name == "manifest_schema.json":
            continue
        m = load_manifest(f)
        if m.uuid is not None:
            built.append(f"{m.name} ({m.uuid})")
            if m.uuid.lower() == uuid.lower():
                return m
    what = f"the UUID {uuid} of {xclbin}" if xclbin is not None else f"the UUID {uuid}"
    known = f"; built manifests: {', '.join(built)}" if built else "; none records a built xclbin yet"
    raise ManifestError(folder, "xclbin.uuid", f"no manifest records {what} (pass --manifest){known}")


def deploy(xclbin: Path, bundle: Path, manifest: Path | None = None, device_index: int = 0, *,
           device_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check and configure the card at ``device_index`` for ``bundle`` with ``xclbin``; return the report.

    ``device_options``: extra keyword arguments of :class:`~vckattn.host.backends.xrt.XrtDevice` (``timeout_ms``).
    """
    from vckattn.golden.errors import UserError
    from vckattn.host.backends.emulation import EMULATION_ENV, emulation_mode
    from vckattn.host.backends.xrt import XrtDevice, check_file, import_pyxrt, read_xclbin
    from vckattn.host.bundle import load_bundle
    from vckattn.host.export import to_quant_layer

    mode = emulation_mode()
    if mode is not None:
        raise UserError(f"{EMULATION_ENV}={mode}: `vckattn deploy` configures a real card; on the emulated card check "
                        "an engine build with `vckattn board selftest --manifest M` or run a bundle with `vckattn run "
                        f"--backend xrt`; unset {EMULATION_ENV} for this command")
    b = load_bundle(bundle)  # BundleError passes through
    xclbin = check_file(Path(xclbin))
    pyxrt = import_pyxrt()
    _, uuid, _ = read_xclbin(pyxrt, xclbin)
    man = load_manifest(manifest) if manifest is not None else find_manifest(uuid, xclbin=xclbin)
    check_bundle(man, b)
    layers = b.manifest["layers"]
    if not layers:
        raise DeviceError(f"{bundle}: the bundle has no attention layer to configure")
    index = int(layers[0]["index"])
    layer = to_quant_layer(b, index)
    if "sublayer" in man.data:
        raise UserError(f"{man.name}: `vckattn deploy` configures an attention engine build (this manifest is a "
                        "sublayer build)")
    engine = man.data["engine"]
    from vckattn.golden.quant_attention import narrow_layer
    from vckattn.host.engine import EngineRequantError, requant_fields

    try:
        layer = narrow_layer(layer, int(engine["score_bits"]))  # the engine's layer, as `run` makes it
        requant = requant_fields(layer.rq_a)
    except (ValueError, EngineRequantError) as exc:
        raise UserError(f"{bundle}: layer {index}: {exc}") from None
    dev = XrtDevice(man, xclbin=xclbin, device_index=device_index, **(device_options or {}))
    with dev:
        dev.configure(layer)
        read = dev.verify_registers()
        report = {
            "device": dev.where,
            "device_index": int(device_index),
            "xclbin": str(xclbin),
            "uuid": dev.uuid,
            "manifest": man.name,
            "manifest_file": str(man.file),
            "bundle": str(bundle),
            "layer": index,
            "normalizer": layer.normalizer,
            "score_bits": int(layer.score_bits),
            "kernels_checked": list(dev.kernels_checked),
            "registers_written": [{"kernel": dev.pl_top, "register": w.name, "offset": w.offset,
                                   "value": w.value, "word": f"{w.word:#010x}",
                                   "readback": f"{read[w.name] & 0xFFFFFFFF:#010x}"} for w in dev.written],
            "requant": dict(zip(("rq_mult", "rq_shift"), requant, strict=True)),
        }
    return report


__all__ = ["deploy", "find_manifest"]

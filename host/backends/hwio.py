"""What the card backends (``xrt``, ``pynq``; :mod:`.engine_hw`) and the ``rtl`` backend share: the layer's register
values for the build's map of the PL top, the writes that program them, and a kernel's call arguments.

Registers: the PL top (``manifest.normalizer_kernel(layer.normalizer)``) gets every writable register of the map the
manifest records written (:func:`vckattn.hw.spec.driver.program`) from the golden register values
(:meth:`~vckattn.golden.regmap.RegisterValues.registers`) and read back exactly (:func:`vckattn.hw.spec.driver.verify`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vckattn.golden.quant_attention import QuantAttentionLayer
from vckattn.golden.regmap import RegisterMap, RegisterWrite
from vckattn.host.backends.base import DeviceError
from vckattn.hw.design.manifest import Manifest, ManifestError


def normalizer_values(layer: QuantAttentionLayer, regmap: RegisterMap) -> dict[str, Any]:
    """The layer's normalizer register values for ``regmap`` (the build's map): SwiftMax's per-head
    ``b_beta``/``c_out`` as one entry per register set the build holds (its memories' depth). On an engine built with
    both normalizers (a map with the ``normalizer`` register, :func:`vckattn.golden.engine.engine_regmap`) also the
    mode and the online-softmax registers (:func:`vckattn.golden.engine.engine_mode_values`); an online-softmax
    layer leaves SwiftMax's registers 0."""
    if "normalizer" in {r.name for r in regmap.regs}:
        from vckattn.golden.engine import engine_mode_values

        mode = engine_mode_values(layer.normalizer, layer.online)
        if layer.normalizer != "swiftmax":
            return {**{r.name: 0 for r in regmap.writable if r.name not in mode}, **mode}
        return {**_swiftmax_values(layer, regmap), **mode}
    regs = layer.swiftmax if layer.normalizer == "swiftmax" else layer.online
    if regs is None:
        raise DeviceError(f"the layer uses {layer.normalizer} but carries no {layer.normalizer} registers")
    if layer.normalizer != "swiftmax":
        return regs.registers()
    return _swiftmax_values(layer, regmap)


def _swiftmax_values(layer: QuantAttentionLayer, regmap: RegisterMap) -> dict[str, Any]:
    if layer.swiftmax is None:
        raise DeviceError("the layer uses swiftmax but carries no swiftmax registers")
    if "b_beta" not in {m.name for m in regmap.mems}:  # the bundle does not match the build: status 5
        raise ManifestError("the build's manifest", "kernels.swiftmax", "this build's SwiftMax kernel has one "
                            "register set per layer (register map version 1); per-head constants need a build of "
                            "this version (regenerate the manifest)")
    depth = regmap.mem("b_beta").depth
    if layer.swiftmax.n_heads > depth:
        raise ManifestError("the build's manifest", "kernels.swiftmax", f"the layer has {layer.swiftmax.n_heads} "
                            f"heads; this build's SwiftMax kernel holds {depth} register sets (max_heads)")
    return layer.swiftmax.register_values(replace(layer.sm_fmt, max_heads=depth))


def register_writes(manifest: Manifest, layer: QuantAttentionLayer) -> tuple[dict, list[RegisterWrite]]:
    """The normalizer kernel entry of ``layer`` and the register writes that configure it (not performed).

    Raises :class:`DeviceError` when the manifest's map and the golden register set disagree (a
    register without a value, a value without a register) or a value does not fit its register.
    """
    entry = manifest.normalizer_kernel(layer.normalizer)
    try:
        regmap = manifest.regmap(entry["name"])
        writes = regmap.writes(normalizer_values(layer, regmap))
    except ValueError as exc:
        raise DeviceError(f"{manifest.file}: kernels.{entry['name']}: {exc} (the golden {layer.normalizer} "
                          f"register set and this build's register map differ)") from None
    return entry, writes


def kernel_args(kernel: dict, values: dict[str, Any]) -> list[Any]:
    """The kernel's call arguments in manifest port order: ``None`` for an AXI4-Stream port (the
    host never sets those; pyxrt skips an argument it cannot convert, like ``nullptr`` in C++),
    else ``values[port name]`` (a buffer or a scalar)."""
    args = []
    for p in kernel["ports"]:
        if p["protocol"] == "axis":
            args.append(None)
        elif p["name"] in values:
            args.append(values[p["name"]])
        else:
            raise DeviceError(f"kernel {kernel['name']}: this host has no value for its {p['protocol']} "
                              f"argument {p['name']!r}")
    return args


__all__ = ["kernel_args", "normalizer_values", "register_writes"]

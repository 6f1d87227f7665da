"""Device backends behind one interface (:class:`vckattn.host.backends.base.Device`), each running an engine build
(a manifest with an ``engine`` section, stream contract ``hw/ENGINE.md``) one launch per layer:

* ``emu``  — the engine's functional model on the launch's streams (:mod:`.engine`);
* ``csim`` — the engine's HLS movers, AIE kernels and normalizer channels in g++ C-simulation (:mod:`.engine`);
* ``rtl``  — the engine's generated PL top in Verilator, the AIE kernels by the functional model (:mod:`.engine`);
* ``xrt``  — a VCK5000 through pyxrt and the graph shim (:mod:`.xrt`); with ``VCKATTN_EMULATION=csim`` the same host
  code on an emulated card (:mod:`.emulation`);
* ``pynq`` — a VCK190 through a PYNQ 4.0 Overlay (:mod:`.pynq`).
"""

from __future__ import annotations

import importlib
from typing import Any

BACKENDS: dict[str, str] = {
    "emu": "vckattn.host.backends.engine:EngineEmuDevice",
    "rtl": "vckattn.host.backends.engine:EngineRtlDevice",
    "csim": "vckattn.host.backends.engine:EngineCsimDevice",
    "xrt": "vckattn.host.backends.xrt:XrtDevice",
    "pynq": "vckattn.host.backends.pynq:PynqDevice",
}


def device_class(name: str) -> Any:
    """The Device class of backend ``name`` (imported on demand: xrt/pynq import nothing heavy until opened)."""
    try:
        target = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


#: backends that run an engine build's online-softmax layers (on a build with both normalizers): the functional model,
#: the generated PL top in Verilator and the engine's C-simulation (its PL top's online-softmax channel, Verilated);
#: also ``xrt`` on the emulated card (``VCKATTN_EMULATION=csim``, the same C-simulation). A card (``xrt``,
#: ``pynq``) is programmed for SwiftMax layers only.
ENGINE_ONLINE = ("emu", "rtl", "csim")


def check_backend(backend: str, manifest: Any, bundle: Any, layers: list[int]) -> None:
    """Refuse, before any work, a backend that cannot run these layers of the bundle on this engine build: a usage
    problem (status 2) naming what can (a build that lacks a layer's normalizer is ``check_bundle``'s refusal)."""
    from vckattn.golden.errors import UserError

    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if "sublayer" in manifest.data and backend not in ("emu", "csim", "rtl"):
        raise UserError(f"{manifest.name} is a sublayer build: it runs on emu, csim and rtl (its GEMM stages have no "
                        f"xclbin flow yet, so --backend {backend} cannot run it)")
    soft = [] if bundle is None else [int(e["index"]) for e in bundle.manifest["layers"]
                                      if int(e["index"]) in layers and e.get("swiftmax") is None]
    if soft and backend not in ENGINE_ONLINE and not (backend == "xrt" and _emulated()):
        raise UserError(f"the {backend} backend runs an engine's SwiftMax layers only; layer(s) {soft} use online "
                        f"softmax: use --backend {', '.join(ENGINE_ONLINE[:-1])} or {ENGINE_ONLINE[-1]} (or xrt on the "
                        "emulated card, VCKATTN_EMULATION=csim), or --layers with SwiftMax layers only")


def _emulated() -> bool:
    """Whether the xrt backend opens the emulated card (``VCKATTN_EMULATION`` set)."""
    from vckattn.host.backends.emulation import emulation_mode

    return emulation_mode() is not None


__all__ = ["BACKENDS", "ENGINE_ONLINE", "check_backend", "device_class"]

"""Device backends behind one interface (:class:`vckattn.host.backends.base.Device`).

* ``emu``  — the golden fixed-point model in software (:mod:`.emu`);
* ``rtl``  — the PL normalizer kernels in cocotb + Verilator, the AIE matmuls by the bit-exact
  AIE model (:mod:`.rtl`);
* ``csim`` — the Versal build's HLS and AIE C++ in g++ C-simulation (:mod:`.csim`);
* ``xrt``  — a VCK5000 through pyxrt (:mod:`.xrt`);
* ``pynq`` — a VCK190 through a PYNQ 4.0 Overlay (:mod:`.pynq`).
"""

from __future__ import annotations

import importlib
from typing import Any

BACKENDS: dict[str, str] = {
    "emu": "vckattn.host.backends.emu:EmuDevice",
    "rtl": "vckattn.host.backends.rtl:RtlDevice",
    "csim": "vckattn.host.backends.csim:CsimDevice",
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


__all__ = ["BACKENDS", "device_class"]

"""PL side of the performance model: resources and cycles of the normalizer, norm and sublayer kernels (modeled).

The full description: ``docs/internals/hw.md``, section ``hw/perf/pl.py``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from vckattn.hw.pl.timing import KERNELS, check_kernel

__all__ = ["DATA_FILE", "KERNELS", "SWIFTMAX_PRODUCTS", "load_data", "resources"]

#: The synthesis sweep and Verilator measurements (``python -m vckattn.sim.pl_perf``).
DATA_FILE: Path = Path(__file__).resolve().parent / "data" / "pl_kernels.json"

NORMALIZERS: tuple[str, ...] = ("swiftmax", "online_softmax")

#: Resource keys of :func:`resources` (``bram`` in RAMB36 equivalents; ``lutram`` is not in ``lut``).
RESOURCE_KEYS: tuple[str, ...] = ("lut", "ff", "dsp", "bram", "uram", "lutram")


@functools.lru_cache(maxsize=1)
def load_data() -> dict:
    """The parsed ``pl_kernels.json`` (cached)."""
    return json.loads(DATA_FILE.read_text())


#: How the SwiftMax lanes build their product ``sat · a_mult``: ``"auto"`` -- the lane's default (LUTs for 8-bit
#: scores, a DSP block above: :func:`vckattn.hw.pl.swiftmax_lane.lut_product_default`), ``"dsp"`` -- a DSP block
#: at every width (the sweep's ``dsp`` variant at 8 bits; wider scores use a DSP block by default).
SWIFTMAX_PRODUCTS: tuple[str, ...] = ("auto", "dsp")


def resources(kernel: str, lanes: int, score_bits: int = 32, products: str = "auto") -> dict[str, float]:
    """Modeled PL resources of ``kernel`` with ``lanes`` lanes (whole kernel incl. its AXI4-Lite registers).

    ``base + per_lane · lanes`` from the least-squares fit over Yosys syntheses at the lane counts in
    ``pl_kernels.json`` (lane counts outside that range are extrapolated linearly), clamped at 0.

    Args:
        kernel: One of :data:`KERNELS`.
        lanes: Elements per beat (>= 1).
        score_bits: Score input width of the normalizers (8, 16 or 32: the synthesized widths). The
            norm kernels take int8 activations whatever it is.
        products: SwiftMax only (:data:`SWIFTMAX_PRODUCTS`): ``"dsp"`` -- the build whose lanes multiply in
            a DSP block (the sweep's ``dsp`` variant where the default build multiplies in LUTs).

    Returns:
        ``{"lut", "ff", "dsp", "bram", "uram", "lutram"}``: LUT6 logic cells, flip-flops, DSP48E2
        (~DSP58), RAMB36 equivalents (36 Kb units), URAM288, LUTs used as memory/shift registers
        (not included in ``lut``). Floats (a fit); UltraScale+ cells as a proxy for the Versal PL.

    Raises:
        ValueError: Unknown kernel, ``lanes < 1``, or a normalizer score width that was not synthesized.
    """
    check_kernel(kernel, lanes)
    if products not in SWIFTMAX_PRODUCTS or (products != "auto" and kernel != "swiftmax"):
        raise ValueError(f"{kernel}: products must be 'auto'" + (" or 'dsp'" if kernel == "swiftmax" else ""))
    entry = load_data()["kernels"][kernel]
    widths = entry["widths"]
    if products == "dsp" and score_bits <= 8:  # the default 8-bit lane multiplies in LUTs: the dsp build's data
        widths = entry.get("variants", {}).get("dsp", {}).get("widths", {})
    key = str(score_bits) if kernel in NORMALIZERS else next(iter(widths))
    if key not in widths:
        raise ValueError(f"{kernel}: score_bits {score_bits} not synthesized; available: {', '.join(widths)}")
    fit = widths[key]["fit"]
    return {k: max(0.0, fit[k]["base"] + fit[k]["per_lane"] * lanes) for k in RESOURCE_KEYS}

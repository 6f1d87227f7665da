"""The PL part of the kernel registry: each kernel's Amaranth component, its build parameters and its
row/token buffer size, by the registry's name (:data:`vckattn.golden.kernels.KERNELS`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from amaranth.lib import wiring

from . import bhyt_approx, bhyt_exact, online_softmax, requant, residual, rmsnorm, rope, scale, swiftmax

__all__ = ["PL_KERNELS", "PLKernel", "buffer_bits", "build_component"]


@dataclass(frozen=True)
class PLKernel:
    """A registry kernel's gateware.

    Attributes:
        component: The Amaranth component class, built as ``component(lanes, **build)``.
        build: Build parameters besides ``lanes`` (e.g. ``max_d``), as the hw report builds it.
        buffer_bits: Row/token buffer bits at ``(lanes, **build)`` (``None``: no buffer).
    """

    component: type[wiring.Component]
    build: Mapping[str, int] = field(default_factory=dict)
    buffer_bits: Callable[..., int] | None = None

    @property
    def path(self) -> str:
        """``module:Class`` of the component (the name reports print)."""
        return f"{self.component.__module__}:{self.component.__qualname__}"


PL_KERNELS: dict[str, PLKernel] = {
    "swiftmax": PLKernel(swiftmax.SwiftMaxKernel, {}, swiftmax.buffer_bits),
    "online_softmax": PLKernel(online_softmax.OnlineSoftmaxKernel, {"max_keys": 1024}, online_softmax.buffer_bits),
    "bhyt_exact": PLKernel(bhyt_exact.BHyTExactKernel, {"max_d": 1024}, bhyt_exact.buffer_bits),
    "bhyt_approx": PLKernel(bhyt_approx.BHyTApproxKernel, {"max_d": 1024}, bhyt_approx.buffer_bits),
    "rmsnorm": PLKernel(rmsnorm.RMSNormKernel, {"max_d": 1024}, rmsnorm.buffer_bits),
    "scale": PLKernel(scale.ScaleKernel),
    "residual": PLKernel(residual.ResidualKernel, {"max_d": 1024}, residual.buffer_bits),
    "requant": PLKernel(requant.RequantKernel, {"max_d": 1024}, requant.buffer_bits),
    "rope": PLKernel(rope.RopeKernel, {"head_dim": 64, "max_pos": 256}, rope.buffer_bits),
}


def _pl(name: str) -> PLKernel:
    if name not in PL_KERNELS:
        raise ValueError(f"kernel {name} has no PL component")
    return PL_KERNELS[name]


def build_component(name: str, lanes: int, **params: int) -> wiring.Component:
    """The Amaranth component of kernel ``name`` with ``lanes`` lanes; ``params`` override the
    registry's build parameters (e.g. ``max_keys`` from a manifest)."""
    k = _pl(name)
    return k.component(lanes, **{**k.build, **params})  # type: ignore[call-arg]


def buffer_bits(name: str, lanes: int, **params: int) -> int:
    """Row/token buffer bits of kernel ``name`` at the same parameters (0 for a kernel without one)."""
    k = _pl(name)
    return 0 if k.buffer_bits is None else int(k.buffer_bits(lanes, **{**k.build, **params}))

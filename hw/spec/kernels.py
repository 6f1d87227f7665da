"""The kernel registry's hardware parts, resolved: :data:`vckattn.golden.kernels.KERNELS` names each
kernel's Amaranth component as an import path (golden imports nothing from hw); these functions load it."""

from __future__ import annotations

import importlib
from typing import Any

from vckattn.golden.extras import require
from vckattn.golden.kernels import KERNELS, KernelContract

__all__ = ["build_component", "buffer_bits", "resolve"]


def resolve(path: str) -> Any:
    """The object ``module:attribute`` names (a registry entry's golden, regmap, pl or host part)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _pl(name: str) -> KernelContract:
    c = KERNELS[name]
    if c.pl is None:
        raise ValueError(f"kernel {name} has no PL component")
    require(f"the PL kernel {name}", "amaranth")
    return c


def build_component(name: str, lanes: int, **params: int) -> Any:
    """The Amaranth component of kernel ``name`` with ``lanes`` lanes; ``params`` override the
    registry's build parameters (e.g. ``max_keys`` from a manifest)."""
    c = _pl(name)
    return resolve(c.pl)(lanes, **{**c.pl_kwargs, **params})  # type: ignore[arg-type]


def buffer_bits(name: str, lanes: int, **params: int) -> int:
    """Row/token buffer bits of kernel ``name`` (its module's ``buffer_bits``) at the same parameters."""
    c = _pl(name)
    module = importlib.import_module(c.pl.partition(":")[0])  # type: ignore[union-attr]
    return int(module.buffer_bits(lanes, **{**c.pl_kwargs, **params}))

"""The one reader of an ADF graph header (``aie/graph.h`` as :func:`.render.render_graph_h` writes it): every
statement the design-rule check (:mod:`.check`) and the graph simulation (:mod:`.graph_topology`) look at, as
written. Comments are ignored; each view interprets the statements its own way."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

__all__ = ["Connect", "GraphH", "read_graph_h"]


@dataclass(frozen=True)
class Connect:
    """One ``adf::connect<template>(src, dst)``: endpoints as written (``obj.port[i]``); ``src_obj`` / ``dst_obj``:
    the objects they name; ``kinds``: the template arguments, ``window`` for any window size (``window``,
    ``pktstream``, ``cascade``, ...)."""

    template: str
    src: str
    dst: str
    src_obj: str = field(init=False, repr=False, compare=False)
    dst_obj: str = field(init=False, repr=False, compare=False)
    kinds: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # read once: the check and the simulation look at them for every net
        object.__setattr__(self, "src_obj", self.src.split(".")[0])
        object.__setattr__(self, "dst_obj", self.dst.split(".")[0])
        object.__setattr__(self, "kinds", _kinds(self.template))


@functools.cache
def _kinds(template: str) -> tuple[str, ...]:
    return tuple("window" if "window" in a else a.strip().removeprefix("adf::")
                 for a in re.split(r",\s*(?=adf::)", template))


@dataclass
class GraphH:
    """The statements of a graph header.

    Attributes:
        kernels: kernel -> (function, template index or None), from ``adf::kernel::create``.
        tiles: kernel -> (column, row), from ``adf::location<adf::kernel>``.
        buffers: ``kernel.port`` -> the kernel whose tile it is pinned to, or an explicit (column, row).
        asyncs: ``(kernel, port)`` of the buffers a kernel acquires itself (``adf::async``).
        plios: PLIO -> (``in`` / ``out`` seen from the array, bits, PL clock in MHz or None).
        columns: PLIO -> interface column (``adf::shim``).
        packets: ``pktsplit`` / ``pktmerge`` -> (``pktsplit`` or ``pktmerge``, ways).
        connects: every ``adf::connect``, in order.
    """

    kernels: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    tiles: dict[str, tuple[int, int]] = field(default_factory=dict)
    buffers: dict[str, str | tuple[int, int]] = field(default_factory=dict)
    asyncs: set[tuple[str, str]] = field(default_factory=set)
    plios: dict[str, tuple[str, int, float | None]] = field(default_factory=dict)
    columns: dict[str, int] = field(default_factory=dict)
    packets: dict[str, tuple[str, int]] = field(default_factory=dict)
    connects: list[Connect] = field(default_factory=list)


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL = re.compile(r"(\w+)\s*=\s*adf::kernel::create\((\w+)(?:<(\d+)>)?\)\s*;")
_TILE = re.compile(r"adf::location<adf::kernel>\((\w+)\)\s*=\s*adf::tile\((\d+),\s*(\d+)\)\s*;")
_BUFFER = re.compile(r"adf::location<adf::buffer>\((\w+\.[\w\[\]]+)\)\s*=\s*"
                     r"(?:adf::location<adf::kernel>\((\w+)\)|adf::tile\((\d+),\s*(\d+)\))\s*;")
_ASYNC = re.compile(r"adf::async\((\w+)\.((?:in|out)\[\d+\])\)")
_PLIO = re.compile(r'(\w+)\s*=\s*adf::(input|output)_plio::create\("[^"]*",\s*adf::plio_(\d+)_bits'
                   r'(?:,\s*"[^"]*"(?:,\s*([\d.]+))?)?\)\s*;')
_SHIM = re.compile(r"adf::location<adf::PLIO>\((\w+)\)\s*=\s*adf::shim\((\d+)\)\s*;")
_PACKET = re.compile(r"(\w+)\s*=\s*adf::(pktsplit|pktmerge)<(\d+)>::create\(\)\s*;")
_CONNECT = re.compile(r"adf::connect<(.*?)>\(\s*([\w.\[\]]+),\s*([\w.\[\]]+)\s*\)\s*;")


def read_graph_h(text: str) -> GraphH:
    """The statements of the graph header ``text`` (one statement a line, as the generator writes them)."""
    g = GraphH()
    for line in _COMMENT.sub("", text).splitlines():
        s = line.strip()
        if not s:
            continue
        if "adf::async(" in s:
            g.asyncs.update(_ASYNC.findall(s))
        if s.startswith("adf::connect<"):
            if m := _CONNECT.match(s):
                g.connects.append(Connect(m[1], m[2], m[3]))
        elif s.startswith("adf::location<adf::kernel>"):
            if m := _TILE.match(s):
                g.tiles[m[1]] = (int(m[2]), int(m[3]))
        elif s.startswith("adf::location<adf::buffer>"):
            if m := _BUFFER.match(s):
                g.buffers[m[1]] = m[2] if m[2] else (int(m[3]), int(m[4]))
        elif s.startswith("adf::location<adf::PLIO>"):
            if m := _SHIM.match(s):
                g.columns[m[1]] = int(m[2])
        elif "::create(" in s:
            if m := _KERNEL.match(s):
                g.kernels[m[1]] = (m[2], int(m[3]) if m[3] else None)
            elif m := _PLIO.match(s):
                g.plios[m[1]] = ("in" if m[2] == "input" else "out", int(m[3]), float(m[4]) if m[4] else None)
            elif m := _PACKET.match(s):
                g.packets[m[1]] = (m[2], int(m[3]))
    return g

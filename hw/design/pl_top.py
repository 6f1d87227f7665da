"""The sublayer's PL top for a split of the performance model: :class:`vckattn.hw.pl.sublayer_top.SublayerTop`'s
parameters, each from the function the model costs it with (``hw/perf/sublayer.py``), and a launch's descriptor
runs, so that the generated top is the costed one.

What the top does not build yet is refused with :class:`TopError`, never built wrong: a decoder (its BHyT site A
path, X to U through the site units, and RoPE on the Q/K/V records are not joined), X not kept on chip (the
residual's X would come from DDR again), and a W_O output PLIO that merges several cascades' records (a residual
path reads one cascade's records in its order; a merged PLIO would need a record splitter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vckattn.hw.perf import banks, engine
from vckattn.hw.perf import sublayer as sl
from vckattn.hw.pl.sublayer_top import SublayerTop, TopParams
from vckattn.hw.spec.descriptors import descriptor_depths
from vckattn.hw.spec.qkv_buffer import Run

__all__ = ["TopError", "TopPlan", "top_params", "top_plan"]


class TopError(ValueError):
    """The split needs a PL top part that is not built (module docstring)."""


@dataclass(frozen=True)
class TopPlan:
    """The top's parameters and a launch's descriptor runs, one list a reader in the descriptor router's order."""

    params: TopParams
    runs: list[list[Run]]

    def top(self) -> SublayerTop:
        return SublayerTop(self.params)


def _refuse(s: sl.SublayerShape, sp: sl.SublayerSplit) -> None:
    if s.decoder:
        raise TopError("a decoder sublayer's PL top (BHyT site A's path and RoPE on the Q/K/V records) is not "
                       "generated yet")
    if not sp.x_on_chip:
        raise TopError("the PL top keeps X on chip for the residual add; this split does not")
    share = sl.plios(s, sp)["o"]["out_share"]
    if share != 1:
        raise TopError(f"the W_O output PLIOs merge {share} cascades' records; the PL top's residual paths read one "
                       "cascade's each")


def top_plan(s: sl.SublayerShape, sp: sl.SublayerSplit, bank_beats: int = banks.BANK_BEATS, ahead: int = 2,
             lanes: int = 4, max_d: int = 1024) -> TopPlan:
    """The PL top of split ``sp`` for shape ``s``: the buffers wired as :func:`~vckattn.hw.perf.sublayer.
    banked_buffers` wires them (banks of ``bank_beats``), the descriptor router's FIFOs ``ahead`` sequences deep
    (:func:`~vckattn.hw.spec.descriptors.descriptor_depths`), a w router output a w PLIO
    (:func:`~vckattn.hw.perf.sublayer.plios`), residual units of ``lanes`` lanes and ``max_d`` channels. Raises
    :class:`TopError` for what the top does not build."""
    _refuse(s, sp)
    runs = sl.launch_runs(s, sp, bank_beats)
    x_runs, qkv_runs, a_runs = runs["x"], runs["qkv"], runs["a"]
    xb = sl.x_buffers(s, sp, bank_beats)["x"]
    qb, ab = sl.qkv_buffer(s, sp, bank_beats), sl.a_buffer(s, sp, bank_beats)
    n_res = sl.residual_paths(s, sp)
    n_x = len(xb.readers) - n_res

    def banks_of(sets: Any) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(sorted(b)) for b in sets)

    io = sl.plios(s, sp)
    g = sl.attention_geometry(s, sp)
    params = TopParams(
        x_layout=sl.x_layout(s, sp, bank_beats), x_write_banks=banks_of(xb.writers),
        x_read_banks=banks_of(xb.readers[:n_x]), residual_banks=banks_of(xb.readers[n_x:]),
        qkv_layout=sl.qkv_layout(s, sp, bank_beats), qkv_write_banks=banks_of(qb.writers),
        qkv_read_banks=banks_of(qb.readers), qkv_rows=sp.qkv_tile[0], qkv_cols=sp.qkv_tile[1],
        qkv_bank_beats=bank_beats,
        a_layout=sl.a_layout(s, sp, bank_beats), a_write_banks=banks_of(ab.writers), a_read_banks=banks_of(ab.readers),
        heads=s.heads, head_dim=s.head_dim, q_rows=sp.q_rows, max_groups=s.batch * s.heads,
        o_rows=sp.o_tile[0], o_cols=sp.o_tile[1],
        desc_depths=tuple(descriptor_depths([*x_runs, *qkv_runs, *a_runs], ahead)),
        w_streams=io["qkv"]["w"] + io["o"]["w"], lanes=lanes, max_d=max_d)
    assert len(engine.deal(g.groups, sp.n_att)) * 3 == len(qkv_runs)
    return TopPlan(params, [*x_runs, *qkv_runs, *a_runs])


def top_params(s: sl.SublayerShape, sp: sl.SublayerSplit, bank_beats: int = banks.BANK_BEATS) -> TopParams:
    """:func:`top_plan`'s parameters."""
    return top_plan(s, sp, bank_beats).params

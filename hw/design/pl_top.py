"""The sublayer's PL top for a split of the performance model: :class:`vckattn.hw.pl.sublayer_top.SublayerTop`'s
parameters, each from the function the model costs it with (``hw/perf/sublayer.py``), a launch's descriptor
runs, so that the generated top is the costed one, and the weight mover's list for a launch (the weight image the
host loads once per model, a ROUTE packet a weight buffer load, sequence by sequence).

What the top does not build is refused with :class:`TopError`, never built wrong: X not kept on chip (the
residual's X would come from DDR again), a W_O output PLIO that merges several cascades' records (a residual
path reads one cascade's records in its order; a merged PLIO would need a record splitter), and a decoder whose
Q/K/V records do not hold whole head rows (RoPE rotates a head row's halves) or whose sequence is not a power of
two (the RoPE table's positions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vckattn.hw.perf import banks, engine
from vckattn.hw.perf import sublayer as sl
from vckattn.hw.pl.sublayer_top import SublayerTop, TopParams
from vckattn.hw.spec import streams
from vckattn.hw.spec.descriptors import descriptor_depths
from vckattn.hw.spec.qkv_buffer import Run, reader_headers

__all__ = ["TopError", "TopPlan", "WeightLoad", "launch_headers", "qkv_records", "r_writer_args", "register_writes",
           "top_params", "top_plan", "top_problem", "weight_bytes", "weight_image", "weight_list", "weight_loads",
           "x_list"]


class TopError(ValueError):
    """The split needs a PL top part that is not built (module docstring)."""


@dataclass(frozen=True)
class TopPlan:
    """The top's parameters and a launch's descriptor runs, one list a reader in the descriptor router's order."""

    params: TopParams
    runs: list[list[Run]]

    def top(self) -> SublayerTop:
        return SublayerTop(self.params)


def top_problem(s: sl.SublayerShape, sp: sl.SublayerSplit) -> str | None:
    """Why the PL top of split ``sp`` is not built (module docstring), or None."""
    if s.decoder:
        if sp.qkv_tile[1] % s.head_dim or s.seq & (s.seq - 1):
            return (f"a decoder's RoPE units rotate whole head rows of {s.head_dim} at positions of a power-of-two "
                    f"table: records of {sp.qkv_tile[1]} channels over S = {s.seq} are not built")
        try:
            sl.rope_lanes(s, sp)
        except ValueError as e:
            return str(e)
    if sp.normalizer != "swiftmax":
        return "the generator writes a sublayer's score channels with SwiftMax lanes only"
    if not sp.x_on_chip:
        return "the PL top keeps X on chip for the residual add; this split does not"
    share = sl.plios(s, sp)["o"]["out_share"]
    if share != 1:
        return (f"the W_O output PLIOs merge {share} cascades' records; the PL top's residual paths read one "
                "cascade's each")
    return None


def _refuse(s: sl.SublayerShape, sp: sl.SublayerSplit) -> None:
    problem = top_problem(s, sp)
    if problem:
        raise TopError(problem)


def top_plan(s: sl.SublayerShape, sp: sl.SublayerSplit, bank_beats: int = banks.BANK_BEATS, ahead: int = 2,
             lanes: int = 4, max_d: int = 1024) -> TopPlan:
    """The PL top of split ``sp`` for shape ``s``: the buffers wired as :func:`~vckattn.hw.perf.sublayer.
    banked_buffers` wires them (banks of ``bank_beats``), the descriptor router's FIFOs ``ahead`` sequences deep
    (:func:`~vckattn.hw.spec.descriptors.descriptor_depths`), a w router output a w PLIO
    (:func:`~vckattn.hw.perf.sublayer.plios`), residual units of ``lanes`` lanes and ``max_d`` channels. Raises
    :class:`TopError` for what the top does not build."""
    _refuse(s, sp)
    if ahead + 1 >= sl.SEQUENCE_SLOTS:
        raise TopError(f"descriptor FIFOs {ahead} sequences deep would let a reader run {ahead + 1} sequences ahead of "
                       f"another: the Q/K/V buffer has {sl.SEQUENCE_SLOTS} slots")
    runs = sl.launch_runs(s, sp, bank_beats)  # per buffer, its readers in the descriptor router's order
    bufs = sl.x_buffers(s, sp, bank_beats)
    xb, ub = bufs["x"], bufs.get("u")
    qb, ab = sl.qkv_buffer(s, sp, bank_beats), sl.a_buffer(s, sp, bank_beats)
    # the X buffer's readers before its residual readers: a decoder's site readers, an encoder's x readers
    first = sl.site_units(s, sp) if s.decoder else len(xb.readers) - sl.residual_paths(s, sp)

    def banks_of(sets: Any) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(sorted(b)) for b in sets)

    io = sl.plios(s, sp)
    g = sl.attention_geometry(s, sp)
    x_parts = {"residual_banks": banks_of(xb.readers[first:])}
    if s.decoder:  # X read by the site units and the residual paths, U by the x readers
        x_parts |= {"x_read_banks": banks_of(ub.readers), "site_banks": banks_of(xb.readers[:first]),
                    "u_layout": sl.x_layout(s, sp, bank_beats, min(s.batch, sl.SEQUENCE_SLOTS)),
                    "u_write_banks": banks_of(ub.writers), "rope_rotated": (s.heads + s.kv_heads) * s.head_dim,
                    "rope_lanes": sl.rope_lanes(s, sp), "rope_max_seq": s.seq}
    else:
        x_parts["x_read_banks"] = banks_of(xb.readers[:first])
    every = [reader for rr in runs.values() for reader in rr]
    params = TopParams(
        x_layout=sl.x_layout(s, sp, bank_beats), x_write_banks=banks_of(xb.writers),
        qkv_layout=sl.qkv_layout(s, sp, bank_beats), qkv_write_banks=banks_of(qb.writers),
        qkv_read_banks=banks_of(qb.readers), qkv_rows=sp.qkv_tile[0], qkv_cols=sp.qkv_tile[1],
        qkv_bank_beats=bank_beats,
        a_layout=sl.a_layout(s, sp, bank_beats), a_write_banks=banks_of(ab.writers), a_read_banks=banks_of(ab.readers),
        heads=s.heads, head_dim=s.head_dim, q_rows=sp.q_rows, max_groups=s.batch * s.heads,
        o_rows=sp.o_tile[0], o_cols=sp.o_tile[1],
        desc_depths=tuple(descriptor_depths(every, ahead)),
        w_streams=io["qkv"]["w"] + io["o"]["w"], lanes=lanes, max_d=max_d, **x_parts)
    assert len(engine.deal(g.groups, sp.n_att)) * 3 == len(runs["qkv"])
    parts = [runs["x"][:first], runs["x"][first:], *([runs["u"]] if s.decoder else []), runs["qkv"], runs["a"]]
    assert list(params.readers.values()) == [len(v) for v in parts]
    return TopPlan(params, every)


def qkv_records(s: sl.SublayerShape, sp: sl.SublayerSplit) -> list[list[list[list[int]]]]:
    """What each Q/K/V output PLIO carries in a launch, as the model deals it: per PLIO (a re-tiler of the Q/K/V
    path), per cascade merged onto it, the records that cascade sends, in order, ``[sequence, row tile,
    col_block]``."""
    rows, cols = sp.qkv_tile[:2]
    merge = sl.plios(s, sp)["qkv"]["out_share"]
    dealt = sl.deal_projection(s.qkv_cols // cols, s.batch, sp.n_qkv)
    return [[[[b, r, blk] for blk, b in dealt[c] for r in range(s.seq // rows)] for c in grp]
            for grp in sl.share_groups(sp.n_qkv, merge) if any(dealt[c] for c in grp)]


def launch_headers(s: sl.SublayerShape, sp: sl.SublayerSplit, plan: TopPlan, valid_keys: list[int], *,
                   score_shift: int = 0, rq_mult: int = 0, rq_shift: int = 0) -> list[list[bytes]]:
    """The header beat of every run of ``plan`` (:attr:`TopPlan.runs`, a reader a list in the descriptor router's
    order), 16 bytes each, what the readers send before their runs:

    * an x reader's (of X, a decoder's U) and an a reader's: XTILE, ``packet_id`` and ``slice`` its K-slice ``j``,
      ``rows`` the tile's (the buffers hold ``s.seq`` tokens a sequence: every tile whole), ``tag`` the launch's row
      tile ``b · T + t`` (the weight loads' ``first_tile`` .. counts them: :func:`weight_loads`);
    * a site reader's: SITE (its sequence, first token and K-slice: :mod:`vckattn.hw.pl.site_unit`);
    * a residual reader's: zeros (its row unit drops it);
    * the q, k and v readers': the attention pipelines' TILE and SLICE commands
      (:func:`vckattn.hw.spec.qkv_buffer.reader_headers`: ``valid_keys`` a sequence, the causal mask of a decoder,
      ``score_shift``, the output requantization ``rq_mult``, ``rq_shift``);
    * a quiet release's: zeros (never sent)."""
    if len(valid_keys) != s.batch:
        raise ValueError(f"valid keys of {s.batch} sequences, got {len(valid_keys)}")
    qkv_layout = sl.qkv_layout(s, sp, plan.params.qkv_bank_beats)
    zero = bytes(streams.BEAT_BYTES)
    n = plan.params.readers
    before_qkv = sum(c for kind, c in n.items() if kind not in ("qkv", "a"))  # the X (and U) buffers' readers
    out: list[list[bytes]] = []
    for i, runs in enumerate(plan.runs):
        if {r.kind for r in runs} & {"q", "k", "v"}:
            out += reader_headers(qkv_layout, [runs], valid_keys, causal=s.decoder, score_shift=score_shift,
                                  rq_mult=rq_mult, rq_shift=rq_shift)
            continue
        rows = sp.qkv_tile[0] if i < before_qkv else sp.o_tile[0]  # an x reader's tiles, or an a reader's
        heads = []
        for r in runs:
            if r.quiet or r.kind == "r":
                heads.append(zero)
            elif r.kind == "s":
                heads.append(streams.encode("site", seq=r.b, token=r.index, slice=r.head).tobytes())
            else:
                heads.append(streams.encode("xtile", packet_id=r.head, op=streams.OP_X_TILE, slice=r.head, rows=rows,
                                            tag=r.b * (s.seq // rows) + r.index).tobytes())
        out.append(heads)
    return out


def x_list(s: sl.SublayerShape, sp: sl.SublayerSplit, x: Any) -> tuple[Any, Any]:
    """The X mover's command list ``(batch, 32)`` uint8 and source (uint8) for a launch's X ``(batch, n, d_model)``
    int8 (``n <= s.seq`` tokens, zero padded to ``s.seq``), for the list mover (``hw/hls/mm2s_list.cpp``): a command
    a sequence, its header the RESULT beat the X writer takes (``tile_id`` the sequence, ``hw/pl/x_writer.py``), its
    payload the sequence's X as the X buffer holds it, K-slice by K-slice, row tile by row tile
    (:func:`~vckattn.golden.gemm_proj.pack_x` of each block)."""
    import numpy as np

    from vckattn.golden.gemm_proj import pack_x
    from vckattn.hw.spec.descriptors import mover_command

    x = np.asarray(x)
    if x.ndim != 3 or x.shape[0] != s.batch or x.shape[1] > s.seq or x.shape[2] != s.d_model:
        raise ValueError(f"X of {s.batch} sequences of up to {s.seq} tokens x {s.d_model}, got {x.shape}")
    lay = sl.x_layout(s, sp)
    xp = np.zeros((s.batch, s.seq, s.d_model), np.int8)
    xp[:, :x.shape[1]] = x
    cmds, parts, at = [], [], 0
    for b in range(s.batch):
        blocks = [pack_x(xp[b, t * lay.rows:(t + 1) * lay.rows, sum(lay.slices[:j]):sum(lay.slices[:j + 1])])
                  for j in range(len(lay.slices)) for t in range(s.seq // lay.rows)]
        payload = b"".join(blk.astype(np.int8).tobytes() for blk in blocks)
        head = streams.encode("result", tile_id=b, rows=s.seq, d=s.d_model)
        cmds.append(mover_command(head, at, len(payload) // streams.BEAT_BYTES))
        parts.append(payload)
        at += len(payload)
    return np.stack(cmds), np.frombuffer(b"".join(parts), np.uint8)


def register_writes(p: TopParams, d_model: int, residual: Any, rope: tuple[Any, Any] | None = None,
                    site: Any = None) -> list[tuple[int, int]]:
    """The AXI4-Lite writes that program the top's units for a layer, ``(byte offset, 32-bit word)`` in window order
    (:func:`~vckattn.hw.pl.sublayer_top.top_regmaps`): every residual unit its ``d_model`` channels of ``residual``
    (:class:`~vckattn.golden.sublayer.ResidualRegisters`: :func:`~vckattn.golden.sublayer.residual_register_values`),
    a decoder's RoPE units the int16 tables ``rope`` ``(c, s)`` of ``(positions, head_dim)``
    (:func:`~vckattn.golden.rope_int.rope_table_banks`; ``pos_base`` 0), its site units ``site``
    (:class:`~vckattn.golden.bhyt_int.BHyTSiteRegisters`: its registers and γ). A value that does not fit its
    register is a ValueError naming it (:meth:`~vckattn.golden.regmap.RegisterMap.writes`)."""
    from vckattn.golden.bhyt_int import bhyt_register_values, gamma_values
    from vckattn.golden.rope_int import rope_table_banks
    from vckattn.golden.sublayer import residual_register_values
    from vckattn.hw.pl.sublayer_top import top_regmaps

    wins, sub = top_regmaps(p)
    if p.decoder and (rope is None or site is None):
        raise ValueError("a decoder's top takes its RoPE tables and its site A constants")
    out: list[tuple[int, int]] = []
    for w, (name, rm) in enumerate(wins):
        kind = name.rstrip("0123456789")
        if kind == "status":
            continue
        if kind == "r":
            values = residual_register_values(residual, d_model, p.max_d)
        elif kind == "rope":
            values = {**rope_table_banks(rope[0], rope[1], p.rope_lanes, p.head_dim, p.rope_max_seq),
                      "pos_base": 0}  # a record's rows at their own positions (hw/pl/rope_records.py)
        else:
            values = {**bhyt_register_values(site), "gamma": gamma_values(site)}
        out += [((w << sub) + wr.offset, wr.word) for wr in rm.writes(values)]
    return out


def r_writer_args(s: sl.SublayerShape, sp: sl.SublayerSplit) -> list[dict[str, int]]:
    """Each R writer's scalar arguments for a launch (``hw/hls/s2mm_records.cpp``), one a residual path in the top's
    order: its cascade's records (units × row tiles), their ``tile_rows`` × ``cols``, the launch's ``row_tiles``
    (a record's tile id is its row tile of the launch), R's ``d_model`` channels and ``n_tokens`` (``batch · seq``:
    the host keeps each sequence's first tokens). Every writer writes into the one R buffer, its records' rows and
    channels."""
    rows, cols = sp.o_tile[:2]
    tiles = s.seq // rows
    units = [u for u in sl.deal_projection(s.d_model // cols, s.batch, sp.n_o) if u]
    return [{"n_records": len(u) * tiles, "tile_rows": rows, "cols": cols, "row_tiles": s.batch * tiles,
             "d_model": s.d_model, "n_tokens": s.batch * s.seq} for u in units]


def top_params(s: sl.SublayerShape, sp: sl.SublayerSplit, bank_beats: int = banks.BANK_BEATS) -> TopParams:
    """:func:`top_plan`'s parameters."""
    return top_plan(s, sp, bank_beats).params


# ---------------------------------------------------------------------------------------------- the weight mover


@dataclass(frozen=True)
class WeightLoad:
    """One weight buffer load of a projection kernel: ``stage`` (``qkv`` or ``o``), its ``cascade`` (among the
    stage's cascades with work, :func:`vckattn.hw.design.gemm_graph.stages_of_split`), the w router output
    ``stream`` (the Q/K/V stage's w PLIOs first), the w PLIO's packet id ``packet`` (the cascade's place in its w
    group · kernels + ``slice``), K-slice ``slice``, output block ``col_block``, and the X row tiles that use it
    (``first_tile`` .. ``+ tiles``: the launch's row tiles, the x readers' XTILE tags); ``b`` the first sequence
    it serves."""

    stage: str
    cascade: int
    stream: int
    packet: int
    slice: int
    col_block: int
    first_tile: int
    tiles: int
    b: int


def weight_loads(s: sl.SublayerShape, sp: sl.SublayerSplit) -> list[WeightLoad]:
    """Every weight buffer load of a launch of ``s.batch`` sequences, in the order the weight mover sends them:
    sequence by sequence (a load where its first sequence comes), the Q/K/V stage's before the W_O stage's, cascade
    by cascade, K-slice by K-slice. A cascade loads a block whenever its unit's block differs from the previous
    unit's (:func:`vckattn.hw.perf.sublayer.weight_loads`); the load serves its run of units' row tiles.

    Why the w router cannot deadlock on this order (it holds its input while an output's FIFO is full): a load of
    sequence ``b`` waits only for its kernel to release a buffer, that is for tiles of sequences up to ``b``, whose
    loads and descriptors have all gone before it."""
    out: list[WeightLoad] = []
    stream0 = 0
    for name, tile, out_cols, bits in (("qkv", sp.qkv_tile, s.qkv_cols, 8), ("o", sp.o_tile, s.d_model, 32)):
        p = sl.gemm_params(tile, s.d_model, bits)
        dealt = [u for u in sl.deal_projection(out_cols // tile[1], s.batch, sp.n_qkv if name == "qkv" else sp.n_o)
                 if u]
        groups = sl.share_groups(len(dealt), sp.w_share)
        per_seq = s.seq // tile[0]
        for gi, grp in enumerate(groups):
            for place, c in enumerate(grp):
                units, i = dealt[c], 0
                while i < len(units):
                    blk, b = units[i]
                    n = 1
                    while i + n < len(units) and units[i + n][0] == blk:
                        if units[i + n][1] != units[i + n - 1][1] + 1:
                            raise TopError(f"{name} cascade {c}: a block's sequences not consecutive")
                        n += 1
                    for j in range(p.kernels):
                        out.append(WeightLoad(name, c, stream0 + gi, place * p.kernels + j, j, blk, b * per_seq,
                                              n * per_seq, b))
                    i += n
        stream0 += len(groups)
    stage = {"qkv": 0, "o": 1}
    return sorted(out, key=lambda w: (w.b, stage[w.stage], w.cascade, w.slice))


def weight_image(s: sl.SublayerShape, sp: sl.SublayerSplit) -> dict[tuple[str, int, int], tuple[int, int]]:
    """Where each weight buffer's payload (after its WSLICE header: golden's packed weights, and the bias, the
    requantization multipliers and shifts where the kernel takes them, ``hw/spec/gemm.py``) lies in the weight
    image the host loads into card memory once per model: ``(stage, col_block, slice) -> (byte offset, beats)``,
    the Q/K/V stage's blocks first, each block's K-slices in order."""
    from vckattn.hw.spec.streams import BEAT_BYTES

    out, at = {}, 0
    for name, tile, out_cols, bits in (("qkv", sp.qkv_tile, s.qkv_cols, 8), ("o", sp.o_tile, s.d_model, 32)):
        p = sl.gemm_params(tile, s.d_model, bits)
        for blk in range(out_cols // tile[1]):
            for j in range(p.kernels):
                beats = (p.w_buffer_bytes(j) - BEAT_BYTES) // BEAT_BYTES
                out[(name, blk, j)] = (at, beats)
                at += beats * BEAT_BYTES
    return out


def weight_bytes(s: sl.SublayerShape, sp: sl.SublayerSplit, qkv: tuple[Any, Any, Any], o: tuple[Any, Any]) -> Any:
    """The weight image's bytes (uint8, :func:`weight_image`'s layout) for a layer's projections: ``qkv`` the fused
    Q/K/V projection's ``(w, bias, rq)`` (``w`` ``(qkv_cols, d_model)`` int8, ``bias`` int32 a channel, ``rq`` its
    per-channel :class:`~vckattn.golden.requant.RequantRegisters`), ``o`` W_O's ``(w, bias)`` (``(d_model,
    d_model)``, int32 Y out). Each buffer's payload is :meth:`~vckattn.hw.spec.gemm.GemmParams.w_payload` of its
    block and K-slice: what the GEMM kernels take (the requantization folded by
    :func:`~vckattn.golden.gemm_proj.fold_requant`, the biases checked by ``check_accumulator_range``)."""
    import numpy as np

    from vckattn.golden.gemm_proj import GROUP, check_accumulator_range, fold_requant
    from vckattn.hw.spec.streams import BEAT_BYTES

    image = weight_image(s, sp)
    buf = np.zeros(max(off + BEAT_BYTES * n for off, n in image.values()), np.uint8)
    for (name, tile, out_cols, bits), (w, bias, rq) in zip(
            (("qkv", sp.qkv_tile, s.qkv_cols, 8), ("o", sp.o_tile, s.d_model, 32)), (qkv, (*o, None)), strict=True):
        p = sl.gemm_params(tile, s.d_model, bits)
        w, bias = np.asarray(w), np.asarray(bias, np.int64).reshape(-1)
        if w.shape != (out_cols, s.d_model) or bias.shape != (out_cols,):
            raise ValueError(f"{name}: weights ({out_cols}, {s.d_model}) and {out_cols} biases, got {w.shape} and "
                             f"{bias.shape}")
        check_accumulator_range(bias, p.k, out_cols)
        mult, shift = fold_requant(rq, out_cols) if bits == 8 else (None, None)
        for blk in range(out_cols // p.cols):
            ch, g = slice(blk * p.cols, (blk + 1) * p.cols), slice(blk * p.cols // GROUP, (blk + 1) * p.cols // GROUP)
            for j in range(p.kernels):
                ks = slice(sum(p.slices[:j]), sum(p.slices[:j + 1]))
                payload = p.w_payload(j, w[ch, ks], bias[ch], None if mult is None else mult[ch],
                                      None if shift is None else shift[g])
                off, _ = image[(name, blk, j)]
                buf[off:off + len(payload)] = np.frombuffer(payload, np.uint8)
    return buf


def weight_list(s: sl.SublayerShape, sp: sl.SublayerSplit) -> list[tuple[WeightLoad, Any]]:
    """The weight mover's command list for a launch (``hw/hls/mm2s_list.cpp``, source: :func:`weight_image`): per
    load of :func:`weight_loads`, a ROUTE beat to its w stream with ``more`` (no TLAST: the packet goes on), then
    its WSLICE header with the buffer's payload from the image. Returns (load, its two commands ``(2, 32)``
    uint8)."""
    import numpy as np

    from vckattn.hw.spec import streams
    from vckattn.hw.spec.descriptors import mover_command

    image = weight_image(s, sp)
    out = []
    for w in weight_loads(s, sp):
        route = streams.encode("route", dest=w.stream, op=streams.OP_ROUTE)
        head = streams.encode("wslice", packet_id=w.packet, op=streams.OP_LOAD_W, slice=w.slice, tiles=w.tiles,
                              first_tile=w.first_tile, col_block=w.col_block)
        offset, beats = image[(w.stage, w.col_block, w.slice)]
        out.append((w, np.stack([mover_command(route, 0, 0, more=True), mover_command(head, offset, beats)])))
    return out

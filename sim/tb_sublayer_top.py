"""cocotb 2.x testbench for :class:`vckattn.hw.pl.sublayer_top.SublayerTop` (run by
``tests/hw/pl/test_sublayer_top.py``): a launch through a sublayer's PL top, an encoder's or a decoder's, the AIE
graph's side played by the testbench.

The plan comes from the file ``VCKATTN_TB_SUBLAYER_TOP`` names (JSON, made by the test from the performance model's
split, ``hw/design/pl_top.py``): ``batch``, ``heads``, ``head_dim``, ``q_rows``; the three layouts (``x``, ``qkv``,
``a``; a decoder's ``u``); ``qkv_writers`` (per re-tiler, its cascades' records ``[sequence, row tile, col_block]``
in their order), ``a_writers`` (per pipeline its groups ``b · heads + h``), ``o_units`` (per W_O cascade its (block,
sequence) units); ``readers`` (how many of each kind), ``runs`` (every reader's runs, in the descriptor router's
order) and ``headers`` (the header beat of each run, ``hw/design/pl_top.py: launch_headers``); ``o_rows``,
``o_cols``, ``w_streams``, ``sub_width`` (the register windows' address bits), ``buffers`` (each buffer's name and
slots), ``windows`` (the register windows' names); a decoder's ``rope`` (``rotated``, ``lanes``, ``max_seq``).

The testbench programs the units through the top's one AXI4-Lite port with the host's writes (``register_writes``,
``hw/design/pl_top.py``) of the test's random constants (``residual``: per-channel ``rq_y`` and ``rq_x``; a decoder's
``rope_tables`` of random angles and ``site``, a typical BHyT site A), reads the status window's ID, then sends, all
at once and each with random pauses: the X mover's stream (``x_stream``: the host's X list, ``x_list``, of the test's
X ``x_data``, through the list mover in C-simulation) to the X input; the descriptor mover's (``desc_stream``: every
reader's descriptors with their ``headers``, routed, sequence by sequence, through the list mover) to the descriptor
input; random Q/K/V records on the Q/K/V inputs (each cascade's in its order, a PLIO's cascades interleaved); random
A records of every pipeline's groups; random W_O records (int32) of every W_O cascade's units, row tile by row tile;
the weight mover's stream for the launch's weight list (``weights``: per load its w stream and its two list mover
commands, ``hw/design/pl_top.py: weight_list``) on a random weight image of ``image_bytes``. Every output must send
exactly what golden gives: the x readers golden's ``pack_x`` of X (a decoder's: of U, golden's ``bhyt_site_int`` of X
with each token's ``Σ x²``, which its site units wrote from their site readers' runs of X, each run's SITE header
naming its tokens), the Q/K/V readers golden's packed Q tiles and key slices (a decoder's Q and K rotated by golden's
``rope_int`` at their tokens' positions), the A readers ``pack_x`` of A, each w output its loads' WSLICE header and
block in order, and each R output, for each of its cascade's records, the header with ``elem_bits`` 8 and golden's
``residual_add_int`` of the record's Y and the X the X mover sent (the rows the top's residual readers take from the
X buffer). Every slot ends empty and no error flag is set (the status registers, read through the register port).
"""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles, Combine
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamSink, AxiStreamSource

from vckattn.golden.bhyt_int import BHyTSiteRegisters, bhyt_site_int, sum_of_squares
from vckattn.golden.gemm_proj import pack_x
from vckattn.golden.requant import RequantRegisters
from vckattn.golden.rope_int import rope_int
from vckattn.golden.sublayer import (
    SUBLAYER_TOP_ID,
    ResidualRegisters,
    residual_add_int,
    residual_regmap,
    sublayer_top_regmap,
)
from vckattn.hw.spec import streams
from vckattn.hw.spec.qkv_buffer import QkvLayout, Run
from vckattn.hw.spec.slice_buffer import SliceLayout
from vckattn.sim.kernel_tb import start
from vckattn.sim.path_tb import BEAT, frame, interleave, paused_sink, paused_source
from vckattn.sim.tb_residual import random_y
from vckattn.sim.tb_retiler import expected_image


def _beats(raw: bytes) -> list[int]:
    return [int.from_bytes(raw[i:i + BEAT], "little") for i in range(0, len(raw), BEAT)]


def _slice_layout(d: dict) -> SliceLayout:
    return SliceLayout(**{**d, "slices": tuple(d["slices"])})


@cocotb.test(timeout_time=2000, timeout_unit="ms")
async def test_a_launch_through_the_top(dut: SimHandleBase) -> None:
    plan = json.loads(Path(os.environ["VCKATTN_TB_SUBLAYER_TOP"]).read_text())
    batch, heads, hd, q_rows = plan["batch"], plan["heads"], plan["head_dim"], plan["q_rows"]
    xl, al, ql = _slice_layout(plan["x"]), _slice_layout(plan["a"]), QkvLayout(**plan["qkv"])
    n = plan["readers"]
    runs = [[Run(**r) for r in rr] for rr in plan["runs"]]
    rows, cols, sub = plan["o_rows"], plan["o_cols"], plan["sub_width"]
    d_model = heads * hd
    await start(dut)
    rnd = random.Random(cocotb.RANDOM_SEED)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)

    def source(name: str) -> AxiStreamSource:
        return paused_source(dut, name, rnd)

    def sink(name: str) -> AxiStreamSink:
        return paused_sink(dut, name, rnd)

    # ---- registers: every residual unit programmed through its window, the status window's ID read
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    for ch in (axil.write_if, axil.read_if):
        ch.log.setLevel(logging.WARNING)
    st = sublayer_top_regmap(n["residual"], [tuple(b) for b in plan["buffers"]])
    assert int.from_bytes(await axil.read(st.offset("ID"), 4), "little") == SUBLAYER_TOP_ID
    window = {name: w for w, name in enumerate(plan["windows"])}
    for offset, word in plan["register_writes"]:  # the host's writes (hw/design/pl_top.py: register_writes)
        await axil.write_dword(offset, word)
    rm = residual_regmap(4, plan["max_d"])
    assert int.from_bytes(await axil.read(window[f"r{n['residual'] - 1}"] << sub, 4), "little") == rm.ident
    res = plan["residual"]
    y_mult, y_shift = np.asarray(res["y_mult"], np.int64), np.asarray(res["y_shift"], np.int64)
    x_mult, x_shift = res["x_mult"], res["x_shift"]
    decoder = "site" in n
    if decoder:  # the constants the RoPE and site units were programmed with
        rope = plan["rope"]
        cos, sin = (np.asarray(t, np.int16) for t in plan["rope_tables"])
        site = BHyTSiteRegisters(**{**plan["site"], "gamma": np.asarray(plan["site"]["gamma"], np.int64)})

    # ---- the launch's data: X, Q/K/V, A, Y, weights
    x = np.asarray(plan["x_data"], np.int8)  # the launch's X, as the X mover's list carries it
    qkv = rng.integers(-128, 128, size=(batch, ql.max_seq, ql.qkv_cols)).astype(np.int8)
    a = rng.integers(-128, 128, size=(batch, al.max_seq, d_model)).astype(np.int8)
    o_units = [[tuple(u) for u in us] for us in plan["o_units"]]
    tiles_o = xl.max_seq // rows
    y = {(blk, b, t): random_y(rng, rows * cols).reshape(rows, cols)
         for us in o_units for blk, b in us for t in range(tiles_o)}

    x_src = source("s_axis_x")
    desc_src = source("s_axis_desc")
    w_src = source("s_axis_w")
    qkv_src = [source(f"s_axis_qkv{i}") for i in range(len(plan["qkv_writers"]))]
    a_src = [source(f"s_axis_a{p}") for p in range(len(plan["a_writers"]))]
    y_src = [source(f"s_axis_y{i}") for i in range(n["residual"])]
    xr = [sink(f"m_axis_xr{r}") for r in range(n["x"])]
    qr = [sink(f"m_axis_qkv{r}") for r in range(n["qkv"])]
    ar = [sink(f"m_axis_ax{r}") for r in range(n["a"])]
    rr = [sink(f"m_axis_r{i}") for i in range(n["residual"])]
    wr = [sink(f"m_axis_w{i}") for i in range(plan["w_streams"])]

    for packet in plan["x_stream"]:  # the X mover's and the descriptor mover's streams for the host's lists
        await x_src.send(frame(b"".join(bytes.fromhex(beat) for beat in packet)))
    headers = [[bytes.fromhex(h) for h in hh] for hh in plan["headers"]]
    for packet in plan["desc_stream"]:
        await desc_src.send(frame(b"".join(bytes.fromhex(beat) for beat in packet)))

    tiles_q = ql.max_seq // plan["qkv_rows"]
    qrows, qcols = plan["qkv_rows"], plan["qkv_cols"]
    for i, cascades in enumerate(plan["qkv_writers"]):  # a PLIO's cascades interleaved, within the slots
        for b, r, cb in interleave(cascades, ql.slots, rnd):
            head = streams.encode("gresult", tile_id=b * tiles_q + r, rows=qrows, col_block=cb, elem_bits=8,
                                  cols=qcols).tobytes()
            await qkv_src[i].send(frame(head + qkv[b, r * qrows:(r + 1) * qrows, cb * qcols:(cb + 1) * qcols]
                                        .tobytes()))

    tiles_a = al.max_seq // q_rows
    for p, groups in enumerate(plan["a_writers"]):
        for g in groups:
            b, h = divmod(g, heads)
            for r in range(tiles_a):
                head = streams.encode("result", tile_id=g * tiles_a + r, rows=q_rows, d=hd).tobytes()
                await a_src[p].send(frame(head + a[b, r * q_rows:(r + 1) * q_rows, h * hd:(h + 1) * hd].tobytes()))

    r_want: list[list[list[int]]] = []
    for i, us in enumerate(o_units):
        want = []
        for blk, b in us:
            ch = slice(blk * cols, (blk + 1) * cols)
            rq = ResidualRegisters(RequantRegisters(y_mult[ch].astype(np.int64), y_shift[ch].astype(np.int64)),
                                   RequantRegisters(np.int64(x_mult), np.int64(x_shift)), 1.0)
            for t in range(tiles_o):
                tile_id = b * tiles_o + t  # the row tile of the launch (the sublayer's tile ids)
                yy = y[(blk, b, t)]
                head = streams.encode("gresult", tile_id=tile_id, rows=rows, col_block=blk, elem_bits=32, cols=cols)
                await y_src[i].send(frame(head.tobytes() + yy.astype("<i4").tobytes()))
                out_head = streams.encode("gresult", tile_id=tile_id, rows=rows, col_block=blk, elem_bits=8,
                                          cols=cols).tobytes()
                r_res = residual_add_int(yy, x[b, t * rows:(t + 1) * rows, ch], rq)
                want.append(_beats(out_head + r_res.astype(np.int8).tobytes()))
        r_want.append(want)

    # the weight mover's stream for its list: per load a ROUTE beat (more: no TLAST), its WSLICE header and its
    # block of a random weight image (the list mover's contract, hw/hls/mm2s_list.cpp)
    image = rng.integers(0, 256, plan["image_bytes"], dtype=np.uint8).tobytes()
    w_want: list[list[list[int]]] = [[] for _ in wr]
    order = []
    for stream, (route_cmd, head_cmd) in plan["weights"]:
        route, head = bytes.fromhex(route_cmd), bytes.fromhex(head_cmd)
        desc = streams.decode("mdesc", np.frombuffer(head[16:], np.uint8))
        offset = desc["offset_lo"] | desc["offset_hi"] << 32
        body = head[:16] + image[offset:offset + BEAT * desc["beats"]]
        await w_src.send(frame(route[:16] + body))
        w_want[stream].append(_beats(body))
        order.append(stream)

    # ---- what every output must send
    x_img = {b: x[b] for b in range(batch)}

    def slice_beats(lo: SliceLayout, src: dict[int, np.ndarray], run: Run) -> list[int]:
        j, t, f0 = run.head, run.index, sum(lo.slices[:run.head])
        return _beats(pack_x(src[run.b][t * lo.rows:(t + 1) * lo.rows, f0:f0 + lo.slices[j]]).tobytes())

    qkv_out = qkv
    if decoder:  # U from X; Q and K rotated at their tokens' positions, head row by head row
        x_img = {b: bhyt_site_int(x[b], sum_of_squares(x[b]), site).astype(np.int8) for b in range(batch)}
        qkv_out = qkv.astype(np.int64)
        for h in range(rope["rotated"] // hd):
            ch = slice(h * hd, (h + 1) * hd)
            qkv_out[:, :, ch] = rope_int(qkv[:, :, ch], cos[:ql.max_seq], sin[:ql.max_seq])
        qkv_out = qkv_out.astype(np.int8)
        assert not np.array_equal(qkv_out, qkv), "the tables rotate nothing"
    images = [expected_image(ql, qkv_out, b) for b in range(batch)]
    a_img = {b: a[b] for b in range(batch)}
    first, at = {}, 0
    for kind, count in n.items():  # each kind's first reader in the descriptor router's order
        first[kind], at = at, at + count

    def packets(r: int, beats: object) -> list[list[int]]:
        return [[int.from_bytes(h, "little"), *beats(run)]  # type: ignore[operator]
                for run, h in zip(runs[r], headers[r], strict=True) if not run.quiet]

    async def expect(s: AxiStreamSink, want: list[list[int]], what: str) -> None:
        for k, beats in enumerate(want):
            got = await s.recv(compact=False)
            assert [int(v) for v in got.tdata] == beats, f"{what}, packet {k}: not golden's"

    checks = [expect(xr[r], packets(first["x"] + r, lambda run: slice_beats(xl, x_img, run)), f"x reader {r}")
              for r in range(n["x"])]
    checks += [expect(qr[r], packets(first["qkv"] + r, lambda run, r=r: [
        int.from_bytes(images[run.b][(run.turn, addr)], "little") for addr in range(run.first, run.first + run.beats)]),
        f"Q/K/V reader {r}") for r in range(n["qkv"])]
    checks += [expect(ar[r], packets(first["a"] + r, lambda run: slice_beats(al, a_img, run)), f"A reader {r}")
               for r in range(n["a"])]
    checks += [expect(rr[i], r_want[i], f"R output {i}") for i in range(n["residual"])]
    checks += [expect(wr[w], w_want[w], f"w output {w}") for w in range(len(wr))]
    await Combine(*(cocotb.start_soon(c) for c in checks))

    await ClockCycles(dut.clk, 30)
    assert all(s.empty() for s in (*xr, *qr, *ar, *rr, *wr)), "an output sent more than golden's"
    for name in ("bad_route", "bad_record", "slots_full"):
        assert int.from_bytes(await axil.read(st.offset(name), 4), "little") == 0, f"{name} set"
    assert int.from_bytes(await axil.read(st.offset("residual_paths"), 4), "little") == n["residual"]
    dut._log.info("a launch of %d sequences: %d descriptors' readers, %d R records, %d weight packets", batch,
                  len(runs), sum(len(w) for w in r_want), len(order))

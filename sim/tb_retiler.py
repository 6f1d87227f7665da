"""cocotb 2.x testbench for :class:`vckattn.hw.pl.retiler.QkvRetiler` (run by ``tests/hw/pl/test_retiler.py``).

The geometry comes from ``VCKATTN_TB_RETILER`` (JSON: the :class:`~vckattn.hw.spec.qkv_buffer.QkvLayout` fields,
``rows``, ``cols``, ``batch``). Random int8 Q/K/V of ``batch`` sequences are cut into the GEMM cascade's records
(GRESULT header, ``rows × cols`` row-major), sent in a shuffled order under random backpressure on both sides, and
the addressed beats that come out are laid into a memory image, which must equal golden's packed layouts
(``golden/engine.py``: ``pack_q`` of every Q tile, ``pack_k`` and ``pack_v`` of every key slice) at the places
:class:`QkvLayout` names: every beat written exactly once, nothing else written.
"""

from __future__ import annotations

import json
import logging
import os
import random

import cocotb
import numpy as np
from cocotb.handle import SimHandleBase
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from vckattn.golden.engine import pack_k, pack_q, pack_v
from vckattn.hw.spec import streams
from vckattn.hw.spec.qkv_buffer import QkvLayout
from vckattn.sim.kernel_tb import pause_pattern, start

BEAT = streams.BEAT_BYTES


def geometry() -> tuple[QkvLayout, int, int, int]:
    g = json.loads(os.environ["VCKATTN_TB_RETILER"])
    rows, cols, batch = g.pop("rows"), g.pop("cols"), g.pop("batch")
    return QkvLayout(**g), rows, cols, batch


def records(lo: QkvLayout, rows: int, cols: int, qkv: np.ndarray) -> list[AxiStreamFrame]:
    """The GEMM records of ``qkv`` ``(batch, max_seq, qkv_cols)`` int8, one frame each (header beat first)."""
    tiles = lo.max_seq // rows
    out = []
    for b in range(qkv.shape[0]):
        for r in range(tiles):
            for cb in range(lo.qkv_cols // cols):
                head = streams.encode("gresult", tile_id=b * tiles + r, rows=rows, col_block=cb, elem_bits=8,
                                      cols=cols).tobytes()
                body = qkv[b, r * rows:(r + 1) * rows, cb * cols:(cb + 1) * cols].astype(np.int8).tobytes()
                raw = head + body
                out.append(AxiStreamFrame([int.from_bytes(raw[i:i + BEAT], "little")
                                           for i in range(0, len(raw), BEAT)]))
    return out


def expected_image(lo: QkvLayout, qkv: np.ndarray, only: int | None = None) -> dict[tuple[int, int], bytes]:
    """(the sequence's turn in its slot, beat address) -> the 16 bytes golden's pack functions put there (of
    sequence ``only`` alone, if given)."""
    img: dict[tuple[int, int], bytes] = {}
    d, h, hk = lo.d, lo.heads, lo.kv_heads

    for b in range(qkv.shape[0]) if only is None else (only,):
        turn = b // lo.slots % 2

        def put(first: int, packed: np.ndarray, turn: int = turn) -> None:
            raw = packed.astype(np.int8).tobytes()
            for i in range(0, len(raw), BEAT):
                img[(turn, first + i // BEAT)] = raw[i:i + BEAT]

        q, k, v = qkv[b, :, :h * d], qkv[b, :, h * d:(h + hk) * d], qkv[b, :, (h + hk) * d:]
        for hh in range(h):
            for t in range(lo.max_seq // lo.q_rows):
                put(lo.q_tile(b, hh, t), pack_q(q[t * lo.q_rows:(t + 1) * lo.q_rows, hh * d:(hh + 1) * d]))
        for hh in range(hk):
            for s in range(lo.max_seq // lo.slice_keys):
                keys = slice(s * lo.slice_keys, (s + 1) * lo.slice_keys)
                put(lo.k_slice(b, hh, s), pack_k(k[keys, hh * d:(hh + 1) * d]))
                put(lo.v_slice(b, hh, s), pack_v(v[keys, hh * d:(hh + 1) * d]))
    return img


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def test_records_land_in_golden_layouts(dut: SimHandleBase) -> None:
    lo, rows, cols, batch = geometry()
    await start(dut)
    # one "byte" a beat: frames are lists of 128-bit beats, TUSER one value a beat
    src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_lanes=1)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_lanes=1)
    for x in (src, sink):
        x.log.setLevel(logging.WARNING)
    rnd = random.Random(cocotb.RANDOM_SEED)
    src.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))
    sink.set_pause_generator(pause_pattern(random.Random(rnd.getrandbits(64)), 0.3, 8))
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    qkv = rng.integers(-128, 128, size=(batch, lo.max_seq, lo.qkv_cols)).astype(np.int8)
    frames = records(lo, rows, cols, qkv)
    rnd.shuffle(frames)  # the cascades' records arrive in any order
    for f in frames:
        await src.send(f)
    writes_per_record = rows * cols // BEAT
    img: dict[tuple[int, int], bytes] = {}
    twice = []
    for _ in frames:
        got = await sink.recv(compact=False)
        assert len(got.tdata) == writes_per_record, len(got.tdata)
        top = len(dut.m_axis_tuser) - 1  # the turn's bit, above the slot and the address
        addr_bits, slot_bits = (lo.beats - 1).bit_length(), max(1, (lo.slots - 1).bit_length())
        assert top == addr_bits + slot_bits
        for data, user in zip(got.tdata, got.tuser, strict=True):
            u = int(user)
            addr, slot = u & ((1 << addr_bits) - 1), (u >> addr_bits) & ((1 << slot_bits) - 1)
            assert slot == lo.slot_of(addr), f"beat {addr} named slot {slot}"
            key = (u >> top, addr)  # (turn, address)
            if key in img:
                twice.append(key)
            img[key] = int(data).to_bytes(BEAT, "little")
    await ClockCycles(dut.clk, 16)
    assert sink.empty(), "writes after the last record's last one"
    assert not twice, f"beats written twice: {twice[:8]}"
    want = expected_image(lo, qkv)
    assert set(img) == set(want), (f"{len(set(img) - set(want))} beats outside the layout, "
                                   f"{len(set(want) - set(img))} not written")
    bad = [a for a in want if img[a] != want[a]]
    assert not bad, f"{len(bad)} beats differ from golden's layouts, first at {bad[:4]}"
    dut._log.info("%d records, %d beats in golden's Q/K/V layouts", len(frames), len(img))

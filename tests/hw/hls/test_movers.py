"""The engine's movers in C-simulation (stream contract v3): the command-list mover (hw/hls/mm2s_engine.cpp), whose q,
k and v movers send exactly the streams the host's command lists describe (host/engine.py: streams_of, the reference;
the k and v movers split the one kv list by op), for every pipeline of a launch, and stop at a descriptor they cannot
act on; the output mover (hw/hls/s2mm_engine.cpp), a plain writer of the A records into their slots and of the done log,
which refuses a record it cannot place."""

from __future__ import annotations

import numpy as np
import pytest

from vckattn.golden.engine import RQ_MULT_BITS
from vckattn.golden.requant import requant_registers
from vckattn.host.engine import CMD_BYTES, plan_launch, streams_of
from vckattn.hw.spec import streams
from vckattn.hw.spec.functional import EngineParams

pytestmark = pytest.mark.tool("g++", "hls4ml")


def _launch(causal=False, kv=2, d=32, seq=70):
    rng = np.random.default_rng(seq + d)
    q = rng.integers(-128, 128, (2, 4, seq, d), dtype=np.int8)
    k = rng.integers(-128, 128, (2, kv, seq, d), dtype=np.int8)
    v = rng.integers(-128, 128, (2, kv, seq, d), dtype=np.int8)
    keep = np.ones((2, seq if causal else 1, seq), bool)
    keep[1, :, seq - 9:] = False
    if causal:
        keep &= np.tril(np.ones((seq, seq), bool))[None]
    p = EngineParams(pipelines=3, kernels=2, q_rows=16, d=64, max_keys=128)
    return p, plan_launch(p, q, k, v, keep, causal, 5, requant_registers(1 / 3000, bits=RQ_MULT_BITS))


def _movers(p, la, pipe, q_cmds=None, kv_cmds=None):
    """The q mover's stream and count, and the k and v movers' streams and counts (both read the one kv list)."""
    from vckattn.sim.engine_movers_csim import mm2s_engine

    q = mm2s_engine(la.cmds.q[pipe] if q_cmds is None else q_cmds, la.q, None, "q", p.q_rows * p.d)
    kv = la.cmds.kv[pipe] if kv_cmds is None else kv_cmds
    return q, mm2s_engine(kv, la.k, la.v, "k", p.slice_keys * p.d), mm2s_engine(kv, la.k, la.v, "v", p.slice_keys * p.d)


def _packets(stream: np.ndarray, p) -> np.ndarray:
    """A k / v / kv stream as its packets ``(n, 16 + SK·D)``."""
    return stream.reshape(-1, 16 + p.slice_keys * p.d)


@pytest.mark.parametrize("causal,kv,d", [(False, 2, 32), (True, 1, 64), (False, 4, 16)])
def test_mover_streams_equal_the_command_lists(causal, kv, d):
    p, la = _launch(causal, kv, d)
    q_in, kv_in = streams_of(la)
    for pipe in range(p.pipelines):
        (qs, qn), (ks, kn), (vs, vn) = _movers(p, la, pipe)
        assert qn == len(la.cmds.q[pipe]) and kn == vn == len(la.cmds.kv[pipe])
        assert np.array_equal(qs.reshape(-1), q_in[pipe])
        # the kv list's packets in order: per group k K slices then k V slices, each its SLICE header (routing word)
        # + SK·D bytes; the k mover sends the K ones, the v mover the V ones, each in the list's order
        want = _packets(kv_in[pipe], p)
        ids = streams.decode_many("slice", want[:, :16])["packet_id"]
        assert ids.tolist() == list(range(2 * p.kernels)) * (len(ids) // (2 * p.kernels))
        assert np.array_equal(_packets(ks, p), want[ids < p.kernels])
        assert np.array_equal(_packets(vs, p), want[ids >= p.kernels])


def test_mover_stops_at_a_bad_command():
    p, la = _launch()
    q_in, kv_in = streams_of(la)
    cm = la.cmds.q[0].copy()
    f = streams.decode("tile", cm[2, :16])
    cm[2, :16] = streams.encode("tile", **(f | {"op": streams.OP_LOAD_K}))  # not a TILE: the q mover stops there
    (got, sent), _, _ = _movers(p, la, 0, q_cmds=cm)
    assert sent == 2
    assert np.array_equal(got.reshape(-1), q_in[0][:len(got) * 16])  # the two good commands, nothing more
    cm = la.cmds.q[0].copy()
    cm[1, 16:24] = np.array([8], "<u8").view(np.uint8)  # an offset that is not a whole beat
    assert _movers(p, la, 0, q_cmds=cm)[0][1] == 1
    cm = la.cmds.kv[0].copy()
    f = streams.decode("slice", cm[3, :16])
    cm[3, :16] = streams.encode("slice", **(f | {"op": streams.OP_TILE}))  # not a LOAD: both movers stop there
    _, (got_k, sent_k), (got_v, sent_v) = _movers(p, la, 0, kv_cmds=cm)
    want = _packets(kv_in[0], p)[:3]  # entries 0..2 of the list: K0, K1, V0 (k = 2)
    assert sent_k == sent_v == 3
    assert np.array_equal(_packets(got_k, p), want[:2]) and np.array_equal(_packets(got_v, p), want[2:])
    assert CMD_BYTES == 32


def test_mover_passes_the_tile_heads_through():
    """The TILE descriptors' query head (streams.TILE head, word 1 bits 8..15) reaches the AIE unchanged: the mover
    copies the header beat as the host wrote it."""
    p, la = _launch(d=64)
    cm = la.cmds.q[0].copy()
    for n in range(len(cm)):  # heads 31, 16, 1, ...: every bit of the field
        f = streams.decode("tile", cm[n, :16])
        cm[n, :16] = streams.encode("tile", **(f | {"head": (31 + 17 * n) % 32}))
    (got, sent), _, _ = _movers(p, la, 0, q_cmds=cm)
    assert sent == len(cm)
    beats = got.reshape(len(cm), -1, 16)
    assert np.array_equal(beats[:, 0], cm[:, :16])
    heads = [streams.decode("tile", b)["head"] for b in beats[:, 0]]
    assert heads[:3] == [31, 16, 1] and len(set(heads)) == min(len(heads), 32)


@pytest.mark.tool("asan")
def test_reading_past_a_ddr_buffer_fails_the_run():
    """The test bench passes the source buffers at exactly their size: a command list whose payloads lie past the end
    of the re-tiled Q or K it is given (a buffer one beat short) fails the run (AddressSanitizer), not reads stale
    memory."""
    from vckattn.sim.engine_movers_csim import mm2s_engine
    from vckattn.sim.hls_csim import RunError

    p, la = _launch()
    for mode, cmds, src, payload in (("q", la.cmds.q[0], la.q, p.q_rows * p.d),
                                     ("k", la.cmds.kv[0], la.k, p.slice_keys * p.d)):
        raw = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        ops = streams.decode_many("slice" if mode == "k" else "tile", cmds[:, :16])["op"]
        mine = cmds[ops == (streams.OP_LOAD_K if mode == "k" else streams.OP_TILE)]
        end = int(mine[:, 16:24].copy().view("<u8").max()) + payload  # the last byte the list reads, + 1
        assert end <= raw.size
        mm2s_engine(cmds, raw[:end], la.v, mode, payload)  # exactly what the list reads: runs clean
        with pytest.raises(RunError, match="AddressSanitizer"):
            mm2s_engine(cmds, raw[:end - 16], la.v, mode, payload)


def _records(rng, q_rows, d, tiles, rows=None):
    """The a_in stream of A records for ``tiles`` (in arrival order): RESULT header as the last P.V kernel writes it
    (pipeline 0) + random int8 payloads."""
    payload = rng.integers(-128, 128, (len(tiles), q_rows, d), dtype=np.int8)
    beats = []
    for n, t in enumerate(tiles):
        beats.append(streams.encode("result", tile_id=t, rows=q_rows if rows is None else rows[n], d=d))
        beats.append(payload[n].reshape(-1).view(np.uint8))
    return np.concatenate(beats), payload


@pytest.mark.parametrize("q_rows, d", [(16, 64), (12, 32)])
def test_output_mover_writes_the_a_records_into_their_slots(q_rows, d):
    """s2mm_engine is a plain writer: each A record's payload, byte for byte, into slot tile_id of the A buffer; its
    header with this pipeline's index into the done log in arrival order; slots of other tiles untouched."""
    from vckattn.sim.engine_movers_csim import s2mm_engine

    rng = np.random.default_rng(q_rows + d)
    tiles, rows = [5, 0, 7, 2], [q_rows, 3, q_rows, 1]
    stream, payload = _records(rng, q_rows, d, tiles, rows)
    a, done, status, left = s2mm_engine(stream, len(tiles), 9, 3, q_rows, d)
    assert status == 0 and left == 0
    for n, t in enumerate(tiles):
        assert np.array_equal(a[t], payload[n])
    untouched = [s for s in range(9) if s not in tiles]
    assert (a[untouched].view(np.uint8) == 0xA5).all()
    want = [streams.encode("result", tile_id=t, rows=r, pipeline=3, d=d) for t, r in zip(tiles, rows, strict=True)]
    assert np.array_equal(done, np.array(want))


def test_output_mover_refuses_a_record_of_another_head_size_or_slot():
    from vckattn.sim.engine_movers_csim import s2mm_engine

    rng = np.random.default_rng(1)
    stream, payload = _records(rng, 16, 64, [1, 2, 0])
    bad = stream.copy().reshape(-1, 16)
    per = 1 + 16 * 64 // 16
    bad[per] = streams.encode("result", tile_id=2, rows=16, d=32)  # the second record says D = 32
    a, done, status, left = s2mm_engine(bad, 3, 3, 0, 16, 64)
    assert status == 3 and left == 2 * per - 1  # PL_BAD_D after the first record; the rest unread
    assert np.array_equal(a[1], payload[0]) and (a[2].view(np.uint8) == 0xA5).all()
    assert (done[1:] == 0xA5).all()
    a, done, status, left = s2mm_engine(stream, 3, 2, 0, 16, 64)  # tile 2 of a 2-slot A buffer
    assert status == 4 and (a[0].view(np.uint8) == 0xA5).all() and np.array_equal(a[1], payload[0])

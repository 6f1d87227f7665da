"""The sublayer's HLS movers in C-simulation, against references written from their contract (hw/ENGINE.md, "The
sublayer's PL side"): the list mover (hw/hls/mm2s_list.cpp) sends, per command, its header beat unless no_header and
then its run of source beats, TLAST on the command's last beat unless more, and refuses a command it cannot send
whole; the R writer (hw/hls/s2mm_records.cpp) writes each residual record's valid rows into R by tile id, drops the
padding rows, and refuses a record it cannot place. Altered copies of the kernels (one ignoring no_header, one
writing the padding rows) fail the same checks."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vckattn.hw.spec import streams

pytestmark = pytest.mark.tool("g++", "hls4ml")

SENTINEL = np.uint8(0xA5)  # every byte of R before a run of the R writer


# ------------------------------------------------------------------------------------------------ list mover


def _expected_stream(cmds: np.ndarray, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stream the contract gives for good commands ``cmds`` ``(n, 32)`` on source bytes ``src``: per command its
    header (bytes 0..15) unless no_header (byte 28 bit 0), then ``beats`` (bytes 24..27) beats of ``src`` from the
    byte offset (bytes 16..23, little-endian); TLAST on each command's last beat unless more (byte 28 bit 1)."""
    beats, last = [], []
    for c in cmds:
        offset = int.from_bytes(c[16:24].tobytes(), "little")
        n = int.from_bytes(c[24:28].tobytes(), "little")
        sent = ([] if c[28] & 1 else [c[:16]]) + [src[offset + 16 * k:offset + 16 * (k + 1)] for k in range(n)]
        beats += sent
        last += [False] * (len(sent) - 1) + [not c[28] & 2]
    return np.array(beats, np.uint8).reshape(-1, 16), np.array(last, bool)


def _random_list(rng, src_beats: int, n: int) -> np.ndarray:
    """``n`` good commands: a random header beat each, a mix of header + payload, payload only (no_header) and a
    header alone (0 beats)."""
    from vckattn.hw.spec.descriptors import mover_command as command

    cmds = []
    for i in range(n):
        kind = ("both", "payload", "header")[i % 3] if i < 3 else rng.choice(["both", "payload", "header"])
        beats = 0 if kind == "header" else int(rng.integers(1, 9))
        start = int(rng.integers(0, src_beats - beats + 1))
        cmds.append(command(rng.integers(0, 256, 16, dtype=np.uint8), 16 * start, beats, kind == "payload",
                            more=bool(rng.random() < 0.3)))
    return np.stack(cmds)


def test_list_mover_sends_each_command_as_the_contract_says():
    from vckattn.sim.sublayer_movers_csim import mm2s_list

    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, 40 * 16, dtype=np.uint8)
    cmds = _random_list(rng, 40, 30)
    want, want_last = _expected_stream(cmds, src)
    data, last, sent = mm2s_list(cmds, src)
    assert sent == len(cmds)
    assert np.array_equal(data, want) and np.array_equal(last, want_last)
    more = cmds[:, 28] & 2 != 0
    assert 0 < more.sum() < len(cmds) and last.sum() == len(cmds) - more.sum()  # a TLAST a command but the more ones


def test_list_mover_sends_a_no_header_command_as_its_payload_alone():
    from vckattn.hw.spec.descriptors import mover_command as command
    from vckattn.sim.sublayer_movers_csim import mm2s_list

    src = np.arange(8 * 16, dtype=np.uint8)
    head = np.full(16, 0xEE, np.uint8)
    data, last, sent = mm2s_list(command(head, 32, 3, no_header=True)[None], src)
    assert sent == 1 and np.array_equal(data, src.reshape(8, 16)[2:5]) and last.tolist() == [False, False, True]
    data, last, sent = mm2s_list(command(head, 32, 0)[None], src)  # a header alone carries TLAST
    assert sent == 1 and np.array_equal(data, head[None]) and last.tolist() == [True]


def test_list_mover_reads_a_payload_up_to_the_end_of_its_source():
    from vckattn.hw.spec.descriptors import mover_command as command
    from vckattn.sim.sublayer_movers_csim import mm2s_list

    src = np.arange(5 * 16, dtype=np.uint8)
    data, _, sent = mm2s_list(command(np.zeros(16, np.uint8), 16, 4, no_header=True)[None], src)
    assert sent == 1 and np.array_equal(data, src.reshape(5, 16)[1:])


@pytest.mark.parametrize("bad", ["offset_not_a_beat", "past_src_beats", "offset_high_word", "sends_nothing"])
def test_list_mover_refuses_a_command_and_sends_nothing_of_it(bad):
    from vckattn.hw.spec.descriptors import mover_command as command
    from vckattn.sim.sublayer_movers_csim import mm2s_list

    rng = np.random.default_rng(3)
    src_beats = 24
    src = rng.integers(0, 256, src_beats * 16, dtype=np.uint8)
    good = _random_list(rng, src_beats, 5)
    head = rng.integers(0, 256, 16, dtype=np.uint8)
    refused = {"offset_not_a_beat": command(head, 16 * 2 + 8, 1),
               "past_src_beats": command(head, 16 * (src_beats - 3), 4),  # one beat past the end
               "offset_high_word": command(head, (1 << 32) + 16, 1),      # the offset's bits 63..32 are read
               "sends_nothing": command(head, 0, 0, no_header=True)}[bad]
    cmds = np.concatenate([good, refused[None], good])
    data, last, sent = mm2s_list(cmds, src)
    assert sent == len(good)
    want, want_last = _expected_stream(good, src)  # the good commands before it, nothing more
    assert np.array_equal(data, want) and np.array_equal(last, want_last)


def _altered(tmp_path, source: str, old: str, new: str):
    """A copy of the kernel ``hw/hls/<source>`` with ``old`` replaced by ``new`` (which must occur once)."""
    from vckattn.sim.sublayer_movers_csim import HLS

    text = (HLS / source).read_text()
    assert text.count(old) == 1
    path = tmp_path / source.replace(".cpp", "_altered.cpp")
    path.write_text(text.replace(old, new))
    return path


def test_the_list_mover_check_fails_a_mover_that_ignores_no_header(tmp_path):
    from vckattn.sim.sublayer_movers_csim import mm2s_list

    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, 40 * 16, dtype=np.uint8)
    cmds = _random_list(rng, 40, 12)
    want, want_last = _expected_stream(cmds, src)
    kernel = _altered(tmp_path, "mm2s_list.cpp", "if (!no_header) out.write", "out.write")
    data, last, sent = mm2s_list(cmds, src, kernel=kernel)
    assert sent == len(cmds) and not (data.shape == want.shape and np.array_equal(data, want))


# ------------------------------------------------------------------------------------------------ R writer


def _record(r: np.ndarray, row_tile: int, col_block: int, rows: int, tile_rows: int, cols: int, row_tiles: int,
            rng, header: dict[str, int] | None = None) -> np.ndarray:
    """The residual record of R's ``(row_tile, col_block)`` tile, as bytes: its GRESULT header (tile id: the row
    tile, the sublayer's convention; ``header`` overrides fields), then ``tile_rows × cols`` int8 row-major, the
    ``rows`` valid rows from R and the padding rows random."""
    fields = {"tile_id": row_tile, "rows": rows, "col_block": col_block, "elem_bits": 8,
              "cols": cols} | (header or {})
    payload = rng.integers(-128, 128, (tile_rows, cols), dtype=np.int8)  # padding rows: garbage
    t0, c0 = row_tile * tile_rows, col_block * cols
    payload[:rows] = r[t0:t0 + rows, c0:c0 + cols]
    return np.concatenate([streams.encode("gresult", **fields), payload.reshape(-1).view(np.uint8)])


def _geometry(n_tokens=70, d_model=96, tile_rows=16, cols=32):
    return n_tokens, d_model, tile_rows, cols, -(-n_tokens // tile_rows)


def test_r_writer_writes_every_record_into_r():
    """Every tile of R (3 column blocks, the last row tile 6 valid rows of 16) in a random order: R comes back whole,
    and the last tile's padding rows, beyond n_tokens, are not written (the buffer ends at n_tokens: AddressSanitizer
    fails a write past it)."""
    from vckattn.sim.sublayer_movers_csim import s2mm_records

    n_tokens, d_model, tile_rows, cols, row_tiles = _geometry()
    rng = np.random.default_rng(11)
    r = rng.integers(-128, 128, (n_tokens, d_model), dtype=np.int8)
    tiles = [(t, c) for c in range(d_model // cols) for t in range(row_tiles)]
    rng.shuffle(tiles)
    recs = [_record(r, t, c, min(tile_rows, n_tokens - t * tile_rows), tile_rows, cols, row_tiles, rng)
            for t, c in tiles]
    got, status, left = s2mm_records(np.concatenate(recs), len(recs), tile_rows, cols, row_tiles, d_model, n_tokens)
    assert status == 0 and left == 0
    assert np.array_equal(got, r)


def _partial_launch(rng):
    """R, and records for some of its tiles: (row tile 2, block 1) with 5 valid rows of 16, the last row tile of
    block 0, (0, 2) and (3, 1) whole; with the mask of the bytes they cover."""
    n_tokens, d_model, tile_rows, cols, row_tiles = _geometry()
    r = rng.integers(-128, 128, (n_tokens, d_model), dtype=np.int8)
    written = np.zeros_like(r, bool)
    recs = []
    for t, c, rows in [(2, 1, 5), (row_tiles - 1, 0, n_tokens - (row_tiles - 1) * tile_rows), (0, 2, 16), (3, 1, 16)]:
        recs.append(_record(r, t, c, rows, tile_rows, cols, row_tiles, rng))
        written[t * tile_rows:t * tile_rows + rows, c * cols:(c + 1) * cols] = True
    return r, written, recs, (tile_rows, cols, row_tiles, d_model, n_tokens)


def test_r_writer_writes_the_valid_rows_only():
    from vckattn.sim.sublayer_movers_csim import s2mm_records

    r, written, recs, args = _partial_launch(np.random.default_rng(5))
    got, status, left = s2mm_records(np.concatenate(recs), len(recs), *args)
    assert status == 0 and left == 0
    assert np.array_equal(got[written], r[written])
    assert (got.view(np.uint8)[~written] == SENTINEL).all()


def test_the_r_writer_check_fails_a_writer_that_writes_padding_rows(tmp_path):
    from vckattn.sim.sublayer_movers_csim import s2mm_records

    r, written, recs, args = _partial_launch(np.random.default_rng(5))
    recs = recs[:1] + recs[2:]  # not the last row tile: its padding rows lie past R (AddressSanitizer)
    written[-6:] = False
    kernel = _altered(tmp_path, "s2mm_records.cpp", "if (i < rows) r_out", "r_out")
    got, status, _ = s2mm_records(np.concatenate(recs), len(recs), *args, kernel=kernel)
    assert status == 0 and np.array_equal(got[written], r[written])
    assert not (got.view(np.uint8)[~written] == SENTINEL).all()  # record (2, 1)'s padding rows landed


@pytest.mark.tool("asan")
def test_a_writer_that_writes_padding_rows_past_r_fails_the_run(tmp_path):
    """The test bench passes R at exactly n_tokens rows: the last row tile's padding rows written (an altered writer)
    land past it and fail the run (AddressSanitizer), which is what the whole-R test relies on."""
    from vckattn.sim.hls_csim import RunError
    from vckattn.sim.sublayer_movers_csim import s2mm_records

    r, _, recs, args = _partial_launch(np.random.default_rng(5))
    kernel = _altered(tmp_path, "s2mm_records.cpp", "if (i < rows) r_out", "r_out")
    s2mm_records(recs[1], 1, *args)  # the last row tile, 6 valid rows: the writer as built runs clean
    with pytest.raises(RunError, match="AddressSanitizer"):
        s2mm_records(recs[1], 1, *args, kernel=kernel)


def _refusals():
    """Per R writer status: the GRESULT fields that make a record refused (the geometry of :func:`_geometry`)."""
    n_tokens, d_model, tile_rows, cols, row_tiles = _geometry()
    return {"bad_elem_bits": {"elem_bits": 32},
            "bad_cols": {"cols": 16},
            "bad_col_block": {"col_block": 3, "tile_id": 0},
            "bad_row_tile": {"tile_id": row_tiles, "col_block": 1},  # row tile 5 of 5
            "bad_rows": {"rows": tile_rows + 1},
            "bad_token": {"tile_id": row_tiles - 1, "col_block": 0, "rows": 7}}  # token 70 of 70


@pytest.mark.parametrize("bad", sorted(_refusals()))
def test_r_writer_refuses_a_record_and_writes_nothing_of_it(bad):
    from vckattn.sim.sublayer_movers_csim import RECORD_STATUS, s2mm_records

    n_tokens, d_model, tile_rows, cols, row_tiles = _geometry()
    rng = np.random.default_rng(9)
    r = rng.integers(-128, 128, (n_tokens, d_model), dtype=np.int8)
    first = _record(r, 0, 0, tile_rows, tile_rows, cols, row_tiles, rng)
    refused = _record(r, 1, 1, tile_rows, tile_rows, cols, row_tiles, rng, _refusals()[bad])
    after = _record(r, 2, 2, tile_rows, tile_rows, cols, row_tiles, rng)
    got, status, left = s2mm_records(np.concatenate([first, refused, after]), 3, tile_rows, cols, row_tiles, d_model,
                                     n_tokens)
    assert status == RECORD_STATUS[bad]
    assert left == (len(refused) + len(after)) // 16 - 1  # its header read, its payload and the rest not
    written = np.zeros_like(r, bool)
    written[:tile_rows, :cols] = True
    assert np.array_equal(got[written], r[written]) and (got.view(np.uint8)[~written] == SENTINEL).all()


@pytest.mark.parametrize("cols, tile_rows", [(24, 16), (0, 16), (32, 0)])
def test_r_writer_refuses_arguments_it_cannot_address(cols, tile_rows):
    """cols not a positive multiple of 16 or no rows a tile: refused before a beat is read."""
    from vckattn.sim.sublayer_movers_csim import RECORD_STATUS, s2mm_records

    got, status, left = s2mm_records(np.zeros(16 * 5, np.uint8), 1, tile_rows, cols, 5, 96, 70)
    assert status == RECORD_STATUS["bad_args"] and left == 5 and (got.view(np.uint8) == SENTINEL).all()


def test_record_statuses_match_the_kernel_header():
    from vckattn.sim.sublayer_movers_csim import HLS, RECORD_STATUS

    text = (HLS / "s2mm_records.h").read_text()
    declared = {m[1].lower(): int(m[2]) for m in re.finditer(r"^\s*R_(\w+) = (\d+),", text, re.M)}
    assert declared == RECORD_STATUS


def test_the_descriptor_movers_list_sends_the_routed_stream():
    """The descriptor mover's list for a launch's routed descriptors (hw/spec/descriptors.py: mover_list) makes the
    list mover send exactly the packets, a ROUTE beat then the reader's descriptors, TLAST on each packet's end:
    what the descriptor router takes."""
    from vckattn.hw.spec.descriptors import mover_list, routed_descriptors
    from vckattn.hw.spec.qkv_buffer import Run
    from vckattn.sim.sublayer_movers_csim import mm2s_list

    rng = np.random.default_rng(3)
    readers = []
    for r in range(3):
        runs = []
        for b in range(4):
            for k in range(int(rng.integers(0, 3)) or 1):
                quiet = (r + b) % 3 == 0
                runs.append((Run("x", b, r, k, int(rng.integers(0, 1000)), 0 if quiet else 4, b % 2, b // 2 % 2,
                                 k == 0, quiet), rng.integers(0, 256, 16, dtype=np.uint8).tobytes()))
        readers.append(runs)
    packets = routed_descriptors(readers)
    cmds, src = mover_list(packets)
    data, last, sent = mm2s_list(cmds, src)
    assert sent == len(packets) == 3 * 4
    assert data.tobytes() == b"".join(packets)
    ends = np.cumsum([len(p) // 16 for p in packets]) - 1
    assert np.flatnonzero(last).tolist() == ends.tolist()

"""AIE matmul kernels (``hw/aie``): per-tile logic bit-exact with the golden ``tile_matmul``.

The kernels' tile code (``hw/aie/attention_kernels.h``) is compiled with g++ into
``sim/cpp/aie_kernels_tb.cpp`` and driven through the byte streams of ``hw/STREAMS.md`` by
:mod:`vckattn.sim.aie_csim`. Two builds are checked:

* ``scalar``: the scalar reference path (what g++ and x86sim compile);
* ``vector_emu``: the AIE1 vector path (``aie::mmul`` tiling, transposes) over
  ``hw/aie/aie_api_emu.h``, a host model of the AIE API subset it uses. This checks its index
  arithmetic; the real AIE API compile is still unverified (needs aiecompiler).

Golden: ``S = tile_matmul(q, kᵀ)``, ``O = tile_matmul(p, v, a_fmt=UINT8)``. The graph test needs no
compiler: ``hw/aie/graph.h`` must declare exactly the PLIOs of ``vckattn.hw.manifest.PLIOS``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import require_tools

from vckattn.golden.aie_matmul import UINT8, tile_matmul
from vckattn.hw.manifest import PLIOS
from vckattn.sim import aie_csim
from vckattn.sim.aie_csim import (
    AIE_DIR,
    AIESIM_TILES,
    KernelShape,
    build,
    header_beat,
    pack_k_stream,
    pack_p_stream,
    pack_q_stream,
    pack_v_stream,
    pv_streams,
    pv_tiles,
    qk_streams,
    qk_tiles,
    run_tb,
    run_tb_raw,
)
from vckattn.sim.hls_csim import run_binary

needs_csim = pytest.mark.tool("g++", "hls4ml")

Q_ROWS, KEY_BLOCK = 32, 32
SEED = 20260601


@pytest.fixture(scope="module", params=["scalar", "vector_emu"])
def exe(request: pytest.FixtureRequest):
    """The test bench, built for the scalar reference or the emulated vector path."""
    require_tools("g++", "hls4ml")
    return build(vector_emu=request.param == "vector_emu")


@pytest.fixture(scope="module")
def tb():
    """The scalar-path test bench (protocol and error checks do not depend on the compute path)."""
    require_tools("g++", "hls4ml")
    return build()


def _rand_i8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-128, 128, shape, dtype=np.int8)


def _rand_u8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 256, shape, dtype=np.uint8)


# ------------------------------------------------------------------------------------------------
# Bit-exactness against the golden model
# ------------------------------------------------------------------------------------------------


@needs_csim
@pytest.mark.parametrize("d", [32, 64])
@pytest.mark.parametrize("n_kb", [1, 3, 32])
def test_qk_random(exe, d: int, n_kb: int) -> None:
    rng = np.random.default_rng([SEED, d, n_kb])
    q = _rand_i8(rng, (2, Q_ROWS, d))
    k = _rand_i8(rng, (2, n_kb * KEY_BLOCK, d))
    s = qk_streams(q, k, exe=exe)
    assert s.shape == (2, Q_ROWS, n_kb * KEY_BLOCK) and s.dtype == np.int32
    np.testing.assert_array_equal(s, tile_matmul(q, k.transpose(0, 2, 1)))


@needs_csim
@pytest.mark.parametrize("d", [32, 64])
@pytest.mark.parametrize("n_kb", [1, 3, 32])
def test_pv_random(exe, d: int, n_kb: int) -> None:
    rng = np.random.default_rng([SEED, 1, d, n_kb])
    p = _rand_u8(rng, (2, Q_ROWS, n_kb * KEY_BLOCK))
    v = _rand_i8(rng, (2, n_kb * KEY_BLOCK, d))
    o = pv_streams(p, v, exe=exe)
    assert o.shape == (2, Q_ROWS, d) and o.dtype == np.int32
    np.testing.assert_array_equal(o, tile_matmul(p, v, a_fmt=UINT8))


@needs_csim
def test_qk_extremes(exe) -> None:
    """|S| at its largest: D = 64 products of (−128)(−128) and (−128)(127)."""
    d, kp = 64, 1024
    q = np.full((2, Q_ROWS, d), -128, dtype=np.int8)
    k = np.stack([np.full((kp, d), -128, dtype=np.int8), np.full((kp, d), 127, dtype=np.int8)])
    s = qk_streams(q, k, exe=exe)
    np.testing.assert_array_equal(s, tile_matmul(q, k.transpose(0, 2, 1)))
    assert (s[0] == 128 * 128 * d).all() and (s[1] == -128 * 127 * d).all()


@needs_csim
def test_pv_extremes(exe) -> None:
    """The int32 accumulator's worst case: KP = 1024 products of 255 and −128 (−33,423,360) or 127."""
    d, kp = 64, 1024
    p = np.full((2, Q_ROWS, kp), 255, dtype=np.uint8)
    v = np.stack([np.full((kp, d), -128, dtype=np.int8), np.full((kp, d), 127, dtype=np.int8)])
    o = pv_streams(p, v, exe=exe)
    np.testing.assert_array_equal(o, tile_matmul(p, v, a_fmt=UINT8))
    assert (o[0] == -255 * 128 * kp).all() and (o[1] == 255 * 127 * kp).all()
    assert int(o[0].min()) == -33_423_360


@needs_csim
def test_tiles_back_to_back(exe) -> None:
    """One run, tiles of mixed D and N_KB (each header is honoured) and a repeated tile: the state
    (P.V accumulator, Q, the re-tiled buffers) is reset per tile, so equal tiles give equal outputs."""
    rng = np.random.default_rng([SEED, 2])
    geometry = [(64, 3), (64, 3), (32, 1), (64, 32), (32, 2), (64, 1)]
    qs = [_rand_i8(rng, (Q_ROWS, d)) for d, _ in geometry]
    ks = [_rand_i8(rng, (n * KEY_BLOCK, d)) for d, n in geometry]
    ps = [_rand_u8(rng, (Q_ROWS, n * KEY_BLOCK)) for _, n in geometry]
    vs = [_rand_i8(rng, (n * KEY_BLOCK, d)) for d, n in geometry]
    qs[1], ks[1], ps[1], vs[1] = qs[0], ks[0], ps[0], vs[0]
    qs[2][5:] = 0  # a partial tile: rows 5.. padded with zeros
    s = qk_tiles(qs, ks, rows=[32, 32, 5, 32, 32, 32], tile_ids=[7, 8, 9, 10, 11, 12], exe=exe)
    o = pv_tiles(ps, vs, exe=exe)
    for t in range(len(geometry)):
        np.testing.assert_array_equal(s[t], tile_matmul(qs[t], ks[t].T), err_msg=f"S tile {t}")
        np.testing.assert_array_equal(o[t], tile_matmul(ps[t], vs[t], a_fmt=UINT8), err_msg=f"O tile {t}")
    np.testing.assert_array_equal(s[0], s[1])
    np.testing.assert_array_equal(o[0], o[1])
    assert not s[2][5:].any()


@needs_csim
@pytest.mark.parametrize("vector_emu", [False, True], ids=["scalar", "vector_emu"])
def test_other_tile_shape(vector_emu: bool) -> None:
    """The templates build for another shape (Q_ROWS 8, KEY_BLOCK 16, MAX_D 32, MAX_KB 4)."""
    shape = KernelShape(q_rows=8, key_block=16, max_d=32, max_kb=4)
    small = build(vector_emu=vector_emu, shape=shape)
    rng = np.random.default_rng([SEED, 3])
    geometry = [(32, 4), (16, 1), (32, 2)]
    qs = [_rand_i8(rng, (8, d)) for d, _ in geometry]
    ks = [_rand_i8(rng, (n * 16, d)) for d, n in geometry]
    ps = [_rand_u8(rng, (8, n * 16)) for _, n in geometry]
    vs = [_rand_i8(rng, (n * 16, d)) for d, n in geometry]
    s = qk_tiles(qs, ks, exe=small, key_block=16)
    o = pv_tiles(ps, vs, exe=small, key_block=16)
    for t in range(len(geometry)):
        np.testing.assert_array_equal(s[t], tile_matmul(qs[t], ks[t].T))
        np.testing.assert_array_equal(o[t], tile_matmul(ps[t], vs[t], a_fmt=UINT8))
    # D = 48 > MAX_D and N_KB = 5 > MAX_KB are rejected by this build.
    for words in ([1, 48, 8, 0], [5, 32, 8, 0]):
        res = run_tb_raw("qk", header_beat(*words) + bytes(8 * 48), bytes(16 * 48), exe=small)
        assert res.returncode == 3 and res.stdout == b"", res.stderr


# ------------------------------------------------------------------------------------------------
# Malformed input: a clear message on stderr, no output
# ------------------------------------------------------------------------------------------------

_BODY = bytes(Q_ROWS * 64 + KEY_BLOCK * 64)  # enough beats after the header for any test below


@needs_csim
@pytest.mark.parametrize(
    ("mode", "words", "expect"),
    [
        ("qk", [1, 24, 32, 0], "bad head size D"),
        ("qk", [1, 80, 32, 0], "bad head size D"),
        ("qk", [1, 0, 32, 0], "bad head size D"),
        ("qk", [0, 64, 32, 0], "bad key block count N_KB"),
        ("qk", [33, 64, 32, 0], "bad key block count N_KB"),
        ("qk", [1, 64, 33, 0], "bad row count"),
        ("pv", [1, 24, 0, 0], "bad head size D"),
        ("pv", [1, 128, 0, 0], "bad head size D"),
        ("pv", [0, 32, 0, 0], "bad key block count N_KB"),
    ],
)
def test_bad_header(tb, mode: str, words: list[int], expect: str) -> None:
    res = run_tb_raw(mode, header_beat(*words) + _BODY, _BODY, exe=tb)
    err = res.stderr.decode()
    assert res.returncode == 3, err
    assert res.stdout == b""
    assert expect in err and f"N_KB={words[0]} D={words[1]}" in err, err
    with pytest.raises(aie_csim.RunError, match=expect):
        run_tb(mode, header_beat(*words) + _BODY, _BODY, exe=tb)


@needs_csim
def test_bad_header_after_good_tile(tb) -> None:
    rng = np.random.default_rng([SEED, 4])
    q, k = _rand_i8(rng, (Q_ROWS, 64)), _rand_i8(rng, (KEY_BLOCK, 64))
    good_q, good_k = pack_q_stream([q], 1), pack_k_stream([k])
    res = run_tb_raw("qk", good_q + header_beat(1, 40, 32, 1) + _BODY, good_k + _BODY, exe=tb)
    assert res.returncode == 3 and res.stdout == b""
    assert "tile 1: q header N_KB=1 D=40 rows=32 tile_id=1" in res.stderr.decode()


@needs_csim
def test_short_and_leftover_streams(tb) -> None:
    rng = np.random.default_rng([SEED, 5])
    q, k = _rand_i8(rng, (Q_ROWS, 32)), _rand_i8(rng, (2 * KEY_BLOCK, 32))
    qs, ks = pack_q_stream([q], 2), pack_k_stream([k])
    short = run_tb_raw("qk", qs, ks[:-16], exe=tb)
    assert short.returncode == 4 and short.stdout == b""
    assert "stream k ended inside the tile (1 beats short)" in short.stderr.decode()
    extra = run_tb_raw("qk", qs, ks + bytes(32), exe=tb)
    assert extra.returncode == 4 and "stream k has 2 beats left" in extra.stderr.decode()
    p, v = _rand_u8(rng, (Q_ROWS, KEY_BLOCK)), _rand_i8(rng, (KEY_BLOCK, 32))
    short_p = run_tb_raw("pv", pack_v_stream([v]), pack_p_stream([p])[:-16], exe=tb)
    assert short_p.returncode == 4 and "stream p ended inside" in short_p.stderr.decode()


@needs_csim
def test_malformed_input(tb) -> None:
    empty = run_tb_raw("qk", b"", b"", exe=tb)
    assert empty.returncode == 0 and empty.stdout == b""  # no tiles, no output
    with pytest.raises(aie_csim.RunError, match="unknown mode 'xy'"):
        run_binary(tb, b"xy\0\0" + bytes(16))
    with pytest.raises(aie_csim.RunError, match="multiples of 16"):
        run_binary(tb, aie_csim.tb_input("qk", bytes(20), b""))


# ------------------------------------------------------------------------------------------------
# The ADF graph and the simulator data (no compiler needed)
# ------------------------------------------------------------------------------------------------


def test_graph_plios_match_manifest() -> None:
    text = (AIE_DIR / "graph.h").read_text()
    plios = re.findall(r'(input|output)_plio::create\(\s*"(\w+)"\s*,\s*adf::plio_(\d+)_bits', text)
    assert sorted((name, "in" if kind == "input" else "out") for kind, name, _ in plios) == sorted(PLIOS)
    assert {int(width) for _, _, width in plios} == {128}
    # Stream connections per hw/STREAMS.md (port order = kernel signatures in kernels.h).
    conns = set(re.findall(r"connect<adf::stream>\(\s*(\w+)\.out\[0\],\s*(\w+)\.in\[(\d)\]\s*\)", text))
    assert conns == {("q_in", "qk", "0"), ("k_in", "qk", "1"), ("qk", "s_out", "0"),
                     ("v_in", "pv", "0"), ("p_in", "pv", "1"), ("pv", "o_out", "0")}
    assert "kernel::create(qk_matmul)" in text and "kernel::create(pv_matmul)" in text
    kernels = (AIE_DIR / "kernels.h").read_text()
    assert re.search(r"void qk_matmul\(input_stream<int8>\*[^,]*\bq,\s*input_stream<int8>\*[^,]*\bk,\s*"
                     r"output_stream<int32>\*[^)]*\bs\)", kernels)
    assert re.search(r"void pv_matmul\(input_stream<int8>\*[^,]*\bv,\s*input_stream<uint8>\*[^,]*\bp,\s*"
                     r"output_stream<int32>\*[^)]*\bo\)", kernels)
    graph_cpp = (AIE_DIR / "graph.cpp").read_text()
    assert re.search(r"^AttentionGraph attention_graph;", graph_cpp, re.M)
    guard = graph_cpp.index("#if defined(__AIESIM__) || defined(__X86SIM__)")
    assert graph_cpp.index("int main(") > guard
    assert f"#define VCKATTN_AIESIM_TILES {AIESIM_TILES}" in graph_cpp


def test_aiesim_data_up_to_date(tmp_path) -> None:
    """hw/aie/data is what ``python -m vckattn.sim.aie_csim --write-aiesim-data`` writes."""
    written = aie_csim.write_aiesim_data(tmp_path)
    assert len(written) == 6
    for path in written:
        assert (AIE_DIR / "data" / path.name).read_text() == path.read_text(), f"{path.name} is out of date"
    assert aie_csim.check_sim_output(tmp_path) == [f"{tmp_path}/s_out.txt: missing", f"{tmp_path}/o_out.txt: missing"]


@needs_csim
def test_aiesim_data_through_kernels(exe, tmp_path) -> None:
    """The committed simulator inputs, run through the kernels' tile code, give the committed
    references (as an aiesimulator run should); the output checker accepts them."""
    data = AIE_DIR / "data"

    def stream(name: str) -> bytes:
        return aie_csim.parse_plio((data / f"{name}.txt").read_text(), aie_csim.PLIO_FILES[name]).tobytes()

    s = run_tb("qk", stream("q_in"), stream("k_in"), exe=exe)
    o = run_tb("pv", stream("v_in"), stream("p_in"), exe=exe)
    # Simulator-style output files: timestamps and TLAST lines are skipped by the checker.
    (tmp_path / "s_out.txt").write_text("T 100 ns\n" + aie_csim.format_plio(s, "int32"))
    (tmp_path / "o_out.txt").write_text(aie_csim.format_plio(o, "int32") + "TLAST\n")
    assert aie_csim.check_sim_output(tmp_path) == []
    (tmp_path / "o_out.txt").write_text(aie_csim.format_plio(o[:-16] + bytes(16), "int32"))
    assert "values differ" in aie_csim.check_sim_output(tmp_path)[0]

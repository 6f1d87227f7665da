"""The projection GEMM's AIE kernel (hw/aie/engine/gemm_kernels.h) in C-simulation (sim/gemm_csim.py), bit for bit
against golden's projections (QuantLinear.acc = X·Wᵀ + b, then golden requantize per output channel for Q/K/V, or
the int32 accumulators for Y of W_O), on the scalar and the vector path (over the counting AIE API emulation): many
random shapes and seeds (partial last tiles, several output-channel blocks, k = 1..4 kernels with every variant,
one or two row blocks a register block, extreme operands, per-channel shifts spread across a group) and real MiniLM
constants; the kernel's refusals; the golden fold of per-channel shifts; and its cost model
(hw/perf/gemm_proj.py): closed form EQUAL to the instrumented counts of every invocation, every operation with a
sourced cost, the committed data file what the model computes now."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import require_module

from vckattn.golden.fixedpoint import saturate, shift_round
from vckattn.golden.gemm_proj import GROUP, check_accumulator_range, fold_requant, pack_lanes
from vckattn.golden.quant_attention import QuantLinear
from vckattn.golden.requant import INT8, RequantRegisters, requant_registers, requantize
from vckattn.hw.perf import aie, gemm_proj

TOOLS = pytest.mark.tool("g++", "hls4ml")

#: builds (kernels, rows, cols, kslice, out_bits[, kslice_last]): every kernel variant (only / first, mid, last),
#: both outputs, RB = 1 (rows 12, 4) and 2, several column blocks and K-slices, a last K-slice shorter and longer
#: than the others'
BUILDS = [(2, 8, 32, 32, 8), (3, 12, 16, 16, 32), (1, 4, 16, 16, 8), (1, 8, 16, 32, 32), (4, 16, 32, 16, 8),
          (2, 16, 48, 48, 8), (3, 8, 16, 48, 8, 16), (4, 16, 48, 64, 32, 32), (2, 12, 32, 16, 8, 48)]


def _ids(b):
    return "k{}_r{}_c{}_s{}_o{}".format(*b) + ("_l{}".format(*b[5:]) if len(b) > 5 else "")


def golden_projection(lin: QuantLinear, x: np.ndarray, rq: RequantRegisters | None) -> np.ndarray:
    """What the sublayer computes (golden/sublayer.py through quant_attention): requantize(x·wᵀ + b) or x·wᵀ + b."""
    acc = lin.acc(x)
    return acc if rq is None else requantize(acc, rq)


def random_case(rng: np.random.Generator, p, case: int):
    """One random projection for build ``p``: rows not a multiple of the tile (a partial last tile), 1..3 column
    blocks, case 0: full-range int8 operands; case 1: extreme operands (all -128 rows / columns); case 2: shifts
    spread inside each group. Requantization ratios chosen so that the int8 outputs span their range."""
    n_rows = int(rng.integers(1, 3 * p.rows + 1))
    n_out = p.cols * int(rng.integers(1, 4))
    x = rng.integers(-128, 128, (n_rows, p.k)).astype(np.int8)
    w = rng.integers(-128, 128, (n_out, p.k)).astype(np.int8)
    if case == 1:
        x[0], w[:, 0], w[0] = -128, -128, -128
    std = 74.0 * 74.0 * np.sqrt(p.k)  # of x·wᵀ for uniform int8 operands
    bias = rng.integers(-int(std), int(std) + 1, n_out)
    if case == 1:
        bias[:2] = [(1 << 31) - 1 - 128 * 128 * p.k, -((1 << 31) - 1 - 128 * 128 * p.k)]
    lin = QuantLinear(w, np.ones(n_out), bias)
    rq = None
    if p.out_bits == 8:
        typical = 127 / (2.5 * std)  # ~2.5 sigma of x·wᵀ + b to the int8 range
        spread = 2.0 ** rng.uniform(-6, 6, n_out) if case == 2 else 2.0 ** rng.uniform(-1, 1, n_out)
        rq = requant_registers(typical * spread)
    return x, lin, rq


@TOOLS
@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("build", BUILDS, ids=_ids)
def test_bit_exact_against_golden_on_random_projections(build, vector):
    from vckattn.hw.spec.gemm import GemmParams
    from vckattn.sim.gemm_csim import run_gemm

    p = GemmParams(*build)
    rng = np.random.default_rng([20261126, *build, int(vector)])
    for i in range(6):  # each kind of case twice, different shapes and values
        case = i % 3
        x, lin, rq = random_case(rng, p, case)
        want = golden_projection(lin, x, rq)
        res = run_gemm(p, x, lin.w, lin.b, rq, vector=vector)
        assert res.ok, (res.status, res.leftover, res.missing)
        assert res.out.dtype == (np.int8 if p.out_bits == 8 else np.int32)
        assert np.array_equal(res.out.astype(np.int64), want), (case, np.argwhere(res.out != want)[:5])
        if p.out_bits == 8 and case == 0:  # not a degenerate requantization: many values, few saturated
            assert len(np.unique(want)) > min(40, want.size // 4) and np.mean(np.abs(want) >= 127) < 0.3
        t = -(-x.shape[0] // p.rows)
        assert [h["tile_id"] for h in res.headers] == list(range(t * (lin.w.shape[0] // p.cols)))
        assert all(h["cols"] == p.cols and h["elem_bits"] == p.out_bits for h in res.headers)
        assert [h["rows"] for h in res.headers[:t]] == [min(p.rows, x.shape[0] - r * p.rows) for r in range(t)]


@TOOLS
@pytest.mark.parametrize("build", BUILDS, ids=_ids)
def test_closed_form_equals_the_instrumented_counts_of_every_invocation(build):
    from vckattn.hw.spec.gemm import GemmParams
    from vckattn.sim.gemm_csim import run_gemm

    p = GemmParams(*build)
    x, lin, rq = random_case(np.random.default_rng(list(build)), p, 0)
    res = run_gemm(p, x, lin.w, lin.b, rq, vector=True, op_counts=True)
    # counting changes nothing
    assert res.ok and np.array_equal(res.out.astype(np.int64), golden_projection(lin, x, rq))
    n_tiles = len(res.headers)
    assert len(res.op_counts) == p.kernels * n_tiles
    for j in range(p.kernels):  # the kernel code's own data memory figure
        assert res.data_bytes[f"k{j}"] == gemm_proj.kernel_memory(gemm_proj.variant(j, p.kernels), p.rows, p.cols,
                                                                  p.kslice_of(j), p.out_bits)
    for inv in res.op_counts:
        assert inv["kernel"] == gemm_proj.variant(inv["j"], p.kernels)
        assert gemm_proj.op_counts(inv["kernel"], p.rows, p.cols, p.kslice_of(inv["j"]), p.out_bits) == \
            inv["counts"], inv
        for op in inv["counts"]:
            assert aie.COST_TABLE[op]["source"].strip(), op


@TOOLS
def test_bit_exact_on_real_minilm_projections():
    """Q, K, V (requantized per channel with the calibrated rq_q / rq_k / rq_v) and Y of W_O of a calibrated MiniLM
    sublayer (d_model 384: two 192-feature K-slices, the chosen tile shapes) on real hidden states, against golden's
    own trace."""
    require_module("transformers")
    from vckattn.golden.blocks import BertLayer
    from vckattn.golden.pretrained import load_minilm
    from vckattn.golden.stages import sublayer_int
    from vckattn.golden.sublayer import calibrate_encoder, quantize_input
    from vckattn.host.textdata import real_sentences
    from vckattn.hw.spec.gemm import GemmParams
    from vckattn.sim.gemm_csim import run_gemm

    tok, model = load_minilm(torch.float64)
    enc = tok(real_sentences(4), padding=True, truncation=True, max_length=24, return_tensors="pt")
    with torch.no_grad():
        hs = model(**enc, output_hidden_states=True).hidden_states
    keep = enc["attention_mask"].numpy().astype(bool)
    blk = BertLayer(384, 12, 1536).double().load_hf(model.encoder.layer[3])
    h = hs[3].numpy()
    sub = calibrate_encoder(blk.attn, blk.norm1, h, keep)
    _, tr = sublayer_int(sub, quantize_input(h, sub.attn.s_x), keep)
    x = tr["x"].reshape(-1, 384)
    layer = sub.attn
    for name, lin, rq in (("q", layer.q_proj, layer.rq_q), ("k", layer.k_proj, layer.rq_k),
                          ("v", layer.v_proj, layer.rq_v)):
        want = tr[name].transpose(0, 2, 1, 3).reshape(x.shape[0], -1)  # (B, H, S, D) -> tokens x channels
        assert np.array_equal(want, requantize(lin.acc(x), rq))
        vec = name == "q"  # the vector path on one projection keeps the test lean
        res = run_gemm(GemmParams(2, 16, 48, 192, 8), x, lin.w, lin.b, rq, vector=vec)
        assert res.ok and np.array_equal(res.out, want), name
    a = tr["a"].transpose(0, 2, 1, 3).reshape(x.shape[0], -1)
    res = run_gemm(GemmParams(2, 8, 48, 192, 32), a, layer.o_proj.w, layer.o_proj.b, None, vector=True)
    assert res.ok and np.array_equal(res.out, tr["y"].reshape(x.shape[0], -1))


@TOOLS
def test_kernel_refuses_misrouted_and_bad_buffers():
    from vckattn.hw.spec import streams
    from vckattn.hw.spec.gemm import GemmParams
    from vckattn.sim.gemm_csim import gemm_buffers, run_gemm

    p = GemmParams(2, 8, 16, 16, 8)
    x, lin, rq = random_case(np.random.default_rng(5), p, 0)
    xs, ws, t = gemm_buffers(p, x, lin.w, lin.b, rq)
    xb = p.x_buffer_bytes()

    def patched(buffers, j, i, kind, **fields):
        out = [bytearray(b) for b in buffers]
        size = xb if kind == "xtile" else p.w_buffer_bytes(j)
        beat = np.frombuffer(bytes(out[j][i * size:i * size + 16]), np.uint8)
        out[j][i * size:i * size + 16] = streams.encode(kind, **(streams.decode(kind, beat) | fields)).tobytes()
        return [bytes(b) for b in out]

    cases = [
        (patched(xs, 1, 1, "xtile", tag=t * 10), ws, "k1", 5),       # a tile the held weights do not serve
        (patched(xs, 0, 0, "xtile", slice=1), ws, "k0", 1),          # another kernel's K-slice
        (patched(xs, 0, 0, "xtile", rows=p.rows + 1), ws, "k0", 2),  # more rows than the tile
        (xs, patched(ws, 1, 0, "wslice", op=streams.OP_LOAD_K), "k1", 3),
        (patched(xs, 0, 1, "xtile", tag=t * 10), ws, "k0", 5),
    ]
    cases.append((xs, patched(ws, 1, 0, "wslice", packet_id=0), "k1", 3))  # kernel 0's weights
    for xs2, ws2, kernel, code in cases:
        res = run_gemm(p, x, lin.w, lin.b, rq, buffers=(xs2, ws2, t))
        assert res.status[kernel][0] == code and not res.ok, (kernel, code, res.status)
    # a w PLIO shared by two cascades: the second cascade's kernel j takes the packets of id KERNELS + j
    shared = patched(patched(ws, 0, 0, "wslice", packet_id=p.kernels), 1, 0, "wslice", packet_id=p.kernels + 1)
    assert run_gemm(p, x, lin.w, lin.b, rq, buffers=(xs, shared, t)).ok
    # a cascade out of step: kernel 0 passes tile 0's partial sums as tile 1's (the tag of its x buffer 1 and of
    # kernel 1's differ) -> kernel 1 names the misrouted cascade
    xs2 = patched(patched(xs, 0, 0, "xtile", tag=1), 0, 1, "xtile", tag=0)
    res = run_gemm(p, x, lin.w, lin.b, rq, buffers=(xs2, ws, t))
    assert res.status["k1"][0] == 6


def test_fold_of_per_channel_shifts_is_exact_and_refuses_what_does_not_fit():
    """golden's requantize == saturate8(round_half_up(acc·mult32·2^-S_g)) with one shift per 8-channel group."""
    rng = np.random.default_rng(3)
    n = 64
    rq = requant_registers(2.0 ** rng.uniform(-20, -8, n))
    mult, shift = fold_requant(rq, n)
    assert shift.shape == (n // GROUP,) and np.all(np.abs(mult) < 1 << 31)
    acc = rng.integers(-(1 << 30), 1 << 30, (200, n))
    acc[:3] = np.array([(1 << 31) - 1, -(1 << 31), 0])[:, None]
    ours = saturate(shift_round(acc * mult, np.repeat(shift, GROUP), "half_up"), INT8)
    assert np.array_equal(ours, requantize(acc, rq))
    lanes = pack_lanes(mult)
    assert lanes.shape == (n // GROUP, 32) and lanes[2, 3 * 8 + 5] == mult[2 * 8 + 5]
    with pytest.raises(ValueError, match="does not fit"):  # shifts 20 apart in one group: 2^17 · 2^20 > 2^31
        fold_requant(RequantRegisters(np.full(8, 1 << 16), np.array([30] + [10] * 7)), 8)
    with pytest.raises(ValueError, match="multiple of 8"):
        fold_requant(rq, 12)
    check_accumulator_range(np.array([(1 << 31) - 1 - 128 * 128 * 64]), 64)
    with pytest.raises(ValueError, match="may not fit 32 bits"):
        check_accumulator_range(np.array([(1 << 31) - 128 * 128 * 64]), 64)


@pytest.mark.parametrize("kernel", gemm_proj.KERNELS)
@pytest.mark.parametrize("rows, cols, kslice, out_bits", [(16, 64, 128, 8), (16, 64, 128, 32), (12, 32, 48, 8),
                                                          (4, 16, 16, 32)])
def test_cycles_respect_physical_bounds(kernel, rows, cols, kslice, out_bits):
    cyc = gemm_proj.invocation_cycles(kernel, rows, cols, kslice, out_bits)
    macs = gemm_proj.invocation_macs(kernel, rows, cols, kslice, out_bits)
    assert cyc["total"] >= macs / aie.PEAK_MACS_PER_CYCLE + cyc["overhead"]
    assert cyc["total"] == pytest.approx(sum(v for k, v in cyc.items() if k != "total"))
    assert 0 < gemm_proj.efficiency(kernel, rows, cols, kslice, out_bits) < 1


def test_hand_count_of_the_default_shape():
    """16 rows x 64 channels x 128 features: 16·64·128 MACs in mmul<4,16,8> of 4 vector issues = 1024 cycles of
    macs; the last int8 kernel adds 4 vector issues (lmul8 x 4) a 4x8 block for the multiply: 32 blocks, in the drain
    after each register block's loop. 2x1 register blocks: 2 row-block pairs x 8 column blocks = 16 loop entries."""
    ph = gemm_proj.phase_counts("last", 16, 64, 128, 8)
    assert ph["mmul"]["mmul<4,16,8,int8,int8>.mac"] == 16 * 64 * 128 // 512
    assert ph["drain"]["mul<acc80,32,int32,int32>"] == 16 // 4 * 64 // 8
    assert aie.phase_cycles(ph["mmul"])["vector"] == 1024
    assert aie.phase_cycles(ph["drain"])["vector"] == 4 * 32
    mid = gemm_proj.phase_counts("mid", 16, 64, 128)["drain"]
    assert mid["readincr_v<8>(input_cascade<acc48>)"] == mid["writeincr(output_cascade<acc48>)"] == 32 * 4
    assert gemm_proj.loop_invocations("mid", 16, 64, 128)["mmul"] == 2 * 8
    assert gemm_proj.invocation_cycles("mid", 16, 64, 128)["mmul"] == 1024 + 16 * aie.loop_fill_cycles()


def test_data_file_matches_the_model():
    from vckattn.sim.gemm_proj_perf import COMMAND, MEASURED, SHAPES

    data = gemm_proj.load_data()
    assert data["generated_by"] == COMMAND
    assert [tuple(b["build"]) for b in data["builds"]] == [tuple(m) for m in MEASURED]
    for b in data["builds"]:
        _, rows, cols, kslice, out_bits = b["build"]
        for row in b["invocations"]:
            args = (row["kernel"], rows, cols, kslice, out_bits)
            assert row["closed_form_equal"] is True
            assert gemm_proj.op_counts(*args) == row["counts"]
            assert row["cycles"] == json.loads(json.dumps(gemm_proj.invocation_cycles(*args)))
            for op in row["counts"]:
                assert data["cost_table"][op] == json.loads(json.dumps(aie.COST_TABLE[op]))
    assert [(r["rows"], r["cols"], r["kslice"], r["out_bits"], r["kernel"]) for r in data["shapes"]] == \
        [(*s, o, k) for s in SHAPES for o in (8, 32) for k in gemm_proj.KERNELS]
    for r in data["shapes"]:
        assert r["data_bytes"] == gemm_proj.kernel_memory(r["kernel"], r["rows"], r["cols"], r["kslice"], r["out_bits"])
        assert r["efficiency"] == pytest.approx(gemm_proj.efficiency(r["kernel"], r["rows"], r["cols"], r["kslice"],
                                                                     r["out_bits"]))


def test_overheads_read_the_calibration_and_loops_enter_per_block():
    """The per-invocation overhead is the calibration's per-port hand-off times the sync ports the variant locks (x,
    and the out buffer of the last kernel); 12 rows (RB = 1, three row blocks) x 32 channels (4 column blocks): 12 loop
    entries; the 128-bit loads balance even and odd words: no bank conflict."""
    from vckattn.hw.perf import calibration

    per_port = calibration.param("sync_cycles_per_port")
    for kernel, ports in (("first", 1), ("mid", 1), ("last", 2), ("only", 2)):
        assert gemm_proj.invocation_cycles(kernel, 12, 32, 48, 8)["overhead"] == pytest.approx(per_port * ports)
        assert gemm_proj.loop_invocations(kernel, 12, 32, 48, 8)["mmul"] == 3 * 4
        assert gemm_proj.bank_conflicts(kernel, 12, 32, 48, 8) == 0
    mmul = gemm_proj.phase_counts("mid", 12, 32, 48, 8)["mmul"]
    assert mmul["load_v<16,int8>"] == 12 * 3 * (4 + 8)  # per entry 3 feature blocks of one X and one W^T block
    cyc = gemm_proj.invocation_cycles("mid", 12, 32, 48, 8)
    # 12 loads a feature block, two a cycle: 6 cycles, load-bound over the mmul's 4 vector issues
    assert cyc["mmul"] == 12 * 3 * 6 + 12 * aie.loop_fill_cycles()


def test_balanced_cascade_is_the_fastest_split_that_fits():
    """The last kernel also drains the tile (requantization, int32 stores), so a cascade is fastest with a shorter
    last K-slice: gemm_proj.balanced finds it, within a kernel's data memory, and never picks a slower split."""
    from vckattn.hw.spec.gemm import GemmParams

    room = 28672  # a tile's 32 KiB less the runtime's 4 KiB reserve
    for rows, out_bits in ((16, 8), (8, 32)):
        p = gemm_proj.balanced(4, rows, 48, 768, out_bits, room)
        even = GemmParams(4, rows, 48, 192, out_bits)
        assert p.k == 768 and p.slices[-1] < p.kslice and p.data_bytes() <= room
        assert gemm_proj.cascade_cycles(p) < 0.93 * gemm_proj.cascade_cycles(even)
        # its kernels closer together than the even split's
        per = [gemm_proj.invocation_cycles(gemm_proj.variant(j, 4), rows, 48, p.kslice_of(j), out_bits)["total"]
               for j in range(4)]
        per_even = [gemm_proj.invocation_cycles(gemm_proj.variant(j, 4), rows, 48, 192, out_bits)["total"]
                    for j in range(4)]
        assert max(per) - min(per) < max(per_even) - min(per_even)
        for ks in range(16, 253, 16):  # no split that fits is faster
            q = GemmParams(4, rows, 48, ks, out_bits, kslice_last=768 - 3 * ks)
            if q.data_bytes() <= room:
                assert gemm_proj.cascade_cycles(q) >= gemm_proj.cascade_cycles(p)
    # the memory bounds the choice: room for the even split only -> the even split
    even = GemmParams(4, 16, 48, 192, 8)
    assert gemm_proj.balanced(4, 16, 48, 768, 8, even.data_bytes()) == GemmParams(4, 16, 48, 192, 8, kslice_last=192)
    with pytest.raises(ValueError, match="fits"):
        gemm_proj.balanced(4, 16, 48, 768, 8, 1000)
    with pytest.raises(ValueError, match="multiples of 16"):
        gemm_proj.balanced(4, 16, 48, 760, 8)
    assert gemm_proj.balanced(1, 8, 16, 64, 32).slices == (64,)

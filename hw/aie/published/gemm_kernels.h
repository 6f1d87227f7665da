// Published AIE1 GEMM kernels, rendered for g++ so that the performance model can count their
// operations (hw/perf/gemm_kernels.py validates its cost path against the designs built from them,
// hw/perf/published.py). These are NOT vckattn kernels and are never built for the AIE here.
//
// Each rendering keeps the published kernel's structure call for call -- the same AIE API calls or
// AIE1 intrinsics, the same register blocking, the same loop nest and trip counts, the same pointer
// walk over the same data layout -- written anew over the counting emulations aie_api_emu.h (AIE API)
// and aie1_intrinsics_emu.h (ADF windows, AIE1 fp32 intrinsics). What differs, and why it does not
// change the operation counts:
// * loop bounds are run-time arguments (the published kernels use compile-time macros, so that
//   `chess_flatten_loop` can unroll them); the model (hw/perf/gemm_kernels.py) charges the loop
//   structure of the published code, not of this rendering;
// * the compiler pragmas (chess_flatten_loop, chess_prepare_for_pipelining, chess_loop_range) are
//   noted in comments; they change the schedule, never the calls;
// * the published code's commented-out profiling lines are left out.
//
// Sources (read from the public repositories):
// * MaxEVA (Taka et al., FPT 2023), github.com/enyac-group/MaxEVA, commit b73f85b1:
//   Pattern1_int8/src/kernels/kernels.cc `opt_blocked_matrix_mult` and `vectorized_add`,
//   Pattern1_int8/src/kernels/include.h (M_API 4, K_API 8, N_API 4; single_M/K/N 32/128/32; SHIFT 0).
//   The fp32 patterns use CHARM's kernel (Pattern1_fp32/src/kernels/include.h: "From CHARM";
//   Pattern2_fp32/src/kernels/kernels.cc `mm_kernel0`, the same code) and the same `vectorized_add`
//   over floats.
// * CHARM (Zhuang et al., FPGA 2023), github.com/arc-research-lab/CHARM: `mm_kernel0` (README:
//   "achieves 95% efficiency when calculating 32*32*32 MM", src/aie/mm_kernel0.cc) and `mm_kernel1`
//   (example/MLP/one_specialized/aie/mm_kernel1.cc: the same loop, its accumulators first read from an
//   `acc_in` window of partial sums).
// * ARIES (Zhuang et al., FPGA 2025), github.com/arc-research-lab/Aries, commit 30013db:
//   templates/aie1/adf/kernel_mm/aie_fp32_v0/kernel_gemm0.cc and kernel_gemm.cc (see its section).
#ifndef VCKATTN_PUBLISHED_GEMM_KERNELS_H
#define VCKATTN_PUBLISHED_GEMM_KERNELS_H

#include "../aie1_intrinsics_emu.h"
#include "../aie_api_emu.h"

namespace published {

// ------------------------------------------------------------------------------------------------
// MaxEVA int8: C (m x n, int32) = A (m x k, int8) * B (k x n, int8) with aie::mmul<4,8,4,int8,int8>
// ------------------------------------------------------------------------------------------------
//
// Data layout ("blocked format", MaxEVA's kernels.cc): A as (m/4) x (k/8) blocks of 4 x 8, block rows
// one after the other, each block row-major (32 bytes); B as (k/8) x (n/4) blocks of 8 x 4, likewise;
// C as (m/4) x (n/4) blocks of 4 x 4 int32, likewise.
//
// Structure: 2 x 2 register blocking -- for each pair of block rows (i, i+1) and pair of block
// columns (j, j+1), four accumulators C00 C01 C10 C11 (four aie::mmul, i.e. all four 768-bit
// accumulator registers bm0..bm3 of AIE1); per step of K: two A blocks and two B blocks loaded
// (256-bit each) and four mmul calls; the first step `mul`, the k/8 - 1 others `mac`; then the four
// results shifted by SHIFT to int32 (to_vector) and stored (512 bits each). All three loops carry
// `chess_flatten_loop` in MaxEVA (`chess_prepare_for_pipelining` is commented out). The model flattens a
// loop only where the straight-line code fits the 16 KB program memory (hw/perf/gemm_kernels.py
// `flattened_levels`): for 32x128x32 the j and k loops, not the i loop.
inline void maxeva_int8_matmul(input_window_int8* mat_a, input_window_int8* mat_b, output_window_int32* mat_c,
                               unsigned m, unsigned k, unsigned n, int shift = 0) {
    using MMUL = aie::mmul<4, 8, 4, int8, int8>;
    if (m % 8 || n % 8 || k % 8 || k == 0)
        aie1_emu::fail("maxeva_int8_matmul: m and n must be multiples of 8 (2 x 2 blocks of 4), k of 8");
    const unsigned row_blocks = m / 4, k_steps = k / 8, col_blocks = n / 4;
    const int8* a = mat_a->ptr;
    const int8* b = mat_b->ptr;
    int32* c = mat_c->ptr;

    for (unsigned i = 0; i < row_blocks; i += 2) {  // chess_flatten_loop
        int32* c_top = c + i * col_blocks * MMUL::size_C;
        int32* c_bottom = c + (i + 1) * col_blocks * MMUL::size_C;

        for (unsigned j = 0; j < col_blocks; j += 2) {  // chess_flatten_loop
            const int8* a_top = a + i * k_steps * MMUL::size_A;
            const int8* a_bottom = a + (i + 1) * k_steps * MMUL::size_A;
            const int8* b_left = b + j * MMUL::size_B;
            const int8* b_right = b + (j + 1) * MMUL::size_B;

            aie::vector<int8, MMUL::size_A> a0 = aie::load_v<MMUL::size_A>(a_top);
            a_top += MMUL::size_A;
            aie::vector<int8, MMUL::size_A> a1 = aie::load_v<MMUL::size_A>(a_bottom);
            a_bottom += MMUL::size_A;
            aie::vector<int8, MMUL::size_B> b0 = aie::load_v<MMUL::size_B>(b_left);
            b_left += MMUL::size_B * col_blocks;
            aie::vector<int8, MMUL::size_B> b1 = aie::load_v<MMUL::size_B>(b_right);
            b_right += MMUL::size_B * col_blocks;

            MMUL c00, c01, c10, c11;
            c00.mul(a0, b0);
            c01.mul(a0, b1);
            c10.mul(a1, b0);
            c11.mul(a1, b1);

            for (unsigned s = 0; s + 1 < k_steps; ++s) {  // chess_flatten_loop
                a0 = aie::load_v<MMUL::size_A>(a_top);
                a_top += MMUL::size_A;
                a1 = aie::load_v<MMUL::size_A>(a_bottom);
                a_bottom += MMUL::size_A;
                b0 = aie::load_v<MMUL::size_B>(b_left);
                b_left += MMUL::size_B * col_blocks;
                b1 = aie::load_v<MMUL::size_B>(b_right);
                b_right += MMUL::size_B * col_blocks;

                c00.mac(a0, b0);
                c01.mac(a0, b1);
                c10.mac(a1, b0);
                c11.mac(a1, b1);
            }

            aie::store_v(c_top, c00.template to_vector<int32>(shift));
            c_top += MMUL::size_C;
            aie::store_v(c_top, c01.template to_vector<int32>(shift));
            c_top += MMUL::size_C;
            aie::store_v(c_bottom, c10.template to_vector<int32>(shift));
            c_bottom += MMUL::size_C;
            aie::store_v(c_bottom, c11.template to_vector<int32>(shift));
            c_bottom += MMUL::size_C;
        }
    }
}

// ------------------------------------------------------------------------------------------------
// MaxEVA's adder-tree kernel: out = in_1 + in_2, 8 lanes a step (int32 for int8 designs, float for fp32)
// ------------------------------------------------------------------------------------------------
//
// `vectorized_add`: one loop (`chess_flatten_loop`) of elems / 8 steps, each two window_readincr_v<8>,
// one aie::add and one window_writeincr.
template <class T>
void maxeva_vector_add(input_window<T>* in_1, input_window<T>* in_2, output_window<T>* out, unsigned elems) {
    if (elems % 8) aie1_emu::fail("maxeva_vector_add: elems must be a multiple of 8");
    for (unsigned i = 0; i < elems / 8; ++i) {  // chess_flatten_loop
        const aie::vector<T, 8> x = window_readincr_v<8>(in_1);
        const aie::vector<T, 8> y = window_readincr_v<8>(in_2);
        window_writeincr(out, aie::add(x, y));
    }
}

// ------------------------------------------------------------------------------------------------
// CHARM fp32: C (h1 x w2) = A (h1 x w1) * B (w1 x w2) [+ acc_in], all column-major, fpmac intrinsics
// ------------------------------------------------------------------------------------------------
//
// Structure (CHARM's mm_kernel0 / mm_kernel1): the output is walked in blocks of 8 rows x 2 columns
// (loops i < h1/8 and j < w2/2, both `chess_prepare_for_pipelining chess_loop_range`); two v8float
// accumulators acc0 / acc1 hold the block's two columns (zero, or read from `acc_in` in mm_kernel1).
// The reduction runs in groups of 8: a loop of w1/8 - 1 iterations (`chess_prepare_for_pipelining
// chess_loop_range(boundary_k,)`, its 16 fpmac unrolled by hand) and the last group written out after
// the loop, where the block is stored (two window_write). Each fpmac multiplies 8 rows of one A column
// (a 256-bit half of the v16float A buffer) by one B element (broadcast from the v16float B buffer);
// the A buffer is refilled a column ahead (window_read_v8 + upd_w), the B buffer 4 elements of each of
// the two columns at a time (window_read_v4 + upd_v). The windows' circular addressing carries the
// pointers from one block to the next (`jump`: + h1 normally, h1 + 8 at the end of a block row, 8 at the
// very end).
template <bool AccIn>
void charm_fp32_matmul(input_window_float* mat_a, input_window_float* mat_b, input_window_float* acc_in,
                       output_window_float* mat_c, int h1, int w1, int w2) {
    if (h1 % 8 || w1 % 8 || w2 % 2 || h1 <= 0 || w1 <= 0 || w2 <= 0)
        aie1_emu::fail("charm_fp32_matmul: h1 and w1 must be positive multiples of 8, w2 of 2");
    const int boundary_i = h1 / 8, boundary_j = w2 / 2, boundary_k = w1 / 8 - 1;
    const int judge_i = boundary_i - 1, judge_j = boundary_j - 1;

    v16float buf_b = undef_v16float();
    v16float buf_a = undef_v16float();
    buf_b = upd_v(buf_b, 0, window_read_v4(mat_b));
    window_incr(mat_b, w1);
    buf_b = upd_v(buf_b, 1, window_read_v4(mat_b));
    window_decr(mat_b, w1 - 4);
    buf_a = upd_w(buf_a, 0, window_read_v8(mat_a));
    window_incr(mat_a, h1);

    // One group of 8 reduction steps: 16 fpmac over the two halves of buf_b (B rows r..r+3, then r+4..r+7
    // of both columns), refilling buf_a a column ahead and buf_b for the next group. `last` is the group
    // after the loop: the A pointer takes `jump` at its third refill, the block is written out, and the B
    // pointer moves on to the next column pair.
    auto group = [&](v8float& acc0, v8float& acc1, bool last, int jump) {
        for (int half = 0; half < 2; ++half) {
            for (int t = 0; t < 4; ++t) {
                const int xstart = (t % 2) * 8;  // the group's column 4*half + t sits in buf_a's half t % 2
                acc0 = fpmac(acc0, buf_a, xstart, 0x76543210, ext_w(buf_b, half), t, 0x0);
                if (last && half == 1 && t == 3) {
                    window_write(mat_c, acc0);
                    window_incr(mat_c, h1);
                }
                buf_a = upd_w(buf_a, 1 - t % 2, window_read_v8(mat_a));
                window_incr(mat_a, (last && half == 1 && t == 2) ? jump : h1);
                if (half == 0 && t == 0) {
                    buf_b = upd_v(buf_b, 2, window_read_v4(mat_b));
                    window_incr(mat_b, w1);
                }
                if (half == 1 && t == 3) {
                    buf_b = upd_v(buf_b, 0, window_read_v4(mat_b));
                    window_incr(mat_b, w1);
                }
                acc1 = fpmac(acc1, buf_a, xstart, 0x76543210, ext_w(buf_b, half), 4 + t, 0x0);
                if (last && half == 1 && t == 3) {
                    window_write(mat_c, acc1);
                    window_incr(mat_c, jump);
                }
                if (half == 0 && t == 0) {
                    buf_b = upd_v(buf_b, 3, window_read_v4(mat_b));
                    if (last)
                        window_incr(mat_b, 4);
                    else
                        window_decr(mat_b, w1 - 4);
                }
                if (half == 1 && t == 3) {
                    buf_b = upd_v(buf_b, 1, window_read_v4(mat_b));
                    window_decr(mat_b, w1 - 4);
                }
            }
        }
    };

    for (int i = 0; i < boundary_i; ++i) {      // chess_prepare_for_pipelining chess_loop_range(boundary_i,)
        for (int j = 0; j < boundary_j; ++j) {  // chess_prepare_for_pipelining chess_loop_range(boundary_j,)
            v8float acc0, acc1;
            int jump = h1;
            if (j == judge_j) jump = (i == judge_i) ? 8 : h1 + 8;
            if (AccIn) {
                acc0 = window_read_v8(acc_in);
                window_incr(acc_in, h1);
                acc1 = window_read_v8(acc_in);
                window_incr(acc_in, jump);
            } else {
                acc0 = null_v8float();
                acc1 = null_v8float();
            }
            for (int s = 0; s < boundary_k; ++s)  // chess_prepare_for_pipelining chess_loop_range(boundary_k,)
                group(acc0, acc1, false, jump);
            group(acc0, acc1, true, jump);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// ARIES fp32: C (TI x TJ) = A (TI x TK) * B (TK x TJ) [+ accin], all row-major, fpmac intrinsics on
// aie::vector registers
// ------------------------------------------------------------------------------------------------
//
// Source: ARIES (Zhuang et al., FPGA 2025), github.com/arc-research-lab/Aries, commit 30013db:
// templates/aie1/adf/kernel_mm/aie_fp32_v0/kernel_gemm0.cc (`kernel_gemm0`: accumulators start at zero)
// and kernel_gemm.cc (`kernel_gemm`: accumulators first read from the partial-sum buffer `in2`), the
// kernel the FCCM25 tutorial's GEMM examples instantiate (external_path="aie1/adf/kernel_mm/aie_fp32_v0").
//
// Structure: the output is walked in blocks of 2 rows x 8 columns (loops i < TI/2 and j < TJ/8, both
// `chess_prepare_for_pipelining chess_loop_range`); two aie::vector<float,8> accumulators acc0 / acc1
// hold the block's two rows. Per j iteration the three pointer jumps are chosen by `if (j == judge_j)`
// (the last block of a block row moves A to the next row pair). The reduction runs in groups of 8: a
// loop of TK/8 - 1 iterations (`chess_prepare_for_pipelining chess_loop_range(boundary_k,boundary_k)`,
// 16 fpmac unrolled by hand) and the last group written out after the loop, where the block is stored
// (two aie::store_v). Each fpmac multiplies one B row segment (8 columns, a 256-bit half of rhs_v16) by
// one A element (lane of lhs_v16.extract<8>(h)); lhs_v16 is filled 4 elements of each of the two rows at
// a time (4 x insert(aie::load_v<4>)), rhs_v16 one B row ahead (8 x insert(aie::load_v<8>) a group).
// Rendering notes: `v.insert(idx, x)` is written `aries_insert(v, idx, x)` (aie_api_emu.h has no
// vector::insert; counted under the aie_api call's name); the aie::vector <-> v8float / v16float
// conversions around the fpmac intrinsic are the aie_api vector's native-type conversions (the same
// register, no instruction) and are not counted.
template <unsigned M>
inline void aries_insert(aie::vector<float, 16>& v, unsigned idx, const aie::vector<float, M>& x) {
    static std::uint64_t& count = aie::emu::op_counter(aie::emu::key("insert<%u>(vector<float,16>)", M));
    ++count;
    if (idx >= 16 / M) aie1_emu::fail("aries_insert: index out of range");
    for (unsigned i = 0; i < M; ++i) v.v[M * idx + i] = x.v[i];
}

inline v8float aries_native(const aie::vector<float, 8>& x) {
    v8float r;
    for (unsigned i = 0; i < 8; ++i) r.v[i] = x.v[i];
    return r;
}
inline v16float aries_native(const aie::vector<float, 16>& x) {
    v16float r;
    for (unsigned i = 0; i < 16; ++i) r.v[i] = x.v[i];
    return r;
}
inline aie::vector<float, 8> aries_vector(const v8float& x) {
    aie::vector<float, 8> r;
    for (unsigned i = 0; i < 8; ++i) r.v[i] = x.v[i];
    return r;
}
inline aie::vector<float, 16> aries_vector(const v16float& x) {
    aie::vector<float, 16> r;
    for (unsigned i = 0; i < 16; ++i) r.v[i] = x.v[i];
    return r;
}

// acc = fpmac(acc, rhs_v16, xstart, 0x76543210, lhs_v16.extract<8>(h), zstart, 0x0), as ARIES writes it.
inline void aries_fpmac(aie::vector<float, 8>& acc, const aie::vector<float, 16>& rhs_v16, int xstart,
                        const aie::vector<float, 16>& lhs_v16, unsigned h, int zstart) {
    acc = aries_vector(fpmac(aries_native(acc), aries_native(rhs_v16), xstart, 0x76543210,
                             aries_native(lhs_v16.extract<8>(h)), zstart, 0x0));
}

template <bool AccIn>
void aries_fp32_matmul(const float* in0, const float* in1, const float* in2, float* out0, int TI, int TJ, int TK) {
    if (TI % 2 || TJ % 8 || TK % 8 || TI <= 0 || TJ <= 0 || TK <= 0)
        aie1_emu::fail("aries_fp32_matmul: TI must be a positive multiple of 2, TJ and TK of 8");
    const int boundary_i = TI / 2, boundary_j = TJ / 8, boundary_k = TK / 8 - 1;
    const int judge_j = boundary_j - 1;
    const int lhs_jump0 = TK - 4, lhs_jump1 = 2 * TK - 4, lhs_jump2 = -4;
    const int rhs_jump0 = (TK - 1) * TJ - 8, rhs_jump1 = TK * TJ - 8;
    const int out_jump0 = TJ - 8, out_jump1 = -8;
    const float* lhs = in0;
    const float* rhs = in1;
    const float* accin = in2;
    float* out = out0;

    aie::vector<float, 16> lhs_v16 = aries_vector(undef_v16float());
    aie::vector<float, 16> rhs_v16 = aries_vector(undef_v16float());

    // One group of 8 reduction steps, call for call: `last` is the group after the loop (A and B take
    // the block's jumps at their last loads, the block is stored).
    auto group = [&](aie::vector<float, 8>& acc0, aie::vector<float, 8>& acc1, bool last, int jump_lhs,
                     int jump_rhs, int jump_out) {
        aries_insert(lhs_v16, 0, aie::load_v<4>(lhs));
        lhs += TK;
        aries_insert(rhs_v16, 0, aie::load_v<8>(rhs));
        rhs += TJ;
        aries_insert(lhs_v16, 1, aie::load_v<4>(lhs));
        lhs -= lhs_jump0;

        aries_fpmac(acc0, rhs_v16, 0, lhs_v16, 0, 0);
        aries_insert(lhs_v16, 2, aie::load_v<4>(lhs));
        lhs += TK;
        aries_insert(rhs_v16, 1, aie::load_v<8>(rhs));
        rhs += TJ;
        aries_fpmac(acc1, rhs_v16, 0, lhs_v16, 0, 4);
        aries_insert(lhs_v16, 3, aie::load_v<4>(lhs));
        lhs -= last ? jump_lhs : lhs_jump0;

        aries_fpmac(acc0, rhs_v16, 8, lhs_v16, 0, 1);
        aries_insert(rhs_v16, 0, aie::load_v<8>(rhs));
        rhs += TJ;
        aries_fpmac(acc1, rhs_v16, 8, lhs_v16, 0, 5);

        aries_fpmac(acc0, rhs_v16, 0, lhs_v16, 0, 2);
        aries_insert(rhs_v16, 1, aie::load_v<8>(rhs));
        rhs += TJ;
        aries_fpmac(acc1, rhs_v16, 0, lhs_v16, 0, 6);

        aries_fpmac(acc0, rhs_v16, 8, lhs_v16, 0, 3);
        aries_insert(rhs_v16, 0, aie::load_v<8>(rhs));
        rhs += TJ;
        aries_fpmac(acc1, rhs_v16, 8, lhs_v16, 0, 7);

        aries_fpmac(acc0, rhs_v16, 0, lhs_v16, 1, 0);
        aries_insert(rhs_v16, 1, aie::load_v<8>(rhs));
        rhs += TJ;
        aries_fpmac(acc1, rhs_v16, 0, lhs_v16, 1, 4);

        aries_fpmac(acc0, rhs_v16, 8, lhs_v16, 1, 1);
        aries_insert(rhs_v16, 0, aie::load_v<8>(rhs));
        rhs += TJ;
        aries_fpmac(acc1, rhs_v16, 8, lhs_v16, 1, 5);

        aries_fpmac(acc0, rhs_v16, 0, lhs_v16, 1, 2);
        aries_insert(rhs_v16, 1, aie::load_v<8>(rhs));
        if (last)
            rhs -= jump_rhs;
        else
            rhs += TJ;
        aries_fpmac(acc1, rhs_v16, 0, lhs_v16, 1, 6);

        aries_fpmac(acc0, rhs_v16, 8, lhs_v16, 1, 3);
        if (last) {
            aie::store_v(out, acc0);
            out += TJ;
        }
        aries_fpmac(acc1, rhs_v16, 8, lhs_v16, 1, 7);
        if (last) {
            aie::store_v(out, acc1);
            out -= jump_out;
        }
    };

    for (int i = 0; i < boundary_i; ++i) {      // chess_prepare_for_pipelining chess_loop_range(boundary_i,boundary_i)
        for (int j = 0; j < boundary_j; ++j) {  // chess_prepare_for_pipelining chess_loop_range(boundary_j,boundary_j)
            aie::vector<float, 8> acc0, acc1;
            if (!AccIn) {
                acc0 = aries_vector(null_v8float());
                acc1 = aries_vector(null_v8float());
            }
            int jump_lhs = lhs_jump1, jump_rhs = rhs_jump0, jump_out = out_jump0;
            if (j == judge_j) {
                jump_lhs = lhs_jump2;
                jump_rhs = rhs_jump1;
                jump_out = out_jump1;
            }
            if (AccIn) {
                acc0 = aie::load_v<8>(accin);
                accin += TJ;
                acc1 = aie::load_v<8>(accin);
                accin -= jump_out;
            }
            for (int k = 0; k < boundary_k; ++k)  // chess_prepare_for_pipelining chess_loop_range(boundary_k,boundary_k)
                group(acc0, acc1, false, jump_lhs, jump_rhs, jump_out);
            group(acc0, acc1, true, jump_lhs, jump_rhs, jump_out);
        }
    }
}

}  // namespace published

#endif

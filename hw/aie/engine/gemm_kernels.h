// Per-tile logic of the projection GEMM's AIE kernels (hw/ENGINE.md "The projection GEMM"), written once as
// templates over a buffer adapter, so that the g++ C-simulation (sim/cpp/gemm_proj_tb.cpp) runs exactly the code
// the AI Engine runs.
//
//   gemm_tile<J, OUT_BITS>  one invocation of kernel J of a cascade of KERNELS kernels per tile: computes one
//       ROWS x COLS output tile of X W^T over the K-slice J (input features [J*KSLICE, J*KSLICE + kslice(J)):
//       KSLICE features for every kernel but the last, KSLICE_LAST for the last).
//       x buffer (sync): XTILE header + the X tile slice (A layout of mmul<4,16,8>: 4x16 blocks);
//       w buffer (async: acquired at the first tile that uses it, released after its `tiles`-th): WSLICE header +
//       the weight slice (B layout: 16x8 blocks of W^T) + the kernel's per-channel constants:
//         J = 0:               the int32 bias, one 32-lane vector per 8-channel group (golden/gemm_proj.py
//                              pack_lanes): the accumulators START from it (exact: acc48 lanes)
//         J = KERNELS-1, int8: the folded multipliers mult32 (32-lane int32 vector per group) and the group's
//                              shift (int32 per group, padded to 16 bytes): golden/gemm_proj.py fold_requant
//       partial sums in the cascade accumulator, block by block: from the bias (J = 0) or the cascade (J > 0),
//       plus X_J W_J^T, to the cascade (J < KERNELS-1) or, for the last kernel, into the out buffer:
//         OUT_BITS = 8  (Q/K/V): GRESULT header + sat_int8(round_half_up(acc x mult32 >> shift_g)), ROWS x COLS
//                       row-major (golden requantize, bit-exact: golden/gemm_proj.py)
//         OUT_BITS = 32 (Y of W_O): GRESULT header + acc (int32: X W^T + b), ROWS x COLS row-major
// Before the blocks one cascade word per tile carries [tile_id, rows, col_block] (J > 0 checks it). Block order on
// the cascade (both paths): row-block groups of RB, column-block pairs, then per column block of the pair the
// group's RB blocks; each block is 4 cascade words (its 4 rows, 8 lanes).
//
// Header fields only through the generated ../generated/engine_streams.h (VCKATTN_GET / VCKATTN_PUT).
//
// Build parameters (macros; -D in the C-simulation): VCKATTN_GEMM_KERNELS (cascade length k), VCKATTN_GEMM_ROWS
// (rows of X per call, multiple of 4), VCKATTN_GEMM_COLS (output channels per kernel, multiple of 16),
// VCKATTN_GEMM_KSLICE (input features of every kernel but the last, multiple of 16), VCKATTN_GEMM_KSLICE_LAST (the
// last kernel's, multiple of 16: K = (k-1) x KSLICE + KSLICE_LAST; a shorter last slice lets the last kernel, which
// also drains the tile, finish with the others). Every loop has a compile-time trip count.
// Range: |X W^T + b| < 2^31 (golden/gemm_proj.py check_accumulator_range: 128 x 128 x K + max|b| < 2^31).
//
// Statuses: a kernel that reads a header it cannot act on returns a GemmStatus != GEMM_OK without writing its
// output for that tile (the graph stalls; the C-simulation reports it and stops that kernel).
//
// Compute paths: the scalar reference (plain loops, int64 accumulation) unless VCKATTN_AIE_VECTOR (AI Engine
// builds without VCKATTN_AIE_SCALAR, or g++ with -DVCKATTN_AIE_VECTOR_EMU over ../aie_api_emu.h, which counts every
// AIE API call: hw/perf/gemm_proj.py is the same count in closed form). Vector path: aie::mmul<4,16,8,int8,int8>
// with RB x 1 register blocking (RB = 2 row blocks when ROWS is a multiple of 8, else 1: each 4x8 block is 32
// lanes of acc48, two of AIE1's four 768-bit accumulator registers, UG1079 'Accumulator Registers'), every mmul a
// mac (the accumulator starts from the bias or the cascade); the last kernel: to_vector<int32> of each 4x8 block
// (shift 0: exact), then for int8 aie::mul<acc80> by the group's 32-lane int32 mult32 (the AIE1 32x32-bit multiply;
// |acc x mult32| < 2^62: exact) and to_vector<int8>(shift_g) under rounding positive_inf and saturation saturate
// ([-128, 127]), the rows of two neighbouring blocks stored as 16 bytes; for int32 the rows stored as 128-bit
// stores. Operands are read with 128-bit loads (payloads start 16 bytes after a 32-byte aligned base).
#ifndef VCKATTN_AIE_GEMM_KERNELS_H
#define VCKATTN_AIE_GEMM_KERNELS_H

#if !defined(VCKATTN_GEMM_KERNELS) && defined(__has_include)
#if __has_include("gemm_config.h")
#include "gemm_config.h"
#endif
#endif

#ifndef VCKATTN_GEMM_KERNELS
#error "VCKATTN_GEMM_KERNELS is not defined: include the design's gemm_config.h or pass -DVCKATTN_GEMM_KERNELS=k"
#endif
#ifndef VCKATTN_GEMM_ROWS
#error "VCKATTN_GEMM_ROWS is not defined: include the design's gemm_config.h or pass -D"
#endif
#ifndef VCKATTN_GEMM_COLS
#error "VCKATTN_GEMM_COLS is not defined: include the design's gemm_config.h or pass -D"
#endif
#ifndef VCKATTN_GEMM_KSLICE
#error "VCKATTN_GEMM_KSLICE is not defined: include the design's gemm_config.h or pass -D"
#endif
#ifndef VCKATTN_GEMM_KSLICE_LAST
#error "VCKATTN_GEMM_KSLICE_LAST is not defined: include the design's gemm_config.h or pass -D"
#endif

#include "aie_common.h"  // build switches, AIE API (or its counting emulation), shared helpers

namespace vckattn_gemm {

using vckattn_engine::BEAT_BYTES;

// ---------------------------------------------------------------------------------------------
// Build parameters, buffers, state
// ---------------------------------------------------------------------------------------------

struct GemmShape {
    static constexpr int KERNELS = VCKATTN_GEMM_KERNELS;            // k: kernels of the cascade
    static constexpr int ROWS = VCKATTN_GEMM_ROWS;                  // rows of X per call
    static constexpr int COLS = VCKATTN_GEMM_COLS;                  // output channels per kernel
    static constexpr int KSLICE = VCKATTN_GEMM_KSLICE;              // input features of kernels 0 .. k-2
    static constexpr int KSLICE_LAST = VCKATTN_GEMM_KSLICE_LAST;    // input features of kernel k-1
    static constexpr int K = (KERNELS - 1) * KSLICE + KSLICE_LAST;  // input features of the cascade
    static constexpr int NI = ROWS / 4;                             // row blocks (4 rows)
    static constexpr int NE = COLS / 8;                             // column blocks (8 channels) = channel groups
    static constexpr int RB = ROWS % 8 == 0 ? 2 : 1;                // row blocks per register block
    // input features of kernel j, and its feature blocks (16)
    static constexpr int kslice(int j) { return j == KERNELS - 1 ? KSLICE_LAST : KSLICE; }
    static constexpr int nd(int j) { return kslice(j) / 16; }
};

static_assert(GemmShape::KERNELS >= 1 && GemmShape::KERNELS <= 32, "KERNELS must be 1..32 (5-bit packet ids)");
static_assert(GemmShape::ROWS >= 4 && GemmShape::ROWS % 4 == 0, "ROWS must be a positive multiple of 4");
static_assert(GemmShape::COLS >= 16 && GemmShape::COLS % 16 == 0, "COLS must be a positive multiple of 16");
static_assert(GemmShape::KSLICE >= 16 && GemmShape::KSLICE % 16 == 0, "KSLICE must be a positive multiple of 16");
static_assert(GemmShape::KSLICE_LAST >= 16 && GemmShape::KSLICE_LAST % 16 == 0,
              "KSLICE_LAST must be a positive multiple of 16");
static_assert(128LL * 128 * GemmShape::K < (1LL << 31), "X W^T over K features may overflow int32");

constexpr int MAX_SHIFT = 62;  // golden/gemm_proj.py MAX_SHIFT: the AIE1 SRS shift range

// Bytes of one half of each ping-pong buffer of kernel j and of the per-channel constant tables.
constexpr int x_buffer_bytes(int j) { return BEAT_BYTES + GemmShape::ROWS * GemmShape::kslice(j); }
constexpr int w_bytes(int j) { return GemmShape::kslice(j) * GemmShape::COLS; }  // the weight slice
constexpr int LANES_BYTES = GemmShape::NE * 32 * 4;                      // one 32-lane int32 vector per group
constexpr int SHIFT_BYTES = ((GemmShape::NE * 4 + 15) / 16) * 16;        // int32 per group, padded to 16 bytes
// w buffer of kernel J: header + weights + bias (J = 0) + mult32 and shifts (last kernel, int8 output)
constexpr int w_buffer_bytes(int j, int out_bits) {
    return BEAT_BYTES + w_bytes(j) + (j == 0 ? LANES_BYTES : 0) +
           (j == GemmShape::KERNELS - 1 && out_bits == 8 ? LANES_BYTES + SHIFT_BYTES : 0);
}
// out buffer of the last kernel: header + ROWS x COLS elements of OUT_BITS
constexpr int out_buffer_bytes(int out_bits) { return BEAT_BYTES + GemmShape::ROWS * GemmShape::COLS * out_bits / 8; }

// Kernel state between invocations.
struct GemmState {
    alignas(32) int32_t casc[8];  // the cascade header word [tile_id, rows, col_block, 0 ...]
    uint32_t first_tile;          // the held weights' tiles: first_tile ..
    uint32_t tiles;               //   .. first_tile + tiles - 1
    uint32_t tiles_left;          // 0: no weights held (acquire them)
    uint32_t col_block;           // the held weights' output-channel block
};

// Data memory per kernel (bytes): ping-pong x and w buffers, the out buffer (last kernel) and the state.
constexpr int gemm_data_bytes(int j, int out_bits) {
    return 2 * (x_buffer_bytes(j) + w_buffer_bytes(j, out_bits)) +
           (j == GemmShape::KERNELS - 1 ? 2 * out_buffer_bytes(out_bits) : 0) + static_cast<int>(sizeof(GemmState));
}

// ---------------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------------

enum GemmStatus : int {
    GEMM_OK = 0,
    GEMM_BAD_X = 1,              // x buffer: packet id, op or slice not this kernel's
    GEMM_BAD_ROWS = 2,           // XTILE rows > ROWS
    GEMM_BAD_W = 3,              // w buffer: packet id, op, slice or tiles not this kernel's
    GEMM_NO_W = 4,               // no weights came (g++ only: the AI Engine would wait)
    GEMM_TILE_NOT_IN_W = 5,      // the tile id is not one of the held weights' tiles
    GEMM_MISROUTE = 6,           // the cascade's [tile_id, rows, col_block] is not this tile's
    GEMM_BAD_SHIFT = 7,          // a group shift of the held weights > 62
};

inline const char* gemm_status_text(int status) {
    switch (status) {
        case GEMM_OK: return "ok";
        case GEMM_BAD_X: return "bad XTILE header (packet id, op or slice not this kernel's)";
        case GEMM_BAD_ROWS: return "bad XTILE row count (must be rows <= ROWS)";
        case GEMM_BAD_W: return "bad WSLICE header (packet id, op, slice or tiles not this kernel's)";
        case GEMM_NO_W: return "no weights for the tile";
        case GEMM_TILE_NOT_IN_W: return "misrouted tile (not one of the held weights' tiles)";
        case GEMM_MISROUTE: return "misrouted cascade (other tile, rows or output-channel block)";
        case GEMM_BAD_SHIFT: return "bad requantization shift in the weights' constants (must be <= 62)";
        default: return "unknown status";
    }
}

using vckattn_aie::read_words;
using vckattn_aie::write_words;

// ---------------------------------------------------------------------------------------------
// Layout offsets (elements; golden/gemm_proj.py pack_x / pack_w / pack_lanes)
// ---------------------------------------------------------------------------------------------

// nd: the kernel's feature blocks (GemmShape::nd(J))
inline int x_off(int i, int f, int nd) { return ((i / 4) * nd + f / 16) * 64 + (i % 4) * 16 + f % 16; }
inline int w_off(int c, int f, int nd) { return ((c / 8) * nd + f / 16) * 128 + (f % 16) * 8 + c % 8; }
inline int lane_off(int c) { return (c / 8) * 32 + c % 8; }  // row 0 of channel c's 32-lane group vector

// ---------------------------------------------------------------------------------------------
// Scalar reference
// ---------------------------------------------------------------------------------------------
namespace scalar {

using vckattn_aie::scalar::casc_read;
using vckattn_aie::scalar::casc_write;

// sat_int8(round_half_up(acc * mult * 2^-shift)) (golden requantize; |acc * mult| < 2^62).
inline int8_t requant(int64_t acc, int64_t mult, int shift) {
    int64_t x = acc * mult;
    if (shift > 0) x = (x + (int64_t(1) << (shift - 1))) >> shift;  // arithmetic shift: floor
    if (x > 127) x = 127;
    if (x < -128) x = -128;
    return static_cast<int8_t>(x);
}

template <bool HAS_CIN, bool HAS_COUT, int OUT_BITS, int ND>
inline void gemm_blocks(const int8_t* x, const int8_t* w, const int32_t* bias, const int32_t* mult,
                        const int32_t* shift, input_cascade<acc48>* cin, output_cascade<acc48>* cout, uint8_t* out) {
    using S = GemmShape;
    alignas(32) int32_t blk[32];
    for (int ib0 = 0; ib0 < S::NI; ib0 += S::RB)
        for (int eb0 = 0; eb0 < S::NE; eb0 += 2)
            for (int e = 0; e < 2; ++e)
                for (int r = 0; r < S::RB; ++r) {
                    const int ib = ib0 + r, eb = eb0 + e;
                    for (int q = 0; q < 4; ++q) {
                        if (HAS_CIN) {
                            casc_read(cin, blk + 8 * q);
                        } else {
                            for (int c = 0; c < 8; ++c) blk[8 * q + c] = bias[lane_off(8 * eb + c)];
                        }
                    }
                    for (int q = 0; q < 4; ++q)
                        for (int c = 0; c < 8; ++c) {
                            int64_t acc = blk[8 * q + c];
                            for (int f = 0; f < 16 * ND; ++f)
                                acc += static_cast<int32_t>(x[x_off(4 * ib + q, f, ND)]) * w[w_off(8 * eb + c, f, ND)];
                            blk[8 * q + c] = static_cast<int32_t>(acc);
                        }
                    for (int q = 0; q < 4; ++q) {
                        if (HAS_COUT) {
                            casc_write(cout, blk + 8 * q);
                        } else {
                            for (int c = 0; c < 8; ++c) {
                                const int i = 4 * ib + q, ch = 8 * eb + c;
                                if (OUT_BITS == 8)
                                    reinterpret_cast<int8_t*>(out)[i * S::COLS + ch] =
                                        requant(blk[8 * q + c], mult[lane_off(ch)], shift[eb]);
                                else
                                    reinterpret_cast<int32_t*>(out)[i * S::COLS + ch] = blk[8 * q + c];
                            }
                        }
                    }
                }
}

}  // namespace scalar

// ---------------------------------------------------------------------------------------------
// Vector path
// ---------------------------------------------------------------------------------------------
#if VCKATTN_AIE_VECTOR
namespace vec {

using GemmMmul = aie::mmul<4, 16, 8, int8, int8>;

// A operand: one 4x16 X block (64 bytes, 128-bit loads).
inline aie::vector<int8, 64> load_xa(const int8_t* __restrict p) {
    return aie::concat(aie::load_v<16>(p), aie::load_v<16>(p + 16), aie::load_v<16>(p + 32), aie::load_v<16>(p + 48));
}

// B operand: one 16x8 block of W^T (128 bytes).
using vckattn_aie::vec::load_b16x8;

// One 32-lane int32 group vector (128 bytes: 128-bit loads).
inline aie::vector<int32, 32> load_lanes(const int32_t* __restrict p) {
    return aie::concat(aie::load_v<4>(p), aie::load_v<4>(p + 4), aie::load_v<4>(p + 8), aie::load_v<4>(p + 12),
                       aie::load_v<4>(p + 16), aie::load_v<4>(p + 20), aie::load_v<4>(p + 24), aie::load_v<4>(p + 28));
}

using vckattn_aie::vec::casc_read_block;

// The output tile: accumulators from the bias (!HAS_CIN) or the cascade, plus X_J W_J^T; to the cascade
// (HAS_COUT) or into the out payload (requantized to int8, or int32). Register blocks of RB row blocks x 1 column
// block (RB 32-lane acc48 accumulators: at most the four 768-bit accumulator registers), two column blocks a pass
// so that the int8 rows of a column-block pair are stored as 16 bytes.
template <bool HAS_CIN, bool HAS_COUT, int OUT_BITS, int ND>
inline void gemm_blocks(const int8_t* __restrict x, const int8_t* __restrict w, const int32_t* __restrict bias,
                        const int32_t* __restrict mult, const int32_t* __restrict shift, input_cascade<acc48>* cin,
                        output_cascade<acc48>* cout, uint8_t* __restrict out) {
    using S = GemmShape;
    for (int ib0 = 0; ib0 < S::NI; ib0 += S::RB) {
        VCK_SCALAR(VCK_LOOP_ITER);  // the ib0 loop
        for (int eb0 = 0; eb0 < S::NE; eb0 += 2) {
            VCK_SCALAR(VCK_LOOP_ITER);  // the eb0 loop
            aie::vector<int8, 32> ab[2][S::RB];
            for (int e = 0; e < 2; ++e) {
                VCK_SCALAR(2 + VCK_LOOP_ENTRY);  // the x and w bases; the db loop's count
                GemmMmul c[S::RB];
                if (HAS_CIN) {
                    for (int r = 0; r < S::RB; ++r) c[r] = GemmMmul(casc_read_block(cin));
                } else {
                    aie::accum<acc48, 32> b;
                    b.from_vector(load_lanes(bias + 32 * (eb0 + e)), 0);
                    for (int r = 0; r < S::RB; ++r) c[r] = GemmMmul(b);
                }
                for (int db = 0; db < ND; ++db) {  // the pipelined loop
                    aie::vector<int8, 64> a[S::RB];
                    for (int r = 0; r < S::RB; ++r) a[r] = load_xa(x + ((ib0 + r) * ND + db) * 64);
                    const aie::vector<int8, 128> b = load_b16x8(w + ((eb0 + e) * ND + db) * 128);
                    for (int r = 0; r < S::RB; ++r) c[r].mac(a[r], b);
                }
                if (HAS_COUT) {
                    for (int r = 0; r < S::RB; ++r) {
                        const aie::accum<acc48, 32> acc = c[r].to_accum();
                        for (int q = 0; q < 4; ++q) writeincr(cout, acc.template extract<8>(q));
                    }
                } else if (OUT_BITS == 8) {
                    VCK_SCALAR_LOAD(1);  // shift[eb0 + e]
                    const aie::vector<int32, 32> m = load_lanes(mult + 32 * (eb0 + e));
                    for (int r = 0; r < S::RB; ++r)
                        ab[e][r] = aie::mul<acc80>(c[r].template to_vector<int32>(0), m)
                                       .template to_vector<int8>(shift[eb0 + e]);
                } else {
                    VCK_SCALAR(1);  // the out base
                    int32_t* o = reinterpret_cast<int32_t*>(out);
                    for (int r = 0; r < S::RB; ++r) {
                        const aie::vector<int32, 32> y = c[r].template to_vector<int32>(0);
                        for (int q = 0; q < 4; ++q)
                            for (int h = 0; h < 2; ++h)
                                aie::store_v(o + (4 * (ib0 + r) + q) * S::COLS + 8 * (eb0 + e) + 4 * h,
                                             y.template extract<4>(2 * q + h));
                    }
                }
            }
            if (!HAS_COUT && OUT_BITS == 8) {
                VCK_SCALAR(1);  // the out base
                int8_t* o = reinterpret_cast<int8_t*>(out);
                for (int r = 0; r < S::RB; ++r)
                    for (int q = 0; q < 4; ++q)
                        aie::store_v(o + (4 * (ib0 + r) + q) * S::COLS + 8 * eb0,
                                     aie::concat(ab[0][r].template extract<8>(q), ab[1][r].template extract<8>(q)));
            }
        }
    }
}
}  // namespace vec
#endif  // VCKATTN_AIE_VECTOR

// ---------------------------------------------------------------------------------------------
// The kernel: one tile per invocation
// ---------------------------------------------------------------------------------------------

// Kernel J of the cascade on one tile (see the file comment). x: the x buffer (XTILE header + X slice); w: the
// weights source; cin (J > 0) / cout (J < KERNELS-1): the cascade; out (J = KERNELS-1): the out buffer (GRESULT
// header + the output tile). hdr (optional, 4 words) receives the XTILE header.
template <int J, int OUT_BITS, class Src>
GemmStatus gemm_tile(const uint8_t* __restrict x, Src& w, input_cascade<acc48>* cin, output_cascade<acc48>* cout,
                     uint8_t* __restrict out, GemmState& st, uint32_t* hdr = nullptr) {
    static_assert(J >= 0 && J < GemmShape::KERNELS, "kernel index out of range");
    static_assert(OUT_BITS == 8 || OUT_BITS == 32, "OUT_BITS must be 8 (requantized) or 32 (Y)");
    using S = GemmShape;
    using namespace vckattn_engine;
    constexpr bool HAS_CIN = J > 0, HAS_COUT = J < S::KERNELS - 1;
    uint32_t h[4];
    read_words(x, h);
    VCK_SCALAR_LOAD(16);  // read_words: 16 byte loads,
    VCK_SCALAR(24);       //   12 shifts and 12 ors
    if (hdr)
        for (int i = 0; i < 4; ++i) hdr[i] = h[i];
    VCK_SCALAR(1);        // if (hdr)
    VCK_SCALAR_STORE(4);  //   4 words
    VCK_SCALAR(2 * 5 + 2 * 4);  // 5 fields (shift, mask); 4 checks (compare, branch)
    if (VCKATTN_GET(h, XTILE_PACKET_ID) != static_cast<uint32_t>(J) || VCKATTN_GET(h, XTILE_OP) != OP_X_TILE ||
        VCKATTN_GET(h, XTILE_SLICE) != static_cast<uint32_t>(J))
        return GEMM_BAD_X;
    const uint32_t rows = VCKATTN_GET(h, XTILE_ROWS), tag = VCKATTN_GET(h, XTILE_TAG);
    if (rows > static_cast<uint32_t>(S::ROWS)) return GEMM_BAD_ROWS;
    VCK_SCALAR_LOAD(1);  // st.tiles_left
    VCK_SCALAR(2);       //   == 0, branch (the acquire at a tile group's first tile: not counted, once per group)
    if (st.tiles_left == 0) {
        const uint8_t* wb = w.acquire();
        if (!wb) return GEMM_NO_W;
        uint32_t wh[4];
        read_words(wb, wh);
        // a w PLIO shared by w_share cascades splits by packet id c * KERNELS + J (c: the cascade's place on it)
        if (VCKATTN_GET(wh, WSLICE_PACKET_ID) % S::KERNELS != static_cast<uint32_t>(J) ||
            VCKATTN_GET(wh, WSLICE_OP) != OP_LOAD_W ||
            VCKATTN_GET(wh, WSLICE_SLICE) != static_cast<uint32_t>(J) || VCKATTN_GET(wh, WSLICE_TILES) == 0)
            return GEMM_BAD_W;
        if (!HAS_COUT && OUT_BITS == 8) {
            const int32_t* sh = reinterpret_cast<const int32_t*>(wb + w_buffer_bytes(J, OUT_BITS) - SHIFT_BYTES);
            for (int e = 0; e < S::NE; ++e)
                if (sh[e] < 0 || sh[e] > MAX_SHIFT) return GEMM_BAD_SHIFT;
        }
        st.first_tile = VCKATTN_GET(wh, WSLICE_FIRST_TILE);
        st.tiles = VCKATTN_GET(wh, WSLICE_TILES);
        st.col_block = VCKATTN_GET(wh, WSLICE_COL_BLOCK);
        st.tiles_left = st.tiles;
    }
    VCK_SCALAR_LOAD(2);  // st.first_tile, st.tiles
    VCK_SCALAR(3);       //   subtract, compare, branch
    if (tag - st.first_tile >= st.tiles) return GEMM_TILE_NOT_IN_W;
    // the cascade header word [tile_id, rows, col_block]: checked (J > 0), passed on (J < KERNELS-1)
#if VCKATTN_AIE_VECTOR
    if (HAS_CIN) aie::store_v(st.casc, readincr_v<8>(cin).template to_vector<int32>(0));
#else
    if (HAS_CIN) scalar::casc_read(cin, st.casc);
#endif
    if (HAS_CIN) {
        VCK_SCALAR_LOAD(4);  // casc[0..2], st.col_block
        VCK_SCALAR(6);       //   3 compares, 3 branches
    }
    if (HAS_CIN && (static_cast<uint32_t>(st.casc[0]) != tag || static_cast<uint32_t>(st.casc[1]) != rows ||
                    static_cast<uint32_t>(st.casc[2]) != st.col_block))
        return GEMM_MISROUTE;
    if (HAS_COUT) {
        VCK_SCALAR_LOAD(1);    // st.col_block
        VCK_SCALAR_STORE(11);  // casc[0..7] = 0, casc[0..2]
        for (int l = 0; l < 8; ++l) st.casc[l] = 0;
        st.casc[0] = static_cast<int32_t>(tag);
        st.casc[1] = static_cast<int32_t>(rows);
        st.casc[2] = static_cast<int32_t>(st.col_block);
#if VCKATTN_AIE_VECTOR
        aie::accum<acc48, 8> hw;
        hw.from_vector(aie::load_v<8>(st.casc), 0);
        writeincr(cout, hw);
#else
        scalar::casc_write(cout, st.casc);
#endif
    }
    VCK_SCALAR_LOAD(1);  // w.current()
    VCK_SCALAR(2 + (HAS_CIN ? 0 : 1) + (!HAS_COUT && OUT_BITS == 8 ? 2 : 0) + (HAS_COUT ? 0 : 1));  // the pointers
    const uint8_t* wb = w.current();
    const int8_t* xp = reinterpret_cast<const int8_t*>(x + BEAT_BYTES);
    const int8_t* wp = reinterpret_cast<const int8_t*>(wb + BEAT_BYTES);
    const int32_t* bias = HAS_CIN ? nullptr : reinterpret_cast<const int32_t*>(wb + BEAT_BYTES + w_bytes(J));
    const int32_t* mult = nullptr;
    const int32_t* shift = nullptr;
    if (!HAS_COUT && OUT_BITS == 8) {
        mult = reinterpret_cast<const int32_t*>(wb + w_buffer_bytes(J, OUT_BITS) - SHIFT_BYTES - LANES_BYTES);
        shift = reinterpret_cast<const int32_t*>(wb + w_buffer_bytes(J, OUT_BITS) - SHIFT_BYTES);
    }
    uint8_t* op = HAS_COUT ? nullptr : out + BEAT_BYTES;
#if VCKATTN_AIE_VECTOR
    if (!HAS_COUT) {
        aie::set_rounding(aie::rounding_mode::positive_inf);  // round half up
        aie::set_saturation(aie::saturation_mode::saturate);  // [-128, 127]: golden requantize
    }
    vec::gemm_blocks<HAS_CIN, HAS_COUT, OUT_BITS, S::nd(J)>(xp, wp, bias, mult, shift, cin, cout, op);
#else
    scalar::gemm_blocks<HAS_CIN, HAS_COUT, OUT_BITS, S::nd(J)>(xp, wp, bias, mult, shift, cin, cout, op);
#endif
    if (!HAS_COUT) {
        uint32_t r[4] = {0, 0, 0, 0};
        VCKATTN_PUT(r, GRESULT_TILE_ID, tag);
        VCKATTN_PUT(r, GRESULT_ROWS, rows);
        VCKATTN_PUT(r, GRESULT_COL_BLOCK, st.col_block);
        VCKATTN_PUT(r, GRESULT_ELEM_BITS, static_cast<uint32_t>(OUT_BITS));
        VCKATTN_PUT(r, GRESULT_COLS, static_cast<uint32_t>(S::COLS));
        write_words(out, r);
        VCK_SCALAR_LOAD(1);       // st.col_block
        VCK_SCALAR(4 + 3 * 5);    // r = 0; 5 fields put (clear, mask and shift, or)
        VCK_SCALAR(12);           // write_words: 12 shifts,
        VCK_SCALAR_STORE(16);     //   16 byte stores
    }
    VCK_SCALAR_LOAD(1);   // --st.tiles_left
    VCK_SCALAR_STORE(1);
    VCK_SCALAR(3);        //   decrement, == 0, branch (the release: once per group, not counted)
    if (--st.tiles_left == 0) w.release();
    return GEMM_OK;
}

// ---------------------------------------------------------------------------------------------
// Buffer adapters (the async w buffer; async_buffer.h, as the engine kernels' K / V slices)
// ---------------------------------------------------------------------------------------------
#if VCKATTN_AIE_ADF
using AdfWeightsIn = vckattn_async::AdfAsyncIn;
#else
using HostWeights = vckattn_async::HostAsyncIn;
#endif

}  // namespace vckattn_gemm

#endif

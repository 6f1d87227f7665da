// Per-tile logic of the scalable engine's AIE kernels (stream contract v3, hw/ENGINE.md), written once as
// templates over buffer adapters, so that the g++ C-simulation (sim/cpp/engine_csim_tb.cpp) runs exactly
// the code the AI Engine runs.
//
//   qk_tile<J>  one invocation of QK^T kernel J per tile: q buffer (TILE header + Q tile, A layout), the
//               K slice it holds (async buffer: SLICE header + K^T slice, B layout; acquired at the first
//               tile of a group, released after its `tiles`-th), s buffer out (PACKET header + Q_ROWS x SK
//               scores in the 4x8 block layout, int8 or int16).
//   pv_tile<J>  one invocation of P.V kernel J per tile: p buffer (PACKET header + P, 4x8 block layout),
//               the V slice it holds (async, 8x8 block layout), partial O in the cascade accumulator, block
//               by block: from the cascade (J > 0) or zero, plus P_J V_J, to the cascade (every J: the
//               last P.V kernel's cascade feeds the requantizer).
//   rq_tile     one invocation of the requantizer per tile, at the end of the cascade: O block by block from
//               the cascade, requantized to int8 into the o buffer: the A record (RESULT header + A =
//               sat_int8(round_half_up(O x rq_mult >> rq_shift)), Q_ROWS x D row-major).
// Before the blocks one cascade word per tile carries [tile_id, rows, rq_mult, rq_shift, 0 ...]: P.V kernel
// 0 writes it (rq_mult / rq_shift from the SLICE header of the V slice it holds: the layer's output
// requantization), P.V kernels J > 0 check [tile_id, rows] against the P packet's header and pass the word on
// as they received it, the requantizer reads it. Block order on the cascade (both paths): row-block groups of
// RB, feature blocks, then the group's RB blocks; each block is 4 cascade words (its 4 rows, 8 lanes).
//
// Numerics: golden/engine.py (engine_scores with lim_i, narrow_scores); layouts: golden/engine.py
// pack_q / pack_k / pack_v / pack_scores; header fields only through the generated
// ../generated/engine_streams.h (VCKATTN_GET / VCKATTN_PUT), never spelled here.
//
// Build parameters (macros; the generator writes them into the design's engine_config.h, the
// C-simulation passes them with -D): VCKATTN_ENGINE_KERNELS (k), VCKATTN_ENGINE_SCORE_PLIOS (m, divides
// k), VCKATTN_ENGINE_Q_ROWS, VCKATTN_ENGINE_D, VCKATTN_ENGINE_MAX_KEYS (SK = MAX_KEYS / k),
// VCKATTN_ENGINE_SCORE_BITS. Every loop below has a compile-time trip count.
//
// Statuses: a kernel that reads a header it cannot act on returns a Status != ENGINE_OK without writing
// its output for that tile; nothing recovers the dataflow after that (the graph stalls); the C-simulation
// reports it and stops that kernel. Checks (hw/ENGINE.md): TILE op, rows <= Q_ROWS, valid_keys <= MAX_KEYS,
// score_shift <= 40; the held slice's packet id, op, slice = J and tiles >= 1 (a V slice: rq_shift <= 62);
// the tile id within the held slice's [first_tile, first_tile + tiles); the P packet's slice = J,
// elem_bits = 8, count = Q_ROWS x SK; the cascade's [tile_id, rows] = the P packet's.
//
// Buffer adapter concept (the async K / V slice; template parameter Src):
//   const uint8_t* acquire()   waits for the next slice in the buffer, returns its bytes (header first);
//                              nullptr when none will come (g++ only: the AI Engine waits)
//   const uint8_t* current()   the slice held
//   void release()             gives the buffer back to the DMA
// Sync buffers (q, s, p, o) are plain pointers to the current ping-pong half. Cascade ports are the ADF
// types (input_cascade<acc48> / output_cascade<acc48>; on g++ the FIFOs of ../aie_api_emu.h).
// Adapters (async_buffer.h): AdfSliceIn (ADF async window; UNVERIFIED: no aiecompiler here) and HostSlices (g++).
//
// Compute paths: the scalar reference (plain loops, int32/int64 accumulation) unless VCKATTN_AIE_VECTOR
// (AI Engine builds without VCKATTN_AIE_SCALAR, or g++ with -DVCKATTN_AIE_VECTOR_EMU over
// ../aie_api_emu.h, which counts every AIE API call: hw/perf/engine_aie.py is the same count in closed
// form; the scalar work the code issues is annotated with VCK_SCALAR). Vector path: QK^T
// aie::mmul<4,16,8,int8,int8> with RB x 1 register blocking (RB = 2 row blocks when Q_ROWS is a multiple of 8,
// else 1: a 4x8 block is 32 lanes of acc48, two of AIE1's four 768-bit accumulator registers, UG1079 'Accumulator
// Registers', so RB x 1 blocks fit and RB x 2 would need twice the register file), narrowed by
// to_vector<score_t>(shift) under rounding positive_inf and symmetric saturation, the mask (only in tiles that
// need it: a second loop body) by a vector compare against per-row key limits and a select of the sentinel; P.V
// aie::mmul<4,8,8,uint8,int8> with RB x 1 blocking, the accumulator from / to the cascade; the requantizer takes
// each 4x8 O block: to_vector<int32> of the accumulator, aie::mul<acc80> by the int16 rq_mult (the AIE1
// 32x16-bit multiply, |O x rq_mult| < 2^46: exact), to_vector<int8>(rq_shift) under rounding positive_inf and
// saturation saturate ([-128, 127], golden requantize), the rows of two neighbouring blocks stored as 16 bytes.
// Operands are read with 128-bit loads (the buffers' payloads start 16 bytes after a 32-byte aligned base:
// AIE1 256-bit accesses need 32).
#ifndef VCKATTN_AIE_ENGINE_KERNELS_H
#define VCKATTN_AIE_ENGINE_KERNELS_H

#if !defined(VCKATTN_ENGINE_KERNELS) && defined(__has_include)
#if __has_include("engine_config.h")
#include "engine_config.h"
#endif
#endif

#ifndef VCKATTN_ENGINE_KERNELS
#error "VCKATTN_ENGINE_KERNELS is not defined: include the design's generated engine_config.h or pass -DVCKATTN_ENGINE_KERNELS=k"
#endif
#ifndef VCKATTN_ENGINE_SCORE_PLIOS
#error "VCKATTN_ENGINE_SCORE_PLIOS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_Q_ROWS
#error "VCKATTN_ENGINE_Q_ROWS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_D
#error "VCKATTN_ENGINE_D is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_MAX_KEYS
#error "VCKATTN_ENGINE_MAX_KEYS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_SCORE_BITS
#error "VCKATTN_ENGINE_SCORE_BITS is not defined: include the design's generated engine_config.h or pass -D"
#endif

#include "aie_common.h"  // build switches, AIE API (or its counting emulation), shared helpers

namespace vckattn_engine {

// ---------------------------------------------------------------------------------------------
// Build parameters, buffers, state
// ---------------------------------------------------------------------------------------------

struct EngineShape {
    static constexpr int KERNELS = VCKATTN_ENGINE_KERNELS;        // k: QK^T and P.V kernels per pipeline
    static constexpr int SCORE_PLIOS = VCKATTN_ENGINE_SCORE_PLIOS;  // m: score channels per pipeline
    static constexpr int PER_CHANNEL = KERNELS / SCORE_PLIOS;     // k/m: kernels per channel
    static constexpr int Q_ROWS = VCKATTN_ENGINE_Q_ROWS;          // query rows per tile
    static constexpr int D = VCKATTN_ENGINE_D;                    // head size the kernels compute
    static constexpr int MAX_KEYS = VCKATTN_ENGINE_MAX_KEYS;      // keys of every group
    static constexpr int SK = MAX_KEYS / KERNELS;                 // keys of one slice
    static constexpr int SCORE_BITS = VCKATTN_ENGINE_SCORE_BITS;  // bits per score
    static constexpr int E = SCORE_BITS / 8;                      // bytes per score
    static constexpr int NI = Q_ROWS / 4;                         // row blocks (4 rows)
    static constexpr int NJ = SK / 8;                             // key blocks (8 keys) of a slice
    static constexpr int ND = D / 16;                             // feature blocks of 16 (QK^T)
    static constexpr int NE = D / 8;                              // feature blocks of 8 (P.V)
    static constexpr int RB = Q_ROWS % 8 == 0 ? 2 : 1;            // row blocks per register block
};

static_assert(EngineShape::KERNELS >= 1 && EngineShape::KERNELS <= 16, "KERNELS must be 1..16 (2k 5-bit packet ids)");
static_assert(EngineShape::SCORE_PLIOS >= 1 && EngineShape::KERNELS % EngineShape::SCORE_PLIOS == 0,
              "SCORE_PLIOS must divide KERNELS");
static_assert(EngineShape::Q_ROWS >= 4 && EngineShape::Q_ROWS % 4 == 0, "Q_ROWS must be a positive multiple of 4");
static_assert(EngineShape::D >= 16 && EngineShape::D % 16 == 0, "D must be a positive multiple of 16");
static_assert(EngineShape::MAX_KEYS % (16 * EngineShape::KERNELS) == 0 && EngineShape::SK >= 16,
              "MAX_KEYS must be a positive multiple of 16 x KERNELS (SK a multiple of 16)");
static_assert(EngineShape::MAX_KEYS + EngineShape::Q_ROWS < 32767, "key indices are int16 mask lanes");
static_assert(EngineShape::Q_ROWS * EngineShape::SK <= 0xFFFF, "count = Q_ROWS x SK is a 16-bit field");
static_assert(255LL * 128 * EngineShape::MAX_KEYS < (1LL << 31), "P.V over MAX_KEYS may overflow int32");
// O x rq_mult: |O| < 2^31, |rq_mult| <= 2^15, so |product| < 2^46 (exact in the acc80 lanes of the 32x16 multiply)
static_assert(EngineShape::SCORE_BITS == 8 || EngineShape::SCORE_BITS == 16, "SCORE_BITS must be 8 or 16");

template <int BITS>
struct ScoreType;
template <>
struct ScoreType<8> {
    using type = int8_t;
};
template <>
struct ScoreType<16> {
    using type = int16_t;
};
using score_t = ScoreType<EngineShape::SCORE_BITS>::type;  // one score

constexpr int32_t SCORE_MAX = (1 << (EngineShape::SCORE_BITS - 1)) - 1;    // symmetric saturation
constexpr int32_t SCORE_SENTINEL = -(1 << (EngineShape::SCORE_BITS - 1));  // the mask sentinel
constexpr int MAX_SCORE_SHIFT = 40;                                        // golden narrow_scores' limit
constexpr int MAX_RQ_SHIFT = 62;  // golden engine MAX_RQ_SHIFT: the AIE1 SRS shift range
// lim_i = min(i + base, valid_keys): base for rows without a causal limit (i + base > every key)
constexpr int MASK_BASE = 32767 - EngineShape::Q_ROWS;

// Bytes of one half of each ping-pong buffer (hw/ENGINE.md; hw/spec/functional.py buffer_bytes).
constexpr int Q_BUFFER_BYTES = BEAT_BYTES + EngineShape::Q_ROWS * EngineShape::D;
constexpr int K_BUFFER_BYTES = BEAT_BYTES + EngineShape::SK * EngineShape::D;
constexpr int S_BUFFER_BYTES = BEAT_BYTES + EngineShape::Q_ROWS * EngineShape::SK * EngineShape::E;
constexpr int P_BUFFER_BYTES = BEAT_BYTES + EngineShape::Q_ROWS * EngineShape::SK;
constexpr int V_BUFFER_BYTES = BEAT_BYTES + EngineShape::SK * EngineShape::D;
constexpr int O_BUFFER_BYTES = BEAT_BYTES + EngineShape::Q_ROWS * EngineShape::D;  // the A record (int8)

// QK^T kernel state between invocations (32-byte aligned for 256-bit vector accesses).
struct QkState {
    alignas(32) int16_t lim[EngineShape::NI * 32];  // per row block: lane r*8+c = lim of row 4*ib + r
    uint32_t first_tile;                            // the held K slice's tiles: first_tile ..
    uint32_t tiles;                                 //   .. first_tile + tiles - 1
    uint32_t tiles_left;                            // 0: no slice held (acquire one)
};

// P.V kernel state between invocations.
struct PvState {
    alignas(32) int32_t casc[8];  // the cascade header word [tile_id, rows, 0 ...]
    uint32_t first_tile;
    uint32_t tiles;
    uint32_t tiles_left;
    int32_t rq_mult;    // the held V slice's rq_mult (int16 value)
    uint32_t rq_shift;  // and rq_shift (0 .. MAX_RQ_SHIFT)
};

// Requantizer state between invocations: the cascade header word [tile_id, rows, rq_mult, rq_shift, 0 ...].
struct RqState {
    alignas(32) int32_t casc[8];
};

// Constant lane patterns of the mask: kpat lane r*8+c = c (key in block), rpat lane r*8+c = r (row in block).
struct MaskTables {
    alignas(32) int16_t kpat[32];
    alignas(32) int16_t rpat[32];
};
alignas(32) static const MaskTables MASK_TABLES = {
    {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7},
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};

// Data memory per kernel (bytes): ping-pong buffers + state (hw/spec/functional.py kernel_memory).
constexpr int QK_DATA_BYTES = 2 * (Q_BUFFER_BYTES + K_BUFFER_BYTES + S_BUFFER_BYTES) +
                              static_cast<int>(sizeof(QkState)) + static_cast<int>(sizeof(MaskTables));
constexpr int PV_DATA_BYTES = 2 * (P_BUFFER_BYTES + V_BUFFER_BYTES) + static_cast<int>(sizeof(PvState));
constexpr int RQ_DATA_BYTES = 2 * O_BUFFER_BYTES + static_cast<int>(sizeof(RqState));

// ---------------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------------

enum Status : int {
    ENGINE_OK = 0,
    ENGINE_BAD_OP = 1,             // q buffer: TILE header op is not TILE
    ENGINE_BAD_ROWS = 2,           // TILE rows > Q_ROWS
    ENGINE_BAD_VALID_KEYS = 3,     // TILE valid_keys > MAX_KEYS
    ENGINE_BAD_SHIFT = 4,          // TILE score_shift > 40
    ENGINE_BAD_SLICE = 5,          // k / v buffer: packet id, op, slice or tiles not this kernel's
    ENGINE_NO_SLICE = 6,           // no K / V slice came (g++ only: the AI Engine would wait)
    ENGINE_TILE_NOT_IN_SLICE = 7,  // the tile id is not one of the held slice's tiles
    ENGINE_BAD_PACKET = 8,         // P packet: elem_bits != 8 or count != Q_ROWS x SK
    ENGINE_MISROUTE = 9,           // P packet of another slice, or of another tile than the cascade's
    ENGINE_BAD_RQ_SHIFT = 10,      // V slice: SLICE rq_shift > 62 (or a cascade header word's rq_shift)
};

inline const char* status_text(int status) {
    switch (status) {
        case ENGINE_OK: return "ok";
        case ENGINE_BAD_OP: return "bad opcode in the q buffer's TILE header";
        case ENGINE_BAD_ROWS: return "bad TILE row count (must be rows <= Q_ROWS)";
        case ENGINE_BAD_VALID_KEYS: return "bad TILE valid_keys (must be <= MAX_KEYS)";
        case ENGINE_BAD_SHIFT: return "bad TILE score_shift (must be <= 40)";
        case ENGINE_BAD_SLICE: return "bad SLICE header (packet id, op, slice or tiles not this kernel's)";
        case ENGINE_NO_SLICE: return "no K/V slice for the tile";
        case ENGINE_TILE_NOT_IN_SLICE: return "misrouted tile (not one of the held slice's tiles)";
        case ENGINE_BAD_PACKET: return "bad P packet header (elem_bits must be 8, count Q_ROWS x SK)";
        case ENGINE_MISROUTE: return "misrouted P packet (other slice, or other tile than the cascade's)";
        case ENGINE_BAD_RQ_SHIFT: return "bad SLICE rq_shift (must be <= 62)";
        default: return "unknown status";
    }
}

using vckattn_aie::read_words;
using vckattn_aie::write_words;

// Whether slice J of a tile holds a masked element (golden/engine.py slice_needs_mask): rows < Q_ROWS, or
// the smallest row limit below the slice's end. lim_i grows with i, so row 0 has the smallest.
template <int J>
inline bool slice_needs_mask(uint32_t rows, uint32_t q0, uint32_t valid, bool causal) {
    const uint32_t end = static_cast<uint32_t>((J + 1) * EngineShape::SK);
    uint32_t lim0 = valid;
    if (causal && q0 + 1 < lim0) lim0 = q0 + 1;
    return rows < static_cast<uint32_t>(EngineShape::Q_ROWS) || lim0 < end;
}

// The held slice's header: this kernel's packet id, op and slice index, and at least one tile.
inline Status take_slice(const uint8_t* b, uint32_t packet_id, uint32_t op, uint32_t slice, uint32_t* first,
                         uint32_t* tiles) {
    uint32_t h[4];
    read_words(b, h);
    if (VCKATTN_GET(h, SLICE_PACKET_ID) != packet_id || VCKATTN_GET(h, SLICE_OP) != op ||
        VCKATTN_GET(h, SLICE_SLICE) != slice || VCKATTN_GET(h, SLICE_TILES) == 0)
        return ENGINE_BAD_SLICE;
    *first = VCKATTN_GET(h, SLICE_FIRST_TILE);
    *tiles = VCKATTN_GET(h, SLICE_TILES);
    return ENGINE_OK;
}

// ---------------------------------------------------------------------------------------------
// Layout offsets (elements; golden/engine.py pack_*)
// ---------------------------------------------------------------------------------------------

inline int q_off(int i, int f) { return ((i / 4) * EngineShape::ND + f / 16) * 64 + (i % 4) * 16 + f % 16; }
inline int k_off(int key, int f) { return ((key / 8) * EngineShape::ND + f / 16) * 128 + (f % 16) * 8 + key % 8; }
inline int s_off(int i, int key) { return ((i / 4) * EngineShape::NJ + key / 8) * 32 + (i % 4) * 8 + key % 8; }
inline int v_off(int key, int f) { return ((f / 8) * EngineShape::NJ + key / 8) * 64 + (key % 8) * 8 + f % 8; }

// ---------------------------------------------------------------------------------------------
// Scalar reference
// ---------------------------------------------------------------------------------------------
namespace scalar {

// clamp(round_half_up(acc * 2^-shift), -SCORE_MAX, SCORE_MAX) (golden narrow_scores).
inline int32_t narrow_score(int64_t acc, int shift) {
    int64_t x = acc;
    if (shift > 0) x = (x + (int64_t(1) << (shift - 1))) >> shift;  // arithmetic shift: floor
    if (x > SCORE_MAX) x = SCORE_MAX;
    if (x < -SCORE_MAX) x = -SCORE_MAX;
    return static_cast<int32_t>(x);
}

template <int J>
inline void qk_scores(const int8_t* q, const int8_t* k, score_t* s, int shift, uint32_t rows, uint32_t q0,
                      uint32_t valid, bool causal) {
    using S = EngineShape;
    for (int i = 0; i < S::Q_ROWS; ++i) {
        int64_t lim = valid;
        if (causal && static_cast<int64_t>(q0) + i + 1 < lim) lim = static_cast<int64_t>(q0) + i + 1;
        if (static_cast<uint32_t>(i) >= rows) lim = 0;
        for (int key = 0; key < S::SK; ++key) {
            int64_t acc = 0;
            for (int f = 0; f < S::D; ++f) acc += static_cast<int32_t>(q[q_off(i, f)]) * k[k_off(key, f)];
            s[s_off(i, key)] = static_cast<score_t>(J * S::SK + key < lim ? narrow_score(acc, shift) : SCORE_SENTINEL);
        }
    }
}

using vckattn_aie::scalar::casc_read;
using vckattn_aie::scalar::casc_write;

// sat_int8(round_half_up(o * mult * 2^-shift)) (golden requantize; |o * mult| < 2^46).
inline int8_t requant(int32_t o, int32_t mult, int shift) {
    int64_t x = static_cast<int64_t>(o) * mult;
    if (shift > 0) x = (x + (int64_t(1) << (shift - 1))) >> shift;  // arithmetic shift: floor
    if (x > 127) x = 127;
    if (x < -128) x = -128;
    return static_cast<int8_t>(x);
}

template <bool HAS_CIN>
inline void pv_blocks(const uint8_t* p, const int8_t* v, input_cascade<acc48>* cin, output_cascade<acc48>* cout) {
    using S = EngineShape;
    alignas(32) int32_t blk[32];
    for (int ib0 = 0; ib0 < S::NI; ib0 += S::RB)
        for (int eb0 = 0; eb0 < S::NE; eb0 += 2)
            for (int x = 0; x < 2; ++x)
                for (int r = 0; r < S::RB; ++r) {
                    const int ib = ib0 + r, eb = eb0 + x;
                    for (int q = 0; q < 4; ++q) {
                        if (HAS_CIN) {
                            casc_read(cin, blk + 8 * q);
                        } else {
                            for (int c = 0; c < 8; ++c) blk[8 * q + c] = 0;
                        }
                    }
                    for (int q = 0; q < 4; ++q)
                        for (int c = 0; c < 8; ++c) {
                            int64_t acc = blk[8 * q + c];
                            for (int key = 0; key < S::SK; ++key)
                                acc += static_cast<int32_t>(p[s_off(4 * ib + q, key)]) * v[v_off(key, 8 * eb + c)];
                            blk[8 * q + c] = static_cast<int32_t>(acc);
                        }
                    for (int q = 0; q < 4; ++q) casc_write(cout, blk + 8 * q);
                }
}

// The requantizer: every O block from the cascade, in the P.V kernels' order, into the A payload a.
inline void rq_blocks(input_cascade<acc48>* cin, int8_t* a, int32_t rq_mult, int rq_shift) {
    using S = EngineShape;
    alignas(32) int32_t blk[32];
    for (int ib0 = 0; ib0 < S::NI; ib0 += S::RB)
        for (int eb0 = 0; eb0 < S::NE; eb0 += 2)
            for (int x = 0; x < 2; ++x)
                for (int r = 0; r < S::RB; ++r) {
                    const int ib = ib0 + r, eb = eb0 + x;
                    for (int q = 0; q < 4; ++q) casc_read(cin, blk + 8 * q);
                    for (int q = 0; q < 4; ++q)
                        for (int c = 0; c < 8; ++c)
                            a[(4 * ib + q) * S::D + 8 * eb + c] = requant(blk[8 * q + c], rq_mult, rq_shift);
                }
}

}  // namespace scalar

// ---------------------------------------------------------------------------------------------
// Vector path
// ---------------------------------------------------------------------------------------------
#if VCKATTN_AIE_VECTOR
namespace vec {

using QkMmul = aie::mmul<4, 16, 8, int8, int8>;
using PvMmul = aie::mmul<4, 8, 8, uint8, int8>;

// A operand of QK^T: one 4x16 Q block (64 bytes, 128-bit loads).
inline aie::vector<int8, 64> load_qa(const int8_t* __restrict p) {
    return aie::concat(aie::load_v<16>(p), aie::load_v<16>(p + 16), aie::load_v<16>(p + 32), aie::load_v<16>(p + 48));
}

// B operand of QK^T: one 16x8 K^T block (128 bytes).
using vckattn_aie::vec::load_b16x8;

// A operand of P.V: one 4x8 P block (32 bytes).
inline aie::vector<uint8, 32> load_pa(const uint8_t* __restrict p) {
    return aie::concat(aie::load_v<16>(p), aie::load_v<16>(p + 16));
}

// B operand of P.V: one 8x8 V block (64 bytes).
inline aie::vector<int8, 64> load_vb(const int8_t* __restrict p) {
    return aie::concat(aie::load_v<16>(p), aie::load_v<16>(p + 16), aie::load_v<16>(p + 32), aie::load_v<16>(p + 48));
}

// One 4x8 score block (32 scores) to the s buffer (128-bit stores).
inline void store_scores(int8_t* __restrict dst, const aie::vector<int8, 32>& v) {
    aie::store_v(dst, v.template extract<16>(0));
    aie::store_v(dst + 16, v.template extract<16>(1));
}
inline void store_scores(int16_t* __restrict dst, const aie::vector<int16, 32>& v) {
    for (int h = 0; h < 4; ++h) aie::store_v(dst + 8 * h, v.template extract<8>(h));
}

// The mask's per-row-block key limits of a tile: lane r*8+c of lim[ib] = lim of row 4ib+r =
// (4ib + r < rows) ? min(4ib + r + base, valid) : 0.
inline void qk_limits(int16_t* __restrict lim, uint32_t rows, int base, uint32_t valid) {
    using S = EngineShape;
    const aie::vector<int16, 32> rpat = aie::load_v<32>(MASK_TABLES.rpat);
    VCK_SCALAR(VCK_LOOP_ENTRY);  // the pipelined ib loop's count
    for (int ib = 0; ib < S::NI; ++ib) {
        VCK_SCALAR(2);  // 4 ib, 4 ib + base
        const aie::vector<int16, 32> row = aie::add(rpat, static_cast<int16>(4 * ib));
        const aie::vector<int16, 32> t =
            aie::min(aie::add(rpat, static_cast<int16>(4 * ib + base)), static_cast<int16>(valid));
        aie::store_v(lim + 32 * ib, aie::select(static_cast<int16>(0), t, aie::lt(row, static_cast<int16>(rows))));
    }
}

// S = Q K_J^T narrowed, into the s payload; MASKED: keys >= lim of their row become the sentinel. Register blocks
// of RB row blocks x 1 key block: RB 32-lane acc48 accumulators, at most the four 768-bit accumulator registers.
template <bool MASKED>
inline void qk_scores(const int8_t* __restrict q, const int8_t* __restrict k, score_t* __restrict s, int shift,
                      const int16_t* __restrict lim, int key0) {
    using S = EngineShape;
    aie::vector<int16, 32> kpat;
    if (MASKED) kpat = aie::load_v<32>(MASK_TABLES.kpat);
    for (int ib0 = 0; ib0 < S::NI; ib0 += S::RB) {
        VCK_SCALAR(VCK_LOOP_ITER);  // the ib0 loop's counter and branch
        for (int jb = 0; jb < S::NJ; ++jb) {
            VCK_SCALAR(VCK_LOOP_ITER + 2 + VCK_LOOP_ENTRY);  // counter, branch; the q and k bases; the db loop's count
            QkMmul c[S::RB];
            for (int db = 0; db < S::ND; ++db) {  // the pipelined loop (zero-overhead loop, post-modify addressing)
                aie::vector<int8, 64> a[S::RB];
                for (int r = 0; r < S::RB; ++r) a[r] = load_qa(q + ((ib0 + r) * S::ND + db) * 64);
                const aie::vector<int8, 128> b = load_b16x8(k + (jb * S::ND + db) * 128);
                for (int r = 0; r < S::RB; ++r) {
                    if (db == 0)
                        c[r].mul(a[r], b);
                    else
                        c[r].mac(a[r], b);
                }
            }
            VCK_SCALAR(1);  // the s base
            aie::vector<int16, 32> keys;
            if (MASKED) {
                VCK_SCALAR(1);  // key0 + 8 jb
                keys = aie::add(kpat, static_cast<int16>(key0 + 8 * jb));
            }
            for (int r = 0; r < S::RB; ++r) {
                aie::vector<score_t, 32> v = c[r].template to_vector<score_t>(shift);
                if (MASKED)
                    v = aie::select(static_cast<score_t>(SCORE_SENTINEL), v,
                                    aie::lt(keys, aie::load_v<32>(lim + 32 * (ib0 + r))));
                store_scores(s + ((ib0 + r) * S::NJ + jb) * 32, v);
            }
        }
    }
}

using vckattn_aie::vec::casc_read_block;

// O (partial) = cascade (HAS_CIN) + P_J V_J, to the cascade. Register blocks of RB row blocks x 1 feature block.
template <bool HAS_CIN>
inline void pv_blocks(const uint8_t* __restrict p, const int8_t* __restrict v, input_cascade<acc48>* cin,
                      output_cascade<acc48>* cout) {
    using S = EngineShape;
    for (int ib0 = 0; ib0 < S::NI; ib0 += S::RB) {
        VCK_SCALAR(VCK_LOOP_ITER);  // the ib0 loop
        for (int eb = 0; eb < S::NE; ++eb) {
            VCK_SCALAR(VCK_LOOP_ITER + 2 + VCK_LOOP_ENTRY);  // counter, branch; the p and v bases; the jb loop's count
            PvMmul c[S::RB];
            if (HAS_CIN)
                for (int r = 0; r < S::RB; ++r) c[r] = PvMmul(casc_read_block(cin));
            for (int jb = 0; jb < S::NJ; ++jb) {  // the pipelined loop
                aie::vector<uint8, 32> a[S::RB];
                for (int r = 0; r < S::RB; ++r) a[r] = load_pa(p + ((ib0 + r) * S::NJ + jb) * 32);
                const aie::vector<int8, 64> b = load_vb(v + (eb * S::NJ + jb) * 64);
                for (int r = 0; r < S::RB; ++r) {
                    if (!HAS_CIN && jb == 0)
                        c[r].mul(a[r], b);
                    else
                        c[r].mac(a[r], b);
                }
            }
            for (int r = 0; r < S::RB; ++r) {
                const aie::accum<acc48, 32> acc = c[r].to_accum();
                for (int w = 0; w < 4; ++w) writeincr(cout, acc.template extract<8>(w));
            }
        }
    }
}

// The requantizer: each 4x8 O block from the cascade (the P.V kernels' order: per row-block group, feature block by
// feature block, the group's RB blocks) times rq_mult (acc80) shifted by rq_shift to int8 (the modes set by the
// caller); the rows of a feature-block pair (8 + 8 int8) stored as 16 bytes of A.
inline void rq_blocks(input_cascade<acc48>* __restrict cin, int8_t* __restrict a,
                      const aie::vector<int16, 32>& rq_mult, int rq_shift) {
    using S = EngineShape;
    for (int ib0 = 0; ib0 < S::NI; ib0 += S::RB) {
        VCK_SCALAR(VCK_LOOP_ITER + 1 + VCK_LOOP_ENTRY);  // counter, branch; the a base; the eb0 loop's count
        for (int eb0 = 0; eb0 < S::NE; eb0 += 2) {  // the pipelined loop
            aie::vector<int8, 32> ab[2][S::RB];
            for (int x = 0; x < 2; ++x)
                for (int r = 0; r < S::RB; ++r)
                    ab[x][r] = aie::mul<acc80>(PvMmul(casc_read_block(cin)).template to_vector<int32>(0), rq_mult)
                                   .template to_vector<int8>(rq_shift);
            for (int r = 0; r < S::RB; ++r)
                for (int w = 0; w < 4; ++w)
                    aie::store_v(a + (4 * (ib0 + r) + w) * S::D + 8 * eb0,
                                 aie::concat(ab[0][r].template extract<8>(w), ab[1][r].template extract<8>(w)));
        }
    }
}

}  // namespace vec
#endif  // VCKATTN_AIE_VECTOR

// ---------------------------------------------------------------------------------------------
// The kernels: one tile per invocation
// ---------------------------------------------------------------------------------------------

// QK^T kernel J on one tile (see the file comment). q: the q buffer (TILE header + Q); k: the K slice
// source; s: the s buffer (PACKET header + scores). masked (optional) receives whether the tile took the
// masked loop body; hdr (optional, 4 words) the TILE header.
template <int J, class Src>
Status qk_tile(const uint8_t* __restrict q, Src& k, uint8_t* __restrict s, QkState& st, bool* masked = nullptr,
               uint32_t* hdr = nullptr) {
    static_assert(J >= 0 && J < EngineShape::KERNELS, "kernel index out of range");
    using S = EngineShape;
    uint32_t w[4];
    read_words(q, w);
    VCK_SCALAR_LOAD(16);  // read_words: 16 byte loads,
    VCK_SCALAR(24);       //   12 shifts and 12 ors
    if (hdr)
        for (int i = 0; i < 4; ++i) hdr[i] = w[i];
    VCK_SCALAR(1);        // if (hdr)
    VCK_SCALAR_STORE(4);  //   4 words
    VCK_SCALAR(2 * 7 + 1 + 2 * 4);  // 7 fields (shift, mask), causal != 0; 4 checks (compare, branch)
    const uint32_t rows = VCKATTN_GET(w, TILE_ROWS), valid = VCKATTN_GET(w, TILE_VALID_KEYS);
    const uint32_t q0 = VCKATTN_GET(w, TILE_Q0), tag = VCKATTN_GET(w, TILE_TAG);
    const bool causal = VCKATTN_GET(w, TILE_CAUSAL) != 0;
    const int shift = static_cast<int>(VCKATTN_GET(w, TILE_SCORE_SHIFT));
    if (VCKATTN_GET(w, TILE_OP) != OP_TILE) return ENGINE_BAD_OP;
    if (rows > static_cast<uint32_t>(S::Q_ROWS)) return ENGINE_BAD_ROWS;
    if (valid > static_cast<uint32_t>(S::MAX_KEYS)) return ENGINE_BAD_VALID_KEYS;
    if (shift > MAX_SCORE_SHIFT) return ENGINE_BAD_SHIFT;
    VCK_SCALAR_LOAD(1);  // st.tiles_left
    VCK_SCALAR(2);       //   == 0, branch (the acquire at a group's first tile: not counted, once per group)
    if (st.tiles_left == 0) {
        const uint8_t* kb = k.acquire();
        if (!kb) return ENGINE_NO_SLICE;
        const Status ss = take_slice(kb, J, OP_LOAD_K, J, &st.first_tile, &st.tiles);
        if (ss != ENGINE_OK) return ss;
        st.tiles_left = st.tiles;
    }
    VCK_SCALAR_LOAD(2);  // st.first_tile, st.tiles
    VCK_SCALAR(3);       //   subtract, compare, branch
    if (tag - st.first_tile >= st.tiles) return ENGINE_TILE_NOT_IN_SLICE;
    VCK_SCALAR_LOAD(1);  // k.current()
    VCK_SCALAR(3 + 8 + 1);  // kp, qp, sp; slice_needs_mask (4 compares / selects, 4 compares / ors); if (m)
    const int8_t* kp = reinterpret_cast<const int8_t*>(k.current() + BEAT_BYTES);
    const int8_t* qp = reinterpret_cast<const int8_t*>(q + BEAT_BYTES);
    score_t* sp = reinterpret_cast<score_t*>(s + BEAT_BYTES);
    const bool m = slice_needs_mask<J>(rows, q0, valid, causal);
    if (masked) *masked = m;
#if VCKATTN_AIE_VECTOR
    aie::set_rounding(aie::rounding_mode::positive_inf);  // round half up
    aie::set_saturation(aie::saturation_mode::symmetric);  // [-SCORE_MAX, SCORE_MAX]: never the sentinel
    if (m) {
        VCK_SCALAR(4);  // base: compare, add, select; J * SK folded
        int base = MASK_BASE;
        if (causal && q0 + 1 < static_cast<uint32_t>(MASK_BASE)) base = static_cast<int>(q0) + 1;
        vec::qk_limits(st.lim, rows, base, valid);
        vec::qk_scores<true>(qp, kp, sp, shift, st.lim, J * S::SK);
    } else {
        vec::qk_scores<false>(qp, kp, sp, shift, st.lim, J * S::SK);
    }
#else
    scalar::qk_scores<J>(qp, kp, sp, shift, rows, q0, valid, causal);
#endif
    uint32_t h[4] = {0, 0, 0, 0};
    VCKATTN_PUT(h, PACKET_PACKET_ID, static_cast<uint32_t>(J % S::PER_CHANNEL));
    VCKATTN_PUT(h, PACKET_TILE_ID, tag);
    VCKATTN_PUT(h, PACKET_SLICE, static_cast<uint32_t>(J));
    VCKATTN_PUT(h, PACKET_ELEM_BITS, static_cast<uint32_t>(S::SCORE_BITS));
    VCKATTN_PUT(h, PACKET_ROWS, rows);
    VCKATTN_PUT(h, PACKET_COUNT, static_cast<uint32_t>(S::Q_ROWS * S::SK));
    VCKATTN_PUT(h, PACKET_HEAD, VCKATTN_GET(w, TILE_HEAD));  // the tile's query head: the PL's register set
    write_words(s, h);
    VCK_SCALAR(4 + 3 * 7 + 2);  // h = 0; 7 fields put (clear, mask and shift, or); TILE_HEAD got
    VCK_SCALAR(12);             // write_words: 12 shifts,
    VCK_SCALAR_STORE(16);       //   16 byte stores
    VCK_SCALAR_LOAD(1);         // --st.tiles_left
    VCK_SCALAR_STORE(1);
    VCK_SCALAR(3);              //   decrement, == 0, branch (the release: once per group, not counted)
    if (--st.tiles_left == 0) k.release();
    return ENGINE_OK;
}

// P.V kernel J on one tile (see the file comment). p: the p buffer (PACKET header + P); v: the V slice
// source; cin (J > 0) / cout: the cascade (the last kernel's feeds the requantizer). hdr (optional, 4 words)
// receives the P packet header.
template <int J, class Src>
Status pv_tile(const uint8_t* __restrict p, Src& v, input_cascade<acc48>* cin, output_cascade<acc48>* cout,
               PvState& st, uint32_t* hdr = nullptr) {
    static_assert(J >= 0 && J < EngineShape::KERNELS, "kernel index out of range");
    using S = EngineShape;
    constexpr bool HAS_CIN = J > 0;
    uint32_t w[4];
    read_words(p, w);
    VCK_SCALAR_LOAD(16);  // read_words: 16 byte loads,
    VCK_SCALAR(24);       //   12 shifts and 12 ors
    if (hdr)
        for (int i = 0; i < 4; ++i) hdr[i] = w[i];
    VCK_SCALAR(1);        // if (hdr)
    VCK_SCALAR_STORE(4);  //   4 words
    VCK_SCALAR(2 * 5 + 2 * 3);  // 5 fields (shift, mask); 3 checks (compare, branch)
    if (VCKATTN_GET(w, PACKET_SLICE) != static_cast<uint32_t>(J)) return ENGINE_MISROUTE;
    if (VCKATTN_GET(w, PACKET_ELEM_BITS) != 8 || VCKATTN_GET(w, PACKET_COUNT) != static_cast<uint32_t>(S::Q_ROWS * S::SK))
        return ENGINE_BAD_PACKET;
    const uint32_t tile_id = VCKATTN_GET(w, PACKET_TILE_ID), rows = VCKATTN_GET(w, PACKET_ROWS);
    VCK_SCALAR_LOAD(1);  // st.tiles_left
    VCK_SCALAR(2);       //   == 0, branch (the acquire at a group's first tile: not counted, once per group)
    if (st.tiles_left == 0) {
        const uint8_t* vb = v.acquire();
        if (!vb) return ENGINE_NO_SLICE;
        const Status ss = take_slice(vb, S::KERNELS + J, OP_LOAD_V, J, &st.first_tile, &st.tiles);
        if (ss != ENGINE_OK) return ss;
        uint32_t vh[4];
        read_words(vb, vh);
        st.rq_mult = static_cast<int16_t>(static_cast<uint16_t>(VCKATTN_GET(vh, SLICE_RQ_MULT)));  // two's complement
        st.rq_shift = VCKATTN_GET(vh, SLICE_RQ_SHIFT);
        if (st.rq_shift > static_cast<uint32_t>(MAX_RQ_SHIFT)) return ENGINE_BAD_RQ_SHIFT;
        st.tiles_left = st.tiles;
    }
    VCK_SCALAR_LOAD(2);  // st.first_tile, st.tiles
    VCK_SCALAR(3);       //   subtract, compare, branch
    if (tile_id - st.first_tile >= st.tiles) return ENGINE_TILE_NOT_IN_SLICE;
    // the cascade header word [tile_id, rows, rq_mult, rq_shift]: written by kernel 0, checked and passed on by
    // the others
    if (HAS_CIN) {
#if VCKATTN_AIE_VECTOR
        aie::store_v(st.casc, readincr_v<8>(cin).template to_vector<int32>(0));
#else
        scalar::casc_read(cin, st.casc);
#endif
        VCK_SCALAR_LOAD(2);  // casc[0], casc[1]
        VCK_SCALAR(4);       //   2 compares, 2 branches
        if (static_cast<uint32_t>(st.casc[0]) != tile_id || static_cast<uint32_t>(st.casc[1]) != rows)
            return ENGINE_MISROUTE;
    } else {
        VCK_SCALAR_LOAD(2);    // st.rq_mult, st.rq_shift
        VCK_SCALAR_STORE(12);  // casc[0..7] = 0, casc[0..3]
        for (int l = 0; l < 8; ++l) st.casc[l] = 0;
        st.casc[0] = static_cast<int32_t>(tile_id);
        st.casc[1] = static_cast<int32_t>(rows);
        st.casc[2] = st.rq_mult;
        st.casc[3] = static_cast<int32_t>(st.rq_shift);
    }
#if VCKATTN_AIE_VECTOR
    aie::accum<acc48, 8> hw;
    hw.from_vector(aie::load_v<8>(st.casc), 0);
    writeincr(cout, hw);
#else
    scalar::casc_write(cout, st.casc);
#endif
    VCK_SCALAR_LOAD(1);  // v.current()
    VCK_SCALAR(2);       // pp, vp
    const uint8_t* pp = p + BEAT_BYTES;
    const int8_t* vp = reinterpret_cast<const int8_t*>(v.current() + BEAT_BYTES);
#if VCKATTN_AIE_VECTOR
    vec::pv_blocks<HAS_CIN>(pp, vp, cin, cout);
#else
    scalar::pv_blocks<HAS_CIN>(pp, vp, cin, cout);
#endif
    VCK_SCALAR_LOAD(1);   // --st.tiles_left
    VCK_SCALAR_STORE(1);
    VCK_SCALAR(3);        //   decrement, == 0, branch (the release: once per group, not counted)
    if (--st.tiles_left == 0) v.release();
    return ENGINE_OK;
}

// The requantizer on one tile (see the file comment): cin the last P.V kernel's cascade; o the o buffer (the A
// record: RESULT header + A int8). hdr (optional, 4 words) receives the RESULT header it wrote.
inline Status rq_tile(input_cascade<acc48>* cin, uint8_t* __restrict o, RqState& st, uint32_t* hdr = nullptr) {
    using S = EngineShape;
#if VCKATTN_AIE_VECTOR
    aie::store_v(st.casc, readincr_v<8>(cin).template to_vector<int32>(0));
#else
    scalar::casc_read(cin, st.casc);
#endif
    VCK_SCALAR_LOAD(4);  // casc[0..3]
    VCK_SCALAR(4 + 1);   // 2 compares, 2 branches; ap
    const uint32_t tile_id = static_cast<uint32_t>(st.casc[0]), rows = static_cast<uint32_t>(st.casc[1]);
    const int32_t rq_mult = st.casc[2];
    const int rq_shift = st.casc[3];
    if (rq_shift < 0 || rq_shift > MAX_RQ_SHIFT) return ENGINE_BAD_RQ_SHIFT;
    int8_t* ap = reinterpret_cast<int8_t*>(o + BEAT_BYTES);
#if VCKATTN_AIE_VECTOR
    aie::set_rounding(aie::rounding_mode::positive_inf);  // round half up
    aie::set_saturation(aie::saturation_mode::saturate);  // [-128, 127]: golden requantize
    vec::rq_blocks(cin, ap, aie::broadcast<int16, 32>(static_cast<int16>(rq_mult)), rq_shift);
#else
    scalar::rq_blocks(cin, ap, rq_mult, rq_shift);
#endif
    uint32_t h[4] = {0, 0, 0, 0};
    VCKATTN_PUT(h, RESULT_TILE_ID, tile_id);
    VCKATTN_PUT(h, RESULT_ROWS, rows);
    VCKATTN_PUT(h, RESULT_D, static_cast<uint32_t>(S::D));
    write_words(o, h);
    VCK_SCALAR(4 + 3 * 3);  // h = 0; 3 fields put (clear, mask and shift, or)
    VCK_SCALAR(12);         // write_words: 12 shifts,
    VCK_SCALAR_STORE(16);   //   16 byte stores
    if (hdr)
        for (int i = 0; i < 4; ++i) hdr[i] = h[i];
    VCK_SCALAR(1);          // if (hdr)
    VCK_SCALAR_STORE(4);    //   4 words
    return ENGINE_OK;
}

// ---------------------------------------------------------------------------------------------
// Buffer adapters (async_buffer.h): the ADF async window and the g++ queue of slices
// ---------------------------------------------------------------------------------------------
#if VCKATTN_AIE_ADF
using AdfSliceIn = vckattn_async::AdfAsyncIn;
#else
using HostSlices = vckattn_async::HostAsyncIn;
#endif

}  // namespace vckattn_engine

#endif

// Per-tile logic of the AIE matmul kernels qk_matmul (S = Q K^T) and pv_matmul (O = P V),
// written once as templates over the stream reader/writer types and the tile shape, so that the
// g++ test bench (sim/cpp/aie_kernels_tb.cpp) runs exactly the protocol code the AI Engine runs.
//
// Stream formats: hw/STREAMS.md (v1). All multi-byte values little endian, 128-bit beats.
//   q : header uint32 [N_KB, D, rows, tile_id], then Q  Q_ROWS x D int8 row-major
//   k : N_KB blocks of K  KEY_BLOCK x D int8 row-major (key-major)
//   s : per block kb: S  Q_ROWS x KEY_BLOCK int32 row-major, S[i,j] = sum_d Q[i,d] K[kb*KB+j,d]
//   v : header uint32 [N_KB, D, 0, 0] (words 2, 3 ignored), then N_KB blocks of V
//       KEY_BLOCK x D int8 row-major
//   p : per block kb: P  Q_ROWS x KEY_BLOCK uint8 row-major
//   o : after the last block: O  Q_ROWS x D int32 row-major, O[i,e] = sum_j P[i,j] V[j,e]
// pv_tile reads, per block, the V block first and then the P block (V comes straight from DDR and
// is ready early; P only after the normalizer has seen the whole score tile).
//
// Header checks (both kernels): D a multiple of 16 with 16 <= D <= MAX_D; 1 <= N_KB <= MAX_KB;
// qk also rows <= Q_ROWS. A bad header is reported by the returned TileStatus after only the
// header beat was read and before anything is written. On the AI Engine nothing can recover the
// stream position after that (the PL side is broken); the g++ test bench reports it and exits.
//
// Stream adapter concept (the In / Out template parameters):
//   In:  void read16(void* dst)          reads one 128-bit beat into 16 bytes at dst (16-byte aligned)
//   Out: void write4(const int32_t* src) writes one 128-bit beat: 4 int32 from src (16-byte aligned)
// Adapters: AdfIn / AdfOut (ADF streams; AI Engine and x86sim) and HostIn / HostOut (g++, a
// std::vector of 16-byte beats).
//
// Compute paths, one per matmul:
//   * scalar reference (plain loops, int32 accumulation): used when __AIENGINE__ is not defined
//     (g++, x86sim) or when VCKATTN_AIE_SCALAR is defined;
//   * vector path (aie::mmul, AIE1): #if defined(__AIENGINE__) && !defined(VCKATTN_AIE_SCALAR);
//     g++ builds with -DVCKATTN_AIE_VECTOR_EMU run it over aie_api_emu.h (index arithmetic check).
#ifndef VCKATTN_AIE_ATTENTION_KERNELS_H
#define VCKATTN_AIE_ATTENTION_KERNELS_H

#include <cstdint>

#include "tile_config.h"

#if defined(__AIENGINE__) || defined(__X86SIM__)
#define VCKATTN_AIE_ADF 1
#else
#define VCKATTN_AIE_ADF 0
#endif

#if defined(VCKATTN_AIE_VECTOR_EMU) && !VCKATTN_AIE_ADF
// g++ only: the vector path over aie_api_emu.h (a host model of the AIE API subset it uses), to
// check its tiling and index arithmetic against the scalar path. Not a test of the real AIE API.
#define VCKATTN_AIE_VECTOR 1
#elif defined(__AIENGINE__) && !defined(VCKATTN_AIE_SCALAR)
#define VCKATTN_AIE_VECTOR 1
#else
#define VCKATTN_AIE_VECTOR 0
#endif

#if VCKATTN_AIE_ADF
#include <adf.h>
#include <aie_api/aie.hpp>
#include <aie_api/aie_adf.hpp>
#else
#include <array>
#include <cstddef>
#include <cstring>
#include <vector>
#if VCKATTN_AIE_VECTOR
#include "aie_api_emu.h"
#endif
#endif

namespace vckattn_aie {

// ---------------------------------------------------------------------------------------------
// Tile header and status
// ---------------------------------------------------------------------------------------------

// The in-band header beat: four little-endian uint32 words.
struct TileHeader {
    uint32_t n_kb;     // key blocks in the tile (KP / KEY_BLOCK)
    uint32_t d;        // head size D (elements)
    uint32_t rows;     // valid query rows (q header; 0 in the v header)
    uint32_t tile_id;  // host tile id (q header; 0 in the v header)
};

enum TileStatus : int {
    TILE_OK = 0,
    TILE_BAD_D = 1,     // D not a multiple of 16, or D < 16, or D > MAX_D
    TILE_BAD_N_KB = 2,  // N_KB == 0 or N_KB > MAX_KB
    TILE_BAD_ROWS = 3,  // rows > Q_ROWS (q header only)
};

inline const char* tile_status_text(int status) {
    switch (status) {
        case TILE_OK: return "ok";
        case TILE_BAD_D: return "bad head size D (must be a multiple of 16, 16 <= D <= MAX_D)";
        case TILE_BAD_N_KB: return "bad key block count N_KB (must be 1 <= N_KB <= MAX_KB)";
        case TILE_BAD_ROWS: return "bad row count (must be rows <= Q_ROWS)";
        default: return "unknown status";
    }
}

inline uint32_t le32(const uint8_t* b) {
    return static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
           (static_cast<uint32_t>(b[2]) << 16) | (static_cast<uint32_t>(b[3]) << 24);
}

template <class In>
inline TileHeader read_header(In& in) {
    alignas(16) uint8_t b[BEAT_BYTES];
    in.read16(b);
    TileHeader h;
    h.n_kb = le32(b + 0);
    h.d = le32(b + 4);
    h.rows = le32(b + 8);
    h.tile_id = le32(b + 12);
    return h;
}

template <class Shape>
inline TileStatus check_header(const TileHeader& h, bool check_rows) {
    if (h.d < 16 || h.d > static_cast<uint32_t>(Shape::MAX_D) || h.d % 16 != 0) return TILE_BAD_D;
    if (h.n_kb < 1 || h.n_kb > static_cast<uint32_t>(Shape::MAX_KB)) return TILE_BAD_N_KB;
    if (check_rows && h.rows > static_cast<uint32_t>(Shape::Q_ROWS)) return TILE_BAD_ROWS;
    return TILE_OK;
}

// Reads n_beats beats into dst (16-byte aligned, n_beats * 16 bytes).
template <class In>
inline void read_beats(In& in, void* dst, int n_beats) {
    uint8_t* p = static_cast<uint8_t*>(dst);
    for (int i = 0; i < n_beats; ++i) in.read16(p + BEAT_BYTES * i);
}

// Writes n_beats beats of 4 int32 from src (16-byte aligned, 4 * n_beats values).
template <class Out>
inline void write_beats(Out& out, const int32_t* src, int n_beats) {
    for (int i = 0; i < n_beats; ++i) out.write4(src + 4 * i);
}

// ---------------------------------------------------------------------------------------------
// Scalar reference (bit-exact int32 accumulation; golden: vckattn.golden.aie_matmul.tile_matmul)
// ---------------------------------------------------------------------------------------------
namespace scalar {

// s[i][j] = sum_dd q[i][dd] * k[j][dd]; q: Q_ROWS x d, k: KEY_BLOCK x d, s: Q_ROWS x KEY_BLOCK.
template <class Shape>
inline void qk_block(const int8_t* q, const int8_t* k, int32_t* s, int d) {
    for (int i = 0; i < Shape::Q_ROWS; ++i) {
        for (int j = 0; j < Shape::KEY_BLOCK; ++j) {
            int32_t acc = 0;
            for (int dd = 0; dd < d; ++dd) acc += static_cast<int32_t>(q[i * d + dd]) * k[j * d + dd];
            s[i * Shape::KEY_BLOCK + j] = acc;
        }
    }
}

// o[i][e] += sum_j p[i][j] * v[j][e]; p: Q_ROWS x KEY_BLOCK, v: KEY_BLOCK x d, o: Q_ROWS x d.
template <class Shape>
inline void pv_block(const uint8_t* p, const int8_t* v, int32_t* o, int d) {
    for (int i = 0; i < Shape::Q_ROWS; ++i) {
        for (int e = 0; e < d; ++e) {
            int32_t acc = o[i * d + e];
            for (int j = 0; j < Shape::KEY_BLOCK; ++j)
                acc += static_cast<int32_t>(p[i * Shape::KEY_BLOCK + j]) * v[j * d + e];
            o[i * d + e] = acc;
        }
    }
}

template <class Shape>
inline void zero_o(int32_t* o, int d) {
    for (int x = 0; x < Shape::Q_ROWS * d; ++x) o[x] = 0;
}

}  // namespace scalar

#if VCKATTN_AIE_VECTOR
// ---------------------------------------------------------------------------------------------
// Vector path (AIE1, AIE API). UNVERIFIED: written against the AIE API of Vitis 2022.2 but never
// compiled here (no aiecompiler on this project's machines). It must be compiled by aiecompiler
// and checked bit for bit against the scalar path (aiesimulator with hw/aie/data/*, or build the
// kernels with -DVCKATTN_AIE_SCALAR and compare) before it is trusted. What IS checked here: its
// tiling and index arithmetic, by g++ over aie_api_emu.h (a host model of the API subset used,
// -DVCKATTN_AIE_VECTOR_EMU; tests/test_aie_kernels.py). Not tuned (no pipelining pragmas, the
// re-tiling loops are plain); correctness first.
//
// Modes: aie::mmul<4, 16, 8, ...> (A 4x16, B 16x8, C 4x8, 48-bit accumulators; one of the AIE1
// 8b x 8b modes, 512 MACs = 4 cycles at 128 int8 MACs/cycle).
//   QK^T: int8 x int8. To avoid transposing every K block, compute S^T = K Q^T: A = 4 rows of the
//         row-major K block (4 aligned 128-bit loads), B = a 16x8 tile of Q^T, re-tiled once per
//         tile (scalar loop, Q_ROWS * D bytes). The 4x8 C block (S^T) is transposed back with two
//         rounds of aie::interleave_zip and stored as 8 beats of S rows.
//   P.V:  uint8 x int8. AIE1's AIE API implements mmul<M, K, N, uint8, int8, 48> (aie1/mmul_8_8.hpp
//         lists int8/uint8 in both operands), so P is used as uint8 directly, no widening to int16.
//         A = 4 rows of the row-major P block, B = a 16x8 tile of V, re-tiled once per block with
//         aie::filter_even / filter_odd (8-byte chunks). Each 4x8 block product (exact: it fits in
//         int32) is added to the int32 O accumulator in local memory.
// All results are converted with to_vector<int32>(0): shift 0, no rounding; every sum fits in
// int32 (|S| <= 128*128*64, |O| <= 255*128*KEY_BLOCK*MAX_KB < 2^31), so saturation never acts.
// ---------------------------------------------------------------------------------------------
namespace vec {

// Q^T tiles: tile (ib, db) for rows 8*ib.. and features 16*db.. at (ib * d/16 + db) * 128,
// element [dd][ii] = Q[8*ib + ii][16*db + dd] (16 x 8, row-major).
template <class Shape>
inline void qk_prepare(const int8_t* __restrict q, int8_t* __restrict qt, int d) {
    static_assert(Shape::Q_ROWS % 8 == 0, "vector QK needs Q_ROWS % 8 == 0");
    const int nd = d / 16;
    for (int ib = 0; ib < Shape::Q_ROWS / 8; ++ib)
        for (int db = 0; db < nd; ++db) {
            int8_t* __restrict t = qt + (ib * nd + db) * 128;
            for (int dd = 0; dd < 16; ++dd)
                for (int ii = 0; ii < 8; ++ii) t[dd * 8 + ii] = q[(8 * ib + ii) * d + 16 * db + dd];
        }
}

// A operand of S^T = K Q^T: rows 4*jb .. 4*jb+3 of the K block, features 16*db .. 16*db+15.
inline aie::vector<int8, 64> qk_a(const int8_t* __restrict k, int jb, int db, int d) {
    const int8_t* kr = k + (4 * jb) * d + 16 * db;
    return aie::concat(aie::load_v<16>(kr), aie::load_v<16>(kr + d), aie::load_v<16>(kr + 2 * d),
                       aie::load_v<16>(kr + 3 * d));
}

template <class Shape>
inline void qk_block(const int8_t* __restrict qt, const int8_t* __restrict k, int32_t* __restrict s, int d) {
    static_assert(Shape::KEY_BLOCK % 4 == 0, "vector QK needs KEY_BLOCK % 4 == 0");
    using MMUL = aie::mmul<4, 16, 8, int8, int8>;
    const int nd = d / 16;
    for (int jb = 0; jb < Shape::KEY_BLOCK / 4; ++jb)
        for (int ib = 0; ib < Shape::Q_ROWS / 8; ++ib) {
            const int8_t* qtile = qt + ib * nd * 128;  // Q^T tiles (ib, 0 .. nd-1), 128 bytes each
            MMUL m;
            m.mul(qk_a(k, jb, 0, d), aie::load_v<128>(qtile));
            for (int db = 1; db < nd; ++db) m.mac(qk_a(k, jb, db, d), aie::load_v<128>(qtile + db * 128));
            // c[jj*8 + ii] = S[8ib + ii][4jb + jj]; transpose the 4x8 block into 8 rows of 4.
            const aie::vector<int32, 32> c = m.template to_vector<int32>(0);
            const auto z02 = aie::interleave_zip(c.extract<8>(0), c.extract<8>(2), 1);
            const auto z13 = aie::interleave_zip(c.extract<8>(1), c.extract<8>(3), 1);
            const aie::vector<int32, 16> x = aie::concat(z02.first, z02.second);  // r0_0 r2_0 r0_1 r2_1 ..
            const aie::vector<int32, 16> y = aie::concat(z13.first, z13.second);  // r1_0 r3_0 r1_1 r3_1 ..
            const auto t = aie::interleave_zip(x, y, 1);  // columns of c: t.first = ii 0..3, t.second = ii 4..7
            for (int ii = 0; ii < 4; ++ii) {
                aie::store_v(s + (8 * ib + ii) * Shape::KEY_BLOCK + 4 * jb, t.first.extract<4>(ii));
                aie::store_v(s + (8 * ib + 4 + ii) * Shape::KEY_BLOCK + 4 * jb, t.second.extract<4>(ii));
            }
        }
}

// V tiles: tile (jb, eb) for keys 16*jb.. and features 8*eb.. at (jb * d/8 + eb) * 128,
// element [jj][ee] = V[16*jb + jj][8*eb + ee] (16 x 8, row-major).
template <class Shape>
inline void pv_prepare(const int8_t* __restrict v, int8_t* __restrict vt, int d) {
    static_assert(Shape::KEY_BLOCK % 16 == 0, "vector PV needs KEY_BLOCK % 16 == 0");
    const int n8 = d / 8;
    for (int jb = 0; jb < Shape::KEY_BLOCK / 16; ++jb)
        for (int c = 0; c < d / 16; ++c)
            for (int h = 0; h < 2; ++h) {  // keys 16jb + 8h .. 16jb + 8h + 7
                const int8_t* vr = v + (16 * jb + 8 * h) * d + 16 * c;
                const aie::vector<int8, 128> rows =
                    aie::concat(aie::load_v<16>(vr), aie::load_v<16>(vr + d), aie::load_v<16>(vr + 2 * d),
                                aie::load_v<16>(vr + 3 * d), aie::load_v<16>(vr + 4 * d), aie::load_v<16>(vr + 5 * d),
                                aie::load_v<16>(vr + 6 * d), aie::load_v<16>(vr + 7 * d));
                // Each row is 16 bytes = features 16c .. 16c+15: the even 8-byte chunks are tile 2c,
                // the odd ones tile 2c + 1.
                aie::store_v(vt + (jb * n8 + 2 * c) * 128 + 64 * h, aie::filter_even(rows, 8));
                aie::store_v(vt + (jb * n8 + 2 * c + 1) * 128 + 64 * h, aie::filter_odd(rows, 8));
            }
}

// A operand of P V: rows 4*ib .. 4*ib+3 of the P block, keys 16*jb .. 16*jb+15.
template <class Shape>
inline aie::vector<uint8, 64> pv_a(const uint8_t* __restrict p, int ib, int jb) {
    const uint8_t* pr = p + (4 * ib) * Shape::KEY_BLOCK + 16 * jb;
    return aie::concat(aie::load_v<16>(pr), aie::load_v<16>(pr + Shape::KEY_BLOCK),
                       aie::load_v<16>(pr + 2 * Shape::KEY_BLOCK), aie::load_v<16>(pr + 3 * Shape::KEY_BLOCK));
}

template <class Shape>
inline void pv_block(const uint8_t* __restrict p, const int8_t* __restrict vt, int32_t* __restrict o, int d) {
    static_assert(Shape::Q_ROWS % 4 == 0, "vector PV needs Q_ROWS % 4 == 0");
    using MMUL = aie::mmul<4, 16, 8, uint8, int8>;
    const int n8 = d / 8;
    for (int ib = 0; ib < Shape::Q_ROWS / 4; ++ib)
        for (int eb = 0; eb < n8; ++eb) {
            MMUL m;
            m.mul(pv_a<Shape>(p, ib, 0), aie::load_v<128>(vt + eb * 128));
            for (int jb = 1; jb < Shape::KEY_BLOCK / 16; ++jb)
                m.mac(pv_a<Shape>(p, ib, jb), aie::load_v<128>(vt + (jb * n8 + eb) * 128));
            const aie::vector<int32, 32> c = m.template to_vector<int32>(0);  // c[r*8 + ee]
            for (int r = 0; r < 4; ++r) {
                int32_t* orow = o + (4 * ib + r) * d + 8 * eb;
                aie::store_v(orow, aie::add(aie::load_v<8>(orow), c.extract<8>(r)));
            }
        }
}

template <class Shape>
inline void zero_o(int32_t* __restrict o, int d) {
    for (int x = 0; x < Shape::Q_ROWS * d; x += 8) aie::store_v(o + x, aie::zeros<int32, 8>());
}

}  // namespace vec
#endif  // VCKATTN_AIE_VECTOR

// ---------------------------------------------------------------------------------------------
// The tiles (shared protocol code)
// ---------------------------------------------------------------------------------------------

// One QK^T tile: q header + Q, then for each of N_KB blocks: K block in, S block out.
// hdr (optional) receives the parsed q header, also when the status is not TILE_OK.
template <class Shape, class QIn, class KIn, class SOut>
TileStatus qk_tile(QIn& q_in, KIn& k_in, SOut& s_out, QkWorkspace<Shape>& ws, TileHeader* hdr = nullptr) {
    const TileHeader h = read_header(q_in);
    if (hdr) *hdr = h;
    const TileStatus st = check_header<Shape>(h, true);
    if (st != TILE_OK) return st;
    const int d = static_cast<int>(h.d);
    const int n_kb = static_cast<int>(h.n_kb);

    read_beats(q_in, ws.q, Shape::Q_ROWS * d / BEAT_BYTES);
#if VCKATTN_AIE_VECTOR
    vec::qk_prepare<Shape>(ws.q, ws.qt, d);
#endif
    for (int kb = 0; kb < n_kb; ++kb) {
        read_beats(k_in, ws.k, Shape::KEY_BLOCK * d / BEAT_BYTES);
#if VCKATTN_AIE_VECTOR
        vec::qk_block<Shape>(ws.qt, ws.k, ws.s, d);
#else
        scalar::qk_block<Shape>(ws.q, ws.k, ws.s, d);
#endif
        write_beats(s_out, ws.s, Shape::Q_ROWS * Shape::KEY_BLOCK / 4);
    }
    return TILE_OK;
}

// One P.V tile: v header; O = 0; for each of N_KB blocks: V block, P block in, O += P V;
// then O out. hdr (optional) receives the parsed v header.
template <class Shape, class VIn, class PIn, class OOut>
TileStatus pv_tile(VIn& v_in, PIn& p_in, OOut& o_out, PvWorkspace<Shape>& ws, TileHeader* hdr = nullptr) {
    const TileHeader h = read_header(v_in);
    if (hdr) *hdr = h;
    const TileStatus st = check_header<Shape>(h, false);
    if (st != TILE_OK) return st;
    const int d = static_cast<int>(h.d);
    const int n_kb = static_cast<int>(h.n_kb);

    // The accumulator is per tile: reset it before the first block.
#if VCKATTN_AIE_VECTOR
    vec::zero_o<Shape>(ws.o, d);
#else
    scalar::zero_o<Shape>(ws.o, d);
#endif
    for (int kb = 0; kb < n_kb; ++kb) {
        read_beats(v_in, ws.v, Shape::KEY_BLOCK * d / BEAT_BYTES);
        read_beats(p_in, ws.p, Shape::Q_ROWS * Shape::KEY_BLOCK / BEAT_BYTES);
#if VCKATTN_AIE_VECTOR
        vec::pv_prepare<Shape>(ws.v, ws.vt, d);
        vec::pv_block<Shape>(ws.p, ws.vt, ws.o, d);
#else
        scalar::pv_block<Shape>(ws.p, ws.v, ws.o, d);
#endif
    }
    write_beats(o_out, ws.o, Shape::Q_ROWS * d / 4);
    return TILE_OK;
}

// ---------------------------------------------------------------------------------------------
// Stream adapters
// ---------------------------------------------------------------------------------------------
#if VCKATTN_AIE_ADF

// 128-bit reads from an ADF input stream of int8 or uint8 (16 elements a beat).
template <class T>
class AdfIn {
public:
    explicit AdfIn(input_stream<T>* s) : s_(s) {}
    void read16(void* dst) { aie::store_v(static_cast<T*>(dst), readincr_v<16>(s_)); }

private:
    input_stream<T>* s_;
};

// 128-bit writes to an ADF output stream of int32 (4 a beat).
class AdfOut {
public:
    explicit AdfOut(output_stream<int32>* s) : s_(s) {}
    void write4(const int32_t* src) {
        aie::vector<int32, 4> v = aie::load_v<4>(src);
        writeincr_v<4>(s_, v);  // AIE API of 2022.2; later releases also spell it writeincr(s_, v)
    }

private:
    output_stream<int32>* s_;
};

#else  // g++: streams held in memory

using Beat = std::array<uint8_t, BEAT_BYTES>;

// Input stream over a vector of 16-byte beats. Reading past the end yields zero beats and counts
// them in missing() (the test bench turns that into an error).
class HostIn {
public:
    HostIn() = default;
    HostIn(const uint8_t* data, std::size_t n_bytes) {
        beats_.resize(n_bytes / BEAT_BYTES);
        for (std::size_t i = 0; i < beats_.size(); ++i)
            std::memcpy(beats_[i].data(), data + BEAT_BYTES * i, BEAT_BYTES);
    }
    void read16(void* dst) {
        if (pos_ < beats_.size()) {
            std::memcpy(dst, beats_[pos_].data(), BEAT_BYTES);
            ++pos_;
        } else {
            std::memset(dst, 0, BEAT_BYTES);
            ++missing_;
        }
    }
    bool at_end() const { return pos_ >= beats_.size(); }
    std::size_t consumed() const { return pos_; }
    std::size_t remaining() const { return beats_.size() - pos_; }
    std::size_t missing() const { return missing_; }

private:
    std::vector<Beat> beats_;
    std::size_t pos_ = 0;
    std::size_t missing_ = 0;
};

// Output stream collecting 16-byte beats (4 little-endian int32 each).
class HostOut {
public:
    void write4(const int32_t* src) {
        Beat b;
        for (int l = 0; l < 4; ++l) {
            const uint32_t u = static_cast<uint32_t>(src[l]);
            for (int k = 0; k < 4; ++k) b[4 * l + k] = static_cast<uint8_t>(u >> (8 * k));
        }
        beats_.push_back(b);
    }
    const std::vector<Beat>& beats() const { return beats_; }

private:
    std::vector<Beat> beats_;
};

#endif  // VCKATTN_AIE_ADF

}  // namespace vckattn_aie

#endif

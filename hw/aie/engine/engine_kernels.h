// Per-command logic of the scalable engine's two AIE kernels (stream contract v2, hw/ENGINE.md),
// written once as templates over stream adapters (like ../attention_kernels.h), so that the g++
// C-simulation (sim/cpp/engine_csim_tb.cpp) runs exactly the protocol code the AI Engine runs.
//
//   qk_slice<J>  cmd (qk_in, broadcast): LOAD_K keeps the keys of slice J; TILE reads Q and writes one
//                score packet (header beat streams.PACKET + Q_ROWS x slice-keys scores, row-major,
//                128/SCORE_BITS a beat) -- nothing when slice J is empty.
//   pv_slice<J>  v (v_in, broadcast): LOAD_V keeps the values of slice J; per tile: its P packet (none
//                when slice J is empty), partial O_J = P_J V_J (int32), plus the cascade input (J > 0);
//                then the cascade output ([tile_id, rows] + sum) or, for J = KERNELS-1, the O record
//                (header beat streams.RESULT + Q_ROWS x d int32, 4 a beat).
// Numerics: golden/engine.py (engine_scores, slice_blocks, tile_keep); header fields only through the
// generated ../generated/engine_streams.h (VCKATTN_GET / VCKATTN_PUT), never spelled here.
//
// Build parameters (macros; the generator writes them into the design's engine_config.h, the
// C-simulation passes them with -D): VCKATTN_ENGINE_KERNELS, VCKATTN_ENGINE_Q_ROWS,
// VCKATTN_ENGINE_KEY_BLOCK, VCKATTN_ENGINE_MAX_D, VCKATTN_ENGINE_MAX_KEYS, VCKATTN_ENGINE_SCORE_BITS.
//
// Statuses: a kernel that reads a header it cannot act on returns a Status != ENGINE_OK after only that
// header beat was read and before writing anything for it. Nothing can recover the stream position
// after that on the AI Engine; the C-simulation reports it and stops that kernel.
//
// A LOAD_V announces its group's tile count (`tiles`, hw/engine/streams.py): how a pv_slice knows when
// to read the next LOAD_V (P packets and the cascade carry no group id). A LOAD_V announcing 0 tiles is
// refused (ENGINE_BAD_TILES).
//
// Stream adapter concept (template parameters):
//   In      void read16(void* dst)                   one 128-bit beat into 16 bytes (16-byte aligned)
//   PktOut  void write16(const void* src, bool last)  one 128-bit beat of a packet (last: TLAST)
//   CascIn  void read8(int32_t* dst)                  one cascade word: 8 int32 (32-byte aligned)
//   CascOut void write8(const int32_t* src)           one cascade word: 8 int32
//   OOut    void write4(const int32_t* src)           one 128-bit beat of 4 int32
// Adapters: Adf* (ADF streams; AI Engine, x86sim; UNVERIFIED: no aiecompiler here) and the g++ ones
// (HostIn / HostOut from ../attention_kernels.h, HostPktOut, HostCasc below).
//
// Compute paths: the scalar reference (plain loops, int32 accumulation) unless VCKATTN_AIE_VECTOR
// (see ../attention_kernels.h: AI Engine builds without VCKATTN_AIE_SCALAR, or g++ with
// -DVCKATTN_AIE_VECTOR_EMU over ../aie_api_emu.h): Q K^T per key block with v1's aie::mmul<4,16,8,int8,
// int8> code (vec::qk_prepare / vec::qk_block), P V over the whole slice with aie::mmul<4,16,8,uint8,
// int8> on V re-tiled once at LOAD_V. The narrowing of the int32 accumulator to SCORE_BITS (shift,
// round half up, symmetric saturation, the mask sentinel) is a scalar loop in both paths.
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
#ifndef VCKATTN_ENGINE_Q_ROWS
#error "VCKATTN_ENGINE_Q_ROWS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_KEY_BLOCK
#error "VCKATTN_ENGINE_KEY_BLOCK is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_MAX_D
#error "VCKATTN_ENGINE_MAX_D is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_MAX_KEYS
#error "VCKATTN_ENGINE_MAX_KEYS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_SCORE_BITS
#error "VCKATTN_ENGINE_SCORE_BITS is not defined: include the design's generated engine_config.h or pass -D"
#endif

#include <cstdint>

#include "../attention_kernels.h"
#include "../generated/engine_streams.h"

namespace vckattn_engine {

// ---------------------------------------------------------------------------------------------
// Build parameters and workspaces
// ---------------------------------------------------------------------------------------------

// Compile-time shape (element counts). Also the Shape argument of v1's qk helpers (Q_ROWS, KEY_BLOCK).
struct EngineShape {
    static constexpr int KERNELS = VCKATTN_ENGINE_KERNELS;      // k: QK^T and P.V kernels per pipeline
    static constexpr int Q_ROWS = VCKATTN_ENGINE_Q_ROWS;        // query rows per tile
    static constexpr int KEY_BLOCK = VCKATTN_ENGINE_KEY_BLOCK;  // keys per block
    static constexpr int MAX_D = VCKATTN_ENGINE_MAX_D;          // largest head size D
    static constexpr int MAX_KEYS = VCKATTN_ENGINE_MAX_KEYS;    // largest padded key count of a group
    static constexpr int SCORE_BITS = VCKATTN_ENGINE_SCORE_BITS;  // bits per score on the score stream
    static constexpr int MAX_KB = MAX_KEYS / KEY_BLOCK;            // largest n_kb
    static constexpr int SLICE_BLOCKS = (MAX_KB + KERNELS - 1) / KERNELS;  // largest slice, blocks
    static constexpr int SLICE_KEYS = SLICE_BLOCKS * KEY_BLOCK;            // largest slice, keys
    static constexpr int SCORES_PER_BEAT = 128 / SCORE_BITS;
};

static_assert(EngineShape::KERNELS >= 1 && EngineShape::KERNELS <= 32, "KERNELS must be 1..32 (5-bit packet id)");
static_assert(EngineShape::Q_ROWS > 0 && EngineShape::Q_ROWS % 8 == 0, "Q_ROWS must be a positive multiple of 8");
static_assert(EngineShape::KEY_BLOCK > 0 && EngineShape::KEY_BLOCK % 16 == 0,
              "KEY_BLOCK must be a positive multiple of 16");
static_assert(EngineShape::MAX_D >= 16 && EngineShape::MAX_D % 16 == 0, "MAX_D must be a positive multiple of 16");
static_assert(EngineShape::MAX_KEYS >= EngineShape::KEY_BLOCK && EngineShape::MAX_KEYS % EngineShape::KEY_BLOCK == 0,
              "MAX_KEYS must be a positive multiple of KEY_BLOCK");
static_assert(EngineShape::MAX_KB <= 0xFFFF, "n_kb is a 16-bit header field");
static_assert(EngineShape::SCORE_BITS == 8 || EngineShape::SCORE_BITS == 16, "SCORE_BITS must be 8 or 16");
static_assert(255LL * 128 * EngineShape::MAX_KEYS < (1LL << 31), "P.V over MAX_KEYS may overflow int32");

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
using score_t = ScoreType<EngineShape::SCORE_BITS>::type;  // one score on the score stream

constexpr int32_t SCORE_MAX = (1 << (EngineShape::SCORE_BITS - 1)) - 1;  // symmetric saturation
constexpr int32_t SCORE_SENTINEL = -(1 << (EngineShape::SCORE_BITS - 1));  // the mask sentinel
constexpr int MAX_SCORE_SHIFT = 40;                                         // golden narrow_scores' limit

// QK^T kernel state (32-byte aligned for 256-bit vector accesses). k is resident between LOAD_Ks.
struct QkWorkspace {
    alignas(32) int8_t k[EngineShape::SLICE_KEYS * EngineShape::MAX_D];        // K slice, key-major (stride d)
    alignas(32) int8_t q[EngineShape::Q_ROWS * EngineShape::MAX_D];            // Q, row-major (stride d)
    alignas(32) int8_t qt[EngineShape::Q_ROWS * EngineShape::MAX_D];           // Q^T in 16x8 tiles (vector path)
    alignas(32) int32_t acc[EngineShape::Q_ROWS * EngineShape::KEY_BLOCK];     // Q K_b^T of one block
    alignas(32) score_t sc[EngineShape::Q_ROWS * EngineShape::SLICE_KEYS];     // packet payload, row-major
    alignas(16) int8_t drop[BEAT_BYTES];                                       // beats of other slices
    uint32_t n_kb;  // of the last LOAD_K (0: none yet)
    uint32_t d;
};

// P.V kernel state. v is resident between LOAD_Vs: key-major (stride d) on the scalar path, 16x8
// tiles (tile (g, eb) for keys 16g.. and features 8eb.. at (g * d/8 + eb) * 128) on the vector path.
struct PvWorkspace {
    alignas(32) int8_t v[EngineShape::SLICE_KEYS * EngineShape::MAX_D];
    alignas(32) int8_t blk[EngineShape::KEY_BLOCK * EngineShape::MAX_D];    // one V block (vector path re-tiling)
    alignas(32) uint8_t p[EngineShape::Q_ROWS * EngineShape::SLICE_KEYS];   // P packet payload, row-major
    alignas(32) int32_t o[EngineShape::Q_ROWS * EngineShape::MAX_D];        // O partial sum, row-major
    alignas(32) int32_t casc[8];                                            // one cascade word
    alignas(16) int8_t drop[BEAT_BYTES];
    uint32_t n_kb;        // of the last LOAD_V (0: none yet)
    uint32_t d;
    uint32_t tiles_left;  // tiles of the current group still to come
};

// Data memory per kernel (bytes): the generator sets each kernel's heap size from these.
constexpr int QK_WORKSPACE_BYTES = static_cast<int>(sizeof(QkWorkspace));
constexpr int PV_WORKSPACE_BYTES = static_cast<int>(sizeof(PvWorkspace));

// ---------------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------------

enum Status : int {
    ENGINE_OK = 0,
    ENGINE_BAD_OP = 1,          // opcode not valid on this stream (qk_in: LOAD_K, TILE; v_in: LOAD_V)
    ENGINE_BAD_D = 2,           // D not a multiple of 16, D < 16 or D > MAX_D
    ENGINE_BAD_N_KB = 3,        // n_kb == 0 or n_kb > MAX_KEYS / KEY_BLOCK
    ENGINE_BAD_ROWS = 4,        // TILE rows > Q_ROWS
    ENGINE_BAD_VALID_KEYS = 5,  // TILE valid_keys > n_kb * KEY_BLOCK
    ENGINE_BAD_SHIFT = 6,       // TILE score_shift > 40
    ENGINE_TILE_MISMATCH = 7,   // TILE n_kb / d differ from the last LOAD_K's (or no LOAD_K yet)
    ENGINE_BAD_TILES = 8,       // LOAD_V announces 0 tiles
    ENGINE_BAD_PACKET = 9,      // P packet: elem_bits != 8 or count != Q_ROWS x slice keys
    ENGINE_MISROUTE = 10,       // P packet of another slice, or of another tile than the cascade's
};

inline const char* status_text(int status) {
    switch (status) {
        case ENGINE_OK: return "ok";
        case ENGINE_BAD_OP: return "bad opcode for this stream (qk_in: LOAD_K/TILE, v_in: LOAD_V)";
        case ENGINE_BAD_D: return "bad head size D (must be a multiple of 16, 16 <= D <= MAX_D)";
        case ENGINE_BAD_N_KB: return "bad key block count n_kb (must be 1 <= n_kb <= MAX_KEYS/KEY_BLOCK)";
        case ENGINE_BAD_ROWS: return "bad TILE row count (must be rows <= Q_ROWS)";
        case ENGINE_BAD_VALID_KEYS: return "bad TILE valid_keys (must be <= n_kb * KEY_BLOCK)";
        case ENGINE_BAD_SHIFT: return "bad TILE score_shift (must be <= 40)";
        case ENGINE_TILE_MISMATCH: return "TILE n_kb/d differ from the last LOAD_K";
        case ENGINE_BAD_TILES: return "LOAD_V announces no tiles";
        case ENGINE_BAD_PACKET: return "bad P packet header (elem_bits must be 8, count Q_ROWS x slice keys)";
        case ENGINE_MISROUTE: return "misrouted P packet (other slice, or other tile than the cascade's)";
        default: return "unknown status";
    }
}

// Blocks [b0, b1) of slice j of a group of n_kb blocks (golden/engine.py slice_blocks).
inline void slice_range(uint32_t n_kb, int j, uint32_t* b0, uint32_t* b1) {
    const uint32_t sb = (n_kb + EngineShape::KERNELS - 1) / EngineShape::KERNELS;
    const uint32_t lo = static_cast<uint32_t>(j) * sb, hi = lo + sb;
    *b0 = lo < n_kb ? lo : n_kb;
    *b1 = hi < n_kb ? hi : n_kb;
}

inline Status check_geometry(uint32_t d, uint32_t n_kb) {
    if (d < 16 || d > static_cast<uint32_t>(EngineShape::MAX_D) || d % 16 != 0) return ENGINE_BAD_D;
    if (n_kb < 1 || n_kb > static_cast<uint32_t>(EngineShape::MAX_KB)) return ENGINE_BAD_N_KB;
    return ENGINE_OK;
}

// Reads a key-major payload of keys x d int8 (d/16 beats a key), keeping keys [k0, k1) at dst (stride d).
template <class In>
inline void read_keys(In& in, int8_t* dst, int8_t* drop, uint32_t keys, uint32_t k0, uint32_t k1, int d) {
    const int bpk = d / BEAT_BYTES;
    for (uint32_t key = 0; key < keys; ++key)
        for (int b = 0; b < bpk; ++b) {
            if (key >= k0 && key < k1)
                in.read16(dst + (key - k0) * d + BEAT_BYTES * b);
            else
                in.read16(drop);
        }
}

// clamp(round_half_up(acc * 2^-shift), -SCORE_MAX, SCORE_MAX) (golden narrow_scores).
inline int32_t narrow_score(int32_t acc, int shift) {
    int64_t x = acc;
    if (shift > 0) x = (x + (int64_t(1) << (shift - 1))) >> shift;  // arithmetic shift: floor
    if (x > SCORE_MAX) x = SCORE_MAX;
    if (x < -SCORE_MAX) x = -SCORE_MAX;
    return static_cast<int32_t>(x);
}

// ---------------------------------------------------------------------------------------------
// Vector P.V over a slice (aie::mmul<4,16,8,uint8,int8>)
// ---------------------------------------------------------------------------------------------
#if VCKATTN_AIE_VECTOR
namespace vec {

// Re-tiles one V block (KEY_BLOCK x d, key-major) into the slice's 16x8 tiles (v1's pv_prepare: the
// tiles of block b start at b * KEY_BLOCK * d, which is where the global 16-key group layout puts them).
inline void pv_prepare_block(const int8_t* __restrict blk, int8_t* __restrict vt_block, int d) {
    ::vckattn_aie::vec::pv_prepare<EngineShape>(blk, vt_block, d);
}

// A operand: rows 4ib .. 4ib+3 of P (row stride sk), keys 16g .. 16g+15.
inline aie::vector<uint8, 64> pv_a(const uint8_t* __restrict p, int ib, int g, int sk) {
    const uint8_t* pr = p + (4 * ib) * sk + 16 * g;
    return aie::concat(aie::load_v<16>(pr), aie::load_v<16>(pr + sk), aie::load_v<16>(pr + 2 * sk),
                       aie::load_v<16>(pr + 3 * sk));
}

// o += P V: p Q_ROWS x sk (row-major), vt the slice's V tiles, o Q_ROWS x d int32.
inline void pv_slice(const uint8_t* __restrict p, const int8_t* __restrict vt, int32_t* __restrict o, int sk, int d) {
    using MMUL = aie::mmul<4, 16, 8, uint8, int8>;
    const int n8 = d / 8;
    for (int ib = 0; ib < EngineShape::Q_ROWS / 4; ++ib)
        for (int eb = 0; eb < n8; ++eb) {
            MMUL m;
            m.mul(pv_a(p, ib, 0, sk), aie::load_v<128>(vt + eb * 128));
            for (int g = 1; g < sk / 16; ++g) m.mac(pv_a(p, ib, g, sk), aie::load_v<128>(vt + (g * n8 + eb) * 128));
            const aie::vector<int32, 32> c = m.template to_vector<int32>(0);  // c[r*8 + ee]
            for (int r = 0; r < 4; ++r) {
                int32_t* orow = o + (4 * ib + r) * d + 8 * eb;
                aie::store_v(orow, aie::add(aie::load_v<8>(orow), c.extract<8>(r)));
            }
        }
}

}  // namespace vec
#endif  // VCKATTN_AIE_VECTOR

// ---------------------------------------------------------------------------------------------
// qk_slice: one command
// ---------------------------------------------------------------------------------------------

// Reads one command from cmd and acts on it (see the file comment). hdr (optional, 4 words) receives
// the command header, also when the status is not ENGINE_OK.
template <int J, class In, class PktOut>
Status qk_command(In& cmd, PktOut& s, QkWorkspace& ws, uint32_t* hdr = nullptr) {
    static_assert(J >= 0 && J < EngineShape::KERNELS, "slice index out of range");
    using S = EngineShape;
    alignas(16) uint32_t w[4];
    cmd.read16(w);
    if (hdr)
        for (int i = 0; i < 4; ++i) hdr[i] = w[i];
    const uint32_t op = VCKATTN_GET(w, COMMAND_OP);
    const uint32_t d = VCKATTN_GET(w, COMMAND_D), n_kb = VCKATTN_GET(w, COMMAND_N_KB);
    if (op == OP_LOAD_K) {
        const Status st = check_geometry(d, n_kb);
        if (st != ENGINE_OK) return st;
        uint32_t b0, b1;
        slice_range(n_kb, J, &b0, &b1);
        read_keys(cmd, ws.k, ws.drop, n_kb * S::KEY_BLOCK, b0 * S::KEY_BLOCK, b1 * S::KEY_BLOCK, static_cast<int>(d));
        ws.n_kb = n_kb;
        ws.d = d;
        return ENGINE_OK;
    }
    if (op != OP_TILE) return ENGINE_BAD_OP;
    if (n_kb != ws.n_kb || d != ws.d || ws.n_kb == 0) return ENGINE_TILE_MISMATCH;
    const uint32_t rows = VCKATTN_GET(w, COMMAND_ROWS), valid = VCKATTN_GET(w, COMMAND_VALID_KEYS);
    const uint32_t q0 = VCKATTN_GET(w, COMMAND_Q0), causal = VCKATTN_GET(w, COMMAND_CAUSAL);
    const int shift = static_cast<int>(VCKATTN_GET(w, COMMAND_SCORE_SHIFT));
    if (rows > static_cast<uint32_t>(S::Q_ROWS)) return ENGINE_BAD_ROWS;
    if (valid > n_kb * S::KEY_BLOCK) return ENGINE_BAD_VALID_KEYS;
    if (shift > MAX_SCORE_SHIFT) return ENGINE_BAD_SHIFT;
    const int di = static_cast<int>(d);

    ::vckattn_aie::read_beats(cmd, ws.q, S::Q_ROWS * di / BEAT_BYTES);
    uint32_t b0, b1;
    slice_range(n_kb, J, &b0, &b1);
    if (b0 == b1) return ENGINE_OK;  // empty slice: no packet
    const int sk = static_cast<int>(b1 - b0) * S::KEY_BLOCK;
#if VCKATTN_AIE_VECTOR
    ::vckattn_aie::vec::qk_prepare<S>(ws.q, ws.qt, di);
#endif
    for (int b = 0; b < static_cast<int>(b1 - b0); ++b) {
        const int8_t* kb = ws.k + b * S::KEY_BLOCK * di;
#if VCKATTN_AIE_VECTOR
        ::vckattn_aie::vec::qk_block<S>(ws.qt, kb, ws.acc, di);
#else
        ::vckattn_aie::scalar::qk_block<S>(ws.q, kb, ws.acc, di);
#endif
        const uint32_t key0 = (b0 + b) * S::KEY_BLOCK;  // global index of the block's first key
        for (int i = 0; i < S::Q_ROWS; ++i)
            for (int jj = 0; jj < S::KEY_BLOCK; ++jj) {
                const uint32_t key = key0 + jj;
                const bool keep = static_cast<uint32_t>(i) < rows && key < valid &&
                                  (!causal || key <= q0 + static_cast<uint32_t>(i));
                const int32_t a = ws.acc[i * S::KEY_BLOCK + jj];
                ws.sc[i * sk + b * S::KEY_BLOCK + jj] = static_cast<score_t>(keep ? narrow_score(a, shift) : SCORE_SENTINEL);
            }
    }
    const uint32_t count = static_cast<uint32_t>(S::Q_ROWS * sk);
    alignas(16) uint32_t h[4] = {0, 0, 0, 0};
    VCKATTN_PUT(h, PACKET_PACKET_ID, static_cast<uint32_t>(J));
    VCKATTN_PUT(h, PACKET_TILE_ID, VCKATTN_GET(w, COMMAND_TAG));
    VCKATTN_PUT(h, PACKET_SLICE, static_cast<uint32_t>(J));
    VCKATTN_PUT(h, PACKET_ELEM_BITS, static_cast<uint32_t>(S::SCORE_BITS));
    VCKATTN_PUT(h, PACKET_ROWS, rows);
    VCKATTN_PUT(h, PACKET_COUNT, count);
    VCKATTN_PUT(h, PACKET_HEAD, VCKATTN_GET(w, COMMAND_HEAD));  // the tile's query head: the PL's register set
    s.write16(h, false);
    const int beats = static_cast<int>(count) / S::SCORES_PER_BEAT;
    const uint8_t* payload = reinterpret_cast<const uint8_t*>(ws.sc);  // little endian, like the stream
    for (int x = 0; x < beats; ++x) s.write16(payload + BEAT_BYTES * x, x == beats - 1);
    return ENGINE_OK;
}

// ---------------------------------------------------------------------------------------------
// pv_slice: one step (a LOAD_V, or one tile)
// ---------------------------------------------------------------------------------------------

// Placeholder for the stream a kernel variant does not have (no cascade input on J = 0, ...).
struct NoStream {
    void read8(int32_t*) {}
    void write8(const int32_t*) {}
    void write4(const int32_t*) {}
};

// One step of pv_slice<J>: when the current group has no tiles left, reads a LOAD_V from v; otherwise
// processes the group's next tile (see the file comment). HAS_CIN: a cascade input (J > 0); LAST: writes
// the O record to o instead of the cascade output. hdr (optional, 4 words) receives the last header read
// (the LOAD_V command or the P packet header).
template <int J, bool HAS_CIN, bool LAST, class VIn, class PIn, class CascIn, class CascOut, class OOut>
Status pv_step(VIn& v, PIn& p, CascIn& cin, CascOut& cout, OOut& o, PvWorkspace& ws, uint32_t* hdr = nullptr) {
    static_assert(J >= 0 && J < EngineShape::KERNELS, "slice index out of range");
    static_assert(HAS_CIN == (J > 0), "only slice 0 has no cascade input");
    static_assert(LAST == (J == EngineShape::KERNELS - 1), "only the last slice writes the O record");
    using S = EngineShape;
    alignas(16) uint32_t w[4];
    if (ws.tiles_left == 0) {
        v.read16(w);
        if (hdr)
            for (int i = 0; i < 4; ++i) hdr[i] = w[i];
        if (VCKATTN_GET(w, COMMAND_OP) != OP_LOAD_V) return ENGINE_BAD_OP;
        const uint32_t d = VCKATTN_GET(w, COMMAND_D), n_kb = VCKATTN_GET(w, COMMAND_N_KB);
        const Status st = check_geometry(d, n_kb);
        if (st != ENGINE_OK) return st;
        const uint32_t tiles = VCKATTN_GET(w, COMMAND_TILES);
        if (tiles == 0) return ENGINE_BAD_TILES;
        uint32_t b0, b1;
        slice_range(n_kb, J, &b0, &b1);
        const int di = static_cast<int>(d);
#if VCKATTN_AIE_VECTOR
        // block by block through blk, re-tiled into v
        const int bpb = S::KEY_BLOCK * di / BEAT_BYTES;  // beats of one block
        for (uint32_t b = 0; b < n_kb; ++b) {
            if (b >= b0 && b < b1) {
                ::vckattn_aie::read_beats(v, ws.blk, bpb);
                vec::pv_prepare_block(ws.blk, ws.v + (b - b0) * S::KEY_BLOCK * di, di);
            } else {
                for (int x = 0; x < bpb; ++x) v.read16(ws.drop);
            }
        }
#else
        read_keys(v, ws.v, ws.drop, n_kb * S::KEY_BLOCK, b0 * S::KEY_BLOCK, b1 * S::KEY_BLOCK, di);
#endif
        ws.n_kb = n_kb;
        ws.d = d;
        ws.tiles_left = tiles;
        return ENGINE_OK;
    }

    uint32_t b0, b1;
    slice_range(ws.n_kb, J, &b0, &b1);
    const int sk = static_cast<int>(b1 - b0) * S::KEY_BLOCK;
    const int d = static_cast<int>(ws.d);
    uint32_t tile_id = 0, rows = 0;
    if (HAS_CIN) {
        cin.read8(ws.casc);  // cascade header word: [tile_id, rows, 0 ...]
        tile_id = static_cast<uint32_t>(ws.casc[0]);
        rows = static_cast<uint32_t>(ws.casc[1]);
    }
    if (sk > 0) {
        p.read16(w);
        if (hdr)
            for (int i = 0; i < 4; ++i) hdr[i] = w[i];
        if (VCKATTN_GET(w, PACKET_PACKET_ID) != static_cast<uint32_t>(J) ||
            VCKATTN_GET(w, PACKET_SLICE) != static_cast<uint32_t>(J))
            return ENGINE_MISROUTE;
        if (HAS_CIN && (VCKATTN_GET(w, PACKET_TILE_ID) != tile_id || VCKATTN_GET(w, PACKET_ROWS) != rows))
            return ENGINE_MISROUTE;
        if (VCKATTN_GET(w, PACKET_ELEM_BITS) != 8 ||
            VCKATTN_GET(w, PACKET_COUNT) != static_cast<uint32_t>(S::Q_ROWS * sk))
            return ENGINE_BAD_PACKET;
        tile_id = VCKATTN_GET(w, PACKET_TILE_ID);
        rows = VCKATTN_GET(w, PACKET_ROWS);
        ::vckattn_aie::read_beats(p, ws.p, S::Q_ROWS * sk / BEAT_BYTES);
    }
    // o = cascade partial (J > 0) or 0, then o += P_J V_J
    for (int x = 0; x < S::Q_ROWS * d; x += 8) {
        if (HAS_CIN) {
            cin.read8(ws.o + x);
        } else {
            for (int l = 0; l < 8; ++l) ws.o[x + l] = 0;
        }
    }
    if (sk > 0) {
#if VCKATTN_AIE_VECTOR
        vec::pv_slice(ws.p, ws.v, ws.o, sk, d);
#else
        for (int i = 0; i < S::Q_ROWS; ++i)
            for (int e = 0; e < d; ++e) {
                int32_t acc = ws.o[i * d + e];
                for (int jj = 0; jj < sk; ++jj) acc += static_cast<int32_t>(ws.p[i * sk + jj]) * ws.v[jj * d + e];
                ws.o[i * d + e] = acc;
            }
#endif
    }
    if (LAST) {
        alignas(16) uint32_t h[4] = {0, 0, 0, 0};
        VCKATTN_PUT(h, RESULT_TILE_ID, tile_id);
        VCKATTN_PUT(h, RESULT_ROWS, rows);
        VCKATTN_PUT(h, RESULT_D, ws.d);
        o.write4(reinterpret_cast<const int32_t*>(h));
        ::vckattn_aie::write_beats(o, ws.o, S::Q_ROWS * d / 4);
    } else {
        for (int l = 0; l < 8; ++l) ws.casc[l] = 0;
        ws.casc[0] = static_cast<int32_t>(tile_id);
        ws.casc[1] = static_cast<int32_t>(rows);
        cout.write8(ws.casc);
        for (int x = 0; x < S::Q_ROWS * d; x += 8) cout.write8(ws.o + x);
    }
    --ws.tiles_left;
    return ENGINE_OK;
}

// ---------------------------------------------------------------------------------------------
// Stream adapters
// ---------------------------------------------------------------------------------------------
#if VCKATTN_AIE_ADF
// UNVERIFIED (no aiecompiler on this project's machines): written against the ADF / AIE API of
// Vitis 2022.2 (AIE1). Packet streams are 32-bit: a beat is 4 words, the header beat's word 0 is the
// hardware packet header (writeHeader: packet id in bits 0..4, the field streams.PACKET packet_id).
// The graph must give slice J's packets the packet id J (pktmerge / pktsplit port J).

// 128-bit reads from an ADF int32 stream (4 words a beat).
class AdfIn32 {
public:
    explicit AdfIn32(input_stream<int32>* s) : s_(s) {}
    void read16(void* dst) { aie::store_v(static_cast<int32*>(dst), readincr_v<4>(s_)); }

private:
    input_stream<int32>* s_;
};

class AdfPktOut {
public:
    explicit AdfPktOut(output_pktstream* s) : s_(s), first_(true) {}
    void write16(const void* src, bool last) {
        const uint32_t* w = static_cast<const uint32_t*>(src);
        int k = 0;
        if (first_) {
            writeHeader(s_, 0, VCKATTN_GET(w, PACKET_PACKET_ID));
            k = 1;
        }
        for (; k < 4; ++k) writeincr(s_, static_cast<int32>(w[k]), last && k == 3);
        first_ = last;
    }

private:
    output_pktstream* s_;
    bool first_;
};

class AdfPktIn {
public:
    explicit AdfPktIn(input_pktstream* s) : s_(s) {}
    void read16(void* dst) {
        int32* w = static_cast<int32*>(dst);
        for (int k = 0; k < 4; ++k) w[k] = readincr(s_);
    }

private:
    input_pktstream* s_;
};

class AdfCascIn {
public:
    explicit AdfCascIn(input_cascade<acc48>* c) : c_(c) {}
    void read8(int32_t* dst) {
        aie::accum<acc48, 8> a = readincr_v<8>(c_);
        aie::store_v(dst, a.template to_vector<int32>(0));
    }

private:
    input_cascade<acc48>* c_;
};

class AdfCascOut {
public:
    explicit AdfCascOut(output_cascade<acc48>* c) : c_(c) {}
    void write8(const int32_t* src) {
        aie::accum<acc48, 8> a;
        a.from_vector(aie::load_v<8>(src), 0);
        writeincr(c_, a);
    }

private:
    output_cascade<acc48>* c_;
};

#else  // g++: streams held in memory

// Packet output collecting 16-byte beats and their TLAST flags.
class HostPktOut {
public:
    void write16(const void* src, bool last) {
        ::vckattn_aie::Beat b;
        std::memcpy(b.data(), src, BEAT_BYTES);
        beats_.push_back(b);
        last_.push_back(last);
    }
    const std::vector< ::vckattn_aie::Beat>& beats() const { return beats_; }
    const std::vector<bool>& last() const { return last_; }

private:
    std::vector< ::vckattn_aie::Beat> beats_;
    std::vector<bool> last_;
};

// A cascade as a FIFO of int32 (8 a word). Reading past the end yields zeros, counted in missing().
class HostCasc {
public:
    void write8(const int32_t* src) { words_.insert(words_.end(), src, src + 8); }
    void read8(int32_t* dst) {
        for (int l = 0; l < 8; ++l) {
            if (pos_ < words_.size()) {
                dst[l] = words_[pos_++];
            } else {
                dst[l] = 0;
                ++missing_;
            }
        }
    }
    std::size_t remaining() const { return (words_.size() - pos_) / 8; }  // cascade words
    std::size_t missing() const { return missing_ / 8; }

private:
    std::vector<int32_t> words_;
    std::size_t pos_ = 0;
    std::size_t missing_ = 0;
};

#endif  // VCKATTN_AIE_ADF

}  // namespace vckattn_engine

#endif

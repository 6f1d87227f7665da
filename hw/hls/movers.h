// HLS data movers and score_switch of the attention build (hw/STREAMS.md, host/tile_buffers.py).
//
// Kernels (top-level functions; parameters in exactly the order of host/manifest.py::build_manifest,
// since XRT argument indices follow it):
//
//   mm2s_tiles   DDR desc/q/mask  -> q_out (AIE q_in), mask_out (score_switch.mask_in: per tile the
//                query head, desc word 2, then the mask words)
//   mm2s_kv      DDR desc/kv      -> k_out (AIE k_in), v_out (AIE v_in)
//   s2mm_out     o_in (AIE o_out) -> requantize -> DDR out records
//   score_switch s_in + mask_in   -> to_<normalizer>;  from_<normalizer> -> p_out (AIE p_in)
//
// DDR pointers (m_axi), all little endian:
//   desc  uint32 words, 8 a tile: [tile_id, batch, head, kv_head, q0, rows, seq_len, keys_pad]
//   q     128-bit beats, tile i at beat i*(Q_ROWS*head_dim/16): Q_ROWS x head_dim int8 row-major
//   mask  uint32 words, tile i at word i*keys_pad: Q_ROWS rows x keys_pad/32 words, bit b of word w
//         of a row = keep of key 32w+b
//   kv    128-bit beats, slab s at beat s*(2*keys_pad*head_dim/16): K (keys_pad x head_dim int8
//         row-major) then V (same shape)
//   out   128-bit beats, record i at beat i*(1 + Q_ROWS*head_dim/16): header beat uint32
//         [tile_id, rows, status = 0, 0] then A Q_ROWS x head_dim int8 row-major
//
// Scalars (s_axilite, 32 bit): n_tiles = tiles of this launch; head_dim in {32, 64}; keys_pad a
// multiple of 32 in 32..MAX_KEYS. A launch whose head_dim / keys_pad fall outside these ranges
// (geometry_ok() false) moves nothing: the kernel returns at once without touching its streams or
// DDR (the host then times out rather than the PL reading or writing out of bounds).
#ifndef VCKATTN_MOVERS_H
#define VCKATTN_MOVERS_H

#include "axis_types.h"

namespace vckattn {

constexpr int DESC_WORDS = 8;       // uint32 words per tile descriptor
constexpr int DESC_TILE_ID = 0;     // descriptor word indices (host/tile_buffers.DESC_FIELDS)
constexpr int DESC_BATCH = 1;
constexpr int DESC_HEAD = 2;
constexpr int DESC_KV_HEAD = 3;
constexpr int DESC_ROWS = 5;
constexpr int BEAT_BYTES = 16;      // bytes of a 128-bit beat
constexpr int BEATS_PER_ROW_MAX = MAX_KEYS / LANES;  // score / P beats per row at MAX_KEYS
constexpr int BEATS_PER_BLOCK_S = Q_ROWS * KEY_BLOCK / 4;    // 128-bit beats of one S block (int32)
constexpr int BEATS_PER_BLOCK_P = Q_ROWS * KEY_BLOCK / 16;   // 128-bit beats of one P block (uint8)
constexpr int MAX_RQ_SHIFT = 62;    // largest requantization shift (golden fixedpoint.MAX_BITS)

// True when head_dim is 32 or 64 and keys_pad is a multiple of KEY_BLOCK in KEY_BLOCK..MAX_KEYS.
inline bool geometry_ok(unsigned head_dim, unsigned keys_pad) {
    return (head_dim == 32 || head_dim == 64) && keys_pad >= (unsigned)KEY_BLOCK &&
           keys_pad <= (unsigned)MAX_KEYS && keys_pad % KEY_BLOCK == 0;
}

}  // namespace vckattn

// ------------------------------------------------------------------------------- data movers

// Per tile i < n_tiles: q_out gets the header beat uint32 [keys_pad/32, head_dim, rows (desc word 5),
// tile_id (desc word 0)] and then the tile's Q (Q_ROWS*head_dim/16 beats); mask_out gets the tile's
// query head (desc word 2, one word) and then its keys_pad mask words (Q_ROWS rows x keys_pad/32 words).
// The two streams run independently (dataflow; the head words pass from the desc reader to the mask
// sender through an internal FIFO of 16).
void mm2s_tiles(const ap_uint<32>* desc, const ap_uint<128>* q, const ap_uint<32>* mask, unsigned n_tiles,
                unsigned head_dim, unsigned keys_pad, hls::stream<vckattn::beat128>& q_out,
                hls::stream<vckattn::word32>& mask_out);

// Per tile i < n_tiles, slab = batch (desc word 1) * n_kv_heads + kv_head (desc word 3): k_out gets
// the slab's K (keys_pad/32 blocks of KEY_BLOCK x head_dim int8, keys_pad*head_dim/16 beats); v_out
// gets the header beat uint32 [keys_pad/32, head_dim, 0, 0] and then the slab's V (same size). Per
// tile K is sent before V (one sequential process: both come from the one kv pointer).
void mm2s_kv(const ap_uint<32>* desc, const ap_uint<128>* kv, unsigned n_tiles, unsigned n_kv_heads,
             unsigned head_dim, unsigned keys_pad, hls::stream<vckattn::beat128>& k_out,
             hls::stream<vckattn::beat128>& v_out);

// Per tile i < n_tiles: reads O (Q_ROWS x head_dim int32 row-major, 4 a beat) from o_in, requantizes
// every element a = sat_int8((o*rq_mult + 2^(rq_shift-1)) >> rq_shift) (64-bit product, arithmetic
// shift = floor, so round half up; rq_shift == 0: a = sat_int8(o*rq_mult); rq_shift > 62 acts as 62)
// and writes record i of out: header [tile_id, rows, 0, 0] (desc words 0 and 5), then A.
void s2mm_out(hls::stream<vckattn::beat128>& o_in, const ap_uint<32>* desc, ap_uint<128>* out, unsigned n_tiles,
              unsigned head_dim, int rq_mult, unsigned rq_shift);

// ------------------------------------------------------------------------------ score_switch

// select: 0 = swiftmax, any other value = online_softmax (host/manifest.SCORE_SWITCH_SELECT uses 1).
//
// Framing of the P rows coming back (score_switch_return): every row is exactly keys_pad/4 beats
// (count-based framing, so a wrong TLAST can neither hang the switch nor shift the blocks sent to
// the AIE); a row whose TLAST is missing on its last beat or set on an earlier beat is a framing
// error. The error is sticky for the rest of the launch: the tile holding the first bad row and
// every later tile of the launch are sent to p_out as all-zero P (the same number of beats, so
// pv_matmul stays in step), and score_switch_return_checked reports the number of bad rows. TUSER
// of the P beats is not used.

// Per tile: reads keys_pad/32 S blocks (Q_ROWS x KEY_BLOCK int32 row-major, 4 a beat) from s_in, the
// tile's query head word and then its keys_pad mask words from mask_in, and sends Q_ROWS rows of
// keys_pad/4 score beats (lane l = int32 at bits 32l, TUSER bit l = keep of that key, TUSER bits
// [4, 4 + SM_HEAD_BITS) = the low SM_HEAD_BITS bits of the head word, TLAST on a row's last beat, TKEEP
// and TSTRB all ones) to to_swiftmax (select 0) or to_online_softmax (otherwise).
void score_switch_route(hls::stream<vckattn::beat128>& s_in, hls::stream<vckattn::word32>& mask_in,
                        hls::stream<vckattn::score_beat>& to_swiftmax,
                        hls::stream<vckattn::score_beat>& to_online_softmax, unsigned n_tiles, unsigned keys_pad,
                        unsigned select);

// Per tile: reads Q_ROWS rows of keys_pad/4 P beats (lane l = uint8 at bits 8l) from from_swiftmax
// (select 0) or from_online_softmax (otherwise) and sends P block-major to p_out: per key block kb,
// Q_ROWS x KEY_BLOCK uint8 row-major (P[i, kb*32 + j]), 16 a beat. framing_errors: rows of the launch
// with a framing error (0 = all good; see above).
void score_switch_return_checked(hls::stream<vckattn::p_beat>& from_swiftmax,
                                 hls::stream<vckattn::p_beat>& from_online_softmax,
                                 hls::stream<vckattn::beat128>& p_out, unsigned n_tiles, unsigned keys_pad,
                                 unsigned select, ap_uint<32>& framing_errors);

// score_switch_return_checked without the error count (the process of the score_switch kernel).
void score_switch_return(hls::stream<vckattn::p_beat>& from_swiftmax, hls::stream<vckattn::p_beat>& from_online_softmax,
                         hls::stream<vckattn::beat128>& p_out, unsigned n_tiles, unsigned keys_pad, unsigned select);

// The kernel: score_switch_route and score_switch_return as two concurrent dataflow processes (the
// normalizer sits between them, so they must overlap in hardware; in C-simulation call them one
// after the other, route first, with the normalizer in between).
void score_switch(hls::stream<vckattn::beat128>& s_in, hls::stream<vckattn::word32>& mask_in,
                  hls::stream<vckattn::score_beat>& to_swiftmax, hls::stream<vckattn::score_beat>& to_online_softmax,
                  hls::stream<vckattn::p_beat>& from_swiftmax, hls::stream<vckattn::p_beat>& from_online_softmax,
                  hls::stream<vckattn::beat128>& p_out, unsigned n_tiles, unsigned keys_pad, unsigned select);

#endif

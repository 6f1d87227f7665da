// swiftmax_engine_hls.h -- the scalable engine's PL pieces for one pipeline (stream contract v3,
// hw/ENGINE.md), in Vitis HLS C++; bit-exact with golden/engine.py (engine_p).
//
//   swiftmax_engine_hls  score packets (AIE, through pktmerge) -> P packets (AIE, through pktsplit):
//                        the header beat passes with elem_bits rewritten to 8; every score s (signed
//                        SCORE_BITS) maps to P = swiftmax_int(s, heads, keep = s != sentinel,
//                        SwiftMaxFormat(acc_bits = SCORE_BITS), head = header.head) through
//                        swiftmax_elem_acc<SCORE_BITS> (swiftmax_hls.h) with the shared registers and
//                        b_beta[head], c_out[head] of the packet header's head (streams.PACKET head);
//                        P uint8, 16 a beat, TLAST on a packet's last beat.
//   s2mm_engine          A records (AIE pv_slice k-1, which requantizes O: streams.RESULT header +
//                        Q_ROWS x D int8, 16 a beat) -> A of tile t into slot t of the shared A buffer
//                        a_out, one beat a cycle; the streams.RESULT header (pipeline = the kernel argument)
//                        into the done log, in arrival order. A plain writer: no arithmetic.
//
// Streams: 128-bit AXI4-Stream beats (TDATA little endian; header words w0..w3 at bits [32i, 32i+32)).
// Header fields only through ../aie/generated/engine_streams.h (generated from hw/spec/streams.py).
// Build parameters: VCKATTN_ENGINE_SCORE_BITS (8 or 16), VCKATTN_ENGINE_Q_ROWS, VCKATTN_ENGINE_D
// (the design's engine_config.h, or -D in the C-simulation). Score packets carry their scores in the 4x8
// block layout of hw/ENGINE.md; the normalizer is element-wise, so P leaves in the order the scores came.
//
// Both tops return a status (s_axilite return): 0 ok; otherwise the first header they refused, after
// which they stop (the stream position is lost; the host reports the status and times out the launch).
#ifndef VCKATTN_SWIFTMAX_ENGINE_HLS_H
#define VCKATTN_SWIFTMAX_ENGINE_HLS_H

#if !defined(VCKATTN_ENGINE_SCORE_BITS) && defined(__has_include)
#if __has_include("engine_config.h")
#include "engine_config.h"
#endif
#endif
#ifndef VCKATTN_ENGINE_SCORE_BITS
#error "VCKATTN_ENGINE_SCORE_BITS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_Q_ROWS
#error "VCKATTN_ENGINE_Q_ROWS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_D
#error "VCKATTN_ENGINE_D is not defined: include the design's generated engine_config.h or pass -D"
#endif

#include <ap_int.h>
#include <hls_stream.h>

#include "../aie/generated/engine_streams.h"
#include "axis_types.h"
#include "swiftmax_hls.h"

namespace vckattn_engine_pl {

constexpr int SCORE_BITS = VCKATTN_ENGINE_SCORE_BITS;
constexpr int SCORES_PER_BEAT = 128 / SCORE_BITS;  // score lanes of an input beat
constexpr int P_PER_BEAT = 16;                      // P lanes of an output beat (= SwiftMax lanes)
constexpr int IN_PER_OUT = P_PER_BEAT / SCORES_PER_BEAT;  // input beats per output beat
constexpr int Q_ROWS = VCKATTN_ENGINE_Q_ROWS;
constexpr int D = VCKATTN_ENGINE_D;
static_assert(SCORE_BITS == 8 || SCORE_BITS == 16, "SCORE_BITS must be 8 or 16");

using pkt_beat = vck_axis<128, 1>;  // a packet beat (TDATA, TLAST; TUSER unused)
using beat128 = ap_uint<128>;       // an A record beat

enum PlStatus : int {
    PL_OK = 0,
    PL_BAD_ELEM_BITS = 1,  // score packet with elem_bits != SCORE_BITS
    PL_BAD_COUNT = 2,      // score packet with count 0 or not a multiple of 16
    PL_BAD_D = 3,          // A record whose d is not the build's D
    PL_BAD_SLOT = 4,       // A record whose tile id is outside the A buffer
    PL_BAD_HEAD = 5,       // score packet whose head is outside the register sets (>= MAX_HEADS)
    PL_THIRD_TILE = 6,     // online softmax: a packet of a third tile while two are held
    PL_SLICE_TWICE = 7,    // online softmax: a slice a held tile already has
    PL_INCOMPLETE = 8,     // online softmax: a tile still incomplete after the last packet
};

inline const char* pl_status_text(int st) {
    switch (st) {
        case PL_OK: return "ok";
        case PL_BAD_ELEM_BITS: return "score packet elem_bits differs from SCORE_BITS";
        case PL_BAD_COUNT: return "score packet count is 0 or not a multiple of 16";
        case PL_BAD_D: return "A record head size d differs from the build's D";
        case PL_BAD_SLOT: return "A record tile id outside the A buffer";
        case PL_BAD_HEAD: return "score packet head outside the SwiftMax register sets (>= MAX_HEADS)";
        case PL_THIRD_TILE: return "online softmax: a packet of a third tile while two tiles are held";
        case PL_SLICE_TWICE: return "online softmax: a slice its tile already has";
        case PL_INCOMPLETE: return "online softmax: a tile incomplete after the last packet";
        default: return "unknown status";
    }
}

// A 128-bit beat <-> its four little-endian uint32 header words.
inline void beat_words(const beat128& b, uint32_t w[4]) {
#pragma HLS INLINE
    for (int i = 0; i < 4; i++) w[i] = (uint32_t)b.range(32 * i + 31, 32 * i);
}
inline beat128 words_beat(const uint32_t w[4]) {
#pragma HLS INLINE
    beat128 b = 0;
    for (int i = 0; i < 4; i++) b.range(32 * i + 31, 32 * i) = w[i];
    return b;
}

}  // namespace vckattn_engine_pl

// n_packets score packets in, n_packets P packets out (see the file comment); regs on s_axilite.
int swiftmax_engine_hls(hls::stream<vckattn_engine_pl::pkt_beat>& s_axis,
                        hls::stream<vckattn_engine_pl::pkt_beat>& m_axis, unsigned n_packets,
                        vckattn::swiftmax_regs regs);

// n_records A records in: each into its slot of a_out, its header (with pipeline) into done[] (arrival order).
int s2mm_engine(hls::stream<vckattn_engine_pl::beat128>& a_in, ap_uint<128>* a_out, ap_uint<128>* done,
                unsigned n_records, unsigned n_slots, unsigned pipeline);

#endif  // VCKATTN_SWIFTMAX_ENGINE_HLS_H

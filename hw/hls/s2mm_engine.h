// s2mm_engine.h -- the engine's PL output mover (hw/hls/s2mm_engine.cpp): A records from the last P.V kernel
// (streams.RESULT header + Q_ROWS x D int8, 16 a beat) -> tile t into slot t of the launch's shared A buffer; the
// header, with this pipeline's index, into the done log in arrival order. A plain writer: no arithmetic.
//
// Header fields only through ../aie/generated/engine_streams.h (generated from hw/spec/streams.py). Build
// parameters: VCKATTN_ENGINE_Q_ROWS, VCKATTN_ENGINE_D (the design's engine_config.h, or -D in the C-simulation).
// The top returns a status (s_axilite return): 0 ok; otherwise the first record it refused, after which it stops.
#ifndef VCKATTN_S2MM_ENGINE_H
#define VCKATTN_S2MM_ENGINE_H

#if !defined(VCKATTN_ENGINE_Q_ROWS) && defined(__has_include)
#if __has_include("engine_config.h")
#include "engine_config.h"
#endif
#endif
#ifndef VCKATTN_ENGINE_Q_ROWS
#error "VCKATTN_ENGINE_Q_ROWS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_D
#error "VCKATTN_ENGINE_D is not defined: include the design's generated engine_config.h or pass -D"
#endif

#include <ap_int.h>
#include <hls_stream.h>
#include <stdint.h>

#include "../aie/generated/engine_streams.h"

namespace vckattn_engine_pl {

constexpr int Q_ROWS = VCKATTN_ENGINE_Q_ROWS;
constexpr int D = VCKATTN_ENGINE_D;

using beat128 = ap_uint<128>;  // an A record beat

enum PlStatus : int {
    PL_OK = 0,
    PL_BAD_D = 3,     // A record whose d is not the build's D
    PL_BAD_SLOT = 4,  // A record whose tile id is outside the A buffer
};

inline const char* pl_status_text(int st) {
    switch (st) {
        case PL_OK: return "ok";
        case PL_BAD_D: return "A record head size d differs from the build's D";
        case PL_BAD_SLOT: return "A record tile id outside the A buffer";
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

// n_records A records in: each into its slot of a_out, its header (with pipeline) into done[] (arrival order).
int s2mm_engine(hls::stream<vckattn_engine_pl::beat128>& a_in, ap_uint<128>* a_out, ap_uint<128>* done,
                unsigned n_records, unsigned n_slots, unsigned pipeline);

#endif  // VCKATTN_S2MM_ENGINE_H

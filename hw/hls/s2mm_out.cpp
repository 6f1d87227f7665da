// s2mm_out: P·V accumulators from the AIE -> requantize to int8 -> the tile's out record in DDR
// (hw/STREAMS.md, host/tile_buffers.py; arithmetic of golden/requant.py::requantize, half_up).
#include "movers.h"
#include "requant.h"

using namespace vckattn;

void s2mm_out(hls::stream<beat128>& o_in, const ap_uint<32>* desc, ap_uint<128>* out, unsigned n_tiles,
              unsigned head_dim, int rq_mult, unsigned rq_shift) {
#pragma HLS INTERFACE mode=axis port=o_in
#pragma HLS INTERFACE mode=m_axi port=desc bundle=gmem0 offset=slave depth=128
#pragma HLS INTERFACE mode=m_axi port=out bundle=gmem1 offset=slave depth=2064
#pragma HLS INTERFACE mode=s_axilite port=n_tiles
#pragma HLS INTERFACE mode=s_axilite port=head_dim
#pragma HLS INTERFACE mode=s_axilite port=rq_mult
#pragma HLS INTERFACE mode=s_axilite port=rq_shift
#pragma HLS INTERFACE mode=s_axilite port=return
    if (!geometry_ok(head_dim, KEY_BLOCK)) return;  // keys_pad plays no part here
    const ap_uint<6> shift = rq_shift > (unsigned)MAX_RQ_SHIFT ? (unsigned)MAX_RQ_SHIFT : rq_shift;
    const ap_int<32> mult = rq_mult;
    const unsigned a_beats = Q_ROWS * head_dim / BEAT_BYTES;  // 128-bit beats of A (16 int8 each)
tiles:
    for (unsigned i = 0; i < n_tiles; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 16
        const unsigned long long base = (unsigned long long)i * (1 + a_beats);  // record i, in beats
        beat128 head = 0;
        head.range(31, 0) = desc[i * DESC_WORDS + DESC_TILE_ID];
        head.range(63, 32) = desc[i * DESC_WORDS + DESC_ROWS];  // status (bits 64..95) = 0: ok
        out[base] = head;
        // One A beat (16 int8) per iteration from 4 O beats (4 int32 each): II = 4 is the o_in rate of
        // one beat a cycle, and out is written once per iteration at consecutive addresses (burst).
    a_beats_loop:
        for (unsigned m = 0; m < a_beats; m++) {
#pragma HLS PIPELINE II = 4
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 128
            out[base + 1 + m] = requant_a_beat(o_in, mult, shift);
        }
    }
}

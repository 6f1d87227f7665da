// s2mm_engine: the engine's PL output mover for one pipeline (hw/ENGINE.md "The PL"; see
// swiftmax_engine_hls.h). O records from the last P.V kernel (RESULT header + Q_ROWS x D int32 row-major,
// 4 a beat) -> requantize to int8 (golden requant.requantize, half up: sat_int8((o*rq_mult +
// 2^(rq_shift-1)) >> rq_shift)) -> DDR: A of tile t (Q_ROWS x D int8) into slot t of the launch's shared A
// buffer `a_out` (so the buffer is the head outputs, host/engine.py), and the record's header beat
// (streams.RESULT: tile_id, rows, pipeline, d = D) into this pipeline's done log `done` in arrival order
// (the host points `done` at the pipeline's region). A record whose d is not the build's D is refused.
#include "requant.h"
#include "swiftmax_engine_hls.h"

using namespace vckattn_engine_pl;

int s2mm_engine(hls::stream<beat128>& o_in, ap_uint<128>* a_out, ap_uint<128>* done, unsigned n_records,
                unsigned n_slots, unsigned pipeline, int rq_mult, unsigned rq_shift) {
#pragma HLS INTERFACE mode=axis port=o_in
#pragma HLS INTERFACE mode=m_axi port=a_out bundle=gmem0 offset=slave depth=65536
#pragma HLS INTERFACE mode=m_axi port=done bundle=gmem1 offset=slave depth=4096
#pragma HLS INTERFACE mode=s_axilite port=n_slots
#pragma HLS INTERFACE mode=s_axilite port=n_records
#pragma HLS INTERFACE mode=s_axilite port=pipeline
#pragma HLS INTERFACE mode=s_axilite port=rq_mult
#pragma HLS INTERFACE mode=s_axilite port=rq_shift
#pragma HLS INTERFACE mode=s_axilite port=return
    using namespace vckattn_engine;
    const ap_uint<6> shift = rq_shift > (unsigned)MAX_RQ_SHIFT ? (unsigned)MAX_RQ_SHIFT : rq_shift;
    const ap_int<32> mult = rq_mult;
records:
    for (unsigned i = 0; i < n_records; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 4096
        uint32_t w[4];
        beat_words(o_in.read(), w);
        const uint32_t d = VCKATTN_GET(w, RESULT_D);
        if (d != (uint32_t)D) return PL_BAD_D;
        uint32_t h[4] = {0, 0, 0, 0};
        VCKATTN_PUT(h, RESULT_TILE_ID, VCKATTN_GET(w, RESULT_TILE_ID));
        VCKATTN_PUT(h, RESULT_ROWS, VCKATTN_GET(w, RESULT_ROWS));
        VCKATTN_PUT(h, RESULT_PIPELINE, pipeline);
        VCKATTN_PUT(h, RESULT_D, d);
        const uint32_t tile = VCKATTN_GET(w, RESULT_TILE_ID);
        if (tile >= n_slots) return PL_BAD_SLOT;
        done[i] = words_beat(h);
        const unsigned a_beats = Q_ROWS * D / 16;  // 16 int8 a beat, from 4 O beats of 4 int32
        const unsigned long long base = (unsigned long long)tile * a_beats;
    a_beats_loop:
        for (unsigned m = 0; m < a_beats; m++) {
#pragma HLS PIPELINE II = 4
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 128
            a_out[base + m] = vckattn::requant_a_beat(o_in, mult, shift);
        }
    }
    return PL_OK;
}

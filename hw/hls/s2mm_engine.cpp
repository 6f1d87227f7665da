// s2mm_engine: the engine's PL output mover for one pipeline (hw/ENGINE.md "The PL"; see
// s2mm_engine.h), a plain writer: A records from the last P.V kernel (RESULT header + Q_ROWS x D int8
// row-major, 16 a beat; the AI Engine has requantized O) -> DDR: A of tile t into slot t of the launch's shared
// A buffer `a_out` (so the buffer is the head outputs, host/engine.py), and the record's header beat with this
// pipeline's index (streams.RESULT: tile_id, rows, pipeline, d = D) into this pipeline's done log `done` in
// arrival order (the host points `done` at the pipeline's region). No arithmetic on the payload: one 128-bit
// beat in and out a cycle. A record whose d is not the build's D, or whose tile id is outside the A buffer, is
// refused.
#include "s2mm_engine.h"

using namespace vckattn_engine_pl;

int s2mm_engine(hls::stream<beat128>& a_in, ap_uint<128>* a_out, ap_uint<128>* done, unsigned n_records,
                unsigned n_slots, unsigned pipeline) {
#pragma HLS INTERFACE mode=axis port=a_in
#pragma HLS INTERFACE mode=m_axi port=a_out bundle=gmem0 offset=slave depth=65536
#pragma HLS INTERFACE mode=m_axi port=done bundle=gmem1 offset=slave depth=4096
#pragma HLS INTERFACE mode=s_axilite port=n_slots
#pragma HLS INTERFACE mode=s_axilite port=n_records
#pragma HLS INTERFACE mode=s_axilite port=pipeline
#pragma HLS INTERFACE mode=s_axilite port=return
    using namespace vckattn_engine;
records:
    for (unsigned i = 0; i < n_records; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 4096
        uint32_t w[4];
        beat_words(a_in.read(), w);
        const uint32_t d = VCKATTN_GET(w, RESULT_D);
        if (d != (uint32_t)D) return PL_BAD_D;
        const uint32_t tile = VCKATTN_GET(w, RESULT_TILE_ID);
        if (tile >= n_slots) return PL_BAD_SLOT;
        uint32_t h[4] = {0, 0, 0, 0};
        VCKATTN_PUT(h, RESULT_TILE_ID, tile);
        VCKATTN_PUT(h, RESULT_ROWS, VCKATTN_GET(w, RESULT_ROWS));
        VCKATTN_PUT(h, RESULT_PIPELINE, pipeline);
        VCKATTN_PUT(h, RESULT_D, d);
        done[i] = words_beat(h);
        const unsigned a_beats = Q_ROWS * D / 16;  // 16 int8 a beat
        const unsigned long long base = (unsigned long long)tile * a_beats;
    a_beats_loop:
        for (unsigned m = 0; m < a_beats; m++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 128
            a_out[base + m] = a_in.read();
        }
    }
    return PL_OK;
}

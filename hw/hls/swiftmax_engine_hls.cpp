// swiftmax_engine_hls.cpp -- the engine's PL SwiftMax normalizer on score packets (see swiftmax_engine_hls.h).
#include "swiftmax_engine_hls.h"

using namespace vckattn_engine_pl;

#define VCKATTN_ROM4 VCKATTN_POW2_ROM_INIT, VCKATTN_POW2_ROM_INIT, VCKATTN_POW2_ROM_INIT, VCKATTN_POW2_ROM_INIT
static_assert(P_PER_BEAT == 16, "the per-lane ROM initializer below lists 16 copies");

int swiftmax_engine_hls(hls::stream<pkt_beat>& s_axis, hls::stream<pkt_beat>& m_axis, unsigned n_packets,
                        vckattn::swiftmax_regs regs) {
#pragma HLS INTERFACE mode=axis port=s_axis
#pragma HLS INTERFACE mode=axis port=m_axis
#pragma HLS INTERFACE mode=s_axilite port=n_packets bundle=control
#pragma HLS INTERFACE mode=s_axilite port=regs bundle=control
#pragma HLS AGGREGATE variable=regs
#pragma HLS INTERFACE mode=s_axilite port=return bundle=control
    using namespace vckattn_engine;
    // One 2^f ROM per P lane (a lane reads T[i] and T[i+1] every cycle: one dual-port ROM each).
    static const vckattn::pow2_rom::entry_t pow2_roms[P_PER_BEAT][vckattn::pow2_rom::ENTRIES] = {
        VCKATTN_ROM4, VCKATTN_ROM4, VCKATTN_ROM4, VCKATTN_ROM4};
#pragma HLS ARRAY_PARTITION variable=pow2_roms type=complete dim=1
    const ap_int<32> sentinel = -(ap_int<32>(1) << (SCORE_BITS - 1));

packets:
    for (unsigned n = 0; n < n_packets; n++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=4096
        const pkt_beat head = s_axis.read();
        uint32_t w[4];
        beat_words(head.data, w);
        if (VCKATTN_GET(w, PACKET_ELEM_BITS) != (uint32_t)SCORE_BITS) return PL_BAD_ELEM_BITS;
        const uint32_t count = VCKATTN_GET(w, PACKET_COUNT);
        if (count == 0 || count % P_PER_BEAT != 0) return PL_BAD_COUNT;
        const uint32_t head_idx = VCKATTN_GET(w, PACKET_HEAD);  // the tile's query head: register set head_idx
        if (head_idx >= (uint32_t)VCKATTN_SWIFTMAX_MAX_HEADS) return PL_BAD_HEAD;
        const vckattn::sm_reg_t b_beta = regs.b_beta[head_idx], c_out = regs.c_out[head_idx];
        VCKATTN_PUT(w, PACKET_ELEM_BITS, 8u);
        pkt_beat oh;
        oh.data = words_beat(w);
        oh.keep = -1;
        oh.strb = -1;
        oh.user = 0;
        oh.last = 0;
        m_axis.write(oh);
        const unsigned out_beats = count / P_PER_BEAT;
    beats:
        for (unsigned m = 0; m < out_beats; m++) {
#pragma HLS PIPELINE II=IN_PER_OUT
#pragma HLS LOOP_TRIPCOUNT min=32 max=4096
            pkt_beat out;
        in_beats:
            for (int r = 0; r < IN_PER_OUT; r++) {
                const pkt_beat in = s_axis.read();
            lanes:
                for (int l = 0; l < SCORES_PER_BEAT; l++) {
#pragma HLS UNROLL
                    const ap_int<32> s = ap_int<SCORE_BITS>(in.data.range(SCORE_BITS * l + SCORE_BITS - 1, SCORE_BITS * l));
                    const int lane = r * SCORES_PER_BEAT + l;
                    out.data.range(8 * lane + 7, 8 * lane) =
                        vckattn::swiftmax_elem_acc<SCORE_BITS>(s, s != sentinel, regs, b_beta, c_out, pow2_roms[lane]);
                }
            }
            out.keep = -1;
            out.strb = -1;
            out.user = 0;
            out.last = m == out_beats - 1;
            m_axis.write(out);
        }
    }
    return PL_OK;
}

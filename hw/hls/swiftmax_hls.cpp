// swiftmax_hls.cpp -- streaming top of the HLS SwiftMax normalizer (see swiftmax_hls.h).
#include "swiftmax_hls.h"

static_assert(vckattn::LANES == 4, "the per-lane ROM initializer below lists 4 copies");

void swiftmax_hls(hls::stream<vckattn::score_beat>& s_axis, hls::stream<vckattn::p_beat>& m_axis, int n_beats,
                  vckattn::swiftmax_regs regs) {
#pragma HLS INTERFACE mode=axis port=s_axis
#pragma HLS INTERFACE mode=axis port=m_axis
#pragma HLS INTERFACE mode=s_axilite port=n_beats bundle=control
#pragma HLS INTERFACE mode=s_axilite port=regs bundle=control
#pragma HLS AGGREGATE variable=regs
#pragma HLS INTERFACE mode=s_axilite port=return bundle=control
    using namespace vckattn;

    // One 2^f ROM per lane: a lane reads T[i] and T[i+1] every cycle (one dual-port ROM each).
    static const pow2_rom::entry_t pow2_roms[LANES][pow2_rom::ENTRIES] = {
        VCKATTN_POW2_ROM_INIT, VCKATTN_POW2_ROM_INIT, VCKATTN_POW2_ROM_INIT, VCKATTN_POW2_ROM_INIT};
#pragma HLS ARRAY_PARTITION variable=pow2_roms type=complete dim=1

beats:
    for (int i = 0; i < n_beats; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT min=8 max=8192
        score_beat in = s_axis.read();
        // the beat's query head: every lane reads the same entry of b_beta / c_out (one read of each a cycle)
        const sm_head_t head = in.user.range(LANES + SM_HEAD_BITS - 1, LANES);
        p_beat out;
    lanes:
        for (int l = 0; l < LANES; l++) {
#pragma HLS UNROLL
            ap_int<32> score = in.data.range(32 * l + 31, 32 * l);
            bool keep = in.user[l];
            out.data.range(8 * l + 7, 8 * l) = swiftmax_elem(score, keep, regs, head, pow2_roms[l]);
        }
        out.keep = -1;
        out.strb = -1;
        out.user = in.user.range(LANES - 1, 0);
        out.last = in.last;
        m_axis.write(out);
    }
}

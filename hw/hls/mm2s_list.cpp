// mm2s_list: the sublayer's generic list mover (see mm2s_list.h): the X mover (X in the X buffer's layout), the
// weight mover (each cascade's weight blocks with their WSLICE headers, behind the routing beat of the w router) and
// the descriptor mover (the buffer readers' descriptor lists) are each one instance with its own command list.
//
// Per command: the header beat (unless no_header), then `beats` beats of src from byte offset `offset`, TLAST on
// the command's last beat unless `more` (the next command continues the packet). Every check is made on the two command beats before anything of the command is sent, so
// a refused command sends nothing; the mover stops there and returns its index.
#include "mm2s_list.h"

#include "../aie/generated/engine_streams.h"

using namespace vckattn_engine;
using namespace vckattn_list;

static uint32_t word_of(const beat128& b, int w) { return b.range(32 * w + 31, 32 * w).to_uint(); }

static axis128 stream_beat(const beat128& data, bool last) {
#pragma HLS INLINE
    axis128 a;
    a.data = data;
    a.keep = -1;
    a.strb = -1;
    a.last = last;
    return a;
}

unsigned mm2s_list(const beat128* cmds, unsigned n_cmds, const beat128* src, unsigned long long src_beats,
                   hls::stream<axis128>& out) {
#pragma HLS INTERFACE mode=m_axi port=cmds bundle=gmem0 offset=slave depth=4096
#pragma HLS INTERFACE mode=m_axi port=src bundle=gmem1 offset=slave depth=65536
#pragma HLS INTERFACE mode=s_axilite port=n_cmds
#pragma HLS INTERFACE mode=s_axilite port=src_beats
#pragma HLS INTERFACE mode=axis port=out
#pragma HLS INTERFACE mode=s_axilite port=return
commands:
    for (unsigned i = 0; i < n_cmds; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 4096
        const beat128 head = cmds[2 * i];
        const beat128 desc = cmds[2 * i + 1];
        const uint32_t w[4] = {word_of(desc, 0), word_of(desc, 1), word_of(desc, 2), word_of(desc, 3)};
        const unsigned long long offset =
            (unsigned long long)VCKATTN_GET(w, MDESC_OFFSET_HI) << 32 | VCKATTN_GET(w, MDESC_OFFSET_LO);
        const uint32_t beats = VCKATTN_GET(w, MDESC_BEATS);
        const bool no_header = VCKATTN_GET(w, MDESC_NO_HEADER) != 0;
        const bool more = VCKATTN_GET(w, MDESC_MORE) != 0;
        if (offset % BEAT_BYTES) return i;                    // not a whole beat
        const unsigned long long base = offset / BEAT_BYTES;  // < 2^60: base + beats cannot wrap
        if (base + beats > src_beats) return i;               // the payload runs past the source
        if (no_header && beats == 0) return i;                // would send nothing
        if (!no_header) out.write(stream_beat(head, beats == 0 && !more));
    payload:
        for (uint32_t n = 0; n < beats; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 4096
            out.write(stream_beat(src[base + n], n + 1 == beats && !more));
        }
    }
    return n_cmds;
}

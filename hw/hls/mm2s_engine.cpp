// mm2s_engine: one command list of the scalable engine -> one AIE input PLIO (hw/ENGINE.md, stream
// contract v2). Two instances per pipeline: the qk mover (commands LOAD_K / TILE; payloads from the K
// and Q buffers) and the v mover (commands LOAD_V; payloads from the V buffer).
//
// A command descriptor is 32 bytes = two 128-bit words: word 0 is the header beat sent as is; word 1
// holds the payload's byte offset (uint64, bits 63..0) into `tile_src` (TILE) or `load_src` (LOAD_K /
// LOAD_V). Payload sizes come from the header: LOAD_* n_kb * key_block * d bytes, TILE q_rows * d bytes
// (header fields from the generated engine_streams.h, declared in hw/engine/streams.py).
//
// Returns the number of commands sent before a bad one (an unknown op, or an offset that is not a whole
// beat): the host compares it with n_cmds.
#include <ap_int.h>
#include <hls_stream.h>

#include "../aie/generated/engine_streams.h"

using namespace vckattn_engine;
typedef ap_uint<128> beat128;

static uint32_t word_of(const beat128& b, int w) { return b.range(32 * w + 31, 32 * w).to_uint(); }

unsigned mm2s_engine(const beat128* cmds, unsigned n_cmds, const beat128* tile_src, const beat128* load_src,
                     unsigned q_rows, unsigned key_block, hls::stream<beat128>& out) {
#pragma HLS INTERFACE mode=m_axi port=cmds bundle=gmem0 offset=slave depth=4096
#pragma HLS INTERFACE mode=m_axi port=tile_src bundle=gmem1 offset=slave depth=65536
#pragma HLS INTERFACE mode=m_axi port=load_src bundle=gmem2 offset=slave depth=65536
#pragma HLS INTERFACE mode=s_axilite port=n_cmds
#pragma HLS INTERFACE mode=s_axilite port=q_rows
#pragma HLS INTERFACE mode=s_axilite port=key_block
#pragma HLS INTERFACE mode=axis port=out
#pragma HLS INTERFACE mode=s_axilite port=return
commands:
    for (unsigned i = 0; i < n_cmds; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 2048
        const beat128 head = cmds[2 * i];
        const beat128 where = cmds[2 * i + 1];
        uint32_t w[4] = {word_of(head, 0), word_of(head, 1), word_of(head, 2), word_of(head, 3)};
        const uint32_t op = VCKATTN_GET(w, COMMAND_OP);
        const uint32_t d = VCKATTN_GET(w, COMMAND_D);
        const uint64_t offset = where.range(63, 0).to_uint64();
        unsigned long long bytes;
        const beat128* src;
        if (op == OP_TILE) {
            bytes = (unsigned long long)q_rows * d;
            src = tile_src;
        } else if (op == OP_LOAD_K || op == OP_LOAD_V) {
            bytes = (unsigned long long)VCKATTN_GET(w, COMMAND_N_KB) * key_block * d;
            src = load_src;
        } else {
            return i;
        }
        if (offset % BEAT_BYTES || bytes % BEAT_BYTES) return i;
        out.write(head);
        const unsigned long long base = offset / BEAT_BYTES;
    payload:
        for (unsigned long long n = 0; n < bytes / BEAT_BYTES; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 2048
            out.write(src[base + n]);
        }
    }
    return n_cmds;
}

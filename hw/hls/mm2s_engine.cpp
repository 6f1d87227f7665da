// mm2s_engine: one command list of the scalable engine -> one AIE input PLIO (hw/ENGINE.md, stream
// contract v3). Three instances per pipeline:
//   kv = 0, the q mover: TILE descriptors; each payload (one q tile, Q_ROWS x D bytes in the A layout) from
//                        `src` (the re-tiled Q); the stream is the pipeline's q buffers back to back;
//   kv = 1, the k mover: the pipeline's kv list of SLICE descriptors, sending its LOAD_K entries (one K slice,
//                        SK x D bytes in the K^T B layout, from `src`, the re-tiled K) to k_in and skipping
//                        its LOAD_V entries;
//   kv = 2, the v mover: the same kv list, sending its LOAD_V entries (payloads from `src_v`, the re-tiled V)
//                        to v_in and skipping its LOAD_K entries.
// Each SLICE header beat's word 0 is the packet's routing word (pktsplit<k> on k_in and on v_in).
//
// A command descriptor is 32 bytes = two 128-bit words: word 0 is the header beat sent as is; word 1 holds
// the payload's byte offset (uint64, bits 63..0) into its source. `payload_bytes` is Q_ROWS x D (q mover)
// or SK x D (kv mover). Header fields from the generated engine_streams.h (hw/spec/streams.py).
//
// Returns the number of commands consumed (sent or skipped) before a bad one (a header of the other list's
// kind or an unknown op, or an offset / payload size that is not a whole beat): the host compares it with
// n_cmds.
#include <ap_int.h>
#include <hls_stream.h>

#include "../aie/generated/engine_streams.h"

using namespace vckattn_engine;
typedef ap_uint<128> beat128;

static uint32_t word_of(const beat128& b, int w) { return b.range(32 * w + 31, 32 * w).to_uint(); }

unsigned mm2s_engine(const beat128* cmds, unsigned n_cmds, const beat128* src, const beat128* src_v, unsigned kv,
                     unsigned payload_bytes, hls::stream<beat128>& out) {
#pragma HLS INTERFACE mode=m_axi port=cmds bundle=gmem0 offset=slave depth=4096
#pragma HLS INTERFACE mode=m_axi port=src bundle=gmem1 offset=slave depth=65536
#pragma HLS INTERFACE mode=m_axi port=src_v bundle=gmem2 offset=slave depth=65536
#pragma HLS INTERFACE mode=s_axilite port=n_cmds
#pragma HLS INTERFACE mode=s_axilite port=kv
#pragma HLS INTERFACE mode=s_axilite port=payload_bytes
#pragma HLS INTERFACE mode=axis port=out
#pragma HLS INTERFACE mode=s_axilite port=return
    if (payload_bytes % BEAT_BYTES) return 0;
commands:
    for (unsigned i = 0; i < n_cmds; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 4096
        const beat128 head = cmds[2 * i];
        const beat128 where = cmds[2 * i + 1];
        uint32_t w[4] = {word_of(head, 0), word_of(head, 1), word_of(head, 2), word_of(head, 3)};
        const uint64_t offset = where.range(63, 0).to_uint64();
        const beat128* from;
        if (kv == 0) {
            if (VCKATTN_GET(w, TILE_OP) != OP_TILE) return i;
            from = src;
        } else {
            const uint32_t op = VCKATTN_GET(w, SLICE_OP);
            if (op != OP_LOAD_K && op != OP_LOAD_V) return i;
            if (offset % BEAT_BYTES) return i;
            if ((op == OP_LOAD_K) != (kv == 1)) continue;  // the other mover's slice
            from = op == OP_LOAD_K ? src : src_v;
        }
        if (offset % BEAT_BYTES) return i;
        out.write(head);
        const unsigned long long base = offset / BEAT_BYTES;
    payload:
        for (unsigned n = 0; n < payload_bytes / BEAT_BYTES; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 2048
            out.write(from[base + n]);
        }
    }
    return n_cmds;
}

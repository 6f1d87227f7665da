// mm2s_kv: per tile of the launch, the K and V of its (sequence, kv head) slab -> AIE k_in, v_in
// (hw/STREAMS.md). One sequential process: K and V both come from the one kv pointer, which a
// dataflow region may give to one process only; so a tile's V is sent after its K, and the next
// tile's K waits until pv_matmul has taken this tile's V.
#include "movers.h"

using namespace vckattn;

void mm2s_kv(const ap_uint<32>* desc, const ap_uint<128>* kv, unsigned n_tiles, unsigned n_kv_heads,
             unsigned head_dim, unsigned keys_pad, hls::stream<beat128>& k_out, hls::stream<beat128>& v_out) {
#pragma HLS INTERFACE mode=m_axi port=desc bundle=gmem0 offset=slave depth=128
#pragma HLS INTERFACE mode=m_axi port=kv bundle=gmem1 offset=slave depth=16384
#pragma HLS INTERFACE mode=s_axilite port=n_tiles
#pragma HLS INTERFACE mode=s_axilite port=n_kv_heads
#pragma HLS INTERFACE mode=s_axilite port=head_dim
#pragma HLS INTERFACE mode=s_axilite port=keys_pad
#pragma HLS INTERFACE mode=axis port=k_out
#pragma HLS INTERFACE mode=axis port=v_out
#pragma HLS INTERFACE mode=s_axilite port=return
    if (!geometry_ok(head_dim, keys_pad)) return;
    const unsigned half = keys_pad * head_dim / BEAT_BYTES;  // beats of K (or V) of one slab
tiles:
    for (unsigned i = 0; i < n_tiles; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 16
        const unsigned batch = desc[i * DESC_WORDS + DESC_BATCH];
        const unsigned kv_head = desc[i * DESC_WORDS + DESC_KV_HEAD];
        const unsigned long long slab = (unsigned long long)batch * n_kv_heads + kv_head;
        const unsigned long long base = slab * 2 * half;  // beat index of the slab's K; V follows at + half
    k_beats:
        for (unsigned n = 0; n < half; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 4096
            k_out.write(kv[base + n]);
        }
        beat128 head = 0;
        head.range(31, 0) = keys_pad / KEY_BLOCK;
        head.range(63, 32) = head_dim;
        v_out.write(head);
    v_beats:
        for (unsigned n = 0; n < half; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 4096
            v_out.write(kv[base + half + n]);
        }
    }
}

// mm2s_tiles: the launch's Q tiles -> AIE q_in, their query heads and key masks -> score_switch.mask_in
// (hw/STREAMS.md).
#include "movers.h"

using namespace vckattn;

// q_out per tile: header beat uint32 [N_KB, D, rows, tile_id], then Q_ROWS*D/16 beats of Q; the tile's
// query head (desc word 2) to send_mask through head_out (the only reader of desc: one m_axi reader).
static void send_q(const ap_uint<32>* desc, const ap_uint<128>* q, unsigned n_tiles, unsigned head_dim,
                   unsigned keys_pad, hls::stream<beat128>& q_out, hls::stream<word32>& head_out) {
    if (!geometry_ok(head_dim, keys_pad)) return;
    const unsigned beats = Q_ROWS * head_dim / BEAT_BYTES;  // 64 (D = 32) or 128 (D = 64)
tiles:
    for (unsigned i = 0; i < n_tiles; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 16
        beat128 head = 0;
        head.range(31, 0) = keys_pad / KEY_BLOCK;
        head.range(63, 32) = head_dim;
        head.range(95, 64) = desc[i * DESC_WORDS + DESC_ROWS];
        head.range(127, 96) = desc[i * DESC_WORDS + DESC_TILE_ID];
        head_out.write(desc[i * DESC_WORDS + DESC_HEAD]);
        q_out.write(head);
        const unsigned base = i * beats;
    q_beats:
        for (unsigned n = 0; n < beats; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 128
            q_out.write(q[base + n]);
        }
    }
}

// mask_out per tile: the tile's query head (one word, from send_q), then its keys_pad mask words in
// buffer order (row, word).
static void send_mask(const ap_uint<32>* mask, unsigned n_tiles, unsigned head_dim, unsigned keys_pad,
                      hls::stream<word32>& head_in, hls::stream<word32>& mask_out) {
    if (!geometry_ok(head_dim, keys_pad)) return;
    // Q_ROWS rows x keys_pad/32 words = keys_pad words a tile
tiles:
    for (unsigned i = 0; i < n_tiles; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 16
        mask_out.write(head_in.read());
    mask_words:
        for (unsigned w = 0; w < keys_pad; w++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 32 max = 1024
            mask_out.write(mask[i * keys_pad + w]);
        }
    }
}

void mm2s_tiles(const ap_uint<32>* desc, const ap_uint<128>* q, const ap_uint<32>* mask, unsigned n_tiles,
                unsigned head_dim, unsigned keys_pad, hls::stream<beat128>& q_out, hls::stream<word32>& mask_out) {
#pragma HLS INTERFACE mode=m_axi port=desc bundle=gmem0 offset=slave depth=128
#pragma HLS INTERFACE mode=m_axi port=q bundle=gmem0 offset=slave depth=2048
#pragma HLS INTERFACE mode=m_axi port=mask bundle=gmem1 offset=slave depth=16384
#pragma HLS INTERFACE mode=s_axilite port=n_tiles
#pragma HLS INTERFACE mode=s_axilite port=head_dim
#pragma HLS INTERFACE mode=s_axilite port=keys_pad
#pragma HLS INTERFACE mode=axis port=q_out
#pragma HLS INTERFACE mode=axis port=mask_out
#pragma HLS INTERFACE mode=s_axilite port=return
#pragma HLS DATAFLOW
    // the geometry check (geometry_ok) is inside each process: no control flow in a dataflow region
    hls::stream<word32> heads("heads");  // per tile: its query head (desc word 2), send_q -> send_mask
#pragma HLS STREAM variable=heads depth=16
    send_q(desc, q, n_tiles, head_dim, keys_pad, q_out, heads);
    send_mask(mask, n_tiles, head_dim, keys_pad, heads, mask_out);
}

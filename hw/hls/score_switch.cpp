// score_switch: the AIE's block-major QK^T scores -> row-major score rows (key mask and query head on TUSER) to the
// selected normalizer, and its P rows -> block-major P to the AIE's P·V (hw/STREAMS.md; framing
// rules and select values in movers.h).
#include "movers.h"

using namespace vckattn;

void score_switch_route(hls::stream<beat128>& s_in, hls::stream<word32>& mask_in,
                        hls::stream<score_beat>& to_swiftmax, hls::stream<score_beat>& to_online_softmax,
                        unsigned n_tiles, unsigned keys_pad, unsigned select) {
    if (!geometry_ok(32, keys_pad)) return;  // head_dim plays no part here
    // One tile of scores, row-major: sbuf[i][b] holds S[i, 4b .. 4b+3] (lane l = int32 at bits 32l).
    beat128 sbuf[Q_ROWS][BEATS_PER_ROW_MAX];
#pragma HLS BIND_STORAGE variable=sbuf type=ram_2p impl=uram
    const unsigned n_kb = keys_pad / KEY_BLOCK;
    const unsigned row_beats = keys_pad / LANES;  // score beats per row
    const bool to_os = select != 0;
tiles:
    for (unsigned t = 0; t < n_tiles; t++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 16
        // S arrives block-major: per key block kb, Q_ROWS rows of KEY_BLOCK/4 = 8 beats.
    s_read:
        for (unsigned n = 0; n < n_kb * BEATS_PER_BLOCK_S; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 256 max = 8192
            const unsigned kb = n / BEATS_PER_BLOCK_S;
            const unsigned r = n % BEATS_PER_BLOCK_S;  // beat within the block
            const unsigned row = r / (KEY_BLOCK / LANES);
            const unsigned col = kb * (KEY_BLOCK / LANES) + r % (KEY_BLOCK / LANES);
            sbuf[row][col] = s_in.read();
        }
        // Rows out, the mask words read alongside (one word per 8 beats: 32 keys).
        // row, b: counters instead of n / row_beats, n % row_beats (no divider for a runtime divisor)
        const ap_uint<SM_HEAD_BITS> head = mask_in.read().range(SM_HEAD_BITS - 1, 0);  // the tile's query head
        word32 keep = 0;
        unsigned row = 0, b = 0;
    s_send:
        for (unsigned n = 0; n < Q_ROWS * row_beats; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 256 max = 8192
            if (b % 8 == 0) keep = mask_in.read();
            score_beat sb;
            sb.data = sbuf[row][b];
            sb.user = (head, ap_uint<LANES>(keep.range(4 * (b % 8) + 3, 4 * (b % 8))));  // head above the keep bits
            sb.last = b == row_beats - 1;
            sb.keep = -1;
            sb.strb = -1;
            if (to_os)
                to_online_softmax.write(sb);
            else
                to_swiftmax.write(sb);
            if (b == row_beats - 1) {
                b = 0;
                row++;
            } else {
                b++;
            }
        }
    }
}

void score_switch_return_checked(hls::stream<p_beat>& from_swiftmax, hls::stream<p_beat>& from_online_softmax,
                                 hls::stream<beat128>& p_out, unsigned n_tiles, unsigned keys_pad, unsigned select,
                                 ap_uint<32>& framing_errors) {
    framing_errors = 0;
    if (!geometry_ok(32, keys_pad)) return;
    // One tile of P, row-major: pbuf[i][c][j] holds P[i, 16c + 4j .. 16c + 4j + 3] (lane l = uint8 at
    // bits 8l); the 4 words j of a 16-key chunk c sit in 4 banks, so one 128-bit P beat is read per cycle.
    word32 pbuf[Q_ROWS][MAX_KEYS / 16][4];
#pragma HLS ARRAY_PARTITION variable=pbuf type=complete dim=3
    const unsigned n_kb = keys_pad / KEY_BLOCK;
    const unsigned row_beats = keys_pad / LANES;
    const bool from_os = select != 0;
    ap_uint<32> bad_rows = 0;  // rows with a framing error so far in this launch (sticky once nonzero)
tiles:
    for (unsigned t = 0; t < n_tiles; t++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 16
        bool row_bad = false;  // a TLAST seen out of place in the current row
        unsigned row = 0, b = 0;
    p_read:
        for (unsigned n = 0; n < Q_ROWS * row_beats; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 256 max = 8192
            const p_beat pb = from_os ? from_online_softmax.read() : from_swiftmax.read();
            pbuf[row][b / 4][b % 4] = pb.data;
            const bool want_last = b == row_beats - 1;
            const bool bad = row_bad || ((pb.last == 1) != want_last);
            if (want_last) {
                if (bad) bad_rows++;
                row_bad = false;
                b = 0;
                row++;
            } else {
                row_bad = bad;
                b++;
            }
        }
        const bool zero = bad_rows != 0;  // this tile or an earlier one of the launch was misframed
        // P out block-major: per key block kb, Q_ROWS rows of 2 beats (keys kb*32 + 16h .. + 15).
    p_send:
        for (unsigned n = 0; n < n_kb * BEATS_PER_BLOCK_P; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 2048
            const unsigned kb = n / BEATS_PER_BLOCK_P;
            const unsigned r = n % BEATS_PER_BLOCK_P;
            const unsigned row = r / 2;
            const unsigned c = kb * 2 + r % 2;  // 16-key chunk: keys kb*32 + 16*(r % 2) .. + 15
            beat128 pv = 0;
            for (int j = 0; j < 4; j++) {
#pragma HLS UNROLL
                pv.range(32 * j + 31, 32 * j) = pbuf[row][c][j];
            }
            p_out.write(zero ? beat128(0) : pv);
        }
    }
    framing_errors = bad_rows;
}

void score_switch_return(hls::stream<p_beat>& from_swiftmax, hls::stream<p_beat>& from_online_softmax,
                         hls::stream<beat128>& p_out, unsigned n_tiles, unsigned keys_pad, unsigned select) {
    ap_uint<32> framing_errors;  // not visible to the host in this build (no port for it in the manifest)
    score_switch_return_checked(from_swiftmax, from_online_softmax, p_out, n_tiles, keys_pad, select,
                                framing_errors);
}

void score_switch(hls::stream<beat128>& s_in, hls::stream<word32>& mask_in, hls::stream<score_beat>& to_swiftmax,
                  hls::stream<score_beat>& to_online_softmax, hls::stream<p_beat>& from_swiftmax,
                  hls::stream<p_beat>& from_online_softmax, hls::stream<beat128>& p_out, unsigned n_tiles,
                  unsigned keys_pad, unsigned select) {
#pragma HLS INTERFACE mode=axis port=s_in
#pragma HLS INTERFACE mode=axis port=mask_in
#pragma HLS INTERFACE mode=axis port=to_swiftmax
#pragma HLS INTERFACE mode=axis port=to_online_softmax
#pragma HLS INTERFACE mode=axis port=from_swiftmax
#pragma HLS INTERFACE mode=axis port=from_online_softmax
#pragma HLS INTERFACE mode=axis port=p_out
#pragma HLS INTERFACE mode=s_axilite port=n_tiles
#pragma HLS INTERFACE mode=s_axilite port=keys_pad
#pragma HLS INTERFACE mode=s_axilite port=select
#pragma HLS INTERFACE mode=s_axilite port=return
#pragma HLS DATAFLOW
    // No channel joins the two processes: they start together and overlap, the normalizer between them.
    score_switch_route(s_in, mask_in, to_swiftmax, to_online_softmax, n_tiles, keys_pad, select);
    score_switch_return(from_swiftmax, from_online_softmax, p_out, n_tiles, keys_pad, select);
}

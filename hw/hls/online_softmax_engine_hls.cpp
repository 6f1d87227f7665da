// online_softmax_engine_hls.cpp -- the engine's online-softmax score channel on score packets (see
// online_softmax_engine_hls.h).
#include "online_softmax_engine_hls.h"

using namespace vckattn_engine_os;
using vckattn_engine_pl::beat128;
using vckattn_engine_pl::pkt_beat;

namespace {

// The two tile buffers (the OnlineChannel's score and header memories) and their state.
struct TileBuffers {
    bool held[2];
    uint32_t tile[2];
    int got[2];
    bool have[2][K];
    beat128 header[2][K];       // each slice's header, elem_bits already 8
    score_t s[2][Q_ROWS][MAX_KEYS];  // the tile's rows, gathered from its slices
};

// Normalizes the rows of buffer b and sends its K P packets in slice order.
void send_tile(TileBuffers& tb, int b, hls::stream<pkt_beat>& m_axis, a_mult_t a_mult, a_shift_t a_shift) {
    static p_t p[Q_ROWS][MAX_KEYS];
rows:
    for (int i = 0; i < Q_ROWS; i++) online_softmax_row(tb.s[b][i], a_mult, a_shift, p[i]);
slices:
    for (int j = 0; j < K; j++) {
        pkt_beat h;
        h.data = tb.header[b][j];
        h.keep = -1;
        h.strb = -1;
        h.user = 0;
        h.last = 0;
        m_axis.write(h);
    beats:
        for (int n = 0; n < P_BEATS; n++) {
#pragma HLS PIPELINE II=1
            pkt_beat out;
            for (int l = 0; l < 16; l++) {
                // element e of the slice's 4x8 block layout: block (ib, jb) at (ib * SK/8 + jb) * 32, row-major
                const int e = 16 * n + l, blk = e / 32, o = e % 32;
                const int row = (blk / (SK / 8)) * 4 + o / 8, key = j * SK + (blk % (SK / 8)) * 8 + o % 8;
                out.data.range(8 * l + 7, 8 * l) = p[row][key];
            }
            out.keep = -1;
            out.strb = -1;
            out.user = 0;
            out.last = n == P_BEATS - 1;
            m_axis.write(out);
        }
    }
}

}  // namespace

int online_softmax_engine_hls(hls::stream<pkt_beat>& s_axis, hls::stream<pkt_beat>& m_axis, unsigned n_packets,
                              a_mult_t a_mult, a_shift_t a_shift, unsigned* dropped) {
#pragma HLS INTERFACE mode=axis port=s_axis
#pragma HLS INTERFACE mode=axis port=m_axis
#pragma HLS INTERFACE mode=s_axilite port=n_packets bundle=control
#pragma HLS INTERFACE mode=s_axilite port=a_mult bundle=control
#pragma HLS INTERFACE mode=s_axilite port=a_shift bundle=control
#pragma HLS INTERFACE mode=s_axilite port=dropped bundle=control
#pragma HLS INTERFACE mode=s_axilite port=return bundle=control
    using namespace vckattn_engine;
    static TileBuffers tb;
    for (int b = 0; b < 2; b++) {
        tb.held[b] = false;
        tb.got[b] = 0;
        for (int j = 0; j < K; j++) tb.have[b][j] = false;
    }
    int alloc = 0;   // the buffer the next new tile takes
    int oldest = 0;  // the buffer whose tile leaves next
    *dropped = 0;

packets:
    for (unsigned n = 0; n < n_packets; n++) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=4096
        const pkt_beat head = s_axis.read();
        uint32_t w[4];
        vckattn_engine_pl::beat_words(head.data, w);
        const uint32_t count = VCKATTN_GET(w, PACKET_COUNT);
        const uint32_t j = VCKATTN_GET(w, PACKET_SLICE);
        const uint32_t tile = VCKATTN_GET(w, PACKET_TILE_ID);
        if (count != (uint32_t)COUNT || j >= (uint32_t)K) {  // consumed and dropped
        drop:
            for (uint32_t r = 0; r < (count + E - 1) / E; r++) s_axis.read();
            ++*dropped;
            continue;
        }
        int b = -1;
        for (int i = 0; i < 2; i++)
            if (tb.held[i] && tb.tile[i] == tile && tb.got[i] != K) b = i;
        if (b < 0) {
            if (tb.held[alloc]) return vckattn_engine_pl::PL_THIRD_TILE;
            b = alloc;
            alloc ^= 1;
            tb.held[b] = true;
            tb.tile[b] = tile;
        }
        if (tb.have[b][j]) return vckattn_engine_pl::PL_SLICE_TWICE;
        VCKATTN_PUT(w, PACKET_ELEM_BITS, 8u);
        tb.header[b][j] = vckattn_engine_pl::words_beat(w);
    gather:
        for (int r = 0; r < COUNT / E; r++) {
#pragma HLS PIPELINE II=1
            const pkt_beat in = s_axis.read();
            for (int l = 0; l < E; l++) {
                const int e = E * r + l, blk = e / 32, o = e % 32;
                const int row = (blk / (SK / 8)) * 4 + o / 8, key = (int)j * SK + (blk % (SK / 8)) * 8 + o % 8;
                tb.s[b][row][key] = score_t(in.data.range(SCORE_BITS * l + SCORE_BITS - 1, SCORE_BITS * l));
            }
        }
        tb.have[b][j] = true;
        tb.got[b]++;
    send:
        while (tb.held[oldest] && tb.got[oldest] == K) {
            send_tile(tb, oldest, m_axis, a_mult, a_shift);
            tb.held[oldest] = false;
            tb.got[oldest] = 0;
            for (int i = 0; i < K; i++) tb.have[oldest][i] = false;
            oldest ^= 1;
        }
    }
    return tb.held[0] || tb.held[1] ? vckattn_engine_pl::PL_INCOMPLETE : vckattn_engine_pl::PL_OK;
}

// s2mm_records: the sublayer's R writer (see s2mm_records.h), one per launch behind the residual paths: each residual
// record's valid rows into R in DDR by tile id, the padding rows read and dropped. A plain writer: no arithmetic on
// the payload, one 128-bit beat in a cycle. Every check is made on the header beat before the payload is read, so a
// refused record writes nothing.
#include "s2mm_records.h"

#include "../aie/generated/engine_streams.h"

using namespace vckattn_records;

int s2mm_records(hls::stream<beat128>& r_in, ap_uint<128>* r_out, unsigned n_records, unsigned tile_rows,
                 unsigned cols, unsigned row_tiles, unsigned d_model, unsigned n_tokens) {
#pragma HLS INTERFACE mode=axis port=r_in
#pragma HLS INTERFACE mode=m_axi port=r_out bundle=gmem0 offset=slave depth=65536
#pragma HLS INTERFACE mode=s_axilite port=n_records
#pragma HLS INTERFACE mode=s_axilite port=tile_rows
#pragma HLS INTERFACE mode=s_axilite port=cols
#pragma HLS INTERFACE mode=s_axilite port=row_tiles
#pragma HLS INTERFACE mode=s_axilite port=d_model
#pragma HLS INTERFACE mode=s_axilite port=n_tokens
#pragma HLS INTERFACE mode=s_axilite port=return
    using namespace vckattn_engine;
    if (cols == 0 || cols % BEAT_BYTES || d_model == 0 || d_model % BEAT_BYTES || tile_rows == 0) return R_BAD_ARGS;
    const unsigned row_beats = cols / BEAT_BYTES;        // beats of one record row
    const unsigned token_beats = d_model / BEAT_BYTES;   // beats of one R row
records:
    for (unsigned r = 0; r < n_records; r++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = 4096
        const beat128 head = r_in.read();
        uint32_t w[4];
        for (int k = 0; k < 4; k++) w[k] = head.range(32 * k + 31, 32 * k).to_uint();
        if (VCKATTN_GET(w, GRESULT_ELEM_BITS) != 8) return R_BAD_ELEM_BITS;
        if (VCKATTN_GET(w, GRESULT_COLS) != cols) return R_BAD_COLS;
        const unsigned long long col_block = VCKATTN_GET(w, GRESULT_COL_BLOCK);
        if ((col_block + 1) * cols > d_model) return R_BAD_COL_BLOCK;
        const unsigned long long tile = VCKATTN_GET(w, GRESULT_TILE_ID);  // the record's row tile
        if (tile >= row_tiles) return R_BAD_ROW_TILE;
        const unsigned rows = VCKATTN_GET(w, GRESULT_ROWS);
        if (rows > tile_rows) return R_BAD_ROWS;
        const unsigned long long token0 = tile * tile_rows;
        if (token0 + rows > n_tokens) return R_BAD_TOKEN;
        const unsigned long long base = token0 * token_beats + col_block * row_beats;  // valid row 0's first beat
        unsigned i = 0, b = 0;  // the row and the beat within it of the next payload beat
    payload:
        for (unsigned n = 0; n < tile_rows * row_beats; n++) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 64 max = 4096
            const beat128 v = r_in.read();
            if (i < rows) r_out[base + (unsigned long long)i * token_beats + b] = v;  // padding rows dropped
            if (++b == row_beats) {
                b = 0;
                i++;
            }
        }
    }
    return R_OK;
}

// s2mm_records.h -- the sublayer's R writer (hw/hls/s2mm_records.cpp): residual records in, R into DDR.
//
// A record is a GRESULT header beat (hw/spec/streams.py, through ../aie/generated/engine_streams.h: tile_id, rows
// (valid rows), col_block, elem_bits, cols) then tile_rows x cols int8 row-major, 16 a beat: every row of the tile,
// padding rows included. A tile id is the record's row tile (the sublayer's convention: the x readers' XTILE tag
// names the row tile of the launch, the same for every column block, since a broadcast group's cascades take the
// same X tiles). R is n_tokens x d_model int8 row-major (d_model / 16 beats a token); a record's valid row i is
// token tile_id * tile_rows + i, channels col_block * cols .. + cols.
//
// The top returns a status (s_axilite return): R_OK after n_records; otherwise the first refusal, after which it
// stops with the refused record's payload unread and nothing of it written.
#ifndef VCKATTN_S2MM_RECORDS_H
#define VCKATTN_S2MM_RECORDS_H

#include <ap_int.h>
#include <hls_stream.h>
#include <stdint.h>

namespace vckattn_records {

using beat128 = ap_uint<128>;  // a record beat, a DDR beat of R

enum RecordStatus : int {
    R_OK = 0,
    R_BAD_ARGS = 1,       // cols or d_model not a positive multiple of 16, or tile_rows 0 (nothing read)
    R_BAD_ELEM_BITS = 2,  // a record whose elem_bits is not 8
    R_BAD_COLS = 3,       // a record whose cols is not the argument cols
    R_BAD_COL_BLOCK = 4,  // col_block * cols + cols > d_model
    R_BAD_ROW_TILE = 5,   // tile_id (the row tile) outside 0 .. row_tiles - 1
    R_BAD_ROWS = 6,       // more valid rows than tile_rows
    R_BAD_TOKEN = 7,      // a valid row beyond n_tokens: row_tile * tile_rows + rows > n_tokens
};

inline const char* record_status_text(int st) {
    switch (st) {
        case R_OK: return "ok";
        case R_BAD_ARGS: return "cols or d_model not a positive multiple of 16, or tile_rows 0";
        case R_BAD_ELEM_BITS: return "record elem_bits is not 8";
        case R_BAD_COLS: return "record cols differs from the argument";
        case R_BAD_COL_BLOCK: return "record channels run past d_model";
        case R_BAD_ROW_TILE: return "record row tile outside row_tiles";
        case R_BAD_ROWS: return "record valid rows exceed tile_rows";
        case R_BAD_TOKEN: return "record valid row beyond n_tokens";
        default: return "unknown status";
    }
}

}  // namespace vckattn_records

// n_records residual records in r_in: each record's valid rows into r_out (n_tokens x d_model int8), padding rows
// read and dropped.
int s2mm_records(hls::stream<vckattn_records::beat128>& r_in, ap_uint<128>* r_out, unsigned n_records,
                 unsigned tile_rows, unsigned cols, unsigned row_tiles, unsigned d_model, unsigned n_tokens);

#endif  // VCKATTN_S2MM_RECORDS_H

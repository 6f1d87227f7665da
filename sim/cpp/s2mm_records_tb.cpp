// C-simulation test bench of the sublayer's R writer (hw/hls/s2mm_records.cpp).
//
//   s2mm_records_tb DIR n_records tile_rows cols row_tiles d_model n_tokens
//
// reads DIR/in_records.bin (the r_in stream, 16 bytes a beat), writes DIR/out_r.bin (R: n_tokens x d_model bytes,
// every byte 0xA5 before the run, so a byte never written shows; the buffer the writer gets is exactly R, so with
// AddressSanitizer a write past it fails the run), prints "status N" (the writer's return) and "left N" (r_in beats
// unread).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "s2mm_records.h"

#include "beat_files.h"

using vckattn_records::beat128;

int main(int argc, char** argv) {
    if (argc != 8) {
        std::fprintf(stderr, "usage: s2mm_records_tb DIR n_records tile_rows cols row_tiles d_model n_tokens\n");
        return 2;
    }
    const std::string dir = argv[1];
    unsigned a[6];
    for (int k = 0; k < 6; k++) a[k] = std::strtoul(argv[2 + k], nullptr, 10);
    hls::stream<beat128> r_in;
    for (const beat128& b : read_beats(dir + "/in_records.bin")) r_in.write(b);
    beat128 fill = 0;
    for (int i = 0; i < 16; i++) fill.range(8 * i + 7, 8 * i) = 0xA5;
    std::vector<beat128> r((size_t)a[5] * (a[4] / 16), fill);
    const int st = s2mm_records(r_in, r.data(), a[0], a[1], a[2], a[3], a[4], a[5]);
    size_t left = 0;
    while (!r_in.empty()) {
        r_in.read();
        left++;
    }
    write_beats(dir + "/out_r.bin", r);
    std::printf("status %d\nleft %zu\n", st, left);
    return 0;
}

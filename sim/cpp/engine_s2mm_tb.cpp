// C-simulation test bench of the engine's output mover (hw/hls/s2mm_engine.cpp, stream contract v3): a plain
// writer of the A records the requantizer kernel sends.
//
//   engine_s2mm_tb DIR n_records n_slots pipeline
//
// reads DIR/in_records.bin (the a_in stream, 16 bytes a beat), writes DIR/out_a.bin (the A buffer: n_slots x
// Q_ROWS x D bytes, every byte 0xA5 before the run, so an unwritten slot shows) and DIR/out_done.bin (n_records done
// log entries, 0xA5 where none was written), prints "status N" (the kernel's return) and "left N" (a_in beats
// unread). Build parameters VCKATTN_ENGINE_Q_ROWS / _D / _SCORE_BITS with -D.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "s2mm_engine.h"

#include "beat_files.h"

using vckattn_engine_pl::beat128;

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: engine_s2mm_tb DIR n_records n_slots pipeline\n");
        return 2;
    }
    const std::string dir = argv[1];
    const unsigned n_records = std::strtoul(argv[2], nullptr, 10);
    const unsigned n_slots = std::strtoul(argv[3], nullptr, 10);
    const unsigned pipeline = std::strtoul(argv[4], nullptr, 10);
    hls::stream<beat128> a_in;
    for (const beat128& b : read_beats(dir + "/in_records.bin")) a_in.write(b);
    beat128 fill = 0;
    for (int i = 0; i < 16; i++) fill.range(8 * i + 7, 8 * i) = 0xA5;
    const unsigned slot_beats = vckattn_engine_pl::Q_ROWS * vckattn_engine_pl::D / 16;
    std::vector<beat128> a((size_t)n_slots * slot_beats + 1, fill), done(n_records + 1, fill);
    const int st = s2mm_engine(a_in, a.data(), done.data(), n_records, n_slots, pipeline);
    size_t left = 0;
    while (!a_in.empty()) {
        a_in.read();
        left++;
    }
    a.pop_back();
    done.pop_back();
    write_beats(dir + "/out_a.bin", a);
    write_beats(dir + "/out_done.bin", done);
    std::printf("status %d\nleft %zu\n", st, left);
    return 0;
}

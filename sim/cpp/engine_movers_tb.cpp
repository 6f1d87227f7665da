// C-simulation test bench of the engine's command-list mover (hw/hls/mm2s_engine.cpp, stream contract v3).
//
//   engine_movers_tb DIR n_cmds kv payload_bytes
//
// reads DIR/in_cmds.bin (n_cmds x 32 bytes), DIR/in_src.bin, DIR/in_src_v.bin (raw bytes; a missing file =
// empty), writes DIR/out_stream.bin (16 bytes a beat) and prints "sent N".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ap_int.h>
#include <hls_stream.h>

#include "beat_files.h"

typedef ap_uint<128> beat128;
unsigned mm2s_engine(const beat128* cmds, unsigned n_cmds, const beat128* src, const beat128* src_v, unsigned kv,
                     unsigned payload_bytes, hls::stream<beat128>& out);

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: engine_movers_tb DIR n_cmds kv payload_bytes\n");
        return 2;
    }
    const std::string dir = argv[1];
    const unsigned n_cmds = std::strtoul(argv[2], nullptr, 10);
    std::vector<beat128> cmds = read_beats(dir + "/in_cmds.bin");
    std::vector<beat128> src = read_beats(dir + "/in_src.bin");
    std::vector<beat128> src_v = read_beats(dir + "/in_src_v.bin");
    if (cmds.size() < 2 * n_cmds) {
        std::fprintf(stderr, "in_cmds.bin holds %zu beats, need %u\n", cmds.size(), 2 * n_cmds);
        return 2;
    }
    hls::stream<beat128> out;
    const unsigned sent = mm2s_engine(cmds.data(), n_cmds, src.data(), src_v.data(), std::strtoul(argv[3], nullptr, 10),
                                      std::strtoul(argv[4], nullptr, 10), out);
    std::vector<beat128> stream;
    while (!out.empty()) stream.push_back(out.read());
    write_beats(dir + "/out_stream.bin", stream);
    std::printf("sent %u\n", sent);
    return 0;
}

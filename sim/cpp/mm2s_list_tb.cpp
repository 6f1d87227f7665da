// C-simulation test bench of the sublayer's list mover (hw/hls/mm2s_list.cpp).
//
//   mm2s_list_tb DIR n_cmds src_beats
//
// reads DIR/in_cmds.bin (n_cmds x 32 bytes) and DIR/in_src.bin (whole beats; a missing file = empty; the buffer the
// mover gets is exactly the file, so with AddressSanitizer a read past it fails the run), writes DIR/out_stream.bin
// (TDATA, 16 bytes a beat) and DIR/out_last.bin (TLAST, one byte a beat: 0 or 1), prints "sent N" (the mover's
// return) and "keep_strb_ok 0|1" (every beat's TKEEP and TSTRB all ones).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mm2s_list.h"

#include "beat_files.h"

using vckattn_list::axis128;
using vckattn_list::beat128;

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: mm2s_list_tb DIR n_cmds src_beats\n");
        return 2;
    }
    const std::string dir = argv[1];
    const unsigned n_cmds = std::strtoul(argv[2], nullptr, 10);
    const unsigned long long src_beats = std::strtoull(argv[3], nullptr, 10);
    std::vector<beat128> cmds = read_beats(dir + "/in_cmds.bin");
    std::vector<beat128> src = read_beats(dir + "/in_src.bin");
    if (cmds.size() < 2ull * n_cmds) {
        std::fprintf(stderr, "in_cmds.bin holds %zu beats, need %u\n", cmds.size(), 2 * n_cmds);
        return 2;
    }
    hls::stream<axis128> out;
    const unsigned sent = mm2s_list(cmds.data(), n_cmds, src.data(), src_beats, out);
    std::vector<beat128> data;
    std::string last;
    bool keep_strb_ok = true;
    while (!out.empty()) {
        const axis128 a = out.read();
        data.push_back(a.data);
        last.push_back((char)a.last.to_uint());
        keep_strb_ok = keep_strb_ok && a.keep == 0xFFFF && a.strb == 0xFFFF;
    }
    write_beats(dir + "/out_stream.bin", data);
    FILE* f = std::fopen((dir + "/out_last.bin").c_str(), "wb");
    if (!f) return 2;
    std::fwrite(last.data(), 1, last.size(), f);
    std::fclose(f);
    std::printf("sent %u\nkeep_strb_ok %d\n", sent, keep_strb_ok ? 1 : 0);
    return 0;
}

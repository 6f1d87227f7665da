// pl_channel_tb.cpp -- the engine's PL top (one score channel, Verilated: pl_channel.h) on its own, on a stream:
//
//   pl_channel_tb REGS IN OUT EXPECT
//
// REGS: the AXI4-Lite writes (little-endian uint32 byte offset, then the word), performed after reset; IN: the
// score stream, one record of 17 bytes a beat (16 TDATA bytes, then TLAST); OUT: the P stream the channel wrote,
// the same records; EXPECT: the P beats to wait for (the run also ends after 100,000 cycles without a beat
// moving). stdout: "leftover <n>" (input beats the channel did not take). Exit 2 on bad arguments or files.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pl_channel.h"

namespace {

[[noreturn]] void fail(const std::string& msg) {
    std::fprintf(stderr, "pl_channel_tb: %s\n", msg.c_str());
    std::exit(2);
}

std::vector<unsigned char> slurp(const char* path) {
    FILE* f = std::fopen(path, "rb");
    if (!f) fail(std::string("cannot read ") + path);
    std::vector<unsigned char> out;
    unsigned char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
    std::fclose(f);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) fail("usage: pl_channel_tb REGS IN OUT EXPECT");
    const std::vector<unsigned char> raw = slurp(argv[2]);
    if (raw.size() % 17) fail("IN is not whole 17-byte records");
    const std::string bad = vckattn_pl::init_from_file(argv[1]);
    if (!bad.empty()) fail("registers: " + bad);
    std::vector<vckattn_pl::Beat> in, out;
    std::vector<bool> last, out_last;
    for (size_t i = 0; i < raw.size(); i += 17) {
        vckattn_pl::Beat b;
        std::memcpy(b.data(), raw.data() + i, 16);
        in.push_back(b);
        last.push_back(raw[i + 16] != 0);
    }
    const size_t left = vckattn_pl::run(in, last, out, std::strtoul(argv[4], nullptr, 0), &out_last);
    FILE* f = std::fopen(argv[3], "wb");
    if (!f) fail(std::string("cannot write ") + argv[3]);
    for (size_t i = 0; i < out.size(); i++) {
        std::fwrite(out[i].data(), 1, 16, f);
        const unsigned char l = out_last[i] ? 1 : 0;
        std::fwrite(&l, 1, 1, f);
    }
    std::fclose(f);
    std::printf("leftover %zu\n", left);
    return 0;
}

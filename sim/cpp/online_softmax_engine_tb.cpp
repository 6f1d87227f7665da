// C-simulation of the engine's online-softmax score channel on its own (hw/hls/online_softmax_engine_hls.cpp):
//
//   online_softmax_engine_tb IN OUT N_PACKETS A_MULT A_SHIFT
//
// IN: the score stream, 16-byte beats back to back (packets: a header beat, then their payload beats; TLAST is set
// on each packet's last beat as the AIE's buffer DMA sets it); OUT: the P stream the channel wrote, one record of 17
// bytes a beat (the 16 TDATA bytes, then TLAST). stdout: "status <code> <text>", "dropped <n>" and "leftover <n>"
// (input beats the channel did not read). Exit 2 on bad arguments or files.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "online_softmax_engine_hls.h"

using vckattn_engine_pl::pkt_beat;

namespace {

[[noreturn]] void fail(const std::string& msg) {
    std::fprintf(stderr, "online_softmax_engine_tb: %s\n", msg.c_str());
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 6) fail("usage: online_softmax_engine_tb IN OUT N_PACKETS A_MULT A_SHIFT");
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) fail(std::string("cannot read ") + argv[1]);
    std::vector<unsigned char> in;
    unsigned char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) in.insert(in.end(), buf, buf + n);
    std::fclose(f);
    if (in.size() % 16) fail("the input is not whole 16-byte beats");
    const unsigned n_packets = std::strtoul(argv[3], nullptr, 0);
    const vckattn_engine_os::a_mult_t a_mult = std::strtol(argv[4], nullptr, 0);
    const vckattn_engine_os::a_shift_t a_shift = std::strtoul(argv[5], nullptr, 0);

    hls::stream<pkt_beat> s_axis("s_axis"), m_axis("m_axis");
    for (size_t i = 0; i < in.size() / 16; i++) {
        pkt_beat x;
        for (int k = 0; k < 16; k++) x.data.range(8 * k + 7, 8 * k) = in[16 * i + k];
        x.keep = -1;
        x.strb = -1;
        x.user = 0;
        x.last = 0;
        s_axis.write(x);
    }
    unsigned dropped = 0;
    const int st = online_softmax_engine_hls(s_axis, m_axis, n_packets, a_mult, a_shift, &dropped);
    size_t left = 0;
    while (!s_axis.empty()) {
        s_axis.read();
        left++;
    }
    std::vector<unsigned char> out;
    while (!m_axis.empty()) {
        const pkt_beat b = m_axis.read();
        for (int k = 0; k < 16; k++) out.push_back((unsigned char)(unsigned)b.data.range(8 * k + 7, 8 * k));
        out.push_back((unsigned char)(unsigned)b.last);
    }
    FILE* g = std::fopen(argv[2], "wb");
    if (!g || std::fwrite(out.data(), 1, out.size(), g) != out.size()) fail(std::string("cannot write ") + argv[2]);
    std::fclose(g);
    std::printf("status %d %s\n", st, vckattn_engine_pl::pl_status_text(st));
    std::printf("dropped %u\n", dropped);
    std::printf("leftover %zu\n", left);
    return 0;
}

// System C-simulation of one launch of the attention build: every kernel of the Versal design
// chained through the streams of hw/STREAMS.md, in the order the hardware runs them.
//
//   DDR desc/q/mask --mm2s_tiles--> q, mask     DDR kv --mm2s_kv--> k, v
//   q, k   --qk_matmul (AIE kernel, scalar reference path of hw/aie/attention_kernels.h)--> s
//   s, mask --score_switch_route--> scores --swiftmax_hls--> P --score_switch_return--> p
//            (mask: per tile the query head word, then the mask words; the head rides on the score TUSER
//            and selects the SwiftMax register set)
//   v, p   --pv_matmul (AIE kernel, scalar reference path)--> o
//   o      --s2mm_out--> DDR out
//
// The AIE kernels run through the same per-tile template code the AI Engine compiles (the g++ stream
// adapters HostIn / HostOut stand in for the ADF streams); the HLS kernels are the sources v++ -c
// compiles. The normalizer is the HLS SwiftMax (hw/hls/swiftmax_hls.cpp), which has the RTL kernel's
// stream interface; the online-softmax normalizer exists only as RTL (tested in cocotb), so select 1 is
// refused here.
//
//   system_csim_tb DIR n_tiles head_dim keys_pad n_kv_heads rq_mult rq_shift SWIFTMAX_REGISTERS (declaration order,
//                  then the b_beta and c_out memories' MAX_HEADS entries each; entry h for the tiles of head h)
//
// reads DIR/desc.bin, q.bin, mask.bin, kv.bin, out.bin (host/tile_buffers.py layouts), writes DIR/out_result.bin
// (the out buffer after s2mm_out). stdout: "beats NAME N" per stream and "leftover NAME N" for every stream
// that still holds beats at the end (a correct run leaves none). Exit 2 on bad arguments or files, 3 when an
// AIE tile header is refused.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "attention_kernels.h"
#include "movers.h"
#include "swiftmax_hls.h"

namespace {

std::string g_dir;

std::vector<uint8_t> read_file(const std::string& name) {
    const std::string path = g_dir + "/" + name;
    std::vector<uint8_t> out;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::fprintf(stderr, "system_csim_tb: cannot read %s\n", path.c_str());
        std::exit(2);
    }
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
    std::fclose(f);
    return out;
}

template <int W>
std::vector<ap_uint<W> > words(const std::vector<uint8_t>& b) {
    std::vector<ap_uint<W> > v(b.size() / (W / 8));
    for (size_t i = 0; i < v.size(); i++)
        for (int k = 0; k < W / 8; k++) v[i].range(8 * k + 7, 8 * k) = b[i * (W / 8) + k];
    return v;
}

// hls::stream of 128-bit beats -> bytes (drains the stream)
std::vector<uint8_t> drain128(hls::stream<ap_uint<128> >& s, const char* name) {
    std::vector<uint8_t> out;
    while (!s.empty()) {
        const ap_uint<128> b = s.read();
        for (int k = 0; k < 16; k++) out.push_back((uint8_t)(unsigned)b.range(8 * k + 7, 8 * k));
    }
    std::printf("beats %s %zu\n", name, out.size() / 16);
    return out;
}

// AIE output beats -> hls::stream of 128-bit beats
void fill128(const std::vector<vckattn_aie::Beat>& beats, hls::stream<ap_uint<128> >& s, const char* name) {
    for (const vckattn_aie::Beat& b : beats) {
        ap_uint<128> v = 0;
        for (int k = 0; k < 16; k++) v.range(8 * k + 7, 8 * k) = b[k];
        s.write(v);
    }
    std::printf("beats %s %zu\n", name, beats.size());
}

template <class S>
void leftover(S& s, const char* name) {
    size_t n = 0;
    while (!s.empty()) {
        s.read();
        n++;
    }
    if (n) std::printf("leftover %s %zu\n", name, n);
}

void leftover_in(const vckattn_aie::HostIn& s, const char* name) {
    if (s.remaining() || s.missing())
        std::printf("leftover %s %zu\nmissing %s %zu\n", name, s.remaining(), name, s.missing());
}

using Shape = vckattn_aie::DefaultShape;
vckattn_aie::QkWorkspace<Shape> qk_ws;
vckattn_aie::PvWorkspace<Shape> pv_ws;

}  // namespace

int main(int argc, char** argv) {
    // the SwiftMax registers follow in declaration order (VCKATTN_SWIFTMAX_REGS), then every memory's
    // entries (VCKATTN_SWIFTMAX_MEMS: b_beta[0..MAX_HEADS), c_out[0..MAX_HEADS), entry h = head h)
    const int n_regs = VCKATTN_SWIFTMAX_WORDS;
    if (argc != 8 + n_regs) {
        std::fprintf(stderr, "usage: %s DIR n_tiles head_dim keys_pad n_kv_heads rq_mult rq_shift "
                             "SWIFTMAX_REGISTERS... (%d: registers in declaration order, then the memories' "
                             "entries)\n", argv[0], n_regs);
        return 2;
    }
    g_dir = argv[1];
    const unsigned n_tiles = std::strtoul(argv[2], nullptr, 0), head_dim = std::strtoul(argv[3], nullptr, 0);
    const unsigned keys_pad = std::strtoul(argv[4], nullptr, 0), n_kv_heads = std::strtoul(argv[5], nullptr, 0);
    const int rq_mult = std::strtol(argv[6], nullptr, 0);
    const unsigned rq_shift = std::strtoul(argv[7], nullptr, 0);
    vckattn::swiftmax_regs sm_regs;
    int arg = 8;
#define VCKATTN_PARSE_REG(name, width, is_signed, offset) sm_regs.name = std::strtol(argv[arg++], nullptr, 0);
    VCKATTN_SWIFTMAX_REGS(VCKATTN_PARSE_REG)
#undef VCKATTN_PARSE_REG
#define VCKATTN_PARSE_MEM(name, width, is_signed, offset, depth) \
    for (int i = 0; i < depth; i++) sm_regs.name[i] = std::strtol(argv[arg++], nullptr, 0);
    VCKATTN_SWIFTMAX_MEMS(VCKATTN_PARSE_MEM)
#undef VCKATTN_PARSE_MEM

    std::vector<ap_uint<32> > desc = words<32>(read_file("desc.bin"));
    std::vector<ap_uint<128> > q = words<128>(read_file("q.bin"));
    std::vector<ap_uint<32> > mask = words<32>(read_file("mask.bin"));
    std::vector<ap_uint<128> > kv = words<128>(read_file("kv.bin"));
    std::vector<ap_uint<128> > out = words<128>(read_file("out.bin"));
    if (desc.size() < 8 * n_tiles) {
        std::fprintf(stderr, "system_csim_tb: desc.bin holds fewer than %u descriptors\n", n_tiles);
        return 2;
    }

    // 1. data movers: DDR -> q, mask, k, v
    hls::stream<ap_uint<128> > q_s("q"), k_s("k"), v_s("v"), s_s("s"), p_s("p"), o_s("o");
    hls::stream<ap_uint<32> > mask_s("mask");
    mm2s_tiles(desc.data(), q.data(), mask.data(), n_tiles, head_dim, keys_pad, q_s, mask_s);
    mm2s_kv(desc.data(), kv.data(), n_tiles, n_kv_heads, head_dim, keys_pad, k_s, v_s);

    // 2. AIE qk_matmul, one tile per call
    std::vector<uint8_t> qb = drain128(q_s, "q"), kb = drain128(k_s, "k");
    vckattn_aie::HostIn q_in(qb.data(), qb.size()), k_in(kb.data(), kb.size());
    vckattn_aie::HostOut s_out;
    for (unsigned t = 0; t < n_tiles; t++) {
        const vckattn_aie::TileStatus st = vckattn_aie::qk_tile<Shape>(q_in, k_in, s_out, qk_ws);
        if (st != vckattn_aie::TILE_OK) {
            std::fprintf(stderr, "system_csim_tb: qk_matmul refused tile %u: %s\n", t, vckattn_aie::tile_status_text(st));
            return 3;
        }
    }
    fill128(s_out.beats(), s_s, "s");

    // 3. score_switch (route) -> SwiftMax -> score_switch (return); select 0 = swiftmax
    hls::stream<vckattn::score_beat> to_sm("to_swiftmax"), to_os("to_online_softmax");
    hls::stream<vckattn::p_beat> from_sm("from_swiftmax"), from_os("from_online_softmax");
    score_switch_route(s_s, mask_s, to_sm, to_os, n_tiles, keys_pad, 0);
    const int n_beats = static_cast<int>(n_tiles * vckattn::Q_ROWS * keys_pad / vckattn::LANES);
    std::printf("beats scores %zu\n", to_sm.size());
    swiftmax_hls(to_sm, from_sm, n_beats, sm_regs);
    std::printf("beats P %zu\n", from_sm.size());
    ap_uint<32> framing_errors = 0;
    score_switch_return_checked(from_sm, from_os, p_s, n_tiles, keys_pad, 0, framing_errors);
    std::printf("framing_errors %u\n", (unsigned)framing_errors);

    // 4. AIE pv_matmul, one tile per call
    std::vector<uint8_t> vb = drain128(v_s, "v"), pb = drain128(p_s, "p");
    vckattn_aie::HostIn v_in(vb.data(), vb.size()), p_in(pb.data(), pb.size());
    vckattn_aie::HostOut o_out;
    for (unsigned t = 0; t < n_tiles; t++) {
        const vckattn_aie::TileStatus st = vckattn_aie::pv_tile<Shape>(v_in, p_in, o_out, pv_ws);
        if (st != vckattn_aie::TILE_OK) {
            std::fprintf(stderr, "system_csim_tb: pv_matmul refused tile %u: %s\n", t, vckattn_aie::tile_status_text(st));
            return 3;
        }
    }
    fill128(o_out.beats(), o_s, "o");

    // 5. s2mm_out: requantize and write the out records
    s2mm_out(o_s, desc.data(), out.data(), n_tiles, head_dim, rq_mult, rq_shift);

    // every stream must be consumed exactly
    leftover_in(q_in, "q");
    leftover_in(k_in, "k");
    leftover_in(v_in, "v");
    leftover_in(p_in, "p");
    leftover(mask_s, "mask");
    leftover(s_s, "s");
    leftover(to_sm, "to_swiftmax");
    leftover(to_os, "to_online_softmax");
    leftover(from_sm, "from_swiftmax");
    leftover(o_s, "o");

    const std::string path = g_dir + "/out_result.bin";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 2;
    for (const ap_uint<128>& w : out)
        for (int k = 0; k < 16; k++) std::fputc((int)(unsigned)w.range(8 * k + 7, 8 * k), f);
    std::fclose(f);
    return 0;
}

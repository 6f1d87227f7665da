// C-simulation test bench of the HLS data movers and score_switch (hw/hls/movers.h).
//
//   movers_tb MODE DIR SCALARS...
//
//   MODE        SCALARS                                  reads DIR/in_*.bin        writes DIR/out_*.bin
//   mm2s_tiles  n_tiles head_dim keys_pad                desc q mask               q_out mask_out
//   mm2s_kv     n_tiles n_kv_heads head_dim keys_pad     desc kv                   k_out v_out
//   s2mm_out    n_tiles head_dim rq_mult rq_shift        o_in desc out             out
//   route       n_tiles keys_pad select                  s_in mask_in              to_swiftmax to_online_softmax
//   return      n_tiles keys_pad select                  from_swiftmax             p_out
//                                                        from_online_softmax
//   switch      n_tiles keys_pad select                  s_in mask_in from_*       to_* p_out
//
// File formats (raw bytes, little endian, records back to back; a missing input file = empty):
//   DDR buffers desc, q, mask, kv, out: the buffer's bytes (host/tile_buffers.py); out is read, then
//     written back after the kernel (slots it did not write keep their bytes).
//   128-bit streams (q_out, k_out, v_out, s_in, o_in, p_out): 16 bytes a beat.
//   32-bit streams (mask_out, mask_in): 4 bytes a beat.
//   score streams (to_swiftmax, to_online_softmax): 21 bytes a beat: TDATA 16, TKEEP 2, TUSER 2 (keep bits
//   [0, 4), head [4, 4 + HEAD_BITS)), TLAST 1.
//   P streams (from_swiftmax, from_online_softmax): 6 bytes a beat: TDATA 4, TUSER 1, TLAST 1.
// stdout: one line "leftover NAME COUNT" per input stream (beats the kernel did not read) and, for
// return, "framing_errors N". An hls::stream read while empty prints the C-sim model's WARNING line.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "movers.h"

using namespace vckattn;
typedef std::vector<uint8_t> bytes;

static std::string g_dir;

static bytes read_file(const char* name) {
    const std::string path = g_dir + "/in_" + name + ".bin";
    bytes out;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return out;
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
    std::fclose(f);
    return out;
}

static void write_file(const char* name, const bytes& data) {
    const std::string path = g_dir + "/out_" + name + ".bin";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size()) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::exit(2);
    }
    std::fclose(f);
}

template <int W>
static ap_uint<W> load_le(const uint8_t* p) {
    ap_uint<W> v = 0;
    for (int k = 0; k < W / 8; k++) v.range(8 * k + 7, 8 * k) = p[k];
    return v;
}

template <int W>
static void store_le(const ap_uint<W>& v, bytes& out) {
    for (int k = 0; k < W / 8; k++) out.push_back((uint8_t)(unsigned)v.range(8 * k + 7, 8 * k));
}

// A DDR buffer of W-bit words (exactly the file's size, rounded down to whole words).
template <int W>
static std::vector<ap_uint<W>> load_buffer(const char* name) {
    const bytes b = read_file(name);
    std::vector<ap_uint<W>> v(b.size() / (W / 8));
    for (size_t i = 0; i < v.size(); i++) v[i] = load_le<W>(&b[i * (W / 8)]);
    return v;
}

template <int W>
static void load_stream(const char* name, hls::stream<ap_uint<W> >& s) {
    const bytes b = read_file(name);
    for (size_t i = 0; i + W / 8 <= b.size(); i += W / 8) s.write(load_le<W>(&b[i]));
}

static void load_p_stream(const char* name, hls::stream<p_beat>& s) {
    const bytes b = read_file(name);
    for (size_t i = 0; i + 6 <= b.size(); i += 6) {
        p_beat pb;
        pb.data = load_le<32>(&b[i]);
        pb.keep = -1;
        pb.strb = -1;
        pb.user = b[i + 4];
        pb.last = b[i + 5] & 1;
        s.write(pb);
    }
}

template <int W>
static void dump_stream(const char* name, hls::stream<ap_uint<W> >& s) {
    bytes out;
    while (!s.empty()) store_le<W>(s.read(), out);
    write_file(name, out);
}

static void dump_score_stream(const char* name, hls::stream<score_beat>& s) {
    bytes out;
    while (!s.empty()) {
        const score_beat sb = s.read();
        store_le<128>(sb.data, out);
        store_le<16>(ap_uint<16>(sb.keep), out);
        store_le<16>(ap_uint<16>(sb.user), out);
        out.push_back((uint8_t)(unsigned)sb.last);
    }
    write_file(name, out);
}

// Prints and drains what the kernel left unread in an input stream.
template <typename T>
static void leftover(const char* name, hls::stream<T>& s) {
    size_t n = 0;
    while (!s.empty()) {
        s.read();
        n++;
    }
    std::printf("leftover %s %zu\n", name, n);
}

template <int W>
static const ap_uint<W>* ptr(const std::vector<ap_uint<W> >& v) {
    return v.empty() ? nullptr : v.data();
}

static unsigned arg_u(char** argv, int i) { return (unsigned)std::strtoul(argv[i], nullptr, 0); }

static int usage() {
    std::fprintf(stderr, "usage: movers_tb MODE DIR SCALARS... (see the header of movers_tb.cpp)\n");
    return 2;
}

int main(int argc, char** argv) {
    if (argc < 3) return usage();
    const std::string mode = argv[1];
    g_dir = argv[2];
    if (mode == "mm2s_tiles" && argc == 6) {
        const auto desc = load_buffer<32>("desc");
        const auto q = load_buffer<128>("q");
        const auto mask = load_buffer<32>("mask");
        hls::stream<beat128> q_out;
        hls::stream<word32> mask_out;
        mm2s_tiles(ptr(desc), ptr(q), ptr(mask), arg_u(argv, 3), arg_u(argv, 4), arg_u(argv, 5), q_out, mask_out);
        dump_stream("q_out", q_out);
        dump_stream("mask_out", mask_out);
    } else if (mode == "mm2s_kv" && argc == 7) {
        const auto desc = load_buffer<32>("desc");
        const auto kv = load_buffer<128>("kv");
        hls::stream<beat128> k_out, v_out;
        mm2s_kv(ptr(desc), ptr(kv), arg_u(argv, 3), arg_u(argv, 4), arg_u(argv, 5), arg_u(argv, 6), k_out, v_out);
        dump_stream("k_out", k_out);
        dump_stream("v_out", v_out);
    } else if (mode == "s2mm_out" && argc == 7) {
        hls::stream<beat128> o_in;
        load_stream("o_in", o_in);
        const auto desc = load_buffer<32>("desc");
        auto out = load_buffer<128>("out");
        const int rq_mult = (int)std::strtol(argv[5], nullptr, 0);
        s2mm_out(o_in, ptr(desc), out.empty() ? nullptr : out.data(), arg_u(argv, 3), arg_u(argv, 4), rq_mult,
                 arg_u(argv, 6));
        leftover("o_in", o_in);
        bytes raw;
        for (size_t i = 0; i < out.size(); i++) store_le<128>(out[i], raw);
        write_file("out", raw);
    } else if ((mode == "route" || mode == "return" || mode == "switch") && argc == 6) {
        const unsigned n_tiles = arg_u(argv, 3), keys_pad = arg_u(argv, 4), select = arg_u(argv, 5);
        hls::stream<beat128> s_in, p_out;
        hls::stream<word32> mask_in;
        hls::stream<score_beat> to_sm, to_os;
        hls::stream<p_beat> from_sm, from_os;
        const bool route = mode != "return", ret = mode != "route";
        if (route) {
            load_stream("s_in", s_in);
            load_stream("mask_in", mask_in);
        }
        if (ret) {
            load_p_stream("from_swiftmax", from_sm);
            load_p_stream("from_online_softmax", from_os);
        }
        if (mode == "route") {
            score_switch_route(s_in, mask_in, to_sm, to_os, n_tiles, keys_pad, select);
        } else if (mode == "return") {
            ap_uint<32> errors = 0;
            score_switch_return_checked(from_sm, from_os, p_out, n_tiles, keys_pad, select, errors);
            std::printf("framing_errors %u\n", (unsigned)errors);
        } else {
            score_switch(s_in, mask_in, to_sm, to_os, from_sm, from_os, p_out, n_tiles, keys_pad, select);
        }
        if (route) {
            leftover("s_in", s_in);
            leftover("mask_in", mask_in);
            dump_score_stream("to_swiftmax", to_sm);
            dump_score_stream("to_online_softmax", to_os);
        }
        if (ret) {
            leftover("from_swiftmax", from_sm);
            leftover("from_online_softmax", from_os);
            dump_stream("p_out", p_out);
        }
    } else {
        return usage();
    }
    return 0;
}

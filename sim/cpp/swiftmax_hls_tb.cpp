// swiftmax_hls_tb.cpp -- C-simulation test bench of hw/hls/swiftmax_hls.cpp (driven by
// sim/hls_norm_csim.py, checked against golden swiftmax_int by tests/test_hls_swiftmax.py).
//
// Binary protocol, every value a little-endian int64, stdin -> stdout:
//   mode 0 (streaming top):
//     in : 0, the writable registers in declaration order (VCKATTN_SWIFTMAX_REGS), every memory's
//          entries (VCKATTN_SWIFTMAX_MEMS: b_beta[0..MAX_HEADS), c_out[0..MAX_HEADS)), n_beats,
//          then n_beats x [s0, s1, s2, s3, tuser, tlast]   (s_l = int32 score of lane l; tuser = keep
//          bits [0, 4) | head << 4)
//     out: n_beats x [p0, p1, p2, p3, tuser, tlast]        (m_axis beats of swiftmax_hls; tuser = keep)
//   mode 1 (pow2 unit alone, pow2_unit<0, OUT_BITS, REG_BITS + 1>):
//     in : 1, n, then n x t (Q.12 exponent, must fit REG_BITS + 1 signed bits)
//     out: n x p
//   mode 2 (2^f unit alone, pow2_frac):
//     in : 2, n, then n x f (0 .. 2^12 - 1)
//     out: n x m (UQ1.15)
// Exits with status 1 (message on stderr) on a malformed input or a stream count mismatch.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "swiftmax_hls.h"

static void fail(const char* msg) {
    std::fprintf(stderr, "swiftmax_hls_tb: %s\n", msg);
    std::exit(1);
}

static int64_t read1() {
    int64_t v;
    if (std::fread(&v, sizeof v, 1, stdin) != 1) fail("unexpected end of input");
    return v;
}

static void read_n(std::vector<int64_t>& v, int64_t n) {
    if (n < 0) fail("negative count");
    v.resize(static_cast<size_t>(n));
    if (n && std::fread(v.data(), sizeof(int64_t), v.size(), stdin) != v.size()) fail("unexpected end of input");
}

static void write_all(const std::vector<int64_t>& v) {
    if (!v.empty() && std::fwrite(v.data(), sizeof(int64_t), v.size(), stdout) != v.size()) fail("write failed");
}

static void run_stream() {
    vckattn::swiftmax_regs regs;
#define VCKATTN_READ_REG(name, width, is_signed, offset) regs.name = read1();
    VCKATTN_SWIFTMAX_REGS(VCKATTN_READ_REG)
#undef VCKATTN_READ_REG
#define VCKATTN_READ_MEM(name, width, is_signed, offset, depth) \
    for (int i = 0; i < depth; i++) regs.name[i] = read1();
    VCKATTN_SWIFTMAX_MEMS(VCKATTN_READ_MEM)
#undef VCKATTN_READ_MEM
    const int64_t n = read1();
    std::vector<int64_t> in;
    read_n(in, n * 6);
    hls::stream<vckattn::score_beat> s_axis("s_axis");
    hls::stream<vckattn::p_beat> m_axis("m_axis");
    for (int64_t i = 0; i < n; i++) {
        vckattn::score_beat b;
        for (int l = 0; l < vckattn::LANES; l++) {
            b.data.range(32 * l + 31, 32 * l) = ap_uint<32>(static_cast<uint32_t>(in[6 * i + l]));
        }
        b.keep = -1;
        b.strb = -1;
        b.user = in[6 * i + 4];
        b.last = in[6 * i + 5];
        s_axis.write(b);
    }
    swiftmax_hls(s_axis, m_axis, static_cast<int>(n), regs);
    if (!s_axis.empty()) fail("s_axis not fully consumed");
    if (static_cast<int64_t>(m_axis.size()) != n) fail("m_axis beat count differs from n_beats");
    std::vector<int64_t> out(static_cast<size_t>(n * 6));
    for (int64_t i = 0; i < n; i++) {
        vckattn::p_beat p = m_axis.read();
        for (int l = 0; l < vckattn::LANES; l++) {
            out[6 * i + l] = static_cast<int64_t>(p.data.range(8 * l + 7, 8 * l).to_uint64());
        }
        out[6 * i + 4] = static_cast<int64_t>(p.user.to_uint64());
        out[6 * i + 5] = static_cast<int64_t>(p.last.to_uint64());
    }
    write_all(out);
}

static void run_pow2() {
    const int64_t n = read1();
    std::vector<int64_t> t;
    read_n(t, n);
    constexpr int TW = vckattn::swiftmax_fmt::REG_BITS + 1;
    std::vector<int64_t> out(t.size());
    for (size_t i = 0; i < t.size(); i++) {
        if (t[i] < -(int64_t(1) << (TW - 1)) || t[i] >= (int64_t(1) << (TW - 1))) fail("t out of range");
        out[i] = static_cast<int64_t>(
            vckattn::pow2_unit<0, vckattn::swiftmax_fmt::OUT_BITS, TW>(ap_int<TW>(t[i])).to_uint64());
    }
    write_all(out);
}

static void run_pow2_frac() {
    const int64_t n = read1();
    std::vector<int64_t> f;
    read_n(f, n);
    constexpr int F = vckattn::pow2_rom::IN_FRAC;
    std::vector<int64_t> out(f.size());
    for (size_t i = 0; i < f.size(); i++) {
        if (f[i] < 0 || f[i] >= (int64_t(1) << F)) fail("f out of range");
        out[i] = static_cast<int64_t>(vckattn::pow2_frac(ap_uint<F>(f[i])).to_uint64());
    }
    write_all(out);
}

int main() {
    const int64_t mode = read1();
    if (mode == 0) {
        run_stream();
    } else if (mode == 1) {
        run_pow2();
    } else if (mode == 2) {
        run_pow2_frac();
    } else {
        fail("unknown mode");
    }
    return 0;
}

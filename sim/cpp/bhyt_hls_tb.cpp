// bhyt_hls_tb.cpp -- C-simulation test bench of hw/hls/bhyt_hls.cpp (driven by
// sim/hls_norm_csim.py, checked against golden bhyt_site_int / bhyt_block_int by tests/test_hls_bhyt.py).
//
// Binary protocol, every value a little-endian int64, stdin -> stdout. nb = ceil(d / 8) beats a token.
//   mode 0 (block: both streaming tops and the memory-based bhyt_site):
//     in : 0, n_tokens, d, pad (int8 written into the input padding lanes of a short last beat),
//          site A registers [k_mult, k_shift, eps_int, c_int, g_frac], gamma_A[d],
//          site M registers [same five], gamma_M[d], q[n_tokens * d], q_mid[n_tokens * d], s_ext[n_tokens]
//     out: u[n_tokens * nb * 8]       bhyt_site_a TDATA lanes (padding lanes included)
//          a_user[n_tokens * nb]      bhyt_site_a TUSER (S) of every beat
//          a_last[n_tokens * nb]      bhyt_site_a TLAST of every beat
//          v_chain[n_tokens * nb * 8] bhyt_site_m on q_mid with TUSER = bhyt_site_a's TUSER of the same beat
//          m_last[n_tokens * nb]      its TLAST
//          v_ext[n_tokens * nb * 8]   bhyt_site_m on q_mid with TUSER = s_ext[token]
//          v_site[n_tokens * d]       bhyt_site(q_mid, S = s_ext, site M registers)
//          u_site[n_tokens * d]       bhyt_site(q, S = bhyt_sum_of_squares(q), site A registers)
//          s_sum[n_tokens]            bhyt_sum_of_squares(q)
//   mode 1 (function units alone):
//     in : 1, n_r, x[n_r] (1 .. 2^42 - 1), n_t, a[n_t] (BHYT_ARG_BITS signed)
//     out: mant[n_r], k[n_r] (rsqrt_unit<42>), y[n_t] (tanh_unit<BHYT_ARG_BITS>)
// Exits with status 1 (message on stderr) on a malformed input or a stream count mismatch.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bhyt_hls.h"

using vckattn::BHYT_LANES;

static void fail(const char* msg) {
    std::fprintf(stderr, "bhyt_hls_tb: %s\n", msg);
    std::exit(1);
}

static int64_t read1() {
    int64_t v;
    if (std::fread(&v, sizeof v, 1, stdin) != 1) fail("unexpected end of input");
    return v;
}

static std::vector<int64_t> read_n(int64_t n) {
    if (n < 0) fail("negative count");
    std::vector<int64_t> v(static_cast<size_t>(n));
    if (n && std::fread(v.data(), sizeof(int64_t), v.size(), stdin) != v.size()) fail("unexpected end of input");
    return v;
}

static void write_all(const std::vector<int64_t>& v) {
    if (!v.empty() && std::fwrite(v.data(), sizeof(int64_t), v.size(), stdout) != v.size()) fail("write failed");
}

struct site_args {
    vckattn::bhyt_regs regs;
    std::vector<ap_int<16>> gamma;  // BHYT_MAX_D entries (zero past d)
};

static site_args read_site(int64_t d) {
    site_args s;
    s.regs.k_mult = read1();
    s.regs.k_shift = read1();
    s.regs.eps_int = static_cast<uint64_t>(read1());
    s.regs.c_int = static_cast<uint64_t>(read1());
    s.regs.g_frac = read1();
    s.gamma.assign(vckattn::BHYT_MAX_D, ap_int<16>(0));
    std::vector<int64_t> g = read_n(d);
    for (int64_t j = 0; j < d; j++) s.gamma[j] = g[j];
    return s;
}

// Beats of n tokens of d int8 values (padding lanes = pad); TUSER = user[token] or per_beat[beat].
template <class BEAT>
static void push_tokens(hls::stream<BEAT>& s, const std::vector<int64_t>& q, int64_t n, int64_t d, int64_t pad,
                        const std::vector<int64_t>* user_token, const std::vector<int64_t>* user_beat) {
    const int64_t nb = (d + BHYT_LANES - 1) / BHYT_LANES;
    for (int64_t t = 0; t < n; t++) {
        for (int64_t b = 0; b < nb; b++) {
            BEAT x;
            for (int l = 0; l < BHYT_LANES; l++) {
                const int64_t j = b * BHYT_LANES + l;
                const int64_t v = j < d ? q[t * d + j] : pad;
                x.data.range(8 * l + 7, 8 * l) = ap_uint<8>(static_cast<uint64_t>(v) & 0xFF);
            }
            x.keep = -1;
            x.strb = -1;
            x.user = user_token ? static_cast<uint64_t>((*user_token)[t])
                                : (user_beat ? static_cast<uint64_t>((*user_beat)[t * nb + b]) : 0);
            x.last = b == nb - 1;
            s.write(x);
        }
    }
}

// Drain n_beats beats: lanes (signed int8), TUSER and TLAST.
template <class BEAT>
static void pop_beats(hls::stream<BEAT>& s, int64_t n_beats, std::vector<int64_t>& lanes, std::vector<int64_t>& user,
                      std::vector<int64_t>& last) {
    if (static_cast<int64_t>(s.size()) != n_beats) fail("output beat count differs from n_tokens * ceil(d / 8)");
    for (int64_t i = 0; i < n_beats; i++) {
        BEAT x = s.read();
        for (int l = 0; l < BHYT_LANES; l++) {
            lanes.push_back(ap_int<8>(x.data.range(8 * l + 7, 8 * l)).to_int64());
        }
        user.push_back(static_cast<int64_t>(x.user.to_uint64()));
        last.push_back(static_cast<int64_t>(x.last.to_uint64()));
    }
}

static void run_block() {
    const int64_t n = read1(), d = read1(), pad = read1();
    if (n < 1 || d < 1 || d > vckattn::BHYT_MAX_D) fail("need n_tokens >= 1 and 1 <= d <= BHYT_MAX_D");
    const int64_t nb = (d + BHYT_LANES - 1) / BHYT_LANES;
    site_args A = read_site(d);
    site_args M = read_site(d);
    const std::vector<int64_t> q = read_n(n * d), qm = read_n(n * d), s_ext = read_n(n);
    const vckattn::bhyt_regs& ra = A.regs;
    const vckattn::bhyt_regs& rm = M.regs;

    // site A
    hls::stream<vckattn::tok_beat> a_in("a_in");
    hls::stream<vckattn::tok_stat_beat> a_out("a_out");
    push_tokens(a_in, q, n, d, pad, nullptr, nullptr);
    bhyt_site_a(a_in, a_out, static_cast<int>(n), static_cast<int>(d), ra.k_mult, ra.k_shift, ra.eps_int, ra.c_int,
                ra.g_frac, A.gamma.data());
    if (!a_in.empty()) fail("bhyt_site_a left input beats");
    std::vector<int64_t> u, a_user, a_last;
    pop_beats(a_out, n * nb, u, a_user, a_last);

    // site M, chained: S from site A's TUSER of the same beat
    hls::stream<vckattn::tok_stat_beat> m_in("m_in");
    hls::stream<vckattn::tok_beat> m_out("m_out");
    push_tokens(m_in, qm, n, d, pad, nullptr, &a_user);
    bhyt_site_m(m_in, m_out, static_cast<int>(n), static_cast<int>(d), rm.k_mult, rm.k_shift, rm.eps_int, rm.c_int,
                rm.g_frac, M.gamma.data());
    if (!m_in.empty()) fail("bhyt_site_m left input beats");
    std::vector<int64_t> v_chain, m_user, m_last;
    pop_beats(m_out, n * nb, v_chain, m_user, m_last);

    // site M, external S
    push_tokens(m_in, qm, n, d, pad, &s_ext, nullptr);
    bhyt_site_m(m_in, m_out, static_cast<int>(n), static_cast<int>(d), rm.k_mult, rm.k_shift, rm.eps_int, rm.c_int,
                rm.g_frac, M.gamma.data());
    std::vector<int64_t> v_ext, e_user, e_last;
    pop_beats(m_out, n * nb, v_ext, e_user, e_last);

    // memory-based bhyt_site and bhyt_sum_of_squares
    std::vector<int64_t> v_site, u_site, s_sum;
    std::vector<vckattn::bq_t> tq(d), tout(d);
    std::vector<vckattn::gamma_t> ga(A.gamma.begin(), A.gamma.end()), gm(M.gamma.begin(), M.gamma.end());
    for (int64_t t = 0; t < n; t++) {
        for (int64_t j = 0; j < d; j++) tq[j] = qm[t * d + j];
        vckattn::bhyt_site(tq.data(), tout.data(), static_cast<int>(d), vckattn::stat_t(static_cast<uint64_t>(s_ext[t])),
                           rm, gm.data());
        for (int64_t j = 0; j < d; j++) v_site.push_back(tout[j].to_int64());
        for (int64_t j = 0; j < d; j++) tq[j] = q[t * d + j];
        const vckattn::stat_t S = vckattn::bhyt_sum_of_squares(tq.data(), static_cast<int>(d));
        vckattn::bhyt_site(tq.data(), tout.data(), static_cast<int>(d), S, ra, ga.data());
        for (int64_t j = 0; j < d; j++) u_site.push_back(tout[j].to_int64());
        s_sum.push_back(static_cast<int64_t>(S.to_uint64()));
    }
    for (const auto* v : {&u, &a_user, &a_last, &v_chain, &m_last, &v_ext, &v_site, &u_site, &s_sum}) write_all(*v);
}

static void run_funcunits() {
    constexpr int VW = vckattn::norm_fmt::STAT_BITS + 2;
    constexpr int AW = vckattn::BHYT_ARG_BITS;
    const std::vector<int64_t> x = read_n(read1());
    const std::vector<int64_t> a = read_n(read1());
    std::vector<int64_t> mant, k, y;
    for (int64_t v : x) {
        if (v < 1 || v >= (int64_t(1) << VW)) fail("rsqrt input out of range");
        vckattn::rsqrt_mant_t m;
        ap_uint<6> e;
        vckattn::rsqrt_unit<VW>(ap_uint<VW>(static_cast<uint64_t>(v)), m, e);
        mant.push_back(static_cast<int64_t>(m.to_uint64()));
        k.push_back(static_cast<int64_t>(e.to_uint64()));
    }
    for (int64_t v : a) {
        if (v < -(int64_t(1) << (AW - 1)) || v >= (int64_t(1) << (AW - 1))) fail("tanh input out of range");
        y.push_back(vckattn::tanh_unit<AW>(ap_int<AW>(v)).to_int64());
    }
    write_all(mant);
    write_all(k);
    write_all(y);
}

int main() {
    const int64_t mode = read1();
    if (mode == 0) {
        run_block();
    } else if (mode == 1) {
        run_funcunits();
    } else {
        fail("unknown mode");
    }
    return 0;
}

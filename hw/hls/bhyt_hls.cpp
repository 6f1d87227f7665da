// bhyt_hls.cpp -- streaming tops of the HLS BHyT units (see bhyt_hls.h for numerics and stream formats).
#include "bhyt_hls.h"

namespace {

using namespace vckattn;

static_assert(BHYT_LANES == 8, "the per-lane ROM initializer below lists 8 copies");
static_assert(norm_fmt::STAT_BITS == 40 && norm_fmt::K_BITS == 18 && norm_fmt::G_BITS == 16,
              "the tops' register arguments are ap_uint<40> / ap_uint<18> / ap_int<16>");

typedef ap_uint<8 * BHYT_LANES> tok_data_t;               // one beat's TDATA
typedef gamma_t gamma_mem_t[BHYT_MAX_BEATS][BHYT_LANES];  // gamma[j] at [j / 8][j % 8]

// One tanh ROM per lane: a lane reads T[i] and T[i+1] every cycle (one dual-port ROM each).
#define VCKATTN_TANH_ROMS_INIT                                                                    \
    {VCKATTN_TANH_ROM_INIT, VCKATTN_TANH_ROM_INIT, VCKATTN_TANH_ROM_INIT, VCKATTN_TANH_ROM_INIT, \
     VCKATTN_TANH_ROM_INIT, VCKATTN_TANH_ROM_INIT, VCKATTN_TANH_ROM_INIT, VCKATTN_TANH_ROM_INIT}

// Copy gamma[0 .. d) into the lane-banked on-chip memory; padding entries of the last beat are 0.
void load_gamma(const ap_int<16> gamma[BHYT_MAX_D], gamma_mem_t g_mem, int d, int nb) {
load:
    for (int j = 0; j < nb * BHYT_LANES; j++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=2048
        g_mem[j / BHYT_LANES][j % BHYT_LANES] = j < d ? gamma_t(gamma[j]) : gamma_t(0);
    }
}

// Lane l of a beat: element b * 8 + l of the token (0 past d: input padding lanes are ignored).
inline bq_t lane_q(tok_data_t data, int b, int l, int d) {
#pragma HLS INLINE
    bq_t q = data.range(8 * l + 7, 8 * l);
    return b * BHYT_LANES + l < d ? q : bq_t(0);
}

// The output beat of one input beat: 8 bhyt_elem lanes with the token's scale; padding lanes (past d) 0.
inline tok_data_t norm_beat(tok_data_t data, int b, int d, const bhyt_scale& s, const gamma_mem_t g_mem,
                            ap_uint<5> g_frac, const tanh_rom::entry_t roms[BHYT_LANES][tanh_rom::ENTRIES]) {
#pragma HLS INLINE
    tok_data_t out = 0;
lanes:
    for (int l = 0; l < BHYT_LANES; l++) {
#pragma HLS UNROLL
        bq_t q = data.range(8 * l + 7, 8 * l);
        bq_t v = bhyt_elem(q, s, g_mem[b][l], g_frac, roms[l]);
        out.range(8 * l + 7, 8 * l) = b * BHYT_LANES + l < d ? v : bq_t(0);
    }
    return out;
}

// Site A pass 1: S = sum q^2 of each token; the beats go on to pass 2 through `buf`.
void site_a_sum(hls::stream<tok_beat>& s_axis, hls::stream<tok_data_t>& buf, hls::stream<stat_t>& stat,
                int n_tokens, int nb, int d) {
    ap_uint<26> acc = 0;  // sum of up to 2048 squares <= 2^25
    int b = 0;
sum:
    for (int i = 0; i < n_tokens * nb; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=65536
        tok_beat x = s_axis.read();
        ap_uint<18> part = 0;  // 8 squares <= 2^17
        for (int l = 0; l < BHYT_LANES; l++) {
#pragma HLS UNROLL
            bq_t q = lane_q(x.data, b, l, d);
            part += ap_uint<15>(q * q);
        }
        acc = (b == 0 ? ap_uint<26>(0) : acc) + part;
        buf.write(x.data);
        if (b == nb - 1) {
            stat.write(acc);
            b = 0;
        } else {
            b++;
        }
    }
}

// Site A pass 2: u = BHyT(q) with the token's S; S goes out on TUSER of every beat.
void site_a_norm(hls::stream<tok_data_t>& buf, hls::stream<stat_t>& stat, hls::stream<tok_stat_beat>& m_axis,
                 int n_tokens, int nb, int d, bhyt_regs regs, const gamma_mem_t g_mem) {
    static const tanh_rom::entry_t tanh_roms[BHYT_LANES][tanh_rom::ENTRIES] = VCKATTN_TANH_ROMS_INIT;
#pragma HLS ARRAY_PARTITION variable=tanh_roms type=complete dim=1
    stat_t S = 0;
    bhyt_scale s;
    s.c = 0;
    s.sh = 0;
    int b = 0;
norm:
    for (int i = 0; i < n_tokens * nb; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=65536
        if (b == 0) {
            S = stat.read();
            s = bhyt_token_scale(S, regs);
        }
        tok_stat_beat o;
        o.data = norm_beat(buf.read(), b, d, s, g_mem, regs.g_frac, tanh_roms);
        o.keep = -1;
        o.strb = -1;
        o.user = S;
        o.last = b == nb - 1;
        m_axis.write(o);
        b = b == nb - 1 ? 0 : b + 1;
    }
}

// Pass 1 runs up to one token ahead of pass 2: buf (256 beats) holds a whole token of BHYT_MAX_D,
// so pass 1 can finish a token (and write its S) before pass 2 starts reading it.
static_assert(BHYT_MAX_BEATS == 256, "the depth of buf must hold one whole token (BHYT_MAX_BEATS beats)");

void site_a_dataflow(hls::stream<tok_beat>& s_axis, hls::stream<tok_stat_beat>& m_axis, int n_tokens, int nb, int d,
                     bhyt_regs regs, const gamma_mem_t g_mem) {
#pragma HLS DATAFLOW
    hls::stream<tok_data_t> buf("bhyt_a_buf");
#pragma HLS STREAM variable=buf depth=256
    hls::stream<stat_t> stat("bhyt_a_stat");
#pragma HLS STREAM variable=stat depth=4
    site_a_sum(s_axis, buf, stat, n_tokens, nb, d);
    site_a_norm(buf, stat, m_axis, n_tokens, nb, d, regs, g_mem);
}

bhyt_regs make_regs(ap_uint<18> k_mult, ap_uint<6> k_shift, ap_uint<40> eps_int, ap_uint<40> c_int,
                    ap_uint<5> g_frac) {
    bhyt_regs r;
    r.k_mult = k_mult;
    r.k_shift = k_shift;
    r.eps_int = eps_int;
    r.c_int = c_int;
    r.g_frac = g_frac;
    return r;
}

}  // namespace

void bhyt_site_a(hls::stream<vckattn::tok_beat>& s_axis, hls::stream<vckattn::tok_stat_beat>& m_axis, int n_tokens,
                 int d, ap_uint<18> k_mult, ap_uint<6> k_shift, ap_uint<40> eps_int, ap_uint<40> c_int,
                 ap_uint<5> g_frac, const ap_int<16> gamma[vckattn::BHYT_MAX_D]) {
#pragma HLS INTERFACE mode=axis port=s_axis
#pragma HLS INTERFACE mode=axis port=m_axis
#pragma HLS INTERFACE mode=m_axi port=gamma offset=slave bundle=gmem depth=2048
#pragma HLS INTERFACE mode=s_axilite port=gamma bundle=control
#pragma HLS INTERFACE mode=s_axilite port=n_tokens bundle=control
#pragma HLS INTERFACE mode=s_axilite port=d bundle=control
#pragma HLS INTERFACE mode=s_axilite port=k_mult bundle=control
#pragma HLS INTERFACE mode=s_axilite port=k_shift bundle=control
#pragma HLS INTERFACE mode=s_axilite port=eps_int bundle=control
#pragma HLS INTERFACE mode=s_axilite port=c_int bundle=control
#pragma HLS INTERFACE mode=s_axilite port=g_frac bundle=control
#pragma HLS INTERFACE mode=s_axilite port=return bundle=control
    if (d < 1 || d > BHYT_MAX_D || n_tokens < 1) return;
    const int nb = (d + BHYT_LANES - 1) / BHYT_LANES;
    gamma_mem_t g_mem;
#pragma HLS ARRAY_PARTITION variable=g_mem type=complete dim=2
    load_gamma(gamma, g_mem, d, nb);
    site_a_dataflow(s_axis, m_axis, n_tokens, nb, d, make_regs(k_mult, k_shift, eps_int, c_int, g_frac), g_mem);
}

void bhyt_site_m(hls::stream<vckattn::tok_stat_beat>& s_axis, hls::stream<vckattn::tok_beat>& m_axis, int n_tokens,
                 int d, ap_uint<18> k_mult, ap_uint<6> k_shift, ap_uint<40> eps_int, ap_uint<40> c_int,
                 ap_uint<5> g_frac, const ap_int<16> gamma[vckattn::BHYT_MAX_D]) {
#pragma HLS INTERFACE mode=axis port=s_axis
#pragma HLS INTERFACE mode=axis port=m_axis
#pragma HLS INTERFACE mode=m_axi port=gamma offset=slave bundle=gmem depth=2048
#pragma HLS INTERFACE mode=s_axilite port=gamma bundle=control
#pragma HLS INTERFACE mode=s_axilite port=n_tokens bundle=control
#pragma HLS INTERFACE mode=s_axilite port=d bundle=control
#pragma HLS INTERFACE mode=s_axilite port=k_mult bundle=control
#pragma HLS INTERFACE mode=s_axilite port=k_shift bundle=control
#pragma HLS INTERFACE mode=s_axilite port=eps_int bundle=control
#pragma HLS INTERFACE mode=s_axilite port=c_int bundle=control
#pragma HLS INTERFACE mode=s_axilite port=g_frac bundle=control
#pragma HLS INTERFACE mode=s_axilite port=return bundle=control
    if (d < 1 || d > BHYT_MAX_D || n_tokens < 1) return;
    const int nb = (d + BHYT_LANES - 1) / BHYT_LANES;
    gamma_mem_t g_mem;
#pragma HLS ARRAY_PARTITION variable=g_mem type=complete dim=2
    load_gamma(gamma, g_mem, d, nb);
    const bhyt_regs regs = make_regs(k_mult, k_shift, eps_int, c_int, g_frac);
    static const tanh_rom::entry_t tanh_roms[BHYT_LANES][tanh_rom::ENTRIES] = VCKATTN_TANH_ROMS_INIT;
#pragma HLS ARRAY_PARTITION variable=tanh_roms type=complete dim=1
    int b = 0;
beats:
    for (int i = 0; i < n_tokens * nb; i++) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT max=65536
        tok_stat_beat x = s_axis.read();
        // S rides on every beat's TUSER: one scale per beat (as the RTL site M), no per-token state.
        const bhyt_scale s = bhyt_token_scale(x.user, regs);
        tok_beat o;
        o.data = norm_beat(x.data, b, d, s, g_mem, regs.g_frac, tanh_roms);
        o.keep = -1;
        o.strb = -1;
        o.user = 0;
        o.last = b == nb - 1;
        m_axis.write(o);
        b = b == nb - 1 ? 0 : b + 1;
    }
}

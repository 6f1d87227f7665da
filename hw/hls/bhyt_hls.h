// bhyt_hls.h -- BHyT units in Vitis HLS C++, bit-exact with vckattn.golden.bhyt_int
// (golden/bhyt_int.py: bhyt_site_int, bhyt_block_int) and the RTL kernels hw/pl/bhyt_exact.py
// (site A) / hw/pl/bhyt_approx.py (site M).
//
// One site on an int8 token q of d channels with the statistic S (widths from NormFormat,
// generated/formats.h; F = ARG_FRAC = 12):
//   v    = max(S + c_int + eps_int, 1)                         u42
//   r, k = rsqrt_unit(v)                                       v^-1/2 ~ r * 2^-(15 + k), r UQ1.15
//   c    = (r * k_mult + 2^(C_SHIFT-1)) >> C_SHIFT             per-token scale, u27 (C_SHIFT = 8)
//   sh   = k_shift + 15 - C_SHIFT + k                          u7
//   per element j:
//   a    = (q_j * c + 2^(sh-1)) >> sh                          tanh argument, Q.12
//   y    = tanh_unit(a)                                        Q1.15
//   out  = sat8((y * g_j + 2^(14 + g_frac)) >> (15 + g_frac))  g_j = gamma_j / s_out * 2^g_frac (s16)
// Site A (attention input): S = sum_j q_j^2 of its own token, c_int = 0. Site M (MLP input):
// S = site A's statistic of the block input, c_int = the constant c_attn lam_A^2/kappa^2 d/s^2.
// Registers (host: golden bhyt_site_registers; RTL register_values):
//   k_mult  u18  lam sqrt(d) (s_in/s_stat) / kappa * 2^12 ~ k_mult * 2^-k_shift
//   k_shift u6   see k_mult
//   eps_int u40  eps d / s_stat^2 (saturated)      c_int u40  site-M constant (0 at site A)
//   g_frac  u5   fraction bits of the gamma entries (golden g_frac must be in 0 .. 31)
//   gamma   s16[d]  per-channel gamma register (copied into on-chip memory at the start of a call)
//
// Streams (BHYT_LANES = 8 int8 per 64-bit beat; element j of a token in lane j % 8 of beat j / 8,
// lane l at TDATA bits [8l, 8l+8); a token is ceil(d / 8) beats; TKEEP/TSTRB all ones):
//   tok_beat       TDATA 64, TUSER 1 (unused, written 0), TLAST on a token's last beat.
//   tok_stat_beat  TDATA 64, TUSER 40 = the token's statistic S (unsigned), the same value on every
//                  beat of the token (what the RTL site A emits and the RTL site M takes), TLAST as above.
//   bhyt_site_a: s_axis tok_beat (q)     -> m_axis tok_stat_beat (u, S = sum q^2).
//   bhyt_site_m: s_axis tok_stat_beat (q_mid, S) -> m_axis tok_beat (v); S is read on every beat.
// d is a run-time argument (1 .. BHYT_MAX_D); beats are counted from d, input TLAST and (site A)
// input TUSER are ignored; input padding lanes of a short last beat are ignored, output padding
// lanes are 0. Output TLAST is set on the last beat of each token.
#ifndef VCKATTN_BHYT_HLS_H
#define VCKATTN_BHYT_HLS_H

#include <ap_int.h>
#include <hls_stream.h>

#include "axis_types.h"
#include "funcunits_hls.h"
#include "generated/formats.h"

namespace vckattn {

constexpr int BHYT_LANES = 8;                            // int8 elements per 64-bit beat
constexpr int BHYT_MAX_D = 2048;                         // longest token (gamma memory depth)
constexpr int BHYT_MAX_BEATS = BHYT_MAX_D / BHYT_LANES;  // beats of the longest token (256)

typedef vck_axis<8 * BHYT_LANES, 1> tok_beat;                      // 8 x int8, TUSER unused
typedef vck_axis<8 * BHYT_LANES, norm_fmt::STAT_BITS> tok_stat_beat;  // 8 x int8, TUSER = S

typedef ap_int<8> bq_t;                              // int8 token element
typedef ap_uint<norm_fmt::STAT_BITS> stat_t;         // S, eps_int, c_int (u40)
typedef ap_int<norm_fmt::G_BITS> gamma_t;            // gamma register entry (s16)
typedef ap_uint<norm_fmt::K_BITS> kmult_t;           // k_mult (u18)

constexpr int BHYT_C_BITS = rsqrt_rom::ENTRY_BITS + norm_fmt::K_BITS - norm_fmt::C_SHIFT + 1;  // c < 2^26
constexpr int BHYT_PROD_BITS = 8 + BHYT_C_BITS + 1;  // q * c, signed (|q * c| <= 2^33)
constexpr int BHYT_ARG_BITS = BHYT_PROD_BITS + 1;    // tanh argument a, signed Q.12

static_assert(norm_fmt::ARG_FRAC == tanh_rom::IN_FRAC, "the tanh argument fraction must equal the unit's in_frac");
static_assert(norm_fmt::OUT_BITS == 8, "bq_t is int8");

// The site's scalar registers (golden BHyTSiteRegisters.scalars()).
struct bhyt_regs {
    kmult_t k_mult;
    ap_uint<6> k_shift;
    stat_t eps_int;
    stat_t c_int;
    ap_uint<5> g_frac;
};

// The per-token scale: c (u27) and the right shift sh (u7) of q * c.
struct bhyt_scale {
    ap_uint<BHYT_C_BITS> c;
    ap_uint<7> sh;
};

// v = max(S + c_int + eps_int, 1); (r, k) = rsqrt(v); c = (r k_mult + 2^7) >> 8; sh = k_shift + 7 + k.
inline bhyt_scale bhyt_token_scale(stat_t S, const bhyt_regs& regs,
                                   const rsqrt_rom::entry_t rom[rsqrt_rom::ENTRIES] = rsqrt_rom::TABLE) {
#pragma HLS INLINE
    constexpr int VW = norm_fmt::STAT_BITS + 2;  // three u40 terms
    constexpr int CS = norm_fmt::C_SHIFT;
    ap_uint<VW> v = ap_uint<VW>(S) + regs.c_int + regs.eps_int;
    if (v == 0) v = 1;
    rsqrt_mant_t r;
    ap_uint<6> k;
    rsqrt_unit<VW>(v, r, k, rom);
    ap_uint<rsqrt_rom::ENTRY_BITS + norm_fmt::K_BITS + 1> rk = r * regs.k_mult + (1 << (CS - 1));
    bhyt_scale s;
    s.c = rk >> CS;
    s.sh = regs.k_shift + (rsqrt_rom::OUT_FRAC - CS) + k;  // <= 63 + 7 + 20
    return s;
}

// One element: int8 q, the token's scale, its gamma entry -> int8 output (see the file comment).
inline bq_t bhyt_elem(bq_t q, const bhyt_scale& s, gamma_t g, ap_uint<5> g_frac,
                      const tanh_rom::entry_t rom[tanh_rom::ENTRIES] = tanh_rom::TABLE) {
#pragma HLS INLINE
    constexpr int PW = BHYT_PROD_BITS;
    ap_int<PW> prod = q * ap_int<BHYT_C_BITS + 1>(s.c);
    // a = round_half_up(prod / 2^sh); every sh >= PW gives 0 (|prod| < 2^(PW-1) <= 2^(sh-1)), so clamp sh.
    ap_uint<7> sh = s.sh > PW ? ap_uint<7>(PW) : s.sh;
    ap_int<PW + 2> half = (ap_int<PW + 2>(1) << sh) >> 1;
    ap_int<BHYT_ARG_BITS> a = (ap_int<PW + 2>(prod) + half) >> sh;
    tanh_y_t y = tanh_unit<BHYT_ARG_BITS>(a, rom);
    // out = sat8(round_half_up(y g / 2^(15 + g_frac))); |y g| <= 2^30, shift 15 .. 46.
    constexpr int YW = tanh_rom::ENTRY_BITS + 1 + norm_fmt::G_BITS;  // 33
    ap_int<YW> yg = y * g;
    ap_uint<6> sh2 = tanh_rom::OUT_FRAC + g_frac;
    ap_int<48> o = (ap_int<48>(yg) + ((ap_int<48>(1) << sh2) >> 1)) >> sh2;
    return o > 127 ? bq_t(127) : (o < -128 ? bq_t(-128) : bq_t(o));
}

// S = sum_j q_j^2 of a token (site A's statistic; golden sum_of_squares).
inline stat_t bhyt_sum_of_squares(const bq_t q[], int d) {
    stat_t acc = 0;
sumsq:
    for (int j = 0; j < d; j++) {
#pragma HLS LOOP_TRIPCOUNT max=2048
        acc += ap_uint<15>(q[j] * q[j]);
    }
    return acc;
}

// One BHyT site (golden bhyt_site_int) on a token in memory: out[j] for j < d.
inline void bhyt_site(const bq_t q[], bq_t out[], int d, stat_t S, const bhyt_regs& regs, const gamma_t gamma[]) {
    bhyt_scale s = bhyt_token_scale(S, regs);
site:
    for (int j = 0; j < d; j++) {
#pragma HLS LOOP_TRIPCOUNT max=2048
#pragma HLS PIPELINE II=1
        out[j] = bhyt_elem(q[j], s, gamma[j], regs.g_frac);
    }
}

}  // namespace vckattn

// Streaming tops (Vitis HLS kernels). n_tokens tokens of d channels (1 <= d <= BHYT_MAX_D; other
// values return at once without touching the streams). gamma: d entries (m_axi, read once per call
// into on-chip memory). Scalars on s_axilite (bundle control). II = 1 beat (8 elements) per cycle;
// site A overlaps the summing pass of token t+1 with the output pass of token t (DATAFLOW).
void bhyt_site_a(hls::stream<vckattn::tok_beat>& s_axis, hls::stream<vckattn::tok_stat_beat>& m_axis, int n_tokens,
                 int d, ap_uint<18> k_mult, ap_uint<6> k_shift, ap_uint<40> eps_int, ap_uint<40> c_int,
                 ap_uint<5> g_frac, const ap_int<16> gamma[vckattn::BHYT_MAX_D]);

void bhyt_site_m(hls::stream<vckattn::tok_stat_beat>& s_axis, hls::stream<vckattn::tok_beat>& m_axis, int n_tokens,
                 int d, ap_uint<18> k_mult, ap_uint<6> k_shift, ap_uint<40> eps_int, ap_uint<40> c_int,
                 ap_uint<5> g_frac, const ap_int<16> gamma[vckattn::BHYT_MAX_D]);

#endif  // VCKATTN_BHYT_HLS_H

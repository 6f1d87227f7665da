// swiftmax_hls.h -- SwiftMax normalizer in Vitis HLS C++, bit-exact with
// vckattn.golden.swiftmax_int.swiftmax_int (golden/swiftmax_int.py) and the RTL kernel
// hw/pl/swiftmax.py (same AXI4-Stream interface, so it can stand in for it).
//
// Per element (F = T_FRAC = 12 fraction bits in the log2 domain; widths from SwiftMaxFormat,
// generated/formats.h):
//   acc  = saturate(score, ACC_BITS = 24)                         int32 lane -> s24
//   u    = (acc * a_mult + 2^(a_shift-1)) >> a_shift              round half up; s48 product (one DSP)
//   u    = min(max(u + b_beta, u_lo), u_hi)                       Q.12, as golden np.clip
//   t    = u + c_out                                              Q.12, s25
//   p    = pow2_unit<0, OUT_BITS>(t)                              clamp(round_half_up(2^t), 0, 255)
//   p    = 0 where keep == 0
// Registers (host: golden swiftmax_registers / check_registers):
//   a_mult  s24   A * 2^12 ~ a_mult * 2^-a_shift, A = s_q s_k log2(e) / sqrt(d)
//   a_shift u6    0 .. MAX_A_SHIFT (47); larger values are invalid (golden check_registers)
//   b_beta  s24   -beta * log2(e), Q.12
//   u_lo    s24   -10 * log2(e), Q.12      u_hi  s24   40 * log2(e), Q.12
//   c_out   s24   out_frac - log2(gamma), Q.12
//
// Streams (hw/STREAMS.md "scores" and "P"):
//   s_axis  score_beat: TDATA 128 = 4 x int32 score (lane l at bits [32l, 32l+32)), TUSER 4 = keep
//           of lane l at bit l, TLAST = last beat of a score row.
//   m_axis  p_beat: TDATA 32 = 4 x uint8 P (lane l at bits [8l, 8l+8), scale 2^-out_frac), masked
//           lanes exactly 0; TUSER = the input TUSER; TLAST = the input TLAST. TKEEP/TSTRB all ones.
#ifndef VCKATTN_SWIFTMAX_HLS_H
#define VCKATTN_SWIFTMAX_HLS_H

#include <ap_int.h>
#include <hls_stream.h>

#include "axis_types.h"
#include "funcunits_hls.h"
#include "generated/formats.h"

namespace vckattn {

typedef ap_int<swiftmax_fmt::ACC_BITS> sm_acc_t;   // saturated score, s24
typedef ap_int<swiftmax_fmt::A_BITS> sm_mult_t;    // a_mult, s24
typedef ap_uint<6> sm_shift_t;                     // a_shift, u6 (<= MAX_A_SHIFT)
typedef ap_int<swiftmax_fmt::REG_BITS> sm_reg_t;   // b_beta, u_lo, u_hi, c_out: s24 in Q.12
typedef ap_uint<swiftmax_fmt::OUT_BITS> sm_p_t;    // P, u8

static_assert(swiftmax_fmt::T_FRAC == pow2_rom::IN_FRAC, "SwiftMax t_frac must equal the pow2 unit's in_frac");

// The per-layer constants (golden SwiftMaxRegisters without out_frac, which is folded into c_out).
struct swiftmax_regs {
    sm_mult_t a_mult;
    sm_shift_t a_shift;
    sm_reg_t b_beta;
    sm_reg_t u_lo;
    sm_reg_t u_hi;
    sm_reg_t c_out;
};

// One SwiftMax element: int32 score and keep flag -> P (u8). See the file comment for the steps.
inline sm_p_t swiftmax_elem(ap_int<32> score, bool keep, const swiftmax_regs& r,
                            const pow2_rom::entry_t rom[pow2_rom::ENTRIES] = pow2_rom::TABLE) {
#pragma HLS INLINE
    constexpr int AB = swiftmax_fmt::ACC_BITS;
    constexpr int PW = swiftmax_fmt::ACC_BITS + swiftmax_fmt::A_BITS;  // product width (48)
    constexpr int RB = swiftmax_fmt::REG_BITS;
    const ap_int<32> amax = (1 << (AB - 1)) - 1, amin = -(1 << (AB - 1));

    sm_acc_t acc = score > amax ? amax : (score < amin ? amin : score);  // saturate to s24
    ap_int<PW> prod = acc * r.a_mult;                                     // |prod| <= 2^46
    ap_int<PW + 2> half = (ap_int<PW + 2>(1) << r.a_shift) >> 1;          // 2^(a_shift-1), 0 for a_shift = 0
    ap_int<PW + 2> u0 = (ap_int<PW + 2>(prod) + half) >> r.a_shift;      // round half up (floor of + half)
    ap_int<PW + 3> u = u0 + r.b_beta;
    ap_int<PW + 3> ul = u < r.u_lo ? ap_int<PW + 3>(r.u_lo) : u;          // np.clip = min(max(u, lo), hi)
    sm_reg_t uc = ul > r.u_hi ? ap_int<PW + 3>(r.u_hi) : ul;
    ap_int<RB + 1> t = uc + r.c_out;                                      // Q.12 exponent, s25
    sm_p_t p = pow2_unit<0, swiftmax_fmt::OUT_BITS, RB + 1>(t, rom);
    return keep ? p : sm_p_t(0);
}

}  // namespace vckattn

// Streaming top (Vitis HLS kernel): n_beats beats of s_axis in, n_beats beats of m_axis out, II = 1
// (LANES = 4 elements per cycle), TUSER and TLAST passed through. Scalars on s_axilite (bundle
// control); a_shift in 0 .. 47. See the file comment for the stream formats and the registers.
void swiftmax_hls(hls::stream<vckattn::score_beat>& s_axis, hls::stream<vckattn::p_beat>& m_axis, int n_beats,
                  ap_int<24> a_mult, int a_shift, ap_int<24> b_beta, ap_int<24> u_lo, ap_int<24> u_hi,
                  ap_int<24> c_out);

#endif  // VCKATTN_SWIFTMAX_HLS_H

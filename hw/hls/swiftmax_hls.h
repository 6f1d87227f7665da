// swiftmax_hls.h -- SwiftMax normalizer in Vitis HLS C++, bit-exact with
// vckattn.golden.swiftmax_int.swiftmax_int (golden/swiftmax_int.py) and the RTL kernel
// hw/pl/swiftmax.py (same AXI4-Stream interface, so it can stand in for it).
//
// Per element: the steps of golden swiftmax_int (golden/swiftmax_int.py, module docstring), with the
// widths of SwiftMaxFormat (generated/formats.h): the int32 score saturates to s24; the s24 x s24
// product (one DSP) is shifted right rounding half up; the clamp is np.clip's min(max()); the exponent
// t is s25 in Q.12 (F = T_FRAC = 12); pow2_unit<0, OUT_BITS>(t) = clamp(round_half_up(2^t), 0, 255);
// p = 0 where keep == 0.
// Registers: struct vckattn::swiftmax_regs from generated/swiftmax_regs.h, generated from their one
// declaration (golden/swiftmax_int.py swiftmax_regmap v2; names, widths and meanings there): the scalar
// registers are shared by every head; the two memories (MAX_HEADS = 32 entries each) hold head h's entry
// for the scores of head h. The host computes the values (golden swiftmax_head_registers / SwiftMaxHeads) and
// checks a_shift <= MAX_A_SHIFT (check_registers).
//
// Streams (the stream pair of the RTL normalizers hw/pl/swiftmax.py and hw/pl/online_softmax.py; rows of KP/4
// beats, KP a multiple of 4):
//   s_axis  score_beat: TDATA 128 = 4 x int32 score (lane l at bits [32l, 32l+32)), TUSER 4 + HEAD_BITS
//           = keep of lane l at bit l, the beat's query head h at bits [4, 4 + HEAD_BITS) (every lane of
//           the beat uses b_beta[h], c_out[h]), TLAST = last beat of a score row.
//   m_axis  p_beat: TDATA 32 = 4 x uint8 P (lane l at bits [8l, 8l+8), scale 2^-out_frac), masked
//           lanes exactly 0; TUSER = the input's keep bits (bits [0, 4)); TLAST = the input TLAST.
//           TKEEP/TSTRB all ones.
#ifndef VCKATTN_SWIFTMAX_HLS_H
#define VCKATTN_SWIFTMAX_HLS_H

#include <ap_int.h>
#include <hls_stream.h>

#include "axis_types.h"
#include "funcunits_hls.h"
#include "generated/formats.h"
#include "generated/swiftmax_regs.h"

namespace vckattn {

typedef ap_int<swiftmax_fmt::ACC_BITS> sm_acc_t;   // saturated score, s24
typedef ap_int<swiftmax_fmt::REG_BITS> sm_reg_t;   // the Q.12 exponent registers, s24
typedef ap_uint<swiftmax_fmt::OUT_BITS> sm_p_t;    // P, u8
typedef ap_uint<SM_HEAD_BITS> sm_head_t;           // head index: selects entry head of b_beta / c_out
static_assert(VCKATTN_SWIFTMAX_MAX_HEADS == (1 << SM_HEAD_BITS), "MAX_HEADS must be 2^HEAD_BITS");

static_assert(swiftmax_fmt::T_FRAC == pow2_rom::IN_FRAC, "SwiftMax t_frac must equal the pow2 unit's in_frac");

// One SwiftMax element with an AB-bit score input (SwiftMaxFormat.acc_bits = AB; the v1 kernel uses
// ACC_BITS = 24, the engine's normalizer SCORE_BITS): int32 score and keep flag -> P (u8), with the shared
// registers of r and the score's head's b_beta / c_out (the caller reads entry head of r's memories). See
// the file comment for the steps; the saturation, the product and the shift are AB-dependent widths only.
template <int AB>
inline sm_p_t swiftmax_elem_acc(ap_int<32> score, bool keep, const swiftmax_regs& r, sm_reg_t b_beta, sm_reg_t c_out,
                                const pow2_rom::entry_t rom[pow2_rom::ENTRIES] = pow2_rom::TABLE) {
#pragma HLS INLINE
    static_assert(AB >= 2 && AB <= 32, "score input width must be 2..32 bits");
    constexpr int PW = AB + swiftmax_fmt::A_BITS;  // product width (48 for AB = 24)
    constexpr int RB = swiftmax_fmt::REG_BITS;
    const ap_int<33> amax = (ap_int<33>(1) << (AB - 1)) - 1, amin = -(ap_int<33>(1) << (AB - 1));

    ap_int<AB> acc = score > amax ? ap_int<AB>(amax) : (score < amin ? ap_int<AB>(amin) : ap_int<AB>(score));
    ap_int<PW> prod = acc * r.a_mult;                                     // |prod| <= 2^(PW-2)
    ap_int<PW + 2> half = (ap_int<PW + 2>(1) << r.a_shift) >> 1;          // 2^(a_shift-1), 0 for a_shift = 0
    ap_int<PW + 2> u0 = (ap_int<PW + 2>(prod) + half) >> r.a_shift;      // round half up (floor of + half)
    ap_int<PW + 3> u = u0 + b_beta;
    ap_int<PW + 3> ul = u < r.u_lo ? ap_int<PW + 3>(r.u_lo) : u;          // np.clip = min(max(u, lo), hi)
    sm_reg_t uc = ul > r.u_hi ? ap_int<PW + 3>(r.u_hi) : ul;
    ap_int<RB + 1> t = uc + c_out;                                        // Q.12 exponent, s25
    sm_p_t p = pow2_unit<0, swiftmax_fmt::OUT_BITS, RB + 1>(t, rom);
    return keep ? p : sm_p_t(0);
}

// One SwiftMax element of the v1 kernel (24-bit score input, swiftmax_fmt::ACC_BITS) of head `head`:
// the shared registers of r and entry `head` of its b_beta / c_out memories.
inline sm_p_t swiftmax_elem(ap_int<32> score, bool keep, const swiftmax_regs& r, sm_head_t head,
                            const pow2_rom::entry_t rom[pow2_rom::ENTRIES] = pow2_rom::TABLE) {
#pragma HLS INLINE
    return swiftmax_elem_acc<swiftmax_fmt::ACC_BITS>(score, keep, r, r.b_beta[head], r.c_out[head], rom);
}

}  // namespace vckattn

// Streaming top (Vitis HLS kernel): n_beats beats of s_axis in, n_beats beats of m_axis out, II = 1
// (LANES = 4 elements per cycle), TUSER and TLAST passed through. n_beats and the register struct on
// s_axilite (bundle control). See the file comment for the stream formats and the registers.
void swiftmax_hls(hls::stream<vckattn::score_beat>& s_axis, hls::stream<vckattn::p_beat>& m_axis, int n_beats,
                  vckattn::swiftmax_regs regs);

#endif  // VCKATTN_SWIFTMAX_HLS_H

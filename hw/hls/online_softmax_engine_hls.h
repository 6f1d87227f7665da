// online_softmax_engine_hls.h -- the engine's online-softmax score channel (stream contract v3, hw/ENGINE.md
// "Both normalizers") in Vitis HLS C++: the C++ counterpart of the Amaranth OnlineChannel
// (hw/pl/engine_online.py), bit-exact with golden/engine.py engine_online_p on every tile.
//
//   online_softmax_engine_hls  score packets (AIE, through pktmerge) -> P packets (AIE, through pktsplit).
//     Gather: a packet whose count is Q_ROWS x SK and whose slice j is below K is stored into the tile buffer of
//       its header's tile_id (two buffers: a packet of a tile not yet held takes the next one in turn; the packets
//       of two tiles may interleave in any order); any other packet is consumed (ceil(count / E) payload beats,
//       E scores a beat) and dropped (counted in *dropped). The header is kept with elem_bits = 8.
//     Rows: once the oldest held tile has all K slices, each of its Q_ROWS rows of MAX_KEYS = K x SK keys goes
//       through the online-softmax unit (online_softmax_row: golden online_softmax_int with keep = the score is
//       not the sentinel, blocks of LANES keys from key 0, the format of generated/formats.h online_softmax_fmt).
//     Send: the tile's K P packets in slice order j = 0 .. K-1: slice j's header, then Q_ROWS x SK / 16 beats of
//       uint8 P in the 4x8 block layout of the scores, TLAST on each packet's last beat; its buffer is then free.
//   Tiles leave in the order their first packet came (the RTL's), which is the order they complete when each
//   kernel sends its tiles in order.
//
// Registers: the engine map's os_a_mult / os_a_shift (generated/engine_regs.h, from golden/engine.py engine_regmap;
// the host's values: golden engine_online_registers), as the OnlineChannel's a_mult / a_shift ports.
// Build parameters: VCKATTN_ENGINE_KERNELS, _Q_ROWS, _MAX_KEYS, _SCORE_BITS and VCKATTN_ENGINE_ONLINE_LANES (the
// design's engine_config.h, or -D in the C-simulation). Tables: generated/pow2_table.h (2^f, shared with SwiftMax:
// the generator checks the formats agree) and generated/recip_table.h (1/m), both from golden's declarations.
//
// Status (s_axilite return): 0 ok; otherwise the first condition the channel cannot handle, after which it stops
// (what it did not read stays in s_axis): a packet of a third tile while two are held (the RTL would wait for a free
// buffer for ever), a slice that a held tile already has, and tiles still incomplete after the last packet.
#ifndef VCKATTN_ONLINE_SOFTMAX_ENGINE_HLS_H
#define VCKATTN_ONLINE_SOFTMAX_ENGINE_HLS_H

#include "swiftmax_engine_hls.h"

#ifndef VCKATTN_ENGINE_KERNELS
#error "VCKATTN_ENGINE_KERNELS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_MAX_KEYS
#error "VCKATTN_ENGINE_MAX_KEYS is not defined: include the design's generated engine_config.h or pass -D"
#endif
#ifndef VCKATTN_ENGINE_ONLINE_LANES
#error "VCKATTN_ENGINE_ONLINE_LANES is not defined: a build with both normalizers defines it (engine_config.h or -D)"
#endif

#include "generated/engine_regs.h"
#include "generated/formats.h"
#include "generated/recip_table.h"

namespace vckattn_engine_os {

namespace fmt = vckattn::online_softmax_fmt;

constexpr int K = VCKATTN_ENGINE_KERNELS;                  // slices of a tile
constexpr int MAX_KEYS = VCKATTN_ENGINE_MAX_KEYS;          // keys of a row
constexpr int SK = MAX_KEYS / K;                           // keys of a slice
constexpr int Q_ROWS = vckattn_engine_pl::Q_ROWS;          // rows of a tile
constexpr int SCORE_BITS = vckattn_engine_pl::SCORE_BITS;  // bits of a score
constexpr int E = vckattn_engine_pl::SCORES_PER_BEAT;      // scores of an input beat
constexpr int LANES = VCKATTN_ENGINE_ONLINE_LANES;         // the unit's block: keys of a pass-1 step
constexpr int COUNT = Q_ROWS * SK;                         // the count of a score packet the channel takes
constexpr int P_BEATS = COUNT / 16;                        // payload beats of a P packet

static_assert(MAX_KEYS % (16 * K) == 0, "MAX_KEYS must be a multiple of 16 x KERNELS");
static_assert(LANES == 1 || LANES == 2 || LANES == 4 || LANES == 8, "online-softmax lanes must be 1, 2, 4 or 8");
static_assert(SCORE_BITS <= fmt::ACC_BITS, "scores must fit the unit's input without saturating");
static_assert(fmt::T_FRAC == vckattn::pow2_rom::IN_FRAC, "the unit's t_frac must equal the 2^f unit's in_frac");
static_assert(MAX_KEYS <= (1 << (fmt::SUM_BITS - fmt::SUM_FRAC)), "a row's sum (at most MAX_KEYS x 2^SUM_FRAC) must "
              "fit SUM_BITS + 1 bits");

typedef decltype(vckattn::engine_online_regs::os_a_mult) a_mult_t;    // s24
typedef decltype(vckattn::engine_online_regs::os_a_shift) a_shift_t;  // u6
typedef ap_int<SCORE_BITS> score_t;
typedef ap_uint<fmt::OUT_BITS> p_t;
typedef ap_int<64> wide_t;  // u, the running max and the exponents (|u| < 2^47, |m| <= 2^47)

// ceil(log2(v + 1)): Python's int.bit_length() of v >= 0.
constexpr int bit_length(long long v) { return v > 0 ? 1 + bit_length(v >> 1) : 0; }

// Golden pow2(t, T_FRAC, OUT_FRAC, OUT_MAX, cfg, "half_up"): n = t >> 12 (floor), m = pow2_frac(t & 0xFFF)
// (UQ1.15), s = min(15 - min(n + OUT_FRAC, bit_length(OUT_MAX) + 1), 62); q = round_half_up(m * 2^-s) (a left shift
// when s < 0); clamp(q, 0, OUT_MAX). t: Q.12 exponent.
template <int OUT_FRAC, long long OUT_MAX>
inline ap_uint<64> os_pow2(wide_t t) {
#pragma HLS INLINE
    constexpr int F = vckattn::pow2_rom::IN_FRAC;
    constexpr int MF = vckattn::pow2_rom::OUT_FRAC;
    constexpr int CAP = bit_length(OUT_MAX) + 1;
    static_assert(MF - CAP > -16, "the left shift must keep m below 2^33");
    const wide_t n = t >> F;
    const vckattn::pow2_m_t m = vckattn::pow2_frac(ap_uint<F>(t));
    const wide_t ne = n + OUT_FRAC > CAP ? wide_t(CAP) : wide_t(n + OUT_FRAC);
    wide_t s = MF - ne;
    if (s > 62) s = 62;
    ap_uint<64> q;
    if (s >= 0) {
        const ap_uint<7> sh = s;
        q = (ap_uint<64>(m) + ((ap_uint<64>(1) << sh) >> 1)) >> sh;
    } else {
        const ap_uint<7> sh = -s;
        q = ap_uint<64>(m) << sh;
    }
    return q > ap_uint<64>(OUT_MAX) ? ap_uint<64>(OUT_MAX) : q;
}

typedef ap_uint<vckattn::recip_rom::ENTRY_BITS> recip_mant_t;  // UQ1.15 in (0.5, 1]

// Golden recip(x) for x >= 1: e = floor(log2 x); frac = floor(x * 2^(MANT_BITS - e)) - 2^MANT_BITS; the top LUT_BITS
// of frac index the 1/m table, the rest interpolate. 1/x ~ mant * 2^-(15 + e).
inline void os_recip(ap_uint<fmt::SUM_BITS + 1> x, recip_mant_t& mant, ap_uint<7>& e) {
#pragma HLS INLINE
    constexpr int MB = vckattn::recip_rom::MANT_BITS;
    constexpr int RB = MB - vckattn::recip_rom::LUT_BITS;
    e = vckattn::leading_one<fmt::SUM_BITS + 1>(x);
    ap_uint<MB + 1> norm;  // x * 2^(MB - e), floor: in [2^MB, 2^(MB+1))
    if (e >= MB) {
        const ap_uint<7> sh = e - MB;
        norm = x >> sh;
    } else {
        const ap_uint<7> sh = MB - e;
        norm = ap_uint<MB + 1>(x) << sh;
    }
    const ap_uint<MB> frac = norm;
    const ap_uint<vckattn::recip_rom::LUT_BITS + 1> idx = frac >> RB;
    const ap_uint<RB> r = frac;
    const recip_mant_t lo = vckattn::recip_rom::TABLE[idx], hi = vckattn::recip_rom::TABLE[idx + 1];
    mant = vckattn::rom_interp<vckattn::recip_rom::ENTRY_BITS, RB, vckattn::recip_rom::INTERP != 0>(lo, hi, r);
}

// One row of MAX_KEYS scores -> P: golden online_softmax_int(s, regs, keep = s != sentinel, fmt with block = LANES).
//   u = round_half_up(s * a_mult * 2^-a_shift)                                (Q.12, log2 domain)
//   pass 1, per block of LANES keys: mb = ceil(max kept u / 2^12), m' = max(m, mb), l = (l >> min(m' - m, 62))
//           + sum over kept keys of pow2(u - m' * 2^12) in UQ.SUM_FRAC (at most 2^SUM_FRAC each), m = m'
//   r = recip(l) (l = 1 when no key is kept); shift = 15 + 15 - SUM_FRAC - OUT_FRAC + e
//   pass 2: x = pow2(u - m * 2^12) in UQ1.15 (at most 2^15) times r's mantissa (0 for masked keys);
//           cumulative: P = round_half_up(C_j >> shift) - round_half_up(C_{j-1} >> shift), C_j = x_0 + .. + x_j;
//           else P = round_half_up(x >> shift); P = min(P, 2^OUT_BITS - 1), 0 where masked or no key is kept.
inline void online_softmax_row(const score_t s[MAX_KEYS], a_mult_t a_mult, a_shift_t a_shift, p_t p[MAX_KEYS]) {
    constexpr int F = fmt::T_FRAC;
    const wide_t neg = -(wide_t(1) << fmt::NEG_SENTINEL_LOG2);
    const score_t sent = score_t(-(1 << (SCORE_BITS - 1)));
    wide_t u[MAX_KEYS];
    bool keep[MAX_KEYS];
scale:
    for (int j = 0; j < MAX_KEYS; j++) {
#pragma HLS PIPELINE II=1
        keep[j] = s[j] != sent;
        const ap_int<fmt::ACC_BITS + fmt::A_BITS> prod = ap_int<fmt::ACC_BITS>(s[j]) * a_mult;
        const ap_int<72> half = (ap_int<72>(1) << a_shift) >> 1;  // 2^(a_shift - 1), 0 for a_shift = 0
        u[j] = wide_t((ap_int<72>(prod) + half) >> a_shift);
    }
    wide_t m = neg;
    ap_uint<fmt::SUM_BITS + 1> l = 0;
pass1:
    for (int b = 0; b < MAX_KEYS; b += LANES) {
#pragma HLS PIPELINE II=1
        wide_t mx = neg;
        for (int i = 0; i < LANES; i++)
            if (keep[b + i] && u[b + i] > mx) mx = u[b + i];
        const wide_t mb = (mx + ((1 << F) - 1)) >> F;  // ceil; a block with no kept key stays far below
        const wide_t m_new = mb > m ? mb : m;
        const wide_t d = m_new - m;
        l = l >> ap_uint<7>(d > 62 ? wide_t(62) : d);
        for (int i = 0; i < LANES; i++)
            if (keep[b + i]) l += os_pow2<fmt::SUM_FRAC, (1LL << fmt::SUM_FRAC)>(u[b + i] - (m_new << F));
        m = m_new;
    }
    const bool any = l > 0;
    recip_mant_t r_mant;
    ap_uint<7> r_exp;
    os_recip(any ? l : ap_uint<fmt::SUM_BITS + 1>(1), r_mant, r_exp);
    const int shift = vckattn::pow2_rom::OUT_FRAC + vckattn::recip_rom::OUT_FRAC - fmt::SUM_FRAC - fmt::OUT_FRAC +
                      int(r_exp);
    static_assert(vckattn::pow2_rom::OUT_FRAC + vckattn::recip_rom::OUT_FRAC - fmt::SUM_FRAC - fmt::OUT_FRAC >= 1,
                  "the output shift must be a right shift");
    const ap_uint<64> half = (ap_uint<64>(1) << shift) >> 1;
    ap_uint<64> c = 0, q_prev = 0;
pass2:
    for (int j = 0; j < MAX_KEYS; j++) {
#pragma HLS PIPELINE II=1
        ap_uint<64> x = 0;
        if (keep[j]) {
            const ap_uint<64> e2 = os_pow2<vckattn::pow2_rom::OUT_FRAC, (1LL << vckattn::pow2_rom::OUT_FRAC)>(
                u[j] - (m << F));
            x = e2 * r_mant;
        }
        ap_uint<64> pj;
        if (fmt::P_CUMULATIVE) {
            c += x;
            const ap_uint<64> q = (c + half) >> shift;
            pj = q - q_prev;
            q_prev = q;
        } else {
            pj = (x + half) >> shift;
        }
        if (pj > ap_uint<64>((1 << fmt::OUT_BITS) - 1)) pj = (1 << fmt::OUT_BITS) - 1;
        p[j] = keep[j] && any ? p_t(pj) : p_t(0);
    }
}

}  // namespace vckattn_engine_os

// n_packets score packets in; every complete tile's K P packets out (see the file comment); the online-softmax
// registers on s_axilite; *dropped: packets consumed and dropped (a count other than Q_ROWS x SK, a slice >= K).
int online_softmax_engine_hls(hls::stream<vckattn_engine_pl::pkt_beat>& s_axis,
                              hls::stream<vckattn_engine_pl::pkt_beat>& m_axis, unsigned n_packets,
                              vckattn_engine_os::a_mult_t a_mult, vckattn_engine_os::a_shift_t a_shift,
                              unsigned* dropped);

#endif  // VCKATTN_ONLINE_SOFTMAX_ENGINE_HLS_H

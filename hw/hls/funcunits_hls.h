// funcunits_hls.h -- table-based function units in ap_int/ap_uint, bit-exact with
// vckattn.golden.funcunits (golden/funcunits.py) and the Amaranth units of hw/pl/funcunits.py.
//
// Every unit is a ROM lookup with linear interpolation between neighbouring entries,
//     y = T[i] + (((T[i+1] - T[i]) * r) >> rbits)          (arithmetic shift = floor)
// with i the top LUT_BITS of the input fraction and r the low rbits (golden `_lookup`). The ROMs
// are the golden tables, generated into generated/*_table.h by `make regen`.
//
//   unit            golden             input                        output
//   pow2_frac       pow2_frac          f in [0, 2^12) (UQ0.12)       m = 2^f, UQ1.15 in [1, 2)
//   pow2_unit       pow2(.., half_up)  t signed Q.12                 clamp(round(2^t * 2^OUT_FRAC), 0, 2^OUT_BITS - 1)
//   rsqrt_unit      rsqrt              x >= 1, unsigned W bits       (mant, k): x^-1/2 ~ mant * 2^-(15 + k), mant UQ1.15
//   tanh_unit       tanh_unit          a signed Q.12, W bits         tanh(a) as signed Q1.15 (+-32768 at saturation)
//
// Each unit takes its ROM as an argument (default: the generated TABLE) so that a kernel can give
// every lane its own ROM copy (two reads per lane per cycle = one dual-port ROM per lane).
// All functions are meant to be inlined into the caller's pipeline.
#ifndef VCKATTN_FUNCUNITS_HLS_H
#define VCKATTN_FUNCUNITS_HLS_H

#include <ap_int.h>

#include "generated/pow2_table.h"
#include "generated/rsqrt_table.h"
#include "generated/tanh_table.h"

namespace vckattn {

// ------------------------------------------------------------------------------------ helpers

// Golden `_lookup` on two neighbouring entries: lo + (((hi - lo) * r) >> RBITS), floor.
// lo, hi: unsigned EB-bit entries (all golden tables are >= 0); r: the RBITS interpolation bits.
// Result: signed EB + 2 bits (|diff * r| >> RBITS <= |diff|, so lo + step stays within [0, 2^EB)).
template <int EB, int RBITS, bool INTERP>
inline ap_int<EB + 2> rom_interp(ap_uint<EB> lo, ap_uint<EB> hi, ap_uint<RBITS> r) {
#pragma HLS INLINE
    static_assert(RBITS > 0, "interpolation needs at least one remainder bit");
    if (!INTERP) return ap_int<EB + 2>(lo);
    ap_int<EB + 1> diff = ap_int<EB + 1>(hi) - ap_int<EB + 1>(lo);  // |diff| < 2^EB
    ap_int<EB + RBITS + 2> prod = diff * ap_int<RBITS + 1>(r);
    ap_int<EB + 2> step = prod >> RBITS;  // arithmetic shift: floor, as numpy >>
    return ap_int<EB + 2>(lo) + step;
}

// Position of the most significant set bit of x (priority encoder); 0 for x == 0.
template <int W>
inline ap_uint<7> leading_one(ap_uint<W> x) {
#pragma HLS INLINE
    static_assert(W >= 1 && W < 128, "leading_one: 1 <= W < 128");
    ap_uint<7> e = 0;
lead:
    for (int i = 0; i < W; i++) {
#pragma HLS UNROLL
        if (x[i]) e = i;
    }
    return e;
}

// ------------------------------------------------------------------------------------ 2^x

typedef ap_uint<pow2_rom::ENTRY_BITS> pow2_m_t;  // 2^f in UQ1.15 (17 bits; values in [2^15, 2^16))

// m = 2^(f / 2^IN_FRAC) for f in [0, 2^IN_FRAC), UQ1.OUT_FRAC (golden pow2_frac).
inline pow2_m_t pow2_frac(ap_uint<pow2_rom::IN_FRAC> f, const pow2_rom::entry_t rom[pow2_rom::ENTRIES] = pow2_rom::TABLE) {
#pragma HLS INLINE
    constexpr int RB = pow2_rom::IN_FRAC - pow2_rom::LUT_BITS;  // interpolation bits (6)
    ap_uint<pow2_rom::LUT_BITS + 1> idx = f >> RB;              // top LUT_BITS of f
    ap_uint<RB> r = f;                                          // low RB bits of f
    ap_uint<pow2_rom::ENTRY_BITS> lo = rom[idx], hi = rom[idx + 1];
    return pow2_m_t(rom_interp<pow2_rom::ENTRY_BITS, RB, pow2_rom::INTERP != 0>(lo, hi, r));
}

// Golden pow2(t, t_frac = IN_FRAC, OUT_FRAC, 2^OUT_BITS - 1, cfg, "half_up"):
//   n = t >> 12 (floor), f = t & 0xFFF, m = pow2_frac(f) (UQ1.15),
//   s = 15 - min(n + OUT_FRAC, OUT_BITS + 1)     (>= 1: a right shift),
//   p = clamp((m + 2^(s-1)) >> s, 0, 2^OUT_BITS - 1).
// t: signed TW-bit exponent in Q.12 (log2 domain). Result: unsigned OUT_BITS integer.
template <int OUT_FRAC, int OUT_BITS, int TW>
inline ap_uint<OUT_BITS> pow2_unit(ap_int<TW> t, const pow2_rom::entry_t rom[pow2_rom::ENTRIES] = pow2_rom::TABLE) {
#pragma HLS INLINE
    constexpr int F = pow2_rom::IN_FRAC;
    constexpr int MF = pow2_rom::OUT_FRAC;    // m is UQ1.MF
    constexpr int MW = pow2_rom::ENTRY_BITS;  // m < 2^MW
    constexpr int CAP = OUT_BITS + 1;         // golden: out_max.bit_length() + 1 (beyond it p saturates anyway)
    constexpr int OUT_MAX = (1 << OUT_BITS) - 1;
    static_assert(TW > F, "the exponent needs integer bits");
    static_assert(MF - CAP >= 1, "OUT_BITS too wide: the final shift must be a right shift");
    static_assert(OUT_FRAC >= 0 && OUT_FRAC < 16, "OUT_FRAC out of range");

    ap_int<TW - F + 1> n = t >> F;  // integer part (floor)
    ap_uint<F> f = t;               // fraction: low F bits
    pow2_m_t m = pow2_frac(f, rom);

    ap_int<TW - F + 2> ne = n + OUT_FRAC;
    if (ne > CAP) ne = CAP;
    ap_int<TW - F + 3> s = MF - ne;  // >= MF - CAP >= 1
    ap_uint<MW + 1> q;
    if (s > MW) {
        q = 0;  // m < 2^MW <= 2^(s-1): (m + 2^(s-1)) >> s == 0
    } else {
        ap_uint<5> sh = s;
        q = (ap_uint<MW + 1>(m) + (ap_uint<MW + 1>(1) << (sh - 1))) >> sh;  // round half up
    }
    return q > OUT_MAX ? ap_uint<OUT_BITS>(OUT_MAX) : ap_uint<OUT_BITS>(q);
}

// ------------------------------------------------------------------------------------ 1/sqrt(x)

typedef ap_uint<rsqrt_rom::ENTRY_BITS> rsqrt_mant_t;  // UQ1.15 in (0.5, 1] (16 bits)

// Golden rsqrt: x = m * 4^k, m in [1, 4); e = floor(log2 x), k = e >> 1; the normalized fraction
// frac = floor(x * 2^(MANT_BITS - e)) - 2^MANT_BITS (MANT_BITS = 14 bits) indexes the octave
// table [1, 2] (e even) or [2, 4] (e odd, index offset OCTAVE_ENTRIES). x >= 1 (x = 0 gives e = 0).
template <int W>
inline void rsqrt_unit(ap_uint<W> x, rsqrt_mant_t& mant, ap_uint<6>& k,
                       const rsqrt_rom::entry_t rom[rsqrt_rom::ENTRIES] = rsqrt_rom::TABLE) {
#pragma HLS INLINE
    constexpr int MB = rsqrt_rom::MANT_BITS;
    constexpr int RB = MB - rsqrt_rom::LUT_BITS;  // interpolation bits (8)
    static_assert(W / 2 < 64, "k must fit 6 bits");
    ap_uint<7> e = leading_one<W>(x);
    k = e >> 1;
    bool odd = e[0];
    ap_uint<MB + 1> norm;  // x * 2^(MB - e), floor: in [2^MB, 2^(MB+1))
    if (e >= MB) {
        ap_uint<7> sh = e - MB;
        norm = x >> sh;
    } else {
        ap_uint<7> sh = MB - e;
        norm = ap_uint<MB + 1>(x) << sh;  // x < 2^(e+1) <= 2^MB: no bits lost
    }
    ap_uint<MB> frac = norm;  // drop the leading one
    ap_uint<8> idx = (frac >> RB) + (odd ? rsqrt_rom::OCTAVE_ENTRIES : 0);
    ap_uint<RB> r = frac;
    ap_uint<rsqrt_rom::ENTRY_BITS> lo = rom[idx], hi = rom[idx + 1];
    mant = rom_interp<rsqrt_rom::ENTRY_BITS, RB, rsqrt_rom::INTERP != 0>(lo, hi, r);
}

// ------------------------------------------------------------------------------------ tanh

typedef ap_int<tanh_rom::ENTRY_BITS + 1> tanh_y_t;  // signed Q1.15 (17 bits; +-32768 at saturation)

// Golden tanh_unit: |a| (Q.12) clamped to TOP = 2^(IN_FRAC + RANGE_LOG2) - 1; table over [0, 8)
// with interpolation; |a| > TOP gives the last entry; the sign is restored (odd symmetry).
template <int W>
inline tanh_y_t tanh_unit(ap_int<W> a, const tanh_rom::entry_t rom[tanh_rom::ENTRIES] = tanh_rom::TABLE) {
#pragma HLS INLINE
    constexpr int MAGW = tanh_rom::IN_FRAC + tanh_rom::RANGE_LOG2;  // 15 bits of |a| inside the table range
    constexpr int TOP = (1 << MAGW) - 1;
    constexpr int RB = MAGW - tanh_rom::LUT_BITS;  // interpolation bits (7)
    constexpr int EB = tanh_rom::ENTRY_BITS;
    bool neg = a < 0;
    ap_uint<W> mag = neg ? ap_uint<W>(-a) : ap_uint<W>(a);  // -(-2^(W-1)) = 2^(W-1) fits W unsigned bits
    bool sat = mag > TOP;
    ap_uint<MAGW> mc = sat ? ap_uint<MAGW>(TOP) : ap_uint<MAGW>(mag);
    ap_uint<tanh_rom::LUT_BITS + 1> idx = mc >> RB;
    ap_uint<RB> r = mc;
    ap_uint<EB> lo = rom[idx], hi = rom[idx + 1];
    ap_int<EB + 2> y = sat ? ap_int<EB + 2>(rom[tanh_rom::ENTRIES - 1])
                           : rom_interp<EB, RB, tanh_rom::INTERP != 0>(lo, hi, r);
    return neg ? tanh_y_t(-y) : tanh_y_t(y);
}

}  // namespace vckattn

#endif  // VCKATTN_FUNCUNITS_HLS_H

// requant_one: the output movers' requantization of an int32 accumulator to int8 (golden
// vckattn.golden.requant.requantize, round half up): sat_int8((o*mult + 2^(shift-1)) >> shift); shift == 0:
// sat_int8(o*mult); shift in 0..62. |o*mult| < 2^62 and the rounding term is at most 2^61, so the 64-bit sum
// cannot overflow. requant_a_beat: one A beat from four O beats. Used by s2mm_out (v1; the engine requantizes
// on the AI Engine).
#ifndef VCKATTN_HLS_REQUANT_H
#define VCKATTN_HLS_REQUANT_H

#include <ap_int.h>
#include <hls_stream.h>

namespace vckattn {

inline ap_int<8> requant_one(ap_int<32> o, ap_int<32> mult, ap_uint<6> shift) {
#pragma HLS INLINE
    const ap_int<64> prod = (ap_int<64>)o * (ap_int<64>)mult;
    const ap_int<64> half = shift == 0 ? (ap_int<64>)0 : (ap_int<64>)((ap_int<64>)1 << (shift - 1));
    const ap_int<64> y = (prod + half) >> shift;  // arithmetic shift: floor
    if (y > 127) return 127;
    if (y < -128) return -128;
    return (ap_int<8>)y;
}

// One A beat (16 int8) from the next 4 O beats (4 int32 each) of `o_in`, each requantized by requant_one.
inline ap_uint<128> requant_a_beat(hls::stream<ap_uint<128> >& o_in, ap_int<32> mult, ap_uint<6> shift) {
#pragma HLS INLINE
    ap_uint<128> a = 0;
    for (int k = 0; k < 4; k++) {
        const ap_uint<128> o = o_in.read();
        for (int l = 0; l < 4; l++) {
            const ap_int<32> v = o.range(32 * l + 31, 32 * l);
            a.range(32 * k + 8 * l + 7, 32 * k + 8 * l) = (ap_uint<8>)requant_one(v, mult, shift);
        }
    }
    return a;
}

}  // namespace vckattn

#endif

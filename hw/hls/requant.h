// requant_one: the output movers' requantization of an int32 accumulator to int8 (golden
// vckattn.golden.requant.requantize, round half up): sat_int8((o*mult + 2^(shift-1)) >> shift); shift == 0:
// sat_int8(o*mult); shift in 0..62. |o*mult| < 2^62 and the rounding term is at most 2^61, so the 64-bit sum
// cannot overflow. Used by s2mm_out (v1) and s2mm_engine (the engine).
#ifndef VCKATTN_HLS_REQUANT_H
#define VCKATTN_HLS_REQUANT_H

#include <ap_int.h>

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

}  // namespace vckattn

#endif

// AXI4-Stream beat types shared by the HLS normalizers (swiftmax_hls.h: the score and P beats of the SwiftMax /
// online-softmax kernels' stream pair; bhyt_hls.h).
//
// With Vitis HLS, ap_axi_sdata.h provides hls::axis<data, user, id, dest> (TDATA, TKEEP, TSTRB,
// TUSER, TLAST, TID, TDEST). The open-source ap_types headers this project compiles against for
// C-simulation (hls4ml wheel) do not ship it, so without it a struct with the same member names
// stands in; kernels only touch .data, .user and .last, which both have.
#ifndef VCKATTN_AXIS_TYPES_H
#define VCKATTN_AXIS_TYPES_H

#include <ap_int.h>
#include <hls_stream.h>

#include "generated/swiftmax_regs.h"

#if defined(__has_include)
#if __has_include(<ap_axi_sdata.h>)
#define VCKATTN_HAVE_AP_AXI_SDATA 1
#endif
#endif

#ifdef VCKATTN_HAVE_AP_AXI_SDATA
#include <ap_axi_sdata.h>
template <int W, int U>
using vck_axis = hls::axis<ap_uint<W>, U, 0, 0>;
#else
template <int W, int U>
struct vck_axis {
    ap_uint<W> data;
    ap_uint<(W + 7) / 8> keep;
    ap_uint<(W + 7) / 8> strb;
    ap_uint<U> user;
    ap_uint<1> last;
};
#endif

namespace vckattn {

constexpr int LANES = 4;       // scores per beat of the normalizers' stream pair

constexpr int SM_HEAD_BITS = VCKATTN_SWIFTMAX_HEAD_BITS;  // head index bits on the score TUSER
constexpr int SCORE_USER_BITS = LANES + SM_HEAD_BITS;        // score TUSER: keep bits [0, 4), head [4, 9)
using score_beat = vck_axis<128, SCORE_USER_BITS>;  // scores to a normalizer: 4 × int32, keep + head on TUSER
using p_beat = vck_axis<32, LANES>;       // P from a normalizer: 4 × uint8, keep on TUSER

}  // namespace vckattn

#endif

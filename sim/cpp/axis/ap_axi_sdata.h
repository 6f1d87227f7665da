// C-simulation stand-in for Vitis HLS's ap_axi_sdata.h, which the open-source ap_types headers (hls4ml's
// templates/vivado/ap_types, sim/hls_csim.py) do not ship. Only the C-simulation puts this folder on the include
// path (sim/sublayer_movers_csim.py); Vitis HLS compiles the kernels with its own header, where ap_axiu<D, U, TI, TD>
// is an AXI4-Stream beat with side channels (TDATA, TKEEP, TSTRB, TUSER, TLAST, TID, TDEST).
//
// The members are Vitis's, with the same names and widths: data (D bits), keep and strb (D/8 bits each), user (U),
// last (1), id (TI), dest (TD). A side channel of width 0 is an empty member here (Vitis leaves the signal out), so
// code that touches it does not compile rather than simulating a signal the hardware does not have.
#ifndef VCKATTN_CSIM_AP_AXI_SDATA_H
#define VCKATTN_CSIM_AP_AXI_SDATA_H

#include <ap_int.h>

namespace vckattn_csim_axis {
struct absent {};  // a side channel of width 0
template <int W> struct side { typedef ap_uint<W> type; };
template <> struct side<0> { typedef absent type; };
}  // namespace vckattn_csim_axis

template <int D, int U, int TI, int TD>
struct ap_axiu {
    ap_uint<D> data;
    ap_uint<(D + 7) / 8> keep;
    ap_uint<(D + 7) / 8> strb;
    typename vckattn_csim_axis::side<U>::type user;
    ap_uint<1> last;
    typename vckattn_csim_axis::side<TI>::type id;
    typename vckattn_csim_axis::side<TD>::type dest;
};

#endif  // VCKATTN_CSIM_AP_AXI_SDATA_H

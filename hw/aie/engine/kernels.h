// ADF kernel functions of the scalable engine's graph (stream contract v2, hw/ENGINE.md; logic in
// engine_kernels.h). The graph generator instantiates qk_slice<J> / pv_slice_*<J> for J = 0 .. k-1 of
// each pipeline; one call processes one command (qk_slice) or one step (pv_slice: a LOAD_V or a tile).
//
// Stream element types (ADF 2022.2, AIE1):
//   cmd, v  input_stream<int32>      qk_in / v_in: 4 int32 a 128-bit beat (command header + int8 payload)
//   s       output_pktstream         score packets of slice J (packet id J), 32-bit words
//   p       input_pktstream          P packets of slice J from pktsplit, 32-bit words
//   cin/cout input/output_cascade<acc48>  [tile_id, rows] then the O partial sum, 8 lanes a word
//   o       output_stream<int32>     O records: header beat + Q_ROWS x d int32, 4 a beat
#ifndef VCKATTN_AIE_ENGINE_ADF_KERNELS_H
#define VCKATTN_AIE_ENGINE_ADF_KERNELS_H

#include <adf.h>

// Q K_J^T for each TILE, the keys of slice J kept from each LOAD_K.
template <int J>
void qk_slice(input_stream<int32>* __restrict cmd, output_pktstream* __restrict s);

// P_J V_J, cascade out (slice 0 of k > 1).
template <int J>
void pv_slice_first(input_stream<int32>* __restrict v, input_pktstream* __restrict p,
                    output_cascade<acc48>* __restrict cout);

// P_J V_J + cascade in, cascade out (0 < J < k - 1).
template <int J>
void pv_slice_mid(input_stream<int32>* __restrict v, input_pktstream* __restrict p,
                  input_cascade<acc48>* __restrict cin, output_cascade<acc48>* __restrict cout);

// P_J V_J + cascade in, O record out (J = k - 1 of k > 1).
template <int J>
void pv_slice_last(input_stream<int32>* __restrict v, input_pktstream* __restrict p,
                   input_cascade<acc48>* __restrict cin, output_stream<int32>* __restrict o);

// P V, O record out (k = 1).
void pv_slice_only(input_stream<int32>* __restrict v, input_pktstream* __restrict p,
                   output_stream<int32>* __restrict o);

#endif

// ADF kernel functions of the scalable engine's graph (stream contract v3, hw/ENGINE.md; logic in
// engine_kernels.h). The graph generator instantiates qk_slice<J> / pv_slice_*<J> for J = 0 .. k-1 of
// each pipeline and one o_requant; one call processes one tile.
//
// Port types (ADF 2022.2 windows, AIE1; UNVERIFIED: no aiecompiler here). Window sizes are the buffer
// sizes of hw/ENGINE.md (engine_kernels.h *_BUFFER_BYTES); every window is ping-pong.
//   q     input_window<int8>    sync:  TILE header + Q tile (broadcast from q_in)
//   k, v  input_window<int8>    async: SLICE header + K / V slice (from pktsplit<2k> on kv_in); the kernel
//                               acquires it at its group's first tile and releases it after the last
//   s     output_window<int8>   sync:  PACKET header + scores (to the channel's pktmerge or PLIO)
//   p     input_window<uint8>   sync:  PACKET header + P (from the channel's pktsplit or PLIO)
//   cin / cout  input_cascade<acc48> / output_cascade<acc48>: [tile_id, rows, rq_mult, rq_shift] then the O blocks
//   o     output_window<int8>   sync:  the A record: RESULT header + A int8 row-major (o_requant, to o_out)
// Port order = argument order (in[0], in[1], ...; out[0]).
#ifndef VCKATTN_AIE_ENGINE_ADF_KERNELS_H
#define VCKATTN_AIE_ENGINE_ADF_KERNELS_H

#include <adf.h>

// S = Q K_J^T narrowed (and masked where needed), for slice J.
template <int J>
void qk_slice(input_window<int8>* __restrict q, input_window<int8>* __restrict k, output_window<int8>* __restrict s);

// P_J V_J, cascade out (slice 0).
template <int J>
void pv_slice_first(input_window<uint8>* __restrict p, input_window<int8>* __restrict v,
                    output_cascade<acc48>* __restrict cout);

// cascade in + P_J V_J, cascade out (0 < J < k).
template <int J>
void pv_slice_mid(input_window<uint8>* __restrict p, input_window<int8>* __restrict v,
                  input_cascade<acc48>* __restrict cin, output_cascade<acc48>* __restrict cout);

// The requantizer: O from the last P.V kernel's cascade, the A record out (one per pipeline).
void o_requant(input_cascade<acc48>* __restrict cin, output_window<int8>* __restrict o);

// --- the projection GEMM (hw/ENGINE.md "The projection GEMM"; logic in gemm_kernels.h, ADF kernels in gemm_proj.cc).
// One call computes one ROWS x COLS output tile of X W^T over K-slice J of a cascade of k kernels.
//   x     input_window<int8>    sync:  XTILE header + the X tile's K-slice J (A layout)
//   w     input_window<int8>    async: WSLICE header + the weight slice (B layout) + the kernel's per-channel
//                               constants (J = 0: bias; the last int8 kernel: mult32, shifts); acquired at the first
//                               tile that uses it, released after its `tiles`-th
//   cin / cout  input_cascade<acc48> / output_cascade<acc48>: [tile_id, rows, col_block] then the partial sums
//   out   output_window<int8> (requantized: Q/K/V) or output_window<int32> (Y of W_O): GRESULT header + the tile

// X_0 W_0^T + bias, cascade out (J = 0 of k > 1).
template <int J>
void gemm_proj_first(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                     output_cascade<acc48>* __restrict cout);

// cascade in + X_J W_J^T, cascade out (0 < J < k - 1).
template <int J>
void gemm_proj_mid(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                   input_cascade<acc48>* __restrict cin, output_cascade<acc48>* __restrict cout);

// cascade in + X_J W_J^T, requantized per output channel to int8 (J = k - 1 of k > 1).
template <int J>
void gemm_proj_last_rq(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                       input_cascade<acc48>* __restrict cin, output_window<int8>* __restrict out);

// cascade in + X_J W_J^T, int32 out (J = k - 1 of k > 1).
template <int J>
void gemm_proj_last_y(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                      input_cascade<acc48>* __restrict cin, output_window<int32>* __restrict out);

// X W^T + bias requantized to int8 / int32 out (k = 1).
void gemm_proj_only_rq(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                       output_window<int8>* __restrict out);
void gemm_proj_only_y(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                      output_window<int32>* __restrict out);

#endif

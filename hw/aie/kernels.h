// ADF kernel functions of the attention graph (graph.h). One call processes one tile; the
// streams and their formats are described in hw/STREAMS.md and attention_kernels.h.
//
// Stream element types (ADF 2022.2 stream types with 128-bit vector reads, readincr_v<16>):
//   q, k, v  input_stream<int8>   16 int8 a 128-bit beat (the header beats are 16 bytes
//                                 holding four little-endian uint32, reassembled in the kernel)
//   p        input_stream<uint8>  16 uint8 a beat (P is unsigned: 0..255)
//   s, o     output_stream<int32> 4 int32 a beat
#ifndef VCKATTN_AIE_KERNELS_H
#define VCKATTN_AIE_KERNELS_H

#include <adf.h>

// S = Q K^T for one tile: reads q (header + Q) and N_KB K blocks from k, writes N_KB S blocks.
void qk_matmul(input_stream<int8>* __restrict q, input_stream<int8>* __restrict k,
               output_stream<int32>* __restrict s);

// O = P V for one tile: reads v (header + N_KB V blocks) and N_KB P blocks from p, writes O.
void pv_matmul(input_stream<int8>* __restrict v, input_stream<uint8>* __restrict p,
               output_stream<int32>* __restrict o);

#endif

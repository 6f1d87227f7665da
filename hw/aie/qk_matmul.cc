// ADF kernel qk_matmul: S = Q K^T, one tile per call (hw/STREAMS.md; logic in attention_kernels.h).
#include "kernels.h"

#include <cstdio>

#include "attention_kernels.h"

namespace {
using Shape = vckattn_aie::DefaultShape;
// File-scope state (placed in the kernel's heap section; graph.h sizes heap_size from it).
vckattn_aie::QkWorkspace<Shape> qk_ws;
static_assert(sizeof(qk_ws) == vckattn_aie::QK_WORKSPACE_BYTES, "graph heap size out of date");
}  // namespace

void qk_matmul(input_stream<int8>* __restrict q, input_stream<int8>* __restrict k,
               output_stream<int32>* __restrict s) {
    vckattn_aie::AdfIn<int8> q_in(q);
    vckattn_aie::AdfIn<int8> k_in(k);
    vckattn_aie::AdfOut s_out(s);
    vckattn_aie::TileHeader h;
    const int st = vckattn_aie::qk_tile<Shape>(q_in, k_in, s_out, qk_ws, &h);
#if defined(__X86SIM__) || defined(__AIESIM__)
    if (st != vckattn_aie::TILE_OK)
        printf("qk_matmul: %s (N_KB=%u D=%u rows=%u tile_id=%u)\n", vckattn_aie::tile_status_text(st),
               (unsigned)h.n_kb, (unsigned)h.d, (unsigned)h.rows, (unsigned)h.tile_id);
#else
    (void)st;
#endif
}

// ADF kernel pv_matmul: O = P V, one tile per call (hw/STREAMS.md; logic in attention_kernels.h).
#include "kernels.h"

#include <cstdio>

#include "attention_kernels.h"

namespace {
using Shape = vckattn_aie::DefaultShape;
// File-scope state (placed in the kernel's heap section; graph.h sizes heap_size from it).
// The O accumulator inside is zeroed by pv_tile at the start of every tile.
vckattn_aie::PvWorkspace<Shape> pv_ws;
static_assert(sizeof(pv_ws) == vckattn_aie::PV_WORKSPACE_BYTES, "graph heap size out of date");
}  // namespace

void pv_matmul(input_stream<int8>* __restrict v, input_stream<uint8>* __restrict p,
               output_stream<int32>* __restrict o) {
    vckattn_aie::AdfIn<int8> v_in(v);
    vckattn_aie::AdfIn<uint8> p_in(p);
    vckattn_aie::AdfOut o_out(o);
    vckattn_aie::TileHeader h;
    const int st = vckattn_aie::pv_tile<Shape>(v_in, p_in, o_out, pv_ws, &h);
#if defined(__X86SIM__) || defined(__AIESIM__)
    if (st != vckattn_aie::TILE_OK)
        printf("pv_matmul: %s (N_KB=%u D=%u)\n", vckattn_aie::tile_status_text(st), (unsigned)h.n_kb, (unsigned)h.d);
#else
    (void)st;
#endif
}

// ADF kernel qk_slice<J>: one tile per call (hw/ENGINE.md; logic in engine_kernels.h qk_tile). Each
// instance J keeps its own state (a template's static: one copy per instantiation, in that kernel's data).
#include "kernels.h"

#include <cstdio>

#include "engine_kernels.h"

namespace {
template <int J>
vckattn_engine::QkState& qk_state() {
    static vckattn_engine::QkState st;  // tiles_left = 0 until the first K slice (zero-initialized static)
    return st;
}
}  // namespace

template <int J>
void qk_slice(input_window<int8>* __restrict q, input_window<int8>* __restrict k, output_window<int8>* __restrict s) {
    vckattn_engine::AdfSliceIn ks(k);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::qk_tile<J>(VCKATTN_WINDOW_DATA(q), ks, VCKATTN_WINDOW_DATA(s), qk_state<J>(),
                                              nullptr, hdr);
#if defined(__X86SIM__) || defined(__AIESIM__)
    if (st != vckattn_engine::ENGINE_OK)
        printf("qk_slice<%d>: %s (header %08x %08x %08x %08x)\n", J, vckattn_engine::status_text(st),
               (unsigned)hdr[0], (unsigned)hdr[1], (unsigned)hdr[2], (unsigned)hdr[3]);
#else
    (void)st;
#endif
}

// ADF kernels pv_slice_first<J> / _mid<J> / _last<J> / pv_slice_only: one tile per call (hw/ENGINE.md;
// logic in engine_kernels.h pv_tile). Each instance keeps its own state (a template's static: one copy
// per instantiation).
#include "kernels.h"

#include <cstdio>

#include "engine_kernels.h"

namespace {
template <int J>
vckattn_engine::PvState& pv_state() {
    static vckattn_engine::PvState st;  // tiles_left = 0: the first call acquires a V slice
    return st;
}

void report(const char* name, int j, int st, const uint32_t* hdr) {
#if defined(__X86SIM__) || defined(__AIESIM__)
    if (st != vckattn_engine::ENGINE_OK)
        printf("%s<%d>: %s (header %08x %08x %08x %08x)\n", name, j, vckattn_engine::status_text(st),
               (unsigned)hdr[0], (unsigned)hdr[1], (unsigned)hdr[2], (unsigned)hdr[3]);
#else
    (void)name, (void)j, (void)st, (void)hdr;
#endif
}
}  // namespace

template <int J>
void pv_slice_first(input_window<uint8>* __restrict p, input_window<int8>* __restrict v,
                    output_cascade<acc48>* __restrict cout) {
    vckattn_engine::AdfSliceIn vs(v);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_tile<J>(VCKATTN_WINDOW_DATA(p), vs, nullptr, cout, nullptr, pv_state<J>(), hdr);
    report("pv_slice_first", J, st, hdr);
}

template <int J>
void pv_slice_mid(input_window<uint8>* __restrict p, input_window<int8>* __restrict v,
                  input_cascade<acc48>* __restrict cin, output_cascade<acc48>* __restrict cout) {
    vckattn_engine::AdfSliceIn vs(v);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_tile<J>(VCKATTN_WINDOW_DATA(p), vs, cin, cout, nullptr, pv_state<J>(), hdr);
    report("pv_slice_mid", J, st, hdr);
}

template <int J>
void pv_slice_last(input_window<uint8>* __restrict p, input_window<int8>* __restrict v,
                   input_cascade<acc48>* __restrict cin, output_window<int8>* __restrict o) {
    vckattn_engine::AdfSliceIn vs(v);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_tile<J>(VCKATTN_WINDOW_DATA(p), vs, cin, nullptr, VCKATTN_WINDOW_DATA(o),
                                              pv_state<J>(), hdr);
    report("pv_slice_last", J, st, hdr);
}

#if VCKATTN_ENGINE_KERNELS == 1
// The P.V kernel of a one-kernel pipeline (defined only in such designs).
void pv_slice_only(input_window<uint8>* __restrict p, input_window<int8>* __restrict v,
                   output_window<int8>* __restrict o) {
    vckattn_engine::AdfSliceIn vs(v);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_tile<0>(VCKATTN_WINDOW_DATA(p), vs, nullptr, nullptr, VCKATTN_WINDOW_DATA(o),
                                              pv_state<0>(), hdr);
    report("pv_slice_only", 0, st, hdr);
}
#endif

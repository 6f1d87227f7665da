// ADF kernels pv_slice_first<J> / pv_slice_mid<J> and o_requant: one tile per call (hw/ENGINE.md; logic in
// engine_kernels.h pv_tile, rq_tile). Each instance keeps its own state (a template's static: one copy
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
    const int st = vckattn_engine::pv_tile<J>(VCKATTN_WINDOW_DATA(p), vs, nullptr, cout, pv_state<J>(), hdr);
    report("pv_slice_first", J, st, hdr);
}

template <int J>
void pv_slice_mid(input_window<uint8>* __restrict p, input_window<int8>* __restrict v,
                  input_cascade<acc48>* __restrict cin, output_cascade<acc48>* __restrict cout) {
    vckattn_engine::AdfSliceIn vs(v);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_tile<J>(VCKATTN_WINDOW_DATA(p), vs, cin, cout, pv_state<J>(), hdr);
    report("pv_slice_mid", J, st, hdr);
}

// The requantizer at the end of the cascade (one per pipeline).
void o_requant(input_cascade<acc48>* __restrict cin, output_window<int8>* __restrict o) {
    static vckattn_engine::RqState st;
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int code = vckattn_engine::rq_tile(cin, VCKATTN_WINDOW_DATA(o), st, hdr);
    report("o_requant", 0, code, hdr);
}

// ADF kernels of the projection GEMM: gemm_proj_first<J> / _mid<J> / _last_rq<J> / _last_y<J> / gemm_proj_only_rq /
// gemm_proj_only_y, one tile per call (hw/ENGINE.md "The projection GEMM"; logic in gemm_kernels.h gemm_tile). Each
// instance keeps its own state (a template's static: one copy per instantiation).
#include "kernels.h"

#include <cstdio>

#include "gemm_kernels.h"

namespace {
template <int J, int OUT_BITS>
vckattn_gemm::GemmState& gemm_state() {
    static vckattn_gemm::GemmState st;  // tiles_left = 0: the first call acquires the weights
    return st;
}

void report(const char* name, int j, int st, const uint32_t* hdr) {
#if defined(__X86SIM__) || defined(__AIESIM__)
    if (st != vckattn_gemm::GEMM_OK)
        printf("%s<%d>: %s (header %08x %08x %08x %08x)\n", name, j, vckattn_gemm::gemm_status_text(st),
               (unsigned)hdr[0], (unsigned)hdr[1], (unsigned)hdr[2], (unsigned)hdr[3]);
#else
    (void)name, (void)j, (void)st, (void)hdr;
#endif
}

template <int J, int OUT_BITS>
void run(const char* name, input_window<int8>* x, input_window<int8>* w, input_cascade<acc48>* cin,
         output_cascade<acc48>* cout, uint8_t* out) {
    vckattn_gemm::AdfWeightsIn ws(w);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_gemm::gemm_tile<J, OUT_BITS>(VCKATTN_WINDOW_DATA(x), ws, cin, cout, out,
                                                        gemm_state<J, OUT_BITS>(), hdr);
    report(name, J, st, hdr);
}
}  // namespace

template <int J>
void gemm_proj_first(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                     output_cascade<acc48>* __restrict cout) {
    run<J, 8>("gemm_proj_first", x, w, nullptr, cout, nullptr);
}

template <int J>
void gemm_proj_mid(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                   input_cascade<acc48>* __restrict cin, output_cascade<acc48>* __restrict cout) {
    run<J, 8>("gemm_proj_mid", x, w, cin, cout, nullptr);
}

template <int J>
void gemm_proj_last_rq(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                       input_cascade<acc48>* __restrict cin, output_window<int8>* __restrict out) {
    run<J, 8>("gemm_proj_last_rq", x, w, cin, nullptr, VCKATTN_WINDOW_DATA(out));
}

template <int J>
void gemm_proj_last_y(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                      input_cascade<acc48>* __restrict cin, output_window<int32>* __restrict out) {
    run<J, 32>("gemm_proj_last_y", x, w, cin, nullptr, VCKATTN_WINDOW_DATA(out));
}

#if VCKATTN_GEMM_KERNELS == 1
// The kernels of a one-kernel cascade (defined only in such designs).
void gemm_proj_only_rq(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                       output_window<int8>* __restrict out) {
    run<0, 8>("gemm_proj_only_rq", x, w, nullptr, nullptr, VCKATTN_WINDOW_DATA(out));
}

void gemm_proj_only_y(input_window<int8>* __restrict x, input_window<int8>* __restrict w,
                      output_window<int32>* __restrict out) {
    run<0, 32>("gemm_proj_only_y", x, w, nullptr, nullptr, VCKATTN_WINDOW_DATA(out));
}
#endif

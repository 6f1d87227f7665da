// ADF kernels pv_slice_first<J> / _mid<J> / _last<J> / pv_slice_only: one step per call, a LOAD_V from
// v_in or one tile (hw/ENGINE.md; logic in engine_kernels.h pv_step). Each instance keeps its own
// workspace (a template's static: one copy per instantiation, in that kernel's heap section; the
// generator sets heap_size from PV_WORKSPACE_BYTES). Template kernels: the ADF graph's
// kernel::create(pv_slice_mid<J>) instantiates them per slice.
#include "kernels.h"

#include <cstdio>

#include "engine_kernels.h"

namespace {
template <int J>
vckattn_engine::PvWorkspace& pv_workspace() {
    static vckattn_engine::PvWorkspace ws;  // tiles_left = 0: the first call reads a LOAD_V
    return ws;
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
void pv_slice_first(input_stream<int32>* __restrict v, input_pktstream* __restrict p,
                    output_cascade<acc48>* __restrict cout) {
    vckattn_engine::AdfIn32 vi(v);
    vckattn_engine::AdfPktIn pi(p);
    vckattn_engine::NoStream none;
    vckattn_engine::AdfCascOut co(cout);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_step<J, false, false>(vi, pi, none, co, none, pv_workspace<J>(), hdr);
    report("pv_slice_first", J, st, hdr);
}

template <int J>
void pv_slice_mid(input_stream<int32>* __restrict v, input_pktstream* __restrict p,
                  input_cascade<acc48>* __restrict cin, output_cascade<acc48>* __restrict cout) {
    vckattn_engine::AdfIn32 vi(v);
    vckattn_engine::AdfPktIn pi(p);
    vckattn_engine::AdfCascIn ci(cin);
    vckattn_engine::AdfCascOut co(cout);
    vckattn_engine::NoStream none;
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_step<J, true, false>(vi, pi, ci, co, none, pv_workspace<J>(), hdr);
    report("pv_slice_mid", J, st, hdr);
}

template <int J>
void pv_slice_last(input_stream<int32>* __restrict v, input_pktstream* __restrict p,
                   input_cascade<acc48>* __restrict cin, output_stream<int32>* __restrict o) {
    vckattn_engine::AdfIn32 vi(v);
    vckattn_engine::AdfPktIn pi(p);
    vckattn_engine::AdfCascIn ci(cin);
    vckattn_engine::NoStream none;
    vckattn_aie::AdfOut oo(o);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_step<J, true, true>(vi, pi, ci, none, oo, pv_workspace<J>(), hdr);
    report("pv_slice_last", J, st, hdr);
}

#if VCKATTN_ENGINE_KERNELS == 1
// The P.V kernel of a one-kernel pipeline (defined only in such designs).
void pv_slice_only(input_stream<int32>* __restrict v, input_pktstream* __restrict p,
                   output_stream<int32>* __restrict o) {
    vckattn_engine::AdfIn32 vi(v);
    vckattn_engine::AdfPktIn pi(p);
    vckattn_engine::NoStream none;
    vckattn_aie::AdfOut oo(o);
    uint32_t hdr[4] = {0, 0, 0, 0};
    const int st = vckattn_engine::pv_step<0, false, true>(vi, pi, none, none, oo, pv_workspace<0>(), hdr);
    report("pv_slice_only", 0, st, hdr);
}
#endif

// ADF kernel qk_slice<J>: one command of qk_in per call (hw/ENGINE.md; logic in engine_kernels.h).
// Each instance J keeps its own workspace (a template's static: one copy per instantiation, placed in
// that kernel's heap section; the generator sets heap_size from QK_WORKSPACE_BYTES).
#include "kernels.h"

// A template kernel: the ADF graph's kernel::create(qk_slice<J>) instantiates it per slice.
#include <cstdio>

#include "engine_kernels.h"

namespace {
template <int J>
vckattn_engine::QkWorkspace& qk_workspace() {
    static vckattn_engine::QkWorkspace ws;  // n_kb = 0 until the first LOAD_K (zero-initialized static)
    return ws;
}
}  // namespace

template <int J>
void qk_slice(input_stream<int32>* __restrict cmd, output_pktstream* __restrict s) {
    vckattn_engine::AdfIn32 c(cmd);
    vckattn_engine::AdfPktOut out(s);
    uint32_t hdr[4];
    const int st = vckattn_engine::qk_command<J>(c, out, qk_workspace<J>(), hdr);
#if defined(__X86SIM__) || defined(__AIESIM__)
    if (st != vckattn_engine::ENGINE_OK)
        printf("qk_slice<%d>: %s (header %08x %08x %08x %08x)\n", J, vckattn_engine::status_text(st),
               (unsigned)hdr[0], (unsigned)hdr[1], (unsigned)hdr[2], (unsigned)hdr[3]);
#else
    (void)st;
#endif
}

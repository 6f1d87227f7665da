// ADF graph of the attention build: two AIE kernels, six 128-bit PLIOs (hw/STREAMS.md).
//
//   PLIO q_in  --q--> qk_matmul --s--> PLIO s_out   (S = Q K^T, block by block)
//   PLIO k_in  --k--/
//   PLIO v_in  --v--> pv_matmul --o--> PLIO o_out   (O = P V, once per tile)
//   PLIO p_in  --p--/
//
// The PLIO names are the ones the Vitis link config uses (sc=...:ai_engine_0.q_in etc.; see
// vckattn.host.manifest.PLIOS / CONNECTIVITY). The kernels take N_KB and D from in-band headers,
// so the graph free-runs: each kernel call is one tile. The data file names are for the
// simulators only (aiesimulator/x86simulator --input-dir=hw/aie reads hw/aie/data/*.txt).
#ifndef VCKATTN_AIE_GRAPH_H
#define VCKATTN_AIE_GRAPH_H

#include <adf.h>

#include "kernels.h"
#include "tile_config.h"

class AttentionGraph : public adf::graph {
public:
    adf::kernel qk;
    adf::kernel pv;

    adf::input_plio q_in;
    adf::input_plio k_in;
    adf::input_plio v_in;
    adf::input_plio p_in;
    adf::output_plio s_out;
    adf::output_plio o_out;

    AttentionGraph() {
        q_in = adf::input_plio::create("q_in", adf::plio_128_bits, "data/q_in.txt");
        k_in = adf::input_plio::create("k_in", adf::plio_128_bits, "data/k_in.txt");
        v_in = adf::input_plio::create("v_in", adf::plio_128_bits, "data/v_in.txt");
        p_in = adf::input_plio::create("p_in", adf::plio_128_bits, "data/p_in.txt");
        s_out = adf::output_plio::create("s_out", adf::plio_128_bits, "data/s_out.txt");
        o_out = adf::output_plio::create("o_out", adf::plio_128_bits, "data/o_out.txt");

        qk = adf::kernel::create(qk_matmul);
        pv = adf::kernel::create(pv_matmul);
        // Kernel sources are found on the aiecompiler include path (-include=hw/aie).
        adf::source(qk) = "qk_matmul.cc";
        adf::source(pv) = "pv_matmul.cc";
        // Above 0.5: each kernel gets a core of its own.
        adf::runtime<adf::ratio>(qk) = 0.9;
        adf::runtime<adf::ratio>(pv) = 0.9;
        // The kernels' workspaces are file-scope statics, which the compiler puts on the heap.
        adf::heap_size(qk) = vckattn_aie::QK_WORKSPACE_BYTES + vckattn_aie::HEAP_SLACK_BYTES;
        adf::heap_size(pv) = vckattn_aie::PV_WORKSPACE_BYTES + vckattn_aie::HEAP_SLACK_BYTES;

        // Port order follows the kernel signatures in kernels.h.
        adf::connect<adf::stream>(q_in.out[0], qk.in[0]);
        adf::connect<adf::stream>(k_in.out[0], qk.in[1]);
        adf::connect<adf::stream>(qk.out[0], s_out.in[0]);
        adf::connect<adf::stream>(v_in.out[0], pv.in[0]);
        adf::connect<adf::stream>(p_in.out[0], pv.in[1]);
        adf::connect<adf::stream>(pv.out[0], o_out.in[0]);
    }
};

#endif

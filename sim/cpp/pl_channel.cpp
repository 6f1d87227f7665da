// pl_channel.cpp -- see pl_channel.h. Amaranth's sync domain: rising edge of clk, synchronous active-high rst.
// Each cycle: inputs set and evaluated with clk low, the handshakes sampled, then the rising edge.
#include "pl_channel.h"

#include <cstdio>
#include <memory>

#include "Vpl.h"
#include "verilated.h"

double sc_time_stamp() { return 0; }

namespace vckattn_pl {
namespace {

std::unique_ptr<VerilatedContext> g_ctx;
std::unique_ptr<Vpl> g_top;

void edge() {
    g_top->clk = 1;
    g_top->eval();
    g_top->clk = 0;
    g_top->eval();
}

void idle_inputs() {
    g_top->s0_tvalid = 0;
    g_top->s0_tlast = 0;
    g_top->p0_tready = 1;
    g_top->s_axil_awvalid = 0;
    g_top->s_axil_wvalid = 0;
    g_top->s_axil_bready = 0;
    g_top->s_axil_arvalid = 0;
    g_top->s_axil_rready = 0;
}

}  // namespace

std::string init(const std::vector<std::pair<uint32_t, uint32_t> >& writes) {
    g_ctx.reset(new VerilatedContext);
    g_top.reset(new Vpl(g_ctx.get()));
    idle_inputs();
    g_top->clk = 0;
    g_top->rst = 1;
    g_top->eval();
    for (int i = 0; i < 4; i++) edge();
    g_top->rst = 0;
    g_top->eval();
    for (const auto& w : writes) {
        g_top->s_axil_awaddr = w.first;
        g_top->s_axil_wdata = w.second;
        g_top->s_axil_wstrb = 0xF;
        g_top->s_axil_awvalid = 1;
        g_top->s_axil_wvalid = 1;
        g_top->s_axil_bready = 1;
        bool aw = false, wd = false, done = false;
        for (int c = 0; c < 1000 && !done; c++) {
            g_top->eval();
            const bool aw_fire = g_top->s_axil_awvalid && g_top->s_axil_awready;
            const bool w_fire = g_top->s_axil_wvalid && g_top->s_axil_wready;
            const bool b_fire = g_top->s_axil_bvalid && g_top->s_axil_bready;
            const int bresp = g_top->s_axil_bresp;
            edge();
            if (aw_fire) {
                aw = true;
                g_top->s_axil_awvalid = 0;
            }
            if (w_fire) {
                wd = true;
                g_top->s_axil_wvalid = 0;
            }
            if (b_fire) {
                if (!(aw && wd)) return "a write response before the write was taken";
                if (bresp != 0) return "write of offset " + std::to_string(w.first) + " answered " +
                                       std::to_string(bresp);
                done = true;
            }
        }
        g_top->s_axil_bready = 0;
        if (!done) return "write of offset " + std::to_string(w.first) + " never answered";
    }
    g_top->eval();
    return "";
}

std::string init_from_file(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return "cannot read " + path;
    std::vector<std::pair<uint32_t, uint32_t> > writes;
    unsigned char pair[8];
    size_t n;
    while ((n = std::fread(pair, 1, sizeof pair, f)) == sizeof pair) {
        uint32_t w[2] = {0, 0};
        for (int i = 0; i < 2; i++)
            for (int b = 0; b < 4; b++) w[i] |= (uint32_t)pair[4 * i + b] << (8 * b);
        writes.emplace_back(w[0], w[1]);
    }
    std::fclose(f);
    if (n != 0) return path + " is not whole (offset, word) pairs";
    return init(writes);
}

size_t run(const std::vector<Beat>& in, const std::vector<bool>& last, std::vector<Beat>& out, size_t expect,
           std::vector<bool>* out_last, uint64_t idle_limit) {
    size_t next = 0;
    uint64_t idle = 0;
    while (out.size() < expect && idle < idle_limit) {
        const bool have = next < in.size();
        g_top->s0_tvalid = have;
        if (have) {
            for (int w = 0; w < 4; w++) {
                uint32_t v = 0;
                for (int b = 0; b < 4; b++) v |= (uint32_t)in[next][4 * w + b] << (8 * b);
                g_top->s0_tdata[w] = v;
            }
            g_top->s0_tlast = last[next];
        }
        g_top->p0_tready = 1;
        g_top->eval();
        const bool in_fire = have && g_top->s0_tready;
        const bool out_fire = g_top->p0_tvalid;
        if (out_fire) {
            Beat b;
            for (int w = 0; w < 4; w++)
                for (int k = 0; k < 4; k++) b[4 * w + k] = (uint8_t)(g_top->p0_tdata[w] >> (8 * k));
            out.push_back(b);
            if (out_last) out_last->push_back(g_top->p0_tlast);
        }
        edge();
        if (in_fire) next++;
        idle = (in_fire || out_fire) ? 0 : idle + 1;
    }
    g_top->s0_tvalid = 0;
    g_top->eval();
    return in.size() - next;
}

}  // namespace vckattn_pl

// C-simulation of one cascade of the projection GEMM (hw/ENGINE.md "The projection GEMM"): the k kernels
// gemm_tile<0 .. k-1, OUT_BITS> (hw/aie/engine/gemm_kernels.h), cascade FIFOs between them, each kernel fed its x
// buffers (one per tile) and its w buffers (async: each held for its `tiles` tiles), the last kernel's out buffers
// collected. The kernels run one after the other, each over all its tiles (unbounded FIFOs): this checks the
// formats, the routing and the numerics, not the concurrency of the real dataflow. The kernels run the template code
// the AI Engine compiles (scalar path, or with -DVCKATTN_AIE_VECTOR_EMU the vector path over hw/aie/aie_api_emu.h).
// Build parameters: the kernels' VCKATTN_GEMM_* and VCKATTN_GEMM_OUT_BITS (8: requantized int8; 32: int32 Y).
//
//   gemm_proj_tb DIR N_TILES OPCOUNTS
//
// reads DIR/x_<j>.bin (N_TILES x buffers of kernel j, x_buffer_bytes(j) each) and DIR/w_<j>.bin (kernel j's w buffers,
// w_buffer_bytes(j, OUT_BITS) each, in order); writes DIR/out.bin (the last kernel's out buffers, in order).
// OPCOUNTS: "-" or a file that receives one JSON line per kernel invocation with its instrumented AIE API counts
// (vector build only): {"kernel": "first"|"mid"|"last"|"only", "j": j, "tile": id, "counts": {"<op>": n, ...}}.
// stdout, one line each:
//   status k<j> <code> <text>   every kernel
//   data_bytes k<j> <n>         the kernel's data memory (gemm_data_bytes: buffers and state)
//   leftover <stream> <n>       unconsumed x / w buffers or cascade words, when n > 0
//   missing <stream> <n>        cascade words read past the end, when n > 0
// Exit 2 on bad arguments or files.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gemm_kernels.h"

#ifndef VCKATTN_GEMM_OUT_BITS
#error "VCKATTN_GEMM_OUT_BITS (8 or 32) is not defined"
#endif

namespace {

using vckattn_gemm::GemmShape;
using vckattn_gemm::HostWeights;

constexpr int K = GemmShape::KERNELS;
constexpr int OUT_BITS = VCKATTN_GEMM_OUT_BITS;

std::string g_dir;
FILE* g_counts = nullptr;

[[noreturn]] void fail(const std::string& msg) {
    std::fprintf(stderr, "gemm_proj_tb: %s\n", msg.c_str());
    std::exit(2);
}

std::vector<uint8_t> read_file(const std::string& name, size_t unit) {
    const std::string path = g_dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail("cannot read " + path);
    std::vector<uint8_t> out;
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
    std::fclose(f);
    if (out.size() % unit) fail(path + " is not a whole number of " + std::to_string(unit) + "-byte buffers");
    return out;
}

void write_file(const std::string& name, const std::vector<uint8_t>& data) {
    const std::string path = g_dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || (!data.empty() && std::fwrite(data.data(), 1, data.size(), f) != data.size()))
        fail("cannot write " + path);
    std::fclose(f);
}

void count(const char* what, const std::string& stream, size_t n) {
    if (n) std::printf("%s %s %zu\n", what, stream.c_str(), n);
}

// A buffer: bytes of one ping-pong half, 64-byte aligned (the vector path's loads check their alignment).
struct Buf {
    struct Free {
        void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> mem;
    explicit Buf(size_t n) {
        void* p = nullptr;
        if (posix_memalign(&p, 64, n ? n : 64) != 0) fail("out of memory");
        std::memset(p, 0, n);
        mem.reset(static_cast<uint8_t*>(p));
    }
    uint8_t* data() const { return mem.get(); }
};

void dump_counts(const char* kernel, int j, uint32_t tile) {
#if VCKATTN_AIE_VECTOR
    if (!g_counts) return;
    std::fprintf(g_counts, "{\"kernel\": \"%s\", \"j\": %d, \"tile\": %u, \"counts\": {", kernel, j, tile);
    bool first = true;
    for (const auto& kv : aie::emu::op_counts()) {
        if (!kv.second) continue;
        std::fprintf(g_counts, "%s\"%s\": %llu", first ? "" : ", ", kv.first.c_str(), (unsigned long long)kv.second);
        first = false;
    }
    std::fprintf(g_counts, "}}\n");
#else
    (void)kernel, (void)j, (void)tile;
#endif
}

void reset_counts() {
#if VCKATTN_AIE_VECTOR
    if (g_counts) aie::emu::reset_op_counts();
#endif
}

template <int J>
struct All {
    // casc[j] connects kernel j -> j+1; out collects the last kernel's out buffers.
    static void run(unsigned n_tiles, std::vector<cascade_fifo>& casc, std::vector<uint8_t>& out) {
        const std::string name = "k" + std::to_string(J);
        const char* variant = K == 1 ? "only" : J == 0 ? "first" : J == K - 1 ? "last" : "mid";
        const std::vector<uint8_t> xs = read_file("x_" + std::to_string(J) + ".bin", vckattn_gemm::x_buffer_bytes(J));
        const size_t wbytes = vckattn_gemm::w_buffer_bytes(J, OUT_BITS);
        const std::vector<uint8_t> ws = read_file("w_" + std::to_string(J) + ".bin", wbytes);
        if (xs.size() != n_tiles * (size_t)vckattn_gemm::x_buffer_bytes(J))
            fail("x_" + std::to_string(J) + ".bin does not hold N_TILES buffers");
        HostWeights w;
        for (size_t o = 0; o < ws.size(); o += wbytes) w.push(ws.data() + o, wbytes);
        input_cascade<acc48> cin{&casc[J > 0 ? J - 1 : 0]};
        output_cascade<acc48> cout{&casc[J]};
        vckattn_gemm::GemmState st;
        std::memset(&st, 0, sizeof st);
        int code = vckattn_gemm::GEMM_OK;
        size_t done = 0;
        const size_t obytes = vckattn_gemm::out_buffer_bytes(OUT_BITS);
        for (unsigned t = 0; t < n_tiles; ++t) {
            Buf x(vckattn_gemm::x_buffer_bytes(J));
            std::memcpy(x.data(), xs.data() + t * (size_t)vckattn_gemm::x_buffer_bytes(J), vckattn_gemm::x_buffer_bytes(J));
            Buf o(J == K - 1 ? obytes : 16);
            uint32_t hdr[4];
            reset_counts();
            code = vckattn_gemm::gemm_tile<J, OUT_BITS>(x.data(), w, J > 0 ? &cin : nullptr,
                                                        J < K - 1 ? &cout : nullptr, o.data(), st, hdr);
            if (code != vckattn_gemm::GEMM_OK) break;
            dump_counts(variant, J, VCKATTN_GET(hdr, vckattn_engine::XTILE_TAG));
            if (J == K - 1) out.insert(out.end(), o.data(), o.data() + obytes);
            ++done;
        }
        std::printf("status %s %d %s\n", name.c_str(), code, vckattn_gemm::gemm_status_text(code));
        std::printf("data_bytes %s %d\n", name.c_str(), vckattn_gemm::gemm_data_bytes(J, OUT_BITS));
        count("leftover", name + ".x", n_tiles - done);
        count("leftover", name + ".w", w.remaining() + w.held());
        if (J > 0) {
            count("leftover", name + ".cin", casc[J - 1].words.size());
            count("missing", name + ".cin", casc[J - 1].missing);
        }
        All<J + 1>::run(n_tiles, casc, out);
    }
};
template <>
struct All<K> {
    static void run(unsigned, std::vector<cascade_fifo>&, std::vector<uint8_t>&) {}
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) fail("usage: gemm_proj_tb DIR N_TILES OPCOUNTS");
    g_dir = argv[1];
    const unsigned n_tiles = std::strtoul(argv[2], nullptr, 0);
    const std::string counts_path = argv[3];
    if (counts_path != "-") {
#if VCKATTN_AIE_VECTOR
        g_counts = std::fopen(counts_path.c_str(), "w");
        if (!g_counts) fail("cannot write " + counts_path);
#else
        fail("OPCOUNTS needs the vector-path build (-DVCKATTN_AIE_VECTOR_EMU)");
#endif
    }
    std::vector<cascade_fifo> casc(K);
    std::vector<uint8_t> out;
    All<0>::run(n_tiles, casc, out);
    if (g_counts) std::fclose(g_counts);
    write_file("out.bin", out);
    return 0;
}

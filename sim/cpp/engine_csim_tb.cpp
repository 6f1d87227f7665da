// C-simulation of one launch of the scalable engine (stream contract v3, hw/ENGINE.md): per pipeline,
//
//   DDR (q list, Q) --mm2s_engine (q mover)--> q_in --tile DMA: q buffers, broadcast--> qk_tile<0..k-1>
//   DDR (kv list, K) --mm2s_engine (k mover: the list's LOAD_K entries)--> k_in --pktsplit<k> by packet id j-->
//        K slices of qk j; DDR (kv list, V) --mm2s_engine (v mover: its LOAD_V entries)--> v_in --pktsplit<k> by
//        packet id k + j--> V slices of pv j (async buffers)
//   qk j: s buffers --per score channel c: pktmerge<k/m>, a seeded random interleaving of whole packets-->
//        the PL top's score channel (hw/pl/engine.py EnginePL, Verilated: sim/cpp/pl_channel.h), SwiftMax, or on
//        a build with both normalizers whose normalizer register is 1 online softmax (the merge then keeps every
//        kernel within one tile of the slowest: the channel holds two tiles) --pktsplit<k/m> by packet id-->
//        p buffers of pv j
//   pv 0 --cascade FIFO--> pv 1 ... --> pv k-1 --cascade FIFO--> o_requant: o buffers (A records) --> s2mm_engine (HLS)
//        --> A slots + done log
//
// The kernels run one after the other, each over all its tiles (unbounded FIFOs and buffer queues between
// them): this checks the formats, the routing and the numerics, not the concurrency or the buffer depths of
// the real dataflow. The AIE kernels run the template code the AI Engine compiles (scalar path, or with
// -DVCKATTN_AIE_VECTOR_EMU the vector path over hw/aie/aie_api_emu.h); a kernel whose status is not ok stops
// there (its status is printed; what it did not consume is counted as leftover).
//
//   engine_csim_tb DIR PIPELINES SEED CORRUPT N_SLOTS OPCOUNTS ONLINE N_TILES_0 .. N_TILES_{P-1}
//
// The PL top's registers: DIR/pl_regs.bin, the AXI4-Lite writes (little-endian uint32 byte offset, then the
// word) that program it, performed once before the launch; ONLINE: 1 when they select online softmax.
//
// reads DIR/q_src.bin, DIR/k_src.bin, DIR/v_src.bin (the re-tiled operands) and DIR/q_<p>.bin, DIR/kv_<p>.bin
// (pipeline p's command lists, 32-byte descriptors); writes DIR/a.bin (the launch's shared A buffer: N_SLOTS
// slots of Q_ROWS x D int8, tile t in slot t, zero where no tile was written; the output requantization comes
// with the kv command list, in the LOAD_V SLICE headers) and DIR/done_<p>.bin (pipeline
// p's RESULT headers in arrival order). OPCOUNTS: "-" or a file that receives one JSON line per AIE kernel
// invocation with its instrumented AIE API counts (vector build only):
//   {"pipeline": p, "kernel": "qk"|"pv_first"|"pv_mid"|"rq", "j": j, "tile": id,
//    "masked": 0|1 (qk), "counts": {"<op>": n, ...}}
// CORRUPT (test hook, a broken pktsplit of pipeline 0, channel 0 only): 0 none; 1 swap the packet ids of the
// first P packets of kernels 0 and 1; 2 swap the first two P packets delivered to kernel k/m - 1. The merge of
// channel c of pipeline p is seeded with SEED * 1000003 + p * 1009 + c. stdout, one line each:
//   status <kernel> <code> <text>   every kernel (p<p>.mm2s_q, p<p>.mm2s_k, p<p>.mm2s_v, p<p>.qk<j>, p<p>.norm<c>,
//                                   p<p>.pv<j>, p<p>.rq, p<p>.s2mm)
//   normalizer <name>                the normalizer the channels ran (swiftmax or online_softmax)
//   packets p<p>.c<c> <n>            score packets through channel c's merge
//   records p<p> <n>                 A records s2mm_engine wrote
//   leftover <stream> <n>            unconsumed buffers / beats / cascade words of a stream, when n > 0
//   missing <stream> <n>             cascade words read past the end, or P beats a channel did not give
//                                   (p<p>.c<c>.p_out), when n > 0
// Exit 2 on bad arguments or files.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine_kernels.h"
#include "pl_channel.h"
#include "s2mm_engine.h"

typedef ap_uint<128> beat128;
unsigned mm2s_engine(const beat128* cmds, unsigned n_cmds, const beat128* src, const beat128* src_v, unsigned kv,
                     unsigned payload_bytes, hls::stream<beat128>& out);

namespace {

using vckattn_engine::EngineShape;
using vckattn_engine::HostSlices;

constexpr int K = EngineShape::KERNELS;
constexpr int M = EngineShape::SCORE_PLIOS;
constexpr int PER = EngineShape::PER_CHANNEL;

std::string g_dir;
std::vector<ap_uint<128> > g_a;  // the launch's shared A buffer (s2mm_engine writes tile t into slot t)
unsigned g_slots = 0;
FILE* g_counts = nullptr;

bool g_online = false;  // the PL top normalizes with online softmax (its normalizer register is 1)

[[noreturn]] void fail(const std::string& msg) {
    std::fprintf(stderr, "engine_csim_tb: %s\n", msg.c_str());
    std::exit(2);
}

std::vector<uint8_t> read_file(const std::string& name, bool required = true) {
    const std::string path = g_dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        if (required) fail("cannot read " + path);
        return {};
    }
    std::vector<uint8_t> out;
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
    std::fclose(f);
    if (out.size() % 16) fail(path + " is not a whole number of 16-byte beats");
    return out;
}

void write_file(const std::string& name, const std::vector<uint8_t>& data) {
    const std::string path = g_dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size()) fail("cannot write " + path);
    std::fclose(f);
}

std::vector<beat128> to_beats(const std::vector<uint8_t>& bytes) {
    std::vector<beat128> out(bytes.size() / 16 + 1, 0);  // one spare beat: never an empty array
    for (size_t i = 0; i < bytes.size(); i++) out[i / 16].range(8 * (i % 16) + 7, 8 * (i % 16)) = bytes[i];
    return out;
}

void status(const std::string& kernel, int code, const char* text) {
    std::printf("status %s %d %s\n", kernel.c_str(), code, text);
}

void count(const char* what, const std::string& stream, size_t n) {
    if (n) std::printf("%s %s %zu\n", what, stream.c_str(), n);
}

uint32_t word(const uint8_t* b, int i) {
    return uint32_t(b[4 * i]) | uint32_t(b[4 * i + 1]) << 8 | uint32_t(b[4 * i + 2]) << 16 | uint32_t(b[4 * i + 3]) << 24;
}

// A buffer: bytes of one ping-pong half, 64-byte aligned (the AIE vector path's loads check their alignment).
struct Buf {
    struct Free {
        void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> mem;
    size_t size = 0;
    explicit Buf(size_t n) : size(n) {
        void* p = nullptr;
        if (posix_memalign(&p, 64, n ? n : 64) != 0) fail("out of memory");
        std::memset(p, 0, n);
        mem.reset(static_cast<uint8_t*>(p));
    }
    Buf(const uint8_t* src, size_t n) : Buf(n) { std::memcpy(mem.get(), src, n); }
    uint8_t* data() const { return mem.get(); }
};

// A zeroed T on 64-byte aligned memory (the kernels' persistent state).
template <class T>
std::unique_ptr<T, Buf::Free> zeroed() {
    void* p = nullptr;
    if (posix_memalign(&p, 64, sizeof(T)) != 0) fail("out of memory");
    std::memset(p, 0, sizeof(T));  // T is trivial: all-zero = tiles_left 0
    return std::unique_ptr<T, Buf::Free>(static_cast<T*>(p));
}

// ------------------------------------------------------------------ operation counts

void dump_counts(unsigned pl, const char* kernel, int j, uint32_t tile, int masked) {
#if VCKATTN_AIE_VECTOR
    if (!g_counts) return;
    std::fprintf(g_counts, "{\"pipeline\": %u, \"kernel\": \"%s\", \"j\": %d, \"tile\": %u, \"masked\": %d, \"counts\": {",
                 pl, kernel, j, tile, masked);
    bool first = true;
    for (const auto& kv : aie::emu::op_counts()) {
        if (!kv.second) continue;
        std::fprintf(g_counts, "%s\"%s\": %llu", first ? "" : ", ", kv.first.c_str(), (unsigned long long)kv.second);
        first = false;
    }
    std::fprintf(g_counts, "}}\n");
#else
    (void)pl, (void)kernel, (void)j, (void)tile, (void)masked;
#endif
}

void reset_counts() {
#if VCKATTN_AIE_VECTOR
    if (g_counts) aie::emu::reset_op_counts();
#endif
}

// ------------------------------------------------------------------ the k QK^T kernels

template <int J>
struct QkAll {
    static void run(unsigned pl, const std::vector<Buf>& q_bufs, std::vector<HostSlices>& k_slices,
                    std::vector<std::vector<Buf> >& s_out) {
        const std::string name = "p" + std::to_string(pl) + ".qk" + std::to_string(J);
        auto st = zeroed<vckattn_engine::QkState>();
        int code = vckattn_engine::ENGINE_OK;
        size_t done = 0;
        for (const Buf& q : q_bufs) {
            Buf s(vckattn_engine::S_BUFFER_BYTES);
            bool masked = false;
            reset_counts();
            code = vckattn_engine::qk_tile<J>(q.data(), k_slices[J], s.data(), *st, &masked);
            if (code != vckattn_engine::ENGINE_OK) break;
            dump_counts(pl, "qk", J, word(q.data(), vckattn_engine::TILE_TAG_WORD), masked ? 1 : 0);
            s_out[J].push_back(std::move(s));
            ++done;
        }
        status(name, code, vckattn_engine::status_text(code));
        count("leftover", name + ".q", q_bufs.size() - done);
        count("leftover", name + ".k", k_slices[J].remaining() + k_slices[J].held());
        QkAll<J + 1>::run(pl, q_bufs, k_slices, s_out);
    }
};
template <>
struct QkAll<K> {
    static void run(unsigned, const std::vector<Buf>&, std::vector<HostSlices>&, std::vector<std::vector<Buf> >&) {}
};

// ------------------------------------------------------------------ the k P.V kernels (cascade chain)

template <int J>
struct PvAll {
    // casc[j] connects pv j -> pv j+1; casc[K-1] connects pv K-1 -> the requantizer.
    static void run(unsigned pl, std::vector<std::vector<Buf> >& p_in, std::vector<HostSlices>& v_slices,
                    std::vector<cascade_fifo>& casc) {
        const std::string name = "p" + std::to_string(pl) + ".pv" + std::to_string(J);
        const char* variant = J == 0 ? "pv_first" : "pv_mid";
        input_cascade<acc48> cin{&casc[J > 0 ? J - 1 : 0]};
        output_cascade<acc48> cout{&casc[J]};
        auto st = zeroed<vckattn_engine::PvState>();
        int code = vckattn_engine::ENGINE_OK;
        size_t done = 0;
        for (const Buf& p : p_in[J]) {
            reset_counts();
            code = vckattn_engine::pv_tile<J>(p.data(), v_slices[J], J > 0 ? &cin : nullptr, &cout, *st);
            if (code != vckattn_engine::ENGINE_OK) break;
            dump_counts(pl, variant, J, word(p.data(), vckattn_engine::PACKET_TILE_ID_WORD), 0);
            ++done;
        }
        status(name, code, vckattn_engine::status_text(code));
        count("leftover", name + ".p", p_in[J].size() - done);
        count("leftover", name + ".v", v_slices[J].remaining() + v_slices[J].held());
        if (J > 0) {
            count("leftover", name + ".cin", casc[J - 1].words.size());
            count("missing", name + ".cin", casc[J - 1].missing);
        }
        PvAll<J + 1>::run(pl, p_in, v_slices, casc);
    }
};
template <>
struct PvAll<K> {
    static void run(unsigned, std::vector<std::vector<Buf> >&, std::vector<HostSlices>&, std::vector<cascade_fifo>&) {}
};

// The requantizer: one invocation per tile the last P.V kernel passed on, while cascade words remain (a tile's
// words missing at the end are counted, and its record dropped).
void requantizer(unsigned pl, cascade_fifo& casc, std::vector<Buf>& o) {
    const std::string name = "p" + std::to_string(pl) + ".rq";
    input_cascade<acc48> cin{&casc};
    auto st = zeroed<vckattn_engine::RqState>();
    int code = vckattn_engine::ENGINE_OK;
    while (!casc.words.empty()) {
        Buf out(vckattn_engine::O_BUFFER_BYTES);
        const std::size_t missing = casc.missing;
        reset_counts();
        code = vckattn_engine::rq_tile(&cin, out.data(), *st);
        if (code != vckattn_engine::ENGINE_OK || casc.missing != missing) break;
        dump_counts(pl, "rq", 0, static_cast<uint32_t>(st->casc[0]), 0);
        o.push_back(std::move(out));
    }
    status(name, code, vckattn_engine::status_text(code));
    count("leftover", name + ".cin", casc.words.size());
    count("missing", name + ".cin", casc.missing);
}

// ------------------------------------------------------------------ movers

// Runs mm2s_engine on a command list; returns the stream's bytes.
std::vector<uint8_t> mover(const std::string& name, const std::vector<uint8_t>& cmds, const std::vector<beat128>& src,
                           const std::vector<beat128>& src_v, unsigned kv, unsigned payload_bytes) {
    const std::vector<beat128> c = to_beats(cmds);
    const unsigned n = (unsigned)(cmds.size() / 32);
    hls::stream<beat128> out;
    const unsigned sent = mm2s_engine(c.data(), n, src.data(), src_v.data(), kv, payload_bytes, out);
    status(name, sent == n ? 0 : 1, sent == n ? "ok" : "stopped at a bad command");
    std::vector<uint8_t> bytes;
    while (!out.empty()) {
        const beat128 b = out.read();
        for (int k = 0; k < 16; k++) bytes.push_back((uint8_t)(unsigned)b.range(8 * k + 7, 8 * k));
    }
    return bytes;
}

// ------------------------------------------------------------------ one pipeline

void run_pipeline(unsigned pl, unsigned seed, int corrupt, unsigned n_tiles,
                  const std::vector<beat128>& q_src, const std::vector<beat128>& k_src,
                  const std::vector<beat128>& v_src) {
    using namespace vckattn_engine;
    const std::string p = "p" + std::to_string(pl);

    // q mover -> q buffers (the tile DMA cuts the stream into buffers), broadcast to the QK^T kernels
    const std::vector<uint8_t> q_in = mover(p + ".mm2s_q", read_file("q_" + std::to_string(pl) + ".bin"), q_src,
                                            q_src, 0, EngineShape::Q_ROWS * EngineShape::D);
    std::vector<Buf> q_bufs;
    for (size_t at = 0; at + Q_BUFFER_BYTES <= q_in.size(); at += Q_BUFFER_BYTES)
        q_bufs.emplace_back(q_in.data() + at, Q_BUFFER_BYTES);
    count("leftover", p + ".q_in", q_in.size() % Q_BUFFER_BYTES);

    // k mover -> k_in -> pktsplit<k> (packet id j) -> K slices; v mover -> v_in -> pktsplit<k> (packet id k + j)
    // -> V slices (async buffers). Both movers read the pipeline's one kv list, each sending its op's slices.
    const std::vector<uint8_t> kv_cmds = read_file("kv_" + std::to_string(pl) + ".bin");
    const std::vector<uint8_t> k_in = mover(p + ".mm2s_k", kv_cmds, k_src, v_src, 1, EngineShape::SK * EngineShape::D);
    const std::vector<uint8_t> v_in = mover(p + ".mm2s_v", kv_cmds, k_src, v_src, 2, EngineShape::SK * EngineShape::D);
    std::vector<HostSlices> k_slices(K), v_slices(K);
    size_t unrouted = 0;
    for (size_t at = 0; at + K_BUFFER_BYTES <= k_in.size(); at += K_BUFFER_BYTES) {
        const uint32_t id = (word(k_in.data() + at, 0) >> SLICE_PACKET_ID_LO) & SLICE_PACKET_ID_MASK;
        if (id < (uint32_t)K)
            k_slices[id].push(k_in.data() + at, K_BUFFER_BYTES);
        else
            unrouted++;
    }
    for (size_t at = 0; at + V_BUFFER_BYTES <= v_in.size(); at += V_BUFFER_BYTES) {
        const uint32_t id = (word(v_in.data() + at, 0) >> SLICE_PACKET_ID_LO) & SLICE_PACKET_ID_MASK;
        if (id >= (uint32_t)K && id < (uint32_t)(2 * K))
            v_slices[id - K].push(v_in.data() + at, V_BUFFER_BYTES);
        else
            unrouted++;
    }
    count("leftover", p + ".k_in", k_in.size() % K_BUFFER_BYTES);
    count("leftover", p + ".v_in", v_in.size() % V_BUFFER_BYTES);
    count("leftover", p + ".kv_unrouted", unrouted);

    // QK^T kernels
    std::vector<std::vector<Buf> > s_out(K);
    QkAll<0>::run(pl, q_bufs, k_slices, s_out);

    // per score channel: pktmerge (seeded random interleaving of whole packets), SwiftMax, pktsplit
    std::vector<std::vector<Buf> > p_in(K);
    for (int c = 0; c < M; c++) {
        const std::string ch = p + ".c" + std::to_string(c);
        std::mt19937 rng(seed * 1000003u + pl * 1009u + (unsigned)c);
        std::vector<size_t> next(PER, 0);
        std::vector<const Buf*> merged;
        const bool online = g_online;
        for (;;) {
            // online softmax: a kernel sends its packet n only once every kernel has sent n - 1 (ONLINE_TILES = 2)
            const size_t low = *std::min_element(next.begin(), next.end());
            std::vector<int> ready;
            for (int i = 0; i < PER; i++)
                if (next[i] < s_out[c * PER + i].size() && (!online || next[i] <= low + 1)) ready.push_back(i);
            if (ready.empty()) break;
            const int i = ready[rng() % ready.size()];
            merged.push_back(&s_out[c * PER + i][next[i]++]);
        }
        std::printf("packets %s %zu\n", ch.c_str(), merged.size());
        // the PL channel: every packet's beats (TLAST on its last), P packets back: a header and 16 P a beat
        constexpr int SCORES_PER_BEAT = 128 / VCKATTN_ENGINE_SCORE_BITS;
        std::vector<vckattn_pl::Beat> in, out;
        std::vector<bool> last;
        size_t expect = 0;
        for (const Buf* b : merged) {
            const size_t beats = b->size / 16;
            for (size_t i = 0; i < beats; i++) {
                vckattn_pl::Beat x;
                std::memcpy(x.data(), b->data() + 16 * i, 16);
                in.push_back(x);
                last.push_back(i + 1 == beats);
            }
            expect += 1 + (beats - 1) * SCORES_PER_BEAT / 16;
        }
        const size_t left = vckattn_pl::run(in, last, out, expect);
        status(p + ".norm" + std::to_string(c), 0, "ok");
        count("leftover", ch + ".s_axis", left);
        if (out.size() < expect) std::printf("missing %s.p_out %zu\n", ch.c_str(), expect - out.size());
        std::vector<uint8_t> pb;
        for (const auto& beat : out) pb.insert(pb.end(), beat.begin(), beat.end());
        std::vector<Buf> pk;
        for (size_t at = 0; at + P_BUFFER_BYTES <= pb.size(); at += P_BUFFER_BYTES) pk.emplace_back(pb.data() + at, P_BUFFER_BYTES);
        count("leftover", ch + ".p_out", pb.size() % P_BUFFER_BYTES);
        auto pid = [](const Buf& b) { return (word(b.data(), PACKET_PACKET_ID_WORD) >> PACKET_PACKET_ID_LO) & PACKET_PACKET_ID_MASK; };
        if (pl == 0 && c == 0 && corrupt == 1) {
            int a = -1, b = -1;
            for (size_t i = 0; i < pk.size(); i++) {
                if (a < 0 && pid(pk[i]) == 0) a = (int)i;
                if (b < 0 && pid(pk[i]) == 1) b = (int)i;
            }
            if (a < 0 || b < 0) fail("CORRUPT 1 needs P packets of kernels 0 and 1 in one channel");
            uint8_t* ha = pk[a].data();
            uint8_t* hb = pk[b].data();
            std::swap(ha[0], hb[0]);  // packet id: bits 0..4 of word 0 (the rest of byte 0 is 0)
        }
        std::vector<std::vector<Buf> > split(PER);
        size_t dropped = 0;
        for (Buf& b : pk) {
            const uint32_t id = pid(b);
            if (id < (uint32_t)PER)
                split[id].push_back(std::move(b));
            else
                dropped++;
        }
        count("leftover", ch + ".pktsplit_unrouted", dropped);
        if (pl == 0 && c == 0 && corrupt == 2) {
            if (split[PER - 1].size() < 2) fail("CORRUPT 2 needs two P packets of one kernel");
            std::swap(split[PER - 1][0], split[PER - 1][1]);
        }
        for (int i = 0; i < PER; i++) p_in[c * PER + i] = std::move(split[i]);
    }

    // P.V kernels
    std::vector<cascade_fifo> casc(K);
    PvAll<0>::run(pl, p_in, v_slices, casc);
    std::vector<Buf> o_bufs;
    requantizer(pl, casc[K - 1], o_bufs);

    // s2mm_engine: as many whole A records as arrived (at most n_tiles)
    const unsigned present = (unsigned)std::min<size_t>(o_bufs.size(), n_tiles);
    hls::stream<vckattn_engine_pl::beat128> o_in("o_in");
    for (unsigned r = 0; r < present; r++)
        for (size_t i = 0; i < (size_t)O_BUFFER_BYTES / 16; i++) {
            ap_uint<128> v = 0;
            for (int k = 0; k < 16; k++) v.range(8 * k + 7, 8 * k) = o_bufs[r].data()[16 * i + k];
            o_in.write(v);
        }
    count("leftover", p + ".o", o_bufs.size() - present);
    std::vector<ap_uint<128> > done(present + 1);
    const int sst = s2mm_engine(o_in, g_a.data(), done.data(), present, g_slots, pl);
    status(p + ".s2mm", sst, vckattn_engine_pl::pl_status_text(sst));
    std::printf("records %s %u\n", p.c_str(), sst == 0 ? present : 0u);
    std::vector<uint8_t> bytes(sst == 0 ? 16 * (size_t)present : 0);
    for (size_t i = 0; i < bytes.size(); i++)
        bytes[i] = (uint8_t)(unsigned)done[i / 16].range(8 * (i % 16) + 7, 8 * (i % 16));
    write_file("done_" + std::to_string(pl) + ".bin", bytes);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 8) fail("usage: engine_csim_tb DIR PIPELINES SEED CORRUPT N_SLOTS OPCOUNTS ONLINE N_TILES...");
    g_dir = argv[1];
    const unsigned pipelines = std::strtoul(argv[2], nullptr, 0);
    const unsigned seed = std::strtoul(argv[3], nullptr, 0);
    const int corrupt = std::atoi(argv[4]);
    g_slots = std::strtoul(argv[5], nullptr, 0);
    const std::string counts_path = argv[6];
    if (counts_path != "-") {
#if VCKATTN_AIE_VECTOR
        g_counts = std::fopen(counts_path.c_str(), "w");
        if (!g_counts) fail("cannot write " + counts_path);
#else
        fail("OPCOUNTS needs the vector-path build (-DVCKATTN_AIE_VECTOR_EMU)");
#endif
    }
    g_a.assign((size_t)g_slots * EngineShape::Q_ROWS * EngineShape::D / 16 + 1, 0);
    g_online = std::atoi(argv[7]) != 0;
    if (pipelines < 1 || argc != 8 + (int)pipelines) fail("expected " + std::to_string(pipelines) + " tile counts");
    std::vector<unsigned> n_tiles;
    for (unsigned i = 0; i < pipelines; i++) n_tiles.push_back(std::strtoul(argv[8 + i], nullptr, 0));
    const std::string bad = vckattn_pl::init_from_file(g_dir + "/pl_regs.bin");
    if (!bad.empty()) fail("PL registers: " + bad);
    std::printf("normalizer %s\n", g_online ? "online_softmax" : "swiftmax");
    const std::vector<beat128> q_src = to_beats(read_file("q_src.bin"));
    const std::vector<beat128> k_src = to_beats(read_file("k_src.bin"));
    const std::vector<beat128> v_src = to_beats(read_file("v_src.bin"));
    for (unsigned pl = 0; pl < pipelines; pl++)
        run_pipeline(pl, seed, corrupt, n_tiles[pl], q_src, k_src, v_src);
    if (g_counts) std::fclose(g_counts);
    std::vector<uint8_t> a((size_t)g_slots * EngineShape::Q_ROWS * EngineShape::D);
    for (size_t i = 0; i < a.size(); i++) a[i] = (uint8_t)(unsigned)g_a[i / 16].range(8 * (i % 16) + 7, 8 * (i % 16));
    write_file("a.bin", a);
    return 0;
}

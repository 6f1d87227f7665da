// C-simulation of one launch of the scalable engine (stream contract v2, hw/ENGINE.md): per pipeline,
//
//   qk_in bytes --broadcast--> qk_slice 0..k-1 (AIE, hw/aie/engine/engine_kernels.h qk_command)
//            --pktmerge: a seeded random interleaving of whole packets (per-source order kept)-->
//            swiftmax_engine_hls (HLS) --pktsplit by packet id--> pv_slice 0..k-1 (AIE pv_step; v_in bytes
//            broadcast; cascade FIFOs between them) --O records--> s2mm_engine (HLS) --> A slots + done log
//
// The kernels run one after the other, each to the end of its input (unbounded FIFOs between them): this
// checks the stream formats, the routing and the numerics, not the concurrency or FIFO depths of the
// real dataflow. The AIE kernels run the same template code the AI Engine compiles (scalar path, or with
// -DVCKATTN_AIE_VECTOR_EMU the vector path over hw/aie/aie_api_emu.h); a kernel whose status is not ok
// stops there (its status is printed; what it did not consume is counted as leftover).
//
//   engine_csim_tb DIR PIPELINES SEED CORRUPT RQ_MULT RQ_SHIFT N_SLOTS D N_TILES_0 .. N_TILES_{P-1} SWIFTMAX_REGISTERS
//
// reads DIR/qk_in_<p>.bin and DIR/v_in_<p>.bin; writes DIR/a.bin (the launch's shared A buffer: N_SLOTS slots of
// Q_ROWS x D int8, tile t in slot t, zero where no tile was written) and DIR/done_<p>.bin (pipeline p's RESULT
// headers in arrival order).
// CORRUPT (test hook, a broken pktsplit of pipeline 0 only): 0 none; 1 swap the packet ids of the first P
// packets of slices 0 and 1 before pktsplit; 2 swap the first two P packets delivered to slice k-1. The merge of pipeline p
// is seeded with SEED * 1000003 + p. stdout, one line each:
//   status <kernel> <code> <text>   every kernel (p<p>.qk<j>, p<p>.norm, p<p>.pv<j>, p<p>.s2mm)
//   packets p<p> <n>                 score packets through the merge
//   records p<p> <n>                 O records s2mm_engine turned into A records
//   leftover <stream> <n>            unconsumed beats (cascade: 8-int32 words) of a stream, when n > 0
//   missing <stream> <n>             beats read past the end of a stream, when n > 0
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
#include "swiftmax_engine_hls.h"

namespace {

std::vector<ap_uint<128> > g_a;  // the launch's shared A buffer (s2mm_engine writes tile t into slot t)
unsigned g_slots = 0;

using vckattn_aie::Beat;
using vckattn_aie::HostIn;
using vckattn_aie::HostOut;
using vckattn_engine::EngineShape;
using vckattn_engine::HostCasc;
using vckattn_engine::HostPktOut;
using vckattn_engine_pl::pkt_beat;

constexpr int K = EngineShape::KERNELS;

std::string g_dir;

[[noreturn]] void fail(const std::string& msg) {
    std::fprintf(stderr, "engine_csim_tb: %s\n", msg.c_str());
    std::exit(2);
}

std::vector<uint8_t> read_file(const std::string& name) {
    const std::string path = g_dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail("cannot read " + path);
    std::vector<uint8_t> out;
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
    std::fclose(f);
    if (out.size() % vckattn_engine::BEAT_BYTES) fail(path + " is not a whole number of 16-byte beats");
    return out;
}

void write_file(const std::string& name, const std::vector<uint8_t>& data) {
    const std::string path = g_dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size()) fail("cannot write " + path);
    std::fclose(f);
}

void status(const std::string& kernel, int code, const char* text) {
    std::printf("status %s %d %s\n", kernel.c_str(), code, text);
}

void count(const char* what, const std::string& stream, size_t n) {
    if (n) std::printf("%s %s %zu\n", what, stream.c_str(), n);
}

uint32_t word(const Beat& b, int i) {
    return uint32_t(b[4 * i]) | uint32_t(b[4 * i + 1]) << 8 | uint32_t(b[4 * i + 2]) << 16 | uint32_t(b[4 * i + 3]) << 24;
}

// A zeroed T on 64-byte aligned heap memory (C++14's new ignores the workspaces' 32-byte alignment,
// which the vector path's emulated loads check). Freed by the unique_ptr.
struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};
template <class T>
std::unique_ptr<T, FreeDeleter> zeroed() {
    void* mem = nullptr;
    if (posix_memalign(&mem, 64, sizeof(T)) != 0) fail("out of memory");
    std::memset(mem, 0, sizeof(T));  // T is trivial: all-zero = n_kb 0, tiles_left 0
    return std::unique_ptr<T, FreeDeleter>(static_cast<T*>(mem));
}

// A packet: its beats (the header first).
using Packet = std::vector<Beat>;

std::vector<Packet> packets_of(const std::vector<Beat>& beats, const std::vector<bool>& last) {
    std::vector<Packet> out;
    Packet cur;
    for (size_t i = 0; i < beats.size(); i++) {
        cur.push_back(beats[i]);
        if (last[i]) {
            out.push_back(cur);
            cur.clear();
        }
    }
    if (!cur.empty()) out.push_back(cur);  // unterminated: still delivered (and will fail downstream)
    return out;
}

uint32_t packet_id(const Packet& pk) {
    uint32_t w[4];
    for (int i = 0; i < 4; i++) w[i] = word(pk[0], i);
    return VCKATTN_GET(w, vckattn_engine::PACKET_PACKET_ID);
}

void set_packet_id(Packet& pk, uint32_t id) {
    uint32_t w[4];
    for (int i = 0; i < 4; i++) w[i] = word(pk[0], i);
    VCKATTN_PUT(w, vckattn_engine::PACKET_PACKET_ID, id);
    std::memcpy(pk[0].data(), w, 16);  // little-endian host
}

std::vector<uint8_t> bytes_of(const std::vector<Packet>& pks) {
    std::vector<uint8_t> out;
    for (const Packet& pk : pks)
        for (const Beat& b : pk) out.insert(out.end(), b.begin(), b.end());
    return out;
}

// ------------------------------------------------------------------ the k qk_slice kernels (broadcast cmd)

template <int J>
struct QkAll {
    static void run(const std::string& p, const std::vector<uint8_t>& qk_in, std::vector<HostPktOut>& outs) {
        HostIn in(qk_in.data(), qk_in.size());
        auto ws = zeroed<vckattn_engine::QkWorkspace>();
        int st = vckattn_engine::ENGINE_OK;
        while (!in.at_end()) {
            st = vckattn_engine::qk_command<J>(in, outs[J], *ws);
            if (st != vckattn_engine::ENGINE_OK) break;
        }
        const std::string name = p + ".qk" + std::to_string(J);
        status(name, st, vckattn_engine::status_text(st));
        count("leftover", name + ".cmd", in.remaining());
        count("missing", name + ".cmd", in.missing());
        QkAll<J + 1>::run(p, qk_in, outs);
    }
};
template <>
struct QkAll<K> {
    static void run(const std::string&, const std::vector<uint8_t>&, std::vector<HostPktOut>&) {}
};

// ------------------------------------------------------------------ the k pv_slice kernels (cascade chain)

template <int J>
struct PvAll {
    // casc[j] connects pv j -> pv j+1 (casc[K-1] unused); o collects pv K-1's O records.
    static void run(const std::string& p, const std::vector<uint8_t>& v_in, const std::vector<std::vector<uint8_t> >& pk,
                    std::vector<HostCasc>& casc, HostOut& o) {
        HostIn v(v_in.data(), v_in.size());
        HostIn pin(pk[J].data(), pk[J].size());
        HostCasc none;
        HostCasc& cin = J > 0 ? casc[J > 0 ? J - 1 : 0] : none;
        auto ws = zeroed<vckattn_engine::PvWorkspace>();
        int st = vckattn_engine::ENGINE_OK;
        while (!v.at_end() || ws->tiles_left > 0) {
            st = vckattn_engine::pv_step<J, (J > 0), (J == K - 1)>(v, pin, cin, casc[J], o, *ws);
            if (st != vckattn_engine::ENGINE_OK) break;
        }
        const std::string name = p + ".pv" + std::to_string(J);
        status(name, st, vckattn_engine::status_text(st));
        count("leftover", name + ".v", v.remaining());
        count("missing", name + ".v", v.missing());
        count("leftover", name + ".p", pin.remaining());
        count("missing", name + ".p", pin.missing());
        if (J > 0) {
            count("leftover", name + ".cin", cin.remaining());
            count("missing", name + ".cin", cin.missing());
        }
        PvAll<J + 1>::run(p, v_in, pk, casc, o);
    }
};
template <>
struct PvAll<K> {
    static void run(const std::string&, const std::vector<uint8_t>&, const std::vector<std::vector<uint8_t> >&,
                    std::vector<HostCasc>&, HostOut&) {}
};

// ------------------------------------------------------------------ one pipeline

void run_pipeline(unsigned pl, unsigned seed, int corrupt, int rq_mult, unsigned rq_shift, unsigned n_tiles,
                  const vckattn::swiftmax_regs& regs) {
    const std::string p = "p" + std::to_string(pl);
    const std::vector<uint8_t> qk_in = read_file("qk_in_" + std::to_string(pl) + ".bin");
    const std::vector<uint8_t> v_in = read_file("v_in_" + std::to_string(pl) + ".bin");

    // qk_slice kernels
    std::vector<HostPktOut> s_out(K);
    QkAll<0>::run(p, qk_in, s_out);

    // pktmerge: seeded random interleaving of whole packets, per-source order kept
    std::vector<std::vector<Packet> > src(K);
    for (int j = 0; j < K; j++) src[j] = packets_of(s_out[j].beats(), s_out[j].last());
    std::mt19937 rng(seed * 1000003u + pl);
    std::vector<size_t> next(K, 0);
    std::vector<Packet> merged;
    for (;;) {
        std::vector<int> ready;
        for (int j = 0; j < K; j++)
            if (next[j] < src[j].size()) ready.push_back(j);
        if (ready.empty()) break;
        const int j = ready[rng() % ready.size()];
        merged.push_back(src[j][next[j]++]);
    }
    std::printf("packets %s %zu\n", p.c_str(), merged.size());

    // PL normalizer
    hls::stream<pkt_beat> s_axis("s_axis"), m_axis("m_axis");
    for (const Packet& pk : merged)
        for (size_t i = 0; i < pk.size(); i++) {
            pkt_beat b;
            for (int k = 0; k < 16; k++) b.data.range(8 * k + 7, 8 * k) = pk[i][k];
            b.keep = -1;
            b.strb = -1;
            b.user = 0;
            b.last = i + 1 == pk.size();
            s_axis.write(b);
        }
    const int nst = swiftmax_engine_hls(s_axis, m_axis, (unsigned)merged.size(), regs);
    status(p + ".norm", nst, vckattn_engine_pl::pl_status_text(nst));
    size_t left = 0;
    while (!s_axis.empty()) {
        s_axis.read();
        left++;
    }
    count("leftover", p + ".s_axis", left);
    std::vector<Beat> p_beats;
    std::vector<bool> p_last;
    while (!m_axis.empty()) {
        const pkt_beat b = m_axis.read();
        Beat x;
        for (int k = 0; k < 16; k++) x[k] = (uint8_t)(unsigned)b.data.range(8 * k + 7, 8 * k);
        p_beats.push_back(x);
        p_last.push_back(b.last != 0);
    }

    // pktsplit by packet id (with the test's corruption hooks)
    std::vector<Packet> p_pk = packets_of(p_beats, p_last);
    if (pl == 0 && corrupt == 1) {
        int a = -1, b = -1;
        for (size_t i = 0; i < p_pk.size(); i++) {
            if (a < 0 && packet_id(p_pk[i]) == 0) a = (int)i;
            if (b < 0 && packet_id(p_pk[i]) == 1) b = (int)i;
        }
        if (a < 0 || b < 0) fail("CORRUPT 1 needs P packets of slices 0 and 1");
        set_packet_id(p_pk[a], 1);
        set_packet_id(p_pk[b], 0);
    }
    std::vector<std::vector<Packet> > split(K);
    size_t dropped = 0;
    for (const Packet& pk : p_pk) {
        const uint32_t id = packet_id(pk);
        if (id < (uint32_t)K)
            split[id].push_back(pk);
        else
            dropped++;
    }
    count("leftover", p + ".pktsplit_unrouted", dropped);
    if (pl == 0 && corrupt == 2) {
        if (split[K - 1].size() < 2) fail("CORRUPT 2 needs two P packets of the last slice");
        std::swap(split[K - 1][0], split[K - 1][1]);
    }
    std::vector<std::vector<uint8_t> > p_in(K);
    for (int j = 0; j < K; j++) p_in[j] = bytes_of(split[j]);

    // pv_slice kernels
    std::vector<HostCasc> casc(K);
    HostOut o;
    PvAll<0>::run(p, v_in, p_in, casc, o);

    // s2mm_engine: as many whole O records as arrived (at most n_tiles)
    const std::vector<Beat>& ob = o.beats();
    unsigned present = 0;
    size_t pos = 0, a_bytes = 0;
    while (pos < ob.size() && present < n_tiles) {
        const uint32_t d = word(ob[pos], vckattn_engine::RESULT_D_WORD) >> vckattn_engine::RESULT_D_LO &
                           vckattn_engine::RESULT_D_MASK;
        const size_t beats = 1 + (size_t)EngineShape::Q_ROWS * d / 4;
        if (d == 0 || pos + beats > ob.size()) break;
        pos += beats;
        a_bytes += 16 + (size_t)EngineShape::Q_ROWS * d;
        present++;
    }
    hls::stream<vckattn_engine_pl::beat128> o_in("o_in");
    for (size_t i = 0; i < pos; i++) {
        ap_uint<128> v = 0;
        for (int k = 0; k < 16; k++) v.range(8 * k + 7, 8 * k) = ob[i][k];
        o_in.write(v);
    }
    count("leftover", p + ".o", ob.size() - pos);
    (void)a_bytes;
    std::vector<ap_uint<128> > done(present + 1);
    const int sst = s2mm_engine(o_in, g_a.data(), done.data(), present, g_slots, pl, rq_mult, rq_shift);
    status(p + ".s2mm", sst, vckattn_engine_pl::pl_status_text(sst));
    std::printf("records %s %u\n", p.c_str(), sst == 0 ? present : 0u);
    std::vector<uint8_t> bytes(sst == 0 ? 16 * (size_t)present : 0);
    for (size_t i = 0; i < bytes.size(); i++)
        bytes[i] = (uint8_t)(unsigned)done[i / 16].range(8 * (i % 16) + 7, 8 * (i % 16));
    write_file("done_" + std::to_string(pl) + ".bin", bytes);
}

}  // namespace

int main(int argc, char** argv) {
    const int n_regs = VCKATTN_SWIFTMAX_WORDS;
    if (argc < 9)
        fail("usage: engine_csim_tb DIR PIPELINES SEED CORRUPT RQ_MULT RQ_SHIFT N_SLOTS D N_TILES... REGISTERS...");
    g_dir = argv[1];
    const unsigned pipelines = std::strtoul(argv[2], nullptr, 0);
    const unsigned seed = std::strtoul(argv[3], nullptr, 0);
    const int corrupt = std::atoi(argv[4]);
    const int rq_mult = std::strtol(argv[5], nullptr, 0);
    const unsigned rq_shift = std::strtoul(argv[6], nullptr, 0);
    g_slots = std::strtoul(argv[7], nullptr, 0);
    const unsigned d = std::strtoul(argv[8], nullptr, 0);
    if (d < 16 || d > (unsigned)EngineShape::MAX_D || d % 16) fail("D must be a multiple of 16 in 16..MAX_D");
    g_a.assign((size_t)g_slots * EngineShape::Q_ROWS * d / 16 + 1, 0);
    if (pipelines < 1 || argc != 9 + (int)pipelines + n_regs)
        fail("expected " + std::to_string(pipelines) + " tile counts and " + std::to_string(n_regs) +
             " SwiftMax registers (declaration order)");
    std::vector<unsigned> n_tiles;
    for (unsigned i = 0; i < pipelines; i++) n_tiles.push_back(std::strtoul(argv[9 + i], nullptr, 0));
    vckattn::swiftmax_regs regs;
    int arg = 9 + (int)pipelines;
#define VCKATTN_PARSE_REG(name, width, is_signed, offset) regs.name = std::strtol(argv[arg++], nullptr, 0);
    VCKATTN_SWIFTMAX_REGS(VCKATTN_PARSE_REG)
#undef VCKATTN_PARSE_REG
#define VCKATTN_PARSE_MEM(name, width, is_signed, offset, depth) \
    for (int e = 0; e < depth; e++) regs.name[e] = std::strtol(argv[arg++], nullptr, 0);
    VCKATTN_SWIFTMAX_MEMS(VCKATTN_PARSE_MEM)
#undef VCKATTN_PARSE_MEM
    for (unsigned pl = 0; pl < pipelines; pl++) run_pipeline(pl, seed, corrupt, rq_mult, rq_shift, n_tiles[pl], regs);
    std::vector<uint8_t> a((size_t)g_slots * EngineShape::Q_ROWS * d);
    for (size_t i = 0; i < a.size(); i++) a[i] = (uint8_t)(unsigned)g_a[i / 16].range(8 * (i % 16) + 7, 8 * (i % 16));
    write_file("a.bin", a);
    return 0;
}

// g++ test bench of the AIE matmul kernels' per-tile logic (hw/aie/attention_kernels.h: the scalar
// reference path, or with -DVCKATTN_AIE_VECTOR_EMU the vector path over hw/aie/aie_api_emu.h).
// Driven by sim/aie_csim.py; build with -I hw/aie.
//
// Usage: aie_kernels_tb [--op-counts PATH] < input
// stdin (little endian):
//   bytes  0..3   mode, ASCII "qk\0\0" (S = Q K^T) or "pv\0\0" (O = P V)
//   bytes  4..11  uint64 n_a: bytes of stream a (qk: q, pv: v)
//   bytes 12..19  uint64 n_b: bytes of stream b (qk: k, pv: p)
//   then n_a bytes of stream a, then n_b bytes of stream b (hw/STREAMS.md formats; both
//   multiples of 16 bytes, one 128-bit beat each)
// stdout: the bytes of the output stream (qk: s, pv: o), written only when every tile succeeded.
// The tile function is called until stream a is exhausted (several tiles back to back, one
// workspace reused as on the AI Engine, filled with garbage first so a missing reset shows).
//
// Exit status: 0 ok; 2 malformed input; 3 bad tile header; 4 a stream ran short or has bytes left.
// Errors are reported on stderr as "aie_kernels_tb: ...".
//
// The tile shape defaults to the build's (tile_config.h); -DVCKATTN_TB_Q_ROWS=.. -DVCKATTN_TB_KEY_BLOCK=..
// -DVCKATTN_TB_MAX_D=.. -DVCKATTN_TB_MAX_KB=.. build the same code for another shape.
//
// Vector-path builds (-DVCKATTN_AIE_VECTOR_EMU) read and write the streams through EmuIn / EmuOut,
// which do per beat what the ADF adapters AdfIn / AdfOut of attention_kernels.h do on the AI Engine
// (a 128-bit stream read and a 16-byte vector store into the workspace; a 16-byte vector load and a
// 128-bit stream write), over the operation-counting aie_api_emu.h. With `--op-counts PATH` (vector
// builds only) the bench writes one JSON line per tile to PATH:
//   {"tile": t, "mode": "qk", "n_kb": .., "d": .., "rows": .., "q_rows": .., "key_block": ..,
//    "counts": {"<operation>": n, ...}}
// with the tile's API operation counts (aie_api_emu.h keys) and its stream beats
// ("stream.read128:<port>", "stream.write128:<port>"); zero counts are left out.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "attention_kernels.h"

#ifndef VCKATTN_TB_Q_ROWS
#define VCKATTN_TB_Q_ROWS vckattn_aie::Q_ROWS
#endif
#ifndef VCKATTN_TB_KEY_BLOCK
#define VCKATTN_TB_KEY_BLOCK vckattn_aie::KEY_BLOCK
#endif
#ifndef VCKATTN_TB_MAX_D
#define VCKATTN_TB_MAX_D vckattn_aie::MAX_D
#endif
#ifndef VCKATTN_TB_MAX_KB
#define VCKATTN_TB_MAX_KB vckattn_aie::MAX_KB
#endif

namespace {

using Shape = vckattn_aie::TileShape<VCKATTN_TB_Q_ROWS, VCKATTN_TB_KEY_BLOCK, VCKATTN_TB_MAX_D, VCKATTN_TB_MAX_KB>;
using vckattn_aie::HostIn;
using vckattn_aie::HostOut;
using vckattn_aie::TileHeader;

// File-scope workspaces, as in hw/aie/qk_matmul.cc and pv_matmul.cc.
vckattn_aie::QkWorkspace<Shape> qk_ws;
vckattn_aie::PvWorkspace<Shape> pv_ws;

int fail(int status, const std::string& msg) {
    std::cerr << "aie_kernels_tb: " << msg << std::endl;
    return status;
}

uint64_t le64(const uint8_t* b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
    return v;
}

std::string describe(const TileHeader& h, bool is_q) {
    std::string s = "N_KB=" + std::to_string(h.n_kb) + " D=" + std::to_string(h.d);
    if (is_q) s += " rows=" + std::to_string(h.rows) + " tile_id=" + std::to_string(h.tile_id);
    return s;
}

#if VCKATTN_AIE_VECTOR
// As AdfIn<T>::read16 on the AI Engine: one 128-bit stream read (readincr_v<16>, counted as
// "stream.read128:<port>"), then aie::store_v of the 16 elements into the workspace.
template <class T>
class EmuIn {
public:
    EmuIn(HostIn& in, const char* port)
        : in_(in), reads_(aie::emu::op_counter(std::string("stream.read128:") + port)) {}
    void read16(void* dst) {
        aie::vector<T, 16> v;
        in_.read16(v.v);
        ++reads_;
        aie::store_v(static_cast<T*>(dst), v);
    }

private:
    HostIn& in_;
    std::uint64_t& reads_;
};

// As AdfOut::write4: aie::load_v<4> of 4 int32 from the workspace, one 128-bit stream write.
class EmuOut {
public:
    EmuOut(HostOut& out, const char* port)
        : out_(out), writes_(aie::emu::op_counter(std::string("stream.write128:") + port)) {}
    void write4(const int32_t* src) {
        const aie::vector<int32, 4> v = aie::load_v<4>(src);
        ++writes_;
        out_.write4(v.v);
    }

private:
    HostOut& out_;
    std::uint64_t& writes_;
};

// One JSON line: the tile's geometry and its non-zero operation counts.
void dump_counts(std::ostream& os, int tile, const std::string& mode, const TileHeader& h) {
    os << "{\"tile\": " << tile << ", \"mode\": \"" << mode << "\", \"n_kb\": " << h.n_kb << ", \"d\": " << h.d
       << ", \"rows\": " << h.rows << ", \"q_rows\": " << Shape::Q_ROWS << ", \"key_block\": " << Shape::KEY_BLOCK
       << ", \"counts\": {";
    bool first = true;
    for (const auto& kv : aie::emu::op_counts()) {
        if (kv.second == 0) continue;
        os << (first ? "" : ", ") << "\"" << kv.first << "\": " << kv.second;
        first = false;
    }
    os << "}}\n";
}
#endif

}  // namespace

int main(int argc, char** argv) {
    std::ios::sync_with_stdio(false);
    std::string counts_path;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--op-counts" && i + 1 < argc) {
            counts_path = argv[++i];
        } else {
            return fail(2, "unknown argument '" + arg + "' (usage: aie_kernels_tb [--op-counts PATH] < input)");
        }
    }
#if VCKATTN_AIE_VECTOR
    std::unique_ptr<std::ofstream> counts_out;
    if (!counts_path.empty()) {
        counts_out.reset(new std::ofstream(counts_path));
        if (!*counts_out) return fail(2, "cannot write " + counts_path);
    }
#else
    if (!counts_path.empty()) return fail(2, "--op-counts needs the vector-path build (-DVCKATTN_AIE_VECTOR_EMU)");
#endif
    const std::vector<uint8_t> in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (in.size() < 20) return fail(2, "input shorter than the 20-byte header");
    const char* head = reinterpret_cast<const char*>(in.data());
    const std::string mode(head, strnlen(head, 4));
    const uint64_t n_a = le64(in.data() + 4);
    const uint64_t n_b = le64(in.data() + 12);
    if (mode != "qk" && mode != "pv") return fail(2, "unknown mode '" + mode + "' (expected qk or pv)");
    if (n_a % vckattn_aie::BEAT_BYTES || n_b % vckattn_aie::BEAT_BYTES)
        return fail(2, "stream lengths must be multiples of 16 bytes, got " + std::to_string(n_a) + " and " +
                           std::to_string(n_b));
    if (in.size() != 20 + n_a + n_b)
        return fail(2, "input has " + std::to_string(in.size()) + " bytes, header announces " +
                           std::to_string(20 + n_a + n_b));

    const bool qk = mode == "qk";
    const char* a_name = qk ? "q" : "v";
    const char* b_name = qk ? "k" : "p";
    HostIn a(in.data() + 20, n_a);
    HostIn b(in.data() + 20 + n_a, n_b);
    HostOut out;
    std::memset(static_cast<void*>(&qk_ws), 0xA5, sizeof(qk_ws));
    std::memset(static_cast<void*>(&pv_ws), 0xA5, sizeof(pv_ws));

#if VCKATTN_AIE_VECTOR
    EmuIn<int8> a_in(a, a_name);
    EmuIn<int8> k_in(b, b_name);   // qk: k
    EmuIn<uint8> p_in(b, b_name);  // pv: p
    EmuOut o_out(out, qk ? "s" : "o");
#endif

    int tiles = 0;
    while (!a.at_end()) {
        TileHeader h;
#if VCKATTN_AIE_VECTOR
        aie::emu::reset_op_counts();
        const int st = qk ? vckattn_aie::qk_tile<Shape>(a_in, k_in, o_out, qk_ws, &h)
                          : vckattn_aie::pv_tile<Shape>(a_in, p_in, o_out, pv_ws, &h);
        if (counts_out && st == vckattn_aie::TILE_OK) dump_counts(*counts_out, tiles, mode, h);
#else
        const int st = qk ? vckattn_aie::qk_tile<Shape>(a, b, out, qk_ws, &h)
                          : vckattn_aie::pv_tile<Shape>(a, b, out, pv_ws, &h);
#endif
        if (st != vckattn_aie::TILE_OK)
            return fail(3, "tile " + std::to_string(tiles) + ": " + a_name + " header " + describe(h, qk) + ": " +
                               vckattn_aie::tile_status_text(st) + " [Q_ROWS=" + std::to_string(Shape::Q_ROWS) +
                               " KEY_BLOCK=" + std::to_string(Shape::KEY_BLOCK) + " MAX_D=" +
                               std::to_string(Shape::MAX_D) + " MAX_KB=" + std::to_string(Shape::MAX_KB) + "]");
        if (a.missing() || b.missing())
            return fail(4, "tile " + std::to_string(tiles) + ": stream " + (a.missing() ? a_name : b_name) +
                               " ended inside the tile (" + std::to_string(a.missing() ? a.missing() : b.missing()) +
                               " beats short)");
        ++tiles;
    }
    if (!b.at_end())
        return fail(4, std::string("stream ") + b_name + " has " + std::to_string(b.remaining()) +
                           " beats left after the last tile");

    for (const vckattn_aie::Beat& beat : out.beats())
        std::cout.write(reinterpret_cast<const char*>(beat.data()), vckattn_aie::BEAT_BYTES);
    std::cout.flush();
    std::cerr << "aie_kernels_tb: " << mode << ": " << tiles << " tiles, " << out.beats().size() << " output beats"
              << std::endl;
    return std::cout ? 0 : 2;
}

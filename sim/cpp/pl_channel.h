// pl_channel.h -- the engine's PL top (hw/pl/engine.py: EnginePL, one score channel), Verilated from the same
// Amaranth the xclbin takes, driven cycle by cycle for a C-simulation: registers over its AXI4-Lite port, score
// packets into s0, P packets out of p0 (TREADY always high). sim/cpp/pl_channel.cpp; the Verilated model is built
// by sim/engine_csim.py (module engine_pl_c1, prefix Vpl).
#ifndef VCKATTN_PL_CHANNEL_H
#define VCKATTN_PL_CHANNEL_H

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vckattn_pl {

using Beat = std::array<uint8_t, 16>;  // one 128-bit AXI4-Stream beat, TDATA little endian

// Resets the PL top and performs ``writes`` (byte offset, 32-bit word) in order over AXI4-Lite; an empty string,
// or what went wrong (a write answered with an error response, or never answered).
std::string init(const std::vector<std::pair<uint32_t, uint32_t> >& writes);

// init() with the writes of the file ``path``: little-endian uint32 pairs (byte offset, word), as
// sim/engine_csim.py writes them; also what is wrong with the file (unreadable, not whole pairs).
std::string init_from_file(const std::string& path);

// Streams ``in`` (``last[i]``: TLAST of beat i) into the channel and collects its P stream into ``out`` (and each
// beat's TLAST into ``out_last`` when given) until ``expect`` beats came out, or ``idle_limit`` cycles passed
// without a beat moving. Returns the input beats the channel did not take.
size_t run(const std::vector<Beat>& in, const std::vector<bool>& last, std::vector<Beat>& out, size_t expect,
           std::vector<bool>* out_last = nullptr, uint64_t idle_limit = 100000);

}  // namespace vckattn_pl

#endif

// 128-bit beats to and from raw files (16 bytes a beat, little-endian bytes in order) for the engine movers' test
// benches (engine_movers_tb.cpp, engine_s2mm_tb.cpp, mm2s_list_tb.cpp, s2mm_records_tb.cpp).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ap_int.h>

// every whole beat of the file at path (a missing file: none), in a vector of exactly that many beats: the buffer a
// kernel gets is no larger than the file, so with AddressSanitizer a read past its end fails the run
static std::vector<ap_uint<128>> read_beats(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return std::vector<ap_uint<128>>();
    std::fseek(f, 0, SEEK_END);
    const long bytes = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<ap_uint<128>> out(bytes > 0 ? bytes / 16 : 0);
    unsigned char b[16];
    for (ap_uint<128>& v : out) {
        if (std::fread(b, 1, 16, f) != 16) std::exit(2);
        v = 0;
        for (int i = 0; i < 16; i++) v.range(8 * i + 7, 8 * i) = b[i];
    }
    std::fclose(f);
    return out;
}

// writes beats to path (exit status 2 when the file cannot be opened)
static void write_beats(const std::string& path, const std::vector<ap_uint<128>>& beats) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::exit(2);
    for (const ap_uint<128>& v : beats) {
        unsigned char b[16];
        for (int i = 0; i < 16; i++) b[i] = v.range(8 * i + 7, 8 * i).to_uint();
        std::fwrite(b, 1, 16, f);
    }
    std::fclose(f);
}

// 128-bit beats to and from raw files (16 bytes a beat, little-endian bytes in order) for the engine movers' test
// benches (engine_movers_tb.cpp, engine_s2mm_tb.cpp).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ap_int.h>

// every whole beat of the file at path (a missing file: none)
static std::vector<ap_uint<128>> read_beats(const std::string& path) {
    std::vector<ap_uint<128>> out;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return out;
    unsigned char b[16];
    while (std::fread(b, 1, 16, f) == 16) {
        ap_uint<128> v = 0;
        for (int i = 0; i < 16; i++) v.range(8 * i + 7, 8 * i) = b[i];
        out.push_back(v);
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

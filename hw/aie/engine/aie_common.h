// What the engine's and the projection GEMM's AIE kernels share (engine_kernels.h, gemm_kernels.h): the build
// switches (VCKATTN_AIE_ADF: an ADF build; VCKATTN_AIE_VECTOR: the aie::mmul path, also on g++ over the counting
// ../aie_api_emu.h), the AIE API or its g++ emulation, the generated stream header, the scalar-work annotations
// the emulation counts, and the helpers both use: header words, cascade words, the 16x8 int8 B block, a 32-lane
// accumulator from four cascade words.
#ifndef VCKATTN_AIE_COMMON_H
#define VCKATTN_AIE_COMMON_H

#include <cstdint>

#ifndef VCKATTN_AIE_ADF
#if defined(__AIENGINE__) || defined(__X86SIM__)
#define VCKATTN_AIE_ADF 1
#else
#define VCKATTN_AIE_ADF 0
#endif
#endif

#ifndef VCKATTN_AIE_VECTOR
#if defined(VCKATTN_AIE_VECTOR_EMU) && !VCKATTN_AIE_ADF
#define VCKATTN_AIE_VECTOR 1
#elif defined(__AIENGINE__) && !defined(VCKATTN_AIE_SCALAR)
#define VCKATTN_AIE_VECTOR 1
#else
#define VCKATTN_AIE_VECTOR 0
#endif
#endif

#if VCKATTN_AIE_ADF
#include <adf.h>
#include <aie_api/aie.hpp>
#include <aie_api/aie_adf.hpp>
#else
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "../aie_api_emu.h"  // g++: the AIE API subset (both paths use its cascade ports)
#endif

#include "../generated/engine_streams.h"
#include "async_buffer.h"

// Scalar-work annotations (counted by ../aie_api_emu.h on g++; nothing on the AI Engine).
#ifndef VCK_SCALAR
#define VCK_SCALAR(n) ((void)0)
#define VCK_SCALAR_LOAD(n) ((void)0)
#define VCK_SCALAR_STORE(n) ((void)0)
#define VCK_LOOP_ITER 2
#define VCK_LOOP_ENTRY 1
#endif

namespace vckattn_aie {

// The four little-endian header words of a buffer's first beat (scalar loads).
inline void read_words(const uint8_t* b, uint32_t w[4]) {
    for (int i = 0; i < 4; ++i)
        w[i] = static_cast<uint32_t>(b[4 * i]) | (static_cast<uint32_t>(b[4 * i + 1]) << 8) |
               (static_cast<uint32_t>(b[4 * i + 2]) << 16) | (static_cast<uint32_t>(b[4 * i + 3]) << 24);
}

inline void write_words(uint8_t* b, const uint32_t w[4]) {
    for (int i = 0; i < 4; ++i)
        for (int k = 0; k < 4; ++k) b[4 * i + k] = static_cast<uint8_t>(w[i] >> (8 * k));
}

namespace scalar {

// One cascade word <-> 8 int32.
inline void casc_read(input_cascade<acc48>* c, int32_t* dst) {
    aie::store_v(dst, readincr_v<8>(c).template to_vector<int32>(0));
}
inline void casc_write(output_cascade<acc48>* c, const int32_t* src) {
    aie::accum<acc48, 8> a;
    a.from_vector(aie::load_v<8>(src), 0);
    writeincr(c, a);
}

}  // namespace scalar

#if VCKATTN_AIE_VECTOR
namespace vec {

// B operand: one 16x8 int8 block (128 bytes: K^T of QK^T, W^T of the projection GEMM).
inline aie::vector<int8, 128> load_b16x8(const int8_t* __restrict p) {
    return aie::concat(aie::load_v<16>(p), aie::load_v<16>(p + 16), aie::load_v<16>(p + 32), aie::load_v<16>(p + 48),
                       aie::load_v<16>(p + 64), aie::load_v<16>(p + 80), aie::load_v<16>(p + 96),
                       aie::load_v<16>(p + 112));
}

// Four cascade words -> one 32-lane accumulator (read one after the other, in order).
inline aie::accum<acc48, 32> casc_read_block(input_cascade<acc48>* __restrict cin) {
    const aie::accum<acc48, 8> w0 = readincr_v<8>(cin);
    const aie::accum<acc48, 8> w1 = readincr_v<8>(cin);
    const aie::accum<acc48, 8> w2 = readincr_v<8>(cin);
    const aie::accum<acc48, 8> w3 = readincr_v<8>(cin);
    return aie::concat(w0, w1, w2, w3);
}

}  // namespace vec
#endif  // VCKATTN_AIE_VECTOR

}  // namespace vckattn_aie

#endif  // VCKATTN_AIE_COMMON_H

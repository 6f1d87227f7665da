// NOT the AIE tools: a small host (g++) model of the ADF window API (the legacy `input_window` /
// `output_window` buffer ports of UG1079) and of the AIE1 fp32 intrinsics (UG1078) that the published
// GEMM kernels rendered in published/gemm_kernels.h use. It exists for the performance model's
// validation against published designs (hw/perf/gemm_kernels.py): it runs those kernels on g++ so that
// their results can be checked and their operations counted. Nothing of vckattn's own kernels uses it.
//
// What is modelled, with the semantics documented by AMD:
// * windows: a window is a circular buffer of `size` elements; `ptr` is the current position.
//   window_incr / window_decr move it by a number of elements modulo the size (ADF windows wrap);
//   window_read_v4 / window_read_v8 / window_write read or write 4 or 8 floats at the position without
//   moving it; window_readincr_v<N> / window_writeincr read or write N elements and move past them.
// * AIE1 fp32 vectors v4float / v8float / v16float; upd_v / upd_w (replace the 128-bit / 256-bit part
//   `idx` of a v16float), ext_w (extract the 256-bit part `idx`), null_v8float, undef_v16float.
// * fpmac(acc, xbuf, xstart, xoffs, zbuf, zstart, zoffs): for each of the 8 lanes i,
//   acc[i] += xbuf[(xstart + xoffs_i) mod 16] * zbuf[(zstart + zoffs_i) mod 8], where xoffs_i / zoffs_i
//   is the i-th 4-bit field of xoffs / zoffs (UG1078, floating-point MAC with lane offsets).
//
// Every call adds 1 to an aie::emu counter (aie_api_emu.h), named after the call and its types:
// "window_read_v8(float)", "window_readincr_v<8,int32>", "fpmac(v8float,v16float,v8float)",
// "upd_w(v16float,v8float)", "ext_w(v16float)", "window_incr(float)", ... The costs of these operations
// (slot issues, with sources) are in hw/perf/aie.py COST_TABLE.
//
// Reads and writes are checked to stay inside the window (no access wraps the buffer's end) and to be
// aligned to their size as on AIE1 (128- and 256-bit accesses).
#ifndef VCKATTN_AIE1_INTRINSICS_EMU_H
#define VCKATTN_AIE1_INTRINSICS_EMU_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "aie_api_emu.h"

// ------------------------------------------------------------------------------------------------
// AIE1 fp32 vector types and intrinsics
// ------------------------------------------------------------------------------------------------

struct v4float {
    float v[4];
};
struct v8float {
    float v[8];
};
struct v16float {
    float v[16];
};

namespace aie1_emu {

inline void fail(const char* what) {
    std::fprintf(stderr, "aie1_intrinsics_emu: %s\n", what);
    std::abort();
}

// Counter of a call, cached like aie_api_emu.h's (one map lookup per call site and key).
inline std::uint64_t& counter(const char* key) { return aie::emu::op_counter(key); }

}  // namespace aie1_emu

inline v8float null_v8float() {
    static std::uint64_t& count = aie1_emu::counter("null_v8float");
    ++count;
    v8float r;
    for (float& x : r.v) x = 0.0f;
    return r;
}

// An undefined register value: the emulation fills it with NaN so that a read before a write shows.
inline v16float undef_v16float() {
    static std::uint64_t& count = aie1_emu::counter("undef_v16float");
    ++count;
    v16float r;
    for (float& x : r.v) x = __builtin_nanf("");
    return r;
}

inline v16float upd_v(v16float buf, int idx, const v4float& x) {
    static std::uint64_t& count = aie1_emu::counter("upd_v(v16float,v4float)");
    ++count;
    if (idx < 0 || idx > 3) aie1_emu::fail("upd_v: part out of range");
    for (int i = 0; i < 4; ++i) buf.v[4 * idx + i] = x.v[i];
    return buf;
}

inline v16float upd_w(v16float buf, int idx, const v8float& x) {
    static std::uint64_t& count = aie1_emu::counter("upd_w(v16float,v8float)");
    ++count;
    if (idx < 0 || idx > 1) aie1_emu::fail("upd_w: part out of range");
    for (int i = 0; i < 8; ++i) buf.v[8 * idx + i] = x.v[i];
    return buf;
}

inline v8float ext_w(const v16float& buf, int idx) {
    static std::uint64_t& count = aie1_emu::counter("ext_w(v16float)");
    ++count;
    if (idx < 0 || idx > 1) aie1_emu::fail("ext_w: part out of range");
    v8float r;
    for (int i = 0; i < 8; ++i) r.v[i] = buf.v[8 * idx + i];
    return r;
}

inline v8float fpmac(v8float acc, const v16float& xbuf, int xstart, unsigned xoffs, const v8float& zbuf, int zstart,
                     unsigned zoffs) {
    static std::uint64_t& count = aie1_emu::counter("fpmac(v8float,v16float,v8float)");
    ++count;
    for (unsigned i = 0; i < 8; ++i) {
        const unsigned xi = (static_cast<unsigned>(xstart) + ((xoffs >> (4 * i)) & 0xFu)) % 16u;
        const unsigned zi = (static_cast<unsigned>(zstart) + ((zoffs >> (4 * i)) & 0xFu)) % 8u;
        const float x = xbuf.v[xi], z = zbuf.v[zi];
        if (x != x || z != z) aie1_emu::fail("fpmac reads an undefined register part");
        acc.v[i] = acc.v[i] + x * z;
    }
    return acc;
}

// ------------------------------------------------------------------------------------------------
// ADF windows (circular buffers of `size` elements)
// ------------------------------------------------------------------------------------------------

template <class T>
struct window {
    T* ptr;            // current position
    T* head;           // first element of the buffer
    unsigned size;     // elements
    unsigned pos;      // ptr - head
};

template <class T>
using input_window = window<T>;
template <class T>
using output_window = window<T>;

using input_window_int8 = input_window<int8>;
using input_window_int32 = input_window<int32>;
using input_window_float = input_window<float>;
using output_window_int32 = output_window<int32>;
using output_window_float = output_window<float>;

template <class T>
window<T> make_window(T* buffer, unsigned size) {
    if (size == 0) aie1_emu::fail("window of 0 elements");
    return window<T>{buffer, buffer, size, 0};
}

namespace aie1_emu {

// The `n` elements at the window's position: inside the buffer and aligned to the access size.
template <class T>
T* at(window<T>* w, unsigned n, const char* what) {
    if (w->pos + n > w->size) {
        std::fprintf(stderr, "aie1_intrinsics_emu: %s of %u elements at %u runs past the window's %u\n", what, n,
                     w->pos, w->size);
        std::abort();
    }
    aie::emu::check_aligned(w->ptr, n * static_cast<unsigned>(sizeof(T)), what);
    return w->ptr;
}

template <class T>
void move(window<T>* w, unsigned pos) {
    w->pos = pos % w->size;
    w->ptr = w->head + w->pos;
}

}  // namespace aie1_emu

inline void window_incr(window<float>* w, int n) {
    static std::uint64_t& count = aie1_emu::counter("window_incr(float)");
    ++count;
    aie1_emu::move(w, static_cast<unsigned>((static_cast<long>(w->pos) + n % static_cast<long>(w->size) +
                                             static_cast<long>(w->size))));
}

inline void window_decr(window<float>* w, int n) {
    static std::uint64_t& count = aie1_emu::counter("window_decr(float)");
    ++count;
    aie1_emu::move(w, static_cast<unsigned>((static_cast<long>(w->pos) - n % static_cast<long>(w->size) +
                                             static_cast<long>(w->size))));
}

inline v4float window_read_v4(window<float>* w) {
    static std::uint64_t& count = aie1_emu::counter("window_read_v4(float)");
    ++count;
    const float* p = aie1_emu::at(w, 4, "window_read_v4");
    v4float r;
    for (int i = 0; i < 4; ++i) r.v[i] = p[i];
    return r;
}

inline v8float window_read_v8(window<float>* w) {
    static std::uint64_t& count = aie1_emu::counter("window_read_v8(float)");
    ++count;
    const float* p = aie1_emu::at(w, 8, "window_read_v8");
    v8float r;
    for (int i = 0; i < 8; ++i) r.v[i] = p[i];
    return r;
}

inline void window_write(window<float>* w, const v8float& x) {
    static std::uint64_t& count = aie1_emu::counter("window_write(v8float)");
    ++count;
    float* p = aie1_emu::at(w, 8, "window_write");
    for (int i = 0; i < 8; ++i) p[i] = x.v[i];
}

// AIE API overloads for windows (aie_api/aie_adf.hpp): read / write N elements and move past them.
template <unsigned N, class T>
aie::vector<T, N> window_readincr_v(window<T>* w) {
    static std::uint64_t& count =
        aie::emu::op_counter(aie::emu::key("window_readincr_v<%u,%s>", N, aie::emu::type_name<T>::value));
    ++count;
    const T* p = aie1_emu::at(w, N, "window_readincr_v");
    aie::vector<T, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = p[i];
    aie1_emu::move(w, w->pos + N);
    return r;
}

template <class T, unsigned N>
void window_writeincr(window<T>* w, const aie::vector<T, N>& x) {
    static std::uint64_t& count =
        aie::emu::op_counter(aie::emu::key("window_writeincr<%u,%s>", N, aie::emu::type_name<T>::value));
    ++count;
    T* p = aie1_emu::at(w, N, "window_writeincr");
    for (unsigned i = 0; i < N; ++i) p[i] = x.v[i];
    aie1_emu::move(w, w->pos + N);
}

#endif

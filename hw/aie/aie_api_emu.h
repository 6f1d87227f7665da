// NOT the AIE API: a small host (g++) model of the subset of it that the vector path of
// attention_kernels.h uses, with the semantics documented in the AI Engine API User Guide (UG1529):
// aie::vector, load_v / store_v, concat, extract, interleave_zip, filter_even / filter_odd, add (integer
// and fp32 lanes), zeros, and aie::mmul<M, K, N, TypeA, TypeB> on row-major A (M x K), B (K x N), C (M x N)
// blocks. (The published GEMM kernels of published/gemm_kernels.h use it too, with aie1_intrinsics_emu.h.)
//
// Used only when the test bench is built with -DVCKATTN_AIE_VECTOR_EMU, to check the vector path's
// tiling and index arithmetic against the scalar reference bit for bit. It checks the AIE1 alignment
// rules (vector loads/stores aligned to their size, at most 32 bytes) but says nothing about whether
// the real AIE API compiles the code or behaves the same: that needs aiecompiler.
//
// Operation counts (for the performance model, hw/perf/aie.py): every API call below adds 1 to a
// counter named after the call and its template arguments, e.g. "load_v<16,int8>",
// "mmul<4,16,8,uint8,int8>.mac", "interleave_zip<8,int32>(step=1)", "concat<16,int8>x4" (4 parts),
// "extract<8>(vector<int32,32>)". Counting is always on (a function-static reference per
// instantiation, a map lookup only for the calls whose key holds a run-time argument) and does not
// touch the values computed. aie::emu::op_counts() holds the counters; reset_op_counts() zeroes
// them (the entries stay, so the cached references remain valid); count_op(key) adds to any
// counter (the test bench counts its stream beats that way). Scalar C++ in the kernels (loops over
// plain pointers) is not an API call and is not counted.
#ifndef VCKATTN_AIE_API_EMU_H
#define VCKATTN_AIE_API_EMU_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <utility>

using int8 = int8_t;
using uint8 = uint8_t;
using int16 = int16_t;
using int32 = int32_t;

namespace aie {

namespace emu {

// Counters by operation key. std::map nodes never move, so references into it stay valid.
inline std::map<std::string, std::uint64_t>& op_counts() {
    static std::map<std::string, std::uint64_t> counts;
    return counts;
}

inline std::uint64_t& op_counter(const std::string& key) { return op_counts()[key]; }

inline void count_op(const std::string& key, std::uint64_t n = 1) { op_counter(key) += n; }

inline void reset_op_counts() {
    for (auto& kv : op_counts()) kv.second = 0;
}

template <class T>
struct type_name;
template <>
struct type_name<int8_t> {
    static constexpr const char* value = "int8";
};
template <>
struct type_name<uint8_t> {
    static constexpr const char* value = "uint8";
};
template <>
struct type_name<int16_t> {
    static constexpr const char* value = "int16";
};
template <>
struct type_name<int32_t> {
    static constexpr const char* value = "int32";
};
template <>
struct type_name<float> {
    static constexpr const char* value = "float";
};

// printf-style key ("load_v<%u,%s>").
template <class... Args>
std::string key(const char* fmt, Args... args) {
    char buf[128];
    std::snprintf(buf, sizeof buf, fmt, args...);
    return buf;
}

}  // namespace emu

template <class T, unsigned N>
struct vector {
    T v[N];

    static constexpr unsigned size() { return N; }
    T get(unsigned i) const { return v[i]; }
    T operator[](unsigned i) const { return v[i]; }

    // Elements [M * idx, M * idx + M).
    template <unsigned M>
    vector<T, M> extract(unsigned idx) const {
        static_assert(N % M == 0, "extract size must divide the vector size");
        static std::uint64_t& count =
            emu::op_counter(emu::key("extract<%u>(vector<%s,%u>)", M, emu::type_name<T>::value, N));
        ++count;
        if (idx >= N / M) {
            std::fprintf(stderr, "aie_api_emu: extract<%u>(%u) out of range\n", M, idx);
            std::abort();
        }
        vector<T, M> r;
        for (unsigned i = 0; i < M; ++i) r.v[i] = v[M * idx + i];
        return r;
    }
};

namespace emu {

inline void check_aligned(const void* p, unsigned bytes, const char* what) {
    const unsigned need = bytes < 32 ? bytes : 32;  // AIE1: 128/256-bit accesses, wider ones split
    if (reinterpret_cast<std::uintptr_t>(p) % need != 0) {
        std::fprintf(stderr, "aie_api_emu: %s of %u bytes at %p is not %u-byte aligned\n", what, bytes, p, need);
        std::abort();
    }
}

template <class T, unsigned N>
void append(T* dst, unsigned& pos, const vector<T, N>& x) {
    for (unsigned i = 0; i < N; ++i) dst[pos++] = x.v[i];
}

template <class T, unsigned N, class... Rest>
void append(T* dst, unsigned& pos, const vector<T, N>& x, const Rest&... rest) {
    append(dst, pos, x);
    append(dst, pos, rest...);
}

}  // namespace emu

template <unsigned N, class T>
vector<T, N> load_v(const T* p) {
    static std::uint64_t& count = emu::op_counter(emu::key("load_v<%u,%s>", N, emu::type_name<T>::value));
    ++count;
    emu::check_aligned(p, N * sizeof(T), "load_v");
    vector<T, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = p[i];
    return r;
}

template <class T, unsigned N>
void store_v(T* p, const vector<T, N>& x) {
    static std::uint64_t& count = emu::op_counter(emu::key("store_v<%u,%s>", N, emu::type_name<T>::value));
    ++count;
    emu::check_aligned(p, N * sizeof(T), "store_v");
    for (unsigned i = 0; i < N; ++i) p[i] = x.v[i];
}

template <class T, unsigned N, class... Rest>
vector<T, N * (1 + sizeof...(Rest))> concat(const vector<T, N>& first, const Rest&... rest) {
    static std::uint64_t& count = emu::op_counter(
        emu::key("concat<%u,%s>x%u", N, emu::type_name<T>::value, static_cast<unsigned>(1 + sizeof...(Rest))));
    ++count;
    vector<T, N * (1 + sizeof...(Rest))> r;
    unsigned pos = 0;
    emu::append(r.v, pos, first, rest...);
    return r;
}

// Interleaves chunks of `step` elements of a and b: a[0:step], b[0:step], a[step:2step], ...;
// .first holds the first N elements of the result, .second the last N.
template <class T, unsigned N>
std::pair<vector<T, N>, vector<T, N>> interleave_zip(const vector<T, N>& a, const vector<T, N>& b, unsigned step) {
    emu::count_op(emu::key("interleave_zip<%u,%s>(step=%u)", N, emu::type_name<T>::value, step));
    T all[2 * N];
    unsigned pos = 0;
    for (unsigned c = 0; c < N; c += step) {
        for (unsigned i = 0; i < step; ++i) all[pos++] = a.v[c + i];
        for (unsigned i = 0; i < step; ++i) all[pos++] = b.v[c + i];
    }
    std::pair<vector<T, N>, vector<T, N>> r;
    for (unsigned i = 0; i < N; ++i) {
        r.first.v[i] = all[i];
        r.second.v[i] = all[N + i];
    }
    return r;
}

namespace emu {
template <class T, unsigned N>
vector<T, N / 2> filter(const vector<T, N>& x, unsigned step, unsigned which) {
    vector<T, N / 2> r;
    unsigned pos = 0;
    for (unsigned c = 0; c < N; c += step)
        if ((c / step) % 2 == which)
            for (unsigned i = 0; i < step; ++i) r.v[pos++] = x.v[c + i];
    return r;
}
}  // namespace emu

// Even / odd chunks of `step` elements (half the vector).
template <class T, unsigned N>
vector<T, N / 2> filter_even(const vector<T, N>& x, unsigned step = 1) {
    emu::count_op(emu::key("filter_even<%u,%s>(step=%u)", N, emu::type_name<T>::value, step));
    return emu::filter(x, step, 0);
}

template <class T, unsigned N>
vector<T, N / 2> filter_odd(const vector<T, N>& x, unsigned step = 1) {
    emu::count_op(emu::key("filter_odd<%u,%s>(step=%u)", N, emu::type_name<T>::value, step));
    return emu::filter(x, step, 1);
}

namespace emu {
// One lane of add: integers in 64 bits then back to T; fp32 lanes are one IEEE single-precision add.
template <class T>
T add_lane(T a, T b) {
    return static_cast<T>(static_cast<int64_t>(a) + static_cast<int64_t>(b));
}
inline float add_lane(float a, float b) { return a + b; }
}  // namespace emu

template <class T, unsigned N>
vector<T, N> add(const vector<T, N>& a, const vector<T, N>& b) {
    static std::uint64_t& count = emu::op_counter(emu::key("add<%u,%s>", N, emu::type_name<T>::value));
    ++count;
    vector<T, N> r;  // int32 lanes wrap like the hardware's; the kernels never overflow
    for (unsigned i = 0; i < N; ++i) r.v[i] = emu::add_lane(a.v[i], b.v[i]);
    return r;
}

template <class T, unsigned N>
vector<T, N> zeros() {
    static std::uint64_t& count = emu::op_counter(emu::key("zeros<%u,%s>", N, emu::type_name<T>::value));
    ++count;
    vector<T, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = 0;
    return r;
}

// C (M x N) = A (M x K) * B (K x N), all row-major inside the vectors; 48-bit accumulators on
// AIE1 (modelled with int64 and checked against 48 bits).
template <unsigned M, unsigned K, unsigned N, class TypeA, class TypeB>
struct mmul {
    static constexpr unsigned size_A = M * K;
    static constexpr unsigned size_B = K * N;
    static constexpr unsigned size_C = M * N;

    int64_t acc[M * N] = {};

    // "mmul<M,K,N,TypeA,TypeB>.<op>"
    static std::string op_key(const char* op) {
        return emu::key("mmul<%u,%u,%u,%s,%s>.%s", M, K, N, emu::type_name<TypeA>::value,
                        emu::type_name<TypeB>::value, op);
    }

    void mul(const vector<TypeA, size_A>& a, const vector<TypeB, size_B>& b) {
        static std::uint64_t& count = emu::op_counter(op_key("mul"));
        ++count;
        for (unsigned i = 0; i < size_C; ++i) acc[i] = 0;
        accumulate(a, b);
    }

    void mac(const vector<TypeA, size_A>& a, const vector<TypeB, size_B>& b) {
        static std::uint64_t& count = emu::op_counter(op_key("mac"));
        ++count;
        accumulate(a, b);
    }

    // acc += A B (shared by mul and mac; counted by them).
    void accumulate(const vector<TypeA, size_A>& a, const vector<TypeB, size_B>& b) {
        for (unsigned m = 0; m < M; ++m)
            for (unsigned n = 0; n < N; ++n) {
                int64_t s = acc[m * N + n];
                for (unsigned k = 0; k < K; ++k)
                    s += static_cast<int64_t>(a.v[m * K + k]) * static_cast<int64_t>(b.v[k * N + n]);
                if (s >= (int64_t(1) << 47) || s < -(int64_t(1) << 47)) {
                    std::fprintf(stderr, "aie_api_emu: acc48 overflow\n");
                    std::abort();
                }
                acc[m * N + n] = s;
            }
    }

    // srs: shift right with rounding (half up), then saturate to T.
    template <class T>
    vector<T, size_C> to_vector(int shift = 0) const {
        static std::uint64_t& count =
            emu::op_counter(op_key(emu::key("to_vector<%s>", emu::type_name<T>::value).c_str()));
        ++count;
        vector<T, size_C> r;
        for (unsigned i = 0; i < size_C; ++i) {
            int64_t x = acc[i];
            if (shift > 0) x = (x + (int64_t(1) << (shift - 1))) >> shift;
            if (x > std::numeric_limits<T>::max()) x = std::numeric_limits<T>::max();
            if (x < std::numeric_limits<T>::min()) x = std::numeric_limits<T>::min();
            r.v[i] = static_cast<T>(x);
        }
        return r;
    }
};

}  // namespace aie

#endif

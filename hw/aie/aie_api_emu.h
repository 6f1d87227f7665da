// NOT the AIE API: a small host (g++) model of the subset of it that the vector paths of
// engine/engine_kernels.h and engine/gemm_kernels.h use, with the semantics documented in the AI Engine
// API User Guide (UG1529) -- and, with aie1_intrinsics_emu.h, the published GEMM kernels of
// published/gemm_kernels.h: aie::vector, load_v / store_v, concat, extract, interleave_zip,
// filter_even / filter_odd, add (vector or scalar; integer and fp32 lanes), min (scalar), broadcast, zeros, lt (compares into
// an aie::mask) and select; aie::accum<acc48, N> (to_vector / from_vector / extract / concat);
// aie::mmul<M, K, N, TypeA, TypeB> on row-major A (M x K), B (K x N), C (M x N) blocks, also built
// from and converted to an accumulator; the rounding and saturation modes of every accumulator to
// vector conversion (aie::set_rounding / aie::set_saturation, defaults floor and none as on the
// hardware: UG1079 "Rounding and Saturation Modes"); aie::mul<acc80> of int32 by int16 or int32 lanes
// into aie::accum<acc80, N> (the AIE1 32x16-bit and 32x32-bit vector multiplies) and its to_vector;
// and, for the host only,
// the ADF cascade ports input_cascade<acc48> / output_cascade<acc48> as a FIFO of 8-lane acc48 words with
// readincr_v<8> / writeincr (each word counted: the performance model's cascade slots).
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
// counter (the test bench counts its stream beats that way).
//
// Scalar work is not an API call: the kernels annotate it where they write it, with VCK_SCALAR(n) (n scalar ALU
// operations: integer arithmetic, compares, branches, header field shifts and masks), VCK_SCALAR_LOAD(n) and
// VCK_SCALAR_STORE(n) (n scalar loads / stores), counted under "scalar", "scalar_load" and "scalar_store" (no-ops
// on the AI Engine: the kernels define them empty there). Loop control as the kernels write it: per iteration of a
// loop that is not the innermost loop of its nest, VCK_LOOP_ITER operations (the counter's increment and the
// conditional branch); per entry of an innermost (software-pipelined) loop, VCK_LOOP_ENTRY (the zero-overhead
// loop's count register; its iterations cost no scalar issue: AM009 'Register Files', the loop start / end / count
// registers ls, le, lc); pointer increments inside a pipelined loop fold into the loads' post-modify addressing
// (AM009 'Register Files': pointer and modifier registers p0..p7, m0..m7), each base address computed per outer
// iteration is one operation. Loops over register arrays (r, x, w, ...) are unrolled: no loop control.
#ifndef VCKATTN_AIE_API_EMU_H
#define VCKATTN_AIE_API_EMU_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <deque>
#include <map>
#include <string>
#include <type_traits>
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

// ---------------------------------------------------------------------------- rounding / saturation

enum class rounding_mode : unsigned {
    floor,           // truncate: towards -inf (the hardware default)
    ceil,            // towards +inf
    positive_inf,    // halfway towards +inf (round half up)
    negative_inf,    // halfway towards -inf
    symmetric_inf,   // halfway away from zero
    symmetric_zero,  // halfway towards zero
    conv_even,       // halfway to the nearest even
    conv_odd,        // halfway to the nearest odd
};

enum class saturation_mode : unsigned {
    none,       // no saturation: the MSBs are truncated (the hardware default)
    saturate,   // [-2^(n-1), 2^(n-1) - 1]
    symmetric,  // [-(2^(n-1) - 1), 2^(n-1) - 1]
};

namespace emu {
struct modes {
    rounding_mode rnd = rounding_mode::floor;
    saturation_mode sat = saturation_mode::none;
};
inline modes& current_modes() {
    static modes m;
    return m;
}

// acc * 2^-shift rounded by the current rounding mode, then saturated (or wrapped) to T's bits. shift: 0..62
// (the AIE1 SRS range is -1..62, UG1078 "Shift-Round-Saturate"; the upshift by 1 is not modelled).
template <class T>
T srs(int64_t acc, int shift) {
    if (shift < 0 || shift > 62) {
        std::fprintf(stderr, "aie_api_emu: srs shift %d outside 0..62\n", shift);
        std::abort();
    }
    int64_t q = acc;
    if (shift > 0) {
        const int64_t one = int64_t(1) << shift, half = int64_t(1) << (shift - 1);
        q = acc >> shift;  // arithmetic: floor
        const int64_t r = acc - q * one;  // 0 <= r < 2^shift
        bool up = false;
        switch (current_modes().rnd) {
            case rounding_mode::floor: up = false; break;
            case rounding_mode::ceil: up = r != 0; break;
            case rounding_mode::positive_inf: up = r >= half; break;
            case rounding_mode::negative_inf: up = r > half; break;
            case rounding_mode::symmetric_inf: up = r > half || (r == half && acc >= 0); break;
            case rounding_mode::symmetric_zero: up = r > half || (r == half && acc < 0); break;
            case rounding_mode::conv_even: up = r > half || (r == half && (q & 1)); break;
            case rounding_mode::conv_odd: up = r > half || (r == half && !(q & 1)); break;
        }
        q += up ? 1 : 0;
    }
    const int64_t hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
    switch (current_modes().sat) {
        case saturation_mode::none: return static_cast<T>(q);  // two's complement wrap
        case saturation_mode::saturate: return static_cast<T>(q > hi ? hi : q < lo ? lo : q);
        case saturation_mode::symmetric: {
            const int64_t slo = std::numeric_limits<T>::is_signed ? -hi : lo;
            return static_cast<T>(q > hi ? hi : q < slo ? slo : q);
        }
    }
    return static_cast<T>(q);
}

inline void check_acc48(int64_t s) {
    if (s >= (int64_t(1) << 47) || s < -(int64_t(1) << 47)) {
        std::fprintf(stderr, "aie_api_emu: acc48 overflow\n");
        std::abort();
    }
}
}  // namespace emu

inline void set_rounding(rounding_mode m) {
    static std::uint64_t& count = emu::op_counter("set_rounding");
    ++count;
    emu::current_modes().rnd = m;
}

inline void set_saturation(saturation_mode m) {
    static std::uint64_t& count = emu::op_counter("set_saturation");
    ++count;
    emu::current_modes().sat = m;
}

inline rounding_mode get_rounding() { return emu::current_modes().rnd; }
inline saturation_mode get_saturation() { return emu::current_modes().sat; }

// ---------------------------------------------------------------------------- vectors

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

template <class T, unsigned N>
vector<T, N> broadcast(T x) {
    static std::uint64_t& count = emu::op_counter(emu::key("broadcast<%u,%s>", N, emu::type_name<T>::value));
    ++count;
    vector<T, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = x;
    return r;
}

// Element-wise a + b for a scalar b (lanes wrap like the hardware's).
template <class T, unsigned N>
vector<T, N> add(const vector<T, N>& a, T b) {
    static std::uint64_t& count = emu::op_counter(emu::key("add<%u,%s>(scalar)", N, emu::type_name<T>::value));
    ++count;
    vector<T, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = static_cast<T>(static_cast<int64_t>(a.v[i]) + static_cast<int64_t>(b));
    return r;
}

template <class T, unsigned N>
vector<T, N> min(const vector<T, N>& a, T b) {
    static std::uint64_t& count = emu::op_counter(emu::key("min<%u,%s>(scalar)", N, emu::type_name<T>::value));
    ++count;
    vector<T, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = a.v[i] < b ? a.v[i] : b;
    return r;
}

// One bit per lane (the result of a vector compare).
template <unsigned N>
struct mask {
    bool bits[N] = {};
    bool test(unsigned i) const { return bits[i]; }
};

template <class T, unsigned N>
mask<N> lt(const vector<T, N>& a, const vector<T, N>& b) {
    static std::uint64_t& count = emu::op_counter(emu::key("lt<%u,%s>", N, emu::type_name<T>::value));
    ++count;
    mask<N> m;
    for (unsigned i = 0; i < N; ++i) m.bits[i] = a.v[i] < b.v[i];
    return m;
}

template <class T, unsigned N>
mask<N> lt(const vector<T, N>& a, T b) {
    static std::uint64_t& count = emu::op_counter(emu::key("lt<%u,%s>(scalar)", N, emu::type_name<T>::value));
    ++count;
    mask<N> m;
    for (unsigned i = 0; i < N; ++i) m.bits[i] = a.v[i] < b;
    return m;
}

// m[i] ? b[i] : a (UG1529 aie::select(a, b, m): lanes of b where the mask bit is set, else a).
template <class T, unsigned N>
vector<T, N> select(T a, const vector<T, N>& b, const mask<N>& m) {
    static std::uint64_t& count = emu::op_counter(emu::key("select<%u,%s>(scalar)", N, emu::type_name<T>::value));
    ++count;
    vector<T, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = m.bits[i] ? b.v[i] : a;
    return r;
}

// ---------------------------------------------------------------------------- accumulators

}  // namespace aie

// The 48-bit and 80-bit accumulator tags of AIE1 (global types on the AI Engine compiler too).
struct acc48 {};
struct acc80 {};

namespace aie {

template <class Tag, unsigned N>
struct accum;

template <unsigned N>
struct accum<acc48, N> {
    int64_t v[N] = {};

    // srs of every lane by the current rounding and saturation modes.
    template <class T>
    vector<T, N> to_vector(int shift = 0) const {
        static std::uint64_t& count =
            emu::op_counter(emu::key("accum<acc48,%u>.to_vector<%s>", N, emu::type_name<T>::value));
        ++count;
        vector<T, N> r;
        for (unsigned i = 0; i < N; ++i) r.v[i] = emu::srs<T>(v[i], shift);
        return r;
    }

    // lanes = x * 2^shift (upshift)
    template <class T>
    void from_vector(const vector<T, N>& x, int shift = 0) {
        static std::uint64_t& count =
            emu::op_counter(emu::key("accum<acc48,%u>.from_vector<%s>", N, emu::type_name<T>::value));
        ++count;
        for (unsigned i = 0; i < N; ++i) {
            v[i] = static_cast<int64_t>(x.v[i]) * (int64_t(1) << shift);
            emu::check_acc48(v[i]);
        }
    }

    template <unsigned M>
    accum<acc48, M> extract(unsigned idx) const {
        static_assert(N % M == 0, "extract size must divide the accumulator size");
        static std::uint64_t& count = emu::op_counter(emu::key("extract<%u>(accum<acc48,%u>)", M, N));
        ++count;
        if (idx >= N / M) {
            std::fprintf(stderr, "aie_api_emu: accum extract<%u>(%u) out of range\n", M, idx);
            std::abort();
        }
        accum<acc48, M> r;
        for (unsigned i = 0; i < M; ++i) r.v[i] = v[M * idx + i];
        return r;
    }
};

// The 80-bit accumulator of AIE1's 32x16-bit and 32x32-bit multiplies (v8acc80 registers). Lanes are modelled in
// int64: the products formed here, int32 x int16 and int32 x int32, are below 2^62 in magnitude, exact in both.
template <unsigned N>
struct accum<acc80, N> {
    int64_t v[N] = {};

    // srs of every lane by the current rounding and saturation modes. The AIE API's AIE1 to_vector<int8> of an acc80
    // accumulator (aie_api/detail/aie1/accum.hpp) goes through 32 bits: srs of each v8acc80 to v8int32 with the
    // shift (rounded, saturated to 32 bits), ups of two of them to a v16acc48, bsrs (shift 0) to v16int8; a
    // saturation to 32 bits then to 8 (or a wrap then a wrap) is the saturation (wrap) to 8 bits, so one srs<T> per
    // lane gives the same values. It has no 8-lane form (no acc80 -> int8 of one v8acc80): N >= 16 for 8-bit T.
    template <class T>
    vector<T, N> to_vector(int shift = 0) const {
        static_assert(sizeof(T) != 1 || N % 16 == 0, "AIE1: to_vector<int8> of acc80 needs 16, 32 or 64 lanes");
        static std::uint64_t& count =
            emu::op_counter(emu::key("accum<acc80,%u>.to_vector<%s>", N, emu::type_name<T>::value));
        ++count;
        vector<T, N> r;
        for (unsigned i = 0; i < N; ++i) r.v[i] = emu::srs<T>(v[i], shift);
        return r;
    }
};

template <unsigned N>
accum<acc48, 4 * N> concat(const accum<acc48, N>& a, const accum<acc48, N>& b, const accum<acc48, N>& c,
                           const accum<acc48, N>& d) {
    static std::uint64_t& count = emu::op_counter(emu::key("concat<acc48,%u>x4", N));
    ++count;
    accum<acc48, 4 * N> r;
    const accum<acc48, N>* parts[4] = {&a, &b, &c, &d};
    for (unsigned p = 0; p < 4; ++p)
        for (unsigned i = 0; i < N; ++i) r.v[p * N + i] = parts[p]->v[i];
    return r;
}

// Lane-wise products a[i] * b[i] into an accumulator (aie::mul<AccumTag>(v1, v2)): modelled for int32 x int16 and
// int32 x int32 into acc80 only, the AIE1 32x16-bit and 32x32-bit multiplies (aie_api/detail/aie1/mul_acc80.hpp:
// one lmul8 intrinsic per 8 lanes). Products are below 2^62 in magnitude: exact in the int64 lanes.
template <class AccTag, class T1, class T2, unsigned N>
accum<AccTag, N> mul(const vector<T1, N>& a, const vector<T2, N>& b) {
    static_assert(std::is_same<AccTag, acc80>::value && std::is_same<T1, int32_t>::value &&
                      (std::is_same<T2, int16_t>::value || std::is_same<T2, int32_t>::value),
                  "aie_api_emu models aie::mul<acc80> of int32 by int16 or int32 lanes only");
    static std::uint64_t& count =
        emu::op_counter(emu::key("mul<acc80,%u,int32,%s>", N, emu::type_name<T2>::value));
    ++count;
    accum<AccTag, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = static_cast<int64_t>(a.v[i]) * static_cast<int64_t>(b.v[i]);
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

    mmul() = default;

    // Starts from an accumulator (e.g. a partial sum read from the cascade).
    explicit mmul(const accum<acc48, M * N>& a) {
        static std::uint64_t& count = emu::op_counter(op_key("from_accum"));
        ++count;
        for (unsigned i = 0; i < size_C; ++i) acc[i] = a.v[i];
    }

    // The accumulator (e.g. to pass on along the cascade).
    accum<acc48, M * N> to_accum() const {
        static std::uint64_t& count = emu::op_counter(op_key("to_accum"));
        ++count;
        accum<acc48, M * N> r;
        for (unsigned i = 0; i < size_C; ++i) r.v[i] = acc[i];
        return r;
    }

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
                emu::check_acc48(s);
                acc[m * N + n] = s;
            }
    }

    // srs: shift right, round and saturate by the current modes (aie::set_rounding / set_saturation).
    template <class T>
    vector<T, size_C> to_vector(int shift = 0) const {
        static std::uint64_t& count =
            emu::op_counter(op_key(emu::key("to_vector<%s>", emu::type_name<T>::value).c_str()));
        ++count;
        vector<T, size_C> r;
        for (unsigned i = 0; i < size_C; ++i) r.v[i] = emu::srs<T>(acc[i], shift);
        return r;
    }
};

}  // namespace aie

// ---------------------------------------------------------------------------- ADF cascade ports (host)

// A cascade between two kernels: a FIFO of 8-lane acc48 words. Reading an empty FIFO yields zeros and
// counts the word in missing (the test bench turns that into an error).
struct cascade_fifo {
    std::deque<aie::accum<acc48, 8> > words;
    std::size_t missing = 0;
};

template <class T>
struct input_cascade {
    cascade_fifo* fifo;
};

template <class T>
struct output_cascade {
    cascade_fifo* fifo;
};

// One cascade word in (ADF: readincr_v<8>(input_cascade<acc48>*)).
template <unsigned N>
aie::accum<acc48, N> readincr_v(input_cascade<acc48>* c) {
    static_assert(N == 8, "an AIE1 cascade word is 8 lanes of acc48 (384 bits)");
    static std::uint64_t& count = aie::emu::op_counter("readincr_v<8>(input_cascade<acc48>)");
    ++count;
    if (c->fifo->words.empty()) {
        ++c->fifo->missing;
        return aie::accum<acc48, N>();
    }
    aie::accum<acc48, N> r = c->fifo->words.front();
    c->fifo->words.pop_front();
    return r;
}

// One cascade word out (ADF: writeincr(output_cascade<acc48>*, accum<acc48, 8>)).
inline void writeincr(output_cascade<acc48>* c, const aie::accum<acc48, 8>& a) {
    static std::uint64_t& count = aie::emu::op_counter("writeincr(output_cascade<acc48>)");
    ++count;
    c->fifo->words.push_back(a);
}

// Scalar work the kernel code issues (see the file comment).
#define VCK_SCALAR(n)                                                                        \
    do {                                                                                     \
        static std::uint64_t& vck_scalar_count_ = ::aie::emu::op_counter("scalar");          \
        vck_scalar_count_ += static_cast<std::uint64_t>(n);                                  \
    } while (0)
#define VCK_SCALAR_LOAD(n)                                                                   \
    do {                                                                                     \
        static std::uint64_t& vck_scalar_count_ = ::aie::emu::op_counter("scalar_load");     \
        vck_scalar_count_ += static_cast<std::uint64_t>(n);                                  \
    } while (0)
#define VCK_SCALAR_STORE(n)                                                                  \
    do {                                                                                     \
        static std::uint64_t& vck_scalar_count_ = ::aie::emu::op_counter("scalar_store");    \
        vck_scalar_count_ += static_cast<std::uint64_t>(n);                                  \
    } while (0)
// scalar operations per iteration of a loop that is not innermost (increment, conditional branch)
#define VCK_LOOP_ITER 2
// scalar operations per entry of an innermost, software-pipelined loop (the loop count register)
#define VCK_LOOP_ENTRY 1

#endif

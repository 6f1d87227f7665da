// Test bench of the published GEMM kernels rendered in hw/aie/published/gemm_kernels.h (MaxEVA int8,
// MaxEVA's adder, CHARM fp32, ARIES fp32), over the counting emulations aie_api_emu.h and aie1_intrinsics_emu.h.
//
// Usage: published_gemm_tb CASE...   with CASE one of
//   maxeva_int8:MxKxN         C = A B, int8 x int8 -> int32, MaxEVA's blocked layout
//   maxeva_add_int32:ELEMS    out = in_1 + in_2, int32
//   maxeva_add_float:ELEMS    out = in_1 + in_2, float
//   charm_fp32:H1xW1xW2       C = A B, fp32, column-major (CHARM's mm_kernel0)
//   charm_fp32_acc:H1xW1xW2   C = A B + ACC, fp32 (mm_kernel1: partial sums from an acc_in window)
//   aries_fp32:TIxTKxTJ       C = A B, fp32, row-major (ARIES's kernel_gemm0)
//   aries_fp32_acc:TIxTKxTJ   C = A B + ACC, fp32 (ARIES's kernel_gemm: partial sums from a buffer)
//
// Each case runs the kernel once on pseudo-random data (a fixed seed per case) and checks its output
// against a plain C++ reference, exactly: int8 products are exact in int32, and the fp32 cases use small
// integers (|x| <= 4) so that every product and partial sum is exact in fp32 whatever the order. A
// mismatch prints the first bad element on stderr and exits with status 1; a malformed case exits with
// status 2. For each case one JSON line goes to stdout: {"case": ..., "kernel": ..., "dims": [...],
// "counts": {operation: count, ...}} with the non-zero counters of that run alone.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "published/gemm_kernels.h"

namespace {

// A buffer aligned to 64 bytes (AIE1 accesses are checked for 128/256-bit alignment).
template <class T>
class Buffer {
public:
    explicit Buffer(std::size_t n) : n_(n) {
        const std::size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
        p_ = static_cast<T*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes));
        if (p_ == nullptr) std::abort();
        for (std::size_t i = 0; i < n; ++i) p_[i] = T();
    }
    ~Buffer() { std::free(p_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    T* data() { return p_; }
    T& operator[](std::size_t i) { return p_[i]; }
    std::size_t size() const { return n_; }

private:
    std::size_t n_;
    T* p_;
};

// xorshift64*: a fixed, platform-independent sequence.
class Rng {
public:
    explicit Rng(std::uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
    std::uint64_t next() {
        s_ ^= s_ >> 12;
        s_ ^= s_ << 25;
        s_ ^= s_ >> 27;
        return s_ * 0x2545F4914F6CDD1Dull;
    }
    int uniform(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }

private:
    std::uint64_t s_;
};

[[noreturn]] void usage(const std::string& why) {
    std::cerr << "published_gemm_tb: " << why << "\n";
    std::exit(2);
}

std::vector<int> parse_dims(const std::string& text, std::size_t want) {
    std::vector<int> dims;
    std::stringstream ss(text);
    std::string part;
    while (std::getline(ss, part, 'x')) {
        char* end = nullptr;
        const long v = std::strtol(part.c_str(), &end, 10);
        if (part.empty() || *end != '\0' || v <= 0 || v > 4096) usage("bad dimension '" + part + "' in '" + text + "'");
        dims.push_back(static_cast<int>(v));
    }
    if (dims.size() != want) usage("'" + text + "' needs " + std::to_string(want) + " dimensions");
    return dims;
}

void dump(const std::string& case_text, const std::string& kernel, const std::vector<int>& dims) {
    std::cout << "{\"case\": \"" << case_text << "\", \"kernel\": \"" << kernel << "\", \"dims\": [";
    for (std::size_t i = 0; i < dims.size(); ++i) std::cout << (i ? ", " : "") << dims[i];
    std::cout << "], \"counts\": {";
    bool first = true;
    for (const auto& kv : aie::emu::op_counts()) {
        if (kv.second == 0) continue;
        std::cout << (first ? "" : ", ") << "\"" << kv.first << "\": " << kv.second;
        first = false;
    }
    std::cout << "}}\n";
}

template <class T>
void check(const std::string& case_text, std::size_t i, T got, T want) {
    if (got != want) {
        std::cerr << "published_gemm_tb: " << case_text << ": element " << i << " is " << got << ", the reference "
                  << want << "\n";
        std::exit(1);
    }
}

// MaxEVA int8. Element (r, c) of an R x C matrix in blocks of BR x BC: block (r / BR, c / BC) in
// row-major block order, row-major inside the block.
std::size_t blocked(int r, int c, int cols, int br, int bc) {
    const int blocks_per_row = cols / bc;
    return (static_cast<std::size_t>(r / br) * blocks_per_row + c / bc) * (br * bc) + (r % br) * bc + (c % bc);
}

void run_maxeva_int8(const std::string& case_text, int m, int k, int n, Rng& rng) {
    std::vector<int> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n);
    for (int& x : a) x = rng.uniform(-128, 127);
    for (int& x : b) x = rng.uniform(-128, 127);
    Buffer<int8> ab(a.size()), bb(b.size());
    Buffer<int32> cb(static_cast<std::size_t>(m) * n);
    for (int r = 0; r < m; ++r)
        for (int c = 0; c < k; ++c) ab[blocked(r, c, k, 4, 8)] = static_cast<int8>(a[r * k + c]);
    for (int r = 0; r < k; ++r)
        for (int c = 0; c < n; ++c) bb[blocked(r, c, n, 8, 4)] = static_cast<int8>(b[r * n + c]);
    auto wa = make_window(ab.data(), static_cast<unsigned>(ab.size()));
    auto wb = make_window(bb.data(), static_cast<unsigned>(bb.size()));
    auto wc = make_window(cb.data(), static_cast<unsigned>(cb.size()));
    aie::emu::reset_op_counts();
    published::maxeva_int8_matmul(&wa, &wb, &wc, m, k, n, 0);
    dump(case_text, "maxeva_int8", {m, k, n});
    for (int r = 0; r < m; ++r)
        for (int c = 0; c < n; ++c) {
            std::int64_t want = 0;
            for (int t = 0; t < k; ++t) want += static_cast<std::int64_t>(a[r * k + t]) * b[t * n + c];
            check(case_text, static_cast<std::size_t>(r) * n + c, static_cast<std::int64_t>(cb[blocked(r, c, n, 4, 4)]),
                  want);
        }
}

template <class T>
void run_maxeva_add(const std::string& case_text, const char* kernel, int elems, Rng& rng) {
    Buffer<T> x(elems), y(elems), z(elems);
    for (int i = 0; i < elems; ++i) {
        x[i] = static_cast<T>(rng.uniform(-1000, 1000));
        y[i] = static_cast<T>(rng.uniform(-1000, 1000));
    }
    auto wx = make_window(x.data(), elems);
    auto wy = make_window(y.data(), elems);
    auto wz = make_window(z.data(), elems);
    aie::emu::reset_op_counts();
    published::maxeva_vector_add(&wx, &wy, &wz, static_cast<unsigned>(elems));
    dump(case_text, kernel, {elems});
    for (int i = 0; i < elems; ++i) check(case_text, i, z[i], static_cast<T>(x[i] + y[i]));
}

// CHARM fp32, column-major: element (r, c) of an R-row matrix at c * R + r.
template <bool AccIn>
void run_charm(const std::string& case_text, int h1, int w1, int w2, Rng& rng) {
    Buffer<float> a(static_cast<std::size_t>(h1) * w1), b(static_cast<std::size_t>(w1) * w2),
        acc(static_cast<std::size_t>(h1) * w2), c(static_cast<std::size_t>(h1) * w2);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(rng.uniform(-4, 4));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(rng.uniform(-4, 4));
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = AccIn ? static_cast<float>(rng.uniform(-4, 4)) : 0.0f;
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = __builtin_nanf("");
    auto wa = make_window(a.data(), static_cast<unsigned>(a.size()));
    auto wb = make_window(b.data(), static_cast<unsigned>(b.size()));
    auto wacc = make_window(acc.data(), static_cast<unsigned>(acc.size()));
    auto wc = make_window(c.data(), static_cast<unsigned>(c.size()));
    aie::emu::reset_op_counts();
    published::charm_fp32_matmul<AccIn>(&wa, &wb, &wacc, &wc, h1, w1, w2);
    dump(case_text, AccIn ? "charm_fp32_acc" : "charm_fp32", {h1, w1, w2});
    for (int r = 0; r < h1; ++r)
        for (int col = 0; col < w2; ++col) {
            double want = acc[static_cast<std::size_t>(col) * h1 + r];
            for (int t = 0; t < w1; ++t)
                want += static_cast<double>(a[static_cast<std::size_t>(t) * h1 + r]) * b[static_cast<std::size_t>(col) * w1 + t];
            const std::size_t i = static_cast<std::size_t>(col) * h1 + r;
            check(case_text, i, static_cast<double>(c[i]), want);
        }
}

// ARIES fp32, row-major: element (r, c) of a C-column matrix at r * C + c.
template <bool AccIn>
void run_aries(const std::string& case_text, int ti, int tk, int tj, Rng& rng) {
    Buffer<float> a(static_cast<std::size_t>(ti) * tk), b(static_cast<std::size_t>(tk) * tj),
        acc(static_cast<std::size_t>(ti) * tj), c(static_cast<std::size_t>(ti) * tj);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(rng.uniform(-4, 4));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(rng.uniform(-4, 4));
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = AccIn ? static_cast<float>(rng.uniform(-4, 4)) : 0.0f;
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = __builtin_nanf("");
    aie::emu::reset_op_counts();
    published::aries_fp32_matmul<AccIn>(a.data(), b.data(), acc.data(), c.data(), ti, tj, tk);
    dump(case_text, AccIn ? "aries_fp32_acc" : "aries_fp32", {ti, tk, tj});
    for (int r = 0; r < ti; ++r)
        for (int col = 0; col < tj; ++col) {
            double want = acc[static_cast<std::size_t>(r) * tj + col];
            for (int t = 0; t < tk; ++t)
                want += static_cast<double>(a[static_cast<std::size_t>(r) * tk + t]) * b[static_cast<std::size_t>(t) * tj + col];
            const std::size_t i = static_cast<std::size_t>(r) * tj + col;
            check(case_text, i, static_cast<double>(c[i]), want);
        }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) usage("no case given (usage: published_gemm_tb CASE...)");
    for (int i = 1; i < argc; ++i) {
        const std::string text = argv[i];
        const auto colon = text.find(':');
        if (colon == std::string::npos) usage("case '" + text + "' has no ':'");
        const std::string kernel = text.substr(0, colon), dims = text.substr(colon + 1);
        Rng rng(static_cast<std::uint64_t>(i) * 7919u + text.size());
        if (kernel == "maxeva_int8") {
            const auto d = parse_dims(dims, 3);
            if (d[0] % 8 || d[1] % 8 || d[2] % 8) usage(text + ": M, K and N must be multiples of 8");
            run_maxeva_int8(text, d[0], d[1], d[2], rng);
        } else if (kernel == "maxeva_add_int32" || kernel == "maxeva_add_float") {
            const int elems = parse_dims(dims, 1)[0];
            if (elems % 8) usage(text + ": ELEMS must be a multiple of 8");
            if (kernel == "maxeva_add_int32")
                run_maxeva_add<int32>(text, "maxeva_add_int32", elems, rng);
            else
                run_maxeva_add<float>(text, "maxeva_add_float", elems, rng);
        } else if (kernel == "charm_fp32" || kernel == "charm_fp32_acc") {
            const auto d = parse_dims(dims, 3);
            if (d[0] % 8 || d[1] % 8 || d[2] % 2) usage(text + ": H1 and W1 must be multiples of 8, W2 of 2");
            if (kernel == "charm_fp32")
                run_charm<false>(text, d[0], d[1], d[2], rng);
            else
                run_charm<true>(text, d[0], d[1], d[2], rng);
        } else if (kernel == "aries_fp32" || kernel == "aries_fp32_acc") {
            const auto d = parse_dims(dims, 3);
            if (d[0] % 2 || d[1] % 8 || d[2] % 8) usage(text + ": TI must be a multiple of 2, TK and TJ of 8");
            if (kernel == "aries_fp32")
                run_aries<false>(text, d[0], d[1], d[2], rng);
            else
                run_aries<true>(text, d[0], d[1], d[2], rng);
        } else {
            usage("unknown kernel '" + kernel + "'");
        }
    }
    return 0;
}

// apfixed_probe.cpp -- bit-exact reference for golden/fixedpoint.py, built on the real
// AMD/Xilinx HLS arbitrary-precision headers (ap_fixed.h as shipped in the hls4ml wheel).
//
// The list of conversions to probe is compile-time (every ap_fixed format is a template
// argument), so tests/test_fixedpoint_apfixed.py generates it: it prepends
//     #define PROBE_CASES X(fn0) X(fn1) ...
// to this file and compiles the result once (cached by sim/hls_csim.py). Compiled on its own,
// the file uses the small demonstration list below.
//
// Case kinds (each one a function `unsigned long long f(long long raw)`):
//   from_double<D>      raw = IEEE-754 bit pattern of a double x;  D d = x;
//   convert<S, D>       raw = two's-complement raw bits of an S;   D d = s;
// The output is the destination's raw bits d.range(W-1, 0) as an unsigned integer (the caller
// sign-extends signed formats).
//
// Negative case ids evaluate the C integer idioms for rounding a right shift by a run-time
// amount s (s < 0: exact left shift), as HDL/HLS code writes them; 128-bit intermediates:
//   -1  floor      x >> s                                 (arithmetic shift)
//   -2  half_up    (x + 2^(s-1)) >> s                     (add half an LSB, ties toward +inf)
//   -3  half_even  (x + 2^(s-1) - 1 + ((x >> s) & 1)) >> s (convergent rounding)
// The result is printed as the 64 bits of a signed integer.
//
// Protocol: stdin holds lines "<case id> <a> <b>" (int64s): for case ids >= 0, a is the raw
// input and b is ignored; for the idioms a = x and b = s. stdout gets one decimal per line.
#include <ap_fixed.h>
#include <ap_int.h>

#include <cstdio>
#include <cstring>

typedef unsigned long long u64;
typedef long long i64;

template <class T>
static u64 bits_of(const T& v) {
  ap_uint<T::width> r = v.range(T::width - 1, 0);
  return r.to_uint64();
}

template <class T>
static T from_bits(i64 raw) {
  T v;
  v.range(T::width - 1, 0) = ap_uint<T::width>((u64)raw);  // keeps the low W bits
  return v;
}

template <class D>
static u64 from_double(i64 raw) {
  double x;
  std::memcpy(&x, &raw, sizeof x);
  D d = x;  // ap_fixed_base(double): quantization + overflow of the destination type
  return bits_of(d);
}

template <class S, class D>
static u64 convert(i64 raw) {
  S s = from_bits<S>(raw);
  D d = s;  // ap_fixed_base::operator=(const ap_fixed_base<...>&)
  return bits_of(d);
}

#ifndef PROBE_CASES
#define PROBE_CASES                                                \
  X((from_double<ap_fixed<8, 4, AP_RND_CONV, AP_SAT> >))           \
  X((from_double<ap_ufixed<8, 4, AP_RND, AP_WRAP> >))              \
  X((convert<ap_fixed<16, 8>, ap_fixed<8, 4, AP_RND_CONV, AP_SAT> >))
#endif

static u64 int_idiom(long id, i64 x, i64 s) {
  typedef __int128 i128;
  if (s <= 0) return (u64)(i64)((i128)x * ((i128)1 << -s));  // exact left shift
  const i128 half = (i128)1 << (s - 1);
  i128 v = x;
  if (id == -2) v += half;
  if (id == -3) v += half - 1 + ((x >> s) & 1);
  return (u64)(i64)(v >> s);
}

typedef u64 (*probe_fn)(i64);
#define X(fn) &fn,
static const probe_fn kCases[] = {PROBE_CASES};
#undef X
static const long kNumCases = sizeof kCases / sizeof kCases[0];

int main() {
  long id;
  i64 a, b;
  while (std::scanf("%ld %lld %lld", &id, &a, &b) == 3) {
    if (id >= -3 && id <= -1) {
      if (b < -62 || b > 62) {
        std::fprintf(stderr, "apfixed_probe: shift %lld out of range\n", b);
        return 2;
      }
      std::printf("%llu\n", int_idiom(id, a, b));
      continue;
    }
    if (id < 0 || id >= kNumCases) {
      std::fprintf(stderr, "apfixed_probe: case id %ld out of range 0..%ld\n", id, kNumCases - 1);
      return 2;
    }
    std::printf("%llu\n", kCases[id](a));
  }
  return 0;
}

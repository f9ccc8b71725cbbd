// See exp_lanes.h.
#include "kernels/cpu/exp_lanes.h"

#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#define CB_EXP_X86 1
#else
#define CB_EXP_X86 0
#endif

// Every helper below is always inlined, at every optimization level, into the entry points of
// both ISAs: a 32-byte vector is never passed in a call, where a function compiled for the
// baseline and one compiled for AVX2 would disagree on how (GCC's -Wpsabi; at -O0 the
// sanitizer build did call them, and read garbage).
#define CB_INLINE inline __attribute__((always_inline))

namespace cb::kernels::cpu {
namespace {

constexpr int kLanes = 8;
typedef float F8 __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t I8 __attribute__((vector_size(kLanes * sizeof(int32_t))));
typedef uint32_t U8 __attribute__((vector_size(kLanes * sizeof(uint32_t))));
typedef double D8 __attribute__((vector_size(kLanes * sizeof(double))));

CB_INLINE F8 splat(float v) {
  return F8{v, v, v, v, v, v, v, v};
}
CB_INLINE I8 bits(F8 v) {
  return __builtin_bit_cast(I8, v);
}
CB_INLINE F8 from_bits(I8 v) {
  return __builtin_bit_cast(F8, v);
}
/// where mask (all ones or zeros per lane) is set, a; else b.
CB_INLINE F8 select(I8 mask, F8 a, F8 b) {
  return from_bits((bits(a) & mask) | (bits(b) & ~mask));
}

/// ln(FLT_MIN): below it expf is subnormal; here 0.
constexpr float kLo = -87.3365447505531f;
/// ln(FLT_MAX): above it, +inf.
constexpr float kHi = 88.7228391116729f;
constexpr float kLog2e = 1.44269504088896341f;
/// ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 9 significant bits, so k * kLn2Hi is exact for |k| < 2^15.
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
/// 1.5 * 2^23: adding it rounds a float of magnitude under 2^22 to an integer held in the low
/// mantissa bits (round to nearest even).
constexpr float kRound = 12582912.0f;
constexpr int32_t kRoundBits = 0x4B400000;

CB_INLINE F8 exp8(F8 x) {
  const I8 under = x < splat(kLo);  // false for NaN
  const I8 over = x > splat(kHi);
  x = select(under, splat(kLo), x);
  x = select(over, splat(kHi), x);
  // k = round(x / ln2), as a float and as its integer in the low bits of kf.
  const F8 kf = x * splat(kLog2e) + splat(kRound);
  const F8 k = kf - splat(kRound);
  F8 r = x - k * splat(kLn2Hi);
  r = r - k * splat(kLn2Lo);
  // e^r = 1 + r + r^2 P(r) on |r| <= ln2 / 2 (Cephes expf's coefficients).
  F8 p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  const F8 y = p * r * r + r + splat(1.0f);
  // 2^k in the exponent bits, k in [-126, 128] here (unsigned arithmetic: a NaN's bits are only
  // bits). 2^128 is not a float: at k = 128 (x within an ulp or so of kHi) 2^127, then times 2.
  const U8 k_int = __builtin_bit_cast(U8, kf) - static_cast<uint32_t>(kRoundBits);
  const I8 top = __builtin_bit_cast(I8, k_int) == 128;
  const U8 k_use = k_int + __builtin_bit_cast(U8, top);  // top is all ones (-1) or 0
  F8 out = y * __builtin_bit_cast(F8, (k_use + 127u) << 23);
  out = select(top, out * splat(2.0f), out);
  out = select(under, splat(0.0f), out);
  out = select(over, splat(std::numeric_limits<float>::infinity()), out);
  return out;
}

CB_INLINE F8 load(const float* x) {
  F8 v;
  std::memcpy(&v, x, sizeof v);
  return v;
}
CB_INLINE void store(float* x, F8 v) {
  std::memcpy(x, &v, sizeof v);
}

/// The last n < kLanes elements in a vector; the other lanes hold `fill`.
CB_INLINE F8 load_tail(const float* x, int64_t n, float fill) {
  float buf[kLanes];
  for (int i = 0; i < kLanes; ++i) buf[i] = i < n ? x[i] : fill;
  return load(buf);
}
CB_INLINE void store_tail(float* x, int64_t n, F8 v) {
  float buf[kLanes];
  store(buf, v);
  std::memcpy(x, buf, static_cast<size_t>(n) * sizeof(float));
}

/// The bodies of the entry points, compiled once per ISA below.
CB_INLINE void exp_body(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(x + i, exp8(load(x + i)));
  if (i < n) store_tail(x + i, n - i, exp8(load_tail(x + i, n - i, 0.0f)));
}

CB_INLINE double shifted_sum_body(float* x, int64_t n, float shift) {
  D8 acc = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F8 e = exp8(load(x + i) - splat(shift));
    store(x + i, e);
    acc += __builtin_convertvector(e, D8);
  }
  if (i < n) {
    const F8 e = exp8(load_tail(x + i, n - i, 0.0f) - splat(shift));
    store_tail(x + i, n - i, e);
    for (int64_t l = 0; l < n - i; ++l) acc[l] += e[l];  // the real lanes only
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

CB_INLINE float max_body(const float* x, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  F8 m = splat(ninf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F8 v = load(x + i);
    m = select(v > m, v, m);
  }
  if (i < n) {
    const F8 v = load_tail(x + i, n - i, ninf);
    m = select(v > m, v, m);
  }
  float r = ninf;
  for (int l = 0; l < kLanes; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

void exp_base(float* x, int64_t n) {
  exp_body(x, n);
}
double shifted_sum_base(float* x, int64_t n, float shift) {
  return shifted_sum_body(x, n, shift);
}
float max_base(const float* x, int64_t n) {
  return max_body(x, n);
}

#if CB_EXP_X86
// The same bodies with 256-bit registers. No FMA: the same operations in the same order as the
// baseline's, so the two give identical bits (exp_lanes_test.cc compares them).
#define CB_AVX2 __attribute__((target("avx2")))
CB_AVX2 void exp_avx2(float* x, int64_t n) {
  exp_body(x, n);
}
CB_AVX2 double shifted_sum_avx2(float* x, int64_t n, float shift) {
  return shifted_sum_body(x, n, shift);
}
CB_AVX2 float max_avx2(const float* x, int64_t n) {
  return max_body(x, n);
}
#endif

}  // namespace

ExpIsa exp_best_isa() {
#if CB_EXP_X86
  static const ExpIsa best = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? ExpIsa::Avx2 : ExpIsa::Baseline;
  }();
  return best;
#else
  return ExpIsa::Baseline;
#endif
}

void exp_lanes(float* x, int64_t n, ExpIsa isa) {
#if CB_EXP_X86
  if (isa == ExpIsa::Avx2) return exp_avx2(x, n);
#endif
  (void)isa;
  exp_base(x, n);
}

double exp_shifted_sum(float* x, int64_t n, float shift, ExpIsa isa) {
#if CB_EXP_X86
  if (isa == ExpIsa::Avx2) return shifted_sum_avx2(x, n, shift);
#endif
  (void)isa;
  return shifted_sum_base(x, n, shift);
}

float max_lanes(const float* x, int64_t n, ExpIsa isa) {
#if CB_EXP_X86
  if (isa == ExpIsa::Avx2) return max_avx2(x, n);
#endif
  (void)isa;
  return max_base(x, n);
}

float exp_lane(float x, ExpIsa isa) {
  float v = x;
  exp_lanes(&v, 1, isa);
  return v;
}

}  // namespace cb::kernels::cpu

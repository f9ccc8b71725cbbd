// See exp_lanes.h.
#include "kernels/cpu/exp_lanes.h"

#include <cstring>

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

/// Vectors of W floats, the int32 and uint32 vectors of the same size, and W doubles. The
/// baseline takes W = 4 (one SSE register; eight-float vectors lowered to SSE were slower than
/// libm), AVX2 W = 8.
template <int W>
struct Vec {
  typedef float F __attribute__((vector_size(W * sizeof(float))));
  typedef int32_t I __attribute__((vector_size(W * sizeof(int32_t))));
  typedef uint32_t U __attribute__((vector_size(W * sizeof(uint32_t))));
  typedef double D __attribute__((vector_size(W * sizeof(double))));
};

/// Elements per step of every entry point, whatever W: the sums' eight lanes (element i is
/// added into lane i % 8), so both widths add in the same order.
constexpr int kStep = 8;

template <typename V>
CB_INLINE V splat(float v) {
  return V{} + v;
}
/// Where `mask` (all ones or all zeros per lane) is set, a; else b.
template <typename F, typename I>
CB_INLINE F select(I mask, F a, F b) {
  return __builtin_bit_cast(F,
                            (__builtin_bit_cast(I, a) & mask) | (__builtin_bit_cast(I, b) & ~mask));
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
constexpr uint32_t kRoundBits = 0x4B400000;
/// A constant, not numeric_limits' function: at -O0 (the sanitizer build) that was a call per
/// vector, a tenth of a replay's time.
constexpr float kInf = __builtin_inff();

template <int W>
CB_INLINE typename Vec<W>::F exp_v(typename Vec<W>::F x) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  using U = typename Vec<W>::U;
  const I under = x < splat<F>(kLo);  // false for NaN
  const I over = x > splat<F>(kHi);
  x = select(under, splat<F>(kLo), x);
  x = select(over, splat<F>(kHi), x);
  // k = round(x / ln2), as a float and as its integer in the low bits of kf.
  const F kf = x * splat<F>(kLog2e) + splat<F>(kRound);
  const F k = kf - splat<F>(kRound);
  F r = x - k * splat<F>(kLn2Hi);
  r = r - k * splat<F>(kLn2Lo);
  // e^r = 1 + r + r^2 P(r) on |r| <= ln2 / 2 (Cephes expf's coefficients).
  F p = splat<F>(1.9875691500e-4f);
  p = p * r + splat<F>(1.3981999507e-3f);
  p = p * r + splat<F>(8.3334519073e-3f);
  p = p * r + splat<F>(4.1665795894e-2f);
  p = p * r + splat<F>(1.6666665459e-1f);
  p = p * r + splat<F>(5.0000001201e-1f);
  const F y = p * r * r + r + splat<F>(1.0f);
  // 2^k in the exponent bits, k in [-126, 128] here (unsigned arithmetic: a NaN's bits are only
  // bits). 2^128 is not a float: at k = 128 (x within an ulp or so of kHi) 2^127, then times 2.
  const U k_int = __builtin_bit_cast(U, kf) - kRoundBits;
  const I top = __builtin_bit_cast(I, k_int) == 128;
  const U k_use = k_int + __builtin_bit_cast(U, top);  // top is all ones (-1) or 0
  F out = y * __builtin_bit_cast(F, (k_use + 127u) << 23);
  out = select(top, out * splat<F>(2.0f), out);
  out = select(under, splat<F>(0.0f), out);
  out = select(over, splat<F>(kInf), out);
  return out;
}

template <typename V>
CB_INLINE V load(const float* x) {
  V v;
  std::memcpy(&v, x, sizeof v);
  return v;
}
template <typename V>
CB_INLINE void store(float* x, V v) {
  std::memcpy(x, &v, sizeof v);
}

/// The last n < kStep elements of x in buf, the other lanes `fill`.
CB_INLINE void pad(float* buf, const float* x, int64_t n, float fill) {
  for (int l = 0; l < kStep; ++l) buf[l] = l < n ? x[l] : fill;
}

/// p[0, kStep) = exp(p - shift), W at a time; acc[j] += the results of p[j W, (j + 1) W).
template <int W>
CB_INLINE void exp_step(float* p, float shift, typename Vec<W>::D* acc) {
  using F = typename Vec<W>::F;
  using D = typename Vec<W>::D;
  for (int h = 0; h < kStep; h += W) {
    const F e = exp_v<W>(load<F>(p + h) - splat<F>(shift));
    store(p + h, e);
    if (acc != nullptr) acc[h / W] += __builtin_convertvector(e, D);
  }
}

/// exp(x - shift) over x[0, n) in steps, the last n % kStep elements through a padded copy;
/// with `acc`, every result added into its lane (element i into lane i % kStep).
template <int W>
CB_INLINE void exp_steps(float* x, int64_t n, float shift, typename Vec<W>::D* acc) {
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) exp_step<W>(x + i, shift, acc);
  if (i < n) {
    float buf[kStep];
    pad(buf, x + i, n - i, 0.0f);
    exp_step<W>(buf, shift, nullptr);
    std::memcpy(x + i, buf, static_cast<size_t>(n - i) * sizeof(float));
    if (acc != nullptr) {
      for (int64_t l = 0; l < n - i; ++l) acc[l / W][l % W] += buf[l];  // the real lanes only
    }
  }
}

/// m[j] = the lane-wise max of m[j] and p[j W, (j + 1) W).
template <int W>
CB_INLINE void max_step(const float* p, typename Vec<W>::F* m) {
  using F = typename Vec<W>::F;
  for (int h = 0; h < kStep; h += W) {
    const F v = load<F>(p + h);
    m[h / W] = select(v > m[h / W], v, m[h / W]);
  }
}

// The bodies of the entry points, compiled once per ISA below.

template <int W>
CB_INLINE void exp_body(float* x, int64_t n) {
  exp_steps<W>(x, n, 0.0f, nullptr);  // x - 0 is x, bit for bit (-0 and NaN included)
}

template <int W>
CB_INLINE double shifted_sum_body(float* x, int64_t n, float shift) {
  typename Vec<W>::D acc[kStep / W] = {};  // lane l of the eight: acc[l / W][l % W]
  exp_steps<W>(x, n, shift, acc);
  double s[kStep];
  for (int l = 0; l < kStep; ++l) s[l] = acc[l / W][l % W];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

template <int W>
CB_INLINE float max_body(const float* x, int64_t n) {
  using F = typename Vec<W>::F;
  F m[kStep / W];
  for (F& v : m) v = splat<F>(-kInf);
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) max_step<W>(x + i, m);
  if (i < n) {
    float buf[kStep];
    pad(buf, x + i, n - i, -kInf);
    max_step<W>(buf, m);
  }
  float r = -kInf;
  for (int l = 0; l < kStep; ++l) r = m[l / W][l % W] > r ? m[l / W][l % W] : r;
  return r;
}

void exp_base(float* x, int64_t n) {
  exp_body<4>(x, n);
}
double shifted_sum_base(float* x, int64_t n, float shift) {
  return shifted_sum_body<4>(x, n, shift);
}
float max_base(const float* x, int64_t n) {
  return max_body<4>(x, n);
}

#if CB_EXP_X86
// The same bodies with 256-bit registers. No FMA: the same operations in the same order as the
// baseline's, so the two give identical bits (exp_lanes_test.cc compares them).
#define CB_AVX2 __attribute__((target("avx2")))
CB_AVX2 void exp_avx2(float* x, int64_t n) {
  exp_body<8>(x, n);
}
CB_AVX2 double shifted_sum_avx2(float* x, int64_t n, float shift) {
  return shifted_sum_body<8>(x, n, shift);
}
CB_AVX2 float max_avx2(const float* x, int64_t n) {
  return max_body<8>(x, n);
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

// exp_lanes (the fast attention kernels' softmax exp) against exp computed in double: the
// error bound its header states over the whole range where expf is a normal float, the edges
// (underflow to 0, overflow to inf, NaN), results independent of an element's position, the
// shifted sum and lane max against plain loops, and the AVX2 code against the baseline's, bit
// for bit (where the CPU has AVX2).
#include "kernels/cpu/exp_lanes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace cb::kernels::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
/// The header's bound (1.26 ulp of a float in [1, 2); 8.2e-8 was the worst measured here).
constexpr double kRel = 1.5e-7;

uint32_t bits_of(float v) {
  return __builtin_bit_cast(uint32_t, v);
}

float float_of(uint32_t b) {
  return __builtin_bit_cast(float, b);
}

TEST(ExpLanes, WithinTheStatedBoundOfExpWhereverExpfIsANormalFloat) {
  // Every 4099th float (by bit pattern) from -0 down to ln(FLT_MIN) and from 0 up to
  // ln(FLT_MAX), about 550,000 of each sign, then 1M random ones.
  const float lo = -87.3365f, hi = 88.7228f;
  std::vector<float> xs;
  for (uint32_t b = 0; b <= bits_of(hi); b += 4099) xs.push_back(float_of(b));
  for (uint32_t b = 0; b <= bits_of(-lo); b += 4099) xs.push_back(-float_of(b));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int i = 0; i < 1000000; ++i) xs.push_back(u(rng));
  std::vector<float> ys = xs;
  exp_lanes(ys.data(), static_cast<int64_t>(ys.size()));
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(static_cast<double>(xs[i]));
    const double rel = std::fabs(ys[i] - want) / want;
    if (!(rel <= worst)) {
      worst = rel;
      worst_x = xs[i];
    }
  }
  EXPECT_LE(worst, kRel) << "at x = " << worst_x << " (" << xs.size() << " values)";
  std::printf("worst relative error %.3g at x = %.9g over %zu values (%s)\n", worst, worst_x,
              xs.size(), exp_best_isa() == ExpIsa::Avx2 ? "AVX2" : "baseline");
  // At 0 it is exact, as expf is.
  EXPECT_EQ(exp_lane(0.0f), 1.0f);
  EXPECT_EQ(exp_lane(-0.0f), 1.0f);
}

TEST(ExpLanes, EdgesUnderflowOverflowAndNaN) {
  EXPECT_EQ(exp_lane(-kInf), 0.0f);
  EXPECT_EQ(exp_lane(-88.0f), 0.0f);  // expf: a subnormal, 6.1e-39
  EXPECT_EQ(exp_lane(-1e30f), 0.0f);
  EXPECT_EQ(exp_lane(kInf), kInf);
  EXPECT_EQ(exp_lane(89.0f), kInf);
  EXPECT_EQ(exp_lane(1e30f), kInf);
  EXPECT_TRUE(std::isnan(exp_lane(kNaN)));
  EXPECT_TRUE(std::isnan(exp_lane(-kNaN)));
  // Just inside the ends: finite, normal, close to exp.
  const float top = 88.7228f, bottom = -87.3365f;
  EXPECT_TRUE(std::isfinite(exp_lane(top)));
  EXPECT_NEAR(exp_lane(top) / std::exp(static_cast<double>(top)), 1.0, kRel);
  EXPECT_NEAR(exp_lane(bottom) / std::exp(static_cast<double>(bottom)), 1.0, kRel);
  EXPECT_GE(exp_lane(bottom), std::numeric_limits<float>::min());
}

TEST(ExpLanes, AnElementsResultDoesNotDependOnItsPositionOrTheLength) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-90.0f, 10.0f);
  std::vector<float> base(64);
  for (float& v : base) v = u(rng);
  base[5] = kNaN;
  base[17] = -kInf;
  for (int64_t off = 0; off < 9; ++off) {
    for (int64_t n = 0; off + n <= 40; ++n) {
      std::vector<float> a = base;
      exp_lanes(a.data() + off, n);
      for (int64_t i = 0; i < 64; ++i) {
        const bool inside = i >= off && i < off + n;
        const uint32_t want = bits_of(inside ? exp_lane(base[i]) : base[i]);
        ASSERT_EQ(bits_of(a[i]), want) << "off " << off << " n " << n << " i " << i;
      }
    }
  }
}

TEST(ExpLanes, ShiftedSumIsTheSumOfTheResults) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-30.0f, 0.0f);
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 100, 2049}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = u(rng);
    std::vector<float> y = x;
    const float shift = n ? max_lanes(x.data(), n) : 0.0f;
    const double sum = exp_shifted_sum(y.data(), n, shift);
    double want = 0, got = 0;
    for (int64_t i = 0; i < n; ++i) {
      want += std::exp(static_cast<double>(x[i]) - shift);
      got += y[i];
      ASSERT_EQ(bits_of(y[i]), bits_of(exp_lane(x[i] - shift))) << "n " << n << " i " << i;
    }
    if (n == 0) {
      EXPECT_EQ(sum, 0.0);
      continue;
    }
    EXPECT_NEAR(sum, got, 1e-12 * got) << "n " << n;  // only the order of the additions differs
    EXPECT_NEAR(sum, want, kRel * want) << "n " << n;
    EXPECT_GE(sum, 1.0);  // the largest element contributes exp(0) = 1
  }
}

TEST(ExpLanes, MaxMatchesAStdMaxLoop) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 100.0f);
  for (int64_t n = 0; n <= 33; ++n) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = g(rng);
      if (n > 2 && trial % 3 == 0) x[static_cast<size_t>(trial) % n] = kNaN;
      if (n > 3 && trial % 4 == 0) x[static_cast<size_t>(trial + 1) % n] = -kInf;
      float want = -kInf;
      for (float v : x) want = std::max(want, v);
      EXPECT_EQ(bits_of(max_lanes(x.data(), n)), bits_of(want)) << "n " << n << " trial " << trial;
    }
  }
  std::vector<float> nan(5, kNaN);
  EXPECT_EQ(max_lanes(nan.data(), 5), -kInf);
}

TEST(ExpLanes, Avx2AndTheBaselineGiveIdenticalBits) {
  if (exp_best_isa() != ExpIsa::Avx2) GTEST_SKIP() << "this CPU has no AVX2";
  // Every 1021st float bit pattern (4.2 million: NaNs, subnormals, both signs), in arrays whose
  // lengths leave tails of every size.
  std::vector<float> a, b;
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += uint64_t{1021} << 16) {
    const int64_t n = (int64_t{1} << 16) - static_cast<int64_t>((start >> 16) % 8);
    a.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) a[i] = float_of(static_cast<uint32_t>(start + 1021 * i));
    b = a;
    ASSERT_EQ(bits_of(max_lanes(a.data(), n, ExpIsa::Avx2)),
              bits_of(max_lanes(b.data(), n, ExpIsa::Baseline)));
    exp_lanes(a.data(), n, ExpIsa::Avx2);
    exp_lanes(b.data(), n, ExpIsa::Baseline);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "from " << start;
  }
  // The edges the sampling misses: infinities, the canonical NaNs, zeros, the ends of the range.
  const float top = 88.7228391116729f, bottom = -87.3365447505531f;
  a = {kInf,
       -kInf,
       kNaN,
       -kNaN,
       0.0f,
       -0.0f,
       top,
       std::nextafter(top, 0.0f),
       std::nextafter(top, kInf),
       bottom,
       std::nextafter(bottom, 0.0f),
       std::nextafter(bottom, -kInf),
       std::numeric_limits<float>::denorm_min(),
       1e-30f};
  b = a;
  exp_lanes(a.data(), static_cast<int64_t>(a.size()), ExpIsa::Avx2);
  exp_lanes(b.data(), static_cast<int64_t>(b.size()), ExpIsa::Baseline);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(bits_of(a[i]), bits_of(b[i])) << "edge " << i;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-40.0f, 5.0f);
  for (int64_t n : {1, 9, 100, 4097}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = u(rng);
    a = x;
    b = x;
    const double sa = exp_shifted_sum(a.data(), n, 1.5f, ExpIsa::Avx2);
    const double sb = exp_shifted_sum(b.data(), n, 1.5f, ExpIsa::Baseline);
    EXPECT_EQ(sa, sb) << "n " << n;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "n " << n;
  }
}

}  // namespace
}  // namespace cb::kernels::cpu

#include "lib/core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every half value decodes to the float that re-encodes to the same half (NaNs aside).
TEST(DtypeTest, Fp16RoundTripIsExactForAll65536Values) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = cb::fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(cb::fp16_to_fp32(cb::fp32_to_fp16(f)))) << h;
      continue;
    }
    EXPECT_EQ(cb::fp32_to_fp16(f), h) << "half 0x" << std::hex << h;
  }
}

// Decoding against the definition: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
TEST(DtypeTest, Fp16DecodeMatchesDefinition) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) continue;
    const double mag = e == 0 ? std::ldexp(m / 1024.0, -14)
                              : std::ldexp(1.0 + m / 1024.0, static_cast<int>(e) - 15);
    const double want = s ? -mag : mag;
    EXPECT_EQ(static_cast<double>(cb::fp16_to_fp32(static_cast<uint16_t>(h))), want) << h;
  }
  EXPECT_TRUE(std::isinf(cb::fp16_to_fp32(0x7c00)));
  EXPECT_TRUE(std::isnan(cb::fp16_to_fp32(0x7e00)));
}

// Rounding oracle: the nearest half by exhaustive neighbour comparison (ties to even).
uint16_t nearest_half(float f) {
  if (std::isnan(f)) return 0x7e00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;  // half max 65504; 65520 is the rounding midpoint
  uint16_t lo = 0, hi = 0x7bff;            // binary search on the monotone positive halves
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (static_cast<double>(cb::fp16_to_fp32(mid)) <= a)
      lo = mid;
    else
      hi = static_cast<uint16_t>(mid - 1);
  }
  uint16_t best = lo;
  if (lo < 0x7bff) {
    const double dl = a - cb::fp16_to_fp32(lo),
                 dh = cb::fp16_to_fp32(static_cast<uint16_t>(lo + 1)) - a;
    if (dh < dl || (dh == dl && (lo & 1))) best = static_cast<uint16_t>(lo + 1);
  } else if (a > 65504.0) {
    best = 0x7bff;
  }
  return sign | best;
}

TEST(DtypeTest, Fp32ToFp16RoundsToNearestEven) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    // Bias toward the half range: exponents near 2^-25 .. 2^16.
    uint32_t u = any(rng);
    const uint32_t exp = 102 + (u % 40);
    u = (u & 0x807fffffu) | (exp << 23);
    const float f = from_bits(u);
    ASSERT_EQ(cb::fp32_to_fp16(f), nearest_half(f)) << std::hexfloat << f;
  }
  // Exact ties.
  EXPECT_EQ(cb::fp32_to_fp16(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even (down)
  EXPECT_EQ(cb::fp32_to_fp16(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(cb::fp32_to_fp16(65520.0f), 0x7c00);            // rounds to inf
  EXPECT_EQ(cb::fp32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(cb::fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even zero
  EXPECT_EQ(cb::fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion is an independent implementation.
TEST(DtypeTest, Fp32ToFp16MatchesCompilerFloat16) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 500000; ++i) {
    const float f = from_bits(any(rng));
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(cb::fp32_to_fp16(f), hb) << std::hexfloat << f;
  }
}
#endif

TEST(DtypeTest, Bf16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(cb::fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(cb::fp32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(cb::fp32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(cb::fp32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(
      std::isnan(cb::bf16_to_fp32(cb::fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(
      std::isnan(cb::bf16_to_fp32(cb::fp32_to_bf16(from_bits(0x7f800001u)))));  // sNaN low bits
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = cb::bf16_to_fp32(static_cast<uint16_t>(b));
    EXPECT_EQ(bits(f), b << 16);
    if (!std::isnan(f)) {
      EXPECT_EQ(cb::fp32_to_bf16(f), b);
    }
  }
}

TEST(DtypeTest, BlockSizesFollowGgufSpec) {
  EXPECT_EQ(cb::dtype_bytes(cb::DType::F32, 10), 40u);
  EXPECT_EQ(cb::dtype_bytes(cb::DType::BF16, 10), 20u);
  EXPECT_EQ(cb::dtype_bytes(cb::DType::Q8_0, 64), 68u);
  EXPECT_EQ(cb::dtype_bytes(cb::DType::Q4_0, 64), 36u);
  EXPECT_EQ(cb::dtype_bytes(cb::DType::Q4_1, 32), 20u);
  cb::DType t;
  EXPECT_TRUE(cb::parse_dtype("BF16", &t));
  EXPECT_EQ(t, cb::DType::BF16);
  EXPECT_FALSE(cb::parse_dtype("f8", &t));
}

}  // namespace

// Hand-built blocks checking the ggml dequantization formulas directly (the golden
// files from gguf-py are compared in gguf_test.cc).
#include "lib/formats/dequant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/formats/tensor_ref.h"

namespace cb::formats {
namespace {

void put_u16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v & 0xff));
  b.push_back(static_cast<uint8_t>(v >> 8));
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(Dequant, Q4_0BlockLowNibblesFirstThenHigh) {
  std::vector<uint8_t> b;
  put_u16(b, 0x3800);  // d = 0.5
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  ASSERT_EQ(b.size(), dtype_block_bytes(DType::Q4_0));
  float out[32];
  dequantize(DType::Q4_0, b.data(), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(out[j + 16], 0.5f * static_cast<float>(7 - j)) << j;
  }
  EXPECT_EQ(out[0], -4.0f);
  EXPECT_EQ(out[16], 3.5f);
}

TEST(Dequant, Q4_1BlockScaleAndMin) {
  std::vector<uint8_t> b;
  put_u16(b, 0x3400);  // d = 0.25
  put_u16(b, 0xBC00);  // m = -1
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>((j % 16) | (3 << 4)));
  ASSERT_EQ(b.size(), dtype_block_bytes(DType::Q4_1));
  float out[32];
  dequantize(DType::Q4_1, b.data(), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.25f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(out[j + 16], -0.25f) << j;
  }
}

TEST(Dequant, Q4_1RoundsOnceOnTheAdd) {
  // d = 1 + 2^-10, q = 15, m = 2^-24 (fp16 subnormal): d*q = 15 + 15*2^-10 is exact in
  // fp32 and adding m rounds once; the result must be the correctly rounded exact sum.
  std::vector<uint8_t> b;
  put_u16(b, 0x3C01);
  put_u16(b, 0x0001);
  for (int j = 0; j < 16; ++j) b.push_back(0xff);
  float out[32];
  dequantize(DType::Q4_1, b.data(), out, 32);
  const double exact = (1.0 + std::ldexp(1.0, -10)) * 15.0 + std::ldexp(1.0, -24);
  EXPECT_EQ(out[0], static_cast<float>(exact));
  EXPECT_EQ(out[31], static_cast<float>(exact));
}

TEST(Dequant, Q8_0TwoBlocksSignedBytes) {
  std::vector<uint8_t> b;
  put_u16(b, 0x3000);  // d = 0.125
  for (int j = 0; j < 32; ++j) b.push_back(static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128)));
  put_u16(b, 0xC000);  // d = -2
  for (int j = 0; j < 32; ++j) b.push_back(static_cast<uint8_t>(static_cast<int8_t>(127 - j)));
  ASSERT_EQ(b.size(), 2 * dtype_block_bytes(DType::Q8_0));
  float out[64];
  dequantize(DType::Q8_0, b.data(), out, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[j], 0.125f * static_cast<float>(j * 8 - 128)) << j;
    EXPECT_EQ(out[32 + j], -2.0f * static_cast<float>(127 - j)) << j;
  }
  EXPECT_EQ(out[0], -16.0f);
  EXPECT_EQ(out[32], -254.0f);
}

TEST(Dequant, ZeroScaleGivesZeros) {
  std::vector<uint8_t> b(dtype_block_bytes(DType::Q8_0), 0x7f);
  b[0] = b[1] = 0;  // d = +0
  float out[32];
  dequantize(DType::Q8_0, b.data(), out, 32);
  for (float v : out) EXPECT_EQ(bits(v), 0u);
}

TEST(Dequant, F16SpecialValues) {
  std::vector<uint8_t> b;
  for (uint16_t h : {0x3C00, 0xC000, 0x7C00, 0xFC00, 0x0001, 0x8000, 0x7BFF}) put_u16(b, h);
  float out[7];
  dequantize(DType::F16, b.data(), out, 7);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_TRUE(std::isinf(out[2]) && out[2] > 0);
  EXPECT_TRUE(std::isinf(out[3]) && out[3] < 0);
  EXPECT_EQ(out[4], std::ldexp(1.0f, -24));
  EXPECT_EQ(bits(out[5]), 0x80000000u);
  EXPECT_EQ(out[6], 65504.0f);
}

TEST(Dequant, Bf16IsUpperHalfOfF32) {
  std::vector<uint8_t> b;
  for (uint16_t h : {0x3F80, 0xC0A0, 0x7F80, 0x0001}) put_u16(b, h);
  float out[4];
  dequantize(DType::BF16, b.data(), out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -5.0f);
  EXPECT_EQ(bits(out[2]), 0x7F800000u);
  EXPECT_EQ(bits(out[3]), 0x00010000u);
}

TEST(Dequant, F32FromUnalignedSource) {
  const float vals[3] = {1.5f, -0.0f, 3.0e38f};
  std::vector<uint8_t> b(1 + sizeof vals);
  std::memcpy(b.data() + 1, vals, sizeof vals);
  float out[3];
  dequantize(DType::F32, b.data() + 1, out, 3);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(bits(out[j]), bits(vals[j]));
}

TEST(Dequant, RejectsPartialBlockAndIntegers) {
  std::vector<uint8_t> b(64, 0);
  float out[32];
  EXPECT_THROW(dequantize(DType::Q4_0, b.data(), out, 16), Error);
  EXPECT_THROW(dequantize(DType::I32, b.data(), out, 4), Error);
}

TEST(Dequant, ToF32ChecksByteCount) {
  std::vector<uint8_t> b(dtype_block_bytes(DType::Q4_0), 0x88);
  put_u16(b, 0);
  TensorRef t;
  t.name = "w";
  t.file = "/x/model.gguf";
  t.dtype = DType::Q4_0;
  t.shape = {1, 32};
  t.data = b.data();
  t.nbytes = b.size();  // two bytes too many
  float out[32];
  try {
    to_f32(t, out);
    FAIL() << "expected cb::Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("/x/model.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find("'w'"), std::string::npos) << m;
    EXPECT_NE(m.find("bytes"), std::string::npos) << m;
  }
  t.nbytes = dtype_block_bytes(DType::Q4_0);
  b[0] = 0x00;
  b[1] = 0x3C;  // d = 1
  to_f32(t, out);
  EXPECT_EQ(out[0], 0.0f);
  t.shape = {1, 16};
  EXPECT_THROW(to_f32(t, out), Error);
  t.dtype = DType::I32;
  t.shape = {8};
  t.nbytes = 32;
  EXPECT_THROW(to_f32(t, out), Error);
}

TEST(Dequant, ShapeStr) {
  EXPECT_EQ(shape_str({4096, 11008}), "[4096, 11008]");
  EXPECT_EQ(shape_str({7}), "[7]");
  EXPECT_EQ(shape_str({}), "[]");
}

// Splitting a tensor over threads gives the serial floats bit for bit, for every type, with
// parts that do not divide the blocks evenly, and a small tensor stays on one thread.
TEST(Dequant, ParallelMatchesSerialBitForBit) {
  uint64_t x = 0x9e3779b97f4a7c15ull;  // xorshift bytes: scales of every magnitude
  const auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<uint8_t>(x >> 56);
  };
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                  DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const size_t be = dtype_block_elems(t);
    const size_t n = be * ((1u << 20) / be + 7);  // just over 1 Mi elements, an odd block count
    std::vector<uint8_t> src(n / be * dtype_block_bytes(t));
    for (uint8_t& b : src) b = next();
    std::vector<float> serial(n), parallel(n);
    dequantize(t, src.data(), serial.data(), n);
    for (unsigned threads : {2u, 3u, 7u}) {
      std::fill(parallel.begin(), parallel.end(), -1.0f);
      dequantize_parallel(t, src.data(), parallel.data(), n, threads);
      EXPECT_EQ(std::memcmp(serial.data(), parallel.data(), n * sizeof(float)), 0)
          << dtype_name(t) << " over " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace cb::formats

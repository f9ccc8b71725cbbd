#include "lib/formats/dequant.h"

#include <cstring>
#include <string>

#include "lib/core/error.h"

namespace cb::formats {
namespace {

constexpr size_t kBlock = 32;

uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}

// Q8_0 block: fp16 d, 32 x int8 q; x = q * d.
void dequant_q8_0(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 2 + kBlock, dst += kBlock) {
    const float d = fp16_to_fp32(load_u16(src));
    for (size_t j = 0; j < kBlock; ++j) {
      dst[j] = static_cast<float>(static_cast<int8_t>(src[2 + j])) * d;
    }
  }
}

// Q4_0 block: fp16 d, 16 bytes; element j is the low nibble of byte j, element j + 16
// the high nibble; x = d * (q - 8).
void dequant_q4_0(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 2 + kBlock / 2, dst += kBlock) {
    const float d = fp16_to_fp32(load_u16(src));
    const uint8_t* qs = src + 2;
    for (size_t j = 0; j < kBlock / 2; ++j) {
      dst[j] = d * static_cast<float>(static_cast<int>(qs[j] & 0x0f) - 8);
      dst[j + kBlock / 2] = d * static_cast<float>(static_cast<int>(qs[j] >> 4) - 8);
    }
  }
}

// Q4_1 block: fp16 d, fp16 m, 16 bytes (nibbles as Q4_0); x = d * q + m. An fp16 scale
// times a 4- or 8-bit integer is exact in fp32, so every format here rounds at most once
// (the add of m) and the result is bit-identical to ggml's reference, FMA or not.
void dequant_q4_1(const uint8_t* src, float* dst, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b, src += 4 + kBlock / 2, dst += kBlock) {
    const float d = fp16_to_fp32(load_u16(src));
    const float m = fp16_to_fp32(load_u16(src + 2));
    const uint8_t* qs = src + 4;
    for (size_t j = 0; j < kBlock / 2; ++j) {
      const float lo = d * static_cast<float>(qs[j] & 0x0f);
      const float hi = d * static_cast<float>(qs[j] >> 4);
      dst[j] = lo + m;
      dst[j + kBlock / 2] = hi + m;
    }
  }
}

}  // namespace

void dequantize(DType t, const uint8_t* src, float* dst, size_t n) {
  if (dtype_is_quantized(t) && n % kBlock != 0) {
    throw make_error("dequantize",
                     std::string(dtype_name(t)) + " data of " + std::to_string(n) +
                         " elements is not a whole number of 32-element blocks",
                     "quantized rows must hold a multiple of 32 elements");
  }
  switch (t) {
    case DType::F32:
      if (n != 0) std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
      return;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
      return;
    case DType::Q8_0: dequant_q8_0(src, dst, n / kBlock); return;
    case DType::Q4_0: dequant_q4_0(src, dst, n / kBlock); return;
    case DType::Q4_1: dequant_q4_1(src, dst, n / kBlock); return;
    case DType::I32: break;
  }
  throw make_error("dequantize",
                   std::string("cannot convert ") + dtype_name(t) + " elements to f32",
                   "only f32, f16, bf16, q8_0, q4_0 and q4_1 tensors hold weights");
}

}  // namespace cb::formats

#pragma once
/// Element types of tensors and their storage: plain (F32/F16/BF16/I32) and the
/// GGUF block-quantized types (Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 in blocks of 32, the K-quants
/// Q2_K..Q6_K in super-blocks of 256), plus exact fp16/bf16 conversions.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace cb {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  I32,
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K
};

/// Lower-case name ("f32", "bf16", "q4_0").
const char* dtype_name(DType t);
/// Parses a name as printed by dtype_name (case-insensitive); returns false if unknown.
bool parse_dtype(const std::string& name, DType* out);
/// Elements per storage block (1 for plain types, 32 for Q8_0..Q5_1, 256 for the K-quants).
size_t dtype_block_elems(DType t);
/// Bytes per storage block.
size_t dtype_block_bytes(DType t);
/// Bytes needed for n elements; n must be a multiple of the block size.
inline size_t dtype_bytes(DType t, size_t n) {
  return n / dtype_block_elems(t) * dtype_block_bytes(t);
}
inline bool dtype_is_quantized(DType t) {
  return dtype_block_elems(t) > 1;
}

/// IEEE half -> float, exact (subnormals, inf, NaN preserved).
float fp16_to_fp32(uint16_t h);
/// float -> IEEE half, round to nearest even; overflow gives inf, NaN stays NaN.
uint16_t fp32_to_fp16(float f);

/// bfloat16 -> float, exact.
inline float bf16_to_fp32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
/// float -> bfloat16, round to nearest even; NaN stays a quiet NaN.
inline uint16_t fp32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace cb

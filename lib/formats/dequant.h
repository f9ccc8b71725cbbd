#pragma once
/// Conversion of stored tensor elements (plain and GGUF block-quantized) to fp32,
/// bit-exact with ggml's reference dequantizers.

#include <cstddef>
#include <cstdint>

#include "lib/core/dtype.h"

namespace cb::formats {

/// Converts `n` elements of type `t` stored at `src` (little-endian, any alignment) to
/// fp32 in `dst`. Block formats need `n` to be a multiple of their block (32 for
/// Q8_0/Q4_0/Q4_1/Q5_0/Q5_1, 256 for Q2_K..Q6_K). Throws cb::Error for I32 or a partial block.
void dequantize(DType t, const uint8_t* src, float* dst, size_t n);

}  // namespace cb::formats

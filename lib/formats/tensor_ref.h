#pragma once
/// A tensor as it lies in a model file: name, dtype, row-major shape (PyTorch order:
/// outermost first, so a linear weight is [out_features, in_features]) and a pointer
/// into the file's memory mapping. Shared by the GGUF and safetensors readers.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/dtype.h"

namespace cb::formats {

struct TensorRef {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;     ///< row-major, outermost first
  const uint8_t* data = nullptr;  ///< into the owning file's mapping; valid while it lives
  size_t nbytes = 0;
  std::string file;  ///< the file it came from, for error messages

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

/// "[4096, 11008]"
std::string shape_str(const std::vector<int64_t>& shape);

/// Converts any supported dtype (F32, F16, BF16 and the GGUF quantized types) to fp32.
/// `out` must hold t.numel() floats. Throws cb::Error for dtypes it cannot convert.
void to_f32(const TensorRef& t, float* out);

/// dequantize() of `n` elements of type `t` split over `threads` threads (0: the machine's
/// cores, at most 16), each a contiguous run of whole blocks of at least 256 Ki elements; the
/// same floats as the serial call. Small tensors run on the calling thread.
void dequantize_parallel(DType t, const uint8_t* src, float* dst, size_t n, unsigned threads = 0);

}  // namespace cb::formats

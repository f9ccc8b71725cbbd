#include "lib/formats/tensor_ref.h"

#include <algorithm>
#include <string>

#include "lib/core/error.h"
#include "lib/core/parallel.h"
#include "lib/formats/dequant.h"

namespace cb::formats {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void to_f32(const TensorRef& t, float* out) {
  const std::string what =
      "tensor '" + t.name + "' (" + dtype_name(t.dtype) + ", shape " + shape_str(t.shape) + ")";
  if (t.dtype == DType::I32) {
    throw make_error(t.file, what + " holds integers and cannot be converted to f32",
                     "only float and GGUF quantized tensors hold weights");
  }
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) {
      throw make_error(t.file, what + " has an invalid shape",
                       "the file is corrupt — re-download or re-convert it");
    }
  }
  if (numel % dtype_block_elems(t.dtype) != 0) {
    throw make_error(t.file,
                     what + " has " + std::to_string(numel) + " elements, not a multiple of the " +
                         std::to_string(dtype_block_elems(t.dtype)) + "-element quantization block",
                     "the file is corrupt — re-download or re-convert it");
  }
  uint64_t expect = 0;
  if (__builtin_mul_overflow(numel / dtype_block_elems(t.dtype), dtype_block_bytes(t.dtype),
                             &expect) ||
      t.nbytes != expect) {
    throw make_error(t.file,
                     what + " holds " + std::to_string(t.nbytes) +
                         " bytes but its dtype and shape need " + std::to_string(expect),
                     "the file is truncated or corrupt — re-download or re-convert it");
  }
  if (numel != 0 && t.data == nullptr) {
    throw make_error(t.file, what + " has no data", "the tensor was not loaded from a file");
  }
  dequantize_parallel(t.dtype, t.data, out, static_cast<size_t>(numel));
}

void dequantize_parallel(DType t, const uint8_t* src, float* dst, size_t n, unsigned threads) {
  const size_t be = dtype_block_elems(t), bb = dtype_block_bytes(t);
  if (n % be != 0 || t == DType::I32) {  // (dequantize refuses these itself)
    dequantize(t, src, dst, n);
    return;
  }
  // Each piece a contiguous run of whole blocks, at least 256 Ki elements (below that, starting
  // a thread costs more than it saves); every block decodes on its own, so the result is the
  // serial one bit for bit.
  const auto min_blocks = static_cast<int64_t>(std::max<size_t>(1, (size_t{1} << 18) / be));
  for_each_piece(static_cast<int64_t>(n / be), min_blocks,
                 threads == 0 ? worker_threads() : static_cast<int>(threads),
                 [&](int64_t b0, int64_t nb) {
                   dequantize(t, src + static_cast<size_t>(b0) * bb,
                              dst + static_cast<size_t>(b0) * be, static_cast<size_t>(nb) * be);
                 });
}

}  // namespace cb::formats

#include "lib/formats/tensor_ref.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "lib/core/error.h"
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
  if (threads == 0) threads = std::min(16u, std::max(1u, std::thread::hardware_concurrency()));
  // At least 256 Ki elements a thread: below that, starting one costs more than it saves.
  const size_t blocks = n / be;
  const size_t parts = std::min<size_t>({threads, n >> 18, blocks});
  if (parts <= 1 || n % be != 0 || t == DType::I32) {  // (dequantize refuses I32 itself)
    dequantize(t, src, dst, n);
    return;
  }
  // Each part a contiguous run of whole blocks; every block decodes on its own, so the result
  // is the serial one bit for bit.
  std::vector<std::thread> pool;
  const auto run = [&](size_t k) {
    const size_t b0 = blocks * k / parts, b1 = blocks * (k + 1) / parts;
    dequantize(t, src + b0 * bb, dst + b0 * be, (b1 - b0) * be);
  };
  for (size_t k = 1; k < parts; ++k) {
    try {
      pool.emplace_back(run, k);
    } catch (const std::system_error&) {  // no thread to be had: this one does that part
      run(k);
    }
  }
  run(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace cb::formats

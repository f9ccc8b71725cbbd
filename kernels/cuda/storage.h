#pragma once
/// Element types of tensors in device memory and the launch geometry of the element-wise and
/// per-row kernels. Plain C++ (no CUDA headers): the geometry is unit-tested on the host.

#include <cstddef>
#include <cstdint>

namespace cb::kernels::cuda {

/// Storage type of a tensor; every kernel computes in fp32 whatever the storage.
enum class Storage : uint8_t { F32, F16, BF16 };

/// Bytes per element.
constexpr size_t storage_bytes(Storage s) {
  return s == Storage::F32 ? 4 : 2;
}

/// "f32", "f16" or "bf16".
constexpr const char* storage_name(Storage s) {
  return s == Storage::F32 ? "f32" : s == Storage::F16 ? "f16" : "bf16";
}

struct LaunchDims {
  unsigned grid = 0;   ///< blocks (x dimension)
  unsigned block = 0;  ///< threads per block
};

/// Grid-stride loop over `n` elements: 256 threads per block, enough blocks to cover n once,
/// at most `max_blocks` (each thread then handles several elements). n == 0 gives grid 0.
LaunchDims elementwise_dims(size_t n, unsigned max_blocks = 65535u * 8u);

/// One block per row of `dim` elements: a power of two in [32, 1024] threads, about four
/// elements per thread, so a reduction over the row needs at most 32 warps. rows must fit
/// the grid's x dimension (< 2^31); returns grid 0 when rows <= 0, dim <= 0 or rows is too
/// large (the launcher then reports cudaErrorInvalidValue).
LaunchDims row_dims(int64_t rows, int64_t dim);

}  // namespace cb::kernels::cuda

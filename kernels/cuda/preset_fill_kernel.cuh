#pragma once
// The preset weight generator (see preset_fill.h; launched by preset_fill.cu), in a header so
// that tests/unit/cuda/kernels_emulated_test.cc runs its source on the host.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/preset_fill.h"

namespace cb::kernels::cuda {
namespace detail {

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void preset_fill_kernel(T* __restrict__ out, int64_t rows, int64_t cols,
                                   const int32_t* __restrict__ row_map, bool constant, float value,
                                   uint64_t key, float scale) {
  const int64_t total = rows * cols;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = value;
    if (!constant) {
      const int64_t r = k / cols, c = k % cols;
      const int64_t src = (row_map != nullptr ? static_cast<int64_t>(row_map[r]) : r) * cols + c;
      const uint64_t x = splitmix64(key + static_cast<uint64_t>(src));
      const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
      // As the host computes it: 2u - 1 is exact, then one rounding for the product.
      v = __fmul_rn(__fsub_rn(__fmul_rn(2.0f, u), 1.0f), scale);
    }
    out[k] = from_f<T>(v);
  }
}

}  // namespace detail
}  // namespace cb::kernels::cuda

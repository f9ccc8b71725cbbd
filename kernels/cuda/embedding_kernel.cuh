#pragma once
// The embedding gather kernel (see embedding.h; launched by embedding.cu), in a header so that
// tests/unit/cuda/kernels_emulated_test.cc runs its source on the host.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/embedding.h"

namespace cb::kernels::cuda {
namespace detail {

template <typename T>
__global__ void embedding_kernel(const T* __restrict__ table, const int32_t* __restrict__ ids,
                                 T* __restrict__ out, int64_t n, int64_t rows, int64_t dim,
                                 int32_t* bad_id) {
  const int64_t total = n * dim;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = k / dim, j = k % dim;
    const int64_t id = ids[t];
    if (id < 0 || id >= rows) {
      out[k] = detail::from_f<T>(0.0f);
      if (bad_id != nullptr && j == 0) *bad_id = 1;
    } else {
      out[k] = table[id * dim + j];
    }
  }
}

}  // namespace detail
}  // namespace cb::kernels::cuda

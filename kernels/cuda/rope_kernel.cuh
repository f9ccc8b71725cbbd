#pragma once
// The RoPE kernel (see rope.h; launched by rope.cu), in a header so that
// tests/unit/cuda/kernels_emulated_test.cc runs its source on the host.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kv_layout.h"
#include "kernels/cuda/rope.h"

namespace cb::kernels::cuda {
namespace detail {

// Work item k: pair k % (heads * half) (consecutive threads, consecutive pairs of a token) of
// the kRopeTokensPerThread tokens of chunk k / (heads * half).
template <typename T>
__global__ void rope_kernel(T* x, const int32_t* __restrict__ positions, int64_t n, int64_t heads,
                            int64_t head_dim, int64_t half, int64_t rope_dims, int64_t token_stride,
                            double theta, bool interleaved) {
  allow_dependent_launch();
  const int64_t pairs = heads * half;
  const int64_t total = (n + kRopeTokensPerThread - 1) / kRopeTokensPerThread * pairs;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k % half;
    const int64_t h = (k / half) % heads;
    const int64_t t0 = k / pairs * kRopeTokensPerThread;
    const int64_t t1 = t0 + kRopeTokensPerThread < n ? t0 + kRopeTokensPerThread : n;
    const PairElems e = rope_pair(i, rope_dims, interleaved);
    const double inv_freq = detail::rope_inv_freq(i, rope_dims, theta);
    for (int64_t t = t0; t < t1; ++t) {
      T* xh = x + t * token_stride + h * head_dim;
      float x0 = to_f(xh[e.a]), x1 = to_f(xh[e.b]);
      detail::rope_rotate<T>(x0, x1, static_cast<double>(positions[t]) * inv_freq);
      xh[e.a] = from_f<T>(x0);
      xh[e.b] = from_f<T>(x1);
    }
  }
}

}  // namespace detail
}  // namespace cb::kernels::cuda

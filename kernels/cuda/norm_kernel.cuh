#pragma once
// The RMSNorm and LayerNorm kernels (see norm.h; launched by norm.cu), in a header so that
// tests/unit/cuda/kernels_emulated_test.cc runs their source on the host.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm.h"

namespace cb::kernels::cuda {
namespace detail {

template <typename T>
__global__ void rmsnorm_kernel(const T* x, const T* __restrict__ w, T* y, int64_t dim, float eps) {
  allow_dependent_launch();
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = to_f(xr[i]);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    yr[i] = from_f<T>(to_f(xr[i]) * inv * to_f(w[i]));
  }
}

template <typename T>
__global__ void layernorm_kernel(const T* x, const T* __restrict__ w, const T* __restrict__ b, T* y,
                                 int64_t dim, float eps) {
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) s += to_f(xr[i]);
  const float mean = block_sum(s) / static_cast<float>(dim);
  float cs = 0.0f;  // centred second pass: no cancellation for rows with a large mean
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float d = to_f(xr[i]) - mean;
    cs += d * d;
  }
  const float inv = rsqrtf(block_sum(cs) / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    yr[i] = from_f<T>((to_f(xr[i]) - mean) * inv * to_f(w[i]) + to_f(b[i]));
  }
}

}  // namespace detail
}  // namespace cb::kernels::cuda

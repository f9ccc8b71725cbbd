#include "kernels/cuda/activation.h"
#include "kernels/cuda/device_math.cuh"

namespace cb::kernels::cuda {
namespace {

using detail::from_f;
using detail::to_f;

#define CB_GRID_STRIDE(i, n)                                                             \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void swiglu_kernel(const T* gate, const T* up, T* out, int64_t n) {
  CB_GRID_STRIDE(i, n) {
    const float g = to_f(gate[i]);
    out[i] = from_f<T>(g / (1.0f + expf(-g)) * to_f(up[i]));
  }
}

template <typename T>
__global__ void gelu_kernel(T* x, int64_t n) {
  CB_GRID_STRIDE(i, n) {
    const float v = to_f(x[i]);
    x[i] = from_f<T>(0.5f * v * erfcf(-v * 0.70710678118654752440f));
  }
}

template <typename T>
__global__ void add_kernel(T* y, const T* x, int64_t n) {
  CB_GRID_STRIDE(i, n) {
    y[i] = from_f<T>(to_f(y[i]) + to_f(x[i]));
  }
}

#undef CB_GRID_STRIDE

}  // namespace

cudaError_t launch_swiglu(const SwigluParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.n < 0 || !p.gate || !p.up || !p.out) return cudaErrorInvalidValue;
  const LaunchDims d = elementwise_dims(static_cast<size_t>(p.n));
#define CB_LAUNCH(T)                                \
  swiglu_kernel<T><<<d.grid, d.block, 0, stream>>>( \
      static_cast<const T*>(p.gate), static_cast<const T*>(p.up), static_cast<T*>(p.out), p.n)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

cudaError_t launch_gelu(const GeluParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.n < 0 || !p.x) return cudaErrorInvalidValue;
  const LaunchDims d = elementwise_dims(static_cast<size_t>(p.n));
#define CB_LAUNCH(T) gelu_kernel<T><<<d.grid, d.block, 0, stream>>>(static_cast<T*>(p.x), p.n)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

cudaError_t launch_add(const AddParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.n < 0 || !p.y || !p.x) return cudaErrorInvalidValue;
  const LaunchDims d = elementwise_dims(static_cast<size_t>(p.n));
#define CB_LAUNCH(T) \
  add_kernel<T>      \
      <<<d.grid, d.block, 0, stream>>>(static_cast<T*>(p.y), static_cast<const T*>(p.x), p.n)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda

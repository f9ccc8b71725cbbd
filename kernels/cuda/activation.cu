#include "kernels/cuda/activation_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using detail::add_kernel;
using detail::gelu_kernel;
using detail::swiglu_kernel;

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

#include "kernels/cuda/norm_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using detail::layernorm_kernel;
using detail::rmsnorm_kernel;

}  // namespace

cudaError_t launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  const LaunchDims d = row_dims(p.rows, p.dim);
  if (d.grid == 0 || !p.x || !p.w || !p.y) return cudaErrorInvalidValue;
#define CB_LAUNCH(T)                                 \
  rmsnorm_kernel<T><<<d.grid, d.block, 0, stream>>>( \
      static_cast<const T*>(p.x), static_cast<const T*>(p.w), static_cast<T*>(p.y), p.dim, p.eps)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

cudaError_t launch_layernorm(const LayerNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  const LaunchDims d = row_dims(p.rows, p.dim);
  if (d.grid == 0 || !p.x || !p.w || !p.b || !p.y) return cudaErrorInvalidValue;
#define CB_LAUNCH(T)                                                                      \
  layernorm_kernel<T><<<d.grid, d.block, 0, stream>>>(                                    \
      static_cast<const T*>(p.x), static_cast<const T*>(p.w), static_cast<const T*>(p.b), \
      static_cast<T*>(p.y), p.dim, p.eps)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda

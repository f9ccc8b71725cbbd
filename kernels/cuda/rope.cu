#include "kernels/cuda/rope_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using detail::rope_kernel;

}  // namespace

cudaError_t launch_rope(const RopeParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  const int64_t stride = p.token_stride > 0 ? p.token_stride : p.heads * p.head_dim;
  if (!p.x || !p.positions || p.n < 0 || p.heads <= 0 || p.head_dim <= 0 || p.rope_dims <= 0 ||
      p.rope_dims % 2 != 0 || p.rope_dims > p.head_dim || stride < p.heads * p.head_dim ||
      !(p.theta > 0)) {
    return cudaErrorInvalidValue;
  }
  const int64_t half = p.rope_dims / 2;
  const int64_t chunks = (p.n + detail::kRopeTokensPerThread - 1) / detail::kRopeTokensPerThread;
  const LaunchDims d = elementwise_dims(static_cast<size_t>(chunks * p.heads * half));
#define CB_LAUNCH(T)                                                                          \
  rope_kernel<T><<<d.grid, d.block, 0, stream>>>(                                             \
      static_cast<T*>(p.x), p.positions, p.n, p.heads, p.head_dim, half, p.rope_dims, stride, \
      static_cast<double>(p.theta), p.style == RopeStyle::Interleaved)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda

#include "kernels/cuda/embedding_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using detail::embedding_kernel;

}  // namespace

cudaError_t launch_embedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.n < 0 || p.rows <= 0 || p.dim <= 0 || !p.table || !p.ids || !p.out) {
    return cudaErrorInvalidValue;
  }
  const LaunchDims d = elementwise_dims(static_cast<size_t>(p.n * p.dim));
#define CB_LAUNCH(T)                                   \
  embedding_kernel<T><<<d.grid, d.block, 0, stream>>>( \
      static_cast<const T*>(p.table), p.ids, static_cast<T*>(p.out), p.n, p.rows, p.dim, p.bad_id)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda

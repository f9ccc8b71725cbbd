#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/embedding.h"

namespace cb::kernels::cuda {
namespace {

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

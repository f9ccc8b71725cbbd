// The L2 prefetch kernel (l2_prefetch.h).
#include "kernels/cuda/gemv_kernel.cuh"  // gemv_detail::prefetch_l2_bulk
#include "kernels/cuda/l2_prefetch.h"

namespace cb::kernels::cuda {
namespace {

// Grid-stride over the rows: one bulk prefetch of each row's first `prefix` bytes.
__global__ void __launch_bounds__(256)
    l2_prefetch_kernel(const char* data, int64_t row_bytes, uint32_t prefix, int64_t rows) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += step) {
    gemv_detail::prefetch_l2_bulk(data + r * row_bytes, prefix);
  }
}

}  // namespace

cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, int sms, cudaStream_t stream) {
  if (!l2_prefetch_applies(p)) return cudaErrorInvalidValue;
  if (p.rows == 0 || p.prefix_bytes == 0) return cudaSuccess;
  l2_prefetch_kernel<<<l2_prefetch_blocks(p.rows, sms), 256, 0, stream>>>(
      static_cast<const char*>(p.data), p.row_bytes, static_cast<uint32_t>(p.prefix_bytes), p.rows);
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda

// The L2 prefetch kernel (l2_prefetch.h).
#include "kernels/cuda/gemv_kernel.cuh"  // gemv_detail::prefetch_l2
#include "kernels/cuda/l2_prefetch.h"

namespace cb::kernels::cuda {
namespace {

// Grid-stride over the launch's lines: line i at l2_prefetch_offset(row_bytes, per_row, i).
__global__ void __launch_bounds__(256)
    l2_prefetch_kernel(const char* data, int64_t row_bytes, int64_t per_row, int64_t lines) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < lines;
       i += step) {
    gemv_detail::prefetch_l2(data + l2_prefetch_offset(row_bytes, per_row, i));
  }
}

}  // namespace

cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, int sms, cudaStream_t stream) {
  if (p.rows < 0 || p.row_bytes < 0 || p.prefix_bytes < 0 || p.prefix_bytes > p.row_bytes) {
    return cudaErrorInvalidValue;
  }
  const int64_t per_row = l2_prefetch_lines_per_row(p);
  if (per_row == 0) return cudaSuccess;
  if (p.data == nullptr) return cudaErrorInvalidValue;
  const int64_t lines = p.rows * per_row;
  l2_prefetch_kernel<<<l2_prefetch_blocks(lines, sms), 256, 0, stream>>>(
      static_cast<const char*>(p.data), p.row_bytes, per_row, lines);
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda

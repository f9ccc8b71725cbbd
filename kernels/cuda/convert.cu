#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/convert.h"

namespace cb::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void to_half_kernel(const float* __restrict__ src, uint16_t* __restrict__ dst, size_t n,
                               bool bf16) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (bf16) {
      dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
    } else {
      dst[i] = __half_as_ushort(__float2half_rn(src[i]));
    }
  }
}

__global__ void to_float_kernel(const uint16_t* __restrict__ src, float* __restrict__ dst, size_t n,
                                bool bf16) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = bf16 ? __bfloat162float(__ushort_as_bfloat16(src[i]))
                  : __half2float(__ushort_as_half(src[i]));
  }
}

unsigned grid_for(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

}  // namespace

cudaError_t launch_convert_to_half(const ConvertToHalfParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.src == nullptr || p.dst == nullptr) return cudaErrorInvalidValue;
  to_half_kernel<<<grid_for(p.n), kThreads, 0, stream>>>(p.src, p.dst, p.n,
                                                         p.kind == HalfKind::BF16);
  return cudaGetLastError();
}

cudaError_t launch_convert_to_float(const ConvertToFloatParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.src == nullptr || p.dst == nullptr) return cudaErrorInvalidValue;
  to_float_kernel<<<grid_for(p.n), kThreads, 0, stream>>>(p.src, p.dst, p.n,
                                                          p.kind == HalfKind::BF16);
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda

// Probe kernels of pdl_probe.h.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/pdl_launch.cuh"
#include "tests/unit/cuda/pdl_probe.h"

namespace cb::cuda_test {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void late_copy_kernel(uint32_t* dst, const uint32_t* src, size_t words, uint32_t* dst2,
                                 const uint32_t* src2, size_t words2, uint64_t spin_ns) {
  kernels::cuda::detail::allow_dependent_launch();
  const uint64_t t0 = global_ns();
  while (global_ns() - t0 < spin_ns) {
  }
  for (size_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
  for (size_t i = threadIdx.x; i < words2; i += blockDim.x) dst2[i] = src2[i];
}

__global__ void peek_kernel(const uint32_t* x, uint32_t* seen) {
  if (threadIdx.x == 0) *seen = *reinterpret_cast<const volatile uint32_t*>(x);
}

}  // namespace

cudaError_t launch_late_copy(void* dst, const void* src, size_t bytes, void* dst2, const void* src2,
                             size_t bytes2, uint64_t spin_ns, cudaStream_t stream) {
  if (bytes % 4 != 0 || bytes2 % 4 != 0) return cudaErrorInvalidValue;
  late_copy_kernel<<<1, 32, 0, stream>>>(
      static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), bytes / 4,
      static_cast<uint32_t*>(dst2), static_cast<const uint32_t*>(src2), bytes2 / 4, spin_ns);
  return cudaGetLastError();
}

cudaError_t launch_pdl_peek(const void* x, uint32_t* seen, cudaStream_t stream) {
  return kernels::cuda::launch_pdl(peek_kernel, dim3(1), dim3(32), stream,
                                   static_cast<const uint32_t*>(x), seen);
}

cudaError_t preload_pdl_probes() {
  cudaFuncAttributes a;
  const cudaError_t e = cudaFuncGetAttributes(&a, late_copy_kernel);
  return e != cudaSuccess ? e : cudaFuncGetAttributes(&a, peek_kernel);
}

}  // namespace cb::cuda_test

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/activation_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using detail::add_kernel;
using detail::gelu_kernel;
using detail::swiglu_kernel;
using detail::swiglu_rows_kernel;

}  // namespace

cudaError_t launch_swiglu(const SwigluParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.n < 0 || !p.gate || !p.up || !p.out || p.cols < 0) return cudaErrorInvalidValue;
  if (p.cols > 0) {
    if (p.n % p.cols != 0 || p.in_stride < p.cols) return cudaErrorInvalidValue;
    // In place only where rows are contiguous: else one block's writes land on rows others read.
    if (p.in_stride != p.cols && (p.out == p.gate || p.out == p.up)) return cudaErrorInvalidValue;
    const int64_t rows = p.n / p.cols;
    const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    // 16-byte vectors of fp16/bf16 where whole vectors tile every row.
    const bool vec = p.storage != Storage::F32 && p.cols % 8 == 0 && p.in_stride % 8 == 0 &&
                     aligned(p.gate) && aligned(p.up) && aligned(p.out);
    const int64_t groups = vec ? p.cols / 8 : p.cols;
    const dim3 block(256);
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((groups + 255) / 256, 1024)),
                    static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
#define CB_LAUNCH(T, VEC)                                                                      \
  swiglu_rows_kernel<T, VEC>                                                                   \
      <<<grid, block, 0, stream>>>(static_cast<const T*>(p.gate), static_cast<const T*>(p.up), \
                                   static_cast<T*>(p.out), rows, p.cols, p.in_stride)
    if (p.storage == Storage::F32) {
      CB_LAUNCH(float, 1);
    } else if (p.storage == Storage::F16) {
      if (vec) {
        CB_LAUNCH(__half, 8);
      } else {
        CB_LAUNCH(__half, 1);
      }
    } else if (p.storage == Storage::BF16) {
      if (vec) {
        CB_LAUNCH(__nv_bfloat16, 8);
      } else {
        CB_LAUNCH(__nv_bfloat16, 1);
      }
    } else {
      return cudaErrorInvalidValue;
    }
#undef CB_LAUNCH
    return cudaGetLastError();
  }
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

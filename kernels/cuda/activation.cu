#include <algorithm>

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
    const int64_t rows = p.n / p.cols;
    const dim3 block(256);
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((p.cols + 255) / 256, 1024)),
                    static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
#define CB_LAUNCH(T)                                                                           \
  swiglu_rows_kernel<T>                                                                        \
      <<<grid, block, 0, stream>>>(static_cast<const T*>(p.gate), static_cast<const T*>(p.up), \
                                   static_cast<T*>(p.out), rows, p.cols, p.in_stride)
    CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
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

#include "kernels/cuda/preset_fill_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using detail::preset_fill_kernel;

}  // namespace

cudaError_t launch_preset_fill(const PresetFillParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.cols < 0) return cudaErrorInvalidValue;
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  if (p.out == nullptr) return cudaErrorInvalidValue;
  const LaunchDims d = elementwise_dims(static_cast<size_t>(p.rows * p.cols));
#define CB_LAUNCH(T)                                     \
  preset_fill_kernel<T><<<d.grid, d.block, 0, stream>>>( \
      static_cast<T*>(p.out), p.rows, p.cols, p.row_map, p.constant, p.value, p.key, p.scale)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda

#pragma once
// Kernel launches with programmatic dependent launch (sm_90, CUDA 11.8+) allowed: the grid may
// start while the one before it on the stream finishes, and must wait for it (griddepcontrol.wait,
// gemv_kernel.cuh's grid_dependency_wait) before reading what that grid writes. Used by the
// decode GEMV launchers when GemmWtParams::pdl / NormGemvParams::pdl is set.
#include <cuda_runtime.h>

#include <utility>

namespace cb::kernels::cuda {

template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                       Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace cb::kernels::cuda

#pragma once
/// Element-wise kernels of the MLP and the residual stream: SwiGLU (LLaMA, Mistral), exact
/// GELU (Falcon) and the residual add; the contracts of kernels/cpu swiglu / gelu /
/// add_inplace, computed in fp32. Host-callable from plain C++.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

struct SwigluParams {
  const void* gate = nullptr;  ///< [n]
  const void* up = nullptr;    ///< [n]
  void* out = nullptr;         ///< [n]; may alias gate or up
  int64_t n = 0;
  Storage storage = Storage::F32;
};

struct GeluParams {
  void* x = nullptr;  ///< [n], in place
  int64_t n = 0;
  Storage storage = Storage::F32;
};

struct AddParams {
  void* y = nullptr;        ///< [n]: y += x
  const void* x = nullptr;  ///< [n]
  int64_t n = 0;
  Storage storage = Storage::F32;
};

/// Launch on `stream`; n == 0 is a no-op; null pointers or n < 0 give cudaErrorInvalidValue.
cudaError_t launch_swiglu(const SwigluParams& p, cudaStream_t stream);
cudaError_t launch_gelu(const GeluParams& p, cudaStream_t stream);
cudaError_t launch_add(const AddParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

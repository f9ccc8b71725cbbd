#pragma once
/// RMSNorm (LLaMA, Mistral) and LayerNorm (Falcon) on the GPU, one block per row, fp32
/// statistics whatever the storage; the contract of kernels/cpu rmsnorm / layernorm. y may
/// alias x. Host-callable from plain C++.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

struct RmsNormParams {
  const void* x = nullptr;  ///< [rows, dim]
  const void* w = nullptr;  ///< [dim]
  void* y = nullptr;        ///< [rows, dim]
  int64_t rows = 0, dim = 0;
  float eps = 1e-5f;
  Storage storage = Storage::F32;  ///< of x, w and y
};

struct LayerNormParams {
  const void* x = nullptr;  ///< [rows, dim]
  const void* w = nullptr;  ///< [dim]
  const void* b = nullptr;  ///< [dim]
  void* y = nullptr;        ///< [rows, dim]
  int64_t rows = 0, dim = 0;
  float eps = 1e-5f;
  Storage storage = Storage::F32;
};

/// Launch on `stream`; rows == 0 is a no-op; null pointers or a bad shape give
/// cudaErrorInvalidValue.
cudaError_t launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream);
cudaError_t launch_layernorm(const LayerNormParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

#pragma once
/// Embedding gather on the GPU: out[t, :] = table[ids[t], :] (kernels/cpu embedding). The ids
/// live in device memory, so the launcher cannot check them: an id outside [0, rows) writes a
/// zero row and sets *bad_id (when given) to 1, for the caller to turn into an error naming
/// the token. Host-callable from plain C++.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

struct EmbeddingParams {
  const void* table = nullptr;   ///< [rows, dim]
  const int32_t* ids = nullptr;  ///< [n], device memory
  void* out = nullptr;           ///< [n, dim]
  int64_t n = 0, rows = 0, dim = 0;
  int32_t* bad_id = nullptr;       ///< optional device flag, set to 1 on an out-of-range id
  Storage storage = Storage::F32;  ///< of table and out
};

/// One thread per output element (grid-stride). n == 0 is a no-op.
cudaError_t launch_embedding(const EmbeddingParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

#pragma once
/// Preset weights generated on the GPU, bit for bit what lib/model preset_fill computes on
/// the host (element i of a tensor = (2 u - 1) * scale, u from splitmix64(key + i)), so a 7B
/// or 13B random model needs no host copy. `row_map` writes rows in another order (the fused
/// QKV layout): destination row r holds source row row_map[r].

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

struct PresetFillParams {
  void* out = nullptr;  ///< [rows, cols] in `storage`
  int64_t rows = 0, cols = 0;
  const int32_t* row_map = nullptr;  ///< [rows] source rows (device), or null for the identity
  bool constant = false;
  float value = 0.0f;  ///< when constant
  uint64_t key = 0;    ///< else element (src_row * cols + c) from key and scale
  float scale = 0.0f;
  Storage storage = Storage::F32;
};

/// Grid-stride over the elements; rows * cols == 0 is a no-op; null out or negative sizes give
/// cudaErrorInvalidValue.
cudaError_t launch_preset_fill(const PresetFillParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

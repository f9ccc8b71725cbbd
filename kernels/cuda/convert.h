#pragma once
/// Element-wise dtype conversion on the GPU (fp32 <-> fp16 / bf16), round to nearest
/// even: used to upload weights and to stage KV in the storage dtype. Host-callable
/// from plain C++ (no nvcc needed to include this header).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cb::kernels::cuda {

enum class HalfKind : uint8_t { F16, BF16 };

struct ConvertToHalfParams {
  const float* src = nullptr;  ///< device pointer, n floats
  uint16_t* dst = nullptr;     ///< device pointer, n halves (bit patterns)
  size_t n = 0;
  HalfKind kind = HalfKind::F16;
};

struct ConvertToFloatParams {
  const uint16_t* src = nullptr;
  float* dst = nullptr;
  size_t n = 0;
  HalfKind kind = HalfKind::F16;
};

/// Launches on `stream`; returns the launch status (n == 0 is a no-op).
cudaError_t launch_convert_to_half(const ConvertToHalfParams& p, cudaStream_t stream);
cudaError_t launch_convert_to_float(const ConvertToFloatParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

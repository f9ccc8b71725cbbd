#pragma once
/// Rotary position embedding on the GPU: the contract of kernels/cpu rope (both pair
/// conventions, any position per token, angles in double precision), in place on
/// x[n, heads, head_dim] with a row stride, so K of a staging buffer or of the QKV output
/// can be rotated where it lies. Host-callable from plain C++.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

enum class RopeStyle : uint8_t {
  Interleaved,  ///< pairs (2i, 2i+1): GGUF LLaMA
  RotateHalf,   ///< pairs (i, i + rope_dims/2): Hugging Face, Falcon ("NeoX")
};

struct RopeParams {
  void* x = nullptr;                   ///< token t, head h at x + t * token_stride + h * head_dim
  const int32_t* positions = nullptr;  ///< [n], device memory
  int64_t n = 0, heads = 0, head_dim = 0;
  int64_t rope_dims = 0;     ///< even, <= head_dim: the first rope_dims of each head rotate
  int64_t token_stride = 0;  ///< elements between tokens (0: heads * head_dim)
  float theta = 10000.0f;
  RopeStyle style = RopeStyle::Interleaved;
  Storage storage = Storage::F32;
};

/// One thread per (token, head, pair). n == 0 is a no-op; an odd or too large rope_dims, a
/// stride shorter than a token, or null pointers give cudaErrorInvalidValue.
cudaError_t launch_rope(const RopeParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

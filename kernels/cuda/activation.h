#pragma once
/// Element-wise kernels of the MLP and the residual stream: SwiGLU (LLaMA, Mistral), exact
/// GELU (Falcon) and the residual add; the contracts of kernels/cpu swiglu / gelu /
/// add_inplace, computed in fp32. Host-callable from plain C++.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

struct SwigluParams {
  const void* gate = nullptr;  ///< [n], or rows of `cols` elements `in_stride` apart
  const void* up = nullptr;    ///< as gate
  void* out = nullptr;         ///< [n], contiguous; may be gate or up when they are too
  int64_t n = 0;
  Storage storage = Storage::F32;
  /// 0: gate, up and out are n contiguous elements. Otherwise gate and up hold n / cols rows
  /// of `cols` elements, row r at r * in_stride (in_stride >= cols): the halves of a fused
  /// gate|up GEMM's output rows ([rows, 2 * cols], up = gate + cols, in_stride = 2 * cols).
  int64_t cols = 0;
  int64_t in_stride = 0;
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

/// Launch on `stream`; n == 0 is a no-op; null pointers or n < 0 give cudaErrorInvalidValue,
/// as do SwiGLU rows with n not a multiple of cols, in_stride < cols, or out being gate or up
/// with in_stride > cols.
cudaError_t launch_swiglu(const SwigluParams& p, cudaStream_t stream);
cudaError_t launch_gelu(const GeluParams& p, cudaStream_t stream);
cudaError_t launch_add(const AddParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

#pragma once
/// Decode fusions of the GEMV (CudaModel's default, CudaKernelPaths::decode_fusion): RMSNorm
/// folded into a linear layer of 1-4 rows, and optionally LLaMA's gate and up layers with their
/// SwiGLU in the same launch, fp16 or bf16 storage, fp32 accumulation:
///   y = RMSNorm(x) * norm_w . w^T, or, with w2,
///   y = silu(RMSNorm(x) * norm_w . w^T) * (RMSNorm(x) * norm_w . w2^T),
/// each product rounded to the storage type as launch_swiglu reads it. RMSNorm's scale is a
/// factor of the whole row, so it is applied after the dot product: every warp reads all of x
/// for its output row anyway, and sums x^2 as it goes (x * norm_w is not rounded, where the
/// separate launches round the normalized row, which moves a product by up to sqrt(in)
/// roundings of its terms: the two paths' results differ by that much). That
/// saves the norm launch before QKV and the norm, second GEMV and SwiGLU launches of the MLP
/// (three a layer) at no extra memory traffic and with no shared memory or block
/// synchronization. (The first form of this fusion normalized x into shared memory in every
/// block before its first weight load; on an H100 it ran 0.94-0.99x as fast as the separate
/// launches, docs/perf.md.) CudaKernelPaths::decode_fusion (on by default) chooses it; `bench
/// gpu` measures it against the unfused GEMVs in the same run.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

struct NormGemvParams {
  const void* x = nullptr;       ///< [n, in]
  const void* norm_w = nullptr;  ///< [in]
  float norm_eps = 1e-5f;
  const void* w = nullptr;   ///< [out, in]
  const void* w2 = nullptr;  ///< optional [out, in]: y = silu(h . w^T) * (h . w2^T)
  void* y = nullptr;         ///< [n, out]
  int64_t n = 0, in = 0, out = 0;
  Storage storage = Storage::F16;  ///< of x, norm_w, w, w2 and y
  bool pdl = false;                ///< as GemmWtParams::pdl
  bool deep = false;  ///< as GemmWtParams::deep (one row, and without w2: else ignored)
};

/// Whether launch_norm_gemv takes `p`: 1..kGemvMaxRows rows, fp16 or bf16, `in` a multiple of
/// 8, x, norm_w, w and w2 16-byte aligned, norm_w set, the dimensions within int32. Plain C++,
/// unit-tested on the host.
bool norm_gemv_applies(const NormGemvParams& p);

/// Runs the kernel (grid gemv_blocks(out)); cudaErrorInvalidValue where !norm_gemv_applies(p),
/// y is null or norm_eps is negative or NaN.
cudaError_t launch_norm_gemv(const NormGemvParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

#pragma once
/// Decode fusions of the GEMV (opt-in: on an H100 they passed the parity tests but made decode
/// slower, 0.94-0.99x of the separate launches, docs/perf.md): RMSNorm folded into a linear
/// layer of 1-4 rows, and optionally LLaMA's gate and up layers with their SwiGLU in the same
/// launch, fp16 or bf16 storage, fp32 accumulation:
///   y = RMSNorm(x) * norm_w . w^T, or, with w2,
///   y = silu(RMSNorm(x) * norm_w . w^T) * (RMSNorm(x) * norm_w . w2^T),
/// with the roundings the separate kernels make: the normalized x rounded to the storage type
/// as launch_rmsnorm writes it, each product rounded as launch_swiglu reads it. Each block
/// normalizes its rows of x into shared memory, then works as gemv.h's kernel does (one warp
/// per output row, 16-byte weight vectors that bypass L1, four in flight per lane). That saves
/// the norm launch before QKV and the norm, second GEMV and SwiGLU launches of the MLP: three a
/// layer. CudaModel::set_decode_fusion turns it on; `bench gpu` measures it against the
/// unfused GEMVs in the same run.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

/// Most shared memory a block takes (norm_gemv_smem_bytes), whatever the device allows.
constexpr size_t kNormGemvMaxSmemBytes = 160u << 10;

struct NormGemvParams {
  const void* x = nullptr;       ///< [n, in]
  const void* norm_w = nullptr;  ///< [in]
  float norm_eps = 1e-5f;
  const void* w = nullptr;   ///< [out, in]
  const void* w2 = nullptr;  ///< optional [out, in]: y = silu(h . w^T) * (h . w2^T)
  void* y = nullptr;         ///< [n, out]
  int64_t n = 0, in = 0, out = 0;
  Storage storage = Storage::F16;  ///< of x, norm_w, w, w2 and y
  /// The device's shared memory per block with the opt-in (cudaDevAttrMaxSharedMemoryPerBlockOptin:
  /// 227 KiB on H100, 99 KiB on sm_86/sm_89); CudaModel sets it.
  size_t smem_limit = kNormGemvMaxSmemBytes;
};

/// Whether launch_norm_gemv takes `p`: 1..kGemvMaxRows rows, fp16 or bf16, `in` a multiple of
/// 8, x, w and w2 16-byte aligned, norm_w set, the dimensions within int32, and
/// norm_gemv_smem_bytes within kNormGemvMaxSmemBytes and smem_limit. Plain C++, unit-tested on
/// the host.
bool norm_gemv_applies(const NormGemvParams& p);

/// Shared memory of a launch, all of it dynamic: the n * in normalized elements, then the norm's
/// (kGemvWarps + 1) * n floats.
size_t norm_gemv_smem_bytes(const NormGemvParams& p);

/// Runs the kernel (grid gemv_blocks(out)); cudaErrorInvalidValue where !norm_gemv_applies(p),
/// y is null or norm_eps is negative or NaN.
cudaError_t launch_norm_gemv(const NormGemvParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

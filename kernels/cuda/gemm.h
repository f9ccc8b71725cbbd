#pragma once
/// Linear layers on the GPU through cuBLAS: y[n, out] = x[n, in] . w[out, in]^T (PyTorch's
/// weight layout, as kernels/cpu matmul_wt), row-major, in fp32, fp16 or bf16 storage with fp32
/// accumulation; fp16 and bf16 run on tensor cores. The row-major to column-major mapping is
/// plain C++ (gemm_wt_shape), unit-tested on the host.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

/// The column-major cublasGemmEx call that computes a row-major y = x . w^T:
/// C[m, n] = op(A)[m, k] . op(B)[k, n] with A = w, B = x, C = y.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
};
GemmShape gemm_wt_shape(int64_t n, int64_t in, int64_t out);

struct GemmWtParams {
  const void* x = nullptr;  ///< [n, in]
  const void* w = nullptr;  ///< [out, in]
  void* y = nullptr;        ///< [n, out]
  int64_t n = 0, in = 0, out = 0;
  Storage storage = Storage::F32;  ///< of x, w and y
  bool accumulate = false;         ///< y += x . w^T instead of y = x . w^T (residual fusion)
  bool gemv = true;  ///< kernels/cuda gemv's kernel where gemv_applies (decode), else cuBLAS
  /// gemv's kernel launched with programmatic dependent launch (sm_90): it may start while the
  /// kernel before it finishes, prefetch its weights into L2 and wait for that kernel before
  /// reading x or y. Opt-in (CudaKernelPaths::decode_pdl); its ordering tests passed on an H200.
  bool pdl = false;
  /// gemv's kernel compiled for kGemvDeepBlocksPerSm blocks an SM (gemv.h): ptxas then issues
  /// a lane's four weight vectors before using the first, instead of two. Same arithmetic. At
  /// one row of x only (ignored otherwise), and for the caller to set only where
  /// gemv_deep_fits. Opt-in (CudaKernelPaths::decode_gemv_deep); not yet run on a GPU.
  /// launch_gemv_swiglu (gate and up without the norm) ignores it.
  bool deep = false;
};

/// Runs on `stream` (set on the handle; lib/device's CublasHandle owns one). n == 0 or
/// out == 0 is a no-op; dimensions beyond int32, a null handle or null pointers give
/// CUBLAS_STATUS_INVALID_VALUE. With p.gemv, shapes that gemv_applies to (1-4 rows, fp16 or
/// bf16) run kernels/cuda gemv's kernel instead of cuBLAS (a failed launch gives
/// CUBLAS_STATUS_EXECUTION_FAILED).
cublasStatus_t gemm_wt(cublasHandle_t h, const GemmWtParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda

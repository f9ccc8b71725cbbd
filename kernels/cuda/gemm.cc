#include "kernels/cuda/gemm.h"

#include "kernels/cuda/gemv.h"

namespace cb::kernels::cuda {

GemmShape gemm_wt_shape(int64_t n, int64_t in, int64_t out) {
  // Row-major M[r, c] is column-major M^T with leading dimension c. y^T = w . x^T, where w^T
  // (column-major [in, out], ld in) is transposed back and x^T (column-major [in, n]) is used
  // as is.
  GemmShape s;
  s.m = out;
  s.n = n;
  s.k = in;
  s.trans_a = true;
  s.trans_b = false;
  s.lda = in;
  s.ldb = in;
  s.ldc = out;
  return s;
}

cublasStatus_t gemm_wt(cublasHandle_t h, const GemmWtParams& p, cudaStream_t stream) {
  if (p.n == 0 || p.out == 0) return CUBLAS_STATUS_SUCCESS;
  constexpr int64_t kMax = 0x7fffffff;
  if (h == nullptr || !p.x || !p.w || !p.y || p.n < 0 || p.out < 0 || p.in <= 0 || p.n > kMax ||
      p.in > kMax || p.out > kMax) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (p.gemv && gemv_applies(p)) {
    return launch_gemv_wt(p, stream) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                    : CUBLAS_STATUS_EXECUTION_FAILED;
  }
  cublasStatus_t s = cublasSetStream(h, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const GemmShape g = gemm_wt_shape(p.n, p.in, p.out);
  cudaDataType_t t = CUDA_R_32F;
  if (p.storage == Storage::F16) t = CUDA_R_16F;
  if (p.storage == Storage::BF16) t = CUDA_R_16BF;
  const float alpha = 1.0f;
  const float beta = p.accumulate ? 1.0f : 0.0f;
  return cublasGemmEx(h, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                      g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.m),
                      static_cast<int>(g.n), static_cast<int>(g.k), &alpha, p.w, t,
                      static_cast<int>(g.lda), p.x, t, static_cast<int>(g.ldb), &beta, p.y, t,
                      static_cast<int>(g.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

}  // namespace cb::kernels::cuda

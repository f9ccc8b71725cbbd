// Launcher of the fused RMSNorm + GEMV (+ SwiGLU) decode kernel (norm_gemv_kernel.cuh;
// CudaModel's default).
#include "kernels/cuda/norm_gemv_kernel.cuh"
#include "kernels/cuda/pdl_launch.cuh"

namespace cb::kernels::cuda {
namespace {

using norm_gemv_detail::norm_gemv_kernel;
using norm_gemv_detail::NormGemvArgs;

template <typename T, int NB, bool GLU, bool DEEP>
cudaError_t launch_shape(const NormGemvArgs<T>& a, bool pdl, cudaStream_t stream) {
  const dim3 grid(gemv_blocks(a.out)), block(kGemvWarps * 32);
  if (pdl && gemv_pdl_supported())
    return launch_pdl(norm_gemv_kernel<T, NB, GLU, true, DEEP>, grid, block, stream, a);
  norm_gemv_kernel<T, NB, GLU, false, DEEP><<<grid, block, 0, stream>>>(a);
  return cudaGetLastError();
}

template <typename T, int NB>
cudaError_t launch_rows(const NormGemvArgs<T>& a, bool pdl, bool deep, cudaStream_t stream) {
  if (a.w2 != nullptr) return launch_shape<T, NB, true, false>(a, pdl, stream);
  // Deep at one row and one weight matrix only: at two or more rows, or with w2 (two weight
  // rows a warp), 64 registers make ptxas spill.
  if constexpr (NB == 1) {
    if (deep) return launch_shape<T, NB, false, true>(a, pdl, stream);
  }
  return launch_shape<T, NB, false, false>(a, pdl, stream);
}

template <typename T>
cudaError_t launch_typed(const NormGemvParams& p, cudaStream_t stream) {
  const NormGemvArgs<T> a{static_cast<const T*>(p.x),
                          static_cast<const T*>(p.norm_w),
                          p.norm_eps,
                          static_cast<const T*>(p.w),
                          static_cast<const T*>(p.w2),
                          static_cast<T*>(p.y),
                          p.in,
                          p.out};
  switch (p.n) {
    case 1: return launch_rows<T, 1>(a, p.pdl, p.deep, stream);
    case 2: return launch_rows<T, 2>(a, p.pdl, p.deep, stream);
    case 3: return launch_rows<T, 3>(a, p.pdl, p.deep, stream);
    case 4: return launch_rows<T, 4>(a, p.pdl, p.deep, stream);
    default: return cudaErrorInvalidValue;
  }
}

static_assert(kGemvMaxRows == 4, "launch_typed has a case per row count");

}  // namespace

cudaError_t launch_norm_gemv(const NormGemvParams& p, cudaStream_t stream) {
  if (!norm_gemv_applies(p) || p.y == nullptr || !(p.norm_eps >= 0.0f)) {
    return cudaErrorInvalidValue;
  }
  return p.storage == Storage::F16 ? launch_typed<__half>(p, stream)
                                   : launch_typed<__nv_bfloat16>(p, stream);
}

}  // namespace cb::kernels::cuda

// Launcher of the fused RMSNorm + GEMV (+ SwiGLU) decode kernel (norm_gemv_kernel.cuh; opt-in).
#include "kernels/cuda/norm_gemv_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using norm_gemv_detail::norm_gemv_kernel;
using norm_gemv_detail::NormGemvArgs;

template <typename T, int NB>
cudaError_t launch_rows(const NormGemvArgs<T>& a, cudaStream_t stream) {
  if (a.w2 != nullptr) {
    norm_gemv_kernel<T, NB, true><<<gemv_blocks(a.out), kGemvWarps * 32, 0, stream>>>(a);
  } else {
    norm_gemv_kernel<T, NB, false><<<gemv_blocks(a.out), kGemvWarps * 32, 0, stream>>>(a);
  }
  return cudaGetLastError();
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
    case 1: return launch_rows<T, 1>(a, stream);
    case 2: return launch_rows<T, 2>(a, stream);
    case 3: return launch_rows<T, 3>(a, stream);
    case 4: return launch_rows<T, 4>(a, stream);
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

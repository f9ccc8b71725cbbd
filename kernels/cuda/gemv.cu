// Launchers of the decode GEMV kernel (gemv_kernel.cuh).
#include "kernels/cuda/gemv_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using gemv_detail::gemv_swiglu_kernel;
using gemv_detail::gemv_wt_kernel;

template <typename T>
cudaError_t launch_typed(const GemmWtParams& p, cudaStream_t stream) {
  const unsigned grid = gemv_blocks(p.out);
  const auto* x = static_cast<const T*>(p.x);
  const auto* w = static_cast<const T*>(p.w);
  auto* y = static_cast<T*>(p.y);
  switch (p.n) {
#define CB_CASE(NB)                                                                 \
  case NB:                                                                          \
    gemv_wt_kernel<T, NB>                                                           \
        <<<grid, kGemvWarps * 32, 0, stream>>>(x, w, y, p.in, p.out, p.accumulate); \
    break;
    CB_CASE(1)
    CB_CASE(2)
    CB_CASE(3)
    CB_CASE(4)
#undef CB_CASE
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_swiglu_typed(const GemmWtParams& p, const void* w_up, cudaStream_t stream) {
  const unsigned grid = gemv_blocks(p.out);
  const auto* x = static_cast<const T*>(p.x);
  const auto* wg = static_cast<const T*>(p.w);
  const auto* wu = static_cast<const T*>(w_up);
  auto* y = static_cast<T*>(p.y);
  switch (p.n) {
#define CB_CASE(NB)                                                                             \
  case NB:                                                                                      \
    gemv_swiglu_kernel<T, NB><<<grid, kGemvWarps * 32, 0, stream>>>(x, wg, wu, y, p.in, p.out); \
    break;
    CB_CASE(1)
    CB_CASE(2)
    CB_CASE(3)
    CB_CASE(4)
#undef CB_CASE
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

static_assert(kGemvMaxRows == 4, "launch_typed has a case per row count");

}  // namespace

cudaError_t launch_gemv_wt(const GemmWtParams& p, cudaStream_t stream) {
  if (!gemv_applies(p) || p.y == nullptr) return cudaErrorInvalidValue;
  return p.storage == Storage::F16 ? launch_typed<__half>(p, stream)
                                   : launch_typed<__nv_bfloat16>(p, stream);
}

cudaError_t launch_gemv_swiglu(const GemmWtParams& p, const void* w_up, cudaStream_t stream) {
  if (!gemv_swiglu_applies(p, w_up) || p.y == nullptr) return cudaErrorInvalidValue;
  return p.storage == Storage::F16 ? launch_swiglu_typed<__half>(p, w_up, stream)
                                   : launch_swiglu_typed<__nv_bfloat16>(p, w_up, stream);
}

}  // namespace cb::kernels::cuda
